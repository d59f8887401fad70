/* internal.h - helpers shared by the files of core/ only. */
#ifndef LM_CORE_INTERNAL_H
#define LM_CORE_INTERNAL_H

#include "core/tensor.h"

/* lm_ctx_fail (tensor.h) records an arena's first error. */

/* A tensor of shape ne[4], contiguous strides; a view of view_src at
 * view_offs when view_src is set (no data of its own). NULL on error. */
struct lm_tensor *lm_tensor_make(struct lm_ctx *ctx, enum lm_type type, const int64_t ne[4],
                                 struct lm_tensor *view_src, size_t view_offs);

#endif
