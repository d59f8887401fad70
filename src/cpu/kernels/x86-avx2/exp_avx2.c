/* exp_avx2.c - softmax's exponentials on 8 lanes (kernels.h lm_exp_sum_fn),
 * and GELU (lm_gelu_fn) and SiLU (lm_silu_fn) through the same exp.
 *
 * exp(t), t = x - max: n = round(t log2 e), r = t - n ln2 (ln2 split in a
 * 16-bit head and a tail, two FMAs: r exact to ~2^-35), exp(r) by its Taylor
 * polynomial of degree 7 on |r| <= ln2/2 (truncation < 2^-27 relative), then
 * times 2^n built in the exponent field, in two factors 2^(n/2) 2^(n - n/2)
 * so that subnormal results (t down to -104) come out of one rounded
 * multiply; t < -104 gives 0 (expf is 0 there too), t > 88.8 gives inf.
 * Measured against expf on every float in [-104, 0]: within 2 ulp (tested in
 * tests/cpu/test_exp.c). The sum runs in 4 double lanes per 8 floats.
 */
#include <immintrin.h>
#include <math.h>

#include "cpu/kernels/kernels.h"

static inline __m256 exp8(__m256 t)
{
    const __m256 zero_below = _mm256_cmp_ps(t, _mm256_set1_ps(-104.0f), _CMP_LT_OQ);
    t = _mm256_min_ps(_mm256_max_ps(t, _mm256_set1_ps(-104.0f)), _mm256_set1_ps(88.8f)); /* NaN: max keeps 2nd */
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(t, _mm256_set1_ps(1.44269504088896341f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693145751953125f), t);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(1.428606765330187045e-06f), r);
    __m256 p = _mm256_set1_ps(1.0f / 5040);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 720));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    const __m256i ni = _mm256_cvtps_epi32(n);
    const __m256i n1 = _mm256_srai_epi32(ni, 1), n2 = _mm256_sub_epi32(ni, n1);
    const __m256i bias = _mm256_set1_epi32(127);
    const __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
    const __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
    return _mm256_andnot_ps(zero_below, _mm256_mul_ps(_mm256_mul_ps(p, s1), s2));
}

/* Contract: kernels.h. */
double lm_exp_sum_avx2(int64_t n, float *y, const float *x, float max)
{
    const __m256 vmax = _mm256_set1_ps(max);
    __m256d s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 t = _mm256_sub_ps(_mm256_loadu_ps(x + i), vmax);
        /* NaN inputs: the clamps above would turn them into numbers */
        const __m256 nan = _mm256_cmp_ps(t, t, _CMP_UNORD_Q);
        const __m256 e = _mm256_blendv_ps(exp8(t), t, nan);
        _mm256_storeu_ps(y + i, e);
        s0 = _mm256_add_pd(s0, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
        s1 = _mm256_add_pd(s1, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
    }
    const __m256d s = _mm256_add_pd(s0, s1);
    __m128d h = _mm_add_pd(_mm256_castpd256_pd128(s), _mm256_extractf128_pd(s, 1));
    double sum = _mm_cvtsd_f64(_mm_add_sd(h, _mm_unpackhi_pd(h, h)));
    if (i < n) { /* the tail through the same vector code (no libm mix) */
        float tx[8], ty[8];
        for (int j = 0; j < 8; j++)
            tx[j] = i + j < n ? x[i + j] : -INFINITY;
        const __m256 t = _mm256_sub_ps(_mm256_loadu_ps(tx), vmax);
        const __m256 nan = _mm256_cmp_ps(t, t, _CMP_UNORD_Q);
        _mm256_storeu_ps(ty, _mm256_blendv_ps(exp8(t), t, nan));
        for (int j = 0; i + j < n; j++) {
            y[i + j] = ty[j];
            sum += (double)ty[j];
        }
    }
    return sum;
}

/* gelu(x) = x / (1 + exp(-2u)), u = sqrt(2/pi) x (1 + 0.044715 x^2): the
 * tanh form rewritten, no cancellation for negative x. Past exp's range
 * (-2u > 88.8) the quotient is x / inf = -0, as the limit is. */
static inline __m256 gelu8(__m256 x)
{
    const __m256 x2 = _mm256_mul_ps(x, x);
    const __m256 u = _mm256_mul_ps(_mm256_mul_ps(x, _mm256_set1_ps(-1.59576912160573071176f)),
                                   _mm256_fmadd_ps(x2, _mm256_set1_ps(0.044715f), _mm256_set1_ps(1.0f)));
    const __m256 y = _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), exp8(u)));
    const __m256 ninf = _mm256_cmp_ps(x, _mm256_set1_ps(-INFINITY), _CMP_EQ_OQ); /* -inf / inf: -0, not NaN */
    return _mm256_blendv_ps(y, _mm256_set1_ps(-0.0f), ninf);
}

/* y[i] = f(x[i]) for i < n, 8 lanes at a time; the tail through a zero-padded
 * buffer (same lanes, same bits). f is a constant after inlining. */
static inline __attribute__((always_inline)) void map8(int64_t n, float *y, const float *x, __m256 (*f)(__m256))
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, f(_mm256_loadu_ps(x + i)));
    if (i < n) {
        float buf[8] = {0};
        for (int64_t j = i; j < n; j++)
            buf[j - i] = x[j];
        _mm256_storeu_ps(buf, f(_mm256_loadu_ps(buf)));
        for (int64_t j = i; j < n; j++)
            y[j] = buf[j - i];
    }
}

/* Contract: kernels.h. */
void lm_gelu_avx2(int64_t n, float *y, const float *x) { map8(n, y, x, gelu8); }

/* silu(x) = x / (1 + exp(-x)); exp8 gives inf past 88.8, and x / inf = -0
 * (libm's expf overflows at 88.73: the few floats between give -0 there and
 * ~1e-37 here, both within the slot's contract). */
static inline __m256 silu8(__m256 x)
{
    const __m256 e = exp8(_mm256_sub_ps(_mm256_setzero_ps(), x));
    const __m256 y = _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
    const __m256 nan = _mm256_cmp_ps(x, x, _CMP_UNORD_Q); /* exp8's clamps turn NaN into a number */
    const __m256 ninf = _mm256_cmp_ps(x, _mm256_set1_ps(-INFINITY), _CMP_EQ_OQ); /* -inf / inf: -0 */
    return _mm256_blendv_ps(_mm256_blendv_ps(y, _mm256_set1_ps(-0.0f), ninf), x, nan);
}

/* Contract: kernels.h. */
void lm_silu_avx2(int64_t n, float *y, const float *x) { map8(n, y, x, silu8); }

/* Contract: kernels.h (lm_scale_max_fn): 8 lanes, two running maxima; the
 * last n % 16 values by the generic level (the same steps per value). */
float lm_scale_max_avx2(int64_t n, float *s, const float *m, float scale, float slope)
{
    const __m256 vs = _mm256_set1_ps(scale), vk = _mm256_set1_ps(slope);
    __m256 lane[2] = {_mm256_set1_ps(-INFINITY), _mm256_set1_ps(-INFINITY)};
    int64_t j = 0;
    for (; j + 16 <= n; j += 16)
        for (int l = 0; l < 2; l++) {
            __m256 w = _mm256_mul_ps(_mm256_loadu_ps(s + j + 8 * l), vs);
            if (m)
                w = _mm256_add_ps(w, _mm256_mul_ps(vk, _mm256_loadu_ps(m + j + 8 * l)));
            _mm256_storeu_ps(s + j + 8 * l, w);
            lane[l] = _mm256_blendv_ps(lane[l], w, _mm256_cmp_ps(w, lane[l], _CMP_GT_OQ));
        }
    float v[8], max = lm_scale_max_generic(n - j, s + j, m ? m + j : NULL, scale, slope);
    _mm256_storeu_ps(v, _mm256_max_ps(lane[0], lane[1]));
    for (int l = 0; l < 8; l++)
        max = v[l] > max ? v[l] : max;
    return max;
}
