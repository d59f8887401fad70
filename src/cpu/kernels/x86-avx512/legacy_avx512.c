/* legacy_avx512.c - AVX-512 VNNI dot products of the 32-element quant types
 * with their activation types: Q4_0/Q5_0/Q8_0 x Q8_0 and Q4_1/Q5_1 x Q8_1.
 *
 * One zmm holds two blocks (lanes 0..7 block A, 8..15 block B). Per pair the
 * 64 integer products are summed exactly in int32 lanes by vpdpbusd
 * (unsigned x signed bytes, groups of 4):
 *   - Q4_0 / Q5_0: the unsigned codes q (0..15 / 0..31) times y, minus the
 *     offset (8 / 16) times y (a second vpdpbusd with a constant operand);
 *   - Q4_1 / Q5_1: the unsigned codes times y (their m goes through Q8_1's s);
 *   - Q8_0: |x| times y with y negated where x < 0 (x = -128 included; y is
 *     never -128).
 * Then, per lane, acc += (d_x d_y) * (float)isum with one FMA; the _1 types
 * add m_x * s_y per block in a separate vector. Only the float accumulation
 * order differs from the generic kernels (the ISA bound of the tests).
 *
 * Layout work: 4 blocks per step. For the 4/5-bit types two 64-byte loads
 * (at the first block, and ending at the fourth block's last byte: nothing
 * outside the 4 blocks is read) hold all 4 blocks; one vpermb per pair puts
 * each block's 16 code bytes twice in a row, a variable shift by 0 / 4 and a
 * mask give the 32 nibbles in element order. Q5's fifth bits (qh, 32 bits a
 * block, bit j = element j) are exactly the byte mask of a masked add of 16.
 * The fp16 scales of 4 blocks are read with scalar loads into one vcvtph2ps
 * (gathering them from the loaded registers with vpermt2w measured ~15 %
 * slower in cache: 48 vs 56 GFLOP/s for Q4_0).
 * The last 1..3 blocks go through the same pair code with masked loads.
 * The weight stream is prefetched LM_AVX512_PREFETCH bytes ahead.
 *
 * Speed (bench_kernels, one thread, same run, GFLOP/s in L1, AVX2 ->
 * AVX-512): Q4_0 48.6 -> 65.9, Q4_1 58.1 -> 62.4, Q5_0 37.2 -> 58.1, Q5_1
 * 41.9 -> 54.6, Q8_0 54.6 -> 65.1. Streaming (256 MiB, noisy shared machine)
 * equal or better in alternating A/B runs. The zmm ops run on 2 ports (AVX2's
 * ymm on 3), so the gain is below the 2x of the width.
 *
 * Requirements: n a multiple of 32; blocks need only 2-byte alignment;
 * activation codes lie in [-127, 127] (what every Q8 encoder writes).
 */
#include "avx512_util.h"
#include "cpu/kernels/kernels.h"
#include "quant/blocks.h"

#define ALWAYS_INLINE inline __attribute__((always_inline))

enum wtype { W_Q4_0, W_Q4_1, W_Q5_0, W_Q5_1, W_Q8_0 };

/* Block bytes, offset of qs, of qh (Q5), and whether the type has m (the _1 types). */
static ALWAYS_INLINE int w_bs(enum wtype t)
{
    return t == W_Q4_0 ? 18 : t == W_Q4_1 ? 20 : t == W_Q5_0 ? 22 : t == W_Q5_1 ? 24 : 34;
}
static ALWAYS_INLINE int w_qs(enum wtype t)
{
    return t == W_Q4_0 ? 2 : t == W_Q4_1 ? 4 : t == W_Q5_0 ? 6 : t == W_Q5_1 ? 8 : 2;
}
static ALWAYS_INLINE int w_qh(enum wtype t) { return t == W_Q5_0 ? 2 : 4; }
static ALWAYS_INLINE bool w_one(enum wtype t) { return t == W_Q4_1 || t == W_Q5_1; }
static ALWAYS_INLINE bool w_q5(enum wtype t) { return t == W_Q5_0 || t == W_Q5_1; }

/* vpermb index for a pair of 4/5-bit blocks starting at byte o of a
 * register: bytes 0..15 and 16..31 <- block A's qs[0..15] (low nibbles =
 * elements 0..15, high nibbles = 16..31), bytes 32..63 <- block B's. */
static inline __m512i pair_idx(int o, int bs, int qoff)
{
    __m512i idx = _mm512_and_si512(avx512_iota8(), _mm512_set1_epi8(15));
    idx = _mm512_mask_add_epi8(idx, (__mmask64)0xFFFFFFFF00000000ull, idx, _mm512_set1_epi8((char)bs));
    return _mm512_add_epi8(idx, _mm512_set1_epi8((char)(o + qoff)));
}

/* The 64 nibbles of the pair in z (element order, one per byte). */
static ALWAYS_INLINE __m512i pair_nibbles(__m512i z, __m512i idx)
{
    const __m512i p = _mm512_permutexvar_epi8(idx, z);
    return _mm512_and_si512(_mm512_srlv_epi64(p, _mm512_set_epi64(4, 4, 0, 0, 4, 4, 0, 0)), _mm512_set1_epi8(0x0F));
}

/* The fifth bits of blocks A (and B when b is non-NULL) as a byte mask. */
static ALWAYS_INLINE __mmask64 pair_qh(const uint8_t *a, const uint8_t *b)
{
    uint32_t lo, hi = 0;
    memcpy(&lo, a, 4);
    if (b)
        memcpy(&hi, b, 4);
    return _cvtu64_mask64((uint64_t)lo | (uint64_t)hi << 32);
}

/* Exact int32 lanes of sum (x - offset) y for the pair: xz is the register
 * holding the pair (4/5-bit types, with idx) or its codes (Q8_0). */
static ALWAYS_INLINE __m512i pair_isum(const enum wtype t, __m512i xz, __m512i idx, __mmask64 qh, __m512i y)
{
    if (t == W_Q8_0)
        return avx512_dot_s8s8(xz, y);
    __m512i q = pair_nibbles(xz, idx);
    if (w_q5(t))
        q = _mm512_mask_add_epi8(q, qh, q, _mm512_set1_epi8(16));
    const __m512i p = avx512_dot_u8s8(q, y);
    if (w_one(t))
        return p;
    return _mm512_sub_epi32(p, avx512_dot_u8s8(_mm512_set1_epi8(t == W_Q4_0 ? 8 : 16), y));
}

/* The dot of nb blocks of type t with Q8_0 (ybs 34) or Q8_1 (ybs 36) blocks. */
static ALWAYS_INLINE float dot_legacy(const enum wtype t, int64_t nb, const void *vx, const void *vy)
{
    const int bs = w_bs(t), ybs = w_one(t) ? 36 : 34, yqs = w_one(t) ? 4 : 2;
    const uint8_t *x = vx, *y = vy;
    const __m512i idx0 = pair_idx(0, bs, w_qs(t)), idx1 = pair_idx(64 - 2 * bs, bs, w_qs(t));
    __m512 acc0 = _mm512_setzero_ps(), acc1 = acc0;
    __m256 accm = _mm256_setzero_ps(); /* _1 types: odd lanes sum m_x s_y */
    int64_t b = 0;
    for (; b + 4 <= nb; b += 4) {
        const uint8_t *xb = x + b * bs, *yb = y + b * ybs;
        avx512_prefetch(xb, 4 * bs);
        __m512i xab, xcd;
        if (t == W_Q8_0) {
            xab = avx512_load2x32(xb + 2, xb + bs + 2);
            xcd = avx512_load2x32(xb + 2 * bs + 2, xb + 3 * bs + 2);
        } else {
            xab = _mm512_loadu_si512(xb);
            xcd = _mm512_loadu_si512(xb + 4 * bs - 64);
        }
        __mmask64 hab = 0, hcd = 0;
        if (w_q5(t)) {
            hab = pair_qh(xb + w_qh(t), xb + bs + w_qh(t));
            hcd = pair_qh(xb + 2 * bs + w_qh(t), xb + 3 * bs + w_qh(t));
        }
        const __m512i yab = avx512_load2x32(yb + yqs, yb + ybs + yqs);
        const __m512i ycd = avx512_load2x32(yb + 2 * ybs + yqs, yb + 3 * ybs + yqs);
        const __m512i iab = pair_isum(t, xab, idx0, hab, yab), icd = pair_isum(t, xcd, idx1, hcd, ycd);
        __m512 sab, scd;
        if (w_one(t)) { /* [dx dy, m s] per block */
            const __m256 p = _mm256_mul_ps(avx512_f16x4_pairs(xb, bs), avx512_f16x4_pairs(yb, ybs));
            accm = _mm256_add_ps(accm, p);
            sab = avx512_spread2(_mm512_castps256_ps512(p), 0, 2);
            scd = avx512_spread2(_mm512_castps256_ps512(p), 4, 6);
        } else {
            const __m128 p = _mm_mul_ps(avx512_f16x4(xb, bs), avx512_f16x4(yb, ybs));
            sab = avx512_spread2(_mm512_castps128_ps512(p), 0, 1);
            scd = avx512_spread2(_mm512_castps128_ps512(p), 2, 3);
        }
        acc0 = _mm512_fmadd_ps(sab, _mm512_cvtepi32_ps(iab), acc0);
        acc1 = _mm512_fmadd_ps(scd, _mm512_cvtepi32_ps(icd), acc1);
    }
    for (; b < nb; b += 2) { /* 1..3 blocks left: pairs with masked loads */
        const bool two = b + 1 < nb;
        const uint8_t *xb = x + b * bs, *yb = y + b * ybs;
        __m512i xz;
        if (t == W_Q8_0) {
            const __m256i hi = two ? _mm256_loadu_si256((const __m256i *)(xb + bs + 2)) : _mm256_setzero_si256();
            xz = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(xb + 2))), hi, 1);
        } else {
            xz = _mm512_maskz_loadu_epi8(avx512_mask64((two ? 2 : 1) * bs), xb);
        }
        const __mmask64 qh = w_q5(t) ? pair_qh(xb + w_qh(t), two ? xb + bs + w_qh(t) : NULL) : 0;
        const __m256i yhi = two ? _mm256_loadu_si256((const __m256i *)(yb + ybs + yqs)) : _mm256_setzero_si256();
        const __m512i yz =
            _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(yb + yqs))), yhi, 1);
        const __m512i is = pair_isum(t, xz, idx0, qh, yz);
        lm_fp16 h[8] = {0}; /* x d, x m, y d, y s of A then B (0 = absent) */
        for (int k = 0; k < (two ? 2 : 1); k++) {
            memcpy(&h[4 * k], xb + k * bs, w_one(t) ? 4 : 2);
            memcpy(&h[4 * k + 2], yb + k * ybs, w_one(t) ? 4 : 2);
        }
        const float sa = avx512_f16(h[0]) * avx512_f16(h[2]), sb = avx512_f16(h[4]) * avx512_f16(h[6]);
        if (w_one(t))
            accm = _mm256_add_ps(accm, _mm256_setr_ps(0.0f, avx512_f16(h[1]) * avx512_f16(h[3]), 0.0f,
                                                      avx512_f16(h[5]) * avx512_f16(h[7]), 0, 0, 0, 0));
        const __m512 sc = _mm512_mask_blend_ps(0xFF00, _mm512_set1_ps(sa), _mm512_set1_ps(sb));
        acc0 = _mm512_fmadd_ps(sc, _mm512_cvtepi32_ps(is), acc0);
    }
    float sum = avx512_hsum_ps(_mm512_add_ps(acc0, acc1));
    if (w_one(t))
        sum += avx512_hsum_ps256(_mm256_maskz_mov_ps(0xAA, accm));
    return sum;
}

/* Contracts: kernels.h. */
void lm_vec_dot_q4_0_q8_0_avx512(int64_t n, float *s, const void *x, const void *y)
{
    *s = dot_legacy(W_Q4_0, n / LM_QK, x, y);
}

void lm_vec_dot_q4_1_q8_1_avx512(int64_t n, float *s, const void *x, const void *y)
{
    *s = dot_legacy(W_Q4_1, n / LM_QK, x, y);
}

void lm_vec_dot_q5_0_q8_0_avx512(int64_t n, float *s, const void *x, const void *y)
{
    *s = dot_legacy(W_Q5_0, n / LM_QK, x, y);
}

void lm_vec_dot_q5_1_q8_1_avx512(int64_t n, float *s, const void *x, const void *y)
{
    *s = dot_legacy(W_Q5_1, n / LM_QK, x, y);
}

void lm_vec_dot_q8_0_q8_0_avx512(int64_t n, float *s, const void *x, const void *y)
{
    *s = dot_legacy(W_Q8_0, n / LM_QK, x, y);
}

/* nr Q8_0 rows (bx bytes apart: a Q8_0 K cache's cells) against one y: the
 * same inlined body per row as the vec_dot above, so its bits. */
void lm_vec_dot_rows_q8_0_avx512(int64_t n, int64_t nr, float *s, const void *x, size_t bx, const void *y)
{
    for (int64_t r = 0; r < nr; r++)
        s[r] = dot_legacy(W_Q8_0, n / LM_QK, (const uint8_t *)x + (size_t)r * bx, y);
}

/* Q8_0 tiles: dot_legacy(W_Q8_0) of one row x against Q queries y[0..Q)
 * (nb blocks each), out[q]: per query the same loads, integer sums, scale
 * products, FMA chains and final tree as dot_legacy, so its bits; x's codes,
 * sign masks and scales are read once for all the queries, and the Q
 * reductions share their shuffles (avx512_hsum4_ps, hsum's tree). */
static ALWAYS_INLINE void tile_row_q8_0(const int Q, int64_t nb, const uint8_t *x, const uint8_t *const *y, float *out)
{
    enum { BS = 34 };
    __m512 acc0[LM_VEC_DOT_TILE_MAX], acc1[LM_VEC_DOT_TILE_MAX];
    for (int q = 0; q < Q; q++)
        acc0[q] = acc1[q] = _mm512_setzero_ps();
    int64_t b = 0;
    for (; b + 4 <= nb; b += 4) {
        const uint8_t *xb = x + b * BS;
        const __m512i xab = avx512_load2x32(xb + 2, xb + BS + 2), xcd = avx512_load2x32(xb + 2 * BS + 2, xb + 3 * BS + 2);
        const __mmask64 nab = _mm512_movepi8_mask(xab), ncd = _mm512_movepi8_mask(xcd);
        const __m512i aab = _mm512_abs_epi8(xab), acd = _mm512_abs_epi8(xcd);
        const __m128 dx = avx512_f16x4(xb, BS);
        for (int q = 0; q < Q; q++) {
            const uint8_t *yb = y[q] + b * BS;
            const __m512i yab = avx512_load2x32(yb + 2, yb + BS + 2), ycd = avx512_load2x32(yb + 2 * BS + 2, yb + 3 * BS + 2);
            const __m512i iab = avx512_dot_u8s8(aab, _mm512_mask_sub_epi8(yab, nab, _mm512_setzero_si512(), yab));
            const __m512i icd = avx512_dot_u8s8(acd, _mm512_mask_sub_epi8(ycd, ncd, _mm512_setzero_si512(), ycd));
            const __m128 p = _mm_mul_ps(dx, avx512_f16x4(yb, BS));
            acc0[q] = _mm512_fmadd_ps(avx512_spread2(_mm512_castps128_ps512(p), 0, 1), _mm512_cvtepi32_ps(iab), acc0[q]);
            acc1[q] = _mm512_fmadd_ps(avx512_spread2(_mm512_castps128_ps512(p), 2, 3), _mm512_cvtepi32_ps(icd), acc1[q]);
        }
    }
    for (; b < nb; b += 2) { /* 1..3 blocks left, as dot_legacy's pairs */
        const bool two = b + 1 < nb;
        const uint8_t *xb = x + b * BS;
        const __m256i hi = two ? _mm256_loadu_si256((const __m256i *)(xb + BS + 2)) : _mm256_setzero_si256();
        const __m512i xz = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(xb + 2))), hi, 1);
        const __mmask64 neg = _mm512_movepi8_mask(xz);
        const __m512i ax = _mm512_abs_epi8(xz);
        lm_fp16 hx[2] = {0, 0};
        memcpy(&hx[0], xb, 2);
        if (two)
            memcpy(&hx[1], xb + BS, 2);
        for (int q = 0; q < Q; q++) {
            const uint8_t *yb = y[q] + b * BS;
            const __m256i yhi = two ? _mm256_loadu_si256((const __m256i *)(yb + BS + 2)) : _mm256_setzero_si256();
            const __m512i yz =
                _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(yb + 2))), yhi, 1);
            const __m512i is = avx512_dot_u8s8(ax, _mm512_mask_sub_epi8(yz, neg, _mm512_setzero_si512(), yz));
            lm_fp16 hy[2] = {0, 0};
            memcpy(&hy[0], yb, 2);
            if (two)
                memcpy(&hy[1], yb + BS, 2);
            const float sa = avx512_f16(hx[0]) * avx512_f16(hy[0]), sb = avx512_f16(hx[1]) * avx512_f16(hy[1]);
            const __m512 sc = _mm512_mask_blend_ps(0xFF00, _mm512_set1_ps(sa), _mm512_set1_ps(sb));
            acc0[q] = _mm512_fmadd_ps(sc, _mm512_cvtepi32_ps(is), acc0[q]);
        }
    }
    if (Q == 4) {
        avx512_hsum4_ps(_mm512_add_ps(acc0[0], acc1[0]), _mm512_add_ps(acc0[1], acc1[1]),
                        _mm512_add_ps(acc0[2], acc1[2]), _mm512_add_ps(acc0[3], acc1[3]), out);
        return;
    }
    for (int q = 0; q < Q; q++)
        out[q] = avx512_hsum_ps(_mm512_add_ps(acc0[q], acc1[q]));
}

static ALWAYS_INLINE void tile_rows_q8_0(const int Q, int64_t nr, int64_t nb, float *const *s, const uint8_t *x,
                                         size_t bx, const uint8_t *const *y)
{
    for (int64_t r = 0; r < nr; r++) {
        float out[LM_VEC_DOT_TILE_MAX];
        tile_row_q8_0(Q, nb, x + (size_t)r * bx, y, out);
        for (int q = 0; q < Q; q++)
            s[q][r] = out[q];
    }
}

/* Contract: kernels.h (lm_vec_dot_tile_fn, Q8_0 rows as y); each s[q][r] has
 * lm_vec_dot_q8_0_q8_0_avx512's bits. Queries of one length (a K tile's) go
 * together; other lengths one query at a time. */
void lm_vec_dot_tile_q8_0_avx512(int64_t nr, int nq, const int64_t *len, float *const *s, const void *x, size_t bx,
                                 const void *const *yv)
{
    const uint8_t *const *y = (const uint8_t *const *)yv;
    bool same = true;
    for (int q = 1; q < nq; q++)
        same = same && len[q] == len[0];
    if (!same) {
        for (int q = 0; q < nq; q++)
            tile_rows_q8_0(1, nr, len[q] / LM_QK, &s[q], x, bx, &y[q]);
        return;
    }
    const int64_t nb = len[0] / LM_QK;
    switch (nq) {
    case 4: tile_rows_q8_0(4, nr, nb, s, x, bx, y); break;
    case 3: tile_rows_q8_0(3, nr, nb, s, x, bx, y); break;
    case 2: tile_rows_q8_0(2, nr, nb, s, x, bx, y); break;
    default: tile_rows_q8_0(1, nr, nb, s, x, bx, y); break;
    }
}

/* ---- Q8_0 scores from a transposed K: lanes are cells ----
 * dot_legacy's lane L of a pair of blocks (A, B) holds group L of A (L < 8:
 * elements 4L..4L+3) or group L - 8 of B, as (float)isum times the pair's
 * block scale product, FMA'd into acc0 (blocks 4s, 4s + 1 of a step; the
 * last 1..3 blocks' pairs) or acc1 (blocks 4s + 2, 4s + 3), from +0; a
 * missing second block of the last pair adds 0 * 0. Then v_L = acc0_L +
 * acc1_L and avx512_hsum_ps's tree: h_i = v_i + v_i+8, s_i = h_i + h_i+4,
 * (s_0 + s_2) + (s_1 + s_3). Here register lane l is cell l of a 16-cell
 * block and each "lane L" is a separate chain over whole registers. The
 * exact int32 group sum comes from one vpdpbusd of the query's 4 codes + 128
 * (unsigned) with the cells' codes (signed), from -128 times the cells' code
 * sums (kt's second 64 bytes): the integer dot_legacy gets. */

/* Per query: its codes + 128 as dwords (4 per group) and its block scales. */
struct kt_q8_query {
    uint32_t codes[LM_KT_Q8_MAX_D / 4];
    float d[LM_KT_Q8_MAX_D / 32];
};

static void kt_q8_prepare(int64_t nbk, const uint8_t *y, struct kt_q8_query *p)
{
    for (int64_t kb = 0; kb < nbk; kb++) {
        const uint8_t *yb = y + kb * 34;
        lm_fp16 h;
        memcpy(&h, yb, 2);
        p->d[kb] = avx512_f16(h);
        for (int g = 0; g < 8; g++) {
            uint32_t w;
            memcpy(&w, yb + 2 + 4 * g, 4);
            p->codes[kb * 8 + g] = w ^ 0x80808080u; /* each signed code + 128, as an unsigned byte */
        }
    }
}

/* Group g of K block kb for the 16 cells of blk, against query p: (float)isum. */
static ALWAYS_INLINE __m512 kt_q8_term(const uint8_t *blk, int64_t kb, int g, const struct kt_q8_query *p)
{
    const uint8_t *grp = blk + kb * LM_KT_Q8_BLOCK + g * LM_KT_Q8_GROUP;
    const __m512i isum = _mm512_dpbusd_epi32(_mm512_loadu_si512(grp + 64), _mm512_set1_epi32((int)p->codes[kb * 8 + g]),
                                             _mm512_loadu_si512(grp));
    return _mm512_cvtepi32_ps(isum);
}

/* v_L (acc0_L + acc1_L) for the 16 cells of blk; sc[kb]: the cells' scales
 * times the query's for K block kb (dot_legacy's x d * y d). */
static ALWAYS_INLINE __m512 kt_q8_lane(int64_t nbk, const uint8_t *blk, const struct kt_q8_query *p,
                                       const __m512 *sc, int L)
{
    const int g = L & 7, hi = L >> 3;
    __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
    int64_t b = 0;
    for (; b + 4 <= nbk; b += 4) {
        a0 = _mm512_fmadd_ps(sc[b + hi], kt_q8_term(blk, b + hi, g, p), a0);
        a1 = _mm512_fmadd_ps(sc[b + 2 + hi], kt_q8_term(blk, b + 2 + hi, g, p), a1);
    }
    for (; b < nbk; b += 2) {
        if (b + hi < nbk)
            a0 = _mm512_fmadd_ps(sc[b + hi], kt_q8_term(blk, b + hi, g, p), a0);
        else
            a0 = _mm512_add_ps(a0, _mm512_setzero_ps()); /* dot_legacy's fma(0, 0, acc) */
    }
    return _mm512_add_ps(a0, a1);
}

/* Contract: kernels.h (lm_vec_dot_kt_fn, the Q8_0 layout); each score has
 * lm_vec_dot_q8_0_q8_0_avx512's bits. */
void lm_vec_dot_kt_q8_0_avx512(int64_t d, int64_t nb, int nq, float *const *s, const void *kt, const void *const *y)
{
    const int64_t nbk = d / 32;
    struct kt_q8_query p;
    for (int q = 0; q < nq; q++) {
        kt_q8_prepare(nbk, (const uint8_t *)y[q], &p);
        for (int64_t b = 0; b < nb; b++) {
            const uint8_t *blk = (const uint8_t *)kt + (size_t)b * (size_t)nbk * LM_KT_Q8_BLOCK;
            __m512 sc[LM_KT_Q8_MAX_D / 32], sq[4];
            for (int64_t kb = 0; kb < nbk; kb++) /* once per block, not per lane */
                sc[kb] = _mm512_mul_ps(_mm512_loadu_ps((const float *)(blk + kb * LM_KT_Q8_BLOCK + 8 * LM_KT_Q8_GROUP)),
                                       _mm512_set1_ps(p.d[kb]));
            for (int i = 0; i < 4; i++) { /* s_i = h_i + h_i+4, h_i = v_i + v_i+8 */
                const __m512 h0 =
                    _mm512_add_ps(kt_q8_lane(nbk, blk, &p, sc, i), kt_q8_lane(nbk, blk, &p, sc, i + 8));
                const __m512 h1 =
                    _mm512_add_ps(kt_q8_lane(nbk, blk, &p, sc, i + 4), kt_q8_lane(nbk, blk, &p, sc, i + 12));
                sq[i] = _mm512_add_ps(h0, h1);
            }
            _mm512_storeu_ps(s[q] + 16 * b, _mm512_add_ps(_mm512_add_ps(sq[0], sq[2]), _mm512_add_ps(sq[1], sq[3])));
        }
    }
}

/* Blocks [b0, b0 + NB) of NQ items' outputs: each cell's row decoded once
 * (16 channels a register: codes widened, times the block's scale, as
 * to_float), then one FMA per item and register, 2 NB NQ accumulators. */
static ALWAYS_INLINE void mad_rows_panel(const int NQ, const int NB, int64_t b0, const int64_t *len, float *const *out,
                                         const void *x, size_t bx, const int32_t *idx, const float *const *p)
{
    enum { BS = 34 };
    __m512 acc[LM_VEC_DOT_TILE_MAX][8];
    int64_t kmax = 0;
    for (int q = 0; q < NQ; q++) {
        kmax = len[q] > kmax ? len[q] : kmax;
        for (int i = 0; i < 2 * NB; i++)
            acc[q][i] = _mm512_setzero_ps();
    }
    for (int64_t k = 0; k < kmax; k++) {
        const uint8_t *row = (const uint8_t *)x + (size_t)(idx ? idx[k] : k) * bx + (size_t)b0 * BS;
        __m512 v[8];
        for (int b = 0; b < NB; b++) {
            const uint8_t *blk = row + (size_t)b * BS;
            lm_fp16 h;
            memcpy(&h, blk, sizeof h);
            const __m512 sc = _mm512_set1_ps(avx512_f16(h));
            v[2 * b] = _mm512_mul_ps(sc, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(blk + 2)))));
            v[2 * b + 1] = _mm512_mul_ps(sc, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(blk + 18)))));
        }
        for (int q = 0; q < NQ; q++) {
            if (k >= len[q])
                continue;
            const __m512 pk = _mm512_set1_ps(p[q][k]);
            for (int i = 0; i < 2 * NB; i++)
                acc[q][i] = _mm512_fmadd_ps(pk, v[i], acc[q][i]);
        }
    }
    for (int q = 0; q < NQ; q++)
        for (int i = 0; i < 2 * NB; i++)
            _mm512_storeu_ps(out[q] + b0 * LM_QK + 16 * i, acc[q][i]);
}

/* NQ items over every block: panels of 4 blocks (2 for more than 2 items:
 * at most 16 accumulators), then the rest. */
static ALWAYS_INLINE void mad_rows_items(const int NQ, int64_t d, const int64_t *len, float *const *out, const void *x,
                                         size_t bx, const int32_t *idx, const float *const *p)
{
    const int64_t nb = d / LM_QK;
    int64_t b0 = 0;
    if (NQ <= 2)
        for (; b0 + 4 <= nb; b0 += 4)
            mad_rows_panel(NQ, 4, b0, len, out, x, bx, idx, p);
    for (; b0 + 2 <= nb; b0 += 2)
        mad_rows_panel(NQ, 2, b0, len, out, x, bx, idx, p);
    if (b0 < nb)
        mad_rows_panel(NQ, 1, b0, len, out, x, bx, idx, p);
}

/* Contract: kernels.h. */
void lm_vec_mad_rows_q8_0_avx512(int64_t d, int nq, const int64_t *len, float *const *out, const void *x, size_t bx,
                                 const int32_t *idx, const float *const *p)
{
    switch (nq) {
    case 1: mad_rows_items(1, d, len, out, x, bx, idx, p); break;
    case 2: mad_rows_items(2, d, len, out, x, bx, idx, p); break;
    case 3: mad_rows_items(3, d, len, out, x, bx, idx, p); break;
    default: mad_rows_items(4, d, len, out, x, bx, idx, p); break;
    }
}
