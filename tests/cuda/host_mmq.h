/* host_mmq.h - mmq.cuh's mmq_block run on the host for the CUDA host tests
 * (test_cuda_host_mmq.cu, test_cuda_host_moe.cu): the same phase functions,
 * each phase to the end as the kernel's __syncthreads order them (every
 * thread fills the A tile, then every warp multiplies, then every warp stores
 * its sums), with NaN in the shared tiles before each phase writes them
 * (stale contents must not matter). Include after mmq.cuh. */
#ifndef LM_TEST_HOST_MMQ_H
#define LM_TEST_HOST_MMQ_H

#include <math.h>

/* mmq_block<T, BN>(wa, a_nb1, K, M, m0, b, ldb, sm): the warps' sums in sm->c. */
template <int T, int BN>
static void emulate_mmq_block(const uint8_t *wa, int64_t a_nb1, int64_t K, int64_t M, int64_t m0, const __half *b,
                              int64_t ldb, mmq_smem *sm)
{
    static mmq_warp<BN / 16> w[MMQ_WARPS];
    for (int wi = 0; wi < MMQ_WARPS; wi++)
        mmq_warp_zero(w[wi]);
    for (int64_t k0 = 0; k0 < K; k0 += MMQ_BK) {
        for (int r = 0; r < MMQ_BM; r++)
            for (int k = 0; k < MMQ_LDA; k++)
                sm->a[r][k] = __float2half_rn(NAN);
        for (int tid = 0; tid < MMQ_THREADS; tid++)
            mmq_fill_a<T>(wa, a_nb1, K, M, m0, k0, tid, sm->a);
        for (int wi = 0; wi < MMQ_WARPS; wi++)
            mmq_warp_mma(w[wi], sm->a, wi * MMQ_KW, b + k0, ldb);
    }
    for (int wi = 0; wi < MMQ_WARPS; wi++)
        for (int col = 0; col < MMQ_MAX_N; col++)
            for (int r = 0; r < MMQ_LDC; r++)
                sm->c[wi][col][r] = NAN;
    for (int wi = 0; wi < MMQ_WARPS; wi++)
        mmq_warp_store(w[wi], sm->c[wi]);
}

#endif
