/* ref_internal.h - shared by the files of ref/ only: strided element access,
 * row conversion to float, and the op functions the backend dispatches to.
 *
 * Every op function computes one node `dst` from dst->src[] with plain scalar
 * C, single-threaded, reading and writing every tensor through its strides
 * (nb[]), accumulating sums in double. Row-wise ops read a whole source row
 * into a scratch buffer before writing the destination row, so a destination
 * that aliases its source with the same layout (an in-place allocation) gives
 * the same result. They return LM_OK, LM_ERR_NOMEM when scratch memory cannot
 * be had, or LM_ERR_UNSUPPORTED for a type without a float conversion.
 * The caller (graph_compute) has checked the node with lm_ref_supports().
 */
#ifndef LM_REF_INTERNAL_H
#define LM_REF_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "core/tensor.h"

/* Address of element (block, for quantized types) (i0, i1, i2, i3) of t. */
static inline void *ref_ptr(const struct lm_tensor *t, int64_t i0, int64_t i1, int64_t i2, int64_t i3)
{
    return (char *)t->data + i0 * (int64_t)t->nb[0] + i1 * (int64_t)t->nb[1] + i2 * (int64_t)t->nb[2] +
           i3 * (int64_t)t->nb[3];
}

/* malloc'd scratch for n elements of `size` bytes; room for one when n <= 0,
 * so a pointer to free comes back either way. NULL when out of memory. */
static inline void *ref_scratch(int64_t n, size_t size) { return malloc((size_t)(n > 0 ? n : 1) * size); }

/* Value of element (i0..i3) of a non-quantized tensor (F32, F16, BF16, I32, I16, I8). */
double lm_ref_get(const struct lm_tensor *t, int64_t i0, int64_t i1, int64_t i2, int64_t i3);
/* Store v (rounded to t's type; F32, F16, BF16, I32) at element (i0..i3). */
void lm_ref_set(struct lm_tensor *t, int64_t i0, int64_t i1, int64_t i2, int64_t i3, double v);

/* True if rows of type `type` can be read as floats (lm_ref_get_row works). */
bool lm_ref_type_readable(enum lm_type type);
/* True if F32 rows can be written as type `type` (quantizers included). */
bool lm_ref_type_writable(enum lm_type type);
/* Row (i1, i2, i3) of t as t->ne[0] floats in out: element by element for
 * F32/F16/BF16, with the type's to_float for quantized rows (which must be
 * contiguous). LM_ERR_UNSUPPORTED for a type without a conversion. */
lm_status lm_ref_get_row(const struct lm_tensor *t, int64_t i1, int64_t i2, int64_t i3, float *out);

/* Split a flat index (row-major over ne[], ne[0] fastest) into four indices. */
void lm_ref_unflatten(const int64_t ne[4], int64_t flat, int64_t idx[4]);

/* True if the ref backend computes node t: a well-formed node (the core's op
 * rules) whose types it can convert. */
bool lm_ref_supports(const struct lm_tensor *t);

/* ops_elementwise.c */
lm_status lm_ref_op_binary(struct lm_tensor *dst);   /* ADD, MUL, DIV */
lm_status lm_ref_op_unary(struct lm_tensor *dst);    /* SCALE, SQR, SQRT, CLAMP, UNARY */
lm_status lm_ref_op_sum_rows(struct lm_tensor *dst);
lm_status lm_ref_op_norm(struct lm_tensor *dst);     /* NORM, RMS_NORM */

/* ops_matmul.c */
lm_status lm_ref_op_mul_mat(struct lm_tensor *dst);
lm_status lm_ref_op_mul_mat_id(struct lm_tensor *dst);
lm_status lm_ref_op_get_rows(struct lm_tensor *dst);

/* ops_copy.c */
lm_status lm_ref_op_cpy(struct lm_tensor *dst);      /* CPY (into dst == a view of src[1]) and CONT */
lm_status lm_ref_op_set_rows(struct lm_tensor *dst); /* SET_ROWS (into dst == a view of src[1]) */
lm_status lm_ref_op_repeat(struct lm_tensor *dst);
lm_status lm_ref_op_concat(struct lm_tensor *dst);

/* ops_attention.c */
lm_status lm_ref_op_diag_mask_inf(struct lm_tensor *dst);
lm_status lm_ref_op_soft_max(struct lm_tensor *dst);
lm_status lm_ref_op_attn(struct lm_tensor *dst);     /* fused attention (tensor.h's lm_attn) */
lm_status lm_ref_op_rope(struct lm_tensor *dst);     /* ROPE, ROPE_BACK */
lm_status lm_ref_op_argsort(struct lm_tensor *dst);

/* ops_train.c (training ops) */
lm_status lm_ref_op_get_rows_back(struct lm_tensor *dst);
lm_status lm_ref_op_repeat_back(struct lm_tensor *dst);
lm_status lm_ref_op_rms_norm_back(struct lm_tensor *dst);
lm_status lm_ref_op_soft_max_back(struct lm_tensor *dst);
lm_status lm_ref_op_unary_back(struct lm_tensor *dst);
lm_status lm_ref_op_cross_entropy_loss(struct lm_tensor *dst); /* and CROSS_ENTROPY_LOSS_BACK */

#endif
