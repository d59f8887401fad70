/* gemm_avx512.c - AVX-512 VNNI GEMM over the repacked q4_0x8 and q8_0x8
 * groups (kernels.h lm_gemm_fn, layouts in cpu/repack.h), and the
 * registration of every integer GEMM kernel of this level (the K-quants are
 * in gemm_kquant_avx512.c).
 *
 * Register layout (shared with gemm_kquant_avx512.c): one 64-byte load of
 * the layout holds two consecutive 4-byte chunks of the 8 rows (chunk c in
 * dwords 0..7, chunk c+1 in dwords 8..15). One vpermd per load (done once per
 * group, for all columns) interleaves them, dword 2r + h = row r, chunk c + h,
 * so the activation operand is a plain 8-byte broadcast (vpbroadcastq from
 * memory: a load, no ALU uop) of the matching 8 activation bytes, and one
 * vpdpbusd does 64 MACs (u8 weights x s8 activations, int32 lanes). On
 * Sapphire Rapids vpdpbusd zmm issues 2 per cycle (ports 0 and 5; measured),
 * twice the MACs of the 256-bit form, but every other 512-bit op shares those
 * two ports, so the kernels keep the non-dpbusd work per column small.
 *
 * Q4_0: codes stay unsigned (0..15); Q8_0: codes biased to unsigned (w ^ 0x80
 * = w + 128). The offsets (-8 sum(a), -128 sum(a)) go through the activation
 * block sums (ysum; this level sets gemm_sums for Q8_0 too): each column's
 * accumulator starts at -4 ysum (-64 ysum) in both dwords of a row, so the
 * pair sum holds the exact block dot. Per block and pair of columns, two
 * vpermt2d and an add fold the dword pairs into [8 rows of column c | 8 rows
 * of column c + 1], which is converted and FMA'd with dw * da in 16 lanes.
 * Bounds: per dword at most 16 products (|.| <= 255 * 128) plus the offset,
 * the block dot < 2^24: every integer is exact and converts exactly.
 *
 * Numerics: the AVX2 kernels' exactly (per block acc = fma((float)isum,
 * d_w * d_a, acc), blocks in order), so results are bit-identical to them
 * (tested in tests/cpu/test_gemm.c).
 *
 * Per-call tables: the columns' fp16 d and offset terms of a slab of blocks
 * are copied into small stack tables first (scalar, off the vector ports), so
 * the block loop loads 16 columns' scales with one vector load.
 *
 * One column (token generation) has its own kernels (q4_0_col1, q8_0_col1:
 * the AVX2 layout with 256-bit vpdpbusd, the AVX2 kernels' bits); a pair
 * would compute the column twice (48 vs 70 GMAC/s in cache).
 *
 * Measured (Sapphire Rapids, bench/bench_gemm 4096 256 64, 1 thread, same
 * run, GMAC/s, AVX2 -> AVX-512): Q4_0 104 -> 170, Q8_0 69-70 -> 158-162 (K-quants:
 * gemm_kquant_avx512.c). Tried: the offset table built with scalar stores
 * of the fp16 d's (a vector load of fresh 2-byte stores stalls forwarding:
 * 120 GMAC/s; double-buffered 130; one vpgatherdd per block: 165-170);
 * Q4_0 folded by vpermt2d as Q8_0 (same speed as the pack + vpmaddwd kept,
 * which needs one op less); the dpbusd loop with the 4 weight registers outer
 * and 16 column accumulators (no gain). The remaining cost is per block and
 * column: the fold, conversion, scale and FMA (about as many uops as the 4
 * vpdpbusd), so Q4_0/Q8_0 run at ~50 % of the vpdpbusd peak.
 */
#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "avx512_util.h"
#include "cpu/cpu.h"
#include "cpu/kernels/gemm.h"
#include "cpu/kernels/gemv_runs.h"
#include "cpu/repack.h"
#include "quant/blocks.h"

#ifndef LM_GEMM_PREFETCH
#define LM_GEMM_PREFETCH 1024
#endif

#define SLAB 32 /* blocks per pass over the per-call offset table */

/* 8 activation bytes broadcast to every qword (a vpbroadcastq load). */
static inline __m512i bq8(const void *p)
{
    long long v;
    memcpy(&v, p, 8);
    return _mm512_set1_epi64(v);
}

/* Interleave the two chunks of a 64-byte load: dword 2r + h = row r, chunk h. */
static inline __m512i ileave(const void *p)
{
    const __m512i idx = _mm512_setr_epi32(0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15);
    return _mm512_permutexvar_epi32(idx, _mm512_loadu_si512(p));
}

/* [rows of a (dword pairs summed) | rows of b]: exact int32 sums. */
static inline __m512i fold2(__m512i a, __m512i b)
{
    const __m512i ev = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i od = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    return _mm512_add_epi32(_mm512_permutex2var_epi32(a, ev, b), _mm512_permutex2var_epi32(a, od, b));
}

/* Prefetch one group block `bytes` (a constant) ahead by LM_GEMM_PREFETCH. */
static inline __attribute__((always_inline)) void prefetch_block(const void *p, int bytes)
{
    for (int o = 0; o < bytes; o += 64)
        _mm_prefetch((const char *)p + LM_GEMM_PREFETCH + o, _MM_HINT_T0);
}

/* yt[c][i] = off * ys[c][b0 + i] for i < n (the start value of each dword
 * of column c's accumulator: two dwords per row sum to the block's offset
 * term). Column-major, vector loads of the contiguous ysum of a column. */
static inline __attribute__((always_inline)) void offsets(const int16_t *const *ys, int ncp, int64_t b0, int n,
                                                          int32_t off, int32_t yt[16][SLAB])
{
    const __m512i vo = _mm512_set1_epi32(off);
    for (int c = 0; c < ncp; c++) {
        for (int i = 0; i < n; i += 16) {
            const __mmask16 m = (__mmask16)(n - i >= 16 ? 0xFFFF : (1u << (n - i)) - 1);
            const __m512i v = _mm512_cvtepi16_epi32(_mm256_maskz_loadu_epi16(m, ys[c] + b0 + i));
            _mm512_storeu_si512(&yt[c][i], _mm512_mullo_epi32(v, vo));
        }
    }
}

/* The 4 weight registers of a block; register j pairs with activation bytes
 * 8j..8j+7. Q4_0: low nibbles of chunks 0-1 and 2-3, then high nibbles. */
static inline __attribute__((always_inline)) void unpack_q4_0(const struct lm_block_q4_0x8 *w, __m512i q[4])
{
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    const __m512i r0 = ileave(w->qs), r1 = ileave(w->qs + 64);
    q[0] = _mm512_and_si512(r0, m4);
    q[1] = _mm512_and_si512(r1, m4);
    q[2] = _mm512_and_si512(_mm512_srli_epi16(r0, 4), m4);
    q[3] = _mm512_and_si512(_mm512_srli_epi16(r1, 4), m4);
}

/* Q8_0: chunks 2j, 2j+1, biased to unsigned (w ^ 0x80 = w + 128). */
static inline __attribute__((always_inline)) void unpack_q8_0(const struct lm_block_q8_0x8 *w, __m512i q[4])
{
    const __m512i bias = _mm512_set1_epi8((char)0x80);
    for (int j = 0; j < 4; j++)
        q[j] = _mm512_xor_si512(ileave(w->qs + 64 * j), bias);
}

/* One block of one pair of columns: acc += (float)isum * (d_w * d_a).
 * Q4_0: every dword of t0/t1 is within int16 (|sum (q - 4) a| over its 16
 * elements <= 16 * 11 * 128, plus |4 sum a| over the other 16 <= 8192), so
 * vpackssdw + vpmaddwd fold the pairs exactly into lanes [r, r+1 of column
 * c, r, r+1 of column c+1] per 128 bits (dw4: the rows' d in that order).
 * Q8_0 (dwords up to 2^19): two vpermt2d + add into [column c | c+1]. */
static inline __attribute__((always_inline)) __m512 pair_update(bool q8, __m512i t0, __m512i t1, __m512 dw, __m512 da,
                                                                int p, __m512 acc)
{
    if (q8) {
        const __m512i pidx = _mm512_add_epi32(_mm512_set1_epi32(2 * p),
                                              _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1));
        const __m512 scale = _mm512_mul_ps(dw, _mm512_permutexvar_ps(pidx, da));
        return _mm512_fmadd_ps(_mm512_cvtepi32_ps(fold2(t0, t1)), scale, acc);
    }
    const __m512i pidx = _mm512_add_epi32(_mm512_set1_epi32(2 * p),
                                          _mm512_setr_epi32(0, 0, 1, 1, 0, 0, 1, 1, 0, 0, 1, 1, 0, 0, 1, 1));
    const __m512 scale = _mm512_mul_ps(dw, _mm512_permutexvar_ps(pidx, da));
    const __m512i f = _mm512_madd_epi16(_mm512_packs_epi32(t0, t1), _mm512_set1_epi16(1));
    return _mm512_fmadd_ps(_mm512_cvtepi32_ps(f), scale, acc);
}

/* The 8 rows' d_w of a block as floats in the lane order of pair_update. */
static inline __m512 weight_d(bool q8, const lm_fp16 *d)
{
    const __m128i h = _mm_loadu_si128((const __m128i *)d);
    if (q8)
        return _mm512_cvtph_ps(_mm256_broadcastsi128_si256(h));
    const __m512i idx = _mm512_setr_epi32(0, 1, 0, 1, 2, 3, 2, 3, 4, 5, 4, 5, 6, 7, 6, 7);
    return _mm512_permutexvar_ps(idx, _mm512_castps256_ps512(_mm256_cvtph_ps(h)));
}

/* Store the pairs' accumulators (Q4_0 lanes de-interleaved first). */
static inline __attribute__((always_inline)) void store_pairs(bool q8, const __m512 *acc, int np, int nc, float *s,
                                                              size_t ldc)
{
    const __m512i idx = _mm512_setr_epi32(0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15);
    for (int p = 0; p < np; p++) {
        const __m512 v = q8 ? acc[p] : _mm512_permutexvar_ps(idx, acc[p]);
        _mm256_storeu_ps(s + (size_t)(2 * p) * ldc, _mm512_castps512_ps256(v));
        if (2 * p + 1 < nc)
            _mm256_storeu_ps(s + (size_t)(2 * p + 1) * ldc, _mm512_extractf32x8_ps(v, 1));
    }
}

/* All blocks of one group against NP pairs of columns (NP constant after
 * inlining; columns >= nc repeat column nc - 1: an odd last pair computes it
 * twice and stores it once). Q8 selects the q8_0x8 layout. The columns' d_a
 * of a block come from one vpgatherdd (indices c * by: the caller checks
 * that they fit int32). */
static inline __attribute__((always_inline)) void legacy_pairs(bool q8, int64_t nb, const void *x, const char *y,
                                                               size_t by, const int16_t *ysum, float *s, size_t ldc,
                                                               int nc, const int np)
{
    const size_t bw = q8 ? sizeof(struct lm_block_q8_0x8) : sizeof(struct lm_block_q4_0x8);
    const __mmask16 dmask = (__mmask16)((1u << (2 * np)) - 1);
    const char *yc[16];
    const int16_t *ys[16];
    int32_t go[16] = {0}, yt[16][SLAB];
    __m512 acc[8];
    for (int c = 0; c < 2 * np; c++) {
        const int cc = c < nc ? c : nc - 1;
        yc[c] = y + (size_t)cc * by;
        ys[c] = ysum + (size_t)cc * (size_t)nb;
        go[c] = (int32_t)((size_t)cc * by);
    }
    const __m512i gidx = _mm512_loadu_si512(go);
    for (int p = 0; p < np; p++)
        acc[p] = _mm512_setzero_ps();
    for (int64_t b0 = 0; b0 < nb; b0 += SLAB) {
        const int n = nb - b0 < SLAB ? (int)(nb - b0) : SLAB;
        offsets(ys, 2 * np, b0, n, q8 ? -64 : -4, yt);
        for (int i = 0; i < n; i++) {
            const int64_t b = b0 + i;
            const char *wb = (const char *)x + (size_t)b * bw;
            prefetch_block(wb, (int)bw);
            __m512i q[4];
            if (q8)
                unpack_q8_0((const struct lm_block_q8_0x8 *)wb, q);
            else
                unpack_q4_0((const struct lm_block_q4_0x8 *)wb, q);
            const __m512 dw = weight_d(q8, (const lm_fp16 *)wb);
            const __m512i g = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), dmask, gidx,
                                                          y + (size_t)b * sizeof(struct lm_block_q8_0), 1);
            const __m512 da = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(g));
            for (int p = 0; p < np; p++) {
                __m512i t[2];
                for (int h = 0; h < 2; h++) {
                    const int8_t *aq = ((const struct lm_block_q8_0 *)yc[2 * p + h] + b)->qs;
                    t[h] = _mm512_set1_epi32(yt[2 * p + h][i]);
                    for (int j = 0; j < 4; j++)
                        t[h] = _mm512_dpbusd_epi32(t[h], q[j], bq8(aq + 8 * j));
                }
                acc[p] = pair_update(q8, t[0], t[1], dw, da, p, acc[p]);
            }
        }
    }
    store_pairs(q8, acc, np, nc, s, ldc);
}

/* ---- one column (token generation): streaming, bandwidth bound ----
 * The AVX2 kernels' register layout (one 256-bit register = 4 elements of
 * each of the 8 rows, the matching 4 activation bytes broadcast) with
 * vpdpbusd ymm (AVX512_VNNI + VL) in place of vpmaddubsw + vpaddw +
 * vpmaddwd: 8 dpbusd per block into one int32 accumulator, no 16-bit stage.
 * Q4_0 codes are unsigned (0..15), Q8_0 codes biased (w ^ 0x80 = w + 128);
 * the offsets 8 sum(a) and 128 sum(a) come from ysum. The integer block dot
 * is exact, then acc = fma((float)isum, d_w * d_a, acc) in block order: the
 * AVX2 kernels' bits.
 *
 * One kernel body streams R groups at once (gemv_x8: R = 8, then 4, 2, 1
 * for the rest; gemm_x8 with one column: R = 1): per block index, the block
 * of each of the R groups, each into its own accumulator, the activation
 * block broadcast once for all. Each group's lines are prefetched into L2
 * (not L1) a distance ahead in its own stream. R streams keep more lines in
 * flight than one stream prefetched further ahead: llama-7b Q4_0 tg, 2
 * threads, bench_ab same run (Intel Xeon with AMX, 2026-12-03): one group
 * at a time (prefetch 3072) -> 2 groups +11 %, 4 groups +11-12 %, 8 groups
 * +13.6 % (prefetch 3072), and with 8 groups prefetch 1536 +1.9 %, 768
 * +2.8 % over 3072; 384 -1.7 %, none -6 %, 6144 -10 % against 768.
 * tinyllama Q4_0: +6.6 %. Older single-stream distances (T1; tinyllama
 * Q4_0 / Q8_0 / llama-7b Q4_0 t/s): T0 1536 49.0 / - / 7.29, T1 1536
 * 45.9 / - / 7.48, T1 2048 50.0 / 29.1 / 8.00, T1 3072 50.2 / 29.4 /
 * 7.95-8.00, T1 6144 48.7 / 27.7 / 7.65. */
#define COL1_PREFETCH_ONE 3072 /* bytes ahead, one stream */
#define COL1_PREFETCH_MANY 768 /* bytes ahead in each of several streams */

static inline __m256i bcast4_256(const int8_t *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
}

/* R groups (group r at w + r * gbytes) against one activation row: s[8 r + i]. */
static inline __attribute__((always_inline)) void legacy_col1(bool q8, int R, int64_t nb, const char *w,
                                                               size_t gbytes, const struct lm_block_q8_0 *a,
                                                               const int16_t *ysum, float *s)
{
    const __m256i m4 = _mm256_set1_epi8(0x0F), bias = _mm256_set1_epi8((char)0x80);
    const int bsz = q8 ? (int)sizeof(struct lm_block_q8_0x8) : (int)sizeof(struct lm_block_q4_0x8);
    const int dist = R == 1 ? COL1_PREFETCH_ONE : COL1_PREFETCH_MANY;
    const bool pf = lm_avx512_prefetch;
    __m256 acc[8];
    for (int r = 0; r < R; r++)
        acc[r] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const size_t at = (size_t)b * (size_t)bsz;
        for (int r = 0; pf && r < R; r++)
            for (int o = 0; o < bsz; o += 64)
                _mm_prefetch(w + (size_t)r * gbytes + at + dist + o, _MM_HINT_T1);
        const __m256i off = _mm256_set1_epi32((q8 ? -128 : -8) * (int32_t)ysum[b]);
        const __m256 da = _mm256_set1_ps(_cvtsh_ss(a[b].d));
        __m256i ab[8];
        for (int j = 0; j < 8; j++) /* Q8_0: chunk j; Q4_0: low nibbles of chunk j/2, then high */
            ab[j] = bcast4_256(a[b].qs + (q8 ? 4 * j : 4 * (j / 2) + 16 * (j % 2)));
        for (int r = 0; r < R; r++) {
            const char *blk = w + (size_t)r * gbytes + at;
            __m256i s32 = off;
            if (q8) {
                const struct lm_block_q8_0x8 *x = (const void *)blk;
                for (int j = 0; j < 8; j++)
                    s32 = _mm256_dpbusd_epi32(
                        s32, _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(x->qs + 32 * j)), bias), ab[j]);
            } else {
                const struct lm_block_q4_0x8 *x = (const void *)blk;
                for (int ch = 0; ch < 4; ch++) {
                    const __m256i raw = _mm256_loadu_si256((const __m256i *)(x->qs + 32 * ch));
                    s32 = _mm256_dpbusd_epi32(s32, _mm256_and_si256(raw, m4), ab[2 * ch]);
                    s32 = _mm256_dpbusd_epi32(s32, _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4), ab[2 * ch + 1]);
                }
            }
            const lm_fp16 *dw = ((const struct lm_block_q4_0x8 *)blk)->d; /* d[8] leads both layouts */
            const __m256 scale = _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)dw)), da);
            acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s32), scale, acc[r]);
        }
    }
    for (int r = 0; r < R; r++)
        _mm256_storeu_ps(s + 8 * r, acc[r]);
}

_Static_assert(offsetof(struct lm_block_q4_0x8, d) == 0 && offsetof(struct lm_block_q8_0x8, d) == 0,
               "the fp16 scales lead both legacy layouts");

static void q4_0_col1(int64_t nb, const void *w, const void *a, const int16_t *ysum, float *s)
{
    legacy_col1(false, 1, nb, w, 0, a, ysum, s);
}

static void q8_0_col1(int64_t nb, const void *w, const void *a, const int16_t *ysum, float *s)
{
    legacy_col1(true, 1, nb, w, 0, a, ysum, s);
}

/* One gemv_x8 run of r groups at group g (gemv_runs.h), 8 groups at most. */
static inline __attribute__((always_inline)) void legacy_gemv_step(const bool q8, const void *ctx, int64_t g, int r)
{
    const struct lm_gemv_args *c = ctx;
    const char *x = lm_gemv_group(c, g);
    float *s = lm_gemv_out(c, g);
    switch (r) {
    case 8: legacy_col1(q8, 8, c->n, x, c->group_bytes, c->y, c->ysum, s); break;
    case 4: legacy_col1(q8, 4, c->n, x, c->group_bytes, c->y, c->ysum, s); break;
    case 2: legacy_col1(q8, 2, c->n, x, c->group_bytes, c->y, c->ysum, s); break;
    default: legacy_col1(q8, 1, c->n, x, c->group_bytes, c->y, c->ysum, s); break;
    }
}
static void q4_0_gemv_step(const void *c, int64_t g, int r) { legacy_gemv_step(false, c, g, r); }
static void q8_0_gemv_step(const void *c, int64_t g, int r) { legacy_gemv_step(true, c, g, r); }

/* Contract: kernels.h lm_gemv_fn (reads ysum); 8 groups at a time. */
void lm_gemv_q4_0x8_q8_0_avx512(int64_t k, int64_t n_groups, size_t group_bytes, float *s, const void *x, const void *y,
                                const int16_t *ysum)
{
    lm_gemv_call(q4_0_gemv_step, 8, k / LM_QK, n_groups, group_bytes, s, x, y, ysum);
}
void lm_gemv_q8_0x8_q8_0_avx512(int64_t k, int64_t n_groups, size_t group_bytes, float *s, const void *x, const void *y,
                                const int16_t *ysum)
{
    lm_gemv_call(q8_0_gemv_step, 8, k / LM_QK, n_groups, group_bytes, s, x, y, ysum);
}

/* nc (1..16) columns as (nc + 1) / 2 pairs, one instance per pair count. */
static inline __attribute__((always_inline)) void legacy_gemm(const bool q8, int64_t k, float *s, size_t ldc,
                                                              const void *x, const void *y, size_t by,
                                                              const int16_t *ysum, int nc)
{
    const int64_t nb = k / LM_QK;
    const char *yy = y;
    if (nc == 1) { /* token generation: the one-column kernel (a pair would compute it twice) */
        if (q8)
            q8_0_col1(nb, x, y, ysum, s);
        else
            q4_0_col1(nb, x, y, ysum, s);
        return;
    }
    if ((size_t)(nc - 1) * by > (size_t)INT32_MAX) { /* gather indices beyond int32: never for real rows */
        if (q8)
            lm_gemm_q8_0x8_q8_0_avx2(k, s, ldc, x, y, by, ysum, nc);
        else
            lm_gemm_q4_0x8_q8_0_avx2(k, s, ldc, x, y, by, ysum, nc);
        return;
    }
    switch ((nc + 1) / 2) {
    case 8: legacy_pairs(q8, nb, x, yy, by, ysum, s, ldc, nc, 8); break;
    case 7: legacy_pairs(q8, nb, x, yy, by, ysum, s, ldc, nc, 7); break;
    case 6: legacy_pairs(q8, nb, x, yy, by, ysum, s, ldc, nc, 6); break;
    case 5: legacy_pairs(q8, nb, x, yy, by, ysum, s, ldc, nc, 5); break;
    case 4: legacy_pairs(q8, nb, x, yy, by, ysum, s, ldc, nc, 4); break;
    case 3: legacy_pairs(q8, nb, x, yy, by, ysum, s, ldc, nc, 3); break;
    case 2: legacy_pairs(q8, nb, x, yy, by, ysum, s, ldc, nc, 2); break;
    default: legacy_pairs(q8, nb, x, yy, by, ysum, s, ldc, nc, 1); break;
    }
}

/* Contract: kernels.h (reads ysum). */
void lm_gemm_q4_0x8_q8_0_avx512(int64_t k, float *s, size_t ldc, const void *x, const void *y, size_t by,
                                const int16_t *ysum, int nc)
{
    legacy_gemm(false, k, s, ldc, x, y, by, ysum, nc);
}
/* Contract: kernels.h (reads ysum: the table sets gemm_sums for Q8_0). */
void lm_gemm_q8_0x8_q8_0_avx512(int64_t k, float *s, size_t ldc, const void *x, const void *y, size_t by,
                                const int16_t *ysum, int nc)
{
    legacy_gemm(true, k, s, ldc, x, y, by, ysum, nc);
}
