/* gemm_panel_avx512.c - panel GEMM (kernels.h lm_gemm_panel_fn) of the
 * repacked Q4_0 and Q8_0 weights with AVX-512 VNNI, for prompt batches.
 *
 * Why a second kernel beside gemm_x8 (gemm_avx512.c): gemm_x8 sees one 8-row
 * group, so each vpdpbusd covers 8 rows x 2 chunks and every block and pair
 * of columns pays a fold (pack + madd), a scale permute and a conversion:
 * as many other uops as vpdpbusd, ~45 % of the vpdpbusd peak on Zen 5. Here
 * a tile is two groups (16 rows) x up to 8 columns: one zmm holds chunk c of
 * all 16 rows (the 32-byte chunk of group g in the low half, of group g + 1
 * in the high half, one load + one vinserti64x4 per chunk, shared by the
 * tile's columns), so every vpdpbusd takes the column's 4 activation bytes
 * as an embedded broadcast from memory and its int32 lanes are the 16 rows'
 * sums directly: per block and column 8 vpdpbusd, one conversion, one
 * multiply and one FMA.
 *
 * Activation rows (lm_panel_from_float_q8_avx512, own layout): for nb = k/32
 * blocks, [nb x 32 int8 codes][nb float d][nb int32 offset], where codes and
 * d are the Q8_0 encoder's of this level (the same bits as the gemm_x8
 * path's activations) and offset = -8 sum(codes) (Q4_0: unsigned codes
 * 0..15 stand for q - 8) and -128 sum(codes) for Q8_0 (w ^ 0x80 = w + 128).
 *
 * Numerics: per row, column and block the exact integer dot (offset start,
 * |lane| < 2^21), then acc = fma((float)isum, d_w * d_a, acc) in block
 * order: the operations of the gemm_x8 and gemv_x8 kernels of this level and
 * of the AVX2 level, so every output has their bits (tests/cpu/test_gemm.c
 * checks it), whatever the tile, the thread split or the batch: a sequence
 * decoded alone (gemv) and in a batch (panel) gets the same logits.
 *
 * Q4_K (q4_Kx8 groups, Q8_K activation rows as the gemm_x8 path encodes
 * them): the same 16-row tiles. Chunk 8p + c of a group's codes holds, in
 * dword r, row r's 4 codes of elements 4c..4c+3 of sub-blocks 2p (low
 * nibbles) and 2p + 1 (high), so chunk16 and a nibble mask give the 16 rows'
 * codes of one sub-block quad, against a 4-byte broadcast of the column's
 * activations. A 32-element sub-block dot of codes <= 15 and activations in
 * [-128, 127] can reach 61440, past int16, so each sub-block runs two chains
 * of 4 vpdpbusd (16 elements, <= 30720) and each goes into the int32 sum by
 * vpdpwssd against (scale, 0) per dword; the mins by vpdpwssd of (min, min)
 * against the two bsums of the sub-block. Per super-block and column, in
 * float, acc = fma(d_r d_a, isum, acc), then acc = fnmadd(dmin_r d_a, msum,
 * acc): gemm_kquant_avx512.c's integers and float operations, so its bits.
 */
#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "avx512_util.h"
#include "cpu/kernels/kernels.h"
#include "cpu/repack.h"
#include "quant/blocks.h"

#define PANEL_NC 8        /* columns per tile */
#define PANEL_COLS 64     /* columns kept hot in L2 while a thread sweeps its groups */

/* Bytes of one activation row of k elements (k % 32 == 0). */
size_t lm_panel_row_size_q8_avx512(int64_t k) { return (size_t)(k / LM_QK) * (LM_QK + 2 * sizeof(float)); }

static void encode_row(const float *x, void *y, int64_t n, int32_t bias)
{
    const int64_t nb = n / LM_QK;
    int8_t *qs = y;
    float *d = (float *)(qs + nb * LM_QK);
    int32_t *off = (int32_t *)(d + nb);
    for (int64_t b = 0; b < nb; b++) {
        struct lm_block_q8_0 blk;
        lm_quantize_row_q8_0_avx2(x + b * LM_QK, &blk, LM_QK);
        memcpy(qs + b * LM_QK, blk.qs, LM_QK);
        d[b] = _cvtsh_ss(blk.d);
        const __m256i q = _mm256_loadu_si256((const __m256i *)blk.qs);
        const __m256i s16 = _mm256_maddubs_epi16(_mm256_set1_epi8(1), q); /* pairs, exact in int16 */
        const __m256i s32 = _mm256_madd_epi16(s16, _mm256_set1_epi16(1));
        off[b] = bias * _mm512_reduce_add_epi32(_mm512_zextsi256_si512(s32));
    }
}

/* Contract: kernels.h lm_from_float_fn; n % 32 == 0 (the panel's k). */
void lm_panel_from_float_q4_0_avx512(const float *x, void *y, int64_t n) { encode_row(x, y, n, -8); }
void lm_panel_from_float_q8_0_avx512(const float *x, void *y, int64_t n) { encode_row(x, y, n, -128); }

size_t lm_gemm_panel_scratch_q8_avx512(int64_t k)
{
    (void)k;
    return 64;
}

/* 32-byte chunk c of group x0's block in the low half, of x1's in the high. */
static inline __m512i chunk16(const uint8_t *q0, const uint8_t *q1)
{
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)q0)),
                              _mm256_loadu_si256((const __m256i *)q1), 1);
}

/* acc += w (u8) . the 4 bytes at p (s8) broadcast to every dword: the
 * embedded-broadcast memory form, which GCC 12 does not form from
 * _mm512_dpbusd_epi32 (it emits a separate vpbroadcastd). */
static inline __m512i dpbusd_bcast(__m512i acc, __m512i w, const int8_t *p)
{
    __asm__("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(w), "m"(*(const int32_t *)(const void *)p));
    return acc;
}

/* One tile: groups x0, x1 (16 rows; x1 == x0 for a lone last group) against
 * NC columns (column c at y + col[c] * by); stores rows < nr of columns < nc. */
static inline __attribute__((always_inline)) void tile(bool q8, const int NC, int64_t nb, const char *x0,
                                                        const char *x1, const char *y, size_t by, float *s,
                                                        size_t ldc, int nc, int nr)
{
    const size_t bw = q8 ? sizeof(struct lm_block_q8_0x8) : sizeof(struct lm_block_q4_0x8);
    const size_t dofs = (size_t)nb * LM_QK, oofs = dofs + (size_t)nb * sizeof(float);
    const int8_t *yc[PANEL_NC];
    for (int c = 0; c < NC; c++)
        yc[c] = (const int8_t *)(y + (size_t)(c < nc ? c : nc - 1) * by);
    __m512 acc[PANEL_NC];
    for (int c = 0; c < NC; c++)
        acc[c] = _mm512_setzero_ps();
    const __m512i m4 = _mm512_set1_epi8(0x0F), bias = _mm512_set1_epi8((char)0x80);
    for (int64_t b = 0; b < nb; b++) {
        const char *w0 = x0 + (size_t)b * bw, *w1 = x1 + (size_t)b * bw;
        const uint8_t *q0 = (const uint8_t *)w0 + sizeof(lm_fp16) * LM_REPACK_ROWS;
        const uint8_t *q1 = (const uint8_t *)w1 + sizeof(lm_fp16) * LM_REPACK_ROWS;
        __m512i w[8]; /* w[j] pairs with activation bytes 4j..4j+3 */
        if (q8) {
            for (int j = 0; j < 8; j++)
                w[j] = _mm512_xor_si512(chunk16(q0 + 32 * j, q1 + 32 * j), bias);
        } else { /* chunk ch: low nibbles = elements 4ch.., high = 16 + 4ch.. */
            for (int ch = 0; ch < 4; ch++) {
                const __m512i raw = chunk16(q0 + 32 * ch, q1 + 32 * ch);
                w[ch] = _mm512_and_si512(raw, m4);
                w[4 + ch] = _mm512_and_si512(_mm512_srli_epi16(raw, 4), m4);
            }
        }
        const __m512 dw = _mm512_cvtph_ps(_mm256_inserti128_si256(
            _mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)w0)), _mm_loadu_si128((const __m128i *)w1), 1));
        __m512i t[PANEL_NC]; /* the columns' chains interleaved: 8 dependent vpdpbusd each */
        for (int c = 0; c < NC; c++)
            t[c] = _mm512_set1_epi32(((const int32_t *)(yc[c] + oofs))[b]);
        for (int j = 0; j < 8; j++)
            for (int c = 0; c < NC; c++)
                t[c] = dpbusd_bcast(t[c], w[j], yc[c] + b * LM_QK + 4 * j);
        for (int c = 0; c < NC; c++) {
            const __m512 scale = _mm512_mul_ps(dw, _mm512_set1_ps(((const float *)(yc[c] + dofs))[b]));
            acc[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(t[c]), scale, acc[c]);
        }
    }
    const __mmask16 rm = (__mmask16)(nr == 16 ? 0xFFFF : 0x00FF);
    for (int c = 0; c < NC && c < nc; c++)
        _mm512_mask_storeu_ps(s + (size_t)c * ldc, rm, acc[c]);
}

/* ---- Q4_K ---- */

/* The 16 rows' (x0: rows 0-7, x1: rows 8-15) 6-bit scales (sc[j]: (s, 0) per
 * dword) and mins (mn[j]: (m, m)) of the 8 sub-blocks of one super-block.
 * Entry 16p + 2r + e of a group's sc[64] is row r, sub-block 2p + e (top 2
 * bits: the min's bits 4-5), its mn[16 (p % 2) + 2r + e] the min's low bits
 * in nibble p / 2 (as k4_decode in gemm_kquant_avx512.c). */
static inline __attribute__((always_inline)) void k4_scales16(const struct lm_block_q4_Kx8 *x0,
                                                              const struct lm_block_q4_Kx8 *x1, __m512i sc[8],
                                                              __m512i mn[8])
{
    const __m512i m3f = _mm512_set1_epi32(0x3F), m0f = _mm512_set1_epi32(0x0F), m30 = _mm512_set1_epi32(0x30);
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
    for (int p = 0; p < 4; p++) {
        const __m512i a = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(x0->sc + 16 * p)));
        const __m512i b = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(x1->sc + 16 * p)));
        __m512i la = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(x0->mn + 16 * (p & 1))));
        __m512i lb = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(x1->mn + 16 * (p & 1))));
        if (p >= 2) {
            la = _mm512_srli_epi32(la, 4);
            lb = _mm512_srli_epi32(lb, 4);
        }
        for (int e = 0; e < 2; e++) {
            const __m512i idx = e ? odd : even;
            const __m512i x = _mm512_permutex2var_epi32(a, idx, b), l = _mm512_permutex2var_epi32(la, idx, lb);
            sc[2 * p + e] = _mm512_and_si512(x, m3f);
            const __m512i m = _mm512_or_si512(_mm512_and_si512(l, m0f), _mm512_and_si512(_mm512_srli_epi32(x, 2), m30));
            mn[2 * p + e] = _mm512_or_si512(m, _mm512_slli_epi32(m, 16));
        }
    }
}

/* acc += a (s16 pairs) . the 4 bytes at p (s16 pairs) broadcast: vpdpwssd's
 * embedded-broadcast form (GCC 12 emits a separate broadcast otherwise). */
static inline __m512i dpwssd_bcast(__m512i acc, __m512i a, const void *p)
{
    __asm__("vpdpwssd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(a), "m"(*(const int32_t *)p));
    return acc;
}

/* One Q4_K tile: groups x0, x1 (16 rows) against NC Q8_K columns; as tile(). */
static inline __attribute__((always_inline)) void tile_q4_K(const int NC, int64_t nb, const char *x0, const char *x1,
                                                            const char *y, size_t by, float *s, size_t ldc, int nc,
                                                            int nr)
{
    const struct lm_block_q8_K *yc[PANEL_NC];
    for (int c = 0; c < NC; c++)
        yc[c] = (const struct lm_block_q8_K *)(y + (size_t)(c < nc ? c : nc - 1) * by);
    __m512 acc[PANEL_NC];
    for (int c = 0; c < NC; c++)
        acc[c] = _mm512_setzero_ps();
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    for (int64_t b = 0; b < nb; b++) {
        const struct lm_block_q4_Kx8 *w0 = (const struct lm_block_q4_Kx8 *)x0 + b;
        const struct lm_block_q4_Kx8 *w1 = (const struct lm_block_q4_Kx8 *)x1 + b;
        __m512i sc[8], mn[8];
        k4_scales16(w0, w1, sc, mn);
        __m512i isum[PANEL_NC];
        for (int c = 0; c < NC; c++)
            isum[c] = _mm512_setzero_si512();
        for (int p = 0; p < 4; p++) {
            for (int e = 0; e < 2; e++) {
                const int j = 2 * p + e;
                __m512i q[8]; /* q[i]: elements 4i..4i+3 of sub-block j */
                for (int i = 0; i < 8; i++) {
                    const __m512i raw = chunk16(w0->qs + 32 * (8 * p + i), w1->qs + 32 * (8 * p + i));
                    q[i] = _mm512_and_si512(e ? _mm512_srli_epi16(raw, 4) : raw, m4);
                }
                for (int c = 0; c < NC; c++) {
                    const int8_t *a = yc[c][b].qs + 32 * j;
                    __m512i h0 = lm_avx512_zero(), h1 = lm_avx512_zero();
                    for (int i = 0; i < 4; i++) {
                        h0 = dpbusd_bcast(h0, q[i], a + 4 * i);
                        h1 = dpbusd_bcast(h1, q[4 + i], a + 16 + 4 * i);
                    }
                    isum[c] = _mm512_dpwssd_epi32(isum[c], h0, sc[j]);
                    isum[c] = _mm512_dpwssd_epi32(isum[c], h1, sc[j]);
                }
            }
        }
        const __m512 dw = _mm512_cvtph_ps(_mm256_inserti128_si256(
            _mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)w0->d)), _mm_loadu_si128((const __m128i *)w1->d), 1));
        const __m512 dm = _mm512_cvtph_ps(_mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128(
                                                                      (const __m128i *)w0->dmin)),
                                                                  _mm_loadu_si128((const __m128i *)w1->dmin), 1));
        for (int c = 0; c < NC; c++) {
            __m512i msum = _mm512_setzero_si512();
            for (int j = 0; j < 8; j++)
                msum = dpwssd_bcast(msum, mn[j], yc[c][b].bsums + 2 * j);
            const __m512 da = _mm512_set1_ps(yc[c][b].d);
            acc[c] = _mm512_fmadd_ps(_mm512_mul_ps(dw, da), _mm512_cvtepi32_ps(isum[c]), acc[c]);
            acc[c] = _mm512_fnmadd_ps(_mm512_mul_ps(dm, da), _mm512_cvtepi32_ps(msum), acc[c]);
        }
    }
    const __mmask16 rm = (__mmask16)(nr == 16 ? 0xFFFF : 0x00FF);
    for (int c = 0; c < NC && c < nc; c++)
        _mm512_mask_storeu_ps(s + (size_t)c * ldc, rm, acc[c]);
}

/* The weight types with a panel here. */
enum panel_kind { PK_Q4_0, PK_Q8_0, PK_Q4_K };

/* One tile of kind pk over NC (constant) columns. */
static inline __attribute__((always_inline)) void tile_of(enum panel_kind pk, const int NC, int64_t nb, const char *x0,
                                                          const char *x1, const char *y, size_t by, float *s,
                                                          size_t ldc, int nc, int nr)
{
    if (pk == PK_Q4_K)
        tile_q4_K(NC, nb, x0, x1, y, by, s, ldc, nc, nr);
    else
        tile(pk == PK_Q8_0, NC, nb, x0, x1, y, by, s, ldc, nc, nr);
}

/* The groups of x against n columns: PANEL_COLS columns at a time (kept hot
 * in L2), pairs of groups (16 rows) across them, tiles of PANEL_NC columns. */
static inline __attribute__((always_inline)) void panel(enum panel_kind pk, int64_t k, int64_t n_groups,
                                                         size_t group_bytes, float *s, size_t ldc, const void *x,
                                                         const void *y, size_t by, int64_t n)
{
    const int64_t nb = k / (pk == PK_Q4_K ? LM_QK_K : LM_QK);
    for (int64_t n0 = 0; n0 < n; n0 += PANEL_COLS) {
        const int64_t n1 = n0 + PANEL_COLS < n ? n0 + PANEL_COLS : n;
        for (int64_t g = 0; g < n_groups; g += 2) {
            const char *x0 = (const char *)x + (size_t)g * group_bytes;
            const char *x1 = g + 1 < n_groups ? x0 + group_bytes : x0;
            const int nr = g + 1 < n_groups ? 16 : 8;
            for (int64_t c0 = n0; c0 < n1; c0 += PANEL_NC) {
                const int nc = (int)(n1 - c0 < PANEL_NC ? n1 - c0 : PANEL_NC);
                float *out = s + (size_t)c0 * ldc + (size_t)g * LM_REPACK_ROWS;
                const char *yy = (const char *)y + (size_t)c0 * by;
                switch (nc) {
                case 8: tile_of(pk, 8, nb, x0, x1, yy, by, out, ldc, nc, nr); break;
                case 7: tile_of(pk, 7, nb, x0, x1, yy, by, out, ldc, nc, nr); break;
                case 6: tile_of(pk, 6, nb, x0, x1, yy, by, out, ldc, nc, nr); break;
                case 5: tile_of(pk, 5, nb, x0, x1, yy, by, out, ldc, nc, nr); break;
                case 4: tile_of(pk, 4, nb, x0, x1, yy, by, out, ldc, nc, nr); break;
                case 3: tile_of(pk, 3, nb, x0, x1, yy, by, out, ldc, nc, nr); break;
                case 2: tile_of(pk, 2, nb, x0, x1, yy, by, out, ldc, nc, nr); break;
                default: tile_of(pk, 1, nb, x0, x1, yy, by, out, ldc, nc, nr); break;
                }
            }
        }
    }
}

/* Contract: kernels.h lm_gemm_panel_fn (y: Q8_K rows of the gemm_x8 path's encoder). */
void lm_gemm_panel_q4_Kx8_avx512(int64_t k, int64_t n_groups, size_t group_bytes, float *s, size_t ldc,
                                 const void *x, const void *y, size_t by, int64_t n, void *scratch)
{
    (void)scratch;
    panel(PK_Q4_K, k, n_groups, group_bytes, s, ldc, x, y, by, n);
}

size_t lm_panel_row_size_q8_K_avx512(int64_t k) { return (size_t)(k / LM_QK_K) * sizeof(struct lm_block_q8_K); }

/* Contract: kernels.h lm_gemm_panel_fn (y: lm_panel_from_float_q4_0_avx512 rows). */
void lm_gemm_panel_q4_0x8_avx512(int64_t k, int64_t n_groups, size_t group_bytes, float *s, size_t ldc,
                                 const void *x, const void *y, size_t by, int64_t n, void *scratch)
{
    (void)scratch;
    panel(PK_Q4_0, k, n_groups, group_bytes, s, ldc, x, y, by, n);
}

/* Contract: kernels.h lm_gemm_panel_fn (y: lm_panel_from_float_q8_0_avx512 rows). */
void lm_gemm_panel_q8_0x8_avx512(int64_t k, int64_t n_groups, size_t group_bytes, float *s, size_t ldc,
                                 const void *x, const void *y, size_t by, int64_t n, void *scratch)
{
    (void)scratch;
    panel(PK_Q8_0, k, n_groups, group_bytes, s, ldc, x, y, by, n);
}
