/* gemm_float_avx2.c - AVX2/FMA GEMM over the f16x8, bf16x8 and f32x8 layouts
 * (kernels.h lm_gemm_fn, layouts in cpu/repack.h), and the AVX2 BF16
 * rounding encoder of the bf16x8 activation rows (gemm.h).
 *
 * Dot products along k: a chunk of the layout holds one (F16, F32) or two
 * (BF16) 8-element vectors of each of the group's 8 rows, and the activation
 * rows are in element order, so acc[r][c] += w_r * a_c is one FMA with no
 * shuffle or broadcast; the 8 lanes of an accumulator (k mod 8) are added at
 * the end. Widening: F16 weights and F16 activations by vcvtph2ps; BF16
 * weights by one shift (elements 0..7 of a chunk) or one mask (8..15) of the
 * same 32 bytes, thanks to the paired layout; F32 as is.
 * Tiles: 4 rows x 3 columns (12 accumulators; the 3 activation vectors and
 * one weight vector at a time fill the other 4 registers: 7 loads per 12
 * FMAs), 4 x 2 for column pairs, 8 x 1 for a single column.
 *
 * Measured on Zen 3 (one thread, K = 2048, GMAC/s, best of many): 4 x 3 F16
 * ~40 in L2; broadcasting each activation into 8 row lanes instead (one FMA
 * per broadcast load) ~25; BF16 widened by zero extension + shift ~30, paired
 * ~38; F16 activations instead of F32 rows rounded through F16: equal in L2,
 * ~15 % faster in mm_gemm's loop over a 2048 x 2048 matrix and 128 columns
 * (half the activation bytes re-read for every group); BF16 activations
 * (widened like the weights) ~40 % slower than F32 rows, so BF16 keeps F32
 * rows. Blocking k (256 or 512) so a block's activations stay in L1 gained
 * nothing measurable.
 *
 * Numerics: each lane sums its products with FMA (no rounding of the
 * product), lanes are added by hadd pairs ((0+1)+(2+3)) + ((4+5)+(6+7));
 * the generic kernel uses separate multiplies and another lane order, so
 * results differ from it by float reordering only.
 */
#include "avx2_util.h"
#include "cpu/kernels/gemm.h"
#include "cpu/repack.h"

enum wkind { W_F16, W_BF16, W_F32 };

/* Elements per row and chunk, and bytes per row and chunk. Macros, not
 * inline functions: the loop bounds must be constants before GCC's early
 * unrolling, or it keeps two loads alive across the BF16 halves and spills
 * accumulators in the 4 x 3 tile (measured: -15 %). */
#define CE_OF(kind) ((kind) == W_BF16 ? LM_REPACK_BFK : LM_REPACK_FK)
#define RB_OF(kind) ((size_t)((kind) == W_F16 ? 16 : 32))

/* Vector h (0: elements 0..7, 1: 8..15) of one row's chunk at p, as floats. */
static inline __m256 loadw(enum wkind kind, const char *p, int h)
{
    if (kind == W_F16)
        return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
    if (kind == W_F32)
        return _mm256_loadu_ps((const float *)p);
    const __m256i v = _mm256_loadu_si256((const __m256i *)p);
    if (h == 0)
        return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
    return _mm256_castsi256_ps(_mm256_and_si256(v, _mm256_set1_epi32((int)0xffff0000u)));
}

/* Activations i..i+7 of a row at y (F16 for F16 weights, else F32). */
static inline __m256 loada(enum wkind kind, const char *y, int64_t i)
{
    if (kind == W_F16)
        return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const lm_fp16 *)y + i)));
    return _mm256_loadu_ps((const float *)y + i);
}

/* The lane sums of 4 accumulators: [sum a, sum b, sum c, sum d]. */
static inline __m128 hsum4(__m256 a, __m256 b, __m256 c, __m256 d)
{
    const __m256 t = _mm256_hadd_ps(_mm256_hadd_ps(a, b), _mm256_hadd_ps(c, d));
    return _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1));
}

/* R rows (from the row at w within each chunk) x C columns over nk chunks:
 * s[c * ldc + r] = dot. Per 8 elements the activations are loaded first,
 * then one weight vector per row feeds C FMAs (R * C + C + 1 <= 16
 * registers). Each chunk prefetches the rows' bytes pf ahead. */
static inline __attribute__((always_inline)) void tile(enum wkind kind, const int R, const int C, int64_t nk,
                                                        const char *w, size_t pf, const char *y, size_t by, float *s,
                                                        size_t ldc)
{
    const size_t rb = RB_OF(kind), chunk = LM_REPACK_ROWS * rb;
    __m256 acc[8][3];
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++)
            acc[r][c] = _mm256_setzero_ps();
    for (int64_t j = 0; j < nk; j++) {
        const char *wj = w + (size_t)j * chunk;
        /* __builtin_prefetch, not avx2_prefetch: GCC 12 drops _mm_prefetch once this is inlined */
        for (int l = 0; l < R * (int)RB_OF(kind) / 64; l++)
            __builtin_prefetch(wj + pf + 64 * l, 0, 3);
        for (int h = 0; h < CE_OF(kind) / 8; h++) {
            __m256 a[3];
            for (int c = 0; c < C; c++)
                a[c] = loada(kind, y + (size_t)c * by, j * CE_OF(kind) + 8 * h);
            for (int r = 0; r < R; r++) {
                const __m256 wr = loadw(kind, wj + (size_t)r * rb, h);
                for (int c = 0; c < C; c++)
                    acc[r][c] = _mm256_fmadd_ps(wr, a[c], acc[r][c]);
            }
        }
    }
    for (int r0 = 0; r0 < R; r0 += 4)
        for (int c = 0; c < C; c++)
            _mm_storeu_ps(s + (size_t)c * ldc + (size_t)r0,
                          hsum4(acc[r0][c], acc[r0 + 1][c], acc[r0 + 2][c], acc[r0 + 3][c]));
}

typedef void (*tile_fn)(int64_t nk, const char *w, size_t pf, const char *y, size_t by, float *s, size_t ldc);

/* The tile instances: rows x columns per weight kind. */
static void f16_8x1(int64_t nk, const char *w, size_t pf, const char *y, size_t by, float *s, size_t ldc)
{
    tile(W_F16, 8, 1, nk, w, pf, y, by, s, ldc);
}
static void f16_4x2(int64_t nk, const char *w, size_t pf, const char *y, size_t by, float *s, size_t ldc)
{
    tile(W_F16, 4, 2, nk, w, pf, y, by, s, ldc);
}
static void f16_4x3(int64_t nk, const char *w, size_t pf, const char *y, size_t by, float *s, size_t ldc)
{
    tile(W_F16, 4, 3, nk, w, pf, y, by, s, ldc);
}
static void bf16_8x1(int64_t nk, const char *w, size_t pf, const char *y, size_t by, float *s, size_t ldc)
{
    tile(W_BF16, 8, 1, nk, w, pf, y, by, s, ldc);
}
static void bf16_4x2(int64_t nk, const char *w, size_t pf, const char *y, size_t by, float *s, size_t ldc)
{
    tile(W_BF16, 4, 2, nk, w, pf, y, by, s, ldc);
}
static void bf16_4x3(int64_t nk, const char *w, size_t pf, const char *y, size_t by, float *s, size_t ldc)
{
    tile(W_BF16, 4, 3, nk, w, pf, y, by, s, ldc);
}
static void f32_8x1(int64_t nk, const char *w, size_t pf, const char *y, size_t by, float *s, size_t ldc)
{
    tile(W_F32, 8, 1, nk, w, pf, y, by, s, ldc);
}
static void f32_4x2(int64_t nk, const char *w, size_t pf, const char *y, size_t by, float *s, size_t ldc)
{
    tile(W_F32, 4, 2, nk, w, pf, y, by, s, ldc);
}
static void f32_4x3(int64_t nk, const char *w, size_t pf, const char *y, size_t by, float *s, size_t ldc)
{
    tile(W_F32, 4, 3, nk, w, pf, y, by, s, ldc);
}

struct tiles {
    tile_fn t81, t42, t43;
    int ce;    /* elements per row and chunk */
    size_t rb; /* bytes per row and chunk */
};

/* The group at x against nc columns: columns in threes (both row halves of
 * each, so a column triple's activations are reused from L1/L2), a remaining
 * pair or two pairs as 4 x 2, a single column as 8 x 1.
 * Prefetch: a single column streams the weights once (token generation):
 * LM_AVX2_PREFETCH ahead, as the vec_dot kernels. With more columns every
 * column tile re-reads the group from L1/L2, and each prefetches the same
 * line of the next group, which is what mm_gemm hands this thread next. */
static void gemm_float(const struct tiles *t, int64_t k, float *s, size_t ldc, const char *x, const char *y,
                       size_t by, int nc)
{
    const int64_t nk = k / t->ce;
    const size_t half = 4 * t->rb, group = LM_REPACK_ROWS * t->rb * (size_t)nk;
    for (int c = 0; c < nc;) {
        const int n = nc - c;
        const char *yc = y + (size_t)c * by;
        float *sc = s + (size_t)c * ldc;
        if (n == 1) {
            t->t81(nk, x, nc == 1 ? LM_AVX2_PREFETCH : group, yc, by, sc, ldc);
            c += 1;
        } else if (n == 2 || n == 4) {
            t->t42(nk, x, group, yc, by, sc, ldc);
            t->t42(nk, x + half, group, yc, by, sc + 4, ldc);
            c += 2;
        } else {
            t->t43(nk, x, group, yc, by, sc, ldc);
            t->t43(nk, x + half, group, yc, by, sc + 4, ldc);
            c += 3;
        }
    }
}

static const struct tiles f16_tiles = {f16_8x1, f16_4x2, f16_4x3, LM_REPACK_FK, 16};
static const struct tiles bf16_tiles = {bf16_8x1, bf16_4x2, bf16_4x3, LM_REPACK_BFK, 32};
static const struct tiles f32_tiles = {f32_8x1, f32_4x2, f32_4x3, LM_REPACK_FK, 32};

/* Contract: kernels.h (y: F16 rows; ysum unused). */
void lm_gemm_f16x8_f16_avx2(int64_t k, float *s, size_t ldc, const void *x, const void *y, size_t by,
                         const int16_t *ysum, int nc)
{
    (void)ysum;
    gemm_float(&f16_tiles, k, s, ldc, x, y, by, nc);
}

/* Contract: kernels.h (y: F32 rows rounded through BF16; ysum unused). */
void lm_gemm_bf16x8_f32_avx2(int64_t k, float *s, size_t ldc, const void *x, const void *y, size_t by,
                          const int16_t *ysum, int nc)
{
    (void)ysum;
    gemm_float(&bf16_tiles, k, s, ldc, x, y, by, nc);
}

/* Contract: kernels.h (y: F32 rows; ysum unused). */
void lm_gemm_f32x8_f32_avx2(int64_t k, float *s, size_t ldc, const void *x, const void *y, size_t by,
                         const int16_t *ysum, int nc)
{
    (void)ysum;
    gemm_float(&f32_tiles, k, s, ldc, x, y, by, nc);
}

/* Contract: gemm.h. The arithmetic of lm_fp32_to_bf16 on 8 lanes: add
 * 0x7fff + (bit 16) and clear the low half; NaN: set the quiet bit instead. */
void lm_fp32_round_bf16_row_avx2(const float *x, void *vy, int64_t n)
{
    float *y = vy;
    const __m256i hi = _mm256_set1_epi32((int)0xffff0000u), one = _mm256_set1_epi32(1);
    const __m256i bias = _mm256_set1_epi32(0x7fff), quiet = _mm256_set1_epi32(0x00400000);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 f = _mm256_loadu_ps(x + i);
        const __m256i u = _mm256_castps_si256(f);
        const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(u, 16), one);
        const __m256i rounded = _mm256_add_epi32(u, _mm256_add_epi32(bias, odd));
        const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(f, f, _CMP_UNORD_Q));
        const __m256i v = _mm256_blendv_epi8(rounded, _mm256_or_si256(u, quiet), nan);
        _mm256_storeu_si256((__m256i *)(y + i), _mm256_and_si256(v, hi));
    }
    for (; i < n; i++)
        y[i] = lm_bf16_to_fp32(lm_fp32_to_bf16(x[i]));
}
