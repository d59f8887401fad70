/* ops_moe.cu - CUDA MUL_MAT_ID for batches: the grouped path (ref/ops_matmul.c's
 * semantics; lm_cu_op_matmul in ops_matmul.cu sends a MUL_MAT_ID node here
 * when lm_cu_moe_grouped: more than 8 tokens, MV_MAX_N, and a grouping that
 * fits; other MUL_MAT_ID nodes run ops_matmul.cu's matvec kernels).
 *
 * Quantized weights with up to MMQ_MAX_N tokens (lm_cu_moe_mmq_ok, unless
 * the backend option no_cuda_mmq) take the MMQ kernel per expert (below, mmq.cuh): no
 * host synchronization, capturable. The rest takes the cuBLAS path:
 *
 * A counting sort on the device lists the (slot, token) pairs by expert
 * (ids out of range last), their activations are gathered into one packed
 * matrix of the GEMM path's compute type, the host reads the n_expert + 1
 * list offsets (the one synchronization: cuBLAS needs sizes on the host;
 * batches are never captured), each expert with pairs is one GEMM over
 * exactly its columns (weights as ops_matmul.cu's GEMM path: quantized ones
 * dequantized to F16, through matmul.cuh), and the result columns are
 * scattered to dst[:, slot, token] (zeros for bad ids).
 *
 * Scratch slots (shared with ops_matmul.cu): 3 the pair lists and results,
 * 1 the packed activations, 0 and 2 as the GEMM path's.
 */
#include <cuda_fp16.h>
#include <stdint.h>
#include <stdlib.h>

#include "core/tensor.h"
#include "core/type.h"
#include "cuda/cuda_internal.cuh"
#include "cuda/matmul.cuh"
#include "cuda/mmq.cuh"

#define MOE_SMEM_MAX 49152 /* shared memory of the MUL_MAT_ID grouping kernel (no opt-in) */

/* ---- MUL_MAT_ID batches: (slot, token) pairs grouped by expert ----
 *
 * Pair i = slot + n_used * token (the order of ids). A counting sort on the
 * device lists the pairs by bucket: expert e in [0, n_expert) or, for an id
 * out of range, bucket n_expert; within a bucket in pair order (stable, so
 * results do not depend on thread timing). off[b] .. off[b + 1] are bucket
 * b's list positions (off[n_expert] = the pairs with an expert). Column j of
 * the packed activations and of the packed results belongs to pair list[j]. */
struct moe_map {
    const int32_t *ids;
    int64_t id_s0, id_s1;     /* ids strides (elements): per slot, per token */
    int64_t b_s0, b_s1, b_s2; /* b strides (floats): along K, per slot (mod b1), per token */
    int64_t d_s1, d_s2;       /* dst strides (floats): per slot, per token */
    int64_t K, M;
    int n_used, n_expert, b1, n_pairs;
};

/* Pair i's bucket: its expert, or n_expert when the id is out of range. */
static __host__ __device__ __forceinline__ int moe_bucket(const moe_map &m, int i)
{
    const int64_t e = m.ids[(i % m.n_used) * m.id_s0 + (i / m.n_used) * m.id_s1];
    return e >= 0 && e < m.n_expert ? (int)e : m.n_expert;
}

/* Offsets (floats) of pair i's activation column b[:, slot % b1, token] and
 * of its result column dst[:, slot, token]. */
static __host__ __device__ __forceinline__ int64_t moe_b_off(const moe_map &m, int i)
{
    return (i % m.n_used % m.b1) * m.b_s1 + (i / m.n_used) * m.b_s2;
}

static __host__ __device__ __forceinline__ int64_t moe_d_off(const moe_map &m, int i)
{
    return (i % m.n_used) * m.d_s1 + (i / m.n_used) * m.d_s2;
}

/* Warp w of nw sorts pairs [*r0, *r1): contiguous ranges in pair order. */
static __host__ __device__ __forceinline__ void moe_warp_range(int n, int w, int nw, int *r0, int *r1)
{
    *r0 = (int)((int64_t)n * w / nw);
    *r1 = (int)((int64_t)n * (w + 1) / nw);
}

/* c[w * stride] (w < nw: warp w's count of one bucket) becomes the count of
 * the warps before w; returns the bucket's total. */
static __host__ __device__ __forceinline__ int moe_warp_starts(int *c, int64_t stride, int nw)
{
    int sum = 0;
    for (int w = 0; w < nw; w++) {
        const int n = c[w * stride];
        c[w * stride] = sum;
        sum += n;
    }
    return sum;
}

/* off[b] = x[0] + .. + x[b - 1] for b <= n. */
static __host__ __device__ __forceinline__ void moe_offsets(const int *x, int n, int *off)
{
    int sum = 0;
    for (int b = 0; b < n; b++) {
        off[b] = sum;
        sum += x[b];
    }
    off[n] = sum;
}

/* List position of a lane's pair: after the `start` pairs of its bucket that
 * come before the warp's 32 and after the lanes below it with the same
 * bucket (peers: the lanes with its bucket, itself included). */
static __host__ __device__ __forceinline__ int moe_lane_pos(int start, unsigned peers, int lane)
{
    const unsigned below = peers & ((1u << lane) - 1u);
#ifdef __CUDA_ARCH__
    return start + __popc(below);
#else
    return start + __builtin_popcount(below);
#endif
}

/* Shared memory of k_moe_group with nw warps and nb buckets. */
static __host__ __device__ __forceinline__ size_t moe_group_smem(int nw, int64_t nb)
{
    return (size_t)(nw * nb + 2 * nb + 1) * sizeof(int);
}

/* The counting sort, one block of nw warps (nw = blockDim.x / 32): each warp
 * counts its range per bucket, the counts become the start of every (warp,
 * bucket) in the list, then each warp walks its range again 32 pairs at a
 * time and puts each pair after the earlier ones of its bucket. Writes
 * off[0 .. nb] and list[0 .. n_pairs). */
static __global__ void k_moe_group(const moe_map m, int *off_out, int *list)
{
    extern __shared__ int sh[]; /* cnt[nw][nb], tot[nb], off[nb + 1] */
    const int nb = m.n_expert + 1, nw = blockDim.x / 32, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    int *cnt = sh, *tot = sh + nw * nb, *off = tot + nb;
    for (int i = threadIdx.x; i < nw * nb; i += blockDim.x)
        cnt[i] = 0;
    __syncthreads();
    int r0, r1;
    moe_warp_range(m.n_pairs, warp, nw, &r0, &r1);
    for (int i = r0 + lane; i < r1; i += 32)
        atomicAdd(&cnt[warp * nb + moe_bucket(m, i)], 1);
    __syncthreads();
    for (int b = threadIdx.x; b < nb; b += blockDim.x)
        tot[b] = moe_warp_starts(cnt + b, nb, nw);
    __syncthreads();
    if (threadIdx.x == 0)
        moe_offsets(tot, nb, off);
    __syncthreads();
    for (int i = threadIdx.x; i <= nb; i += blockDim.x)
        off_out[i] = off[i];
    for (int i = threadIdx.x; i < nw * nb; i += blockDim.x)
        cnt[i] += off[i % nb];
    __syncthreads();
    int *start = cnt + warp * nb;
    for (int i0 = r0; i0 < r1; i0 += 32) { /* the same trips for every lane of the warp */
        const int i = i0 + lane, b = i < r1 ? moe_bucket(m, i) : -1;
        const unsigned peers = __match_any_sync(0xffffffffu, b);
        if (b >= 0)
            list[moe_lane_pos(start[b], peers, lane)] = i;
        __syncwarp(); /* every lane has read start[] */
        if (b >= 0 && lane == __ffs(peers) - 1)
            start[b] += __popc(peers);
        __syncwarp();
    }
}

/* Packed activations of kind KIND [K, off[n_expert]]: column j is pair
 * list[j]'s column of b. */
template <int KIND>
static __global__ void k_moe_gather(const moe_map m, const float *b, const int *off, const int *list, void *out)
{
    const int n = off[m.n_expert];
    for (int64_t j = blockIdx.x; j < n; j += gridDim.x) {
        const float *src = b + moe_b_off(m, list[j]);
        for (int64_t k = threadIdx.x; k < m.K; k += blockDim.x)
            store_act<KIND>(out, j * m.K + k, src[k * m.b_s0]);
    }
}

/* dst[:, slot, token] of pair list[j] = packed result column j (y [M, ..]),
 * or zeros for a pair whose id is out of range (j >= off[n_expert]). */
static __global__ void k_moe_scatter(const moe_map m, const float *y, const int *off, const int *list, float *dst)
{
    const int n = off[m.n_expert];
    for (int64_t j = blockIdx.x; j < m.n_pairs; j += gridDim.x) {
        float *o = dst + moe_d_off(m, list[j]);
        for (int64_t k = threadIdx.x; k < m.M; k += blockDim.x)
            o[k] = j < n ? y[j * m.M + k] : 0.0f;
    }
}

/* ---- quantized weights, up to MMQ_MAX_N tokens: MMQ per expert ----
 *
 * After the grouping, the listed pairs' activations are packed as F16
 * [Kp, pairs + BN] (mmq.cuh's layout: K rounded up to MMQ_BK, zeros past K,
 * past the pairs with an expert and in the BN padding columns), and one
 * launch covers every expert: block (bx, by, e) multiplies rows 16 bx.. of
 * expert e's weights with its columns off[e] + BN by .. off[e + 1] (a block
 * past them returns at once: the grid is sized for one expert taking every
 * pair, since the counts are only known on the device), its results going
 * straight to the pairs' dst columns. Pairs with an id out of range get zero
 * columns. No host synchronization, no cuBLAS: capturable. */

/* Element i of the packed activations (column j = i / Kp, k = i % Kp). */
static __host__ __device__ __forceinline__ __half moe_mmq_packed_value(const moe_map &m, const float *b,
                                                                        const int *off, const int *list, int64_t Kp,
                                                                        int64_t i)
{
    const int64_t k = i % Kp, j = i / Kp;
    if (k >= m.K || j >= off[m.n_expert])
        return __float2half_rn(0.0f);
    return mmq_half(b[moe_b_off(m, list[j]) + k * m.b_s0]);
}

static __global__ void k_moe_mmq_pack(const moe_map m, const float *b, const int *off, const int *list, int64_t Kp,
                                      int64_t total, __half *out)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x)
        out[i] = moe_mmq_packed_value(m, b, off, list, Kp, i);
}

/* Thread tid's share of a block's result (rows m0.., list columns c0 ..
 * c1, at most BN): into the pairs' dst columns with bounds. */
template <int BN>
static __host__ __device__ __forceinline__ void moe_mmq_store(const moe_map &m, const int *list, float *dst,
                                                              const float (*c)[MMQ_MAX_N][MMQ_LDC], int64_t m0, int c0,
                                                              int c1, int tid)
{
    for (int i = tid; i < MMQ_BM * BN; i += MMQ_THREADS) {
        const int r = i % MMQ_BM, col = i / MMQ_BM;
        if (m0 + r < m.M && c0 + col < c1)
            dst[moe_d_off(m, list[c0 + col]) + m0 + r] = mmq_sum(c, col, r);
    }
}

/* Block (bx, by, e) as above; a: the weights (rows a_nb1, experts a_nb2
 * bytes apart), x: the packed activations. */
template <int T, int BN>
static __global__ void __launch_bounds__(MMQ_THREADS)
    k_moe_mmq(const moe_map m, const uint8_t *a, int64_t a_nb1, int64_t a_nb2, const __half *x, int64_t Kp,
              const int *off, const int *list, float *dst)
{
    __shared__ __align__(128) mmq_smem sm;
    const int e = (int)blockIdx.z, c0 = off[e] + (int)blockIdx.y * BN, c1 = off[e + 1];
    if (c0 >= c1) /* the whole block alike */
        return;
    const int64_t m0 = (int64_t)blockIdx.x * MMQ_BM;
    mmq_block<T, BN>(a + e * a_nb2, a_nb1, m.K, m.M, m0, x + (int64_t)c0 * Kp, Kp, &sm);
    moe_mmq_store<BN>(m, list, dst, sm.c, m0, c0, c1, threadIdx.x);
}

/* The dst columns of the pairs whose id is out of range (list positions
 * off[n_expert] ..): zeros. */
static __global__ void k_moe_zero_bad(const moe_map m, const int *off, const int *list, float *dst)
{
    for (int64_t j = off[m.n_expert] + (int64_t)blockIdx.x; j < m.n_pairs; j += gridDim.x) {
        float *o = dst + moe_d_off(m, list[j]);
        for (int64_t k = threadIdx.x; k < m.M; k += blockDim.x)
            o[k] = 0.0f;
    }
}

/* ---- host side ----
 *
 * cuBLAS takes its sizes from the host, and how many pairs each expert gets
 * is only known on the device: the host reads the n_expert + 1 offsets once
 * per node (one small copy and a stream synchronization; batches with more
 * than MV_MAX_N tokens are never recorded as CUDA graphs, see
 * lm_cu_graph_capturable) and then multiplies each expert's weights with
 * exactly its columns. The alternatives cost more: a GEMM per expert over
 * the worst case (every pair) multiplies n_expert times the work, and one
 * matvec per pair (the decode path) reads an expert's weights once per pair. */

/* Warps of k_moe_group for nb buckets: 16, or fewer where its shared memory
 * would pass the 48 KB a block has without opting in; 0 if one warp does not fit. */
static int moe_group_warps(int64_t nb)
{
    int nw = 16;
    while (nw > 0 && moe_group_smem(nw, nb) > MOE_SMEM_MAX)
        nw /= 2;
    return nw;
}

bool lm_cu_moe_grouped(const struct lm_tensor *t)
{
    const struct lm_tensor *ids = t->src[2];
    return t->op == LM_OP_MUL_MAT_ID && ids->ne[1] > MV_MAX_N && ids->ne[0] * ids->ne[1] <= INT32_MAX / 2 &&
           moe_group_warps(t->src[0]->ne[2] + 1) > 0;
}

bool lm_cu_moe_mmq_ok(const struct lm_tensor *t)
{
    if (!lm_cu_moe_grouped(t) || !lm_cu_decode_ok(t->src[0]->type))
        return false;
    const struct lm_tensor *ids = t->src[2];
    /* grid z: the experts; grid y: every pair in 16-column blocks */
    return ids->ne[1] <= MMQ_MAX_N && t->src[0]->ne[2] <= 65535 && ids->ne[0] * ids->ne[1] <= 65535 * 16;
}

/* The pairs of MUL_MAT_ID node dst. */
static moe_map moe_map_of(const struct lm_tensor *dst)
{
    const struct lm_tensor *a = dst->src[0], *b = dst->src[1], *ids = dst->src[2];
    moe_map m = {};
    m.ids = (const int32_t *)ids->data;
    m.id_s0 = (int64_t)ids->nb[0] / 4, m.id_s1 = (int64_t)ids->nb[1] / 4;
    m.b_s0 = (int64_t)b->nb[0] / 4, m.b_s1 = (int64_t)b->nb[1] / 4, m.b_s2 = (int64_t)b->nb[2] / 4;
    m.d_s1 = (int64_t)dst->nb[1] / 4, m.d_s2 = (int64_t)dst->nb[2] / 4;
    m.K = a->ne[0], m.M = a->ne[1];
    m.n_used = (int)ids->ne[0], m.n_expert = (int)a->ne[2], m.b1 = (int)b->ne[1];
    m.n_pairs = (int)(ids->ne[0] * ids->ne[1]);
    return m;
}

/* Each expert's weights times its columns of x (packed activations of
 * `kind`, columns h_off[e] .. h_off[e + 1]) into the same columns of y
 * [M, pairs]. Quantized weights are dequantized to F16 as ops_matmul.cu's
 * gemm_quant does, skipping runs of experts no pair uses. */
static lm_status moe_gemms(struct lm_cu_ctx *c, const struct lm_tensor *a, int kind, const int *h_off, const void *x,
                           float *y)
{
    const int64_t K = a->ne[0], M = a->ne[1], E = a->ne[2], esz = kind == ACT_F32 ? 4 : 2;
    lm_status st = LM_OK;
    if (lm_op_float_type(a->type)) {
        const int64_t lda = M == 1 ? K : (int64_t)a->nb[1] / esz;
        for (int64_t e = 0; e < E && !st; e++) {
            const int64_t n = h_off[e + 1] - h_off[e];
            if (n > 0)
                st = lm_cu_gemm(c, kind, (int)M, (int)n, (int)K, (const uint8_t *)a->data + e * a->nb[2], (int)lda,
                                lda * M, (const uint8_t *)x + h_off[e] * K * esz, n * K, y + h_off[e] * M, (int)M,
                                n * M, 1);
        }
        return st;
    }
    mm_weights w;
    st = lm_cu_weights_of(c, a, &w);
    if (st)
        return st;
    int64_t mt, na;
    lm_cu_f16_chunk(K, M, E, &mt, &na);
    __half *ah = (__half *)lm_cu_scratch(c, 0, (size_t)(K * mt * na * 2));
    if (!ah)
        return LM_ERR_NOMEM;
    for (int64_t e0 = 0; e0 < E && !st; e0 += na) {
        const int64_t ne = E - e0 < na ? E - e0 : na;
        if (h_off[e0 + ne] == h_off[e0])
            continue; /* no pair uses experts e0 .. e0 + ne */
        for (int64_t m0 = 0; m0 < M && !st; m0 += mt) {
            const int64_t mc = M - m0 < mt ? M - m0 : mt;
            st = lm_cu_dequant_f16(c, a->type, w, K, m0, mc, e0, ne, 0, ah);
            for (int64_t e = e0; e < e0 + ne && !st; e++) {
                const int64_t n = h_off[e + 1] - h_off[e];
                if (n > 0)
                    st = lm_cu_gemm(c, ACT_F16, (int)mc, (int)n, (int)K, ah + (e - e0) * K * mc, (int)K, K * mc,
                                    (const __half *)x + h_off[e] * K, n * K, y + h_off[e] * M + m0, (int)M, n * M, 1);
            }
        }
    }
    return st;
}

template <int T> static void launch_moe_mmq(const moe_map &m, const mm_weights &w, const __half *x, int64_t Kp,
                                           const int *off, const int *list, float *dst, int bn, cudaStream_t st)
{
    const dim3 grid(lm_cu_blocks(m.M, MMQ_BM), lm_cu_blocks(m.n_pairs, bn), (unsigned)m.n_expert);
    switch (bn) {
    case 16: k_moe_mmq<T, 16><<<grid, MMQ_THREADS, 0, st>>>(m, w.data, w.nb1, w.nb2, x, Kp, off, list, dst); break;
    case 32: k_moe_mmq<T, 32><<<grid, MMQ_THREADS, 0, st>>>(m, w.data, w.nb1, w.nb2, x, Kp, off, list, dst); break;
    default: k_moe_mmq<T, 64><<<grid, MMQ_THREADS, 0, st>>>(m, w.data, w.nb1, w.nb2, x, Kp, off, list, dst); break;
    }
}

/* The column block of the MMQ path for n_pairs pairs over n_expert experts:
 * about one expert's share. */
static int moe_mmq_bn(const moe_map &m) { return mmq_bn((m.n_pairs + m.n_expert - 1) / m.n_expert); }

/* MUL_MAT_ID node dst (lm_cu_moe_mmq_ok) by MMQ per expert (above).
 * Scratch: slot 3 the offsets and the list, slot 1 the packed activations,
 * slot 2 misaligned weights (lm_cu_weights_of). */
static lm_status moe_mmq(struct lm_cu_ctx *c, struct lm_tensor *dst)
{
    const struct lm_tensor *a = dst->src[0], *b = dst->src[1];
    const moe_map m = moe_map_of(dst);
    const int nb = m.n_expert + 1, nw = moe_group_warps(nb), bn = moe_mmq_bn(m);
    const int64_t Kp = mmq_round_up(m.K, MMQ_BK), total = Kp * (m.n_pairs + bn);
    mm_weights w;
    lm_status st = lm_cu_weights_of(c, a, &w);
    if (st)
        return st;
    int *off = (int *)lm_cu_scratch(c, 3, (size_t)(nb + 1 + m.n_pairs) * sizeof(int));
    __half *x = (__half *)lm_cu_scratch(c, 1, (size_t)total * sizeof(__half));
    if (!off || !x)
        return LM_ERR_NOMEM;
    int *list = off + nb + 1;
    float *out = (float *)dst->data;
    k_moe_group<<<1, 32 * nw, moe_group_smem(nw, nb), c->stream>>>(m, off, list);
    k_moe_mmq_pack<<<grid_1d(lm_cu_blocks(total, 256), ROWS_GRID_MAX), 256, 0, c->stream>>>(
        m, (const float *)b->data, off, list, Kp, total, x);
    switch (a->type) {
#define CASE_MOE_MMQ(t)                                                                                                \
    case t: launch_moe_mmq<t>(m, w, x, Kp, off, list, out, bn, c->stream); break;
        DQ_QUANT_TYPES(CASE_MOE_MMQ)
#undef CASE_MOE_MMQ
    default: return LM_ERR_UNSUPPORTED;
    }
    k_moe_zero_bad<<<grid_1d(m.n_pairs, ROWS_GRID_MAX), 256, 0, c->stream>>>(m, off, list, out);
    return lm_cu_launch_status("mul_mat_id (mmq)");
}

/* MUL_MAT_ID with more than MV_MAX_N tokens (lm_cu_moe_grouped): group the
 * pairs by expert (k_moe_group), gather their activations (k_moe_gather),
 * read the offsets, one GEMM per expert with pairs (moe_gemms), scatter the
 * results (k_moe_scatter, zeros for ids out of range). Scratch: slot 3 the
 * offsets, the list and the results [M, pairs]; slot 1 the activations;
 * slots 0 and 2 as ops_matmul.cu's gemm_quant. */
lm_status lm_cu_mul_mat_id_grouped(struct lm_cu_ctx *c, struct lm_tensor *dst)
{
    if (c->mmq && lm_cu_moe_mmq_ok(dst))
        return moe_mmq(c, dst);
    if (lm_cu_capturing()) /* never: such a batch is not captured (lm_cu_graph_capturable) */
        return LM_ERR_UNSUPPORTED;
    const struct lm_tensor *a = dst->src[0], *b = dst->src[1];
    const moe_map m = moe_map_of(dst);
    const int nb = m.n_expert + 1, nw = moe_group_warps(nb), kind = gemm_kind(a->type);
    const size_t idx_bytes = ((size_t)(nb + 1 + m.n_pairs) * sizeof(int) + 255) & ~(size_t)255;
    uint8_t *g = (uint8_t *)lm_cu_scratch(c, 3, idx_bytes + (size_t)(m.M * m.n_pairs) * sizeof(float));
    void *x = lm_cu_scratch(c, 1, (size_t)(m.K * m.n_pairs) * (kind == ACT_F32 ? 4 : 2));
    int *h_off = (int *)malloc((size_t)(nb + 1) * sizeof(int));
    if (!g || !x || !h_off) {
        free(h_off);
        return LM_ERR_NOMEM;
    }
    int *off = (int *)g, *list = off + nb + 1;
    float *y = (float *)(g + idx_bytes);
    const unsigned grid = grid_1d(m.n_pairs, ROWS_GRID_MAX);
    k_moe_group<<<1, 32 * nw, moe_group_smem(nw, nb), c->stream>>>(m, off, list);
    const float *bd = (const float *)b->data;
    if (kind == ACT_F32)
        k_moe_gather<ACT_F32><<<grid, 256, 0, c->stream>>>(m, bd, off, list, x);
    else if (kind == ACT_F16)
        k_moe_gather<ACT_F16><<<grid, 256, 0, c->stream>>>(m, bd, off, list, x);
    else
        k_moe_gather<ACT_BF16><<<grid, 256, 0, c->stream>>>(m, bd, off, list, x);
    lm_status st = lm_cu_launch_status("mul_mat_id: group pairs by expert");
    if (!st && (cudaMemcpyAsync(h_off, off, (size_t)(nb + 1) * sizeof(int), cudaMemcpyDeviceToHost, c->stream) !=
                    cudaSuccess ||
                cudaStreamSynchronize(c->stream) != cudaSuccess))
        st = lm_cu_launch_status("mul_mat_id: read the expert offsets");
    if (!st)
        st = lm_cu_cublas_status(cublasSetPointerMode(c->cublas, CUBLAS_POINTER_MODE_HOST), "cublasSetPointerMode");
    if (!st)
        st = moe_gemms(c, a, kind, h_off, x, y);
    if (!st) {
        k_moe_scatter<<<grid, 256, 0, c->stream>>>(m, y, off, list, (float *)dst->data);
        st = lm_cu_launch_status("mul_mat_id: scatter");
    }
    free(h_off);
    return st;
}
