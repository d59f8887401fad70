/* ops_mmq.cu - CUDA MUL_MAT of quantized weights for batches of 9 to
 * MMQ_MAX_N columns (the batched decode of a server's sequences, short
 * prompts): one kernel that decodes the weights tile by tile into shared
 * memory as F16 and multiplies them with F16 activations on the tensor cores
 * (WMMA 16x16x16, F32 accumulation), instead of the GEMM path's two passes
 * (the whole matrix dequantized into F16 scratch, then cuBLAS; ops_matmul.cu).
 * The weights are read once per BN columns, in their quantized size, and
 * the launches can be recorded in a CUDA graph (no cuBLAS, no host sync), so
 * a graph whose products all take this path or the matvec is replayed
 * (lm_cu_matmul_capturable). LAMINA_CUDA_MMQ=0 when a backend is created
 * sends these products to the GEMM path instead (an A/B switch).
 *
 * Numerics are the GEMM path's: each weight decoded exactly (dequant.cuh),
 * rounded once to F16; activations rounded to F16 with finite values past
 * 65504 saturated (store_act's rule, matmul.cuh), weights likewise; F32 sums.
 *
 * Layout. Activations b [K, N, B2, B3] (any strides) are first packed into
 * scratch slot 1 as F16 [Kp, Np, B2*B3] (K rounded up to MMQ_BK, N to BN,
 * the padding zero): column n of slice y at y Np Kp + n Kp. A block of
 * MMQ_THREADS (4 warps) owns MMQ_BM = 16 weight rows m0.. and BN (16, 32 or
 * 64) columns n0.. of one slice (blockIdx.z, looping past 65535): small
 * blocks, so that even a 2048-row matrix gives 128 of them. Per K tile of
 * MMQ_BK = 256 elements: each thread decodes one of the tile's 16 x 8
 * 32-element units (dequant.cuh: a unit is one thread's share of a block;
 * MMQ_BK is a multiple of every block size) into the shared A tile
 * [16][MMQ_LDA] of F16 (rows past M and blocks past K are zero); then warp w
 * takes the tile's k-steps 4w .. 4w + 3 (16 elements each) for all BN / 16
 * fragments of 16x16, its B fragments read straight from the packed
 * activations (L1/L2). At the end each warp's partial sums go to shared
 * memory (C tiles, column-major [warp][column][MMQ_LDC], aliasing the A
 * tile), and the threads add the 4 warps' sums in warp order (the same bits
 * every run) into dst with bounds (rows < M, columns < N) and dst's strides.
 *
 * The kernel is written as phases over (thread) and (warp) with the WMMA
 * calls behind mmq_frag_* helpers that have a plain host version, so that
 * tests/cuda/test_cuda_host_mmq.cu runs the same code on the host (each
 * phase to the end, as __syncthreads orders them) against the ref backend.
 */
#include <cuda_fp16.h>
#include <mma.h>
#include <stdint.h>
#include <string.h>

#include "core/tensor.h"
#include "core/type.h"
#include "cuda/cuda_internal.cuh"
#include "cuda/dequant.cuh"
#include "cuda/matmul.cuh"

#define MMQ_WARPS 4
#define MMQ_THREADS (32 * MMQ_WARPS)
#define MMQ_BM 16                        /* weight rows per block: one fragment */
#define MMQ_BK 256                       /* K elements per tile: a multiple of every block size */
#define MMQ_KW (MMQ_BK / MMQ_WARPS)      /* a warp's elements of a tile */
#define MMQ_LDA (MMQ_BK + 8)             /* F16 per A-tile row (16-byte aligned rows, fewer bank conflicts) */
#define MMQ_LDC (MMQ_BM + 4)             /* floats per C-tile column */
#define MMQ_GRID_Z_MAX 65535             /* slices beyond this loop in the kernel */
static_assert(MMQ_BM * (MMQ_BK / 32) == MMQ_THREADS, "one unit of the A tile per thread");
static_assert(MMQ_LDA % 8 == 0, "A-tile rows 16-byte aligned (runs stored 16 bytes at a time, WMMA's ldm)");

#define MMQ_FN static __host__ __device__ __forceinline__

/* The kernel's arguments: weights as lm_cu_weights_of gives them (rows of
 * K with aligned blocks, byte strides), the packed activations, dst with
 * float strides; slice y = (i2, i3) = (y % B2, y / B2) uses weight slice
 * (i2 / r2, i3 / r3). */
struct mmq_args {
    const uint8_t *a;
    int64_t a_nb1, a_nb2, a_nb3;
    const __half *b;
    int64_t Kp, Np;
    float *dst;
    int64_t d_s1, d_s2, d_s3;
    int64_t K, M, N, B2, n_slices, r2, r3;
};

/* One slice's weights (row 0), packed activations (column 0) and dst. */
struct mmq_slice {
    const uint8_t *a;
    const __half *b;
    float *dst;
};

MMQ_FN mmq_slice mmq_resolve(const mmq_args &p, int64_t y)
{
    const int64_t i2 = y % p.B2, i3 = y / p.B2;
    mmq_slice s;
    s.a = p.a + (i2 / p.r2) * p.a_nb2 + (i3 / p.r3) * p.a_nb3;
    s.b = p.b + y * p.Np * p.Kp;
    s.dst = p.dst + i2 * p.d_s2 + i3 * p.d_s3;
    return s;
}

/* v as F16, finite values past the F16 range saturated (store_act's rule). */
MMQ_FN __half mmq_half(float v)
{
    return __float2half_rn(fabsf(v) > 65504.0f && isfinite(v) ? copysignf(65504.0f, v) : v);
}

/* ---- activations ---- */

/* Element i of the packed activations [Kp, Np, n_slices]: b's element (k, n)
 * of slice y (strides in floats, slice y = (y % B2, y / B2)) as F16, zero in
 * the padding. */
MMQ_FN __half mmq_packed_value(const float *b, const int64_t *s, int64_t K, int64_t N, int64_t B2, int64_t Kp,
                               int64_t Np, int64_t i)
{
    const int64_t k = i % Kp, n = i / Kp % Np, y = i / Kp / Np;
    if (k >= K || n >= N)
        return __float2half_rn(0.0f);
    return mmq_half(b[k * s[0] + n * s[1] + (y % B2) * s[2] + (y / B2) * s[3]]);
}

struct mmq_pack_args {
    const float *b;
    int64_t s[4];
    int64_t K, N, B2, Kp, Np, total;
    __half *out;
};

static __global__ void k_mmq_pack(const mmq_pack_args p)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < p.total; i += (int64_t)gridDim.x * blockDim.x)
        p.out[i] = mmq_packed_value(p.b, p.s, p.K, p.N, p.B2, p.Kp, p.Np, i);
}

/* ---- the A tile ---- */

union mmq_smem {
    __half a[MMQ_BM][MMQ_LDA];
    float c[MMQ_WARPS][MMQ_MAX_N][MMQ_LDC]; /* warp w's sums, [column][row] */
};

/* Thread tid's unit of the A tile of rows m0.. and elements k0..k0 + MMQ_BK
 * of slice weights `wa`: the tile's MMQ_BM x (MMQ_BK / 32) units row by row
 * (neighbouring threads read neighbouring units of a row). Unit u of a row
 * is unit u % UPB of the tile's block u / UPB; its 4 runs of 8 land at their
 * elements' columns. */
template <int T> MMQ_FN void mmq_fill_a(const mmq_args &p, const uint8_t *wa, int64_t m0, int64_t k0, int tid,
                                        __half (*a)[MMQ_LDA])
{
    using Q = dq<T>;
    static_assert(MMQ_BK % Q::QK == 0, "a tile holds whole blocks");
    constexpr int UPR = MMQ_BK / 32; /* units per tile row */
    const int64_t nblk = p.K / Q::QK;
    const int r = tid / UPR, ib = tid % UPR / Q::UPB, j = tid % UPR % Q::UPB;
    const int64_t kb = k0 / Q::QK + ib;
    const bool ok = m0 + r < p.M && kb < nblk;
    typename Q::unit un;
    if (ok)
        Q::load(wa + (m0 + r) * p.a_nb1 + kb * Q::BYTES, j, &un);
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

/* Thread tid's share of the block's result (rows m0.., columns n0.., BN
 * columns): the warps' C tiles added in warp order, into dst with bounds. */
template <int BN>
MMQ_FN void mmq_store(const mmq_args &p, float *dst, const float (*c)[MMQ_MAX_N][MMQ_LDC], int64_t m0, int64_t n0,
                      int tid)
{
    for (int i = tid; i < MMQ_BM * BN; i += MMQ_THREADS) {
        const int r = i % MMQ_BM, col = i / MMQ_BM;
        float v = c[0][col][r];
        for (int w = 1; w < MMQ_WARPS; w++)
            v += c[w][col][r];
        if (m0 + r < p.M && n0 + col < p.N)
            dst[m0 + r + (n0 + col) * p.d_s1] = v;
    }
}

template <int T, int BN> static __global__ void __launch_bounds__(MMQ_THREADS) k_mmq(const mmq_args p)
{
    static_assert(BN % 16 == 0 && BN <= MMQ_MAX_N, "whole fragments, within the C tiles");
    __shared__ __align__(128) mmq_smem sm;
    const int warp = threadIdx.x / 32;
    const int64_t m0 = (int64_t)blockIdx.x * MMQ_BM, n0 = (int64_t)blockIdx.y * BN;
    for (int64_t y = blockIdx.z; y < p.n_slices; y += gridDim.z) {
        const mmq_slice s = mmq_resolve(p, y);
        mmq_warp<BN / 16> w;
        mmq_warp_zero(w);
        for (int64_t k0 = 0; k0 < p.K; k0 += MMQ_BK) {
            __syncthreads(); /* the previous tile (or slice's C tiles) is consumed */
            mmq_fill_a<T>(p, s.a, m0, k0, threadIdx.x, sm.a);
            __syncthreads();
            mmq_warp_mma(w, sm.a, warp * MMQ_KW, s.b + n0 * p.Kp + k0, p.Kp);
        }
        __syncthreads(); /* C aliases A */
        mmq_warp_store(w, sm.c[warp]);
        __syncthreads();
        mmq_store<BN>(p, s.dst, sm.c, m0, n0, threadIdx.x);
    }
}

/* ---- host side ---- */

/* Columns per block for N columns. */
static int mmq_bn(int64_t N) { return N <= 16 ? 16 : N <= 32 ? 32 : 64; }

static int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

bool lm_cu_mmq_ok(const struct lm_tensor *t)
{
    return t->op == LM_OP_MUL_MAT && lm_cu_decode_ok(t->src[0]->type) && t->src[1]->ne[1] > MV_MAX_N &&
           t->src[1]->ne[1] <= MMQ_MAX_N;
}

/* The kernel's arguments for node dst with weights w and packed b. */
static mmq_args mmq_args_of(const struct lm_tensor *dst, const mm_weights &w, const __half *bp, int bn)
{
    const struct lm_tensor *a = dst->src[0], *b = dst->src[1];
    mmq_args p = {};
    p.a = w.data;
    p.a_nb1 = w.nb1, p.a_nb2 = w.nb2, p.a_nb3 = w.nb3;
    p.b = bp;
    p.K = a->ne[0], p.M = a->ne[1], p.N = b->ne[1], p.B2 = b->ne[2];
    p.Kp = round_up(p.K, MMQ_BK), p.Np = round_up(p.N, bn);
    p.dst = (float *)dst->data;
    p.d_s1 = (int64_t)dst->nb[1] / 4, p.d_s2 = (int64_t)dst->nb[2] / 4, p.d_s3 = (int64_t)dst->nb[3] / 4;
    p.n_slices = b->ne[2] * b->ne[3];
    p.r2 = b->ne[2] / a->ne[2], p.r3 = b->ne[3] / a->ne[3];
    return p;
}

template <int T> static void launch_mmq(const mmq_args &p, int bn, cudaStream_t st)
{
    const dim3 grid(lm_cu_blocks(p.M, MMQ_BM), (unsigned)(p.Np / bn),
                    (unsigned)(p.n_slices < MMQ_GRID_Z_MAX ? p.n_slices : MMQ_GRID_Z_MAX));
    switch (bn) {
    case 16: k_mmq<T, 16><<<grid, MMQ_THREADS, 0, st>>>(p); break;
    case 32: k_mmq<T, 32><<<grid, MMQ_THREADS, 0, st>>>(p); break;
    default: k_mmq<T, 64><<<grid, MMQ_THREADS, 0, st>>>(p); break;
    }
}

lm_status lm_cu_mul_mat_mmq(struct lm_cu_ctx *c, struct lm_tensor *dst)
{
    const struct lm_tensor *a = dst->src[0], *b = dst->src[1];
    mm_weights w;
    lm_status st = lm_cu_weights_of(c, a, &w);
    if (st)
        return st;
    const int bn = mmq_bn(b->ne[1]);
    mmq_pack_args pk = {};
    pk.b = (const float *)b->data;
    for (int d = 0; d < 4; d++)
        pk.s[d] = (int64_t)b->nb[d] / 4;
    pk.K = b->ne[0], pk.N = b->ne[1], pk.B2 = b->ne[2];
    pk.Kp = round_up(pk.K, MMQ_BK), pk.Np = round_up(pk.N, bn);
    pk.total = pk.Kp * pk.Np * b->ne[2] * b->ne[3];
    pk.out = (__half *)lm_cu_scratch(c, 1, (size_t)pk.total * sizeof(__half));
    if (!pk.out)
        return LM_ERR_NOMEM;
    k_mmq_pack<<<grid_1d(lm_cu_blocks(pk.total, 256), ROWS_GRID_MAX), 256, 0, c->stream>>>(pk);
    const mmq_args p = mmq_args_of(dst, w, pk.out, bn);
    switch (a->type) {
#define CASE_MMQ(t)                                                                                                    \
    case t: launch_mmq<t>(p, bn, c->stream); break;
        DQ_QUANT_TYPES(CASE_MMQ)
#undef CASE_MMQ
    default: return LM_ERR_UNSUPPORTED;
    }
    return lm_cu_launch_status("mul_mat (mmq)");
}
