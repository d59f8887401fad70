/* bench_ab.c - an in-process A/B of token generation: two variants of lamina
 * that an environment variable selects, measured in the same minutes.
 *
 * The machines this project measures on change their read bandwidth by up to
 * 20 % from one minute to the next, so two process runs one after the other
 * cannot resolve a 1-3 % change. This program loads the model once, then
 * decodes tokens one at a time and switches VAR between the values A and B
 * every `block` tokens (A A B B A A ...), so both variants see the same
 * minutes. It reports each variant's t/s and the ratio B / A, and the ratio's
 * spread over the block pairs (mean ± standard error), which says whether a
 * difference is real.
 *
 * The variable must be one lamina reads per context (LAMINA_ATTN,
 * LAMINA_NO_FUSE, LAMINA_GRAPH_REUSE, LAMINA_CUDA_*: each variant decodes in
 * its own context, made while VAR had its value), or a getenv() one puts
 * temporarily into the code under test (VAR is set to the variant's value
 * for each of its blocks). Variables read once per process or per model
 * (LAMINA_ISA, LAMINA_PREFETCH, LAMINA_HUGEPAGES, LAMINA_LOG, LAMINA_NO_REPACK)
 * need two processes instead.
 *
 * With -p N, each step is a prompt of N tokens instead (the cache cleared,
 * one llama_decode of N tokens at positions 0..N-1): prompt t/s, -n counts
 * prompts and -b prompts per block. With -d N, every token step sees N
 * cells already in the cache (filled once before the warm-up; each step's
 * own cell is removed again after it), like llama-bench's depth. -kv q8_0
 * makes both caches Q8_0 (default f16).
 *
 * Usage: bench_ab -m MODEL [-t threads (2)] [-n tokens (200)] [-c n_ctx (512)]
 *                 [-b block (2)] [-p prompt tokens (0: one-token steps)]
 *                 [-d depth (0)] [-kv f16|q8_0] VAR A B
 * A client of llama.h only; weights read into memory (no mmap), shared by
 * the two contexts.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "llama.h"

#define MAX_PAIRS 4096

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

struct ab_opts {
    const char *model, *var, *val[2], *kv;
    long n_tok, n_threads, n_ctx, block, n_prompt, depth;
};

/* One timed step of a prompt block: the whole prompt into an empty cache. */
static int decode_prompt(struct llama_context *ctx, llama_token *prompt, long n_prompt)
{
    llama_kv_cache_clear(ctx);
    if (llama_decode(ctx, llama_batch_get_one(prompt, (int32_t)n_prompt, 0, 0)) != 0) {
        fprintf(stderr, "bench_ab: prompt decode failed\n");
        return 1;
    }
    return 0;
}

/* Fills the cache with depth tokens at positions 0..depth-1, n_batch at a time. */
static int fill(struct llama_context *ctx, long depth, long n_batch, int n_vocab)
{
    llama_token *t = calloc((size_t)n_batch, sizeof *t);
    int rc = t ? 0 : 1;
    for (long p0 = 0; p0 < depth && rc == 0; p0 += n_batch) {
        const long n = depth - p0 < n_batch ? depth - p0 : n_batch;
        for (long i = 0; i < n; i++)
            t[i] = (llama_token)(((p0 + i) * 7 + 13) % n_vocab);
        rc = llama_decode(ctx, llama_batch_get_one(t, (int32_t)n, (llama_pos)p0, 0)) != 0;
    }
    free(t);
    if (rc)
        fprintf(stderr, "bench_ab: cannot fill the cache to depth %ld\n", depth);
    return rc;
}

/* One timed step of a token block: the next token at *pos (the cache starts
 * over when full, so every token sees a short context), or, with a depth,
 * at position depth, its cell removed again after it. */
static int decode_token(struct llama_context *ctx, llama_token *tok, llama_pos *pos, long n_ctx, long depth,
                        int n_vocab)
{
    if (!depth && *pos >= n_ctx - 1) {
        llama_kv_cache_clear(ctx);
        *pos = 0;
    }
    if (llama_decode(ctx, llama_batch_get_one(tok, 1, depth ? (llama_pos)depth : *pos, 0)) != 0) {
        fprintf(stderr, "bench_ab: decode failed at position %d\n", (int)(depth ? depth : *pos));
        return 1;
    }
    if (depth)
        llama_kv_cache_seq_rm(ctx, 0, (llama_pos)depth, -1);
    (*pos)++;
    *tok = (llama_token)((*tok * 7 + 13) % n_vocab); /* tokens do not change the work */
    return 0;
}

static int usage(void)
{
    fprintf(stderr, "usage: bench_ab -m MODEL [-t threads] [-n tokens] [-c n_ctx] [-b block] [-p prompt] [-d depth] "
                    "[-kv f16|q8_0] VAR A B\n");
    return 2;
}

/* A positive integer option value, or -1. */
static long pos_arg(const char *s)
{
    char *end;
    const long v = strtol(s, &end, 10);
    return *s && !*end && v > 0 && v <= 1000000 ? v : -1;
}

static int parse(int argc, char **argv, struct ab_opts *o)
{
    int pos = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        long *num = strcmp(a, "-t") == 0   ? &o->n_threads
                    : strcmp(a, "-n") == 0 ? &o->n_tok
                    : strcmp(a, "-c") == 0 ? &o->n_ctx
                    : strcmp(a, "-b") == 0 ? &o->block
                    : strcmp(a, "-p") == 0 ? &o->n_prompt
                    : strcmp(a, "-d") == 0 ? &o->depth
                                           : NULL;
        if (strcmp(a, "-m") == 0 && i + 1 < argc) {
            o->model = argv[++i];
        } else if (strcmp(a, "-kv") == 0 && i + 1 < argc) {
            o->kv = argv[++i];
            if (strcmp(o->kv, "f16") != 0 && strcmp(o->kv, "q8_0") != 0) {
                fprintf(stderr, "bench_ab: -kv takes f16 or q8_0, got '%s'\n", o->kv);
                return -1;
            }
        } else if (num && i + 1 < argc) {
            if ((*num = pos_arg(argv[++i])) < 0) {
                fprintf(stderr, "bench_ab: %s needs a positive integer, got '%s'\n", a, argv[i]);
                return -1;
            }
        } else if (a[0] != '-' && pos < 3) {
            if (pos == 0)
                o->var = a;
            else
                o->val[pos - 1] = a;
            pos++;
        } else {
            return -1;
        }
    }
    return o->model && pos == 3 && o->n_ctx >= 2 ? 0 : -1;
}

int main(int argc, char **argv)
{
    struct ab_opts o = {NULL, NULL, {NULL, NULL}, "f16", 200, 2, 512, 2, 0, 0};
    if (parse(argc, argv, &o) || (o.depth && o.n_prompt))
        return usage();
    llama_backend_init(false);
    struct llama_model_params mp = llama_model_default_params();
    mp.use_mmap = false;
    struct llama_model *model = llama_load_model_from_file(o.model, mp);
    if (!model) {
        fprintf(stderr, "bench_ab: cannot load %s\n", o.model);
        return 1;
    }
    struct llama_context_params cp = llama_context_default_params();
    if (o.n_prompt && o.n_ctx < o.n_prompt)
        o.n_ctx = o.n_prompt;
    if (o.depth && o.n_ctx < o.depth + 1)
        o.n_ctx = o.depth + 1;
    cp.n_ctx = (uint32_t)o.n_ctx;
    if (o.n_prompt)
        cp.n_batch = (uint32_t)o.n_prompt;
    cp.n_threads = cp.n_threads_batch = (uint32_t)o.n_threads;
    cp.type_k = cp.type_v = strcmp(o.kv, "q8_0") == 0 ? GGML_TYPE_Q8_0 : GGML_TYPE_F16;
    struct llama_context *ctxs[2] = {NULL, NULL};
    for (int v = 0; v < 2; v++) { /* a context per variant: the switches are read when it is made */
        setenv(o.var, o.val[v], 1);
        ctxs[v] = llama_new_context_with_model(model, cp);
    }
    if (!ctxs[0] || !ctxs[1]) {
        fprintf(stderr, "bench_ab: cannot make the contexts\n");
        llama_free(ctxs[0]);
        llama_free(ctxs[1]);
        llama_free_model(model);
        return 1;
    }
    const int n_vocab = llama_n_vocab(model);
    llama_token *prompt = calloc((size_t)(o.n_prompt ? o.n_prompt : 1), sizeof *prompt);
    for (long i = 0; i < o.n_prompt; i++)
        prompt[i] = (llama_token)((i * 7 + 13) % n_vocab);
    double total[2] = {0, 0}, blk[2] = {0, 0}, ratio[MAX_PAIRS];
    long count[2] = {0, 0}, n_pairs = 0;
    llama_token tok = 1;
    llama_pos pos[2] = {0, 0};
    int rc = 0;
    for (int v = 0; v < 2 && o.depth && rc == 0; v++)
        rc = fill(ctxs[v], o.depth, (long)llama_n_batch(ctxs[v]), n_vocab);
    /* 2 blocks of warm-up, then whole pairs of blocks (A then B) */
    const long n_blocks = 2 + 2 * ((o.n_tok + 2 * o.block - 1) / (2 * o.block));
    for (long b = 0; b < n_blocks && rc == 0; b++) {
        const int v = (int)(b % 2);
        setenv(o.var, o.val[v], 1);
        blk[v] = 0;
        for (long i = 0; i < o.block && rc == 0; i++) {
            const double t0 = now();
            rc = o.n_prompt ? decode_prompt(ctxs[v], prompt, o.n_prompt)
                            : decode_token(ctxs[v], &tok, &pos[v], o.n_ctx, o.depth, n_vocab);
            blk[v] += now() - t0;
        }
        if (b < 2)
            continue;
        total[v] += blk[v];
        count[v] += o.block * (o.n_prompt ? o.n_prompt : 1);
        if (v == 1 && n_pairs < MAX_PAIRS)
            ratio[n_pairs++] = blk[0] / blk[1]; /* B's speed over A's in the same minute */
    }
    if (rc == 0 && n_pairs > 0) {
        double mean = 0, var = 0;
        for (long i = 0; i < n_pairs; i++)
            mean += ratio[i] / (double)n_pairs;
        for (long i = 0; i < n_pairs; i++)
            var += (ratio[i] - mean) * (ratio[i] - mean) / (double)(n_pairs > 1 ? n_pairs - 1 : 1);
        const double ta = (double)count[0] / total[0], tb = (double)count[1] / total[1];
        printf("%s=%s: %.3f t/s   %s=%s: %.3f t/s   B/A %.4f (per block pair %.4f +- %.4f, %ld pairs)\n", o.var,
               o.val[0], ta, o.var, o.val[1], tb, tb / ta, mean, sqrt(var / (double)n_pairs), n_pairs);
    }
    free(prompt);
    llama_free(ctxs[0]);
    llama_free(ctxs[1]);
    llama_free_model(model);
    llama_backend_free();
    return rc;
}
