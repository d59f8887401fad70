/* iq2_x86.h - what the x86 IQ2 kernels (AVX2, AVX-512; both built with BMI2)
 * share: the sign bits of four octets computed in a register. (Each file's
 * multi-column kernels, iq2_cols of iq2_cols_x86.h, decode a super-block once
 * into the file's own `struct sb` and dot it with every column.)
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

#endif
