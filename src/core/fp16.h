/* fp16.h - IEEE half and bfloat16 conversions, bit-exact.
 *
 * fp32 -> fp16 rounds to nearest even (as F16C's _cvtss_sh with mode 0 does),
 * handles subnormals, infinities and NaN. fp32 -> bf16 rounds to nearest even
 * on the top 16 bits and keeps NaN quiet. Both are portable C; SIMD kernels
 * use the hardware instructions, which give the same bits.
 */
#ifndef LM_FP16_H
#define LM_FP16_H

#include <stdint.h>
#include <string.h>

/* LM_HOSTDEV marks the conversions (and other small header helpers) callable
 * from CUDA device code too: src/cuda/ is C++ compiled by nvcc and includes
 * these headers. Plain C sees nothing. */
#ifdef __CUDACC__
#define LM_HOSTDEV __host__ __device__
#else
#define LM_HOSTDEV
#endif

typedef uint16_t lm_fp16;
typedef uint16_t lm_bf16;

static inline LM_HOSTDEV uint32_t lm_f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static inline LM_HOSTDEV float lm_bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static inline LM_HOSTDEV float lm_fp16_to_fp32(lm_fp16 h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    if (exp == 0x1f) /* inf / nan */
        return lm_bits_f32(sign | 0x7f800000u | (man << 13));
    if (exp == 0) {
        if (man == 0)
            return lm_bits_f32(sign);
        /* subnormal: value = man * 2^-24, exact in fp32 */
        float v = (float)man * 5.9604644775390625e-8f;
        return sign ? -v : v;
    }
    return lm_bits_f32(sign | ((exp + 112u) << 23) | (man << 13));
}

static inline LM_HOSTDEV lm_fp16 lm_fp32_to_fp16(float f)
{
    uint32_t x = lm_f32_bits(f);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) /* nan: keep it a (quiet) nan */
        return (lm_fp16)(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
    if (ax >= 0x477ff000u) /* rounds to >= 65520: overflow to inf */
        return (lm_fp16)(sign | 0x7c00u);
    if (ax < 0x38800000u) { /* below the smallest normal half (2^-14) */
        if (ax < 0x33000000u) /* below half the smallest subnormal: +-0 */
            return (lm_fp16)sign;
        uint32_t e = ax >> 23;
        uint32_t m = (ax & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126u - e; /* 14..24 */
        uint32_t r = m >> shift;
        uint32_t rem = m & ((1u << shift) - 1u);
        uint32_t half = 1u << (shift - 1u);
        if (rem > half || (rem == half && (r & 1u)))
            r++;
        return (lm_fp16)(sign | r);
    }
    /* normal: rebias exponent, round mantissa to 10 bits, nearest even */
    uint32_t r = ax - 0x38000000u; /* exponent 127 -> 15 */
    uint32_t mant_lo = r & 0x1fffu;
    r >>= 13;
    if (mant_lo > 0x1000u || (mant_lo == 0x1000u && (r & 1u)))
        r++;
    return (lm_fp16)(sign | r);
}

static inline LM_HOSTDEV float lm_bf16_to_fp32(lm_bf16 h)
{
    return lm_bits_f32((uint32_t)h << 16);
}

static inline LM_HOSTDEV lm_bf16 lm_fp32_to_bf16(float f)
{
    uint32_t u = lm_f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) /* nan: force quiet */
        return (lm_bf16)((u >> 16) | 64u);
    return (lm_bf16)((u + (0x7fffu + ((u >> 16) & 1u))) >> 16);
}

#endif
