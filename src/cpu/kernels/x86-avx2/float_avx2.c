/* float_avx2.c - AVX2/FMA/F16C dot products and conversions of F32 and F16.
 *
 * Compiled only with this folder's ISA flags; called only when cpuid reports
 * AVX2+FMA+F16C. Dots keep 4 accumulators of 8 lanes (32 elements per step),
 * then 8-wide steps, then a scalar tail; any n, unaligned loads. F16C
 * conversions round to nearest even, the same bits as core/fp16.h.
 */
#include "avx2_util.h"
#include "cpu/kernels/kernels.h"

#define hsum_ps avx2_hsum_ps

/* Contract: kernels.h. */
void lm_vec_dot_f32_avx2(int64_t n, float *s, const void *vx, const void *vy)
{
    const float *x = vx, *y = vy;
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        avx2_prefetch((const char *)(x + i) + LM_AVX2_PREFETCH);
        avx2_prefetch((const char *)(x + i) + LM_AVX2_PREFETCH + 64);
        a0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i), a0);
        a1 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 8), _mm256_loadu_ps(y + i + 8), a1);
        a2 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 16), _mm256_loadu_ps(y + i + 16), a2);
        a3 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 24), _mm256_loadu_ps(y + i + 24), a3);
    }
    for (; i + 8 <= n; i += 8)
        a0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i), a0);
    float sum = hsum_ps(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
    for (; i < n; i++)
        sum += x[i] * y[i];
    *s = sum;
}

/* Two columns of lm_vec_dot_f32_avx2 at once: the same four accumulators per
 * column, the same tails and the same reduction, so each result has
 * vec_dot's bits; x is loaded once for both, and the eight independent FMA
 * chains keep both FMA pipes busy where one column's four cannot. */
static void dot_f32_x2(int64_t n, float *s0, float *s1, const float *x, const float *y0, const float *y1)
{
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    __m256 b0 = a0, b1 = a0, b2 = a0, b3 = a0;
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        const __m256 x0 = _mm256_loadu_ps(x + i), x1 = _mm256_loadu_ps(x + i + 8);
        const __m256 x2 = _mm256_loadu_ps(x + i + 16), x3 = _mm256_loadu_ps(x + i + 24);
        a0 = _mm256_fmadd_ps(x0, _mm256_loadu_ps(y0 + i), a0);
        b0 = _mm256_fmadd_ps(x0, _mm256_loadu_ps(y1 + i), b0);
        a1 = _mm256_fmadd_ps(x1, _mm256_loadu_ps(y0 + i + 8), a1);
        b1 = _mm256_fmadd_ps(x1, _mm256_loadu_ps(y1 + i + 8), b1);
        a2 = _mm256_fmadd_ps(x2, _mm256_loadu_ps(y0 + i + 16), a2);
        b2 = _mm256_fmadd_ps(x2, _mm256_loadu_ps(y1 + i + 16), b2);
        a3 = _mm256_fmadd_ps(x3, _mm256_loadu_ps(y0 + i + 24), a3);
        b3 = _mm256_fmadd_ps(x3, _mm256_loadu_ps(y1 + i + 24), b3);
    }
    for (; i + 8 <= n; i += 8) {
        const __m256 x0 = _mm256_loadu_ps(x + i);
        a0 = _mm256_fmadd_ps(x0, _mm256_loadu_ps(y0 + i), a0);
        b0 = _mm256_fmadd_ps(x0, _mm256_loadu_ps(y1 + i), b0);
    }
    float sa = hsum_ps(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
    float sb = hsum_ps(_mm256_add_ps(_mm256_add_ps(b0, b1), _mm256_add_ps(b2, b3)));
    for (; i < n; i++) {
        sa += x[i] * y0[i];
        sb += x[i] * y1[i];
    }
    *s0 = sa;
    *s1 = sb;
}

/* Contract: kernels.h (lm_vec_dot_cols_fn); each s[c] has lm_vec_dot_f32_avx2's bits. */
void lm_vec_dot_cols_f32_avx2(int64_t n, int nc, float *const *s, const void *x, const void *const *y)
{
    int c = 0;
    for (; c + 2 <= nc; c += 2)
        dot_f32_x2(n, s[c], s[c + 1], x, y[c], y[c + 1]);
    if (c < nc)
        lm_vec_dot_f32_avx2(n, s[c], x, y[c]);
}

static inline __m256 load_f16x8(const lm_fp16 *p)
{
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
}

/* The F16 dot of x with y: y's elements below n / 8 * 8 come already widened
 * from yf when it is non-NULL, else from y (the same floats either way), so
 * vec_dot_f16 and vec_dot_rows_f16 run this one loop and give the same bits. */
static inline float dot_f16(int64_t n, const lm_fp16 *x, const lm_fp16 *y, const float *yf)
{
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
#define Y8(j) (yf ? _mm256_loadu_ps(yf + (j)) : load_f16x8(y + (j)))
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        avx2_prefetch((const char *)(x + i) + LM_AVX2_PREFETCH);
        a0 = _mm256_fmadd_ps(load_f16x8(x + i), Y8(i), a0);
        a1 = _mm256_fmadd_ps(load_f16x8(x + i + 8), Y8(i + 8), a1);
        a2 = _mm256_fmadd_ps(load_f16x8(x + i + 16), Y8(i + 16), a2);
        a3 = _mm256_fmadd_ps(load_f16x8(x + i + 24), Y8(i + 24), a3);
    }
    for (; i + 8 <= n; i += 8)
        a0 = _mm256_fmadd_ps(load_f16x8(x + i), Y8(i), a0);
#undef Y8
    float sum = hsum_ps(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
    for (; i < n; i++)
        sum += lm_fp16_to_fp32(x[i]) * lm_fp16_to_fp32(y[i]);
    return sum;
}

/* Contract: kernels.h. */
void lm_vec_dot_f16_avx2(int64_t n, float *s, const void *vx, const void *vy) { *s = dot_f16(n, vx, vy, NULL); }

/* Contract: kernels.h (lm_vec_dot_rows_fn). y widened once into a stack
 * buffer, then dot_f16 per row: every result has lm_vec_dot_f16_avx2's bits. */
void lm_vec_dot_rows_f16_avx2(int64_t n, int64_t nr, float *s, const void *vx, size_t bx, const void *vy)
{
    enum { MAX_N = 4096 }; /* 16 KiB of widened y on the stack */
    const lm_fp16 *y = vy;
    float yf[MAX_N];
    const bool widen = n <= MAX_N;
    for (int64_t i = 0; widen && i + 8 <= n; i += 8)
        _mm256_storeu_ps(yf + i, load_f16x8(y + i));
    for (int64_t r = 0; r < nr; r++)
        s[r] = dot_f16(n, (const lm_fp16 *)((const char *)vx + (size_t)r * bx), y, widen ? yf : NULL);
}

/* Contract: kernels.h. */
void lm_fp16_to_fp32_row_avx2(const void *vx, float *y, int64_t n)
{
    const lm_fp16 *x = vx;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, load_f16x8(x + i));
    for (; i < n; i++)
        y[i] = lm_fp16_to_fp32(x[i]);
}

/* Contract: kernels.h. */
void lm_fp32_to_fp16_row_avx2(const float *x, void *vy, int64_t n)
{
    lm_fp16 *y = vy;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(y + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++)
        y[i] = lm_fp32_to_fp16(x[i]);
}
