/* quant_avx2.c - AVX2 activation encoders (F32 -> Q8_0, Q8_1, Q8_K) and the
 * Q4_0 / Q8_0 row decoders (used by GET_ROWS and the dequantizing matmul).
 *
 * Rounding (docs/kernels.md, "Encoders"):
 *   - Q8_0 and Q8_1 use ggml's AVX2 quantize_row_q8_0 / _q8_1 arithmetic:
 *     d = amax/127 stored as fp16, codes = round_half_even(x * (127/amax));
 *     Q8_1 also stores s = fp16(d * sum(codes)). This differs from quant/'s
 *     reference (x * (1/d), half away from zero) by at most one code step on
 *     rare inputs; it is what llama.cpp computes on x86.
 *   - Q8_K equals quant/'s reference (ggml's quantize_row_q8_K_ref, which
 *     ggml also runs on x86) byte for byte, for every input: the same max
 *     search (first element of largest |x|, NaNs skipped), iscale = -127/max,
 *     nearest_int by the same 1.5*2^23 addition, min(127, .) and a wrap to int8.
 *   - Decoders give the bits of quant/'s decoders ((q - 8) * d, q * d).
 * n is a multiple of the block size; blocks need their natural alignment.
 */
#include "avx2_util.h"
#include "cpu/kernels/kernels.h"
#include "quant/blocks.h"

/* round to nearest, ties to even (a macro: the intrinsic needs an immediate at -O0) */
#define ROUND_EVEN (_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)

/* max |x| over 32 floats. */
static inline float absmax32(const __m256 v[4])
{
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 m = _mm256_max_ps(_mm256_andnot_ps(sign, v[0]), _mm256_andnot_ps(sign, v[1]));
    m = _mm256_max_ps(m, _mm256_max_ps(_mm256_andnot_ps(sign, v[2]), _mm256_andnot_ps(sign, v[3])));
    __m128 m4 = _mm_max_ps(_mm256_extractf128_ps(m, 1), _mm256_castps256_ps128(m));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    return _mm_cvtss_f32(m4);
}

/* ggml's AVX2 Q8 block: writes d (fp16) and the 32 codes; returns d and, in
 * *sum, the sum of the codes. */
static inline float q8_block_even(const float *x, lm_fp16 *d_out, int8_t *qs, int *sum)
{
    __m256 v[4] = {_mm256_loadu_ps(x), _mm256_loadu_ps(x + 8), _mm256_loadu_ps(x + 16), _mm256_loadu_ps(x + 24)};
    const float amax = absmax32(v);
    const float d = amax / 127.f;
    *d_out = _cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT);
    const __m256 id = _mm256_set1_ps(amax != 0.0f ? 127.f / amax : 0.0f);
    __m256i i[4];
    for (int k = 0; k < 4; k++)
        i[k] = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v[k], id), ROUND_EVEN));
    if (sum) {
        const __m256i s8 = _mm256_add_epi32(_mm256_add_epi32(i[0], i[1]), _mm256_add_epi32(i[2], i[3]));
        __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s8), _mm256_extracti128_si256(s8, 1));
        s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4E));
        s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xB1));
        *sum = _mm_cvtsi128_si32(s4);
    }
    /* pack 32 -> 16 -> 8 bits (saturating), then undo the per-lane interleave */
    __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(i[0], i[1]), _mm256_packs_epi32(i[2], i[3]));
    p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256((__m256i *)qs, p);
    return d;
}

/* Contract: kernels.h. */
void lm_quantize_row_q8_0_avx2(const float *x, void *vy, int64_t n)
{
    struct lm_block_q8_0 *y = vy;
    for (int64_t b = 0; b < n / LM_QK; b++)
        q8_block_even(x + b * LM_QK, &y[b].d, y[b].qs, NULL);
}

/* Contract: kernels.h. */
void lm_quantize_row_q8_1_avx2(const float *x, void *vy, int64_t n)
{
    struct lm_block_q8_1 *y = vy;
    for (int64_t b = 0; b < n / LM_QK; b++) {
        int sum = 0;
        const float d = q8_block_even(x + b * LM_QK, &y[b].d, y[b].qs, &sum);
        y[b].s = _cvtss_sh(d * (float)sum, _MM_FROUND_TO_NEAREST_INT);
    }
}

/* ---- Q8_K ---- */

/* The first x[j] (j < 256) with |x[j]| == amax (amax is one of them). */
static float first_with_abs(const float *x, float amax)
{
    const __m256 sign = _mm256_set1_ps(-0.0f), a = _mm256_set1_ps(amax);
    for (int j = 0; j < LM_QK_K; j += 8) {
        const int m = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(x + j)), a, _CMP_EQ_OQ));
        if (m)
            return x[j + __builtin_ctz((unsigned)m)];
    }
    return 0.0f; /* unreachable for amax taken from x */
}

/* The 32 codes of v[0..3] * iscale as the reference computes them: int
 * bits of (v*iscale + 1.5*2^23) & 0x7fffff minus 2^22, min 127, low byte. */
static inline __m256i k_codes(const float *x, __m256 iscale)
{
    const __m256 magic = _mm256_set1_ps(12582912.f);
    __m256i i[4];
    for (int k = 0; k < 4; k++) {
        __m256i b = _mm256_castps_si256(_mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(x + 8 * k), iscale), magic));
        b = _mm256_sub_epi32(_mm256_and_si256(b, _mm256_set1_epi32(0x007fffff)), _mm256_set1_epi32(0x00400000));
        i[k] = _mm256_and_si256(_mm256_min_epi32(b, _mm256_set1_epi32(127)), _mm256_set1_epi32(0xff));
    }
    /* values 0..255: the unsigned packs keep them, i.e. the low byte (the wrap) */
    __m256i p = _mm256_packus_epi16(_mm256_packus_epi32(i[0], i[1]), _mm256_packus_epi32(i[2], i[3]));
    return _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

/* bsums[0..15] of the 256 codes in q[0..7] (32 codes each). */
static inline void k_bsums(const __m256i q[8], int16_t *bsums)
{
    const __m256i one8 = _mm256_set1_epi8(1);
    __m256i m[8];
    for (int k = 0; k < 8; k++) /* lanes: sums of codes 4i..4i+3 of q[k] */
        m[k] = avx2_sum_pairs_i16(_mm256_maddubs_epi16(one8, q[k]));
    const __m256i h01 = _mm256_hadd_epi32(m[0], m[1]), h23 = _mm256_hadd_epi32(m[2], m[3]);
    const __m256i h45 = _mm256_hadd_epi32(m[4], m[5]), h67 = _mm256_hadd_epi32(m[6], m[7]);
    /* g0 = [b0 b2 b4 b6 | b1 b3 b5 b7], g1 = [b8 .. b14 | b9 .. b15] */
    const __m256i g0 = _mm256_hadd_epi32(h01, h23), g1 = _mm256_hadd_epi32(h45, h67);
    const __m256i p = _mm256_packs_epi32(g0, g1); /* |bsum| <= 2032: no saturation */
    const __m128i even = _mm256_castsi256_si128(p), odd = _mm256_extracti128_si256(p, 1);
    _mm_storeu_si128((__m128i *)bsums, _mm_unpacklo_epi16(even, odd));
    _mm_storeu_si128((__m128i *)(bsums + 8), _mm_unpackhi_epi16(even, odd));
}

/* Contract: kernels.h. */
void lm_quantize_row_q8_K_avx2(const float *x, void *vy, int64_t n)
{
    struct lm_block_q8_K *y = vy;
    const __m256 sign = _mm256_set1_ps(-0.0f);
    for (int64_t b = 0; b < n / LM_QK_K; b++, x += LM_QK_K) {
        /* max(|x|, acc): a NaN lane of x leaves acc unchanged, as the reference's '>' does */
        __m256 m0 = _mm256_setzero_ps(), m1 = m0;
        for (int j = 0; j < LM_QK_K; j += 16) {
            m0 = _mm256_max_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(x + j)), m0);
            m1 = _mm256_max_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(x + j + 8)), m1);
        }
        __m256 m = _mm256_max_ps(m0, m1);
        __m128 m4 = _mm_max_ps(_mm256_extractf128_ps(m, 1), _mm256_castps256_ps128(m));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
        const float amax = _mm_cvtss_f32(m4);
        if (!(amax != 0.0f)) {
            memset(&y[b], 0, sizeof y[b]);
            continue;
        }
        const float iscale = -127.f / first_with_abs(x, amax);
        const __m256 vs = _mm256_set1_ps(iscale);
        __m256i q[8];
        for (int k = 0; k < 8; k++) {
            q[k] = k_codes(x + 32 * k, vs);
            _mm256_storeu_si256((__m256i *)(y[b].qs + 32 * k), q[k]);
        }
        k_bsums(q, y[b].bsums);
        y[b].d = 1 / iscale;
    }
}

/* ---- decoders ---- */

/* Contract: kernels.h. */
void lm_dequantize_row_q4_0_avx2(const void *vx, float *y, int64_t n)
{
    const struct lm_block_q4_0 *x = vx;
    for (int64_t b = 0; b < n / LM_QK; b++, y += LM_QK) {
        const __m256 d = _mm256_set1_ps(avx2_f16(x[b].d));
        const __m256i q = _mm256_sub_epi8(avx2_nibbles(x[b].qs), _mm256_set1_epi8(8));
        const __m128i lo = _mm256_castsi256_si128(q), hi = _mm256_extracti128_si256(q, 1);
        _mm256_storeu_ps(y, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(lo)), d));
        _mm256_storeu_ps(y + 8, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(lo, 8))), d));
        _mm256_storeu_ps(y + 16, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(hi)), d));
        _mm256_storeu_ps(y + 24, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(hi, 8))), d));
    }
}

/* Contract: kernels.h. */
void lm_dequantize_row_q8_0_avx2(const void *vx, float *y, int64_t n)
{
    const struct lm_block_q8_0 *x = vx;
    for (int64_t b = 0; b < n / LM_QK; b++, y += LM_QK) {
        const __m256 d = _mm256_set1_ps(avx2_f16(x[b].d));
        for (int k = 0; k < 4; k++) {
            const __m128i q = _mm_loadl_epi64((const __m128i *)(x[b].qs + 8 * k));
            _mm256_storeu_ps(y + 8 * k, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)), d));
        }
    }
}
