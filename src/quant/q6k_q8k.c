/* q6k_q8k.c - Q6_K (16 sub-blocks of 16, int8 scales, 6-bit q: x = d*sc*(q-32))
 * and Q8_K (the K-quant activation type: float d, int8 q, 16 partial sums).
 *
 * Encoders follow ggml's quantize_row_q6_K_ref / quantize_row_q6_K_impl (the
 * imatrix variant uses the importance weights directly; same in the seed) and
 * quantize_row_q8_K_ref; decoders compute ggml's expressions.
 */
#include <math.h>

#include "quant/internal.h"

#define GROUP_MAX_EPS 1e-15f

void lm_quant_q6_K_to_float(const void *vx, float *y, int64_t n)
{
    const struct lm_block_q6_K *x = vx;
    for (int64_t i = 0; i < n / LM_QK_K; i++) {
        const float d = lm_fp16_to_fp32(x[i].d);
        const uint8_t *ql = x[i].ql, *qh = x[i].qh;
        const int8_t *sc = x[i].scales;
        for (int h = 0; h < LM_QK_K; h += 128, y += 128, ql += 64, qh += 32, sc += 8) {
            for (int l = 0; l < 32; ++l) {
                const int is = l / 16;
                const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
                const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
                const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                y[l] = d * sc[is + 0] * q1;
                y[l + 32] = d * sc[is + 2] * q2;
                y[l + 64] = d * sc[is + 4] * q3;
                y[l + 96] = d * sc[is + 6] * q4;
            }
        }
    }
}

/* Pack 256 codes L (0..63) into ql (low nibbles) and qh (top two bits). */
static void q6_pack(const int8_t *L, uint8_t *ql, uint8_t *qh)
{
    for (int j = 0; j < LM_QK_K; j += 128, ql += 64, qh += 32) {
        for (int l = 0; l < 32; ++l) {
            const uint8_t q1 = L[j + l] & 0xF, q2 = L[j + l + 32] & 0xF;
            const uint8_t q3 = L[j + l + 64] & 0xF, q4 = L[j + l + 96] & 0xF;
            ql[l] = (uint8_t)(q1 | (q3 << 4));
            ql[l + 32] = (uint8_t)(q2 | (q4 << 4));
            qh[l] = (uint8_t)((L[j + l] >> 4) | ((L[j + l + 32] >> 4) << 2) | ((L[j + l + 64] >> 4) << 4) |
                              ((L[j + l + 96] >> 4) << 6));
        }
    }
}

/* One super-block after the sub-block fits: scales[16] (with L holding the
 * fits' codes) -> block b. qw: NULL (reference) or 256 importance weights. */
static void q6_block(const float *x, const float *qw, struct lm_block_q6_K *b)
{
    int8_t L[LM_QK_K];
    float scales[LM_QK_K / 16];
    for (int ib = 0; ib < LM_QK_K / 16; ++ib)
        scales[ib] = lm_quant_make_qx(16, 32, x + 16 * ib, L + 16 * ib, 1, qw ? qw + 16 * ib : NULL);
    float max_abs_scale;
    const float max_scale = lm_quant_signed_absmax(LM_QK_K / 16, scales, &max_abs_scale);
    if (max_abs_scale < GROUP_MAX_EPS) {
        memset(b, 0, sizeof *b);
        b->d = lm_fp32_to_fp16(0.f);
        return;
    }
    const float iscale = -128.f / max_scale;
    b->d = lm_fp32_to_fp16(1 / iscale);
    for (int ib = 0; ib < LM_QK_K / 16; ++ib)
        b->scales[ib] = lm_quant_wrap_i8(lm_quant_imin(127, lm_quant_nearest_int(iscale * scales[ib])));
    for (int j = 0; j < LM_QK_K / 16; ++j) {
        const float d = lm_fp16_to_fp32(b->d) * b->scales[j];
        if (!d)
            continue;
        for (int ii = 0; ii < 16; ++ii) {
            int l = lm_quant_nearest_int(x[16 * j + ii] / d);
            L[16 * j + ii] = (int8_t)(lm_quant_imax(-32, lm_quant_imin(31, l)) + 32);
        }
    }
    q6_pack(L, b->ql, b->qh);
}

void lm_quant_q6_K_from_float(const float *x, void *vy, int64_t n)
{
    struct lm_block_q6_K *y = vy;
    for (int64_t i = 0; i < n / LM_QK_K; i++)
        q6_block(x + LM_QK_K * i, NULL, &y[i]);
}

void lm_quant_q6_K_imat(const float *x, void *vy, int64_t n_per_row, const float *qw)
{
    struct lm_block_q6_K *y = vy;
    for (int64_t i = 0; i < n_per_row / LM_QK_K; i++)
        q6_block(x + LM_QK_K * i, qw + LM_QK_K * i, &y[i]);
}

/* ---- Q8_K ---- */

void lm_quant_q8_K_to_float(const void *vx, float *y, int64_t n)
{
    const struct lm_block_q8_K *x = vx;
    for (int64_t i = 0; i < n / LM_QK_K; i++) {
        for (int j = 0; j < LM_QK_K; ++j)
            *y++ = x[i].d * x[i].qs[j];
    }
}

void lm_quant_q8_K_from_float(const float *x, void *vy, int64_t n)
{
    struct lm_block_q8_K *y = vy;
    for (int64_t i = 0; i < n / LM_QK_K; i++, x += LM_QK_K) {
        float amax;
        const float max = lm_quant_signed_absmax(LM_QK_K, x, &amax);
        if (!amax) { /* ggml leaves bsums unset here; lamina zeroes them */
            memset(&y[i], 0, sizeof y[i]);
            continue;
        }
        /* -127 (not -128) so that no code is -128, as ggml does for its SIMD dots */
        const float iscale = -127.f / max;
        for (int j = 0; j < LM_QK_K; ++j)
            y[i].qs[j] = lm_quant_wrap_i8(lm_quant_imin(127, lm_quant_nearest_int(iscale * x[j])));
        for (int j = 0; j < LM_QK_K / 16; ++j) {
            int sum = 0;
            for (int ii = 0; ii < 16; ++ii)
                sum += y[i].qs[j * 16 + ii];
            y[i].bsums[j] = (int16_t)sum;
        }
        y[i].d = 1 / iscale;
    }
}
