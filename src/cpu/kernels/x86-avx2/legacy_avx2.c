/* legacy_avx2.c - AVX2 dot products of the 32-element quant types with their
 * activation types: Q4_0/Q5_0/Q8_0 x Q8_0 and Q4_1/Q5_1 x Q8_1.
 *
 * Per block the 32 integer products are summed exactly in int32 lanes
 * (maddubs with an unsigned operand, then madd), converted to float and
 * accumulated as acc += (d_x*d_y) * lanes with one FMA; the _1 types add
 * m_x * s_y in a second accumulator. Only the float accumulation order
 * differs from the generic kernels.
 *
 * Speed: two blocks per step with independent accumulators (the FMA latency
 * is hidden) and the weight stream is prefetched a few cache lines ahead.
 * Scales are converted per block with scalar F16C: gathering the fp16 scales
 * of four blocks into one vcvtph2ps (fewer vector uops on paper) measured
 * slower on Zen 3, as did psign-based Q4 products (two maddubs are faster).
 *
 * Requirements: n a multiple of 32; blocks need only 2-byte alignment;
 * activation codes lie in [-127, 127] (what every Q8 encoder writes).
 */
#include "avx2_util.h"
#include "cpu/kernels/kernels.h"
#include "quant/blocks.h"

/* sum (q - o) y = maddubs(q, y) - maddubs(o, y): unsigned operands, pair
 * sums within int16. */
static inline __m256i dot_u8_minus(__m256i q, __m256i off, __m256i y)
{
    return avx2_sum_pairs_i16(_mm256_sub_epi16(_mm256_maddubs_epi16(q, y), _mm256_maddubs_epi16(off, y)));
}

static inline __m256i load_q8(const int8_t *qs) { return _mm256_loadu_si256((const __m256i *)qs); }

/* Integer block sums (8 int32 lanes) of each weight type. */
static inline __m256i isum_q4_0(const struct lm_block_q4_0 *x, const int8_t *yq)
{
    return dot_u8_minus(avx2_nibbles(x->qs), _mm256_set1_epi8(8), load_q8(yq));
}

static inline __m256i isum_q5_0(const struct lm_block_q5_0 *x, const int8_t *yq)
{
    /* q - 16 = nibble - (5th bit clear ? 16 : 0) */
    const __m256i off = _mm256_andnot_si256(avx2_bits_to_bytes(x->qh), _mm256_set1_epi8(16));
    return dot_u8_minus(avx2_nibbles(x->qs), off, load_q8(yq));
}

static inline __m256i isum_q8_0(const struct lm_block_q8_0 *x, const int8_t *yq)
{
    return avx2_dot_i8(load_q8(x->qs), load_q8(yq));
}

static inline __m256i isum_q4_1(const struct lm_block_q4_1 *x, const int8_t *yq)
{
    return avx2_sum_pairs_i16(_mm256_maddubs_epi16(avx2_nibbles(x->qs), load_q8(yq)));
}

static inline __m256i isum_q5_1(const struct lm_block_q5_1 *x, const int8_t *yq)
{
    const __m256i q = _mm256_or_si256(avx2_nibbles(x->qs),
                                      _mm256_and_si256(avx2_bits_to_bytes(x->qh), _mm256_set1_epi8(16)));
    return avx2_sum_pairs_i16(_mm256_maddubs_epi16(q, load_q8(yq)));
}

/* The weight types of these dots (a constant argument of the kernel bodies). */
enum wt { W_Q4_0, W_Q5_0, W_Q8_0, W_Q4_1, W_Q5_1 };

/* Bytes of one block of type t. */
static inline size_t block_bytes(const enum wt t)
{
    switch (t) {
    case W_Q4_0: return sizeof(struct lm_block_q4_0);
    case W_Q5_0: return sizeof(struct lm_block_q5_0);
    case W_Q8_0: return sizeof(struct lm_block_q8_0);
    case W_Q4_1: return sizeof(struct lm_block_q4_1);
    default: return sizeof(struct lm_block_q5_1);
    }
}

/* The scale d of the _0 block at x (every _0 block starts with it). */
static inline lm_fp16 d_of(const enum wt t, const char *x)
{
    switch (t) {
    case W_Q4_0: return ((const struct lm_block_q4_0 *)x)->d;
    case W_Q5_0: return ((const struct lm_block_q5_0 *)x)->d;
    default: return ((const struct lm_block_q8_0 *)x)->d;
    }
}

/* The integer block sums of the block of type t at x (t constant after inlining). */
static inline __attribute__((always_inline)) __m256i isum_of(const enum wt t, const char *x, const int8_t *yq)
{
    switch (t) {
    case W_Q4_0: return isum_q4_0((const struct lm_block_q4_0 *)x, yq);
    case W_Q5_0: return isum_q5_0((const struct lm_block_q5_0 *)x, yq);
    case W_Q8_0: return isum_q8_0((const struct lm_block_q8_0 *)x, yq);
    case W_Q4_1: return isum_q4_1((const struct lm_block_q4_1 *)x, yq);
    default: return isum_q5_1((const struct lm_block_q5_1 *)x, yq);
    }
}

/* A _0-type dot (x blocks of type t, Q8_0 activations). */
static inline __attribute__((always_inline)) void dot0(const enum wt t, int64_t n, float *s, const void *vx,
                                                       const void *vy)
{
    const char *x = vx;
    const size_t bs = block_bytes(t);
    const struct lm_block_q8_0 *y = vy;
    const int64_t nb = n / LM_QK;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = acc0;
    int64_t b = 0;
    for (; b + 2 <= nb; b += 2) {
        const char *x0 = x + (size_t)b * bs, *x1 = x0 + bs;
        avx2_prefetch(x0 + LM_AVX2_PREFETCH);
        acc0 = _mm256_fmadd_ps(avx2_scale2(d_of(t, x0), y[b].d), _mm256_cvtepi32_ps(isum_of(t, x0, y[b].qs)), acc0);
        const __m256i i1 = isum_of(t, x1, y[b + 1].qs);
        acc1 = _mm256_fmadd_ps(avx2_scale2(d_of(t, x1), y[b + 1].d), _mm256_cvtepi32_ps(i1), acc1);
    }
    if (b < nb) {
        const char *x0 = x + (size_t)b * bs;
        acc0 = _mm256_fmadd_ps(avx2_scale2(d_of(t, x0), y[b].d), _mm256_cvtepi32_ps(isum_of(t, x0, y[b].qs)), acc0);
    }
    *s = avx2_hsum_ps(_mm256_add_ps(acc0, acc1));
}

/* acc += d_x d_y * lanes; lane 1 of accm += m_x * s_y (the fp16 pairs (d, m)
 * of the weight block and (d, s) of the Q8_1 block are adjacent). */
static inline __m256 one_block(const void *dm, const void *ds, __m256i isum, __m256 acc, __m128 *accm)
{
    const __m128 p = _mm_mul_ps(avx2_f16_pair(dm), avx2_f16_pair(ds)); /* [dx*dy, m*s, 0, 0] */
    *accm = _mm_add_ps(*accm, p);
    return _mm256_fmadd_ps(_mm256_broadcastss_ps(p), _mm256_cvtepi32_ps(isum), acc);
}

/* A _1-type dot (x blocks of type t with fields d, m first; Q8_1 activations). */
static inline __attribute__((always_inline)) void dot1(const enum wt t, int64_t n, float *s, const void *vx,
                                                       const void *vy)
{
    const char *x = vx;
    const size_t bs = block_bytes(t);
    const struct lm_block_q8_1 *y = vy;
    const int64_t nb = n / LM_QK;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = acc0;
    __m128 accm0 = _mm_setzero_ps(), accm1 = accm0;
    int64_t b = 0;
    for (; b + 2 <= nb; b += 2) {
        const char *x0 = x + (size_t)b * bs, *x1 = x0 + bs;
        avx2_prefetch(x0 + LM_AVX2_PREFETCH);
        acc0 = one_block(x0, &y[b].d, isum_of(t, x0, y[b].qs), acc0, &accm0);
        acc1 = one_block(x1, &y[b + 1].d, isum_of(t, x1, y[b + 1].qs), acc1, &accm1);
    }
    if (b < nb) {
        const char *x0 = x + (size_t)b * bs;
        acc0 = one_block(x0, &y[b].d, isum_of(t, x0, y[b].qs), acc0, &accm0);
    }
    const __m128 m = _mm_add_ps(accm0, accm1);
    *s = avx2_hsum_ps(_mm256_add_ps(acc0, acc1)) + _mm_cvtss_f32(_mm_movehdup_ps(m));
}

/* Contracts: kernels.h. */
void lm_vec_dot_q4_0_q8_0_avx2(int64_t n, float *s, const void *x, const void *y) { dot0(W_Q4_0, n, s, x, y); }
void lm_vec_dot_q5_0_q8_0_avx2(int64_t n, float *s, const void *x, const void *y) { dot0(W_Q5_0, n, s, x, y); }
void lm_vec_dot_q8_0_q8_0_avx2(int64_t n, float *s, const void *x, const void *y) { dot0(W_Q8_0, n, s, x, y); }
void lm_vec_dot_q4_1_q8_1_avx2(int64_t n, float *s, const void *x, const void *y) { dot1(W_Q4_1, n, s, x, y); }
void lm_vec_dot_q5_1_q8_1_avx2(int64_t n, float *s, const void *x, const void *y) { dot1(W_Q5_1, n, s, x, y); }

/* Blocks [b0, b0 + NB) of one item's output over its n cells: 4 NB
 * accumulators of 8 channels, each cell's row decoded as to_float decodes
 * it, then one FMA chain per lane in cell order. */
static inline __attribute__((always_inline)) void mad_rows_panel(const int NB, int64_t b0, int64_t n, float *out,
                                                                 const void *x, size_t bx, const int32_t *idx,
                                                                 const float *p)
{
    enum { BS = 34 };
    __m256 acc[8];
    for (int i = 0; i < 4 * NB; i++)
        acc[i] = _mm256_setzero_ps();
    for (int64_t k = 0; k < n; k++) {
        const uint8_t *row = (const uint8_t *)x + (size_t)(idx ? idx[k] : k) * bx + (size_t)b0 * BS;
        const __m256 pk = _mm256_set1_ps(p[k]);
        for (int b = 0; b < NB; b++) {
            const uint8_t *blk = row + (size_t)b * BS;
            lm_fp16 h;
            memcpy(&h, blk, sizeof h);
            const __m256 sc = _mm256_set1_ps(avx2_f16(h));
            for (int i = 0; i < 4; i++) {
                const __m256i c = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(blk + 2 + 8 * i)));
                acc[4 * b + i] = _mm256_fmadd_ps(pk, _mm256_mul_ps(sc, _mm256_cvtepi32_ps(c)), acc[4 * b + i]);
            }
        }
    }
    for (int b = 0; b < NB; b++)
        for (int i = 0; i < 4; i++)
            _mm256_storeu_ps(out + (b0 + b) * LM_QK + 8 * i, acc[4 * b + i]);
}

/* Contract: kernels.h. One item at a time, panels of 2 blocks (64 channels). */
void lm_vec_mad_rows_q8_0_avx2(int64_t d, int nq, const int64_t *len, float *const *out, const void *x, size_t bx,
                               const int32_t *idx, const float *const *p)
{
    const int64_t nb = d / LM_QK;
    for (int q = 0; q < nq; q++) {
        int64_t b0 = 0;
        for (; b0 + 2 <= nb; b0 += 2)
            mad_rows_panel(2, b0, len[q], out[q], x, bx, idx, p[q]);
        if (b0 < nb)
            mad_rows_panel(1, b0, len[q], out[q], x, bx, idx, p[q]);
    }
}
