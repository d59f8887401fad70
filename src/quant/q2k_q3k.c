/* q2k_q3k.c - Q2_K and Q3_K: 256-element super-blocks of 16 sub-blocks of 16.
 *
 * Q2_K: x = d*sc*q - dmin*m with 4-bit sc, m and 2-bit q. Q3_K: x = d*s*(q-4)
 * with 6-bit signed s and 3-bit q (low 2 bits in qs, high bit in hmask). The
 * encoders follow ggml's quantize_row_q{2,3}_K_ref (no imatrix) and
 * quantize_row_q{2,3}_K_impl (imatrix; identical in the seed b1892 and modern
 * ggml) operation for operation; decoders compute ggml's expressions.
 */
#include <math.h>

#include "quant/internal.h"

void lm_quant_pack_2bit(const uint8_t *L, uint8_t *qs)
{
    for (int j = 0; j < LM_QK_K; j += 128) {
        for (int l = 0; l < 32; ++l)
            qs[j / 4 + l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) | (L[j + l + 96] << 6));
    }
}

/* ---- Q2_K ---- */

void lm_quant_q2_K_to_float(const void *vx, float *y, int64_t n)
{
    const struct lm_block_q2_K *x = vx;
    for (int64_t i = 0; i < n / LM_QK_K; i++) {
        const float d = lm_fp16_to_fp32(x[i].d);
        const float min = lm_fp16_to_fp32(x[i].dmin);
        const uint8_t *q = x[i].qs;
        int is = 0;
        for (int g = 0; g < LM_QK_K; g += 128, q += 32) {
            for (int shift = 0; shift < 8; shift += 2) {
                for (int half = 0; half < 2; half++) {
                    const uint8_t sc = x[i].scales[is++];
                    const float dl = d * (sc & 0xF), ml = min * (sc >> 4);
                    for (int l = 0; l < 16; ++l)
                        *y++ = dl * ((q[l + 16 * half] >> shift) & 3) - ml;
                }
            }
        }
    }
}

/* Re-round every element with the final (fp16-rounded) sub-block scale and min. */
static void q2_requantize(const float *x, const struct lm_block_q2_K *b, uint8_t *L)
{
    const float dall = lm_fp16_to_fp32(b->d), mall = lm_fp16_to_fp32(b->dmin);
    for (int j = 0; j < LM_QK_K / 16; ++j) {
        const float d = dall * (b->scales[j] & 0xF);
        if (!d)
            continue;
        const float dm = mall * (b->scales[j] >> 4);
        for (int ii = 0; ii < 16; ++ii) {
            int l = lm_quant_nearest_int((x[16 * j + ii] + dm) / d);
            L[16 * j + ii] = (uint8_t)lm_quant_imax(0, lm_quant_imin(3, l));
        }
    }
}

void lm_quant_q2_K_from_float(const float *x, void *vy, int64_t n)
{
    struct lm_block_q2_K *y = vy;
    uint8_t L[LM_QK_K], Laux[16];
    float weights[16], mins[LM_QK_K / 16], scales[LM_QK_K / 16];
    const float q4scale = 15.f;
    for (int64_t i = 0; i < n / LM_QK_K; i++, x += LM_QK_K) {
        float max_scale = 0, max_min = 0;
        for (int j = 0; j < LM_QK_K / 16; ++j) {
            for (int l = 0; l < 16; ++l)
                weights[l] = fabsf(x[16 * j + l]);
            scales[j] = lm_quant_make_qkx2(16, 3, x + 16 * j, weights, L + 16 * j, &mins[j], Laux, -0.5f, 0.1f, 15,
                                           true);
            if (scales[j] > max_scale)
                max_scale = scales[j];
            if (mins[j] > max_min)
                max_min = mins[j];
        }
        memset(y[i].scales, 0, sizeof y[i].scales);
        y[i].d = lm_fp32_to_fp16(0.f);
        y[i].dmin = lm_fp32_to_fp16(0.f);
        if (max_scale > 0) {
            float iscale = q4scale / max_scale;
            for (int j = 0; j < LM_QK_K / 16; ++j)
                y[i].scales[j] = (uint8_t)lm_quant_nearest_int(iscale * scales[j]);
            y[i].d = lm_fp32_to_fp16(max_scale / q4scale);
        }
        if (max_min > 0) {
            float iscale = q4scale / max_min;
            for (int j = 0; j < LM_QK_K / 16; ++j)
                y[i].scales[j] |= (uint8_t)((unsigned)lm_quant_nearest_int(iscale * mins[j]) << 4);
            y[i].dmin = lm_fp32_to_fp16(max_min / q4scale);
        }
        q2_requantize(x, &y[i], L);
        lm_quant_pack_2bit(L, y[i].qs);
    }
}

void lm_quant_q2_K_imat(const float *x, void *vy, int64_t n_per_row, const float *qw)
{
    struct lm_block_q2_K *y = vy;
    uint8_t L[LM_QK_K], Laux[16], Ls[LM_QK_K / 16], Lm[LM_QK_K / 16];
    float mins[LM_QK_K / 16], scales[LM_QK_K / 16], sw[LM_QK_K / 16], weight[16];
    for (int64_t i = 0; i < n_per_row / LM_QK_K; i++, x += LM_QK_K) {
        float sumx2 = 0;
        for (int j = 0; j < LM_QK_K; ++j)
            sumx2 += x[j] * x[j];
        const float sigma2 = sumx2 / LM_QK_K;
        for (int j = 0; j < LM_QK_K / 16; ++j) {
            const float *w = qw + LM_QK_K * i + 16 * j;
            sw[j] = 0;
            for (int l = 0; l < 16; ++l)
                weight[l] = w[l] * sqrtf(sigma2 + x[16 * j + l] * x[16 * j + l]);
            for (int l = 0; l < 16; ++l)
                sw[j] += weight[l];
            scales[j] = lm_quant_make_qkx3(16, 3, x + 16 * j, weight, L + 16 * j, &mins[j], Laux, -0.9f, 0.05f, 36,
                                           false);
        }
        float dm = lm_quant_make_qp(LM_QK_K / 16, 15, scales, Ls, sw);
        float mm = lm_quant_make_qp(LM_QK_K / 16, 15, mins, Lm, sw);
        y[i].d = lm_fp32_to_fp16(dm);
        y[i].dmin = lm_fp32_to_fp16(mm);
        for (int j = 0; j < LM_QK_K / 16; ++j)
            y[i].scales[j] = (uint8_t)(Ls[j] | (Lm[j] << 4));
        q2_requantize(x, &y[i], L);
        lm_quant_pack_2bit(L, y[i].qs);
    }
}

/* ---- Q3_K ---- */

/* The signed 6-bit scale of sub-block j (0..15), already minus 32. */
static int q3_scale(const uint8_t *s, int j)
{
    int lo = j < 8 ? s[j] & 0xF : s[j - 8] >> 4;
    int hi = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
    return (lo | hi << 4) - 32;
}

/* Store the 6-bit code l (0..63) of sub-block j; scales[] must start zeroed. */
static void q3_set_scale(uint8_t *s, int j, int l)
{
    if (j < 8)
        s[j] = (uint8_t)(l & 0xF);
    else
        s[j - 8] |= (uint8_t)((l & 0xF) << 4);
    s[j % 4 + 8] |= (uint8_t)((l >> 4) << (2 * (j / 4)));
}

void lm_quant_q3_K_to_float(const void *vx, float *y, int64_t n)
{
    const struct lm_block_q3_K *x = vx;
    for (int64_t i = 0; i < n / LM_QK_K; i++) {
        const float d_all = lm_fp16_to_fp32(x[i].d);
        const uint8_t *q = x[i].qs, *hm = x[i].hmask;
        uint8_t m = 1;
        int is = 0;
        for (int g = 0; g < LM_QK_K; g += 128, q += 32) {
            for (int shift = 0; shift < 8; shift += 2, m = (uint8_t)(m << 1)) {
                for (int half = 0; half < 2; half++) {
                    const float dl = d_all * q3_scale(x[i].scales, is++);
                    for (int l = 16 * half; l < 16 * half + 16; ++l)
                        *y++ = dl * (((q[l] >> shift) & 3) - ((hm[l] & m) ? 0 : 4));
                }
            }
        }
    }
}

/* Final rounding with the stored scales, then split into hmask and 2-bit qs.
 * L holds codes 0..7 (value + 4); sub-blocks with a zero scale keep theirs. */
static void q3_finish(const float *x, struct lm_block_q3_K *b, int8_t *L)
{
    const float dall = lm_fp16_to_fp32(b->d);
    for (int j = 0; j < LM_QK_K / 16; ++j) {
        const float d = dall * q3_scale(b->scales, j);
        if (!d)
            continue;
        for (int ii = 0; ii < 16; ++ii) {
            int l = lm_quant_nearest_int(x[16 * j + ii] / d);
            L[16 * j + ii] = (int8_t)(lm_quant_imax(-4, lm_quant_imin(3, l)) + 4);
        }
    }
    memset(b->hmask, 0, sizeof b->hmask);
    for (int j = 0; j < LM_QK_K; ++j) {
        if (L[j] > 3) {
            b->hmask[j % 32] |= (uint8_t)(1u << (j / 32));
            L[j] -= 4;
        }
    }
    lm_quant_pack_2bit((const uint8_t *)L, b->qs);
}

void lm_quant_q3_K_from_float(const float *x, void *vy, int64_t n)
{
    struct lm_block_q3_K *y = vy;
    int8_t L[LM_QK_K];
    float scales[LM_QK_K / 16];
    for (int64_t i = 0; i < n / LM_QK_K; i++, x += LM_QK_K) {
        for (int j = 0; j < LM_QK_K / 16; ++j)
            scales[j] = lm_quant_make_q3(16, 4, x + 16 * j, L + 16 * j, true);
        const float max_scale = lm_quant_signed_absmax(LM_QK_K / 16, scales, NULL);
        memset(y[i].scales, 0, 12);
        if (max_scale) {
            float iscale = -32.f / max_scale;
            for (int j = 0; j < LM_QK_K / 16; ++j) {
                int l = lm_quant_wrap_i8(lm_quant_nearest_int(iscale * scales[j])); /* ggml stores it in an int8_t */
                q3_set_scale(y[i].scales, j, lm_quant_imax(-32, lm_quant_imin(31, l)) + 32);
            }
            y[i].d = lm_fp32_to_fp16(1 / iscale);
        } else {
            y[i].d = lm_fp32_to_fp16(0.f);
        }
        q3_finish(x, &y[i], L);
    }
}

void lm_quant_q3_K_imat(const float *x, void *vy, int64_t n_per_row, const float *qw)
{
    struct lm_block_q3_K *y = vy;
    int8_t L[LM_QK_K], Ls[LM_QK_K / 16];
    float scales[LM_QK_K / 16], weight[16], sw[LM_QK_K / 16];
    for (int64_t i = 0; i < n_per_row / LM_QK_K; i++, x += LM_QK_K) {
        float sumx2 = 0;
        for (int j = 0; j < LM_QK_K; ++j)
            sumx2 += x[j] * x[j];
        const float sigma2 = 2 * sumx2 / LM_QK_K;
        for (int j = 0; j < LM_QK_K / 16; ++j) {
            const float *w = qw + LM_QK_K * i + 16 * j;
            for (int l = 0; l < 16; ++l)
                weight[l] = w[l] * sqrtf(sigma2 + x[16 * j + l] * x[16 * j + l]);
            float sumw = 0;
            for (int l = 0; l < 16; ++l)
                sumw += weight[l];
            sw[j] = sumw;
            scales[j] = lm_quant_make_qx(16, 4, x + 16 * j, L + 16 * j, 1, weight);
        }
        memset(y[i].scales, 0, 12);
        float d_block = lm_quant_make_qx(LM_QK_K / 16, 32, scales, Ls, 1, sw);
        for (int j = 0; j < LM_QK_K / 16; ++j)
            q3_set_scale(y[i].scales, j, Ls[j]);
        y[i].d = lm_fp32_to_fp16(d_block);
        q3_finish(x, &y[i], L);
    }
}
