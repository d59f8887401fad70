/* ops_train.c - ref training (gradient) ops: GET_ROWS_BACK, REPEAT_BACK,
 * RMS_NORM_BACK, SOFT_MAX_BACK, UNARY_BACK, CROSS_ENTROPY_LOSS and
 * CROSS_ENTROPY_LOSS_BACK (ROPE_BACK is ops_attention.c's ROPE with the sine
 * negated).
 *
 * Each value is computed in double from the F32 inputs (sums in the order
 * tensor.h states) and rounded once. Row ops gather their source rows into
 * double scratch rows before writing the destination row.
 */
#include <math.h>
#include <stdlib.h>

#include "ref/ref_internal.h"

/* GET_ROWS_BACK: out[:, r] = sum over n ascending with ids[n] == r of dy[:, n]. */
lm_status lm_ref_op_get_rows_back(struct lm_tensor *dst)
{
    const struct lm_tensor *dy = dst->src[0], *ids = dst->src[1];
    const int64_t K = dst->ne[0], R = dst->ne[1], N = dy->ne[1];
    double *acc = ref_scratch(K, sizeof *acc);
    if (!acc)
        return LM_ERR_NOMEM;
    for (int64_t r = 0; r < R; r++) {
        for (int64_t k = 0; k < K; k++)
            acc[k] = 0.0;
        for (int64_t n = 0; n < N; n++) {
            if ((int64_t)lm_ref_get(ids, n, 0, 0, 0) != r)
                continue;
            for (int64_t k = 0; k < K; k++)
                acc[k] += lm_ref_get(dy, k, n, 0, 0);
        }
        for (int64_t k = 0; k < K; k++)
            lm_ref_set(dst, k, r, 0, 0, acc[k]);
    }
    free(acc);
    return LM_OK;
}

/* REPEAT_BACK: out[j] = sum of a[i] over i with i_d % out.ne[d] == j_d, in flat order of i. */
lm_status lm_ref_op_repeat_back(struct lm_tensor *dst)
{
    const struct lm_tensor *a = dst->src[0];
    const int64_t n = lm_nelements(dst);
    double *acc = ref_scratch(n, sizeof *acc);
    if (!acc)
        return LM_ERR_NOMEM;
    for (int64_t j = 0; j < n; j++)
        acc[j] = 0.0;
    for (int64_t i3 = 0; i3 < a->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < a->ne[2]; i2++)
            for (int64_t i1 = 0; i1 < a->ne[1]; i1++)
                for (int64_t i0 = 0; i0 < a->ne[0]; i0++) {
                    const int64_t j = i0 % dst->ne[0] +
                                      dst->ne[0] * (i1 % dst->ne[1] +
                                                    dst->ne[1] * (i2 % dst->ne[2] + dst->ne[2] * (i3 % dst->ne[3])));
                    acc[j] += lm_ref_get(a, i0, i1, i2, i3);
                }
    int64_t idx[4];
    for (int64_t j = 0; j < n; j++) {
        lm_ref_unflatten(dst->ne, j, idx);
        lm_ref_set(dst, idx[0], idx[1], idx[2], idx[3], acc[j]);
    }
    free(acc);
    return LM_OK;
}

/* Row op of two sources: fn(row of src[0], row of src[1], n, out, dst) per row. */
typedef void (*pair_row_fn)(const double *a, const double *b, int64_t n, double *out, const struct lm_tensor *dst);

static lm_status pair_rows(struct lm_tensor *dst, pair_row_fn fn)
{
    const struct lm_tensor *a = dst->src[0], *b = dst->src[1];
    const int64_t n = dst->ne[0];
    double *ra = ref_scratch(3 * n, sizeof *ra);
    if (!ra)
        return LM_ERR_NOMEM;
    double *rb = ra + n, *out = rb + n;
    for (int64_t i3 = 0; i3 < dst->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < dst->ne[2]; i2++)
            for (int64_t i1 = 0; i1 < dst->ne[1]; i1++) {
                for (int64_t i0 = 0; i0 < n; i0++) {
                    ra[i0] = lm_ref_get(a, i0, i1, i2, i3);
                    rb[i0] = lm_ref_get(b, i0, i1, i2, i3);
                }
                fn(ra, rb, n, out, dst);
                for (int64_t i0 = 0; i0 < n; i0++)
                    lm_ref_set(dst, i0, i1, i2, i3, out[i0]);
            }
    free(ra);
    return LM_OK;
}

/* r = 1/sqrt(sum(x^2)/n + eps); dx = r dy - x r^3 sum(dy x) / n. */
static void rms_norm_back_row(const double *x, const double *dy, int64_t n, double *dx, const struct lm_tensor *dst)
{
    const double eps = lm_get_op_f32(dst, 0);
    double sxx = 0.0, sxy = 0.0;
    for (int64_t i = 0; i < n; i++) {
        sxx += x[i] * x[i];
        sxy += x[i] * dy[i];
    }
    const double r = 1.0 / sqrt(sxx / (double)n + eps);
    for (int64_t i = 0; i < n; i++)
        dx[i] = r * dy[i] - x[i] * r * r * r * sxy / (double)n;
}

lm_status lm_ref_op_rms_norm_back(struct lm_tensor *dst) { return pair_rows(dst, rms_norm_back_row); }

/* da = scale y (dy - sum(dy y)). */
static void soft_max_back_row(const double *dy, const double *y, int64_t n, double *da, const struct lm_tensor *dst)
{
    const double scale = lm_get_op_f32(dst, 0);
    double dot = 0.0;
    for (int64_t i = 0; i < n; i++)
        dot += dy[i] * y[i];
    for (int64_t i = 0; i < n; i++)
        da[i] = scale * y[i] * (dy[i] - dot);
}

lm_status lm_ref_op_soft_max_back(struct lm_tensor *dst) { return pair_rows(dst, soft_max_back_row); }

/* f'(x) of unary op u (tensor.h's forms). */
static double unary_deriv(enum lm_unary_op u, double x)
{
    switch (u) {
    case LM_UNARY_SILU: {
        const double s = 1.0 / (1.0 + exp(-x));
        return s * (1.0 + x * (1.0 - s));
    }
    case LM_UNARY_GELU: {
        const double c = sqrt(2.0 / M_PI), a = 0.044715;
        const double t = tanh(c * (x + a * x * x * x));
        return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * c * (1.0 + 3.0 * a * x * x);
    }
    case LM_UNARY_RELU: return x > 0.0 ? 1.0 : 0.0;
    case LM_UNARY_NEG: return -1.0;
    case LM_UNARY_TANH: {
        const double t = tanh(x);
        return 1.0 - t * t;
    }
    default: return NAN;
    }
}

static void unary_back_row(const double *x, const double *dy, int64_t n, double *dx, const struct lm_tensor *dst)
{
    const enum lm_unary_op u = (enum lm_unary_op)lm_get_op_i32(dst, 0);
    for (int64_t i = 0; i < n; i++)
        dx[i] = dy[i] * unary_deriv(u, x[i]);
}

lm_status lm_ref_op_unary_back(struct lm_tensor *dst) { return pair_rows(dst, unary_back_row); }

/* CROSS_ENTROPY_LOSS: mean over valid rows of logsumexp(x) - x[target];
 * CROSS_ENTROPY_LOSS_BACK: (softmax(x) - onehot(target)) * dloss / n_valid
 * per valid row, zero rows elsewhere. */
lm_status lm_ref_op_cross_entropy_loss(struct lm_tensor *dst)
{
    const struct lm_tensor *lg = dst->src[0], *tg = dst->src[1];
    const bool back = dst->op == LM_OP_CROSS_ENTROPY_LOSS_BACK;
    const int64_t V = lg->ne[0], N = lg->ne[1];
    int64_t n_valid = 0;
    for (int64_t n = 0; n < N; n++) {
        const double t = lm_ref_get(tg, n, 0, 0, 0);
        n_valid += t >= 0 && t < (double)V;
    }
    const double g = back && n_valid ? lm_ref_get(dst->src[2], 0, 0, 0, 0) / (double)n_valid : 0.0;
    double *e = ref_scratch(V, sizeof *e);
    if (!e)
        return LM_ERR_NOMEM;
    double total = 0.0;
    for (int64_t n = 0; n < N; n++) {
        const double tv = lm_ref_get(tg, n, 0, 0, 0);
        const bool valid = tv >= 0 && tv < (double)V;
        if (!valid) {
            for (int64_t i = 0; back && i < V; i++)
                lm_ref_set(dst, i, n, 0, 0, 0.0);
            continue;
        }
        const int64_t t = (int64_t)tv;
        double max = -INFINITY, sum = 0.0;
        for (int64_t i = 0; i < V; i++) {
            e[i] = lm_ref_get(lg, i, n, 0, 0);
            max = e[i] > max ? e[i] : max;
        }
        const double xt = e[t];
        for (int64_t i = 0; i < V; i++) {
            e[i] = exp(e[i] - max);
            sum += e[i];
        }
        if (back) {
            /* the target's p - 1 as minus the others' share: p - 1 itself
             * cancels when p -> 1 (confident logits), the others' sum does not */
            double others = 0.0;
            for (int64_t i = 0; i < V; i++)
                others += i == t ? 0.0 : e[i];
            for (int64_t i = 0; i < V; i++)
                lm_ref_set(dst, i, n, 0, 0, (i == t ? -others / sum : e[i] / sum) * g);
        } else {
            total += max + log(sum) - xt;
        }
    }
    if (!back)
        lm_ref_set(dst, 0, 0, 0, 0, n_valid ? total / (double)n_valid : 0.0);
    free(e);
    return LM_OK;
}
