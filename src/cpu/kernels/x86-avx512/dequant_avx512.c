/* dequant_avx512.c - AVX-512 row decoders (to_float) of the quantized weight
 * types: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 and Q2_K, Q3_K, Q4_K, Q5_K, Q6_K.
 *
 * Numerics: every output is the bits of quant/'s reference decoder. Each
 * code is an exact small integer, so only the float operations after it can
 * round, and they are done in the reference's order, one rounding each (mul
 * then add/sub, never an FMA; the build uses -ffp-contract=off):
 *   Q4_0/Q5_0/Q8_0  (float)q' * d            q' = q - 8 / q - 16 / q
 *   Q4_1/Q5_1       (float)q * d + m
 *   Q2_K/Q4_K/Q5_K  (d * sc) * (float)q - (dmin * m)
 *   Q3_K            (d * (sc - 32)) * (float)q'   q' = q2 - 4 * !hbit
 *   Q6_K            (d * sc) * (float)(q - 32)
 * fp16 scales go through F16C (the value of lm_fp16_to_fp32; a signalling
 * NaN comes back quiet, which the first multiplication does in the reference
 * too, so NaN scales give the same bits as well).
 *
 * Codes to floats: 4-bit (and 2-bit) codes are zero-extended to 32-bit lanes
 * (vpmovzxbd), then one vpermps per 16 elements looks the float up in a
 * 16-entry table: vpermps reads only the low 4 bits of each index, so the low
 * nibble needs no mask and the high one just a shift (2-bit codes: a table
 * of i & 3). Fifth bits (Q5_0/Q5_1: qh is the 32-lane mask itself; Q5_K: a
 * byte test) and Q3_K's high bit add 16 / 4 with a masked add (exact). Q8_0
 * sign-extends bytes (vpmovsxbd) and converts; Q6_K builds its 128 codes of
 * a half block with byte ops in a 64-byte-wide register, then sign-extends.
 * K-quant sub-block scales are decoded for a whole block at once (32-bit
 * word masks) into 16 floats and broadcast from memory; the 32-element
 * types convert the fp16 scales of 4 blocks with one vcvtph2ps.
 *
 * Reads: exactly the bytes of the n / block blocks (no over-read); writes
 * exactly n floats. n must be a multiple of the block size (32 or 256);
 * blocks need only their 2-byte alignment, y its 4-byte one.
 *
 * Speed (one thread, this Sapphire Rapids, shared: best of 15 interleaved
 * rounds, GB/s of f32 output; generic / avx2 / avx512):
 *   16 KiB out (L1):  Q4_0 10/61/87  Q8_0 37/78/91-100  Q4_K 29/-/62  Q6_K 4.8/-/63
 *                     Q4_1 59  Q5_0 65  Q5_1 47  Q2_K 58  Q3_K 49  Q5_K 43 (generic 5-21)
 *   256 KiB out (L2): Q4_0 10/60/55  Q8_0 38/55/53  Q4_K 30/-/55-58  Q6_K 4.8/-/53-56
 *                     Q4_1 56  Q5_0 55  Q5_1 46  Q2_K 59  Q3_K 50  Q5_K 44
 *   4 MiB out (bench_kernels): ~25 GB/s for every SIMD decoder (L2 -> L3 write-back bound).
 * Every type is >= 10x the 4 GB/s (1 Gelem/s) target. Stores are 32-byte
 * halves (store16): into L2-resident output they drain ~10 % faster than
 * 64-byte stores here, and are as fast in L1.
 */
#include <stddef.h>
#include <string.h>

#include "avx512_util.h"
#include "cpu/kernels/kernels.h"
#include "quant/blocks.h"

#define ALWAYS_INLINE inline __attribute__((always_inline))

/* 16 floats to y as two 32-byte stores: when y is not in L1 (an L2-sized
 * panel), 64-byte stores drain ~10 % slower than 32-byte ones on this
 * machine; in L1 the two are as fast. */
static ALWAYS_INLINE void store16(float *y, __m512 v)
{
    _mm256_storeu_ps(y, _mm512_castps512_ps256(v));
    _mm256_storeu_ps(y + 8, _mm512_extractf32x8_ps(v, 1));
}

/* Floats lo, lo + 1, ..., lo + 15. */
static ALWAYS_INLINE __m512 table_from(float lo)
{
    return _mm512_add_ps(_mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), _mm512_set1_ps(lo));
}

/* Floats (i & 3) + lo for i = 0..15: the 2-bit code table. */
static ALWAYS_INLINE __m512 table2_from(float lo)
{
    return _mm512_add_ps(_mm512_setr_ps(0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3), _mm512_set1_ps(lo));
}

/* 16 bytes at p zero-extended to 32-bit lanes. */
static ALWAYS_INLINE __m512i load_u8x16(const uint8_t *p)
{
    return _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)p));
}

/* The fp16 value at p (2 bytes) broadcast. */
static ALWAYS_INLINE __m512 bcast_f16(const void *p)
{
    lm_fp16 h;
    memcpy(&h, p, 2);
    return _mm512_set1_ps(avx512_f16(h));
}

static ALWAYS_INLINE uint32_t load_u32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* ---- 32-element types ---- */

/* One block of the 4/5-bit types: qs 16 bytes (low nibble = element j, high
 * = j + 16); h: fifth-bit lane mask (bit j = element j) when has_h; tab: the
 * code table (q + offset); y = (tab[q] (+ 16 where h)) * d (+ m when has_m). */
static ALWAYS_INLINE void nib_block(const uint8_t *qs, int has_h, uint32_t h, __m512 tab, __m512 d, int has_m,
                                    __m512 m, float *y)
{
    const __m512i x = load_u8x16(qs);
    __m512 lo = _mm512_permutexvar_ps(x, tab), hi = _mm512_permutexvar_ps(_mm512_srli_epi32(x, 4), tab);
    if (has_h) {
        lo = _mm512_mask_add_ps(lo, (__mmask16)h, lo, _mm512_set1_ps(16.0f));
        hi = _mm512_mask_add_ps(hi, (__mmask16)(h >> 16), hi, _mm512_set1_ps(16.0f));
    }
    lo = _mm512_mul_ps(lo, d);
    hi = _mm512_mul_ps(hi, d);
    if (has_m) {
        lo = _mm512_add_ps(lo, m);
        hi = _mm512_add_ps(hi, m);
    }
    store16(y, lo);
    store16(y + 16, hi);
}

/* A row of nb blocks of a 4/5-bit type: block bytes bs, qs at offset 4 (the
 * _1 types, m at 2) or 2 (qh at 2 / 6 for Q5), code table offset off. The
 * fp16 scales of 4 blocks go through one vcvtph2ps (stored, then broadcast
 * from memory: load-port broadcasts keep the shuffle port for the lookups). */
static ALWAYS_INLINE void nib_row(const uint8_t *x, float *y, int64_t nb, size_t bs, int has_m, int has_h, float off)
{
    const __m512 tab = table_from(off), zero = _mm512_setzero_ps();
    const size_t qh_off = has_m ? 4 : 2, qs_off = qh_off + (has_h ? 4 : 0);
    int64_t b = 0;
    for (; b + 4 <= nb; b += 4, x += 4 * bs, y += 4 * LM_QK) {
        float s[8]; /* [d0 m0 d1 m1 ..] or [d0 d1 d2 d3] */
        if (has_m)
            _mm256_storeu_ps(s, avx512_f16x4_pairs(x, bs));
        else
            _mm_storeu_ps(s, avx512_f16x4(x, bs));
        for (int j = 0; j < 4; j++) {
            const uint8_t *blk = x + j * bs;
            const __m512 d = _mm512_set1_ps(s[has_m ? 2 * j : j]), m = has_m ? _mm512_set1_ps(s[2 * j + 1]) : zero;
            nib_block(blk + qs_off, has_h, has_h ? load_u32(blk + qh_off) : 0, tab, d, has_m, m, y + j * LM_QK);
        }
    }
    for (; b < nb; b++, x += bs, y += LM_QK)
        nib_block(x + qs_off, has_h, has_h ? load_u32(x + qh_off) : 0, tab, bcast_f16(x), has_m,
                  has_m ? bcast_f16(x + 2) : zero, y);
}

_Static_assert(offsetof(struct lm_block_q4_1, qs) == 4 && offsetof(struct lm_block_q5_0, qs) == 6 &&
                   offsetof(struct lm_block_q5_1, qh) == 4 && offsetof(struct lm_block_q5_1, qs) == 8,
               "nib_row field offsets");

/* Contract: kernels.h (to_float). */
void lm_dequantize_row_q4_0_avx512(const void *x, float *y, int64_t n)
{
    nib_row(x, y, n / LM_QK, sizeof(struct lm_block_q4_0), 0, 0, -8.0f);
}

/* Contract: kernels.h (to_float). */
void lm_dequantize_row_q4_1_avx512(const void *x, float *y, int64_t n)
{
    nib_row(x, y, n / LM_QK, sizeof(struct lm_block_q4_1), 1, 0, 0.0f);
}

/* Contract: kernels.h (to_float). */
void lm_dequantize_row_q5_0_avx512(const void *x, float *y, int64_t n)
{
    nib_row(x, y, n / LM_QK, sizeof(struct lm_block_q5_0), 0, 1, -16.0f);
}

/* Contract: kernels.h (to_float). */
void lm_dequantize_row_q5_1_avx512(const void *x, float *y, int64_t n)
{
    nib_row(x, y, n / LM_QK, sizeof(struct lm_block_q5_1), 1, 1, 0.0f);
}

/* One Q8_0 block: sign-extended codes times d. */
static ALWAYS_INLINE void q8_block(const int8_t *qs, __m512 d, float *y)
{
    const __m512i q0 = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)qs));
    const __m512i q1 = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(qs + 16)));
    store16(y, _mm512_mul_ps(_mm512_cvtepi32_ps(q0), d));
    store16(y + 16, _mm512_mul_ps(_mm512_cvtepi32_ps(q1), d));
}

/* Contract: kernels.h (to_float). */
void lm_dequantize_row_q8_0_avx512(const void *vx, float *y, int64_t n)
{
    const struct lm_block_q8_0 *x = vx;
    const int64_t nb = n / LM_QK;
    int64_t b = 0;
    for (; b + 4 <= nb; b += 4, y += 4 * LM_QK) { /* 4 scales per vcvtph2ps, as nib_row */
        float s[4];
        _mm_storeu_ps(s, avx512_f16x4(&x[b].d, sizeof x[0]));
        for (int j = 0; j < 4; j++)
            q8_block(x[b + j].qs, _mm512_set1_ps(s[j]), y + j * LM_QK);
    }
    for (; b < nb; b++, y += LM_QK)
        q8_block(x[b].qs, bcast_f16(&x[b].d), y);
}

/* ---- K-quants (256 elements) ---- */

/* 16 bytes given as 4 little-endian words, zero-extended to int32 lanes. */
static ALWAYS_INLINE __m512i words_u8x16(uint32_t w0, uint32_t w1, uint32_t w2, uint32_t w3)
{
    return _mm512_cvtepu8_epi32(_mm_setr_epi32((int)w0, (int)w1, (int)w2, (int)w3));
}

/* Q4_K / Q5_K: s[0..8) = d * sc_j, s[8..16) = dmin * m_j (j = sub-block 0..7),
 * from the 12 packed scale bytes (see lm_quant_scale_min_k4): j < 4 the low 6
 * bits of bytes j / j + 4; j >= 4 a nibble of byte j + 4 and the top two bits
 * of byte j - 4 / j, done 4 sub-blocks per 32-bit word. */
static ALWAYS_INLINE void k4_scales(const uint8_t *sc, const void *dm, float *s)
{
    const uint32_t a = load_u32(sc), b = load_u32(sc + 4), c = load_u32(sc + 8);
    const __m512i v = words_u8x16(a & 0x3f3f3f3fu, (c & 0x0f0f0f0fu) | ((a >> 2) & 0x30303030u), b & 0x3f3f3f3fu,
                                  ((c >> 4) & 0x0f0f0f0fu) | ((b >> 2) & 0x30303030u));
    const uint8_t *p = dm;
    const __m512 f = _mm512_mask_blend_ps(0xFF00, bcast_f16(p), bcast_f16(p + 2));
    _mm512_storeu_ps(s, _mm512_mul_ps(f, _mm512_cvtepi32_ps(v)));
}

/* 16 outputs (d * code - m) with d, m broadcast from memory. */
static ALWAYS_INLINE void store_dqm(float *y, const float *d, const float *m, __m512 q)
{
    store16(y, _mm512_sub_ps(_mm512_mul_ps(_mm512_set1_ps(*d), q), _mm512_set1_ps(*m)));
}

/* Contract: kernels.h (to_float). */
void lm_dequantize_row_q4_K_avx512(const void *vx, float *y, int64_t n)
{
    const struct lm_block_q4_K *x = vx;
    const __m512 tab = table_from(0.0f);
    for (int64_t b = 0; b < n / LM_QK_K; b++) {
        float s[16];
        k4_scales(x[b].scales, &x[b].d, s);
        const uint8_t *q = x[b].qs;
        for (int g = 0; g < 4; g++, q += 32, y += 64) {
            const __m512i x0 = load_u8x16(q), x1 = load_u8x16(q + 16);
            store_dqm(y, s + 2 * g, s + 8 + 2 * g, _mm512_permutexvar_ps(x0, tab));
            store_dqm(y + 16, s + 2 * g, s + 8 + 2 * g, _mm512_permutexvar_ps(x1, tab));
            store_dqm(y + 32, s + 2 * g + 1, s + 9 + 2 * g, _mm512_permutexvar_ps(_mm512_srli_epi32(x0, 4), tab));
            store_dqm(y + 48, s + 2 * g + 1, s + 9 + 2 * g, _mm512_permutexvar_ps(_mm512_srli_epi32(x1, 4), tab));
        }
    }
}

/* Contract: kernels.h (to_float). */
void lm_dequantize_row_q5_K_avx512(const void *vx, float *y, int64_t n)
{
    const struct lm_block_q5_K *x = vx;
    const __m512 tab = table_from(0.0f), c16 = _mm512_set1_ps(16.0f);
    for (int64_t b = 0; b < n / LM_QK_K; b++) {
        float s[16];
        k4_scales(x[b].scales, &x[b].d, s);
        const __m256i qh = _mm256_loadu_si256((const __m256i *)x[b].qh);
        const uint8_t *q = x[b].qs;
        for (int g = 0; g < 4; g++, q += 32, y += 64) {
            /* bit 2g of qh[l]: fifth bit of element l; bit 2g + 1: of element 32 + l */
            const __mmask32 h1 = _mm256_test_epi8_mask(qh, _mm256_set1_epi8((char)(1 << (2 * g))));
            const __mmask32 h2 = _mm256_test_epi8_mask(qh, _mm256_set1_epi8((char)(2 << (2 * g))));
            const __m512i x0 = load_u8x16(q), x1 = load_u8x16(q + 16);
            __m512 v0 = _mm512_permutexvar_ps(x0, tab), v1 = _mm512_permutexvar_ps(x1, tab);
            __m512 v2 = _mm512_permutexvar_ps(_mm512_srli_epi32(x0, 4), tab);
            __m512 v3 = _mm512_permutexvar_ps(_mm512_srli_epi32(x1, 4), tab);
            v0 = _mm512_mask_add_ps(v0, (__mmask16)h1, v0, c16);
            v1 = _mm512_mask_add_ps(v1, (__mmask16)(h1 >> 16), v1, c16);
            v2 = _mm512_mask_add_ps(v2, (__mmask16)h2, v2, c16);
            v3 = _mm512_mask_add_ps(v3, (__mmask16)(h2 >> 16), v3, c16);
            store_dqm(y, s + 2 * g, s + 8 + 2 * g, v0);
            store_dqm(y + 16, s + 2 * g, s + 8 + 2 * g, v1);
            store_dqm(y + 32, s + 2 * g + 1, s + 9 + 2 * g, v2);
            store_dqm(y + 48, s + 2 * g + 1, s + 9 + 2 * g, v3);
        }
    }
}

/* Contract: kernels.h (to_float). */
void lm_dequantize_row_q2_K_avx512(const void *vx, float *y, int64_t n)
{
    const struct lm_block_q2_K *x = vx;
    const __m512 tab = table2_from(0.0f);
    for (int64_t b = 0; b < n / LM_QK_K; b++) {
        /* sub-block j: dl = d * (sc & 15), ml = dmin * (sc >> 4) */
        float dl[16], ml[16];
        const __m512i sc = load_u8x16(x[b].scales);
        const __m512 lo = _mm512_cvtepi32_ps(_mm512_and_si512(sc, _mm512_set1_epi32(15)));
        _mm512_storeu_ps(dl, _mm512_mul_ps(bcast_f16(&x[b].d), lo));
        _mm512_storeu_ps(ml, _mm512_mul_ps(bcast_f16(&x[b].dmin), _mm512_cvtepi32_ps(_mm512_srli_epi32(sc, 4))));
        for (int g = 0; g < 2; g++) {
            const __m512i x0 = load_u8x16(x[b].qs + 32 * g), x1 = load_u8x16(x[b].qs + 32 * g + 16);
            for (int sh = 0; sh < 4; sh++, y += 32) { /* elements 128g + 32sh + l: bits 2sh of qs[32g + l] */
                const int j = 8 * g + 2 * sh;
                const __m128i c = _mm_cvtsi32_si128(2 * sh);
                store_dqm(y, dl + j, ml + j, _mm512_permutexvar_ps(_mm512_srl_epi32(x0, c), tab));
                store_dqm(y + 16, dl + j + 1, ml + j + 1, _mm512_permutexvar_ps(_mm512_srl_epi32(x1, c), tab));
            }
        }
    }
}

/* Q3_K: s[j] = d * (sc_j - 32) for the 16 6-bit scales: low nibbles of bytes
 * 0..7 (j < 8) / their high nibbles (j >= 8), top two bits from byte 8 + j % 4
 * at bit 2 (j / 4); 4 sub-blocks per 32-bit word. */
static ALWAYS_INLINE void k3_scales(const uint8_t *sc, const void *d, float *s)
{
    const uint32_t a = load_u32(sc), b = load_u32(sc + 4), c = load_u32(sc + 8), m4 = 0x0f0f0f0fu, m2 = 0x30303030u;
    const __m512i v = words_u8x16((a & m4) | ((c << 4) & m2), (b & m4) | ((c << 2) & m2), ((a >> 4) & m4) | (c & m2),
                                  ((b >> 4) & m4) | ((c >> 2) & m2));
    const __m512 f = _mm512_cvtepi32_ps(_mm512_sub_epi32(v, _mm512_set1_epi32(32)));
    _mm512_storeu_ps(s, _mm512_mul_ps(bcast_f16(d), f));
}

/* Contract: kernels.h (to_float). */
void lm_dequantize_row_q3_K_avx512(const void *vx, float *y, int64_t n)
{
    const struct lm_block_q3_K *x = vx;
    const __m512 tab = table2_from(-4.0f), c4 = _mm512_set1_ps(4.0f);
    for (int64_t b = 0; b < n / LM_QK_K; b++) {
        float s[16];
        k3_scales(x[b].scales, &x[b].d, s);
        const __m256i hm = _mm256_loadu_si256((const __m256i *)x[b].hmask);
        for (int g = 0; g < 2; g++) {
            const __m512i x0 = load_u8x16(x[b].qs + 32 * g), x1 = load_u8x16(x[b].qs + 32 * g + 16);
            for (int sh = 0; sh < 4; sh++, y += 32) {
                /* element 128g + 32sh + l: (bits 2sh of qs[32g + l]) - 4, + 4 where bit 4g + sh of hmask[l] */
                const __mmask32 h = _mm256_test_epi8_mask(hm, _mm256_set1_epi8((char)(1 << (4 * g + sh))));
                const __m128i c = _mm_cvtsi32_si128(2 * sh);
                __m512 v0 = _mm512_permutexvar_ps(_mm512_srl_epi32(x0, c), tab);
                __m512 v1 = _mm512_permutexvar_ps(_mm512_srl_epi32(x1, c), tab);
                v0 = _mm512_mask_add_ps(v0, (__mmask16)h, v0, c4);
                v1 = _mm512_mask_add_ps(v1, (__mmask16)(h >> 16), v1, c4);
                const int j = 8 * g + 2 * sh;
                store16(y, _mm512_mul_ps(_mm512_set1_ps(s[j]), v0));
                store16(y + 16, _mm512_mul_ps(_mm512_set1_ps(s[j + 1]), v1));
            }
        }
    }
}

/* Q6_K: the 128 codes q - 32 of half h (elements 128h + e at e) as bytes.
 * ql[64h + 0..63] is one 64-byte row: bytes 0..31 feed elements 0..31 (low
 * nibble) and 64..95 (high), bytes 32..63 elements 32..63 and 96..127; the
 * two top bits come from qh[32h + l] at bits 0/2/4/6 for element l + 0/32/64/96. */
static ALWAYS_INLINE void q6_codes(const uint8_t *ql, const uint8_t *qh, int8_t *out)
{
    const __m512i l = _mm512_loadu_si512(ql);
    const __m256i q = _mm256_loadu_si256((const __m256i *)qh);
    const __m512i h = _mm512_inserti64x4(_mm512_castsi256_si512(q), _mm256_srli_epi16(q, 2), 1);
    const __m512i m4 = _mm512_set1_epi8(0x0F), m30 = _mm512_set1_epi8(0x30), c32 = _mm512_set1_epi8(32);
    const __m512i ab = _mm512_or_si512(_mm512_and_si512(l, m4), _mm512_and_si512(_mm512_slli_epi16(h, 4), m30));
    const __m512i cd = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l, 4), m4), _mm512_and_si512(h, m30));
    _mm512_storeu_si512(out, _mm512_sub_epi8(ab, c32));
    _mm512_storeu_si512(out + 64, _mm512_sub_epi8(cd, c32));
}

/* Contract: kernels.h (to_float). */
void lm_dequantize_row_q6_K_avx512(const void *vx, float *y, int64_t n)
{
    const struct lm_block_q6_K *x = vx;
    for (int64_t b = 0; b < n / LM_QK_K; b++) {
        float s[16]; /* d * sc_j */
        const __m512i sc = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)x[b].scales));
        _mm512_storeu_ps(s, _mm512_mul_ps(bcast_f16(&x[b].d), _mm512_cvtepi32_ps(sc)));
        for (int h = 0; h < 2; h++) {
            _Alignas(64) int8_t q[128];
            q6_codes(x[b].ql + 64 * h, x[b].qh + 32 * h, q);
            for (int j = 0; j < 8; j++, y += 16) {
                const __m128i c = _mm_load_si128((const __m128i *)(q + 16 * j));
                const __m512 v = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(c));
                store16(y, _mm512_mul_ps(_mm512_set1_ps(s[8 * h + j]), v));
            }
        }
    }
}
