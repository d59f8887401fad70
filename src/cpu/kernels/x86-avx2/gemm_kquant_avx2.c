/* gemm_kquant_avx2.c - AVX2 GEMM over repacked K-quant groups (kernels.h
 * lm_gemm_fn; layouts q2_Kx8 .. q6_Kx8 in cpu/repack.h; activations Q8_K).
 *
 * As in gemm_avx2.c, one register holds 4 consecutive codes of each of the 8
 * rows, the activation's 4 matching bytes are broadcast, and vpmaddubsw (codes
 * unsigned) / vpmaddwd leave one partial sum per row in each 32-bit lane.
 *
 * Per super-block the sub-block scales (and mins) are decoded once into
 * registers of int16 pairs (v, v) per row (the 8 rows' values for one
 * sub-block), kept on the stack; then the columns of the call are done in
 * groups of 4 (Q4_K, Q5_K) or 8 (Q2_K, Q3_K, Q6_K): the unpacked codes of a
 * super-block are reused by the group, the decoded scales by all columns.
 *
 * Bounds (exact integers; activations in [-128, 127]): the int16 lanes sum,
 * before each vpmaddwd, 16 products of codes <= 15 (Q4_K: <= 30720), 8 of
 * codes <= 31 (Q5_K: <= 31744), 4 of codes <= 63 (Q6_K: <= 32256), 8 of codes
 * <= 3 / 7 (Q2_K / Q3_K). Then vpmaddwd with the scales: int32 sums of a
 * super-block < 2^29. The mins (Q2_K, Q4_K, Q5_K: sum_j m_j bsum_j) and the
 * code offsets (Q3_K -4, Q6_K -32: offset * sum_j sc_j bsum_j) go through the
 * Q8_K bsums, by vpmaddwd against broadcast pairs of bsums. Float per
 * super-block:
 *     Q2_K, Q4_K, Q5_K: acc += (d_r d_a) isum - (dmin_r d_a) msum  (two FMAs)
 *     Q3_K, Q6_K:       acc += (d_r d_a) isum
 * Only the float rounding differs from the generic kernels.
 */
#include <immintrin.h>
#include <string.h>

#include "avx2_util.h"
#include "cpu/kernels/gemm.h"
#include "cpu/repack.h"
#include "quant/blocks.h"

#define NCMAX LM_GEMM_MAX_NC

static inline __m256i bcast4(const void *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
}

static inline __m256i load256(const void *p) { return _mm256_loadu_si256((const __m256i *)p); }

static inline const struct lm_block_q8_K *act(const char *y, size_t by, int c, int64_t b)
{
    return (const struct lm_block_q8_K *)(y + (size_t)c * by) + b;
}

/* Prefetch the next super-block group (the GEMV case streams weights once). */
static inline __attribute__((always_inline)) void prefetch_group(const void *p, size_t bytes)
{
    for (size_t o = 0; o < bytes; o += 64)
        avx2_prefetch((const char *)p + LM_AVX2_PREFETCH + o);
}

/* ---- 32-element sub-blocks: Q4_K, Q5_K ---- */

/* Scales and mins of one q4_Kx8 / q5_Kx8 super-block (tables sc[64], mn[32]).
 * Entry 16p + 2r + e is row r, sub-block 2p + e. sc[j]: int16 pairs (v, v)
 * of the 8 rows' scales of sub-block j (a 16-byte broadcast and one shuffle
 * put each row's entry in its lane); mn[p]: int16 pairs (m_r,2p, m_r,2p+1)
 * (the 16 entries of p in order, zero-extended). */
static void k4_decode(const uint8_t *tsc, const uint8_t *tmn, __m256i sc[8], __m256i mn[4])
{
    const __m256i dup0 = _mm256_setr_epi8(0, -1, 0, -1, 2, -1, 2, -1, 4, -1, 4, -1, 6, -1, 6, -1, 8, -1, 8, -1, 10, -1,
                                          10, -1, 12, -1, 12, -1, 14, -1, 14, -1);
    const __m256i dup1 = _mm256_add_epi8(dup0, _mm256_set1_epi16(1)); /* +1 on the low bytes only */
    const __m256i m3f = _mm256_set1_epi16(0x3F), m0f = _mm256_set1_epi16(0x0F), m30 = _mm256_set1_epi16(0x30);
    for (int p = 0; p < 4; p++) {
        const __m128i s8 = _mm_loadu_si128((const __m128i *)(tsc + 16 * p));
        const __m256i s = _mm256_broadcastsi128_si256(s8);
        sc[2 * p] = _mm256_and_si256(_mm256_shuffle_epi8(s, dup0), m3f);
        sc[2 * p + 1] = _mm256_and_si256(_mm256_shuffle_epi8(s, dup1), m3f);
        __m256i lo = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(tmn + 16 * (p & 1))));
        if (p >= 2)
            lo = _mm256_srli_epi16(lo, 4);
        const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(_mm256_cvtepu8_epi16(s8), 2), m30);
        mn[p] = _mm256_or_si256(_mm256_and_si256(lo, m0f), hi);
    }
}

/* sum_j m_rj * bsum32_j of one column (int32 per row): the Q8_K bsums of 16
 * summed in pairs (hadd: b_0..b_3 in the low lane, b_4..b_7 in the high one,
 * twice each), each (b_2p, b_2p+1) pair broadcast against mn[p]. */
static inline __m256i k4_mins(const __m256i *mn, const struct lm_block_q8_K *a)
{
    const __m256i v = load256(a->bsums);
    const __m256i h = _mm256_hadd_epi16(v, v);
    __m256i m = _mm256_madd_epi16(mn[0], _mm256_permutevar8x32_epi32(h, _mm256_set1_epi32(0)));
    m = _mm256_add_epi32(m, _mm256_madd_epi16(mn[1], _mm256_permutevar8x32_epi32(h, _mm256_set1_epi32(1))));
    m = _mm256_add_epi32(m, _mm256_madd_epi16(mn[2], _mm256_permutevar8x32_epi32(h, _mm256_set1_epi32(4))));
    return _mm256_add_epi32(m, _mm256_madd_epi16(mn[3], _mm256_permutevar8x32_epi32(h, _mm256_set1_epi32(5))));
}

/* Q4_K sub-block j = 2p + e of nc columns: isum[c] += scale_j * (codes . a_c).
 * p, e are constants after inlining (low or high nibbles of chunks 8p..8p+7). */
static inline __attribute__((always_inline)) void q4k_sub(const struct lm_block_q4_Kx8 *w, __m256i scale,
                                                          const struct lm_block_q8_K *const *a, int nc, int p,
                                                          int e, __m256i *isum)
{
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    __m256i s16[4];
    for (int k = 0; k < 8; k++) {
        const __m256i raw = load256(w->qs + 32 * (8 * p + k));
        const __m256i q = _mm256_and_si256(e ? _mm256_srli_epi16(raw, 4) : raw, m4);
        for (int c = 0; c < nc; c++) {
            const __m256i t = _mm256_maddubs_epi16(q, bcast4(a[c]->qs + 64 * p + 32 * e + 4 * k));
            s16[c] = k ? _mm256_add_epi16(s16[c], t) : t;
            PIN(s16[c]);
        }
    }
    for (int c = 0; c < nc; c++)
        isum[c] = _mm256_add_epi32(isum[c], _mm256_madd_epi16(s16[c], scale));
}

/* Q5_K sub-block j = 2p + e: as Q4_K plus bit j of qh chunk k as bit 4 of
 * each code; codes <= 31, so the int16 sums go to vpmaddwd every 4 chunks. */
static inline __attribute__((always_inline)) void q5k_sub(const struct lm_block_q5_Kx8 *w, __m256i scale,
                                                          const struct lm_block_q8_K *const *a, int nc, int p,
                                                          int e, __m256i *isum)
{
    const int j = 2 * p + e;
    const __m256i m4 = _mm256_set1_epi8(0x0F), m10 = _mm256_set1_epi8(0x10);
    for (int half = 0; half < 2; half++) {
        __m256i s16[4];
        for (int kk = 0; kk < 4; kk++) {
            const int k = 4 * half + kk;
            const __m256i raw = load256(w->qs + 32 * (8 * p + k)), h = load256(w->qh + 32 * k);
            const __m256i hb = j < 4 ? _mm256_slli_epi16(h, 4 - j) : j == 4 ? h : _mm256_srli_epi16(h, j - 4);
            const __m256i q = _mm256_or_si256(_mm256_and_si256(e ? _mm256_srli_epi16(raw, 4) : raw, m4),
                                              _mm256_and_si256(hb, m10));
            for (int c = 0; c < nc; c++) {
                const __m256i t = _mm256_maddubs_epi16(q, bcast4(a[c]->qs + 32 * j + 4 * k));
                s16[c] = kk ? _mm256_add_epi16(s16[c], t) : t;
                PIN(s16[c]);
            }
        }
        for (int c = 0; c < nc; c++)
            isum[c] = _mm256_add_epi32(isum[c], _mm256_madd_epi16(s16[c], scale));
    }
}

/* NC (1..4) columns of one q4_Kx8 (q5 false) / q5_Kx8 super-block: acc[c] += its update. */
static inline __attribute__((always_inline)) void k4_cols(const bool q5, const int NC, const void *w, const __m256i *sc,
                                                          const __m256i *mn, const char *y, size_t by, int64_t b,
                                                          __m256 *acc)
{
    const struct lm_block_q4_Kx8 *w4 = w;
    const struct lm_block_q5_Kx8 *w5 = w;
    const struct lm_block_q8_K *a[4];
    __m256i isum[4], msum[4];
    for (int c = 0; c < NC; c++) {
        a[c] = act(y, by, c, b);
        isum[c] = _mm256_setzero_si256();
    }
    for (int p = 0; p < 4; p++) {
        if (q5) {
            q5k_sub(w5, sc[2 * p], a, NC, p, 0, isum);
            q5k_sub(w5, sc[2 * p + 1], a, NC, p, 1, isum);
        } else {
            q4k_sub(w4, sc[2 * p], a, NC, p, 0, isum);
            q4k_sub(w4, sc[2 * p + 1], a, NC, p, 1, isum);
        }
    }
    for (int c = 0; c < NC; c++)
        msum[c] = k4_mins(mn, a[c]);
    const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(q5 ? w5->d : w4->d)));
    const __m256 dmw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(q5 ? w5->dmin : w4->dmin)));
    for (int c = 0; c < NC; c++) {
        const __m256 da = _mm256_set1_ps(a[c]->d);
        acc[c] = _mm256_fmadd_ps(_mm256_mul_ps(dw, da), _mm256_cvtepi32_ps(isum[c]), acc[c]);
        acc[c] = _mm256_fnmadd_ps(_mm256_mul_ps(dmw, da), _mm256_cvtepi32_ps(msum[c]), acc[c]);
    }
}

/* One function per type and column count (the instances the GEMM calls). */
typedef void (*k4_cols_fn)(const void *w, const __m256i *sc, const __m256i *mn, const char *y, size_t by, int64_t b,
                           __m256 *acc);
static void q4k_cols_1(const void *w, const __m256i *sc, const __m256i *mn, const char *y, size_t by, int64_t b,
                       __m256 *acc)
{
    k4_cols(false, 1, w, sc, mn, y, by, b, acc);
}
static void q4k_cols_2(const void *w, const __m256i *sc, const __m256i *mn, const char *y, size_t by, int64_t b,
                       __m256 *acc)
{
    k4_cols(false, 2, w, sc, mn, y, by, b, acc);
}
static void q4k_cols_3(const void *w, const __m256i *sc, const __m256i *mn, const char *y, size_t by, int64_t b,
                       __m256 *acc)
{
    k4_cols(false, 3, w, sc, mn, y, by, b, acc);
}
static void q4k_cols_4(const void *w, const __m256i *sc, const __m256i *mn, const char *y, size_t by, int64_t b,
                       __m256 *acc)
{
    k4_cols(false, 4, w, sc, mn, y, by, b, acc);
}
static void q5k_cols_1(const void *w, const __m256i *sc, const __m256i *mn, const char *y, size_t by, int64_t b,
                       __m256 *acc)
{
    k4_cols(true, 1, w, sc, mn, y, by, b, acc);
}
static void q5k_cols_2(const void *w, const __m256i *sc, const __m256i *mn, const char *y, size_t by, int64_t b,
                       __m256 *acc)
{
    k4_cols(true, 2, w, sc, mn, y, by, b, acc);
}
static void q5k_cols_3(const void *w, const __m256i *sc, const __m256i *mn, const char *y, size_t by, int64_t b,
                       __m256 *acc)
{
    k4_cols(true, 3, w, sc, mn, y, by, b, acc);
}
static void q5k_cols_4(const void *w, const __m256i *sc, const __m256i *mn, const char *y, size_t by, int64_t b,
                       __m256 *acc)
{
    k4_cols(true, 4, w, sc, mn, y, by, b, acc);
}

/* The GEMM over all super-blocks: decode once per super-block, then columns
 * in groups of 4. */
static inline __attribute__((always_inline)) void k4_gemm(const bool q5, int64_t k, float *s, size_t ldc, const void *x,
                                                          const void *y, size_t by, int nc)
{
    const int64_t nb = k / LM_QK_K;
    const size_t bw = q5 ? sizeof(struct lm_block_q5_Kx8) : sizeof(struct lm_block_q4_Kx8);
    const k4_cols_fn *cols = q5 ? (const k4_cols_fn[4]){q5k_cols_1, q5k_cols_2, q5k_cols_3, q5k_cols_4}
                                : (const k4_cols_fn[4]){q4k_cols_1, q4k_cols_2, q4k_cols_3, q4k_cols_4};
    __m256 acc[NCMAX];
    for (int c = 0; c < nc; c++)
        acc[c] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const char *wb = (const char *)x + (size_t)b * bw;
        const struct lm_block_q4_Kx8 *w4 = (const void *)wb;
        const struct lm_block_q5_Kx8 *w5 = (const void *)wb;
        __m256i sc[8], mn[4];
        prefetch_group(wb, bw);
        k4_decode(q5 ? w5->sc : w4->sc, q5 ? w5->mn : w4->mn, sc, mn);
        for (int c0 = 0; c0 < nc; c0 += 4) {
            const char *yy = (const char *)y + (size_t)c0 * by;
            switch (nc - c0 < 4 ? nc - c0 : 4) {
            case 4: cols[3](wb, sc, mn, yy, by, b, acc + c0); break;
            case 3: cols[2](wb, sc, mn, yy, by, b, acc + c0); break;
            case 2: cols[1](wb, sc, mn, yy, by, b, acc + c0); break;
            default: cols[0](wb, sc, mn, yy, by, b, acc + c0); break;
            }
        }
    }
    for (int c = 0; c < nc; c++)
        _mm256_storeu_ps(s + (size_t)c * ldc, acc[c]);
}

/* Contract: kernels.h. */
void lm_gemm_q4_Kx8_q8_K_avx2(int64_t k, float *s, size_t ldc, const void *x, const void *y, size_t by,
                              const int16_t *ysum, int nc)
{
    (void)ysum;
    k4_gemm(false, k, s, ldc, x, y, by, nc);
}
/* Contract: kernels.h. */
void lm_gemm_q5_Kx8_q8_K_avx2(int64_t k, float *s, size_t ldc, const void *x, const void *y, size_t by,
                              const int16_t *ysum, int nc)
{
    (void)ysum;
    k4_gemm(true, k, s, ldc, x, y, by, nc);
}

/* ---- 16-element sub-blocks: Q2_K, Q3_K, Q6_K ----
 * Sub-block j (0..15) is 4 code registers (elements 16j..16j+15 of the 8
 * rows). Per super-block, decode gives sc[j] = (s_rj, s_rj) int16 per row
 * (the multiplier of sub-block j) and pr[q] = (v_r,2q, v_r,2q+1) for the
 * bsums term: the scales for Q3_K's -4 and Q6_K's -32 offsets, the mins for
 * Q2_K. */
enum k16 { K16_Q2, K16_Q3, K16_Q6 };

/* (v_rj, v_rj) of the two sub-blocks of a pair vector (int16 per row). */
static inline void k16_dup(__m256i pr, __m256i *even, __m256i *odd)
{
    const __m256i lo = _mm256_setr_epi8(0, 1, 0, 1, 4, 5, 4, 5, 8, 9, 8, 9, 12, 13, 12, 13, 0, 1, 0, 1, 4, 5, 4, 5, 8,
                                        9, 8, 9, 12, 13, 12, 13);
    *even = _mm256_shuffle_epi8(pr, lo);
    *odd = _mm256_shuffle_epi8(pr, _mm256_add_epi8(lo, _mm256_set1_epi8(2)));
}

/* The 16 entries of pair q are 16 consecutive bytes of each scale table. */
static void q2k_decode(const struct lm_block_q2_Kx8 *w, __m256i sc[16], __m256i pr[8])
{
    const __m256i m0f = _mm256_set1_epi16(0x0F);
    for (int q = 0; q < 8; q++) {
        const __m256i v = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(w->scales + 16 * q)));
        pr[q] = _mm256_srli_epi16(v, 4); /* mins */
        k16_dup(_mm256_and_si256(v, m0f), &sc[2 * q], &sc[2 * q + 1]);
    }
}

static void q3k_decode(const struct lm_block_q3_Kx8 *w, __m256i sc[16], __m256i pr[8])
{
    const __m256i m0f = _mm256_set1_epi16(0x0F), m3 = _mm256_set1_epi16(3), off = _mm256_set1_epi16(32);
    for (int q = 0; q < 8; q++) {
        __m256i lo = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(w->s4 + 16 * (q % 4))));
        __m256i hi = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(w->s2 + 16 * (q % 2))));
        lo = _mm256_and_si256(q >= 4 ? _mm256_srli_epi16(lo, 4) : lo, m0f);
        hi = _mm256_and_si256(_mm256_srli_epi16(hi, 2 * (q / 2)), m3);
        pr[q] = _mm256_sub_epi16(_mm256_or_si256(lo, _mm256_slli_epi16(hi, 4)), off);
        k16_dup(pr[q], &sc[2 * q], &sc[2 * q + 1]);
    }
}

static void q6k_decode(const struct lm_block_q6_Kx8 *w, __m256i sc[16], __m256i pr[8])
{
    for (int q = 0; q < 8; q++) {
        pr[q] = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(w->scales + 16 * q)));
        k16_dup(pr[q], &sc[2 * q], &sc[2 * q + 1]);
    }
}

/* The 4 unsigned code registers of sub-block j (t constant after inlining). */
static inline __attribute__((always_inline)) void k16_unpack(enum k16 t, const void *wv, int j, __m256i q[4])
{
    const __m256i m4 = _mm256_set1_epi8(0x0F), m30 = _mm256_set1_epi8(0x30), m3 = _mm256_set1_epi8(3);
    if (t == K16_Q6) {
        const struct lm_block_q6_Kx8 *w = wv;
        const __m256i l0 = load256(w->sub[j].ql), l1 = load256(w->sub[j].ql + 32), h = load256(w->sub[j].qh);
        q[0] = _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_and_si256(_mm256_slli_epi16(h, 4), m30));
        q[1] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
                               _mm256_and_si256(_mm256_slli_epi16(h, 2), m30));
        q[2] = _mm256_or_si256(_mm256_and_si256(l1, m4), _mm256_and_si256(h, m30));
        q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                               _mm256_and_si256(_mm256_srli_epi16(h, 2), m30));
        return;
    }
    const uint8_t *qs =
        t == K16_Q2 ? ((const struct lm_block_q2_Kx8 *)wv)->qs : ((const struct lm_block_q3_Kx8 *)wv)->qs;
    const __m256i l = load256(qs + 32 * j);
    q[0] = _mm256_and_si256(l, m3);
    q[1] = _mm256_and_si256(_mm256_srli_epi16(l, 2), m3);
    q[2] = _mm256_and_si256(_mm256_srli_epi16(l, 4), m3);
    q[3] = _mm256_and_si256(_mm256_srli_epi16(l, 6), m3);
    if (t == K16_Q3) { /* bit 4(j%2) + u of hm chunk j/2 -> bit 2 of register u */
        const __m256i h = load256(((const struct lm_block_q3_Kx8 *)wv)->hm + 32 * (j / 2)), m04 = _mm256_set1_epi8(4);
        const int b0 = 4 * (j % 2);
        const __m256i h0 = b0 < 2 ? _mm256_slli_epi16(h, 2 - b0) : _mm256_srli_epi16(h, b0 - 2);
        const __m256i h1 = b0 < 1 ? _mm256_slli_epi16(h, 1) : _mm256_srli_epi16(h, b0 - 1);
        q[0] = _mm256_or_si256(q[0], _mm256_and_si256(h0, m04));
        q[1] = _mm256_or_si256(q[1], _mm256_and_si256(h1, m04));
        q[2] = _mm256_or_si256(q[2], _mm256_and_si256(_mm256_srli_epi16(h, b0), m04));
        q[3] = _mm256_or_si256(q[3], _mm256_and_si256(_mm256_srli_epi16(h, b0 + 1), m04));
    }
}

/* nc columns of one super-block: acc[c] += its update. Bounds per int16
 * lane: Q2_K/Q3_K codes <= 7, a whole sub-block (8 products per lane) fits:
 * one vpmaddwd per sub-block; Q6_K codes <= 63, 4 products per lane: two. */
static inline __attribute__((always_inline)) void k16_cols(enum k16 t, const void *w, const lm_fp16 *d,
                                                           const lm_fp16 *dmin, const __m256i *sc, const __m256i *pr,
                                                           const char *y, size_t by, int64_t b, __m256 *acc, int nc)
{
    const struct lm_block_q8_K *a[8];
    __m256i isum[8], msum[8];
    for (int c = 0; c < nc; c++) {
        a[c] = act(y, by, c, b);
        __m256i o = _mm256_madd_epi16(pr[0], bcast4(a[c]->bsums));
        for (int q = 1; q < 8; q++)
            o = _mm256_add_epi32(o, _mm256_madd_epi16(pr[q], bcast4(a[c]->bsums + 2 * q)));
        if (t == K16_Q2) { /* mins */
            msum[c] = o;
            isum[c] = _mm256_setzero_si256();
        } else { /* - offset * sum_j sc_j bsum_j */
            isum[c] = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(o, t == K16_Q6 ? 5 : 2));
        }
    }
    for (int j = 0; j < 16; j++) {
        __m256i q[4];
        k16_unpack(t, w, j, q);
        for (int c = 0; c < nc; c++) {
            const int8_t *aq = a[c]->qs + 16 * j;
            const __m256i p0 = _mm256_add_epi16(_mm256_maddubs_epi16(q[0], bcast4(aq)),
                                                _mm256_maddubs_epi16(q[1], bcast4(aq + 4)));
            const __m256i p1 = _mm256_add_epi16(_mm256_maddubs_epi16(q[2], bcast4(aq + 8)),
                                                _mm256_maddubs_epi16(q[3], bcast4(aq + 12)));
            const __m256i s = t == K16_Q6 ? _mm256_add_epi32(_mm256_madd_epi16(p0, sc[j]), _mm256_madd_epi16(p1, sc[j]))
                                          : _mm256_madd_epi16(_mm256_add_epi16(p0, p1), sc[j]);
            isum[c] = _mm256_add_epi32(isum[c], s);
            PIN(isum[c]);
        }
    }
    const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)d));
    for (int c = 0; c < nc; c++) {
        const __m256 da = _mm256_set1_ps(a[c]->d);
        acc[c] = _mm256_fmadd_ps(_mm256_mul_ps(dw, da), _mm256_cvtepi32_ps(isum[c]), acc[c]);
        if (t == K16_Q2)
            acc[c] = _mm256_fnmadd_ps(_mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)dmin)), da),
                                      _mm256_cvtepi32_ps(msum[c]), acc[c]);
    }
}

/* nc (1..8) columns of one super-block of type t, one instance per count. */
static inline __attribute__((always_inline)) void k16_cols_n(enum k16 t, const void *w, const __m256i *sc,
                                                             const __m256i *pr, const char *y, size_t by, int64_t b,
                                                             __m256 *acc, int nc)
{
    const lm_fp16 *d = t == K16_Q2   ? ((const struct lm_block_q2_Kx8 *)w)->d
                       : t == K16_Q3 ? ((const struct lm_block_q3_Kx8 *)w)->d
                                     : ((const struct lm_block_q6_Kx8 *)w)->d;
    const lm_fp16 *dmin = t == K16_Q2 ? ((const struct lm_block_q2_Kx8 *)w)->dmin : NULL;
    switch (nc) {
    case 8: k16_cols(t, w, d, dmin, sc, pr, y, by, b, acc, 8); break;
    case 7: k16_cols(t, w, d, dmin, sc, pr, y, by, b, acc, 7); break;
    case 6: k16_cols(t, w, d, dmin, sc, pr, y, by, b, acc, 6); break;
    case 5: k16_cols(t, w, d, dmin, sc, pr, y, by, b, acc, 5); break;
    case 4: k16_cols(t, w, d, dmin, sc, pr, y, by, b, acc, 4); break;
    case 3: k16_cols(t, w, d, dmin, sc, pr, y, by, b, acc, 3); break;
    case 2: k16_cols(t, w, d, dmin, sc, pr, y, by, b, acc, 2); break;
    default: k16_cols(t, w, d, dmin, sc, pr, y, by, b, acc, 1); break;
    }
}
typedef void (*k16_cols_fn)(const void *w, const __m256i *sc, const __m256i *pr, const char *y, size_t by, int64_t b,
                            __m256 *acc, int nc);
static void q2k_cols(const void *w, const __m256i *sc, const __m256i *pr, const char *y, size_t by, int64_t b,
                     __m256 *acc, int nc)
{
    k16_cols_n(K16_Q2, w, sc, pr, y, by, b, acc, nc);
}
static void q3k_cols(const void *w, const __m256i *sc, const __m256i *pr, const char *y, size_t by, int64_t b,
                     __m256 *acc, int nc)
{
    k16_cols_n(K16_Q3, w, sc, pr, y, by, b, acc, nc);
}
static void q6k_cols(const void *w, const __m256i *sc, const __m256i *pr, const char *y, size_t by, int64_t b,
                     __m256 *acc, int nc)
{
    k16_cols_n(K16_Q6, w, sc, pr, y, by, b, acc, nc);
}

/* The GEMM of one type: decode once per super-block, then the columns in
 * groups of up to 8 (the unpacked codes of a sub-block are reused by all 8). */
static inline __attribute__((always_inline)) void k16_gemm(enum k16 t, int64_t k, float *s, size_t ldc, const void *x,
                                                           const void *y, size_t by, int nc)
{
    const int64_t nb = k / LM_QK_K;
    const size_t bw = t == K16_Q2   ? sizeof(struct lm_block_q2_Kx8)
                      : t == K16_Q3 ? sizeof(struct lm_block_q3_Kx8)
                                    : sizeof(struct lm_block_q6_Kx8);
    const k16_cols_fn cols = t == K16_Q2 ? q2k_cols : t == K16_Q3 ? q3k_cols : q6k_cols;
    __m256 acc[NCMAX];
    for (int c = 0; c < nc; c++)
        acc[c] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const char *wb = (const char *)x + (size_t)b * bw;
        __m256i sc[16], pr[8];
        prefetch_group(wb, bw);
        switch (t) {
        case K16_Q2: q2k_decode((const void *)wb, sc, pr); break;
        case K16_Q3: q3k_decode((const void *)wb, sc, pr); break;
        default: q6k_decode((const void *)wb, sc, pr); break;
        }
        for (int c0 = 0; c0 < nc; c0 += 8)
            cols(wb, sc, pr, (const char *)y + (size_t)c0 * by, by, b, acc + c0, nc - c0 < 8 ? nc - c0 : 8);
    }
    for (int c = 0; c < nc; c++)
        _mm256_storeu_ps(s + (size_t)c * ldc, acc[c]);
}

/* Contract: kernels.h. */
void lm_gemm_q2_Kx8_q8_K_avx2(int64_t k, float *s, size_t ldc, const void *x, const void *y, size_t by,
                              const int16_t *ysum, int nc)
{
    (void)ysum;
    k16_gemm(K16_Q2, k, s, ldc, x, y, by, nc);
}
/* Contract: kernels.h. */
void lm_gemm_q3_Kx8_q8_K_avx2(int64_t k, float *s, size_t ldc, const void *x, const void *y, size_t by,
                              const int16_t *ysum, int nc)
{
    (void)ysum;
    k16_gemm(K16_Q3, k, s, ldc, x, y, by, nc);
}
/* Contract: kernels.h. */
void lm_gemm_q6_Kx8_q8_K_avx2(int64_t k, float *s, size_t ldc, const void *x, const void *y, size_t by,
                              const int16_t *ysum, int nc)
{
    (void)ysum;
    k16_gemm(K16_Q6, k, s, ldc, x, y, by, nc);
}
