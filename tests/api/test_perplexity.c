/* test_perplexity.c - `lamina perplexity` against a perplexity computed here
 * by hand through llama.h: stories260K on the first 64 KiB of
 * shared/corpus/heldout.txt, -c 128.
 *
 * By hand: tokenize with BOS, cut into chunks of 128 tokens, decode each chunk
 * alone (one sequence, an empty cache, BOS as its first token, logits of every
 * position), and sum the NLL of tokens 65..127 of each chunk from a
 * log-softmax in double. The running PPL of each chunk, llama.cpp's final
 * estimate (PPL and its error) and bits per byte are formatted as the tool
 * prints them, and must equal the tool's output (LM_BINARY_DIR/tools/lamina):
 * with its default batching (4 chunks per decode), with one chunk per decode
 * (-b 128) and with a chunk split over two decodes (-b 100), whose outputs
 * must also be identical to each other. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util_api.h"

#define N_CTX 128
#define TEXT_BYTES 65536
#define LAMINA LM_BINARY_DIR "/tools/lamina"
#define MODEL "models/stories260K.gguf"
#define N_PART 12 /* chunks of the runs with other batch sizes */
#define N_PART_S "12"

/* What the tool prints, computed by hand. */
struct expect {
    char *chunks;         /* "[1]x,[2]y,..." */
    char final[128];      /* "Final estimate: PPL = ..." after all chunks */
    char final_part[128]; /* the same after N_PART chunks */
    double bpb;
    int n_chunk;
};

static void final_line(char *out, size_t cap, double nll, double nll2, long count)
{
    double mean = nll / (double)count, var = nll2 / (double)count - mean * mean;
    double err = var > 0 ? sqrt(var / (double)(count - 1)) : 0.0;
    snprintf(out, cap, "Final estimate: PPL = %.4f +/- %.5f", exp(mean), err * exp(mean));
}

/* NLL of token next under logits: log(sum exp) - logit, in double. */
static double nll_of(const float *logits, int n_vocab, llama_token next)
{
    double mx = logits[0], sum = 0.0;
    for (int i = 1; i < n_vocab; i++)
        mx = logits[i] > mx ? logits[i] : mx;
    for (int i = 0; i < n_vocab; i++)
        sum += exp(logits[i] - mx);
    return mx + log(sum) - logits[next];
}

static bool by_hand(const char *text, size_t len, struct expect *e)
{
    struct llama_model *m = api_start(MODEL);
    if (!m)
        return false;
    struct llama_context *ctx = api_ctx(m, N_CTX, N_CTX, true);
    if (ctx) /* one thread: quicker on a loaded machine, and the logits do not depend on it */
        llama_set_n_threads(ctx, 1, 1);
    int n_vocab = llama_n_vocab(m);
    llama_token *toks = malloc((len + 16) * sizeof *toks);
    int n = llama_tokenize(m, text, (int32_t)len, toks, (int32_t)len + 16, true, false);
    CHECKF(n > 2 * N_CTX, "%d tokens", n);
    e->n_chunk = n / N_CTX;
    e->chunks = calloc((size_t)e->n_chunk, 32);
    double nll = 0, nll2 = 0;
    long count = 0, bytes = 0;
    struct llama_batch b = llama_batch_init(N_CTX, 0, 1);
    for (int c = 0; c < e->n_chunk && ctx; c++) {
        const llama_token *t = toks + (size_t)c * N_CTX;
        llama_kv_cache_clear(ctx);
        b.n_tokens = N_CTX;
        for (int i = 0; i < N_CTX; i++) {
            b.token[i] = i == 0 ? llama_token_bos(m) : t[i];
            b.pos[i] = i;
            b.n_seq_id[i] = 1;
            b.seq_id[i][0] = 0;
            b.logits[i] = 1;
        }
        CHECK(llama_decode(ctx, b) == 0);
        for (int i = N_CTX / 2; i < N_CTX - 1; i++) {
            double v = nll_of(llama_get_logits_ith(ctx, i), n_vocab, t[i + 1]);
            char piece[64];
            nll += v;
            nll2 += v * v;
            count++;
            bytes += llama_token_to_piece(m, t[i + 1], piece, sizeof piece);
        }
        sprintf(e->chunks + strlen(e->chunks), "[%d]%.4f,", c + 1, exp(nll / (double)count));
        if (c == N_PART - 1)
            final_line(e->final_part, sizeof e->final_part, nll, nll2, count);
    }
    final_line(e->final, sizeof e->final, nll, nll2, count);
    e->bpb = nll / log(2.0) / (double)bytes;
    printf("by hand: %d tokens, %d chunks, %s, %.6f bits per byte\n", n, e->n_chunk, e->final, e->bpb);
    llama_batch_free(b);
    free(toks);
    if (ctx)
        llama_free(ctx);
    llama_free_model(m);
    return ctx != NULL;
}

/* stdout of `lamina perplexity ... args` (malloc'd), or NULL. */
static char *run_tool(const char *text_path, const char *args)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "'%s' perplexity -m '%s' -f '%s' -c %d -t 1 %s 2>/dev/null", LAMINA,
             lm_test_shared(MODEL), text_path, N_CTX, args);
    FILE *p = popen(cmd, "r");
    if (!p)
        return NULL;
    size_t cap = 1 << 16, n = 0, r;
    char *out = malloc(cap);
    while (out && (r = fread(out + n, 1, cap - n - 1, p)) > 0)
        if ((n += r) + 1 == cap)
            out = realloc(out, cap *= 2);
    int st = pclose(p);
    CHECKF(st == 0, "%s: exit status %d", cmd, st);
    if (out)
        out[n] = 0;
    return out;
}

/* The tool's output has the chunk list (whole, or the first n_chunk entries
 * of e's) on its first line, then the final estimate, then bits per byte. */
static void check_output(const char *out, const struct expect *e, int n_chunk, const char *final, const char *what)
{
    CHECKF(out != NULL, "%s: no output", what);
    if (!out)
        return;
    const char *nl = strchr(out, '\n');
    const char *end = e->chunks; /* the end of entry n_chunk in the expected list */
    for (int i = 0; i < n_chunk && end; i++)
        end = strchr(end, ',') ? strchr(end, ',') + 1 : NULL;
    size_t want_len = end ? (size_t)(end - e->chunks) : 0;
    CHECKF(nl && (size_t)(nl - out) == want_len && !memcmp(out, e->chunks, want_len),
           "%s: chunk list differs:\n tool: %.200s\n hand: %.200s", what, out, e->chunks);
    const char *fin = strstr(out, "Final estimate:");
    size_t flen = strlen(final);
    CHECKF(fin && !strncmp(fin, final, flen) && fin[flen] == '\n', "%s: tool: %.60s, by hand: %s", what,
           fin ? fin : "(none)", final);
    if (n_chunk == e->n_chunk) {
        const char *bpb = strstr(out, "bits per byte: ");
        double v = bpb ? atof(bpb + 15) : -1;
        CHECKF(fabs(v - e->bpb) < 1e-6, "%s: bits per byte %.6f, by hand %.6f", what, v, e->bpb);
    }
}

int main(void)
{
    size_t len;
    char *text = lm_test_read_file(lm_test_shared("corpus/heldout.txt"), &len);
    CHECK(text && len >= TEXT_BYTES);
    if (!text || len < TEXT_BYTES)
        return lm_test_summary();
    const char *path = api_tmp_path("ppl.txt");
    CHECK(api_write_file(path, text, TEXT_BYTES));
    struct expect e = {0};
    if (by_hand(text, TEXT_BYTES, &e)) {
        char *all = run_tool(path, "");
        check_output(all, &e, e.n_chunk, e.final, "-b 512 (4 chunks per decode)");
        char *one = run_tool(path, "-b 128 --chunks " N_PART_S);
        check_output(one, &e, N_PART, e.final_part, "-b 128 (1 chunk per decode)");
        char *split = run_tool(path, "-b 100 --chunks " N_PART_S);
        check_output(split, &e, N_PART, e.final_part, "-b 100 (2 decodes per chunk)");
        CHECKF(one && split && !strcmp(one, split), "-b 128 and -b 100 print different results");
        if (all)
            printf("tool: %s", strstr(all, "Final estimate:") ? strstr(all, "Final estimate:") : all);
        free(all);
        free(one);
        free(split);
    }
    remove(path);
    free(e.chunks);
    free(text);
    return lm_test_summary();
}
