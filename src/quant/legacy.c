/* legacy.c - F32/F16/BF16 and the 32-element block types Q4_0, Q4_1, Q5_0,
 * Q5_1, Q8_0, Q8_1: decoders, reference encoders, imatrix encoders.
 *
 * Decoders compute exactly ggml's expressions (q * d, q * d + m) so results are
 * bit-identical. Encoders follow ggml's quantize_row_*_ref: the truncating
 * float->int conversions of the original are spelled with lm_quant_trunc_i32 /
 * lm_quant_wrap_i8 (what x86 computes), which keeps NaN/Inf input defined.
 * Imatrix encoders follow ggml's quantize_row_*_impl (same in the seed b1892).
 */
#include <float.h>
#include <math.h>

#include "quant/internal.h"

/* ---- plain floats ---- */

void lm_quant_f32_to_float(const void *x, float *y, int64_t n) { memcpy(y, x, (size_t)n * sizeof(float)); }

void lm_quant_f32_from_float(const float *x, void *y, int64_t n) { memcpy(y, x, (size_t)n * sizeof(float)); }

void lm_quant_f16_to_float(const void *vx, float *y, int64_t n)
{
    const lm_fp16 *x = vx;
    for (int64_t i = 0; i < n; i++)
        y[i] = lm_fp16_to_fp32(x[i]);
}

void lm_quant_f16_from_float(const float *x, void *vy, int64_t n)
{
    lm_fp16 *y = vy;
    for (int64_t i = 0; i < n; i++)
        y[i] = lm_fp32_to_fp16(x[i]);
}

void lm_quant_bf16_to_float(const void *vx, float *y, int64_t n)
{
    const lm_bf16 *x = vx;
    for (int64_t i = 0; i < n; i++)
        y[i] = lm_bf16_to_fp32(x[i]);
}

void lm_quant_bf16_from_float(const float *x, void *vy, int64_t n)
{
    lm_bf16 *y = vy;
    for (int64_t i = 0; i < n; i++)
        y[i] = lm_fp32_to_bf16(x[i]);
}

/* ---- shared pieces of the 32-element types ---- */

static void min_max(const float *x, float *min_out, float *max_out)
{
    float min = FLT_MAX, max = -FLT_MAX;
    for (int j = 0; j < LM_QK; j++) {
        if (x[j] < min)
            min = x[j];
        if (x[j] > max)
            max = x[j];
    }
    *min_out = min;
    *max_out = max;
}

/* min(top, (int8_t)v) as a byte: ggml's `MIN(top, (int8_t)(v))` on uint8_t. */
static inline uint8_t clamp_i8(float v, int top)
{
    return (uint8_t)lm_quant_imin(top, lm_quant_wrap_i8(lm_quant_trunc_i32(v)));
}

/* Split 32 five-bit codes into nibbles qs[16] and the 5th bits qh (LE 32 bits). */
static void pack_5bit(const uint8_t *L, uint8_t *qs, uint8_t *qh_out)
{
    uint32_t qh = 0;
    for (int j = 0; j < LM_QK / 2; ++j) {
        qs[j] = (uint8_t)((L[j] & 0x0F) | ((L[j + 16] & 0x0F) << 4));
        qh |= ((L[j] & 0x10u) >> 4) << j;
        qh |= ((L[j + 16] & 0x10u) >> 4) << (j + LM_QK / 2);
    }
    for (int b = 0; b < 4; b++)
        qh_out[b] = (uint8_t)(qh >> (8 * b));
}

static inline uint32_t load_qh(const uint8_t *qh)
{
    return (uint32_t)qh[0] | (uint32_t)qh[1] << 8 | (uint32_t)qh[2] << 16 | (uint32_t)qh[3] << 24;
}

/* sigma^2 = mean(x^2) of a row: the imatrix weight's noise floor. */
static float row_sigma2(const float *x, int64_t n)
{
    float sum_x2 = 0;
    for (int64_t j = 0; j < n; ++j)
        sum_x2 += x[j] * x[j];
    return sum_x2 / n;
}

/* The imatrix encoders' row loop (ggml's quantize_row_*_impl): per 32-block,
 * weights w = qw * sqrt(sigma^2 + x^2), then enc fills block ib from xb, w. */
typedef void (*imat_block_fn)(void *block, const float *xb, const float *w);

static void imat_row(const float *x, void *vy, size_t block_size, int64_t n_per_row, const float *qw,
                     imat_block_fn enc)
{
    float w[LM_QK];
    const float sigma2 = row_sigma2(x, n_per_row);
    for (int64_t ib = 0; ib < n_per_row / LM_QK; ++ib) {
        const float *xb = x + LM_QK * ib, *qb = qw + LM_QK * ib;
        for (int j = 0; j < LM_QK; ++j)
            w[j] = qb[j] * sqrtf(sigma2 + xb[j] * xb[j]);
        enc((char *)vy + (size_t)ib * block_size, xb, w);
    }
}

/* Pack 32 four-bit codes: qs[j] = L[j] | L[j + 16] << 4. */
static void pack_4bit(const uint8_t *L, uint8_t *qs)
{
    for (int j = 0; j < LM_QK / 2; ++j)
        qs[j] = (uint8_t)(L[j] | (L[j + 16] << 4));
}

/* The (scale, min) fit of the Q4_1 / Q5_1 imatrix encoders: codes 0..nmax in L. */
static void imat_fit_min(int nmax, const float *xb, const float *w, uint8_t *L, lm_fp16 *d, lm_fp16 *m)
{
    uint8_t Laux[LM_QK];
    float min;
    const float scale = lm_quant_make_qkx3(LM_QK, nmax, xb, w, L, &min, Laux, -0.9f, 0.05f, 36, false);
    *d = lm_fp32_to_fp16(scale);
    *m = lm_fp32_to_fp16(-min);
}

/* ---- Q4_0 ---- */

void lm_quant_q4_0_to_float(const void *vx, float *y, int64_t n)
{
    const struct lm_block_q4_0 *x = vx;
    for (int64_t i = 0; i < n / LM_QK; i++, y += LM_QK) {
        const float d = lm_fp16_to_fp32(x[i].d);
        for (int j = 0; j < LM_QK / 2; ++j) {
            y[j] = ((x[i].qs[j] & 0x0F) - 8) * d;
            y[j + LM_QK / 2] = ((x[i].qs[j] >> 4) - 8) * d;
        }
    }
}

void lm_quant_q4_0_from_float(const float *x, void *vy, int64_t n)
{
    struct lm_block_q4_0 *y = vy;
    for (int64_t i = 0; i < n / LM_QK; i++, x += LM_QK) {
        const float d = lm_quant_signed_absmax(LM_QK, x, NULL) / -8;
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = lm_fp32_to_fp16(d);
        for (int j = 0; j < LM_QK / 2; ++j) {
            uint8_t lo = clamp_i8(x[j] * id + 8.5f, 15);
            uint8_t hi = clamp_i8(x[j + LM_QK / 2] * id + 8.5f, 15);
            y[i].qs[j] = (uint8_t)(lo | hi << 4);
        }
    }
}

static void q4_0_imat_block(void *vb, const float *xb, const float *w)
{
    struct lm_block_q4_0 *y = vb;
    int8_t L[LM_QK];
    y->d = lm_fp32_to_fp16(lm_quant_make_qx(LM_QK, 8, xb, L, 1, w));
    pack_4bit((const uint8_t *)L, y->qs);
}

void lm_quant_q4_0_imat(const float *x, void *vy, int64_t n_per_row, const float *qw)
{
    imat_row(x, vy, sizeof(struct lm_block_q4_0), n_per_row, qw, q4_0_imat_block);
}

/* ---- Q4_1 ---- */

void lm_quant_q4_1_to_float(const void *vx, float *y, int64_t n)
{
    const struct lm_block_q4_1 *x = vx;
    for (int64_t i = 0; i < n / LM_QK; i++, y += LM_QK) {
        const float d = lm_fp16_to_fp32(x[i].d);
        const float m = lm_fp16_to_fp32(x[i].m);
        for (int j = 0; j < LM_QK / 2; ++j) {
            y[j] = (x[i].qs[j] & 0x0F) * d + m;
            y[j + LM_QK / 2] = (x[i].qs[j] >> 4) * d + m;
        }
    }
}

void lm_quant_q4_1_from_float(const float *x, void *vy, int64_t n)
{
    struct lm_block_q4_1 *y = vy;
    for (int64_t i = 0; i < n / LM_QK; i++, x += LM_QK) {
        float min, max;
        min_max(x, &min, &max);
        const float d = (max - min) / ((1 << 4) - 1);
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = lm_fp32_to_fp16(d);
        y[i].m = lm_fp32_to_fp16(min);
        for (int j = 0; j < LM_QK / 2; ++j) {
            uint8_t lo = clamp_i8((x[j] - min) * id + 0.5f, 15);
            uint8_t hi = clamp_i8((x[j + LM_QK / 2] - min) * id + 0.5f, 15);
            y[i].qs[j] = (uint8_t)(lo | hi << 4);
        }
    }
}

static void q4_1_imat_block(void *vb, const float *xb, const float *w)
{
    struct lm_block_q4_1 *y = vb;
    uint8_t L[LM_QK];
    imat_fit_min(15, xb, w, L, &y->d, &y->m);
    pack_4bit(L, y->qs);
}

void lm_quant_q4_1_imat(const float *x, void *vy, int64_t n_per_row, const float *qw)
{
    imat_row(x, vy, sizeof(struct lm_block_q4_1), n_per_row, qw, q4_1_imat_block);
}

/* ---- Q5_0 ---- */

void lm_quant_q5_0_to_float(const void *vx, float *y, int64_t n)
{
    const struct lm_block_q5_0 *x = vx;
    for (int64_t i = 0; i < n / LM_QK; i++, y += LM_QK) {
        const float d = lm_fp16_to_fp32(x[i].d);
        const uint32_t qh = load_qh(x[i].qh);
        for (int j = 0; j < LM_QK / 2; ++j) {
            const int h0 = (int)((qh >> j) << 4) & 0x10;
            const int h1 = (int)(qh >> (j + 12)) & 0x10;
            y[j] = (((x[i].qs[j] & 0x0F) | h0) - 16) * d;
            y[j + LM_QK / 2] = (((x[i].qs[j] >> 4) | h1) - 16) * d;
        }
    }
}

void lm_quant_q5_0_from_float(const float *x, void *vy, int64_t n)
{
    struct lm_block_q5_0 *y = vy;
    uint8_t L[LM_QK];
    for (int64_t i = 0; i < n / LM_QK; i++, x += LM_QK) {
        const float d = lm_quant_signed_absmax(LM_QK, x, NULL) / -16;
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = lm_fp32_to_fp16(d);
        for (int j = 0; j < LM_QK; ++j)
            L[j] = clamp_i8(x[j] * id + 16.5f, 31);
        pack_5bit(L, y[i].qs, y[i].qh);
    }
}

static void q5_0_imat_block(void *vb, const float *xb, const float *w)
{
    struct lm_block_q5_0 *y = vb;
    int8_t L[LM_QK];
    y->d = lm_fp32_to_fp16(lm_quant_make_qx(LM_QK, 16, xb, L, 1, w));
    pack_5bit((const uint8_t *)L, y->qs, y->qh);
}

void lm_quant_q5_0_imat(const float *x, void *vy, int64_t n_per_row, const float *qw)
{
    imat_row(x, vy, sizeof(struct lm_block_q5_0), n_per_row, qw, q5_0_imat_block);
}

/* ---- Q5_1 ---- */

void lm_quant_q5_1_to_float(const void *vx, float *y, int64_t n)
{
    const struct lm_block_q5_1 *x = vx;
    for (int64_t i = 0; i < n / LM_QK; i++, y += LM_QK) {
        const float d = lm_fp16_to_fp32(x[i].d);
        const float m = lm_fp16_to_fp32(x[i].m);
        const uint32_t qh = load_qh(x[i].qh);
        for (int j = 0; j < LM_QK / 2; ++j) {
            const int h0 = (int)((qh >> j) << 4) & 0x10;
            const int h1 = (int)(qh >> (j + 12)) & 0x10;
            y[j] = ((x[i].qs[j] & 0x0F) | h0) * d + m;
            y[j + LM_QK / 2] = ((x[i].qs[j] >> 4) | h1) * d + m;
        }
    }
}

void lm_quant_q5_1_from_float(const float *x, void *vy, int64_t n)
{
    struct lm_block_q5_1 *y = vy;
    uint8_t L[LM_QK];
    for (int64_t i = 0; i < n / LM_QK; i++, x += LM_QK) {
        float min, max;
        min_max(x, &min, &max);
        const float d = (max - min) / ((1 << 5) - 1);
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = lm_fp32_to_fp16(d);
        y[i].m = lm_fp32_to_fp16(min);
        for (int j = 0; j < LM_QK; ++j) /* (uint8_t)(v + 0.5f): no clamp in ggml */
            L[j] = (uint8_t)(lm_quant_trunc_i32((x[j] - min) * id + 0.5f) & 0xff);
        pack_5bit(L, y[i].qs, y[i].qh);
    }
}

static void q5_1_imat_block(void *vb, const float *xb, const float *w)
{
    struct lm_block_q5_1 *y = vb;
    uint8_t L[LM_QK];
    imat_fit_min(31, xb, w, L, &y->d, &y->m);
    pack_5bit(L, y->qs, y->qh);
}

void lm_quant_q5_1_imat(const float *x, void *vy, int64_t n_per_row, const float *qw)
{
    imat_row(x, vy, sizeof(struct lm_block_q5_1), n_per_row, qw, q5_1_imat_block);
}

/* ---- Q8_0 / Q8_1 ---- */

/* y[0..32) = d * qs[j]: one Q8_0 / Q8_1 block. */
static void q8_decode(lm_fp16 d16, const int8_t *qs, float *y)
{
    const float d = lm_fp16_to_fp32(d16);
    for (int j = 0; j < LM_QK; ++j)
        y[j] = qs[j] * d;
}

/* The codes of one Q8_0 / Q8_1 block: d = max|x| / 127 (ggml's MAX(amax, |v|),
 * so a NaN propagates), qs = round(x / d) half away from zero. Returns d. */
static float q8_encode(const float *x, int8_t *qs)
{
    float amax = 0.0f;
    for (int j = 0; j < LM_QK; j++)
        amax = amax > fabsf(x[j]) ? amax : fabsf(x[j]);
    const float d = amax / ((1 << 7) - 1);
    const float id = d ? 1.0f / d : 0.0f;
    for (int j = 0; j < LM_QK; ++j)
        qs[j] = lm_quant_wrap_i8(lm_quant_trunc_i32(roundf(x[j] * id)));
    return d;
}

void lm_quant_q8_0_to_float(const void *vx, float *y, int64_t n)
{
    const struct lm_block_q8_0 *x = vx;
    for (int64_t i = 0; i < n / LM_QK; i++, y += LM_QK)
        q8_decode(x[i].d, x[i].qs, y);
}

void lm_quant_q8_0_from_float(const float *x, void *vy, int64_t n)
{
    struct lm_block_q8_0 *y = vy;
    for (int64_t i = 0; i < n / LM_QK; i++, x += LM_QK)
        y[i].d = lm_fp32_to_fp16(q8_encode(x, y[i].qs));
}

void lm_quant_q8_1_to_float(const void *vx, float *y, int64_t n)
{
    const struct lm_block_q8_1 *x = vx;
    for (int64_t i = 0; i < n / LM_QK; i++, y += LM_QK)
        q8_decode(x[i].d, x[i].qs, y);
}

void lm_quant_q8_1_from_float(const float *x, void *vy, int64_t n)
{
    struct lm_block_q8_1 *y = vy;
    for (int64_t i = 0; i < n / LM_QK; i++, x += LM_QK) {
        const float d = q8_encode(x, y[i].qs);
        int sum = 0;
        for (int j = 0; j < LM_QK; ++j)
            sum += y[i].qs[j];
        y[i].d = lm_fp32_to_fp16(d);
        y[i].s = lm_fp32_to_fp16(sum * d);
    }
}
