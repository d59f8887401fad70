/* ops_elementwise.c - ref ops that map elements (ADD MUL DIV SCALE SQR SQRT
 * CLAMP UNARY) and reduce rows (SUM_ROWS NORM RMS_NORM).
 *
 * Element ops compute each value in double from F32 operands and round once to
 * F32; for + - * / and sqrt that equals the correctly rounded F32 operation.
 * The destination may alias src[0] with the same layout (in-place ADD/MUL):
 * each element is read before it is written.
 */
#include <math.h>
#include <stdlib.h>

#include "ref/ref_internal.h"

/* ADD, MUL, DIV: dst = a op b, b broadcast over a. */
lm_status lm_ref_op_binary(struct lm_tensor *dst)
{
    const struct lm_tensor *a = dst->src[0], *b = dst->src[1];
    for (int64_t i3 = 0; i3 < dst->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < dst->ne[2]; i2++)
            for (int64_t i1 = 0; i1 < dst->ne[1]; i1++)
                for (int64_t i0 = 0; i0 < dst->ne[0]; i0++) {
                    double x = lm_ref_get(a, i0, i1, i2, i3);
                    double y = lm_ref_get(b, i0 % b->ne[0], i1 % b->ne[1], i2 % b->ne[2], i3 % b->ne[3]);
                    double r;
                    switch (dst->op) {
                    case LM_OP_ADD: r = x + y; break;
                    case LM_OP_MUL: r = x * y; break;
                    default: r = x / y; break; /* DIV */
                    }
                    lm_ref_set(dst, i0, i1, i2, i3, r);
                }
    return LM_OK;
}

static double unary_value(enum lm_unary_op op, double x)
{
    switch (op) {
    case LM_UNARY_SILU: return x / (1.0 + exp(-x));
    case LM_UNARY_GELU: {
        const double c = sqrt(2.0 / M_PI);
        return 0.5 * x * (1.0 + tanh(c * (x + 0.044715 * x * x * x)));
    }
    case LM_UNARY_RELU: return x > 0.0 ? x : 0.0;
    case LM_UNARY_NEG: return -x;
    case LM_UNARY_TANH: return tanh(x);
    default: return NAN;
    }
}

/* The value of a one-operand element op (SCALE, SQR, SQRT, CLAMP, UNARY) at x. */
static double element_value(const struct lm_tensor *dst, double x)
{
    switch (dst->op) {
    case LM_OP_SCALE: return x * (double)lm_get_op_f32(dst, 0);
    case LM_OP_SQR: return x * x;
    case LM_OP_SQRT: return sqrt(x);
    case LM_OP_CLAMP: {
        double lo = lm_get_op_f32(dst, 0), hi = lm_get_op_f32(dst, 1);
        return x < lo ? lo : x > hi ? hi : x;
    }
    case LM_OP_UNARY: return unary_value((enum lm_unary_op)lm_get_op_i32(dst, 0), x);
    default: return NAN;
    }
}

/* SCALE, SQR, SQRT, CLAMP, UNARY: dst = f(a) element by element. */
lm_status lm_ref_op_unary(struct lm_tensor *dst)
{
    const struct lm_tensor *a = dst->src[0];
    for (int64_t i3 = 0; i3 < dst->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < dst->ne[2]; i2++)
            for (int64_t i1 = 0; i1 < dst->ne[1]; i1++)
                for (int64_t i0 = 0; i0 < dst->ne[0]; i0++)
                    lm_ref_set(dst, i0, i1, i2, i3, element_value(dst, lm_ref_get(a, i0, i1, i2, i3)));
    return LM_OK;
}

/* SUM_ROWS: dst[0, i1, i2, i3] = sum of row (i1, i2, i3), in double. */
lm_status lm_ref_op_sum_rows(struct lm_tensor *dst)
{
    const struct lm_tensor *a = dst->src[0];
    for (int64_t i3 = 0; i3 < a->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < a->ne[2]; i2++)
            for (int64_t i1 = 0; i1 < a->ne[1]; i1++) {
                double sum = 0.0;
                for (int64_t i0 = 0; i0 < a->ne[0]; i0++)
                    sum += lm_ref_get(a, i0, i1, i2, i3);
                lm_ref_set(dst, 0, i1, i2, i3, sum);
            }
    return LM_OK;
}

/* One row: NORM (x - mean) / sqrt(var + eps), or RMS_NORM x / sqrt(mean(x^2) + eps). */
static void norm_row(double *x, int64_t n, bool rms, double eps)
{
    double mean = 0.0;
    if (!rms) {
        for (int64_t i = 0; i < n; i++)
            mean += x[i];
        mean /= (double)n;
    }
    double sq = 0.0;
    for (int64_t i = 0; i < n; i++)
        sq += (x[i] - mean) * (x[i] - mean);
    double inv = 1.0 / sqrt(sq / (double)n + eps);
    for (int64_t i = 0; i < n; i++)
        x[i] = (x[i] - mean) * inv;
}

/* NORM and RMS_NORM, row by row through a double scratch row. */
lm_status lm_ref_op_norm(struct lm_tensor *dst)
{
    const struct lm_tensor *a = dst->src[0];
    const int64_t n = a->ne[0];
    const bool rms = dst->op == LM_OP_RMS_NORM;
    const double eps = lm_get_op_f32(dst, 0);
    double *row = ref_scratch(n, sizeof *row);
    if (!row)
        return LM_ERR_NOMEM;
    for (int64_t i3 = 0; i3 < a->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < a->ne[2]; i2++)
            for (int64_t i1 = 0; i1 < a->ne[1]; i1++) {
                for (int64_t i0 = 0; i0 < n; i0++)
                    row[i0] = lm_ref_get(a, i0, i1, i2, i3);
                norm_row(row, n, rms, eps);
                for (int64_t i0 = 0; i0 < n; i0++)
                    lm_ref_set(dst, i0, i1, i2, i3, row[i0]);
            }
    free(row);
    return LM_OK;
}
