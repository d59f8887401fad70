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
#include "sampling/grammar.h"

struct run_opts {
    const char *model, *prompt_file, *grammar_file, *prompt_cache;
    char *prompt, *grammar;
    long long n_predict, n_ctx, n_batch, n_threads, n_threads_batch, top_k, repeat_last_n, n_keep, seed, mirostat;
    float temp, top_p, min_p, tfs_z, typical_p, repeat_penalty, freq_penalty, presence_penalty;
    float mirostat_tau, mirostat_eta;
    bool escape, ignore_eos, no_mmap, mlock, verbose;
    enum ggml_type type_k, type_v;
};

static void run_usage(FILE *f)
{
    fprintf(f,
            "usage: lamina run -m MODEL [options]\n\n"
            "  -m, --model FILE          GGUF model to run (required)\n"
            "  -p, --prompt TEXT         prompt (default: empty, generation starts from BOS)\n"
            "  -f, --file FILE           read the prompt from a file\n"
            "  -e, --escape              process escapes (\\n \\t \\\\ \\\" \\xHH) in the prompt\n"
            "  -n, --n-predict N         tokens to generate (default -1: until end of text)\n"
            "  -t, --threads N           threads for generation (default: all cores)\n"
            "  -tb, --threads-batch N    threads for prompt processing (default: = -t)\n"
            "  -c, --ctx-size N          context size (default 512, 0: the model's)\n"
            "  -b, --batch-size N        prompt tokens per decode call (default 512)\n"
            "  --keep N                  prompt tokens kept when the context is full (-1: all)\n"
            "  --temp T                  temperature (default 0.8; <= 0: greedy)\n"
            "  --top-k N                 top-k sampling (default 40, 0: off)\n"
            "  --top-p P                 top-p sampling (default 0.95, 1.0: off)\n"
            "  --min-p P                 min-p sampling (default 0.05, 0.0: off)\n"
            "  --tfs Z                   tail-free sampling (default 1.0: off)\n"
            "  --typical P               locally typical sampling (default 1.0: off)\n"
            "  --repeat-penalty X        penalty for repeated tokens (default 1.1, 1.0: off)\n"
            "  --repeat-last-n N         tokens considered for penalties (default 64, -1: ctx size)\n"
            "  --frequency-penalty X     (default 0.0: off)\n"
            "  --presence-penalty X      (default 0.0: off)\n"
            "  --mirostat N              Mirostat sampling 1 or 2 (default 0: off)\n"
            "  --mirostat-lr ETA         Mirostat learning rate (default 0.1)\n"
            "  --mirostat-ent TAU        Mirostat target entropy (default 5.0)\n"
            "  -s, --seed N              RNG seed (default -1: random)\n"
            "  --ignore-eos              keep generating after the end-of-text token\n"
            "  --grammar GBNF            constrain output by a GBNF grammar\n"
            "  --grammar-file FILE       read the grammar from a file\n"
            "  --prompt-cache FILE       save the evaluated prompt's state there and reuse it next time\n"
            "  -ctk, --cache-type-k T    KV cache type for K (f16, f32, bf16, q8_0; default f16)\n"
            "  -ctv, --cache-type-v T    KV cache type for V (default f16)\n"
            "  --no-mmap                 read the weights into memory instead of mapping the file\n"
            "  --mlock                   keep the weights locked in RAM\n"
            "  --verbose                 print the library's log\n"
            "  -h, --help                this text\n");
}

static bool parse_type(const char *s, enum ggml_type *out)
{
    static const struct { const char *name; enum ggml_type t; } types[] = {
        {"f32", GGML_TYPE_F32}, {"f16", GGML_TYPE_F16}, {"bf16", GGML_TYPE_BF16}, {"q8_0", GGML_TYPE_Q8_0},
        {"q4_0", GGML_TYPE_Q4_0}, {"q4_1", GGML_TYPE_Q4_1}, {"q5_0", GGML_TYPE_Q5_0}, {"q5_1", GGML_TYPE_Q5_1},
    };
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        if (!strcmp(s, types[i].name)) {
            *out = types[i].t;
            return true;
        }
    fprintf(stderr, "error: unknown cache type '%s'\n", s);
    return false;
}

static long long n_cores(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? n : 1;
}

/* Returns 0 ok, 1 help shown, 2 usage error. */
static int parse_run(int argc, char **argv, struct run_opts *o)
{
    *o = (struct run_opts){.n_predict = -1, .n_ctx = 512, .n_batch = 512, .n_threads = n_cores(),
                           .n_threads_batch = -1, .top_k = 40, .repeat_last_n = 64, .seed = -1, .temp = 0.8f,
                           .top_p = 0.95f, .min_p = 0.05f, .tfs_z = 1.0f, .typical_p = 1.0f,
                           .repeat_penalty = 1.1f, .mirostat_tau = 5.0f, .mirostat_eta = 0.1f,
                           .type_k = GGML_TYPE_F16, .type_v = GGML_TYPE_F16};
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
#define VAL() if (!(v = cli_value(argc, argv, &i))) return 2
#define INT(field, lo, hi) do { VAL(); if (!cli_int(a, v, lo, hi, &o->field)) return 2; } while (0)
#define FLT(field) do { VAL(); if (!cli_float(a, v, &o->field)) return 2; } while (0)
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { run_usage(stdout); return 1; }
        else if (!strcmp(a, "-m") || !strcmp(a, "--model")) { VAL(); o->model = v; }
        else if (!strcmp(a, "-p") || !strcmp(a, "--prompt")) { VAL(); free(o->prompt); o->prompt = strdup(v); }
        else if (!strcmp(a, "-f") || !strcmp(a, "--file")) { VAL(); o->prompt_file = v; }
        else if (!strcmp(a, "-e") || !strcmp(a, "--escape")) o->escape = true;
        else if (!strcmp(a, "-n") || !strcmp(a, "--n-predict")) INT(n_predict, -1, 1LL << 30);
        else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) INT(n_threads, 1, 1024);
        else if (!strcmp(a, "-tb") || !strcmp(a, "--threads-batch")) INT(n_threads_batch, 1, 1024);
        else if (!strcmp(a, "-c") || !strcmp(a, "--ctx-size")) INT(n_ctx, 0, 1 << 24);
        else if (!strcmp(a, "-b") || !strcmp(a, "--batch-size")) INT(n_batch, 1, 1 << 24);
        else if (!strcmp(a, "--keep")) INT(n_keep, -1, 1 << 24);
        else if (!strcmp(a, "--temp")) FLT(temp);
        else if (!strcmp(a, "--top-k")) INT(top_k, 0, 1 << 30);
        else if (!strcmp(a, "--top-p")) FLT(top_p);
        else if (!strcmp(a, "--min-p")) FLT(min_p);
        else if (!strcmp(a, "--tfs")) FLT(tfs_z);
        else if (!strcmp(a, "--typical")) FLT(typical_p);
        else if (!strcmp(a, "--repeat-penalty")) FLT(repeat_penalty);
        else if (!strcmp(a, "--repeat-last-n")) INT(repeat_last_n, -1, 1 << 24);
        else if (!strcmp(a, "--frequency-penalty")) FLT(freq_penalty);
        else if (!strcmp(a, "--presence-penalty")) FLT(presence_penalty);
        else if (!strcmp(a, "--mirostat")) INT(mirostat, 0, 2);
        else if (!strcmp(a, "--mirostat-lr")) FLT(mirostat_eta);
        else if (!strcmp(a, "--mirostat-ent")) FLT(mirostat_tau);
        else if (!strcmp(a, "-s") || !strcmp(a, "--seed")) INT(seed, -1, 0xFFFFFFFFLL);
        else if (!strcmp(a, "--ignore-eos")) o->ignore_eos = true;
        else if (!strcmp(a, "--grammar")) { VAL(); free(o->grammar); o->grammar = strdup(v); }
        else if (!strcmp(a, "--grammar-file")) { VAL(); o->grammar_file = v; }
        else if (!strcmp(a, "--prompt-cache")) { VAL(); o->prompt_cache = v; }
        else if (!strcmp(a, "-ctk") || !strcmp(a, "--cache-type-k")) { VAL(); if (!parse_type(v, &o->type_k)) return 2; }
        else if (!strcmp(a, "-ctv") || !strcmp(a, "--cache-type-v")) { VAL(); if (!parse_type(v, &o->type_v)) return 2; }
        else if (!strcmp(a, "--no-mmap")) o->no_mmap = true;
        else if (!strcmp(a, "--mlock")) o->mlock = true;
        else if (!strcmp(a, "--verbose")) o->verbose = true;
        else {
            fprintf(stderr, "error: unknown option '%s' (see lamina run --help)\n", a);
            return 2;
        }
#undef VAL
#undef INT
#undef FLT
    }
    if (!o->model) {
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
    if (o->n_threads_batch < 0)
        o->n_threads_batch = o->n_threads;
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
    llama_token_data *cand;
    struct llama_grammar *grammar;
    float mirostat_mu;
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
    char buf[256];
    int32_t n = llama_token_to_piece(g->model, t, buf, (int32_t)sizeof buf);
    char *p = buf;
    char *big = NULL;
    if (n < 0) {
        big = malloc((size_t)-n);
        if (!big)
            return;
        n = llama_token_to_piece(g->model, t, big, -n);
        p = big;
    }
    if (after_bos && n > 0 && p[0] == ' ' && llama_vocab_type(g->model) == LLAMA_VOCAB_TYPE_SPM) {
        p++;
        n--;
    }
    fwrite(p, 1, (size_t)n, stdout);
    fflush(stdout);
    free(big);
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

static llama_token sample(struct gen *g)
{
    const struct run_opts *o = g->o;
    int n_vocab = llama_n_vocab(g->model);
    float *logits = llama_get_logits(g->ctx);
    for (int t = 0; t < n_vocab; t++)
        g->cand[t] = (llama_token_data){t, logits[t], 0.0f};
    llama_token_data_array arr = {g->cand, (size_t)n_vocab, false};
    int last_n = o->repeat_last_n < 0 ? (int)llama_n_ctx(g->ctx) : (int)o->repeat_last_n;
    if (last_n > g->n_hist)
        last_n = g->n_hist;
    llama_sample_repetition_penalties(g->ctx, &arr, g->hist + g->n_hist - last_n, (size_t)last_n, o->repeat_penalty,
                                      o->freq_penalty, o->presence_penalty);
    if (g->grammar)
        llama_sample_grammar(g->ctx, &arr, g->grammar);
    if (o->temp <= 0.0f)
        return llama_sample_token_greedy(g->ctx, &arr);
    if (o->mirostat == 1) {
        llama_sample_temp(g->ctx, &arr, o->temp);
        return llama_sample_token_mirostat(g->ctx, &arr, o->mirostat_tau, o->mirostat_eta, 100, &g->mirostat_mu);
    }
    if (o->mirostat == 2) {
        llama_sample_temp(g->ctx, &arr, o->temp);
        return llama_sample_token_mirostat_v2(g->ctx, &arr, o->mirostat_tau, o->mirostat_eta, &g->mirostat_mu);
    }
    llama_sample_top_k(g->ctx, &arr, (int32_t)o->top_k, 1);
    llama_sample_tail_free(g->ctx, &arr, o->tfs_z, 1);
    llama_sample_typical(g->ctx, &arr, o->typical_p, 1);
    llama_sample_top_p(g->ctx, &arr, o->top_p, 1);
    llama_sample_min_p(g->ctx, &arr, o->min_p, 1);
    llama_sample_temp(g->ctx, &arr, o->temp);
    return llama_sample_token(g->ctx, &arr);
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

static struct llama_grammar *make_grammar(const char *text)
{
    struct lm_gbnf *parsed = NULL;
    char err[256];
    if (lm_gbnf_parse(text, &parsed, err, sizeof err)) {
        fprintf(stderr, "error: bad grammar: %s\n", err);
        return NULL;
    }
    size_t root;
    struct llama_grammar *g = NULL;
    if (lm_gbnf_rule_id(parsed, "root", &root))
        fprintf(stderr, "error: the grammar has no 'root' rule\n");
    else
        g = llama_grammar_init((const llama_grammar_element **)parsed->rules, parsed->n_rules, root);
    lm_gbnf_free(parsed);
    return g;
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
        llama_token t = sample(g);
        if (t < 0)
            return 1;
        if (g->grammar)
            llama_grammar_accept_token(g->ctx, g->grammar, t);
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

static void quiet_log(enum ggml_log_level level, const char *text, void *user)
{
    (void)user;
    if (level <= GGML_LOG_LEVEL_WARN)
        fputs(text, stderr);
}

static int run_model(const struct run_opts *o)
{
    struct llama_model_params mp = llama_model_default_params();
    mp.use_mmap = !o->no_mmap;
    mp.use_mlock = o->mlock;
    struct llama_model *model = llama_load_model_from_file(o->model, mp);
    if (!model) {
        fprintf(stderr, "error: cannot load model %s\n", o->model);
        return 1;
    }
    struct llama_context_params cp = llama_context_default_params();
    cp.seed = (uint32_t)o->seed;
    cp.n_ctx = (uint32_t)o->n_ctx;
    cp.n_batch = (uint32_t)o->n_batch;
    cp.n_threads = (uint32_t)o->n_threads;
    cp.n_threads_batch = (uint32_t)o->n_threads_batch;
    cp.type_k = o->type_k;
    cp.type_v = o->type_v;
    struct gen g = {.model = model, .o = o, .mirostat_mu = 2.0f * o->mirostat_tau};
    int rc = 1;
    g.ctx = llama_new_context_with_model(model, cp);
    if (!g.ctx) {
        fprintf(stderr, "error: cannot create a context\n");
        goto out_model;
    }
    int n_vocab = llama_n_vocab(model);
    g.cand = malloc((size_t)n_vocab * sizeof *g.cand);
    size_t plen = strlen(o->prompt);
    int32_t cap = (int32_t)plen + 2;
    g.hist = malloc((size_t)cap * sizeof *g.hist);
    g.cap_hist = cap;
    if (!g.cand || !g.hist)
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
    if (o->grammar && !(g.grammar = make_grammar(o->grammar)))
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
    llama_grammar_free(g.grammar);
    free(g.cand);
    free(g.hist);
    llama_free(g.ctx);
out_model:
    llama_free_model(model);
    return rc;
}

int cmd_run(int argc, char **argv)
{
    struct run_opts o;
    int r = parse_run(argc, argv, &o);
    if (r == 0) {
        llama_backend_init(false);
        if (!o.verbose)
            llama_log_set(quiet_log, NULL);
        r = run_model(&o);
        llama_backend_free();
    } else if (r == 1) {
        r = 0;
    }
    free(o.prompt);
    free(o.grammar);
    return r;
}
