/* gemm_panel_amx.c - AMX-BF16 panel GEMM over repacked BF16 (bf16x8), F16
 * (f16x8) and quantized (q4_0x8, q8_0x8, q4_Kx8, q5_Kx8, q6_Kx8) weights, for
 * prompt processing (kernels.h lm_gemm_panel_fn).
 *
 * TDPBF16PS: C[m][n] (fp32, up to 16 x 16) += sum over k-pairs p < 16 of
 * A[m][2p] B[p][2n] + A[m][2p+1] B[p][2n+1], A = 16 rows x 32 bf16, B = 16
 * pair-rows x 16 columns x 2 bf16. Here A = 16 activation rows (tokens), read
 * in place from the activation rows (stride = row bytes), B = 16 weight rows
 * (a "panel": two 8-row groups), C rows = tokens and columns = weight rows,
 * which is the layout of the output (s[c * ldc + r]): C tiles are stored
 * straight into s.
 *
 * Plan of one call: units of up to 4 groups (2 panels, 32 weight rows). Up to
 * 4 units at a time (as many as fit in 1 MiB of scratch) are converted once
 * into B-tile format (1 KiB per panel and 32-element k-block: 8 x 8 word
 * transposes of the repacked chunks); then for each block of 2 x 16 tokens
 * every converted unit in turn runs its whole k loop with 4 C tiles (2 token
 * blocks x 2 panels; tiles 0-3 C, 4-5 A, 6-7 B), so each loaded tile feeds 2
 * TDPs, the B tiles come from L2 and a token block's activation rows are read
 * from L3 once per 4 units instead of once per unit. Tails: a last block of 16 tokens uses one A tile;
 * fewer than 16 tokens reload the tile configuration with fewer rows (A and C),
 * and a unit of 1 or 3 groups configures 8-column B and C tiles, so nothing
 * is padded and nothing outside the output range is written.
 *
 * Numerics. BF16 weights: activations rounded to BF16 (RNE, the values of
 * the gemm_x8 path), one TDP per k-block; the k pairing is the bf16x8 word
 * (elements t and t + 8 of each 16-element chunk), so activation rows are
 * stored in that order (lm_fp32_to_bf16_pairs_row_avx512, the AVX-512 dpbf16
 * kernel's encoder) and the weight conversion
 * is a pure transpose. F16 weights: activations rounded to F16 (as every F16
 * dot path), then a = ah + al exactly (ah = bf16(a) RNE, al = a - ah: F16 has
 * 11 significant bits, so al fits in BF16), weights w = wh + wl alike when
 * their unit is converted; w a ~ wh ah + wh al + wl ah, 3 TDPs per k-block in
 * that order for every element; the dropped wl al is below 2^-18 |w a|.
 * TMUL accumulates in fp32 with round to nearest even and flushes denormal
 * inputs and outputs (BF16 values below 2^-126: never produced from F16
 * values; for BF16 weights and activations an error below 2^-126 |w| per
 * product). Every output element sees the same k-order of TDPs whatever its
 * tile position, token block or tile shape, so results do not depend on the
 * thread split. Bound tested (tests/cpu/test_gemm_panel.c): 4.8e-7 (K/8 + 8)
 * sum|w a| against the double dot of the rounded values, plus 2^-15 sum|w a|
 * for F16.
 *
 * Quantized weights: each group's k-range is unpacked (cpu/repack.h) and
 * decoded to F32 by the AVX-512 decoders (the bits of quant/'s reference),
 * then rounded to BF16 (RNE) into one-half B tiles (round_kblock, natural pair
 * order); activations are BF16 rows (RNE, natural order: the level's BF16
 * from_float); one TDP per k-block, as BF16 weights. Each factor is within
 * 2^-9 of its value, a product within 2^-8 |w a|, plus the fp32 accumulation:
 * the BF16 bound above against the double dot of the rounded values
 * (tested). That is closer to exact than the gemm_x8 path, whose Q8
 * activations carry up to 2^-8 of their block's largest value (matmul nmse vs
 * generic ~2e-5 either way). The earlier hi/lo split of both factors (3 TDPs,
 * error < 2^-15) ran at 1/2.5 of this speed.
 *
 * K is taken in ranges of KRANGE (4096) elements: per range every unit's B
 * tiles are converted and swept, and later ranges load the C tiles from s
 * instead of zeroing them. A range's B tiles (4 units: 1 MiB) and a token
 * block's activations (32 x 4096 x 2 bytes) then share L2 even for k =
 * 11008, where whole rows fitted one unit and every unit re-read the token
 * block from L3 (Q4_0 K=11008 N=512: 115 -> 490 GMAC/s with both changes).
 *
 * Speed (bench_gemm K=2048, 256 rows, N=512, one thread, GMAC/s, same run):
 * BF16 594 (AVX-512 gemm_x8 79), F16 229 (78); K=5632: 479 / 169. Measured
 * steps: activation rows one cache line longer than their size (no 4 KiB
 * stride between the 16 rows of an A tile; the matmul op does this): BF16
 * 331 -> 466, F16 127 -> 178; 4 units per token block instead of 1: 466 ->
 * 604, 175 -> 237. Tried and dropped: k-chunks of 2-16 blocks so a unit's B
 * tiles stay in L1 with C tiles reloaded from s (all slower: 165-354 / 59-128).
 * tinyllama pp512, 2 threads (noisy shared machine, best of 3, LAMINA_ISA=
 * avx512 vs amx): BF16 136 -> 534 t/s, F16 131 -> 321 t/s.
 * Quantized (same bench, N=512, AVX-512 VNNI gemm_x8 / panel, BF16 tiles):
 * Q4_0 162 / 503, Q8_0 150 / 487, Q4_K 182 / 449, Q5_K 167 / 464, Q6_K 146
 * / 307 (its unpack is slow); the per-call unpack + decode + rounding sets
 * init_amx.c's thresholds (64-160). tinyllama pp512, 2 threads: Q4_0 306 ->
 * 487-544 t/s, llama-7b Q4_0 40 -> 86-90 (docs/performance.md).
 */
#include <immintrin.h>
#include <string.h>

#include "core/fp16.h"
#include "cpu/kernels/kernels.h"
#include "cpu/repack.h"

#define TILE 1024 /* bytes of one A or B tile: 16 rows x 64 bytes */
#define KB 32     /* k elements per tile */
#define UNIT_GROUPS 4

/* GCC's tile intrinsics are asm statements that do not declare the memory
 * they read: order ordinary stores (scratch, tile config) around them. */
#define MEM_BARRIER() __asm__ volatile("" ::: "memory")

struct tile_cfg {
    uint8_t palette, start_row;
    uint8_t reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
};
_Static_assert(sizeof(struct tile_cfg) == 64, "tile config is 64 bytes");

/* A weight format: B-tile halves per panel and k-block (1: BF16, 2: hi/lo),
 * its group conversion and token sweep, and for quantized types the group
 * unpacker (cpu/repack.h) and the plain-row decoder used by the conversion. */
struct wfmt;
typedef void (*convert_fn)(const struct wfmt *w, const char *x, size_t group_bytes, int ng, int64_t nkb, char *b,
                           char *work);
typedef void (*sweep_fn)(int nu, int ng, const char *b, size_t ub, int64_t nkb, const char *y, size_t by, size_t lo,
                         int64_t n, bool acc, float *s, size_t ldc);
struct wfmt {
    int nh;
    convert_fn convert;
    sweep_fn sweep;
    lm_repack_fn unpack;
    lm_to_float_fn decode;
};

/* Tiles 0-3: C (token block t, panel q) = 2t + q; 4-5: A; 6-7: B of panel 0, 1.
 * rows: tokens per block (1..16); cols0/cols1: weight rows of panel 0/1 (8 or
 * 16; cols1 0 when the unit has one panel). */
static void load_cfg(int rows, int cols0, int cols1)
{
    struct tile_cfg c __attribute__((aligned(64)));
    memset(&c, 0, sizeof c);
    c.palette = 1;
    const int cols[2] = {cols0, cols1};
    for (int q = 0; q < 2; q++) {
        if (!cols[q])
            continue;
        c.rows[q] = c.rows[2 + q] = (uint8_t)rows;
        c.colsb[q] = c.colsb[2 + q] = (uint16_t)(cols[q] * 4);
        c.rows[6 + q] = 16;
        c.colsb[6 + q] = (uint16_t)(cols[q] * 4);
    }
    c.rows[4] = c.rows[5] = (uint8_t)rows;
    c.colsb[4] = c.colsb[5] = 64;
    __asm__ volatile("" : : "r"(&c) : "memory");
    _tile_loadconfig(&c);
}

/* 8 x 8 transpose of 32-bit words: row t of dst (stride ds) = word t of the 8
 * rows of src (stride ss). */
static inline __attribute__((always_inline)) void transpose8(const char *src, size_t ss, char *dst, size_t ds)
{
    __m256i r[8], t[8], u[8];
    for (int i = 0; i < 8; i++)
        r[i] = _mm256_loadu_si256((const __m256i *)(src + (size_t)i * ss));
    for (int i = 0; i < 4; i++) {
        t[2 * i] = _mm256_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
    }
    for (int h = 0; h < 2; h++) { /* rows 0-3, 4-7 */
        u[4 * h + 0] = _mm256_unpacklo_epi64(t[4 * h], t[4 * h + 2]);
        u[4 * h + 1] = _mm256_unpackhi_epi64(t[4 * h], t[4 * h + 2]);
        u[4 * h + 2] = _mm256_unpacklo_epi64(t[4 * h + 1], t[4 * h + 3]);
        u[4 * h + 3] = _mm256_unpackhi_epi64(t[4 * h + 1], t[4 * h + 3]);
    }
    for (int i = 0; i < 4; i++) {
        _mm256_storeu_si256((__m256i *)(dst + (size_t)i * ds), _mm256_permute2x128_si256(u[i], u[4 + i], 0x20));
        _mm256_storeu_si256((__m256i *)(dst + (size_t)(4 + i) * ds), _mm256_permute2x128_si256(u[i], u[4 + i], 0x31));
    }
}

/* ---- weight conversion into B tiles: tile (kb, q, h) at
 * b + ((kb * 2 + q) * nh + h) * TILE, nh = 1 (BF16) or 2 (F16 hi, lo) ---- */

/* BF16: chunk j of a group = 8 rows x 8 words (word t: elements t, t + 8):
 * k-block kb = chunks 2kb, 2kb + 1 = pair-rows 0-7, 8-15 of the tile. */
static void convert_bf16(const struct wfmt *w, const char *x, size_t group_bytes, int ng, int64_t nkb, char *b,
                         char *work)
{
    (void)w;
    (void)work;
    for (int gi = 0; gi < ng; gi++) {
        const char *xg = x + (size_t)gi * group_bytes;
        for (int64_t kb = 0; kb < nkb; kb++) {
            char *tile = b + (size_t)(kb * 2 + gi / 2) * TILE + (size_t)(gi % 2) * 32;
            transpose8(xg + (size_t)(2 * kb) * 256, 32, tile, 64);
            transpose8(xg + (size_t)(2 * kb + 1) * 256, 32, tile + 8 * 64, 64);
        }
    }
}

/* F32 rows -> hi/lo B tiles, shared by the F16 and the quantized weights:
 * one 32-element k-block of 8 rows (row r at f + r ld) is split into w = wh +
 * wl, wh = bf16(w) RNE, wl = bf16(w - wh) RNE (w - wh is exact in fp32; wl
 * is exact too when w has at most 16 significant bits: F16, Q4_0), natural
 * pair order (word p = elements 2p, 2p + 1) in an 8-row x 16-word buffer per
 * half, then transposed into pair-rows 0-15 of the tiles hi and lo (which
 * include the group's column offset). */
static inline __attribute__((always_inline)) void split_kblock(const float *f, size_t ld, char *hi, char *lo)
{
    char tmp[2][8 * 64] __attribute__((aligned(64)));
    for (int r = 0; r < 8; r++) {
        const __m512 f0 = _mm512_loadu_ps(f + (size_t)r * ld), f1 = _mm512_loadu_ps(f + (size_t)r * ld + 16);
        const __m512i hb = (__m512i)_mm512_cvtne2ps_pbh(f1, f0); /* elements 0-15 low, 16-31 high */
        const __m512 h0 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_castsi512_si256(hb)), 16));
        const __m512 h1 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(hb, 1)), 16));
        const __m512i lb = (__m512i)_mm512_cvtne2ps_pbh(_mm512_sub_ps(f1, h1), _mm512_sub_ps(f0, h0));
        _mm512_store_si512((__m512i *)(tmp[0] + r * 64), hb);
        _mm512_store_si512((__m512i *)(tmp[1] + r * 64), lb);
    }
    transpose8(tmp[0], 64, hi, 64);
    transpose8(tmp[0] + 32, 64, hi + 8 * 64, 64);
    transpose8(tmp[1], 64, lo, 64);
    transpose8(tmp[1] + 32, 64, lo + 8 * 64, 64);
}

/* The hi tile of k-block kb, group gi of a unit (nh = 2); lo follows at + TILE. */
static inline char *split_tile(char *b, int64_t kb, int gi)
{
    return b + (size_t)((kb * 2 + gi / 2) * 2) * TILE + (size_t)(gi % 2) * 32;
}

/* F16: chunk j = 8 rows x 8 fp16 (16 bytes a row); k-block kb = chunks
 * 4kb..4kb+3, widened to an 8 x 32 float block, then split. */
static void convert_f16(const struct wfmt *w, const char *x, size_t group_bytes, int ng, int64_t nkb, char *b,
                        char *work)
{
    (void)w;
    (void)work;
    float f[8 * 32] __attribute__((aligned(64)));
    for (int gi = 0; gi < ng; gi++) {
        const char *xg = x + (size_t)gi * group_bytes;
        for (int64_t kb = 0; kb < nkb; kb++) {
            for (int c = 0; c < 4; c++) {
                const char *chunk = xg + (size_t)(4 * kb + c) * 128;
                for (int r = 0; r < 8; r += 2) {
                    const __m512 v = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(chunk + 16 * r)));
                    _mm256_store_ps(f + r * 32 + c * 8, _mm512_castps512_ps256(v));
                    _mm256_store_ps(f + (r + 1) * 32 + c * 8, _mm512_extractf32x8_ps(v, 1));
                }
            }
            char *tile = split_tile(b, kb, gi);
            split_kblock(f, 32, tile, tile + TILE);
        }
    }
}

/* One 32-element k-block of 8 F32 rows (row r at f + r ld) rounded to BF16
 * (RNE), natural pair order, transposed into pair-rows 0-15 of tile t (which
 * includes the group's column offset). */
static inline __attribute__((always_inline)) void round_kblock(const float *f, size_t ld, char *t)
{
    char tmp[8 * 64] __attribute__((aligned(64)));
    for (int r = 0; r < 8; r++) {
        const __m512 f0 = _mm512_loadu_ps(f + (size_t)r * ld), f1 = _mm512_loadu_ps(f + (size_t)r * ld + 16);
        _mm512_store_si512((__m512i *)(tmp + r * 64), (__m512i)_mm512_cvtne2ps_pbh(f1, f0));
    }
    transpose8(tmp, 64, t, 64);
    transpose8(tmp + 32, 64, t + 8 * 64, 64);
}

/* Quantized weights: each group (its k-range: x points at the range's first
 * block) is unpacked to its 8 plain rows and decoded to F32 (the AVX-512
 * decoders: the bits of quant/'s reference) in work (8 k floats, then the
 * plain rows), then rounded to BF16 k-block by k-block (nh = 1). */
static void convert_quant(const struct wfmt *w, const char *x, size_t group_bytes, int ng, int64_t nkb, char *b,
                          char *work)
{
    const int64_t k = nkb * KB;
    float *f = (float *)work;
    char *plain = work + (size_t)k * LM_REPACK_ROWS * sizeof(float);
    for (int gi = 0; gi < ng; gi++) {
        w->unpack(x + (size_t)gi * group_bytes, plain, LM_REPACK_ROWS, k);
        w->decode(plain, f, LM_REPACK_ROWS * k);
        for (int64_t kb = 0; kb < nkb; kb++)
            round_kblock(f + kb * KB, (size_t)k, b + (size_t)(kb * 2 + gi / 2) * TILE + (size_t)(gi % 2) * 32);
    }
}

/* ---- token blocks: nt (1, 2) blocks of the configured rows x np (1, 2)
 * panels; a = the first token's activation row, s its output row ---- */

/* The C tiles in use: tile 2t + q at s + 16 t ldc + 16 q (t < nt, q < np).
 * Tile numbers must be literal tokens for the intrinsics, so each operation
 * names the four tiles itself. */

/* C tiles zeroed (first k-range) or loaded from s (later ranges: acc). */
static inline __attribute__((always_inline)) void init_c(int nt, int np, bool acc, const float *s, size_t ldc)
{
    const size_t st = ldc * sizeof(float);
    if (acc) {
        _tile_loadd(0, s, st);
        if (np > 1)
            _tile_loadd(1, s + 16, st);
        if (nt > 1) {
            _tile_loadd(2, s + 16 * ldc, st);
            if (np > 1)
                _tile_loadd(3, s + 16 * ldc + 16, st);
        }
    } else {
        _tile_zero(0);
        if (np > 1)
            _tile_zero(1);
        if (nt > 1) {
            _tile_zero(2);
            if (np > 1)
                _tile_zero(3);
        }
    }
}

static inline __attribute__((always_inline)) void store_c(int nt, int np, float *s, size_t ldc)
{
    const size_t st = ldc * sizeof(float);
    _tile_stored(0, s, st);
    if (np > 1)
        _tile_stored(1, s + 16, st);
    if (nt > 1) {
        _tile_stored(2, s + 16 * ldc, st);
        if (np > 1)
            _tile_stored(3, s + 16 * ldc + 16, st);
    }
}

static inline __attribute__((always_inline)) void block_bf16(int nt, int np, const char *a, size_t by, size_t lo,
                                                             const char *b, int64_t nkb, bool acc, float *s,
                                                             size_t ldc)
{
    (void)lo; /* F16 only */
    init_c(nt, np, acc, s, ldc);
    const char *a1 = a + 16 * by;
    for (int64_t kb = 0; kb < nkb; kb++) {
        const char *bk = b + (size_t)kb * 2 * TILE;
        _tile_loadd(6, bk, 64);
        if (np > 1)
            _tile_loadd(7, bk + TILE, 64);
        _tile_loadd(4, a + kb * 64, by);
        _tile_dpbf16ps(0, 4, 6);
        if (np > 1)
            _tile_dpbf16ps(1, 4, 7);
        if (nt > 1) {
            _tile_loadd(5, a1 + kb * 64, by);
            _tile_dpbf16ps(2, 5, 6);
            if (np > 1)
                _tile_dpbf16ps(3, 5, 7);
        }
    }
    store_c(nt, np, s, ldc);
}

/* Per k-block and C tile: hi x hi, lo(a) x hi(w), hi(a) x lo(w), in that
 * order; tile 4 keeps ah of block 0, tile 5 cycles ah1 -> al0 -> al1 -> ah1
 * (9 loads for 12 TDPs in the 2 x 2 case). */
static inline __attribute__((always_inline)) void block_f16(int nt, int np, const char *a, size_t by, size_t lo,
                                                            const char *b, int64_t nkb, bool acc, float *s,
                                                            size_t ldc)
{
    init_c(nt, np, acc, s, ldc);
    const char *a1 = a + 16 * by;
    for (int64_t kb = 0; kb < nkb; kb++) {
        const char *bk = b + (size_t)kb * 4 * TILE; /* (q, h) = bk + (2q + h) TILE */
        const size_t ak = (size_t)kb * 64;
        _tile_loadd(6, bk, 64);
        if (np > 1)
            _tile_loadd(7, bk + 2 * TILE, 64);
        _tile_loadd(4, a + ak, by);
        _tile_dpbf16ps(0, 4, 6);
        if (np > 1)
            _tile_dpbf16ps(1, 4, 7);
        if (nt > 1) {
            _tile_loadd(5, a1 + ak, by);
            _tile_dpbf16ps(2, 5, 6);
            if (np > 1)
                _tile_dpbf16ps(3, 5, 7);
        }
        _tile_loadd(5, a + lo + ak, by);
        _tile_dpbf16ps(0, 5, 6);
        if (np > 1)
            _tile_dpbf16ps(1, 5, 7);
        if (nt > 1) {
            _tile_loadd(5, a1 + lo + ak, by);
            _tile_dpbf16ps(2, 5, 6);
            if (np > 1)
                _tile_dpbf16ps(3, 5, 7);
        }
        _tile_loadd(6, bk + TILE, 64);
        if (np > 1)
            _tile_loadd(7, bk + 3 * TILE, 64);
        _tile_dpbf16ps(0, 4, 6);
        if (np > 1)
            _tile_dpbf16ps(1, 4, 7);
        if (nt > 1) {
            _tile_loadd(5, a1 + ak, by);
            _tile_dpbf16ps(2, 5, 6);
            if (np > 1)
                _tile_dpbf16ps(3, 5, 7);
        }
    }
    store_c(nt, np, s, ldc);
}

/* One token block of either weight format (f16: hi and lo halves). */
static inline __attribute__((always_inline)) void block(const bool f16, int nt, int np, const char *a, size_t by,
                                                        size_t lo, const char *b, int64_t nkb, bool acc, float *s,
                                                        size_t ldc)
{
    if (f16)
        block_f16(nt, np, a, by, lo, b, nkb, acc, s, ldc);
    else
        block_bf16(nt, np, a, by, lo, b, nkb, acc, s, ldc);
}

/* nu units of ng groups each (B tiles ub bytes apart, outputs 32 columns
 * apart) against all n tokens: per block of 32 tokens (then 16, then the
 * rest) every unit in turn, so the block's activations (<= 32 rows) stay in
 * L2 while the units' B tiles (the scratch, sized to stay in L2) are swept. */
static inline __attribute__((always_inline)) void sweep(const bool f16, int nu, int ng, const char *b, size_t ub,
                                                        int64_t nkb, const char *y, size_t by, size_t lo, int64_t n,
                                                        bool acc, float *s, size_t ldc)
{
    const int np = ng > 2 ? 2 : 1, cols0 = ng >= 2 ? 16 : 8, cols1 = ng == 4 ? 16 : ng == 3 ? 8 : 0;
    int64_t t = 0;
    load_cfg(16, cols0, cols1);
    for (; t + 32 <= n; t += 32)
        for (int u = 0; u < nu; u++) {
            const char *bu = b + (size_t)u * ub;
            float *su = s + (size_t)t * ldc + (size_t)u * 32;
            if (np > 1)
                block(f16, 2, 2, y + (size_t)t * by, by, lo, bu, nkb, acc, su, ldc);
            else
                block(f16, 2, 1, y + (size_t)t * by, by, lo, bu, nkb, acc, su, ldc);
        }
    for (int64_t t1; t < n; t = t1) {
        t1 = n - t >= 16 ? t + 16 : n;
        if (t1 - t < 16)
            load_cfg((int)(t1 - t), cols0, cols1);
        for (int u = 0; u < nu; u++)
            block(f16, 1, np, y + (size_t)t * by, by, lo, b + (size_t)u * ub, nkb, acc,
                  s + (size_t)t * ldc + (size_t)u * 32, ldc);
    }
}

static void sweep_bf16(int nu, int ng, const char *b, size_t ub, int64_t nkb, const char *y, size_t by, size_t lo,
                       int64_t n, bool acc, float *s, size_t ldc)
{
    sweep(false, nu, ng, b, ub, nkb, y, by, lo, n, acc, s, ldc);
}

static void sweep_f16(int nu, int ng, const char *b, size_t ub, int64_t nkb, const char *y, size_t by, size_t lo,
                      int64_t n, bool acc, float *s, size_t ldc)
{
    sweep(true, nu, ng, b, ub, nkb, y, by, lo, n, acc, s, ldc);
}

/* K is taken in ranges of at most KRANGE elements (a multiple of every
 * block size, 256): a unit's B tiles and a token block's activations of one
 * range stay in L2 together even for k = 11008, where whole rows left room
 * for one unit only (bench_gemm Q4_0 K=11008 N=512: 347 -> see kernels.md).
 * Later ranges reload the C tiles from s (acc). */
#define KRANGE 4096
static int64_t krange(int64_t k) { return k < KRANGE ? k : KRANGE; }

/* B bytes of one unit for a range of k elements, and units converted at
 * once: as many as fit in SCRATCH_BUDGET (with the activation block, in a
 * 2 MiB L2), at most MAX_UNITS. */
#define SCRATCH_BUDGET (1u << 20)
#define MAX_UNITS 4
static size_t unit_bytes(int64_t k, int nh) { return (size_t)(k / KB) * 2 * (size_t)nh * TILE; }
static int units(int64_t k, int nh)
{
    const size_t u = SCRATCH_BUDGET / unit_bytes(krange(k), nh);
    return u < 1 ? 1 : u > MAX_UNITS ? MAX_UNITS : (int)u;
}

/* Every kernel: blocks of up to units() x 4 groups; per k-range convert that
 * range of the block's groups, then sweep the full units together and a
 * partial last unit (1-3 groups) alone. A group's k-range is contiguous in
 * every x8 layout (bytes proportional to k), as is a range of an activation
 * row (elem bytes each; F16's lo half stays lo bytes after its hi value).
 * work: the quantized decode rows, after the B tiles. */
static void panel(const struct wfmt *w, int64_t k, int64_t n_groups, size_t group_bytes, float *s, size_t ldc,
                  const char *x, const char *y, size_t by, size_t elem, int64_t n, char *scratch)
{
    const int nu = units(k, w->nh);
    const int64_t step = (int64_t)nu * UNIT_GROUPS;
    const size_t lo = w->nh > 1 ? (size_t)k * sizeof(lm_bf16) : 0;
    char *work = scratch + (size_t)nu * unit_bytes(krange(k), w->nh);
    for (int64_t g = 0; g < n_groups; g += step) {
        const int64_t ng = n_groups - g < step ? n_groups - g : step;
        const int full = (int)(ng / UNIT_GROUPS), rest = (int)(ng % UNIT_GROUPS);
        float *sg = s + (size_t)g * LM_REPACK_ROWS;
        for (int64_t k0 = 0; k0 < k; k0 += KRANGE) {
            const int64_t kn = k - k0 < KRANGE ? k - k0 : KRANGE, nkb = kn / KB;
            const size_t ub = unit_bytes(kn, w->nh), xoff = (size_t)((uint64_t)group_bytes * (uint64_t)k0 / (uint64_t)k);
            const char *yk = y + (size_t)k0 * elem;
            for (int u = 0; u <= full; u++) {
                const int ngu = u < full ? UNIT_GROUPS : rest;
                if (ngu)
                    w->convert(w, x + (size_t)(g + u * UNIT_GROUPS) * group_bytes + xoff, group_bytes, ngu, nkb,
                               scratch + u * ub, work);
            }
            MEM_BARRIER();
            if (full)
                w->sweep(full, UNIT_GROUPS, scratch, ub, nkb, yk, by, lo, n, k0 > 0, sg, ldc);
            if (rest)
                w->sweep(1, rest, scratch + (size_t)full * ub, ub, nkb, yk, by, lo, n, k0 > 0,
                         sg + (size_t)full * 32, ldc);
            MEM_BARRIER();
        }
    }
    _tile_release();
}

/* Contract: kernels.h lm_gemm_panel_fn (y: lm_fp32_to_bf16_pairs_row_avx512 rows). */
void lm_gemm_panel_bf16x8_amx(int64_t k, int64_t n_groups, size_t group_bytes, float *s, size_t ldc, const void *x,
                           const void *y, size_t by, int64_t n, void *scratch)
{
    static const struct wfmt w = {1, convert_bf16, sweep_bf16, NULL, NULL};
    panel(&w, k, n_groups, group_bytes, s, ldc, x, y, by, sizeof(lm_bf16), n, scratch);
}

/* Contract: kernels.h lm_gemm_panel_fn (y: lm_panel_from_float_f16_amx rows). */
void lm_gemm_panel_f16x8_amx(int64_t k, int64_t n_groups, size_t group_bytes, float *s, size_t ldc, const void *x,
                          const void *y, size_t by, int64_t n, void *scratch)
{
    static const struct wfmt w = {2, convert_f16, sweep_f16, NULL, NULL};
    panel(&w, k, n_groups, group_bytes, s, ldc, x, y, by, sizeof(lm_bf16), n, scratch);
}

/* The B tiles of units(k) units: per unit 2 panels x (one k-range)/32 blocks
 * x 1 KiB (x 2 for F16's hi and lo). */
size_t lm_gemm_panel_bf16x8_scratch_amx(int64_t k) { return (size_t)units(k, 1) * unit_bytes(krange(k), 1); }
size_t lm_gemm_panel_f16x8_scratch_amx(int64_t k) { return (size_t)units(k, 2) * unit_bytes(krange(k), 2); }

/* Quantized weights (activations: BF16 rows, the level's BF16 from_float):
 * the one-half tiles and sweep of BF16, the groups decoded and rounded by
 * convert_quant; scratch = the tiles, 8 decoded F32 rows and the 8 plain rows
 * of one group's k-range. */
static const struct wfmt q4_0x8_fmt = {1, convert_quant, sweep_bf16, lm_unpack_q4_0x8, lm_dequantize_row_q4_0_avx512};
static const struct wfmt q8_0x8_fmt = {1, convert_quant, sweep_bf16, lm_unpack_q8_0x8, lm_dequantize_row_q8_0_avx512};
static const struct wfmt q4_Kx8_fmt = {1, convert_quant, sweep_bf16, lm_unpack_q4_Kx8, lm_dequantize_row_q4_K_avx512};
static const struct wfmt q5_Kx8_fmt = {1, convert_quant, sweep_bf16, lm_unpack_q5_Kx8, lm_dequantize_row_q5_K_avx512};
static const struct wfmt q6_Kx8_fmt = {1, convert_quant, sweep_bf16, lm_unpack_q6_Kx8, lm_dequantize_row_q6_K_avx512};

static size_t quant_scratch(enum lm_type type, int64_t k)
{
    return lm_gemm_panel_bf16x8_scratch_amx(k) + (size_t)krange(k) * LM_REPACK_ROWS * sizeof(float) +
           lm_row_size(type, krange(k)) * LM_REPACK_ROWS;
}

/* Contracts: kernels.h lm_gemm_panel_fn and lm_gemm_panel_scratch_fn. */
void lm_gemm_panel_q4_0x8_amx(int64_t k, int64_t n_groups, size_t group_bytes, float *s, size_t ldc, const void *x,
                              const void *y, size_t by, int64_t n, void *scratch)
{
    panel(&q4_0x8_fmt, k, n_groups, group_bytes, s, ldc, x, y, by, sizeof(lm_bf16), n, scratch);
}
size_t lm_gemm_panel_q4_0x8_scratch_amx(int64_t k) { return quant_scratch(LM_TYPE_Q4_0, k); }
void lm_gemm_panel_q8_0x8_amx(int64_t k, int64_t n_groups, size_t group_bytes, float *s, size_t ldc, const void *x,
                              const void *y, size_t by, int64_t n, void *scratch)
{
    panel(&q8_0x8_fmt, k, n_groups, group_bytes, s, ldc, x, y, by, sizeof(lm_bf16), n, scratch);
}
size_t lm_gemm_panel_q8_0x8_scratch_amx(int64_t k) { return quant_scratch(LM_TYPE_Q8_0, k); }
void lm_gemm_panel_q4_Kx8_amx(int64_t k, int64_t n_groups, size_t group_bytes, float *s, size_t ldc, const void *x,
                              const void *y, size_t by, int64_t n, void *scratch)
{
    panel(&q4_Kx8_fmt, k, n_groups, group_bytes, s, ldc, x, y, by, sizeof(lm_bf16), n, scratch);
}
size_t lm_gemm_panel_q4_Kx8_scratch_amx(int64_t k) { return quant_scratch(LM_TYPE_Q4_K, k); }
void lm_gemm_panel_q5_Kx8_amx(int64_t k, int64_t n_groups, size_t group_bytes, float *s, size_t ldc, const void *x,
                              const void *y, size_t by, int64_t n, void *scratch)
{
    panel(&q5_Kx8_fmt, k, n_groups, group_bytes, s, ldc, x, y, by, sizeof(lm_bf16), n, scratch);
}
size_t lm_gemm_panel_q5_Kx8_scratch_amx(int64_t k) { return quant_scratch(LM_TYPE_Q5_K, k); }
void lm_gemm_panel_q6_Kx8_amx(int64_t k, int64_t n_groups, size_t group_bytes, float *s, size_t ldc, const void *x,
                              const void *y, size_t by, int64_t n, void *scratch)
{
    panel(&q6_Kx8_fmt, k, n_groups, group_bytes, s, ldc, x, y, by, sizeof(lm_bf16), n, scratch);
}
size_t lm_gemm_panel_q6_Kx8_scratch_amx(int64_t k) { return quant_scratch(LM_TYPE_Q6_K, k); }

/* ---- activation encoders ---- */

/* F16 weights' activation rows (kernels.h): split into bf16 hi (y[0..n))
 * and lo (y[n..2n)): f = fp16(x) RNE, hi = bf16(f) RNE, lo = f - hi (exact).
 * The vector body's conversions treat subnormal inputs as zero (values below
 * 2^-126). Any n. */
void lm_panel_from_float_f16_amx(const float *x, void *y, int64_t n)
{
    lm_bf16 *hi = y, *lo = hi + n;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512 f = _mm512_cvtph_ps(_mm512_cvtps_ph(_mm512_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        const __m256i hb = (__m256i)_mm512_cvtneps_pbh(f);
        const __m512 h = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(hb), 16));
        _mm256_storeu_si256((__m256i *)(hi + i), hb);
        _mm256_storeu_si256((__m256i *)(lo + i), (__m256i)_mm512_cvtneps_pbh(_mm512_sub_ps(f, h)));
    }
    for (; i < n; i++) {
        const float f = lm_fp16_to_fp32(lm_fp32_to_fp16(x[i]));
        hi[i] = lm_fp32_to_bf16(f);
        lo[i] = lm_fp32_to_bf16(f - lm_bf16_to_fp32(hi[i]));
    }
}
