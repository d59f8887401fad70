/* float_generic.c - portable dot products and row conversions of F32, F16, BF16.
 *
 * Dots accumulate in 8 independent float lanes (i mod 8), then add the lanes
 * pairwise: the same association a 256-bit SIMD kernel uses, so generic and
 * SIMD results stay close, and compilers can vectorise the lane loop. Any n.
 * Conversions give the bits of core/fp16.h; half -> float uses a branch-free
 * form of the same mapping (half2f below) so the F16 dot loop stays tight;
 * the other conversions are quant/'s reference loops.
 */
#include <string.h>

#include "core/fp16.h"
#include "cpu/kernels/kernels.h"
#include "quant/quant.h"

#define LANES 8

/* lm_fp16_to_fp32 without branches on the common path: normal values,
 * infinities and NaNs (payload kept) by rebiasing the exponent, subnormals
 * (em < 0x400) as em * 2^-24, exact in float. */
static inline float half2f(lm_fp16 h)
{
    const uint32_t em = h & 0x7fffu;
    uint32_t bits = (em << 13) + 0x38000000u;
    bits += em >= 0x7c00u ? 0x38000000u : 0u; /* exponent 31 -> 255 */
    const float sub = (float)em * 5.9604644775390625e-8f;
    float v = em < 0x400u ? sub : lm_bits_f32(bits);
    return lm_bits_f32(lm_f32_bits(v) | (uint32_t)(h & 0x8000u) << 16);
}

static float reduce_lanes(float acc[LANES])
{
    for (int w = LANES / 2; w > 0; w /= 2)
        for (int l = 0; l < w; l++)
            acc[l] += acc[l + w];
    return acc[0];
}

/* Contract: kernels.h. */
void lm_vec_dot_f32_generic(int64_t n, float *s, const void *vx, const void *vy)
{
    const float *x = vx, *y = vy;
    float acc[LANES] = {0};
    int64_t i = 0;
    for (; i + LANES <= n; i += LANES)
        for (int l = 0; l < LANES; l++)
            acc[l] += x[i + l] * y[i + l];
    for (int l = 0; i < n; i++, l++)
        acc[l] += x[i] * y[i];
    *s = reduce_lanes(acc);
}

/* Contract: kernels.h. */
void lm_vec_dot_f16_generic(int64_t n, float *s, const void *vx, const void *vy)
{
    const lm_fp16 *x = vx, *y = vy;
    float acc[LANES] = {0};
    int64_t i = 0;
    for (; i + LANES <= n; i += LANES)
        for (int l = 0; l < LANES; l++)
            acc[l] += half2f(x[i + l]) * half2f(y[i + l]);
    for (int l = 0; i < n; i++, l++)
        acc[l] += half2f(x[i]) * half2f(y[i]);
    *s = reduce_lanes(acc);
}

/* Contract: kernels.h. */
void lm_vec_dot_bf16_generic(int64_t n, float *s, const void *vx, const void *vy)
{
    const lm_bf16 *x = vx, *y = vy;
    float acc[LANES] = {0};
    int64_t i = 0;
    for (; i + LANES <= n; i += LANES)
        for (int l = 0; l < LANES; l++)
            acc[l] += lm_bf16_to_fp32(x[i + l]) * lm_bf16_to_fp32(y[i + l]);
    for (int l = 0; i < n; i++, l++)
        acc[l] += lm_bf16_to_fp32(x[i]) * lm_bf16_to_fp32(y[i]);
    *s = reduce_lanes(acc);
}

/* Contract: kernels.h. */
void lm_fp16_to_fp32_row_generic(const void *vx, float *y, int64_t n)
{
    const lm_fp16 *x = vx;
    for (int64_t i = 0; i < n; i++)
        y[i] = half2f(x[i]);
}

/* Contract: kernels.h. quant/'s reference encoder (the same loop). */
void lm_fp32_to_fp16_row_generic(const float *x, void *y, int64_t n) { lm_quant_traits(LM_TYPE_F16)->from_float(x, y, n); }

/* Contract: kernels.h. quant/'s reference decoder. */
void lm_bf16_to_fp32_row_generic(const void *x, float *y, int64_t n) { lm_quant_traits(LM_TYPE_BF16)->to_float(x, y, n); }

/* Contract: kernels.h. quant/'s reference encoder. */
void lm_fp32_to_bf16_row_generic(const float *x, void *y, int64_t n) { lm_quant_traits(LM_TYPE_BF16)->from_float(x, y, n); }

/* Contract: kernels.h. */
void lm_f32_copy_row_generic(const void *x, float *y, int64_t n)
{
    if (n > 0)
        memmove(y, x, (size_t)n * sizeof(float));
}

/* Contract: kernels.h. */
void lm_f32_from_float_row_generic(const float *x, void *y, int64_t n)
{
    if (n > 0)
        memmove(y, x, (size_t)n * sizeof(float));
}

/* Contract: kernels.h (lm_kt_pack_fn, the F16 layout). */
void lm_kt_pack_f16(int64_t d, int64_t n, const void *k, size_t bk, void *ktv)
{
    float *kt = ktv;
    const int64_t cells = (n + LM_KT_CELLS - 1) / LM_KT_CELLS * LM_KT_CELLS;
    for (int64_t c = 0; c < cells; c++) {
        float *dst = kt + (c / LM_KT_CELLS) * d * LM_KT_CELLS + c % LM_KT_CELLS;
        const lm_fp16 *row = (const lm_fp16 *)((const char *)k + (size_t)c * bk);
        for (int64_t e = 0; e < d; e++)
            dst[e * LM_KT_CELLS] = c < n ? lm_fp16_to_fp32(row[e]) : 0.0f;
    }
}

/* Contract: kernels.h (lm_kt_pack_fn, the Q8_0 layout). */
void lm_kt_pack_q8_0(int64_t d, int64_t n, const void *k, size_t bk, void *ktv)
{
    enum { BS = 34 };
    uint8_t *kt = ktv;
    const int64_t nbk = d / 32, cells = (n + LM_KT_CELLS - 1) / LM_KT_CELLS * LM_KT_CELLS;
    for (int64_t c = 0; c < cells; c++) {
        const int64_t l = c % LM_KT_CELLS;
        const uint8_t *row = (const uint8_t *)k + (size_t)c * bk;
        for (int64_t kb = 0; kb < nbk; kb++) {
            uint8_t *blk = kt + ((c / LM_KT_CELLS) * nbk + kb) * LM_KT_Q8_BLOCK;
            for (int g = 0; g < 8; g++) {
                int8_t q[4] = {0, 0, 0, 0};
                if (c < n)
                    memcpy(q, row + kb * BS + 2 + 4 * g, 4);
                memcpy(blk + g * LM_KT_Q8_GROUP + 4 * l, q, 4);
                const int32_t corr = -128 * ((int32_t)q[0] + q[1] + q[2] + q[3]);
                memcpy(blk + g * LM_KT_Q8_GROUP + 64 + 4 * l, &corr, 4);
            }
            lm_fp16 h = 0;
            if (c < n)
                memcpy(&h, row + kb * BS, 2);
            const float scale = lm_fp16_to_fp32(h);
            memcpy(blk + 8 * LM_KT_Q8_GROUP + 4 * l, &scale, 4);
        }
    }
}
