/* iq2_avx2.c - IQ2_XXS and IQ2_XS dot products with Q8_K (AVX2).
 *
 * Per 32 elements: the four octets' grid points (8 bytes each) are gathered
 * from the quant/iq2.h tables into one register; their 32 sign bits are
 * computed in a general register (each 7-bit index spread to a byte by
 * `pdep`, IQ2_XS's indices collected by `pext`, plus the parity bit) and
 * expanded to a byte mask; the products are taken with `vpmaddubsw` twice,
 * once with the grid bytes of the positive elements and once with those of
 * the negative ones (grid bytes are unsigned <= 43, so every int16 pair sum is
 * exact: <= 2 * 43 * 128), and subtracted; applying the signs to the activations instead (`vpsignb`) would
 * turn a -128 activation into -128 rather than +128. `vpmaddwd` by the group
 * scale (2s + 1) gives exact int32 lanes, summed once per super-block. The
 * float steps are then the generic kernel's, in the same order, so the result
 * is bit-identical to vec_dot_iq2_*_q8_K_generic for every input.
 *
 * The _cols kernels (prompt batches: one weight row against up to 16
 * activation rows) decode each super-block once into signed bytes (grid
 * negated where the sign says so, |w| <= 43); per column `vpmaddubsw` takes
 * the activations made unsigned (q + 128, by xor 0x80) with them (pair sums
 * <= 2 * 255 * 43, exact), `vpmaddwd` by the scales, and 128 times the scaled
 * weight sum (once per super-block) is subtracted: the same integers as the
 * single dot, so the same bits.
 */
#include "cpu/kernels/iq2_x86.h"
#include "cpu/kernels/kernels.h"
#include "cpu/kernels/x86-avx2/avx2_util.h"
#include "quant/blocks.h"
#include "quant/iq2.h"

/* Sum of the 8 int32 lanes. */
static inline int32_t hsum_i32(__m256i v)
{
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 1));
    return _mm_cvtsi128_si32(s);
}

/* int16 pair sums of grid bytes g times y, negated where neg is set (grid
 * bytes of the positive and of the negative elements taken separately). */
static inline __m256i signed_products(__m256i g, __m256i neg, __m256i y)
{
    return _mm256_sub_epi16(_mm256_maddubs_epi16(_mm256_andnot_si256(neg, g), y),
                            _mm256_maddubs_epi16(_mm256_and_si256(neg, g), y));
}

/* Contract: kernels.h. */
void lm_vec_dot_iq2_xxs_q8_K_avx2(int64_t n, float *s, const void *vx, const void *vy)
{
    const struct lm_block_iq2_xxs *x = vx;
    const struct lm_block_q8_K *y = vy;
    float sumf = 0.0f;
    for (int64_t b = 0; b < n / LM_QK_K; b++) {
        avx2_prefetch((const char *)(x + b) + LM_AVX2_PREFETCH);
        const float d = lm_fp16_to_fp32(x[b].d) * y[b].d;
        __m256i acc = _mm256_setzero_si256();
        for (int g = 0; g < LM_QK_K / 32; g++) {
            uint32_t w[2];
            memcpy(w, x[b].qs + 4 * g, sizeof w);
            const uint8_t *gi = (const uint8_t *)&w[0];
            const __m256i grid = _mm256_set_epi64x((long long)lm_iq2xxs_grid[gi[3]], (long long)lm_iq2xxs_grid[gi[2]],
                                                   (long long)lm_iq2xxs_grid[gi[1]], (long long)lm_iq2xxs_grid[gi[0]]);
            const uint32_t sb = lm_iq2_sign_bits4(w[1] & 0x0FFFFFFFu);
            const __m256i neg = avx2_bits_to_bytes((const uint8_t *)&sb);
            const __m256i q8 = _mm256_loadu_si256((const __m256i *)(y[b].qs + 32 * g));
            const __m256i p = signed_products(grid, neg, q8);
            acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p, _mm256_set1_epi16((short)(2 * (w[1] >> 28) + 1))));
        }
        sumf += d * (float)hsum_i32(acc);
    }
    *s = 0.125f * sumf;
}

/* Contract: kernels.h. */
void lm_vec_dot_iq2_xs_q8_K_avx2(int64_t n, float *s, const void *vx, const void *vy)
{
    const struct lm_block_iq2_xs *x = vx;
    const struct lm_block_q8_K *y = vy;
    float sumf = 0.0f;
    for (int64_t b = 0; b < n / LM_QK_K; b++) {
        avx2_prefetch((const char *)(x + b) + LM_AVX2_PREFETCH);
        const float d = lm_fp16_to_fp32(x[b].d) * y[b].d;
        __m256i acc = _mm256_setzero_si256();
        for (int g = 0; g < LM_QK_K / 32; g++) {
            const uint16_t *q = x[b].qs + 4 * g;
            uint64_t q4;
            memcpy(&q4, q, sizeof q4);
            const __m256i grid =
                _mm256_set_epi64x((long long)lm_iq2xs_grid[q[3] & 511], (long long)lm_iq2xs_grid[q[2] & 511],
                                  (long long)lm_iq2xs_grid[q[1] & 511], (long long)lm_iq2xs_grid[q[0] & 511]);
            const uint32_t sb = lm_iq2_sign_bits4((uint32_t)_pext_u64(q4, 0xFE00FE00FE00FE00ull));
            const __m256i neg = avx2_bits_to_bytes((const uint8_t *)&sb);
            const __m256i q8 = _mm256_loadu_si256((const __m256i *)(y[b].qs + 32 * g));
            const __m256i p = signed_products(grid, neg, q8);
            const uint8_t sc = x[b].scales[g];
            const __m256i ls = _mm256_setr_m128i(_mm_set1_epi16((short)(2 * (sc & 0xf) + 1)),
                                                 _mm_set1_epi16((short)(2 * (sc >> 4) + 1)));
            acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p, ls));
        }
        sumf += d * (float)hsum_i32(acc);
    }
    *s = 0.125f * sumf;
}

/* One super-block of weights for the _cols kernels: 8 x 32 signed bytes, the
 * int16 scales (2s + 1) of each, and corr = sum of scale * w. */
struct sb {
    __m256i w[8], ls[8];
    int32_t corr;
};

static inline __m256i apply_signs(__m256i grid, __m256i sg)
{
    return _mm256_sign_epi8(grid, sg); /* grid bytes <= 43: no -128 to keep */
}

static void sb_corr(struct sb *b)
{
    const __m256i ones = _mm256_set1_epi8(1);
    __m256i acc = _mm256_setzero_si256();
    for (int g = 0; g < 8; g++)
        acc = _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(ones, b->w[g]), b->ls[g]));
    b->corr = hsum_i32(acc);
}

static void sb_xxs(const struct lm_block_iq2_xxs *x, struct sb *b)
{
    for (int g = 0; g < 8; g++) {
        uint32_t w[2];
        memcpy(w, x->qs + 4 * g, sizeof w);
        const uint8_t *gi = (const uint8_t *)&w[0];
        const __m256i grid = _mm256_set_epi64x((long long)lm_iq2xxs_grid[gi[3]], (long long)lm_iq2xxs_grid[gi[2]],
                                               (long long)lm_iq2xxs_grid[gi[1]], (long long)lm_iq2xxs_grid[gi[0]]);
        const __m256i sg = _mm256_set_epi64x(
            (long long)lm_iq2_sign_bytes[(w[1] >> 21) & 127], (long long)lm_iq2_sign_bytes[(w[1] >> 14) & 127],
            (long long)lm_iq2_sign_bytes[(w[1] >> 7) & 127], (long long)lm_iq2_sign_bytes[w[1] & 127]);
        b->w[g] = apply_signs(grid, sg);
        b->ls[g] = _mm256_set1_epi16((short)(2 * (w[1] >> 28) + 1));
    }
    sb_corr(b);
}

static void sb_xs(const struct lm_block_iq2_xs *x, struct sb *b)
{
    for (int g = 0; g < 8; g++) {
        const uint16_t *q = x->qs + 4 * g;
        const __m256i grid =
            _mm256_set_epi64x((long long)lm_iq2xs_grid[q[3] & 511], (long long)lm_iq2xs_grid[q[2] & 511],
                              (long long)lm_iq2xs_grid[q[1] & 511], (long long)lm_iq2xs_grid[q[0] & 511]);
        const __m256i sg = _mm256_set_epi64x((long long)lm_iq2_sign_bytes[q[3] >> 9],
                                             (long long)lm_iq2_sign_bytes[q[2] >> 9],
                                             (long long)lm_iq2_sign_bytes[q[1] >> 9],
                                             (long long)lm_iq2_sign_bytes[q[0] >> 9]);
        b->w[g] = apply_signs(grid, sg);
        const uint8_t sc = x->scales[g];
        b->ls[g] = _mm256_setr_m128i(_mm_set1_epi16((short)(2 * (sc & 0xf) + 1)),
                                     _mm_set1_epi16((short)(2 * (sc >> 4) + 1)));
    }
    sb_corr(b);
}

/* The exact integer dot of a decoded super-block with 256 Q8_K codes. */
static inline int32_t sb_dot(const struct sb *b, const int8_t *q8)
{
    const __m256i x80 = _mm256_set1_epi8((char)0x80);
    __m256i acc = _mm256_setzero_si256();
    for (int g = 0; g < 8; g++) {
        const __m256i u = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(q8 + 32 * g)), x80);
        acc = _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, b->w[g]), b->ls[g]));
    }
    return hsum_i32(acc) - 128 * b->corr;
}

/* iq2_cols: the shared body over this file's struct sb and sb_* */
#include "cpu/kernels/iq2_cols_x86.h"

/* Contracts: kernels.h (lm_vec_dot_cols_fn). */
void lm_vec_dot_cols_iq2_xxs_q8_K_avx2(int64_t n, int nc, float *const *s, const void *x, const void *const *y)
{
    iq2_cols(false, n, nc, s, x, y);
}
void lm_vec_dot_cols_iq2_xs_q8_K_avx2(int64_t n, int nc, float *const *s, const void *x, const void *const *y)
{
    iq2_cols(true, n, nc, s, x, y);
}
