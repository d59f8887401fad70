/* kquant_avx2.c - AVX2 dot products of the K-quants (Q2_K..Q6_K) with Q8_K.
 *
 * Per 256-element super-block the weight codes are unpacked to unsigned
 * bytes, multiplied with the Q8_K codes by maddubs (pairs summed in int16,
 * never saturating: codes <= 63, |y| <= 127), weighted by the integer
 * sub-block scales with madd (int32), and summed in int32 lanes: exact.
 * Constant offsets of the codes (Q3_K's -4, Q6_K's -32) and the mins (Q2_K,
 * Q4_K, Q5_K) are applied once per super-block through the Q8_K bsums
 * (sum_j scale_j * bsum_j, exact in int32), as ggml does for the mins.
 * Then, as ggml: acc += d_x*d_y * lanes [- dmin_x*d_y * min lanes] in float.
 * Only the float accumulation order differs from the generic kernels.
 *
 * Requirements: n a multiple of 256; blocks need their natural alignment
 * (loads are unaligned anyway); Q8_K codes in [-127, 127].
 */
#include "avx2_util.h"
#include "cpu/kernels/kernels.h"
#include "cpu/kernels/x86_kquant_scales.h"
#include "quant/blocks.h"

static inline __m256i load_y(const struct lm_block_q8_K *y, int off)
{
    return _mm256_loadu_si256((const __m256i *)(y->qs + off));
}

static inline __m256i load_bsums(const struct lm_block_q8_K *y)
{
    return _mm256_loadu_si256((const __m256i *)y->bsums);
}

/* Bit b of every byte of v moved to bit `to`, other bits cleared (b, to
 * constants after inlining; 16-bit shifts are fine since the mask keeps one
 * bit per byte that came from the same byte). */
static inline __m256i bit_to(__m256i v, int b, int to)
{
    const __m256i sh = to >= b ? _mm256_slli_epi16(v, to - b) : _mm256_srli_epi16(v, b - to);
    return _mm256_and_si256(sh, _mm256_set1_epi8((char)(1 << to)));
}

/* ---- 16-element sub-blocks (Q2_K, Q3_K, Q6_K) ----
 * A 32-element vector k (0..3) of half h covers sub-blocks 8h+2k (low lane)
 * and 8h+2k+1 (high lane). half_scales(S, h) puts the 8 int16 scales of half
 * h in both lanes; pair_scale(Sh, k) broadcasts scale 2k in the low lane and
 * 2k+1 in the high lane. */
static inline __m256i half_scales(__m256i s16, int h)
{
    return h ? _mm256_permute4x64_epi64(s16, 0xEE) : _mm256_permute4x64_epi64(s16, 0x44);
}

static inline __m256i pair_scale(__m256i sh, int k)
{
    const __m256i ctrl = _mm256_set_m128i(_mm_set1_epi16((short)(0x0302 + 0x0404 * k)),
                                          _mm_set1_epi16((short)(0x0100 + 0x0404 * k)));
    return _mm256_shuffle_epi8(sh, ctrl);
}

/* sumi += scales * maddubs(q, y) for the vector k of half h. */
static inline __m256i acc16(__m256i sumi, __m256i sh, int k, __m256i q, __m256i y)
{
    return _mm256_add_epi32(sumi, _mm256_madd_epi16(pair_scale(sh, k), _mm256_maddubs_epi16(q, y)));
}

/* Contract: kernels.h. */
void lm_vec_dot_q2_K_q8_K_avx2(int64_t n, float *s, const void *vx, const void *vy)
{
    const struct lm_block_q2_K *x = vx;
    const struct lm_block_q8_K *y = vy;
    const __m256i m3 = _mm256_set1_epi8(3);
    const __m128i m4 = _mm_set1_epi8(0x0F);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / LM_QK_K; b++) {
        avx2_prefetch((const char *)(x + b) + LM_AVX2_PREFETCH);
        const float dall = y[b].d * avx2_f16(x[b].d), dmin = y[b].d * avx2_f16(x[b].dmin);
        const __m128i sm = _mm_loadu_si128((const __m128i *)x[b].scales);
        const __m256i sc = _mm256_cvtepu8_epi16(_mm_and_si128(sm, m4));
        const __m256i mn = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sm, 4), m4));
        /* the mins first: fewer live registers in the code loop */
        acc = _mm256_fnmadd_ps(_mm256_set1_ps(dmin), _mm256_cvtepi32_ps(_mm256_madd_epi16(mn, load_bsums(&y[b]))), acc);
        __m256i s0 = _mm256_setzero_si256(), s1 = s0;
        for (int h = 0; h < 2; h++) {
            const __m256i q = _mm256_loadu_si256((const __m256i *)(x[b].qs + 32 * h));
            const __m256i sh = half_scales(sc, h);
            s0 = acc16(s0, sh, 0, _mm256_and_si256(q, m3), load_y(&y[b], 128 * h));
            s1 = acc16(s1, sh, 1, _mm256_and_si256(_mm256_srli_epi16(q, 2), m3), load_y(&y[b], 128 * h + 32));
            s0 = acc16(s0, sh, 2, _mm256_and_si256(_mm256_srli_epi16(q, 4), m3), load_y(&y[b], 128 * h + 64));
            s1 = acc16(s1, sh, 3, _mm256_and_si256(_mm256_srli_epi16(q, 6), m3), load_y(&y[b], 128 * h + 96));
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(dall), _mm256_cvtepi32_ps(_mm256_add_epi32(s0, s1)), acc);
    }
    *s = avx2_hsum_ps(acc);
}

/* The 16 signed 6-bit Q3_K scales (stored + 32) as int16. */
static inline __m256i q3_K_scales(const uint8_t *sc) { return _mm256_cvtepi8_epi16(x86_q3_K_scales(sc)); }

/* Contract: kernels.h. */
void lm_vec_dot_q3_K_q8_K_avx2(int64_t n, float *s, const void *vx, const void *vy)
{
    const struct lm_block_q3_K *x = vx;
    const struct lm_block_q8_K *y = vy;
    const __m256i m3 = _mm256_set1_epi8(3);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / LM_QK_K; b++) {
        avx2_prefetch((const char *)(x + b) + LM_AVX2_PREFETCH);
        const float d = avx2_f16(x[b].d) * y[b].d;
        const __m256i sc = q3_K_scales(x[b].scales);
        const __m256i hm = _mm256_loadu_si256((const __m256i *)x[b].hmask);
        /* codes are (2 low bits | high bit << 2) - 4: the -4 goes through bsums */
        __m256i s0 = _mm256_slli_epi32(_mm256_madd_epi16(sc, load_bsums(&y[b])), 2), s1 = _mm256_setzero_si256();
        s0 = _mm256_sub_epi32(s1, s0);
        for (int h = 0; h < 2; h++) {
            const __m256i q = _mm256_loadu_si256((const __m256i *)(x[b].qs + 32 * h));
            const __m256i sh = half_scales(sc, h);
            const __m256i q0 = _mm256_or_si256(_mm256_and_si256(q, m3), bit_to(hm, 4 * h, 2));
            const __m256i q1 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 2), m3), bit_to(hm, 4 * h + 1, 2));
            const __m256i q2 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), m3), bit_to(hm, 4 * h + 2, 2));
            const __m256i q3 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 6), m3), bit_to(hm, 4 * h + 3, 2));
            s0 = acc16(s0, sh, 0, q0, load_y(&y[b], 128 * h));
            s1 = acc16(s1, sh, 1, q1, load_y(&y[b], 128 * h + 32));
            s0 = acc16(s0, sh, 2, q2, load_y(&y[b], 128 * h + 64));
            s1 = acc16(s1, sh, 3, q3, load_y(&y[b], 128 * h + 96));
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(_mm256_add_epi32(s0, s1)), acc);
    }
    *s = avx2_hsum_ps(acc);
}

/* Contract: kernels.h. */
void lm_vec_dot_q6_K_q8_K_avx2(int64_t n, float *s, const void *vx, const void *vy)
{
    const struct lm_block_q6_K *x = vx;
    const struct lm_block_q8_K *y = vy;
    const __m256i m4 = _mm256_set1_epi8(0x0F), m30 = _mm256_set1_epi8(0x30);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / LM_QK_K; b++) {
        avx2_prefetch((const char *)(x + b) + LM_AVX2_PREFETCH);
        avx2_prefetch((const char *)(x + b) + LM_AVX2_PREFETCH + 64);
        const float d = avx2_f16(x[b].d) * y[b].d;
        const __m256i sc = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)x[b].scales));
        /* codes are 6 bits - 32: the -32 goes through bsums */
        __m256i s0 = _mm256_slli_epi32(_mm256_madd_epi16(sc, load_bsums(&y[b])), 5), s1 = _mm256_setzero_si256();
        s0 = _mm256_sub_epi32(s1, s0);
        for (int h = 0; h < 2; h++) {
            const __m256i a = _mm256_loadu_si256((const __m256i *)(x[b].ql + 64 * h));
            const __m256i c = _mm256_loadu_si256((const __m256i *)(x[b].ql + 64 * h + 32));
            const __m256i hb = _mm256_loadu_si256((const __m256i *)(x[b].qh + 32 * h));
            const __m256i sh = half_scales(sc, h);
            /* low 4 bits | the 2 high bits (qh bits 2s..2s+1) moved to bits 4..5 */
            const __m256i h0 = _mm256_and_si256(_mm256_slli_epi16(hb, 4), m30);
            const __m256i h1 = _mm256_and_si256(_mm256_slli_epi16(hb, 2), m30);
            const __m256i h2 = _mm256_and_si256(hb, m30), h3 = _mm256_and_si256(_mm256_srli_epi16(hb, 2), m30);
            const __m256i q0 = _mm256_or_si256(_mm256_and_si256(a, m4), h0);
            const __m256i q1 = _mm256_or_si256(_mm256_and_si256(c, m4), h1);
            const __m256i q2 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(a, 4), m4), h2);
            const __m256i q3 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(c, 4), m4), h3);
            s0 = acc16(s0, sh, 0, q0, load_y(&y[b], 128 * h));
            s1 = acc16(s1, sh, 1, q1, load_y(&y[b], 128 * h + 32));
            s0 = acc16(s0, sh, 2, q2, load_y(&y[b], 128 * h + 64));
            s1 = acc16(s1, sh, 3, q3, load_y(&y[b], 128 * h + 96));
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(_mm256_add_epi32(s0, s1)), acc);
    }
    *s = avx2_hsum_ps(acc);
}

/* ---- 32-element sub-blocks (Q4_K, Q5_K) ---- */

/* The 8 6-bit scales (int16 lanes 0..7, in both 128-bit lanes) and the 8
 * mins (int16, 128 bits) of a Q4_K / Q5_K block (lm_quant_scale_min_k4). */
static inline void k4_scales(const uint8_t *q, __m256i *sc, __m128i *mn)
{
    const __m256i both = _mm256_cvtepu8_epi16(x86_k4_scales_mins(q));
    *sc = _mm256_permute4x64_epi64(both, 0x44);
    *mn = _mm256_extracti128_si256(both, 1);
}

/* sum_j min_j * (bsum_2j + bsum_2j+1) in 4 int32 lanes. */
static inline __m128i k4_mins(__m128i mn, const struct lm_block_q8_K *y)
{
    const __m256i bs = load_bsums(y);
    const __m128i pairs = _mm_hadd_epi16(_mm256_castsi256_si128(bs), _mm256_extracti128_si256(bs, 1));
    return _mm_madd_epi16(mn, pairs);
}

/* The start of a Q4_K / Q5_K block xb (fields d, dmin, scales): prefetch
 * ahead, add dmin * sum_j min_j * bsums to accm, the scales into *sc.
 * Returns d = y.d * x.d. */
static inline float k4_block_start(const void *xb, lm_fp16 xd, lm_fp16 xdmin, const uint8_t *scales,
                                   const struct lm_block_q8_K *yb, __m256i *sc, __m128 *accm)
{
    avx2_prefetch((const char *)xb + LM_AVX2_PREFETCH);
    avx2_prefetch((const char *)xb + LM_AVX2_PREFETCH + 64);
    const float d = yb->d * avx2_f16(xd), dmin = yb->d * avx2_f16(xdmin);
    __m128i mn;
    k4_scales(scales, sc, &mn);
    *accm = _mm_fmadd_ps(_mm_set1_ps(dmin), _mm_cvtepi32_ps(k4_mins(mn, yb)), *accm);
    return d;
}

/* scales[j] * maddubs(q, y) for the 32-element sub-block j. */
static inline __m256i acc32(__m256i sumi, __m256i sc, int j, __m256i q, __m256i y)
{
    const __m256i s = _mm256_shuffle_epi8(sc, _mm256_set1_epi16((short)(0x0100 + 0x0202 * j)));
    return _mm256_add_epi32(sumi, _mm256_madd_epi16(s, _mm256_maddubs_epi16(q, y)));
}

/* Contract: kernels.h. */
void lm_vec_dot_q4_K_q8_K_avx2(int64_t n, float *s, const void *vx, const void *vy)
{
    const struct lm_block_q4_K *x = vx;
    const struct lm_block_q8_K *y = vy;
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    __m256 acc = _mm256_setzero_ps();
    __m128 accm = _mm_setzero_ps();
    for (int64_t b = 0; b < n / LM_QK_K; b++) {
        __m256i sc;
        const float d = k4_block_start(&x[b], x[b].d, x[b].dmin, x[b].scales, &y[b], &sc, &accm);
        __m256i s0 = _mm256_setzero_si256(), s1 = s0;
        for (int g = 0; g < 4; g++) {
            const __m256i q = _mm256_loadu_si256((const __m256i *)(x[b].qs + 32 * g));
            s0 = acc32(s0, sc, 2 * g, _mm256_and_si256(q, m4), load_y(&y[b], 64 * g));
            s1 = acc32(s1, sc, 2 * g + 1, _mm256_and_si256(_mm256_srli_epi16(q, 4), m4), load_y(&y[b], 64 * g + 32));
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(_mm256_add_epi32(s0, s1)), acc);
    }
    *s = avx2_hsum_ps(acc) - avx2_hsum_ps128(accm);
}

/* Contract: kernels.h. */
void lm_vec_dot_q5_K_q8_K_avx2(int64_t n, float *s, const void *vx, const void *vy)
{
    const struct lm_block_q5_K *x = vx;
    const struct lm_block_q8_K *y = vy;
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    __m256 acc = _mm256_setzero_ps();
    __m128 accm = _mm_setzero_ps();
    for (int64_t b = 0; b < n / LM_QK_K; b++) {
        __m256i sc;
        const float d = k4_block_start(&x[b], x[b].d, x[b].dmin, x[b].scales, &y[b], &sc, &accm);
        const __m256i qh = _mm256_loadu_si256((const __m256i *)x[b].qh);
        __m256i s0 = _mm256_setzero_si256(), s1 = s0;
        for (int g = 0; g < 4; g++) {
            const __m256i q = _mm256_loadu_si256((const __m256i *)(x[b].qs + 32 * g));
            const __m256i lo = _mm256_or_si256(_mm256_and_si256(q, m4), bit_to(qh, 2 * g, 4));
            const __m256i hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), m4), bit_to(qh, 2 * g + 1, 4));
            s0 = acc32(s0, sc, 2 * g, lo, load_y(&y[b], 64 * g));
            s1 = acc32(s1, sc, 2 * g + 1, hi, load_y(&y[b], 64 * g + 32));
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(_mm256_add_epi32(s0, s1)), acc);
    }
    *s = avx2_hsum_ps(acc) - avx2_hsum_ps128(accm);
}
