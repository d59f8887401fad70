/* test_gemm.c - matmuls over repacked weights (cpu/repack.h, the GEMM
 * kernels) against the same matmuls over plain weights:
 *  - repack then unpack gives the original bytes;
 *  - with the generic kernels the results are bit-identical (same integer
 *    sums, same float order); with each ISA's kernels they agree within a
 *    tight bound (only float accumulation order differs);
 *  - shapes: 1, odd and many activation rows (GEMV and GEMM), several K and
 *    M, permuted activations, 1..3 threads. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "alloc/alloc.h"
#include "cpu/cpu.h"
#include "cpu/cpu_internal.h"
#include "cpu/repack.h"
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

static void test_roundtrip(enum lm_type type)
{
    const int64_t M = 16, K = 96;
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
    free(f);
    free(plain);
    free(packed);
    free(back);
}

/* out = a x b with a (M x K of type) placed in buft; b is [K, N] (or its permuted twin). */
static void run_matmul(enum lm_type type, lm_buft buft, const void *a_bytes, int64_t M, int64_t K, const float *b_data,
                       int64_t N, bool permuted, int nth, float *out)
{
    struct lm_ctx *wctx, *ctx;
    struct lm_ctx_params wp = {.mem_size = 4 * lm_tensor_overhead(), .no_alloc = true};
    struct lm_ctx_params gp = {.mem_size = 16 * lm_tensor_overhead() + lm_graph_overhead(16) + 4 * sizeof(float) * (size_t)(K * N + M * N) + (1 << 16),
                               .no_alloc = false};
    lm_ctx_new(&wp, &wctx);
    lm_ctx_new(&gp, &ctx);
    struct lm_tensor *a = lm_new_tensor_2d(wctx, type, K, M);
    struct lm_buffer *buf = NULL;
    CHECK(lm_alloc_ctx_tensors(wctx, buft, &buf) == LM_OK);
    CHECK(lm_tensor_set(a, a_bytes, 0, lm_nbytes(a)) == LM_OK);
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
    struct lm_graph *g = lm_graph_new(ctx, 16);
    CHECK(y && lm_graph_expand(g, y) == LM_OK);
    lm_backend_t be;
    CHECK(lm_cpu_backend_new_unclamped(nth, &be) == LM_OK);
    CHECK(lm_backend_graph_compute(be, g) == LM_OK);
    memcpy(out, y->data, sizeof(float) * (size_t)(M * N));
    lm_backend_free(be);
    lm_buffer_free(buf);
    lm_ctx_free(ctx);
    lm_ctx_free(wctx);
}

static void test_matmul(enum lm_type type)
{
    static const int64_t Ks[] = {32, 96, 2048};
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
                    else
                        CHECKF(nmse < 1e-10, "%s %s M%lld K%lld N%lld: nmse %g", lm_type_name(type),
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

int main(void)
{
    test_roundtrip(LM_TYPE_Q4_0);
    test_roundtrip(LM_TYPE_Q8_0);
    test_matmul(LM_TYPE_Q4_0);
    test_matmul(LM_TYPE_Q8_0);
    return lm_test_summary();
}
