/* avx2_util.h - small inline helpers shared by the AVX2 kernel files.
 *
 * Included only by files of this folder (compiled with -mavx2 -mfma -mf16c
 * -mbmi2). Everything is static inline and pure; no state.
 */
#ifndef LM_CPU_AVX2_UTIL_H
#define LM_CPU_AVX2_UTIL_H

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "core/fp16.h"

/* Bytes ahead of the current weight block that the dot kernels prefetch, for
 * the single-token case (weights streamed once from DRAM): ~100 ns of DRAM
 * latency at ~10 GB/s per core is ~1 KiB. Past the end of a row it fetches
 * the next row, which the same thread usually dots next. On the shared
 * development machine 1 KiB measured at least as well as 384 B or none, but
 * within the noise; it is a constant to tune per machine. */
#ifndef LM_AVX2_PREFETCH
#define LM_AVX2_PREFETCH 1024
#endif

/* An empty asm that "changes" v: keeps each column's running sum in a GEMM
 * kernel a linear chain in its register. GCC otherwise reassociates the
 * int16 adds of several columns into trees and spills the partial products
 * to the stack (Q4_K measured ~9 % slower, Q4_0 see gemm_avx2.c). */
#define PIN(v) __asm__("" : "+x"(v))

/* Prefetch (a no-op when LM_AVX2_PREFETCH is defined as 0, for benchmarking).
 * always_inline: GCC 12 drops the prefetch of a plain inline helper called
 * from an always_inline kernel body. */
static inline __attribute__((always_inline)) void avx2_prefetch(const void *p)
{
    if (LM_AVX2_PREFETCH > 0)
        _mm_prefetch((const char *)p, _MM_HINT_T0);
}

/* Sum of the 8 float lanes. */
static inline float avx2_hsum_ps(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* Sum of the 4 float lanes. */
static inline float avx2_hsum_ps128(__m128 s)
{
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* One fp16 value (F16C; the same value as lm_fp16_to_fp32 for non-NaN input). */
static inline float avx2_f16(lm_fp16 h) { return _cvtsh_ss(h); }

/* d_x * d_y of two fp16 scales as a broadcast vector. */
static inline __m256 avx2_scale2(lm_fp16 dx, lm_fp16 dy) { return _mm256_set1_ps(avx2_f16(dx) * avx2_f16(dy)); }

/* Two adjacent fp16 fields at p (e.g. d and m of a Q4_1 block) as floats in
 * lanes 0 and 1 (unaligned-safe). */
static inline __m128 avx2_f16_pair(const void *p)
{
    uint32_t u;
    memcpy(&u, p, 4);
    return _mm_cvtph_ps(_mm_cvtsi32_si128((int)u));
}

/* Int16 pair sums to int32: sum of adjacent lanes (exact). */
static inline __m256i avx2_sum_pairs_i16(__m256i v) { return _mm256_madd_epi16(v, _mm256_set1_epi16(1)); }

/* 8 int32 lanes of sum(x*y) over 32 signed bytes, exact when x has no -128
 * (|x| goes through the unsigned operand of maddubs; pair sums <= 2*128*127). */
static inline __m256i avx2_dot_i8(__m256i x, __m256i y)
{
    const __m256i p16 = _mm256_maddubs_epi16(_mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x));
    return avx2_sum_pairs_i16(p16);
}

/* The 32 4-bit codes of a 16-byte Q4 block: lane 0 (bytes 0..15) the low
 * nibbles (elements 0..15), lane 1 the high nibbles (elements 16..31).
 * Broadcast load + variable shift: 2 vector uops (not 3 with an insert). */
static inline __m256i avx2_nibbles(const uint8_t *qs)
{
    const __m256i p = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)qs));
    return _mm256_and_si256(_mm256_srlv_epi32(p, _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4)), _mm256_set1_epi8(0x0F));
}

/* 0xFF in byte j where bit j of the little-endian 32-bit word at qh is set. */
static inline __m256i avx2_bits_to_bytes(const uint8_t *qh)
{
    uint32_t u;
    memcpy(&u, qh, 4);
    const __m256i spread = _mm256_shuffle_epi8(_mm256_set1_epi32((int)u),
                                               _mm256_setr_epi64x(0, 0x0101010101010101LL, 0x0202020202020202LL,
                                                                  0x0303030303030303LL));
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
    return _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
}

#endif
