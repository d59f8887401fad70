/* matmul.cuh - shared by ops_matmul.cu (MUL_MAT, MUL_MAT_ID's matvec,
 * GET_ROWS), ops_mmq.cu (MUL_MAT of quantized weights, small batches) and
 * ops_moe.cu (MUL_MAT_ID batches grouped by expert) only: the
 * size limits they use, the GEMM path's activation kinds, and the GEMM
 * path's host pieces that the grouped path reuses (weights as the decoders
 * need them, the cuBLAS call, F16 dequantization in chunks), defined once in
 * ops_matmul.cu. The op functions themselves are in cuda_internal.cuh.
 */
#ifndef LM_CUDA_MATMUL_CUH
#define LM_CUDA_MATMUL_CUH

#include <cuda_fp16.h>
#include <stdint.h>

#include "core/fp16.h"
#include "core/op_rules.h" /* lm_op_float_type */
#include "core/tensor.h"
#include "core/type.h"
#include "cuda/cuda_internal.cuh"

#define MV_MAX_N 8                     /* MUL_MAT columns up to which the matvec runs */
#define MMQ_MAX_N 64                   /* ... and then MMQ (quantized weights; ops_mmq.cu) */
#define ROWS_GRID_MAX (1 << 20)        /* row blocks beyond this loop in the kernel */
#define GEMM_CHUNK ((size_t)128 << 20) /* bytes of dequantized F16 weights per GEMM pass */

/* Compute types of the GEMM path's activations. */
enum act_kind { ACT_F32, ACT_F16, ACT_BF16 };

static inline unsigned grid_1d(int64_t n, int64_t max) { return (unsigned)(n < 1 ? 1 : n < max ? n : max); }

/* The GEMM path's activation kind for weights of type t. */
static inline int gemm_kind(enum lm_type t)
{
    return t == LM_TYPE_F32 ? ACT_F32 : t == LM_TYPE_BF16 ? ACT_BF16 : ACT_F16;
}

/* out[i] = v as an activation of kind KIND. F16 saturates finite values
 * past its range (activations of quantized weights, which the CPU keeps in
 * Q8 blocks with their own scale, can pass 65504 where an F16 infinity would
 * turn the whole output row into inf/NaN); inf and NaN pass through. */
template <int KIND> static __device__ __forceinline__ void store_act(void *out, int64_t i, float v)
{
    if constexpr (KIND == ACT_F32)
        ((float *)out)[i] = v;
    else if constexpr (KIND == ACT_F16)
        ((__half *)out)[i] = __float2half_rn(fabsf(v) > 65504.0f && isfinite(v) ? copysignf(65504.0f, v) : v);
    else
        ((uint16_t *)out)[i] = lm_fp32_to_bf16(v);
}

/* Weights as the decoders need them (rows start at block boundaries aligned
 * to gcd(block bytes, 16)): a's own data, or a packed copy in scratch slot 2. */
struct mm_weights {
    const uint8_t *data;
    int64_t nb1, nb2, nb3;
};

extern "C" { /* C names: liblamina's symbols carry the lm_ prefix unmangled */

/* ---- ops_matmul.cu: the GEMM path's pieces ---- */

/* *w = a's weights as the decoders need them: a's own data, or (odd views)
 * its rows packed into scratch slot 2 by a launch on c's stream. LM_OK, or
 * LM_ERR_NOMEM. */
lm_status lm_cu_weights_of(struct lm_cu_ctx *c, const struct lm_tensor *a, mm_weights *w);

/* C[:, batch] = op(A)^T B for `batch` slices: result[m, n] = sum_k a[k, m] b[k, n]
 * with a stored as rows of K (column-major K x m with lda: op T); A and B of
 * activation kind `kind`, F32 results. cuBLAS on c's handle: the caller is
 * not capturing and has set the handle's pointer mode to host. */
lm_status lm_cu_gemm(struct lm_cu_ctx *c, int kind, int m, int n, int k, const void *A, int lda, long long sA,
                     const void *B, long long sB, float *C, int ldc, long long sC, int batch);

/* What one dequantization pass covers: *na whole slices (dim 2, of A2) of M
 * rows of K, or *mt < M rows of one slice, at most GEMM_CHUNK bytes of F16
 * (at least one row). */
void lm_cu_f16_chunk(int64_t K, int64_t M, int64_t A2, int64_t *mt, int64_t *na);

/* Rows m0 .. m0 + mc of slices (i2 .. i2 + na, i3) of the quantized weights w
 * (type t, rows of K) dequantized into ah as F16 [K, mc, na]. */
lm_status lm_cu_dequant_f16(struct lm_cu_ctx *c, enum lm_type t, const mm_weights &w, int64_t K, int64_t m0, int64_t mc,
                            int64_t i2, int64_t na, int64_t i3, __half *ah);

/* True when the decoders (dequant.cuh) read block type t. */
bool lm_cu_decode_ok(enum lm_type t);

/* Every row of src (a block type lm_cu_decode_ok takes, rows of whole blocks,
 * any row strides) decoded into out as F32 rows of src->ne[0], row after row
 * in src's order (CPY and CONT of a block type into contiguous F32), by
 * GET_ROWS's kernel on c's stream. LM_OK, LM_ERR_NOMEM or a launch error. */
lm_status lm_cu_decode_rows(struct lm_cu_ctx *c, const struct lm_tensor *src, float *out);

/* ---- ops_mmq.cu: quantized weights times 9 to MMQ_MAX_N columns ---- */

/* True when MUL_MAT node t can take the MMQ path (it does on a backend
 * whose lm_cu_ctx.mmq is set): weights of a type the decoders read,
 * MV_MAX_N < N <= MMQ_MAX_N columns. */
bool lm_cu_mmq_ok(const struct lm_tensor *t);

/* MUL_MAT node dst (lm_cu_mmq_ok) by the MMQ kernel, as an op function
 * (cuda_internal.cuh): no synchronization, no cuBLAS (capturable). */
lm_status lm_cu_mul_mat_mmq(struct lm_cu_ctx *c, struct lm_tensor *dst);

/* ---- ops_moe.cu: MUL_MAT_ID batches grouped by expert ---- */

/* True when MUL_MAT_ID node t takes the grouped path: more than MV_MAX_N
 * tokens, a grouping kernel that fits, pair indices that fit an int. */
bool lm_cu_moe_grouped(const struct lm_tensor *t);

/* True when grouped MUL_MAT_ID node t can take the MMQ path (it does on a
 * backend whose lm_cu_ctx.mmq is set): quantized weights the decoders read,
 * at most MMQ_MAX_N tokens, experts and pairs within its grid. */
bool lm_cu_moe_mmq_ok(const struct lm_tensor *t);

/* MUL_MAT_ID node dst (lm_cu_moe_grouped) by the grouped path, as an op
 * function (cuda_internal.cuh); reads the expert offsets on the host (one
 * stream synchronization). */
lm_status lm_cu_mul_mat_id_grouped(struct lm_cu_ctx *c, struct lm_tensor *dst);

} /* extern "C" */

#endif
