/* mmq.cuh - the pieces of the MMQ kernels (ops_mmq.cu: MUL_MAT of quantized
 * weights with 9 to MMQ_MAX_N columns; ops_moe.cu: MUL_MAT_ID batches of up
 * to MMQ_MAX_N tokens): the block shape, the A tile of decoded weights, the
 * warps' WMMA products and their partial sums, each callable on the host
 * (tests/cuda/test_cuda_host_mmq.cu and test_cuda_host_moe.cu run them
 * phase by phase). See ops_mmq.cu's comment for the design.
 */
#ifndef LM_CUDA_MMQ_CUH
#define LM_CUDA_MMQ_CUH

#include <cuda_fp16.h>
#include <math.h>
#include <mma.h>
#include <stdint.h>
#include <string.h>

#include "cuda/dequant.cuh"
#include "cuda/matmul.cuh"

#define MMQ_WARPS 4
#define MMQ_THREADS (32 * MMQ_WARPS)
#define MMQ_BM 16                        /* weight rows per block: one fragment */
#define MMQ_BK 256                       /* K elements per tile: a multiple of every block size */
#define MMQ_KW (MMQ_BK / MMQ_WARPS)      /* a warp's elements of a tile */
#define MMQ_LDA (MMQ_BK + 8)             /* F16 per A-tile row (16-byte aligned rows, fewer bank conflicts) */
#define MMQ_LDC (MMQ_BM + 4)             /* floats per C-tile column */
static_assert(MMQ_BM * (MMQ_BK / 32) == MMQ_THREADS, "one unit of the A tile per thread");
static_assert(MMQ_LDA % 8 == 0, "A-tile rows 16-byte aligned (runs stored 16 bytes at a time, WMMA's ldm)");

#define MMQ_FN static __host__ __device__ __forceinline__

/* v as F16, finite values past the F16 range saturated (store_act's rule). */
MMQ_FN __half mmq_half(float v)
{
    return __float2half_rn(fabsf(v) > 65504.0f && isfinite(v) ? copysignf(65504.0f, v) : v);
}

/* ---- the A tile ---- */

union mmq_smem {
    __half a[MMQ_BM][MMQ_LDA];
    float c[MMQ_WARPS][MMQ_MAX_N][MMQ_LDC]; /* warp w's sums, [column][row] */
};

/* Thread tid's unit of the A tile of rows m0.. and elements k0..k0 + MMQ_BK
 * of weights `wa` (rows of K, row stride a_nb1 bytes, M rows): the tile's
 * MMQ_BM x (MMQ_BK / 32) units row by row, one per thread (neighbouring
 * threads read neighbouring units of a row). Unit u of a row is unit u % UPB
 * of the tile's block u / UPB; its 4 runs of 8 land at their elements'
 * columns. */
template <int T>
MMQ_FN void mmq_fill_a(const uint8_t *wa, int64_t a_nb1, int64_t K, int64_t M, int64_t m0, int64_t k0, int tid,
                       __half (*a)[MMQ_LDA])
{
    using Q = dq<T>;
    static_assert(MMQ_BK % Q::QK == 0, "a tile holds whole blocks");
    constexpr int UPR = MMQ_BK / 32; /* units per tile row */
    const int64_t nblk = K / Q::QK;
    const int r = tid / UPR, ib = tid % UPR / Q::UPB, j = tid % UPR % Q::UPB;
    const int64_t kb = k0 / Q::QK + ib;
    const bool ok = m0 + r < M && kb < nblk;
    typename Q::unit un;
    if (ok)
        Q::load(wa + (m0 + r) * a_nb1 + kb * Q::BYTES, j, &un);
    for (int run = 0; run < 4; run++) { /* constant trip counts: unrolled without a pragma (host too) */
        float v[8];
        if (ok)
            dq_run_values<T>(un, j, run, v);
        else
            for (int i = 0; i < 8; i++)
                v[i] = 0.0f;
        alignas(16) __half h[8];
        for (int i = 0; i < 8; i++)
            h[i] = mmq_half(v[i]);
        /* one 16-byte store: runs start at multiples of 8 elements, rows are 16-byte aligned */
        __half *o = &a[r][ib * Q::QK + Q::run_base(j, run)];
#ifdef __CUDA_ARCH__
        *(uint4 *)o = *(const uint4 *)h;
#else
        memcpy(o, h, sizeof h);
#endif
    }
}

/* ---- one warp's fragments (WMMA on the device, plain matrices on the
 * host: a host "warp" is the whole warp at once) ---- */

template <int FN> struct mmq_warp {
#ifdef __CUDA_ARCH__
    nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float> acc[FN];
#else
    float acc[FN][16][16]; /* [row][column] */
#endif
};

template <int FN> MMQ_FN void mmq_warp_zero(mmq_warp<FN> &w)
{
#ifdef __CUDA_ARCH__
#pragma unroll
    for (int j = 0; j < FN; j++)
        nvcuda::wmma::fill_fragment(w.acc[j], 0.0f);
#else
    memset(w.acc, 0, sizeof w.acc);
#endif
}

/* acc[j] += the A tile's elements kw0 .. kw0 + MMQ_KW (all 16 rows) times
 * the packed columns b + 16 j ldb .. at the same k (b: the block's first
 * column at the tile's first k; ldb = Kp). */
template <int FN> MMQ_FN void mmq_warp_mma(mmq_warp<FN> &w, const __half (*a)[MMQ_LDA], int kw0, const __half *b,
                                           int64_t ldb)
{
#ifdef __CUDA_ARCH__
    using namespace nvcuda;
#pragma unroll
    for (int kk = kw0; kk < kw0 + MMQ_KW; kk += 16) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fa;
        wmma::load_matrix_sync(fa, &a[0][kk], MMQ_LDA);
#pragma unroll
        for (int j = 0; j < FN; j++) {
            wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major> fb;
            wmma::load_matrix_sync(fb, b + 16 * j * ldb + kk, (unsigned)ldb);
            wmma::mma_sync(w.acc[j], fa, fb, w.acc[j]);
        }
    }
#else
    for (int kk = kw0; kk < kw0 + MMQ_KW; kk += 16)
        for (int j = 0; j < FN; j++)
            for (int r = 0; r < 16; r++)
                for (int c = 0; c < 16; c++) {
                    float s = 0.0f;
                    for (int t = 0; t < 16; t++)
                        s += __half2float(a[r][kk + t]) * __half2float(b[(16 * j + c) * ldb + kk + t]);
                    w.acc[j][r][c] += s;
                }
#endif
}

/* The warp's sums into its C tile: element (row, column) at c[column][row]. */
template <int FN> MMQ_FN void mmq_warp_store(const mmq_warp<FN> &w, float (*c)[MMQ_LDC])
{
#ifdef __CUDA_ARCH__
#pragma unroll
    for (int j = 0; j < FN; j++)
        nvcuda::wmma::store_matrix_sync(&c[16 * j][0], w.acc[j], MMQ_LDC, nvcuda::wmma::mem_col_major);
#else
    for (int j = 0; j < FN; j++)
        for (int r = 0; r < 16; r++)
            for (int col = 0; col < 16; col++)
                c[16 * j + col][r] = w.acc[j][r][col];
#endif
}

/* The block's product, as the kernels run it: for every K tile, the A tile
 * of weight rows m0.. (wa, a_nb1, K, M as mmq_fill_a) filled, then each
 * warp's share of its k-steps times the packed columns b (the block's first
 * column; ldb = Kp); at the end each warp's sums in sm->c[warp]. */
template <int T, int BN>
static __device__ __forceinline__ void mmq_block(const uint8_t *wa, int64_t a_nb1, int64_t K, int64_t M, int64_t m0,
                                                 const __half *b, int64_t ldb, mmq_smem *sm)
{
    const int warp = threadIdx.x / 32;
    mmq_warp<BN / 16> w;
    mmq_warp_zero(w);
    for (int64_t k0 = 0; k0 < K; k0 += MMQ_BK) {
        __syncthreads(); /* the previous tile (or the previous product's C tiles) is consumed */
        mmq_fill_a<T>(wa, a_nb1, K, M, m0, k0, threadIdx.x, sm->a);
        __syncthreads();
        mmq_warp_mma(w, sm->a, warp * MMQ_KW, b + k0, ldb);
    }
    __syncthreads(); /* C aliases A */
    mmq_warp_store(w, sm->c[warp]);
    __syncthreads();
}

/* The sum of the warps' partial sums of element (r, col), in warp order. */
MMQ_FN float mmq_sum(const float (*c)[MMQ_MAX_N][MMQ_LDC], int col, int r)
{
    float v = c[0][col][r];
    for (int w = 1; w < MMQ_WARPS; w++)
        v += c[w][col][r];
    return v;
}

/* Columns per block for about N columns. */
static inline int mmq_bn(int64_t N) { return N <= 16 ? 16 : N <= 32 ? 32 : 64; }

static inline int64_t mmq_round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

#endif
