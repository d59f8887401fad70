/* gemm_avx2.c - AVX2 GEMM over repacked weight groups (kernels.h lm_gemm_fn,
 * layouts in cpu/repack.h).
 *
 * One 256-bit register holds 4 consecutive elements of each of the 8 rows of
 * a group; the activation's matching 4 bytes are broadcast to every lane, and
 * vpmaddubsw/vpmaddwd leave one partial dot per row in each 32-bit lane. So 8
 * rows x 1 column come out of one register with no horizontal sums, and the
 * unpacked weights of a block are reused for up to 4 columns at a time.
 *
 * Q4_0: weights stay unsigned (0..15) so vpmaddubsw can take them as its
 * unsigned operand; the -8 offset is applied once per block through the
 * activation block sum (exact in integers). The 16-bit partial sums of a whole
 * block stay below 8 * 2 * 15 * 127 = 30480, so one vpmaddwd per block suffices.
 * Q8_0: sign trick (|w| unsigned, a * sign(w) signed), one vpmaddwd per slice.
 * Each column's sum is PINned to a register (avx2_util.h): GCC otherwise
 * builds add trees across columns and spills the products.
 *
 * One column (gemv_x8): R groups streamed at once, per block index the block
 * of each group into its own sum (docs/kernels.md "One column"), with the
 * operations of the one-column kernels in the same order: the same bits.
 */
#include <immintrin.h>
#include <string.h>

#include "avx2_util.h"
#include "cpu/kernels/gemm.h"
#include "cpu/kernels/gemv_runs.h"
#include "cpu/repack.h"
#include "quant/blocks.h"

#ifndef LM_GEMM_PREFETCH
#define LM_GEMM_PREFETCH 1024
#endif

static inline __m256i bcast4(const int8_t *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
}

static inline float half(lm_fp16 h) { return _cvtsh_ss(h); }

/* NC (1..4) columns against one group, all blocks. The 16-bit sums of the
 * columns stay in registers while the block's 4 chunks are unpacked one at a
 * time (low nibbles: elements 4c.., high nibbles: elements 16+4c..). */
static inline __attribute__((always_inline)) void q4_body(const int NC, int64_t nb, const void *vw, const char *y,
                                                          size_t by, const int16_t *ysum, float *s, size_t ldc)
{
    const struct lm_block_q4_0x8 *w = vw;
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc[4];
    for (int c = 0; c < NC; c++)
        acc[c] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const struct lm_block_q8_0 *a[4];
        __m256i s16[4];
        for (int c = 0; c < NC; c++) {
            a[c] = (const struct lm_block_q8_0 *)(y + (size_t)c * by) + b;
            s16[c] = _mm256_setzero_si256();
        }
        __builtin_prefetch((const char *)(w + b) + LM_GEMM_PREFETCH, 0, 3);
        __builtin_prefetch((const char *)(w + b) + LM_GEMM_PREFETCH + 64, 0, 3);
        __builtin_prefetch((const char *)(w + b) + LM_GEMM_PREFETCH + 128, 0, 3);
        for (int ch = 0; ch < 4; ch++) {
            const __m256i raw = _mm256_loadu_si256((const __m256i *)(w[b].qs + 32 * ch));
            const __m256i lo = _mm256_and_si256(raw, m4);
            const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4);
            for (int c = 0; c < NC; c++) {
                s16[c] = _mm256_add_epi16(s16[c], _mm256_maddubs_epi16(lo, bcast4(a[c]->qs + 4 * ch)));
                PIN(s16[c]);
                s16[c] = _mm256_add_epi16(s16[c], _mm256_maddubs_epi16(hi, bcast4(a[c]->qs + 16 + 4 * ch)));
                PIN(s16[c]);
            }
        }
        const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)w[b].d));
        for (int c = 0; c < NC; c++) {
            __m256i s32 = _mm256_madd_epi16(s16[c], ones);
            s32 = _mm256_sub_epi32(s32, _mm256_set1_epi32(8 * (int32_t)ysum[(size_t)c * (size_t)nb + (size_t)b]));
            const __m256 scale = _mm256_mul_ps(dw, _mm256_set1_ps(half(a[c]->d)));
            acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s32), scale, acc[c]);
        }
    }
    for (int c = 0; c < NC; c++)
        _mm256_storeu_ps(s + (size_t)c * ldc, acc[c]);
}

static void q4_cols_1(int64_t nb, const void *w, const char *y, size_t by, const int16_t *ysum, float *s, size_t ldc)
{
    q4_body(1, nb, w, y, by, ysum, s, ldc);
}
static void q4_cols_2(int64_t nb, const void *w, const char *y, size_t by, const int16_t *ysum, float *s, size_t ldc)
{
    q4_body(2, nb, w, y, by, ysum, s, ldc);
}
static void q4_cols_3(int64_t nb, const void *w, const char *y, size_t by, const int16_t *ysum, float *s, size_t ldc)
{
    q4_body(3, nb, w, y, by, ysum, s, ldc);
}
static void q4_cols_4(int64_t nb, const void *w, const char *y, size_t by, const int16_t *ysum, float *s, size_t ldc)
{
    q4_body(4, nb, w, y, by, ysum, s, ldc);
}

/* One column, R (1..8, constant) groups at once, group r at w + r * gb: per
 * block, each group's 8 sums in q4_cols_1's order; each group's lines
 * prefetched LM_GEMM_PREFETCH ahead in its own stream. */
static inline __attribute__((always_inline)) void q4_rows(const int R, int64_t nb, const char *w, size_t gb,
                                                          const struct lm_block_q8_0 *a, const int16_t *ysum,
                                                          float *s)
{
    const __m256i m4 = _mm256_set1_epi8(0x0F), ones = _mm256_set1_epi16(1);
    __m256 acc[8];
    for (int r = 0; r < R; r++)
        acc[r] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const __m256 da = _mm256_set1_ps(half(a[b].d));
        const __m256i off = _mm256_set1_epi32(8 * (int32_t)ysum[b]);
        for (int r = 0; r < R; r++) {
            const struct lm_block_q4_0x8 *wb = (const struct lm_block_q4_0x8 *)(w + (size_t)r * gb) + b;
            for (int l = 0; l < 3; l++)
                __builtin_prefetch((const char *)wb + LM_GEMM_PREFETCH + 64 * l, 0, 3);
            __m256i s16 = _mm256_setzero_si256();
            for (int ch = 0; ch < 4; ch++) {
                const __m256i raw = _mm256_loadu_si256((const __m256i *)(wb->qs + 32 * ch));
                s16 = _mm256_add_epi16(s16, _mm256_maddubs_epi16(_mm256_and_si256(raw, m4), bcast4(a[b].qs + 4 * ch)));
                PIN(s16);
                s16 = _mm256_add_epi16(s16, _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(raw, 4), m4),
                                                                  bcast4(a[b].qs + 16 + 4 * ch)));
                PIN(s16);
            }
            const __m256i s32 = _mm256_sub_epi32(_mm256_madd_epi16(s16, ones), off);
            const __m256 scale = _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)wb->d)), da);
            acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s32), scale, acc[r]);
        }
    }
    for (int r = 0; r < R; r++)
        _mm256_storeu_ps(s + 8 * r, acc[r]);
}

/* NC (1..4) columns of a group: cols[NC - 1]; ysum may be NULL when unused. */
typedef void (*cols_fn)(int64_t nb, const void *w, const char *y, size_t by, const int16_t *ysum, float *s,
                        size_t ldc);

/* nc columns in fours (the last call takes the remainder). */
static void gemm_by_4(const cols_fn cols[4], int64_t k, float *s, size_t ldc, const void *x, const char *y,
                      size_t by, const int16_t *ysum, int nc)
{
    const int64_t nb = k / LM_QK;
    for (int c0 = 0; c0 < nc; c0 += 4) {
        const int n = nc - c0 < 4 ? nc - c0 : 4;
        cols[n - 1](nb, x, y + (size_t)c0 * by, by, ysum ? ysum + (size_t)c0 * (size_t)nb : NULL,
                    s + (size_t)c0 * ldc, ldc);
    }
}

static const cols_fn q4_cols[4] = {q4_cols_1, q4_cols_2, q4_cols_3, q4_cols_4};

/* Contract: kernels.h. */
void lm_gemm_q4_0x8_q8_0_avx2(int64_t k, float *s, size_t ldc, const void *x, const void *y, size_t by,
                           const int16_t *ysum, int nc)
{
    gemm_by_4(q4_cols, k, s, ldc, x, y, by, ysum, nc);
}

/* NC (1..4) columns against one q8_0x8 group, all blocks: each chunk's
 * weights are loaded and made unsigned once for all columns (sign trick). */
static inline __attribute__((always_inline)) void q8_body(const int NC, int64_t nb, const void *vw, const char *y,
                                                          size_t by, const int16_t *ysum, float *s, size_t ldc)
{
    (void)ysum;
    const struct lm_block_q8_0x8 *w = vw;
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc[4];
    for (int c = 0; c < NC; c++)
        acc[c] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        for (int l = 0; l < (int)sizeof w[b]; l += 64)
            __builtin_prefetch((const char *)(w + b) + LM_GEMM_PREFETCH + l, 0, 3);
        const struct lm_block_q8_0 *a[4];
        __m256i s32[4];
        for (int c = 0; c < NC; c++) {
            a[c] = (const struct lm_block_q8_0 *)(y + (size_t)c * by) + b;
            s32[c] = _mm256_setzero_si256();
        }
        for (int j = 0; j < 8; j++) {
            const __m256i wq = _mm256_loadu_si256((const __m256i *)(w[b].qs + 32 * j));
            const __m256i wa = _mm256_sign_epi8(wq, wq);
            for (int c = 0; c < NC; c++) {
                const __m256i p = _mm256_maddubs_epi16(wa, _mm256_sign_epi8(bcast4(a[c]->qs + 4 * j), wq));
                s32[c] = _mm256_add_epi32(s32[c], _mm256_madd_epi16(p, ones));
                PIN(s32[c]);
            }
        }
        const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)w[b].d));
        for (int c = 0; c < NC; c++) {
            const __m256 scale = _mm256_mul_ps(dw, _mm256_set1_ps(half(a[c]->d)));
            acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s32[c]), scale, acc[c]);
        }
    }
    for (int c = 0; c < NC; c++)
        _mm256_storeu_ps(s + (size_t)c * ldc, acc[c]);
}

static void q8_cols_1(int64_t nb, const void *w, const char *y, size_t by, const int16_t *ysum, float *s, size_t ldc)
{
    q8_body(1, nb, w, y, by, ysum, s, ldc);
}
static void q8_cols_2(int64_t nb, const void *w, const char *y, size_t by, const int16_t *ysum, float *s, size_t ldc)
{
    q8_body(2, nb, w, y, by, ysum, s, ldc);
}
static void q8_cols_3(int64_t nb, const void *w, const char *y, size_t by, const int16_t *ysum, float *s, size_t ldc)
{
    q8_body(3, nb, w, y, by, ysum, s, ldc);
}
static void q8_cols_4(int64_t nb, const void *w, const char *y, size_t by, const int16_t *ysum, float *s, size_t ldc)
{
    q8_body(4, nb, w, y, by, ysum, s, ldc);
}

static const cols_fn q8_cols[4] = {q8_cols_1, q8_cols_2, q8_cols_3, q8_cols_4};

/* Contract: kernels.h. */
void lm_gemm_q8_0x8_q8_0_avx2(int64_t k, float *s, size_t ldc, const void *x, const void *y, size_t by,
                           const int16_t *ysum, int nc)
{
    (void)ysum;
    gemm_by_4(q8_cols, k, s, ldc, x, y, by, NULL, nc);
}

/* One column, R (1..8, constant) groups at once, as q4_rows: q8_cols_1's
 * operations per group. */
static inline __attribute__((always_inline)) void q8_rows(const int R, int64_t nb, const char *w, size_t gb,
                                                          const struct lm_block_q8_0 *a, float *s)
{
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc[8];
    for (int r = 0; r < R; r++)
        acc[r] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const __m256 da = _mm256_set1_ps(half(a[b].d));
        for (int r = 0; r < R; r++) {
            const struct lm_block_q8_0x8 *wb = (const struct lm_block_q8_0x8 *)(w + (size_t)r * gb) + b;
            for (int l = 0; l < (int)sizeof *wb; l += 64)
                __builtin_prefetch((const char *)wb + LM_GEMM_PREFETCH + l, 0, 3);
            __m256i s32 = _mm256_setzero_si256();
            for (int j = 0; j < 8; j++) {
                const __m256i wq = _mm256_loadu_si256((const __m256i *)(wb->qs + 32 * j));
                const __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(wq, wq), _mm256_sign_epi8(bcast4(a[b].qs + 4 * j), wq));
                s32 = _mm256_add_epi32(s32, _mm256_madd_epi16(p, ones));
                PIN(s32);
            }
            const __m256 scale = _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)wb->d)), da);
            acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s32), scale, acc[r]);
        }
    }
    for (int r = 0; r < R; r++)
        _mm256_storeu_ps(s + 8 * r, acc[r]);
}

/* R (constant) groups of a gemv_x8 run from x: the Q8_0 or Q4_0 body. */
static inline __attribute__((always_inline)) void rows(const bool q8, const int R, const struct lm_gemv_args *c,
                                                       const char *x, float *s)
{
    if (q8)
        q8_rows(R, c->n, x, c->group_bytes, c->y, s);
    else
        q4_rows(R, c->n, x, c->group_bytes, c->y, c->ysum, s);
}

/* One gemv_x8 run of r groups at group g (gemv_runs.h), runs of up to `most` groups. */
static inline __attribute__((always_inline)) void gemv_step(const bool q8, const int most, const void *ctx, int64_t g,
                                                            int r)
{
    const struct lm_gemv_args *c = ctx;
    const char *x = lm_gemv_group(c, g);
    float *s = lm_gemv_out(c, g);
    switch (r) {
    case 8: rows(q8, most >= 8 ? 8 : 1, c, x, s); break;
    case 4: rows(q8, most >= 4 ? 4 : 1, c, x, s); break;
    case 2: rows(q8, 2, c, x, s); break;
    default: rows(q8, 1, c, x, s); break;
    }
}
static void q4_gemv_step(const void *c, int64_t g, int r) { gemv_step(false, 4, c, g, r); }
static void q8_gemv_step(const void *c, int64_t g, int r) { gemv_step(true, 8, c, g, r); }

/* Contract: kernels.h lm_gemv_fn (reads ysum). Groups at once, tinyllama tg
 * at the AVX2 level, bench_ab same run (Intel Xeon with AMX, 2026-12-04,
 * one stream -> R streams): Q4_0 4 groups +6.6 % (8 groups +1.6 %; with 4,
 * L2 prefetch 768 ahead 2.2 % below L1 1024, L1 768 1.7 % below). */
void lm_gemv_q4_0x8_q8_0_avx2(int64_t k, int64_t n_groups, size_t group_bytes, float *s, const void *x, const void *y,
                              const int16_t *ysum)
{
    lm_gemv_call(q4_gemv_step, 4, k / LM_QK, n_groups, group_bytes, s, x, y, ysum);
}
/* Contract: kernels.h lm_gemv_fn (ysum unused). 8 groups: +7.3 % over one
 * stream (4 groups 1.4 % below 8; L2 768 +0.5 %, L1 2048 -1.4 %). */
void lm_gemv_q8_0x8_q8_0_avx2(int64_t k, int64_t n_groups, size_t group_bytes, float *s, const void *x, const void *y,
                              const int16_t *ysum)
{
    lm_gemv_call(q8_gemv_step, 8, k / LM_QK, n_groups, group_bytes, s, x, y, ysum);
}
