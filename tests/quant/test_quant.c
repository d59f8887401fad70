/* test_quant.c - quant/ against llama.cpp's own bytes (shared/fixtures/quant).
 *
 * For every type with fixtures: decode <T>.blocks.bin and compare bit for bit
 * with <T>.dequant.f32; encode <T>.input.f32 and compare byte for byte with
 * <T>.blocks.bin; the same for the imatrix set (imatrix_var.f32), against the
 * seed's (b1892) bytes where those differ from modern ggml. Then edge cases:
 * sizes that are not a multiple of the block, unsupported types, all-zero and
 * NaN/Inf input, validation, and the activation types Q8_1 / Q8_K (no
 * fixtures: checked by their defining properties).
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "core/fp16.h"
#include "core/log.h"
#include "lm_test.h"
#include "quant/blocks.h"
#include "quant/quant.h"

#define NROWS 10
#define NCOLS 512
#define NELEM (NROWS * NCOLS)

struct fixture_type {
    const char *file;   /* file name prefix: "Q4_0" */
    enum lm_type type;
    bool imat;          /* has the .imat set */
    bool imat_seed;     /* the imat set's seed bytes differ: use .imat.seed_blocks.bin */
    bool main_imat;     /* the main set was quantized with imatrix.f32 (IQ2: required) */
    bool main_seed;     /* the main set's seed bytes differ: use .seed_blocks.bin */
};

static const struct fixture_type types[] = {
    {"F16", LM_TYPE_F16, false, false, false, false},   {"BF16", LM_TYPE_BF16, false, false, false, false},
    {"Q4_0", LM_TYPE_Q4_0, true, false, false, false},  {"Q4_1", LM_TYPE_Q4_1, true, false, false, false},
    {"Q5_0", LM_TYPE_Q5_0, true, false, false, false},  {"Q5_1", LM_TYPE_Q5_1, true, false, false, false},
    {"Q8_0", LM_TYPE_Q8_0, true, false, false, false},  {"Q2_K", LM_TYPE_Q2_K, true, false, false, false},
    {"Q3_K", LM_TYPE_Q3_K, true, false, false, false},  {"Q4_K", LM_TYPE_Q4_K, true, true, false, false},
    {"Q5_K", LM_TYPE_Q5_K, true, true, false, false},   {"Q6_K", LM_TYPE_Q6_K, true, false, false, false},
    {"IQ2_XXS", LM_TYPE_IQ2_XXS, true, true, true, true},
    {"IQ2_XS", LM_TYPE_IQ2_XS, true, false, true, false},
};

#define NTYPES (sizeof types / sizeof types[0])

/* Read shared/fixtures/quant/<prefix><suffix>; checks the size when want > 0. */
static void *load(const char *prefix, const char *suffix, size_t want)
{
    char rel[256];
    snprintf(rel, sizeof rel, "fixtures/quant/%s%s", prefix, suffix);
    size_t n = 0;
    void *p = lm_test_read_file(lm_test_shared(rel), &n);
    CHECKF(p != NULL, "cannot read %s", rel);
    if (p && want && n != want) {
        CHECKF(n == want, "%s: %zu bytes, expected %zu", rel, n, want);
        free(p);
        return NULL;
    }
    return p;
}

static size_t count_diff_bytes(const void *a, const void *b, size_t n)
{
    size_t d = 0;
    for (size_t i = 0; i < n; i++)
        d += ((const uint8_t *)a)[i] != ((const uint8_t *)b)[i];
    return d;
}

/* Decode blocks and compare bitwise with the expected floats; returns exactness. */
static bool check_dequant(const struct fixture_type *t, const char *what, const void *blocks, const float *want)
{
    static float got[NELEM];
    memset(got, 0xA5, sizeof got);
    lm_quant_traits(t->type)->to_float(blocks, got, NELEM);
    size_t diff = 0;
    for (int i = 0; i < NELEM; i++)
        diff += memcmp(&got[i], &want[i], 4) != 0;
    CHECKF(diff == 0, "%s %s dequant: %zu of %d floats differ", t->file, what, diff, NELEM);
    return diff == 0;
}

/* Encode the input and compare with the expected bytes; also encode in two
 * chunks (rows 0..2, 3..9) to test the row offsets. */
static bool check_quant(const struct fixture_type *t, const char *what, const float *in, const void *want,
                        const float *imatrix)
{
    const size_t row = lm_row_size(t->type, NCOLS), total = row * NROWS;
    uint8_t *got = malloc(total), *got2 = malloc(total);
    memset(got, 0xA5, total);
    memset(got2, 0x5A, total);
    size_t n = lm_quantize_chunk(t->type, in, got, 0, NROWS, NCOLS, imatrix);
    CHECKF(n == total, "%s %s: quantize_chunk returned %zu, expected %zu", t->file, what, n, total);
    size_t diff = count_diff_bytes(got, want, total);
    CHECKF(diff == 0, "%s %s quant: %zu of %zu bytes differ", t->file, what, diff, total);
    size_t a = lm_quantize_chunk(t->type, in, got2, 0, 3, NCOLS, imatrix);
    size_t b = lm_quantize_chunk(t->type, in, got2, 3, NROWS - 3, NCOLS, imatrix);
    CHECKF(a + b == total && memcmp(got, got2, total) == 0, "%s %s: chunked quantize differs", t->file, what);
    free(got);
    free(got2);
    return diff == 0;
}

static void test_fixtures(void)
{
    float *imat_var = load("imatrix_var", ".f32", NCOLS * 4);
    float *imat_one = load("imatrix", ".f32", NCOLS * 4);
    for (size_t k = 0; k < NTYPES; k++) {
        const struct fixture_type *t = &types[k];
        const size_t bytes = lm_row_size(t->type, NCOLS) * NROWS;
        float *in = load(t->file, ".input.f32", NELEM * 4);
        void *blocks = load(t->file, ".blocks.bin", bytes);
        float *deq = load(t->file, ".dequant.f32", NELEM * 4);
        void *mseed = t->main_seed ? load(t->file, ".seed_blocks.bin", bytes) : NULL;
        float *mseedd = t->main_seed ? load(t->file, ".seed_dequant.f32", NELEM * 4) : NULL;
        if (!in || !blocks || !deq || !imat_var || !imat_one || (t->main_seed && (!mseed || !mseedd)))
            goto next;
        bool dq = check_dequant(t, "main", blocks, deq);
        if (t->main_seed)
            dq = check_dequant(t, "main.seed", mseed, mseedd) && dq;
        bool qq = check_quant(t, t->main_seed ? "main(seed)" : "main", in, t->main_seed ? mseed : blocks,
                              t->main_imat ? imat_one : NULL);
        const char *idq = "-", *iq = "-";
        if (t->imat) {
            void *ib = load(t->file, ".imat.blocks.bin", bytes);
            float *id = load(t->file, ".imat.dequant.f32", NELEM * 4);
            void *sb = t->imat_seed ? load(t->file, ".imat.seed_blocks.bin", bytes) : NULL;
            float *sd = t->imat_seed ? load(t->file, ".imat.seed_dequant.f32", NELEM * 4) : NULL;
            bool ok = ib && id && check_dequant(t, "imat", ib, id);
            if (t->imat_seed)
                ok = ok && sb && sd && check_dequant(t, "imat.seed", sb, sd);
            idq = ok ? (t->imat_seed ? "exact (+seed)" : "exact") : "DIFF";
            const void *want = t->imat_seed ? sb : ib;
            bool qok = want && check_quant(t, t->imat_seed ? "imat(seed)" : "imat", in, want, imat_var);
            iq = qok ? (t->imat_seed ? "exact (b1892 seed)" : "exact") : "DIFF";
            free(ib);
            free(id);
            free(sb);
            free(sd);
        }
        printf("%-7s: dequant %s, quant %s, imat dequant %s, imat quant %s\n", lm_type_name(t->type),
               dq ? "exact" : "DIFF", qq ? "exact" : "DIFF", idq, iq);
    next:
        free(in);
        free(blocks);
        free(deq);
        free(mseed);
        free(mseedd);
    }
    free(imat_var);
    free(imat_one);
}

static void test_sizes_and_traits(void)
{
    CHECK(sizeof(struct lm_block_q4_0) == lm_type_size(LM_TYPE_Q4_0));
    CHECK(sizeof(struct lm_block_q4_1) == lm_type_size(LM_TYPE_Q4_1));
    CHECK(sizeof(struct lm_block_q5_0) == lm_type_size(LM_TYPE_Q5_0));
    CHECK(sizeof(struct lm_block_q5_1) == lm_type_size(LM_TYPE_Q5_1));
    CHECK(sizeof(struct lm_block_q8_0) == lm_type_size(LM_TYPE_Q8_0));
    CHECK(sizeof(struct lm_block_q8_1) == lm_type_size(LM_TYPE_Q8_1));
    CHECK(sizeof(struct lm_block_q2_K) == lm_type_size(LM_TYPE_Q2_K));
    CHECK(sizeof(struct lm_block_q3_K) == lm_type_size(LM_TYPE_Q3_K));
    CHECK(sizeof(struct lm_block_q4_K) == lm_type_size(LM_TYPE_Q4_K));
    CHECK(sizeof(struct lm_block_q5_K) == lm_type_size(LM_TYPE_Q5_K));
    CHECK(sizeof(struct lm_block_q6_K) == lm_type_size(LM_TYPE_Q6_K));
    CHECK(sizeof(struct lm_block_q8_K) == lm_type_size(LM_TYPE_Q8_K));
    CHECK(sizeof(struct lm_block_iq2_xxs) == lm_type_size(LM_TYPE_IQ2_XXS));
    CHECK(sizeof(struct lm_block_iq2_xs) == lm_type_size(LM_TYPE_IQ2_XS));
    /* IQ2: a decoder, no plain encoder (only lm_quantize_chunk with an imatrix) */
    CHECK(lm_quant_traits(LM_TYPE_IQ2_XXS)->to_float && !lm_quant_traits(LM_TYPE_IQ2_XXS)->from_float);
    CHECK(lm_quant_traits(LM_TYPE_IQ2_XS)->to_float && !lm_quant_traits(LM_TYPE_IQ2_XS)->from_float);
    /* unsupported: a row of NULLs, never NULL itself */
    const enum lm_type unsup[] = {LM_TYPE_I32, (enum lm_type)4, (enum lm_type)99};
    for (size_t i = 0; i < sizeof unsup / sizeof unsup[0]; i++) {
        const struct lm_quant_traits *tr = lm_quant_traits(unsup[i]);
        CHECK(tr && !tr->to_float && !tr->from_float);
    }
    CHECK(lm_quantize_requires_imatrix(LM_TYPE_IQ2_XXS) && lm_quantize_requires_imatrix(LM_TYPE_IQ2_XS));
    CHECK(!lm_quantize_requires_imatrix(LM_TYPE_Q4_K) && !lm_quantize_requires_imatrix((enum lm_type)99));
}

/* Every type id walked through the type descriptor (core/type.c) and the
 * conversion table (quant.c): a valid id has a name that maps back to it and
 * a block, and a decoder unless it is an integer type, and an encoder (or an
 * imatrix encoder) exactly when it can be quantized to; an id without a
 * descriptor row has no conversions either. */
static void test_type_walk(void)
{
    int n_valid = 0;
    for (int i = 0; i < LM_TYPE_COUNT; i++) {
        const enum lm_type t = (enum lm_type)i;
        const struct lm_quant_traits *q = lm_quant_traits(t);
        if (!lm_type_valid(i)) {
            CHECKF(!q->to_float && !q->from_float && !q->needs_imatrix && !lm_quantize_supported(t),
                   "type id %d: conversions without a descriptor row", i);
            continue;
        }
        n_valid++;
        enum lm_type back = LM_TYPE_COUNT;
        CHECKF(lm_type_from_name(lm_type_name(t), &back) && back == t, "type %d: name %s", i, lm_type_name(t));
        CHECKF(lm_type_blck(t) > 0 && lm_type_size(t) > 0, "type %s: block", lm_type_name(t));
        const bool integer = t == LM_TYPE_I8 || t == LM_TYPE_I16 || t == LM_TYPE_I32;
        CHECKF(integer ? !q->to_float && !q->from_float : q->to_float != NULL, "type %s: decoder", lm_type_name(t));
        CHECKF(lm_quantize_supported(t) == (q->from_float != NULL || q->needs_imatrix), "type %s: encoder",
               lm_type_name(t));
        CHECKF(lm_type_traits(t)->is_quantized == (lm_type_blck(t) > 1), "type %s: is_quantized", lm_type_name(t));
    }
    CHECK(n_valid == 20); /* F32 F16 BF16, Q4_0..Q8_1 (6), Q2_K..Q8_K (6), IQ2_XXS IQ2_XS, I8 I16 I32 */
    CHECK(!lm_type_valid(LM_TYPE_COUNT) && !lm_type_valid(-1));
}

static void test_bad_args(void)
{
    float x[1024] = {0};
    static uint8_t y[4096];
    CHECK(lm_quantize_chunk(LM_TYPE_Q4_0, x, y, 0, 1, 33, NULL) == 0);
    CHECK(lm_quantize_chunk(LM_TYPE_Q4_0, x, y, 0, 1, 48, NULL) == 0);
    CHECK(lm_quantize_chunk(LM_TYPE_Q4_K, x, y, 0, 1, 300, NULL) == 0);
    CHECK(lm_quantize_chunk(LM_TYPE_Q6_K, x, y, 0, 1, 128, NULL) == 0);
    CHECK(lm_quantize_chunk(LM_TYPE_Q4_0, x, y, 0, 1, 0, NULL) == 0);
    CHECK(lm_quantize_chunk(LM_TYPE_Q4_0, x, y, -1, 1, 32, NULL) == 0);
    CHECK(lm_quantize_chunk(LM_TYPE_Q4_0, NULL, y, 0, 1, 32, NULL) == 0);
    CHECK(lm_quantize_chunk(LM_TYPE_I32, x, y, 0, 1, 32, NULL) == 0);
    CHECK(lm_quantize_chunk((enum lm_type)4, x, y, 0, 1, 32, NULL) == 0);
    CHECK(lm_quantize_chunk((enum lm_type)-1, x, y, 0, 1, 32, NULL) == 0);
    CHECK(lm_quantize_chunk(LM_TYPE_IQ2_XXS, x, y, 0, 1, 256, NULL) == 0); /* needs an imatrix */
    CHECK(lm_quantize_chunk(LM_TYPE_IQ2_XS, x, y, 0, 1, 256, NULL) == 0);
    CHECK(lm_quantize_chunk(LM_TYPE_IQ2_XS, x, y, 0, 1, 128, x) == 0);    /* not a multiple of 256 */
    CHECK(lm_quantize_chunk(LM_TYPE_IQ2_XS, x, y, 0, 1, 256, x) == 74);
    CHECK(lm_quantize_chunk(LM_TYPE_IQ2_XXS, x, y, 0, 2, 512, x) == 264);
    CHECK(lm_quantize_chunk(LM_TYPE_F16, x, y, 0, 1, 7, NULL) == 14);      /* block size 1 */
    CHECK(lm_quantize_chunk(LM_TYPE_Q4_K, x, y, 0, 0, 256, NULL) == 0);     /* no rows: nothing written */
}

/* Every supported type: all-zero input gives all-zero output values, and
 * NaN/Inf input neither crashes nor trips the sanitizers. */
static void test_zero_and_nan(void)
{
    const enum lm_type all[] = {LM_TYPE_F32,  LM_TYPE_F16,  LM_TYPE_BF16, LM_TYPE_Q4_0, LM_TYPE_Q4_1,
                                LM_TYPE_Q5_0, LM_TYPE_Q5_1, LM_TYPE_Q8_0, LM_TYPE_Q8_1, LM_TYPE_Q2_K,
                                LM_TYPE_Q3_K, LM_TYPE_Q4_K, LM_TYPE_Q5_K, LM_TYPE_Q6_K, LM_TYPE_Q8_K,
                                LM_TYPE_IQ2_XXS, LM_TYPE_IQ2_XS};
    static float x[NCOLS], w[NCOLS], out[NCOLS];
    static uint8_t q[NCOLS * 4];
    for (int i = 0; i < NCOLS; i++)
        w[i] = 1.0f + (float)(i % 7);
    for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) {
        const enum lm_type t = all[k];
        const size_t rs = lm_row_size(t, NCOLS);
        for (int pass = lm_quantize_requires_imatrix(t) ? 1 : 0; pass < 2; pass++) {
            const float *imat = pass ? w : NULL;
            memset(x, 0, sizeof x);
            CHECK(lm_quantize_chunk(t, x, q, 0, 1, NCOLS, imat) == rs);
            lm_quant_traits(t)->to_float(q, out, NCOLS);
            int nonzero = 0;
            for (int i = 0; i < NCOLS; i++)
                nonzero += out[i] != 0.0f;
            CHECKF(nonzero == 0, "%s: zeros -> %d nonzero values (imatrix %d)", lm_type_name(t), nonzero, pass);
            CHECKF(lm_validate_row_data(t, q, rs), "%s: zero row not valid", lm_type_name(t));
            /* NaN / Inf mixed into ordinary values */
            for (int i = 0; i < NCOLS; i++)
                x[i] = (float)((i * 37) % 19) - 9.0f;
            x[3] = NAN;
            x[40] = INFINITY;
            x[300] = -INFINITY;
            x[301] = -NAN;
            CHECK(lm_quantize_chunk(t, x, q, 0, 1, NCOLS, imat) == rs);
            lm_quant_traits(t)->to_float(q, out, NCOLS);
            (void)lm_validate_row_data(t, q, rs); /* may be false; must not crash */
            for (int i = 0; i < NCOLS; i++)
                x[i] = NAN;
            CHECK(lm_quantize_chunk(t, x, q, 0, 1, NCOLS, imat) == rs);
            lm_quant_traits(t)->to_float(q, out, NCOLS);
        }
    }
}

static void test_validate(void)
{
    for (size_t k = 0; k < NTYPES; k++) {
        const struct fixture_type *t = &types[k];
        const size_t bytes = lm_row_size(t->type, NCOLS) * NROWS;
        uint8_t *b = load(t->file, ".blocks.bin", bytes);
        if (!b)
            continue;
        CHECKF(lm_validate_row_data(t->type, b, bytes), "%s fixture not valid", t->file);
        CHECK(!lm_validate_row_data(t->type, b, bytes - 1));
        /* poison the first scale field of the last block (or the last value) with NaN, then Inf */
        size_t ts = lm_type_size(t->type), off = bytes - ts;
        if (t->type == LM_TYPE_Q2_K)
            off += offsetof(struct lm_block_q2_K, dmin);
        else if (t->type == LM_TYPE_Q3_K)
            off += offsetof(struct lm_block_q3_K, d);
        else if (t->type == LM_TYPE_Q6_K)
            off += offsetof(struct lm_block_q6_K, d);
        else if (t->type == LM_TYPE_Q4_1 || t->type == LM_TYPE_Q5_1 || t->type == LM_TYPE_Q4_K ||
                 t->type == LM_TYPE_Q5_K)
            off += 2; /* the min / dmin */
        const uint16_t nan16 = t->type == LM_TYPE_BF16 ? 0x7fc0 : 0x7e00;
        const uint16_t inf16 = t->type == LM_TYPE_BF16 ? 0xff80 : 0xfc00;
        memcpy(b + off, &nan16, 2);
        CHECKF(!lm_validate_row_data(t->type, b, bytes), "%s: NaN scale accepted", t->file);
        memcpy(b + off, &inf16, 2);
        CHECKF(!lm_validate_row_data(t->type, b, bytes), "%s: Inf scale accepted", t->file);
        free(b);
    }
    float f[4] = {1, 2, 3, 4};
    CHECK(lm_validate_row_data(LM_TYPE_F32, f, sizeof f));
    f[2] = INFINITY;
    CHECK(!lm_validate_row_data(LM_TYPE_F32, f, sizeof f));
    struct lm_block_q8_K k8;
    memset(&k8, 0, sizeof k8);
    CHECK(lm_validate_row_data(LM_TYPE_Q8_K, &k8, sizeof k8));
    k8.d = NAN;
    CHECK(!lm_validate_row_data(LM_TYPE_Q8_K, &k8, sizeof k8));
    int32_t ints[3] = {1, 2, 3};
    CHECK(lm_validate_row_data(LM_TYPE_I32, ints, sizeof ints));
    CHECK(!lm_validate_row_data((enum lm_type)4, ints, sizeof ints));
}

/* Q8_1 / Q8_K have no fixtures (ggml never writes them to files): check the
 * properties that define them on the N(0,1) fixture input. */
static void test_activation_types(void)
{
    float *in = load("Q8_0", ".input.f32", NELEM * 4);
    if (!in)
        return;
    static struct lm_block_q8_1 b1[NELEM / 32];
    static struct lm_block_q8_K bk[NELEM / 256];
    static float out[NELEM];
    lm_quant_traits(LM_TYPE_Q8_1)->from_float(in, b1, NELEM);
    /* Q8_1's d and qs are Q8_0's (same reference rounding) */
    static struct lm_block_q8_0 b0[NELEM / 32];
    lm_quant_traits(LM_TYPE_Q8_0)->from_float(in, b0, NELEM);
    int bad = 0;
    for (int i = 0; i < NELEM / 32; i++) {
        int sum = 0;
        float amax = 0;
        for (int j = 0; j < 32; j++) {
            sum += b1[i].qs[j];
            amax = fmaxf(amax, fabsf(in[32 * i + j]));
        }
        bad += b1[i].d != b0[i].d || memcmp(b1[i].qs, b0[i].qs, 32) != 0;
        /* s is rounded from the fp32 scale, not from the stored fp16 d */
        bad += b1[i].s != lm_fp32_to_fp16((float)sum * (amax / 127));
    }
    CHECKF(bad == 0, "q8_1: %d blocks differ from q8_0 / d*sum(q)", bad);
    printf("q8_1 : properties %s (no fixtures)\n", bad ? "FAIL" : "ok");
    lm_quant_traits(LM_TYPE_Q8_K)->from_float(in, bk, NELEM);
    lm_quant_traits(LM_TYPE_Q8_K)->to_float(bk, out, NELEM);
    bad = 0;
    for (int i = 0; i < NELEM / 256; i++) {
        int amax = 0;
        for (int j = 0; j < 16; j++) {
            int s = 0;
            for (int l = 0; l < 16; l++) {
                int v = bk[i].qs[16 * j + l];
                s += v;
                amax = abs(v) > amax ? abs(v) : amax;
            }
            bad += s != bk[i].bsums[j];
        }
        float absmax = 0;
        for (int j = 0; j < 256; j++)
            absmax = fmaxf(absmax, fabsf(in[256 * i + j]));
        bad += absmax != 0 && amax != 127;
        for (int j = 0; j < 256; j++)
            bad += fabsf(out[256 * i + j] - in[256 * i + j]) > fabsf(bk[i].d) * 0.5001f;
    }
    CHECKF(bad == 0, "q8_K: %d property violations", bad);
    printf("q8_K : properties %s (no fixtures)\n", bad ? "FAIL" : "ok");
    free(in);
}

int main(void)
{
    lm_log_set_level(LM_LOG_ERROR); /* the validation tests provoke warnings */
    test_fixtures();
    test_sizes_and_traits();
    test_type_walk();
    test_bad_args();
    test_zero_and_nan();
    test_validate();
    test_activation_types();
    return lm_test_summary();
}
