/* iq2_avx512.c - IQ2_XXS and IQ2_XS dot products with Q8_K (AVX-512 + VNNI).
 *
 * Per 64 elements (two groups of 32): eight grid points gathered
 * (`vpgatherdq`) from the quant/iq2.h table into one zmm; the 64 sign bits
 * computed in general registers (each 7-bit index spread to a byte by `pdep`,
 * IQ2_XS's collected by `pext`, plus the parity bit) as a mask splitting the
 * grid bytes into positive and negative elements, each dotted with the
 * activations by `vpdpbusd` (unsigned grid bytes x signed activations: exact,
 * and -128 activations are not negated in int8 as `vpsignb` would),
 * subtracted, and multiplied per int32 lane by its group's scale 2s + 1
 * (`vpmaddwd` on the lane's low half: the lane sums are below 2^15). The int32 lanes are
 * summed once per super-block and the float steps are the generic kernel's,
 * in its order: bit-identical to vec_dot_iq2_*_q8_K_generic for every input.
 *
 * The _cols kernels (prompt batches: one weight row against up to 16
 * activation rows) decode each super-block once into signed bytes (grid
 * negated where the sign says so, |w| <= 43) and per column take
 * `vpdpbusd` of the activations made unsigned (q + 128, by xor 0x80) with
 * them, minus 128 times the scaled weight sum (once per super-block): the
 * same integers as the single dot, so the same bits.
 */
#include "avx512_util.h"
#include "cpu/kernels/iq2_x86.h"
#include "cpu/kernels/kernels.h"
#include "quant/blocks.h"
#include "quant/iq2.h"

/* Per int32 lane (4 consecutive elements) sum of grid x (+/-) y, exact and
 * below 4 * 43 * 128 in magnitude (so it fits the low int16 of the lane). */
static inline __m512i signed_dot(__m512i grid, __mmask64 neg, __m512i y)
{
    const __m512i z = _mm512_setzero_si512();
    const __m512i p = _mm512_dpbusd_epi32(z, _mm512_maskz_mov_epi8(~neg, grid), y);
    const __m512i m = _mm512_dpbusd_epi32(z, _mm512_maskz_mov_epi8(neg, grid), y);
    return _mm512_sub_epi32(p, m);
}

/* Lane sums times the lanes' scales (int32 lanes holding values < 2^15, so
 * `vpmaddwd` with the scale in each lane's low half is the exact product). */
static inline __m512i scale_lanes(__m512i p, __m512i ls) { return _mm512_madd_epi16(p, ls); }

/* The 8 grid points, the 64 sign bits and the lane scales of 64 IQ2_XXS
 * elements (qs[0..8)). */
static inline void load_xxs(const uint16_t *qs, __m512i *grid, __mmask64 *neg, __m512i *ls)
{
    uint32_t w[4];
    memcpy(w, qs, sizeof w);
    *neg = _cvtu64_mask64((uint64_t)lm_iq2_sign_bits4(w[1] & 0x0FFFFFFFu) |
                          (uint64_t)lm_iq2_sign_bits4(w[3] & 0x0FFFFFFFu) << 32);
    const __m128i v = _mm_loadu_si128((const __m128i *)qs); /* w0 w1 w2 w3 */
    const __m256i gi = _mm256_cvtepu8_epi32(_mm_shuffle_epi8(v, _mm_setr_epi8(0, 1, 2, 3, 8, 9, 10, 11, -1, -1, -1,
                                                                              -1, -1, -1, -1, -1)));
    const __m256i aux = _mm256_permutevar8x32_epi32(_mm256_castsi128_si256(v), _mm256_setr_epi32(1, 1, 1, 1, 3, 3, 3, 3));
    *grid = _mm512_i32gather_epi64(gi, (const void *)lm_iq2xxs_grid, 8);
    const __m256i l = _mm256_add_epi32(_mm256_slli_epi32(_mm256_srli_epi32(aux, 28), 1), _mm256_set1_epi32(1));
    *ls = _mm512_permutexvar_epi32(_mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 4, 4, 4, 4, 4, 4, 4, 4),
                                   _mm512_castsi256_si512(l));
}

/* The same for IQ2_XS: qs[0..8) and the scale bytes sc[0..2). */
static inline void load_xs(const uint16_t *qs, const uint8_t *sc, __m512i *grid, __mmask64 *neg, __m512i *ls)
{
    uint64_t q[2];
    memcpy(q, qs, sizeof q);
    *neg = _cvtu64_mask64((uint64_t)lm_iq2_sign_bits4((uint32_t)_pext_u64(q[0], 0xFE00FE00FE00FE00ull)) |
                          (uint64_t)lm_iq2_sign_bits4((uint32_t)_pext_u64(q[1], 0xFE00FE00FE00FE00ull)) << 32);
    const __m256i r = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)qs));
    *grid = _mm512_i32gather_epi64(_mm256_and_si256(r, _mm256_set1_epi32(511)), (const void *)lm_iq2xs_grid, 8);
    const int a = 2 * (sc[0] & 0xf) + 1, c = 2 * (sc[0] >> 4) + 1, e = 2 * (sc[1] & 0xf) + 1, f = 2 * (sc[1] >> 4) + 1;
    *ls = _mm512_permutexvar_epi32(_mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3),
                                   _mm512_castsi128_si512(_mm_setr_epi32(a, c, e, f)));
}

/* Contract: kernels.h. */
void lm_vec_dot_iq2_xxs_q8_K_avx512(int64_t n, float *s, const void *vx, const void *vy)
{
    const struct lm_block_iq2_xxs *x = vx;
    const struct lm_block_q8_K *y = vy;
    float sumf = 0.0f;
    for (int64_t b = 0; b < n / LM_QK_K; b++) {
        if (lm_avx512_prefetch)
            avx512_prefetch(x + b, 64);
        const float d = lm_fp16_to_fp32(x[b].d) * y[b].d;
        __m512i acc = _mm512_setzero_si512();
        for (int g = 0; g < LM_QK_K / 64; g++) {
            __m512i grid, ls;
            __mmask64 neg;
            load_xxs(x[b].qs + 8 * g, &grid, &neg, &ls);
            const __m512i q8 = _mm512_loadu_si512((const void *)(y[b].qs + 64 * g));
            acc = _mm512_add_epi32(acc, scale_lanes(signed_dot(grid, neg, q8), ls));
        }
        sumf += d * (float)_mm512_reduce_add_epi32(acc);
    }
    *s = 0.125f * sumf;
}

/* Contract: kernels.h. */
void lm_vec_dot_iq2_xs_q8_K_avx512(int64_t n, float *s, const void *vx, const void *vy)
{
    const struct lm_block_iq2_xs *x = vx;
    const struct lm_block_q8_K *y = vy;
    float sumf = 0.0f;
    for (int64_t b = 0; b < n / LM_QK_K; b++) {
        if (lm_avx512_prefetch)
            avx512_prefetch(x + b, 128);
        const float d = lm_fp16_to_fp32(x[b].d) * y[b].d;
        __m512i acc = _mm512_setzero_si512();
        for (int g = 0; g < LM_QK_K / 64; g++) {
            __m512i grid, ls;
            __mmask64 neg;
            load_xs(x[b].qs + 8 * g, x[b].scales + 2 * g, &grid, &neg, &ls);
            const __m512i q8 = _mm512_loadu_si512((const void *)(y[b].qs + 64 * g));
            acc = _mm512_add_epi32(acc, scale_lanes(signed_dot(grid, neg, q8), ls));
        }
        sumf += d * (float)_mm512_reduce_add_epi32(acc);
    }
    *s = 0.125f * sumf;
}

/* One super-block of weights for the _cols kernels: 4 x 64 signed bytes, the
 * scale (2s + 1) of each int32 lane's 4 bytes, and corr = sum of scale * w. */
struct sb {
    __m512i w[4], ls[4];
    int32_t corr;
};

static inline __m512i apply_signs(__m512i grid, __m512i sg)
{
    return _mm512_mask_sub_epi8(grid, _mm512_movepi8_mask(sg), _mm512_setzero_si512(), grid);
}

static void sb_corr(struct sb *b)
{
    const __m512i ones = _mm512_set1_epi8(1);
    __m512i acc = _mm512_setzero_si512();
    for (int g = 0; g < 4; g++)
        acc = _mm512_add_epi32(acc, _mm512_mullo_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), ones, b->w[g]),
                                                       b->ls[g]));
    b->corr = _mm512_reduce_add_epi32(acc);
}

static void sb_xxs(const struct lm_block_iq2_xxs *x, struct sb *b)
{
    for (int g = 0; g < 4; g++) {
        uint32_t w[4];
        memcpy(w, x->qs + 8 * g, sizeof w);
        const uint8_t *ga = (const uint8_t *)&w[0], *gb = (const uint8_t *)&w[2];
        const __m512i grid = _mm512_set_epi64(
            (long long)lm_iq2xxs_grid[gb[3]], (long long)lm_iq2xxs_grid[gb[2]], (long long)lm_iq2xxs_grid[gb[1]],
            (long long)lm_iq2xxs_grid[gb[0]], (long long)lm_iq2xxs_grid[ga[3]], (long long)lm_iq2xxs_grid[ga[2]],
            (long long)lm_iq2xxs_grid[ga[1]], (long long)lm_iq2xxs_grid[ga[0]]);
        const __m512i sg = _mm512_set_epi64(
            (long long)lm_iq2_sign_bytes[(w[3] >> 21) & 127], (long long)lm_iq2_sign_bytes[(w[3] >> 14) & 127],
            (long long)lm_iq2_sign_bytes[(w[3] >> 7) & 127], (long long)lm_iq2_sign_bytes[w[3] & 127],
            (long long)lm_iq2_sign_bytes[(w[1] >> 21) & 127], (long long)lm_iq2_sign_bytes[(w[1] >> 14) & 127],
            (long long)lm_iq2_sign_bytes[(w[1] >> 7) & 127], (long long)lm_iq2_sign_bytes[w[1] & 127]);
        b->w[g] = apply_signs(grid, sg);
        b->ls[g] = _mm512_inserti64x4(_mm512_set1_epi32((int)(2 * (w[1] >> 28) + 1)),
                                      _mm256_set1_epi32((int)(2 * (w[3] >> 28) + 1)), 1);
    }
    sb_corr(b);
}

static void sb_xs(const struct lm_block_iq2_xs *x, struct sb *b)
{
    for (int g = 0; g < 4; g++) {
        const uint16_t *q = x->qs + 8 * g;
        const __m512i grid = _mm512_set_epi64(
            (long long)lm_iq2xs_grid[q[7] & 511], (long long)lm_iq2xs_grid[q[6] & 511],
            (long long)lm_iq2xs_grid[q[5] & 511], (long long)lm_iq2xs_grid[q[4] & 511],
            (long long)lm_iq2xs_grid[q[3] & 511], (long long)lm_iq2xs_grid[q[2] & 511],
            (long long)lm_iq2xs_grid[q[1] & 511], (long long)lm_iq2xs_grid[q[0] & 511]);
        const __m512i sg = _mm512_set_epi64(
            (long long)lm_iq2_sign_bytes[q[7] >> 9], (long long)lm_iq2_sign_bytes[q[6] >> 9],
            (long long)lm_iq2_sign_bytes[q[5] >> 9], (long long)lm_iq2_sign_bytes[q[4] >> 9],
            (long long)lm_iq2_sign_bytes[q[3] >> 9], (long long)lm_iq2_sign_bytes[q[2] >> 9],
            (long long)lm_iq2_sign_bytes[q[1] >> 9], (long long)lm_iq2_sign_bytes[q[0] >> 9]);
        b->w[g] = apply_signs(grid, sg);
        const uint8_t s0 = x->scales[2 * g], s1 = x->scales[2 * g + 1];
        const int a = 2 * (s0 & 0xf) + 1, c = 2 * (s0 >> 4) + 1, e = 2 * (s1 & 0xf) + 1, f = 2 * (s1 >> 4) + 1;
        b->ls[g] = _mm512_setr_epi32(a, a, a, a, c, c, c, c, e, e, e, e, f, f, f, f);
    }
    sb_corr(b);
}

/* The exact integer dot of a decoded super-block with 256 Q8_K codes. */
static inline int32_t sb_dot(const struct sb *b, const int8_t *q8)
{
    const __m512i x80 = _mm512_set1_epi8((char)0x80);
    __m512i acc = _mm512_setzero_si512();
    for (int g = 0; g < 4; g++) {
        const __m512i u = _mm512_xor_si512(_mm512_loadu_si512((const void *)(q8 + 64 * g)), x80);
        acc = _mm512_add_epi32(acc, _mm512_mullo_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), u, b->w[g]),
                                                       b->ls[g]));
    }
    return _mm512_reduce_add_epi32(acc) - 128 * b->corr;
}

/* iq2_cols: the shared body over this file's struct sb and sb_* */
#include "cpu/kernels/iq2_cols_x86.h"

/* Contracts: kernels.h (lm_vec_dot_cols_fn). */
void lm_vec_dot_cols_iq2_xxs_q8_K_avx512(int64_t n, int nc, float *const *s, const void *x, const void *const *y)
{
    iq2_cols(false, n, nc, s, x, y);
}
void lm_vec_dot_cols_iq2_xs_q8_K_avx512(int64_t n, int nc, float *const *s, const void *x, const void *const *y)
{
    iq2_cols(true, n, nc, s, x, y);
}
