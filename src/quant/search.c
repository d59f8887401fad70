/* search.c - the scale searches behind the K-quants and the imatrix encoders.
 *
 * These mirror ggml's make_qx_quants, make_q3_quants, make_qkx2_quants,
 * make_qkx3_quants and make_qp_quants (ggml-quants.c, facts only): same
 * candidate scales, same accumulation order, same float expressions (each
 * product is evaluated left to right in single precision, no fused
 * multiply-add), because the blocks they produce must match llama.cpp's bytes.
 * Where ggml changed after the seed (b1892), the modern behaviour is used:
 * groups with max |x| < 1e-15 are all-zero and an empty fit gives scale 0.
 *
 * Workload: a few hundred flops per element; called once per sub-block.
 */
#include <math.h>

#include "quant/internal.h"

#define GROUP_MAX_EPS 1e-15f

/* The error weight of element x for make_qx's rmse_type (qw NULL). */
static inline float qx_weight(int rmse_type, float x)
{
    switch (rmse_type) {
    case 1:
        return x * x;
    case 2:
        return 1;
    case 3:
        return fabsf(x);
    default:
        return sqrtf(fabsf(x));
    }
}

/* Sums sum(w x l) and sum(w l l) of rounding x*iscale, clamped to [-nmax, nmax-1];
 * when L is given, also stores l + nmax. */
static void qx_fit(int n, int nmax, const float *x, float iscale, int rmse_type, const float *qw, int8_t *L,
                   float *sumlx_out, float *suml2_out)
{
    float sumlx = 0;
    float suml2 = 0;
    for (int i = 0; i < n; ++i) {
        int l = lm_quant_nearest_int(iscale * x[i]);
        l = lm_quant_imax(-nmax, lm_quant_imin(nmax - 1, l));
        if (L)
            L[i] = (int8_t)(l + nmax);
        float w = qw ? qw[i] : qx_weight(rmse_type, x[i]);
        sumlx += w * x[i] * l;
        suml2 += w * l * l;
    }
    *sumlx_out = sumlx;
    *suml2_out = suml2;
}

static void qx_round(int n, int nmax, const float *x, float iscale, int8_t *L)
{
    for (int i = 0; i < n; ++i) {
        int l = lm_quant_nearest_int(iscale * x[i]);
        L[i] = (int8_t)(nmax + lm_quant_imax(-nmax, lm_quant_imin(nmax - 1, l)));
    }
}

float lm_quant_make_qx(int n, int nmax, const float *x, int8_t *L, int rmse_type, const float *qw)
{
    float amax;
    const float max = lm_quant_signed_absmax(n, x, &amax);
    if (amax < GROUP_MAX_EPS) { /* all zero (and all NaN) */
        memset(L, 0, (size_t)n);
        return 0.f;
    }
    float iscale = -nmax / max;
    if (rmse_type == 0) {
        qx_round(n, nmax, x, iscale, L);
        return 1 / iscale;
    }
    bool return_early = false;
    if (rmse_type < 0) {
        rmse_type = -rmse_type;
        return_early = true;
    }
    float sumlx, suml2;
    qx_fit(n, nmax, x, iscale, rmse_type, qw, L, &sumlx, &suml2);
    float scale = suml2 ? sumlx / suml2 : 0.0f;
    if (return_early)
        return suml2 > 0 ? 0.5f * (scale + 1 / iscale) : 1 / iscale;
    float best = scale * sumlx;
    for (int is = -9; is <= 9; ++is) {
        if (is == 0)
            continue;
        iscale = -(nmax + 0.1f * is) / max;
        qx_fit(n, nmax, x, iscale, rmse_type, qw, NULL, &sumlx, &suml2);
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            qx_round(n, nmax, x, iscale, L);
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

/* One coordinate-descent sweep of make_q3 over signed levels L; returns the
 * number of changed levels and updates the running sums. */
static int q3_sweep(int n, int nmax, const float *x, int8_t *L, float *sumlx, float *suml2)
{
    int n_changed = 0;
    for (int i = 0; i < n; ++i) {
        float w = x[i] * x[i];
        float slx = *sumlx - w * x[i] * L[i];
        if (slx > 0) {
            float sl2 = *suml2 - w * L[i] * L[i];
            int new_l = lm_quant_nearest_int(x[i] * sl2 / slx);
            new_l = lm_quant_imax(-nmax, lm_quant_imin(nmax - 1, new_l));
            if (new_l != L[i]) {
                slx += w * x[i] * new_l;
                sl2 += w * new_l * new_l;
                if (sl2 > 0 && slx * slx * *suml2 > *sumlx * *sumlx * sl2) {
                    L[i] = (int8_t)new_l;
                    *sumlx = slx;
                    *suml2 = sl2;
                    ++n_changed;
                }
            }
        }
    }
    return n_changed;
}

float lm_quant_make_q3(int n, int nmax, const float *x, int8_t *L, bool do_rmse)
{
    float amax;
    const float max = lm_quant_signed_absmax(n, x, &amax);
    if (amax < GROUP_MAX_EPS) {
        memset(L, 0, (size_t)n);
        return 0.f;
    }
    float iscale = -nmax / max;
    if (!do_rmse) {
        qx_round(n, nmax, x, iscale, L);
        return 1 / iscale;
    }
    float sumlx = 0;
    float suml2 = 0;
    for (int i = 0; i < n; ++i) {
        int l = lm_quant_nearest_int(iscale * x[i]);
        l = lm_quant_imax(-nmax, lm_quant_imin(nmax - 1, l));
        L[i] = (int8_t)l;
        float w = x[i] * x[i];
        sumlx += w * x[i] * l;
        suml2 += w * l * l;
    }
    for (int itry = 0; itry < 5; ++itry) {
        if (!q3_sweep(n, nmax, x, L, &sumlx, &suml2))
            break;
    }
    for (int i = 0; i < n; ++i)
        L[i] = (int8_t)(L[i] + nmax);
    return sumlx / suml2;
}

/* Weighted error of levels L with (scale, min): sum w * |diff| or w * diff^2. */
static float qkx_error(int n, const float *x, const float *weights, const uint8_t *L, float scale, float min,
                       bool use_mad)
{
    float err = 0;
    for (int i = 0; i < n; ++i) {
        float diff = scale * L[i] + min - x[i];
        diff = use_mad ? fabsf(diff) : diff * diff;
        float w = weights ? weights[i] : x[i] * x[i];
        err += w * diff;
    }
    return err;
}

/* The candidate steps shared by make_qkx2 / make_qkx3: for each of nstep+1
 * scales, round, fit (scale, min) by weighted least squares, keep the best. */
static void qkx_steps(int n, int nmax, const float *x, const float *weights, uint8_t *L, uint8_t *Laux,
                      float rmin, float rdelta, int nstep, bool use_mad, float max, float sum_w, float sum_x,
                      float *scale, float *min, float best_mad)
{
    /* as in ggml, a better fit moves `min`, and later candidates use the new one */
    for (int is = 0; is <= nstep; ++is) {
        const float lo = *min;
        float iscale = (rmin + rdelta * is + nmax) / (max - lo);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; ++i) {
            int l = lm_quant_nearest_int(iscale * (x[i] - lo));
            l = lm_quant_imax(0, lm_quant_imin(nmax, l));
            Laux[i] = (uint8_t)l;
            float w = weights ? weights[i] : x[i] * x[i];
            sum_l += w * l;
            sum_l2 += w * l * l;
            sum_xl += w * l * x[i];
        }
        float D = sum_w * sum_l2 - sum_l * sum_l;
        if (D > 0) {
            float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
            float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
            if (this_min > 0) {
                this_min = 0;
                this_scale = sum_xl / sum_l2;
            }
            float mad = qkx_error(n, x, weights, Laux, this_scale, this_min, use_mad);
            if (mad < best_mad) {
                memcpy(L, Laux, (size_t)n);
                best_mad = mad;
                *scale = this_scale;
                *min = this_min;
            }
        }
    }
}

/* Common body of make_qkx2 (a block is flat when max == min) and make_qkx3
 * (flat when max <= min). */
static float qkx_search(int n, int nmax, const float *x, const float *weights, uint8_t *L, float *the_min,
                        uint8_t *Laux, float rmin, float rdelta, int nstep, bool use_mad, bool qkx3)
{
    float min = x[0];
    float max = x[0];
    float sum_w = weights ? weights[0] : x[0] * x[0];
    float sum_x = sum_w * x[0];
    for (int i = 1; i < n; ++i) {
        if (x[i] < min)
            min = x[i];
        if (x[i] > max)
            max = x[i];
        float w = weights ? weights[i] : x[i] * x[i];
        sum_w += w;
        sum_x += w * x[i];
    }
    if (min > 0)
        min = 0;
    if (qkx3 ? max <= min : max == min) {
        memset(L, 0, (size_t)n);
        *the_min = -min;
        return 0.f;
    }
    float iscale = nmax / (max - min);
    float scale = 1 / iscale;
    for (int i = 0; i < n; ++i) {
        int l = lm_quant_nearest_int(iscale * (x[i] - min));
        L[i] = (uint8_t)lm_quant_imax(0, lm_quant_imin(nmax, l));
    }
    float best_mad = qkx_error(n, x, weights, L, scale, min, use_mad);
    if (nstep >= 1)
        qkx_steps(n, nmax, x, weights, L, Laux, rmin, rdelta, nstep, use_mad, max, sum_w, sum_x, &scale, &min,
                  best_mad);
    *the_min = -min;
    return scale;
}

float lm_quant_make_qkx2(int n, int nmax, const float *x, const float *weights, uint8_t *L, float *the_min,
                         uint8_t *Laux, float rmin, float rdelta, int nstep, bool use_mad)
{
    return qkx_search(n, nmax, x, weights, L, the_min, Laux, rmin, rdelta, nstep, use_mad, false);
}

float lm_quant_make_qkx3(int n, int nmax, const float *x, const float *weights, uint8_t *L, float *the_min,
                         uint8_t *Laux, float rmin, float rdelta, int nstep, bool use_mad)
{
    return qkx_search(n, nmax, x, weights, L, the_min, Laux, rmin, rdelta, nstep, use_mad, true);
}

/* make_qp: the weighted squared error of rounding x*iscale (clamped to nmax). */
static float qp_mse(int n, int nmax, const float *x, const float *qw, float iscale)
{
    float scale = 1 / iscale;
    float mse = 0;
    for (int i = 0; i < n; ++i) {
        int l = lm_quant_imin(nmax, lm_quant_nearest_int(iscale * x[i]));
        float diff = x[i] - scale * l;
        mse += qw[i] * diff * diff;
    }
    return mse;
}

float lm_quant_make_qp(int n, int nmax, const float *x, uint8_t *L, const float *qw)
{
    float max = 0;
    for (int i = 0; i < n; ++i)
        max = max > x[i] ? max : x[i];
    if (!max) {
        memset(L, 0, (size_t)n);
        return 0.f;
    }
    float iscale = nmax / max;
    /* the first candidate is scored without the clamp (values equal nmax at most) */
    float scale = 1 / iscale;
    float best_mse = 0;
    for (int i = 0; i < n; ++i) {
        int l = (uint8_t)lm_quant_nearest_int(iscale * x[i]);
        float diff = x[i] - scale * l;
        best_mse += qw[i] * diff * diff;
    }
    for (int is = -4; is <= 4; ++is) {
        if (is == 0)
            continue;
        float iscale_is = (0.1f * is + nmax) / max;
        float mse = qp_mse(n, nmax, x, qw, iscale_is);
        if (mse < best_mse) {
            best_mse = mse;
            iscale = iscale_is;
        }
    }
    float sumlx = 0;
    float suml2 = 0;
    for (int i = 0; i < n; ++i) {
        int l = lm_quant_imin(nmax, lm_quant_nearest_int(iscale * x[i]));
        L[i] = (uint8_t)l;
        sumlx += qw[i] * x[i] * l;
        suml2 += qw[i] * l * l;
    }
    for (int itry = 0; itry < 5; ++itry) {
        int n_changed = 0;
        for (int i = 0; i < n; ++i) {
            float w = qw[i];
            float slx = sumlx - w * x[i] * L[i];
            float sl2 = suml2 - w * L[i] * L[i];
            if (slx > 0 && sl2 > 0) {
                int new_l = lm_quant_imin(nmax, lm_quant_nearest_int(x[i] * sl2 / slx));
                if (new_l != L[i]) {
                    slx += w * x[i] * new_l;
                    sl2 += w * new_l * new_l;
                    if (slx * slx * suml2 > sumlx * sumlx * sl2) {
                        L[i] = (uint8_t)new_l;
                        sumlx = slx;
                        suml2 = sl2;
                        ++n_changed;
                    }
                }
            }
        }
        if (!n_changed)
            break;
    }
    return sumlx / suml2;
}
