/* gemm_kquant_avx512.c - AVX-512 VNNI GEMM over repacked K-quant groups
 * (kernels.h lm_gemm_fn; layouts q2_Kx8 .. q6_Kx8 in cpu/repack.h;
 * activations Q8_K). Registered by gemm_avx512.c.
 *
 * Registers as in gemm_avx512.c: 16 dwords, dword 2r + h = row r, and h
 * selects the first or second group of 4 consecutive elements of an 8-element
 * run, so the activation operand of vpdpbusd (64 u8 x s8 MACs) is an 8-byte
 * broadcast load. Q4_K/Q5_K: one vpermd interleaves two code chunks of a
 * 64-byte load; Q2_K/Q3_K/Q6_K (whose chunks hold 4-element runs in different
 * bit fields of the same bytes) duplicate each dword of a 32-byte chunk
 * (vpermd) and shift the two copies by different counts (vpsrlvd/vprolvd).
 *
 * Per super-block the sub-block scales are decoded once into vectors of int16
 * pairs (s, 0) per dword (16 of them; 8 for Q4_K/Q5_K) and the bsums terms
 * into 4 vectors of pairs (v_j, v_j+1), kept on the stack; then the columns
 * are done in groups of up to 8, reusing each unpacked code register for the
 * whole group. Per sub-block and column: vpdpbusd from zero over as many
 * registers as keep every dword within int16, then one vpdpwssd by the scale
 * vector (the dword's high half is its sign, multiplied by 0) into the int32
 * sum. Dword bounds (activations in [-128, 127]): Q4_K 16 products of codes
 * <= 15 (30720), Q5_K 8 of <= 31 (31744), Q6_K 4 of <= 63 (32256), Q2_K/Q3_K
 * 8 of <= 3 / 7 (3072 / 7168). The mins (Q2_K, Q4_K, Q5_K) and the code
 * offsets (Q3_K -4, Q6_K -32, folded into the pair vectors) go through the
 * Q8_K bsums: 4 vpdpwssd per column against 8-byte broadcasts of the bsums.
 * The two dwords of a row are folded (vpermt2d) per pair of columns into
 * [column c | column c+1] lanes, then, per super-block, in float:
 *     acc += (d_r d_a) isum [- (dmin_r d_a) msum]
 * exactly as the AVX2 kernels (same integers, same float operations in the
 * same order): results are bit-identical to them (tests/cpu/test_gemm.c).
 *
 * Code: the sub-block loop is fully unrolled (#pragma GCC unroll) and each
 * zero-start chain gets its own zero idiom (lm_avx512_zero()); without either
 * GCC kept a loop with register copies (Q3_K 127 -> 158 GMAC/s). Q6_K sums pairs with
 * vpmaddubsw + vpaddw (4 products per int16, no zero chains): 99 -> 131.
 * All 16 columns in one group (each code register unpacked once per call):
 * Q6_K 140 -> 154, Q3_K 147 -> 167 vs groups of 8 (groups of 4: slower).
 *
 * Measured (Sapphire Rapids, bench/bench_gemm 4096 256 64, 1 thread, same
 * run, GMAC/s, AVX2 -> AVX-512): Q2_K 96 -> 173, Q3_K 91-94 -> 157-176,
 * Q4_K 107-110 -> 191-215, Q5_K 79 -> 192, Q6_K 91 -> 149-155. Q6_K is bound
 * by its 4 vector ops per 16-element sub-block and column (two int16 halves
 * need two products by the scale or an add) plus the 6-bit unpack.
 */
#include <immintrin.h>
#include <string.h>

#include "avx512_util.h"
#include "cpu/kernels/gemm.h"
#include "cpu/kernels/gemv_runs.h"
#include "cpu/repack.h"
#include "quant/blocks.h"

#ifndef LM_GEMM_PREFETCH
#define LM_GEMM_PREFETCH 1024
#endif

#include <stddef.h>

enum kt { KT_Q2, KT_Q3, KT_Q4, KT_Q5, KT_Q6 };

/* kq_gemm reads d[8] at offset 0 and dmin[8] right after it. */
_Static_assert(offsetof(struct lm_block_q2_Kx8, dmin) == 16, "q2_Kx8 dmin");
_Static_assert(offsetof(struct lm_block_q4_Kx8, dmin) == 16, "q4_Kx8 dmin");
_Static_assert(offsetof(struct lm_block_q5_Kx8, dmin) == 16, "q5_Kx8 dmin");

/* Decoded scales of one super-block: sc[j] = (s_rj, 0) in dwords 2r, 2r+1;
 * bs[q] = the bsums multipliers (v_r,j, v_r,j+1), j = 4q + 2h, in dword 2r+h
 * (Q4_K/Q5_K: (m_r,2q+h, m_r,2q+h)). */
struct kdec {
    __m512i sc[16];
    __m512i bs[4];
};

/* 8 activation bytes broadcast to every qword (a vpbroadcastq load). */
static inline __m512i bq8(const void *p)
{
    long long v;
    memcpy(&v, p, 8);
    return _mm512_set1_epi64(v);
}

/* Interleave the two 32-byte chunks at p: dword 2r + h = dword r of chunk h. */
static inline __m512i ileave(const void *p)
{
    const __m512i idx = _mm512_setr_epi32(0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15);
    return _mm512_permutexvar_epi32(idx, _mm512_loadu_si512(p));
}

/* Dwords 2r and 2r + 1 = dword r of the 32 bytes (or 8 dwords) v. */
static inline __m512i dup8(__m256i v)
{
    const __m512i idx = _mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
    return _mm512_permutexvar_epi32(idx, _mm512_castsi256_si512(v));
}

static inline __m512i dup8m(const void *p) { return dup8(_mm256_loadu_si256((const __m256i *)p)); }

/* Per-half shift counts: dwords 2r get a, dwords 2r + 1 get b. */
static inline __m512i counts(int a, int b) { return _mm512_set_epi32(b, a, b, a, b, a, b, a, b, a, b, a, b, a, b, a); }

/* [rows of a (dword pairs summed) | rows of b]: exact int32 sums. */
static inline __m512i fold2(__m512i a, __m512i b)
{
    const __m512i ev = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i od = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    return _mm512_add_epi32(_mm512_permutex2var_epi32(a, ev, b), _mm512_permutex2var_epi32(a, od, b));
}

/* Prefetch `bytes` of the group `dist` bytes ahead (0: not at): always for
 * several columns (LM_GEMM_PREFETCH); for one (lm_avx512_kq_prefetch_one),
 * where lm_avx512_prefetch says. Q6_K used to prefetch on every CPU: with
 * its codes in two arrays 1 KiB apart its one-column kernel streamed 8-10
 * GB/s per thread on Zen 4, which looked compute-bound but was the hardware
 * prefetchers giving up; the sub-block order of repack.h streams ~23 without
 * (bench_gemm stream 512 2048, one thread). */
static inline __attribute__((always_inline)) void prefetch_group(const void *p, int bytes, int dist)
{
    for (int o = 0; dist && o < bytes; o += 64)
        _mm_prefetch((const char *)p + dist + o, _MM_HINT_T0);
}

/* ---- scale decoding ---- */

/* Q4_K/Q5_K: entry 16p + 2r + e of sc[64] is row r, sub-block 2p + e (low 6
 * bits; top 2 bits: the min's bits 4-5), the min's low nibble in mn[]. */
static void k4_decode(const uint8_t *tsc, const uint8_t *tmn, struct kdec *d)
{
    const __m512i m3f = _mm512_set1_epi32(0x3F), m0f = _mm512_set1_epi32(0x0F), m30 = _mm512_set1_epi32(0x30);
    for (int p = 0; p < 4; p++) {
        const __m512i x = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(tsc + 16 * p)));
        d->sc[2 * p] = _mm512_and_si512(_mm512_shuffle_epi32(x, _MM_PERM_CCAA), m3f);
        d->sc[2 * p + 1] = _mm512_and_si512(_mm512_shuffle_epi32(x, _MM_PERM_DDBB), m3f);
        __m512i lo = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(tmn + 16 * (p & 1))));
        lo = _mm512_and_si512(p >= 2 ? _mm512_srli_epi32(lo, 4) : lo, m0f);
        const __m512i m = _mm512_or_si512(lo, _mm512_and_si512(_mm512_srli_epi32(x, 2), m30));
        d->bs[p] = _mm512_or_si512(m, _mm512_slli_epi32(m, 16));
    }
}

/* From 8 words-per-pair vectors w[jp] (dword r = (v_r,2jp, v_r,2jp+1), int16)
 * of the 16 sub-blocks: the scale vectors when `scales` (low or high word of
 * dword r, duplicated into dwords 2r, 2r+1, as (s, 0) or, `both`, (s, s))
 * and the pair vectors (off * w, interleaving jp = 2q, 2q + 1). */
static void k16_finish(const __m256i w[8], bool scales, bool both, int off, struct kdec *d)
{
    const __m512i il = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    for (int jp = 0; scales && jp < 8; jp++) {
        const __m512i v = dup8(w[jp]);
        const __m512i lo = _mm512_and_si512(v, _mm512_set1_epi32(0xFFFF)), hi = _mm512_srli_epi32(v, 16);
        d->sc[2 * jp] = both ? _mm512_or_si512(lo, _mm512_slli_epi32(lo, 16)) : lo;
        d->sc[2 * jp + 1] = both ? _mm512_or_si512(hi, _mm512_slli_epi32(hi, 16)) : hi;
    }
    for (int q = 0; q < 4; q++) {
        const __m512i a = _mm512_castsi256_si512(w[2 * q]), b = _mm512_castsi256_si512(w[2 * q + 1]);
        const __m512i v = _mm512_permutex2var_epi32(a, il, b);
        d->bs[q] = off == 1 ? v : _mm512_mullo_epi16(v, _mm512_set1_epi16((short)off));
    }
}

/* Q2_K: scale byte (scale | min << 4); the pair vectors are the mins. */
static void q2k_decode(const struct lm_block_q2_Kx8 *x, struct kdec *d)
{
    __m256i w[8];
    for (int jp = 0; jp < 8; jp++)
        w[jp] = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(x->scales + 16 * jp)));
    for (int jp = 0; jp < 8; jp++)
        w[jp] = _mm256_srli_epi16(w[jp], 4);
    k16_finish(w, false, false, 1, d); /* mins */
    for (int jp = 0; jp < 8; jp++) {                 /* scales: the low nibbles */
        const __m512i v = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(x->scales + 16 * jp)));
        d->sc[2 * jp] = _mm512_and_si512(_mm512_shuffle_epi32(v, _MM_PERM_CCAA), _mm512_set1_epi32(0x0F));
        d->sc[2 * jp + 1] = _mm512_and_si512(_mm512_shuffle_epi32(v, _MM_PERM_DDBB), _mm512_set1_epi32(0x0F));
    }
}

/* Q3_K: 6-bit scales stored + 32 (low nibbles in s4, high 2 bits in s2);
 * pair vectors -4 * scale (the code offset). */
static void q3k_decode(const struct lm_block_q3_Kx8 *x, struct kdec *d)
{
    const __m256i m0f = _mm256_set1_epi16(0x0F), m3 = _mm256_set1_epi16(3), o = _mm256_set1_epi16(32);
    __m256i w[8];
    for (int jp = 0; jp < 8; jp++) {
        __m256i lo = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(x->s4 + 16 * (jp % 4))));
        __m256i hi = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(x->s2 + 16 * (jp % 2))));
        lo = _mm256_and_si256(jp >= 4 ? _mm256_srli_epi16(lo, 4) : lo, m0f);
        hi = _mm256_and_si256(_mm256_srli_epi16(hi, 2 * (jp / 2)), m3);
        w[jp] = _mm256_sub_epi16(_mm256_or_si256(lo, _mm256_slli_epi16(hi, 4)), o);
    }
    k16_finish(w, true, false, -4, d);
}

/* Q6_K: int8 scales as (s, s) (the codes go through vpmaddubsw); pair
 * vectors -32 * scale. */
static void q6k_decode(const struct lm_block_q6_Kx8 *x, struct kdec *d)
{
    __m256i w[8];
    for (int jp = 0; jp < 8; jp++)
        w[jp] = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(x->scales + 16 * jp)));
    k16_finish(w, true, true, -32, d);
}

/* ---- code registers ---- */

/* Sub-block unit u of a super-block: its code registers q[] (nq of them) and,
 * for each, the activation byte offset ao[] and which scale sc[] it takes.
 * Q4_K/Q5_K: unit = sub-block j (4 registers over 32 elements); Q2_K, Q3_K,
 * Q6_K: unit = sub-block j (2 registers over 16). Constants after inlining. */
static inline __attribute__((always_inline)) void k4_unpack(enum kt t, const void *wv, int j, __m512i q[4])
{
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    const int p = j / 2, e = j % 2;
    const uint8_t *qs = t == KT_Q4 ? ((const struct lm_block_q4_Kx8 *)wv)->qs : ((const struct lm_block_q5_Kx8 *)wv)->qs;
    for (int m = 0; m < 4; m++) {
        const __m512i r = ileave(qs + 32 * (8 * p + 2 * m));
        q[m] = _mm512_and_si512(e ? _mm512_srli_epi16(r, 4) : r, m4);
        if (t == KT_Q5) { /* bit j of the qh chunks 2m, 2m+1 -> bit 4 */
            const __m512i h = ileave(((const struct lm_block_q5_Kx8 *)wv)->qh + 64 * m);
            const __m512i hb = j < 4 ? _mm512_slli_epi16(h, 4 - j) : j == 4 ? h : _mm512_srli_epi16(h, j - 4);
            q[m] = _mm512_ternarylogic_epi32(q[m], hb, _mm512_set1_epi8(0x10), 0xF8); /* a | (b & c) */
        }
    }
}

static inline __attribute__((always_inline)) void k16_unpack(enum kt t, const void *wv, int j, __m512i q[2])
{
    if (t == KT_Q6) {
        const struct lm_block_q6_Kx8 *w = wv;
        const __m512i h = dup8m(w->sub[j].qh), m4 = _mm512_set1_epi8(0x0F), m30 = _mm512_set1_epi8(0x30);
        for (int v = 0; v < 2; v++) { /* codes u = 2v + h: nibble h of ql chunk 2j + v, bits 2u of qh chunk j */
            const __m512i l = _mm512_and_si512(_mm512_srlv_epi32(dup8m(w->sub[j].ql + 32 * v), counts(0, 4)), m4);
            const __m512i hb = _mm512_rolv_epi32(h, v ? counts(0, 30) : counts(4, 2));
            q[v] = _mm512_ternarylogic_epi32(l, hb, m30, 0xF8);
        }
        return;
    }
    const uint8_t *qs = t == KT_Q2 ? ((const struct lm_block_q2_Kx8 *)wv)->qs : ((const struct lm_block_q3_Kx8 *)wv)->qs;
    const __m512i l = dup8m(qs + 32 * j), m3 = _mm512_set1_epi8(3);
    for (int v = 0; v < 2; v++) /* codes u = 2v + h: bits 2u */
        q[v] = _mm512_and_si512(_mm512_srlv_epi32(l, counts(4 * v, 4 * v + 2)), m3);
    if (t == KT_Q3) { /* high bit of register 4j + u: bit 4 (j%2) + u of hm chunk j/2 -> bit 2 */
        const __m512i h = dup8m(((const struct lm_block_q3_Kx8 *)wv)->hm + 32 * (j / 2));
        const int b0 = 4 * (j % 2);
        for (int v = 0; v < 2; v++) {
            const __m512i hb = _mm512_rolv_epi32(h, counts((34 - b0 - 2 * v) % 32, (33 - b0 - 2 * v) % 32));
            q[v] = _mm512_ternarylogic_epi32(q[v], hb, _mm512_set1_epi8(4), 0xF8);
        }
    }
}

/* ---- the columns of one super-block ---- */

static inline const struct lm_block_q8_K *act(const char *y, size_t by, int c, int64_t b)
{
    return (const struct lm_block_q8_K *)(y + (size_t)c * by) + b;
}

static inline size_t kq_block_bytes(enum kt t)
{
    return t == KT_Q2   ? sizeof(struct lm_block_q2_Kx8)
           : t == KT_Q3 ? sizeof(struct lm_block_q3_Kx8)
           : t == KT_Q4 ? sizeof(struct lm_block_q4_Kx8)
           : t == KT_Q5 ? sizeof(struct lm_block_q5_Kx8)
                        : sizeof(struct lm_block_q6_Kx8);
}

/* How a super-block prefetches the weights LM_GEMM_PREFETCH ahead: not at
 * all, all its lines first (`burst`), or each sub-block its share of them
 * (`spread`: the one-column streams of gemv_x8; several streams of 18-27
 * lines in bursts stall on the line-fill buffers: perf put half of a Q4_K
 * stream's cycles on the instruction after the prefetch loop; spread,
 * tinyllama Q4_K_M tg is +3.1-4.4 % in bench_ab A/Bs, same run, Intel Xeon
 * with AMX, 2026-12-04; the distance for spread: 768 +0.0 %, 896 +2.3 %,
 * 1024 +3.1-4.4 %, 1152 +3.4 %, 1280 +1.4 %, 1536 +1.5 %, 2048 +1.5 %). */
enum kq_pf { KQ_PF_NONE, KQ_PF_BURST, KQ_PF_SPREAD };

/* isum[c] += sum over the sub-blocks of scale_j * (codes . activations);
 * with `spread`, sub-block j first prefetches its share of the lines. */
static inline __attribute__((always_inline)) void kq_isums(enum kt t, const void *w, const struct kdec *d,
                                                           const struct lm_block_q8_K *const *a, int nc,
                                                           __m512i *isum, bool spread)
{
    const bool k4 = t == KT_Q4 || t == KT_Q5;
    const int nsub = k4 ? 8 : 16, lines = (int)((kq_block_bytes(t) + 63) / 64);
#pragma GCC unroll 16
    for (int j = 0; j < nsub; j++) {
        __m512i q[4];
        for (int l = j * lines / nsub; spread && l < (j + 1) * lines / nsub; l++)
            _mm_prefetch((const char *)w + LM_GEMM_PREFETCH + 64 * l, _MM_HINT_T0);
        if (k4)
            k4_unpack(t, w, j, q);
        else
            k16_unpack(t, w, j, q);
#pragma GCC unroll 16
        for (int c = 0; c < nc; c++) {
            const int8_t *aq = a[c]->qs + (k4 ? 32 : 16) * j;
            if (t == KT_Q4) {
                __m512i s = _mm512_dpbusd_epi32(lm_avx512_zero(), q[0], bq8(aq));
                for (int m = 1; m < 4; m++)
                    s = _mm512_dpbusd_epi32(s, q[m], bq8(aq + 8 * m));
                isum[c] = _mm512_dpwssd_epi32(isum[c], s, d->sc[j]);
            } else if (t == KT_Q5) {
                for (int hf = 0; hf < 2; hf++) {
                    __m512i s = _mm512_dpbusd_epi32(lm_avx512_zero(), q[2 * hf], bq8(aq + 16 * hf));
                    s = _mm512_dpbusd_epi32(s, q[2 * hf + 1], bq8(aq + 16 * hf + 8));
                    isum[c] = _mm512_dpwssd_epi32(isum[c], s, d->sc[j]);
                }
            } else if (t == KT_Q6) { /* int16 pair sums of 2 products, then 4 (<= 32256) */
                const __m512i p0 = _mm512_maddubs_epi16(q[0], bq8(aq)), p1 = _mm512_maddubs_epi16(q[1], bq8(aq + 8));
                isum[c] = _mm512_dpwssd_epi32(isum[c], _mm512_add_epi16(p0, p1), d->sc[j]);
            } else {
                __m512i s = _mm512_dpbusd_epi32(lm_avx512_zero(), q[0], bq8(aq));
                s = _mm512_dpbusd_epi32(s, q[1], bq8(aq + 8));
                isum[c] = _mm512_dpwssd_epi32(isum[c], s, d->sc[j]);
            }
        }
    }
}

/* sum over the 16 bsums of pair vector * bsum (int32, dwords as isum). */
static inline __m512i kq_bsums(const struct kdec *d, const struct lm_block_q8_K *a)
{
    __m512i o = _mm512_dpwssd_epi32(_mm512_setzero_si512(), d->bs[0], bq8(a->bsums));
    for (int q = 1; q < 4; q++)
        o = _mm512_dpwssd_epi32(o, d->bs[q], bq8(a->bsums + 4 * q));
    return o;
}

/* NC (1..16, constant) columns of one super-block: acc[c/2] (lanes [column
 * 2i | column 2i + 1]) += the super-block's update. */
static inline __attribute__((always_inline)) void kq_cols(enum kt t, const void *w, const lm_fp16 *dw16,
                                                          const lm_fp16 *dmin16, const struct kdec *d, const char *y,
                                                          size_t by, int64_t b, __m512 *acc, const int nc,
                                                          bool spread)
{
    const bool mins = t == KT_Q2 || t == KT_Q4 || t == KT_Q5;
    const struct lm_block_q8_K *a[LM_GEMM_MAX_NC];
    __m512i isum[LM_GEMM_MAX_NC];
    for (int c = 0; c < nc; c++) {
        a[c] = act(y, by, c, b);
        isum[c] = mins ? _mm512_setzero_si512() : kq_bsums(d, a[c]);
    }
    kq_isums(t, w, d, a, nc, isum, spread);
    const __m512 dw = _mm512_cvtph_ps(_mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)dw16)));
    for (int p = 0; p < (nc + 1) / 2; p++) {
        const int c1 = 2 * p + 1 < nc ? 2 * p + 1 : 2 * p;
        const __m512 da = _mm512_insertf32x8(_mm512_set1_ps(a[2 * p]->d), _mm256_set1_ps(a[c1]->d), 1);
        acc[p] = _mm512_fmadd_ps(_mm512_mul_ps(dw, da), _mm512_cvtepi32_ps(fold2(isum[2 * p], isum[c1])), acc[p]);
        if (mins) {
            const __m512 dm = _mm512_cvtph_ps(_mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)dmin16)));
            const __m512i m = fold2(kq_bsums(d, a[2 * p]), kq_bsums(d, a[c1]));
            acc[p] = _mm512_fnmadd_ps(_mm512_mul_ps(dm, da), _mm512_cvtepi32_ps(m), acc[p]);
        }
    }
}

/* Super-block b of the group whose block b is at w, NC columns: decode the
 * scales once, then all columns (each unpacked code register is used by
 * every column before the next is made); prefetch as `pf` says. */
static inline __attribute__((always_inline)) void kq_block(enum kt t, const char *w, const char *y, size_t by,
                                                           int64_t b, __m512 *acc, const int nc, enum kq_pf pf)
{
    const lm_fp16 *d16 = (const lm_fp16 *)w, *dmin16 = d16 + LM_REPACK_ROWS; /* d[8], then dmin[8] */
    struct kdec d;
    const int dist = nc == 1 ? lm_avx512_kq_prefetch_one : LM_GEMM_PREFETCH;
    prefetch_group(w, (int)kq_block_bytes(t), pf == KQ_PF_BURST ? dist : 0);
    if (t == KT_Q2)
        q2k_decode((const struct lm_block_q2_Kx8 *)w, &d);
    else if (t == KT_Q3)
        q3k_decode((const struct lm_block_q3_Kx8 *)w, &d);
    else if (t == KT_Q6)
        q6k_decode((const struct lm_block_q6_Kx8 *)w, &d);
    else if (t == KT_Q4)
        k4_decode(((const struct lm_block_q4_Kx8 *)w)->sc, ((const struct lm_block_q4_Kx8 *)w)->mn, &d);
    else
        k4_decode(((const struct lm_block_q5_Kx8 *)w)->sc, ((const struct lm_block_q5_Kx8 *)w)->mn, &d);
    kq_cols(t, w, d16, dmin16, &d, y, by, b, acc, nc, pf == KQ_PF_SPREAD);
}

/* Column c's 8 results from the pair accumulators. */
static inline void kq_store(float *s, const __m512 *acc, int c)
{
    _mm256_storeu_ps(s, c % 2 ? _mm512_extractf32x8_ps(acc[c / 2], 1) : _mm512_castps512_ps256(acc[c / 2]));
}

/* The GEMM of one type over NC (constant) columns, super-block by super-block. */
static inline __attribute__((always_inline)) void kq_gemm(enum kt t, int64_t k, float *s, size_t ldc, const void *x,
                                                          const char *y, size_t by, const int nc)
{
    const size_t bw = kq_block_bytes(t);
    __m512 acc[LM_GEMM_MAX_NC / 2];
    for (int p = 0; p < (nc + 1) / 2; p++)
        acc[p] = _mm512_setzero_ps();
    const enum kq_pf pf = nc > 1 || lm_avx512_prefetch ? KQ_PF_BURST : KQ_PF_NONE;
    for (int64_t b = 0; b < k / LM_QK_K; b++)
        kq_block(t, (const char *)x + (size_t)b * bw, y, by, b, acc, nc, pf);
    for (int c = 0; c < nc; c++)
        kq_store(s + (size_t)c * ldc, acc, c);
}

/* One column over R (constant) groups at once (gemv_x8), group r at x + r *
 * gb: per super-block index, the block of each group into its own
 * accumulator; the same operations per group as kq_gemm with one column. */
static inline __attribute__((always_inline)) void kq_gemv(enum kt t, const int R, int64_t k, const char *x, size_t gb,
                                                          const char *y, float *s)
{
    const size_t bw = kq_block_bytes(t);
    __m512 acc[8];
    for (int r = 0; r < R; r++)
        acc[r] = _mm512_setzero_ps();
    const enum kq_pf pf = lm_avx512_prefetch ? KQ_PF_SPREAD : KQ_PF_NONE;
    for (int64_t b = 0; b < k / LM_QK_K; b++)
        for (int r = 0; r < R; r++)
            kq_block(t, x + (size_t)r * gb + (size_t)b * bw, y, 0, b, &acc[r], 1, pf);
    for (int r = 0; r < R; r++)
        kq_store(s + 8 * r, &acc[r], 0);
}

/* One gemv_x8 run of r groups at group g (gemv_runs.h), 4 groups at most. */
static inline __attribute__((always_inline)) void kq_gemv_step(enum kt t, const void *ctx, int64_t g, int r)
{
    const struct lm_gemv_args *c = ctx;
    const char *x = lm_gemv_group(c, g);
    float *s = lm_gemv_out(c, g);
    switch (r) {
    case 8: kq_gemv(t, 1, c->n, x, c->group_bytes, c->y, s); break; /* never: runs of 4 */
    case 4: kq_gemv(t, 4, c->n, x, c->group_bytes, c->y, s); break;
    case 2: kq_gemv(t, 2, c->n, x, c->group_bytes, c->y, s); break;
    default: kq_gemv(t, 1, c->n, x, c->group_bytes, c->y, s); break;
    }
}
static void q2k_gemv_step(const void *c, int64_t g, int r) { kq_gemv_step(KT_Q2, c, g, r); }
static void q3k_gemv_step(const void *c, int64_t g, int r) { kq_gemv_step(KT_Q3, c, g, r); }
static void q4k_gemv_step(const void *c, int64_t g, int r) { kq_gemv_step(KT_Q4, c, g, r); }
static void q5k_gemv_step(const void *c, int64_t g, int r) { kq_gemv_step(KT_Q5, c, g, r); }
static void q6k_gemv_step(const void *c, int64_t g, int r) { kq_gemv_step(KT_Q6, c, g, r); }

/* Contracts: kernels.h lm_gemv_fn (ysum unused); 4 groups at a time. */
void lm_gemv_q2_Kx8_q8_K_avx512(int64_t k, int64_t n_groups, size_t group_bytes, float *s, const void *x, const void *y,
                                const int16_t *ysum)
{
    lm_gemv_call(q2k_gemv_step, 4, k, n_groups, group_bytes, s, x, y, ysum);
}
void lm_gemv_q3_Kx8_q8_K_avx512(int64_t k, int64_t n_groups, size_t group_bytes, float *s, const void *x, const void *y,
                                const int16_t *ysum)
{
    lm_gemv_call(q3k_gemv_step, 4, k, n_groups, group_bytes, s, x, y, ysum);
}
void lm_gemv_q4_Kx8_q8_K_avx512(int64_t k, int64_t n_groups, size_t group_bytes, float *s, const void *x, const void *y,
                                const int16_t *ysum)
{
    lm_gemv_call(q4k_gemv_step, 4, k, n_groups, group_bytes, s, x, y, ysum);
}
void lm_gemv_q5_Kx8_q8_K_avx512(int64_t k, int64_t n_groups, size_t group_bytes, float *s, const void *x, const void *y,
                                const int16_t *ysum)
{
    lm_gemv_call(q5k_gemv_step, 4, k, n_groups, group_bytes, s, x, y, ysum);
}
void lm_gemv_q6_Kx8_q8_K_avx512(int64_t k, int64_t n_groups, size_t group_bytes, float *s, const void *x, const void *y,
                                const int16_t *ysum)
{
    lm_gemv_call(q6k_gemv_step, 4, k, n_groups, group_bytes, s, x, y, ysum);
}

/* The GEMM of type t: one kq_gemm instance per column count
 * (LM_FEW_INSTANCES, kernels.h: one taking nc at run time). */
static inline __attribute__((always_inline)) void kq_gemm_nc(enum kt t, int64_t k, float *s, size_t ldc, const void *x,
                                                             const void *y, size_t by, int nc)
{
#ifdef LM_FEW_INSTANCES
    kq_gemm(t, k, s, ldc, x, y, by, nc);
#else
    switch (nc) {
    case 16: kq_gemm(t, k, s, ldc, x, y, by, 16); break;
    case 15: kq_gemm(t, k, s, ldc, x, y, by, 15); break;
    case 14: kq_gemm(t, k, s, ldc, x, y, by, 14); break;
    case 13: kq_gemm(t, k, s, ldc, x, y, by, 13); break;
    case 12: kq_gemm(t, k, s, ldc, x, y, by, 12); break;
    case 11: kq_gemm(t, k, s, ldc, x, y, by, 11); break;
    case 10: kq_gemm(t, k, s, ldc, x, y, by, 10); break;
    case 9: kq_gemm(t, k, s, ldc, x, y, by, 9); break;
    case 8: kq_gemm(t, k, s, ldc, x, y, by, 8); break;
    case 7: kq_gemm(t, k, s, ldc, x, y, by, 7); break;
    case 6: kq_gemm(t, k, s, ldc, x, y, by, 6); break;
    case 5: kq_gemm(t, k, s, ldc, x, y, by, 5); break;
    case 4: kq_gemm(t, k, s, ldc, x, y, by, 4); break;
    case 3: kq_gemm(t, k, s, ldc, x, y, by, 3); break;
    case 2: kq_gemm(t, k, s, ldc, x, y, by, 2); break;
    default: kq_gemm(t, k, s, ldc, x, y, by, 1); break;
    }
#endif
}

/* Contracts: kernels.h (ysum unused). */
void lm_gemm_q2_Kx8_q8_K_avx512(int64_t k, float *s, size_t ldc, const void *x, const void *y, size_t by,
                                const int16_t *ysum, int nc)
{
    kq_gemm_nc(KT_Q2, k, s, ldc, x, y, by, nc);
}
void lm_gemm_q3_Kx8_q8_K_avx512(int64_t k, float *s, size_t ldc, const void *x, const void *y, size_t by,
                                const int16_t *ysum, int nc)
{
    kq_gemm_nc(KT_Q3, k, s, ldc, x, y, by, nc);
}
void lm_gemm_q4_Kx8_q8_K_avx512(int64_t k, float *s, size_t ldc, const void *x, const void *y, size_t by,
                                const int16_t *ysum, int nc)
{
    kq_gemm_nc(KT_Q4, k, s, ldc, x, y, by, nc);
}
void lm_gemm_q5_Kx8_q8_K_avx512(int64_t k, float *s, size_t ldc, const void *x, const void *y, size_t by,
                                const int16_t *ysum, int nc)
{
    kq_gemm_nc(KT_Q5, k, s, ldc, x, y, by, nc);
}
void lm_gemm_q6_Kx8_q8_K_avx512(int64_t k, float *s, size_t ldc, const void *x, const void *y, size_t by,
                                const int16_t *ysum, int nc)
{
    kq_gemm_nc(KT_Q6, k, s, ldc, x, y, by, nc);
}
