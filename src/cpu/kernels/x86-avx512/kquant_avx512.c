/* kquant_avx512.c - AVX-512 VNNI dot products of the K-quants (Q2_K..Q6_K)
 * with Q8_K.
 *
 * Per 256-element super-block the weight codes are unpacked to unsigned bytes
 * 64 at a time (one zmm) in the order of the Q8_K codes, so y is read with
 * plain 64-byte loads. vpdpbusd sums groups of 4 products into int32 lanes
 * (|lane| <= 4 * 63 * 128 = 32256: it fits in int16), and vpdpwssd multiplies
 * each lane by its sub-block scale and accumulates (the scale vector holds the
 * scale in the low 16 bits of each 32-bit lane and 0 above, so the lane's
 * sign-extension half multiplies 0): sum_j sc_j isum_j exact in int32.
 * Code unpacking: the packed bytes are broadcast to both 256-bit halves and
 * shifted (or rotated) per 64-bit lane by counts that differ between the
 * halves, so one register gives two different bit fields; a high bit (Q3_K,
 * Q5_K, Q6_K) is rotated into place and merged with one vpternlog.
 * Constant offsets of the codes (Q3_K's -4, Q6_K's -32) and the mins (Q2_K,
 * Q4_K, Q5_K) are applied once per super-block through the Q8_K bsums
 * (sum_j scale_j * bsum_j, exact in int32), as ggml does for the mins.
 * Then, as ggml: acc += d_x d_y * lanes [- dmin_x d_y * min lanes] in float.
 * Only the float accumulation order differs from the generic kernels.
 *
 * Speed (bench_kernels, one thread, same run, GFLOP/s in L1 / GB/s stream,
 * AVX2 -> AVX-512): Q2_K 86.9 -> 92.1 / 6.1 -> 7.1, Q3_K 64.2 -> 74.3 /
 * 5.0 -> 8.3, Q4_K 79.4 -> 84.6 / 6.8 -> 7.8, Q5_K 59.9 -> 74.3 / 9.1 -> 10.0,
 * Q6_K 67.3 -> 85.0 / 9.2 -> 10.8.
 *
 * Requirements: n a multiple of 256; blocks need their natural alignment
 * (loads are unaligned anyway); Q8_K codes in [-127, 127]. Each super-block
 * prefetches its own bytes LM_AVX512_PREFETCH ahead.
 */
#include "avx512_util.h"
#include "cpu/kernels/kernels.h"
#include "cpu/kernels/x86_kquant_scales.h"
#include "quant/blocks.h"

static inline __m512i load_y64(const struct lm_block_q8_K *y, int off)
{
    return _mm512_loadu_si512(y->qs + off);
}

static inline __m256i load_bsums(const struct lm_block_q8_K *y)
{
    return _mm256_loadu_si256((const __m256i *)y->bsums);
}

/* 32 bytes at p in both 256-bit halves. */
static inline __m512i bcast32(const uint8_t *p)
{
    return _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)p));
}

/* Per-64-bit-lane counts: a in the low half (bytes 0..31), b in the high half. */
static inline __m512i counts(int a, int b) { return _mm512_set_epi64(b, b, b, b, a, a, a, a); }

/* The bit `from` of every byte of v moved to bit `to` (other bits junk):
 * a rotation of each 64-bit lane keeps every bit in its byte's slot. */
static inline __m512i rot_bits(__m512i v, int from_lo, int from_hi, int to)
{
    return _mm512_rorv_epi64(v, counts((from_lo - to) & 63, (from_hi - to) & 63));
}

/* c | (h & m) with one vpternlog (imm (A & B) | C). */
static inline __m512i merge_bits(__m512i h, __m512i m, __m512i c) { return _mm512_ternarylogic_epi64(h, m, c, 0xEA); }

/* acc += isum_lanes(q . y) * scale lanes (vpdpbusd, then vpdpwssd). */
static inline __m512i dot_scaled(__m512i acc, __m512i q, __m512i y, __m512i sc)
{
    return _mm512_dpwssd_epi32(acc, avx512_dot_u8s8(q, y), sc);
}

/* The scale vector of the 64 elements m (0..3) from 16 scales (int32, high
 * 16 bits 0) of 16-element sub-blocks: lane i -> scale 4m + i / 4. */
static inline __m512i scales16(__m512i s, int m)
{
    const __m512i idx = _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0);
    return _mm512_permutexvar_epi32(_mm512_add_epi32(idx, _mm512_set1_epi32(4 * m)), s);
}

/* 16 signed byte scales as scale lanes (int16 in the low half, 0 above). */
static inline __m512i signed_scales(__m128i s8)
{
    return _mm512_and_si512(_mm512_cvtepi8_epi32(s8), _mm512_set1_epi32(0xFFFF));
}

/* Contract: kernels.h. */
void lm_vec_dot_q2_K_q8_K_avx512(int64_t n, float *s, const void *vx, const void *vy)
{
    const struct lm_block_q2_K *x = vx;
    const struct lm_block_q8_K *y = vy;
    const __m512i m3 = _mm512_set1_epi8(3);
    __m512 acc = _mm512_setzero_ps();
    __m256 accm = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / LM_QK_K; b++) {
        avx512_prefetch(&x[b], sizeof x[b]);
        const float dall = y[b].d * avx512_f16(x[b].d), dmin = y[b].d * avx512_f16(x[b].dmin);
        const __m128i sm = _mm_loadu_si128((const __m128i *)x[b].scales);
        const __m512i sc = _mm512_cvtepu8_epi32(_mm_and_si128(sm, _mm_set1_epi8(0x0F)));
        const __m256i mn = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sm, 4), _mm_set1_epi8(0x0F)));
        const __m256i mins = _mm256_madd_epi16(mn, load_bsums(&y[b]));
        accm = _mm256_fmadd_ps(_mm256_set1_ps(dmin), _mm256_cvtepi32_ps(mins), accm);
        __m512i i0 = _mm512_setzero_si512(), i1 = i0;
        for (int g = 0; g < 2; g++) {
            const __m512i q = bcast32(x[b].qs + 32 * g); /* element 128g + 32s + l: bits 2s of byte l */
            const __m512i c0 = _mm512_and_si512(_mm512_srlv_epi64(q, counts(0, 2)), m3);
            const __m512i c1 = _mm512_and_si512(_mm512_srlv_epi64(q, counts(4, 6)), m3);
            i0 = dot_scaled(i0, c0, load_y64(&y[b], 128 * g), scales16(sc, 2 * g));
            i1 = dot_scaled(i1, c1, load_y64(&y[b], 128 * g + 64), scales16(sc, 2 * g + 1));
        }
        acc = _mm512_fmadd_ps(_mm512_set1_ps(dall), _mm512_cvtepi32_ps(_mm512_add_epi32(i0, i1)), acc);
    }
    *s = avx512_hsum_ps(acc) - avx512_hsum_ps256(accm);
}


/* Contract: kernels.h. */
void lm_vec_dot_q3_K_q8_K_avx512(int64_t n, float *s, const void *vx, const void *vy)
{
    const struct lm_block_q3_K *x = vx;
    const struct lm_block_q8_K *y = vy;
    const __m512i m3 = _mm512_set1_epi8(3), b2 = _mm512_set1_epi8(4);
    __m512 acc = _mm512_setzero_ps();
    for (int64_t b = 0; b < n / LM_QK_K; b++) {
        avx512_prefetch(&x[b], sizeof x[b]);
        const float d = avx512_f16(x[b].d) * y[b].d;
        const __m128i s8 = x86_q3_K_scales(x[b].scales);
        const __m512i sc = signed_scales(s8);
        /* codes are (2 low bits | high bit << 2) - 4: the -4 goes through bsums */
        const __m256i off = _mm256_slli_epi32(_mm256_madd_epi16(_mm256_cvtepi8_epi16(s8), load_bsums(&y[b])), 2);
        __m512i i0 = _mm512_zextsi256_si512(_mm256_sub_epi32(_mm256_setzero_si256(), off)), i1 = _mm512_setzero_si512();
        const __m512i hm = bcast32(x[b].hmask); /* bit 4g + s of byte l: high bit of element 128g + 32s + l */
        for (int g = 0; g < 2; g++) {
            const __m512i q = bcast32(x[b].qs + 32 * g);
            const __m512i l0 = _mm512_and_si512(_mm512_srlv_epi64(q, counts(0, 2)), m3);
            const __m512i l1 = _mm512_and_si512(_mm512_srlv_epi64(q, counts(4, 6)), m3);
            const __m512i c0 = merge_bits(rot_bits(hm, 4 * g, 4 * g + 1, 2), b2, l0);
            const __m512i c1 = merge_bits(rot_bits(hm, 4 * g + 2, 4 * g + 3, 2), b2, l1);
            i0 = dot_scaled(i0, c0, load_y64(&y[b], 128 * g), scales16(sc, 2 * g));
            i1 = dot_scaled(i1, c1, load_y64(&y[b], 128 * g + 64), scales16(sc, 2 * g + 1));
        }
        acc = _mm512_fmadd_ps(_mm512_set1_ps(d), _mm512_cvtepi32_ps(_mm512_add_epi32(i0, i1)), acc);
    }
    *s = avx512_hsum_ps(acc);
}

/* Contract: kernels.h. */
void lm_vec_dot_q6_K_q8_K_avx512(int64_t n, float *s, const void *vx, const void *vy)
{
    const struct lm_block_q6_K *x = vx;
    const struct lm_block_q8_K *y = vy;
    const __m512i m4 = _mm512_set1_epi8(0x0F), m30 = _mm512_set1_epi8(0x30);
    __m512 acc = _mm512_setzero_ps();
    for (int64_t b = 0; b < n / LM_QK_K; b++) {
        avx512_prefetch(&x[b], sizeof x[b]);
        const float d = avx512_f16(x[b].d) * y[b].d;
        const __m128i s8 = _mm_loadu_si128((const __m128i *)x[b].scales);
        const __m512i sc = signed_scales(s8);
        /* codes are 6 bits - 32: the -32 goes through bsums */
        const __m256i off = _mm256_slli_epi32(_mm256_madd_epi16(_mm256_cvtepi8_epi16(s8), load_bsums(&y[b])), 5);
        __m512i i0 = _mm512_zextsi256_si512(_mm256_sub_epi32(_mm256_setzero_si256(), off)), i1 = _mm512_setzero_si512();
        for (int h = 0; h < 2; h++) {
            /* byte j of ql half: low nibble = element 128h + j, high = + 64;
             * qh byte l bits 2s..2s+1: top bits of element 128h + 32s + l */
            const __m512i ql = _mm512_loadu_si512(x[b].ql + 64 * h);
            const __m512i qh = bcast32(x[b].qh + 32 * h);
            const __m512i c0 = merge_bits(rot_bits(qh, 0, 2, 4), m30, _mm512_and_si512(ql, m4));
            const __m512i c1 = merge_bits(rot_bits(qh, 4, 6, 4), m30, _mm512_and_si512(_mm512_srli_epi16(ql, 4), m4));
            i0 = dot_scaled(i0, c0, load_y64(&y[b], 128 * h), scales16(sc, 2 * h));
            i1 = dot_scaled(i1, c1, load_y64(&y[b], 128 * h + 64), scales16(sc, 2 * h + 1));
        }
        acc = _mm512_fmadd_ps(_mm512_set1_ps(d), _mm512_cvtepi32_ps(_mm512_add_epi32(i0, i1)), acc);
    }
    *s = avx512_hsum_ps(acc);
}

/* ---- 32-element sub-blocks (Q4_K, Q5_K) ---- */

/* The 8 6-bit scales and 8 mins of a Q4_K / Q5_K block (the packing of
 * lm_quant_scale_min_k4): scales as int32 lanes 0..7 (8..15 copies), mins as
 * int16 pairs [m0 m0 m1 m1 ...] for a madd with the 16 bsums. */
static inline void k4_scales(const uint8_t *q, __m512i *sc, __m256i *mn2)
{
    const __m128i v = x86_k4_scales_mins(q);
    *sc = _mm512_cvtepu8_epi32(_mm_unpacklo_epi64(v, v));
    *mn2 = _mm256_cvtepu8_epi16(_mm_unpackhi_epi8(v, v));
}

/* The scale vector of the 64 elements g (0..3): lanes 0..7 scale 2g, 8..15 scale 2g + 1. */
static inline __m512i scales32(__m512i s, int g)
{
    const __m512i idx = _mm512_mask_blend_epi32(0xFF00, _mm512_set1_epi32(2 * g), _mm512_set1_epi32(2 * g + 1));
    return _mm512_permutexvar_epi32(idx, s);
}

/* Start of a Q4_K / Q5_K super-block: prefetch, accm += dmin * sum_j m_j
 * (bsum_2j + bsum_2j+1), the scale lanes into *sc; returns d = y.d * x.d. */
static inline float k4_start(const void *xb, size_t bytes, lm_fp16 xd, lm_fp16 xdmin, const uint8_t *scales,
                             const struct lm_block_q8_K *yb, __m512i *sc, __m256 *accm)
{
    avx512_prefetch(xb, (int)bytes);
    __m256i mn2;
    k4_scales(scales, sc, &mn2);
    const __m256 mins = _mm256_cvtepi32_ps(_mm256_madd_epi16(mn2, load_bsums(yb)));
    *accm = _mm256_fmadd_ps(_mm256_set1_ps(yb->d * avx512_f16(xdmin)), mins, *accm);
    return yb->d * avx512_f16(xd);
}

/* Contract: kernels.h. */
void lm_vec_dot_q4_K_q8_K_avx512(int64_t n, float *s, const void *vx, const void *vy)
{
    const struct lm_block_q4_K *x = vx;
    const struct lm_block_q8_K *y = vy;
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    __m512 acc = _mm512_setzero_ps();
    __m256 accm = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / LM_QK_K; b++) {
        __m512i sc;
        const float d = k4_start(&x[b], sizeof x[b], x[b].d, x[b].dmin, x[b].scales, &y[b], &sc, &accm);
        __m512i i0 = _mm512_setzero_si512(), i1 = i0;
        for (int g = 0; g < 4; g += 2) { /* 32 bytes: low nibbles = elements 64g + l, high = + 32 */
            const __m512i c0 = _mm512_and_si512(_mm512_srlv_epi64(bcast32(x[b].qs + 32 * g), counts(0, 4)), m4);
            const __m512i c1 = _mm512_and_si512(_mm512_srlv_epi64(bcast32(x[b].qs + 32 * g + 32), counts(0, 4)), m4);
            i0 = dot_scaled(i0, c0, load_y64(&y[b], 64 * g), scales32(sc, g));
            i1 = dot_scaled(i1, c1, load_y64(&y[b], 64 * g + 64), scales32(sc, g + 1));
        }
        acc = _mm512_fmadd_ps(_mm512_set1_ps(d), _mm512_cvtepi32_ps(_mm512_add_epi32(i0, i1)), acc);
    }
    *s = avx512_hsum_ps(acc) - avx512_hsum_ps256(accm);
}

/* Contract: kernels.h. */
void lm_vec_dot_q5_K_q8_K_avx512(int64_t n, float *s, const void *vx, const void *vy)
{
    const struct lm_block_q5_K *x = vx;
    const struct lm_block_q8_K *y = vy;
    const __m512i m4 = _mm512_set1_epi8(0x0F), b4 = _mm512_set1_epi8(0x10);
    __m512 acc = _mm512_setzero_ps();
    __m256 accm = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / LM_QK_K; b++) {
        __m512i sc;
        const float d = k4_start(&x[b], sizeof x[b], x[b].d, x[b].dmin, x[b].scales, &y[b], &sc, &accm);
        const __m512i qh = bcast32(x[b].qh); /* bit 2g (2g + 1) of byte l: 5th bit of element 64g + l (+ 32) */
        __m512i i0 = _mm512_setzero_si512(), i1 = i0;
        for (int g = 0; g < 4; g += 2) {
            const __m512i l0 = _mm512_and_si512(_mm512_srlv_epi64(bcast32(x[b].qs + 32 * g), counts(0, 4)), m4);
            const __m512i l1 = _mm512_and_si512(_mm512_srlv_epi64(bcast32(x[b].qs + 32 * g + 32), counts(0, 4)), m4);
            const __m512i c0 = merge_bits(rot_bits(qh, 2 * g, 2 * g + 1, 4), b4, l0);
            const __m512i c1 = merge_bits(rot_bits(qh, 2 * g + 2, 2 * g + 3, 4), b4, l1);
            i0 = dot_scaled(i0, c0, load_y64(&y[b], 64 * g), scales32(sc, g));
            i1 = dot_scaled(i1, c1, load_y64(&y[b], 64 * g + 64), scales32(sc, g + 1));
        }
        acc = _mm512_fmadd_ps(_mm512_set1_ps(d), _mm512_cvtepi32_ps(_mm512_add_epi32(i0, i1)), acc);
    }
    *s = avx512_hsum_ps(acc) - avx512_hsum_ps256(accm);
}
