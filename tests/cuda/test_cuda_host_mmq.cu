/* test_cuda_host_mmq.cu - the MMQ path of the CUDA backend (src/cuda/ops_mmq.cu:
 * MUL_MAT of quantized weights with 9 to 64 columns) run on the host, no GPU
 * needed.
 *
 * The file includes ops_mmq.cu (its functions become this program's own, so
 * lm_cuda's ops_mmq.cu object is never linked in) and runs k_mmq block by
 * block with the same phase functions the kernel calls, each phase to the
 * end as the kernel's __syncthreads order them: the activations packed by
 * mmq_packed_value, the A tile filled by mmq_fill_a for every thread, the
 * warps' products (mmq_warp_mma: the host version multiplies the same F16
 * values as plain matrices, WMMA's documented row-major A, column-major B
 * and column-major C), mmq_warp_store and mmq_store. So every index the
 * kernel computes (tiles, units, runs, warps, padding, slices, broadcast,
 * dst strides) is checked; WMMA itself is not.
 *
 * Per case, against:
 *   - the same product in double over the F16-rounded weights (quant/'s
 *     to_float) and activations: within 1e-5 of the sum of |products| per
 *     output (the host sums in float): a wrong index is off by far more;
 *   - the ref backend's MUL_MAT: normalised MSE within 1e-3 (test_ops'
 *     bound for quantized weights);
 *   - every output written once (a NaN canary), nothing past dst written.
 * Cases: every type the decoders read (IQ2 encoded with an importance
 * matrix), 1 to 150 rows (partial row blocks), K from one block to past
 * three tiles (partial K tiles, warps with nothing to add), 9 to 64 columns (all three column tiles),
 * broadcast slices, b contiguous or transposed. Also lm_cu_mmq_ok's choice
 * and mmq_bn. Prints "FAIL: ..." per failure; exits 1 if any.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/ops_mmq.cu"
#include "backend/backend.h"
#include "quant/quant.h"
#include "ref/ref.h"

#include "host_check.h"
#include "host_mmq.h"
#define HOST_RNG_SEED 0x6d6d71a5e3b1c047ull
#include "host_rng.h"

static int n_cases;

/* k_mmq<T, BN>'s block (bx, by) for slice y, phase by phase (mmq_block,
 * then mmq_store). */
template <int T, int BN> static void emulate_block(const mmq_args &p, int64_t bx, int64_t by, int64_t y)
{
    static mmq_smem sm;
    const int64_t m0 = bx * MMQ_BM, n0 = by * BN;
    const mmq_slice s = mmq_resolve(p, y);
    emulate_mmq_block<T, BN>(s.a, p.a_nb1, p.K, p.M, m0, s.b + n0 * p.Kp, p.Kp, &sm);
    for (int tid = 0; tid < MMQ_THREADS; tid++)
        mmq_store<BN>(p, s.dst, sm.c, m0, n0, tid);
}

template <int T> static void emulate(const mmq_args &p, int bn)
{
    const int64_t gx = (p.M + MMQ_BM - 1) / MMQ_BM, gy = p.Np / bn;
    for (int64_t y = 0; y < p.n_slices; y++)
        for (int64_t bx = 0; bx < gx; bx++)
            for (int64_t by = 0; by < gy; by++) {
                if (bn == 16)
                    emulate_block<T, 16>(p, bx, by, y);
                else if (bn == 32)
                    emulate_block<T, 32>(p, bx, by, y);
                else
                    emulate_block<T, 64>(p, bx, by, y);
            }
}

static float half_round(float v) { return __half2float(mmq_half(v)); }

template <int T> static void check_case(lm_backend_t ref, struct lm_ctx *ctx, int c)
{
    using Q = dq<T>;
    const enum lm_type type = (enum lm_type)T;
    lm_ctx_reset(ctx);
    const int64_t max_blocks = Q::QK == 32 ? 26 : 4; /* up to 832 / 1024 elements: 3+ tiles */
    const int64_t K = Q::QK * (1 + rng_int((int)max_blocks)), M = 1 + rng_int(150), N = 9 + rng_int(56);
    const bool batch = c % 3 == 2;
    const int64_t A2 = batch ? 1 + rng_int(2) : 1, A3 = 1, R2 = batch ? 1 + rng_int(2) : 1,
                  R3 = batch ? 1 + rng_int(2) : 1;
    const bool bt = rng_int(2);
    struct lm_tensor *a = lm_new_tensor_4d(ctx, type, K, M, A2, A3);
    struct lm_tensor *b = bt ? lm_new_tensor_4d(ctx, LM_TYPE_F32, N, K, A2 * R2, A3 * R3)
                             : lm_new_tensor_4d(ctx, LM_TYPE_F32, K, N, A2 * R2, A3 * R3);
    if (!a || !b) {
        CHECK(false, "%s case %d: arena", lm_type_name(type), c);
        return;
    }
    const int64_t rows = M * A2 * A3;
    float *src = (float *)malloc(sizeof(float) * K * rows), *imat = (float *)malloc(sizeof(float) * K);
    for (int64_t i = 0; i < K * rows; i++)
        src[i] = rng_uniform(-1.0f, 1.0f);
    for (int64_t i = 0; i < K; i++)
        imat[i] = rng_uniform(0.1f, 2.0f);
    const size_t qbytes = lm_quantize_chunk(type, src, a->data, 0, rows, K,
                                            lm_quantize_requires_imatrix(type) ? imat : NULL);
    CHECK(qbytes == lm_nbytes(a), "%s case %d: quantize", lm_type_name(type), c);
    for (int64_t i = 0; i < lm_nelements(b); i++)
        ((float *)b->data)[i] = rng_uniform(-1.0f, 1.0f);
    if (bt)
        b = lm_transpose(ctx, b);
    struct lm_tensor *dst = lm_mul_mat(ctx, a, b);
    struct lm_graph *g = dst ? lm_graph_new(ctx, 16) : NULL;
    if (!g || lm_graph_expand(g, dst) != LM_OK || lm_backend_graph_compute(ref, g) != LM_OK) {
        CHECK(false, "%s case %d: ref compute", lm_type_name(type), c);
        free(src);
        free(imat);
        return;
    }
    CHECK(lm_cu_mmq_ok(dst), "%s case %d: lm_cu_mmq_ok refuses %lld columns", lm_type_name(type), c, (long long)N);

    /* the host side's arguments, then the kernels */
    const int bn = mmq_bn(N);
    const int64_t n_out = lm_nelements(dst), guard = 256;
    mmq_pack_args pk = {};
    pk.b = (const float *)b->data;
    for (int d = 0; d < 4; d++)
        pk.s[d] = (int64_t)b->nb[d] / 4;
    pk.K = K, pk.N = N, pk.B2 = b->ne[2];
    pk.Kp = mmq_round_up(K, MMQ_BK), pk.Np = mmq_round_up(N, bn);
    pk.total = pk.Kp * pk.Np * b->ne[2] * b->ne[3];
    __half *packed = (__half *)malloc(sizeof(__half) * pk.total);
    for (int64_t i = 0; i < pk.total; i++)
        packed[i] = mmq_packed_value(pk.b, pk.s, pk.K, pk.N, pk.B2, pk.Kp, pk.Np, i);
    const mm_weights w = {(const uint8_t *)a->data, (int64_t)a->nb[1], (int64_t)a->nb[2], (int64_t)a->nb[3]};
    float *out = (float *)malloc(sizeof(float) * (n_out + guard));
    for (int64_t i = 0; i < n_out + guard; i++)
        out[i] = NAN;
    float *keep = (float *)dst->data;
    dst->data = out; /* mmq_args_of reads dst's pointer */
    const mmq_args p = mmq_args_of(dst, w, packed, bn);
    dst->data = keep;
    emulate<T>(p, bn);

    /* the same product in double over F16-rounded inputs */
    float *wrow = (float *)malloc(sizeof(float) * K);
    double worst = 0.0, err2 = 0.0, ref2 = 0.0;
    int64_t unwritten = 0;
    for (int64_t i3 = 0; i3 < A3 * R3; i3++)
        for (int64_t i2 = 0; i2 < A2 * R2; i2++)
            for (int64_t m = 0; m < M; m++) {
                const uint8_t *row = (const uint8_t *)a->data + m * a->nb[1] + (i2 / R2) * a->nb[2] + (i3 / R3) * a->nb[3];
                lm_quant_traits(type)->to_float(row, wrow, K);
                for (int64_t n = 0; n < N; n++) {
                    double s = 0.0, sa = 0.0;
                    for (int64_t k = 0; k < K; k++) {
                        const float x = *(const float *)((const uint8_t *)b->data + k * b->nb[0] + n * b->nb[1] +
                                                          i2 * b->nb[2] + i3 * b->nb[3]);
                        const double pr = (double)half_round(wrow[k]) * half_round(x);
                        s += pr;
                        sa += fabs(pr);
                    }
                    const int64_t o = m + n * M + (i2 + i3 * A2 * R2) * M * N;
                    const float got = out[o], want_ref = ((const float *)dst->data)[o];
                    if (isnan(got)) {
                        unwritten++;
                        continue;
                    }
                    const double e = fabs(got - s) / (sa + 1e-30);
                    worst = e > worst ? e : worst;
                    err2 += ((double)got - want_ref) * ((double)got - want_ref);
                    ref2 += (double)want_ref * want_ref;
                }
            }
    int64_t past = 0;
    for (int64_t i = n_out; i < n_out + guard; i++)
        past += !isnan(out[i]);
    const double nmse = ref2 > 0 ? err2 / ref2 : err2;
    CHECK(unwritten == 0 && past == 0 && worst <= 1e-5 && nmse <= 1e-3,
          "%s case %d: K %lld M %lld N %lld slices %lldx%lld (r %lldx%lld) b %s: %lld unwritten, %lld written past "
          "dst, worst %.3g of sum |products| (bound 1e-5), nmse vs ref %.3g (bound 1e-3)",
          lm_type_name(type), c, (long long)K, (long long)M, (long long)N, (long long)(A2 * R2), (long long)(A3 * R3),
          (long long)R2, (long long)R3, bt ? "transposed" : "contiguous", (long long)unwritten, (long long)past, worst,
          nmse);
    n_cases++;
    free(wrow);
    free(out);
    free(packed);
    free(src);
    free(imat);
}

/* lm_cu_mmq_ok: quantized weights, 9 to MMQ_MAX_N columns; mmq_bn: the
 * smallest column tile that holds N. */
static void check_choice(struct lm_ctx *ctx)
{
    static const struct {
        enum lm_type t;
        int64_t n;
        bool want;
    } cs[] = {{LM_TYPE_Q4_0, 8, false},  {LM_TYPE_Q4_0, 9, true},  {LM_TYPE_Q6_K, 64, true},
              {LM_TYPE_Q4_K, 65, false}, {LM_TYPE_F16, 16, false}, {LM_TYPE_F32, 16, false}};
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
        lm_ctx_reset(ctx);
        struct lm_tensor *a = lm_new_tensor_2d(ctx, cs[i].t, 256, 4);
        struct lm_tensor *b = lm_new_tensor_2d(ctx, LM_TYPE_F32, 256, cs[i].n);
        struct lm_tensor *d = a && b ? lm_mul_mat(ctx, a, b) : NULL;
        CHECK(d && lm_cu_mmq_ok(d) == cs[i].want, "lm_cu_mmq_ok(%s, %lld columns) != %d", lm_type_name(cs[i].t),
              (long long)cs[i].n, (int)cs[i].want);
    }
    for (int64_t n = 9; n <= MMQ_MAX_N; n++) {
        const int bn = mmq_bn(n);
        CHECK(bn >= n && (bn == 16 || bn / 2 < n) && bn <= MMQ_MAX_N, "mmq_bn(%lld) = %d", (long long)n, bn);
    }
}

int main(void)
{
    lm_backend_t ref = NULL;
    struct lm_ctx *ctx = NULL;
    const struct lm_ctx_params cp = {(size_t)64 << 20, NULL, false};
    if (lm_ref_backend_new(&ref) != LM_OK || lm_ctx_new(&cp, &ctx) != LM_OK) {
        printf("FAIL: cannot make the ref backend or an arena\n");
        return 1;
    }
    check_choice(ctx);
#define CASES(t)                                                                                                       \
    {                                                                                                                  \
        const int before = n_fail;                                                                                     \
        for (int c = 0; c < 6; c++)                                                                                    \
            check_case<t>(ref, ctx, c);                                                                                \
        printf("%-8s %s\n", lm_type_name(t), n_fail == before ? "ok" : "FAILED");                                      \
    }
    DQ_QUANT_TYPES(CASES)
#undef CASES
    lm_ctx_free(ctx);
    lm_backend_free(ref);
    printf("test_cuda_host_mmq: %d cases, %d failures\n", n_cases, n_fail);
    return n_fail ? 1 : 0;
}
