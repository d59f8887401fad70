/* float_avx512.c - AVX-512 dot products of F32, F16 and BF16 rows, single
 * (vec_dot) and several rows against one y (vec_dot_rows).
 *
 * Each dot is one inline template over R rows (R = 1 for vec_dot, R = 4 in
 * vec_dot_rows, then R = 1 for the last rows): every row runs exactly the
 * instruction sequence of vec_dot, so vec_dot_rows gives vec_dot's bits for
 * every row by construction, while the 4 rows share the y loads (and the
 * y conversion) and give the core 4x as many independent FMA chains.
 * Lanes: an element's accumulator lane depends only on its index i:
 *   - F32: 4 accumulators of 16 lanes, lane i mod 64 (64 elements a step);
 *   - F16: 2 accumulators of 16 lanes, lane i mod 32 (vcvtph2ps + FMA). Kept
 *     at 32 on purpose: a P.V dot over a sub-range starting at a multiple of
 *     32 then adds the products of the full-row dot in the same lanes (ops/
 *     attention.c, ATTN_BLOCK), so fused attention over an F16 KV cache
 *     stays bit-identical to the unfused graph;
 *   - BF16: vdpbf16ps (AVX512_BF16), 4 accumulators of 16 lanes each taking
 *     an element pair, 128 elements a step. Installed only when cpuid reports
 *     AVX512_BF16 (else the AVX2 table keeps its shift/FMA kernel).
 *     vdpbf16ps ignores MXCSR: it always rounds to nearest even, treats
 *     denormal inputs as zero and flushes denormal results (each product is
 *     exact in float otherwise, then added with rounding, lane by lane).
 *     Against the generic kernel that changes a sum by at most the dropped
 *     denormal products (< 2^-126 |y| each), far inside the ISA bound.
 * Tails: whole 16 (32 for BF16) element steps into the lane's accumulator,
 * then one masked load (never past the end); any n >= 0.
 * Numerics vs generic: only the float summation order differs (FMA, other
 * lanes, a fixed reduction tree), the tests' 4.8e-7 (n/8 + 8) sum|xy| bound.
 * Speed (bench_kernels, one thread, K = 4096, same run, GFLOP/s in L1, AVX2 ->
 * AVX-512): F32 52.7 -> 58.7 (stream 11.3 -> 12.9 GB/s); BF16 48.3 -> 92.9;
 * F16 44.5 -> 44.7: a single F16 dot converts x and y, and vcvtph2ps is the
 * limit at either width (zmm converts ~36 G elements/s here, ymm ~45; the
 * zmm form is still the faster loop). vec_dot_rows over L2-resident rows,
 * attention shapes: F16 K (n 128, 512 rows) 54.8 -> 60.7, V (n 1024, 128
 * rows) 59.4 -> 71.4 (AVX2 rows vs these); BF16 V 49.7 (AVX2 vec_dot) -> 79.7.
 * At n = 128 a single F16 / F32 dot is slower than AVX2's (36.5 vs 43.6,
 * 30.2 vs 38.9: the 16-lane reduction and fixed costs dominate 4 steps);
 * attention calls vec_dot_rows, which shares the reduction over 4 rows.
 */
#include "avx512_util.h"
#include "cpu/kernels/kernels.h"

#define ALWAYS_INLINE inline __attribute__((always_inline))
#define ROWS_MAX 4 /* rows per group in vec_dot_rows */

static ALWAYS_INLINE const void *row_at(const void *x, size_t bx, int r) { return (const char *)x + (size_t)r * bx; }

/* s[r] = the lane sum of v[r] (avx512_hsum_ps's tree; 4 rows share shuffles). */
static ALWAYS_INLINE void reduce_rows(const int R, const __m512 *v, float *s)
{
    if (R == 4)
        avx512_hsum4_ps(v[0], v[1], v[2], v[3], s);
    else
        for (int r = 0; r < R; r++)
            s[r] = avx512_hsum_ps(v[r]);
}

/* ---- F32 ---- */

/* s[r] = dot(row r, y) for r < R; lane i mod 64. */
static ALWAYS_INLINE void dot_f32(const int R, int64_t n, float *s, const void *vx, size_t bx, const float *y)
{
    __m512 a[ROWS_MAX][4];
    const float *x[ROWS_MAX];
    for (int r = 0; r < R; r++) {
        x[r] = row_at(vx, bx, r);
        a[r][0] = a[r][1] = a[r][2] = a[r][3] = _mm512_setzero_ps();
    }
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        const __m512 y0 = _mm512_loadu_ps(y + i), y1 = _mm512_loadu_ps(y + i + 16);
        const __m512 y2 = _mm512_loadu_ps(y + i + 32), y3 = _mm512_loadu_ps(y + i + 48);
        for (int r = 0; r < R; r++) {
            avx512_prefetch(x[r] + i, 256);
            a[r][0] = _mm512_fmadd_ps(_mm512_loadu_ps(x[r] + i), y0, a[r][0]);
            a[r][1] = _mm512_fmadd_ps(_mm512_loadu_ps(x[r] + i + 16), y1, a[r][1]);
            a[r][2] = _mm512_fmadd_ps(_mm512_loadu_ps(x[r] + i + 32), y2, a[r][2]);
            a[r][3] = _mm512_fmadd_ps(_mm512_loadu_ps(x[r] + i + 48), y3, a[r][3]);
        }
    }
    for (; i + 16 <= n; i += 16) {
        const int j = (int)(i % 64) / 16;
        const __m512 yv = _mm512_loadu_ps(y + i);
        for (int r = 0; r < R; r++)
            a[r][j] = _mm512_fmadd_ps(_mm512_loadu_ps(x[r] + i), yv, a[r][j]);
    }
    if (i < n) {
        const int j = (int)(i % 64) / 16;
        const __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        const __m512 yv = _mm512_maskz_loadu_ps(m, y + i);
        for (int r = 0; r < R; r++)
            a[r][j] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, x[r] + i), yv, a[r][j]);
    }
    __m512 v[ROWS_MAX];
    for (int r = 0; r < R; r++)
        v[r] = _mm512_add_ps(_mm512_add_ps(a[r][0], a[r][1]), _mm512_add_ps(a[r][2], a[r][3]));
    reduce_rows(R, v, s);
}

/* Contract: kernels.h. */
void lm_vec_dot_f32_avx512(int64_t n, float *s, const void *x, const void *y) { dot_f32(1, n, s, x, 0, y); }

/* Contract: kernels.h (lm_vec_dot_rows_fn); each s[r] has lm_vec_dot_f32_avx512's bits. */
void lm_vec_dot_rows_f32_avx512(int64_t n, int64_t nr, float *s, const void *x, size_t bx, const void *y)
{
    int64_t r = 0;
    for (; r + ROWS_MAX <= nr; r += ROWS_MAX)
        dot_f32(ROWS_MAX, n, s + r, (const char *)x + (size_t)r * bx, bx, y);
    for (; r < nr; r++)
        dot_f32(1, n, s + r, (const char *)x + (size_t)r * bx, bx, y);
}

/* ---- F16 ---- */

static ALWAYS_INLINE __m512 load_f16x16(const lm_fp16 *p)
{
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p));
}

static ALWAYS_INLINE __m512 load_f16x16_mask(__mmask16 m, const lm_fp16 *p)
{
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p));
}

/* 16 y values at i: from the widened copy yf when non-NULL, else converted
 * from y (the same floats: vcvtph2ps is exact). */
static ALWAYS_INLINE __m512 y_f16(const lm_fp16 *y, const float *yf, int64_t i)
{
    return yf ? _mm512_loadu_ps(yf + i) : load_f16x16(y + i);
}

/* s[r] = dot(row r, y) for r < R; lane i mod 32 (see the file comment). */
static ALWAYS_INLINE void dot_f16(const int R, int64_t n, float *s, const void *vx, size_t bx, const lm_fp16 *y,
                                  const float *yf)
{
    __m512 a[ROWS_MAX][2];
    const lm_fp16 *x[ROWS_MAX];
    for (int r = 0; r < R; r++) {
        x[r] = row_at(vx, bx, r);
        a[r][0] = a[r][1] = _mm512_setzero_ps();
    }
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        const __m512 y0 = y_f16(y, yf, i), y1 = y_f16(y, yf, i + 16);
        for (int r = 0; r < R; r++) {
            avx512_prefetch(x[r] + i, 64);
            a[r][0] = _mm512_fmadd_ps(load_f16x16(x[r] + i), y0, a[r][0]);
            a[r][1] = _mm512_fmadd_ps(load_f16x16(x[r] + i + 16), y1, a[r][1]);
        }
    }
    if (i + 16 <= n) { /* i % 32 == 0 here */
        const __m512 yv = y_f16(y, yf, i);
        for (int r = 0; r < R; r++)
            a[r][0] = _mm512_fmadd_ps(load_f16x16(x[r] + i), yv, a[r][0]);
        i += 16;
    }
    if (i < n) {
        const int j = (int)(i % 32) / 16;
        const __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        const __m512 yv = yf ? _mm512_maskz_loadu_ps(m, yf + i) : load_f16x16_mask(m, y + i);
        for (int r = 0; r < R; r++)
            a[r][j] = _mm512_fmadd_ps(load_f16x16_mask(m, x[r] + i), yv, a[r][j]);
    }
    __m512 v[ROWS_MAX];
    for (int r = 0; r < R; r++)
        v[r] = _mm512_add_ps(a[r][0], a[r][1]);
    reduce_rows(R, v, s);
}

/* Contract: kernels.h. */
void lm_vec_dot_f16_avx512(int64_t n, float *s, const void *x, const void *y) { dot_f16(1, n, s, x, 0, y, NULL); }

/* Contract: kernels.h (lm_vec_dot_rows_fn). y widened once into a stack
 * buffer (n <= 4096; longer rows convert y per group of rows), then groups of
 * 4 rows: every result has lm_vec_dot_f16_avx512's bits. */
void lm_vec_dot_rows_f16_avx512(int64_t n, int64_t nr, float *s, const void *x, size_t bx, const void *vy)
{
    enum { MAX_N = 4096 }; /* 16 KiB of widened y on the stack */
    const lm_fp16 *y = vy;
    float yf[MAX_N];
    const bool widen = n <= MAX_N;
    if (widen) {
        int64_t i = 0;
        for (; i + 16 <= n; i += 16)
            _mm512_storeu_ps(yf + i, load_f16x16(y + i));
        if (i < n) {
            const __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
            _mm512_mask_storeu_ps(yf + i, m, load_f16x16_mask(m, y + i));
        }
    }
    int64_t r = 0;
    for (; r + ROWS_MAX <= nr; r += ROWS_MAX)
        dot_f16(ROWS_MAX, n, s + r, (const char *)x + (size_t)r * bx, bx, y, widen ? yf : NULL);
    for (; r < nr; r++)
        dot_f16(1, n, s + r, (const char *)x + (size_t)r * bx, bx, y, widen ? yf : NULL);
}

/* ---- F16 tiles: R rows x Q widened y of their own lengths ----
 * Element i of query q goes to accumulator (i % 32) / 16, lane i % 16, in
 * increasing i: dot_f16's order. A step of 16 elements that is whole for q
 * is a plain FMA; the step holding q's last elements multiplies x zeroed
 * past the end by y zeroed past the end (dot_f16's masked tail: + 0 * 0);
 * later steps leave q's accumulators alone. Then a0 + a1 and the hsum tree
 * (hsum4 over 4 dots gives each hsum's bits). 4 rows x 4 queries: 32
 * accumulators, each 16-element half of a 32-element step in turn (4 x and
 * 1 y live), so a row's conversion serves 4 FMAs and a y load 4 (2 rows:
 * 2.3-2.7 G FMA/s per thread on Zen 4 in a one-thread P.V loop, 4 rows
 * 2.9-3.4 of a 3.2 peak; pp of 4096 tokens +2 % in-process). */
#define TILE_R 4

/* s[q][r0 + r] = the hsum of a0 + a1 of (row r, query q). */
static ALWAYS_INLINE void tile_store(const int R, const int Q, __m512 (*a)[LM_VEC_DOT_TILE_MAX][2], float *const *s,
                                     int64_t r0)
{
    __m512 v[TILE_R * LM_VEC_DOT_TILE_MAX];
    float out[TILE_R * LM_VEC_DOT_TILE_MAX];
    int nv = 0;
    for (int q = 0; q < Q; q++)
        for (int r = 0; r < R; r++)
            v[nv++] = _mm512_add_ps(a[r][q][0], a[r][q][1]);
    int k = 0;
    for (; k + 4 <= nv; k += 4)
        avx512_hsum4_ps(v[k], v[k + 1], v[k + 2], v[k + 3], out + k);
    for (; k < nv; k++)
        out[k] = avx512_hsum_ps(v[k]);
    for (int q = 0, t = 0; q < Q; q++)
        for (int r = 0; r < R; r++, t++)
            s[q][r0 + r] = out[t];
}

/* A tile's start: x[r] = row r, the accumulators zeroed, then every whole
 * 32-element step below n, each half's 16 lanes in turn (4 x and 1 y live);
 * returns where the steps stopped. */
static ALWAYS_INLINE int64_t tile_steps(const int R, const int Q, int64_t n, const void *vx, size_t bx,
                                        const float *const *y, const lm_fp16 **x,
                                        __m512 (*a)[LM_VEC_DOT_TILE_MAX][2])
{
    for (int r = 0; r < R; r++) {
        x[r] = row_at(vx, bx, r);
        for (int q = 0; q < Q; q++)
            a[r][q][0] = a[r][q][1] = _mm512_setzero_ps();
    }
    int64_t i = 0;
    for (; i + 32 <= n; i += 32)
        for (int h = 0; h < 2; h++) {
            __m512 xv[TILE_R];
            for (int r = 0; r < R; r++)
                xv[r] = load_f16x16(x[r] + i + 16 * h);
            for (int q = 0; q < Q; q++) {
                const __m512 yv = _mm512_loadu_ps(y[q] + i + 16 * h);
                for (int r = 0; r < R; r++)
                    a[r][q][h] = _mm512_fmadd_ps(xv[r], yv, a[r][q][h]);
            }
        }
    return i;
}

/* tile_f16 for queries of one length n, a multiple of 32 (K scores: n = d;
 * P.V of one query's heads): the whole steps alone. Without tile_f16's
 * partial-step loop in the function GCC keeps the accumulators in
 * registers (4096 K rows of 64, 4 queries, Zen 4: 1.82 against 0.67 G
 * FMA/s). */
static ALWAYS_INLINE void tile_f16_whole(const int R, const int Q, int64_t n, float *const *s, int64_t r0,
                                         const void *vx, size_t bx, const float *const *y)
{
    __m512 a[TILE_R][LM_VEC_DOT_TILE_MAX][2];
    const lm_fp16 *x[TILE_R];
    tile_steps(R, Q, n, vx, bx, y, x, a);
    tile_store(R, Q, a, s, r0);
}

static ALWAYS_INLINE void tile_f16(const int R, const int Q, int64_t nmin, int64_t nmax, const int64_t *len,
                                   float *const *s, int64_t r0, const void *vx, size_t bx, const float *const *y)
{
    __m512 a[TILE_R][LM_VEC_DOT_TILE_MAX][2];
    const lm_fp16 *x[TILE_R];
    int64_t i = tile_steps(R, Q, nmin, vx, bx, y, x, a); /* whole for every query */
    for (; i < nmax; i += 16) {
        const int j = (int)(i % 32) / 16;
        const __mmask16 mx = (__mmask16)(nmax - i >= 16 ? 0xFFFF : (1u << (nmax - i)) - 1);
        __m512 xv[TILE_R];
        for (int r = 0; r < R; r++)
            xv[r] = load_f16x16_mask(mx, x[r] + i);
        for (int q = 0; q < Q; q++) {
            if (i >= len[q])
                continue;
            if (i + 16 <= len[q]) {
                const __m512 yv = _mm512_loadu_ps(y[q] + i);
                for (int r = 0; r < R; r++)
                    a[r][q][j] = _mm512_fmadd_ps(xv[r], yv, a[r][q][j]);
            } else {
                const __mmask16 m = (__mmask16)((1u << (len[q] - i)) - 1);
                const __m512 yv = _mm512_maskz_loadu_ps(m, y[q] + i);
                for (int r = 0; r < R; r++)
                    a[r][q][j] = _mm512_fmadd_ps(_mm512_maskz_mov_ps(m, xv[r]), yv, a[r][q][j]);
            }
        }
    }
    tile_store(R, Q, a, s, r0);
}

static ALWAYS_INLINE void tile_rows_f16(const int Q, int64_t nr, const int64_t *len, float *const *s, const void *x,
                                        size_t bx, const float *const *y)
{
    int64_t nmin = len[0], nmax = len[0];
    for (int q = 1; q < Q; q++) {
        nmin = len[q] < nmin ? len[q] : nmin;
        nmax = len[q] > nmax ? len[q] : nmax;
    }
    int64_t r = 0;
    if (nmin == nmax && nmin % 32 == 0)
        for (; r + TILE_R <= nr; r += TILE_R)
            tile_f16_whole(TILE_R, Q, nmin, s, r, (const char *)x + (size_t)r * bx, bx, y);
    for (; r + TILE_R <= nr; r += TILE_R)
        tile_f16(TILE_R, Q, nmin, nmax, len, s, r, (const char *)x + (size_t)r * bx, bx, y);
    for (; r < nr; r++)
        tile_f16(1, Q, nmin, nmax, len, s, r, (const char *)x + (size_t)r * bx, bx, y);
}

/* Contract: kernels.h (lm_vec_dot_tile_fn); each s[q][r] has lm_vec_dot_f16_avx512's bits. */
void lm_vec_dot_tile_f16_avx512(int64_t nr, int nq, const int64_t *len, float *const *s, const void *x, size_t bx,
                                const void *const *yv)
{
    const float *const *y = (const float *const *)yv; /* widened F16 values (the tile's input form) */
    switch (nq) {
    case 4: tile_rows_f16(4, nr, len, s, x, bx, y); break;
    case 3: tile_rows_f16(3, nr, len, s, x, bx, y); break;
    case 2: tile_rows_f16(2, nr, len, s, x, bx, y); break;
    default: tile_rows_f16(1, nr, len, s, x, bx, y); break;
    }
}

/* ---- F16 scores from a transposed K: lanes are cells ----
 * dot_f16 puts element e in accumulator (e % 32) / 16, lane e % 16, FMA by
 * FMA from +0 in increasing e, then v = a0 + a1 and avx512_hsum_ps's tree:
 * h_l = v_l + v_l+8, s_l = h_l + h_l+4, (s_0 + s_2) + (s_1 + s_3). Here
 * register lane c is cell c of a block and "lane l" of that dot is a
 * separate chain: v_l = chain(e = l, l + 32, ...) + chain(e = l + 16, ...),
 * each an FMA of the broadcast y[e] by the row of the 16 cells' element e,
 * then the same tree over v_0..v_15 as whole registers. Every operation is
 * the one dot_f16 does on that cell's values, in the same order: the bits of
 * vec_dot, 16 cells per register and no horizontal sum. */

/* v_l of NQ queries (the sum of lane l's two chains). */
static ALWAYS_INLINE void kt_lane(const int NQ, int64_t d, const float *kt, const float *const *y, int l, __m512 *v)
{
    __m512 a0[LM_VEC_DOT_TILE_MAX], a1[LM_VEC_DOT_TILE_MAX];
    for (int q = 0; q < NQ; q++)
        a0[q] = a1[q] = _mm512_setzero_ps();
    for (int64_t e = l; e < d; e += 32) {
        const __m512 k0 = _mm512_loadu_ps(kt + e * 16);
        for (int q = 0; q < NQ; q++)
            a0[q] = _mm512_fmadd_ps(_mm512_set1_ps(y[q][e]), k0, a0[q]);
        if (e + 16 < d) {
            const __m512 k1 = _mm512_loadu_ps(kt + (e + 16) * 16);
            for (int q = 0; q < NQ; q++)
                a1[q] = _mm512_fmadd_ps(_mm512_set1_ps(y[q][e + 16]), k1, a1[q]);
        }
    }
    for (int q = 0; q < NQ; q++)
        v[q] = _mm512_add_ps(a0[q], a1[q]);
}

/* s_l = h_l + h_l+4 with h_l = v_l + v_l+8 (l < 4). */
static ALWAYS_INLINE void kt_quarter(const int NQ, int64_t d, const float *kt, const float *const *y, int l, __m512 *s)
{
    __m512 v[LM_VEC_DOT_TILE_MAX], w[LM_VEC_DOT_TILE_MAX], h[LM_VEC_DOT_TILE_MAX];
    kt_lane(NQ, d, kt, y, l, v);
    kt_lane(NQ, d, kt, y, l + 8, w);
    for (int q = 0; q < NQ; q++)
        h[q] = _mm512_add_ps(v[q], w[q]);
    kt_lane(NQ, d, kt, y, l + 4, v);
    kt_lane(NQ, d, kt, y, l + 12, w);
    for (int q = 0; q < NQ; q++)
        s[q] = _mm512_add_ps(h[q], _mm512_add_ps(v[q], w[q]));
}

static ALWAYS_INLINE void kt_blocks(const int NQ, int64_t d, int64_t nb, float *const *s, const float *kt,
                                    const float *const *y)
{
    for (int64_t b = 0; b < nb; b++, kt += d * 16) {
        __m512 s0[LM_VEC_DOT_TILE_MAX], s2[LM_VEC_DOT_TILE_MAX], t0[LM_VEC_DOT_TILE_MAX];
        kt_quarter(NQ, d, kt, y, 0, s0);
        kt_quarter(NQ, d, kt, y, 2, s2);
        for (int q = 0; q < NQ; q++)
            t0[q] = _mm512_add_ps(s0[q], s2[q]);
        kt_quarter(NQ, d, kt, y, 1, s0);
        kt_quarter(NQ, d, kt, y, 3, s2);
        for (int q = 0; q < NQ; q++)
            _mm512_storeu_ps(s[q] + 16 * b, _mm512_add_ps(t0[q], _mm512_add_ps(s0[q], s2[q])));
    }
}

/* Contract: kernels.h (lm_vec_dot_kt_fn); each score has lm_vec_dot_f16_avx512's bits. */
void lm_vec_dot_kt_f16_avx512(int64_t d, int64_t nb, int nq, float *const *s, const void *ktv, const void *const *yv)
{
    const float *kt = ktv, *const *y = (const float *const *)yv;
    switch (nq) {
    case 4: kt_blocks(4, d, nb, s, kt, y); break;
    case 3: kt_blocks(3, d, nb, s, kt, y); break;
    case 2: kt_blocks(2, d, nb, s, kt, y); break;
    default: kt_blocks(1, d, nb, s, kt, y); break;
    }
}

/* ---- BF16 (vdpbf16ps) ---- */

static ALWAYS_INLINE __m512bh load_bf16x32(const lm_bf16 *p) { return (__m512bh)_mm512_loadu_si512(p); }

/* s[r] = dot(row r, y) for r < R; element pairs in lane (i mod 128) / 2. */
static ALWAYS_INLINE void dot_bf16(const int R, int64_t n, float *s, const void *vx, size_t bx, const lm_bf16 *y)
{
    __m512 a[ROWS_MAX][4];
    const lm_bf16 *x[ROWS_MAX];
    for (int r = 0; r < R; r++) {
        x[r] = row_at(vx, bx, r);
        a[r][0] = a[r][1] = a[r][2] = a[r][3] = _mm512_setzero_ps();
    }
    int64_t i = 0;
    for (; i + 128 <= n; i += 128) {
        const __m512bh y0 = load_bf16x32(y + i), y1 = load_bf16x32(y + i + 32);
        const __m512bh y2 = load_bf16x32(y + i + 64), y3 = load_bf16x32(y + i + 96);
        for (int r = 0; r < R; r++) {
            avx512_prefetch(x[r] + i, 256);
            a[r][0] = _mm512_dpbf16_ps(a[r][0], load_bf16x32(x[r] + i), y0);
            a[r][1] = _mm512_dpbf16_ps(a[r][1], load_bf16x32(x[r] + i + 32), y1);
            a[r][2] = _mm512_dpbf16_ps(a[r][2], load_bf16x32(x[r] + i + 64), y2);
            a[r][3] = _mm512_dpbf16_ps(a[r][3], load_bf16x32(x[r] + i + 96), y3);
        }
    }
    for (; i + 32 <= n; i += 32) {
        const int j = (int)(i % 128) / 32;
        const __m512bh yv = load_bf16x32(y + i);
        for (int r = 0; r < R; r++)
            a[r][j] = _mm512_dpbf16_ps(a[r][j], load_bf16x32(x[r] + i), yv);
    }
    if (i < n) { /* masked-off elements load as +0: their products add nothing */
        const int j = (int)(i % 128) / 32;
        const __mmask32 m = (__mmask32)((1ull << (n - i)) - 1);
        const __m512bh yv = (__m512bh)_mm512_maskz_loadu_epi16(m, y + i);
        for (int r = 0; r < R; r++)
            a[r][j] = _mm512_dpbf16_ps(a[r][j], (__m512bh)_mm512_maskz_loadu_epi16(m, x[r] + i), yv);
    }
    __m512 v[ROWS_MAX];
    for (int r = 0; r < R; r++)
        v[r] = _mm512_add_ps(_mm512_add_ps(a[r][0], a[r][1]), _mm512_add_ps(a[r][2], a[r][3]));
    reduce_rows(R, v, s);
}

/* Contract: kernels.h; needs AVX512_BF16. */
void lm_vec_dot_bf16_avx512(int64_t n, float *s, const void *x, const void *y) { dot_bf16(1, n, s, x, 0, y); }

/* Contract: kernels.h (lm_vec_dot_rows_fn); needs AVX512_BF16. Each s[r]
 * has lm_vec_dot_bf16_avx512's bits. */
void lm_vec_dot_rows_bf16_avx512(int64_t n, int64_t nr, float *s, const void *x, size_t bx, const void *y)
{
    int64_t r = 0;
    for (; r + ROWS_MAX <= nr; r += ROWS_MAX)
        dot_bf16(ROWS_MAX, n, s + r, (const char *)x + (size_t)r * bx, bx, y);
    for (; r < nr; r++)
        dot_bf16(1, n, s + r, (const char *)x + (size_t)r * bx, bx, y);
}
