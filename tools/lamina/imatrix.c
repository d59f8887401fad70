/* imatrix.c - `lamina imatrix -m MODEL -f TEXT [-o imatrix.dat]`: llama.cpp's
 * imatrix tool (b1892 era). Collects, for every weight of the model's matrix
 * products, the per-column sums of squared activations over a text
 * (model/imatrix.h) and writes them in llama.cpp's imatrix.dat format, which
 * `lamina quantize --imatrix` and llama.cpp's quantize read.
 *
 * As b1892: the text is tokenized once (with BOS when the model adds one) and
 * cut into chunks of n_ctx tokens; each chunk is decoded from an empty KV
 * cache in batches of n_batch tokens, its first token replaced by BOS, with
 * logits for every token, and the perplexity of its second half is printed
 * ("[1]12.3456,[2]...", then the final estimate) on stdout. The file is
 * saved every --output-frequency chunks and at the end. The collection runs
 * inside the library (lm_api_imatrix_start: a scheduler observer), so the
 * numbers are the activations the decode really multiplies.
 *
 * Progress goes to stderr: a bar on a terminal, a few plain lines otherwise.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "api/imatrix_api.h"
#include "cli.h"
#include "llama.h"
#include "model/imatrix.h"
#include "progress.h"

struct im_opts {
    struct cli_model_opts m;
    const char *text_file, *out_file;
    long long n_chunks;     /* -1: all */
    long long out_freq;     /* save every N chunks */
    long long save_freq;    /* 0: no numbered copies */
    bool process_output;
    long long verbosity;
};

static void usage(FILE *f)
{
    fprintf(f, "usage: lamina imatrix -m MODEL -f TEXT [-o imatrix.dat] [options]\n\n"
               "Computes an importance matrix (per-column sums of squared activations of every weight's\n"
               "matrix products over TEXT) in llama.cpp's imatrix.dat format, for `lamina quantize --imatrix`.\n"
               "The text is processed in chunks of -c tokens; the perplexity of each chunk's second half\n"
               "is printed as it goes.\n\n"
               "  -f, --file FILE           the text (required)\n"
               "  -o, --output-file FILE    where to write the matrix (default imatrix.dat)\n"
               "  --chunks N                process at most N chunks (default: all of the text)\n"
               "  --output-frequency N      save the file every N chunks (default 10) and at the end\n"
               "  --save-frequency N        also keep a copy FILE.at_K every N chunks (default 0: none)\n"
               "  --process-output          collect output.weight too (-ow 1 is the same)\n"
               "  --verbosity N             0: quiet, 1: a line per save (default), 2: a line per chunk\n"
               "  -h, --help                this text\n\n");
    cli_model_usage(f);
}

/* 0 parsed, 1 help printed, 2 usage error (message written). */
static int parse(int argc, char **argv, struct im_opts *o)
{
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *v;
        long long ll;
        int r = cli_model_flag(argc, argv, &i, &o->m);
        if (r < 0)
            return 2;
        if (r > 0)
            continue;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 1;
        } else if (!strcmp(a, "--process-output")) {
            o->process_output = true;
            continue;
        }
        if (a[0] != '-' || !a[1]) {
            fprintf(stderr, "error: unexpected argument '%s' (see lamina imatrix --help)\n", a);
            return 2;
        }
        if (strcmp(a, "-f") && strcmp(a, "--file") && strcmp(a, "-o") && strcmp(a, "--output-file") &&
            strcmp(a, "--chunks") && strcmp(a, "--output-frequency") && strcmp(a, "-ofreq") &&
            strcmp(a, "--save-frequency") && strcmp(a, "-ow") && strcmp(a, "--output-weight") &&
            strcmp(a, "--verbosity")) {
            fprintf(stderr, "error: unknown option '%s' (see lamina imatrix --help)\n", a);
            return 2;
        }
        if (!(v = cli_value(argc, argv, &i)))
            return 2;
        if (!strcmp(a, "-f") || !strcmp(a, "--file"))
            o->text_file = v;
        else if (!strcmp(a, "-o") || !strcmp(a, "--output-file"))
            o->out_file = v;
        else if (!cli_int(a, v, 0, 1 << 30, &ll))
            return 2;
        else if (!strcmp(a, "--chunks"))
            o->n_chunks = ll > 0 ? ll : -1;
        else if (!strcmp(a, "--output-frequency") || !strcmp(a, "-ofreq"))
            o->out_freq = ll > 0 ? ll : 1;
        else if (!strcmp(a, "--save-frequency"))
            o->save_freq = ll;
        else if (!strcmp(a, "-ow") || !strcmp(a, "--output-weight"))
            o->process_output = ll != 0;
        else
            o->verbosity = ll;
    }
    if (!o->m.model || !o->text_file) {
        fprintf(stderr, "error: lamina imatrix needs a model (-m FILE) and a text (-f FILE)\n");
        return 2;
    }
    return 0;
}

/* ---- saving ---- */

struct run {
    const struct im_opts *o;
    struct llama_context *ctx;
    struct lm_imatrix_collector *col;
    llama_token *tokens;
    int64_t n_tokens;
    int n_ctx, n_batch, n_chunk, n_vocab;
    bool add_bos, bar;
    bool defer;       /* print the chunk list at the end (the bar shares stdout's terminal) */
    double *chunk_ppl; /* [n_chunk] running PPL after each chunk */
    double nll, nll2; /* over scored positions */
    int64_t count;
    double t0, t_last;
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Write what is collected to path. 0, or 1 with a message. */
static int save(struct run *r, const char *path, int chunks, bool final)
{
    struct lm_imatrix *im = NULL;
    char err[320];
    if (lm_imatrix_collector_result(r->col, &im)) {
        fprintf(stderr, "error: cannot gather the importance matrix (out of memory)\n");
        return 1;
    }
    int rc = 0;
    int64_t n = lm_imatrix_n_entries(im);
    if (n == 0) {
        if (final) {
            fprintf(stderr, "error: no matrix product was counted: each needs at least %d tokens (-c and -b of "
                            "%d or more)\n", LM_IMATRIX_MIN_TOKENS, LM_IMATRIX_MIN_TOKENS);
            rc = 1;
        }
    } else if (lm_imatrix_write(im, path, err, sizeof err)) {
        fprintf(stderr, "error: %s\n", err);
        rc = 1;
    } else if (r->o->verbosity > 0 && (final || !r->bar)) {
        if (r->bar)
            cli_progress_clear();
        fprintf(stderr, "imatrix: stored collected data after %d chunks in %s (%lld entries)\n", chunks, path,
                (long long)n);
    }
    lm_imatrix_free(im);
    return rc;
}

/* Saves due after chunk `done` (1-based). */
static int periodic_saves(struct run *r, int done)
{
    const struct im_opts *o = r->o;
    if (done % o->out_freq == 0 && done < r->n_chunk && save(r, o->out_file, done, false))
        return 1;
    if (o->save_freq > 0 && done % o->save_freq == 0) {
        size_t n = strlen(o->out_file) + 32;
        char *path = malloc(n);
        if (!path)
            return 1;
        snprintf(path, n, "%s.at_%d", o->out_file, done);
        int rc = save(r, path, done, false);
        free(path);
        return rc;
    }
    return 0;
}

/* ---- decoding and perplexity ---- */

/* -log p(next) from one row of logits, in double. */
static double nll_of(const float *logits, int n_vocab, llama_token next)
{
    float mx = logits[0];
    for (int i = 1; i < n_vocab; i++)
        mx = logits[i] > mx ? logits[i] : mx;
    double sum = 0.0;
    for (int i = 0; i < n_vocab; i++)
        sum += exp((double)logits[i] - mx);
    return -((double)logits[next] - mx - log(sum));
}

static void progress(struct run *r, int done)
{
    double t = now_s(), el = t - r->t0, eta = el / done * (r->n_chunk - done);
    double ppl = r->count ? exp(r->nll / (double)r->count) : 0.0;
    if (r->bar) {
        char bar[31], line[128];
        int fill = (int)(30.0 * done / r->n_chunk);
        for (int i = 0; i < 30; i++)
            bar[i] = i < fill ? '#' : '.';
        bar[30] = 0;
        snprintf(line, sizeof line, "imatrix [%s] %d/%d chunks  PPL %.4f  ETA %.0f s", bar, done, r->n_chunk, ppl,
                 eta);
        cli_progress_text(line);
    } else if (done < r->n_chunk && (r->o->verbosity > 1 || r->t_last == 0.0 || t - r->t_last >= 10.0)) {
        fprintf(stderr, "imatrix: %d/%d chunks, %.2f s, ETA %.2f minutes\n", done, r->n_chunk, el, eta / 60.0);
        r->t_last = t;
    }
}

/* Decode chunk c and add its second half's negative log-likelihoods. 0, or 1 with a message. */
static int chunk(struct run *r, int c)
{
    const int first = r->n_ctx / 2;
    llama_token *t = r->tokens + (int64_t)c * r->n_ctx;
    llama_kv_cache_clear(r->ctx);
    for (int j = 0; j < r->n_ctx; j += r->n_batch) {
        int n = r->n_ctx - j < r->n_batch ? r->n_ctx - j : r->n_batch;
        llama_token saved = t[j];
        if (r->add_bos && j == 0)
            t[0] = llama_token_bos(llama_get_model(r->ctx));
        int ret = llama_decode(r->ctx, llama_batch_get_one(t + j, n, j, 0));
        t[j] = saved;
        if (ret != 0) {
            const char *why = lm_imatrix_collector_error(r->col);
            if (r->bar)
                cli_progress_clear();
            fprintf(stderr, "error: decoding chunk %d failed%s%s\n", c + 1, why[0] ? ": " : "", why);
            return 1;
        }
        for (int k = j > first ? j : first; k < j + n && k < r->n_ctx - 1; k++) {
            double v = nll_of(llama_get_logits_ith(r->ctx, k - j), r->n_vocab, t[k + 1]);
            r->nll += v;
            r->nll2 += v * v;
            r->count++;
        }
    }
    return 0;
}

static int run_chunks(struct run *r)
{
    r->t0 = now_s();
    for (int c = 0; c < r->n_chunk; c++) {
        if (chunk(r, c))
            return 1;
        r->chunk_ppl[c] = r->count ? exp(r->nll / (double)r->count) : 0.0;
        if (!r->defer && r->count) {
            printf("[%d]%.4f,", c + 1, r->chunk_ppl[c]);
            fflush(stdout);
        }
        progress(r, c + 1);
        if (periodic_saves(r, c + 1))
            return 1;
    }
    if (r->bar)
        cli_progress_clear();
    for (int c = 0; r->defer && r->count && c < r->n_chunk; c++)
        printf("[%d]%.4f,", c + 1, r->chunk_ppl[c]);
    double nll = r->nll / (double)r->count, var = r->nll2 / (double)r->count - nll * nll;
    printf("\n");
    if (!r->count)
        printf("Final estimate: none (no position was scored)\n");
    else if (var > 0 && r->count > 1)
        printf("Final estimate: PPL = %.4f +/- %.5f\n", exp(nll), sqrt(var / (double)(r->count - 1)) * exp(nll));
    else
        printf("Final estimate: PPL = %.4f\n", exp(nll));
    return save(r, r->o->out_file, r->n_chunk, true);
}

/* ---- the command ---- */

/* Tokens of the text file (BOS first when add_bos); NULL with a message. */
static llama_token *read_tokens(const struct llama_model *model, const char *path, bool add_bos, int64_t *n_out)
{
    size_t len;
    char *text = cli_read_file(path, &len);
    if (!text)
        return NULL;
    llama_token *toks = NULL;
    if (len > INT32_MAX - 16) {
        fprintf(stderr, "error: %s is too long (%zu bytes; at most 2 GiB)\n", path, len);
    } else {
        int32_t cap = (int32_t)len + 16; /* a token per byte at most, plus BOS */
        toks = malloc((size_t)cap * sizeof *toks);
        int32_t n = toks ? llama_tokenize(model, text, (int32_t)len, toks, cap, add_bos, false) : -1;
        if (n < 0) {
            fprintf(stderr, "error: cannot tokenize %s%s\n", path, toks ? "" : " (out of memory)");
            free(toks);
            toks = NULL;
        }
        *n_out = n;
    }
    free(text);
    return toks;
}

/* Context with logits for every token; NULL with a message. */
static struct llama_context *make_context(const struct im_opts *o, struct llama_model *model)
{
    struct llama_context_params cp = llama_context_default_params();
    cp.seed = (uint32_t)o->m.seed;
    cp.n_ctx = (uint32_t)o->m.n_ctx;
    cp.n_batch = (uint32_t)o->m.n_batch;
    cp.n_threads = (uint32_t)o->m.n_threads;
    cp.n_threads_batch = (uint32_t)(o->m.n_threads_batch < 0 ? o->m.n_threads : o->m.n_threads_batch);
    cp.type_k = o->m.type_k;
    cp.type_v = o->m.type_v;
    cp.logits_all = true;
    struct llama_context *ctx = llama_new_context_with_model(model, cp);
    if (!ctx)
        fprintf(stderr, "error: cannot create a context\n");
    return ctx;
}

/* Plan the chunks over the tokens; 0, or 1 with a message. */
static int plan(struct run *r, const struct im_opts *o)
{
    r->n_ctx = (int)llama_n_ctx(r->ctx);
    r->n_batch = (int)(o->m.n_batch < r->n_ctx ? o->m.n_batch : r->n_ctx);
    r->n_vocab = llama_n_vocab(llama_get_model(r->ctx));
    if (r->n_tokens < r->n_ctx) {
        fprintf(stderr, "error: %s has %lld tokens; one chunk (-c %d) needs %d\n", o->text_file,
                (long long)r->n_tokens, r->n_ctx, r->n_ctx);
        return 1;
    }
    int64_t n = r->n_tokens / r->n_ctx;
    r->n_chunk = n > INT32_MAX ? INT32_MAX : (int)n;
    if (o->n_chunks > 0 && o->n_chunks < r->n_chunk)
        r->n_chunk = (int)o->n_chunks;
    if (r->n_batch < LM_IMATRIX_MIN_TOKENS)
        fprintf(stderr, "warning: batches of %d tokens are below the %d the matrix counts (-b, -c)\n", r->n_batch,
                LM_IMATRIX_MIN_TOKENS);
    fprintf(stderr, "imatrix: %lld tokens, %d chunks of %d tokens, n_batch %d\n", (long long)r->n_tokens,
            r->n_chunk, r->n_ctx, r->n_batch);
    return 0;
}

/* See cli.h: 0 success, 1 runtime error, 2 usage error. */
int cmd_imatrix(int argc, char **argv)
{
    struct im_opts o = {.m = cli_model_defaults(), .out_file = "imatrix.dat", .n_chunks = -1, .out_freq = 10,
                        .verbosity = 1};
    int rc = parse(argc, argv, &o);
    if (rc)
        return rc == 1 ? 0 : 2;
    struct llama_model *model = NULL;
    struct run r = {.o = &o, .bar = cli_progress_enabled()};
    llama_backend_init(false);
    rc = 1;
    if (cli_model_open(&o.m, &model))
        goto out;
    int32_t add_bos = llama_add_bos_token(model);
    r.add_bos = add_bos >= 0 ? add_bos != 0 : llama_vocab_type(model) == LLAMA_VOCAB_TYPE_SPM;
    if (!(r.tokens = read_tokens(model, o.text_file, r.add_bos, &r.n_tokens)) || !(r.ctx = make_context(&o, model)))
        goto out;
    if (plan(&r, &o))
        goto out;
    r.defer = r.bar && isatty(STDOUT_FILENO);
    if (!(r.chunk_ppl = malloc((size_t)r.n_chunk * sizeof *r.chunk_ppl)) ||
        lm_api_imatrix_start(r.ctx, o.process_output, &r.col)) {
        fprintf(stderr, "error: out of memory\n");
        goto out;
    }
    rc = run_chunks(&r);
    lm_api_imatrix_stop(r.ctx);
out:
    lm_imatrix_collector_free(r.col);
    free(r.chunk_ppl);
    free(r.tokens);
    llama_free(r.ctx);
    llama_free_model(model);
    llama_backend_free();
    return rc;
}
