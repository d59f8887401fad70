/* run.c - `lamina run`: generate text from a prompt, streaming tokens to
 * stdout, with llama.cpp's familiar flags. A client of llama.h only (plus the
 * GBNF parser, as llama.cpp's common/ is for its tools).
 *
 * stdout gets the prompt and the generated text and nothing else; logs and
 * the speed summary go to stderr.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "llama.h"
#include "common/sampler.h"

struct run_opts {
    struct cli_model_opts m;
    struct lm_sampler_params sampling;
    const char *prompt_file, *grammar_file, *prompt_cache;
    char *prompt, *grammar;
    long long n_predict, n_keep;
    bool escape, ignore_eos;
};

static void run_usage(FILE *f)
{
    fputs("usage: lamina run -m MODEL [options]\n\n"
          "  -p, --prompt TEXT         prompt (default: empty, generation starts from BOS)\n"
          "  -f, --file FILE           read the prompt from a file\n"
          "  -e, --escape              process escapes (\\n \\t \\\\ \\\" \\xHH) in the prompt\n"
          "  -n, --n-predict N         tokens to generate (default -1: until end of text)\n"
          "  --keep N                  prompt tokens kept when the context is full (-1: all)\n"
          "  --ignore-eos              keep generating after the end-of-text token\n"
          "  --grammar GBNF            constrain output by a GBNF grammar\n"
          "  --grammar-file FILE       read the grammar from a file\n"
          "  --prompt-cache FILE       save the evaluated prompt's state there and reuse it next time\n",
          f);
    cli_model_usage(f);
    cli_sampling_usage(f);
    fputs("  -h, --help                this text\n", f);
}

/* Returns 0 ok, 1 help shown, 2 usage error. */
static int parse_run(int argc, char **argv, struct run_opts *o)
{
    *o = (struct run_opts){.m = cli_model_defaults(), .sampling = lm_sampler_default_params(), .n_predict = -1};
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        int r = cli_model_flag(argc, argv, &i, &o->m);
        if (!r)
            r = cli_sampling_flag(argc, argv, &i, &o->sampling);
        if (r < 0)
            return 2;
        if (r > 0)
            continue;
#define VAL() if (!(v = cli_value(argc, argv, &i))) return 2
#define INT(field, lo, hi) do { VAL(); if (!cli_int(a, v, lo, hi, &o->field)) return 2; } while (0)
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { run_usage(stdout); return 1; }
        else if (!strcmp(a, "-p") || !strcmp(a, "--prompt")) { VAL(); free(o->prompt); o->prompt = strdup(v); }
        else if (!strcmp(a, "-f") || !strcmp(a, "--file")) { VAL(); o->prompt_file = v; }
        else if (!strcmp(a, "-e") || !strcmp(a, "--escape")) o->escape = true;
        else if (!strcmp(a, "-n") || !strcmp(a, "--n-predict")) INT(n_predict, -1, 1LL << 30);
        else if (!strcmp(a, "--keep")) INT(n_keep, -1, 1 << 24);
        else if (!strcmp(a, "--ignore-eos")) o->ignore_eos = true;
        else if (!strcmp(a, "--grammar")) { VAL(); free(o->grammar); o->grammar = strdup(v); }
        else if (!strcmp(a, "--grammar-file")) { VAL(); o->grammar_file = v; }
        else if (!strcmp(a, "--prompt-cache")) { VAL(); o->prompt_cache = v; }
        else {
            fprintf(stderr, "error: unknown option '%s' (see lamina run --help)\n", a);
            return 2;
        }
#undef VAL
#undef INT
    }
    if (!o->m.model) {
        fprintf(stderr, "error: lamina run needs a model: -m FILE (see lamina run --help)\n");
        return 2;
    }
    if (o->prompt_file) {
        free(o->prompt);
        if (!(o->prompt = cli_read_file(o->prompt_file, NULL)))
            return 2;
    }
    if (!o->prompt)
        o->prompt = strdup("");
    if (o->escape)
        cli_unescape(o->prompt);
    if (o->grammar_file) {
        free(o->grammar);
        if (!(o->grammar = cli_read_file(o->grammar_file, NULL)))
            return 2;
    }
    return 0;
}

/* ---- generation ---- */

struct gen {
    struct llama_context *ctx;
    const struct llama_model *model;
    const struct run_opts *o;
    llama_token *hist;      /* every token in the context so far */
    int n_hist, cap_hist;
    int n_past;             /* tokens decoded into the KV cache */
    struct lm_sampler *sampler;
    int64_t t_prompt_us, t_gen_us;
    int n_prompt, n_gen;
};

static bool push(struct gen *g, llama_token t)
{
    if (g->n_hist == g->cap_hist) {
        int nc = g->cap_hist ? 2 * g->cap_hist : 256;
        llama_token *nh = realloc(g->hist, (size_t)nc * sizeof *nh);
        if (!nh)
            return false;
        g->hist = nh;
        g->cap_hist = nc;
    }
    g->hist[g->n_hist++] = t;
    return true;
}

/* Print a token's text; drop the space SentencePiece puts after BOS. */
static void print_token(struct gen *g, llama_token t, bool after_bos)
{
    struct lm_strbuf b = {0};
    if (lm_token_append(g->model, t, &b) != LM_OK)
        return;
    const char *p = b.p;
    size_t n = b.n;
    if (after_bos && n > 0 && p[0] == ' ' && llama_vocab_type(g->model) == LLAMA_VOCAB_TYPE_SPM) {
        p++;
        n--;
    }
    if (n)
        fwrite(p, 1, n, stdout);
    fflush(stdout);
    lm_strbuf_free(&b);
}

/* Decode hist[n_past..n_hist) in batches of n_batch. */
static bool decode_pending(struct gen *g)
{
    int n_batch = (int)llama_n_batch(g->ctx);
    while (g->n_past < g->n_hist) {
        int n = g->n_hist - g->n_past;
        if (n > n_batch)
            n = n_batch;
        int32_t r = llama_decode(g->ctx, llama_batch_get_one(g->hist + g->n_past, n, g->n_past, 0));
        if (r) {
            fprintf(stderr, "error: decode failed (%d)\n", r);
            return false;
        }
        g->n_past += n;
    }
    return true;
}

/* When the next token would not fit: keep n_keep tokens (plus BOS), drop half
 * of the rest, shift the remainder down. */
static void context_shift(struct gen *g)
{
    int n_ctx = (int)llama_n_ctx(g->ctx);
    if (g->n_past + 1 <= n_ctx)
        return;
    int n_keep = g->o->n_keep < 0 || g->o->n_keep > g->n_past - 2 ? g->n_past - 2 : (int)g->o->n_keep;
    int n_left = g->n_past - n_keep - 1;
    int n_discard = n_left / 2;
    if (n_discard <= 0)
        return;
    llama_kv_cache_seq_rm(g->ctx, 0, n_keep + 1, n_keep + 1 + n_discard);
    llama_kv_cache_seq_shift(g->ctx, 0, n_keep + 1 + n_discard, g->n_past, -n_discard);
    memmove(g->hist + n_keep + 1, g->hist + n_keep + 1 + n_discard,
            (size_t)(g->n_hist - n_keep - 1 - n_discard) * sizeof *g->hist);
    g->n_hist -= n_discard;
    g->n_past -= n_discard;
}

/* Reuse a saved prompt state whose tokens are a prefix of ours. */
static void load_prompt_cache(struct gen *g, int n_prompt)
{
    size_t cap = llama_n_ctx(g->ctx), n = 0;
    llama_token *saved = malloc(cap * sizeof *saved);
    if (!saved)
        return;
    if (access(g->o->prompt_cache, R_OK) == 0 &&
        llama_load_session_file(g->ctx, g->o->prompt_cache, saved, cap, &n)) {
        size_t same = 0;
        while (same < n && same < (size_t)n_prompt && saved[same] == g->hist[same])
            same++;
        if (same == (size_t)n_prompt && same > 0) /* recompute the last token for fresh logits */
            same--;
        llama_kv_cache_seq_rm(g->ctx, -1, (llama_pos)same, -1);
        g->n_past = (int)same;
        fprintf(stderr, "prompt cache: reusing %zu of %d prompt tokens from %s\n", same, n_prompt,
                g->o->prompt_cache);
    }
    free(saved);
}

static int generate(struct gen *g)
{
    const struct run_opts *o = g->o;
    llama_token eos = llama_token_eos(g->model);
    int64_t t0 = llama_time_us();
    if (!decode_pending(g))
        return 1;
    g->t_prompt_us = llama_time_us() - t0;
    bool after_bos = g->n_hist == 1 && g->hist[0] == llama_token_bos(g->model);
    t0 = llama_time_us();
    for (long long i = 0; o->n_predict < 0 || i < o->n_predict; i++) {
        llama_token t = lm_sampler_sample(g->sampler, g->ctx, -1);
        if (t < 0) {
            fprintf(stderr, "error: no token to sample (no logits, or none fits the grammar)\n");
            return 1;
        }
        if (lm_sampler_accept(g->sampler, g->ctx, t, true))
            return 1;
        if (t == eos && !o->ignore_eos)
            break;
        print_token(g, t, after_bos && i == 0);
        g->n_gen++;
        if (!push(g, t))
            return 1;
        context_shift(g);
        if (!decode_pending(g))
            return 1;
    }
    g->t_gen_us = llama_time_us() - t0;
    return 0;
}

static int run_model(const struct run_opts *o)
{
    struct llama_model *model;
    struct gen g = {.o = o};
    if (cli_model_load(&o->m, &model, &g.ctx))
        return 1;
    g.model = model;
    int rc = 1;
    size_t plen = strlen(o->prompt);
    int32_t cap = (int32_t)plen + 2;
    g.hist = malloc((size_t)cap * sizeof *g.hist);
    g.cap_hist = cap;
    if (!g.hist)
        goto out_ctx;
    bool add_bos = llama_add_bos_token(model) != 0;
    g.n_hist = llama_tokenize(model, o->prompt, (int32_t)plen, g.hist, cap, add_bos, true);
    if (g.n_hist < 0 || (g.n_hist == 0 && !push(&g, llama_token_bos(model))))
        goto out_ctx;
    if (g.n_hist >= (int)llama_n_ctx(g.ctx)) {
        fprintf(stderr, "error: the prompt (%d tokens) does not fit the context (%u)\n", g.n_hist, llama_n_ctx(g.ctx));
        goto out_ctx;
    }
    g.n_prompt = g.n_hist;
    char err[256] = "";
    if (lm_sampler_new(model, &o->sampling, o->grammar, LM_SAMPLER_CTX_RNG, &g.sampler, err, sizeof err)) {
        fprintf(stderr, "error: %s\n", err[0] ? err : "cannot make the sampler");
        goto out_ctx;
    }
    for (int i = 0; i < g.n_hist; i++)
        if (lm_sampler_accept(g.sampler, g.ctx, g.hist[i], false))
            goto out_ctx;
    if (o->prompt_cache)
        load_prompt_cache(&g, g.n_prompt);
    fwrite(o->prompt, 1, plen, stdout);
    fflush(stdout);
    if (o->prompt_cache) {
        if (!decode_pending(&g))
            goto out_ctx;
        if (!llama_save_session_file(g.ctx, o->prompt_cache, g.hist, (size_t)g.n_hist))
            fprintf(stderr, "warning: cannot save the prompt cache %s\n", o->prompt_cache);
    }
    rc = generate(&g);
    fflush(stdout);
    fprintf(stderr, "\n\nprompt: %d tokens in %.1f ms (%.2f t/s) | generation: %d tokens in %.1f ms (%.2f t/s)\n",
            g.n_prompt, g.t_prompt_us / 1e3, g.t_prompt_us ? g.n_prompt * 1e6 / g.t_prompt_us : 0.0, g.n_gen,
            g.t_gen_us / 1e3, g.t_gen_us ? g.n_gen * 1e6 / g.t_gen_us : 0.0);
out_ctx:
    lm_sampler_free(g.sampler);
    free(g.hist);
    llama_free(g.ctx);
    llama_free_model(model);
    return rc;
}

int cmd_run(int argc, char **argv)
{
    struct run_opts o;
    int r = parse_run(argc, argv, &o);
    if (r == 0) {
        llama_backend_init(false);
        r = run_model(&o);
        llama_backend_free();
    } else if (r == 1) {
        r = 0;
    }
    free(o.prompt);
    free(o.grammar);
    return r;
}
