/* ops_matmul.c - ref MUL_MAT, MUL_MAT_ID and GET_ROWS.
 *
 * Weight rows of any readable type are converted to F32 with lm_ref_get_row
 * (quantized rows with the type's to_float); activations stay F32 (they are
 * never quantized here, unlike the CPU backend's kernels). Dot products
 * accumulate products of the F32 values in double and round once.
 */
#include <stdlib.h>

#include "ref/ref_internal.h"

/* dot(w[0..n), row (i1, i2, i3) of the F32 tensor b) in double. */
static double dot_row(const float *w, const struct lm_tensor *b, int64_t i1, int64_t i2, int64_t i3)
{
    double sum = 0.0;
    for (int64_t k = 0; k < b->ne[0]; k++)
        sum += (double)w[k] * lm_ref_get(b, k, i1, i2, i3);
    return sum;
}

/* dst[m, n, i2, i3] = dot(a[:, m, i2 / (B2/A2), i3 / (B3/A3)], b[:, n, i2, i3]). */
lm_status lm_ref_op_mul_mat(struct lm_tensor *dst)
{
    const struct lm_tensor *a = dst->src[0], *b = dst->src[1];
    const int64_t r2 = b->ne[2] / a->ne[2], r3 = b->ne[3] / a->ne[3];
    float *w = ref_scratch(a->ne[0], sizeof *w);
    if (!w)
        return LM_ERR_NOMEM;
    lm_status st = LM_OK;
    for (int64_t i3 = 0; i3 < dst->ne[3] && !st; i3++)
        for (int64_t i2 = 0; i2 < dst->ne[2] && !st; i2++)
            for (int64_t m = 0; m < dst->ne[0] && !st; m++) {
                st = lm_ref_get_row(a, m, i2 / r2, i3 / r3, w);
                for (int64_t n = 0; n < dst->ne[1] && !st; n++)
                    lm_ref_set(dst, m, n, i2, i3, dot_row(w, b, n, i2, i3));
            }
    free(w);
    return st;
}

/* dst[m, s, t] = dot(as[:, m, e], b[:, s % B1, t]) with e = ids[s, t]; a zero
 * row when e is not an expert. */
lm_status lm_ref_op_mul_mat_id(struct lm_tensor *dst)
{
    const struct lm_tensor *as = dst->src[0], *b = dst->src[1], *ids = dst->src[2];
    const int64_t n_expert = as->ne[2];
    float *w = ref_scratch(as->ne[0], sizeof *w);
    if (!w)
        return LM_ERR_NOMEM;
    lm_status st = LM_OK;
    for (int64_t t = 0; t < dst->ne[2] && !st; t++)
        for (int64_t s = 0; s < dst->ne[1] && !st; s++) {
            const int64_t e = (int64_t)lm_ref_get(ids, s, t, 0, 0);
            const int64_t bi = s % b->ne[1];
            for (int64_t m = 0; m < dst->ne[0] && !st; m++) {
                if (e < 0 || e >= n_expert) {
                    lm_ref_set(dst, m, s, t, 0, 0.0);
                    continue;
                }
                st = lm_ref_get_row(as, m, e, 0, w);
                if (!st)
                    lm_ref_set(dst, m, s, t, 0, dot_row(w, b, bi, t, 0));
            }
        }
    free(w);
    return st;
}

/* dst[:, n, i2, i3] = a[:, ids[n, i2, i3], i2 % A2, i3 % A3] as F32; a zero
 * row for an id outside [0, a.ne[1]). */
lm_status lm_ref_op_get_rows(struct lm_tensor *dst)
{
    const struct lm_tensor *a = dst->src[0], *ids = dst->src[1];
    float *row = ref_scratch(a->ne[0], sizeof *row);
    if (!row)
        return LM_ERR_NOMEM;
    lm_status st = LM_OK;
    for (int64_t i3 = 0; i3 < dst->ne[3] && !st; i3++)
        for (int64_t i2 = 0; i2 < dst->ne[2] && !st; i2++)
            for (int64_t n = 0; n < dst->ne[1] && !st; n++) {
                const int64_t r = (int64_t)lm_ref_get(ids, n, i2, i3, 0);
                if (r < 0 || r >= a->ne[1]) {
                    for (int64_t i0 = 0; i0 < dst->ne[0]; i0++)
                        lm_ref_set(dst, i0, n, i2, i3, 0.0);
                    continue;
                }
                st = lm_ref_get_row(a, r, i2 % a->ne[2], i3 % a->ne[3], row);
                for (int64_t i0 = 0; i0 < dst->ne[0] && !st; i0++)
                    lm_ref_set(dst, i0, n, i2, i3, row[i0]);
            }
    free(row);
    return st;
}
