/* test_attn.c - the fused attention op (ATTN, the default) against the
 * unfused graph it replaced (MUL_MAT, SOFT_MAX, MUL_MAT; LAMINA_ATTN=unfused)
 * at the model level, on stories260K (F32 weights, F16 and F32 KV caches),
 * llama-2-tiny-random (F16 weights, 32000 tokens) and the persimmon fixture
 * with a Q8_0 K cache (64-wide heads; V F16), a Q8_0 V cache (stored in rows
 * per cell; unfused: decoded and transposed) and both:
 *   - a 12-token prompt in one batch (causal mask, logits of every row),
 *   - 40 greedy steps of one token,
 *   - two more sequences interleaved in one batch (each row sees every other
 *     cell of the batch and none of the first sequence: masks with holes and
 *     a first visible cell > 0),
 * must give the same greedy tokens and logits within BOUND, and the graphs
 * must really differ (ATTN nodes and no SOFT_MAX when fused; the reverse when
 * unfused), so the comparison cannot pass by running one path twice.
 * The fused op keeps the unfused graph's roundings (q and p to the cache's
 * dot type, src/cpu/ops/attention.c) but sums only the visible cells, where
 * the unfused products run over whole rows from cell 0 with exact zeros
 * between: with the generic kernels (one sequential sum) that is the same
 * sum, and the logits must be identical (checked at the generic level); a
 * kernel with vector lanes groups the terms differently by the offset of
 * the first visible cell, so the f32 results differ in their last bits, and
 * with an F16 or Q8_0 cache such a difference can move a value across a
 * rounding step of the next F16 rounding (2^-11 relative), which the later
 * layers carry (Zen 3, AVX2: 6.9e-5 with F16 K and V, 9.1e-5 with Q8_0 K;
 * 7.7e-7 with F32 K and V). The measured difference is printed.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "cpu/cpu.h"
#include "util_api.h"

#define N_PROMPT 12
#define N_GEN 40
#define N_SEQ_TOK 8
/* max |fused - unfused| over a row, relative to the row's max |logit|: with
 * F32 caches the ops differ by f32 summation order (~1e-7 relative per dot);
 * a cache rounded to F16 or Q8_0 lets such a difference flip a rounding (see
 * above) */
#define BOUND 1e-5
#define BOUND_ROUNDED 2e-4
#define BOUND_V_ROWS 2e-4

static const llama_token PROMPT[N_PROMPT] = {1, 403, 407, 261, 378, 432, 383, 286, 261, 346, 306, 414};

struct run {
    llama_token toks[N_GEN];
    float *logits; /* rows of n_vocab: prompt rows, generated rows, two-sequence rows */
    int n_rows;
    int n_attn, n_soft_max; /* nodes of those ops in the last prompt graph */
};

/* Count ATTN and SOFT_MAX nodes of the graph the last decode built (its
 * arena lives until the next decode). */
static void count_ops(struct llama_context *ctx, struct run *r)
{
    r->n_attn = r->n_soft_max = 0;
    for (struct lm_tensor *t = lm_ctx_first_tensor(ctx->c->gctx); t; t = lm_ctx_next_tensor(ctx->c->gctx, t)) {
        r->n_attn += t->op == LM_OP_ATTN;
        r->n_soft_max += t->op == LM_OP_SOFT_MAX;
    }
}

static void keep_rows(struct llama_context *ctx, struct run *r, int nv, int n)
{
    for (int i = 0; i < n; i++) {
        float *row = r->logits + (size_t)(r->n_rows + i) * (size_t)nv;
        memcpy(row, llama_get_logits_ith(ctx, i), (size_t)nv * sizeof(float));
    }
    r->n_rows += n;
}

/* Two sequences (ids 1 and 2) of N_SEQ_TOK tokens, interleaved in one batch. */
static void two_sequences(struct llama_context *ctx, struct run *r, int nv)
{
    struct llama_batch b = llama_batch_init(2 * N_SEQ_TOK, 0, 1);
    for (int i = 0; i < 2 * N_SEQ_TOK; i++) {
        b.token[i] = i < 2 ? 1 : PROMPT[(i * 5) % N_PROMPT];
        b.pos[i] = i / 2;
        b.n_seq_id[i] = 1;
        b.seq_id[i][0] = 1 + i % 2;
        b.logits[i] = 1;
    }
    b.n_tokens = 2 * N_SEQ_TOK;
    CHECK(llama_decode(ctx, b) == 0);
    keep_rows(ctx, r, nv, 2 * N_SEQ_TOK);
    llama_batch_free(b);
}

static void decode_all(struct llama_model *m, enum ggml_type type_k, enum ggml_type type_v, bool unfused,
                       struct run *r)
{
    if (unfused)
        setenv("LAMINA_ATTN", "unfused", 1);
    else
        unsetenv("LAMINA_ATTN");
    const int nv = llama_n_vocab(m);
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 128;
    cp.n_batch = 64;
    cp.n_threads = cp.n_threads_batch = 2;
    cp.logits_all = true;
    cp.type_k = type_k;
    cp.type_v = type_v;
    struct llama_context *ctx = llama_new_context_with_model(m, cp);
    r->logits = calloc((size_t)(N_PROMPT + N_GEN + 2 * N_SEQ_TOK) * (size_t)nv, sizeof(float));
    r->n_rows = 0;
    CHECK(ctx != NULL && r->logits != NULL);
    if (ctx && r->logits) {
        CHECK(llama_decode(ctx, llama_batch_get_one((llama_token *)PROMPT, N_PROMPT, 0, 0)) == 0);
        count_ops(ctx, r);
        keep_rows(ctx, r, nv, N_PROMPT);
        llama_token tok = api_argmax(llama_get_logits_ith(ctx, N_PROMPT - 1), nv);
        for (int i = 0; i < N_GEN; i++) {
            r->toks[i] = tok;
            CHECK(llama_decode(ctx, llama_batch_get_one(&tok, 1, N_PROMPT + i, 0)) == 0);
            keep_rows(ctx, r, nv, 1);
            tok = api_argmax(llama_get_logits_ith(ctx, 0), nv);
        }
        two_sequences(ctx, r, nv);
    }
    llama_free(ctx);
    unsetenv("LAMINA_ATTN");
}

static const char *type_name(enum ggml_type t)
{
    return t == GGML_TYPE_F16 ? "f16" : t == GGML_TYPE_F32 ? "f32" : t == GGML_TYPE_Q8_0 ? "q8_0" : "?";
}

static void compare(const char *path, enum ggml_type type_k, enum ggml_type type_v, double bound)
{
    struct llama_model *m = api_load(path);
    CHECKF(m != NULL, "cannot load %s", path);
    if (!m)
        return;
    const int nv = llama_n_vocab(m);
    const int n_layer = (int)m->m->hp.n_layer;
    struct run fused = {0}, plain = {0};
    decode_all(m, type_k, type_v, false, &fused);
    decode_all(m, type_k, type_v, true, &plain);
    CHECKF(fused.n_attn == n_layer && fused.n_soft_max == 0, "%s: fused graph has %d ATTN, %d SOFT_MAX nodes", path,
           fused.n_attn, fused.n_soft_max);
    CHECKF(plain.n_attn == 0 && plain.n_soft_max == n_layer, "%s: unfused graph has %d ATTN, %d SOFT_MAX nodes", path,
           plain.n_attn, plain.n_soft_max);
    int same_toks = 0;
    for (int i = 0; i < N_GEN; i++)
        same_toks += fused.toks[i] == plain.toks[i];
    CHECKF(same_toks == N_GEN, "%s: %d of %d greedy tokens agree", path, same_toks, N_GEN);
    double worst = 0.0, worst_abs = 0.0;
    int identical_rows = 0;
    for (int row = 0; row < fused.n_rows && row < plain.n_rows; row++) {
        const float *a = fused.logits + (size_t)row * nv, *b = plain.logits + (size_t)row * nv;
        double scale = 1e-30;
        for (int i = 0; i < nv; i++)
            scale = fmax(scale, fabs(b[i]));
        const double d = api_max_diff(a, b, (size_t)nv);
        worst = fmax(worst, d / scale);
        worst_abs = fmax(worst_abs, d);
        identical_rows += memcmp(a, b, (size_t)nv * sizeof(float)) == 0;
    }
    CHECKF(fused.n_rows == plain.n_rows && fused.n_rows == N_PROMPT + N_GEN + 2 * N_SEQ_TOK, "%s: %d and %d rows",
           path, fused.n_rows, plain.n_rows);
    CHECKF(worst <= bound, "%s: logits differ by %.3g of the row's max |logit| (bound %g)", path, worst, bound);
    printf("%s, K %s, V %s: %d/%d greedy tokens equal, %d/%d logit rows identical, max |diff| %.3g (%.3g relative)\n",
           path, type_name(type_k), type_name(type_v), same_toks, N_GEN, identical_rows, fused.n_rows, worst_abs,
           worst);
    free(fused.logits);
    free(plain.logits);
    llama_free_model(m);
}

int main(void)
{
    api_test_init();
    llama_backend_init(false);
    /* the generic kernels: one sequential sum per dot, so identical logits */
    lm_cpu_isa_limit(LM_ISA_GENERIC);
    compare("models/stories260K.gguf", GGML_TYPE_F16, GGML_TYPE_F16, 0.0);
    compare("fixtures/arch/persimmon.gguf", GGML_TYPE_Q8_0, GGML_TYPE_F16, 0.0);
    lm_cpu_isa_limit(lm_cpu_isa_best()); /* the rest at this machine's best level, as decodes run */
    compare("models/stories260K.gguf", GGML_TYPE_F16, GGML_TYPE_F16, BOUND_ROUNDED);
    compare("models/stories260K.gguf", GGML_TYPE_F32, GGML_TYPE_F32, BOUND);
    compare("models/llama-2-tiny-random.gguf", GGML_TYPE_F16, GGML_TYPE_F16, BOUND_ROUNDED);
    compare("fixtures/arch/persimmon.gguf", GGML_TYPE_Q8_0, GGML_TYPE_F16, BOUND_ROUNDED);
    /* a Q8_0 V of rows per cell: fused (p * scale) * code against the decoded
     * values' F32 dots, a rounding apart per term (seen 5.2e-6 with F16 K) */
    compare("fixtures/arch/persimmon.gguf", GGML_TYPE_F16, GGML_TYPE_Q8_0, BOUND_V_ROWS);
    compare("fixtures/arch/persimmon.gguf", GGML_TYPE_Q8_0, GGML_TYPE_Q8_0, BOUND_V_ROWS);
    return lm_test_summary();
}
