/* ops_copy.cu - CUDA CPY, CONT and SET_ROWS (ref/ops_copy.c on the GPU).
 *
 * Element j of the source in flat order (ne[0] fastest) becomes element j of
 * the destination in flat order, whatever the two shapes and strides. Three
 * paths:
 *   - same type (any type, quantized ones block by block): the bytes of each
 *     element or block are moved unchanged; a flat-to-flat copy is one
 *     cudaMemcpyAsync;
 *   - F32/F16/BF16 into F32/F16/BF16: through float with core/fp16.h's
 *     rounding (the bits of quant/'s from_float);
 *   - F32 into Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1: one thread per destination
 *     block, encoded by quantize.cuh's encoders, bit-identical to quant/'s
 *     reference encoders. K-quant and i-quant destinations are refused
 *     (lm_cu_supports_copy), so the scheduler keeps those copies on the CPU.
 * The hot copies are the KV cache writes: K, a contiguous [n_embd_k, T] F32
 * tensor into a contiguous slice of the cache (the flat paths), and V, the
 * transpose of a contiguous [n_embd_v, T] tensor into a [T, n_embd_v] view
 * with contiguous rows (the tiled transpose below: reads and writes both
 * coalesced).
 *
 * As ref gathers its source first, a source whose memory overlaps the
 * destination's is first copied to scratch (slot 0), so overlapping tensors
 * give the result disjoint ones would.
 */
#include <stdint.h>

#include <type_traits>

#include "cuda/elem.cuh"
#include "cuda/cuda_internal.cuh"
#include "cuda/matmul.cuh" /* lm_cu_decode_rows */
#include "cuda/quantize.cuh" /* block encoders, lm_cu_gather32 */

/* Every function and kernel here is static at file scope (not in an unnamed
 * namespace: nvcc names that namespace globally and gives its kernels global
 * launch stubs); liblamina exports nothing without its prefix. */

/* ---- kernels ---- */

/* Same type: units of U (1, 2, 4 or 8 bytes) in flat order; each element or
 * block is upb units. ss and ds count elements (blocks) along dim 0. */
template <typename U>
static __global__ void k_copy_units(const char *src, struct lm_cu_shape ss, char *dst, struct lm_cu_shape ds,
                                    int64_t n_units, int upb, bool narrow)
{
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < n_units; k += step) {
        const int64_t e = narrow ? (int64_t)((uint32_t)k / (uint32_t)upb) : k / upb;
        const int64_t u = (k - e * upb) * (int64_t)sizeof(U);
        const U v = *(const U *)(src + lm_cu_flat_offset(ss, e, narrow) + u);
        *(U *)(dst + lm_cu_flat_offset(ds, e, narrow) + u) = v;
    }
}

/* One element of float storage type S as float storage type D (the raw
 * value unchanged when the types are equal). */
template <class S, class D> static __device__ __forceinline__ typename D::raw convert(typename S::raw v)
{
    if constexpr (std::is_same<S, D>::value)
        return v;
    else
        return D::from_f(S::to_f(v));
}

/* S -> D element by element in flat order; s_flat / d_flat: the tensor is
 * packed in flat order (no index arithmetic needed). */
template <class S, class D>
static __global__ void k_convert(const char *src, struct lm_cu_shape ss, bool s_flat, char *dst, struct lm_cu_shape ds,
                                 bool d_flat, int64_t n, bool narrow)
{
    typedef typename S::raw SR;
    typedef typename D::raw DR;
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < n; k += step) {
        const int64_t so = s_flat ? k * (int64_t)sizeof(SR) : lm_cu_flat_offset(ss, k, narrow);
        const int64_t dof = d_flat ? k * (int64_t)sizeof(DR) : lm_cu_flat_offset(ds, k, narrow);
        *(DR *)(dst + dof) = convert<S, D>(*(const SR *)(src + so));
    }
}

#define TILE 32
#define TILE_ROWS 8

/* S -> D for equal shapes where the source's dim 1 and the destination's
 * dim 0 are the packed ones (a transposed copy, as the V cache write): a
 * 32x32 tile per block, read along dim 1 and written along dim 0 through
 * shared memory. Grid: (ne0 / 32, ne1 / 32, ne2 * ne3) rounded up. */
template <class S, class D>
static __global__ void k_transpose_tile(const char *src, struct lm_cu_shape ss, char *dst, struct lm_cu_shape ds)
{
    __shared__ typename S::raw tile[TILE][TILE + 1];
    const int64_t i2 = blockIdx.z % ss.ne[2], i3 = blockIdx.z / ss.ne[2];
    const int64_t b0 = (int64_t)blockIdx.x * TILE, b1 = (int64_t)blockIdx.y * TILE;
    const char *s = src + i2 * ss.nb[2] + i3 * ss.nb[3];
    char *d = dst + i2 * ds.nb[2] + i3 * ds.nb[3];
    for (int r = threadIdx.y; r < TILE; r += TILE_ROWS) {
        const int64_t i0 = b0 + r, i1 = b1 + threadIdx.x;
        if (i0 < ss.ne[0] && i1 < ss.ne[1])
            tile[r][threadIdx.x] = *(const typename S::raw *)(s + i0 * ss.nb[0] + i1 * ss.nb[1]);
    }
    __syncthreads();
    for (int r = threadIdx.y; r < TILE; r += TILE_ROWS) {
        const int64_t i0 = b0 + threadIdx.x, i1 = b1 + r;
        if (i0 < ds.ne[0] && i1 < ds.ne[1])
            *(typename D::raw *)(d + i0 * ds.nb[0] + i1 * ds.nb[1]) = convert<S, D>(tile[threadIdx.x][r]);
    }
}

/* F32 -> block type B: one thread per destination block. Destination rows
 * are packed blocks, so block kb holds the source's flat elements
 * 32 kb .. 32 kb + 31; ds counts blocks along dim 0. */
template <class B>
static __global__ void k_quantize(const char *src, struct lm_cu_shape ss, bool s_flat, char *dst, struct lm_cu_shape ds,
                                  int64_t n_blocks, bool narrow)
{
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t kb = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; kb < n_blocks; kb += step) {
        float x[LM_QK];
        lm_cu_gather32(src, ss, s_flat, kb * LM_QK, narrow, x);
        B blk;
        quantize_block(x, &blk);
        *(B *)(dst + lm_cu_flat_offset(ds, kb, narrow)) = blk;
    }
}

/* SET_ROWS into float type D: one thread per element (i, j) of a [n, N];
 * element j of row i goes to (j, ids[i]) of dst, or (ids[i], j) for
 * columns. Out-of-range ids write nothing. */
template <class D>
static __global__ void k_set_rows(const char *a, int64_t a_nb0, int64_t a_nb1, const int32_t *ids, char *dst,
                                  int64_t d_nb0, int64_t d_nb1, int64_t n, int64_t n_elems, int64_t n_dst, bool cols)
{
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < n_elems; k += step) {
        const int64_t i = k / n, j = k - i * n, r = ids[i];
        if (r < 0 || r >= n_dst)
            continue;
        const float v = *(const float *)(a + i * a_nb1 + j * a_nb0);
        char *d = dst + (cols ? j * d_nb1 + r * d_nb0 : r * d_nb1 + j * d_nb0);
        *(typename D::raw *)d = D::from_f(v);
    }
}

/* SET_ROWS into block type B (rows): one thread per destination block of the
 * N rows written; dst rows are packed blocks. */
template <class B>
static __global__ void k_set_rows_quant(const char *a, int64_t a_nb0, int64_t a_nb1, const int32_t *ids, char *dst,
                                        int64_t d_nb1, int64_t blocks_per_row, int64_t n_blocks, int64_t n_dst)
{
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < n_blocks; k += step) {
        const int64_t i = k / blocks_per_row, kb = k - i * blocks_per_row, r = ids[i];
        if (r < 0 || r >= n_dst)
            continue;
        float x[LM_QK];
        const char *s = a + i * a_nb1 + kb * LM_QK * a_nb0;
        for (int e = 0; e < LM_QK; e++)
            x[e] = *(const float *)(s + e * a_nb0);
        B blk;
        quantize_block(x, &blk);
        *(B *)(dst + r * d_nb1 + kb * (int64_t)sizeof(B)) = blk;
    }
}

/* ---- host side ---- */

/* t's shape counted in elements (blocks, for block types) along dim 0. */
static struct lm_cu_shape block_shape(const struct lm_tensor *t)
{
    struct lm_cu_shape s = lm_cu_shape_of(t);
    s.ne[0] /= lm_type_blck(t->type);
    return s;
}

/* The widest unit (8, 4, 2 or 1 bytes) that divides the element (block)
 * size, both base addresses and every stride of a dim longer than 1. */
static int unit_size(size_t bs, const struct lm_tensor *a, const struct lm_tensor *b)
{
    uint64_t bits = bs | (uint64_t)(uintptr_t)a->data | (uint64_t)(uintptr_t)b->data;
    for (int d = 0; d < 4; d++) {
        bits |= a->ne[d] > 1 ? (uint64_t)a->nb[d] : 0;
        bits |= b->ne[d] > 1 ? (uint64_t)b->nb[d] : 0;
    }
    return (bits & 7) == 0 ? 8 : (bits & 3) == 0 ? 4 : (bits & 1) == 0 ? 2 : 1;
}

template <typename U>
static void launch_units(cudaStream_t st, const struct lm_tensor *src, struct lm_tensor *dst, int64_t n_elems, int upb)
{
    const int64_t n = n_elems * upb;
    k_copy_units<U><<<lm_cu_grid(n, LM_CU_ELEM_THREADS), LM_CU_ELEM_THREADS, 0, st>>>(
        (const char *)src->data, block_shape(src), (char *)dst->data, block_shape(dst), n, upb, lm_cu_narrow(n));
}

/* True when the tiled transpose serves src -> dst (see k_transpose_tile). */
static bool tile_ok(const struct lm_tensor *src, const struct lm_tensor *dst)
{
    if (!lm_same_shape(src, dst) || src->ne[0] < 2 || src->ne[1] < 2)
        return false;
    if (src->nb[1] != lm_type_size(src->type) || dst->nb[0] != lm_type_size(dst->type) ||
        src->nb[0] == lm_type_size(src->type))
        return false;
    return (src->ne[1] + TILE - 1) / TILE <= 65535 && src->ne[2] * src->ne[3] <= 65535;
}

/* S -> D by 32x32 tiles (tile_ok holds). */
template <class S, class D>
static void launch_tile_to(cudaStream_t st, const struct lm_tensor *src, struct lm_tensor *dst)
{
    const dim3 grid((unsigned)((src->ne[0] + TILE - 1) / TILE), (unsigned)((src->ne[1] + TILE - 1) / TILE),
                    (unsigned)(src->ne[2] * src->ne[3]));
    k_transpose_tile<S, D><<<grid, dim3(TILE, TILE_ROWS), 0, st>>>((const char *)src->data, lm_cu_shape_of(src),
                                                                   (char *)dst->data, lm_cu_shape_of(dst));
}

/* Same type: memcpy when both are packed, the tile for a transposed float
 * copy, else units. */
static void copy_same(cudaStream_t st, const struct lm_tensor *src, struct lm_tensor *dst)
{
    const size_t bs = lm_type_size(src->type);
    const int64_t n_elems = lm_nelements(src) / lm_type_blck(src->type);
    if (lm_cu_is_flat(src) && lm_cu_is_flat(dst)) {
        cudaMemcpyAsync(dst->data, src->data, (size_t)n_elems * bs, cudaMemcpyDeviceToDevice, st);
        return;
    }
    if (tile_ok(src, dst)) {
        switch (src->type) {
        case LM_TYPE_F32: launch_tile_to<lm_cu_f32, lm_cu_f32>(st, src, dst); return;
        case LM_TYPE_F16: launch_tile_to<lm_cu_f16, lm_cu_f16>(st, src, dst); return;
        case LM_TYPE_BF16: launch_tile_to<lm_cu_bf16, lm_cu_bf16>(st, src, dst); return;
        default: break;
        }
    }
    const int unit = unit_size(bs, src, dst);
    const int upb = (int)(bs / (size_t)unit);
    switch (unit) {
    case 8: launch_units<uint64_t>(st, src, dst, n_elems, upb); break;
    case 4: launch_units<uint32_t>(st, src, dst, n_elems, upb); break;
    case 2: launch_units<uint16_t>(st, src, dst, n_elems, upb); break;
    default: launch_units<uint8_t>(st, src, dst, n_elems, upb); break;
    }
}

/* Float type S into float type D (different types). */
template <class S, class D>
static void launch_convert(cudaStream_t st, const struct lm_tensor *src, struct lm_tensor *dst)
{
    if (tile_ok(src, dst)) {
        launch_tile_to<S, D>(st, src, dst);
        return;
    }
    const int64_t n = lm_nelements(src);
    k_convert<S, D><<<lm_cu_grid(n, LM_CU_ELEM_THREADS), LM_CU_ELEM_THREADS, 0, st>>>(
        (const char *)src->data, lm_cu_shape_of(src), lm_cu_is_flat(src), (char *)dst->data, lm_cu_shape_of(dst),
        lm_cu_is_flat(dst), n, lm_cu_narrow(n));
}

template <class S> static void launch_convert_from(cudaStream_t st, const struct lm_tensor *src, struct lm_tensor *dst)
{
    switch (dst->type) {
    case LM_TYPE_F32: launch_convert<S, lm_cu_f32>(st, src, dst); break;
    case LM_TYPE_F16: launch_convert<S, lm_cu_f16>(st, src, dst); break;
    default: launch_convert<S, lm_cu_bf16>(st, src, dst); break;
    }
}

static void convert_float(cudaStream_t st, const struct lm_tensor *src, struct lm_tensor *dst)
{
    switch (src->type) {
    case LM_TYPE_F32: launch_convert_from<lm_cu_f32>(st, src, dst); break;
    case LM_TYPE_F16: launch_convert_from<lm_cu_f16>(st, src, dst); break;
    default: launch_convert_from<lm_cu_bf16>(st, src, dst); break;
    }
}

template <class B> static void launch_quantize(cudaStream_t st, const struct lm_tensor *src, struct lm_tensor *dst)
{
    const int64_t n_blocks = lm_nelements(dst) / LM_QK;
    const int threads = 128;
    k_quantize<B><<<lm_cu_grid(n_blocks, threads), threads, 0, st>>>(
        (const char *)src->data, lm_cu_shape_of(src), lm_cu_is_flat(src), (char *)dst->data, block_shape(dst), n_blocks,
        lm_cu_narrow(lm_nelements(src)));
}

/* F32 into a legacy quant type (lm_cu_supports_copy said which). */
static void quantize(cudaStream_t st, const struct lm_tensor *src, struct lm_tensor *dst)
{
    switch (dst->type) {
    case LM_TYPE_Q4_0: launch_quantize<struct lm_block_q4_0>(st, src, dst); break;
    case LM_TYPE_Q4_1: launch_quantize<struct lm_block_q4_1>(st, src, dst); break;
    case LM_TYPE_Q5_0: launch_quantize<struct lm_block_q5_0>(st, src, dst); break;
    case LM_TYPE_Q5_1: launch_quantize<struct lm_block_q5_1>(st, src, dst); break;
    case LM_TYPE_Q8_0: launch_quantize<struct lm_block_q8_0>(st, src, dst); break;
    default: launch_quantize<struct lm_block_q8_1>(st, src, dst); break;
    }
}

/* src into dst by the path of their types. */
static void copy_any(cudaStream_t st, const struct lm_tensor *src, struct lm_tensor *dst)
{
    if (src->type == dst->type)
        copy_same(st, src, dst);
    else if (lm_op_float_type(dst->type))
        convert_float(st, src, dst);
    else
        quantize(st, src, dst);
}

/* True if the byte ranges the two tensors span intersect. */
static bool overlap(const struct lm_tensor *a, const struct lm_tensor *b)
{
    const char *a0 = (const char *)a->data, *b0 = (const char *)b->data;
    return a0 < b0 + lm_nbytes(b) && b0 < a0 + lm_nbytes(a);
}

/* True for the block types quantize.cuh encodes (K-quants and i-quants: the
 * CPU encodes them). */
static bool has_encoder(enum lm_type t)
{
    switch (t) {
    case LM_TYPE_Q4_0:
    case LM_TYPE_Q4_1:
    case LM_TYPE_Q5_0:
    case LM_TYPE_Q5_1:
    case LM_TYPE_Q8_0:
    case LM_TYPE_Q8_1: return true;
    default: return false;
    }
}

bool lm_cu_supports_copy(const struct lm_cu_limits *lim, const struct lm_tensor *t)
{
    if (t->op != LM_OP_CPY && t->op != LM_OP_CONT)
        return false;
    const enum lm_type s = t->src[0]->type, d = t->type;
    if (s == d || (lm_op_float_type(s) && lm_op_float_type(d)))
        return true;
    if (lm_type_blck(s) > 1) /* decoded: a quantized V cache read by the unfused attention graph, a K cache shifted */
        return lm_op_float_type(d) && lm_cu_decode_ok(s) && t->src[0]->ne[0] % lm_type_blck(s) == 0;
    return s == LM_TYPE_F32 && has_encoder(d);
}

/* *out = src's shape as a contiguous tensor of type `type` in scratch slot
 * `slot` (its other fields src's). LM_ERR_NOMEM when the slot cannot grow. */
static lm_status scratch_like(struct lm_cu_ctx *c, int slot, const struct lm_tensor *src, enum lm_type type,
                              struct lm_tensor *out)
{
    *out = *src;
    out->type = type;
    out->nb[0] = lm_type_size(type);
    out->nb[1] = lm_row_size(type, src->ne[0]);
    for (int d = 2; d < 4; d++)
        out->nb[d] = out->nb[d - 1] * (size_t)src->ne[d - 1];
    out->data = lm_cu_scratch(c, slot, out->nb[3] * (size_t)src->ne[3]);
    return out->data ? LM_OK : LM_ERR_NOMEM;
}

/* src (a block type) decoded into the float tensor dst: straight into a
 * contiguous F32 dst, else through contiguous F32 rows in scratch slot 1
 * converted into dst's type and strides (flat order either way). */
static lm_status decode(struct lm_cu_ctx *c, const struct lm_tensor *src, struct lm_tensor *dst)
{
    if (dst->type == LM_TYPE_F32 && lm_is_contiguous(dst))
        return lm_cu_decode_rows(c, src, (float *)dst->data);
    struct lm_tensor rows;
    lm_status st = scratch_like(c, 1, src, LM_TYPE_F32, &rows);
    if (!st)
        st = lm_cu_decode_rows(c, src, (float *)rows.data);
    if (st)
        return st;
    copy_any(c->stream, &rows, dst);
    return lm_cu_launch_status("cpy (decoded rows)");
}

lm_status lm_cu_op_copy(struct lm_cu_ctx *c, struct lm_tensor *dst)
{
    const struct lm_tensor *src = dst->src[0];
    if (lm_nelements(src) == 0)
        return LM_OK;
    struct lm_tensor staged;
    if (overlap(src, dst)) { /* gather the source first, as ref does */
        lm_status st = scratch_like(c, 0, src, src->type, &staged);
        if (st)
            return st;
        copy_same(c->stream, src, &staged);
        src = &staged;
    }
    if (lm_type_blck(src->type) > 1 && src->type != dst->type)
        return decode(c, src, dst);
    copy_any(c->stream, src, dst);
    return lm_cu_launch_status(dst->op == LM_OP_CPY ? "cpy" : "cont");
}

bool lm_cu_supports_set_rows(const struct lm_cu_limits *lim, const struct lm_tensor *t)
{
    (void)lim;
    if (t->op != LM_OP_SET_ROWS)
        return false;
    return lm_op_float_type(t->type) || has_encoder(t->type);
}

template <class D> static void launch_set_rows(cudaStream_t st, const struct lm_tensor *a, const int32_t *ids,
                                               struct lm_tensor *dst, bool cols)
{
    const int64_t n = a->ne[0], n_elems = n * a->ne[1];
    k_set_rows<D><<<lm_cu_grid(n_elems, LM_CU_ELEM_THREADS), LM_CU_ELEM_THREADS, 0, st>>>(
        (const char *)a->data, (int64_t)a->nb[0], (int64_t)a->nb[1], ids, (char *)dst->data, (int64_t)dst->nb[0],
        (int64_t)dst->nb[1], n, n_elems, dst->ne[cols ? 0 : 1], cols);
}

template <class B>
static void launch_set_rows_quant(cudaStream_t st, const struct lm_tensor *a, const int32_t *ids, struct lm_tensor *dst)
{
    const int64_t per_row = a->ne[0] / LM_QK, n_blocks = per_row * a->ne[1];
    const int threads = 128;
    k_set_rows_quant<B><<<lm_cu_grid(n_blocks, threads), threads, 0, st>>>(
        (const char *)a->data, (int64_t)a->nb[0], (int64_t)a->nb[1], ids, (char *)dst->data, (int64_t)dst->nb[1],
        per_row, n_blocks, dst->ne[1]);
}

lm_status lm_cu_op_set_rows(struct lm_cu_ctx *c, struct lm_tensor *dst)
{
    const struct lm_tensor *a = dst->src[0];
    const int32_t *ids = (const int32_t *)dst->src[2]->data;
    const bool cols = lm_get_op_i32(dst, 0) != 0;
    if (lm_nelements(a) == 0)
        return LM_OK;
    cudaStream_t st = c->stream;
    switch (dst->type) {
    case LM_TYPE_F32: launch_set_rows<lm_cu_f32>(st, a, ids, dst, cols); break;
    case LM_TYPE_F16: launch_set_rows<lm_cu_f16>(st, a, ids, dst, cols); break;
    case LM_TYPE_BF16: launch_set_rows<lm_cu_bf16>(st, a, ids, dst, cols); break;
    case LM_TYPE_Q4_0: launch_set_rows_quant<struct lm_block_q4_0>(st, a, ids, dst); break;
    case LM_TYPE_Q4_1: launch_set_rows_quant<struct lm_block_q4_1>(st, a, ids, dst); break;
    case LM_TYPE_Q5_0: launch_set_rows_quant<struct lm_block_q5_0>(st, a, ids, dst); break;
    case LM_TYPE_Q5_1: launch_set_rows_quant<struct lm_block_q5_1>(st, a, ids, dst); break;
    case LM_TYPE_Q8_0: launch_set_rows_quant<struct lm_block_q8_0>(st, a, ids, dst); break;
    case LM_TYPE_Q8_1: launch_set_rows_quant<struct lm_block_q8_1>(st, a, ids, dst); break;
    default: return LM_ERR_UNSUPPORTED;
    }
    return lm_cu_launch_status("set_rows");
}
