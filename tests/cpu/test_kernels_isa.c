/* test_kernels_isa.c - every ISA kernel slot against its generic version on
 * crafted inputs (test_kernels.c covers random data and llama.cpp fixtures).
 *
 * 1. vec_dot of every overridden type, three kinds of input, 1..33 blocks
 *    (every unroll tail) or 0..4099 elements, pointers at their natural
 *    alignment only:
 *    - "exact": all scales 1, small integer codes: every partial sum is an
 *      integer below 2^24, so the ISA result must equal generic bit for bit
 *      (catches any decoding or tail error, whatever the tolerance);
 *    - "random": random bytes as weight blocks (every code and scale value,
 *      Q8 codes -128 included), random finite scales, activations in [-127, 127];
 *    - "extreme": all weight bytes 0xFF or 0x00 with activation codes all
 *      +127 or -127 (largest pair sums: no int16 saturation allowed).
 *    Non-exact cases use test_kernels.c's bound 4.8e-7 (terms + 8) sum|x y|,
 *    except IQ2_XXS / IQ2_XS, bit-identical in every mode (and with
 *    activation codes of -128 too).
 *    Every level's table is tested whole (slots inherited from a lower level
 *    too); the counts of each level's own kernels are checked at the end.
 *    BF16 also with subnormal and underflowing terms (vdpbf16ps flushes them).
 *    vec_dot_rows of every table that has one: each row bit-identical to vec_dot;
 *    vec_dot_cols (IQ2) likewise for every column count; F32's equal to its
 *    own table's vec_dot for every column count and length.
 *    F16 dots over 32-aligned sub-ranges equal the full-row dot (attention).
 *    Each level's own vec_dot / vec_dot_rows with rows ending at a guard page
 *    (a read past the end faults).
 * 2. Encoders: Q8_K byte-identical to quant/'s reference on every input
 *    (ties for the max, zeros, subnormals, huge values, inf, NaN); Q8_1 same
 *    scales, codes within one step, s = fp16(d * sum(codes)), and the
 *    documented tie rounding of each path; BF16 bit-exact both ways on every
 *    pattern; Q4_0 / Q8_0 decoders bit-exact.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "core/fp16.h"
#include "cpu/kernels/kernels.h"
#include "lm_test.h"
#include "quant/blocks.h"
#include "quant/quant.h"
#include "util_cpu.h"

/* The fp16 scale fields of a block type (byte offsets; -1 ends the list). */
static const int *half_fields(enum lm_type t)
{
    static const int d0[] = {0, -1}, d0m2[] = {0, 2, -1}, q2k[] = {80, 82, -1}, q3k[] = {108, -1},
                     q6k[] = {208, -1}, none[] = {-1};
    switch (t) {
    case LM_TYPE_Q4_0: case LM_TYPE_Q5_0: case LM_TYPE_Q8_0: case LM_TYPE_IQ2_XXS: case LM_TYPE_IQ2_XS: return d0;
    case LM_TYPE_Q4_1: case LM_TYPE_Q5_1: case LM_TYPE_Q8_1: case LM_TYPE_Q4_K: case LM_TYPE_Q5_K: return d0m2;
    case LM_TYPE_Q2_K: return q2k;
    case LM_TYPE_Q3_K: return q3k;
    case LM_TYPE_Q6_K: return q6k;
    default: return none;
    }
}

enum mode { EXACT, RANDOM, EXTREME };

static void put_half(uint8_t *p, float v)
{
    lm_fp16 h = lm_fp32_to_fp16(v);
    memcpy(p, &h, 2);
}

/* n elements of a weight type in mode m. */
static void make_weights(struct uc_rng *r, enum lm_type t, uint8_t *x, int64_t n, enum mode m, int variant)
{
    if (t == LM_TYPE_F32 || t == LM_TYPE_F16 || t == LM_TYPE_BF16) {
        for (int64_t i = 0; i < n; i++) {
            float v = m == EXACT ? (float)((int)(uc_u64(r) % 17) - 8)
                    : m == RANDOM ? uc_float(r, -1.0f, 1.0f) * (uc_u64(r) % 4 == 0 ? 1000.0f : 1.0f)
                                  : (variant ? -3.0e15f : 1.5e15f);
            if (t == LM_TYPE_F32)
                memcpy(x + 4 * i, &v, 4);
            else if (t == LM_TYPE_F16)
                put_half(x + 2 * i, m == EXTREME ? (variant ? -65504.0f : 60000.0f) : v);
            else {
                lm_bf16 b = lm_fp32_to_bf16(v);
                memcpy(x + 2 * i, &b, 2);
            }
        }
        return;
    }
    const size_t bs = lm_type_size(t), nb = (size_t)(n / lm_type_blck(t));
    for (size_t b = 0; b < nb; b++) {
        uint8_t *blk = x + b * bs;
        for (size_t i = 0; i < bs; i++)
            blk[i] = m == EXTREME ? (variant ? 0x00 : 0xFF) : (uint8_t)uc_u64(r);
        for (const int *f = half_fields(t); *f >= 0; f++)
            put_half(blk + *f, m == RANDOM ? uc_float(r, -2.0f, 2.0f) : 1.0f);
    }
}

/* n elements of an activation (dot) type in mode m; Q8 codes in [-127, 127]
 * (|code| <= 2 in EXACT mode), Q8_1 s and Q8_K bsums consistent with them. */
static void make_acts(struct uc_rng *r, enum lm_type vt, uint8_t *y, int64_t n, enum mode m, int variant)
{
    if (vt == LM_TYPE_F32 || vt == LM_TYPE_F16 || vt == LM_TYPE_BF16) {
        make_weights(r, vt, y, n, m, !variant);
        return;
    }
    const bool k = vt == LM_TYPE_Q8_K;
    const size_t bs = lm_type_size(vt), qk = k ? LM_QK_K : LM_QK, off = k ? 4 : vt == LM_TYPE_Q8_1 ? 4 : 2;
    for (size_t b = 0; b < (size_t)(n / (int64_t)qk); b++) {
        uint8_t *blk = y + b * bs;
        int sum = 0;
        for (size_t i = 0; i < qk; i++) {
            int q = m == EXACT    ? (int)(uc_u64(r) % 5) - 2
                    : m == RANDOM ? (int)(uc_u64(r) % 255) - 127
                                  : (variant ? -127 : 127);
            blk[off + i] = (uint8_t)(int8_t)q;
            sum += q;
        }
        float d = m == RANDOM ? uc_float(r, -0.05f, 0.05f) : 1.0f;
        if (k) {
            memcpy(blk, &d, 4);
            for (int j = 0; j < 16; j++) {
                int16_t s = 0;
                for (int i = 0; i < 16; i++)
                    s = (int16_t)(s + (int8_t)blk[4 + 16 * j + i]);
                memcpy(blk + 4 + LM_QK_K + 2 * j, &s, 2);
            }
        } else {
            put_half(blk, d);
            if (vt == LM_TYPE_Q8_1)
                put_half(blk + 2, lm_fp16_to_fp32(lm_fp32_to_fp16(d)) * (float)sum);
        }
    }
}

/* One case: returns true when the ISA result is acceptable. */
static bool dot_case(const struct lm_cpu_kernels *k, const struct lm_cpu_kernels *g, enum lm_type t, int64_t n,
                     enum mode m, int variant, struct uc_rng *r)
{
    const enum lm_type vt = g->type[t].vec_dot_type;
    const bool blocked = lm_type_blck(t) > 1;
    /* natural alignment only: 2 bytes past a 64-byte boundary (4 for Q8_K and F32) */
    void *x = uc_alloc(lm_row_size(t, n) + 8, t == LM_TYPE_F32 ? 4 : 2);
    void *y = uc_alloc(lm_row_size(vt, n) + 8, vt == LM_TYPE_F32 || vt == LM_TYPE_Q8_K ? 4 : 2);
    make_weights(r, t, x, n, m, variant);
    make_acts(r, vt, y, n, m, variant);
    float a = NAN, b = NAN;
    g->type[t].vec_dot(n, &a, x, y);
    k->type[t].vec_dot(n, &b, x, y);
    bool ok;
    double tol = 0.0;
    if (m == EXACT || t == LM_TYPE_IQ2_XXS || t == LM_TYPE_IQ2_XS) { /* IQ2: same bits on every input */
        ok = memcmp(&a, &b, sizeof a) == 0;
    } else {
        float *xf = malloc(sizeof(float) * (size_t)(n + 1)), *yf = malloc(sizeof(float) * (size_t)(n + 1));
        uc_decode(t, x, xf, n);
        uc_decode(vt, y, yf, n);
        const double terms = (double)(blocked ? n / lm_type_blck(t) : n / 8) + 8.0;
        tol = 4.8e-7 * terms * uc_dot_scale(xf, yf, n, blocked ? lm_type_blck(t) : 1) + 1e-30;
        ok = fabs((double)a - b) <= tol;
        free(xf);
        free(yf);
    }
    if (!ok)
        fprintf(stderr, "%s vec_dot %s n=%lld mode %d/%d: %.9g vs generic %.9g (tol %.3g)\n", lm_cpu_isa_name(k->isa),
                lm_type_name(t), (long long)n, (int)m, variant, b, a, tol);
    uc_free(x);
    uc_free(y);
    return ok;
}

static void isa_dots(const struct lm_cpu_kernels *k, const struct lm_cpu_kernels *g, enum lm_type t, struct uc_rng *r)
{
    static const int64_t blocks[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 33};
    static const int64_t extra[] = {127, 128, 129, 1000, 1023, 4099};
    const bool blocked = lm_type_blck(t) > 1;
    int bad = 0, cases = 0;
    const int ns = blocked ? 10 : 71 + 6;
    for (int si = 0; si < ns; si++) {
        const int64_t n = blocked ? blocks[si] * lm_type_blck(t) : si <= 70 ? si : extra[si - 71];
        for (int m = EXACT; m <= EXTREME; m++) {
            for (int v = 0; v < 2; v++, cases++)
                bad += !dot_case(k, g, t, n, (enum mode)m, v, r);
        }
    }
    CHECKF(bad == 0, "%s vec_dot %s: %d of %d crafted cases differ from generic", lm_cpu_isa_name(k->isa),
           lm_type_name(t), bad, cases);
}

/* IQ2 with Q8_K activation codes of every value, -128 included (a sign
 * applied to the activation in int8 would turn -128 into -128, not +128):
 * random weight blocks, every level bit-identical to generic. */
static void isa_iq2_full_range(const struct lm_cpu_kernels *k, const struct lm_cpu_kernels *g, enum lm_type t,
                               struct uc_rng *r)
{
    int bad = 0;
    for (int64_t nb = 1; nb <= 9; nb += 4) {
        const int64_t n = nb * LM_QK_K;
        uint8_t *x = uc_alloc(lm_row_size(t, n), 2);
        struct lm_block_q8_K *y = uc_alloc(lm_row_size(LM_TYPE_Q8_K, n), 4);
        make_weights(r, t, x, n, RANDOM, 0);
        for (int64_t b = 0; b < nb; b++) {
            y[b].d = uc_float(r, -0.05f, 0.05f);
            for (int i = 0; i < LM_QK_K; i++)
                y[b].qs[i] = (int8_t)(uc_u64(r) % 3 == 0 ? -128 : (int)(uc_u64(r) % 256) - 128);
            for (int j = 0; j < 16; j++) {
                int s = 0;
                for (int i = 0; i < 16; i++)
                    s += y[b].qs[16 * j + i];
                y[b].bsums[j] = (int16_t)s;
            }
        }
        float a = NAN, c = NAN;
        g->type[t].vec_dot(n, &a, x, y);
        k->type[t].vec_dot(n, &c, x, y);
        bad += memcmp(&a, &c, sizeof a) != 0;
        uc_free(x);
        uc_free(y);
    }
    CHECKF(bad == 0, "%s vec_dot %s with -128 activations differs from generic (%d)", lm_cpu_isa_name(k->isa),
           lm_type_name(t), bad);
}

/* vec_dot_cols of a float type (F32): for 1..16 columns and lengths around
 * every unroll boundary, each result bit-identical to the table's own vec_dot
 * (float sums differ between ISAs, so not to generic's). */
static void isa_dot_cols_float(const struct lm_cpu_kernels *k, enum lm_type t, struct uc_rng *r)
{
    enum { NMAX = 1100 };
    float *x = uc_alloc(sizeof(float) * NMAX, 4), *y[LM_VEC_DOT_COLS_MAX];
    for (int i = 0; i < NMAX; i++)
        x[i] = uc_float(r, -2.0f, 2.0f);
    for (int c = 0; c < LM_VEC_DOT_COLS_MAX; c++) {
        y[c] = uc_alloc(sizeof(float) * NMAX, (size_t)(c % 3) * 4);
        for (int i = 0; i < NMAX; i++)
            y[c][i] = uc_float(r, -2.0f, 2.0f);
    }
    static const int ns[] = {1, 7, 8, 9, 31, 32, 33, 40, 63, 64, 65, 100, 511, 512, 513, 1100};
    int bad = 0;
    for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++)
        for (int nc = 1; nc <= LM_VEC_DOT_COLS_MAX; nc++) {
            float got[LM_VEC_DOT_COLS_MAX + 1], *outs[LM_VEC_DOT_COLS_MAX];
            for (int c = 0; c < nc; c++)
                outs[c] = &got[c];
            got[nc] = 1234.5f;
            k->type[t].vec_dot_cols(ns[a], nc, outs, x, (const void *const *)y);
            for (int c = 0; c < nc; c++) {
                float want = NAN;
                k->type[t].vec_dot(ns[a], &want, x, y[c]);
                bad += memcmp(&want, &got[c], sizeof want) != 0;
            }
            bad += got[nc] != 1234.5f;
        }
    CHECKF(bad == 0, "%s %s vec_dot_cols differs from vec_dot (%d)", lm_cpu_isa_name(k->isa), lm_type_name(t), bad);
    uc_free(x);
    for (int c = 0; c < LM_VEC_DOT_COLS_MAX; c++)
        uc_free(y[c]);
}

/* vec_dot_cols of every table that has one: for 1..16 columns (activation
 * codes of every value, -128 included) each result bit-identical to the
 * table's vec_dot and to generic. */
static void isa_dot_cols(const struct lm_cpu_kernels *k, const struct lm_cpu_kernels *g, enum lm_type t,
                         struct uc_rng *r)
{
    const int64_t nb = 3, n = nb * LM_QK_K;
    uint8_t *x = uc_alloc(lm_row_size(t, n), 2);
    struct lm_block_q8_K *y[LM_VEC_DOT_COLS_MAX];
    make_weights(r, t, x, n, RANDOM, 0);
    for (int c = 0; c < LM_VEC_DOT_COLS_MAX; c++) {
        y[c] = uc_alloc(lm_row_size(LM_TYPE_Q8_K, n), 4);
        make_acts(r, LM_TYPE_Q8_K, (uint8_t *)y[c], n, c % 4 == 3 ? EXTREME : RANDOM, c % 8 == 7);
        if (c % 4 == 1)
            for (int64_t i = 0; i < n; i += 3)
                y[c][i / LM_QK_K].qs[i % LM_QK_K] = -128;
    }
    int bad = 0;
    for (int nc = 1; nc <= LM_VEC_DOT_COLS_MAX; nc++) {
        float got[LM_VEC_DOT_COLS_MAX + 1], *outs[LM_VEC_DOT_COLS_MAX];
        for (int c = 0; c < nc; c++)
            outs[c] = &got[c];
        got[nc] = 1234.5f;
        k->type[t].vec_dot_cols(n, nc, outs, x, (const void *const *)y);
        for (int c = 0; c < nc; c++) {
            float a = NAN, b = NAN;
            k->type[t].vec_dot(n, &a, x, y[c]);
            g->type[t].vec_dot(n, &b, x, y[c]);
            bad += memcmp(&a, &got[c], sizeof a) != 0 || memcmp(&b, &got[c], sizeof b) != 0;
        }
        bad += got[nc] != 1234.5f;
    }
    CHECKF(bad == 0, "%s %s vec_dot_cols differs from vec_dot (%d)", lm_cpu_isa_name(k->isa), lm_type_name(t), bad);
    uc_free(x);
    for (int c = 0; c < LM_VEC_DOT_COLS_MAX; c++)
        uc_free(y[c]);
}

/* A buffer whose last byte is followed by an inaccessible page: a kernel
 * that reads past the end of its row faults. */
struct guarded {
    uint8_t *base, *p;
    size_t len;
};

static bool guard_alloc(struct guarded *g, size_t bytes)
{
    const size_t page = 4096;
    g->len = (bytes + page - 1) / page * page + page;
    g->base = mmap(NULL, g->len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (g->base == MAP_FAILED || mprotect(g->base + g->len - page, page, PROT_NONE) != 0)
        return false;
    g->p = g->base + g->len - page - bytes;
    return true;
}

/* vec_dot and vec_dot_rows with x (3 rows) and y each ending at a guard page,
 * at every length of isa_dots: no read past the end. */
static void isa_guard(const struct lm_cpu_kernels *k, enum lm_type t, struct uc_rng *r)
{
    static const int64_t blocks[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 33};
    const enum lm_type vt = k->type[t].vec_dot_type;
    const bool blocked = lm_type_blck(t) > 1;
    for (int si = 0; si < (blocked ? 10 : 131); si++) {
        const int64_t n = blocked ? blocks[si] * lm_type_blck(t) : si;
        const size_t bx = lm_row_size(t, n), by = lm_row_size(vt, n);
        struct guarded gx, gy;
        if (!guard_alloc(&gx, 3 * bx) || !guard_alloc(&gy, by)) {
            CHECKF(0, "mmap failed");
            return;
        }
        /* page end minus whole rows: natural alignment (row sizes are multiples of it) */
        uint8_t *x = gx.p, *y = gy.p;
        make_weights(r, t, x, n, RANDOM, 0);
        make_weights(r, t, x + bx, n, RANDOM, 0);
        make_weights(r, t, x + 2 * bx, n, RANDOM, 0);
        make_acts(r, vt, y, n, RANDOM, 0);
        float s[3];
        k->type[t].vec_dot(n, &s[0], x + 2 * bx, y);
        if (k->type[t].vec_dot_rows)
            k->type[t].vec_dot_rows(n, 3, s, x, bx, y);
        munmap(gx.base, gx.len);
        munmap(gy.base, gy.len);
    }
    lm_test_pass++;
}

/* ---- 2. encoders and decoders ---- */

/* Q8_K test input: blocks of random data and blocks of special values. */
static void q8_K_input(struct uc_rng *r, float *x, int nb)
{
    for (int b = 0; b < nb; b++) {
        float *v = x + 256 * b;
        for (int i = 0; i < 256; i++)
            v[i] = uc_float(r, -2.0f, 2.0f);
        switch (b % 12) {
        case 1: for (int i = 0; i < 256; i++) v[i] = 0.75f; break;                /* all equal */
        case 2: for (int i = 0; i < 256; i++) v[i] = i % 2 ? 3.0f : -3.0f; break; /* tie: first is -3 */
        case 3: v[200] = 9.0f; v[17] = -9.0f; v[18] = 9.0f; break;                /* first max is -9 */
        case 4: memset(v, 0, 256 * sizeof(float)); v[5] = -0.0f; break;           /* zero block */
        case 5: for (int i = 0; i < 256; i++) v[i] = (float)(i - 128) * 1e-40f; break; /* subnormals */
        case 6: v[3] = 3.0e38f; v[4] = -2.9e38f; break;                           /* huge */
        case 7: v[9] = INFINITY; break;
        case 8: v[0] = NAN; v[100] = -NAN; break;                                 /* NaNs are skipped */
        case 9: for (int i = 0; i < 256; i++) v[i] = NAN; break;
        case 10: for (int i = 0; i < 256; i++) v[i] = (float)(i % 7) * 0.5f - 1.5f; break; /* exact halves */
        default: break;
        }
    }
}

static void isa_q8_K(const struct lm_cpu_kernels *k, const struct lm_cpu_kernels *g, struct uc_rng *r)
{
    enum { NB = 37 };
    float *x = uc_alloc(NB * 256 * sizeof(float), 4);
    uint8_t *a = uc_alloc(NB * 292 + 64, 4), *b = uc_alloc(NB * 292 + 64, 4);
    q8_K_input(r, x, NB);
    int bad = 0;
    for (int nb = 1; nb <= NB; nb += 4) { /* 1, 5, ... blocks */
        memset(a, 0x5A, NB * 292 + 64);
        memset(b, 0xA5, NB * 292 + 64);
        g->type[LM_TYPE_Q8_K].from_float(x + 256 * (NB - nb), a, 256 * nb);
        k->type[LM_TYPE_Q8_K].from_float(x + 256 * (NB - nb), b, 256 * nb);
        for (int blk = 0; blk < nb; blk++) {
            const bool differ = memcmp(a + 292 * blk, b + 292 * blk, 292) != 0;
            if (differ && bad++ < 3)
                fprintf(stderr, "q8_K block %d (kind %d) differs\n", blk, (NB - nb + blk) % 12);
        }
        bad += b[nb * 292] != 0xA5; /* wrote nothing past n */
    }
    CHECKF(bad == 0, "%s q8_K encoder differs from the reference (%d)", lm_cpu_isa_name(k->isa), bad);
    uc_free(x);
    uc_free(a);
    uc_free(b);
}

/* s of every block equals fp16(d * sum(codes)) with d = amax/127 unrounded. */
static int q8_1_bad_sums(const float *x, const uint8_t *y, int nb)
{
    int bad = 0;
    for (int b = 0; b < nb; b++) {
        float amax = 0.0f;
        for (int i = 0; i < 32; i++)
            amax = fmaxf(amax, fabsf(x[32 * b + i]));
        int sum = 0;
        for (int i = 0; i < 32; i++)
            sum += (int8_t)y[36 * b + 4 + i];
        lm_fp16 s;
        memcpy(&s, y + 36 * b + 2, 2);
        bad += s != lm_fp32_to_fp16(amax / 127.f * (float)sum);
    }
    return bad;
}

static void isa_q8_1(const struct lm_cpu_kernels *k, const struct lm_cpu_kernels *g, struct uc_rng *r)
{
    enum { NB = 97 };
    float *x = uc_alloc(NB * 32 * sizeof(float), 4);
    uint8_t *a = uc_alloc(NB * 36, 2), *b = uc_alloc(NB * 36, 2);
    for (int i = 0; i < NB * 32; i++)
        x[i] = uc_float(r, -3.0f, 3.0f) * (i % 64 == 5 ? 100.0f : 1.0f);
    for (int i = 0; i < 32; i++) /* an all-zero block */
        x[32 * 7 + i] = 0.0f;
    g->type[LM_TYPE_Q8_1].from_float(x, a, NB * 32);
    k->type[LM_TYPE_Q8_1].from_float(x, b, NB * 32);
    int d_bad = 0, far = 0, diff = 0;
    for (int blk = 0; blk < NB; blk++) {
        d_bad += memcmp(a + 36 * blk, b + 36 * blk, 2) != 0;
        for (int j = 0; j < 32; j++) {
            int dq = (int8_t)a[36 * blk + 4 + j] - (int8_t)b[36 * blk + 4 + j];
            diff += dq != 0;
            far += dq > 1 || dq < -1;
        }
    }
    CHECKF(d_bad == 0 && far == 0 && diff <= NB * 32 / 100, "%s q8_1 encoder vs generic: %d scales, %d far, %d differ",
           lm_cpu_isa_name(k->isa), d_bad, far, diff);
    CHECKF(q8_1_bad_sums(x, a, NB) == 0, "generic q8_1: s != fp16(d * sum)");
    CHECKF(q8_1_bad_sums(x, b, NB) == 0, "%s q8_1: s != fp16(d * sum)", lm_cpu_isa_name(k->isa));

    /* ties: amax = 127 gives 127/amax = 1/d = 1; 2.5, -3.5, 0.5 are exact halves */
    float t[32] = {127.0f, 2.5f, -3.5f, 0.5f, -0.5f, 1.5f};
    const int8_t away[6] = {127, 3, -4, 1, -1, 2}, even[6] = {127, 2, -4, 0, 0, 2};
    g->type[LM_TYPE_Q8_1].from_float(t, a, 32);
    k->type[LM_TYPE_Q8_1].from_float(t, b, 32);
    CHECKF(memcmp(a + 4, away, 6) == 0, "generic q8_1 does not round half away from zero");
    /* every SIMD level's Q8_1 encoder is ggml's x86 one (an AVX-512 table keeps the AVX2 encoder) */
    CHECKF(memcmp(b + 4, k->from_float_isa[LM_TYPE_Q8_1] != LM_ISA_GENERIC ? even : away, 6) == 0,
           "%s q8_1 tie rounding not as documented", lm_cpu_isa_name(k->isa));
    uc_free(x);
    uc_free(a);
    uc_free(b);
}

/* BF16 both ways, bit-exact: every bf16 pattern, random float patterns
 * (NaN, inf, subnormals), exact ties, every tail length. */
static void isa_bf16(const struct lm_cpu_kernels *k, const struct lm_cpu_kernels *g, struct uc_rng *r)
{
    enum { N = 65536 + 21 };
    lm_bf16 *h = uc_alloc(N * 2, 2), *h2 = uc_alloc(N * 2 + 64, 2);
    float *a = uc_alloc(N * 4, 4), *b = uc_alloc(N * 4 + 64, 4);
    for (int i = 0; i < N; i++)
        h[i] = (lm_bf16)i;
    int bad = 0;
    for (int64_t n = N; n >= N - 17; n--) {
        g->type[LM_TYPE_BF16].to_float(h + (N - n), a, n);
        k->type[LM_TYPE_BF16].to_float(h + (N - n), b, n);
        bad += memcmp(a, b, (size_t)n * 4) != 0;
    }
    CHECKF(bad == 0, "%s bf16->fp32 differs from generic (%d)", lm_cpu_isa_name(k->isa), bad);

    uint32_t *bits = (uint32_t *)a;
    for (int i = 0; i < N; i++)
        bits[i] = (uint32_t)uc_u64(r);
    for (int i = 0; i < 4096; i++) /* exact ties, both parities */
        bits[i] = 0x3f800000u + ((uint32_t)i << 16) + 0x8000u;
    bad = 0;
    for (int64_t n = N; n >= N - 17; n--) {
        memset(h2, 0xEE, N * 2 + 64);
        g->type[LM_TYPE_BF16].from_float(a + (N - n), h, n);
        k->type[LM_TYPE_BF16].from_float(a + (N - n), h2, n);
        bad += memcmp(h, h2, (size_t)n * 2) != 0 || h2[n] != 0xEEEE;
    }
    CHECKF(bad == 0, "%s fp32->bf16 differs from generic (%d)", lm_cpu_isa_name(k->isa), bad);
    uc_free(h);
    uc_free(h2);
    uc_free(a);
    uc_free(b);
}

/* A block decoder (Q4_0, Q8_0) on random blocks with extreme scales. */
static void isa_decode(const struct lm_cpu_kernels *k, const struct lm_cpu_kernels *g, enum lm_type t, struct uc_rng *r)
{
    enum { NB = 41 };
    const size_t bs = lm_type_size(t);
    uint8_t *x = uc_alloc(NB * bs, 2);
    float *a = uc_alloc(NB * 32 * 4, 4), *b = uc_alloc(NB * 32 * 4 + 64, 4);
    static const float dv[] = {65504.0f, -65504.0f, 6.1e-5f, 5.96e-8f, -0.0f, 0.0f, INFINITY, 0.3f};
    for (int blk = 0; blk < NB; blk++) {
        for (size_t i = 0; i < bs; i++)
            x[blk * bs + i] = (uint8_t)uc_u64(r);
        put_half(x + blk * bs, blk < 8 ? dv[blk] : uc_float(r, -4.0f, 4.0f));
    }
    int bad = 0;
    for (int nb = 1; nb <= NB; nb += 8) {
        memset(b, 0x77, NB * 32 * 4 + 64);
        g->type[t].to_float(x, a, 32 * nb);
        k->type[t].to_float(x, b, 32 * nb);
        bad += memcmp(a, b, (size_t)nb * 128) != 0 || ((uint8_t *)b)[nb * 128] != 0x77;
    }
    CHECKF(bad == 0, "%s %s to_float differs from generic (%d)", lm_cpu_isa_name(k->isa), lm_type_name(t), bad);
    uc_free(x);
    uc_free(a);
    uc_free(b);
}

/* BF16 dots with subnormal and underflowing terms (vdpbf16ps treats
 * subnormal inputs as 0 and flushes subnormal results): activations from the
 * table's own encoder, the ISA bound plus the flushed terms (< 2^-126 |y| each,
 * bounded by 1e-30 here), for lengths around every step. */
static void isa_bf16_tiny(const struct lm_cpu_kernels *k, const struct lm_cpu_kernels *g, struct uc_rng *r)
{
    enum { N = 300 };
    lm_bf16 *x = uc_alloc(N * 2, 2), *y = uc_alloc(N * 2, 2);
    float *f = uc_alloc(N * 4, 4), *xf = uc_alloc(N * 4, 4), *yf = uc_alloc(N * 4, 4);
    int bad = 0;
    for (int n = 1; n <= N; n += 7) {
        for (int i = 0; i < n; i++) { /* normal, subnormal (bits 0x0001..0x007F), and tiny normal values */
            const int kind = (int)(uc_u64(r) % 3);
            x[i] = kind == 0 ? lm_fp32_to_bf16(uc_float(r, -1.0f, 1.0f))
                 : kind == 1 ? (lm_bf16)((uc_u64(r) % 0x7F + 1) | (uc_u64(r) % 2 ? 0x8000u : 0u))
                             : lm_fp32_to_bf16(uc_float(r, -1.0f, 1.0f) * 1e-30f);
            f[i] = uc_u64(r) % 2 ? uc_float(r, -1.0f, 1.0f) : uc_float(r, -1.0f, 1.0f) * 1e-20f;
        }
        k->type[LM_TYPE_BF16].from_float(f, y, n);
        float a, b;
        g->type[LM_TYPE_BF16].vec_dot(n, &a, x, y);
        k->type[LM_TYPE_BF16].vec_dot(n, &b, x, y);
        uc_decode(LM_TYPE_BF16, x, xf, n);
        uc_decode(LM_TYPE_BF16, y, yf, n);
        const double tol = 4.8e-7 * ((double)n / 8 + 8.0) * uc_dot_scale(xf, yf, n, 1) + 1e-30;
        if (!(fabs((double)a - b) <= tol) && bad++ < 3)
            fprintf(stderr, "%s bf16 tiny n=%d: %.9g vs generic %.9g (tol %.3g)\n", lm_cpu_isa_name(k->isa), n, b, a,
                    tol);
    }
    CHECKF(bad == 0, "%s vec_dot bf16 with subnormal terms: %d bad", lm_cpu_isa_name(k->isa), bad);
    uc_free(x);
    uc_free(y);
    uc_free(f);
    uc_free(xf);
    uc_free(yf);
}

/* F16 lanes depend on the element index mod 32 only (ops/attention.c,
 * ATTN_BLOCK): the dot of a sub-range [a0, a1) with a0 a multiple of 32 (a1
 * rounded up to one, or the row end) equals, bit for bit, the full-row dot
 * whose p is zero outside it; so fused attention over an F16 KV cache gives
 * the unfused graph's bits. */
static void isa_f16_segments(const struct lm_cpu_kernels *k, struct uc_rng *r)
{
    enum { N = 517 };
    lm_fp16 *x = uc_alloc(N * 2, 2), *p = uc_alloc(N * 2, 2);
    int bad = 0, cases = 0;
    for (int i = 0; i < N; i++)
        x[i] = lm_fp32_to_fp16(uc_float(r, -2.0f, 2.0f));
    for (int n = 33; n <= N; n += 41) {
        for (int rep = 0; rep < 8; rep++, cases++) {
            const int lo = (int)(uc_u64(r) % (uint64_t)n), hi = lo + 1 + (int)(uc_u64(r) % (uint64_t)(n - lo));
            const int a0 = lo / 32 * 32, a1 = (hi + 31) / 32 * 32 < n ? (hi + 31) / 32 * 32 : n;
            for (int i = 0; i < n; i++)
                p[i] = i >= lo && i < hi ? lm_fp32_to_fp16(uc_float(r, 0.0f, 1.0f)) : 0;
            float full, part;
            k->type[LM_TYPE_F16].vec_dot(n, &full, x, p);
            k->type[LM_TYPE_F16].vec_dot(a1 - a0, &part, x + a0, p + a0);
            bad += memcmp(&full, &part, sizeof full) != 0;
        }
    }
    CHECKF(bad == 0, "%s vec_dot f16: %d of %d 32-aligned sub-range dots differ from the full row",
           lm_cpu_isa_name(k->isa), bad, cases);
    uc_free(x);
    uc_free(p);
}

/* vec_dot_rows (where a table has it) gives each row the bits of vec_dot:
 * lengths around the 32- and 8-element steps and past the stack buffer,
 * unaligned rows, row counts 1..7; nothing written past s[nr - 1]. */
static void isa_dot_rows(const struct lm_cpu_kernels *k, enum lm_type t, struct uc_rng *r)
{
    enum { NMAX = 4100, ROWS = 7 };
    const struct lm_cpu_type_kernels *tk = &k->type[t];
    const size_t al = t == LM_TYPE_F32 ? 4 : 2; /* natural alignment only */
    const size_t bx = lm_row_size(t, NMAX) + 3 * al;
    char *x = uc_alloc(bx * ROWS, al), *y = uc_alloc(lm_row_size(tk->vec_dot_type, NMAX), al);
    float *fx = uc_alloc(sizeof(float) * NMAX, 0);
    for (int row = 0; row < ROWS; row++) {
        for (int i = 0; i < NMAX; i++)
            fx[i] = uc_float(r, -2.0f, 2.0f);
        lm_quant_traits(t)->from_float(fx, x + (size_t)row * bx, NMAX);
    }
    for (int i = 0; i < NMAX; i++)
        fx[i] = uc_float(r, -2.0f, 2.0f);
    lm_quant_traits(tk->vec_dot_type)->from_float(fx, y, NMAX);
    static const int ns[] = {1, 7, 8, 31, 32, 33, 63, 64, 65, 128, 200, 511, 512, 513, 4095, 4096, 4097};
    int bad = 0;
    for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++) {
        for (int nr = 1; nr <= ROWS; nr += 3) {
            float s[ROWS + 1];
            s[nr] = 1234.5f;
            tk->vec_dot_rows(ns[a], nr, s, x, bx, y);
            for (int row = 0; row < nr; row++) {
                float want;
                tk->vec_dot(ns[a], &want, x + (size_t)row * bx, y);
                bad += memcmp(&want, &s[row], sizeof want) != 0;
            }
            bad += s[nr] != 1234.5f;
        }
    }
    CHECKF(bad == 0, "%s %s vec_dot_rows differs from vec_dot (%d)", lm_cpu_isa_name(k->isa), lm_type_name(t), bad);
    uc_free(x);
    uc_free(y);
    uc_free(fx);
}

/* vec_dot_tile of every table that has one: nr rows (1..9: the AVX-512 F16
 * tile's groups of 4 rows and the rows after them) against nq
 * y (1..4: widened F16 values, or Q8_0 rows) of their own lengths (0, tails,
 * whole steps; Q8_0 whole blocks, 1..3 blocks past steps of 4; the tile's
 * lengths equal or all different, up to 4100): every result bit-identical
 * to the table's vec_dot of that length (the row elements past a y's
 * length, read for the longer ones, hold random values: any product of
 * them in its sum would show), nothing written past nr. Returns the cases. */
static int isa_dot_tile(const struct lm_cpu_kernels *k, enum lm_type t, struct uc_rng *r)
{
    enum { NMAX = 4100, ROWS = 9, YQ = LM_VEC_DOT_TILE_MAX };
    const struct lm_cpu_type_kernels *tk = &k->type[t];
    const size_t bx = lm_row_size(t, NMAX + 40) + 6;
    char *x = uc_alloc(bx * ROWS, 2), *yq[YQ];
    float *fx = uc_alloc(sizeof(float) * (NMAX + 40), 0), *yf[YQ];
    for (int row = 0; row < ROWS; row++) {
        for (int i = 0; i < NMAX + 40; i++)
            fx[i] = uc_float(r, -2.0f, 2.0f);
        lm_quant_traits(t)->from_float(fx, x + (size_t)row * bx, NMAX + 40);
    }
    for (int q = 0; q < YQ; q++) {
        yq[q] = uc_alloc(lm_row_size(tk->vec_dot_type, NMAX), 2);
        yf[q] = uc_alloc(sizeof(float) * NMAX, 4);
        for (int i = 0; i < NMAX; i++)
            fx[i] = uc_float(r, -2.0f, 2.0f);
        lm_quant_traits(tk->vec_dot_type)->from_float(fx, yq[q], NMAX);
        lm_quant_traits(tk->vec_dot_type)->to_float(yq[q], yf[q], NMAX);
    }
    static const int64_t ns_f[] = {0, 1, 15, 16, 17, 31, 32, 33, 47, 64, 65, 100, 511, 513, 4095, 4096, 4100};
    static const int64_t ns_q[] = {0, 32, 64, 96, 128, 160, 192, 224, 256, 320, 4064, 4096};
    const bool blocks = tk->vec_dot_type == LM_TYPE_Q8_0; /* the tile reads Q8_0 rows, not widened values */
    const int64_t *ns = blocks ? ns_q : ns_f;
    const int nn = blocks ? (int)(sizeof ns_q / sizeof ns_q[0]) : (int)(sizeof ns_f / sizeof ns_f[0]);
    int bad = 0, cases = 0;
    for (int a = 0; a < nn; a++)
        for (int nq = 1; nq <= YQ; nq++)
            for (int nr = 1; nr <= ROWS; nr++, cases++) {
                int64_t len[YQ];
                for (int q = 0; q < nq; q++) /* equal, then spread over the list */
                    len[q] = (a + nq) % 3 == 0 ? ns[a] : ns[(a + 5 * q) % nn];
                float s[YQ][ROWS + 1], *outs[YQ];
                const void *ys[YQ];
                for (int q = 0; q < nq; q++) {
                    outs[q] = s[q];
                    ys[q] = blocks ? (const void *)yq[q] : (const void *)yf[q];
                    s[q][nr] = 1234.5f;
                }
                tk->vec_dot_tile(nr, nq, len, outs, x, bx, ys);
                for (int q = 0; q < nq; q++) {
                    for (int row = 0; row < nr; row++) {
                        float want;
                        tk->vec_dot(len[q], &want, x + (size_t)row * bx, yq[q]);
                        bad += memcmp(&want, &s[q][row], sizeof want) != 0;
                    }
                    bad += s[q][nr] != 1234.5f;
                }
            }
    CHECKF(bad == 0, "%s %s vec_dot_tile differs from vec_dot (%d of %d cases)", lm_cpu_isa_name(k->isa),
           lm_type_name(t), bad, cases);
    uc_free(x);
    uc_free(fx);
    for (int q = 0; q < YQ; q++) {
        uc_free(yq[q]);
        uc_free(yf[q]);
    }
    return cases;
}

/* vec_dot_kt of every table that has one: for d in multiples of 16 (16..256;
 * Q8_0: of 32) K rows of 1..3 blocks of 16 cells laid out by the table's
 * vec_dot_kt_pack (the last cells past the rows: zeros), against 1..4 y:
 * every score bit-identical to the table's vec_dot of that cell's row,
 * nothing written past the blocks. Returns the cases. */
static int isa_dot_kt(const struct lm_cpu_kernels *k, enum lm_type t, struct uc_rng *r)
{
    enum { DMAX = 256, NBMAX = 3, CELLS = NBMAX * LM_KT_CELLS, YQ = LM_VEC_DOT_TILE_MAX };
    const struct lm_cpu_type_kernels *tk = &k->type[t];
    const bool blocks = tk->vec_dot_type == LM_TYPE_Q8_0; /* y as Q8_0 rows, not widened values */
    const size_t bx = lm_row_size(t, DMAX);
    char *x = uc_alloc(bx * CELLS, 2), *yq[YQ];
    float *fx = uc_alloc(sizeof(float) * DMAX, 0), *yf[YQ];
    char *kt = uc_alloc(lm_kt_block_bytes(t, DMAX) * NBMAX, 64);
    for (int q = 0; q < YQ; q++) {
        yq[q] = uc_alloc(lm_row_size(tk->vec_dot_type, DMAX), 2);
        yf[q] = uc_alloc(sizeof(float) * DMAX, 4);
    }
    static const int64_t ds[] = {16, 32, 48, 64, 80, 96, 112, 128, 144, 160, 192, 256};
    int bad = 0, cases = 0;
    for (int a = 0; a < (int)(sizeof ds / sizeof ds[0]); a++) {
        const int64_t d = ds[a];
        if (d % lm_type_blck(t) != 0)
            continue;
        for (int c = 0; c < CELLS; c++) { /* every 7th cell has values up to 6e4 (F16's range) */
            const float m = c % 7 == 3 ? 6e4f : 2.0f;
            for (int i = 0; i < d; i++)
                fx[i] = uc_float(r, -m, m);
            lm_quant_traits(t)->from_float(fx, x + (size_t)c * bx, d);
        }
        for (int q = 0; q < YQ; q++) {
            for (int i = 0; i < d; i++)
                fx[i] = uc_float(r, -2.0f, 2.0f);
            lm_quant_traits(tk->vec_dot_type)->from_float(fx, yq[q], d);
            lm_quant_traits(tk->vec_dot_type)->to_float(yq[q], yf[q], d);
        }
        for (int nb = 1; nb <= NBMAX; nb++) {
            const int64_t n = nb * LM_KT_CELLS - (nb == 2 ? 5 : 0); /* a block with zero cells too */
            tk->vec_dot_kt_pack(d, n, x, bx, kt);
            for (int nq = 1; nq <= YQ; nq++, cases++) {
                float s[YQ][CELLS + 1], *outs[YQ];
                const void *ys[YQ];
                for (int q = 0; q < nq; q++) {
                    outs[q] = s[q];
                    ys[q] = blocks ? (const void *)yq[q] : (const void *)yf[q];
                    s[q][nb * LM_KT_CELLS] = 1234.5f;
                }
                tk->vec_dot_kt(d, nb, nq, outs, kt, ys);
                for (int q = 0; q < nq; q++) {
                    for (int c = 0; c < n; c++) {
                        float want;
                        tk->vec_dot(d, &want, x + (size_t)c * bx, yq[q]);
                        bad += memcmp(&want, &s[q][c], sizeof want) != 0;
                    }
                    bad += s[q][nb * LM_KT_CELLS] != 1234.5f;
                }
            }
        }
    }
    CHECKF(bad == 0, "%s %s vec_dot_kt differs from vec_dot (%d of %d cases)", lm_cpu_isa_name(k->isa),
           lm_type_name(t), bad, cases);
    uc_free(x);
    uc_free(fx);
    uc_free(kt);
    for (int q = 0; q < YQ; q++) {
        uc_free(yq[q]);
        uc_free(yf[q]);
    }
    return cases;
}

/* The AVX-512 IQ2 kernels by name (the AVX-512 table has them only on
 * non-AMD CPUs): a copy of that table with them installed, through the same
 * checks as the table slots. */
static void isa_iq2_avx512_named(const struct lm_cpu_kernels *g, struct uc_rng *r)
{
    const struct lm_cpu_kernels *k512 = lm_cpu_kernels_for(LM_ISA_AVX512);
    if (!k512)
        return;
    static struct lm_cpu_kernels k;
    k = *k512;
    k.type[LM_TYPE_IQ2_XXS].vec_dot = lm_vec_dot_iq2_xxs_q8_K_avx512;
    k.type[LM_TYPE_IQ2_XXS].vec_dot_cols = lm_vec_dot_cols_iq2_xxs_q8_K_avx512;
    k.type[LM_TYPE_IQ2_XS].vec_dot = lm_vec_dot_iq2_xs_q8_K_avx512;
    k.type[LM_TYPE_IQ2_XS].vec_dot_cols = lm_vec_dot_cols_iq2_xs_q8_K_avx512;
    for (enum lm_type t = LM_TYPE_IQ2_XXS; t <= LM_TYPE_IQ2_XS; t++) {
        isa_dots(&k, g, t, r);
        isa_iq2_full_range(&k, g, t, r);
        isa_dot_cols(&k, g, t, r);
        isa_guard(&k, t, r);
    }
}

/* vec_mad_rows of every table that has one (Q8_0: P.V over a quantized V
 * cache): nq items (1..4) of their own lengths (0, 1, tails, all 300 cells)
 * over rows of d channels (1..8 blocks), in place or through scattered
 * indices: each item within 1e-5 of sum |p x| of the double sum over its
 * decoded rows, bit-identical to the same item alone (nq 1), nothing written
 * past d. Returns the cases. */
static int isa_mad_rows(const struct lm_cpu_kernels *k, enum lm_type t, struct uc_rng *r)
{
    enum { CELLS = 300, DMAX = 256, NQ = LM_VEC_DOT_TILE_MAX };
    const size_t bx = lm_row_size(t, DMAX) + 6;
    char *x = uc_alloc(bx * CELLS, 2);
    float *fx = uc_alloc(sizeof(float) * DMAX * CELLS, 0), *p = uc_alloc(sizeof(float) * NQ * CELLS, 0);
    float *outs = uc_alloc(sizeof(float) * NQ * (DMAX + 1), 0), *alone = uc_alloc(sizeof(float) * (DMAX + 1), 0);
    int32_t idx[CELLS];
    static const int64_t ds[] = {32, 64, 96, 128, 160, 256};
    static const int64_t lens[] = {0, 1, 2, 7, 33, 299, 300};
    int bad = 0, cases = 0;
    for (size_t a = 0; a < sizeof ds / sizeof ds[0]; a++) {
        const int64_t d = ds[a];
        for (int c = 0; c < CELLS; c++) {
            for (int64_t e = 0; e < d; e++)
                alone[e] = uc_float(r, -3.0f, 3.0f);
            lm_quant_traits(t)->from_float(alone, x + (size_t)c * bx, d);
            lm_quant_traits(t)->to_float(x + (size_t)c * bx, fx + (size_t)c * DMAX, d);
        }
        for (int i = 0; i < NQ * CELLS; i++)
            p[i] = uc_float(r, 0.0f, 1.0f);
        for (int c = 0; c < CELLS; c++) /* scattered cells: every third, wrapping */
            idx[c] = (int32_t)((c * 3 + c / 100) % CELLS);
        for (int nq = 1; nq <= NQ; nq++) {
            for (int use_idx = 0; use_idx < 2; use_idx++) {
                int64_t len[NQ];
                float *out[NQ];
                const float *pq[NQ];
                for (int q = 0; q < nq; q++) {
                    len[q] = lens[(size_t)(q * 3 + nq + (int)a) % (sizeof lens / sizeof lens[0])];
                    out[q] = outs + (size_t)q * (DMAX + 1);
                    out[q][d] = 1234.5f;
                    pq[q] = p + (size_t)q * CELLS;
                }
                const int32_t *ix = use_idx ? idx : NULL;
                k->type[t].vec_mad_rows(d, nq, len, out, x, bx, ix, pq);
                for (int q = 0; q < nq; q++) {
                    bad += out[q][d] != 1234.5f;
                    alone[d] = 1234.5f;
                    k->type[t].vec_mad_rows(d, 1, &len[q], &alone, x, bx, ix, &pq[q]);
                    bad += memcmp(alone, out[q], (size_t)d * sizeof(float)) != 0 || alone[d] != 1234.5f;
                    for (int64_t e = 0; e < d; e++) {
                        double want = 0.0, mag = 0.0;
                        for (int64_t kk = 0; kk < len[q]; kk++) {
                            const double term = (double)pq[q][kk] * fx[(size_t)(ix ? ix[kk] : kk) * DMAX + (size_t)e];
                            want += term;
                            mag += fabs(term);
                        }
                        bad += !(fabs(out[q][e] - want) <= 1e-5 * mag + 1e-30);
                    }
                    cases++;
                }
            }
        }
    }
    CHECKF(bad == 0, "%s %s vec_mad_rows: %d bad values", lm_cpu_isa_name(k->isa), lm_type_name(t), bad);
    uc_free(x);
    uc_free(fx);
    uc_free(p);
    uc_free(outs);
    uc_free(alone);
    return cases;
}

int main(void)
{
    const struct lm_cpu_kernels *g = lm_cpu_kernels_for(LM_ISA_GENERIC);
    struct uc_rng r;
    uc_seed(&r, 2024);
    int tested = 0, own[LM_ISA_COUNT] = {0}, rows[LM_ISA_COUNT] = {0}, tiles[LM_ISA_COUNT] = {0};
    isa_mad_rows(g, LM_TYPE_Q8_0, &r); /* the generic one against the double sums too */
    for (int i = 1; i < LM_ISA_COUNT; i++) {
        const struct lm_cpu_kernels *k = lm_cpu_kernels_for((enum lm_cpu_isa)i);
        if (!k)
            continue;
        /* every SIMD slot of the table, also those inherited from a lower level */
        for (int t = 0; t < LM_TYPE_COUNT; t++) {
            if (k->vec_dot_isa[t] != LM_ISA_GENERIC) {
                isa_dots(k, g, (enum lm_type)t, &r);
                tested++;
                own[i] += k->vec_dot_isa[t] == (enum lm_cpu_isa)i;
            }
        }
        for (int t = 0; t < LM_TYPE_COUNT; t++)
            if (k->vec_dot_isa[t] == (enum lm_cpu_isa)i)
                isa_guard(k, (enum lm_type)t, &r);
        for (int t = 0; t < LM_TYPE_COUNT; t++)
            if (k->type[t].vec_dot_cols && t == LM_TYPE_F32)
                isa_dot_cols_float(k, (enum lm_type)t, &r);
            else if (k->type[t].vec_dot_cols)
                isa_dot_cols(k, g, (enum lm_type)t, &r);
        if (k->vec_dot_isa[LM_TYPE_IQ2_XXS] != LM_ISA_GENERIC)
            isa_iq2_full_range(k, g, LM_TYPE_IQ2_XXS, &r);
        if (k->vec_dot_isa[LM_TYPE_IQ2_XS] != LM_ISA_GENERIC)
            isa_iq2_full_range(k, g, LM_TYPE_IQ2_XS, &r);
        for (int t = 0; t < LM_TYPE_COUNT; t++)
            if (k->type[t].vec_dot_tile)
                tiles[i] += isa_dot_tile(k, (enum lm_type)t, &r);
        for (int t = 0; t < LM_TYPE_COUNT; t++)
            if (k->type[t].vec_dot_kt)
                tiles[i] += isa_dot_kt(k, (enum lm_type)t, &r);
        for (int t = 0; t < LM_TYPE_COUNT; t++)
            if (k->type[t].vec_mad_rows)
                tiles[i] += isa_mad_rows(k, (enum lm_type)t, &r);
        for (int t = 0; t < LM_TYPE_COUNT; t++)
            if (k->type[t].vec_dot_rows) {
                isa_dot_rows(k, (enum lm_type)t, &r);
                rows[i]++;
            }
        if (k->vec_dot_isa[LM_TYPE_BF16] != LM_ISA_GENERIC)
            isa_bf16_tiny(k, g, &r);
        isa_f16_segments(k, &r);
        if (k->from_float_isa[LM_TYPE_Q8_K])
            isa_q8_K(k, g, &r);
        if (k->from_float_isa[LM_TYPE_Q8_1])
            isa_q8_1(k, g, &r);
        if (k->from_float_isa[LM_TYPE_BF16] || k->to_float_isa[LM_TYPE_BF16])
            isa_bf16(k, g, &r);
        if (k->to_float_isa[LM_TYPE_Q4_0])
            isa_decode(k, g, LM_TYPE_Q4_0, &r);
        if (k->to_float_isa[LM_TYPE_Q8_0])
            isa_decode(k, g, LM_TYPE_Q8_0, &r);
        /* every override is tested here, in test_kernels.c (F16 both ways, Q8_0 encoder) or in
         * test_dequant_isa.c (the decoders of every block type, bit-exact) */
        for (int t = 0; t < LM_TYPE_COUNT; t++) {
            const bool ff = k->from_float_isa[t] && t != LM_TYPE_F16 && t != LM_TYPE_Q8_0 && t != LM_TYPE_Q8_1 &&
                            t != LM_TYPE_Q8_K && t != LM_TYPE_BF16;
            const bool tf = k->to_float_isa[t] && t != LM_TYPE_F16 && t != LM_TYPE_BF16 &&
                            lm_type_blck((enum lm_type)t) <= 1;
            CHECKF(!ff && !tf, "%s overrides an untested conversion of %s", lm_cpu_isa_name(k->isa),
                   lm_type_name((enum lm_type)t));
        }
    }
    isa_iq2_avx512_named(g, &r);
    /* each level present fills its own slots: AVX2 all 13 dot types (F16 rows);
     * AVX-512 all but F32 (init_avx512.c says why; BF16 only with AVX512_BF16;
     * F16, Q8_0 (, BF16) rows) */
    const struct lm_cpu_features *f = lm_cpu_features();
    if (lm_cpu_kernels_for(LM_ISA_AVX2))
        CHECKF(own[LM_ISA_AVX2] >= 13 && rows[LM_ISA_AVX2] >= 1, "avx2: %d vec_dot, %d vec_dot_rows overrides",
               own[LM_ISA_AVX2], rows[LM_ISA_AVX2]);
    if (lm_cpu_kernels_for(LM_ISA_AVX512))
        CHECKF(own[LM_ISA_AVX512] >= 11 + f->avx512bf16 && rows[LM_ISA_AVX512] >= 2 + f->avx512bf16,
               "avx512: %d vec_dot, %d vec_dot_rows overrides", own[LM_ISA_AVX512], rows[LM_ISA_AVX512]);
    if (f->avx2 && f->fma && f->f16c) /* this machine: all 13 dot types have AVX2 kernels */
        CHECKF(tested >= 13, "only %d vec_dot overrides", tested);
    if (lm_cpu_kernels_for(LM_ISA_AVX512))
        CHECKF(tiles[LM_ISA_AVX512] > 0, "avx512: no vec_dot_tile (F16, Q8_0) tested");
    printf("kernels_isa: %d vec_dot slots tested on crafted inputs (own kernels: avx2 %d, avx512 %d; "
           "vec_dot_rows: avx2 %d, avx512 %d; vec_dot_tile cases: avx512 %d, amx %d)\n",
           tested, own[LM_ISA_AVX2], own[LM_ISA_AVX512], rows[LM_ISA_AVX2], rows[LM_ISA_AVX512],
           tiles[LM_ISA_AVX512], tiles[LM_ISA_AMX]);
    return lm_test_summary();
}
