/* elem.cuh - element indexing for the CUDA element and copy kernels
 * (ops_elementwise.cu, ops_copy.cu): flat index -> (i0, i1, i2, i3) -> byte
 * offset through a tensor's strides, row bases, and grid sizes for
 * grid-stride loops.
 *
 * Flat order is row-major over ne[] with ne[0] fastest (docs/ops.md). A
 * kernel that walks a tensor element by element splits each flat index with
 * three divisions; `narrow` (the host's lm_cu_narrow: every count fits 32 bits,
 * true for any tensor that fits a GPU's memory in practice) selects 32-bit
 * divisions, several times cheaper than 64-bit ones. The index helpers run
 * on the host too (the host tests emulate kernels with them). All helpers are
 * static: nothing here is a symbol of liblamina.
 */
#ifndef LM_CUDA_ELEM_CUH
#define LM_CUDA_ELEM_CUH

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/tensor.h"
#include "cuda/cuda_internal.cuh"

/* Threads per block of the flat element kernels. */
#define LM_CU_ELEM_THREADS 256
/* At most this many blocks in a grid-stride launch (enough to fill any GPU). */
#define LM_CU_MAX_GRID 65536

/* Blocks for n items with `threads` per block, capped for a grid-stride loop. */
static inline unsigned lm_cu_grid(int64_t n, int threads)
{
    const unsigned b = lm_cu_blocks(n, threads);
    return b < LM_CU_MAX_GRID ? b : LM_CU_MAX_GRID;
}

/* True when n and every ne[] of the shapes involved fit 32-bit unsigned
 * arithmetic (a flat index of n elements, and each dim, is then < 2^32). */
static inline bool lm_cu_narrow(int64_t n) { return n >= 0 && n <= (int64_t)UINT32_MAX; }

/* (i0, i1, i2, i3) of flat index k over ne[] (ne[3] is not needed). */
static __host__ __device__ __forceinline__ void lm_cu_unflatten(int64_t k, const int64_t ne[4], bool narrow, int64_t i[4])
{
    if (narrow) {
        uint32_t u = (uint32_t)k;
        const uint32_t n0 = (uint32_t)ne[0], n1 = (uint32_t)ne[1], n2 = (uint32_t)ne[2];
        i[0] = u % n0;
        u /= n0;
        i[1] = u % n1;
        u /= n1;
        i[2] = u % n2;
        i[3] = u / n2;
    } else {
        i[0] = k % ne[0];
        k /= ne[0];
        i[1] = k % ne[1];
        k /= ne[1];
        i[2] = k % ne[2];
        i[3] = k / ne[2];
    }
}

/* Byte offset of element (block, for quantized types) i of shape s. */
static __host__ __device__ __forceinline__ int64_t lm_cu_offset(const struct lm_cu_shape &s, const int64_t i[4])
{
    return i[0] * s.nb[0] + i[1] * s.nb[1] + i[2] * s.nb[2] + i[3] * s.nb[3];
}

/* Byte offset of the element with flat index k of shape s. */
static __host__ __device__ __forceinline__ int64_t lm_cu_flat_offset(const struct lm_cu_shape &s, int64_t k, bool narrow)
{
    int64_t i[4];
    lm_cu_unflatten(k, s.ne, narrow, i);
    return lm_cu_offset(s, i);
}

/* Byte offset of row r (flat over ne[1], ne[2], ne[3]) of shape s, and its
 * indices i1, i2, i3 in i[1..3] (i[0] = 0). */
static __host__ __device__ __forceinline__ int64_t lm_cu_row_offset(const struct lm_cu_shape &s, int64_t r, int64_t i[4])
{
    i[0] = 0;
    i[1] = r % s.ne[1];
    r /= s.ne[1];
    i[2] = r % s.ne[2];
    i[3] = r / s.ne[2];
    return i[1] * s.nb[1] + i[2] * s.nb[2] + i[3] * s.nb[3];
}

/* True if t's elements are packed in flat order (lm_is_contiguous, for a
 * tensor whose dims of size 1 may carry any stride). */
static inline bool lm_cu_is_flat(const struct lm_tensor *t)
{
    int64_t expect = (int64_t)lm_type_size(t->type);
    for (int d = 0; d < 4; d++) {
        if (t->ne[d] != 1 && (int64_t)t->nb[d] != expect)
            return false;
        expect *= d == 0 ? t->ne[0] / lm_type_blck(t->type) : t->ne[d];
    }
    return true;
}

#endif
