/* test_gemm.c - matmuls over repacked weights (cpu/repack.h, the GEMM
 * kernels) against the same matmuls over plain weights:
 *  - repack then unpack gives the original bytes;
 *  - with the generic kernels the results are bit-identical (same integer
 *    sums, same float order); with each ISA's kernels they agree within a
 *    tight bound (only float accumulation order differs);
 *  - shapes: 1, odd and many activation rows (GEMV and GEMM), several K and
 *    M, permuted activations, 1..3 threads;
 *  - the K-quant kernels called directly on random bytes (every code and
 *    scale value) and on extreme inputs (all codes and scales at their maximum,
 *    activations all +-127 / -128: the largest int16 partial sums), for every
 *    column count 1..16 and an output stride: generic bit-identical to the
 *    generic vec_dot, every ISA within 1e-5 of the dot of quant/'s decoded
 *    values (weights and Q8_K activations);
 *  - GET_ROWS on a repacked table (a tied embedding) gives the plain rows. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <stddef.h>

#include "sched/alloc.h"
#include "cpu/cpu.h"
#include "cpu/cpu_internal.h"
#include "cpu/kernels/gemm.h"
#include "cpu/repack.h"
#include "quant/blocks.h"
#include "lm_test.h"
#include "quant/quant.h"

static uint64_t rng = 88172645463325252ull;
static float frand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((rng >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f;
}

static bool is_k(enum lm_type type)
{
    return type == LM_TYPE_Q2_K || type == LM_TYPE_Q3_K || type == LM_TYPE_Q4_K || type == LM_TYPE_Q5_K ||
           type == LM_TYPE_Q6_K;
}
static bool is_float(enum lm_type type) { return type == LM_TYPE_F16 || type == LM_TYPE_BF16 || type == LM_TYPE_F32; }


static void test_roundtrip(enum lm_type type)
{
    const int64_t M = 16, K = is_k(type) ? 512 : 96;
    float *f = malloc(sizeof(float) * M * K);
    for (int64_t i = 0; i < M * K; i++)
        f[i] = frand();
    size_t bytes = lm_row_size(type, K) * M;
    char *plain = malloc(bytes), *packed = malloc(bytes), *back = malloc(bytes);
    lm_quantize_chunk(type, f, plain, 0, M, K, NULL);
    lm_repack_rows(type, plain, packed, M, K);
    lm_unpack_rows(type, packed, back, M, K);
    CHECKF(!memcmp(plain, back, bytes), "%s: repack/unpack changed the bytes", lm_type_name(type));
    CHECK(memcmp(plain, packed, bytes) != 0);
    for (size_t i = 0; i < bytes; i++) /* every bit pattern, not only what quantizers write */
        plain[i] = (char)(int)(frand() * 1000.0f); /* via int: an out-of-range float -> char is UB */
    lm_repack_rows(type, plain, packed, M, K);
    lm_unpack_rows(type, packed, back, M, K);
    CHECKF(!memcmp(plain, back, bytes), "%s: repack/unpack changed random bytes", lm_type_name(type));
    free(f);
    free(plain);
    free(packed);
    free(back);
}

/* A weight (M x K of type) placed in buft, in a context of its own; the
 * caller frees *buf and *wctx. */
static struct lm_tensor *placed_weight(enum lm_type type, lm_buft buft, const void *bytes, int64_t M, int64_t K,
                                       struct lm_ctx **wctx, struct lm_buffer **buf)
{
    struct lm_ctx_params wp = {.mem_size = 4 * lm_tensor_overhead(), .no_alloc = true};
    lm_ctx_new(&wp, wctx);
    struct lm_tensor *a = lm_new_tensor_2d(*wctx, type, K, M);
    *buf = NULL;
    CHECK(lm_alloc_ctx_tensors(*wctx, buft, buf) == LM_OK);
    CHECK(lm_tensor_set(a, bytes, 0, lm_nbytes(a)) == LM_OK);
    return a;
}

/* y's graph computed by a CPU backend of nth threads (supports_op checked). */
static void compute_cpu(struct lm_ctx *ctx, struct lm_tensor *y, int nth)
{
    struct lm_graph *g = lm_graph_new(ctx, 16);
    CHECK(y && lm_graph_expand(g, y) == LM_OK);
    lm_backend_t be;
    CHECK(lm_cpu_backend_new_unclamped(nth, &be) == LM_OK);
    CHECK(lm_backend_supports_op(be, y));
    CHECK(lm_backend_graph_compute(be, g) == LM_OK);
    lm_backend_free(be);
}

/* out = a x b with a (M x K of type) placed in buft; b is [K, N] (or its permuted twin). */
static void run_matmul(enum lm_type type, lm_buft buft, const void *a_bytes, int64_t M, int64_t K, const float *b_data,
                       int64_t N, bool permuted, int nth, float *out)
{
    struct lm_ctx *wctx, *ctx;
    struct lm_buffer *buf;
    struct lm_ctx_params gp = {.mem_size = 16 * lm_tensor_overhead() + lm_graph_overhead(16) +
                                           4 * sizeof(float) * (size_t)(K * N + M * N) + (1 << 16),
                               .no_alloc = false};
    lm_ctx_new(&gp, &ctx);
    struct lm_tensor *a = placed_weight(type, buft, a_bytes, M, K, &wctx, &buf);
    struct lm_tensor *b;
    if (permuted) { /* b stored as [N, K], used transposed: non-unit row stride */
        struct lm_tensor *bt = lm_new_tensor_2d(ctx, LM_TYPE_F32, N, K);
        for (int64_t k = 0; k < K; k++)
            for (int64_t n = 0; n < N; n++)
                ((float *)bt->data)[k * N + n] = b_data[n * K + k];
        b = lm_transpose(ctx, bt);
    } else {
        b = lm_new_tensor_2d(ctx, LM_TYPE_F32, K, N);
        memcpy(b->data, b_data, sizeof(float) * (size_t)(K * N));
    }
    struct lm_tensor *y = lm_mul_mat(ctx, a, b);
    compute_cpu(ctx, y, nth);
    memcpy(out, y->data, sizeof(float) * (size_t)(M * N));
    lm_buffer_free(buf);
    lm_ctx_free(ctx);
    lm_ctx_free(wctx);
}

/* GET_ROWS of a table (M x K of type) placed in buft: rows ids[0..n) as F32. */
static void run_get_rows(enum lm_type type, lm_buft buft, const void *a_bytes, int64_t M, int64_t K,
                         const int32_t *ids, int64_t n, int nth, float *out)
{
    struct lm_ctx *wctx, *ctx;
    struct lm_buffer *buf;
    const size_t data = sizeof(float) * (size_t)(K * n) + 4 * (size_t)n;
    struct lm_ctx_params gp = {.mem_size = 16 * lm_tensor_overhead() + lm_graph_overhead(16) + data + (1 << 16),
                               .no_alloc = false};
    lm_ctx_new(&gp, &ctx);
    struct lm_tensor *a = placed_weight(type, buft, a_bytes, M, K, &wctx, &buf);
    struct lm_tensor *it = lm_new_tensor_1d(ctx, LM_TYPE_I32, n);
    memcpy(it->data, ids, 4 * (size_t)n);
    struct lm_tensor *y = lm_get_rows(ctx, a, it);
    compute_cpu(ctx, y, nth);
    memcpy(out, y->data, sizeof(float) * (size_t)(K * n));
    lm_buffer_free(buf);
    lm_ctx_free(ctx);
    lm_ctx_free(wctx);
}

/* A tied embedding: GET_ROWS reads a repacked table (cpu/ops/get_rows.c) and
 * gives the plain table's bits, for rows in and across groups, repeats and
 * out-of-range ids (zero rows), on 1..3 threads. */
static void test_get_rows(enum lm_type type)
{
    const int64_t K = 2 * lm_repack_desc(type)->k_multiple, M = 24;
    enum { N = 40 };
    float *af = malloc(sizeof(float) * (size_t)(M * K));
    for (int64_t i = 0; i < M * K; i++)
        af[i] = frand();
    char *aq = malloc(lm_row_size(type, K) * (size_t)M);
    lm_quantize_chunk(type, af, aq, 0, M, K, NULL);
    int32_t ids[N];
    for (int i = 0; i < N; i++)
        ids[i] = i < 3 ? (int32_t[]){-1, 24, 1000}[i] : (int32_t)((i * 7 + i / 9) % M);
    float *plain = malloc(sizeof(float) * (size_t)(K * N)), *packed = malloc(sizeof(float) * (size_t)(K * N));
    for (int nth = 1; nth <= 3; nth++) {
        run_get_rows(type, lm_host_buft(), aq, M, K, ids, N, nth, plain);
        run_get_rows(type, lm_cpu_repack_buft(), aq, M, K, ids, N, nth, packed);
        CHECKF(!memcmp(plain, packed, sizeof(float) * (size_t)(K * N)),
               "%s get_rows on %d threads: repacked rows differ", lm_type_name(type), nth);
    }
    free(af);
    free(aq);
    free(plain);
    free(packed);
}

/* Whether a repacked matmul of N columns takes the level's panel GEMM with
 * BF16 activations (AMX; the VNNI panels give gemm_x8's bits). */
static bool takes_panel(enum lm_type type, enum lm_cpu_isa isa, int64_t K, int64_t N)
{
    const struct lm_cpu_kernels *k = lm_cpu_kernels_for(isa);
    return k && k->type[type].gemm_panel && !k->type[type].panel_exact && N >= k->type[type].panel_min_n &&
           K % LM_GEMM_PANEL_K == 0;
}

static void test_matmul(enum lm_type type)
{
    static const int64_t Ks_legacy[] = {32, 96, 2048}, Ks_k[] = {256, 768, 2048}, Ks_f[] = {16, 208, 2048};
    const int64_t *Ks = is_k(type) ? Ks_k : is_float(type) ? Ks_f : Ks_legacy;
    static const int64_t Ms[] = {8, 24, 64};
    static const int64_t Ns[] = {1, 3, 16, 17, 70};
    int cases = 0;
    double worst = 0;
    for (size_t ik = 0; ik < 3; ik++) {
        for (size_t im = 0; im < 3; im++) {
            for (size_t in = 0; in < 5; in++) {
                const int64_t K = Ks[ik], M = Ms[im], N = Ns[in];
                const bool permuted = (ik + in) % 3 == 0;
                const int nth = 1 + (int)((im + in) % 3);
                float *af = malloc(sizeof(float) * (size_t)(M * K)), *bf = malloc(sizeof(float) * (size_t)(K * N));
                for (int64_t i = 0; i < M * K; i++)
                    af[i] = frand();
                for (int64_t i = 0; i < K * N; i++)
                    bf[i] = frand();
                char *aq = malloc(lm_row_size(type, K) * (size_t)M);
                lm_quantize_chunk(type, af, aq, 0, M, K, NULL);
                float *plain = malloc(sizeof(float) * (size_t)(M * N)), *packed = malloc(sizeof(float) * (size_t)(M * N));
                for (int isa = 0; isa <= (int)lm_cpu_isa_best(); isa++) {
                    lm_cpu_isa_limit((enum lm_cpu_isa)isa);
                    run_matmul(type, lm_host_buft(), aq, M, K, bf, N, permuted, nth, plain);
                    run_matmul(type, lm_cpu_repack_buft(), aq, M, K, bf, N, permuted, nth, packed);
                    double err = 0, ref = 0;
                    for (int64_t i = 0; i < M * N; i++) {
                        err += (packed[i] - plain[i]) * (double)(packed[i] - plain[i]);
                        ref += (double)plain[i] * plain[i];
                    }
                    double nmse = ref > 0 ? err / ref : err;
                    if (isa == LM_ISA_GENERIC)
                        CHECKF(!memcmp(plain, packed, sizeof(float) * (size_t)(M * N)),
                               "%s generic M%lld K%lld N%lld: not bit-identical (nmse %g)", lm_type_name(type),
                               (long long)M, (long long)K, (long long)N, nmse);
                    else /* the panel path (AMX) rounds activations to BF16, not Q8: test_gemm_panel.c */
                        CHECKF(nmse < (takes_panel(type, (enum lm_cpu_isa)isa, K, N) ? 1e-3 : 1e-10),
                               "%s %s M%lld K%lld N%lld: nmse %g", lm_type_name(type),
                               lm_cpu_isa_name((enum lm_cpu_isa)isa), (long long)M, (long long)K, (long long)N, nmse);
                    worst = nmse > worst ? nmse : worst;
                    cases++;
                }
                free(af);
                free(bf);
                free(aq);
                free(plain);
                free(packed);
            }
        }
    }
    lm_cpu_isa_limit(lm_cpu_isa_best());
    printf("%s: %d repacked matmuls, worst nmse vs plain %.3g\n", lm_type_name(type), cases, worst);
}

/* ---- the K-quant kernels on crafted inputs ---- */

enum act_fill { ACT_RANDOM, ACT_P127, ACT_M127, ACT_M128 };

_Static_assert(offsetof(struct lm_block_q4_K, dmin) == offsetof(struct lm_block_q5_K, dmin), "Q4_K/Q5_K d, dmin");

/* M plain rows of K elements with random (or all-0xFF) bytes, then finite
 * fp16 scales d (and dmin) in [1e-3, 1.1e-2]. */
static void craft_weights(enum lm_type type, uint8_t *plain, int64_t M, int64_t K, bool max)
{
    const size_t bs = lm_row_size(type, LM_QK_K);
    const int64_t nblocks = M * K / LM_QK_K;
    for (int64_t b = 0; b < nblocks; b++) {
        uint8_t *blk = plain + (size_t)b * bs;
        for (size_t i = 0; i < bs; i++)
            blk[i] = max ? 0xFF : (uint8_t)(int)(frand() * 1000.0f); /* via int: float -> uint8_t < 0 is UB */
        const lm_fp16 d = lm_fp32_to_fp16(1e-3f + 1e-2f * fabsf(frand()));
        const lm_fp16 dm = lm_fp32_to_fp16(1e-3f + 1e-2f * fabsf(frand()));
        if (type == LM_TYPE_Q4_K || type == LM_TYPE_Q5_K) { /* same offsets of d and dmin */
            memcpy(blk + offsetof(struct lm_block_q4_K, d), &d, sizeof d);
            memcpy(blk + offsetof(struct lm_block_q4_K, dmin), &dm, sizeof dm);
        } else if (type == LM_TYPE_Q2_K) {
            memcpy(blk + offsetof(struct lm_block_q2_K, d), &d, sizeof d);
            memcpy(blk + offsetof(struct lm_block_q2_K, dmin), &dm, sizeof dm);
        } else if (type == LM_TYPE_Q3_K) {
            memcpy(blk + offsetof(struct lm_block_q3_K, d), &d, sizeof d);
        } else {
            memcpy(blk + offsetof(struct lm_block_q6_K, d), &d, sizeof d);
        }
    }
}

/* N Q8_K rows of K elements, row c at act + c * by; bsums consistent. */
static void craft_acts(uint8_t *act, size_t by, int64_t N, int64_t K, enum act_fill fill)
{
    for (int64_t c = 0; c < N; c++) {
        struct lm_block_q8_K *y = (struct lm_block_q8_K *)(act + (size_t)c * by);
        for (int64_t b = 0; b < K / LM_QK_K; b++) {
            y[b].d = 5e-3f + 1e-2f * fabsf(frand());
            for (int i = 0; i < LM_QK_K; i++) {
                int v = (int)floorf(frand() * 128.0f);
                v = fill == ACT_P127 ? 127 : fill == ACT_M127 ? -127 : fill == ACT_M128 ? -128 : v;
                y[b].qs[i] = (int8_t)(v < -128 ? -128 : v > 127 ? 127 : v);
            }
            for (int j = 0; j < LM_QK_K / 16; j++) {
                int sum = 0;
                for (int i = 0; i < 16; i++)
                    sum += y[b].qs[16 * j + i];
                y[b].bsums[j] = (int16_t)sum;
            }
        }
    }
}

/* One 8-row group against nc activation rows through every ISA's gemm_x8:
 * generic bit-identical to the generic vec_dot; every ISA within 1e-5 of the
 * double dot of the decoded values (bound as tests/cpu/test_kernels.c). */
static void kernel_case(enum lm_type type, int64_t K, int nc, bool wmax, enum act_fill fill, double *worst)
{
    enum { LDC = 11 };
    const size_t wbytes = lm_row_size(type, K) * LM_REPACK_ROWS, by = lm_row_size(LM_TYPE_Q8_K, K) + 8;
    uint8_t *plain = malloc(wbytes), *packed = malloc(wbytes), *act = malloc(by * (size_t)nc);
    float *wf = malloc(sizeof(float) * (size_t)(K * LM_REPACK_ROWS)), *af = malloc(sizeof(float) * (size_t)K);
    float out[LM_GEMM_MAX_NC * LDC];
    craft_weights(type, plain, LM_REPACK_ROWS, K, wmax);
    craft_acts(act, by, nc, K, fill);
    lm_repack_rows(type, plain, packed, LM_REPACK_ROWS, K);
    lm_quant_traits(type)->to_float(plain, wf, K * LM_REPACK_ROWS);
    const struct lm_cpu_kernels *gen = lm_cpu_kernels_for(LM_ISA_GENERIC);
    for (int isa = 0; isa <= (int)lm_cpu_isa_best(); isa++) {
        const struct lm_cpu_kernels *kt = lm_cpu_kernels_for((enum lm_cpu_isa)isa);
        if (!kt || !kt->type[type].gemm_x8)
            continue;
        for (int i = 0; i < LM_GEMM_MAX_NC * LDC; i++)
            out[i] = 1234.5f;
        kt->type[type].gemm_x8(K, out, LDC, packed, act, by, NULL, nc);
        bool ok = true;
        for (int c = 0; c < nc && ok; c++) {
            lm_quant_traits(LM_TYPE_Q8_K)->to_float(act + (size_t)c * by, af, K);
            for (int r = 0; r < LDC && ok; r++) {
                const float got = out[c * LDC + r];
                if (r >= LM_REPACK_ROWS) {
                    ok = got == 1234.5f;
                    CHECKF(ok, "%s: gemm wrote outside its 8 rows (col %d, row %d)", lm_type_name(type), c, r);
                    continue;
                }
                const float *x = wf + r * K;
                double want = 0, mag = 0;
                for (int64_t b = 0; b < K / LM_QK_K; b++) {
                    float bmax = 0;
                    for (int i = 0; i < LM_QK_K; i++)
                        bmax = fmaxf(bmax, fabsf(x[b * LM_QK_K + i]));
                    for (int i = 0; i < LM_QK_K; i++) {
                        want += (double)x[b * LM_QK_K + i] * af[b * LM_QK_K + i];
                        mag += (fabs(x[b * LM_QK_K + i]) + bmax) * fabs(af[b * LM_QK_K + i]);
                    }
                }
                const double err = fabs(got - want) / (mag > 0 ? mag : 1);
                *worst = err > *worst ? err : *worst;
                ok = err <= 1e-5;
                CHECKF(ok, "%s %s K%lld nc %d col %d row %d: %.9g vs %.9g (rel %.3g)", lm_type_name(type),
                       lm_cpu_isa_name((enum lm_cpu_isa)isa), (long long)K, nc, c, r, got, want, err);
                if (isa == LM_ISA_GENERIC && ok) {
                    float v;
                    gen->type[type].vec_dot(K, &v, plain + (size_t)r * lm_row_size(type, K), act + (size_t)c * by);
                    ok = !memcmp(&v, &got, sizeof v);
                    CHECKF(ok, "%s generic K%lld col %d row %d: %.9g, vec_dot %.9g", lm_type_name(type),
                           (long long)K, c, r, got, v);
                }
            }
        }
    }
    free(plain);
    free(packed);
    free(act);
    free(wf);
    free(af);
}

static void test_kernels_k(enum lm_type type)
{
    double worst = 0;
    int cases = 0;
    for (int nc = 1; nc <= LM_GEMM_MAX_NC; nc++, cases++)
        kernel_case(type, nc % 3 == 0 ? 1280 : 256 * (1 + nc % 2), nc, false, ACT_RANDOM, &worst);
    static const int ncs[] = {1, 4, 5, 16};
    for (int i = 0; i < 4; i++) {
        for (int f = ACT_P127; f <= ACT_M128; f++, cases += 2) {
            kernel_case(type, 512, ncs[i], true, (enum act_fill)f, &worst);
            kernel_case(type, 256, ncs[i], false, (enum act_fill)f, &worst);
        }
    }
    printf("%s: %d direct gemm cases, worst error / magnitude %.3g\n", lm_type_name(type), cases, worst);
}

/* ---- the float kernels (f16x8, bf16x8, f32x8) ---- */

/* The K activation values an encoded row holds, in element order: the
 * gemm_vt decoder, but for the pair rows of the AVX-512 dpbf16 kernel
 * (gemm.h, lm_bf16_pair_word). */
static bool pair_encoder(lm_from_float_fn enc)
{
#if defined(__x86_64__) || defined(_M_X64)
    return enc == lm_fp32_to_bf16_pairs_row_avx512;
#else
    (void)enc;
    return false;
#endif
}

static void decode_act(const struct lm_cpu_type_kernels *tk, const char *act, float *af, int64_t K)
{
    if (!pair_encoder(tk->gemm_from_float)) {
        lm_quant_traits(tk->gemm_vt)->to_float(act, af, K);
        return;
    }
    const lm_bf16 *w = (const lm_bf16 *)act;
    for (int64_t i = 0; i < K; i++)
        af[i] = lm_bf16_to_fp32(w[lm_bf16_pair_word(i)]);
}

/* Values in [-1, 1), or small integers (exact: every partial sum of a dot is
 * an integer < 2^24, so every order of summation gives the same bits). */
static float fval(bool exact) { return exact ? (float)(int)(frand() * 5.0f) : frand(); }

/* One 8-row group against nc activation rows (byte stride not a multiple of
 * 32) through every ISA's gemm_x8 with that table's activation type and
 * encoder, output stride LDC > 8: nothing written past the group's 8 rows;
 * generic bit-identical to the generic vec_dot of the plain row with the
 * activations in its dot type; every ISA within 4.8e-7 (K/8 + 8) sum|w a| of
 * the double dot of the rounded values (the reordering bound of
 * tests/cpu/test_kernels.c), exactly equal to it for integer inputs. */
static void float_case(enum lm_type type, int64_t K, int nc, bool exact, double *worst)
{
    enum { LDC = 11 };
    const struct lm_cpu_kernels *gen = lm_cpu_kernels_for(LM_ISA_GENERIC);
    const enum lm_type vt = gen->type[type].vec_dot_type;
    const size_t wbytes = lm_row_size(type, K) * LM_REPACK_ROWS, by = sizeof(float) * (size_t)K + 12;
    char *plain = malloc(wbytes), *packed = malloc(wbytes), *act = malloc(by * (size_t)nc);
    char *dotrow = malloc(lm_row_size(vt, K) * (size_t)nc);
    float *wf = malloc(sizeof(float) * (size_t)(K * LM_REPACK_ROWS)), *xf = malloc(sizeof(float) * (size_t)(K * nc));
    float *af = malloc(sizeof(float) * (size_t)K);
    float out[LM_GEMM_MAX_NC * LDC];
    for (int64_t i = 0; i < K * LM_REPACK_ROWS; i++)
        wf[i] = fval(exact);
    for (int64_t i = 0; i < K * nc; i++)
        xf[i] = fval(exact);
    lm_quantize_chunk(type, wf, plain, 0, LM_REPACK_ROWS, K, NULL);
    lm_quant_traits(type)->to_float(plain, wf, K * LM_REPACK_ROWS); /* the stored values */
    lm_repack_rows(type, plain, packed, LM_REPACK_ROWS, K);
    for (int c = 0; c < nc; c++)
        gen->type[vt].from_float(xf + c * K, dotrow + (size_t)c * lm_row_size(vt, K), K);
    for (int isa = 0; isa <= (int)lm_cpu_isa_best(); isa++) {
        const struct lm_cpu_kernels *kt = lm_cpu_kernels_for((enum lm_cpu_isa)isa);
        if (!kt || !kt->type[type].gemm_x8)
            continue;
        const struct lm_cpu_type_kernels *tk = &kt->type[type];
        CHECK(!tk->gemm_sums && lm_row_size(tk->gemm_vt, K) <= by - 12);
        lm_from_float_fn enc = tk->gemm_from_float ? tk->gemm_from_float : kt->type[tk->gemm_vt].from_float;
        for (int c = 0; c < nc; c++)
            enc(xf + c * K, act + (size_t)c * by, K);
        for (int i = 0; i < LM_GEMM_MAX_NC * LDC; i++)
            out[i] = 1234.5f;
        tk->gemm_x8(K, out, LDC, packed, act, by, NULL, nc);
        bool ok = true;
        for (int c = 0; c < nc && ok; c++) {
            decode_act(tk, act + (size_t)c * by, af, K);
            for (int r = 0; r < LDC && ok; r++) {
                const float got = out[c * LDC + r];
                if (r >= LM_REPACK_ROWS) {
                    ok = got == 1234.5f;
                    CHECKF(ok, "%s: gemm wrote outside its 8 rows (col %d, row %d)", lm_type_name(type), c, r);
                    continue;
                }
                double want = 0, mag = 0;
                for (int64_t i = 0; i < K; i++) {
                    want += (double)wf[r * K + i] * af[i];
                    mag += fabs((double)wf[r * K + i] * af[i]);
                }
                const double err = fabs(got - want), bound = exact ? 0 : 4.8e-7 * (double)(K / 8 + 8) * mag;
                *worst = mag > 0 && err / mag > *worst ? err / mag : *worst;
                ok = err <= bound;
                CHECKF(ok, "%s %s K%lld nc %d col %d row %d: %.9g vs %.9g (bound %.3g)", lm_type_name(type),
                       lm_cpu_isa_name((enum lm_cpu_isa)isa), (long long)K, nc, c, r, got, want, bound);
                if (isa == LM_ISA_GENERIC && ok) {
                    float v;
                    gen->type[type].vec_dot(K, &v, plain + (size_t)r * lm_row_size(type, K),
                                            dotrow + (size_t)c * lm_row_size(vt, K));
                    ok = !memcmp(&v, &got, sizeof v);
                    CHECKF(ok, "%s generic K%lld col %d row %d: %.9g, vec_dot %.9g", lm_type_name(type),
                           (long long)K, c, r, got, v);
                }
            }
        }
    }
    free(plain);
    free(packed);
    free(act);
    free(dotrow);
    free(wf);
    free(xf);
    free(af);
}

static void test_kernels_float(enum lm_type type)
{
    double worst = 0;
    int cases = 0;
    for (int nc = 1; nc <= LM_GEMM_MAX_NC; nc++, cases += 2) {
        float_case(type, lm_repack_desc(type)->k_multiple * (1 + nc % 5), nc, false, &worst);
        float_case(type, nc % 2 ? 2048 : 976, nc, nc % 4 == 1, &worst);
    }
    printf("%s: %d direct gemm cases, worst error / magnitude %.3g\n", lm_type_name(type), cases, worst);
}

/* The BF16 weights' activation encoder: the generic one rounds like
 * core/fp16.h (round to nearest even, checked on known ties), and every ISA's
 * gives the generic bits for every input (ties, overflow to inf, subnormals,
 * infinities, quiet and signalling NaNs, random bit patterns) and length. */
static void test_float_encoders(void)
{
    static const uint32_t special[] = {0x00000000u, 0x80000000u, 0x3f800000u, 0xbf800000u, 0x7f7fffffu, 0xff7f8000u,
                                       0x7f7f7fffu, 0xff800000u, 0x7f800000u, 0x7fc00000u, 0xffc00001u, 0x7f800001u,
                                       0x7fa00000u, 0x00000001u, 0x00008000u, 0x00018000u, 0x80007fffu, 0x3f808000u,
                                       0x3f818000u, 0x3f808001u};
    const size_t ns = sizeof special / sizeof special[0];
    enum { N = 1031 };
    float x[N], want[N], got[N];
    for (int i = 0; i < N; i++) {
        /* through int64_t: a negative float converted to uint32_t directly is undefined */
        uint32_t u = (size_t)i < ns ? special[i]
                                    : (uint32_t)(int64_t)(frand() * 2147483647.0f) ^ ((uint32_t)i << 20);
        memcpy(&x[i], &u, sizeof u);
    }
    const struct lm_cpu_kernels *gen = lm_cpu_kernels_for(LM_ISA_GENERIC);
    lm_from_float_fn ref = gen->type[LM_TYPE_BF16].gemm_from_float;
    CHECK(ref != NULL);
    const float tie[] = {1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, 0x1.fffffep127f};
    float r[3];
    ref(tie, r, 3);
    CHECK(r[0] == 1.0f && r[1] == 1.0f + 0x1p-6f && isinf(r[2]));
    for (int isa = 1; isa <= (int)lm_cpu_isa_best(); isa++) {
        const struct lm_cpu_kernels *kt = lm_cpu_kernels_for((enum lm_cpu_isa)isa);
        if (!kt)
            continue;
        lm_from_float_fn enc = kt->type[LM_TYPE_BF16].gemm_from_float;
        if (pair_encoder(enc))
            continue; /* pair rows, not F32 rows: tests/cpu/test_gemm_float_enc.c */
        for (int n = 0; n <= N; n += n < 40 ? 1 : N - 40) {
            for (int off = 0; off < 2 && off + n <= N; off++) {
                memset(got, 0x5a, sizeof got);
                memset(want, 0x5a, sizeof want);
                enc(x + off, got, n);
                ref(x + off, want, n);
                CHECKF(!memcmp(got, want, sizeof got), "bf16 %s encoder, n %d offset %d: not the generic bits",
                       lm_cpu_isa_name((enum lm_cpu_isa)isa), n, off);
            }
        }
    }
}

/* ---- the integer kernels against AVX2 (the AVX-512 VNNI kernels' contract) ---- */

/* M plain Q4_0 / Q8_0 rows of K elements: random bytes (every code, Q8_0's
 * -128 included) or all 0xFF (Q4_0 codes 15, Q8_0 -1), finite fp16 d. */
static void craft_legacy(enum lm_type type, uint8_t *plain, int64_t M, int64_t K, bool max)
{
    const size_t bs = lm_row_size(type, LM_QK);
    for (int64_t b = 0; b < M * K / LM_QK; b++) {
        uint8_t *blk = plain + (size_t)b * bs;
        for (size_t i = 0; i < bs; i++)
            blk[i] = max ? 0xFF : (uint8_t)(int)(frand() * 1000.0f); /* via int: float -> uint8_t < 0 is UB */
        const lm_fp16 d = lm_fp32_to_fp16(1e-3f + 1e-2f * fabsf(frand()));
        memcpy(blk, &d, sizeof d); /* d is the first field of both blocks */
    }
}

/* nc Q8_0 rows (row c at act + c * by) and their int16 block sums. Values
 * in [-127, 127] (what the encoders write; the AVX2 Q8_0 sign trick needs
 * it), -128 too for Q4_0 (fill ACT_M128). */
static void craft_q8_0_acts(uint8_t *act, size_t by, int16_t *sums, int nc, int64_t K, enum act_fill fill)
{
    for (int c = 0; c < nc; c++) {
        struct lm_block_q8_0 *y = (struct lm_block_q8_0 *)(act + (size_t)c * by);
        for (int64_t b = 0; b < K / LM_QK; b++) {
            y[b].d = lm_fp32_to_fp16(5e-3f + 1e-2f * fabsf(frand()));
            int sum = 0;
            for (int i = 0; i < LM_QK; i++) {
                int v = (int)floorf(frand() * 127.5f);
                v = fill == ACT_P127 ? 127 : fill == ACT_M127 ? -127 : fill == ACT_M128 ? -128 : v;
                y[b].qs[i] = (int8_t)(v < -127 && fill != ACT_M128 ? -127 : v > 127 ? 127 : v);
                sum += y[b].qs[i];
            }
            sums[(size_t)c * (size_t)(K / LM_QK) + (size_t)b] = (int16_t)sum;
        }
    }
}

/* Whether f is this type's AVX-512 VNNI kernel (gemm.h: bit-identical to AVX2). */
static bool is_vnni_gemm(enum lm_type type, lm_gemm_fn f)
{
    switch (type) {
    case LM_TYPE_Q4_0: return f == lm_gemm_q4_0x8_q8_0_avx512;
    case LM_TYPE_Q8_0: return f == lm_gemm_q8_0x8_q8_0_avx512;
    case LM_TYPE_Q2_K: return f == lm_gemm_q2_Kx8_q8_K_avx512;
    case LM_TYPE_Q3_K: return f == lm_gemm_q3_Kx8_q8_K_avx512;
    case LM_TYPE_Q4_K: return f == lm_gemm_q4_Kx8_q8_K_avx512;
    case LM_TYPE_Q5_K: return f == lm_gemm_q5_Kx8_q8_K_avx512;
    case LM_TYPE_Q6_K: return f == lm_gemm_q6_Kx8_q8_K_avx512;
    default: return false;
    }
}

/* One group of 8 rows (random or extreme) against nc activation rows, output
 * stride 11, activation stride not a multiple of 32: the legacy types within
 * 1e-5 of the double dot of the decoded values for every ISA (as
 * kernel_case for the K-quants), nothing written outside the 8 rows, and
 * every level's VNNI kernel bit-identical to the AVX2 one. Returns the number
 * of VNNI comparisons made. */
static int int_case(enum lm_type type, int64_t K, int nc, bool wmax, enum act_fill fill, double *worst)
{
    enum { LDC = 11 };
    const struct lm_cpu_kernels *avx2 = lm_cpu_kernels_for(LM_ISA_AVX2);
    const bool k = is_k(type);
    const enum lm_type vt = k ? LM_TYPE_Q8_K : LM_TYPE_Q8_0;
    const size_t wbytes = lm_row_size(type, K) * LM_REPACK_ROWS, by = lm_row_size(vt, K) + (k ? 8 : 6);
    uint8_t *plain = malloc(wbytes), *packed = malloc(wbytes), *act = malloc(by * (size_t)nc);
    int16_t *sums = malloc(sizeof(int16_t) * (size_t)nc * (size_t)(K / LM_QK));
    float *wf = malloc(sizeof(float) * (size_t)(K * LM_REPACK_ROWS)), *af = malloc(sizeof(float) * (size_t)K);
    float want[LM_GEMM_MAX_NC * LDC], out[LM_GEMM_MAX_NC * LDC];
    int compared = 0;
    if (k) {
        craft_weights(type, plain, LM_REPACK_ROWS, K, wmax);
        craft_acts(act, by, nc, K, fill);
    } else {
        craft_legacy(type, plain, LM_REPACK_ROWS, K, wmax);
        craft_q8_0_acts(act, by, sums, nc, K, type == LM_TYPE_Q4_0 ? fill : fill == ACT_M128 ? ACT_M127 : fill);
    }
    lm_repack_rows(type, plain, packed, LM_REPACK_ROWS, K);
    lm_quant_traits(type)->to_float(plain, wf, K * LM_REPACK_ROWS);
    for (int isa = 0; isa <= (int)lm_cpu_isa_best(); isa++) {
        const struct lm_cpu_kernels *kt = lm_cpu_kernels_for((enum lm_cpu_isa)isa);
        const lm_gemm_fn f = kt ? kt->type[type].gemm_x8 : NULL;
        if (!f)
            continue;
        for (int i = 0; i < LM_GEMM_MAX_NC * LDC; i++)
            out[i] = 1234.5f;
        f(K, out, LDC, packed, act, by, sums, nc);
        if (avx2 && is_vnni_gemm(type, f)) {
            for (int i = 0; i < LM_GEMM_MAX_NC * LDC; i++)
                want[i] = 1234.5f;
            avx2->type[type].gemm_x8(K, want, LDC, packed, act, by, sums, nc);
            CHECKF(!memcmp(out, want, sizeof out), "%s %s K%lld nc %d: not the AVX2 kernel's bits", lm_type_name(type),
                   lm_cpu_isa_name((enum lm_cpu_isa)isa), (long long)K, nc);
            compared++;
        }
        bool ok = true;
        for (int c = 0; c < nc && ok && !k; c++) { /* the K-quants' values: kernel_case */
            lm_quant_traits(vt)->to_float(act + (size_t)c * by, af, K);
            for (int r = 0; r < LDC && ok; r++) {
                const float got = out[c * LDC + r];
                if (r >= LM_REPACK_ROWS) {
                    ok = got == 1234.5f;
                    CHECKF(ok, "%s: gemm wrote outside its 8 rows (col %d, row %d)", lm_type_name(type), c, r);
                    continue;
                }
                double dot = 0, mag = 0;
                for (int64_t i = 0; i < K; i++) {
                    dot += (double)wf[r * K + i] * af[i];
                    mag += fabs((double)wf[r * K + i] * af[i]);
                }
                const double err = fabs(got - dot) / (mag > 0 ? mag : 1);
                *worst = err > *worst ? err : *worst;
                ok = err <= 1e-5;
                CHECKF(ok, "%s %s K%lld nc %d col %d row %d: %.9g vs %.9g (rel %.3g)", lm_type_name(type),
                       lm_cpu_isa_name((enum lm_cpu_isa)isa), (long long)K, nc, c, r, got, dot, err);
            }
        }
    }
    free(plain);
    free(packed);
    free(act);
    free(sums);
    free(wf);
    free(af);
    return compared;
}

/* Every column count 1..16 with block counts around the VNNI kernels' 32-block
 * table slabs, random and extreme inputs. */
static void test_kernels_int(enum lm_type type)
{
    static const int nbs[] = {1, 2, 3, 7, 32, 33, 70};
    const int64_t qk = is_k(type) ? LM_QK_K : LM_QK;
    double worst = 0;
    int cases = 0, compared = 0;
    for (int nc = 1; nc <= LM_GEMM_MAX_NC; nc++, cases++)
        compared += int_case(type, qk * (is_k(type) ? 1 + nc % 3 : nbs[nc % 7]), nc, false, ACT_RANDOM, &worst);
    static const int ncs[] = {1, 2, 7, 16};
    for (int i = 0; i < 4; i++) {
        for (int f = ACT_P127; f <= ACT_M128; f++, cases += 2) {
            compared += int_case(type, qk * (is_k(type) ? 2 : 33), ncs[i], true, (enum act_fill)f, &worst);
            compared += int_case(type, qk * 3, ncs[i], false, (enum act_fill)f, &worst);
        }
    }
    printf("%s: %d integer gemm cases, %d VNNI kernel runs compared bit for bit with AVX2, worst error / magnitude %.3g\n",
           lm_type_name(type), cases, compared, worst);
}

/* ---- gemv_x8 (one column over many groups) against gemm_x8 with nc == 1 ---- */

/* Every gemv_x8 of a level by name (a table leaves some out on some CPUs:
 * Zen 5 takes the K-quants' gemm_x8 per group, Zen 4 every type's:
 * init_avx512.c one_column_choices), so that each is tested on
 * every machine with the level; NULL where the level has none. The BF16
 * ones are tested by name in test_gemm_float_enc.c. */
static lm_gemv_fn named_gemv(enum lm_cpu_isa isa, enum lm_type type)
{
    if (isa == LM_ISA_AVX2)
        switch (type) {
        case LM_TYPE_Q4_0: return lm_gemv_q4_0x8_q8_0_avx2;
        case LM_TYPE_Q8_0: return lm_gemv_q8_0x8_q8_0_avx2;
        default: return NULL;
        }
    if (isa == LM_ISA_AVX512)
        switch (type) {
        case LM_TYPE_Q4_0: return lm_gemv_q4_0x8_q8_0_avx512;
        case LM_TYPE_Q8_0: return lm_gemv_q8_0x8_q8_0_avx512;
        case LM_TYPE_Q2_K: return lm_gemv_q2_Kx8_q8_K_avx512;
        case LM_TYPE_Q3_K: return lm_gemv_q3_Kx8_q8_K_avx512;
        case LM_TYPE_Q4_K: return lm_gemv_q4_Kx8_q8_K_avx512;
        case LM_TYPE_Q5_K: return lm_gemv_q5_Kx8_q8_K_avx512;
        case LM_TYPE_Q6_K: return lm_gemv_q6_Kx8_q8_K_avx512;
        case LM_TYPE_F16: return lm_gemv_f16x8_f32_avx512;
        case LM_TYPE_F32: return lm_gemv_f32x8_f32_avx512;
        default: return NULL;
        }
    return NULL;
}

/* G groups of random weights (G = 1..21: every mix of the 8/4/2/1-group
 * steps, odd group counts) against one activation row, through every
 * level's gemv_x8: each group's 8 results bit-identical to that level's
 * gemm_x8 with one column, nothing written past 8 G. Returns the runs. */
static int gemv_case(enum lm_type type, int64_t K, int64_t G)
{
    const int64_t M = G * LM_REPACK_ROWS;
    const size_t row = lm_row_size(type, K), group = row * LM_REPACK_ROWS;
    char *plain = malloc(row * (size_t)M), *packed = malloc(row * (size_t)M);
    float *wf = malloc(sizeof(float) * (size_t)(K * M)), *xf = malloc(sizeof(float) * (size_t)K);
    char *act = malloc(sizeof(float) * (size_t)K + 64);
    int16_t *sums = malloc(sizeof(int16_t) * (size_t)(K / LM_QK));
    float *got = malloc(sizeof(float) * (size_t)(M + 8)), want[LM_REPACK_ROWS];
    int runs = 0;
    for (int64_t i = 0; i < K * M; i++)
        wf[i] = frand();
    for (int64_t i = 0; i < K; i++)
        xf[i] = frand();
    if (is_k(type))
        craft_weights(type, (uint8_t *)plain, M, K, false);
    else if (type == LM_TYPE_Q4_0 || type == LM_TYPE_Q8_0)
        craft_legacy(type, (uint8_t *)plain, M, K, false);
    else
        lm_quantize_chunk(type, wf, plain, 0, M, K, NULL);
    lm_repack_rows(type, plain, packed, M, K);
    for (int isa = 0; isa <= (int)lm_cpu_isa_best(); isa++) {
        const struct lm_cpu_kernels *kt = lm_cpu_kernels_for((enum lm_cpu_isa)isa);
        const struct lm_cpu_type_kernels *tk = kt ? &kt->type[type] : NULL;
        const lm_gemv_fn table = tk ? tk->gemv_x8 : NULL, named = tk ? named_gemv((enum lm_cpu_isa)isa, type) : NULL;
        for (int which = 0; which < 2; which++) { /* the table's kernel, then the named one where it differs */
            const lm_gemv_fn gemv = which == 0 ? table : named != table ? named : NULL;
            if (!gemv)
                continue;
            CHECK(tk->gemm_x8 != NULL);
            lm_from_float_fn enc = tk->gemm_from_float ? tk->gemm_from_float : kt->type[tk->gemm_vt].from_float;
            enc(xf, act, K);
            if (tk->gemm_sums)
                for (int64_t b = 0; b < K / LM_QK; b++) {
                    int sum = 0;
                    for (int t = 0; t < LM_QK; t++)
                        sum += ((const struct lm_block_q8_0 *)act)[b].qs[t];
                    sums[b] = (int16_t)sum;
                }
            for (int64_t i = 0; i < M + 8; i++)
                got[i] = 1234.5f;
            gemv(K, G, group, got, packed, act, tk->gemm_sums ? sums : NULL);
            bool ok = true;
            for (int64_t g = 0; g < G && ok; g++) {
                tk->gemm_x8(K, want, 1, packed + (size_t)g * group, act, 0, tk->gemm_sums ? sums : NULL, 1);
                ok = !memcmp(want, got + g * LM_REPACK_ROWS, sizeof want);
                CHECKF(ok, "%s %s K%lld G%lld group %lld: gemv_x8 is not gemm_x8's bits", lm_type_name(type),
                       lm_cpu_isa_name((enum lm_cpu_isa)isa), (long long)K, (long long)G, (long long)g);
            }
            for (int64_t i = M; i < M + 8 && ok; i++) {
                ok = got[i] == 1234.5f;
                CHECKF(ok, "%s %s G%lld: gemv_x8 wrote past its groups", lm_type_name(type),
                       lm_cpu_isa_name((enum lm_cpu_isa)isa), (long long)G);
            }
            runs++;
        }
    }
    free(plain);
    free(packed);
    free(wf);
    free(xf);
    free(act);
    free(sums);
    free(got);
    return runs;
}

static void test_gemv(enum lm_type type)
{
    const int64_t km = lm_repack_desc(type)->k_multiple;
    int runs = 0;
    for (int64_t G = 1; G <= 21; G++)
        runs += gemv_case(type, km * (is_k(type) || is_float(type) ? 1 + G % 3 : 1 + G % 5 * 7), G);
    printf("%s: %d gemv_x8 runs bit-identical to gemm_x8 per group\n", lm_type_name(type), runs);
}

/* ---- exact panels (VNNI, panel_exact) against gemm_x8 ---- */

/* ng groups (random or all-0xFF codes) against N activation rows made from
 * floats (random, or every block one repeated value: codes +-127), through
 * every level whose panel is exact: each output bit-identical to that
 * level's gemm_x8 of the group on the same floats encoded by the gemm path
 * (and so to gemv_x8 and the AVX2 kernels), nothing written outside the
 * 8 ng x N outputs (ldc > rows, activation stride > row). Returns the runs. */
static int exact_panel_case(enum lm_type type, int64_t K, int ng, int N, bool extreme)
{
    const int64_t M = (int64_t)ng * LM_REPACK_ROWS, nb = K / LM_QK;
    const size_t row = lm_row_size(type, K), group = row * LM_REPACK_ROWS, ldc = (size_t)M + 3;
    uint8_t *plain = malloc(row * (size_t)M), *packed = malloc(row * (size_t)M);
    float *xf = malloc(sizeof(float) * (size_t)(K * N)), *got = malloc(sizeof(float) * ldc * (size_t)(N + 1));
    float *want = malloc(sizeof(float) * (size_t)LM_GEMM_MAX_NC * LM_REPACK_ROWS);
    int runs = 0;
    if (is_k(type))
        craft_weights(type, plain, M, K, extreme);
    else
        craft_legacy(type, plain, M, K, extreme);
    lm_repack_rows(type, plain, packed, M, K);
    for (int64_t c = 0; c < N; c++)
        for (int64_t i = 0; i < K; i++)
            xf[c * K + i] = extreme ? ((c + i / LM_QK) % 2 ? -3.5f : 2.25f) : frand() * (c % 3 == 0 ? 50.0f : 1.0f);
    for (int isa = 0; isa <= (int)lm_cpu_isa_best(); isa++) {
        const struct lm_cpu_kernels *kt = lm_cpu_kernels_for((enum lm_cpu_isa)isa);
        const struct lm_cpu_type_kernels *tk = kt ? &kt->type[type] : NULL;
        if (!tk || !tk->gemm_panel || !tk->panel_exact)
            continue;
        /* strides past the rows, keeping the 4-byte alignment of Q8_K's float d */
        const size_t by = tk->panel_row_size(K) + 20, gy = lm_row_size(tk->gemm_vt, K) + (is_k(type) ? 8 : 6);
        char *pact = malloc(by * (size_t)N), *gact = malloc(gy * (size_t)N);
        int16_t *sums = malloc(sizeof(int16_t) * (size_t)(nb * N));
        lm_from_float_fn enc = tk->gemm_from_float ? tk->gemm_from_float : kt->type[tk->gemm_vt].from_float;
        for (int64_t c = 0; c < N; c++) {
            tk->panel_from_float(xf + c * K, pact + (size_t)c * by, K);
            enc(xf + c * K, gact + (size_t)c * gy, K);
            for (int64_t b = 0; !is_k(type) && b < nb; b++) { /* K-quants: the Q8_K rows' own bsums */
                int sum = 0;
                for (int t = 0; t < LM_QK; t++)
                    sum += ((const struct lm_block_q8_0 *)(gact + (size_t)c * gy))[b].qs[t];
                sums[c * nb + b] = (int16_t)sum;
            }
        }
        for (size_t i = 0; i < ldc * (size_t)(N + 1); i++)
            got[i] = 1234.5f;
        void *scratch = aligned_alloc(64, (tk->panel_scratch(K) + 63) / 64 * 64);
        tk->gemm_panel(K, ng, group, got, ldc, packed, pact, by, N, scratch);
        free(scratch);
        int bad = 0, outside = 0;
        for (int g = 0; g < ng; g++)
            for (int c0 = 0; c0 < N; c0 += LM_GEMM_MAX_NC) {
                const int nc = N - c0 < LM_GEMM_MAX_NC ? N - c0 : LM_GEMM_MAX_NC;
                tk->gemm_x8(K, want, LM_REPACK_ROWS, packed + (size_t)g * group, gact + (size_t)c0 * gy, gy,
                            sums + (size_t)c0 * (size_t)nb, nc);
                for (int c = 0; c < nc; c++)
                    bad += memcmp(want + c * LM_REPACK_ROWS, got + (size_t)(c0 + c) * ldc + (size_t)g * LM_REPACK_ROWS,
                                  sizeof(float) * LM_REPACK_ROWS) != 0;
            }
        for (int c = 0; c <= N; c++)
            for (size_t r = 0; r < ldc; r++)
                outside += (c == N || r >= (size_t)M) && got[(size_t)c * ldc + r] != 1234.5f;
        CHECKF(bad == 0, "%s %s panel K%lld ng %d N %d%s: %d (group, column)s not gemm_x8's bits", lm_type_name(type),
               lm_cpu_isa_name((enum lm_cpu_isa)isa), (long long)K, ng, N, extreme ? " extreme" : "", bad);
        CHECKF(outside == 0, "%s %s panel K%lld ng %d N %d: %d writes outside the outputs", lm_type_name(type),
               lm_cpu_isa_name((enum lm_cpu_isa)isa), (long long)K, ng, N, outside);
        free(pact);
        free(gact);
        free(sums);
        runs++;
    }
    free(plain);
    free(packed);
    free(xf);
    free(got);
    free(want);
    return runs;
}

static void test_exact_panel(enum lm_type type)
{
    static const int Ns[] = {1, 2, 3, 7, 8, 9, 16, 17, 63, 64, 65, 70, 130};
    static const int64_t Ks_legacy[] = {32, 96, 2048}, Ks_k[] = {256, 768, 2048};
    const int64_t *Ks = is_k(type) ? Ks_k : Ks_legacy;
    int runs = 0;
    for (int ng = 1; ng <= 5; ng++)
        for (size_t in = 0; in < sizeof Ns / sizeof Ns[0]; in++)
            runs += exact_panel_case(type, Ks[(ng + in) % 3], ng, Ns[in], false);
    runs += exact_panel_case(type, 2048, 3, 17, true);
    runs += exact_panel_case(type, Ks[1], 2, 9, true);
    printf("%s: %d exact panel runs bit-identical to gemm_x8%s\n", lm_type_name(type), runs,
           runs ? "" : " (no level has an exact panel here: skipped)");
}

int main(void)
{
    test_exact_panel(LM_TYPE_Q4_0);
    test_exact_panel(LM_TYPE_Q8_0);
    test_exact_panel(LM_TYPE_Q4_K);
    test_kernels_int(LM_TYPE_Q4_0);
    test_kernels_int(LM_TYPE_Q8_0);
    test_gemv(LM_TYPE_Q4_0);
    test_gemv(LM_TYPE_Q8_0);
    test_roundtrip(LM_TYPE_Q4_0);
    test_roundtrip(LM_TYPE_Q8_0);
    test_matmul(LM_TYPE_Q4_0);
    test_matmul(LM_TYPE_Q8_0);
    test_get_rows(LM_TYPE_Q4_0);
    test_get_rows(LM_TYPE_Q8_0);
    static const enum lm_type ktypes[] = {LM_TYPE_Q2_K, LM_TYPE_Q3_K, LM_TYPE_Q4_K, LM_TYPE_Q5_K, LM_TYPE_Q6_K};
    for (int i = 0; i < 5; i++) {
        test_roundtrip(ktypes[i]);
        test_kernels_k(ktypes[i]);
        test_kernels_int(ktypes[i]);
        test_gemv(ktypes[i]);
        test_matmul(ktypes[i]);
        test_get_rows(ktypes[i]);
    }
    test_float_encoders();
    for (int t = 0; t < 3; t++) {
        const enum lm_type type = t == 0 ? LM_TYPE_F16 : t == 1 ? LM_TYPE_BF16 : LM_TYPE_F32;
        test_roundtrip(type);
        test_kernels_float(type);
        test_gemv(type);
        test_matmul(type);
        test_get_rows(type);
    }
    return lm_test_summary();
}
