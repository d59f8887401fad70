/* reduce.c - SUM_ROWS: [n0, n1, n2, n3] -> [1, n1, n2, n3], each row summed.
 *
 * Sums accumulate in double (as ggml's ggml_float) and are stored as float.
 * Threads split rows; any strides.
 */
#include "cpu/ops/ops.h"

/* SUM_ROWS on this thread's rows. */
void lm_cpu_op_sum_rows(const struct lm_cpu_params *p, struct lm_tensor *dst)
{
    const struct lm_tensor *a = dst->src[0];
    const int64_t n = a->ne[0];
    const int64_t s0 = (int64_t)a->nb[0];
    for (struct lm_cpu_rows it = lm_cpu_rows(p, a); lm_cpu_rows_next(&it);) {
        const char *x = lm_cpu_row(a, &it);
        double sum = 0.0;
        for (int64_t i = 0; i < n; i++)
            sum += *(const float *)(x + i * s0);
        *(float *)lm_cpu_row(dst, &it) = (float)sum;
    }
}
