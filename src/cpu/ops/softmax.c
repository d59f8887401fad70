/* softmax.c - SOFT_MAX (with scale, mask and ALiBi slopes) and DIAG_MASK_INF.
 *
 * SOFT_MAX per row of a [n_kv, n_q, n_head, B]:
 *     w = a * scale + slope_h * mask[row i1]   (mask broadcast over dims 2, 3)
 *     y = exp(w - max w) / sum exp(w - max w)
 * as ggml computes it: w in float in a per-thread row buffer, the
 * exponentials and their sum in double by the table's exp_sum (kernels.h),
 * one float multiply by 1/sum. slope_h from max_bias as in tensor.h
 * (1 when max_bias == 0). A row whose w are all -inf gives NaN, as in ggml.
 * Threads split rows; any strides.
 */
#include <math.h>

#include "cpu/ops/ops.h"

/* Scratch: one F32 row per thread. */
size_t lm_cpu_work_soft_max(const struct lm_tensor *dst, int nth, const struct lm_cpu_kernels *kern)
{
    (void)kern;
    return (size_t)nth * lm_cpu_pad((size_t)dst->ne[0] * sizeof(float));
}

/* SOFT_MAX on this thread's rows. */
void lm_cpu_op_soft_max(const struct lm_cpu_params *p, struct lm_tensor *dst)
{
    const struct lm_tensor *a = dst->src[0], *mask = dst->src[1];
    const float scale = lm_get_op_f32(dst, 0), max_bias = lm_get_op_f32(dst, 1);
    const int64_t n = a->ne[0];
    float *w = lm_cpu_wslice(p, 0, (size_t)n * sizeof(float));
    for (struct lm_cpu_rows it = lm_cpu_rows(p, a); lm_cpu_rows_next(&it);) {
        const char *x = lm_cpu_row(a, &it);
        for (int64_t i = 0; i < n; i++)
            w[i] = *(const float *)(x + i * (int64_t)a->nb[0]) * scale;
        if (mask) {
            const float slope = lm_cpu_alibi_slope(max_bias, a->ne[2], it.i2);
            const char *m = lm_cpu_elem(mask, 0, it.i1, 0, 0);
            for (int64_t i = 0; i < n; i++)
                w[i] += slope * *(const float *)(m + i * (int64_t)mask->nb[0]);
        }
        float max = -INFINITY;
        for (int64_t i = 0; i < n; i++)
            max = w[i] > max ? w[i] : max;
        const double sum = p->kern->exp_sum(n, w, w, max);
        const float inv = (float)(1.0 / sum);
        char *y = lm_cpu_row(dst, &it);
        for (int64_t i = 0; i < n; i++)
            *(float *)(y + i * (int64_t)dst->nb[0]) = w[i] * inv;
    }
}

/* DIAG_MASK_INF on this thread's rows. */
void lm_cpu_op_diag_mask_inf(const struct lm_cpu_params *p, struct lm_tensor *dst)
{
    const struct lm_tensor *a = dst->src[0];
    const int64_t n_past = lm_get_op_i32(dst, 0);
    const int64_t n = a->ne[0];
    for (struct lm_cpu_rows it = lm_cpu_rows(p, a); lm_cpu_rows_next(&it);) {
        const char *x = lm_cpu_row(a, &it);
        char *y = lm_cpu_row(dst, &it);
        for (int64_t i = 0; i < n; i++) {
            float v = *(const float *)(x + i * (int64_t)a->nb[0]);
            *(float *)(y + i * (int64_t)dst->nb[0]) = i > n_past + it.i1 ? -INFINITY : v;
        }
    }
}
