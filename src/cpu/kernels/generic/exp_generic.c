/* exp_generic.c - softmax's exponentials (kernels.h lm_exp_sum_fn), the
 * reference: libm expf per element and a sequential double sum. */
#include <math.h>

#include "cpu/kernels/kernels.h"

/* Contract: kernels.h. */
double exp_sum_generic(int64_t n, float *y, const float *x, float max)
{
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) {
        y[i] = expf(x[i] - max);
        sum += (double)y[i];
    }
    return sum;
}
