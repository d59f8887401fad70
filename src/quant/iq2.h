/* iq2.h - the lookup tables of IQ2_XXS and IQ2_XS shared by quant/'s decoders
 * and the CPU dot kernels (block layouts: quant/blocks.h).
 *
 * An IQ2 group of 8 weights is a point of the E8 lattice's first shells
 * (a grid index: 8 bits for IQ2_XXS, 9 for IQ2_XS) times 8 signs (a 7-bit
 * sign index: the 8th sign makes the number of minus signs even) times a
 * scale. The tables are constant data (no initialisation, thread-safe).
 */
#ifndef LM_QUANT_IQ2_H
#define LM_QUANT_IQ2_H

#include <stdint.h>

/* Grid point g: byte i (little-endian) is the magnitude of coordinate i,
 * one of 8, 25, 43. */
extern const uint64_t lm_iq2xxs_grid[256];
extern const uint64_t lm_iq2xs_grid[512];

/* Sign index k (0..127): byte j is +1 (0x01) or -1 (0xff) as int8, bit j of
 * lm_iq2_sign_bits(k) set meaning -1. */
extern const uint64_t lm_iq2_sign_bytes[128];

/* The 8 sign bits of sign index k (0..127): k plus bit 7 set when k has an
 * odd number of bits (so the 8 bits have even parity). */
static inline unsigned lm_iq2_sign_bits(unsigned k)
{
    unsigned p = k ^ (k >> 4);
    p ^= p >> 2;
    p ^= p >> 1;
    return (k & 127u) | ((p & 1u) << 7);
}

#endif
