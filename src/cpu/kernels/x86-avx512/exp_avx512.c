/* exp_avx512.c - softmax's exponentials on 16 lanes (kernels.h lm_exp_sum_fn),
 * and GELU (lm_gelu_fn) and SiLU (lm_silu_fn) through the same exp.
 *
 * The arithmetic of exp_avx2.c (n = round(t log2 e), r = t - n ln2 in two
 * FMAs, Taylor polynomial of degree 7), with vscalefps for the 2^n factor,
 * which rounds subnormal results once and gives 0 / inf past the ends; the
 * tail is a masked load and store. Within 2 ulp of expf (tests/cpu/test_exp.c).
 * The sum runs in 8 double lanes per 16 floats.
 */
#include <immintrin.h>
#include <math.h>

#include "cpu/kernels/kernels.h"

static inline __m512 exp16(__m512 t)
{
    t = _mm512_max_ps(t, _mm512_set1_ps(-110.0f)); /* NaN becomes -110 here: exp_or_nan restores it */
    t = _mm512_min_ps(t, _mm512_set1_ps(100.0f));
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(t, _mm512_set1_ps(1.44269504088896341f)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125f), t);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.428606765330187045e-06f), r);
    __m512 p = _mm512_set1_ps(1.0f / 5040);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(p, n);
}

static inline __m512 exp_or_nan(__m512 t)
{
    const __mmask16 nan = _mm512_cmp_ps_mask(t, t, _CMP_UNORD_Q);
    return _mm512_mask_blend_ps(nan, exp16(t), t);
}

/* Contract: kernels.h. */
double lm_exp_sum_avx512(int64_t n, float *y, const float *x, float max)
{
    const __m512 vmax = _mm512_set1_ps(max);
    __m512d s0 = _mm512_setzero_pd(), s1 = _mm512_setzero_pd();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512 e = exp_or_nan(_mm512_sub_ps(_mm512_loadu_ps(x + i), vmax));
        _mm512_storeu_ps(y + i, e);
        s0 = _mm512_add_pd(s0, _mm512_cvtps_pd(_mm512_castps512_ps256(e)));
        s1 = _mm512_add_pd(s1, _mm512_cvtps_pd(_mm512_extractf32x8_ps(e, 1)));
    }
    if (i < n) {
        const __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        const __m512 e = _mm512_maskz_mov_ps(m, exp_or_nan(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + i), vmax)));
        _mm512_mask_storeu_ps(y + i, m, e);
        s0 = _mm512_add_pd(s0, _mm512_cvtps_pd(_mm512_castps512_ps256(e)));
        s1 = _mm512_add_pd(s1, _mm512_cvtps_pd(_mm512_extractf32x8_ps(e, 1)));
    }
    return _mm512_reduce_add_pd(_mm512_add_pd(s0, s1));
}

/* gelu(x) = x / (1 + exp(-2u)) as in exp_avx2.c; vscalefps gives inf past
 * the top of exp's range, and x / inf = -0. */
static inline __m512 gelu16(__m512 x)
{
    const __m512 x2 = _mm512_mul_ps(x, x);
    const __m512 u = _mm512_mul_ps(_mm512_mul_ps(x, _mm512_set1_ps(-1.59576912160573071176f)),
                                   _mm512_fmadd_ps(x2, _mm512_set1_ps(0.044715f), _mm512_set1_ps(1.0f)));
    const __m512 y = _mm512_div_ps(x, _mm512_add_ps(_mm512_set1_ps(1.0f), exp16(u)));
    const __mmask16 ninf = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-INFINITY), _CMP_EQ_OQ); /* -inf / inf: -0 */
    return _mm512_mask_blend_ps(ninf, y, _mm512_set1_ps(-0.0f));
}

/* y[i] = f(x[i]) for i < n, 16 lanes at a time, the tail masked (lanes past
 * n compute f(0) and are not stored). f is a constant after inlining. */
static inline __attribute__((always_inline)) void map16(int64_t n, float *y, const float *x, __m512 (*f)(__m512))
{
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(y + i, f(_mm512_loadu_ps(x + i)));
    if (i < n) {
        const __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        _mm512_mask_storeu_ps(y + i, m, f(_mm512_maskz_loadu_ps(m, x + i)));
    }
}

/* Contract: kernels.h. */
void lm_gelu_avx512(int64_t n, float *y, const float *x) { map16(n, y, x, gelu16); }

/* silu(x) = x / (1 + exp(-x)); exp16 gives inf past the top of its range,
 * and x / inf = -0. */
static inline __m512 silu16(__m512 x)
{
    const __m512 e = exp_or_nan(_mm512_sub_ps(_mm512_setzero_ps(), x));
    const __m512 y = _mm512_div_ps(x, _mm512_add_ps(_mm512_set1_ps(1.0f), e));
    const __mmask16 ninf = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-INFINITY), _CMP_EQ_OQ); /* -inf / inf: -0 */
    return _mm512_mask_blend_ps(ninf, y, _mm512_set1_ps(-0.0f));
}

/* Contract: kernels.h. */
void lm_silu_avx512(int64_t n, float *y, const float *x) { map16(n, y, x, silu16); }

/* Contract: kernels.h (lm_scale_max_fn): 16 lanes, four running maxima
 * (the compare-and-move chain would otherwise bound the loop); the tail
 * masked. */
float lm_scale_max_avx512(int64_t n, float *s, const float *m, float scale, float slope)
{
    const __m512 vs = _mm512_set1_ps(scale), vk = _mm512_set1_ps(slope);
    __m512 lane[4];
    for (int l = 0; l < 4; l++)
        lane[l] = _mm512_set1_ps(-INFINITY);
    int64_t j = 0;
    for (; j + 64 <= n; j += 64)
        for (int l = 0; l < 4; l++) {
            __m512 w = _mm512_mul_ps(_mm512_loadu_ps(s + j + 16 * l), vs);
            if (m)
                w = _mm512_add_ps(w, _mm512_mul_ps(vk, _mm512_loadu_ps(m + j + 16 * l)));
            _mm512_storeu_ps(s + j + 16 * l, w);
            lane[l] = _mm512_mask_mov_ps(lane[l], _mm512_cmp_ps_mask(w, lane[l], _CMP_GT_OQ), w);
        }
    for (; j < n; j += 16) {
        const __mmask16 k = (__mmask16)(n - j >= 16 ? 0xFFFF : (1u << (n - j)) - 1);
        __m512 w = _mm512_mul_ps(_mm512_maskz_loadu_ps(k, s + j), vs);
        if (m)
            w = _mm512_add_ps(w, _mm512_mul_ps(vk, _mm512_maskz_loadu_ps(k, m + j)));
        _mm512_mask_storeu_ps(s + j, k, w);
        lane[0] = _mm512_mask_mov_ps(lane[0], _mm512_mask_cmp_ps_mask(k, w, lane[0], _CMP_GT_OQ), w);
    }
    return _mm512_reduce_max_ps(_mm512_max_ps(_mm512_max_ps(lane[0], lane[1]), _mm512_max_ps(lane[2], lane[3])));
}
