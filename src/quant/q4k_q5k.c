/* q4k_q5k.c - Q4_K and Q5_K: 256-element super-blocks of 8 sub-blocks of 32,
 * x = d*sc*q - dmin*m with 6-bit sc, m (packed in 12 bytes, see blocks.h) and
 * 4-bit (Q4_K) or 5-bit (Q5_K) q.
 *
 * Reference encoders follow ggml's quantize_row_q{4,5}_K_ref. The imatrix
 * encoders follow the SEED's (b1892) quantize_row_q{4,5}_K_impl, which modern
 * ggml later changed (sigma^2 doubled, super-block scales fitted with
 * make_qp_quants): lamina reproduces the seed's bytes. Decoders compute ggml's
 * expressions (d*sc*q - dmin*m, products in that order).
 */
#include <math.h>

#include "quant/internal.h"

/* Store the 6-bit scale ls and min lm of sub-block j into the 12 packed bytes;
 * call for j = 0..7 in order (j >= 4 adds its top bits to bytes set by j - 4). */
static void k4_set_scale_min(uint8_t *s, int j, uint8_t ls, uint8_t lm)
{
    if (j < 4) {
        s[j] = ls;
        s[j + 4] = lm;
    } else {
        s[j + 4] = (uint8_t)((ls & 0xF) | ((lm & 0xF) << 4));
        s[j - 4] |= (uint8_t)((ls >> 4) << 6);
        s[j] |= (uint8_t)((lm >> 4) << 6);
    }
}

/* Quantize the 8 sub-block scales and mins against their maxima to 6 bits and
 * set d / dmin: the ggml reference way (also the seed's imatrix way). */
static void k4_pack_scales(const float *scales, const float *mins, uint8_t *s, lm_fp16 *d, lm_fp16 *dmin)
{
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < LM_QK_K / 32; ++j) {
        if (scales[j] > max_scale)
            max_scale = scales[j];
        if (mins[j] > max_min)
            max_min = mins[j];
    }
    const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
    const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
    for (int j = 0; j < LM_QK_K / 32; ++j) {
        uint8_t ls = (uint8_t)lm_quant_nearest_int(inv_scale * scales[j]);
        uint8_t lm = (uint8_t)lm_quant_nearest_int(inv_min * mins[j]);
        k4_set_scale_min(s, j, ls < 63 ? ls : 63, lm < 63 ? lm : 63);
    }
    *d = lm_fp32_to_fp16(max_scale / 63.f);
    *dmin = lm_fp32_to_fp16(max_min / 63.f);
}

/* Final rounding of all 256 codes with the stored scales (0..nmax); sub-blocks
 * whose scale is zero keep the codes of the search. */
static void k4_requantize(const float *x, const uint8_t *s, lm_fp16 d16, lm_fp16 dmin16, int nmax, uint8_t *L)
{
    uint8_t sc, m;
    for (int j = 0; j < LM_QK_K / 32; ++j) {
        lm_quant_scale_min_k4(j, s, &sc, &m);
        const float d = lm_fp16_to_fp32(d16) * sc;
        if (!d)
            continue;
        const float dm = lm_fp16_to_fp32(dmin16) * m;
        for (int ii = 0; ii < 32; ++ii) {
            int l = lm_quant_nearest_int((x[32 * j + ii] + dm) / d);
            L[32 * j + ii] = (uint8_t)lm_quant_imax(0, lm_quant_imin(nmax, l));
        }
    }
}

/* The reference weights of one sub-block: sqrt(mean x^2) + |x|. */
static void k4_ref_weights(const float *x, float *w)
{
    float sum_x2 = 0;
    for (int l = 0; l < 32; ++l)
        sum_x2 += x[l] * x[l];
    const float av_x = sqrtf(sum_x2 / 32);
    for (int l = 0; l < 32; ++l)
        w[l] = av_x + fabsf(x[l]);
}

/* The seed's imatrix sub-block fits: weights qw*sqrt(sigma^2 + x^2), make_qkx3. */
static void k4_imat_fit(const float *x, const float *qw, int nmax, uint8_t *L, float *scales, float *mins)
{
    float w[32];
    uint8_t Laux[32];
    float sum_x2 = 0;
    for (int l = 0; l < LM_QK_K; ++l)
        sum_x2 += x[l] * x[l];
    const float sigma2 = sum_x2 / LM_QK_K;
    for (int j = 0; j < LM_QK_K / 32; ++j) {
        for (int l = 0; l < 32; ++l)
            w[l] = qw[32 * j + l] * sqrtf(sigma2 + x[32 * j + l] * x[32 * j + l]);
        scales[j] =
            lm_quant_make_qkx3(32, nmax, x + 32 * j, w, L + 32 * j, &mins[j], Laux, -0.9f, 0.05f, 36, false);
    }
}

/* The reference sub-block fits (ggml's quantize_row_q{4,5}_K_ref): weights
 * k4_ref_weights, make_qkx2 with the type's search range. */
static void k4_ref_fit(const float *x, int nmax, float rmin, int nstep, uint8_t *L, float *scales, float *mins)
{
    float w[32];
    uint8_t Laux[32];
    for (int j = 0; j < LM_QK_K / 32; ++j) {
        k4_ref_weights(x + 32 * j, w);
        scales[j] = lm_quant_make_qkx2(32, nmax, x + 32 * j, w, L + 32 * j, &mins[j], Laux, rmin, 0.1f, nstep, false);
    }
}

/* After the fits: the packed scales, d and dmin of the block, and the final
 * codes L[256] (0..nmax) under them. */
static void k4_finish(const float *x, const float *scales, const float *mins, int nmax, uint8_t *s, lm_fp16 *d,
                      lm_fp16 *dmin, uint8_t *L)
{
    k4_pack_scales(scales, mins, s, d, dmin);
    k4_requantize(x, s, *d, *dmin, nmax, L);
}

/* d * sc and dmin * m of sub-blocks is and is + 1 (the decoders' pairs). */
static void k4_pair(const uint8_t *scales, int is, float d, float min, float *d1, float *m1, float *d2, float *m2)
{
    uint8_t sc, m;
    lm_quant_scale_min_k4(is, scales, &sc, &m);
    *d1 = d * sc;
    *m1 = min * m;
    lm_quant_scale_min_k4(is + 1, scales, &sc, &m);
    *d2 = d * sc;
    *m2 = min * m;
}

/* ---- Q4_K ---- */

void lm_quant_q4_K_to_float(const void *vx, float *y, int64_t n)
{
    const struct lm_block_q4_K *x = vx;
    for (int64_t i = 0; i < n / LM_QK_K; i++) {
        const uint8_t *q = x[i].qs;
        const float d = lm_fp16_to_fp32(x[i].d);
        const float min = lm_fp16_to_fp32(x[i].dmin);
        for (int is = 0; is < LM_QK_K / 32; is += 2, q += 32) {
            float d1, m1, d2, m2;
            k4_pair(x[i].scales, is, d, min, &d1, &m1, &d2, &m2);
            for (int l = 0; l < 32; ++l)
                *y++ = d1 * (q[l] & 0xF) - m1;
            for (int l = 0; l < 32; ++l)
                *y++ = d2 * (q[l] >> 4) - m2;
        }
    }
}

static void q4_K_pack(const uint8_t *L, uint8_t *q)
{
    for (int j = 0; j < LM_QK_K; j += 64, q += 32) {
        for (int l = 0; l < 32; ++l)
            q[l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 4));
    }
}

void lm_quant_q4_K_from_float(const float *x, void *vy, int64_t n)
{
    struct lm_block_q4_K *y = vy;
    uint8_t L[LM_QK_K];
    float mins[LM_QK_K / 32], scales[LM_QK_K / 32];
    for (int64_t i = 0; i < n / LM_QK_K; i++, x += LM_QK_K) {
        k4_ref_fit(x, 15, -1.f, 20, L, scales, mins);
        k4_finish(x, scales, mins, 15, y[i].scales, &y[i].d, &y[i].dmin, L);
        q4_K_pack(L, y[i].qs);
    }
}

void lm_quant_q4_K_imat(const float *x, void *vy, int64_t n_per_row, const float *qw)
{
    struct lm_block_q4_K *y = vy;
    uint8_t L[LM_QK_K];
    float mins[LM_QK_K / 32], scales[LM_QK_K / 32];
    for (int64_t i = 0; i < n_per_row / LM_QK_K; i++, x += LM_QK_K) {
        k4_imat_fit(x, qw + LM_QK_K * i, 15, L, scales, mins);
        k4_finish(x, scales, mins, 15, y[i].scales, &y[i].d, &y[i].dmin, L);
        q4_K_pack(L, y[i].qs);
    }
}

/* ---- Q5_K ---- */

void lm_quant_q5_K_to_float(const void *vx, float *y, int64_t n)
{
    const struct lm_block_q5_K *x = vx;
    for (int64_t i = 0; i < n / LM_QK_K; i++) {
        const uint8_t *ql = x[i].qs, *qh = x[i].qh;
        const float d = lm_fp16_to_fp32(x[i].d);
        const float min = lm_fp16_to_fp32(x[i].dmin);
        uint8_t u1 = 1, u2 = 2;
        for (int is = 0; is < LM_QK_K / 32; is += 2, ql += 32) {
            float d1, m1, d2, m2;
            k4_pair(x[i].scales, is, d, min, &d1, &m1, &d2, &m2);
            for (int l = 0; l < 32; ++l)
                *y++ = d1 * ((ql[l] & 0xF) + (qh[l] & u1 ? 16 : 0)) - m1;
            for (int l = 0; l < 32; ++l)
                *y++ = d2 * ((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
            u1 = (uint8_t)(u1 << 2);
            u2 = (uint8_t)(u2 << 2);
        }
    }
}

static void q5_K_pack(const uint8_t *L, uint8_t *ql, uint8_t *qh)
{
    memset(qh, 0, LM_QK_K / 8);
    uint8_t m1 = 1, m2 = 2;
    for (int n = 0; n < LM_QK_K; n += 64, ql += 32) {
        for (int j = 0; j < 32; ++j) {
            int l1 = L[n + j], l2 = L[n + j + 32];
            if (l1 > 15) {
                l1 -= 16;
                qh[j] |= m1;
            }
            if (l2 > 15) {
                l2 -= 16;
                qh[j] |= m2;
            }
            ql[j] = (uint8_t)(l1 | (l2 << 4));
        }
        m1 = (uint8_t)(m1 << 2);
        m2 = (uint8_t)(m2 << 2);
    }
}

void lm_quant_q5_K_from_float(const float *x, void *vy, int64_t n)
{
    struct lm_block_q5_K *y = vy;
    uint8_t L[LM_QK_K];
    float mins[LM_QK_K / 32], scales[LM_QK_K / 32];
    for (int64_t i = 0; i < n / LM_QK_K; i++, x += LM_QK_K) {
        k4_ref_fit(x, 31, -0.5f, 15, L, scales, mins);
        k4_finish(x, scales, mins, 31, y[i].scales, &y[i].d, &y[i].dmin, L);
        q5_K_pack(L, y[i].qs, y[i].qh);
    }
}

void lm_quant_q5_K_imat(const float *x, void *vy, int64_t n_per_row, const float *qw)
{
    struct lm_block_q5_K *y = vy;
    uint8_t L[LM_QK_K];
    float mins[LM_QK_K / 32], scales[LM_QK_K / 32];
    for (int64_t i = 0; i < n_per_row / LM_QK_K; i++, x += LM_QK_K) {
        k4_imat_fit(x, qw + LM_QK_K * i, 31, L, scales, mins);
        k4_finish(x, scales, mins, 31, y[i].scales, &y[i].d, &y[i].dmin, L);
        q5_K_pack(L, y[i].qs, y[i].qh);
    }
}
