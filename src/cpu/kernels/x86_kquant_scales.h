/* x86_kquant_scales.h - the packed sub-block scales of Q3_K and Q4_K/Q5_K
 * unpacked into bytes with 64-bit integer arithmetic, for the x86 vec_dot
 * kernels of every width (x86-avx2/, x86-avx512/ include it and widen the
 * bytes as their registers need). SSE2 only; static inline and pure. */
#ifndef LM_CPU_X86_KQUANT_SCALES_H
#define LM_CPU_X86_KQUANT_SCALES_H

#include <emmintrin.h>
#include <stdint.h>
#include <string.h>

/* The 16 signed 6-bit Q3_K scales (stored + 32) of the 12 bytes at sc, as
 * int8 scale - 32 in byte j. */
static inline __m128i x86_q3_K_scales(const uint8_t *sc)
{
    uint64_t lo;
    uint32_t hi;
    memcpy(&lo, sc, 8);
    memcpy(&hi, sc + 8, 4);
    const uint64_t m2 = 0x03030303u, m4 = 0x0F0F0F0F0F0F0F0FULL;
    const uint64_t h0 = (hi & m2) | ((hi >> 2) & m2) << 32;        /* top bits of scales 0..7 */
    const uint64_t h1 = ((hi >> 4) & m2) | ((hi >> 6) & m2) << 32; /* of scales 8..15 */
    const __m128i s8 = _mm_set_epi64x((long long)(((lo >> 4) & m4) | h1 << 4), (long long)((lo & m4) | h0 << 4));
    return _mm_sub_epi8(s8, _mm_set1_epi8(32));
}

/* The 8 6-bit scales (bytes 0..7) and 8 mins (bytes 8..15) of the 12-byte
 * Q4_K / Q5_K packing at q (quant/'s lm_quant_scale_min_k4, all j at once). */
static inline __m128i x86_k4_scales_mins(const uint8_t *q)
{
    uint64_t w01;
    uint32_t w2;
    memcpy(&w01, q, 8);
    memcpy(&w2, q + 8, 4);
    const uint64_t m6 = 0x3F3F3F3F3F3F3F3FULL, m4 = 0x0F0F0F0F0F0F0F0FULL, m2 = 0x0303030303030303ULL;
    const uint64_t a = w01 & m6;                                                             /* scales 0..3, mins 0..3 */
    const uint64_t hi = (((uint64_t)w2 | (uint64_t)w2 << 28) & m4) | ((w01 >> 6) & m2) << 4; /* 4..7 of each */
    const uint64_t scales = (a & 0xFFFFFFFFu) | hi << 32, mins = (a >> 32) | (hi & 0xFFFFFFFF00000000ULL);
    return _mm_set_epi64x((long long)mins, (long long)scales);
}

#endif
