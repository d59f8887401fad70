/* ops_attention.c - ref DIAG_MASK_INF, SOFT_MAX, ATTN, ROPE (and ROPE_BACK) and ARGSORT.
 *
 * Row ops gather each source row into a double scratch row before writing the
 * destination row (safe for an in-place destination). Softmax, attention and
 * RoPE are computed in double from the F32 inputs; the formulas are those
 * documented in core/tensor.h and docs/ops.md (RoPE/YaRN as ggml's rope_yarn
 * defines them). ATTN rounds q and the probabilities to k's and v's types
 * exactly where the contract says (q of a Q8_0 k: quantized in blocks by
 * quant/'s encoder), so that it and the CPU differ only by float summation
 * order.
 */
#include <math.h>
#include <stdlib.h>

#include "core/fp16.h"
#include "quant/quant.h"
#include "ref/ref_internal.h"

/* DIAG_MASK_INF: -inf where i0 > n_past + i1, else a. */
lm_status lm_ref_op_diag_mask_inf(struct lm_tensor *dst)
{
    const struct lm_tensor *a = dst->src[0];
    const int64_t n_past = lm_get_op_i32(dst, 0);
    for (int64_t i3 = 0; i3 < dst->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < dst->ne[2]; i2++)
            for (int64_t i1 = 0; i1 < dst->ne[1]; i1++)
                for (int64_t i0 = 0; i0 < dst->ne[0]; i0++)
                    lm_ref_set(dst, i0, i1, i2, i3, i0 > n_past + i1 ? -INFINITY : lm_ref_get(a, i0, i1, i2, i3));
    return LM_OK;
}

/* The ALiBi slope of head h of n_head (1 when max_bias is 0). */
static double alibi_slope(double max_bias, int64_t n_head, int64_t h)
{
    if (max_bias <= 0.0)
        return 1.0;
    int64_t n = 1; /* 2^floor(log2(n_head)) */
    while (n * 2 <= n_head)
        n *= 2;
    const double m0 = pow(2.0, -max_bias / (double)n);
    const double m1 = pow(2.0, -max_bias / 2.0 / (double)n);
    return h < n ? pow(m0, (double)(h + 1)) : pow(m1, (double)(2 * (h - n) + 1));
}

/* SOFT_MAX: per row softmax(a * scale + slope_h * mask[:, i1]). */
lm_status lm_ref_op_soft_max(struct lm_tensor *dst)
{
    const struct lm_tensor *a = dst->src[0], *mask = dst->src[1];
    const double scale = lm_get_op_f32(dst, 0), max_bias = lm_get_op_f32(dst, 1);
    const int64_t n = a->ne[0];
    double *row = ref_scratch(n, sizeof *row);
    if (!row)
        return LM_ERR_NOMEM;
    for (int64_t i3 = 0; i3 < a->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < a->ne[2]; i2++) {
            const double slope = alibi_slope(max_bias, a->ne[2], i2);
            for (int64_t i1 = 0; i1 < a->ne[1]; i1++) {
                double max = -INFINITY, sum = 0.0;
                for (int64_t i0 = 0; i0 < n; i0++) {
                    row[i0] = lm_ref_get(a, i0, i1, i2, i3) * scale;
                    if (mask)
                        row[i0] += slope * lm_ref_get(mask, i0, i1, 0, 0);
                    max = row[i0] > max ? row[i0] : max;
                }
                for (int64_t i0 = 0; i0 < n; i0++) {
                    row[i0] = exp(row[i0] - max);
                    sum += row[i0];
                }
                for (int64_t i0 = 0; i0 < n; i0++)
                    lm_ref_set(dst, i0, i1, i2, i3, row[i0] / sum);
            }
        }
    free(row);
    return LM_OK;
}

/* ---- ATTN ---- */

/* x rounded to type t (F16, BF16; F32: to float), as MUL_MAT rounds its
 * activations to a float weight type's dot type. */
static double round_to(enum lm_type t, double x)
{
    const float f = (float)x;
    switch (t) {
    case LM_TYPE_F16: return lm_fp16_to_fp32(lm_fp32_to_fp16(f));
    case LM_TYPE_BF16: return lm_bf16_to_fp32(lm_fp32_to_bf16(f));
    default: return f;
    }
}

/* q's row rounded as the dot with k's rows sees it: through k's type (a
 * Q8_0 K: the row quantized in blocks by quant/'s encoder and decoded).
 * f (d floats) is scratch. */
static lm_status round_q(const struct lm_tensor *q, enum lm_type kt, int64_t i, int64_t h, double *qr, float *f)
{
    const int64_t d = q->ne[0];
    if (lm_type_blck(kt) == 1) {
        for (int64_t c = 0; c < d; c++)
            qr[c] = round_to(kt, lm_ref_get(q, c, i, h, 0));
        return LM_OK;
    }
    void *blocks = ref_scratch((int64_t)lm_row_size(kt, d), 1);
    if (!blocks)
        return LM_ERR_NOMEM;
    for (int64_t c = 0; c < d; c++)
        f[c] = (float)lm_ref_get(q, c, i, h, 0);
    lm_quant_traits(kt)->from_float(f, blocks, d);
    lm_quant_traits(kt)->to_float(blocks, f, d);
    for (int64_t c = 0; c < d; c++)
        qr[c] = f[c];
    free(blocks);
    return LM_OK;
}

/* out[:, h, i] = sum_j p[j] v[:, j, g] over a V of rows per cell (decoded
 * rows for a quantized one); hidden cells have p[j] = 0 and are skipped. */
static lm_status attn_rows_pv(struct lm_tensor *dst, int64_t i, int64_t h, int64_t g, const double *p,
                              int64_t n_visible)
{
    const struct lm_tensor *v = dst->src[2];
    const int64_t d_v = v->ne[0], n_kv = v->ne[1];
    const bool quant = lm_type_blck(v->type) > 1;
    double *acc = calloc((size_t)d_v, sizeof(double));
    float *row = ref_scratch(d_v, sizeof(float));
    lm_status st = !acc || !row ? LM_ERR_NOMEM : LM_OK;
    for (int64_t j = 0; !st && n_visible > 0 && j < n_kv; j++) {
        if (p[j] == 0.0)
            continue;
        if (quant && (st = lm_ref_get_row(v, j, g, 0, row)) != LM_OK)
            break;
        for (int64_t c = 0; c < d_v; c++)
            acc[c] += (quant ? (double)row[c] : lm_ref_get(v, c, j, g, 0)) * p[j];
    }
    for (int64_t c = 0; c < d_v && !st; c++)
        lm_ref_set(dst, c, h, i, 0, acc[c]);
    free(acc);
    free(row);
    return st;
}

/* One (query i, head h) of ATTN: out[:, h, i]. qr (d), s (n_kv) and kr (d
 * floats: a decoded row of a quantized k) are scratch. */
static lm_status attn_row(struct lm_tensor *dst, int64_t i, int64_t h, double *qr, double *s, float *kr)
{
    const struct lm_tensor *q = dst->src[0], *k = dst->src[1], *v = dst->src[2], *mask = dst->src[3];
    const double scale = lm_get_op_f32(dst, 0);
    const double slope = alibi_slope(lm_get_op_f32(dst, 1), q->ne[2], h);
    const int64_t d = q->ne[0], n_kv = k->ne[1], g = h / (q->ne[2] / k->ne[2]);
    const bool kq = lm_type_blck(k->type) > 1;
    lm_status st = round_q(q, k->type, i, h, qr, kr);
    double max = -INFINITY, sum = 0.0;
    int64_t n_visible = 0;
    for (int64_t j = 0; j < n_kv && !st; j++) {
        const double m = mask ? lm_ref_get(mask, j, i, 0, 0) : 0.0;
        s[j] = -INFINITY;
        if (m == -INFINITY)
            continue;
        double dot = 0.0;
        if (kq && (st = lm_ref_get_row(k, j, g, 0, kr)) != LM_OK)
            break;
        for (int64_t c = 0; c < d; c++)
            dot += (kq ? (double)kr[c] : lm_ref_get(k, c, j, g, 0)) * qr[c];
        s[j] = dot * scale + slope * m;
        max = s[j] > max ? s[j] : max;
        n_visible++;
    }
    for (int64_t j = 0; j < n_kv; j++) {
        s[j] = s[j] == -INFINITY ? 0.0 : exp(s[j] - max);
        sum += s[j];
    }
    const bool v_rows = lm_get_op_i32(dst, 2) != 0; /* v [d_v, n_kv, n_head_kv]: p stays float */
    for (int64_t j = 0; j < n_kv; j++)
        s[j] = v_rows ? (float)(s[j] / sum) : round_to(v->type, s[j] / sum);
    if (v_rows)
        return st ? st : attn_rows_pv(dst, i, h, g, s, n_visible);
    for (int64_t c = 0; c < v->ne[1]; c++) {
        double acc = 0.0;
        for (int64_t j = 0; n_visible > 0 && j < n_kv; j++)
            acc += lm_ref_get(v, j, c, g, 0) * s[j];
        lm_ref_set(dst, c, h, i, 0, acc);
    }
    return st;
}

/* ATTN: softmax(round(q) . k * scale + slope * mask) . v per query and head. */
lm_status lm_ref_op_attn(struct lm_tensor *dst)
{
    const struct lm_tensor *q = dst->src[0], *k = dst->src[1];
    double *qr = ref_scratch(q->ne[0], sizeof(double)), *s = ref_scratch(k->ne[1], sizeof(double));
    float *kr = ref_scratch(q->ne[0], sizeof(float));
    lm_status st = !qr || !s || !kr ? LM_ERR_NOMEM : LM_OK;
    for (int64_t i = 0; i < q->ne[1] && !st; i++)
        for (int64_t h = 0; h < q->ne[2] && !st; h++)
            st = attn_row(dst, i, h, qr, s, kr);
    free(qr);
    free(s);
    free(kr);
    return st;
}

/* ---- RoPE ---- */

struct rope_ctx {
    int n_dims, mode;
    double freq_base, freq_scale, ext_factor, attn_factor;
    float corr[2]; /* YaRN correction dims: the pair range where the ramp runs */
    bool back;     /* ROPE_BACK: the transpose, each pair rotated by -theta */
};

/* ggml_rope_yarn_corr_dim: the pair index whose wavelength fits n_rot times
 * into n_ctx_orig. Computed in float as ggml does, because floor/ceil of it
 * are discontinuous and must land on the same integers. */
static float corr_dim(int n_dims, int n_ctx_orig, float n_rot, float base)
{
    return (float)n_dims * logf((float)n_ctx_orig / (n_rot * 2.0f * (float)M_PI)) / (2.0f * logf(base));
}

static void rope_setup(const struct lm_tensor *dst, struct rope_ctx *rc)
{
    rc->n_dims = lm_get_op_i32(dst, 0);
    rc->mode = lm_get_op_i32(dst, 1);
    const int n_ctx_orig = lm_get_op_i32(dst, 2);
    const float base = lm_get_op_f32(dst, 3);
    rc->freq_base = base;
    rc->freq_scale = lm_get_op_f32(dst, 4);
    rc->ext_factor = lm_get_op_f32(dst, 5);
    rc->attn_factor = lm_get_op_f32(dst, 6);
    const float beta_fast = lm_get_op_f32(dst, 7), beta_slow = lm_get_op_f32(dst, 8);
    const float start = floorf(corr_dim(rc->n_dims, n_ctx_orig, beta_fast, base));
    const float end = ceilf(corr_dim(rc->n_dims, n_ctx_orig, beta_slow, base));
    rc->corr[0] = start > 0.0f ? start : 0.0f;
    rc->corr[1] = end < (float)(rc->n_dims - 1) ? end : (float)(rc->n_dims - 1);
    rc->back = dst->op == LM_OP_ROPE_BACK;
}

/* cos and sin of the angle of pair i (elements 2i, 2i+1 before any mode
 * mapping) at position p, both times the magnitude scale (ggml's rope_yarn). */
static void rope_angle(const struct rope_ctx *rc, double p, int i, double *c, double *s)
{
    const double theta_extrap = p * pow(rc->freq_base, -2.0 * i / rc->n_dims);
    const double theta_interp = rc->freq_scale * theta_extrap;
    double theta = theta_interp, mscale = rc->attn_factor;
    if (rc->ext_factor != 0.0) {
        double denom = (double)rc->corr[1] - rc->corr[0];
        double y = (i - (double)rc->corr[0]) / (denom > 0.001 ? denom : 0.001);
        double ramp = 1.0 - (y < 0.0 ? 0.0 : y > 1.0 ? 1.0 : y);
        double mix = ramp * rc->ext_factor;
        theta = theta_interp * (1.0 - mix) + theta_extrap * mix;
        mscale *= 1.0 + 0.1 * log(1.0 / rc->freq_scale);
    }
    *c = cos(theta) * mscale;
    *s = (rc->back ? -sin(theta) : sin(theta)) * mscale;
}

/* Rotate the first n_dims of row x (in place) for position p. */
static void rope_row(const struct rope_ctx *rc, double p, double *x)
{
    for (int i = 0; i < rc->n_dims / 2; i++) {
        const int j0 = rc->mode == LM_ROPE_NEOX ? i : 2 * i;
        const int j1 = rc->mode == LM_ROPE_NEOX ? i + rc->n_dims / 2 : 2 * i + 1;
        double c, s;
        rope_angle(rc, p, i, &c, &s);
        const double x0 = x[j0], x1 = x[j1];
        x[j0] = x0 * c - x1 * s;
        x[j1] = x0 * s + x1 * c;
    }
}

/* ROPE: rotate the first n_dims of every row by its token's position;
 * ROPE_BACK: the same by minus that angle. */
lm_status lm_ref_op_rope(struct lm_tensor *dst)
{
    const struct lm_tensor *a = dst->src[0], *pos = dst->src[1];
    struct rope_ctx rc;
    rope_setup(dst, &rc);
    const int64_t n = a->ne[0];
    double *row = ref_scratch(n, sizeof *row);
    if (!row)
        return LM_ERR_NOMEM;
    for (int64_t i3 = 0; i3 < a->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < a->ne[2]; i2++) {
            const double p = lm_ref_get(pos, i2, 0, 0, 0);
            for (int64_t i1 = 0; i1 < a->ne[1]; i1++) {
                for (int64_t i0 = 0; i0 < n; i0++)
                    row[i0] = lm_ref_get(a, i0, i1, i2, i3);
                rope_row(&rc, p, row);
                for (int64_t i0 = 0; i0 < n; i0++)
                    lm_ref_set(dst, i0, i1, i2, i3, row[i0]);
            }
        }
    free(row);
    return LM_OK;
}

/* ---- ARGSORT ---- */

struct keyed {
    double v;
    int64_t i;
    int desc;
};

/* Order by value (NaN after every number ascending, before them descending),
 * then by index: a total order, so qsort's result is the stable sort. */
static int cmp_keyed(const void *pa, const void *pb)
{
    const struct keyed *a = pa, *b = pb;
    int c = 0;
    if (isnan(a->v) || isnan(b->v))
        c = isnan(a->v) - isnan(b->v);
    else
        c = (a->v > b->v) - (a->v < b->v);
    if (a->desc)
        c = -c;
    if (c == 0)
        c = (a->i > b->i) - (a->i < b->i);
    return c;
}

/* ARGSORT: per row the I32 indices of a stable sort (ASC or DESC). */
lm_status lm_ref_op_argsort(struct lm_tensor *dst)
{
    const struct lm_tensor *a = dst->src[0];
    const int desc = lm_get_op_i32(dst, 0) == LM_SORT_DESC;
    const int64_t n = a->ne[0];
    struct keyed *row = ref_scratch(n, sizeof *row);
    if (!row)
        return LM_ERR_NOMEM;
    for (int64_t i3 = 0; i3 < a->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < a->ne[2]; i2++)
            for (int64_t i1 = 0; i1 < a->ne[1]; i1++) {
                for (int64_t i0 = 0; i0 < n; i0++)
                    row[i0] = (struct keyed){lm_ref_get(a, i0, i1, i2, i3), i0, desc};
                qsort(row, (size_t)n, sizeof *row, cmp_keyed);
                for (int64_t i0 = 0; i0 < n; i0++)
                    lm_ref_set(dst, i0, i1, i2, i3, (double)row[i0].i);
            }
    free(row);
    return LM_OK;
}
