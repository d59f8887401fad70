/* test_gemm_panel.c - the panel GEMM slots (kernels.h lm_gemm_panel_fn; the
 * AMX level's F16, BF16 and quantized (Q4_0, Q8_0, Q4_K..Q6_K) kernels,
 * kernels/x86-amx/):
 *  - encoders: the BF16 rows are lm_fp32_to_bf16's bits in bf16x8 order for
 *    special values (ties, NaN, inf, subnormals) and random bits; the F16 rows
 *    split the F16-rounded value exactly (hi + lo == fp16(x), hi RNE), any n;
 *    the quantized weights' rows are lm_fp32_to_bf16's bits in natural order;
 *  - the kernel called directly on every table that has one: n_groups 1..5
 *    (odd: 8-column tiles), N in {1, 15, 16, 17, 33, 64, 100} (every token
 *    tail), K in {32, 64, 2048, 5632}, activation stride > row, ldc > rows:
 *    each element within 4.8e-7 (K/8 + 8) sum|w a| of the double dot of the
 *    rounded values (F16: plus 2^-15 sum|w a| for the split; quantized: the
 *    decoded weights and the activations rounded to BF16),
 *    within twice that of the generic vec_dot (float types: the quantized
 *    ones' vec_dot rounds activations to Q8), bit-exact for small-integer
 *    inputs (float types, Q4_0), and
 *    nothing written outside the 8 n_groups x N outputs;
 *  - MUL_MAT through the CPU backend on repacked weights at the panel level
 *    vs generic (nmse <= 1e-5; quantized 1e-3: generic rounds the activations
 *    to Q8, the panel to BF16), K up to 11008 (several k-ranges), bit-identical for 1..4 threads and to one
 *    direct kernel call (the matmul really takes the panel path), with 2-D
 *    and 3-D (batched) and transposed activations.
 * Skipped with a notice where no level has a panel GEMM (no AMX). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sched/alloc.h"
#include "core/fp16.h"
#include "cpu/cpu.h"
#include "cpu/cpu_internal.h"
#include "cpu/kernels/kernels.h"
#include "cpu/repack.h"
#include "lm_test.h"
#include "quant/quant.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static float frand(void) /* [-1, 1) */
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((rng >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f;
}

/* The highest level with a BF16-numerics (AMX) panel GEMM for type, or NULL. */
static const struct lm_cpu_kernels *panel_table(enum lm_type type)
{
    for (int isa = (int)lm_cpu_isa_best(); isa > 0; isa--) {
        const struct lm_cpu_kernels *k = lm_cpu_kernels_for((enum lm_cpu_isa)isa);
        if (k && k->type[type].gemm_panel && !k->type[type].panel_exact) /* exact (VNNI) panels: test_gemm.c */
            return k;
    }
    return NULL;
}

static const enum lm_type quant_types[] = {LM_TYPE_Q4_0, LM_TYPE_Q8_0, LM_TYPE_Q2_K, LM_TYPE_Q3_K,
                                           LM_TYPE_Q4_K, LM_TYPE_Q5_K, LM_TYPE_Q6_K}; /* those with a panel */
static bool is_float(enum lm_type type) { return type == LM_TYPE_F16 || type == LM_TYPE_BF16; }
static int64_t block_k(enum lm_type type) { return lm_type_blck(type); }

/* The value the panel path multiplies for activation x (F16: split into hi
 * + lo, within the 2^-15 split bound; BF16 and quantized weights: bf16(x)). */
static float act_value(enum lm_type type, float x)
{
    return type == LM_TYPE_F16 ? lm_fp16_to_fp32(lm_fp32_to_fp16(x)) : lm_bf16_to_fp32(lm_fp32_to_bf16(x));
}

/* ---- encoders ---- */

static void test_encoders(const struct lm_cpu_kernels *kb, const struct lm_cpu_kernels *kh,
                          const struct lm_cpu_kernels *kq)
{
    static const uint32_t special[] = {0x00000000u, 0x80000000u, 0x3f800000u, 0xbf800000u, 0x7f7fffffu, 0xff7f8000u,
                                       0x7f7f7fffu, 0xff800000u, 0x7f800000u, 0x7fc00000u, 0xffc00001u, 0x7f800001u,
                                       0x7fa00000u, 0x00000001u, 0x00008000u, 0x00018000u, 0x80007fffu, 0x3f808000u,
                                       0x3f818000u, 0x3f808001u, 0x477fe000u, 0x477ff000u, 0x33800000u, 0x33000001u};
    enum { N = 1024 };
    float x[N];
    lm_bf16 got[2 * N + 8];
    for (int i = 0; i < N; i++) {
        uint32_t u = (size_t)i < sizeof special / sizeof special[0] ? special[i] : (uint32_t)(rng >> 32);
        frand();
        memcpy(&x[i], &u, sizeof u);
    }
    if (kb) {
        memset(got, 0x5a, sizeof got);
        kb->type[LM_TYPE_BF16].panel_from_float(x, got, N);
        int bad = 0;
        for (int i = 0; i < N; i++) {
            const int j = i / 16 * 16, t = i % 16, pos = j + (t < 8 ? 2 * t : 2 * (t - 8) + 1);
            bad += got[pos] != lm_fp32_to_bf16(x[i]);
        }
        CHECKF(bad == 0, "bf16 panel encoder: %d values differ from lm_fp32_to_bf16", bad);
        CHECK(got[N] == 0x5a5a);
    }
    if (kh) {
        for (int n = 1; n <= 80; n += n < 40 ? 1 : 13) {
            memset(got, 0x5a, sizeof got);
            kh->type[LM_TYPE_F16].panel_from_float(x + 3, got, n);
            int bad = 0;
            for (int i = 0; i < n; i++) {
                const float f = lm_fp16_to_fp32(lm_fp32_to_fp16(x[3 + i]));
                const float hi = lm_bf16_to_fp32(got[i]), lo = lm_bf16_to_fp32(got[n + i]);
                if (isnan(f))
                    bad += !isnan(hi);
                else if (isinf(f))
                    bad += hi != f;
                else
                    bad += got[i] != lm_fp32_to_bf16(f) || hi + lo != f;
            }
            CHECKF(bad == 0 && got[2 * n] == 0x5a5a, "f16 panel encoder n %d: %d values not split exactly", n, bad);
        }
    }
    if (kq) { /* plain BF16 rows: lm_fp32_to_bf16's bits, in order, nothing written past n */
        for (int n = 1; n <= 1024; n += n < 40 ? 1 : n < 100 ? 13 : 461) {
            memset(got, 0x5a, sizeof got);
            kq->type[LM_TYPE_Q4_0].panel_from_float(x, got, n);
            int bad = 0;
            for (int i = 0; i < n; i++)
                bad += got[i] != lm_fp32_to_bf16(x[i]);
            CHECKF(bad == 0 && got[n] == 0x5a5a, "quantized panel encoder n %d: %d values differ from lm_fp32_to_bf16",
                   n, bad);
        }
    }
}

/* ---- direct kernel calls ---- */

struct setup {
    enum lm_type type;
    int64_t K;
    float *wf;     /* MAXG * 8 rows of K stored weight values */
    float *af;     /* MAXN rows of K activation values (as the kernel rounds them) */
    char *plain;   /* the weights, plain rows */
    char *packed;  /* repacked */
    char *act;     /* MAXN encoded activation rows, by bytes apart */
    char *dotrow;  /* MAXN activation rows in the generic vec_dot type */
    size_t by;
    double *want, *mag; /* [c * MAXG * 8 + r]: double dot of the values, sum |w a| */
    float *vdot;        /* the generic vec_dot */
};
enum { MAXG = 5, MAXN = 100, SENT_ROWS = 5 };
static const float SENTINEL = 1234.5f;

static void setup_new(struct setup *S, const struct lm_cpu_kernels *k, enum lm_type type, int64_t K, bool exact)
{
    const struct lm_cpu_type_kernels *tk = &k->type[type];
    const struct lm_cpu_kernels *gen = lm_cpu_kernels_for(LM_ISA_GENERIC);
    const enum lm_type vt = gen->type[type].vec_dot_type;
    const int64_t M = MAXG * LM_REPACK_ROWS;
    S->type = type;
    S->K = K;
    S->by = tk->panel_row_size(K) + 36;
    S->wf = malloc(sizeof(float) * (size_t)(M * K));
    S->af = malloc(sizeof(float) * (size_t)(MAXN * K));
    S->plain = malloc(lm_row_size(type, K) * (size_t)M);
    S->packed = malloc(lm_row_size(type, K) * (size_t)M);
    S->act = malloc(S->by * MAXN);
    S->dotrow = malloc(lm_row_size(vt, K) * MAXN);
    float *x = malloc(sizeof(float) * (size_t)K);
    for (int64_t i = 0; i < M * K; i++)
        S->wf[i] = exact ? (float)(int)(frand() * 5.0f) : frand();
    lm_quantize_chunk(type, S->wf, S->plain, 0, M, K, NULL);
    lm_quant_traits(type)->to_float(S->plain, S->wf, M * K);
    for (int64_t i = 0; !is_float(type) && i < M * K; i++) /* quantized: B tiles hold bf16(decoded) */
        S->wf[i] = lm_bf16_to_fp32(lm_fp32_to_bf16(S->wf[i]));
    lm_repack_rows(type, S->plain, S->packed, M, K);
    for (int c = 0; c < MAXN; c++) {
        for (int64_t i = 0; i < K; i++) /* exact: small integers; else mixed magnitudes */
            x[i] = exact ? (float)(int)(frand() * 5.0f) : frand() * (c % 3 == 0 ? 100.0f : 1.0f);
        tk->panel_from_float(x, S->act + (size_t)c * S->by, K);
        gen->type[vt].from_float(x, S->dotrow + (size_t)c * lm_row_size(vt, K), K);
        for (int64_t i = 0; i < K; i++)
            S->af[c * K + i] = act_value(type, x[i]);
    }
    free(x);
    S->want = malloc(sizeof(double) * (size_t)(MAXN * M));
    S->mag = malloc(sizeof(double) * (size_t)(MAXN * M));
    S->vdot = malloc(sizeof(float) * (size_t)(MAXN * M));
    for (int c = 0; c < MAXN; c++) {
        for (int64_t r = 0; r < M; r++) {
            const float *w = S->wf + r * K, *a = S->af + c * K;
            double want = 0, mag = 0;
            for (int64_t i = 0; i < K; i++) {
                want += (double)w[i] * a[i];
                mag += fabs((double)w[i] * a[i]);
            }
            S->want[c * M + r] = want;
            S->mag[c * M + r] = mag;
            gen->type[type].vec_dot(K, &S->vdot[c * M + r], S->plain + (size_t)r * lm_row_size(type, K),
                                    S->dotrow + (size_t)c * lm_row_size(vt, K));
        }
    }
}

static void setup_free(struct setup *S)
{
    free(S->wf);
    free(S->af);
    free(S->plain);
    free(S->packed);
    free(S->act);
    free(S->dotrow);
    free(S->want);
    free(S->mag);
    free(S->vdot);
}

/* n_groups x N through the kernel, every output checked; returns the worst error / magnitude. */
static double kernel_case(const struct lm_cpu_kernels *k, const struct setup *S, int ng, int N, bool exact)
{
    const struct lm_cpu_type_kernels *tk = &k->type[S->type];
    const int64_t K = S->K, rows = (int64_t)ng * LM_REPACK_ROWS;
    const size_t ldc = (size_t)rows + SENT_ROWS, group = lm_row_size(S->type, K) * LM_REPACK_ROWS;
    float *s = malloc(sizeof(float) * ldc * (size_t)(N + 1));
    void *scratch = aligned_alloc(64, (tk->panel_scratch(K) + 63) / 64 * 64);
    for (size_t i = 0; i < ldc * (size_t)(N + 1); i++)
        s[i] = SENTINEL;
    tk->gemm_panel(K, ng, group, s, ldc, S->packed, S->act, S->by, N, scratch);
    const double split = S->type == LM_TYPE_F16 ? 0x1p-15 : 0.0;
    const bool vs_vdot = is_float(S->type); /* quantized vec_dots round activations to Q8 */
    double worst = 0;
    int bad = 0, outside = 0;
    for (int c = 0; c <= N; c++) {
        for (size_t r = 0; r < ldc; r++) {
            const float got = s[(size_t)c * ldc + r];
            if (c == N || r >= (size_t)rows) {
                outside += got != SENTINEL;
                continue;
            }
            const size_t at = (size_t)c * MAXG * LM_REPACK_ROWS + r;
            const double want = S->want[at], mag = S->mag[at];
            const float v = S->vdot[at];
            const double bound = exact ? 0 : (4.8e-7 * (double)(K / 8 + 8) + split) * mag;
            const double err = fabs(got - want);
            worst = mag > 0 && err / mag > worst ? err / mag : worst;
            if (!(err <= bound) || (vs_vdot && !(fabs((double)got - v) <= 2 * bound))) {
                if (bad++ < 3)
                    fprintf(stderr, "%s K%lld ng %d N %d: col %d row %zu: %.9g, want %.9g, vec_dot %.9g (bound %.3g)\n",
                            lm_type_name(S->type), (long long)K, ng, N, c, r, got, want, v, bound);
            }
        }
    }
    CHECKF(bad == 0, "%s K%lld ng %d N %d: %d outputs out of bound", lm_type_name(S->type), (long long)K, ng, N, bad);
    CHECKF(outside == 0, "%s K%lld ng %d N %d: %d writes outside the outputs", lm_type_name(S->type), (long long)K,
           ng, N, outside);
    free(s);
    free(scratch);
    return worst;
}

static void test_kernels(const struct lm_cpu_kernels *k, enum lm_type type)
{
    static const int64_t Ks_small[] = {32, 64, 2048, 5632}, Ks_k[] = {256, 512, 2048, 5632};
    const int64_t *Ks = block_k(type) == 256 ? Ks_k : Ks_small;
    static const int Ns[] = {1, 15, 16, 17, 33, 64, 100};
    int cases = 0;
    double worst = 0;
    for (size_t ik = 0; ik < 4; ik++) {
        struct setup S;
        setup_new(&S, k, type, Ks[ik], false);
        for (int ng = 1; ng <= MAXG; ng++) {
            for (size_t in = 0; in < sizeof Ns / sizeof Ns[0]; in++) {
                if (Ks[ik] == 5632 && ng % 2 == 0 && Ns[in] != 100)
                    continue; /* keep the largest K short: every tail still covered */
                cases++;
                double w = kernel_case(k, &S, ng, Ns[in], false);
                worst = w > worst ? w : worst;
            }
        }
        setup_free(&S);
    }
    /* exact: small-integer weights and activations; Q4_0 decodes them to
     * multiples of d in {1/8, 1/4, 3/8, 1/2} (exact in BF16, sums exact in
     * fp32); other quantized types decode to values whose sums need more bits */
    const int exact = is_float(type) || type == LM_TYPE_Q4_0 ? 2 : 0;
    if (exact) {
        struct setup E;
        setup_new(&E, k, type, 2048, true);
        kernel_case(k, &E, 5, 100, true);
        kernel_case(k, &E, 2, 17, true);
        setup_free(&E);
    }
    printf("%s %s panel: %d direct cases (+%d exact), worst error / magnitude %.3g\n", lm_type_name(type),
           lm_cpu_isa_name(k->isa), cases, exact, worst);
}

/* ---- MUL_MAT through the backend ---- */

/* y = a x b, a (M x K of type) repacked; b [K, N, B2] from b_data (or its
 * transposed twin when permuted: non-unit row stride). */
static void run_matmul(enum lm_type type, const void *a_bytes, int64_t M, int64_t K, const float *b_data, int64_t N,
                       int64_t B2, bool permuted, int nth, float *out)
{
    struct lm_ctx *wctx, *ctx;
    const size_t nb = (size_t)(K * N * B2);
    struct lm_ctx_params wp = {.mem_size = 4 * lm_tensor_overhead(), .no_alloc = true};
    struct lm_ctx_params gp = {.mem_size = 16 * lm_tensor_overhead() + lm_graph_overhead(16) +
                                           2 * sizeof(float) * (nb + (size_t)(M * N * B2)) + (1 << 16),
                               .no_alloc = false};
    lm_ctx_new(&wp, &wctx);
    lm_ctx_new(&gp, &ctx);
    struct lm_tensor *a = lm_new_tensor_2d(wctx, type, K, M);
    struct lm_buffer *buf = NULL;
    CHECK(lm_alloc_ctx_tensors(wctx, lm_cpu_repack_buft(), &buf) == LM_OK);
    CHECK(lm_tensor_set(a, a_bytes, 0, lm_nbytes(a)) == LM_OK);
    struct lm_tensor *b;
    if (permuted) {
        struct lm_tensor *bt = lm_new_tensor_2d(ctx, LM_TYPE_F32, N, K);
        for (int64_t k = 0; k < K; k++)
            for (int64_t n = 0; n < N; n++)
                ((float *)bt->data)[k * N + n] = b_data[n * K + k];
        b = lm_transpose(ctx, bt);
    } else {
        b = lm_new_tensor_3d(ctx, LM_TYPE_F32, K, N, B2);
        memcpy(b->data, b_data, sizeof(float) * nb);
    }
    struct lm_tensor *y = lm_mul_mat(ctx, a, b);
    struct lm_graph *g = lm_graph_new(ctx, 16);
    CHECK(y && lm_graph_expand(g, y) == LM_OK);
    lm_backend_t be;
    CHECK(lm_cpu_backend_new_unclamped(nth, &be) == LM_OK);
    CHECK(lm_backend_graph_compute(be, g) == LM_OK);
    memcpy(out, y->data, sizeof(float) * (size_t)(M * N * B2));
    lm_backend_free(be);
    lm_buffer_free(buf);
    lm_ctx_free(ctx);
    lm_ctx_free(wctx);
}

/* The panel kernel called once over the whole matrix (batch 0). */
static void direct_panel(const struct lm_cpu_kernels *k, enum lm_type type, const void *plain, int64_t M, int64_t K,
                         const float *b_data, int64_t N, float *out)
{
    const struct lm_cpu_type_kernels *tk = &k->type[type];
    const size_t row = tk->panel_row_size(K), wbytes = lm_row_size(type, K) * (size_t)M;
    char *packed = malloc(wbytes), *act = malloc(row * (size_t)N);
    void *scratch = aligned_alloc(64, (tk->panel_scratch(K) + 63) / 64 * 64);
    lm_repack_rows(type, plain, packed, M, K);
    for (int64_t c = 0; c < N; c++)
        tk->panel_from_float(b_data + c * K, act + (size_t)c * row, K);
    tk->gemm_panel(K, M / LM_REPACK_ROWS, lm_row_size(type, K) * LM_REPACK_ROWS, out, (size_t)M, packed, act, row, N,
                   scratch);
    free(packed);
    free(act);
    free(scratch);
}

static void test_matmul(const struct lm_cpu_kernels *k, enum lm_type type)
{
    static const struct {
        int64_t M, K, N, B2;
        bool permuted;
    } cases[] = {{40, 2048, 100, 1, false}, {24, 64, 32, 2, false}, {56, 96, 33, 1, true},
                 {8, 32, 47, 3, false},     {152, 2048, 40, 1, false}, /* 19 groups: several units and blocks */
                 {24, 11008, 33, 1, false}}; /* three k-ranges (4096, 4096, 2816) */
    double worst = 0;
    int runs = 0;
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        const int64_t M = cases[ci].M, B2 = cases[ci].B2, min_n = k->type[type].panel_min_n;
        /* at least panel_min_n columns, the same token tail (N mod 32) */
        const int64_t N = cases[ci].N + (cases[ci].N < min_n ? (min_n - cases[ci].N + 31) / 32 * 32 : 0);
        const int64_t bk = block_k(type), K = (cases[ci].K + bk - 1) / bk * bk; /* K-quants: 256 */
        const size_t nout = (size_t)(M * N * B2);
        CHECK(N >= k->type[type].panel_min_n && K % LM_GEMM_PANEL_K == 0); /* the panel path is taken */
        float *af = malloc(sizeof(float) * (size_t)(M * K)), *bf = malloc(sizeof(float) * (size_t)(K * N * B2));
        for (int64_t i = 0; i < M * K; i++)
            af[i] = frand();
        for (int64_t i = 0; i < K * N * B2; i++)
            bf[i] = frand();
        char *aq = malloc(lm_row_size(type, K) * (size_t)M);
        lm_quantize_chunk(type, af, aq, 0, M, K, NULL);
        float *gen = malloc(sizeof(float) * nout), *one = malloc(sizeof(float) * nout);
        float *got = malloc(sizeof(float) * nout), *direct = malloc(sizeof(float) * (size_t)(M * N));
        lm_cpu_isa_limit(LM_ISA_GENERIC);
        run_matmul(type, aq, M, K, bf, N, B2, cases[ci].permuted, 2, gen);
        lm_cpu_isa_limit(k->isa);
        run_matmul(type, aq, M, K, bf, N, B2, cases[ci].permuted, 1, one);
        double err = 0, ref = 0;
        for (size_t i = 0; i < nout; i++) {
            err += (one[i] - gen[i]) * (double)(one[i] - gen[i]);
            ref += (double)gen[i] * gen[i];
        }
        const double nmse = ref > 0 ? err / ref : err;
        worst = nmse > worst ? nmse : worst;
        CHECKF(nmse <= (is_float(type) ? 1e-5 : 1e-3), "%s M%lld K%lld N%lld: nmse %g vs generic", lm_type_name(type),
               (long long)M,
               (long long)K, (long long)N, nmse);
        direct_panel(k, type, aq, M, K, bf, N, direct);
        CHECKF(!memcmp(direct, one, sizeof(float) * (size_t)(M * N)), "%s M%lld K%lld N%lld: matmul != direct panel call",
               lm_type_name(type), (long long)M, (long long)K, (long long)N);
        for (int nth = 2; nth <= 4; nth++, runs++) {
            run_matmul(type, aq, M, K, bf, N, B2, cases[ci].permuted, nth, got);
            CHECKF(!memcmp(got, one, sizeof(float) * nout), "%s M%lld K%lld N%lld: %d threads not bit-identical",
                   lm_type_name(type), (long long)M, (long long)K, (long long)N, nth);
        }
        free(af);
        free(bf);
        free(aq);
        free(gen);
        free(one);
        free(got);
        free(direct);
    }
    lm_cpu_isa_limit(lm_cpu_isa_best());
    printf("%s %s panel: %d matmuls, worst nmse vs generic %.3g\n", lm_type_name(type), lm_cpu_isa_name(k->isa),
           runs + 2 * (int)(sizeof cases / sizeof cases[0]), worst);
}

int main(void)
{
    const struct lm_cpu_kernels *kb = panel_table(LM_TYPE_BF16), *kh = panel_table(LM_TYPE_F16);
    const struct lm_cpu_kernels *kq = panel_table(LM_TYPE_Q4_0);
    if (!kb && !kh && !kq) {
        printf("no panel GEMM on this machine/build (best level %s): skipped\n", lm_cpu_isa_name(lm_cpu_isa_best()));
        return lm_test_summary();
    }
    test_encoders(kb, kh, kq);
    if (kb) {
        test_kernels(kb, LM_TYPE_BF16);
        test_matmul(kb, LM_TYPE_BF16);
    }
    if (kh) {
        test_kernels(kh, LM_TYPE_F16);
        test_matmul(kh, LM_TYPE_F16);
    }
    for (size_t i = 0; i < sizeof quant_types / sizeof quant_types[0]; i++) {
        const struct lm_cpu_kernels *k = panel_table(quant_types[i]);
        if (k) {
            test_kernels(k, quant_types[i]);
            test_matmul(k, quant_types[i]);
        }
    }
    return lm_test_summary();
}
