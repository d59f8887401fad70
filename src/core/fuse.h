/* fuse.h - pairs of adjacent graph nodes a backend may compute as one.
 *
 *   RMS_NORM(x) then MUL(., w), w one F32 row broadcast over the rows:
 *       y = x * scale(x) * w            (the norm block of every llama layer)
 *   UNARY SILU(g) then MUL(., u), u of g's shape:
 *       y = silu(g) * u                 (SwiGLU)
 *   MUL_MAT(w, x) then ADD with the product as either operand, the other
 *   of the product's shape (a residual) or one row of its ne[0] (a bias):
 *       y = w x + r
 *   MUL_MAT(w1, x) then MUL_MAT(w2, x), the same x, w1 and w2 of one type,
 *   shape and layout (the FFN's up and gate projections):
 *       y1 = w1 x, y2 = w2 x
 *
 * The rule (ops, shapes, types, layout) is written here once; each backend
 * says which kinds it computes fused (cpu/fuse.c: the first two; the CUDA
 * backend all four, the products by its matvec kernels). A fused pair gives
 * the bits of the two nodes computed apart (the same float operations in
 * the same order) and still writes the first node's result, so a later
 * reader of it, or the second node placed in place over it, sees what it
 * would have seen. Everything is F32 with packed rows; the MUL_MAT pairs
 * want their results (and an addend) contiguous.
 */
#ifndef LM_FUSE_H
#define LM_FUSE_H

#include "core/tensor.h"

#ifdef __cplusplus
extern "C" { /* the CUDA backend (C++) calls these */
#endif

enum lm_fuse { LM_FUSE_NONE = 0, LM_FUSE_RMS_NORM_MUL, LM_FUSE_SILU_MUL, LM_FUSE_MUL_MAT_ADD, LM_FUSE_MUL_MAT_PAIR };

/* The kind of pair node a followed by node b make, or LM_FUSE_NONE. */
enum lm_fuse lm_fuse_match(const struct lm_tensor *a, const struct lm_tensor *b);
/* b's operand that is not a (the weight row, u, or the addend; for a
 * MUL_MAT pair, b's weight). */
const struct lm_tensor *lm_fuse_other(const struct lm_tensor *a, const struct lm_tensor *b);

#ifdef __cplusplus
}
#endif

#endif
