/* train.c - the training (gradient) ops: GET_ROWS_BACK, REPEAT_BACK,
 * RMS_NORM_BACK, SOFT_MAX_BACK, UNARY_BACK, CROSS_ENTROPY_LOSS and
 * CROSS_ENTROPY_LOSS_BACK (ROPE_BACK is rope.c's kernel with the sine negated).
 * Formulas are tensor.h's; docs/ops.md "Training ops".
 *
 * Determinism: no atomics and no sum whose order depends on timing. Each
 * output element is written by one thread, and every sum runs in a fixed
 * order: GET_ROWS_BACK adds dy columns in ascending n (threads own column
 * ranges of the result), REPEAT_BACK adds tiles in flat order in double
 * (threads own result rows), CROSS_ENTROPY_LOSS sums row losses in double per
 * thread, and thread 0 adds the per-thread partials in thread order after a
 * barrier. So a result is bit-identical run to run for a given thread count
 * (GET_ROWS_BACK, REPEAT_BACK and the row ops for any thread count).
 */
#include <math.h>
#include <string.h>

#include "cpu/ops/ops.h"

#define GELU_COEF_A 0.044715f
#define SQRT_2_OVER_PI 0.79788456080286535587989211986876f

/* ---- GET_ROWS_BACK ---- */

/* Thread ith's columns [*k0, *k1) of K, in whole cache lines of floats so
 * threads never write one line. */
static void split_cols(int64_t K, int ith, int nth, int64_t *k0, int64_t *k1)
{
    const int64_t per = LM_CPU_CACHE_LINE / (int64_t)sizeof(float);
    const int64_t nblk = (K + per - 1) / per;
    int64_t b0, b1;
    lm_cpu_split(nblk, ith, nth, &b0, &b1);
    *k0 = b0 * per < K ? b0 * per : K;
    *k1 = b1 * per < K ? b1 * per : K;
}

/* GET_ROWS_BACK: this thread's columns of every result row, zeroed, then the
 * dy columns added in ascending n. */
void lm_cpu_op_get_rows_back(const struct lm_cpu_params *p, struct lm_tensor *dst)
{
    const struct lm_tensor *dy = dst->src[0], *ids = dst->src[1];
    const int64_t K = dst->ne[0], R = dst->ne[1], N = dy->ne[1];
    int64_t k0, k1;
    split_cols(K, p->ith, p->nth, &k0, &k1);
    if (k0 >= k1)
        return;
    for (int64_t r = 0; r < R; r++)
        memset((float *)lm_cpu_elem(dst, k0, r, 0, 0), 0, (size_t)(k1 - k0) * sizeof(float));
    const int32_t *id = ids->data;
    const int64_t s0 = (int64_t)dy->nb[0];
    for (int64_t n = 0; n < N; n++) {
        const int32_t r = id[n];
        if (r < 0 || r >= R)
            continue;
        float *y = lm_cpu_elem(dst, 0, r, 0, 0);
        const char *x = lm_cpu_elem(dy, 0, n, 0, 0);
        if (s0 == (int64_t)sizeof(float)) {
            for (int64_t k = k0; k < k1; k++)
                y[k] += ((const float *)x)[k];
        } else {
            for (int64_t k = k0; k < k1; k++)
                y[k] += *(const float *)(x + k * s0);
        }
    }
}

/* ---- REPEAT_BACK ---- */

/* Scratch: one row of double accumulators per thread. */
size_t lm_cpu_work_repeat_back(const struct lm_tensor *dst, int nth, const struct lm_cpu_kernels *kern)
{
    (void)kern;
    return (size_t)nth * lm_cpu_pad((size_t)dst->ne[0] * sizeof(double));
}

/* REPEAT_BACK on this thread's result rows: the tiles in flat order, in double. */
void lm_cpu_op_repeat_back(const struct lm_cpu_params *p, struct lm_tensor *dst)
{
    const struct lm_tensor *a = dst->src[0];
    const int64_t n = dst->ne[0], na = a->ne[0];
    const int64_t s0 = (int64_t)a->nb[0];
    double *acc = lm_cpu_wslice(p, 0, (size_t)n * sizeof(double));
    for (struct lm_cpu_rows it = lm_cpu_rows(p, dst); lm_cpu_rows_next(&it);) {
        for (int64_t i = 0; i < n; i++)
            acc[i] = 0.0;
        for (int64_t i3 = it.i3; i3 < a->ne[3]; i3 += dst->ne[3])
            for (int64_t i2 = it.i2; i2 < a->ne[2]; i2 += dst->ne[2])
                for (int64_t i1 = it.i1; i1 < a->ne[1]; i1 += dst->ne[1]) {
                    const char *x = lm_cpu_elem(a, 0, i1, i2, i3);
                    for (int64_t i0 = 0; i0 < na; i0 += n)
                        for (int64_t j = 0; j < n; j++)
                            acc[j] += *(const float *)(x + (i0 + j) * s0);
                }
        float *y = lm_cpu_row(dst, &it);
        for (int64_t i = 0; i < n; i++)
            y[i] = (float)acc[i];
    }
}

/* ---- row ops of two sources ---- */

/* RMS_NORM_BACK on this thread's rows, in double (the two terms of dx cancel
 * where dy is nearly parallel to x, e.g. always for n = 1, so a float r would
 * leave only its rounding): r = 1/sqrt(sum(x^2)/n + eps),
 * dx = r dy - x (r^3 sum(dy x) / n), rounded once. */
void lm_cpu_op_rms_norm_back(const struct lm_cpu_params *p, struct lm_tensor *dst)
{
    const struct lm_tensor *xs = dst->src[0], *dys = dst->src[1];
    const double eps = lm_get_op_f32(dst, 0);
    const int64_t n = dst->ne[0];
    for (struct lm_cpu_rows it = lm_cpu_rows(p, dst); lm_cpu_rows_next(&it);) {
        const float *x = lm_cpu_row(xs, &it), *dy = lm_cpu_row(dys, &it);
        float *dx = lm_cpu_row(dst, &it);
        double sxx = 0.0, sxy = 0.0;
        for (int64_t i = 0; i < n; i++) {
            sxx += (double)x[i] * (double)x[i];
            sxy += (double)x[i] * (double)dy[i];
        }
        const double r = 1.0 / sqrt(sxx / (double)n + eps);
        const double c = r * r * r * (sxy / (double)n);
        for (int64_t i = 0; i < n; i++)
            dx[i] = (float)(r * (double)dy[i] - (double)x[i] * c);
    }
}

/* SOFT_MAX_BACK on this thread's rows, in double (dy - sum cancels where dy
 * is nearly constant): da = scale y (dy - sum(dy y)), rounded once. */
void lm_cpu_op_soft_max_back(const struct lm_cpu_params *p, struct lm_tensor *dst)
{
    const struct lm_tensor *dys = dst->src[0], *ys = dst->src[1];
    const double scale = lm_get_op_f32(dst, 0);
    const int64_t n = dst->ne[0];
    for (struct lm_cpu_rows it = lm_cpu_rows(p, dst); lm_cpu_rows_next(&it);) {
        const float *dy = lm_cpu_row(dys, &it), *y = lm_cpu_row(ys, &it);
        float *da = lm_cpu_row(dst, &it);
        double dot = 0.0;
        for (int64_t i = 0; i < n; i++)
            dot += (double)dy[i] * (double)y[i];
        for (int64_t i = 0; i < n; i++)
            da[i] = (float)(scale * (double)y[i] * ((double)dy[i] - dot));
    }
}

/* 1 + tanh(u) and 1 - tanh(u)^2 from e = exp(-2|u|), without the
 * cancellation of 1 + t and 1 - t * t as t -> -1 or |t| -> 1 (at u = -5 they
 * lose ~11 of float's 24 bits; the GELU derivative of one element at x ~ -4
 * read nmse 3.2e-8 against ref's double, LM_OPS_SEED=103):
 * 1 + t = 2 / (1 + e) for u >= 0, 2 e / (1 + e) below; 1 - t^2 = 4 e / (1 + e)^2. */
static void tanh_terms(float u, float *one_plus_t, float *sech2)
{
    const float e = expf(-2.0f * fabsf(u)), inv = 1.0f / (1.0f + e);
    *one_plus_t = u >= 0.0f ? 2.0f * inv : 2.0f * e * inv;
    *sech2 = 4.0f * e * inv * inv;
}

/* f'(x) of unary op u, in float. */
static float unary_deriv(enum lm_unary_op u, float x)
{
    switch (u) {
    case LM_UNARY_SILU: {
        const float s = 1.0f / (1.0f + expf(-x));
        return s * (1.0f + x * (1.0f - s));
    }
    case LM_UNARY_GELU: {
        const float u = SQRT_2_OVER_PI * x * (1.0f + GELU_COEF_A * x * x);
        const float du = SQRT_2_OVER_PI * (1.0f + 3.0f * GELU_COEF_A * x * x);
        float one_plus_t, sech2;
        tanh_terms(u, &one_plus_t, &sech2);
        return 0.5f * one_plus_t + 0.5f * x * sech2 * du;
    }
    case LM_UNARY_RELU:
        return x > 0.0f ? 1.0f : 0.0f;
    case LM_UNARY_NEG:
        return -1.0f;
    case LM_UNARY_TANH: {
        float one_plus_t, sech2;
        tanh_terms(x, &one_plus_t, &sech2);
        return sech2;
    }
    default:
        return 0.0f;
    }
}

/* UNARY_BACK on this thread's rows: dy * f'(x), scalar. */
void lm_cpu_op_unary_back(const struct lm_cpu_params *p, struct lm_tensor *dst)
{
    const struct lm_tensor *xs = dst->src[0], *dys = dst->src[1];
    const enum lm_unary_op u = (enum lm_unary_op)lm_get_op_i32(dst, 0);
    const int64_t n = dst->ne[0];
    for (struct lm_cpu_rows it = lm_cpu_rows(p, dst); lm_cpu_rows_next(&it);) {
        const float *x = lm_cpu_row(xs, &it), *dy = lm_cpu_row(dys, &it);
        float *dx = lm_cpu_row(dst, &it);
        for (int64_t i = 0; i < n; i++)
            dx[i] = dy[i] * unary_deriv(u, x[i]);
    }
}

/* ---- cross entropy ---- */

/* A thread's partial loss: the sum of its row losses and its valid rows. */
struct ce_partial {
    double sum;
    int64_t count;
};

/* Scratch: a row of exponentials per thread (CROSS_ENTROPY_LOSS also one
 * partial per thread after them). */
size_t lm_cpu_work_cross_entropy(const struct lm_tensor *dst, int nth, const struct lm_cpu_kernels *kern)
{
    (void)kern;
    const size_t rows = (size_t)nth * lm_cpu_pad((size_t)dst->src[0]->ne[0] * sizeof(float));
    return rows + (size_t)nth * lm_cpu_pad(sizeof(struct ce_partial));
}

static bool target_ok(int32_t t, int64_t V) { return t >= 0 && t < V; }

/* CROSS_ENTROPY_LOSS: each thread sums the losses of its rows in double
 * (logsumexp with the row max subtracted, exponentials and their sum by the
 * table's exp_sum); after a barrier thread 0 adds the partials in thread
 * order and writes the mean. */
void lm_cpu_op_cross_entropy_loss(const struct lm_cpu_params *p, struct lm_tensor *dst)
{
    const struct lm_tensor *lg = dst->src[0], *tg = dst->src[1];
    const int64_t V = lg->ne[0], N = lg->ne[1];
    const int32_t *target = tg->data;
    float *w = lm_cpu_wslice(p, 0, (size_t)V * sizeof(float));
    const size_t part_off = (size_t)p->nth * lm_cpu_pad((size_t)V * sizeof(float));
    struct ce_partial *mine = lm_cpu_wslice(p, part_off, sizeof(struct ce_partial));
    struct ce_partial acc = {0.0, 0};
    int64_t n0, n1;
    lm_cpu_split(N, p->ith, p->nth, &n0, &n1);
    for (int64_t n = n0; n < n1; n++) {
        if (!target_ok(target[n], V))
            continue;
        const float *x = lm_cpu_elem(lg, 0, n, 0, 0);
        float max = -INFINITY;
        for (int64_t i = 0; i < V; i++)
            max = x[i] > max ? x[i] : max;
        const double sum = p->kern->exp_sum(V, w, x, max);
        acc.sum += (double)max + log(sum) - (double)x[target[n]];
        acc.count++;
    }
    *mine = acc;
    lm_cpu_sync(p);
    if (p->ith != 0)
        return;
    double total = 0.0;
    int64_t count = 0;
    for (int t = 0; t < p->nth; t++) {
        const struct ce_partial *q =
            (const struct ce_partial *)((const char *)p->wdata + part_off + (size_t)t * lm_cpu_pad(sizeof *q));
        total += q->sum;
        count += q->count;
    }
    *(float *)dst->data = count ? (float)(total / (double)count) : 0.0f;
}

/* CROSS_ENTROPY_LOSS_BACK on this thread's rows: (softmax - onehot) * g with
 * g = dloss / n_valid (every thread counts the valid targets itself); the
 * target's entry is minus the other classes' probability. */
void lm_cpu_op_cross_entropy_loss_back(const struct lm_cpu_params *p, struct lm_tensor *dst)
{
    const struct lm_tensor *lg = dst->src[0], *tg = dst->src[1], *dl = dst->src[2];
    const int64_t V = lg->ne[0], N = lg->ne[1];
    const int32_t *target = tg->data;
    int64_t n_valid = 0;
    for (int64_t n = 0; n < N; n++)
        n_valid += target_ok(target[n], V);
    const float g = n_valid ? *(const float *)dl->data / (float)n_valid : 0.0f;
    float *w = lm_cpu_wslice(p, 0, (size_t)V * sizeof(float));
    int64_t n0, n1;
    lm_cpu_split(N, p->ith, p->nth, &n0, &n1);
    for (int64_t n = n0; n < n1; n++) {
        float *y = lm_cpu_elem(dst, 0, n, 0, 0);
        if (!target_ok(target[n], V)) {
            memset(y, 0, (size_t)V * sizeof(float));
            continue;
        }
        const float *x = lm_cpu_elem(lg, 0, n, 0, 0);
        float max = -INFINITY;
        for (int64_t i = 0; i < V; i++)
            max = x[i] > max ? x[i] : max;
        const double sum = p->kern->exp_sum(V, w, x, max);
        const float inv = (float)(1.0 / sum);
        /* the target's p - 1 as minus the others' share (in double): p - 1
         * in float cancels when p -> 1, where the others' sum is exact */
        double others = 0.0;
        for (int64_t i = 0; i < V; i++)
            others += i == target[n] ? 0.0 : (double)w[i];
        for (int64_t i = 0; i < V; i++)
            y[i] = (i == target[n] ? (float)(-others / sum) : w[i] * inv) * g;
    }
}
