/* exp_generic.c - softmax's exponentials (kernels.h lm_exp_sum_fn), the
 * reference: libm expf per element and a sequential double sum; its scaling
 * (lm_scale_max_fn) in GCC vector types; and GELU
 * (lm_gelu_fn) by its tanh formula with libm tanhf; SiLU (lm_silu_fn) with
 * libm expf. */
#include <math.h>
#include <string.h>

#include "cpu/kernels/kernels.h"

/* Contract: kernels.h. */
double lm_exp_sum_generic(int64_t n, float *y, const float *x, float max)
{
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) {
        y[i] = expf(x[i] - max);
        sum += (double)y[i];
    }
    return sum;
}

/* Contract: kernels.h. */
void lm_gelu_generic(int64_t n, float *y, const float *x)
{
    for (int64_t i = 0; i < n; i++) {
        const float v = x[i];
        y[i] = v == -INFINITY ? -0.0f : 0.5f * v * (1.0f + tanhf(0.79788456080286535588f * v * (1.0f + 0.044715f * v * v)));
    }
}

/* Contract: kernels.h. */
void lm_silu_generic(int64_t n, float *y, const float *x)
{
    for (int64_t i = 0; i < n; i++)
        y[i] = x[i] == -INFINITY ? -0.0f : x[i] / (1.0f + expf(-x[i])); /* -inf / inf: -0 */
}

/* Contract: kernels.h. Written with GCC vector types (4 lanes: the generic
 * code's baseline SSE2; GCC does not vectorize the scalar form) and a
 * running maximum per lane. */
typedef float scale_v4f __attribute__((vector_size(16)));
typedef int32_t scale_v4i __attribute__((vector_size(16)));

float lm_scale_max_generic(int64_t n, float *s, const float *m, float scale, float slope)
{
    const scale_v4f vs = {scale, scale, scale, scale}, vk = {slope, slope, slope, slope};
    scale_v4f lane = {-INFINITY, -INFINITY, -INFINITY, -INFINITY};
    int64_t j = 0;
    for (; j + 4 <= n; j += 4) {
        scale_v4f w, mv;
        memcpy(&w, s + j, sizeof w);
        w = w * vs;
        if (m) {
            memcpy(&mv, m + j, sizeof mv);
            w = w + vk * mv;
        }
        memcpy(s + j, &w, sizeof w);
        const scale_v4i gt = w > lane; /* lanes where w is larger (false for NaN) */
        lane = (scale_v4f)(((scale_v4i)w & gt) | ((scale_v4i)lane & ~gt));
    }
    float max = -INFINITY;
    for (int l = 0; l < 4; l++)
        max = lane[l] > max ? lane[l] : max;
    for (; j < n; j++) {
        float w = s[j] * scale;
        if (m)
            w += slope * m[j];
        s[j] = w;
        max = w > max ? w : max;
    }
    return max;
}
