/* q8_avx2.c - AVX2 kernels of the Q8_0 family: the Q8_0 activation quantizer
 * and the Q8_0 x Q8_0 and Q4_0 x Q8_0 dot products.
 *
 * Dots: per block the 32 int8 products are summed exactly in int32 lanes
 * (maddubs on |x| and sign(x)*y, then madd), converted to float and
 * accumulated as acc += (d_x*d_y) * lanes with FMA; one horizontal sum at the
 * end. Codes must lie in [-127, 127] (what every Q8 encoder writes).
 *
 * Quantizer: ggml's AVX2 quantize_row_q8_0 arithmetic: d = amax/127 stored as
 * fp16, codes = round_half_even(x * (127/amax)). This differs from the
 * reference (quant/: x * (1/d) rounded half away from zero) by at most one
 * code step on rare inputs; it is what llama.cpp computes on this hardware.
 * n is a multiple of 32; blocks need 2-byte alignment.
 */
#include <immintrin.h>

#include "cpu/kernels/kernels.h"
#include "quant/blocks.h"

static inline float hsum_ps(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* 8 float lanes of sum(x*y) over 32 signed bytes (exact). */
static inline __m256 dot_i8x32(__m256i x, __m256i y)
{
    const __m256i ax = _mm256_sign_epi8(x, x);
    const __m256i sy = _mm256_sign_epi8(y, x);
    const __m256i p16 = _mm256_maddubs_epi16(ax, sy);
    const __m256i p32 = _mm256_madd_epi16(p16, _mm256_set1_epi16(1));
    return _mm256_cvtepi32_ps(p32);
}

/* round to nearest, ties to even (a macro: the intrinsic needs an immediate at -O0) */
#define ROUND_EVEN (_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)

static inline float f16(lm_fp16 h) { return _cvtsh_ss(h); }

/* Contract: kernels.h. */
void vec_dot_q8_0_q8_0_avx2(int64_t n, float *s, const void *vx, const void *vy)
{
    const struct lm_block_q8_0 *x = vx;
    const struct lm_block_q8_0 *y = vy;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / LM_QK; b++) {
        const __m256 d = _mm256_set1_ps(f16(x[b].d) * f16(y[b].d));
        const __m256i qx = _mm256_loadu_si256((const __m256i *)x[b].qs);
        const __m256i qy = _mm256_loadu_si256((const __m256i *)y[b].qs);
        acc = _mm256_fmadd_ps(d, dot_i8x32(qx, qy), acc);
    }
    *s = hsum_ps(acc);
}

/* Contract: kernels.h. */
void vec_dot_q4_0_q8_0_avx2(int64_t n, float *s, const void *vx, const void *vy)
{
    const struct lm_block_q4_0 *x = vx;
    const struct lm_block_q8_0 *y = vy;
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    const __m256i eight = _mm256_set1_epi8(8);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / LM_QK; b++) {
        const __m256 d = _mm256_set1_ps(f16(x[b].d) * f16(y[b].d));
        /* low lane: low nibbles (elements 0..15), high lane: high nibbles (16..31) */
        const __m128i packed = _mm_loadu_si128((const __m128i *)x[b].qs);
        __m256i qx = _mm256_set_m128i(_mm_srli_epi16(packed, 4), packed);
        qx = _mm256_sub_epi8(_mm256_and_si256(qx, low4), eight);
        const __m256i qy = _mm256_loadu_si256((const __m256i *)y[b].qs);
        acc = _mm256_fmadd_ps(d, dot_i8x32(qx, qy), acc);
    }
    *s = hsum_ps(acc);
}

/* Contract: kernels.h. */
void quantize_row_q8_0_avx2(const float *x, void *vy, int64_t n)
{
    struct lm_block_q8_0 *y = vy;
    const __m256 sign = _mm256_set1_ps(-0.0f);
    for (int64_t b = 0; b < n / LM_QK; b++, x += LM_QK) {
        __m256 v0 = _mm256_loadu_ps(x), v1 = _mm256_loadu_ps(x + 8);
        __m256 v2 = _mm256_loadu_ps(x + 16), v3 = _mm256_loadu_ps(x + 24);
        __m256 m = _mm256_max_ps(_mm256_andnot_ps(sign, v0), _mm256_andnot_ps(sign, v1));
        m = _mm256_max_ps(m, _mm256_max_ps(_mm256_andnot_ps(sign, v2), _mm256_andnot_ps(sign, v3)));
        __m128 m4 = _mm_max_ps(_mm256_extractf128_ps(m, 1), _mm256_castps256_ps128(m));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
        const float amax = _mm_cvtss_f32(m4);

        y[b].d = _cvtss_sh(amax / 127.f, _MM_FROUND_TO_NEAREST_INT);
        const __m256 id = _mm256_set1_ps(amax != 0.0f ? 127.f / amax : 0.0f);
        __m256i i0 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v0, id), ROUND_EVEN));
        __m256i i1 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v1, id), ROUND_EVEN));
        __m256i i2 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v2, id), ROUND_EVEN));
        __m256i i3 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v3, id), ROUND_EVEN));
        /* pack 32 -> 16 -> 8 bits (saturating), then undo the per-lane interleave */
        __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(i0, i1), _mm256_packs_epi32(i2, i3));
        p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
        _mm256_storeu_si256((__m256i *)y[b].qs, p);
    }
}
