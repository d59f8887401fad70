/* ops_matmul.cu - CUDA MUL_MAT, MUL_MAT_ID and GET_ROWS (ref/ops_matmul.c's
 * semantics: weights a [K, M, A2, A3] of any weight type with contiguous
 * rows, F32 activations b of any strides, a broadcast over b's dims 2 and 3;
 * F32 results).
 *
 * Paths:
 *   - matvec (MUL_MAT with N <= 8 columns, MUL_MAT_ID with <= 8 tokens or
 *     too many experts to group, see lm_cu_moe_grouped): the token-decode
 *     hot path, bound by the bandwidth of streaming the weights. A block of
 *     128 threads computes R rows (4, or 2 when N > 2) for all N columns:
 *     quantized rows stream tile by tile (4096 elements) into shared memory
 *     as coalesced, aligned 16-byte cp.async copies, double-buffered (tile
 *     t + 1 in flight while t is decoded), whatever the block size; each
 *     thread then decodes one 32-element unit of every row (dequant.cuh)
 *     against the activations of that unit, which it loads once (16-byte
 *     loads, L1/L2-resident) for all R rows. Float accumulation, warp-shuffle
 *     and shared-memory reduction.
 *     F32/F16/BF16 rows are read directly (16-byte loads when rows are
 *     aligned, element loads otherwise). MUL_MAT_ID reads each (slot, token)
 *     expert id on the device; an id out of range gives a zero row. Graphs
 *     whose products all take this path or MMQ (lm_cu_matmul_capturable) run
 *     as CUDA graphs (cuda_backend.cu): nothing here may synchronize or
 *     allocate except through lm_cu_scratch.
 *   - MMQ (MUL_MAT of quantized weights with 9 to MMQ_MAX_N columns):
 *     ops_mmq.cu, the weights decoded tile by tile into shared memory as F16
 *     and multiplied on the tensor cores in one kernel.
 *   - GEMM (MUL_MAT with N > 8, float weights, or quantized ones with more
 *     than MMQ_MAX_N columns): b is converted into a packed scratch copy of
 *     the weights' compute type and cuBLAS multiplies, batched over a's dim 2:
 *     F16 weights (and quantized ones, dequantized to F16 in scratch, at most
 *     GEMM_CHUNK bytes at a time) with F16 activations, BF16 weights with BF16
 *     activations (bf16 has f32's range; the CPU backend rounds activations
 *     the same way), both on tensor cores with F32 accumulation; F32 weights
 *     in plain FP32 (CUBLAS_COMPUTE_32F_PEDANTIC: never TF32).
 *   - grouped MUL_MAT_ID (more than 8 tokens): ops_moe.cu, one GEMM per
 *     expert over exactly its (slot, token) pairs, through the GEMM path's
 *     pieces (matmul.cuh).
 *   - GET_ROWS: one block per output row, the row decoded through the same
 *     tiles and decoders into F32, bit-identical to quant/'s to_float.
 *
 * Quantized data must have blocks aligned to gcd(block bytes, 16) (the
 * decoders' contract); weights whose data or strides break that (odd views)
 * are first packed into scratch. Scratch slots: 0 dequantized weights, 1 the
 * converted or packed activations (MMQ's too), 2 packed misaligned weights, 3 grouped
 * MUL_MAT_ID's pair lists and results (ops_moe.cu).
 */
#include <cuda_fp16.h>
#include <stdint.h>

#include "core/tensor.h"
#include "core/type.h"
#include "cuda/cuda_internal.cuh"
#include "cuda/dequant.cuh"
#include "cuda/matmul.cuh"
#include "cuda/warp.cuh"

#define MV_THREADS 128 /* threads per matvec / row block */
#define MV_WARPS (MV_THREADS / 32)
#define GRID_Y_MAX 65535 /* slices beyond this loop in the kernel */

/* ---- shared pieces ---- */

/* True when dq<> has a decoder for t. */
static bool quant_ok(enum lm_type t)
{
#define CASE_TRUE(t)                                                                                                   \
    case t: return true;
    switch (t) {
        DQ_QUANT_TYPES(CASE_TRUE)
    default: return false;
    }
#undef CASE_TRUE
}

/* Bytes of one row tile of type T in shared memory: TB blocks (128 units)
 * plus the slack of copying whole aligned 16-byte chunks around them. */
template <int T> struct mm_tile {
    static constexpr int TB = MV_THREADS / dq<T>::UPB;
    static constexpr int CHUNKS = (TB * dq<T>::BYTES + 30) / 16 + 1;
    static constexpr int BYTES = CHUNKS * 16;
};

/* 16 bytes from global to shared memory without a trip through registers
 * (cp.async, sm_80+; .cg: cached in L2 only, the weights are streamed), and
 * the waits: for all copies, or all but the most recent commit group. Older
 * GPUs copy synchronously through a register. */
static __device__ __forceinline__ void cp_async16(void *smem, const void *gmem)
{
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"((unsigned)__cvta_generic_to_shared(smem)),
                 "l"(gmem));
#else
    *(uint4 *)smem = __ldg((const uint4 *)gmem);
#endif
}

static __device__ __forceinline__ void cp_async_commit()
{
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;\n" ::);
#endif
}

static __device__ __forceinline__ void cp_async_wait_all()
{
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_group 0;\n" ::: "memory");
#endif
}

static __device__ __forceinline__ void cp_async_wait_prev()
{
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_group 1;\n" ::: "memory");
#endif
}

/* Start copying R row segments src[rr] .. + len into tile[rr] as the aligned
 * 16-byte chunks that cover them (up to 15 bytes either side of a segment
 * are read, inside its first and last chunk: never another page), as one
 * commit group. The segment then starts at tile[rr] + (src[rr] & 15): its
 * address modulo 16 is kept, so blocks keep the alignment the decoders need.
 * Called by the whole block; wait and __syncthreads before reading. */
template <int T, int R>
static __device__ __forceinline__ void stage(uint8_t (*tile)[mm_tile<T>::BYTES], const uint8_t *const *src, int len)
{
#pragma unroll
    for (int rr = 0; rr < R; rr++) {
        const uintptr_t s = (uintptr_t)src[rr], lo = s & ~(uintptr_t)15;
        const int n16 = (int)((((s + (uintptr_t)len + 15) & ~(uintptr_t)15) - lo) / 16);
        for (int k = threadIdx.x; k < n16; k += MV_THREADS)
            cp_async16(&tile[rr][16 * k], (const uint4 *)lo + k);
    }
    cp_async_commit();
}

/* ---- matvec ---- */

/* One matvec launch. Slice y (blockIdx.y) is, for MUL_MAT, (i2, i3) =
 * (y % n2, y / n2) with N columns; for MUL_MAT_ID, (slot, token) = (y % n2,
 * y / n2) with one column and expert ids[slot, token]. Strides of b and dst
 * count floats; a's count bytes. */
struct mm_args {
    const uint8_t *a;
    int64_t a_nb1, a_nb2, a_nb3;
    const float *b;
    int64_t b_s0, b_s1, b_s2, b_s3; /* MUL_MAT_ID: b_s1 per slot (mod b1), b_s2 per token */
    float *dst;
    int64_t d_s1, d_s2, d_s3; /* MUL_MAT_ID: d_s2 per slot, d_s3 per token */
    const int32_t *ids;       /* MUL_MAT_ID's ids (NULL for MUL_MAT) */
    int64_t id_s0, id_s1;
    int64_t K, M, N, n2, n_slices;
    int64_t r2, r3;       /* MUL_MAT: b.ne[2] / a.ne[2], b.ne[3] / a.ne[3] */
    int64_t n_expert, b1; /* MUL_MAT_ID: a.ne[2], b.ne[1] */
    /* a fused ADD (MUL_MAT only; dst contiguous): dst2 = dst + add, dst2 laid
     * out as dst, add too or (add_row) one row of M broadcast */
    float *dst2;
    const float *add;
    bool add_row;
    /* a fused second product (one slice): blockIdx.y 1 multiplies a2 (laid
     * out as a) into dst_b (laid out as dst) */
    const uint8_t *a2;
    float *dst_b;
};

/* A slice's weights (row 0), first activation column and output column 0. */
struct mm_slice {
    const uint8_t *a;
    const float *b;
    float *dst;
    bool zero; /* MUL_MAT_ID with an id out of range: write zeros */
};

static __device__ __forceinline__ mm_slice mm_resolve(const mm_args &p, int64_t y)
{
    const int64_t i2 = y % p.n2, i3 = y / p.n2;
    mm_slice s;
    if (p.ids) {
        const int64_t e = p.ids[i2 * p.id_s0 + i3 * p.id_s1];
        s.zero = e < 0 || e >= p.n_expert;
        s.a = p.a + (s.zero ? 0 : e) * p.a_nb2;
        s.b = p.b + (i2 % p.b1) * p.b_s1 + i3 * p.b_s2;
    } else {
        s.zero = false;
        s.a = p.a + (i2 / p.r2) * p.a_nb2 + (i3 / p.r3) * p.a_nb3;
        s.b = p.b + i2 * p.b_s2 + i3 * p.b_s3;
    }
    s.dst = p.dst + i2 * p.d_s2 + i3 * p.d_s3;
    return s;
}

/* A fused pair's second product (PAIR, blockIdx.y 1; one slice): its weights
 * and output instead of the first's. */
template <bool PAIR> static __device__ __forceinline__ mm_slice mm_pick(const mm_args &p, mm_slice s)
{
    if (PAIR && blockIdx.y == 1) {
        s.a = p.a2;
        s.dst = p.dst_b;
    }
    return s;
}

/* Sum acc over the block and write rows m0 .. m0 + nrows, columns < ncols
 * of the slice at dst, and with ADD those of a fused ADD (p.dst2: the sum
 * plus its addend, rounded once as the ADD kernel rounds it; instances
 * of their own, so the others keep their registers). */
template <int R, int NC, bool ADD>
static __device__ __forceinline__ void mm_store(float (&acc)[R][NC], float (*red)[R * NC], const mm_args &p,
                                                float *dst, int64_t m0, int nrows, int ncols)
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
    for (int rr = 0; rr < R; rr++)
#pragma unroll
        for (int c = 0; c < NC; c++) {
            const float v = warp_sum(acc[rr][c]);
            if (lane == 0)
                red[warp][rr * NC + c] = v;
        }
    __syncthreads();
    if (threadIdx.x < R * NC) {
        const int rr = threadIdx.x / NC, c = threadIdx.x % NC;
        if (rr < nrows && c < ncols) {
            float s = 0.0f;
#pragma unroll
            for (int w = 0; w < MV_WARPS; w++)
                s += red[w][threadIdx.x];
            const int64_t o = m0 + rr + c * p.d_s1;
            dst[o] = s;
            if constexpr (ADD) {
                const int64_t at = dst - p.dst + o;
                p.dst2[at] = __fadd_rn(s, p.add[p.add_row ? m0 + rr : at]);
            }
        }
    }
    __syncthreads();
}

/* Zero rows m0 .. m0 + nrows, columns < ncols. */
template <int R, int NC>
static __device__ __forceinline__ void mm_zero(float *dst, int64_t m0, int nrows, int ncols, int64_t d_s1)
{
    if (threadIdx.x < R * NC) {
        const int rr = threadIdx.x / NC, c = threadIdx.x % NC;
        if (rr < nrows && c < ncols)
            dst[m0 + rr + c * d_s1] = 0.0f;
    }
}

/* Start staging tile t (blocks t TB .. of each row; nblk blocks per row). */
template <int T, int R>
static __device__ __forceinline__ void mv_stage_tile(uint8_t (*tile)[mm_tile<T>::BYTES], const uint8_t *const *row,
                                                     int64_t t, int64_t nblk)
{
    constexpr int TB = mm_tile<T>::TB;
    const int64_t kb = t * TB;
    const uint8_t *src[R];
#pragma unroll
    for (int rr = 0; rr < R; rr++)
        src[rr] = row[rr] + kb * dq<T>::BYTES;
    stage<T, R>(tile, src, (int)((nblk - kb < TB ? nblk - kb : TB) * dq<T>::BYTES));
}

/* acc[rr][c] += the dot product of unit j of block ib of the staged tile
 * (blocks kb .. of rows row[rr]) with the activations of its elements in
 * columns bc[c]. The activations of a run are loaded once for all R rows. */
template <int T, int NC, int R>
static __device__ __forceinline__ void mv_quant_tile(const uint8_t (*tile)[mm_tile<T>::BYTES],
                                                     const uint8_t *const *row, int64_t kb, int ib, int j,
                                                     const float *const *bc, float (&acc)[R][NC])
{
    using Q = dq<T>;
    const int64_t e0 = (kb + ib) * Q::QK;
    typename Q::unit u[R];
#pragma unroll
    for (int rr = 0; rr < R; rr++) /* the tile starts at its first block's address modulo 16 */
        Q::load(&tile[rr][((uintptr_t)(row[rr] + kb * Q::BYTES) & 15) + ib * Q::BYTES], j, &u[rr]);
#pragma unroll
    for (int r = 0; r < 4; r++) {
        const int base = Q::run_base(j, r);
        float x[NC][8], sx[NC];
#pragma unroll
        for (int c = 0; c < NC; c++) {
            const float4 lo = __ldg((const float4 *)(bc[c] + e0 + base));
            const float4 hi = __ldg((const float4 *)(bc[c] + e0 + base + 4));
            x[c][0] = lo.x, x[c][1] = lo.y, x[c][2] = lo.z, x[c][3] = lo.w;
            x[c][4] = hi.x, x[c][5] = hi.y, x[c][6] = hi.z, x[c][7] = hi.w;
            sx[c] = 0.0f;
            if (Q::HAS_M)
#pragma unroll
                for (int i = 0; i < 8; i++)
                    sx[c] += x[c][i];
        }
#pragma unroll
        for (int rr = 0; rr < R; rr++) {
            float q[8], d, m;
            Q::run(u[rr], j, r, q, &d, &m);
#pragma unroll
            for (int c = 0; c < NC; c++) {
                float t = 0.0f;
#pragma unroll
                for (int i = 0; i < 8; i++)
                    t = fmaf(q[i], x[c][i], t);
                acc[rr][c] = fmaf(d, t, acc[rr][c]);
                if (Q::HAS_M)
                    acc[rr][c] = fmaf(m, sx[c], acc[rr][c]);
            }
        }
    }
}

/* Quantized weights: rows m0 .. m0 + R of each slice times its NC columns
 * (ncols = p.N <= NC used). Thread t decodes unit t % UPB of block t / UPB
 * of the tile; b must have 16-byte aligned contiguous columns. */
template <int T, int NC, int R, bool ADD = false, bool PAIR = false>
static __global__ void __launch_bounds__(MV_THREADS) k_mv_quant(const mm_args p)
{
    using Q = dq<T>;
    using TL = mm_tile<T>;
    __shared__ __align__(16) uint8_t tile[2][R][TL::BYTES];
    __shared__ float red[MV_WARPS][R * NC];
    const int ib = threadIdx.x / Q::UPB, j = threadIdx.x % Q::UPB;
    const int64_t m0 = (int64_t)blockIdx.x * R, nblk = p.K / Q::QK;
    const int nrows = (int)(p.M - m0 < R ? p.M - m0 : R), ncols = (int)p.N;
    for (int64_t y = PAIR ? 0 : blockIdx.y; y < p.n_slices; y += PAIR ? p.n_slices : gridDim.y) {
        const mm_slice s = mm_pick<PAIR>(p, mm_resolve(p, y));
        if (s.zero) {
            mm_zero<R, NC>(s.dst, m0, nrows, ncols, p.d_s1);
            continue;
        }
        float acc[R][NC] = {};
        const float *bc[NC];
#pragma unroll
        for (int c = 0; c < NC; c++)
            bc[c] = s.b + (c < ncols ? c : 0) * p.b_s1;
        /* rows past M repeat row m0 (computed, not stored) */
        const uint8_t *row[R];
#pragma unroll
        for (int rr = 0; rr < R; rr++)
            row[rr] = s.a + (m0 + (rr < nrows ? rr : 0)) * p.a_nb1;
        /* tiles of TB blocks, double-buffered: tile t + 1 is in flight while t is decoded */
        const int64_t n_tiles = (nblk + TL::TB - 1) / TL::TB;
        __syncthreads(); /* the previous slice is done with both buffers */
        mv_stage_tile<T, R>(tile[0], row, 0, nblk);
        for (int64_t t = 0; t < n_tiles; t++) {
            if (t + 1 < n_tiles) {
                mv_stage_tile<T, R>(tile[(t + 1) & 1], row, t + 1, nblk);
                cp_async_wait_prev();
            } else {
                cp_async_wait_all();
            }
            __syncthreads();
            const int64_t kb = t * TL::TB;
            const int nb = (int)(nblk - kb < TL::TB ? nblk - kb : TL::TB);
            if (ib < nb)
                mv_quant_tile<T, NC, R>(tile[t & 1], row, kb, ib, j, bc, acc);
            __syncthreads(); /* buffer t & 1 is free to be refilled with tile t + 2 */
        }
        mm_store<R, NC, ADD>(acc, red, p, s.dst, m0, nrows, ncols);
    }
}

/* Element k of an F32 / F16 / BF16 row, and elements k .. k + 8 (16-byte
 * aligned). */
template <int T> static __device__ __forceinline__ float fl_load1(const uint8_t *row, int64_t k)
{
    if constexpr (T == LM_TYPE_F32)
        return ((const float *)row)[k];
    else if constexpr (T == LM_TYPE_F16)
        return __half2float(((const __half *)row)[k]);
    else
        return __uint_as_float((uint32_t)((const uint16_t *)row)[k] << 16);
}

template <int T> static __device__ __forceinline__ void fl_load8(const uint8_t *row, int64_t k, float *w)
{
    if constexpr (T == LM_TYPE_F32) {
        const float4 lo = __ldg((const float4 *)row + k / 4), hi = __ldg((const float4 *)row + k / 4 + 1);
        w[0] = lo.x, w[1] = lo.y, w[2] = lo.z, w[3] = lo.w;
        w[4] = hi.x, w[5] = hi.y, w[6] = hi.z, w[7] = hi.w;
    } else {
        const uint4 v = __ldg((const uint4 *)row + k / 8);
        const uint32_t u[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int i = 0; i < 4; i++) {
            if constexpr (T == LM_TYPE_F16) {
                const float2 f = __half22float2(*(const __half2 *)&u[i]);
                w[2 * i] = f.x, w[2 * i + 1] = f.y;
            } else {
                w[2 * i] = __uint_as_float(u[i] << 16);
                w[2 * i + 1] = __uint_as_float(u[i] & 0xFFFF0000u);
            }
        }
    }
}

/* Float weights: as k_mv_quant without tiles. VEC: K % 8 == 0, rows and b
 * columns 16-byte aligned, b contiguous along K; otherwise element loads with
 * b's stride b_s0. */
template <int T, int NC, int R, bool VEC, bool ADD = false, bool PAIR = false>
static __global__ void __launch_bounds__(MV_THREADS) k_mv_float(const mm_args p)
{
    __shared__ float red[MV_WARPS][R * NC];
    const int64_t m0 = (int64_t)blockIdx.x * R;
    const int nrows = (int)(p.M - m0 < R ? p.M - m0 : R), ncols = (int)p.N;
    for (int64_t y = PAIR ? 0 : blockIdx.y; y < p.n_slices; y += PAIR ? p.n_slices : gridDim.y) {
        const mm_slice s = mm_pick<PAIR>(p, mm_resolve(p, y));
        if (s.zero) {
            mm_zero<R, NC>(s.dst, m0, nrows, ncols, p.d_s1);
            continue;
        }
        float acc[R][NC] = {};
        const float *bc[NC];
        const uint8_t *row[R];
#pragma unroll
        for (int c = 0; c < NC; c++)
            bc[c] = s.b + (c < ncols ? c : 0) * p.b_s1;
#pragma unroll
        for (int rr = 0; rr < R; rr++) /* rows past M repeat row m0 (computed, not stored) */
            row[rr] = s.a + (m0 + (rr < nrows ? rr : 0)) * p.a_nb1;
        if constexpr (VEC) {
            for (int64_t k = (int64_t)threadIdx.x * 8; k < p.K; k += MV_THREADS * 8) {
                float x[NC][8];
#pragma unroll
                for (int c = 0; c < NC; c++) {
                    const float4 lo = __ldg((const float4 *)(bc[c] + k)), hi = __ldg((const float4 *)(bc[c] + k + 4));
                    x[c][0] = lo.x, x[c][1] = lo.y, x[c][2] = lo.z, x[c][3] = lo.w;
                    x[c][4] = hi.x, x[c][5] = hi.y, x[c][6] = hi.z, x[c][7] = hi.w;
                }
#pragma unroll
                for (int rr = 0; rr < R; rr++) {
                    float w[8];
                    fl_load8<T>(row[rr], k, w);
#pragma unroll
                    for (int c = 0; c < NC; c++)
#pragma unroll
                        for (int i = 0; i < 8; i++)
                            acc[rr][c] = fmaf(w[i], x[c][i], acc[rr][c]);
                }
            }
        } else {
            for (int64_t k = threadIdx.x; k < p.K; k += MV_THREADS) {
                float x[NC];
#pragma unroll
                for (int c = 0; c < NC; c++)
                    x[c] = bc[c][k * p.b_s0];
#pragma unroll
                for (int rr = 0; rr < R; rr++) {
                    const float w = fl_load1<T>(row[rr], k);
#pragma unroll
                    for (int c = 0; c < NC; c++)
                        acc[rr][c] = fmaf(w, x[c], acc[rr][c]);
                }
            }
        }
        mm_store<R, NC, ADD>(acc, red, p, s.dst, m0, nrows, ncols);
    }
}

/* ---- whole rows: GET_ROWS and the GEMM path's dequantization ---- */

/* Output rows (i1, i2, i3) < (n1, n2, n3). With ids (GET_ROWS): source row
 * ids[i1, i2, i3] of slice (i2 % a_ne2, i3 % a_ne3), a zero row when the id
 * is outside [0, a_ne1). Without: row i1 of slice (i2, i3) of a. Output
 * strides count elements of the output type. */
struct mm_rows_args {
    const uint8_t *a;
    int64_t a_nb0, a_nb1, a_nb2, a_nb3, a_ne1, a_ne2, a_ne3;
    const int32_t *ids;
    int64_t id_s0, id_s1, id_s2;
    void *dst;
    int64_t d_s1, d_s2, d_s3;
    int64_t K, n1, n2, n3;
    bool vec; /* F32 output rows 16-byte aligned (float4 stores) */
};

/* Source row and output offset of output row `row`; NULL source = zero row. */
static __device__ __forceinline__ const uint8_t *rows_src(const mm_rows_args &p, int64_t row, int64_t *out)
{
    const int64_t i1 = row % p.n1, i2 = row / p.n1 % p.n2, i3 = row / p.n1 / p.n2;
    *out = i1 * p.d_s1 + i2 * p.d_s2 + i3 * p.d_s3;
    if (!p.ids)
        return p.a + i1 * p.a_nb1 + i2 * p.a_nb2 + i3 * p.a_nb3;
    const int64_t r = p.ids[i1 * p.id_s0 + i2 * p.id_s1 + i3 * p.id_s2];
    if (r < 0 || r >= p.a_ne1)
        return NULL;
    return p.a + r * p.a_nb1 + (i2 % p.a_ne2) * p.a_nb2 + (i3 % p.a_ne3) * p.a_nb3;
}

/* Quantized rows decoded into F32 (OutT float: exact) or F16 (OutT __half). */
template <int T, typename OutT> static __global__ void __launch_bounds__(MV_THREADS) k_rows_quant(const mm_rows_args p)
{
    using Q = dq<T>;
    using TL = mm_tile<T>;
    __shared__ __align__(16) uint8_t tile[1][TL::BYTES];
    const int ib = threadIdx.x / Q::UPB, j = threadIdx.x % Q::UPB;
    const int64_t nblk = p.K / Q::QK, n_rows = p.n1 * p.n2 * p.n3;
    for (int64_t row = blockIdx.x; row < n_rows; row += gridDim.x) {
        int64_t off;
        const uint8_t *src = rows_src(p, row, &off);
        OutT *out = (OutT *)p.dst + off;
        if (!src) {
            for (int64_t k = threadIdx.x; k < p.K; k += MV_THREADS)
                out[k] = (OutT)0.0f;
            continue;
        }
        for (int64_t kb = 0; kb < nblk; kb += TL::TB) {
            const int nb = (int)(nblk - kb < TL::TB ? nblk - kb : TL::TB);
            const uint8_t *seg[1] = {src + kb * Q::BYTES};
            __syncthreads(); /* the previous tile is consumed */
            stage<T, 1>(tile, seg, nb * Q::BYTES);
            cp_async_wait_all();
            __syncthreads();
            if (ib >= nb)
                continue;
            typename Q::unit u;
            Q::load(&tile[0][((uintptr_t)seg[0] & 15) + ib * Q::BYTES], j, &u);
#pragma unroll
            for (int r = 0; r < 4; r++) {
                float v[8];
                dq_run_values<T>(u, j, r, v);
                OutT *o = out + (kb + ib) * Q::QK + Q::run_base(j, r);
                if constexpr (sizeof(OutT) == 2) { /* scratch rows: 16-byte aligned */
                    alignas(16) __half2 h[4];
#pragma unroll
                    for (int i = 0; i < 4; i++)
                        h[i] = __floats2half2_rn(v[2 * i], v[2 * i + 1]);
                    *(uint4 *)o = *(const uint4 *)h;
                } else if (p.vec) {
                    ((float4 *)o)[0] = make_float4(v[0], v[1], v[2], v[3]);
                    ((float4 *)o)[1] = make_float4(v[4], v[5], v[6], v[7]);
                } else {
#pragma unroll
                    for (int i = 0; i < 8; i++)
                        o[i] = v[i];
                }
            }
        }
    }
}

/* GET_ROWS of F32 / F16 / BF16 rows (any element stride a_nb0) into F32. */
template <int T> static __global__ void __launch_bounds__(MV_THREADS) k_rows_float(const mm_rows_args p)
{
    const int64_t n_rows = p.n1 * p.n2 * p.n3;
    for (int64_t row = blockIdx.x; row < n_rows; row += gridDim.x) {
        int64_t off;
        const uint8_t *src = rows_src(p, row, &off);
        float *out = (float *)p.dst + off;
        for (int64_t k = threadIdx.x; k < p.K; k += MV_THREADS)
            out[k] = src ? fl_load1<T>(src + k * p.a_nb0, 0) : 0.0f;
    }
}

/* ---- packing ---- */

/* b (F32, element strides s0..s3) into packed [K, N, B2, B3] of kind KIND. */
template <int KIND>
static __global__ void k_pack_act(const float *b, int64_t s0, int64_t s1, int64_t s2, int64_t s3, int64_t K, int64_t N,
                                  int64_t B2, int64_t total, void *out)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t k = i % K, n = i / K % N, i2 = i / K / N % B2, i3 = i / K / N / B2;
        store_act<KIND>(out, i, b[k * s0 + n * s1 + i2 * s2 + i3 * s3]);
    }
}

/* Rows of row_bytes (2-byte units) at a + i1 nb1 + i2 nb2 + i3 nb3, packed. */
static __global__ void k_pack_rows(const uint8_t *a, int64_t nb1, int64_t nb2, int64_t nb3, int64_t n1, int64_t n2,
                                   int64_t n_rows, int64_t row_bytes, uint8_t *out)
{
    for (int64_t row = blockIdx.x; row < n_rows; row += gridDim.x) {
        const uint16_t *s = (const uint16_t *)(a + row % n1 * nb1 + row / n1 % n2 * nb2 + row / n1 / n2 * nb3);
        uint16_t *o = (uint16_t *)(out + row * row_bytes);
        for (int64_t k = threadIdx.x; k < row_bytes / 2; k += blockDim.x)
            o[k] = s[k];
    }
}

/* ---- host side ---- */

/* True when t's data and the strides of its dims 1..3 that matter (ne > 1)
 * are multiples of align. */
static bool aligned_rows(const struct lm_tensor *t, size_t align)
{
    if ((uintptr_t)t->data % align)
        return false;
    for (int d = 1; d < 4; d++)
        if (t->ne[d] > 1 && t->nb[d] % align)
            return false;
    return true;
}

/* b's columns can be read with float4 loads as they are. */
static bool act_vec_ok(const struct lm_tensor *b) { return b->nb[0] == sizeof(float) && aligned_rows(b, 16); }

/* Weights the matvec kernels read where they are: float rows, or block rows
 * aligned to their block size (else lm_cu_weights_of packs them). */
static bool weights_in_place(const struct lm_tensor *a)
{
    size_t align = 16; /* gcd(block bytes, 16) */
    while (lm_type_size(a->type) % align)
        align /= 2;
    return lm_op_float_type(a->type) || aligned_rows(a, align);
}

lm_status lm_cu_weights_of(struct lm_cu_ctx *c, const struct lm_tensor *a, mm_weights *w)
{
    if (weights_in_place(a)) {
        *w = {(const uint8_t *)a->data, (int64_t)a->nb[1], (int64_t)a->nb[2], (int64_t)a->nb[3]};
        return LM_OK;
    }
    const int64_t rb = (int64_t)lm_row_size(a->type, a->ne[0]), n_rows = a->ne[1] * a->ne[2] * a->ne[3];
    uint8_t *buf = (uint8_t *)lm_cu_scratch(c, 2, (size_t)(rb * n_rows));
    if (!buf)
        return LM_ERR_NOMEM;
    k_pack_rows<<<grid_1d(n_rows, ROWS_GRID_MAX), MV_THREADS, 0, c->stream>>>(
        (const uint8_t *)a->data, (int64_t)a->nb[1], (int64_t)a->nb[2], (int64_t)a->nb[3], a->ne[1], a->ne[2], n_rows,
        rb, buf);
    *w = {buf, rb, rb * a->ne[1], rb * a->ne[1] * a->ne[2]};
    return LM_OK;
}

/* b packed into scratch `slot` as [K, ne1, ne2, ne3] of kind `kind`. */
static void *pack_act(struct lm_cu_ctx *c, int slot, const struct lm_tensor *b, int kind)
{
    const int64_t total = lm_nelements(b);
    void *out = lm_cu_scratch(c, slot, (size_t)total * (kind == ACT_F32 ? 4 : 2));
    if (!out)
        return NULL;
    const int64_t s0 = (int64_t)b->nb[0] / 4, s1 = (int64_t)b->nb[1] / 4, s2 = (int64_t)b->nb[2] / 4,
                  s3 = (int64_t)b->nb[3] / 4;
    const unsigned grid = grid_1d(lm_cu_blocks(total, 256), ROWS_GRID_MAX);
    const float *bd = (const float *)b->data;
    if (kind == ACT_F32)
        k_pack_act<ACT_F32><<<grid, 256, 0, c->stream>>>(bd, s0, s1, s2, s3, b->ne[0], b->ne[1], b->ne[2], total, out);
    else if (kind == ACT_F16)
        k_pack_act<ACT_F16><<<grid, 256, 0, c->stream>>>(bd, s0, s1, s2, s3, b->ne[0], b->ne[1], b->ne[2], total, out);
    else
        k_pack_act<ACT_BF16><<<grid, 256, 0, c->stream>>>(bd, s0, s1, s2, s3, b->ne[0], b->ne[1], b->ne[2], total, out);
    return out;
}

/* Matvec kernel choice: NC columns (>= N) and R rows per block. */
template <int NC> static constexpr int rows_for() { return NC <= 2 ? 4 : 2; }

static dim3 mv_grid(const mm_args &p, int rows)
{
    return dim3(lm_cu_blocks(p.M, rows), (unsigned)(p.n_slices < GRID_Y_MAX ? p.n_slices : GRID_Y_MAX));
}

template <int T> static void launch_mv_quant(const mm_args &p, int nc, cudaStream_t st)
{
    if (p.dst2) { /* a fused ADD: one column (lm_cu_mul_mat_add_ok) */
        k_mv_quant<T, 1, rows_for<1>(), true><<<mv_grid(p, rows_for<1>()), MV_THREADS, 0, st>>>(p);
        return;
    }
    if (p.a2) { /* a fused pair: one column, one slice, blockIdx.y picks the product */
        k_mv_quant<T, 1, rows_for<1>(), false, true>
            <<<dim3(lm_cu_blocks(p.M, rows_for<1>()), 2), MV_THREADS, 0, st>>>(p);
        return;
    }
    switch (nc) {
    case 1: k_mv_quant<T, 1, rows_for<1>()><<<mv_grid(p, rows_for<1>()), MV_THREADS, 0, st>>>(p); break;
    case 2: k_mv_quant<T, 2, rows_for<2>()><<<mv_grid(p, rows_for<2>()), MV_THREADS, 0, st>>>(p); break;
    case 4: k_mv_quant<T, 4, rows_for<4>()><<<mv_grid(p, rows_for<4>()), MV_THREADS, 0, st>>>(p); break;
    default: k_mv_quant<T, 8, rows_for<8>()><<<mv_grid(p, rows_for<8>()), MV_THREADS, 0, st>>>(p); break;
    }
}

template <int T, bool VEC> static void launch_mv_float(const mm_args &p, int nc, cudaStream_t st)
{
    if (p.dst2) { /* a fused ADD: one column (lm_cu_mul_mat_add_ok) */
        k_mv_float<T, 1, rows_for<1>(), VEC, true><<<mv_grid(p, rows_for<1>()), MV_THREADS, 0, st>>>(p);
        return;
    }
    if (p.a2) { /* a fused pair: one column, one slice, blockIdx.y picks the product */
        k_mv_float<T, 1, rows_for<1>(), VEC, false, true>
            <<<dim3(lm_cu_blocks(p.M, rows_for<1>()), 2), MV_THREADS, 0, st>>>(p);
        return;
    }
    switch (nc) {
    case 1: k_mv_float<T, 1, rows_for<1>(), VEC><<<mv_grid(p, rows_for<1>()), MV_THREADS, 0, st>>>(p); break;
    case 2: k_mv_float<T, 2, rows_for<2>(), VEC><<<mv_grid(p, rows_for<2>()), MV_THREADS, 0, st>>>(p); break;
    case 4: k_mv_float<T, 4, rows_for<4>(), VEC><<<mv_grid(p, rows_for<4>()), MV_THREADS, 0, st>>>(p); break;
    default: k_mv_float<T, 8, rows_for<8>(), VEC><<<mv_grid(p, rows_for<8>()), MV_THREADS, 0, st>>>(p); break;
    }
}

template <int T> static void launch_mv_float(const mm_args &p, int nc, bool vec, cudaStream_t st)
{
    if (vec)
        launch_mv_float<T, true>(p, nc, st);
    else
        launch_mv_float<T, false>(p, nc, st);
}

/* k_rows_quant for run-time type t (a type dq<> decodes). */
template <typename OutT>
static void launch_rows_quant(enum lm_type t, const mm_rows_args &p, unsigned grid, cudaStream_t st)
{
#define CASE_ROWS(t)                                                                                                   \
    case t: k_rows_quant<t, OutT><<<grid, MV_THREADS, 0, st>>>(p); break;
    switch (t) {
        DQ_QUANT_TYPES(CASE_ROWS)
    default: break;
    }
#undef CASE_ROWS
}

/* MUL_MAT (N <= MV_MAX_N) or MUL_MAT_ID (ids != NULL) by the matvec kernels;
 * add: a fused ADD of dst and another operand (MUL_MAT only, core/fuse.h). */
static lm_status mul_mat_vec(struct lm_cu_ctx *c, struct lm_tensor *dst, const struct lm_tensor *ids,
                             struct lm_tensor *add = nullptr, struct lm_tensor *second = nullptr)
{
    const struct lm_tensor *a = dst->src[0], *b = dst->src[1];
    const enum lm_type t = a->type;
    mm_weights w;
    lm_status st = lm_cu_weights_of(c, a, &w);
    if (st)
        return st;
    mm_args p = {};
    p.a = w.data;
    p.a_nb1 = w.nb1, p.a_nb2 = w.nb2, p.a_nb3 = w.nb3;
    p.K = a->ne[0], p.M = a->ne[1];
    /* quantized weights and aligned float rows read b with float4 loads */
    const bool fl_vec = lm_op_float_type(t) && a->ne[0] % 8 == 0 && aligned_rows(a, 16);
    const bool b_vec = !lm_op_float_type(t) || fl_vec;
    const float *bd = (const float *)b->data;
    int64_t bs[4] = {(int64_t)b->nb[0] / 4, (int64_t)b->nb[1] / 4, (int64_t)b->nb[2] / 4, (int64_t)b->nb[3] / 4};
    if (b_vec && !act_vec_ok(b)) {
        bd = (const float *)pack_act(c, 1, b, ACT_F32);
        if (!bd)
            return LM_ERR_NOMEM;
        bs[0] = 1, bs[1] = b->ne[0], bs[2] = b->ne[0] * b->ne[1], bs[3] = bs[2] * b->ne[2];
    }
    p.b = bd;
    p.b_s0 = bs[0];
    p.dst = (float *)dst->data;
    if (ids) {
        p.N = 1;
        p.b_s1 = bs[1], p.b_s2 = bs[2];
        p.d_s2 = (int64_t)dst->nb[1] / 4, p.d_s3 = (int64_t)dst->nb[2] / 4;
        p.ids = (const int32_t *)ids->data;
        p.id_s0 = (int64_t)ids->nb[0] / 4, p.id_s1 = (int64_t)ids->nb[1] / 4;
        p.n2 = ids->ne[0], p.n_slices = ids->ne[0] * ids->ne[1];
        p.n_expert = a->ne[2], p.b1 = b->ne[1];
    } else {
        p.N = b->ne[1];
        p.b_s1 = bs[1], p.b_s2 = bs[2], p.b_s3 = bs[3];
        p.d_s1 = (int64_t)dst->nb[1] / 4, p.d_s2 = (int64_t)dst->nb[2] / 4, p.d_s3 = (int64_t)dst->nb[3] / 4;
        p.n2 = b->ne[2], p.n_slices = b->ne[2] * b->ne[3];
        p.r2 = b->ne[2] / a->ne[2], p.r3 = b->ne[3] / a->ne[3];
        if (add) {
            const struct lm_tensor *r = lm_fuse_other(dst, add);
            p.dst2 = (float *)add->data;
            p.add = (const float *)r->data;
            p.add_row = !lm_same_shape(r, dst);
        }
        if (second) { /* its weights are read in place, as dst's (lm_cu_mul_mat_pair_ok) */
            p.a2 = (const uint8_t *)second->src[0]->data;
            p.dst_b = (float *)second->data;
        }
    }
    const int nc = p.N <= 1 ? 1 : p.N <= 2 ? 2 : p.N <= 4 ? 4 : 8;
    switch (t) {
    case LM_TYPE_F32: launch_mv_float<LM_TYPE_F32>(p, nc, fl_vec, c->stream); break;
    case LM_TYPE_F16: launch_mv_float<LM_TYPE_F16>(p, nc, fl_vec, c->stream); break;
    case LM_TYPE_BF16: launch_mv_float<LM_TYPE_BF16>(p, nc, fl_vec, c->stream); break;
#define CASE_MV(t)                                                                                                     \
    case t: launch_mv_quant<t>(p, nc, c->stream); break;
        DQ_QUANT_TYPES(CASE_MV)
#undef CASE_MV
    default: break;
    }
    return lm_cu_launch_status(ids ? "mul_mat_id" : "mul_mat (matvec)");
}

lm_status lm_cu_gemm(struct lm_cu_ctx *c, int kind, int m, int n, int k, const void *A, int lda, long long sA,
                     const void *B, long long sB, float *C, int ldc, long long sC, int batch)
{
    const float one = 1.0f, zero = 0.0f;
    const cudaDataType ty = kind == ACT_F32 ? CUDA_R_32F : kind == ACT_BF16 ? CUDA_R_16BF : CUDA_R_16F;
    const cublasComputeType_t ct = kind == ACT_F32 ? CUBLAS_COMPUTE_32F_PEDANTIC : CUBLAS_COMPUTE_32F;
    return lm_cu_cublas_status(cublasGemmStridedBatchedEx(c->cublas, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &one, A, ty, lda,
                                                        sA, B, ty, k, sB, &zero, C, CUDA_R_32F, ldc, sC, batch, ct,
                                                        CUBLAS_GEMM_DEFAULT),
                             "mul_mat: cublasGemmStridedBatchedEx");
}

void lm_cu_f16_chunk(int64_t K, int64_t M, int64_t A2, int64_t *mt, int64_t *na)
{
    const int64_t slice = K * M * 2;
    *mt = M, *na = 1;
    if (slice <= 0 || (size_t)slice <= GEMM_CHUNK) {
        *na = slice > 0 ? (int64_t)(GEMM_CHUNK / (size_t)slice) : A2;
        *na = *na < 1 ? 1 : *na > A2 ? A2 : *na;
    } else {
        *mt = (int64_t)(GEMM_CHUNK / (size_t)(K * 2));
        *mt = *mt < 1 ? 1 : *mt;
    }
}

lm_status lm_cu_dequant_f16(struct lm_cu_ctx *c, enum lm_type t, const mm_weights &w, int64_t K, int64_t m0, int64_t mc,
                            int64_t i2, int64_t na, int64_t i3, __half *ah)
{
    mm_rows_args p = {};
    p.a = w.data + m0 * w.nb1 + i2 * w.nb2 + i3 * w.nb3;
    p.a_nb1 = w.nb1, p.a_nb2 = w.nb2, p.a_nb3 = w.nb3;
    p.dst = ah;
    p.d_s1 = K, p.d_s2 = K * mc;
    p.K = K, p.n1 = mc, p.n2 = na, p.n3 = 1;
    launch_rows_quant<__half>(t, p, grid_1d(mc * na, ROWS_GRID_MAX), c->stream);
    return lm_cu_launch_status("mul_mat: dequantize");
}

/* Quantized weights: dequantize (i2 chunk, m chunk) pieces of slice i3a into
 * F16 scratch and multiply each with the b columns that use them. */
static lm_status gemm_quant(struct lm_cu_ctx *c, struct lm_tensor *dst, const void *bp)
{
    const struct lm_tensor *a = dst->src[0], *b = dst->src[1];
    const int64_t K = a->ne[0], M = a->ne[1], A2 = a->ne[2], A3 = a->ne[3], N = b->ne[1], B2 = b->ne[2];
    const int64_t r2 = B2 / A2, r3 = b->ne[3] / A3;
    mm_weights w;
    lm_status st = lm_cu_weights_of(c, a, &w);
    if (st)
        return st;
    int64_t mt, na2;
    lm_cu_f16_chunk(K, M, A2, &mt, &na2);
    __half *ah = (__half *)lm_cu_scratch(c, 0, (size_t)(K * mt * na2 * 2));
    if (!ah)
        return LM_ERR_NOMEM;
    float *out = (float *)dst->data;
    for (int64_t i3a = 0; i3a < A3 && !st; i3a++)
        for (int64_t i2a = 0; i2a < A2 && !st; i2a += na2)
            for (int64_t m0 = 0; m0 < M && !st; m0 += mt) {
                const int64_t na = A2 - i2a < na2 ? A2 - i2a : na2, mc = M - m0 < mt ? M - m0 : mt;
                st = lm_cu_dequant_f16(c, a->type, w, K, m0, mc, i2a, na, i3a, ah);
                for (int64_t i3 = i3a * r3; i3 < (i3a + 1) * r3 && !st; i3++) {
                    const int64_t col0 = (i3 * B2 + i2a * r2) * N;
                    st = lm_cu_gemm(c, ACT_F16, (int)mc, (int)(r2 * N), (int)K, ah, (int)K, K * mc,
                                    (const __half *)bp + col0 * K, r2 * N * K, out + col0 * M + m0, (int)M, r2 * N * M,
                                    (int)na);
                }
            }
    return st;
}

/* MUL_MAT with N > MV_MAX_N through cuBLAS. */
static lm_status mul_mat_gemm(struct lm_cu_ctx *c, struct lm_tensor *dst)
{
    /* the cuBLAS handle is bound to the real stream, not the capture stream:
     * a capture must never get here (lm_cu_graph_capturable) */
    if (lm_cu_capturing())
        return LM_ERR_UNSUPPORTED;
    const struct lm_tensor *a = dst->src[0], *b = dst->src[1];
    const int kind = gemm_kind(a->type);
    const void *bp = pack_act(c, 1, b, kind);
    if (!bp)
        return LM_ERR_NOMEM;
    lm_status st = lm_cu_launch_status("mul_mat: convert activations");
    if (st)
        return st;
    st = lm_cu_cublas_status(cublasSetPointerMode(c->cublas, CUBLAS_POINTER_MODE_HOST), "cublasSetPointerMode");
    if (st || !lm_op_float_type(a->type))
        return st ? st : gemm_quant(c, dst, bp);
    const int64_t K = a->ne[0], M = a->ne[1], A2 = a->ne[2], N = b->ne[1], B2 = b->ne[2];
    const int64_t r2 = B2 / A2, r3 = b->ne[3] / a->ne[3], esz = (int64_t)lm_type_size(a->type);
    const int64_t lda = M == 1 ? K : (int64_t)a->nb[1] / esz, sA = (int64_t)a->nb[2] / esz;
    float *out = (float *)dst->data;
    for (int64_t i3 = 0; i3 < b->ne[3] && !st; i3++) {
        const int64_t col0 = i3 * B2 * N;
        const uint8_t *A = (const uint8_t *)a->data + (i3 / r3) * a->nb[3];
        st = lm_cu_gemm(c, kind, (int)M, (int)(r2 * N), (int)K, A, (int)lda, sA, (const uint8_t *)bp + col0 * K * esz,
                        r2 * N * K, out + col0 * M, (int)M, r2 * N * M, (int)A2);
    }
    return st;
}

/* The source side of the row kernels' arguments for a (its weights w): its
 * rows, strides and row length; the caller adds ids, output and counts. */
static mm_rows_args rows_args(const struct lm_tensor *a, const mm_weights &w)
{
    mm_rows_args p = {};
    p.a = w.data;
    p.a_nb0 = (int64_t)a->nb[0], p.a_nb1 = w.nb1, p.a_nb2 = w.nb2, p.a_nb3 = w.nb3;
    p.a_ne1 = a->ne[1], p.a_ne2 = a->ne[2], p.a_ne3 = a->ne[3];
    p.K = a->ne[0];
    return p;
}

/* GET_ROWS: rows of a (any weight type) picked by ids, as F32. */
static lm_status get_rows(struct lm_cu_ctx *c, struct lm_tensor *dst)
{
    const struct lm_tensor *a = dst->src[0], *ids = dst->src[1];
    mm_weights w;
    lm_status st = lm_cu_weights_of(c, a, &w);
    if (st)
        return st;
    mm_rows_args p = rows_args(a, w);
    p.ids = (const int32_t *)ids->data;
    p.id_s0 = (int64_t)ids->nb[0] / 4, p.id_s1 = (int64_t)ids->nb[1] / 4, p.id_s2 = (int64_t)ids->nb[2] / 4;
    p.dst = dst->data;
    p.d_s1 = (int64_t)dst->nb[1] / 4, p.d_s2 = (int64_t)dst->nb[2] / 4, p.d_s3 = (int64_t)dst->nb[3] / 4;
    p.n1 = ids->ne[0], p.n2 = ids->ne[1], p.n3 = ids->ne[2];
    p.vec = dst->nb[0] == 4 && aligned_rows(dst, 16);
    const unsigned grid = grid_1d(p.n1 * p.n2 * p.n3, ROWS_GRID_MAX);
    switch (a->type) {
    case LM_TYPE_F32: k_rows_float<LM_TYPE_F32><<<grid, MV_THREADS, 0, c->stream>>>(p); break;
    case LM_TYPE_F16: k_rows_float<LM_TYPE_F16><<<grid, MV_THREADS, 0, c->stream>>>(p); break;
    case LM_TYPE_BF16: k_rows_float<LM_TYPE_BF16><<<grid, MV_THREADS, 0, c->stream>>>(p); break;
    default: launch_rows_quant<float>(a->type, p, grid, c->stream); break;
    }
    return lm_cu_launch_status("get_rows");
}

bool lm_cu_decode_ok(enum lm_type t) { return quant_ok(t); }

lm_status lm_cu_decode_rows(struct lm_cu_ctx *c, const struct lm_tensor *src, float *out)
{
    mm_weights w;
    lm_status st = lm_cu_weights_of(c, src, &w);
    if (st)
        return st;
    mm_rows_args p = rows_args(src, w);
    p.dst = out;
    p.n1 = src->ne[1], p.n2 = src->ne[2], p.n3 = src->ne[3];
    p.d_s1 = p.K, p.d_s2 = p.K * p.n1, p.d_s3 = p.d_s2 * p.n2;
    p.vec = (uintptr_t)out % 16 == 0; /* rows of whole blocks: K floats keep 16-byte alignment */
    launch_rows_quant<float>(src->type, p, grid_1d(p.n1 * p.n2 * p.n3, ROWS_GRID_MAX), c->stream);
    return lm_cu_launch_status("decode rows");
}

/* Every dim of t fits an int (cuBLAS sizes; kernel row counts). */
static bool dims_fit_int(const struct lm_tensor *t)
{
    for (int d = 0; d < 4; d++)
        if (t->ne[d] > INT32_MAX / 2)
            return false;
    return true;
}

bool lm_cu_supports_matmul(const struct lm_cu_limits *lim, const struct lm_tensor *t)
{
    if (t->op != LM_OP_MUL_MAT && t->op != LM_OP_MUL_MAT_ID && t->op != LM_OP_GET_ROWS)
        return false;
    const struct lm_tensor *a = t->src[0];
    if (!lm_op_float_type(a->type) && !quant_ok(a->type))
        return false;
    if (t->type != LM_TYPE_F32 || t->nb[0] != sizeof(float))
        return false;
    /* GET_ROWS's rule allows strided F32/F16/BF16 rows; quantized rows are read whole */
    if (!lm_op_float_type(a->type) && a->nb[0] != lm_type_size(a->type))
        return false;
    /* the GEMM path writes r2 * N contiguous columns of a contiguous result at once */
    if (t->op == LM_OP_MUL_MAT && t->src[1]->ne[1] > MV_MAX_N &&
        (!lm_is_contiguous(t) || (t->src[1]->ne[2] / a->ne[2]) * t->src[1]->ne[1] > INT32_MAX / 2))
        return false;
    return dims_fit_int(a) && dims_fit_int(t->src[1]) && dims_fit_int(t);
}

bool lm_cu_matmul_capturable(const struct lm_tensor *t, bool mmq)
{
    if (t->op == LM_OP_MUL_MAT)
        return t->src[1]->ne[1] <= MV_MAX_N || (mmq && lm_cu_mmq_ok(t));
    /* ids [n_used, tokens]; more tokens take the grouped path: by MMQ (quantized weights, up to MMQ_MAX_N
     * tokens) or cuBLAS after a synchronization, or the matvec kernels where grouping cannot run
     * (lm_cu_moe_grouped): only the first is capturable */
    return t->op == LM_OP_MUL_MAT_ID && (t->src[2]->ne[1] <= MV_MAX_N || (mmq && lm_cu_moe_mmq_ok(t)));
}

bool lm_cu_mul_mat_add_ok(const struct lm_tensor *mm)
{
    return mm->op == LM_OP_MUL_MAT && mm->src[1]->ne[1] == 1;
}

bool lm_cu_mul_mat_pair_ok(const struct lm_tensor *a, const struct lm_tensor *b)
{
    const struct lm_tensor *x = a->src[1];
    return lm_cu_mul_mat_add_ok(a) && x->ne[2] == 1 && x->ne[3] == 1 && weights_in_place(a->src[0]) &&
           weights_in_place(b->src[0]) && aligned_rows(a->src[0], 16) == aligned_rows(b->src[0], 16);
}

lm_status lm_cu_op_mul_mat_pair(struct lm_cu_ctx *c, struct lm_tensor *a, struct lm_tensor *b)
{
    if (lm_nelements(a) == 0)
        return LM_OK;
    return lm_cu_mul_mat_pair_ok(a, b) ? mul_mat_vec(c, a, NULL, NULL, b) : LM_ERR_UNSUPPORTED;
}

lm_status lm_cu_op_mul_mat_add(struct lm_cu_ctx *c, struct lm_tensor *mm, struct lm_tensor *add)
{
    if (lm_nelements(mm) == 0)
        return LM_OK;
    return lm_cu_mul_mat_add_ok(mm) ? mul_mat_vec(c, mm, NULL, add) : LM_ERR_UNSUPPORTED;
}

lm_status lm_cu_op_matmul(struct lm_cu_ctx *c, struct lm_tensor *dst)
{
    if (lm_nelements(dst) == 0)
        return LM_OK;
    switch (dst->op) {
    case LM_OP_MUL_MAT:
        return dst->src[1]->ne[1] <= MV_MAX_N ? mul_mat_vec(c, dst, NULL)
               : c->mmq && lm_cu_mmq_ok(dst)  ? lm_cu_mul_mat_mmq(c, dst)
                                              : mul_mat_gemm(c, dst);
    case LM_OP_MUL_MAT_ID:
        return lm_cu_moe_grouped(dst) ? lm_cu_mul_mat_id_grouped(c, dst) : mul_mat_vec(c, dst, dst->src[2]);
    case LM_OP_GET_ROWS: return get_rows(c, dst);
    default: return LM_ERR_UNSUPPORTED;
    }
}
