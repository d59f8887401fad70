/* ops_attn.cu - ATTN (fused attention over the KV cache, core/tensor.h's
 * lm_attn) on CUDA cores: scores and softmax statistics in double, P.V in
 * float.
 *
 * Numerics mirror ref/ops_attention.c: q is rounded once to k's dot type, a
 * score is s = dot(R_k(q), k) * scale + slope * mask (-inf where the mask is
 * -inf, whatever K holds there), and the probability that multiplies V is the
 * *normalised* p = R_v(e^(s - max) / sum), rounded to v's type after the
 * division as MUL_MAT rounds the softmax's output. Two consequences:
 *   - No one-pass online softmax with a rescaled accumulator: its p would be
 *     rounded before the final max and sum are known, an error of up to
 *     2^-9 (BF16) of each term (nmse ~2e-5 against ref, the ops test allows
 *     1e-9). Every path runs two passes over the cells: the first finds each
 *     row's (max, sum) by merging per-tile pairs (attn_stats_merge: the
 *     online-softmax update without an accumulator), the second recomputes or
 *     rereads the scores and accumulates R_v(p) * v.
 *   - The scores are doubles. A float score errs by ~1e-7 of itself, and now
 *     and then that moves p across an F16/BF16 rounding boundary of ref's p:
 *     one flipped dominant p of one row costs nmse ~1e-7 (tests/cuda/
 *     test_cuda_host_attn.cu: ~1 case in 200 over 1e-9; the CPU's float
 *     scores fail the ops test at LM_OPS_SEED=5). The products of the rounded
 *     q and k are exact in double, so s, max, sum and p are ref's to ~1e-15
 *     and R_v(p) is ref's bit for bit in practice. FP64 runs at half the FP32
 *     rate on A100/H100; decode is bound by reading K and V anyway.
 *
 * Prefill (n_q > DC_MAX_Q, or the decode scratch would be too large): one
 * block of PF_THREADS (8 warps) per (head, PF_BQ = 32 queries); warp w owns
 * queries 4w..4w+3, lane l cell l of each PF_BK = 32-cell tile. Shared
 * memory: the block's rounded q rows as doubles (32 x d2, d2 = d rounded up
 * to 2), then one buffer holding the tile's K rows as doubles (32 x ks, ks =
 * d2 or d2 + 2 so that the lanes' 16-byte reads hit distinct banks) and later
 * its V columns as floats (32 NT channels x 33, padded against bank
 * conflicts): 128.5 KB at d = d_v = 256, 65 KB at 128, 33 KB at 64. Pass 1:
 * scores, then per row the tile's max and sum by warp shuffles, merged into
 * the row's (max, sum). Pass 2: scores again, p, then V staged and each lane
 * accumulates NT channels (lane + 32 t) of its warp's 4 rows, p broadcast by
 * shuffles. Tiles whose mask hides every cell from every query of the block
 * are skipped in both passes (a causal prompt skips about half); cells hidden
 * from all 4 rows of a warp are skipped in P.V.
 *
 * Decode (n_q <= DC_MAX_Q = 4): split-K over the cells so that a few queries
 * still fill the GPU. The cells are cut into chunks of `chunk` cells (a power
 * of two, 128..4096: the smallest that keeps rows x chunks <= DC_BLOCKS_PER_SM
 * x SMs, and at most DC_MAX_CHUNKS chunks); blocks of DC_THREADS (4 warps)
 * per (head, chunk, query), heads fastest so that the heads sharing a kv head
 * read its K and V at about the same time (L2). Three kernels:
 *   1. scores: DC_LPC = 8 lanes per cell over d (a 3-step shuffle sum;
 *      hidden cells skip their K row), written to scratch, and the chunk's
 *      (max, sum);
 *   2. values: every block merges its row's chunk (max, sum) pairs in chunk
 *      order (so all chunks of a row use the same bits), turns its chunk's
 *      scores into rounded p in shared memory, and a warp per channel sums
 *      p * v over the chunk (lanes over cells: V rows are cells, so the reads
 *      are coalesced) into a partial row (or straight into dst with one chunk);
 *   3. combine: dst = the sum of a row's partials in chunk order.
 * Scratch (lm_cu_scratch): slot 0 scores [n_q * n_head][n_kv] (double), slot 1
 * the (max, sum) pairs [rows][chunks], slot 2 the partials [rows][chunks][d_v].
 *
 * Caches: K F32, F16, BF16 or Q8_0 (q then rounded through Q8_0 blocks by
 * the reference encoder, attn_q8_round, as ref's round_q); V F32/F16/BF16
 * in the transposed layout (a row per channel), or, for lm_attn_vrows, a row
 * per cell of those types or Q8_0 (p then stays float, as ref). A Q8_0
 * element is decoded where it is read (attn_row_elem: the block's scale
 * times the code, exact), so every kernel keeps its float/double math. A
 * float V is read through two strides (per channel, per cell: attn_args
 * v_sc, v_sj), one path for both layouts. The prefill kernel has an instance
 * per NT for float caches and one for caches with a Q8_0 side (Q8): the
 * extra paths would otherwise cost the float instances registers (sm_90,
 * CUDA 13: float instances 124-160 registers without spills, as before the
 * Q8_0 paths; the Q8 instance for NT 2 spills 8 bytes).
 *
 * Limits (lm_cu_supports_attn): d <= 256 and d_v <= 256 (registers: NT <= 8
 * channels per lane; shared memory), n_head <= 65535 (grid y), and a node
 * that takes the prefill kernel only where its shared memory fits the
 * device's opt-in limit (struct lm_cu_limits; lm_cu_attn_init lets each
 * prefill instance use up to that much once per backend).
 * Results are deterministic (fixed reduction orders), but unlike the CPU's
 * they are not batch-invariant: sums group by tiles and chunks of absolute
 * cell indices, and the decode chunking depends on the shapes.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math.h>

#include "core/fp16.h"
#include "core/op_rules.h"
#include "core/tensor.h"
#include "cuda/cuda_internal.cuh"
#include "cuda/quantize.cuh"
#include "cuda/warp.cuh"
#include "quant/blocks.h"

#define ATTN_MAX_D 256 /* largest d and d_v the kernels take */

#define PF_BQ 32      /* prefill: queries per block */
#define PF_BK 32      /* prefill: cells per tile (one per lane) */
#define PF_WARPS 8
#define PF_THREADS (32 * PF_WARPS)
#define PF_ROWS (PF_BQ / PF_WARPS) /* queries per warp */
#define PF_VS (PF_BK + 1)          /* row stride of the V tile in floats */
/* blocks per SM the registers allow: 2 (<= 128 registers) where ptxas fits NT's
 * accumulators without spilling, else 1 */
#define PF_MIN_BLOCKS(nt) ((nt) <= 2 || (nt) == 4 ? 2 : 1)

#define DC_MAX_Q 4            /* decode path up to this many queries */
#define DC_THREADS 128        /* decode kernels' block */
#define DC_LPC 8              /* decode scores: lanes per cell */
#define DC_WARPS (DC_THREADS / 32)
#define DC_MIN_CHUNK 128      /* cells per decode block: a power of two in [MIN, MAX] */
#define DC_MAX_CHUNK 4096
#define DC_MAX_CHUNKS 256     /* chunks per row (each values block merges them all) */
#define DC_BLOCKS_PER_SM 8    /* chunks shrink until the grid is about this many blocks per SM */
#define DC_MAX_SCORE_BYTES ((int64_t)256 << 20) /* larger score scratch: the prefill kernel instead */

#define FULL_MASK 0xffffffffu

/* ---- per-element math (host and device; tests/cuda/test_cuda_host_attn.cu) ---- */

/* A softmax row's running statistics: the max m of the scores seen and the
 * sum l of e^(s - m) over them; m = -inf (l = 0) when none is visible. In
 * double, as the scores (see the file comment). */
struct attn_stats {
    double m, l;
};

/* The statistics of the union of two disjoint sets of scores: the online-
 * softmax update (a = the row so far, b = a new tile) and the split-K
 * combine of two chunks alike. An empty side leaves the other unchanged. */
static __host__ __device__ __forceinline__ struct attn_stats attn_stats_merge(struct attn_stats a,
                                                                             struct attn_stats b)
{
    if (b.m == -INFINITY)
        return a;
    if (a.m == -INFINITY)
        return b;
    const double m = fmax(a.m, b.m);
    struct attn_stats r;
    r.m = m;
    r.l = a.l * exp(a.m - m) + b.l * exp(b.m - m);
    return r;
}

/* x rounded to the dot type of type t (F16, BF16; F32: unchanged), as ref's
 * round_to and MUL_MAT's activations. The device intrinsics give the same
 * bits as core/fp16.h (round to nearest even). */
static __host__ __device__ __forceinline__ float attn_round(enum lm_type t, float x)
{
#ifdef __CUDA_ARCH__
    if (t == LM_TYPE_F16)
        return __half2float(__float2half_rn(x));
    if (t == LM_TYPE_BF16)
        return __bfloat162float(__float2bfloat16_rn(x));
    return x;
#else
    if (t == LM_TYPE_F16)
        return lm_fp16_to_fp32(lm_fp32_to_fp16(x));
    if (t == LM_TYPE_BF16)
        return lm_bf16_to_fp32(lm_fp32_to_bf16(x));
    return x;
#endif
}

/* A 32-element block of q rounded as a Q8_0 K's dot sees it (ref's round_q:
 * quant/'s encoder, then its decoder): out[j] = fp16(d) * code_j, exact. */
static __host__ __device__ __forceinline__ void attn_q8_round(const float *x, double *out)
{
    struct lm_block_q8_0 b;
    quantize_block(x, &b);
    const float d = lm_fp16_to_fp32(b.d);
    for (int j = 0; j < LM_QK; j++)
        out[j] = (double)(d * (float)b.qs[j]);
}

/* An F32 / F16 / BF16 element at p (aligned to its size), and its size. */
template <enum lm_type T> static __host__ __device__ __forceinline__ float load_elem(const char *p)
{
#ifdef __CUDA_ARCH__
    if constexpr (T == LM_TYPE_F16)
        return __half2float(*(const __half *)p);
    else if constexpr (T == LM_TYPE_BF16)
        return __bfloat162float(*(const __nv_bfloat16 *)p);
    else
        return *(const float *)p;
#else
    uint16_t h;
    float f;
    if constexpr (T == LM_TYPE_F32) {
        memcpy(&f, p, 4);
        return f;
    }
    memcpy(&h, p, 2);
    return T == LM_TYPE_F16 ? lm_fp16_to_fp32(h) : lm_bf16_to_fp32(h);
#endif
}

template <enum lm_type T> static __host__ __device__ constexpr int64_t elem_size() { return T == LM_TYPE_F32 ? 4 : 2; }

/* Element c of a row of type T (a K row, or a V row per cell): F32, F16,
 * BF16, or Q8_0 (its block's fp16 scale times the code, exact in float, as
 * quant/'s decoder). Rows start 2-byte aligned (4 for F32). */
template <enum lm_type T> static __host__ __device__ __forceinline__ float attn_row_elem(const char *row, int64_t c)
{
    if constexpr (T == LM_TYPE_Q8_0) {
        const char *blk = row + c / LM_QK * (int64_t)sizeof(struct lm_block_q8_0);
        return load_elem<LM_TYPE_F16>(blk) * (float)(int8_t)blk[sizeof(lm_fp16) + c % LM_QK];
    } else {
        return load_elem<T>(row + c * elem_size<T>());
    }
}

/* The score of a cell from its dot product (in double: exact products, see
 * the file comment): -inf where the mask m is -inf (the cell is hidden,
 * whatever its K row holds), else dot * scale + slope * m as ref. */
static __host__ __device__ __forceinline__ double attn_score(double dot, float scale, double slope, float m)
{
    return m == -INFINITY ? -INFINITY : dot * (double)scale + slope * (double)m;
}

/* The probability that multiplies V: R_v(e^(s - max) / sum) with the row's
 * final statistics (to float, then to v's type, as ref), exactly 0 for a
 * hidden cell (s = -inf). */
static __host__ __device__ __forceinline__ float attn_prob(double s, struct attn_stats st, enum lm_type vt)
{
    return s == -INFINITY ? 0.0f : attn_round(vt, (float)(exp(s - st.m) / st.l));
}

/* The ALiBi slope of head h of n_head (1 when max_bias is 0), computed in
 * double exactly as ref's alibi_slope. */
static __host__ __device__ double attn_slope(float max_bias, int64_t n_head, int64_t h)
{
    if (max_bias <= 0.0f)
        return 1.0;
    int64_t n = 1; /* 2^floor(log2(n_head)) */
    while (n * 2 <= n_head)
        n *= 2;
    const double m0 = pow(2.0, -(double)max_bias / (double)n);
    const double m1 = pow(2.0, -(double)max_bias / 2.0 / (double)n);
    return h < n ? pow(m0, (double)(h + 1)) : pow(m1, (double)(2 * (h - n) + 1));
}

/* ---- planning (host) ---- */

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* Which kernels run a node, and the decode chunking. */
struct attn_plan {
    bool decode;      /* the split-K decode kernels (else the prefill kernel) */
    int64_t chunk;    /* decode: cells per block, a power of two */
    int64_t n_chunks; /* decode: chunks per row (ceil(n_kv / chunk)) */
};

static struct attn_plan attn_plan_of(int64_t n_q, int64_t n_head, int64_t n_kv, int n_sm)
{
    struct attn_plan p = {false, 0, 1};
    const int64_t rows = n_q * n_head;
    if (n_kv == 0) /* no chunks: the prefill kernel writes the zero rows */
        return p;
    if (n_q > DC_MAX_Q || rows * n_kv * (int64_t)sizeof(double) > DC_MAX_SCORE_BYTES)
        return p;
    const int64_t target = (int64_t)DC_BLOCKS_PER_SM * (n_sm > 0 ? n_sm : 1);
    int64_t chunk = DC_MIN_CHUNK;
    while (chunk < DC_MAX_CHUNK &&
           (rows * ceil_div(n_kv, chunk) > target || ceil_div(n_kv, chunk) > DC_MAX_CHUNKS))
        chunk *= 2;
    if (ceil_div(n_kv, chunk) > DC_MAX_CHUNKS)
        return p;
    p.decode = true;
    p.chunk = chunk;
    p.n_chunks = ceil_div(n_kv, chunk);
    return p;
}

/* ---- device helpers ---- */

/* One node's sources, shapes and parameters, passed to the kernels by value.
 * Strides are bytes; k and v rows are contiguous (op rules). */
struct attn_args {
    const char *q, *k, *v, *mask; /* mask NULL when there is none */
    char *dst;
    int64_t q_nb[3], k_nb[3], v_nb[3], mask_nb[2], dst_nb[3];
    int64_t n_q, n_head, n_kv, ratio; /* ratio: query heads per kv head */
    int d, d_v, d2, ks;               /* d2: d rounded up to 2; ks: prefill K tile row stride (doubles) */
    enum lm_type kt, vt;
    enum lm_type pt;     /* the type p is rounded to: v's, or F32 (no rounding) for V rows */
    int64_t v_sc, v_sj;  /* a float V's byte strides per channel and per cell (either layout); Q8_0: v_sj */
    float scale, max_bias;
};

/* The prefill K tile's row stride in doubles for d2: an odd number of
 * 16-byte pairs, so that 8 lanes reading rows lane * ks hit distinct banks. */
static __host__ __device__ int pf_k_stride(int d2) { return (d2 / 2) % 2 ? d2 : d2 + 2; }

/* The max over the lanes of a warp (NaN as the comparison leaves it); every
 * lane gets the result. The sum: warp.cuh. */
template <typename R> static __device__ __forceinline__ R warp_max(R v)
{
    for (int o = 16; o > 0; o /= 2) {
        const R w = __shfl_xor_sync(FULL_MASK, v, o);
        v = w > v ? w : v;
    }
    return v;
}

static __device__ __forceinline__ void *dyn_smem()
{
    extern __shared__ double2 attn_smem[]; /* 16-byte aligned */
    return attn_smem;
}

/* Element (c, i) of q for head h, rounded to k's (float) dot type. */
static __device__ __forceinline__ float q_rounded(const struct attn_args &a, int c, int64_t i, int64_t h)
{
    const float x = *(const float *)(a.q + c * a.q_nb[0] + i * a.q_nb[1] + h * a.q_nb[2]);
    return attn_round(a.kt, x);
}

/* Elements 32 b .. 32 b + 32 of q row (i, h) (zeros when !valid) rounded
 * through a Q8_0 K's blocks (attn_q8_round) into out[32 b ..]. */
static __device__ __forceinline__ void q_rounded_q8(const struct attn_args &a, int b, int64_t i, int64_t h, bool valid,
                                                    double *out)
{
    float x[LM_QK];
    for (int j = 0; j < LM_QK; j++)
        x[j] = valid ? *(const float *)(a.q + (LM_QK * b + j) * a.q_nb[0] + i * a.q_nb[1] + h * a.q_nb[2]) : 0.0f;
    attn_q8_round(x, out + LM_QK * b);
}

/* Channel c of a V cell whose first element is at `cell`: a float type in
 * either layout through the channel stride, Q8_0 from its row per cell. */
template <enum lm_type VT>
static __device__ __forceinline__ float v_elem(const struct attn_args &a, const char *cell, int c)
{
    if constexpr (VT == LM_TYPE_Q8_0)
        return attn_row_elem<VT>(cell, c);
    else
        return load_elem<VT>(cell + c * a.v_sc);
}

/* mask[j, i] (0 without a mask). */
static __device__ __forceinline__ float mask_at(const struct attn_args &a, int64_t j, int64_t i)
{
    return a.mask ? *(const float *)(a.mask + j * a.mask_nb[0] + i * a.mask_nb[1]) : 0.0f;
}

/* Where out[c, h, i] goes. */
static __device__ __forceinline__ float *dst_at(const struct attn_args &a, int c, int64_t h, int64_t i)
{
    return (float *)(a.dst + c * a.dst_nb[0] + h * a.dst_nb[1] + i * a.dst_nb[2]);
}

/* ---- prefill ---- */

/* The mask entries of cell j for the PF_ROWS queries from iw (-inf past n_q
 * or n_kv); true if any is visible. */
static __device__ __forceinline__ bool pf_mask(const struct attn_args &a, int64_t iw, int64_t j, float mk[PF_ROWS])
{
    bool any = false;
#pragma unroll
    for (int r = 0; r < PF_ROWS; r++) {
        mk[r] = iw + r < a.n_q && j < a.n_kv ? mask_at(a, j, iw + r) : -INFINITY;
        any |= mk[r] != -INFINITY;
    }
    return any;
}

/* K rows of cells j0.. (PF_BK of them) of kv head g as doubles, row jj at
 * sk[jj * ks]; zero past n_kv and in the padding column d2 - 1. */
template <enum lm_type T>
static __device__ __forceinline__ void pf_stage_k(const struct attn_args &a, double *sk, int64_t g, int64_t j0)
{
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    for (int jj = warp; jj < PF_BK; jj += PF_WARPS) {
        const int64_t j = j0 + jj;
        const char *row = a.k + g * a.k_nb[2] + (j < a.n_kv ? j : 0) * a.k_nb[1];
        for (int c = lane; c < a.d2; c += 32)
            sk[jj * a.ks + c] = j < a.n_kv && c < a.d ? (double)attn_row_elem<T>(row, c) : 0.0;
    }
}

/* V columns of cells j0.. for channels 0..rows-1 as floats (zero past d_v or
 * n_kv): channel c at sv[c * PF_VS + cell]. */
template <enum lm_type T>
static __device__ __forceinline__ void pf_stage_v(const struct attn_args &a, float *sv, int rows, int64_t g, int64_t j0)
{
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int64_t j = j0 + lane;
    const char *base = a.v + g * a.v_nb[2] + (j < a.n_kv ? j : 0) * a.v_sj; /* cell j's first element */
    for (int c = warp; c < rows; c += PF_WARPS)
        sv[c * PF_VS + lane] = j < a.n_kv && c < a.d_v ? v_elem<T>(a, base, c) : 0.0f;
}

/* The staging of k's / v's type. Q8 (an instance of the prefill kernel for
 * nodes with a Q8_0 K or V) adds the Q8_0 cases: the float-only instances
 * keep the registers they had before (a kernel's register count is set by
 * its every path). */
template <bool Q8>
static __device__ __forceinline__ void pf_stage_k_any(const struct attn_args &a, double *sk, int64_t g, int64_t j0)
{
    if (Q8 && a.kt == LM_TYPE_Q8_0) {
        pf_stage_k<LM_TYPE_Q8_0>(a, sk, g, j0);
        return;
    }
    switch (a.kt) {
    case LM_TYPE_F16: pf_stage_k<LM_TYPE_F16>(a, sk, g, j0); break;
    case LM_TYPE_BF16: pf_stage_k<LM_TYPE_BF16>(a, sk, g, j0); break;
    default: pf_stage_k<LM_TYPE_F32>(a, sk, g, j0); break;
    }
}

template <bool Q8>
static __device__ __forceinline__ void pf_stage_v_any(const struct attn_args &a, float *sv, int rows, int64_t g,
                                                      int64_t j0)
{
    if (Q8 && a.vt == LM_TYPE_Q8_0) {
        pf_stage_v<LM_TYPE_Q8_0>(a, sv, rows, g, j0);
        return;
    }
    switch (a.vt) {
    case LM_TYPE_F16: pf_stage_v<LM_TYPE_F16>(a, sv, rows, g, j0); break;
    case LM_TYPE_BF16: pf_stage_v<LM_TYPE_BF16>(a, sv, rows, g, j0); break;
    default: pf_stage_v<LM_TYPE_F32>(a, sv, rows, g, j0); break;
    }
}

/* The scores of this lane's cell for its warp's PF_ROWS queries (q rows
 * sqw, stride d2; the lane's K row in sk). */
static __device__ __forceinline__ void pf_scores(const struct attn_args &a, const double *sqw, const double *sk,
                                                 double slope, const float mk[PF_ROWS], double s[PF_ROWS])
{
    const int lane = threadIdx.x % 32, n2 = a.d2 / 2;
    const double2 *kr = (const double2 *)(sk + lane * a.ks), *qr = (const double2 *)sqw;
    double dot[PF_ROWS];
#pragma unroll
    for (int r = 0; r < PF_ROWS; r++)
        dot[r] = 0.0;
    for (int c = 0; c < n2; c++) {
        const double2 kv = kr[c];
#pragma unroll
        for (int r = 0; r < PF_ROWS; r++) {
            const double2 qv = qr[r * n2 + c]; /* the same address across the warp: a broadcast */
            dot[r] = fma(kv.x, qv.x, dot[r]);
            dot[r] = fma(kv.y, qv.y, dot[r]);
        }
    }
#pragma unroll
    for (int r = 0; r < PF_ROWS; r++)
        s[r] = attn_score(dot[r], a.scale, slope, mk[r]);
}

/* One block: head blockIdx.y, queries blockIdx.x * PF_BQ ..; NT channels per
 * lane (d_v <= 32 NT); Q8: the instance for a Q8_0 K or V. Shared memory
 * (pf_smem): the rounded q rows as doubles, then one buffer for the K tile
 * (doubles) and the V tile (floats). */
template <int NT, bool Q8>
static __global__ void __launch_bounds__(PF_THREADS, PF_MIN_BLOCKS(NT)) attn_prefill(const struct attn_args a)
{
    double *sq = (double *)dyn_smem(), *sk = sq + PF_BQ * a.d2;
    float *sv = (float *)sk;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int64_t h = blockIdx.y, g = h / a.ratio, i0 = (int64_t)blockIdx.x * PF_BQ, iw = i0 + warp * PF_ROWS;
    const double slope = attn_slope(a.max_bias, a.n_head, h);
    const double *sqw = sq + warp * PF_ROWS * a.d2;

    if (Q8 && a.kt == LM_TYPE_Q8_0) { /* d % 32 == 0, so d2 == d: a thread per (row, block) */
        const int nb = a.d / LM_QK;
        for (int e = threadIdx.x; e < PF_BQ * nb; e += PF_THREADS)
            q_rounded_q8(a, e % nb, i0 + e / nb, h, i0 + e / nb < a.n_q, sq + e / nb * a.d2);
    } else {
        for (int r = warp; r < PF_BQ; r += PF_WARPS)
            for (int c = lane; c < a.d2; c += 32)
                sq[r * a.d2 + c] = i0 + r < a.n_q && c < a.d ? (double)q_rounded(a, c, i0 + r, h) : 0.0;
    }

    /* pass 1: each row's (max, sum) */
    struct attn_stats st[PF_ROWS];
#pragma unroll
    for (int r = 0; r < PF_ROWS; r++)
        st[r] = {-INFINITY, 0.0};
    for (int64_t j0 = 0; j0 < a.n_kv; j0 += PF_BK) {
        float mk[PF_ROWS];
        double s[PF_ROWS];
        if (!__syncthreads_or(pf_mask(a, iw, j0 + lane, mk)))
            continue; /* (the barrier also orders the last tile's reads before this staging) */
        pf_stage_k_any<Q8>(a, sk, g, j0);
        __syncthreads();
        pf_scores(a, sqw, sk, slope, mk, s);
#pragma unroll
        for (int r = 0; r < PF_ROWS; r++) {
            struct attn_stats t;
            t.m = warp_max(s[r]);
            t.l = warp_sum(s[r] == -INFINITY ? 0.0 : exp(s[r] - t.m));
            st[r] = attn_stats_merge(st[r], t);
        }
    }

    /* pass 2: out = sum of R_v(p) v */
    float acc[PF_ROWS][NT];
#pragma unroll
    for (int r = 0; r < PF_ROWS; r++)
#pragma unroll
        for (int t = 0; t < NT; t++)
            acc[r][t] = 0.0f;
    for (int64_t j0 = 0; j0 < a.n_kv; j0 += PF_BK) {
        float mk[PF_ROWS], p[PF_ROWS];
        double s[PF_ROWS];
        if (!__syncthreads_or(pf_mask(a, iw, j0 + lane, mk)))
            continue;
        pf_stage_k_any<Q8>(a, sk, g, j0);
        __syncthreads();
        pf_scores(a, sqw, sk, slope, mk, s);
#pragma unroll
        for (int r = 0; r < PF_ROWS; r++)
            p[r] = attn_prob(s[r], st[r], a.pt);
        __syncthreads(); /* K read: the buffer takes V */
        pf_stage_v_any<Q8>(a, sv, 32 * NT, g, j0);
        __syncthreads();
        const float *vl = sv + lane * PF_VS;
#pragma unroll 4
        for (int j = 0; j < PF_BK; j++) {
            float pj[PF_ROWS];
            bool any = false;
#pragma unroll
            for (int r = 0; r < PF_ROWS; r++) {
                pj[r] = __shfl_sync(FULL_MASK, p[r], j);
                any |= pj[r] != 0.0f;
            }
            if (!any) /* the same for the whole warp: the cell is hidden from its rows */
                continue;
#pragma unroll
            for (int t = 0; t < NT; t++) {
                const float vv = vl[t * 32 * PF_VS + j];
#pragma unroll
                for (int r = 0; r < PF_ROWS; r++)
                    acc[r][t] = fmaf(pj[r], vv, acc[r][t]);
            }
        }
    }

#pragma unroll
    for (int r = 0; r < PF_ROWS; r++) {
        if (iw + r >= a.n_q)
            continue;
#pragma unroll
        for (int t = 0; t < NT; t++)
            if (lane + 32 * t < a.d_v)
                *dst_at(a, lane + 32 * t, h, iw + r) = acc[r][t];
    }
}

/* Bytes of dynamic shared memory of attn_prefill<nt>: the q rows, then the
 * larger of the K tile (doubles) and the V tile (floats). */
static size_t pf_smem(const struct attn_args &a, int nt)
{
    const size_t k = (size_t)PF_BK * a.ks * sizeof(double), v = (size_t)32 * nt * PF_VS * sizeof(float);
    return (size_t)PF_BQ * a.d2 * sizeof(double) + (k > v ? k : v);
}

/* The NT of the attn_prefill instance that takes d_v channels. */
static int pf_nt(int d_v)
{
    const int nt = (d_v + 31) / 32;
    return nt <= 4 ? (nt > 0 ? nt : 1) : nt <= 6 ? 6 : 8;
}

/* The fields of attn_args that pf_smem reads, for a node of head sizes d (q, k) and d_v. */
static struct attn_args pf_dims(int d, int d_v)
{
    struct attn_args a = {};
    a.d = d;
    a.d_v = d_v;
    a.d2 = (d + 1) / 2 * 2;
    a.ks = pf_k_stride(a.d2);
    return a;
}

/* The most dynamic shared memory attn_prefill<nt> takes (over every d <= ATTN_MAX_D). */
static size_t pf_smem_max(int nt)
{
    size_t most = 0;
    for (int d = 1; d <= ATTN_MAX_D; d++) {
        const size_t s = pf_smem(pf_dims(d, 32 * nt), nt);
        most = s > most ? s : most;
    }
    return most;
}

/* Dynamic shared memory above the default 48 KB needs the function's opt-in
 * attribute, set once per device (lm_cu_attn_init) rather than per launch:
 * a launch inside a stream capture then makes no other runtime call. */
template <int NT> static lm_status pf_allow_smem(size_t optin)
{
    size_t want = pf_smem_max(NT);
    want = want < optin ? want : optin;
    if (want <= 48 * 1024)
        return LM_OK;
    if (cudaFuncSetAttribute(attn_prefill<NT, false>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)want) !=
            cudaSuccess ||
        cudaFuncSetAttribute(attn_prefill<NT, true>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)want) !=
            cudaSuccess)
        return lm_cu_launch_status("ATTN prefill: allow shared memory");
    return LM_OK;
}

template <int NT> static lm_status pf_launch(const struct attn_args &a, cudaStream_t stream)
{
    const dim3 grid((unsigned)ceil_div(a.n_q, PF_BQ), (unsigned)a.n_head);
    if (a.kt == LM_TYPE_Q8_0 || a.vt == LM_TYPE_Q8_0)
        attn_prefill<NT, true><<<grid, PF_THREADS, pf_smem(a, NT), stream>>>(a);
    else
        attn_prefill<NT, false><<<grid, PF_THREADS, pf_smem(a, NT), stream>>>(a);
    return lm_cu_launch_status("ATTN prefill");
}

static lm_status run_prefill(const struct lm_cu_ctx *c, const struct attn_args &a)
{
    const int nt = pf_nt(a.d_v);
    if (pf_smem(a, nt) > c->lim.smem_optin) /* lm_cu_supports_attn refuses these */
        return LM_ERR_UNSUPPORTED;
    switch (nt) {
    case 1: return pf_launch<1>(a, c->stream);
    case 2: return pf_launch<2>(a, c->stream);
    case 3: return pf_launch<3>(a, c->stream);
    case 4: return pf_launch<4>(a, c->stream);
    case 6: return pf_launch<6>(a, c->stream);
    default: return pf_launch<8>(a, c->stream);
    }
}

/* ---- decode (split-K) ---- */

/* The block's max (sum = false) or sum of v in a fixed order; red holds
 * DC_WARPS doubles. Every thread gets the result. */
static __device__ double dc_block_reduce(double v, double *red, bool sum)
{
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    v = sum ? warp_sum(v) : warp_max(v);
    if (lane == 0)
        red[warp] = v;
    __syncthreads();
    double r = red[0];
    for (int w = 1; w < DC_WARPS; w++)
        r = sum ? r + red[w] : fmax(r, red[w]);
    __syncthreads(); /* red is free again */
    return r;
}

/* Kernel 1: head blockIdx.x, chunk blockIdx.y, query blockIdx.z. The scores
 * of the chunk's cells into scores[row][cell] (row = query * n_head + head)
 * and the chunk's (max, sum) into stats[row][chunk]. A warp takes 32 /
 * DC_LPC cells at a time, DC_LPC lanes per cell over d. Dynamic shared
 * memory: q (d doubles), the chunk's scores (chunk doubles). */
template <enum lm_type KT>
static __global__ void __launch_bounds__(DC_THREADS)
    attn_dc_scores(const struct attn_args a, int chunk, double *scores, struct attn_stats *stats)
{
    __shared__ double red[DC_WARPS];
    double *sq = (double *)dyn_smem(), *ss = sq + a.d;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, sub = lane % DC_LPC;
    const int64_t h = blockIdx.x, g = h / a.ratio, i = blockIdx.z, row = i * a.n_head + h;
    const int64_t j0 = (int64_t)blockIdx.y * chunk;
    const int n = (int)(a.n_kv - j0 < chunk ? a.n_kv - j0 : chunk);
    const double slope = attn_slope(a.max_bias, a.n_head, h);

    if constexpr (KT == LM_TYPE_Q8_0)
        for (int b = threadIdx.x; b < a.d / LM_QK; b += DC_THREADS)
            q_rounded_q8(a, b, i, h, true, sq);
    else
        for (int c = threadIdx.x; c < a.d; c += DC_THREADS)
            sq[c] = (double)q_rounded(a, c, i, h);
    __syncthreads();
    const char *kh = a.k + g * a.k_nb[2];
    for (int jb = warp * (32 / DC_LPC); jb < n; jb += DC_WARPS * (32 / DC_LPC)) {
        const int jj = jb + lane / DC_LPC;
        const int64_t j = j0 + jj;
        const float m = jj < n ? mask_at(a, j, i) : -INFINITY;
        double dot = 0.0;
        if (m != -INFINITY) { /* hidden cells do not read their K row */
            const char *kr = kh + j * a.k_nb[1];
            for (int c = sub; c < a.d; c += DC_LPC)
                dot = fma((double)attn_row_elem<KT>(kr, c), sq[c], dot);
        }
        dot = warp_sum(dot, DC_LPC); /* every lane: the shuffles need the whole warp */
        if (sub == 0 && jj < n) {
            const double s = attn_score(dot, a.scale, slope, m);
            ss[jj] = s;
            scores[row * a.n_kv + j] = s;
        }
    }
    __syncthreads();
    double mx = -INFINITY;
    for (int jj = threadIdx.x; jj < n; jj += DC_THREADS)
        mx = fmax(mx, ss[jj]);
    mx = dc_block_reduce(mx, red, false);
    double l = 0.0;
    for (int jj = threadIdx.x; jj < n; jj += DC_THREADS)
        l += ss[jj] == -INFINITY ? 0.0 : exp(ss[jj] - mx);
    l = dc_block_reduce(l, red, true);
    if (threadIdx.x == 0) {
        struct attn_stats t;
        t.m = mx;
        t.l = l;
        stats[row * gridDim.y + blockIdx.y] = t;
    }
}

/* Kernel 2: grid as kernel 1. The row's statistics (its chunks merged in
 * order, so every chunk of a row uses the same bits), the chunk's rounded
 * probabilities, and per channel c the chunk's sum of p * v[:, c] (a warp per
 * channel, lanes over cells) into part[row][chunk][c], or into dst when part
 * is NULL (one chunk). Dynamic shared memory: the chunk's p (chunk floats). */
template <enum lm_type VT>
static __global__ void __launch_bounds__(DC_THREADS) attn_dc_values(const struct attn_args a, int chunk,
                                                                    const double *scores,
                                                                    const struct attn_stats *stats, float *part)
{
    float *sp = (float *)dyn_smem();
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int64_t h = blockIdx.x, g = h / a.ratio, i = blockIdx.z, row = i * a.n_head + h;
    const int64_t j0 = (int64_t)blockIdx.y * chunk, n_chunks = gridDim.y;
    const int n = (int)(a.n_kv - j0 < chunk ? a.n_kv - j0 : chunk);

    struct attn_stats st = {-INFINITY, 0.0};
    for (int64_t ch = 0; ch < n_chunks; ch++)
        st = attn_stats_merge(st, stats[row * n_chunks + ch]);
    bool any = false;
    for (int jj = threadIdx.x; jj < n; jj += DC_THREADS) {
        sp[jj] = attn_prob(scores[row * a.n_kv + j0 + jj], st, a.pt);
        any |= sp[jj] != 0.0f;
    }
    any = __syncthreads_or(any);
    const char *vg = a.v + g * a.v_nb[2];
    for (int c = warp; c < a.d_v; c += DC_WARPS) {
        float acc = 0.0f;
        if (any) { /* else the chunk adds nothing: skip its V */
            for (int jj = lane; jj < n; jj += 32)
                if (sp[jj] != 0.0f) /* hidden cells: V is not read */
                    acc = fmaf(sp[jj], v_elem<VT>(a, vg + (j0 + jj) * a.v_sj, c), acc);
            acc = warp_sum(acc);
        }
        if (lane == 0) {
            if (part)
                part[(row * n_chunks + blockIdx.y) * a.d_v + c] = acc;
            else
                *dst_at(a, c, h, i) = acc;
        }
    }
}

/* Kernel 3: row blockIdx.x (query * n_head + head): out = the sum of its
 * n_chunks partials in chunk order. */
static __global__ void __launch_bounds__(DC_THREADS)
    attn_dc_combine(const struct attn_args a, int64_t n_chunks, const float *part)
{
    const int64_t row = blockIdx.x, i = row / a.n_head, h = row % a.n_head;
    for (int c = threadIdx.x; c < a.d_v; c += DC_THREADS) {
        const float *pr = part + row * n_chunks * a.d_v + c;
        float acc = 0.0f;
        for (int64_t ch = 0; ch < n_chunks; ch++)
            acc += pr[ch * a.d_v];
        *dst_at(a, c, h, i) = acc;
    }
}

template <enum lm_type KT>
static void dc_scores(const struct attn_args &a, dim3 grid, size_t smem, cudaStream_t stream, int chunk,
                      double *scores, struct attn_stats *stats)
{
    attn_dc_scores<KT><<<grid, DC_THREADS, smem, stream>>>(a, chunk, scores, stats);
}

template <enum lm_type VT>
static void dc_values(const struct attn_args &a, dim3 grid, size_t smem, cudaStream_t stream, int chunk,
                      const double *scores, const struct attn_stats *stats, float *part)
{
    attn_dc_values<VT><<<grid, DC_THREADS, smem, stream>>>(a, chunk, scores, stats, part);
}

static lm_status run_decode(struct lm_cu_ctx *c, const struct attn_args &a, const struct attn_plan &p)
{
    const int64_t rows = a.n_q * a.n_head;
    double *scores = (double *)lm_cu_scratch(c, 0, (size_t)(rows * a.n_kv) * sizeof(double));
    struct attn_stats *stats = (struct attn_stats *)lm_cu_scratch(c, 1, (size_t)(rows * p.n_chunks) * sizeof *stats);
    float *part = NULL;
    if (p.n_chunks > 1)
        part = (float *)lm_cu_scratch(c, 2, (size_t)(rows * p.n_chunks * a.d_v) * sizeof(float));
    if (!scores || !stats || (p.n_chunks > 1 && !part))
        return LM_ERR_NOMEM;
    const dim3 grid((unsigned)a.n_head, (unsigned)p.n_chunks, (unsigned)a.n_q);
    const int chunk = (int)p.chunk;
    const size_t smem1 = (size_t)(a.d + chunk) * sizeof(double), smem2 = (size_t)chunk * sizeof(float);
    switch (a.kt) {
    case LM_TYPE_F16: dc_scores<LM_TYPE_F16>(a, grid, smem1, c->stream, chunk, scores, stats); break;
    case LM_TYPE_BF16: dc_scores<LM_TYPE_BF16>(a, grid, smem1, c->stream, chunk, scores, stats); break;
    case LM_TYPE_Q8_0: dc_scores<LM_TYPE_Q8_0>(a, grid, smem1, c->stream, chunk, scores, stats); break;
    default: dc_scores<LM_TYPE_F32>(a, grid, smem1, c->stream, chunk, scores, stats); break;
    }
    lm_status st = lm_cu_launch_status("ATTN decode scores");
    if (st)
        return st;
    switch (a.vt) {
    case LM_TYPE_F16: dc_values<LM_TYPE_F16>(a, grid, smem2, c->stream, chunk, scores, stats, part); break;
    case LM_TYPE_BF16: dc_values<LM_TYPE_BF16>(a, grid, smem2, c->stream, chunk, scores, stats, part); break;
    case LM_TYPE_Q8_0: dc_values<LM_TYPE_Q8_0>(a, grid, smem2, c->stream, chunk, scores, stats, part); break;
    default: dc_values<LM_TYPE_F32>(a, grid, smem2, c->stream, chunk, scores, stats, part); break;
    }
    st = lm_cu_launch_status("ATTN decode values");
    if (st || !part)
        return st;
    attn_dc_combine<<<(unsigned)rows, DC_THREADS, 0, c->stream>>>(a, p.n_chunks, part);
    return lm_cu_launch_status("ATTN decode combine");
}

/* ---- the op ---- */

/* V rows per cell (lm_attn_vrows: v [d_v, n_kv, n_head_kv]), else the
 * transposed layout [n_kv, d_v, n_head_kv]; and d_v either way. */
static bool attn_vrows(const struct lm_tensor *t) { return lm_get_op_i32(t, 2) != 0; }

static int64_t attn_d_v(const struct lm_tensor *t) { return t->src[2]->ne[attn_vrows(t) ? 0 : 1]; }

static struct attn_args attn_args_of(struct lm_tensor *dst)
{
    const struct lm_tensor *q = dst->src[0], *k = dst->src[1], *v = dst->src[2], *mask = dst->src[3];
    struct attn_args a;
    a.q = (const char *)q->data;
    a.k = (const char *)k->data;
    a.v = (const char *)v->data;
    a.mask = mask ? (const char *)mask->data : NULL;
    a.dst = (char *)dst->data;
    for (int i = 0; i < 3; i++) {
        a.q_nb[i] = (int64_t)q->nb[i];
        a.k_nb[i] = (int64_t)k->nb[i];
        a.v_nb[i] = (int64_t)v->nb[i];
        a.dst_nb[i] = (int64_t)dst->nb[i];
    }
    a.mask_nb[0] = mask ? (int64_t)mask->nb[0] : 0;
    a.mask_nb[1] = mask ? (int64_t)mask->nb[1] : 0;
    a.n_q = q->ne[1];
    a.n_head = q->ne[2];
    a.n_kv = k->ne[1];
    a.ratio = q->ne[2] / k->ne[2];
    a.d = (int)q->ne[0];
    const bool vrows = attn_vrows(dst);
    a.d_v = (int)attn_d_v(dst);
    a.d2 = (a.d + 1) / 2 * 2;
    a.ks = pf_k_stride(a.d2);
    a.kt = k->type;
    a.vt = v->type;
    a.pt = vrows ? LM_TYPE_F32 : v->type;
    /* element (c, j) of a float V at c v_sc + j v_sj: channels along a row per cell, or cells along a row
     * per channel (transposed); a Q8_0 V (rows only) decodes from its row j v_sj */
    a.v_sc = vrows ? (int64_t)lm_type_size(v->type) : (int64_t)v->nb[1];
    a.v_sj = vrows ? (int64_t)v->nb[1] : (int64_t)lm_type_size(v->type);
    a.scale = lm_get_op_f32(dst, 0);
    a.max_bias = lm_get_op_f32(dst, 1);
    return a;
}

bool lm_cu_supports_attn(const struct lm_cu_limits *lim, const struct lm_tensor *t)
{
    if (t->op != LM_OP_ATTN)
        return false;
    const struct lm_tensor *q = t->src[0], *k = t->src[1], *v = t->src[2];
    const bool vrows = attn_vrows(t);
    const int64_t d_v = attn_d_v(t);
    /* K: a float type or Q8_0 (whole blocks per head); V: a float type, or Q8_0 rows per cell */
    const bool k_ok = lm_op_float_type(k->type) || (k->type == LM_TYPE_Q8_0 && q->ne[0] % LM_QK == 0);
    const bool v_ok = lm_op_float_type(v->type) || (vrows && v->type == LM_TYPE_Q8_0 && d_v % LM_QK == 0);
    if (!k_ok || !v_ok || q->ne[0] > ATTN_MAX_D || d_v > ATTN_MAX_D || q->ne[2] > 65535 || q->ne[1] > INT32_MAX ||
        k->ne[1] > INT32_MAX)
        return false;
    /* the decode kernels take under 48 KB of shared memory (d + DC_MAX_CHUNK doubles), the prefill kernel up to
     * 128.5 KB: more than some devices allow (sm_86: 99 KB); the scheduler runs such nodes on the CPU */
    if (attn_plan_of(q->ne[1], q->ne[2], k->ne[1], lim->n_sm).decode)
        return true;
    return pf_smem(pf_dims((int)q->ne[0], (int)d_v), pf_nt((int)d_v)) <= lim->smem_optin;
}

lm_status lm_cu_attn_init(struct lm_cu_ctx *c)
{
    lm_status st = pf_allow_smem<1>(c->lim.smem_optin);
    if (!st)
        st = pf_allow_smem<2>(c->lim.smem_optin);
    if (!st)
        st = pf_allow_smem<3>(c->lim.smem_optin);
    if (!st)
        st = pf_allow_smem<4>(c->lim.smem_optin);
    if (!st)
        st = pf_allow_smem<6>(c->lim.smem_optin);
    if (!st)
        st = pf_allow_smem<8>(c->lim.smem_optin);
    return st;
}

lm_status lm_cu_op_attn(struct lm_cu_ctx *c, struct lm_tensor *dst)
{
    const struct attn_args a = attn_args_of(dst);
    if (a.n_q == 0 || a.n_head == 0 || a.d_v == 0)
        return LM_OK;
    const struct attn_plan p = attn_plan_of(a.n_q, a.n_head, a.n_kv, c->lim.n_sm);
    return p.decode ? run_decode(c, a, p) : run_prefill(c, a);
}
