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
