/* gemm_float_avx512.c - AVX-512 GEMM over the f16x8, bf16x8 and f32x8 layouts
 * (kernels.h lm_gemm_fn, cpu/repack.h), and the F16 rounding encoder of the
 * F16 weights' activation rows (gemm.h).
 *
 * One zmm holds two rows' vectors of a chunk (rows 2p, 2p+1 are adjacent in
 * the layouts): f16x8 32 bytes widened by vcvtph2ps, f32x8 64 bytes as they
 * are, bf16x8 64 bytes = 2 rows x 16 paired elements. The activations of a
 * chunk are loaded into both halves, [a_j(8) | a_j(8)], so acc[p][c] +=
 * w_p * a_c is one FMA (lanes 0..7: row 2p, 8..15: row 2p+1, lane t summing
 * elements t, t+8, t+16, ... in order) and a row's 8 lanes are added at the end.
 * Tiles: 4 row pairs (the whole group) x C columns, C = 1..6: 4C <= 24
 * accumulators, 4 weight registers, one activation register; a call splits
 * its nc columns into ceil(nc / 6) tiles of near-equal width (16 = 6+5+5),
 * so each tile widens a chunk's weights once for up to 6 columns.
 *
 * Activation rows (gemm_vt F32, but for the dpbf16 kernel):
 *   F16 weights: F32 rows rounded through F16 (lm_fp32_round_fp16_row_avx512,
 *     fp16->fp32(fp32->fp16(x)), RNE: the values of the F16 rows of the other
 *     levels), read with vbroadcastf32x8 (a load, no ALU op): the weights'
 *     vcvtph2ps is the only conversion, once per chunk and tile.
 *   BF16 weights: F32 rows rounded through BF16 (the AVX2 level's encoder,
 *     unchanged); weights widened by one shift (elements 0..7 of a chunk) or
 *     one mask (8..15) of the same 64 bytes, two passes per chunk.
 *     lm_gemm_bf16x8_f32_avx512bf16 (the table's on AMD, see below) reads pair
 *     rows instead (gemm_vt BF16, lm_fp32_to_bf16_pairs_row_avx512: word 2t,
 *     2t+1 = a[16j+t], a[16j+8+t] as the weights pair them): one 32-byte
 *     broadcast per column and chunk, then vdpbf16ps.
 *   F32 weights: F32 rows.
 *
 * Numerics: F16 and BF16 products are exact in F32, each lane sums in the
 * generic kernel's element order and the lanes are added in its order
 * ((0+4)+(2+6)) + ((1+5)+(3+7)), so lm_gemm_f16x8_f32_avx512 and
 * lm_gemm_bf16x8_f32_avx512 give the generic kernels' bits (tested); F32 differs
 * by FMA (no rounding of the product) only. vdpbf16ps ignores MXCSR: it
 * rounds to nearest even and treats denormal inputs and outputs as zero;
 * each lane adds a pair's products one after the other, so it differs from
 * generic by reordering plus the flushed denormals (contributions below
 * 2^-126 each; none in normal-valued data): within the 4.8e-7 (K/8 + 8)
 * sum|w a| bound of tests/cpu/test_gemm.c, denormal weights give 0 (tested).
 *
 * Measured (Sapphire Rapids, one thread, shared machine, GMAC/s, same run;
 * bench/bench_gemm 2048 128 64, i.e. mm_gemm's loop, nc = 16 per call):
 * F16 avx2 35.9 -> avx512 69.7 (1.9x), BF16 32.0 -> 71.2 (2.2x), F32 28.3 ->
 * 64.4 (2.3x). BF16 with vdpbf16ps: 47.4 (1.5x): vdpbf16ps zmm issues at one
 * per 2 cycles here (1.77 G/s vs 7.0 G/s for vfmadd231ps, 24 independent
 * chains), so 32 MACs per dpbf16 lose to 16 per FMA at 4x the rate. Zen 4
 * issues both at ~3.5 G/s: dpbf16 with pair rows 113 vs FMA 56-58. F16 rows
 * read as F16 (vbroadcasti128 + vcvtph2ps per column) instead of F32 rows:
 * 56.7 vs 73.7 in L2, equal on a 2048 x 2048 matrix. One column (token
 * generation), 128 MiB F16 streamed from DRAM: 7.7 vs 7.5 (avx2), equal
 * (bandwidth);
 * in L2 with 64-byte aligned weights (the repack buffer's alignment) F16
 * 34.2 vs 30.1, BF16 35.8 vs 34.4, F32 23.2 vs 22.0; with malloc's 16-byte
 * alignment (bench_gemm) every zmm load splits a line: F32 19.9 vs 21.6.
 * Two accumulator sets for one column (8 FMA chains): no gain, dropped.
 */
#include <immintrin.h>

#include "avx512_util.h"
#include "core/fp16.h"
#include "cpu/kernels/gemm.h"
#include "cpu/kernels/gemv_runs.h"
#include "cpu/repack.h"

#ifndef LM_AVX512_GEMM_PREFETCH
#define LM_AVX512_GEMM_PREFETCH 1024 /* bytes ahead when one column streams the weights */
#endif

#define MAX_C 6 /* columns per tile */

enum wkind { W_F16, W_BF16DP, W_BF16, W_F32 };

/* Elements and bytes per row and chunk, and passes per chunk (the FMA BF16
 * kernel widens a chunk's two 8-element halves one after the other).
 * Macros so the loop bounds are constants before unrolling. */
#define CE_OF(kind) ((kind) == W_BF16DP || (kind) == W_BF16 ? LM_REPACK_BFK : LM_REPACK_FK)
#define RB_OF(kind) ((size_t)((kind) == W_F16 ? 16 : 32))
#define NH_OF(kind) ((kind) == W_BF16 ? 2 : 1)

/* Rows 2p, 2p+1 of a chunk at p (pass h of the FMA BF16 kernel). */
static inline __m512 loadw(enum wkind kind, const char *p, int h)
{
    if (kind == W_F16)
        return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p));
    if (kind == W_F32 || kind == W_BF16DP)
        return _mm512_loadu_ps(p);
    const __m512i v = _mm512_loadu_si512(p);
    if (h == 0)
        return _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
    return _mm512_castsi512_ps(_mm512_and_si512(v, _mm512_set1_epi32((int)0xffff0000u)));
}

/* The activations of chunk j (pass h) of the row at y, in both halves: F32
 * rows, or for the dpbf16 kernel the 32 bytes of the pair row
 * (lm_fp32_to_bf16_pairs_row_avx512): a load, no ALU op. */
static inline __m512 loada(enum wkind kind, const float *y, int64_t j, int h)
{
    if (kind == W_BF16DP)
        return _mm512_castsi512_ps(_mm512_broadcast_i32x8(_mm256_loadu_si256((const __m256i *)(y + 8 * j))));
    return _mm512_broadcast_f32x8(_mm256_loadu_ps(y + CE_OF(kind) * j + 8 * h));
}

static inline __m512 madd(enum wkind kind, __m512 w, __m512 a, __m512 acc)
{
    if (kind == W_BF16DP)
        return _mm512_dpbf16_ps(acc, (__m512bh)_mm512_castps_si512(w), (__m512bh)_mm512_castps_si512(a));
    return _mm512_fmadd_ps(w, a, acc);
}

/* s[0..7] = the row sums of 4 row-pair accumulators (acc p: lanes 0..7 row
 * 2p, 8..15 row 2p+1). */
static inline void store8(float *s, __m512 a0, __m512 a1, __m512 a2, __m512 a3)
{
    /* quarters: rows 0..3 (z0), 4..7 (z1), 4 partial sums each */
    const __m512 z0 = _mm512_add_ps(_mm512_shuffle_f32x4(a0, a1, _MM_SHUFFLE(2, 0, 2, 0)),
                                    _mm512_shuffle_f32x4(a0, a1, _MM_SHUFFLE(3, 1, 3, 1)));
    const __m512 z1 = _mm512_add_ps(_mm512_shuffle_f32x4(a2, a3, _MM_SHUFFLE(2, 0, 2, 0)),
                                    _mm512_shuffle_f32x4(a2, a3, _MM_SHUFFLE(3, 1, 3, 1)));
    /* quarter q: [z0 0+2, z1 0+2, z0 1+3, z1 1+3], then lane 0 = row q, lane 1 = row q+4 */
    const __m512 m = _mm512_add_ps(_mm512_unpacklo_ps(z0, z1), _mm512_unpackhi_ps(z0, z1));
    const __m512 n = _mm512_add_ps(m, _mm512_permute_ps(m, _MM_SHUFFLE(1, 0, 3, 2)));
    const __m512i idx = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 0, 0, 0, 0, 0, 0, 0, 0);
    _mm256_storeu_ps(s, _mm512_castps512_ps256(_mm512_permutexvar_ps(idx, n)));
}

static inline void prefetch_chunk(enum wkind kind, const char *p)
{
    for (int l = 0; l < (int)(LM_REPACK_ROWS * RB_OF(kind) / 64); l++)
        __builtin_prefetch(p + 64 * l, 0, 3);
}

/* The group's 8 rows (4 pairs) x C columns over nk chunks: s[c * ldc + r].
 * Each chunk prefetches its bytes pf ahead (pf 0: none). */
static inline __attribute__((always_inline)) void tile(enum wkind kind, const int C, int64_t nk, const char *w,
                                                        size_t pf, const char *y, size_t by, float *s, size_t ldc)
{
    const size_t rb = RB_OF(kind), chunk = LM_REPACK_ROWS * rb;
    __m512 acc[4][MAX_C];
    for (int p = 0; p < 4; p++)
        for (int c = 0; c < C; c++)
            acc[p][c] = _mm512_setzero_ps();
    for (int64_t j = 0; j < nk; j++) {
        const char *wj = w + (size_t)j * chunk;
        if (pf)
            prefetch_chunk(kind, wj + pf);
        for (int h = 0; h < NH_OF(kind); h++) {
            __m512 wv[4];
            for (int p = 0; p < 4; p++)
                wv[p] = loadw(kind, wj + (size_t)p * 2 * rb, h);
            for (int c = 0; c < C; c++) {
                const __m512 a = loada(kind, (const float *)(y + (size_t)c * by), j, h);
                for (int p = 0; p < 4; p++)
                    acc[p][c] = madd(kind, wv[p], a, acc[p][c]);
            }
        }
    }
    for (int c = 0; c < C; c++)
        store8(s + (size_t)c * ldc, acc[0][c], acc[1][c], acc[2][c], acc[3][c]);
}

/* A tile of n (1..MAX_C) columns of weight kind `kind`: one tile() instance per count. */
static inline __attribute__((always_inline)) void tile_n(enum wkind kind, int n, int64_t nk, const char *w, size_t pf,
                                                         const char *y, size_t by, float *s, size_t ldc)
{
    switch (n) {
    case 1: tile(kind, 1, nk, w, pf, y, by, s, ldc); break;
    case 2: tile(kind, 2, nk, w, pf, y, by, s, ldc); break;
    case 3: tile(kind, 3, nk, w, pf, y, by, s, ldc); break;
    case 4: tile(kind, 4, nk, w, pf, y, by, s, ldc); break;
    case 5: tile(kind, 5, nk, w, pf, y, by, s, ldc); break;
    default: tile(kind, 6, nk, w, pf, y, by, s, ldc); break;
    }
}
_Static_assert(MAX_C == 6, "tile_n has a case per column count");

/* The tiles of each weight kind (n columns, 1..MAX_C). */
typedef void (*tiles_fn)(int n, int64_t nk, const char *w, size_t pf, const char *y, size_t by, float *s, size_t ldc);
static void f16_tiles(int n, int64_t nk, const char *w, size_t pf, const char *y, size_t by, float *s, size_t ldc)
{
    tile_n(W_F16, n, nk, w, pf, y, by, s, ldc);
}
static void bf16dp_tiles(int n, int64_t nk, const char *w, size_t pf, const char *y, size_t by, float *s, size_t ldc)
{
    tile_n(W_BF16DP, n, nk, w, pf, y, by, s, ldc);
}
static void bf16_tiles(int n, int64_t nk, const char *w, size_t pf, const char *y, size_t by, float *s, size_t ldc)
{
    tile_n(W_BF16, n, nk, w, pf, y, by, s, ldc);
}
static void f32_tiles(int n, int64_t nk, const char *w, size_t pf, const char *y, size_t by, float *s, size_t ldc)
{
    tile_n(W_F32, n, nk, w, pf, y, by, s, ldc);
}

/* The group at x against nc columns in ceil(nc / 6) tiles of near-equal
 * width. Prefetch: one column streams the weights once (token generation):
 * LM_AVX512_GEMM_PREFETCH ahead. With more columns the group is re-read from
 * L1/L2 by each tile, and the first tile prefetches the next group (what
 * mm_gemm hands this thread next). */
static void gemm_float(tiles_fn t, int ce, size_t rb, int64_t k, float *s, size_t ldc, const char *x, const char *y,
                       size_t by, int nc)
{
    const int64_t nk = k / ce;
    const size_t group = LM_REPACK_ROWS * rb * (size_t)nk;
    const int ntiles = (nc + MAX_C - 1) / MAX_C;
    for (int i = 0, c = 0; i < ntiles; i++) {
        const int n = (nc - c + (ntiles - i) - 1) / (ntiles - i);
        const size_t pf = nc == 1 ? (lm_avx512_prefetch ? LM_AVX512_GEMM_PREFETCH : 0) : i == 0 ? group : 0;
        t(n, nk, x, pf, y + (size_t)c * by, by, s + (size_t)c * ldc, ldc);
        c += n;
    }
}

/* One column over R (constant, <= 4: 4R accumulators) groups at once
 * (gemv_x8), group r at x + r * gb: per chunk, the chunk of each group with
 * the activations loaded once; per group the operations of tile() with one
 * column, in its order. */
static inline __attribute__((always_inline)) void gemv_tile(enum wkind kind, const int R, int64_t nk, const char *x,
                                                             size_t gb, size_t pf, const float *y, float *s)
{
    const size_t rb = RB_OF(kind), chunk = LM_REPACK_ROWS * rb;
    __m512 acc[4][4];
    for (int r = 0; r < R; r++)
        for (int p = 0; p < 4; p++)
            acc[r][p] = _mm512_setzero_ps();
    for (int64_t j = 0; j < nk; j++) {
        for (int r = 0; pf && r < R; r++)
            prefetch_chunk(kind, x + (size_t)r * gb + (size_t)j * chunk + pf);
        for (int h = 0; h < NH_OF(kind); h++) {
            const __m512 a = loada(kind, y, j, h);
            for (int r = 0; r < R; r++) {
                const char *wj = x + (size_t)r * gb + (size_t)j * chunk;
                for (int p = 0; p < 4; p++)
                    acc[r][p] = madd(kind, loadw(kind, wj + (size_t)p * 2 * rb, h), a, acc[r][p]);
            }
        }
    }
    for (int r = 0; r < R; r++)
        store8(s + 8 * r, acc[r][0], acc[r][1], acc[r][2], acc[r][3]);
}

/* One gemv_x8 run of r groups at group g (gemv_runs.h), 4 groups at most. */
static inline __attribute__((always_inline)) void float_gemv_step(enum wkind kind, const void *ctx, int64_t g, int r)
{
    const struct lm_gemv_args *c = ctx;
    const char *x = lm_gemv_group(c, g);
    float *s = lm_gemv_out(c, g);
    const size_t pf = lm_avx512_prefetch ? LM_AVX512_GEMM_PREFETCH : 0;
    switch (r) {
    case 8: gemv_tile(kind, 1, c->n, x, c->group_bytes, pf, (const float *)c->y, s); break; /* never: runs of 4 */
    case 4: gemv_tile(kind, 4, c->n, x, c->group_bytes, pf, (const float *)c->y, s); break;
    case 2: gemv_tile(kind, 2, c->n, x, c->group_bytes, pf, (const float *)c->y, s); break;
    default: gemv_tile(kind, 1, c->n, x, c->group_bytes, pf, (const float *)c->y, s); break;
    }
}
static void f16_gemv_step(const void *c, int64_t g, int r) { float_gemv_step(W_F16, c, g, r); }
static void bf16dp_gemv_step(const void *c, int64_t g, int r) { float_gemv_step(W_BF16DP, c, g, r); }
static void bf16_gemv_step(const void *c, int64_t g, int r) { float_gemv_step(W_BF16, c, g, r); }
static void f32_gemv_step(const void *c, int64_t g, int r) { float_gemv_step(W_F32, c, g, r); }

/* Contract: kernels.h lm_gemv_fn (ysum unused; the gemm_x8 kernels' activation rows below); 4 groups at a time. */
void lm_gemv_f16x8_f32_avx512(int64_t k, int64_t n_groups, size_t group_bytes, float *s, const void *x, const void *y,
                              const int16_t *ysum)
{
    lm_gemv_call(f16_gemv_step, 4, k / CE_OF(W_F16), n_groups, group_bytes, s, x, y, ysum);
}
void lm_gemv_bf16x8_f32_avx512bf16(int64_t k, int64_t n_groups, size_t group_bytes, float *s, const void *x,
                                   const void *y, const int16_t *ysum)
{
    lm_gemv_call(bf16dp_gemv_step, 4, k / CE_OF(W_BF16DP), n_groups, group_bytes, s, x, y, ysum);
}
void lm_gemv_bf16x8_f32_avx512(int64_t k, int64_t n_groups, size_t group_bytes, float *s, const void *x, const void *y,
                               const int16_t *ysum)
{
    lm_gemv_call(bf16_gemv_step, 4, k / CE_OF(W_BF16), n_groups, group_bytes, s, x, y, ysum);
}
void lm_gemv_f32x8_f32_avx512(int64_t k, int64_t n_groups, size_t group_bytes, float *s, const void *x, const void *y,
                              const int16_t *ysum)
{
    lm_gemv_call(f32_gemv_step, 4, k / CE_OF(W_F32), n_groups, group_bytes, s, x, y, ysum);
}

/* Contract: kernels.h (y: F32 rows rounded through F16; ysum unused). */
void lm_gemm_f16x8_f32_avx512(int64_t k, float *s, size_t ldc, const void *x, const void *y, size_t by,
                           const int16_t *ysum, int nc)
{
    (void)ysum;
    gemm_float(f16_tiles, LM_REPACK_FK, 16, k, s, ldc, x, y, by, nc);
}

/* Contract: kernels.h (y: F32 rows rounded through BF16; ysum unused). */
void lm_gemm_bf16x8_f32_avx512bf16(int64_t k, float *s, size_t ldc, const void *x, const void *y, size_t by,
                                const int16_t *ysum, int nc)
{
    (void)ysum;
    gemm_float(bf16dp_tiles, LM_REPACK_BFK, 32, k, s, ldc, x, y, by, nc);
}

/* Contract: kernels.h (y: F32 rows rounded through BF16; ysum unused). */
void lm_gemm_bf16x8_f32_avx512(int64_t k, float *s, size_t ldc, const void *x, const void *y, size_t by,
                            const int16_t *ysum, int nc)
{
    (void)ysum;
    gemm_float(bf16_tiles, LM_REPACK_BFK, 32, k, s, ldc, x, y, by, nc);
}

/* Contract: kernels.h (y: F32 rows; ysum unused). */
void lm_gemm_f32x8_f32_avx512(int64_t k, float *s, size_t ldc, const void *x, const void *y, size_t by,
                           const int16_t *ysum, int nc)
{
    (void)ysum;
    gemm_float(f32_tiles, LM_REPACK_FK, 32, k, s, ldc, x, y, by, nc);
}

/* Contract: gemm.h. Per 16 elements: the RNE rounding of lm_fp32_to_bf16
 * (integer adds, NaN made quiet), truncated to words (vpmovdw), then the
 * words of elements t and 8 + t interleaved (the weights' pairing). */
void lm_fp32_to_bf16_pairs_row_avx512(const float *x, void *vy, int64_t n)
{
    char *y = vy;
    const __m512i one = _mm512_set1_epi32(1), bias = _mm512_set1_epi32(0x7fff), quiet = _mm512_set1_epi32(64);
    const __m512i abs = _mm512_set1_epi32(0x7fffffff), inf = _mm512_set1_epi32(0x7f800000);
    for (int64_t i = 0; i + 16 <= n; i += 16) {
        const __m512i u = _mm512_castps_si512(_mm512_loadu_ps(x + i));
        const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), one);
        __m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(bias, lsb)), 16);
        const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, abs), inf);
        r = _mm512_mask_or_epi32(r, nan, _mm512_srli_epi32(u, 16), quiet);
        const __m256i w = _mm512_cvtepi32_epi16(r); /* elements 0..15 */
        const __m128i lo = _mm256_castsi256_si128(w), hi = _mm256_extracti128_si256(w, 1);
        _mm_storeu_si128((__m128i *)(y + 2 * i), _mm_unpacklo_epi16(lo, hi));
        _mm_storeu_si128((__m128i *)(y + 2 * i + 16), _mm_unpackhi_epi16(lo, hi));
    }
}

/* Contract: gemm.h. vcvtps2ph (RNE, immediate rounding) then vcvtph2ps: the
 * bits of lm_fp32_to_fp16 / lm_fp16_to_fp32 (NaN: quiet, payload's top bits
 * kept by both); the tail by a masked load and store. */
void lm_fp32_round_fp16_row_avx512(const float *x, void *vy, int64_t n)
{
    float *y = vy;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m256i h = _mm512_cvtps_ph(_mm512_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        _mm512_storeu_ps(y + i, _mm512_cvtph_ps(h));
    }
    if (i < n) {
        const __mmask16 m = (__mmask16)((1u << (n - i)) - 1u);
        const __m256i h = _mm512_cvtps_ph(_mm512_maskz_loadu_ps(m, x + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        _mm512_mask_storeu_ps(y + i, m, _mm512_cvtph_ps(h));
    }
}
