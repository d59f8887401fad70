/* test_kernels.c - the CPU kernel table: every kernel of every ISA this
 * machine runs, against llama.cpp's reference data and against its generic
 * version; and the backend's matmul at 1..4 threads on each ISA.
 *
 * 1. Reference data (shared/fixtures/quant, made by llama.cpp): for each
 *    weight type, vec_dot of llama.cpp-quantized rows with encoded activation
 *    rows must equal the double-precision dot of llama.cpp's dequantized
 *    floats with the decoded activations (a block-layout mistake would show as
 *    O(1) errors); the generic Q8_0 encoder must reproduce llama.cpp's Q8_0
 *    blocks byte for byte; the AVX2 one must agree except for ties.
 * 2. Each ISA slot vs its generic version on odd sizes (tails), unaligned
 *    pointers, random data; conversions bit-exact; the documented rounding of
 *    each Q8_0 encoder on exact ties.
 * 3. MUL_MAT / MUL_MAT_ID / a multi-op graph through the backend with 1..4
 *    threads (unclamped) per ISA: every thread count gives the same bits; the
 *    1-thread matmul equals direct vec_dot calls bit for bit; the dequantizing
 *    path (Q8_1/Q8_K weights) equals decode + F32 dot; IQ2 weights (llama.cpp's
 *    blocks, direct vec_dot) against llama.cpp's dequantization.
 */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fp16.h"
#include "cpu/cpu.h"
#include "cpu/cpu_internal.h"
#include "cpu/kernels/kernels.h"
#include "lm_test.h"
#include "quant/quant.h"
#include "util_cpu.h"

#define FIX_ROWS 10
#define FIX_COLS 512

static const enum lm_type dot_types[] = {
    LM_TYPE_F32,  LM_TYPE_F16,  LM_TYPE_BF16, LM_TYPE_Q4_0, LM_TYPE_Q4_1, LM_TYPE_Q5_0, LM_TYPE_Q5_1,
    LM_TYPE_Q8_0, LM_TYPE_Q2_K, LM_TYPE_Q3_K, LM_TYPE_Q4_K, LM_TYPE_Q5_K, LM_TYPE_Q6_K, LM_TYPE_IQ2_XXS,
    LM_TYPE_IQ2_XS,
};
#define N_DOT_TYPES ((int)(sizeof dot_types / sizeof dot_types[0]))

/* Fixture file stem of a type: its name in capitals ("q4_K" -> "Q4_K"). */
static const char *fixture_name(enum lm_type t)
{
    static char buf[16];
    const char *n = lm_type_name(t);
    size_t i = 0;
    for (; n[i] && i + 1 < sizeof buf; i++)
        buf[i] = (char)toupper((unsigned char)n[i]);
    buf[i] = 0;
    return buf;
}

static int n_isas(const struct lm_cpu_kernels *tables[LM_ISA_COUNT])
{
    int n = 0;
    for (int i = 0; i < LM_ISA_COUNT; i++)
        if ((tables[i] = lm_cpu_kernels_for((enum lm_cpu_isa)i)))
            n++;
    return n;
}

/* ---- 1. reference data ---- */

/* The dot llama.cpp's kernels compute, in double: sum x_i y_i, except that
 * for Q4_1/Q5_1 the min term uses the Q8_1 block's stored fp16 s = d*sum(q)
 * (not the exact sum of the decoded y), as ggml's dot does. */
static double expected_dot(enum lm_type t, const float *x, const void *xblocks, const float *y, const void *yq)
{
    double want = 0.0;
    if (t != LM_TYPE_Q4_1 && t != LM_TYPE_Q5_1) {
        for (int i = 0; i < FIX_COLS; i++)
            want += (double)x[i] * y[i];
        return want;
    }
    const size_t xs = lm_type_size(t), ys = lm_type_size(LM_TYPE_Q8_1);
    for (int b = 0; b < FIX_COLS / 32; b++) {
        lm_fp16 mh, sh; /* m: bytes 2..3 of a Q4_1/Q5_1 block; s: bytes 2..3 of a Q8_1 block */
        memcpy(&mh, (const char *)xblocks + b * xs + 2, 2);
        memcpy(&sh, (const char *)yq + b * ys + 2, 2);
        const double m = lm_fp16_to_fp32(mh);
        for (int i = 32 * b; i < 32 * b + 32; i++)
            want += ((double)x[i] - m) * y[i];
        want += m * lm_fp16_to_fp32(sh);
    }
    return want;
}

static void fixture_dots_type(const struct lm_cpu_kernels *k, enum lm_type t, const float *input)
{
    char rel[64];
    size_t nblk = 0, ndeq = 0;
    void *blocks = NULL;
    float *deq = NULL;
    if (t == LM_TYPE_F32) { /* F32 weights: the input itself */
        blocks = malloc(sizeof(float) * FIX_ROWS * FIX_COLS);
        deq = malloc(sizeof(float) * FIX_ROWS * FIX_COLS);
        memcpy(blocks, input, sizeof(float) * FIX_ROWS * FIX_COLS);
        memcpy(deq, input, sizeof(float) * FIX_ROWS * FIX_COLS);
        nblk = ndeq = sizeof(float) * FIX_ROWS * FIX_COLS;
    } else {
        snprintf(rel, sizeof rel, "quant/%s.blocks.bin", fixture_name(t));
        blocks = uc_fixture(rel, &nblk);
        snprintf(rel, sizeof rel, "quant/%s.dequant.f32", fixture_name(t));
        deq = uc_fixture(rel, &ndeq);
    }
    const size_t row = lm_row_size(t, FIX_COLS);
    CHECKF(blocks && deq && nblk == row * FIX_ROWS && ndeq == sizeof(float) * FIX_ROWS * FIX_COLS, "fixture %s",
           lm_type_name(t));
    if (!blocks || !deq || nblk != row * FIX_ROWS)
        goto out;
    const enum lm_type vt = k->type[t].vec_dot_type;
    void *yq = malloc(lm_row_size(vt, FIX_COLS));
    float yf[FIX_COLS];
    const int act_rows[] = {0, 8, 9};
    int bad = 0;
    for (int a = 0; a < 3; a++) {
        k->type[vt].from_float(input + act_rows[a] * FIX_COLS, yq, FIX_COLS);
        uc_decode(vt, yq, yf, FIX_COLS);
        for (int r = 0; r < FIX_ROWS; r++) {
            const float *x = deq + r * FIX_COLS;
            const double want = expected_dot(t, x, (const char *)blocks + (size_t)r * row, yf, yq);
            const double tol = 1e-5 * uc_dot_scale(x, yf, FIX_COLS, lm_type_blck(t) > 1 ? lm_type_blck(t) : 1) + 1e-30;
            float got = NAN;
            k->type[t].vec_dot(FIX_COLS, &got, (const char *)blocks + (size_t)r * row, yq);
            if (!(fabs(got - want) <= tol) && bad++ < 3)
                fprintf(stderr, "%s %s row %d act %d: got %.9g want %.9g tol %.3g\n", lm_cpu_isa_name(k->isa),
                        lm_type_name(t), r, act_rows[a], got, want, tol);
        }
    }
    CHECKF(bad == 0, "%s vec_dot %s vs llama.cpp dequant: %d bad", lm_cpu_isa_name(k->isa), lm_type_name(t), bad);
    free(yq);
out:
    free(blocks);
    free(deq);
}

/* The Q8_0 encoders against llama.cpp's reference Q8_0 blocks of the input. */
static void fixture_q8_0(const struct lm_cpu_kernels *k, const float *input)
{
    size_t n = 0;
    struct {
        lm_fp16 d;
        int8_t qs[32];
    } const *want = uc_fixture("quant/Q8_0.blocks.bin", &n);
    if (!want)
        return;
    const int nb = FIX_ROWS * FIX_COLS / 32;
    CHECK(n == (size_t)nb * 34);
    uint8_t *got = malloc(n);
    k->type[LM_TYPE_Q8_0].from_float(input, got, FIX_ROWS * FIX_COLS);
    if (k->from_float_isa[LM_TYPE_Q8_0] == LM_ISA_GENERIC) {
        CHECKF(memcmp(got, want, n) == 0, "%s: generic Q8_0 encoder differs from llama.cpp's reference blocks",
               lm_cpu_isa_name(k->isa));
    } else {
        /* same scales; codes may differ by one step on ties, rarely */
        int d_bad = 0, q_far = 0, q_diff = 0;
        for (int b = 0; b < nb; b++) {
            lm_fp16 d;
            memcpy(&d, got + 34 * b, 2);
            d_bad += d != want[b].d;
            for (int j = 0; j < 32; j++) {
                int diff = (int8_t)got[34 * b + 2 + j] - want[b].qs[j];
                q_diff += diff != 0;
                q_far += diff > 1 || diff < -1;
            }
        }
        CHECKF(d_bad == 0 && q_far == 0 && q_diff <= nb * 32 / 100, "%s Q8_0 encoder: %d scales, %d codes off by >1, %d differ",
               lm_cpu_isa_name(k->isa), d_bad, q_far, q_diff);
    }
    free(got);
    free((void *)want);
}

/* F16/BF16 row conversions against llama.cpp's bytes and floats, bit-exact. */
static void fixture_float_conv(const struct lm_cpu_kernels *k, enum lm_type t, const float *input)
{
    char rel[64];
    size_t nb = 0, nd = 0;
    snprintf(rel, sizeof rel, "quant/%s.blocks.bin", fixture_name(t));
    uint8_t *blocks = uc_fixture(rel, &nb);
    snprintf(rel, sizeof rel, "quant/%s.dequant.f32", fixture_name(t));
    float *deq = uc_fixture(rel, &nd);
    const int64_t n = FIX_ROWS * FIX_COLS;
    if (blocks && deq && nb == (size_t)n * 2 && nd == (size_t)n * 4) {
        uint8_t *enc = malloc(nb);
        float *dec = malloc(nd);
        k->type[t].from_float(input, enc, n);
        k->type[t].to_float(blocks, dec, n);
        CHECKF(memcmp(enc, blocks, nb) == 0, "%s %s from_float differs from llama.cpp", lm_cpu_isa_name(k->isa),
               lm_type_name(t));
        CHECKF(memcmp(dec, deq, nd) == 0, "%s %s to_float differs from llama.cpp", lm_cpu_isa_name(k->isa),
               lm_type_name(t));
        free(enc);
        free(dec);
    } else {
        CHECKF(false, "fixture %s", lm_type_name(t));
    }
    free(blocks);
    free(deq);
}

static void test_fixtures(void)
{
    size_t n = 0;
    float *input = uc_fixture("quant/Q8_0.input.f32", &n);
    CHECK(input && n == sizeof(float) * FIX_ROWS * FIX_COLS);
    if (!input || n != sizeof(float) * FIX_ROWS * FIX_COLS) {
        free(input);
        return;
    }
    const struct lm_cpu_kernels *tables[LM_ISA_COUNT];
    n_isas(tables);
    for (int i = 0; i < LM_ISA_COUNT; i++) {
        if (!tables[i])
            continue;
        for (int t = 0; t < N_DOT_TYPES; t++)
            fixture_dots_type(tables[i], dot_types[t], input);
        fixture_q8_0(tables[i], input);
        fixture_float_conv(tables[i], LM_TYPE_F16, input);
        fixture_float_conv(tables[i], LM_TYPE_BF16, input);
    }
    free(input);
}

/* ---- 2. every ISA slot vs generic ---- */

/* n random elements of type t at x (weights: encoded with quant/'s reference). */
static void random_row(struct uc_rng *r, enum lm_type t, void *x, int64_t n)
{
    float *f = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    for (int64_t i = 0; i < n; i++)
        f[i] = uc_float(r, -1.0f, 1.0f);
    if (t == LM_TYPE_F32) {
        memcpy(x, f, (size_t)n * sizeof(float));
    } else if (n > 0 && lm_quantize_requires_imatrix(t)) { /* IQ2: no plain encoder */
        float *w = malloc((size_t)n * sizeof(float));
        for (int64_t i = 0; i < n; i++)
            w[i] = 1.0f;
        CHECK(lm_quantize_chunk(t, f, x, 0, 1, n, w) == lm_row_size(t, n));
        free(w);
    } else if (n > 0) {
        lm_quant_traits(t)->from_float(f, x, n);
    }
    free(f);
}

static void isa_dot(const struct lm_cpu_kernels *k, const struct lm_cpu_kernels *g, enum lm_type t, struct uc_rng *r)
{
    static const int64_t float_sizes[] = {0, 1, 3, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 100, 255, 257, 1000, 4099};
    static const int64_t block_counts[] = {1, 2, 3, 5, 8, 13, 32, 129};
    const bool blocked = lm_type_blck(t) > 1;
    const int ns = blocked ? (int)(sizeof block_counts / sizeof block_counts[0])
                           : (int)(sizeof float_sizes / sizeof float_sizes[0]);
    const enum lm_type vt = g->type[t].vec_dot_type;
    int bad = 0;
    for (int si = 0; si < ns; si++) {
        const int64_t n = blocked ? block_counts[si] * lm_type_blck(t) : float_sizes[si];
        /* misalign by one element (or block) past a 64-byte boundary */
        for (int mis = 0; mis < 2; mis++) {
            const size_t ox = mis ? lm_type_size(t) : 0, oy = mis ? lm_type_size(vt) : 0;
            void *x = uc_alloc(lm_row_size(t, n) + 1, ox);
            void *y = uc_alloc(lm_row_size(vt, n) + 1, oy);
            float *xf = malloc(sizeof(float) * (size_t)(n + 1)), *yf = malloc(sizeof(float) * (size_t)(n + 1));
            random_row(r, t, x, n);
            random_row(r, vt, y, n);
            uc_decode(t, x, xf, n);
            uc_decode(vt, y, yf, n);
            double scale = uc_dot_scale(xf, yf, n, blocked ? lm_type_blck(t) : 1);
            const double terms = (double)(blocked ? n / lm_type_blck(t) : n / 8) + 8.0;
            const double tol = 4.8e-7 * terms * scale + 1e-30;
            float a = NAN, b = NAN;
            g->type[t].vec_dot(n, &a, x, y);
            k->type[t].vec_dot(n, &b, x, y);
            if (!(fabs((double)a - b) <= tol) && bad++ < 3)
                fprintf(stderr, "%s vec_dot %s n=%lld mis=%d: %.9g vs generic %.9g (tol %.3g)\n",
                        lm_cpu_isa_name(k->isa), lm_type_name(t), (long long)n, mis, b, a, tol);
            uc_free(x);
            uc_free(y);
            free(xf);
            free(yf);
        }
    }
    CHECKF(bad == 0, "%s vec_dot %s vs generic: %d bad", lm_cpu_isa_name(k->isa), lm_type_name(t), bad);
}

/* F16 conversions must give the generic bits for every half and many floats. */
static void isa_f16_conv(const struct lm_cpu_kernels *k, const struct lm_cpu_kernels *g, struct uc_rng *r)
{
    enum { N = 65536 + 13 };
    lm_fp16 *h = uc_alloc(N * sizeof(lm_fp16), 2);
    float *a = uc_alloc(N * sizeof(float), 4), *b = uc_alloc(N * sizeof(float), 4);
    for (int i = 0; i < N; i++)
        h[i] = (lm_fp16)i;
    g->type[LM_TYPE_F16].to_float(h, a, N);
    k->type[LM_TYPE_F16].to_float(h, b, N);
    int bad = 0; /* bit-exact, except that F16C quiets signaling NaNs (documented) */
    for (int i = 0; i < N; i++) {
        uint32_t ua = lm_f32_bits(a[i]), ub = lm_f32_bits(b[i]);
        bool snan = (h[i] & 0x7c00) == 0x7c00 && (h[i] & 0x3ff) && !(h[i] & 0x200);
        bad += snan ? (ua | 0x400000u) != ub : ua != ub;
    }
    CHECKF(bad == 0, "%s fp16->fp32: %d values differ", lm_cpu_isa_name(k->isa), bad);

    /* floats: random bit patterns (NaN, inf, subnormal, overflow included) and half-way cases */
    uint32_t *bits = (uint32_t *)a;
    for (int i = 0; i < N; i++)
        bits[i] = (uint32_t)uc_u64(r);
    for (int i = 0; i < 4096; i++) /* exact ties between two halves */
        bits[i] = (uint32_t)((0x38000000u + ((uint32_t)i << 13)) | 0x1000u);
    lm_fp16 *h2 = uc_alloc(N * sizeof(lm_fp16), 2);
    for (int64_t n = N; n >= N - 9; n -= 3) {
        g->type[LM_TYPE_F16].from_float(a, h, n);
        k->type[LM_TYPE_F16].from_float(a, h2, n);
        CHECKF(memcmp(h, h2, (size_t)n * sizeof(lm_fp16)) == 0, "%s fp32->fp16 differs (n=%lld)",
               lm_cpu_isa_name(k->isa), (long long)n);
    }
    uc_free(h);
    uc_free(h2);
    uc_free(a);
    uc_free(b);
}

/* Q8_0 encoders: same scales, codes within one step; and exact ties round as
 * documented (generic: half away from zero; avx2: half to even). */
static void isa_q8_0(const struct lm_cpu_kernels *k, const struct lm_cpu_kernels *g, struct uc_rng *r)
{
    enum { NB = 97 };
    float *x = uc_alloc(NB * 32 * sizeof(float), 4);
    uint8_t *a = uc_alloc(NB * 34, 2), *b = uc_alloc(NB * 34, 2);
    for (int i = 0; i < NB * 32; i++)
        x[i] = uc_float(r, -3.0f, 3.0f) * (i % 64 == 5 ? 100.0f : 1.0f);
    g->type[LM_TYPE_Q8_0].from_float(x, a, NB * 32);
    k->type[LM_TYPE_Q8_0].from_float(x, b, NB * 32);
    int d_bad = 0, far = 0, diff = 0;
    for (int blk = 0; blk < NB; blk++) {
        d_bad += memcmp(a + 34 * blk, b + 34 * blk, 2) != 0;
        for (int j = 0; j < 32; j++) {
            int dq = (int8_t)a[34 * blk + 2 + j] - (int8_t)b[34 * blk + 2 + j];
            diff += dq != 0;
            far += dq > 1 || dq < -1;
        }
    }
    CHECKF(d_bad == 0 && far == 0 && diff <= NB * 32 / 100, "%s q8_0 encoder vs generic: %d scales, %d far, %d differ",
           lm_cpu_isa_name(k->isa), d_bad, far, diff);

    /* ties: amax = 127 gives id = 1 on both paths; 2.5 and -3.5 are exact halves */
    float t[32] = {127.0f, 2.5f, -3.5f, 0.5f, -0.5f, 1.5f};
    int8_t want_away[6] = {127, 3, -4, 1, -1, 2}, want_even[6] = {127, 2, -4, 0, 0, 2};
    g->type[LM_TYPE_Q8_0].from_float(t, a, 32);
    k->type[LM_TYPE_Q8_0].from_float(t, b, 32);
    CHECKF(memcmp(a + 2, want_away, 6) == 0, "generic q8_0 does not round half away from zero");
    CHECKF(memcmp(b + 2, k->from_float_isa[LM_TYPE_Q8_0] == LM_ISA_AVX2 ? want_even : want_away, 6) == 0,
           "%s q8_0 tie rounding not as documented", lm_cpu_isa_name(k->isa));
    uc_free(x);
    uc_free(a);
    uc_free(b);
}

/* The generic half conversions equal core/fp16.h for every half (NaN payloads
 * included) and for many float bit patterns. */
static void test_generic_f16(void)
{
    const struct lm_cpu_kernels *g = lm_cpu_kernels_for(LM_ISA_GENERIC);
    static lm_fp16 h[65536];
    static float f[65536];
    for (int i = 0; i < 65536; i++)
        h[i] = (lm_fp16)i;
    g->type[LM_TYPE_F16].to_float(h, f, 65536);
    int bad = 0;
    for (int i = 0; i < 65536; i++)
        bad += lm_f32_bits(f[i]) != lm_f32_bits(lm_fp16_to_fp32(h[i]));
    CHECKF(bad == 0, "generic fp16->fp32: %d halves differ from core/fp16.h", bad);
    float one = 0.0f;
    lm_vec_dot_f16_generic(1, &one, &h[0x3c00], &h[0xc000]); /* 1 * -2 */
    CHECK(one == -2.0f);
}

static void test_isa_vs_generic(void)
{
    const struct lm_cpu_kernels *tables[LM_ISA_COUNT];
    n_isas(tables);
    const struct lm_cpu_kernels *g = tables[LM_ISA_GENERIC];
    CHECK(g != NULL && lm_cpu_kernels_for(LM_ISA_COUNT) == NULL);
    struct uc_rng r;
    uc_seed(&r, 42);
    int overridden = 0;
    for (int i = 1; i < LM_ISA_COUNT; i++) {
        const struct lm_cpu_kernels *k = tables[i];
        if (!k)
            continue;
        for (int t = 0; t < LM_TYPE_COUNT; t++) {
            if (k->vec_dot_isa[t] != LM_ISA_GENERIC) {
                isa_dot(k, g, (enum lm_type)t, &r);
                overridden++;
            }
        }
        if (k->to_float_isa[LM_TYPE_F16] || k->from_float_isa[LM_TYPE_F16])
            isa_f16_conv(k, g, &r);
        if (k->from_float_isa[LM_TYPE_Q8_0])
            isa_q8_0(k, g, &r);
        /* every override is one of the tested ones: F16 and Q8_0 here; Q8_1, Q8_K,
         * BF16 encoders and BF16 decoders in test_kernels_isa.c; the decoders of
         * every block type in test_dequant_isa.c */
        for (int t = 0; t < LM_TYPE_COUNT; t++) {
            bool other_ff = k->from_float_isa[t] && t != LM_TYPE_F16 && t != LM_TYPE_Q8_0 && t != LM_TYPE_Q8_1 &&
                            t != LM_TYPE_Q8_K && t != LM_TYPE_BF16;
            bool other_tf = k->to_float_isa[t] && t != LM_TYPE_F16 && t != LM_TYPE_BF16 &&
                            lm_type_blck((enum lm_type)t) <= 1;
            CHECKF(!other_ff && !other_tf, "%s overrides an untested conversion of %s", lm_cpu_isa_name(k->isa),
                   lm_type_name((enum lm_type)t));
        }
    }
    /* this machine (Zen 3) has AVX2: its kernels must be in use */
    const struct lm_cpu_features *f = lm_cpu_features();
    if (f->avx2 && f->fma && f->f16c) {
        CHECK(lm_cpu_isa_best() >= LM_ISA_AVX2);
        CHECK(overridden >= 4);
    }
    printf("kernels: best ISA %s, %d vec_dot overrides tested\n", lm_cpu_isa_name(lm_cpu_isa_best()), overridden);
}

/* ---- 3. through the backend, 1..4 threads ---- */

#define MAX_THREADS 4

/* A matmul case's inputs and output, copied out of its arena. */
struct mm_run {
    void *a;   /* a's bytes: [K, M, 2] of type t */
    float *b;  /* b's values in logical order [K, N, 4] */
    float *out; /* [M, N, 4] */
};

static void mm_run_free(struct mm_run *m)
{
    free(m->a);
    free(m->b);
    free(m->out);
    memset(m, 0, sizeof *m);
}

/* MUL_MAT of a [K, M, 2, 1] (type t) by b [K, N, 4, 1] (a broadcast over
 * dim 2; b a transposed view, nb[0] != 4, when `transposed`). The inputs
 * depend only on (t, K, M, N, transposed). */
static bool run_mul_mat(lm_backend_t be, enum lm_type t, int64_t K, int64_t M, int64_t N, bool transposed,
                        struct mm_run *res)
{
    memset(res, 0, sizeof *res);
    struct lm_ctx *ctx = uc_ctx((size_t)32 << 20);
    struct uc_rng r;
    uc_seed(&r, 1234 + (uint64_t)t * 7 + (uint64_t)N);
    struct lm_tensor *a = lm_new_tensor_3d(ctx, t, K, M, 2);
    struct lm_tensor *bs = transposed ? lm_new_tensor_3d(ctx, LM_TYPE_F32, N, K, 4)
                                      : lm_new_tensor_3d(ctx, LM_TYPE_F32, K, N, 4);
    struct lm_tensor *b = transposed ? lm_transpose(ctx, bs) : bs;
    struct lm_tensor *out = lm_mul_mat(ctx, a, b);
    bool ok = out != NULL;
    CHECKF(ok, "build: %s", lm_ctx_error(ctx));
    if (ok) {
        random_row(&r, t, a->data, K * M * 2);
        uc_fill(bs, &r, -1.0f, 1.0f);
        ok = uc_compute(be, ctx, out) == LM_OK;
        CHECK(ok);
    }
    if (ok) {
        const size_t na = lm_nbytes(a), no = sizeof(float) * (size_t)lm_nelements(out);
        res->a = malloc(na);
        memcpy(res->a, a->data, na);
        res->out = malloc(no);
        memcpy(res->out, out->data, no);
        res->b = malloc(sizeof(float) * (size_t)(K * N * 4));
        for (int64_t i2 = 0; i2 < 4; i2++)
            for (int64_t n = 0; n < N; n++)
                for (int64_t k = 0; k < K; k++)
                    res->b[(i2 * N + n) * K + k] = lm_get_f32_nd(b, k, n, i2, 0);
    }
    lm_ctx_free(ctx);
    return ok;
}

/* The matmul result must equal direct vec_dot calls (a row . encoded b row)
 * bit for bit: checks indexing, broadcast and the one-time conversion. */
static void check_direct(const struct lm_cpu_kernels *k, enum lm_type t, int64_t K, int64_t M, int64_t N,
                         const struct mm_run *m)
{
    const enum lm_type vt = k->type[t].vec_dot_type;
    void *yq = malloc(lm_row_size(vt, K) + 4);
    int bad = 0;
    for (int64_t i2 = 0; i2 < 4; i2++) {
        for (int64_t n = 0; n < N; n++) {
            k->type[vt].from_float(m->b + (i2 * N + n) * K, yq, K);
            for (int64_t row = 0; row < M; row++) {
                const char *arow = (const char *)m->a + (size_t)(row + (i2 / 2) * M) * lm_row_size(t, K);
                float want;
                k->type[t].vec_dot(K, &want, arow, yq);
                float got = m->out[(i2 * N + n) * M + row];
                bad += memcmp(&got, &want, sizeof got) != 0;
            }
        }
    }
    CHECKF(bad == 0, "%s mul_mat %s K=%lld M=%lld N=%lld: %d outputs differ from direct vec_dot",
           lm_cpu_isa_name(k->isa), lm_type_name(t), (long long)K, (long long)M, (long long)N, bad);
    free(yq);
}

static double nmse(const float *got, const float *want, int64_t n)
{
    double e = 0.0, s = 0.0;
    for (int64_t i = 0; i < n; i++) {
        e += ((double)got[i] - want[i]) * ((double)got[i] - want[i]);
        s += (double)want[i] * want[i];
    }
    return s > 0.0 ? e / s : e;
}

static void test_backend_matmul(lm_backend_t be[MAX_THREADS])
{
    const enum lm_cpu_isa best = lm_cpu_isa_best();
    const int64_t shapes[][3] = {{256, 37, 1}, {512, 19, 7}, {256, 5, 18}};
    for (int ti = 0; ti < N_DOT_TYPES; ti++) {
        const enum lm_type t = dot_types[ti];
        for (int si = 0; si < 3; si++) {
            const int64_t K = shapes[si][0], M = shapes[si][1], N = shapes[si][2];
            const bool transposed = si == 1;
            struct mm_run per_isa[LM_ISA_COUNT] = {{0}};
            for (int isa = 0; isa <= (int)best; isa++) {
                if (!lm_cpu_kernels_for((enum lm_cpu_isa)isa))
                    continue;
                lm_cpu_isa_limit((enum lm_cpu_isa)isa);
                struct mm_run *one = &per_isa[isa];
                if (!run_mul_mat(be[0], t, K, M, N, transposed, one))
                    continue;
                check_direct(lm_cpu_kernels(), t, K, M, N, one);
                for (int nt = 2; nt <= MAX_THREADS; nt++) {
                    struct mm_run m;
                    if (!run_mul_mat(be[nt - 1], t, K, M, N, transposed, &m))
                        continue;
                    CHECKF(memcmp(m.out, one->out, sizeof(float) * (size_t)(M * N * 4)) == 0,
                           "%s mul_mat %s: %d threads differ from 1", lm_cpu_isa_name((enum lm_cpu_isa)isa),
                           lm_type_name(t), nt);
                    mm_run_free(&m);
                }
            }
            for (int isa = 1; isa <= (int)best; isa++) { /* ISAs agree within the activation-rounding error */
                if (!per_isa[isa].out || !per_isa[0].out)
                    continue;
                double e = nmse(per_isa[isa].out, per_isa[0].out, M * N * 4);
                CHECKF(e <= 1e-5, "mul_mat %s: %s vs generic nmse %.3g", lm_type_name(t),
                       lm_cpu_isa_name((enum lm_cpu_isa)isa), e);
            }
            for (int isa = 0; isa < LM_ISA_COUNT; isa++)
                mm_run_free(&per_isa[isa]);
        }
    }
    lm_cpu_isa_limit(best);
}

/* MUL_MAT_ID: as [K, M, E] by b [K, B1, T] with ids [S, T] (two invalid ids):
 * 1..4 threads give the same bits, equal to direct vec_dot; invalid ids zero rows. */
static void test_backend_mul_mat_id(lm_backend_t be[MAX_THREADS], enum lm_type t, int64_t B1)
{
    const int64_t K = 256, M = 21, E = 4, S = 2, T = 9;
    const struct lm_cpu_kernels *k = lm_cpu_kernels();
    float *first = NULL;
    for (int nt = 1; nt <= MAX_THREADS; nt++) {
        struct lm_ctx *ctx = uc_ctx((size_t)16 << 20);
        struct uc_rng r;
        uc_seed(&r, 77);
        struct lm_tensor *as = lm_new_tensor_3d(ctx, t, K, M, E);
        struct lm_tensor *b = lm_new_tensor_3d(ctx, LM_TYPE_F32, K, B1, T);
        struct lm_tensor *ids = lm_new_tensor_2d(ctx, LM_TYPE_I32, S, T);
        random_row(&r, t, as->data, K * M * E);
        uc_fill(b, &r, -1.0f, 1.0f);
        int32_t *id = ids->data;
        for (int64_t i = 0; i < S * T; i++)
            id[i] = (int32_t)(uc_u64(&r) % E);
        id[3] = -1;
        id[8] = (int32_t)E;
        struct lm_tensor *out = lm_mul_mat_id(ctx, as, b, ids);
        CHECK(out && uc_compute(be[nt - 1], ctx, out) == LM_OK);
        if (!out) {
            lm_ctx_free(ctx);
            continue;
        }
        const float *o = out->data;
        if (nt == 1) {
            first = malloc(sizeof(float) * (size_t)(M * S * T));
            memcpy(first, o, sizeof(float) * (size_t)(M * S * T));
            const enum lm_type vt = k->type[t].vec_dot_type;
            void *yq = malloc(lm_row_size(vt, K));
            int bad = 0;
            for (int64_t tok = 0; tok < T; tok++) {
                for (int64_t s = 0; s < S; s++) {
                    const int32_t e = id[tok * S + s];
                    k->type[vt].from_float((const float *)b->data + (tok * B1 + s % B1) * K, yq, K);
                    for (int64_t m = 0; m < M; m++) {
                        float want = 0.0f;
                        if (e >= 0 && e < E)
                            k->type[t].vec_dot(K, &want, (const char *)as->data + (size_t)(e * M + m) * lm_row_size(t, K), yq);
                        bad += memcmp(&want, &o[(tok * S + s) * M + m], sizeof want) != 0;
                    }
                }
            }
            CHECKF(bad == 0, "mul_mat_id %s B1=%lld: %d outputs differ from direct vec_dot", lm_type_name(t),
                   (long long)B1, bad);
            free(yq);
        } else if (first) {
            CHECKF(memcmp(first, o, sizeof(float) * (size_t)(M * S * T)) == 0, "mul_mat_id %s: %d threads differ",
                   lm_type_name(t), nt);
        }
        lm_ctx_free(ctx);
    }
    free(first);
}

/* IQ2 weights: llama.cpp's blocks through MUL_MAT (the direct vec_dot path)
 * against llama.cpp's dequantization times Q8_K-rounded activations. */
static void test_backend_iq2(lm_backend_t be, enum lm_type t)
{
    char rel[64];
    size_t nb = 0, nd = 0, ni = 0;
    snprintf(rel, sizeof rel, "quant/%s.blocks.bin", t == LM_TYPE_IQ2_XXS ? "IQ2_XXS" : "IQ2_XS");
    void *blocks = uc_fixture(rel, &nb);
    snprintf(rel, sizeof rel, "quant/%s.dequant.f32", t == LM_TYPE_IQ2_XXS ? "IQ2_XXS" : "IQ2_XS");
    float *deq = uc_fixture(rel, &nd);
    float *input = uc_fixture("quant/Q8_0.input.f32", &ni);
    struct lm_ctx *ctx = uc_ctx((size_t)4 << 20);
    CHECK(lm_cpu_kernels()->type[t].vec_dot != NULL);
    if (blocks && deq && input && nb == lm_row_size(t, FIX_COLS) * FIX_ROWS) {
        struct lm_tensor *a = lm_new_tensor_2d(ctx, t, FIX_COLS, FIX_ROWS);
        struct lm_tensor *b = lm_new_tensor_2d(ctx, LM_TYPE_F32, FIX_COLS, 3);
        const int act[3] = {0, 8, 9};
        memcpy(a->data, blocks, nb);
        for (int j = 0; j < 3; j++)
            memcpy((float *)b->data + j * FIX_COLS, input + act[j] * FIX_COLS, sizeof(float) * FIX_COLS);
        struct lm_tensor *out = lm_mul_mat(ctx, a, b);
        CHECK(lm_backend_supports_op(be, out));
        CHECK(uc_compute(be, ctx, out) == LM_OK);
        void *yq = malloc(lm_row_size(LM_TYPE_Q8_K, FIX_COLS));
        float yf[FIX_COLS];
        int bad = 0;
        for (int j = 0; j < 3; j++) {
            lm_cpu_kernels()->type[LM_TYPE_Q8_K].from_float(input + act[j] * FIX_COLS, yq, FIX_COLS);
            uc_decode(LM_TYPE_Q8_K, yq, yf, FIX_COLS);
            for (int m = 0; m < FIX_ROWS; m++) {
                double want = 0.0;
                for (int i = 0; i < FIX_COLS; i++)
                    want += (double)deq[m * FIX_COLS + i] * yf[i];
                double tol = 1e-5 * uc_dot_scale(deq + m * FIX_COLS, yf, FIX_COLS, 256) + 1e-30;
                float got = ((const float *)out->data)[j * FIX_ROWS + m];
                bad += !(fabs(got - want) <= tol);
            }
        }
        CHECKF(bad == 0, "mul_mat %s vs llama.cpp dequant: %d bad", lm_type_name(t), bad);
        free(yq);
    } else {
        CHECKF(false, "IQ2 fixtures missing");
    }
    lm_ctx_free(ctx);
    free(blocks);
    free(deq);
    free(input);
}

/* Weights with no direct vec_dot (Q8_1 / Q8_K as weights) take the
 * dequantizing path: each output equals decode(a row) . b row with the F32
 * dot, bit for bit, at every thread count. */
static void test_backend_dequant_path(lm_backend_t be[MAX_THREADS], enum lm_type t)
{
    const struct lm_cpu_kernels *k = lm_cpu_kernels();
    CHECK(k->type[t].vec_dot == NULL);
    const int64_t K = 256, M = 9, N = 3;
    for (int nt = 1; nt <= MAX_THREADS; nt++) {
        struct mm_run m;
        if (!run_mul_mat(be[nt - 1], t, K, M, N, nt % 2 == 0, &m))
            continue;
        float *arow = malloc(sizeof(float) * K);
        int bad = 0;
        for (int64_t i2 = 0; i2 < 4; i2++) {
            for (int64_t n = 0; n < N; n++) {
                for (int64_t row = 0; row < M; row++) {
                    uc_decode(t, (const char *)m.a + (size_t)(row + (i2 / 2) * M) * lm_row_size(t, K), arow, K);
                    float want;
                    k->type[LM_TYPE_F32].vec_dot(K, &want, arow, m.b + (i2 * N + n) * K);
                    bad += memcmp(&want, &m.out[(i2 * N + n) * M + row], sizeof want) != 0;
                }
            }
        }
        CHECKF(bad == 0, "mul_mat %s (dequantizing path), %d threads: %d outputs differ", lm_type_name(t), nt, bad);
        free(arow);
        mm_run_free(&m);
    }
}

/* A graph of many ops; every thread count must give the same bits. */
static void build_mixed(struct lm_ctx *ctx, struct lm_tensor *outs[8])
{
    struct uc_rng r;
    uc_seed(&r, 5);
    const int64_t D = 64, T = 7;
    struct lm_tensor *x = lm_new_tensor_2d(ctx, LM_TYPE_F32, D, T);
    struct lm_tensor *w = lm_new_tensor_1d(ctx, LM_TYPE_F32, D);
    struct lm_tensor *W = lm_new_tensor_2d(ctx, LM_TYPE_Q4_0, D, 48);
    struct lm_tensor *pos = lm_new_tensor_1d(ctx, LM_TYPE_I32, T);
    struct lm_tensor *mask = lm_new_tensor_2d(ctx, LM_TYPE_F32, 16, 3);
    uc_fill(x, &r, -2.0f, 2.0f);
    uc_fill(w, &r, 0.5f, 1.5f);
    uc_fill(mask, &r, -1.0f, 0.0f);
    random_row(&r, LM_TYPE_Q4_0, W->data, D * 48);
    for (int i = 0; i < T; i++)
        ((int32_t *)pos->data)[i] = 3 * i + 1;
    struct lm_tensor *h = lm_mul(ctx, lm_rms_norm(ctx, x, 1e-5f), w);
    struct lm_tensor *m = lm_mul_mat(ctx, W, h); /* [48, T] */
    struct lm_rope_params rp = {16, LM_ROPE_NEOX, 64, 10000.0f, 0.5f, 1.0f, 1.0f, 32.0f, 1.0f};
    struct lm_tensor *q = lm_rope(ctx, lm_reshape_3d(ctx, m, 16, 3, T), pos, &rp);
    struct lm_tensor *s = lm_soft_max_ext(ctx, q, mask, 0.25f, 8.0f);
    outs[0] = lm_sum_rows(ctx, lm_gelu(ctx, s));
    outs[1] = lm_argsort(ctx, lm_reshape_2d(ctx, lm_cont(ctx, s), 48, T), LM_SORT_DESC);
    outs[2] = lm_get_rows(ctx, W, lm_view_1d(ctx, outs[1], 5, 0));
    outs[3] = lm_cpy(ctx, lm_transpose(ctx, m), lm_new_tensor_2d(ctx, LM_TYPE_F16, T, 48));
    outs[4] = lm_norm(ctx, lm_add(ctx, lm_silu(ctx, x), lm_repeat(ctx, w, x)), 1e-6f);
    outs[5] = lm_concat(ctx, lm_diag_mask_inf(ctx, lm_scale(ctx, x, 0.5f), 2), lm_sqr(ctx, x), 1);
    outs[6] = lm_mul_mat(ctx, lm_cont(ctx, lm_transpose(ctx, m)), lm_cont(ctx, lm_transpose(ctx, m)));
    outs[7] = lm_cpy(ctx, h, lm_new_tensor_2d(ctx, LM_TYPE_Q8_0, D, T));
}

static void test_backend_mixed(lm_backend_t be[MAX_THREADS])
{
    void *first[8] = {0};
    for (int nt = 1; nt <= MAX_THREADS; nt++) {
        struct lm_ctx *ctx = uc_ctx((size_t)8 << 20);
        struct lm_tensor *outs[8];
        build_mixed(ctx, outs);
        struct lm_graph *g = lm_graph_new(ctx, 256);
        bool ok = g != NULL;
        for (int i = 0; i < 8 && ok; i++)
            ok = outs[i] && lm_graph_expand(g, outs[i]) == LM_OK;
        CHECKF(ok, "mixed graph: %s", lm_ctx_error(ctx));
        if (ok && lm_backend_graph_compute(be[nt - 1], g) == LM_OK) {
            for (int i = 0; i < 8; i++) {
                size_t n = lm_nbytes(outs[i]);
                if (nt == 1) {
                    first[i] = malloc(n);
                    memcpy(first[i], outs[i]->data, n);
                } else {
                    CHECKF(memcmp(first[i], outs[i]->data, n) == 0, "mixed graph output %d: %d threads differ", i,
                           nt);
                }
            }
        } else {
            CHECKF(false, "mixed graph failed with %d threads", nt);
        }
        lm_ctx_free(ctx);
    }
    for (int i = 0; i < 8; i++)
        free(first[i]);
}

int main(void)
{
    test_fixtures();
    test_generic_f16();
    test_isa_vs_generic();

    lm_backend_t be[MAX_THREADS] = {0};
    for (int i = 0; i < MAX_THREADS; i++) {
        CHECK(lm_cpu_backend_new_unclamped(i + 1, &be[i]) == LM_OK);
        CHECK(lm_cpu_backend_n_threads(be[i]) == i + 1);
    }
    if (be[MAX_THREADS - 1]) {
        test_backend_matmul(be);
        const enum lm_cpu_isa best = lm_cpu_isa_best();
        for (int isa = 0; isa <= (int)best; isa++) {
            if (!lm_cpu_kernels_for((enum lm_cpu_isa)isa))
                continue;
            lm_cpu_isa_limit((enum lm_cpu_isa)isa);
            test_backend_mul_mat_id(be, LM_TYPE_Q4_0, 1);
            test_backend_mul_mat_id(be, LM_TYPE_Q4_K, 2);
            test_backend_mul_mat_id(be, LM_TYPE_F16, 2);
            test_backend_mixed(be);
            test_backend_dequant_path(be, LM_TYPE_Q8_1);
            test_backend_dequant_path(be, LM_TYPE_Q8_K);
            test_backend_iq2(be[1], LM_TYPE_IQ2_XXS);
            test_backend_iq2(be[2], LM_TYPE_IQ2_XS);
        }
        lm_cpu_isa_limit(best);
    }
    for (int i = 0; i < MAX_THREADS; i++)
        lm_backend_free(be[i]);
    return lm_test_summary();
}
