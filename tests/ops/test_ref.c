/* test_ref.c - the ref backend against hand-computed values (so the oracle of
 * test_ops is not only compared with itself), plus its buffer type, backend
 * identity, registry entry and error paths.
 *
 * Expected values were computed by hand or with a few lines of Python's math
 * module from the formulas in core/tensor.h and ggml's documented semantics
 * (e.g. YaRN: corr dims 0 and 2 for n_dims 4, base 1e4, n_ctx_orig 4096,
 * beta 32/1; mscale 1 + 0.1 ln 4), not by running lamina code.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fp16.h"
#include "core/log.h"
#include "lm_test.h"
#include "quant/quant.h"
#include "ref/ref.h"

static struct lm_ctx *ctx;
static lm_backend_t be;

/* A contiguous F32 tensor [n0, n1, n2] holding v (flat order). */
static struct lm_tensor *vals(int64_t n0, int64_t n1, int64_t n2, const float *v)
{
    struct lm_tensor *t = lm_new_tensor_3d(ctx, LM_TYPE_F32, n0, n1, n2);
    if (t)
        memcpy(t->data, v, (size_t)(n0 * n1 * n2) * sizeof(float));
    return t;
}

static struct lm_tensor *ivals(int64_t n0, int64_t n1, const int32_t *v)
{
    struct lm_tensor *t = lm_new_tensor_2d(ctx, LM_TYPE_I32, n0, n1);
    if (t)
        memcpy(t->data, v, (size_t)(n0 * n1) * sizeof(int32_t));
    return t;
}

/* Compute out on the ref backend and compare it (flat order, through its
 * strides) with want[0..n) to a relative tolerance of 1e-6. */
static void expect(const char *what, struct lm_tensor *out, const double *want, int64_t n)
{
    CHECKF(out != NULL, "%s: build failed: %s", what, lm_ctx_error(ctx));
    if (!out)
        return;
    struct lm_graph *g = lm_graph_new(ctx, 32);
    CHECK(g && lm_graph_expand(g, out) == LM_OK);
    CHECKF(lm_backend_graph_compute(be, g) == LM_OK, "%s: compute failed", what);
    CHECKF(lm_nelements(out) == n, "%s: %lld elements, want %lld", what, (long long)lm_nelements(out), (long long)n);
    for (int64_t k = 0; k < n && k < lm_nelements(out); k++) {
        int64_t i0 = k % out->ne[0], i1 = k / out->ne[0] % out->ne[1], i2 = k / out->ne[0] / out->ne[1];
        double got = lm_get_f32_nd(out, i0, i1, i2, 0);
        bool ok = isinf(want[k]) ? got == want[k] : fabs(got - want[k]) <= 1e-6 * fmax(1.0, fabs(want[k]));
        CHECKF(ok, "%s: [%lld] = %.9g, want %.9g", what, (long long)k, got, want[k]);
    }
}

static void test_elementwise(void)
{
    const float a[4] = {1, 2, 3, 4}, b[2] = {10, -2};
    expect("add broadcast", lm_add(ctx, vals(2, 2, 1, a), vals(2, 1, 1, b)), (double[]){11, 0, 13, 2}, 4);
    expect("div", lm_div(ctx, vals(2, 2, 1, a), vals(2, 1, 1, b)), (double[]){0.1, -1, 0.3, -2}, 4);
    struct lm_tensor *x = vals(4, 1, 1, a);
    expect("mul in place", lm_mul_inplace(ctx, x, vals(1, 1, 1, (float[]){-1})), (double[]){-1, -2, -3, -4}, 4);
    CHECK(((float *)x->data)[3] == -4.0f); /* the result is a's memory */
    expect("scale", lm_scale(ctx, vals(2, 1, 1, a), 0.5f), (double[]){0.5, 1}, 2);
    expect("sqr sqrt", lm_sqrt(ctx, lm_sqr(ctx, vals(2, 1, 1, (float[]){-3, 4}))), (double[]){3, 4}, 2);
    expect("clamp", lm_clamp(ctx, vals(4, 1, 1, a), 1.5f, 3.0f), (double[]){1.5, 2, 3, 3}, 4);
    const float u[3] = {1, -2, -3};
    expect("silu", lm_silu(ctx, vals(3, 1, 1, u)), (double[]){0.7310585786300049, -0.2384058440442351, -0.14227761953270035}, 3);
    expect("gelu", lm_gelu(ctx, vals(2, 1, 1, u)), (double[]){0.8411919906082768, -0.04540230591222494}, 2);
    expect("relu", lm_relu(ctx, vals(3, 1, 1, u)), (double[]){1, 0, 0}, 3);
    expect("neg", lm_unary(ctx, vals(3, 1, 1, u), LM_UNARY_NEG), (double[]){-1, 2, 3}, 3);
    expect("tanh", lm_unary(ctx, vals(1, 1, 1, (float[]){0.5f}), LM_UNARY_TANH), (double[]){0.46211715726000974}, 1);
}

static void test_rows(void)
{
    const float a[6] = {1, 2, 3, 4, 3, 4};
    expect("sum_rows", lm_sum_rows(ctx, vals(4, 1, 1, a)), (double[]){10}, 1);
    expect("norm", lm_norm(ctx, vals(4, 1, 1, a), 0.0f),
           (double[]){-1.3416407864998738, -0.4472135954999579, 0.4472135954999579, 1.3416407864998738}, 4);
    expect("rms_norm [3,4]", lm_rms_norm(ctx, vals(2, 1, 1, a + 4), 0.0f),
           (double[]){0.848528137423857, 1.131370849898476}, 2);
    /* transposed input: rows of the view are columns of the stored [2,2] */
    expect("sum_rows transposed", lm_sum_rows(ctx, lm_transpose(ctx, vals(2, 2, 1, a))), (double[]){4, 6}, 2);
}

static void test_soft_max(void)
{
    const float a[3] = {1, 2, 3};
    expect("softmax [1,2,3]", lm_soft_max(ctx, vals(3, 1, 1, a)),
           (double[]){0.09003057317038046, 0.24472847105479767, 0.6652409557748219}, 3);
    /* scale 0.5, mask [0, -inf, -1]: logits 0.5, -inf, 0.5 */
    struct lm_tensor *m = vals(3, 1, 1, (float[]){0, -INFINITY, -1});
    expect("softmax scale+mask", lm_soft_max_ext(ctx, vals(3, 1, 1, a), m, 0.5f, 0.0f), (double[]){0.5, 0, 0.5}, 3);
    /* ALiBi, 5 heads, max_bias 8: n = 4, m0 = 1/4, m1 = 1/2; slopes 1/4,
     * 1/16, 1/64, 1/256 and (head 4) m1^1 = 1/2. Logits [0, -slope]. */
    float zeros[10] = {0};
    struct lm_tensor *mask = vals(2, 1, 1, (float[]){0, -1});
    const double p[5] = {0.5621765008857981, 0.5156199157230156, 0.5039061705290805, 0.5009765612582384,
                         0.6224593312018546};
    double want[10];
    for (int h = 0; h < 5; h++) {
        want[2 * h] = p[h];
        want[2 * h + 1] = 1.0 - p[h];
    }
    expect("softmax alibi 5 heads", lm_soft_max_ext(ctx, vals(2, 1, 5, zeros), mask, 1.0f, 8.0f), want, 10);
    expect("diag_mask_inf", lm_diag_mask_inf(ctx, vals(3, 2, 1, (float[]){1, 2, 3, 4, 5, 6}), 1),
           (double[]){1, 2, -INFINITY, 4, 5, 6}, 6);
}

/* ATTN by hand (Python's math and struct 'e' for f16 rounding): GQA (2
 * heads on 1 kv head), ALiBi slopes 2^-4 and 2^-8 (max_bias 8), a hidden
 * cell; then f16 k/v, where q (1/3) and the probabilities must be rounded to
 * f16, and a query whose cells are all hidden (zeros). */
static void test_attn(void)
{
    const float q[8] = {1, 0, 0, 2, 2, 2, -1, 1}; /* [d 2, n_q 2, n_head 2] */
    const float k[6] = {1, 0, 0, 1, 1, 1};        /* [2, n_kv 3, 1] */
    const float v[6] = {1, 2, 3, 0, -1, 4};       /* [n_kv 3, d_v 2, 1]: channel rows */
    const float m[6] = {-1, 0, -INFINITY, -2, -1, 0};
    struct lm_tensor *t = lm_attn(ctx, vals(2, 2, 2, q), vals(2, 3, 1, k), vals(3, 2, 1, v), vals(3, 2, 1, m), 0.5f, 8.0f);
    expect("attn gqa alibi", t,
           (double[]){1.3923368301671086, -0.3923368301671084, 1.5009765612582384, -0.5009765612582384,
                      2.298289746317721, 1.351810226515064, 2.1227424845364107, 0.7267665894388602},
           8);
    struct lm_tensor *kh = lm_new_tensor_3d(ctx, LM_TYPE_F16, 1, 2, 1);
    struct lm_tensor *vh = lm_new_tensor_3d(ctx, LM_TYPE_F16, 2, 1, 1);
    if (kh && vh) {
        lm_set_f32_nd(kh, 0, 0, 0, 0, 1.0f);
        lm_set_f32_nd(kh, 0, 1, 0, 0, -2.0f);
        lm_set_f32_nd(vh, 0, 0, 0, 0, 0.1f);
        lm_set_f32_nd(vh, 1, 0, 0, 0, 1.0f);
    }
    const float qh[2] = {1.0f / 3.0f, 3.0f}, mh[4] = {0, 0, -INFINITY, -INFINITY};
    /* unrounded this would be 0.3420472792 */
    expect("attn f16", lm_attn(ctx, vals(1, 2, 1, qh), kh, vh, vals(2, 2, 1, mh), 1.0f, 0.0f),
           (double[]){0.34212082624435425, 0.0}, 2);
}

/* lm_attn refuses operands that do not fit (in an arena of its own: the
 * first error sticks until a reset). */
static void test_attn_checks(void)
{
    struct lm_ctx *c;
    struct lm_ctx_params p = {.mem_size = 1 << 20, .no_alloc = true};
    CHECK(lm_ctx_new(&p, &c) == LM_OK);
    if (!c)
        return;
    /* {q: d, n_q, n_head; k: type, d, n_kv, n_head_kv; v (f16): n_kv, d_v, n_head_kv} */
    static const int64_t cases[][10] = {
        {4, 2, 4, LM_TYPE_F16, 4, 5, 2, 5, 4, 2},  /* fits */
        {4, 2, 3, LM_TYPE_F16, 4, 5, 2, 5, 4, 2},  /* 3 heads on 2 kv heads */
        {4, 2, 4, LM_TYPE_F16, 3, 5, 2, 5, 4, 2},  /* d differs */
        {4, 2, 4, LM_TYPE_F16, 4, 5, 2, 6, 4, 2},  /* n_kv differs */
        {4, 2, 4, LM_TYPE_F16, 4, 5, 2, 5, 4, 1},  /* kv heads differ */
        {32, 2, 4, LM_TYPE_Q4_0, 32, 5, 2, 5, 4, 2}, /* a quantized k other than q8_0 */
        {32, 2, 4, LM_TYPE_Q8_0, 32, 5, 2, 5, 4, 2}, /* fits: a q8_0 K cache */
    };
    for (int i = 0; i < 7; i++) {
        const bool fits = i == 0 || i == 6;
        const int64_t *x = cases[i];
        lm_ctx_reset(c);
        struct lm_tensor *q = lm_new_tensor_3d(c, LM_TYPE_F32, x[0], x[1], x[2]);
        struct lm_tensor *k = lm_new_tensor_3d(c, (enum lm_type)x[3], x[4], x[5], x[6]);
        struct lm_tensor *v = lm_new_tensor_3d(c, LM_TYPE_F16, x[7], x[8], x[9]);
        struct lm_tensor *t = lm_attn(c, q, k, v, NULL, 1.0f, 0.0f);
        CHECKF((t != NULL) == fits && (fits || lm_ctx_status(c) == LM_ERR_SHAPE), "attn checks case %d", i);
    }
    lm_ctx_reset(c);
    struct lm_tensor *q = lm_new_tensor_3d(c, LM_TYPE_F32, 4, 3, 2), *k = lm_new_tensor_3d(c, LM_TYPE_F32, 4, 5, 1);
    struct lm_tensor *v = lm_new_tensor_3d(c, LM_TYPE_F32, 5, 4, 1), *m = lm_new_tensor_2d(c, LM_TYPE_F32, 5, 2);
    CHECK(lm_attn(c, q, k, v, m, 1.0f, 0.0f) == NULL && lm_ctx_status(c) == LM_ERR_SHAPE); /* 2 mask rows, 3 queries */
    lm_ctx_reset(c);
    q = lm_new_tensor_3d(c, LM_TYPE_F32, 4, 3, 2);
    v = lm_new_tensor_3d(c, LM_TYPE_F32, 5, 4, 1);
    k = lm_transpose(c, lm_new_tensor_3d(c, LM_TYPE_F32, 5, 4, 1)); /* k rows not contiguous */
    CHECK(lm_attn(c, q, k, v, NULL, 1.0f, 0.0f) == NULL && lm_ctx_status(c) == LM_ERR_SHAPE);
    lm_ctx_reset(c);
    q = lm_new_tensor_3d(c, LM_TYPE_F32, 4, 3, 2);
    k = lm_new_tensor_3d(c, LM_TYPE_F32, 4, 5, 1);
    v = lm_new_tensor_3d(c, LM_TYPE_F32, 5, 4, 1);
    CHECK(lm_attn(c, NULL, k, v, NULL, 1.0f, 0.0f) == NULL && lm_ctx_status(c) == LM_OK); /* NULL source */
    CHECK(lm_attn(c, q, k, v, NULL, NAN, 0.0f) == NULL && lm_ctx_status(c) == LM_ERR_SHAPE);
    lm_ctx_free(c);
}

static void test_rope(void)
{
    const float x[6] = {1, 2, 3, 4, 5, 6};
    struct lm_rope_params p = {.n_dims = 4, .mode = LM_ROPE_NORMAL, .freq_base = 10000.0f, .freq_scale = 1.0f,
                               .attn_factor = 1.0f, .beta_fast = 32.0f, .beta_slow = 1.0f};
    /* pos 1: pair angles 1 and 10000^(-1/2) = 0.01; dims 4, 5 unrotated */
    struct lm_tensor *pos1 = ivals(1, 1, (int32_t[]){1});
    expect("rope normal pos 1", lm_rope(ctx, vals(6, 1, 1, x), pos1, &p),
           (double[]){-1.1426396637476532, 1.922075596544176, 2.9598506679133294, 4.029799501669161, 5, 6}, 6);
    p.mode = LM_ROPE_NEOX; /* pairs (0,2) at angle 1 and (1,3) at 0.01 */
    expect("rope neox pos 1", lm_rope(ctx, vals(6, 1, 1, x), pos1, &p),
           (double[]){-1.9841106485555495, 1.959900667496664, 2.4623779024123156, 4.019799668334994, 5, 6}, 6);
    /* YaRN at pos 3: corr dims [0, 2]; pair 0 ramp 1 (pure extrapolation,
     * angle 3), pair 1 ramp 0.5 (angle 0.5*0.0075 + 0.5*0.03 = 0.01875);
     * mscale 1 + 0.1 ln(1/0.25) */
    p.mode = LM_ROPE_NORMAL;
    p.freq_scale = 0.25f;
    p.ext_factor = 1.0f;
    p.n_ctx_orig = 4096;
    expect("rope yarn pos 3", lm_rope(ctx, vals(4, 1, 1, x), ivals(1, 1, (int32_t[]){3}), &p),
           (double[]){-1.4486013885619173, -2.093785801117205, 3.329895672756629, 4.617761322120746}, 4);
    /* pos 0 is the identity for every mode */
    p = (struct lm_rope_params){.n_dims = 6, .mode = LM_ROPE_NEOX, .freq_base = 1e4f, .freq_scale = 1.0f,
                                .attn_factor = 1.0f};
    expect("rope pos 0", lm_rope(ctx, vals(6, 1, 1, x), ivals(1, 1, (int32_t[]){0}), &p),
           (double[]){1, 2, 3, 4, 5, 6}, 6);
}

static void test_matmul(void)
{
    /* a rows [1,2,3], [4,5,6]; b rows [1,0,1], [0,1,0] */
    struct lm_tensor *a = vals(3, 2, 1, (float[]){1, 2, 3, 4, 5, 6});
    struct lm_tensor *b = vals(3, 2, 1, (float[]){1, 0, 1, 0, 1, 0});
    expect("mul_mat", lm_mul_mat(ctx, a, b), (double[]){4, 10, 2, 5}, 4);
    /* broadcast: a [1,1,2] (10, 20), b [1,1,4]: b slice i uses a slice i / 2 */
    expect("mul_mat broadcast", lm_mul_mat(ctx, vals(1, 1, 2, (float[]){10, 20}), vals(1, 1, 4, (float[]){1, 2, 3, 4})),
           (double[]){10, 20, 60, 80}, 4);
    /* a Q8_0 block with d = 0.5 and q = k - 16: dot with ones = 0.5 * sum(q) = -8 */
    struct lm_tensor *q = lm_new_tensor_2d(ctx, LM_TYPE_Q8_0, 32, 1);
    CHECK(q != NULL);
    if (q) {
        uint8_t *blk = q->data;
        lm_fp16 d = lm_fp32_to_fp16(0.5f);
        memcpy(blk, &d, 2);
        for (int k = 0; k < 32; k++)
            blk[2 + k] = (uint8_t)(int8_t)(k - 16);
    }
    float ones[32];
    for (int k = 0; k < 32; k++)
        ones[k] = 1.0f;
    expect("mul_mat q8_0", lm_mul_mat(ctx, q, vals(32, 1, 1, ones)), (double[]){-8}, 1);
    /* F16 weights hold 1/3 rounded to f16: 0.333251953125 */
    struct lm_tensor *h = lm_new_tensor_1d(ctx, LM_TYPE_F16, 2);
    if (h)
        ((lm_fp16 *)h->data)[0] = ((lm_fp16 *)h->data)[1] = lm_fp32_to_fp16(1.0f / 3.0f);
    expect("mul_mat f16", lm_mul_mat(ctx, h, vals(2, 1, 1, (float[]){1, 2})), (double[]){3 * 0.333251953125}, 1);
    /* experts e0 = [1, 1], e1 = [1, -1]; tokens [3,4], [5,1]; ids t0 (1, 0), t1 (0, 7 = none) */
    struct lm_tensor *as = vals(2, 1, 2, (float[]){1, 1, 1, -1});
    struct lm_tensor *tb = vals(2, 1, 2, (float[]){3, 4, 5, 1});
    expect("mul_mat_id", lm_mul_mat_id(ctx, as, tb, ivals(2, 2, (int32_t[]){1, 0, 0, 7})), (double[]){-1, 7, 6, 0}, 4);
    /* B1 == n_used: slot s reads b row s; one token, ids (1, 0) */
    expect("mul_mat_id per-slot rows", lm_mul_mat_id(ctx, as, vals(2, 2, 1, (float[]){3, 4, 5, 1}), ivals(2, 1, (int32_t[]){1, 0})),
           (double[]){-1, 6}, 2);
    /* rows 2, 0 and out-of-range 5 (zero row) */
    struct lm_tensor *w = vals(2, 3, 1, (float[]){1, 2, 3, 4, 5, 6});
    expect("get_rows", lm_get_rows(ctx, w, ivals(3, 1, (int32_t[]){2, 0, 5})), (double[]){5, 6, 1, 2, 0, 0}, 6);
    /* per-slice ids: a [1, 2, 2] (slices (1,2), (3,4)), ids [1, 2] = (1, 0): slice 0 row 1, slice 1 row 0 */
    struct lm_tensor *a3 = vals(1, 2, 2, (float[]){1, 2, 3, 4});
    expect("get_rows per slice", lm_get_rows(ctx, a3, ivals(1, 2, (int32_t[]){1, 0})), (double[]){2, 3}, 2);
    /* a with one slice is shared by every ids slice */
    expect("get_rows shared slice", lm_get_rows(ctx, vals(1, 2, 1, (float[]){1, 2}), ivals(1, 2, (int32_t[]){1, 0})),
           (double[]){2, 1}, 2);
}

static void test_copies(void)
{
    struct lm_tensor *a = vals(2, 3, 1, (float[]){1, 2, 3, 4, 5, 6});
    /* CONT of the transpose: [3,2] rows (1,3,5), (2,4,6) */
    expect("cont transpose", lm_cont(ctx, lm_transpose(ctx, a)), (double[]){1, 3, 5, 2, 4, 6}, 6);
    /* CPY keeps flat order across shapes: a [2,3] into the transposed view
     * [3,2] of b0 [2,3]; view element (i0, i1) = a_flat[i0 + 3 i1], stored
     * at b0[i1 + 2 i0], so b0 = 1 4 2 5 3 6 */
    struct lm_tensor *b0 = lm_new_tensor_2d(ctx, LM_TYPE_F32, 2, 3);
    expect("cpy into transposed view", lm_cpy(ctx, a, lm_transpose(ctx, b0)), (double[]){1, 2, 3, 4, 5, 6}, 6);
    if (b0) {
        const float want_b0[6] = {1, 4, 2, 5, 3, 6};
        CHECK(!memcmp(b0->data, want_b0, sizeof want_b0));
    }
    struct lm_tensor *bh = lm_new_tensor_2d(ctx, LM_TYPE_F16, 2, 3); /* the same through a conversion */
    expect("cpy f32->f16 into transposed view", lm_cpy(ctx, a, lm_transpose(ctx, bh)), (double[]){1, 2, 3, 4, 5, 6}, 6);
    const float want_bh[6] = {1, 4, 2, 5, 3, 6};
    for (int k = 0; bh && k < 6; k++)
        CHECK(lm_get_f32_nd(bh, k % 2, k / 2, 0, 0) == want_bh[k]);
    struct lm_tensor *h = lm_new_tensor_1d(ctx, LM_TYPE_F16, 2);
    struct lm_tensor *r = lm_cpy(ctx, vals(2, 1, 1, (float[]){1.0f / 3.0f, 65520.0f}), h);
    expect("cpy f32->f16 rounds", r, (double[]){0.333251953125, INFINITY}, 2);
    struct lm_tensor *bf = lm_new_tensor_1d(ctx, LM_TYPE_BF16, 1);
    expect("cpy f32->bf16 rounds", lm_cpy(ctx, vals(1, 1, 1, (float[]){1.0f / 3.0f}), bf), (double[]){0.333984375}, 1);
    expect("repeat", lm_repeat(ctx, vals(2, 1, 1, (float[]){1, 2}), lm_new_tensor_2d(ctx, LM_TYPE_F32, 4, 2)),
           (double[]){1, 2, 1, 2, 1, 2, 1, 2}, 8);
    expect("concat dim 1", lm_concat(ctx, vals(2, 1, 1, (float[]){1, 2}), vals(2, 2, 1, (float[]){3, 4, 5, 6}), 1),
           (double[]){1, 2, 3, 4, 5, 6}, 6);
    expect("concat dim 0", lm_concat(ctx, vals(1, 2, 1, (float[]){1, 2}), vals(2, 2, 1, (float[]){3, 4, 5, 6}), 0),
           (double[]){1, 3, 4, 2, 5, 6}, 6);
    /* F32 -> Q8_0 encodes within half a step of d = amax / 127 */
    float x[32];
    for (int k = 0; k < 32; k++)
        x[k] = (float)(k - 16) / 16.0f;
    struct lm_tensor *q = lm_new_tensor_1d(ctx, LM_TYPE_Q8_0, 32);
    struct lm_tensor *qc = lm_cpy(ctx, vals(32, 1, 1, x), q);
    struct lm_graph *g = lm_graph_new(ctx, 8);
    CHECK(qc && g && lm_graph_expand(g, qc) == LM_OK && lm_backend_graph_compute(be, g) == LM_OK);
    float y[32];
    lm_quant_traits(LM_TYPE_Q8_0)->to_float(q->data, y, 32);
    for (int k = 0; k < 32; k++)
        CHECKF(fabsf(y[k] - x[k]) <= 0.5f / 127.0f + 1e-6f, "q8_0 [%d] %g vs %g", k, (double)y[k], (double)x[k]);
}

static void test_argsort(void)
{
    const float a[5] = {3, 1, 2, 1, 3};
    expect("argsort asc stable", lm_argsort(ctx, vals(5, 1, 1, a), LM_SORT_ASC), (double[]){1, 3, 2, 0, 4}, 5);
    expect("argsort desc stable", lm_argsort(ctx, vals(5, 1, 1, a), LM_SORT_DESC), (double[]){0, 4, 2, 1, 3}, 5);
    expect("top_k 2", lm_top_k(ctx, vals(5, 1, 1, a), 2), (double[]){0, 4}, 2);
}

/* ---- training ops ---- */

static void test_train(void)
{
    /* dy columns (1,2) (3,4) (5,6) (7,8) (9,10) with ids 1, 3 (out of range), 1, -1, 0 into 3 rows */
    struct lm_tensor *dy = vals(2, 5, 1, (float[]){1, 2, 3, 4, 5, 6, 7, 8, 9, 10});
    expect("get_rows_back", lm_get_rows_back(ctx, dy, ivals(5, 1, (int32_t[]){1, 3, 1, -1, 0}),
                                             lm_new_tensor_2d(ctx, LM_TYPE_F16, 2, 3)),
           (double[]){9, 10, 6, 8, 0, 0}, 6);
    /* transposed dy: column n of the view is row n of the stored [5, 2] */
    struct lm_tensor *dyt = lm_transpose(ctx, vals(5, 2, 1, (float[]){1, 2, 3, 4, 5, 6, 7, 8, 9, 10}));
    struct lm_tensor *ids2 = ivals(5, 1, (int32_t[]){0, 0, 1, 0, 1});
    expect("get_rows_back transposed dy", lm_get_rows_back(ctx, dyt, ids2, lm_new_tensor_2d(ctx, LM_TYPE_F32, 2, 2)),
           (double[]){1 + 2 + 4, 6 + 7 + 9, 3 + 5, 8 + 10}, 4);
    /* [4, 2] = 1..8 summed into [2, 1]: (1+3+5+7, 2+4+6+8) */
    expect("repeat_back", lm_repeat_back(ctx, vals(4, 2, 1, (float[]){1, 2, 3, 4, 5, 6, 7, 8}),
                                         lm_new_tensor_2d(ctx, LM_TYPE_F32, 2, 1)),
           (double[]){16, 20}, 2);
    /* x (3, 4), dy (1, 0), eps 0: r = 1/sqrt(12.5), sum(dy x) = 3 */
    expect("rms_norm_back", lm_rms_norm_back(ctx, vals(2, 1, 1, (float[]){3, 4}), vals(2, 1, 1, (float[]){1, 0}), 0.0f),
           (double[]){0.18101933598375616, -0.13576450198781712}, 2);
    /* ROPE_BACK at pos 1 rotates by -1 and -0.01: (x0 c + x1 s, -x0 s + x1 c) */
    const float x[6] = {1, 2, 3, 4, 5, 6};
    struct lm_rope_params p = {.n_dims = 4, .mode = LM_ROPE_NORMAL, .freq_base = 10000.0f, .freq_scale = 1.0f,
                               .attn_factor = 1.0f, .beta_fast = 32.0f, .beta_slow = 1.0f};
    struct lm_tensor *pos1 = ivals(1, 1, (int32_t[]){1});
    expect("rope_back normal pos 1", lm_rope_back(ctx, vals(6, 1, 1, x), pos1, &p),
           (double[]){2.2232442754839328, 0.23913362692838303, 3.0398493345866626, 3.969800501664161, 5, 6}, 6);
    /* the transpose of a rotation is its inverse: rope_back(rope(x)) = x (NEOX, YaRN's mscale = 1 here) */
    p.mode = LM_ROPE_NEOX;
    expect("rope_back of rope", lm_rope_back(ctx, lm_rope(ctx, vals(6, 1, 1, x), pos1, &p), pos1, &p),
           (double[]){1, 2, 3, 4, 5, 6}, 6);
    /* y (1/4, 3/4), dy (1, 0), scale 2: sum = 1/4, da = 2 y (dy - 1/4) */
    struct lm_tensor *sy = vals(2, 1, 1, (float[]){0.25f, 0.75f});
    expect("soft_max_back", lm_soft_max_back(ctx, vals(2, 1, 1, (float[]){1, 0}), sy, 2.0f), (double[]){0.375, -0.375},
           2);
    /* dy (1, -0.5) at x (1, -2) */
    struct lm_tensor *ux = vals(2, 1, 1, (float[]){1, -2}), *udy = vals(2, 1, 1, (float[]){1, -0.5f});
    expect("unary_back silu", lm_unary_back(ctx, ux, udy, LM_UNARY_SILU),
           (double[]){0.9276705118714869, 0.04539212439244773}, 2);
    expect("unary_back gelu", lm_unary_back(ctx, ux, udy, LM_UNARY_GELU),
           (double[]){1.0829640838457826, 0.04304962831180913}, 2);
    expect("unary_back relu", lm_unary_back(ctx, ux, udy, LM_UNARY_RELU), (double[]){1, 0}, 2);
    expect("unary_back neg", lm_unary_back(ctx, ux, udy, LM_UNARY_NEG), (double[]){-1, 0.5}, 2);
    struct lm_tensor *tx = vals(1, 1, 1, (float[]){0.5f});
    expect("unary_back tanh", lm_unary_back(ctx, tx, vals(1, 1, 1, (float[]){1}), LM_UNARY_TANH),
           (double[]){0.7864477329659274}, 1);
    /* rows [0, ln 3] target 1: ln 4 - ln 3; [0, 0] target -1: skipped; [1, 1] target 0: ln 2 */
    struct lm_tensor *lg = vals(2, 3, 1, (float[]){0, (float)log(3.0), 0, 0, 1, 1});
    struct lm_tensor *tg = ivals(3, 1, (int32_t[]){1, -1, 0});
    expect("cross_entropy_loss", lm_cross_entropy_loss(ctx, lg, tg), (double[]){(log(4.0 / 3.0) + log(2.0)) / 2}, 1);
    expect("cross_entropy_loss no valid target", lm_cross_entropy_loss(ctx, lg, ivals(3, 1, (int32_t[]){-1, 2, 5})),
           (double[]){0}, 1);
    /* dloss 2 over 2 valid rows: (softmax - onehot) * 1 */
    expect("cross_entropy_loss_back", lm_cross_entropy_loss_back(ctx, lg, tg, vals(1, 1, 1, (float[]){2})),
           (double[]){0.25, -0.25, 0, 0, -0.5, 0.5}, 6);
}

/* ---- finite differences: each backward op is the derivative of its forward op ---- */

/* A contiguous F32 tensor [n0, n1, n2] of values uniform in +-[0.1, 1.5]
 * (away from RELU's kink at 0), from a fixed LCG. */
static struct lm_tensor *rnd(int64_t n0, int64_t n1, int64_t n2, uint32_t *seed)
{
    struct lm_tensor *t = lm_new_tensor_3d(ctx, LM_TYPE_F32, n0, n1, n2);
    for (int64_t i = 0; t && i < n0 * n1 * n2; i++) {
        *seed = *seed * 1664525u + 1013904223u;
        const float u = (float)(*seed >> 8) / 16777216.0f;
        ((float *)t->data)[i] = (u < 0.5f ? -1.0f : 1.0f) * (0.1f + 2.8f * fabsf(u - 0.5f));
    }
    return t;
}

/* Compute node t on ref; false on failure. */
static bool run(struct lm_tensor *t)
{
    struct lm_graph *g = t ? lm_graph_new(ctx, 32) : NULL;
    return g && lm_graph_expand(g, t) == LM_OK && lm_backend_graph_compute(be, g) == LM_OK;
}

/* L(x) = sum(w * fwd) in double, with fwd computed from the current x. */
static double loss_of(struct lm_tensor *fwd, const struct lm_tensor *w)
{
    if (!run(fwd))
        return NAN;
    double l = 0.0;
    const int64_t n = lm_nelements(fwd);
    for (int64_t k = 0; k < n; k++)
        l += (double)((const float *)w->data)[k] * (double)((const float *)fwd->data)[k];
    return l;
}

/* fwd depends on the leaf x; grad (computed first) is the backward op's
 * dL/dx for L = sum(w * fwd). Every element of x is moved by +-h (the
 * step measured in double after rounding to f32) and the central difference
 * of L must match grad to 1e-3 (relative to max(1, |grad|): the f32 outputs
 * of fwd limit the difference quotient to ~1e-5, and its O(h^2) truncation
 * to ~1e-5 for these smooth functions). */
static void fd_check(const char *what, struct lm_tensor *x, struct lm_tensor *fwd, const struct lm_tensor *w,
                     struct lm_tensor *grad)
{
    CHECKF(x && fwd && w && grad && run(grad), "%s: build or compute failed: %s", what, lm_ctx_error(ctx));
    if (!x || !fwd || !w || !grad)
        return;
    const int64_t n = lm_nelements(x);
    CHECK(lm_nelements(grad) == n);
    float *g = malloc((size_t)n * sizeof *g);
    if (!g)
        return;
    memcpy(g, grad->data, (size_t)n * sizeof *g);
    float *xv = x->data;
    double worst = 0.0;
    for (int64_t i = 0; i < n; i++) {
        const float x0 = xv[i], h = 1e-2f;
        xv[i] = x0 + h;
        const double lp = loss_of(fwd, w), dp = (double)xv[i];
        xv[i] = x0 - h;
        const double lm = loss_of(fwd, w), dm = (double)xv[i];
        xv[i] = x0;
        const double fd = (lp - lm) / (dp - dm), err = fabs(fd - (double)g[i]) / fmax(1.0, fabs((double)g[i]));
        worst = err > worst ? err : worst;
        CHECKF(err <= 1e-3, "%s: d/dx[%lld] = %.7g by differences, %.7g by the backward op", what, (long long)i, fd,
               (double)g[i]);
    }
    if (getenv("LM_OPS_VERBOSE"))
        printf("fd %-24s worst %.2g\n", what, worst);
    free(g);
}

static void test_train_fd(void)
{
    uint32_t seed = 12345;
    /* GET_ROWS: table [3, 4], ids with a repeat and an out-of-range id */
    struct lm_tensor *table = rnd(3, 4, 1, &seed), *ids = ivals(5, 1, (int32_t[]){2, 0, 2, 4, 3});
    struct lm_tensor *w = rnd(3, 5, 1, &seed);
    fd_check("get_rows_back", table, lm_get_rows(ctx, table, ids), w, lm_get_rows_back(ctx, w, ids, table));
    /* REPEAT of [2, 1, 2] to [4, 3, 2] */
    struct lm_tensor *small = rnd(2, 1, 2, &seed), *big = lm_new_tensor_3d(ctx, LM_TYPE_F32, 4, 3, 2);
    w = rnd(4, 3, 2, &seed);
    fd_check("repeat_back", small, lm_repeat(ctx, small, big), w, lm_repeat_back(ctx, w, small));
    /* RMS_NORM of [5, 2] */
    struct lm_tensor *x = rnd(5, 2, 1, &seed);
    w = rnd(5, 2, 1, &seed);
    fd_check("rms_norm_back", x, lm_rms_norm(ctx, x, 1e-3f), w, lm_rms_norm_back(ctx, x, w, 1e-3f));
    /* ROPE, NEOX and NORMAL, 6 of 8 dims, YaRN on: [8, 2 heads, 2 tokens] at positions 3, 17 */
    struct lm_rope_params p = {.n_dims = 6, .mode = LM_ROPE_NEOX, .n_ctx_orig = 64, .freq_base = 100.0f,
                               .freq_scale = 0.5f, .ext_factor = 1.0f, .attn_factor = 1.0f, .beta_fast = 32.0f,
                               .beta_slow = 1.0f};
    struct lm_tensor *pos = ivals(2, 1, (int32_t[]){3, 17});
    for (int m = 0; m < 2; m++) {
        p.mode = m ? LM_ROPE_NORMAL : LM_ROPE_NEOX;
        x = rnd(8, 2, 2, &seed);
        w = rnd(8, 2, 2, &seed);
        fd_check(m ? "rope_back normal" : "rope_back neox", x, lm_rope(ctx, x, pos, &p), w,
                 lm_rope_back(ctx, w, pos, &p));
    }
    /* SOFT_MAX with scale 0.7, a mask with a hidden cell and ALiBi on 3 heads: [4, 2, 3] */
    x = rnd(4, 2, 3, &seed);
    w = rnd(4, 2, 3, &seed);
    struct lm_tensor *mask = vals(4, 2, 1, (float[]){0, -1, -INFINITY, -2, -0.5f, 0, -1, -3});
    struct lm_tensor *y = lm_soft_max_ext(ctx, x, mask, 0.7f, 4.0f);
    fd_check("soft_max_back", x, y, w, lm_soft_max_back(ctx, w, y, 0.7f));
    /* UNARY, each op */
    for (int u = 0; u < LM_UNARY_COUNT; u++) {
        char what[40];
        snprintf(what, sizeof what, "unary_back %s", lm_unary_name((enum lm_unary_op)u));
        x = rnd(7, 1, 1, &seed);
        w = rnd(7, 1, 1, &seed);
        fd_check(what, x, lm_unary(ctx, x, (enum lm_unary_op)u), w, lm_unary_back(ctx, x, w, (enum lm_unary_op)u));
    }
    /* CROSS_ENTROPY_LOSS: logits [5, 4] (scaled up), targets with -1 and V; dloss 1.5 */
    x = rnd(5, 4, 1, &seed);
    for (int i = 0; x && i < 20; i++)
        ((float *)x->data)[i] *= 3.0f;
    struct lm_tensor *tg = ivals(4, 1, (int32_t[]){3, -1, 0, 5}), *dl = vals(1, 1, 1, (float[]){1.5f});
    fd_check("cross_entropy_loss_back", x, lm_cross_entropy_loss(ctx, x, tg), dl,
             lm_cross_entropy_loss_back(ctx, x, tg, dl));
}

static void quiet(enum lm_log_level level, const char *text, void *user) {}

static void test_backend(void)
{
    lm_buft bt = lm_ref_buft();
    CHECK(!strcmp(lm_buft_name(bt), "ref") && lm_buft_is_host(bt) && bt != lm_host_buft());
    CHECK(!strcmp(lm_backend_name(be), "ref") && lm_backend_is_ref(be));
    CHECK(lm_backend_default_buft(be) == bt);
    CHECK(lm_backend_supports_buft(be, bt) && !lm_backend_supports_buft(be, lm_host_buft()));
    struct lm_buffer *buf = NULL;
    CHECK(lm_backend_alloc_buffer(be, 256, &buf) == LM_OK && buf && lm_buffer_is_host(buf));
    struct lm_ctx_params p = {.mem_size = 1 << 16, .no_alloc = true};
    struct lm_ctx *meta = NULL;
    CHECK(lm_ctx_new(&p, &meta) == LM_OK);
    struct lm_tensor *t = lm_new_tensor_1d(meta, LM_TYPE_F32, 4);
    CHECK(buf && t && lm_buffer_place_tensor(buf, t, 64) == LM_OK);
    const float v[4] = {1, 2, 3, 4};
    float w[4] = {0};
    CHECK(lm_tensor_set(t, v, 0, sizeof v) == LM_OK && lm_tensor_get(t, w, 0, sizeof w) == LM_OK);
    CHECK(!memcmp(v, w, sizeof v));
    /* a node whose output has no data is refused, not crashed on */
    struct lm_tensor *s = lm_scale(meta, t, 2.0f);
    struct lm_graph *g = lm_graph_new(meta, 8);
    CHECK(s && g && lm_graph_expand(g, s) == LM_OK);
    lm_log_set(quiet, NULL); /* the expected error message */
    CHECK(lm_backend_graph_compute(be, g) == LM_ERR_INVALID_ARG);
    lm_log_set(NULL, NULL);
    lm_ctx_free(meta);
    lm_buffer_free(buf);
    CHECK(lm_backend_register(lm_ref_backend_reg()) == LM_OK);
    lm_backend_t other = NULL;
    CHECK(lm_backend_init_by_name("ref", &other) == LM_OK && lm_backend_is_ref(other));
    lm_backend_free(other);
    lm_backend_free(NULL);
}

int main(void)
{
    struct lm_ctx_params p = {.mem_size = 8 << 20, .no_alloc = false};
    CHECK(lm_ctx_new(&p, &ctx) == LM_OK);
    CHECK(lm_ref_backend_new(&be) == LM_OK);
    test_elementwise();
    test_rows();
    test_soft_max();
    test_attn();
    test_attn_checks();
    test_rope();
    test_matmul();
    test_copies();
    test_argsort();
    test_train();
    test_train_fd();
    test_backend();
    CHECKF(lm_ctx_status(ctx) == LM_OK, "arena error: %s", lm_ctx_error(ctx));
    lm_backend_free(be);
    lm_ctx_free(ctx);
    return lm_test_summary();
}
