/* test_cuda_model.c - whole models with layers on the GPU (cuda0) against
 * their reference logits and against the CPU. Skipped (exit 77) where no
 * GPU is visible.
 *
 * For stories260K and every fixture of shared/fixtures/arch (README there:
 * 12 token ids and llama.cpp's logits for them in one batch), with
 * n_gpu_layers 99 (every layer and the output on the GPU), 1 (a split: the
 * last layer on the GPU, the rest and the output on the CPU) and 0:
 *   1. one batch of the 12 ids: every logit within the fixture bound
 *      max|got - ref| <= 2e-3 * max(1, max|ref|) (stories260K: against the
 *      CPU's logits, same bound);
 *   2. (99 only) the ids one token at a time (the decode kernels, attention
 *      over the cache): within the same bound of the batch;
 *   3. (99 only) two sequences in one batch (ids and ids reversed) give each
 *      sequence's own logits; the state saved after 6 tokens and restored in
 *      a fresh context decodes the next 6 as the first context does.
 * Then CUDA graphs: stories260K decoded one token at a time over 16 tokens
 * with decode graphs (the default) and with LAMINA_CUDA_GRAPHS=0 (read when
 * a context's backends are created) gives bit-identical logits; the first
 * run launched at least half its tokens as CUDA graphs, reusing (updating)
 * the executable graph for most and replaying it without a capture for at
 * least half (the kept graph, the same for all 16 tokens), and the second
 * launched none. Then fused node pairs: stories260K (F32),
 * llama-2-tiny-random (F16) and its Q4_0 quantization decoded one token at a
 * time with fusion on (the default) and LAMINA_NO_FUSE: bit-identical
 * logits, pairs fused only when on. Then a Q8_0 K and V cache (the persimmon fixture, 64-wide
 * heads): with every layer on the GPU (the CUDA attention over a Q8_0 K and
 * Q8_0 V rows), one batch and one token at a time, against the same cache
 * on the CPU within the fixture bound. Then device
 * memory exhaustion: a buffer of 2^50 bytes and a context of 2^24 cells must
 * fail with an error (NULL context), never crash.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "cuda/cuda.h"
#include "util_api.h"

#define N_IDS 12


static struct llama_model *load(const char *rel, int n_gpu_layers)
{
    struct llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = n_gpu_layers;
    return llama_load_model_from_file(lm_test_shared(rel), mp);
}


/* ids[0..n) at positions pos0.. of sequence seq in batches of `step` tokens
 * on ctx; every position's logits into out [n * n_vocab]. */
static bool decode(struct llama_context *ctx, const llama_token *ids, int n, int pos0, int step, float *out)
{
    const int n_vocab = llama_n_vocab(llama_get_model(ctx));
    bool ok = true;
    for (int s = 0; s < n && ok; s += step) {
        const int k = n - s < step ? n - s : step;
        ok = api_decode_ids(ctx, ids + s, k, pos0 + s, out + (size_t)s * n_vocab);
    }
    return ok;
}

/* Two sequences in one batch: ids on seq 0, ids reversed on seq 1; the
 * logits of each sequence's last token against `a_last` and `b_last`. */
static double two_sequences(struct llama_model *m, const llama_token *ids, const float *a_last, const float *b_last)
{
    const int n_vocab = llama_n_vocab(m);
    struct llama_context *ctx = api_ctx(m, 64, 64, false);
    struct llama_batch b = llama_batch_init(2 * N_IDS, 0, 1);
    for (int i = 0; i < 2 * N_IDS; i++) {
        const int s = i % 2, p = i / 2;
        b.token[i] = s ? ids[N_IDS - 1 - p] : ids[p];
        b.pos[i] = p;
        b.n_seq_id[i] = 1;
        b.seq_id[i][0] = s;
        b.logits[i] = p == N_IDS - 1;
    }
    b.n_tokens = 2 * N_IDS;
    double d = INFINITY;
    if (ctx && llama_decode(ctx, b) == 0)
        d = fmax(api_max_diff(llama_get_logits_ith(ctx, 2 * N_IDS - 2), a_last, (size_t)n_vocab),
                 api_max_diff(llama_get_logits_ith(ctx, 2 * N_IDS - 1), b_last, (size_t)n_vocab));
    llama_batch_free(b);
    llama_free(ctx);
    return d;
}

/* The state after ids[0..6) restored into a fresh context: the next 6
 * logits against the first context's. */
static double state_roundtrip(struct llama_model *m, const llama_token *ids)
{
    const int n_vocab = llama_n_vocab(m);
    struct llama_context *a = api_ctx(m, 64, 64, true), *b = api_ctx(m, 64, 64, true);
    float *la = malloc((size_t)6 * n_vocab * sizeof(float)), *lb = malloc((size_t)6 * n_vocab * sizeof(float));
    uint8_t *st = a ? malloc(llama_get_state_size(a)) : NULL;
    double d = INFINITY;
    if (a && b && la && lb && st && decode(a, ids, 6, 0, 6, la)) {
        size_t n = llama_copy_state_data(a, st);
        if (llama_set_state_data(b, st) == n && decode(a, ids + 6, 6, 6, 6, la) && decode(b, ids + 6, 6, 6, 6, lb))
            d = api_max_diff(la, lb, (size_t)6 * n_vocab);
    }
    free(st);
    free(la);
    free(lb);
    llama_free(a);
    llama_free(b);
    return d;
}

/* One model file at n_gpu_layers 0, 1 and 99 against ref (NULL: against its
 * own CPU logits). */
static void test_model(const char *label, const char *rel, const llama_token *ids, const float *ref_in)
{
    static const int ngls[] = {0, 1, 99};
    float *cpu = NULL;
    for (int k = 0; k < 3; k++) {
        struct llama_model *m = load(rel, ngls[k]);
        CHECKF(m != NULL, "%s: load with n_gpu_layers %d", label, ngls[k]);
        if (!m)
            return;
        const int n_vocab = llama_n_vocab(m);
        const size_t n = (size_t)N_IDS * n_vocab;
        float *one = malloc(n * sizeof(float)), *step = malloc(n * sizeof(float));
        struct llama_context *ctx = api_ctx(m, 64, 64, true);
        bool ok = one && step && ctx && decode(ctx, ids, N_IDS, 0, N_IDS, one);
        llama_free(ctx);
        CHECKF(ok, "%s: decode with n_gpu_layers %d", label, ngls[k]);
        if (ok && k == 0)
            cpu = memcpy(malloc(n * sizeof(float)), one, n * sizeof(float));
        const float *ref = ref_in ? ref_in : cpu;
        double max_ref = 1.0;
        for (size_t i = 0; ref && i < n; i++)
            max_ref = fmax(max_ref, fabs(ref[i]));
        const double bound = 2e-3 * max_ref;
        double d = ok && ref ? api_max_diff(one, ref, n) : INFINITY;
        CHECKF(d <= bound, "%s (n_gpu_layers %d): max|diff| %.3g > %.3g", label, ngls[k], d, bound);
        double d_step = 0, d_seq = 0, d_state = 0;
        if (ok && ngls[k] == 99) {
            ctx = api_ctx(m, 64, 64, true);
            d_step = ctx && decode(ctx, ids, N_IDS, 0, 1, step) ? api_max_diff(step, one, n) : INFINITY;
            llama_free(ctx);
            CHECKF(d_step <= bound, "%s: one token at a time vs one batch %.3g > %.3g", label, d_step, bound);
            /* the reversed ids' last logits come from a run of their own */
            llama_token rev[N_IDS];
            for (int i = 0; i < N_IDS; i++)
                rev[i] = ids[N_IDS - 1 - i];
            ctx = api_ctx(m, 64, 64, true);
            bool okr = ctx && decode(ctx, rev, N_IDS, 0, N_IDS, step);
            llama_free(ctx);
            d_seq = okr ? two_sequences(m, ids, one + (size_t)(N_IDS - 1) * n_vocab,
                                        step + (size_t)(N_IDS - 1) * n_vocab)
                        : INFINITY;
            CHECKF(d_seq <= bound, "%s: two sequences in one batch %.3g > %.3g", label, d_seq, bound);
            d_state = state_roundtrip(m, ids);
            CHECKF(d_state <= 1e-5 * max_ref, "%s: state restored on the GPU %.3g", label, d_state);
        }
        printf("%-13s ngl %2d: max|diff| %.2e (bound %.2e)", label, ngls[k], d, bound);
        if (ngls[k] == 99)
            printf("; one at a time %.1e, two sequences %.1e, state %.1e", d_step, d_seq, d_state);
        printf("\n");
        free(one);
        free(step);
        llama_free_model(m);
    }
    free(cpu);
}

static void test_fixture(const char *name)
{
    char rel[128], lrel[128];
    llama_token ids[N_IDS];
    snprintf(rel, sizeof rel, "fixtures/arch/%s.gguf", name);
    snprintf(lrel, sizeof lrel, "fixtures/arch/%s.logits.f32", name);
    size_t n_ref = 0;
    float *ref = lm_test_read_file(lm_test_shared(lrel), &n_ref);
    CHECKF(ref && api_fixture_ids(name, ids, N_IDS) == N_IDS, "%s: fixture files", name);
    if (ref && api_fixture_ids(name, ids, N_IDS) == N_IDS)
        test_model(name, rel, ids, ref);
    free(ref);
}

enum { N_TOK = 16 };
static const llama_token tok16[N_TOK] = {1, 403, 407, 261, 378, 429, 267, 270, 431, 264, 342, 259, 300, 401, 270, 264};

/* model m decoding tok16 one token at a time with env `name` set to value
 * (NULL: unset) when the context (its backends) is created: the logits into
 * out [N_TOK * n_vocab], the graph stats' growth into *d. */
static bool decode_with_env(struct llama_model *m, const char *name, const char *value, float *out,
                            struct lm_cuda_graph_stats *d)
{
    if (value)
        setenv(name, value, 1);
    else
        unsetenv(name);
    struct lm_cuda_graph_stats before, after;
    lm_cuda_graph_stats(&before);
    struct llama_context *ctx = api_ctx(m, 64, 64, true);
    unsetenv(name);
    const bool ok = out && ctx && decode(ctx, tok16, N_TOK, 0, 1, out);
    llama_free(ctx);
    lm_cuda_graph_stats(&after);
    d->launched = after.launched - before.launched;
    d->replayed = after.replayed - before.replayed;
    d->instantiated = after.instantiated - before.instantiated;
    d->fallbacks = after.fallbacks - before.fallbacks;
    d->fused = after.fused - before.fused;
    return ok;
}

/* Logits that differ in their bits between a and b (n each). */
static size_t bits_differ(const float *a, const float *b, size_t n)
{
    size_t diff = 0;
    for (size_t i = 0; i < n; i++)
        diff += memcmp(&a[i], &b[i], sizeof(float)) != 0;
    return diff;
}

/* Decode graphs on and off (LAMINA_CUDA_GRAPHS=0): the same logits bit for bit, and graphs that replay. */
static void test_graphs(void)
{
    struct llama_model *m = load("models/stories260K.gguf", 99);
    CHECK(m != NULL);
    if (!m)
        return;
    const size_t n = (size_t)N_TOK * llama_n_vocab(m);
    float *out[2] = {malloc(n * sizeof(float)), malloc(n * sizeof(float))};
    struct lm_cuda_graph_stats st[2];
    bool ok[2];
    ok[0] = decode_with_env(m, "LAMINA_CUDA_GRAPHS", NULL, out[0], &st[0]);
    ok[1] = decode_with_env(m, "LAMINA_CUDA_GRAPHS", "0", out[1], &st[1]);
    CHECKF(ok[0] && ok[1], "graphs: decode (graphs on %d, off %d)", ok[0], ok[1]);
    const size_t diff = ok[0] && ok[1] ? bits_differ(out[0], out[1], n) : n;
    CHECKF(diff == 0, "graphs: %zu of %zu logits differ from the direct launches", diff, n);
    /* the first tokens may fall back while the scratch slots grow; updates must carry most tokens */
    CHECKF(st[0].launched >= N_TOK / 2, "graphs: %llu of %d tokens launched as a CUDA graph",
           (unsigned long long)st[0].launched, N_TOK);
    CHECKF(st[0].instantiated <= N_TOK / 4, "graphs: %llu instantiations for %llu launches (updates fail?)",
           (unsigned long long)st[0].instantiated, (unsigned long long)st[0].launched);
    CHECKF(st[0].replayed >= N_TOK / 2, "graphs: %llu of %d tokens replayed without a capture",
           (unsigned long long)st[0].replayed, N_TOK);
    CHECKF(st[1].launched == 0 && st[1].instantiated == 0 && st[1].fallbacks == 0,
           "graphs: LAMINA_CUDA_GRAPHS=0 still captured (%llu launched)", (unsigned long long)st[1].launched);
    printf("CUDA graphs, %d tokens one at a time: %llu launched (%llu replayed), %llu instantiated, %llu fallbacks; "
           "%zu logits differ with LAMINA_CUDA_GRAPHS=0\n",
           N_TOK, (unsigned long long)st[0].launched, (unsigned long long)st[0].replayed,
           (unsigned long long)st[0].instantiated, (unsigned long long)st[0].fallbacks, diff);
    free(out[0]);
    free(out[1]);
    llama_free_model(m);
}

/* Fused node pairs (core/fuse.h) on and off (LAMINA_NO_FUSE): the same
 * logits bit for bit, decoding one token at a time with every layer on the
 * GPU (so each layer's norms, SwiGLU, residual adds, K with V and up with gate fuse), for F32, F16
 * and Q4_0 weights (the matvec kernels' fused instances per type). */
static void test_fusion(void)
{
    const char *q4 = api_tmp_path("tiny-q4_0.gguf");
    llama_model_quantize_params qp = llama_model_quantize_default_params();
    qp.ftype = LLAMA_FTYPE_MOSTLY_Q4_0;
    CHECK(llama_model_quantize(lm_test_shared("models/llama-2-tiny-random.gguf"), q4, &qp) == 0);
    const char *paths[3] = {"models/stories260K.gguf", "models/llama-2-tiny-random.gguf", q4};
    for (int k = 0; k < 3; k++) {
        struct llama_model_params mp = llama_model_default_params();
        mp.n_gpu_layers = 99;
        struct llama_model *m = llama_load_model_from_file(k < 2 ? lm_test_shared(paths[k]) : paths[k], mp);
        CHECKF(m != NULL, "fusion: load %s", paths[k]);
        if (!m)
            continue;
        const size_t n = (size_t)N_TOK * llama_n_vocab(m);
        float *on = malloc(n * sizeof(float)), *off = malloc(n * sizeof(float));
        struct lm_cuda_graph_stats s_on, s_off;
        const bool ok = decode_with_env(m, "LAMINA_NO_FUSE", NULL, on, &s_on) &&
                        decode_with_env(m, "LAMINA_NO_FUSE", "1", off, &s_off);
        const size_t diff = ok ? bits_differ(on, off, n) : n;
        CHECKF(ok && diff == 0, "fusion: %s: %zu of %zu logits differ with LAMINA_NO_FUSE", paths[k], diff, n);
        CHECKF(s_on.fused > 0 && s_off.fused == 0, "fusion: %s: %llu pairs fused, %llu with LAMINA_NO_FUSE",
               paths[k], (unsigned long long)s_on.fused, (unsigned long long)s_off.fused);
        printf("fused pairs, %s, %d tokens: %llu fused launches; %zu logits differ with LAMINA_NO_FUSE\n", paths[k],
               N_TOK, (unsigned long long)s_on.fused, diff);
        free(on);
        free(off);
        llama_free_model(m);
    }
    remove(q4);
}

/* ids[0..N_IDS) in one batch (step N_IDS) or one at a time on a fresh
 * context with a Q8_0 K and V cache; false on failure. */
static bool decode_q8_cache(struct llama_model *m, const llama_token *ids, int step, float *out)
{
    struct llama_context_params cp = api_ctx_params(64, 64);
    cp.logits_all = true;
    cp.type_k = cp.type_v = GGML_TYPE_Q8_0;
    struct llama_context *ctx = llama_new_context_with_model(m, cp);
    const bool ok = ctx && decode(ctx, ids, N_IDS, 0, step, out);
    llama_free(ctx);
    return ok;
}

/* A Q8_0 K and V cache on the GPU against the same cache on the CPU. */
static void test_q8_cache(void)
{
    llama_token ids[N_IDS];
    if (api_fixture_ids("persimmon", ids, N_IDS) != N_IDS) {
        CHECKF(false, "%s", "persimmon: fixture ids");
        return;
    }
    struct llama_model *cpu = load("fixtures/arch/persimmon.gguf", 0), *gpu = load("fixtures/arch/persimmon.gguf", 99);
    CHECK(cpu && gpu);
    const int n_vocab = cpu ? llama_n_vocab(cpu) : 0;
    const size_t n = (size_t)N_IDS * n_vocab;
    float *want = malloc(n * sizeof(float)), *got = malloc(n * sizeof(float)), *step = malloc(n * sizeof(float));
    if (cpu && gpu && want && got && step) {
        const bool ok = decode_q8_cache(cpu, ids, N_IDS, want) && decode_q8_cache(gpu, ids, N_IDS, got) &&
                        decode_q8_cache(gpu, ids, 1, step);
        CHECKF(ok, "%s", "persimmon with a Q8_0 K and V cache: decode");
        double max_ref = 1.0;
        for (size_t i = 0; ok && i < n; i++)
            max_ref = fmax(max_ref, fabs(want[i]));
        const double bound = 2e-3 * max_ref, d = ok ? api_max_diff(got, want, n) : INFINITY,
                     d_step = ok ? api_max_diff(step, want, n) : INFINITY;
        CHECKF(d <= bound && d_step <= bound,
               "persimmon, Q8_0 K and V cache on the GPU vs the CPU: batch %.3g, one at a time %.3g (bound %.3g)", d,
               d_step, bound);
        printf("Q8_0 K+V cache (persimmon): GPU vs CPU max|diff| batch %.2e, one at a time %.2e (bound %.2e)\n", d,
               d_step, bound);
    }
    free(want);
    free(got);
    free(step);
    llama_free_model(cpu);
    llama_free_model(gpu);
}

static void test_out_of_memory(void)
{
    struct lm_buffer *buf = NULL;
    lm_status st = lm_buft_alloc_buffer(lm_cuda_buft(0), (size_t)1 << 50, &buf);
    CHECKF(st == LM_ERR_NOMEM && buf == NULL, "a 2^50-byte device buffer: status %d", (int)st);
    struct llama_model *m = load("fixtures/arch/llama.gguf", 99);
    CHECK(m != NULL);
    if (!m)
        return;
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 1u << 24;
    cp.type_k = cp.type_v = 0; /* F32 cache: the largest */
    struct llama_context *ctx = llama_new_context_with_model(m, cp);
    /* either it fits this device or it is refused; both without a crash */
    printf("context of 2^24 cells on the GPU: %s\n", ctx ? "fits" : "refused (out of device memory)");
    llama_free(ctx);
    llama_free_model(m);
}

int main(void)
{
    api_test_init();
    if (lm_cuda_device_count() == 0) {
        printf("SKIP: no CUDA device (CUDA backend built; the test runs where a GPU is present)\n");
        return 77;
    }
    char dev[160];
    lm_cuda_device_desc(0, dev, sizeof dev);
    printf("cuda0: %s\n%s\n", dev, llama_print_system_info());
    /* stories260K against its own CPU logits */
    const llama_token story[N_IDS] = {1, 403, 407, 261, 378, 429, 267, 270, 431, 264, 342, 259};
    test_model("stories260K", "models/stories260K.gguf", story, NULL);
    for (int i = 0; i < api_n_arch_fixtures; i++)
        test_fixture(api_arch_fixtures[i]);
    test_graphs();
    test_fusion();
    test_q8_cache();
    test_out_of_memory();
    return lm_test_summary();
}
