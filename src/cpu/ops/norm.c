/* norm.c - NORM and RMS_NORM over each row of an F32 tensor.
 *
 * NORM:     y = (x - mean) / sqrt(var + eps), var = mean((x - mean)^2)
 * RMS_NORM: y = x / sqrt(mean(x^2) + eps)
 * As ggml: sums in double, mean/var rounded to float, one float scale
 * 1/sqrtf(. + eps) multiplied into every element. Threads split rows; any strides.
 * RMS_NORM sums in element order (the LLaMA family's bits); NORM's sums on
 * contiguous rows run in 8 double lanes (element i in lane i % 8, the lanes
 * added in a fixed tree, the tail in order) - ~8x faster than one dependent
 * chain of double adds, and the same bits on every ISA and thread count.
 */
#include <math.h>
#include <string.h>

#include "cpu/ops/ops.h"

typedef float norm_v8f __attribute__((vector_size(32)));
typedef double norm_v8d __attribute__((vector_size(64)));

static double lanes_sum(const norm_v8d *v)
{
    const norm_v8d a = *v;
    return ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]));
}

/* NORM of one contiguous row (the lane sums above). */
static void norm_row_contig(int64_t n, float eps, const float *x, float *y)
{
    const int64_t n8 = n - n % 8;
    norm_v8d acc = {0};
    for (int64_t i = 0; i < n8; i += 8) {
        norm_v8f v;
        memcpy(&v, x + i, sizeof v);
        acc += __builtin_convertvector(v, norm_v8d);
    }
    double sum = lanes_sum(&acc);
    for (int64_t i = n8; i < n; i++)
        sum += x[i];
    const float mean = (float)(sum / (double)n);
    norm_v8d acc2 = {0};
    for (int64_t i = 0; i < n8; i += 8) {
        norm_v8f v;
        memcpy(&v, x + i, sizeof v);
        v -= mean;
        memcpy(y + i, &v, sizeof v);
        acc2 += __builtin_convertvector(v * v, norm_v8d);
    }
    double sum2 = lanes_sum(&acc2);
    for (int64_t i = n8; i < n; i++) {
        const float v = x[i] - mean;
        y[i] = v;
        sum2 += (double)(v * v);
    }
    const float var = (float)(sum2 / (double)n);
    const float scale = 1.0f / sqrtf(var + eps);
    for (int64_t i = 0; i < n; i++)
        y[i] *= scale;
}

static void norm_row(int64_t n, float eps, const char *x, int64_t sx, char *y, int64_t sy)
{
    if (sx == (int64_t)sizeof(float) && sy == (int64_t)sizeof(float)) {
        norm_row_contig(n, eps, (const float *)x, (float *)y);
        return;
    }
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
