/* exp_generic.c - softmax's exponentials (kernels.h lm_exp_sum_fn), the
 * reference: libm expf per element and a sequential double sum; and GELU
 * (lm_gelu_fn) by its tanh formula with libm tanhf; SiLU (lm_silu_fn) with
 * libm expf. */
#include <math.h>

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
