/* ops_mmq.cu - CUDA MUL_MAT of quantized weights for batches of 9 to
 * MMQ_MAX_N columns (the batched decode of a server's sequences, short
 * prompts): one kernel that decodes the weights tile by tile into shared
 * memory as F16 and multiplies them with F16 activations on the tensor cores
 * (WMMA 16x16x16, F32 accumulation), instead of the GEMM path's two passes
 * (the whole matrix dequantized into F16 scratch, then cuBLAS; ops_matmul.cu).
 * The weights are read once per BN columns, in their quantized size, and
 * the launches can be recorded in a CUDA graph (no cuBLAS, no host sync), so
 * a graph whose products all take this path or the matvec is replayed
 * (lm_cu_matmul_capturable). A backend created with lm_backend_opts.no_cuda_mmq
 * (a context's, while LAMINA_CUDA_MMQ=0) sends these products to the GEMM
 * path instead (an A/B switch).
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
 * calls behind mmq_warp_* helpers that have a plain host version (mmq.cuh,
 * shared with ops_moe.cu's MUL_MAT_ID batches), so that
 * tests/cuda/test_cuda_host_mmq.cu runs the same code on the host (each
 * phase to the end, as __syncthreads orders them) against the ref backend.
 */
#include <cuda_fp16.h>
#include <stdint.h>

#include "core/tensor.h"
#include "core/type.h"
#include "cuda/cuda_internal.cuh"
#include "cuda/mmq.cuh"

#define MMQ_GRID_Z_MAX 65535 /* slices beyond this loop in the kernel */

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

/* Thread tid's share of the block's result (rows m0.., columns n0.., BN
 * columns): the warps' sums, into dst with bounds. */
template <int BN>
MMQ_FN void mmq_store(const mmq_args &p, float *dst, const float (*c)[MMQ_MAX_N][MMQ_LDC], int64_t m0, int64_t n0,
                      int tid)
{
    for (int i = tid; i < MMQ_BM * BN; i += MMQ_THREADS) {
        const int r = i % MMQ_BM, col = i / MMQ_BM;
        if (m0 + r < p.M && n0 + col < p.N)
            dst[m0 + r + (n0 + col) * p.d_s1] = mmq_sum(c, col, r);
    }
}

template <int T, int BN> static __global__ void __launch_bounds__(MMQ_THREADS) k_mmq(const mmq_args p)
{
    static_assert(BN % 16 == 0 && BN <= MMQ_MAX_N, "whole fragments, within the C tiles");
    __shared__ __align__(128) mmq_smem sm;
    const int64_t m0 = (int64_t)blockIdx.x * MMQ_BM, n0 = (int64_t)blockIdx.y * BN;
    for (int64_t y = blockIdx.z; y < p.n_slices; y += gridDim.z) {
        const mmq_slice s = mmq_resolve(p, y);
        mmq_block<T, BN>(s.a, p.a_nb1, p.K, p.M, m0, s.b + n0 * p.Kp, p.Kp, &sm);
        mmq_store<BN>(p, s.dst, sm.c, m0, n0, threadIdx.x);
    }
}

/* ---- host side ---- */

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
    p.Kp = mmq_round_up(p.K, MMQ_BK), p.Np = mmq_round_up(p.N, bn);
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
    pk.Kp = mmq_round_up(pk.K, MMQ_BK), pk.Np = mmq_round_up(pk.N, bn);
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
