/* ops_elementwise.cu - CUDA element ops (ADD MUL DIV SCALE SQR SQRT CLAMP
 * UNARY REPEAT CONCAT DIAG_MASK_INF), row ops (SUM_ROWS NORM RMS_NORM
 * SOFT_MAX ROPE ARGSORT): ref/ops_elementwise.c, ref/ops_attention.c and
 * ref/ops_copy.c (REPEAT, CONCAT) on the GPU. Everything is F32 (ARGSORT
 * writes I32); the op rules (core/op_rules.c) admit nothing else.
 *
 * Element ops: one thread per destination element in a grid-stride loop,
 * with flat fast paths when the tensors are packed, else every tensor read
 * and written through its strides. + - * / and sqrt use the _rn intrinsics:
 * one correctly rounded f32 operation each, what ref's double evaluation
 * rounds to (no FMA contraction, no approximate division, whatever the build
 * flags). SILU, GELU and TANH use expf / tanhf (a few ulp).
 *
 * Row ops: one block per row (grid-stride over rows), warp-shuffle
 * reductions accumulated in float. Every row kernel reads what it needs of
 * a row before any thread writes it, and each element is written by the
 * thread that read it last, so an in-place destination (same layout as the
 * source) is safe, as ref's contract requires.
 *
 * RoPE computes its angles in double with ref's formulas (YaRN's correction
 * dims in float on the host, as ggml does), one block per token sharing each
 * pair's angle over the heads. ARGSORT sorts unique 64-bit keys (value order,
 * then index) with a bitonic network, in shared memory for rows up to 4096
 * and in scratch memory (slot 0) above, so ties keep index order as ref's
 * stable sort does. The math of both is in rowmath.cuh, which
 * tests/cuda/test_cuda_host_elementwise.cu checks against ref on the host.
 */
#include <math.h>
#include <stdint.h>

#include "cuda/elem.cuh"
#include "cuda/cuda_internal.cuh"
#include "cuda/rowmath.cuh"
#include "cuda/warp.cuh"

/* Types live in unnamed namespaces (no clash with another file's types);
 * functions and kernels are static at file scope: nvcc gives an unnamed
 * namespace a unique but global name, and a kernel inside one gets a global
 * launch stub, while liblamina exports nothing without its prefix. */

/* ---- element functions ---- */

static __device__ __forceinline__ float ld(const char *p, const struct lm_cu_shape &s, const int64_t i[4])
{
    return *(const float *)(p + lm_cu_offset(s, i));
}

/* i mod n for a broadcast index (n divides the full extent). */
static __device__ __forceinline__ int64_t wrap(int64_t i, int64_t n)
{
    if (n == 1)
        return 0;
    if (i < n)
        return i;
    return ((i | n) >> 32) == 0 ? (int64_t)((uint32_t)i % (uint32_t)n) : i % n;
}

namespace {

struct op_add {
    __device__ float operator()(float x, float y) const { return __fadd_rn(x, y); }
};
struct op_mul {
    __device__ float operator()(float x, float y) const { return __fmul_rn(x, y); }
};
struct op_div { /* a true division: x * (1 / y) would be off by an ulp */
    __device__ float operator()(float x, float y) const { return __fdiv_rn(x, y); }
};

struct op_scale {
    float s;
    __device__ float operator()(float x) const { return __fmul_rn(x, s); }
};
struct op_sqr {
    __device__ float operator()(float x) const { return __fmul_rn(x, x); }
};
struct op_sqrt {
    __device__ float operator()(float x) const { return __fsqrt_rn(x); }
};
struct op_clamp { /* NaN passes through, as ref's comparisons let it */
    float lo, hi;
    __device__ float operator()(float x) const { return x < lo ? lo : x > hi ? hi : x; }
};
struct op_silu {
    __device__ float operator()(float x) const { return x / (1.0f + expf(-x)); }
};
struct op_gelu { /* the tanh approximation */
    __device__ float operator()(float x) const
    {
        const float c = 0.7978845608028654f; /* sqrt(2 / pi) */
        return 0.5f * x * (1.0f + tanhf(c * (x + 0.044715f * x * x * x)));
    }
};
struct op_relu {
    __device__ float operator()(float x) const { return x > 0.0f ? x : 0.0f; }
};
struct op_neg {
    __device__ float operator()(float x) const { return -x; }
};
struct op_tanh {
    __device__ float operator()(float x) const { return tanhf(x); }
};

/* Destination element functions of (i0, i1, i2, i3) for k_map. */
template <class Op> struct f_unary {
    const char *a;
    struct lm_cu_shape as;
    Op op;
    __device__ float operator()(const int64_t i[4]) const { return op(ld(a, as, i)); }
};

template <class Op> struct f_binary {
    const char *a, *b;
    struct lm_cu_shape as, bs;
    Op op;
    __device__ float operator()(const int64_t i[4]) const
    {
        const int64_t j[4] = {wrap(i[0], bs.ne[0]), wrap(i[1], bs.ne[1]), wrap(i[2], bs.ne[2]), wrap(i[3], bs.ne[3])};
        return op(ld(a, as, i), ld(b, bs, j));
    }
};

struct f_repeat {
    const char *a;
    struct lm_cu_shape as;
    __device__ float operator()(const int64_t i[4]) const
    {
        const int64_t j[4] = {wrap(i[0], as.ne[0]), wrap(i[1], as.ne[1]), wrap(i[2], as.ne[2]), wrap(i[3], as.ne[3])};
        return ld(a, as, j);
    }
};

struct f_concat {
    const char *a, *b;
    struct lm_cu_shape as, bs;
    int dim;
    __device__ float operator()(const int64_t i[4]) const
    {
        if (i[dim] < as.ne[dim])
            return ld(a, as, i);
        int64_t j[4] = {i[0], i[1], i[2], i[3]};
        j[dim] -= as.ne[dim];
        return ld(b, bs, j);
    }
};

struct f_diag_mask {
    const char *a;
    struct lm_cu_shape as;
    int64_t n_past;
    __device__ float operator()(const int64_t i[4]) const { return i[0] > n_past + i[1] ? -INFINITY : ld(a, as, i); }
};

} // namespace

/* ---- element kernels ---- */

/* dst[i] = f(i) for every element, through dst's strides. */
template <class F> static __global__ void k_map(F f, char *dst, struct lm_cu_shape ds, int64_t n, bool narrow)
{
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < n; k += step) {
        int64_t i[4];
        lm_cu_unflatten(k, ds.ne, narrow, i);
        *(float *)(dst + lm_cu_offset(ds, i)) = f(i);
    }
}

/* y = op(x), both packed. */
template <class Op> static __global__ void k_unary_flat(const float *x, float *y, int64_t n, Op op)
{
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < n; k += step)
        y[k] = op(x[k]);
}

/* y = op(a, b), all packed; b has nb elements repeating along a's flat order. */
template <class Op>
static __global__ void k_binary_flat(const float *a, const float *b, float *y, int64_t n, int64_t nb, bool narrow,
                                     Op op)
{
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < n; k += step) {
        const int64_t j = nb == n ? k : narrow ? (int64_t)((uint32_t)k % (uint32_t)nb) : k % nb;
        y[k] = op(a[k], b[j]);
    }
}

/* ---- reductions ---- */

static __device__ __forceinline__ float warp_max(float v)
{
    for (int o = 16; o > 0; o >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* The sum (max) over the block, returned to every thread. blockDim.x is a
 * multiple of 32; sh holds 32 floats; callable again right away. */
static __device__ float block_sum(float v, float *sh)
{
    v = warp_sum(v);
    if (blockDim.x == 32)
        return v;
    const unsigned lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    if (lane == 0)
        sh[w] = v;
    __syncthreads();
    v = warp_sum(lane < (blockDim.x >> 5) ? sh[lane] : 0.0f);
    __syncthreads();
    return v;
}

static __device__ float block_max(float v, float *sh)
{
    v = warp_max(v);
    if (blockDim.x == 32)
        return v;
    const unsigned lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    if (lane == 0)
        sh[w] = v;
    __syncthreads();
    v = warp_max(lane < (blockDim.x >> 5) ? sh[lane] : -INFINITY);
    __syncthreads();
    return v;
}

/* Threads per block for rows of n elements: a warp for short rows. */
static int row_threads(int64_t n) { return n <= 64 ? 32 : n <= 256 ? 64 : n <= 1024 ? 128 : n <= 4096 ? 256 : 1024; }

/* ---- SUM_ROWS, NORM, RMS_NORM ---- */

static __global__ void k_sum_rows(const char *a, struct lm_cu_shape as, char *dst, struct lm_cu_shape ds, int64_t nrows)
{
    __shared__ float sh[32];
    for (int64_t r = blockIdx.x; r < nrows; r += gridDim.x) {
        int64_t i[4];
        const char *x = a + lm_cu_row_offset(as, r, i);
        float s = 0.0f;
        for (int64_t k = threadIdx.x; k < as.ne[0]; k += blockDim.x)
            s += *(const float *)(x + k * as.nb[0]);
        s = block_sum(s, sh);
        if (threadIdx.x == 0)
            *(float *)(dst + lm_cu_offset(ds, i)) = s;
    }
}

/* NORM: (x - mean) / sqrt(var + eps), two passes as ref; RMS_NORM: mean 0.
 * MULW (a fused RMS_NORM + MUL, core/fuse.h): also y2 = y * w, w one row. */
template <bool RMS, bool MULW>
static __global__ void k_norm(const char *a, struct lm_cu_shape as, char *dst, struct lm_cu_shape ds, int64_t nrows,
                              float eps, const float *w, char *dst2, struct lm_cu_shape ds2)
{
    __shared__ float sh[32];
    const int64_t n = as.ne[0];
    for (int64_t r = blockIdx.x; r < nrows; r += gridDim.x) {
        int64_t i[4];
        const char *x = a + lm_cu_row_offset(as, r, i);
        char *y = dst + lm_cu_row_offset(ds, r, i);
        char *y2 = MULW ? dst2 + lm_cu_row_offset(ds2, r, i) : nullptr;
        float mean = 0.0f;
        if (!RMS) {
            float s = 0.0f;
            for (int64_t k = threadIdx.x; k < n; k += blockDim.x)
                s += *(const float *)(x + k * as.nb[0]);
            mean = block_sum(s, sh) / (float)n;
        }
        float sq = 0.0f;
        for (int64_t k = threadIdx.x; k < n; k += blockDim.x) {
            const float v = *(const float *)(x + k * as.nb[0]) - mean;
            sq += v * v;
        }
        sq = block_sum(sq, sh);
        const float inv = 1.0f / sqrtf(sq / (float)n + eps);
        for (int64_t k = threadIdx.x; k < n; k += blockDim.x) {
            const float v = (*(const float *)(x + k * as.nb[0]) - mean) * inv;
            *(float *)(y + k * ds.nb[0]) = v; /* first: y2 may be y (in place) */
            if (MULW)
                *(float *)(y2 + k * ds2.nb[0]) = op_mul{}(v, w[k]);
        }
    }
}

/* A fused UNARY SILU + MUL (core/fuse.h): s = silu(g), y = s * u, all of
 * y's shape; s first (y may be s, in place). */
static __global__ void k_silu_mul(const char *g, struct lm_cu_shape gs, const char *u, struct lm_cu_shape us, char *s,
                                  struct lm_cu_shape ss, char *y, struct lm_cu_shape ys, int64_t n, bool narrow)
{
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < n; k += step) {
        int64_t i[4];
        lm_cu_unflatten(k, ys.ne, narrow, i);
        const float v = op_silu{}(ld(g, gs, i));
        *(float *)(s + lm_cu_offset(ss, i)) = v;
        *(float *)(y + lm_cu_offset(ys, i)) = op_mul{}(v, ld(u, us, i));
    }
}

/* ---- SOFT_MAX ---- */

namespace {
struct soft_max_args {
    float scale;
    bool alibi;      /* max_bias > 0 */
    double m0, m1;   /* ALiBi bases (tensor.h's lm_soft_max_ext) */
    int64_t n_floor; /* 2^floor(log2(n_head)) */
};
} // namespace

/* Row value i: a * scale + slope * mask (one rounding pinned, so both passes agree). */
static __device__ __forceinline__ float sm_value(const char *x, int64_t nbx, const char *m, int64_t nbm, int64_t k,
                                                 float scale, float slope)
{
    const float v = __fmul_rn(*(const float *)(x + k * nbx), scale);
    return m ? __fmaf_rn(slope, *(const float *)(m + k * nbm), v) : v;
}

/* softmax(a * scale + slope_h * mask[:, i1]) per row: one pass for the max
 * and the sum (online rescaling per thread, then combined over the block),
 * one pass to write. */
static __global__ void k_soft_max(const char *a, struct lm_cu_shape as, const char *mask, struct lm_cu_shape ms, char *dst,
                                  struct lm_cu_shape ds, int64_t nrows, struct soft_max_args p)
{
    __shared__ float sh[32];
    const int64_t n = as.ne[0];
    for (int64_t r = blockIdx.x; r < nrows; r += gridDim.x) {
        int64_t i[4];
        const char *x = a + lm_cu_row_offset(as, r, i);
        const char *m = mask ? mask + i[1] * ms.nb[1] : nullptr;
        float slope = 1.0f;
        if (p.alibi) {
            const int64_t h = i[2];
            slope = (float)(h < p.n_floor ? pow(p.m0, (double)(h + 1)) : pow(p.m1, (double)(2 * (h - p.n_floor) + 1)));
        }
        char *y = dst + lm_cu_row_offset(ds, r, i);
        float mx = -INFINITY, sum = 0.0f;
        for (int64_t k = threadIdx.x; k < n; k += blockDim.x) {
            const float v = sm_value(x, as.nb[0], m, ms.nb[0], k, p.scale, slope);
            if (v > mx) {
                sum = sum * expf(mx - v) + 1.0f;
                mx = v;
            } else if (v != -INFINITY) {
                sum += expf(v - mx);
            }
        }
        const float row_max = block_max(mx, sh);
        sum = block_sum(mx == -INFINITY ? 0.0f : sum * expf(mx - row_max), sh);
        for (int64_t k = threadIdx.x; k < n; k += blockDim.x) {
            const float v = sm_value(x, as.nb[0], m, ms.nb[0], k, p.scale, slope);
            *(float *)(y + k * ds.nb[0]) = expf(v - row_max) / sum;
        }
    }
}

/* ---- ROPE ---- */

#define ROPE_THREADS 256
#define ROPE_CHUNK 256 /* pairs whose angles a block holds at a time */

/* One token (i2, i3) per block: the angles of a chunk of pairs into shared
 * memory, then every head's pairs of that chunk rotated; dims past n_dims
 * copied. Grid: (ne2, ne3). */
static __global__ void k_rope(const char *a, struct lm_cu_shape as, const char *pos, int64_t pos_nb, char *dst,
                              struct lm_cu_shape ds, struct lm_cu_rope_args r)
{
    __shared__ double cs[ROPE_CHUNK][2];
    const int64_t i2 = blockIdx.x, i3 = blockIdx.y;
    const double p = *(const int32_t *)(pos + i2 * pos_nb);
    const char *x = a + i2 * as.nb[2] + i3 * as.nb[3];
    char *y = dst + i2 * ds.nb[2] + i3 * ds.nb[3];
    const int half = r.n_dims / 2;
    const int64_t n_head = as.ne[1];
    for (int base = 0; base < half; base += ROPE_CHUNK) {
        const int cnt = half - base < ROPE_CHUNK ? half - base : ROPE_CHUNK;
        for (int t = threadIdx.x; t < cnt; t += blockDim.x)
            lm_cu_rope_cos_sin(r, p, base + t, &cs[t][0], &cs[t][1]);
        __syncthreads();
        for (int64_t w = threadIdx.x; w < cnt * n_head; w += blockDim.x) {
            const int t = (int)(w % cnt);
            const int64_t h = w / cnt;
            int j0, j1;
            lm_cu_rope_pair(r, base + t, &j0, &j1);
            const double x0 = *(const float *)(x + h * as.nb[1] + j0 * as.nb[0]);
            const double x1 = *(const float *)(x + h * as.nb[1] + j1 * as.nb[0]);
            const double c = cs[t][0], s = cs[t][1];
            *(float *)(y + h * ds.nb[1] + j0 * ds.nb[0]) = (float)(x0 * c - x1 * s);
            *(float *)(y + h * ds.nb[1] + j1 * ds.nb[0]) = (float)(x0 * s + x1 * c);
        }
        __syncthreads();
    }
    const int64_t rest = as.ne[0] - r.n_dims;
    for (int64_t w = threadIdx.x; w < rest * n_head; w += blockDim.x) {
        const int64_t h = w / rest, i0 = r.n_dims + w % rest;
        *(float *)(y + h * ds.nb[1] + i0 * ds.nb[0]) = *(const float *)(x + h * as.nb[1] + i0 * as.nb[0]);
    }
}

/* ---- ARGSORT ---- */

#define SORT_SHARED_MAX 4096            /* padded rows sorted in shared memory (32 KiB of keys) */
#define SORT_MAX_ROW (1 << 20)          /* longer rows are refused (lm_cu_supports_elementwise) */
#define SORT_SCRATCH ((size_t)64 << 20) /* scratch bytes for the keys of long rows */

/* Per row: keys (in shared memory, or gkeys + blockIdx.x * npad when set),
 * a bitonic sort of npad (a power of two) keys padded with UINT64_MAX, then
 * the low words (the indices) of the first ne0. */
static __global__ void k_argsort(const char *a, struct lm_cu_shape as, char *dst, struct lm_cu_shape ds, int64_t nrows,
                                 int npad, bool desc, uint64_t *gkeys)
{
    extern __shared__ uint64_t skeys[];
    uint64_t *keys = gkeys ? gkeys + (int64_t)blockIdx.x * npad : skeys;
    const int n = (int)as.ne[0];
    for (int64_t r = blockIdx.x; r < nrows; r += gridDim.x) {
        int64_t i[4];
        const char *x = a + lm_cu_row_offset(as, r, i);
        char *y = dst + lm_cu_row_offset(ds, r, i);
        for (int k = threadIdx.x; k < npad; k += blockDim.x)
            keys[k] = k < n ? lm_cu_sort_key(*(const float *)(x + k * as.nb[0]), (uint32_t)k, desc) : UINT64_MAX;
        __syncthreads();
        for (int size = 2; size <= npad; size <<= 1) {
            for (int stride = size >> 1; stride > 0; stride >>= 1) {
                for (int q = threadIdx.x; q < npad / 2; q += blockDim.x)
                    lm_cu_bitonic_exchange(keys, size, stride, q);
                __syncthreads();
            }
        }
        for (int k = threadIdx.x; k < n; k += blockDim.x)
            *(int32_t *)(y + k * ds.nb[0]) = (int32_t)(uint32_t)keys[k];
        __syncthreads(); /* the keys are reused by the next row */
    }
}

/* ---- host side: one launcher per family ---- */

/* True if b's packed elements repeat along a's flat order: b's dims equal
 * a's up to some dim and are 1 from there on (b = a row, or a's shape). */
static bool tail_broadcast(const struct lm_tensor *a, const struct lm_tensor *b)
{
    int d = 0;
    while (d < 4 && b->ne[d] == a->ne[d])
        d++;
    for (; d < 4; d++)
        if (b->ne[d] != 1)
            return false;
    return true;
}

template <class F> static void launch_map(cudaStream_t st, const F &f, struct lm_tensor *dst)
{
    const int64_t n = lm_nelements(dst);
    k_map<F><<<lm_cu_grid(n, LM_CU_ELEM_THREADS), LM_CU_ELEM_THREADS, 0, st>>>(f, (char *)dst->data, lm_cu_shape_of(dst), n,
                                                                         lm_cu_narrow(n));
}

template <class Op> static void launch_unary(cudaStream_t st, struct lm_tensor *dst, Op op)
{
    const struct lm_tensor *a = dst->src[0];
    const int64_t n = lm_nelements(dst);
    if (lm_cu_is_flat(a) && lm_cu_is_flat(dst))
        k_unary_flat<Op><<<lm_cu_grid(n, LM_CU_ELEM_THREADS), LM_CU_ELEM_THREADS, 0, st>>>((const float *)a->data,
                                                                                     (float *)dst->data, n, op);
    else
        launch_map(st, f_unary<Op>{(const char *)a->data, lm_cu_shape_of(a), op}, dst);
}

template <class Op> static void launch_binary(cudaStream_t st, struct lm_tensor *dst, Op op)
{
    const struct lm_tensor *a = dst->src[0], *b = dst->src[1];
    const int64_t n = lm_nelements(dst);
    if (lm_cu_is_flat(a) && lm_cu_is_flat(b) && lm_cu_is_flat(dst) && tail_broadcast(a, b))
        k_binary_flat<Op><<<lm_cu_grid(n, LM_CU_ELEM_THREADS), LM_CU_ELEM_THREADS, 0, st>>>(
            (const float *)a->data, (const float *)b->data, (float *)dst->data, n, lm_nelements(b), lm_cu_narrow(n), op);
    else
        launch_map(st, f_binary<Op>{(const char *)a->data, (const char *)b->data, lm_cu_shape_of(a), lm_cu_shape_of(b), op},
                   dst);
}

static void launch_unary_fn(cudaStream_t st, struct lm_tensor *dst)
{
    switch ((enum lm_unary_op)lm_get_op_i32(dst, 0)) {
    case LM_UNARY_SILU: launch_unary(st, dst, op_silu{}); break;
    case LM_UNARY_GELU: launch_unary(st, dst, op_gelu{}); break;
    case LM_UNARY_RELU: launch_unary(st, dst, op_relu{}); break;
    case LM_UNARY_NEG: launch_unary(st, dst, op_neg{}); break;
    default: launch_unary(st, dst, op_tanh{}); break;
    }
}

/* Blocks for a grid-stride loop over rows. */
static unsigned row_grid(int64_t nrows) { return lm_cu_grid(nrows, 1); }

static void launch_rows(cudaStream_t st, struct lm_tensor *dst)
{
    const struct lm_tensor *a = dst->src[0];
    const int64_t nrows = lm_nrows(a);
    const int threads = row_threads(a->ne[0]);
    const char *x = (const char *)a->data;
    char *y = (char *)dst->data;
    if (dst->op == LM_OP_SUM_ROWS)
        k_sum_rows<<<row_grid(nrows), threads, 0, st>>>(x, lm_cu_shape_of(a), y, lm_cu_shape_of(dst), nrows);
    else if (dst->op == LM_OP_NORM)
        k_norm<false, false><<<row_grid(nrows), threads, 0, st>>>(x, lm_cu_shape_of(a), y, lm_cu_shape_of(dst), nrows,
                                                                  lm_get_op_f32(dst, 0), nullptr, nullptr, {});
    else
        k_norm<true, false><<<row_grid(nrows), threads, 0, st>>>(x, lm_cu_shape_of(a), y, lm_cu_shape_of(dst), nrows,
                                                                 lm_get_op_f32(dst, 0), nullptr, nullptr, {});
}

static void launch_soft_max(cudaStream_t st, struct lm_tensor *dst)
{
    const struct lm_tensor *a = dst->src[0], *mask = dst->src[1];
    struct soft_max_args p;
    p.scale = lm_get_op_f32(dst, 0);
    const double max_bias = lm_get_op_f32(dst, 1);
    p.alibi = max_bias > 0.0;
    p.n_floor = 1; /* 2^floor(log2(n_head)) */
    while (p.n_floor * 2 <= a->ne[2])
        p.n_floor *= 2;
    p.m0 = pow(2.0, -max_bias / (double)p.n_floor);
    p.m1 = pow(2.0, -max_bias / 2.0 / (double)p.n_floor);
    const int64_t nrows = lm_nrows(a);
    const struct lm_cu_shape ms = mask ? lm_cu_shape_of(mask) : lm_cu_shape_of(a);
    k_soft_max<<<row_grid(nrows), row_threads(a->ne[0]), 0, st>>>((const char *)a->data, lm_cu_shape_of(a),
                                                                  mask ? (const char *)mask->data : nullptr, ms,
                                                                  (char *)dst->data, lm_cu_shape_of(dst), nrows, p);
}

static void launch_rope(cudaStream_t st, struct lm_tensor *dst)
{
    const struct lm_tensor *a = dst->src[0], *pos = dst->src[1];
    const dim3 grid((unsigned)a->ne[2], (unsigned)a->ne[3]);
    if (a->ne[2] == 0 || a->ne[3] == 0)
        return;
    k_rope<<<grid, ROPE_THREADS, 0, st>>>((const char *)a->data, lm_cu_shape_of(a), (const char *)pos->data,
                                          (int64_t)pos->nb[0], (char *)dst->data, lm_cu_shape_of(dst),
                                          lm_cu_rope_setup(dst));
}

static lm_status launch_argsort(struct lm_cu_ctx *c, struct lm_tensor *dst)
{
    const struct lm_tensor *a = dst->src[0];
    const int64_t nrows = lm_nrows(a);
    const bool desc = lm_get_op_i32(dst, 0) == LM_SORT_DESC;
    int npad = 1;
    while (npad < a->ne[0])
        npad *= 2;
    const int threads = npad / 2 < 32 ? 32 : npad / 2 > 1024 ? 1024 : npad / 2;
    const size_t row_bytes = (size_t)npad * sizeof(uint64_t);
    if (npad <= SORT_SHARED_MAX) {
        k_argsort<<<row_grid(nrows), threads, row_bytes, c->stream>>>(
            (const char *)a->data, lm_cu_shape_of(a), (char *)dst->data, lm_cu_shape_of(dst), nrows, npad, desc, nullptr);
        return LM_OK;
    }
    /* long rows: each block sorts its rows in its own slot of scratch keys */
    int64_t slots = (int64_t)(SORT_SCRATCH / row_bytes);
    slots = slots < 1 ? 1 : slots < nrows ? slots : nrows;
    uint64_t *keys = (uint64_t *)lm_cu_scratch(c, 0, (size_t)slots * row_bytes);
    if (!keys)
        return LM_ERR_NOMEM;
    k_argsort<<<(unsigned)slots, threads, 0, c->stream>>>((const char *)a->data, lm_cu_shape_of(a), (char *)dst->data,
                                                          lm_cu_shape_of(dst), nrows, npad, desc, keys);
    return LM_OK;
}

static bool all_f32(const struct lm_tensor *t, int n_src)
{
    for (int s = 0; s < n_src; s++)
        if (t->src[s] && t->src[s]->type != LM_TYPE_F32)
            return false;
    return true;
}

bool lm_cu_supports_elementwise(const struct lm_cu_limits *lim, const struct lm_tensor *t)
{
    switch (t->op) {
    case LM_OP_ADD:
    case LM_OP_MUL:
    case LM_OP_DIV:
    case LM_OP_CONCAT:
    case LM_OP_SOFT_MAX: return t->type == LM_TYPE_F32 && all_f32(t, 2);
    case LM_OP_SCALE:
    case LM_OP_SQR:
    case LM_OP_SQRT:
    case LM_OP_CLAMP:
    case LM_OP_UNARY:
    case LM_OP_SUM_ROWS:
    case LM_OP_NORM:
    case LM_OP_RMS_NORM:
    case LM_OP_REPEAT:
    case LM_OP_DIAG_MASK_INF: return t->type == LM_TYPE_F32 && all_f32(t, 1);
    case LM_OP_ROPE: /* one block per token; dim 3 is a grid dimension */
        return t->type == LM_TYPE_F32 && all_f32(t, 1) && t->src[0]->ne[2] <= INT32_MAX && t->src[0]->ne[3] <= 65535;
    case LM_OP_ARGSORT: return t->type == LM_TYPE_I32 && all_f32(t, 1) && t->src[0]->ne[0] <= SORT_MAX_ROW;
    default: return false; /* training ops (*_BACK, CROSS_ENTROPY_*) and other families */
    }
}

lm_status lm_cu_op_elementwise(struct lm_cu_ctx *c, struct lm_tensor *dst)
{
    cudaStream_t st = c->stream;
    const struct lm_tensor *a = dst->src[0], *b = dst->src[1];
    if (lm_nelements(dst) == 0)
        return LM_OK;
    switch (dst->op) {
    case LM_OP_ADD: launch_binary(st, dst, op_add{}); break;
    case LM_OP_MUL: launch_binary(st, dst, op_mul{}); break;
    case LM_OP_DIV: launch_binary(st, dst, op_div{}); break;
    case LM_OP_SCALE: launch_unary(st, dst, op_scale{lm_get_op_f32(dst, 0)}); break;
    case LM_OP_SQR: launch_unary(st, dst, op_sqr{}); break;
    case LM_OP_SQRT: launch_unary(st, dst, op_sqrt{}); break;
    case LM_OP_CLAMP: launch_unary(st, dst, op_clamp{lm_get_op_f32(dst, 0), lm_get_op_f32(dst, 1)}); break;
    case LM_OP_UNARY: launch_unary_fn(st, dst); break;
    case LM_OP_SUM_ROWS:
    case LM_OP_NORM:
    case LM_OP_RMS_NORM: launch_rows(st, dst); break;
    case LM_OP_REPEAT: launch_map(st, f_repeat{(const char *)a->data, lm_cu_shape_of(a)}, dst); break;
    case LM_OP_CONCAT:
        launch_map(st,
                   f_concat{(const char *)a->data, (const char *)b->data, lm_cu_shape_of(a), lm_cu_shape_of(b),
                            (int)lm_get_op_i32(dst, 0)},
                   dst);
        break;
    case LM_OP_DIAG_MASK_INF:
        launch_map(st, f_diag_mask{(const char *)a->data, lm_cu_shape_of(a), (int64_t)lm_get_op_i32(dst, 0)}, dst);
        break;
    case LM_OP_SOFT_MAX: launch_soft_max(st, dst); break;
    case LM_OP_ROPE: launch_rope(st, dst); break;
    case LM_OP_ARGSORT: {
        const lm_status s = launch_argsort(c, dst);
        if (s != LM_OK)
            return s;
        break;
    }
    default: return LM_ERR_UNSUPPORTED;
    }
    return lm_cu_launch_status(lm_op_name(dst->op));
}

lm_status lm_cu_op_fused_elementwise(struct lm_cu_ctx *c, enum lm_fuse kind, struct lm_tensor *a, struct lm_tensor *b)
{
    const struct lm_tensor *x = a->src[0], *o = b->src[1];
    if (lm_nelements(b) == 0)
        return LM_OK;
    if (kind == LM_FUSE_RMS_NORM_MUL) {
        const int64_t nrows = lm_nrows(x);
        k_norm<true, true><<<row_grid(nrows), row_threads(x->ne[0]), 0, c->stream>>>(
            (const char *)x->data, lm_cu_shape_of(x), (char *)a->data, lm_cu_shape_of(a), nrows, lm_get_op_f32(a, 0),
            (const float *)o->data, (char *)b->data, lm_cu_shape_of(b));
        return lm_cu_launch_status("rms_norm + mul");
    }
    if (kind != LM_FUSE_SILU_MUL)
        return LM_ERR_UNSUPPORTED;
    const int64_t n = lm_nelements(b);
    k_silu_mul<<<lm_cu_grid(n, LM_CU_ELEM_THREADS), LM_CU_ELEM_THREADS, 0, c->stream>>>(
        (const char *)x->data, lm_cu_shape_of(x), (const char *)o->data, lm_cu_shape_of(o), (char *)a->data,
        lm_cu_shape_of(a), (char *)b->data, lm_cu_shape_of(b), n, lm_cu_narrow(n));
    return lm_cu_launch_status("silu + mul");
}
