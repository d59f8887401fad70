/* avx512_util.h - small inline helpers shared by the AVX-512 kernel files.
 *
 * Included only by files of this folder (compiled with -mavx512f/bw/vl/dq/
 * vnni/bf16/vbmi -mfma -mf16c -mbmi2; AVX2 instructions are available too).
 * Everything is static inline and pure, but for one flag set at init
 * (lm_avx512_prefetch). Helpers that read memory say how many bytes they
 * touch: none reads past what it is asked for (masked loads never fault on
 * masked-off bytes).
 */
#ifndef LM_CPU_AVX512_UTIL_H
#define LM_CPU_AVX512_UTIL_H

#include <immintrin.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "core/fp16.h"

/* Whether the GEMM kernels of this level prefetch the weights they stream
 * for one activation column (token generation reads each weight once, from
 * DRAM; with more columns the next group is prefetched on every CPU: F16
 * pp512 on Zen 4 71-77 t/s without, 85-86 with). Set once by
 * lm_cpu_kernels_init_avx512 while the tables are built (before any kernel
 * of the level runs; read-only afterwards): false on AMD family 25 (Zen 4),
 * where the hardware prefetchers alone stream faster (single thread, 512 MiB,
 * GB/s with / without: Q4_0 22.7 / 26.1, Q8_0 19.4 / 24.1, F16 20.8 / 26.2),
 * true elsewhere: Sapphire Rapids (the distances in each kernel file were
 * tuned there) and Zen 5 (family 26; tinyllama tg64, 2 threads, t/s without
 * / with: Q4_0 48-52 / 61, Q8_0 32-34 / 34-36, F16 18.3-18.7 / 21-22,
 * Q4_K_M 32-41 / 52-55). lm_cpu_prefetch_set (LAMINA_PREFETCH=0|1) overrides it
 * (docs/kernels.md). */
extern bool lm_avx512_prefetch;

/* A fresh zero register (a vpxord zero idiom: no execution port). GCC
 * otherwise keeps one zero register and copies it (a vmovdqa32 uop) for
 * every accumulator chain that starts from zero. */
static inline __m512i lm_avx512_zero(void)
{
    __m512i z;
    __asm__ volatile("vpxord %0, %0, %0" : "=v"(z));
    return z;
}

/* Bytes ahead that the K-quant gemm_x8 prefetches the weights of one column
 * in a burst per super-block (gemm_kquant_avx512.c; Zen 5 runs token
 * generation through it). Set by one_column_choices (init_avx512.c) with
 * the table's one-column choice: 1024
 * (LM_GEMM_PREFETCH, Sapphire Rapids), 6144 on Zen 5 (AMD family >= 26): a
 * super-block is 18-27 lines, so 1024 is less than one block ahead there.
 * tinyllama Q4_K_M tg128, 2 threads, lamina bench alternated, same minutes,
 * 2026-12-05, t/s: 1024 43.9 / 52.4, 2048 40.4-52.7, 3072 59.4 / 59.5, 4096
 * 57.3 / 58.0, 6144 61.9 / 61.0, 8192 59.3 / 56.5. */
extern int lm_avx512_kq_prefetch_one;

/* Bytes ahead of the current weight data that the dot kernels prefetch (the
 * single-token case streams weights from DRAM once); as LM_AVX2_PREFETCH. */
#ifndef LM_AVX512_PREFETCH
#define LM_AVX512_PREFETCH 1024
#endif

/* Prefetch the `bytes` bytes (a compile-time constant) starting
 * LM_AVX512_PREFETCH past p, one cache line per 64 bytes. always_inline:
 * GCC 12 otherwise sees a void function without side effects (prefetches do
 * not count), marks it const and deletes the calls. */
static inline __attribute__((always_inline)) void avx512_prefetch(const void *p, int bytes)
{
    for (int o = 0; LM_AVX512_PREFETCH > 0 && o < bytes; o += 64)
        _mm_prefetch((const char *)p + LM_AVX512_PREFETCH + o, _MM_HINT_T0);
}

/* The low n bits set (n in 0..64): the byte mask of an n-byte masked load. */
static inline __mmask64 avx512_mask64(int n) { return n >= 64 ? ~(__mmask64)0 : ((__mmask64)1 << n) - 1; }

/* Sum of the 16 float lanes (a fixed tree: halves added, then 8, 4, 2, 1). */
static inline float avx512_hsum_ps(__m512 v)
{
    __m256 h = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* out[r] = avx512_hsum_ps(v[r]) for 4 vectors, bit for bit (the same
 * additions in the same tree), with the 4 reductions sharing shuffles. */
static inline void avx512_hsum4_ps(__m512 v0, __m512 v1, __m512 v2, __m512 v3, float *out)
{
    /* lanes i + (i + 8): rows 0, 1 in s01 (8 lanes each), rows 2, 3 in s23 */
    const __m512 s01 = _mm512_add_ps(_mm512_shuffle_f32x4(v0, v1, 0x44), _mm512_shuffle_f32x4(v0, v1, 0xEE));
    const __m512 s23 = _mm512_add_ps(_mm512_shuffle_f32x4(v2, v3, 0x44), _mm512_shuffle_f32x4(v2, v3, 0xEE));
    /* lanes i + (i + 4): row r in 128-bit lane r */
    __m512 t = _mm512_add_ps(_mm512_shuffle_f32x4(s01, s23, 0x88), _mm512_shuffle_f32x4(s01, s23, 0xDD));
    t = _mm512_add_ps(t, _mm512_permute_ps(t, 0xEE)); /* lanes 0, 1: + lanes 2, 3 (movehl) */
    t = _mm512_add_ps(t, _mm512_movehdup_ps(t));      /* lane 0: + lane 1 */
    const __m512i pick = _mm512_setr_epi32(0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
    _mm_storeu_ps(out, _mm512_castps512_ps128(_mm512_permutexvar_ps(pick, t)));
}

/* Sum of the 8 / 4 float lanes. */
static inline float avx512_hsum_ps256(__m256 h)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* One fp16 value (F16C; the value of lm_fp16_to_fp32 for non-NaN input). */
static inline float avx512_f16(lm_fp16 h) { return _cvtsh_ss(h); }

/* The fp16 values at p, p + stride, p + 2 stride, p + 3 stride (bytes; 2
 * bytes read at each) as 4 floats. Scalar loads: no byte outside the four
 * fields is read, and the vector ports stay free. */
static inline __m128 avx512_f16x4(const void *p, size_t stride)
{
    const uint8_t *b = p;
    uint16_t h[4];
    for (int i = 0; i < 4; i++)
        memcpy(&h[i], b + (size_t)i * stride, 2);
    const uint64_t w = (uint64_t)h[0] | (uint64_t)h[1] << 16 | (uint64_t)h[2] << 32 | (uint64_t)h[3] << 48;
    return _mm_cvtph_ps(_mm_cvtsi64_si128((long long)w));
}

/* The two adjacent fp16 fields at p, p + stride, ..., p + 3 stride (4 bytes
 * read at each; e.g. (d, m) of Q4_1 blocks or (d, s) of Q8_1 blocks) as
 * 8 floats [a0 b0 a1 b1 a2 b2 a3 b3]. */
static inline __m256 avx512_f16x4_pairs(const void *p, size_t stride)
{
    const uint8_t *b = p;
    uint32_t w[4];
    for (int i = 0; i < 4; i++)
        memcpy(&w[i], b + (size_t)i * stride, 4);
    const __m128i lo = _mm_cvtsi64_si128((long long)((uint64_t)w[0] | (uint64_t)w[1] << 32));
    const __m128i hi = _mm_cvtsi64_si128((long long)((uint64_t)w[2] | (uint64_t)w[3] << 32));
    return _mm256_cvtph_ps(_mm_unpacklo_epi64(lo, hi));
}

/* Lanes 0..7 = lane a of v, lanes 8..15 = lane b (a, b constants): the
 * per-block scale of a zmm holding two 32-element blocks. */
static inline __m512 avx512_spread2(__m512 v, int a, int b)
{
    const __m512i idx = _mm512_mask_blend_epi32(0xFF00, _mm512_set1_epi32(a), _mm512_set1_epi32(b));
    return _mm512_permutexvar_ps(idx, v);
}

/* 32-bit lanes of sum(q * y) over groups of 4 bytes: q unsigned, y signed
 * (VNNI vpdpbusd; exact, no saturation). */
static inline __m512i avx512_dot_u8s8(__m512i q, __m512i y)
{
    return _mm512_dpbusd_epi32(_mm512_setzero_si512(), q, y);
}

/* The same for signed x (any int8, -128 included): |x| as the unsigned
 * operand, y negated where x < 0 (y must not be -128). */
static inline __m512i avx512_dot_s8s8(__m512i x, __m512i y)
{
    const __mmask64 neg = _mm512_movepi8_mask(x);
    return avx512_dot_u8s8(_mm512_abs_epi8(x), _mm512_mask_sub_epi8(y, neg, _mm512_setzero_si512(), y));
}

/* Two 32-byte rows (p, q) as one zmm [p | q]. */
static inline __m512i avx512_load2x32(const void *p, const void *q)
{
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)p)),
                              _mm256_loadu_si256((const __m256i *)q), 1);
}

/* Bytes 0, 1, ..., 63. */
static inline __m512i avx512_iota8(void)
{
    return _mm512_set_epi8(63, 62, 61, 60, 59, 58, 57, 56, 55, 54, 53, 52, 51, 50, 49, 48, 47, 46, 45, 44, 43, 42, 41,
                           40, 39, 38, 37, 36, 35, 34, 33, 32, 31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19, 18,
                           17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
}

#endif
