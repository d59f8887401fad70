/* bf16_avx2.c - AVX2/FMA dot product of BF16 rows and BF16 <-> F32 row
 * conversions.
 *
 * AVX2 has no bf16 arithmetic: a bf16 is the top half of a float, so the dot
 * widens by shifts. For 16 bf16 values in a 256-bit load, the even ones
 * (low halves of the 32-bit lanes) become floats by a left shift of 16, the
 * odd ones by masking off the low half; x and y are split the same way, so
 * the products pair up. 4 accumulators (64 elements per step), then 16-wide
 * steps, then a scalar tail; any n, unaligned loads.
 * Conversions give the bits of core/fp16.h: widening is exact; narrowing
 * rounds to nearest even on the top 16 bits and makes NaNs quiet (| 0x40).
 */
#include "avx2_util.h"
#include "cpu/kernels/kernels.h"

static inline __m256 bf16_even(__m256i v) { return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16)); }

static inline __m256 bf16_odd(__m256i v)
{
    return _mm256_castsi256_ps(_mm256_and_si256(v, _mm256_set1_epi32((int)0xffff0000u)));
}

static inline __m256i load16(const lm_bf16 *p) { return _mm256_loadu_si256((const __m256i *)p); }

/* acc_e += even(x) * even(y); acc_o += odd(x) * odd(y) over 16 elements. */
static inline __attribute__((always_inline)) void bf16_step(const lm_bf16 *xp, const lm_bf16 *yp, __m256 *acc_e,
                                                            __m256 *acc_o)
{
    const __m256i vx = load16(xp), vy = load16(yp);
    *acc_e = _mm256_fmadd_ps(bf16_even(vx), bf16_even(vy), *acc_e);
    *acc_o = _mm256_fmadd_ps(bf16_odd(vx), bf16_odd(vy), *acc_o);
}

/* Contract: kernels.h. */
void lm_vec_dot_bf16_avx2(int64_t n, float *s, const void *vx, const void *vy)
{
    const lm_bf16 *x = vx, *y = vy;
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        avx2_prefetch((const char *)(x + i) + LM_AVX2_PREFETCH);
        avx2_prefetch((const char *)(x + i) + LM_AVX2_PREFETCH + 64);
        bf16_step(x + i, y + i, &a0, &a1);
        bf16_step(x + i + 16, y + i + 16, &a2, &a3);
        bf16_step(x + i + 32, y + i + 32, &a4, &a5);
        bf16_step(x + i + 48, y + i + 48, &a6, &a7);
    }
    for (; i + 16 <= n; i += 16)
        bf16_step(x + i, y + i, &a0, &a1);
    a0 = _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3));
    a4 = _mm256_add_ps(_mm256_add_ps(a4, a5), _mm256_add_ps(a6, a7));
    float sum = avx2_hsum_ps(_mm256_add_ps(a0, a4));
    for (; i < n; i++)
        sum += lm_bf16_to_fp32(x[i]) * lm_bf16_to_fp32(y[i]);
    *s = sum;
}

/* Contract: kernels.h. */
void lm_bf16_to_fp32_row_avx2(const void *vx, float *y, int64_t n)
{
    const lm_bf16 *x = vx;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(x + i)));
        _mm256_storeu_ps(y + i, _mm256_castsi256_ps(_mm256_slli_epi32(w, 16)));
    }
    for (; i < n; i++)
        y[i] = lm_bf16_to_fp32(x[i]);
}

/* 8 floats -> 8 bf16 in the 16-bit halves of 32-bit lanes (values < 2^16). */
static inline __m256i to_bf16_lanes(__m256 f)
{
    const __m256i u = _mm256_castps_si256(f);
    const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    const __m256i bias = _mm256_add_epi32(odd, _mm256_set1_epi32(0x7fff));
    const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(u, bias), 16);
    const __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(64));
    const __m256 nan = _mm256_cmp_ps(f, f, _CMP_UNORD_Q);
    return _mm256_blendv_epi8(rounded, quiet, _mm256_castps_si256(nan));
}

/* Contract: kernels.h. */
void lm_fp32_to_bf16_row_avx2(const float *x, void *vy, int64_t n)
{
    lm_bf16 *y = vy;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m256i a = to_bf16_lanes(_mm256_loadu_ps(x + i)), b = to_bf16_lanes(_mm256_loadu_ps(x + i + 8));
        /* packus works per 128-bit lane: [a0-3 b0-3 | a4-7 b4-7] -> reorder the 64-bit quarters */
        const __m256i p = _mm256_permute4x64_epi64(_mm256_packus_epi32(a, b), 0xD8);
        _mm256_storeu_si256((__m256i *)(y + i), p);
    }
    for (; i < n; i++)
        y[i] = lm_fp32_to_bf16(x[i]);
}
