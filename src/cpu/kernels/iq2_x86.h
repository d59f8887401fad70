/* iq2_x86.h - what the x86 IQ2 kernels (AVX2, AVX-512; both built with BMI2)
 * share: the sign bits of four octets computed in a register, and the driver
 * of the multi-column dot kernels (the lm_vec_dot_cols_fn slot of kernels.h).
 *
 * LM_IQ2_COLS_KERNEL(name, block_type, decode) defines
 *   void name(int64_t n, int nc, float *const *s, const void *vx, const void *const *vy)
 * which decodes each super-block of the weight row once (decode(block, &sb))
 * and takes its exact integer dot with every column's Q8_K block
 * (sb_dot(&sb, qs)); the float steps are the single dot's, in its order, so
 * each column's result is bit-identical to vec_dot_iq2_*_q8_K_generic. The
 * including file defines `struct sb` and `sb_dot` for its ISA.
 */
#ifndef LM_CPU_KERNELS_IQ2_X86_H
#define LM_CPU_KERNELS_IQ2_X86_H

#include <immintrin.h>
#include <stdint.h>

#include "core/fp16.h"
#include "cpu/kernels/kernels.h"
#include "quant/blocks.h"

/* The 32 sign bits of 4 octets (bit 8i + j: element j of octet i negative)
 * from their 7-bit sign indices in the low 28 bits of k (octet i at bit 7i):
 * each index plus its parity bit (lm_iq2_sign_bits), computed in registers. */
static inline uint32_t lm_iq2_sign_bits4(uint32_t k)
{
    const uint32_t v = _pdep_u32(k, 0x7F7F7F7Fu);
    uint32_t t = v ^ (v >> 4); /* bits 0..3 of each byte: that byte's halves xor-ed */
    t ^= t >> 2;
    t ^= t >> 1;
    return v | (t & 0x01010101u) << 7;
}

#define LM_IQ2_COLS_KERNEL(name, block_type, decode)                                                                   \
    void name(int64_t n, int nc, float *const *s, const void *vx, const void *const *vy)                               \
    {                                                                                                                  \
        const block_type *x = vx;                                                                                      \
        float sumf[LM_VEC_DOT_COLS_MAX] = {0};                                                                         \
        for (int64_t b = 0; b < n / LM_QK_K; b++) {                                                                    \
            struct sb w;                                                                                               \
            decode(x + b, &w);                                                                                         \
            const float dx = lm_fp16_to_fp32(x[b].d);                                                                  \
            for (int c = 0; c < nc; c++) {                                                                             \
                const struct lm_block_q8_K *y = (const struct lm_block_q8_K *)vy[c] + b;                               \
                const float d = dx * y->d;                                                                             \
                sumf[c] += d * (float)sb_dot(&w, y->qs);                                                               \
            }                                                                                                          \
        }                                                                                                              \
        for (int c = 0; c < nc; c++)                                                                                   \
            *s[c] = 0.125f * sumf[c];                                                                                  \
    }

#endif
