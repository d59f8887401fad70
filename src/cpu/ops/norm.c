/* norm.c - NORM and RMS_NORM over each row of an F32 tensor.
 *
 * NORM:     y = (x - mean) / sqrt(var + eps), var = mean((x - mean)^2)
 * RMS_NORM: y = x / sqrt(mean(x^2) + eps)
 * As ggml: sums in double, mean/var rounded to float, one float scale
 * 1/sqrtf(. + eps) multiplied into every element. Threads split rows; any strides.
 */
#include <math.h>

#include "cpu/ops/ops.h"

static void norm_row(int64_t n, float eps, const char *x, int64_t sx, char *y, int64_t sy)
{
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++)
        sum += *(const float *)(x + i * sx);
    const float mean = (float)(sum / (double)n);
    double sum2 = 0.0;
    for (int64_t i = 0; i < n; i++) {
        float v = *(const float *)(x + i * sx) - mean;
        *(float *)(y + i * sy) = v;
        sum2 += (double)(v * v);
    }
    const float var = (float)(sum2 / (double)n);
    const float scale = 1.0f / sqrtf(var + eps);
    for (int64_t i = 0; i < n; i++)
        *(float *)(y + i * sy) *= scale;
}

static void rms_norm_row(int64_t n, float eps, const char *x, int64_t sx, char *y, int64_t sy)
{
    if (sx == (int64_t)sizeof(float) && sy == (int64_t)sizeof(float)) {
        const float scale = lm_cpu_rms_scale(n, eps, (const float *)x);
        for (int64_t i = 0; i < n; i++)
            ((float *)y)[i] = ((const float *)x)[i] * scale;
        return;
    }
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) {
        float v = *(const float *)(x + i * sx);
        sum += (double)(v * v);
    }
    const float mean = (float)(sum / (double)n);
    const float scale = 1.0f / sqrtf(mean + eps);
    for (int64_t i = 0; i < n; i++)
        *(float *)(y + i * sy) = *(const float *)(x + i * sx) * scale;
}

/* NORM and RMS_NORM on this thread's rows. */
void lm_cpu_op_norm(const struct lm_cpu_params *p, struct lm_tensor *dst)
{
    const struct lm_tensor *a = dst->src[0];
    const float eps = lm_get_op_f32(dst, 0);
    const int64_t n = a->ne[0];
    for (struct lm_cpu_rows it = lm_cpu_rows(p, a); lm_cpu_rows_next(&it);) {
        const char *x = lm_cpu_row(a, &it);
        char *y = lm_cpu_row(dst, &it);
        if (dst->op == LM_OP_NORM)
            norm_row(n, eps, x, (int64_t)a->nb[0], y, (int64_t)dst->nb[0]);
        else
            rms_norm_row(n, eps, x, (int64_t)a->nb[0], y, (int64_t)dst->nb[0]);
    }
}
