/* test_bert.c - the BERT encoder (model/arch/bert.c) against llama.cpp.
 *
 * tests/api/data/bert-tiny.gguf is a random-weight BERT (n_embd 32, 4 heads,
 * 2 layers, n_ff 64, 390-token WordPiece vocabulary) written by
 * tests/api/gen_bert_fixture.py; bert-tiny.ref.txt holds llama.cpp's token
 * ids of SENTENCE and its embeddings with pooling none (every token's row),
 * mean and cls (see data/README.md). Checks:
 *  - llama_tokenize(add_bos) gives llama.cpp's ids ([CLS] ... [SEP]);
 *  - llama_get_embeddings after one decode equals the reference within
 *    |a - b| <= 3e-3 (1 + |b|) with an F32 KV cache, and 1e-2 (1 + |b|) with
 *    the default F16 cache (K and V rounded to F16), for the file's mean
 *    pooling and bert.pooling_type overridden to cls and none. The reference
 *    is llama.cpp's F32 attention (flash attention off). Measured (F32 /
 *    F16 cache): mean 2.2e-4 / 8.6e-4, cls 1.7e-3 / 1.6e-3, none 1.7e-3 /
 *    2.9e-3. Nearly all of it is GELU: llama.cpp looks it up in an F16
 *    table, lamina computes it in float (cpu/ops/unary.c); with the table's
 *    rounding emulated the F32-cache differences were 2.4e-5, 1.8e-6, 3.4e-4;
 *  - attention is non-causal: the [CLS] embedding changes when the last word
 *    changes, and stays bit-equal when bert.attention.causal is overridden to
 *    true (the same mask made causal);
 *  - each decode stands alone (a second decode gives the same bits), a batch
 *    of two sequences is refused, a context without embedding = true is
 *    refused, and there are no logits rows. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util_api.h"

#define MODEL LM_SOURCE_DIR "/tests/api/data/bert-tiny.gguf"
#define REF LM_SOURCE_DIR "/tests/api/data/bert-tiny.ref.txt"
#define SENTENCE "the school was in the new world, and she had two years of xylophone!"
#define NE 32
#define MAXT 64

struct ref {
    int n;                 /* tokens */
    llama_token ids[MAXT];
    float none[MAXT * NE]; /* n rows */
    float mean[NE], cls[NE];
};

/* One line "<name> v v v ..." of the reference file into out (n values). */
static bool read_row(FILE *f, const char *name, float *out, int n)
{
    char word[16];
    if (fscanf(f, "%15s", word) != 1 || strcmp(word, name))
        return false;
    for (int i = 0; i < n; i++)
        if (fscanf(f, "%f", &out[i]) != 1)
            return false;
    return true;
}

static bool read_ref(struct ref *r)
{
    FILE *f = fopen(REF, "r");
    char word[16];
    bool ok = f && fscanf(f, "%15s", word) == 1 && !strcmp(word, "ids");
    r->n = 0;
    while (ok && r->n < MAXT && fscanf(f, "%d", &r->ids[r->n]) == 1)
        r->n++;
    ok = ok && r->n > 2 && read_row(f, "none", r->none, r->n * NE) && read_row(f, "mean", r->mean, NE) &&
         read_row(f, "cls", r->cls, NE);
    if (f)
        fclose(f);
    return ok;
}

/* The model with bert.pooling_type (pooling >= 0) and bert.attention.causal
 * (causal >= 0) overridden. */
static struct llama_model *load(int pooling, int causal)
{
    struct llama_model_kv_override ov[3];
    memset(ov, 0, sizeof ov);
    int n = 0;
    if (pooling >= 0) {
        snprintf(ov[n].key, sizeof ov[n].key, "bert.pooling_type");
        ov[n].tag = LLAMA_KV_OVERRIDE_INT;
        ov[n++].int_value = pooling;
    }
    if (causal >= 0) {
        snprintf(ov[n].key, sizeof ov[n].key, "bert.attention.causal");
        ov[n].tag = LLAMA_KV_OVERRIDE_BOOL;
        ov[n++].bool_value = causal != 0;
    }
    struct llama_model_params mp = llama_model_default_params();
    mp.kv_overrides = n ? ov : NULL;
    struct llama_model *m = llama_load_model_from_file(MODEL, mp);
    CHECKF(m != NULL, "cannot load %s (pooling %d causal %d)", MODEL, pooling, causal);
    return m;
}

static struct llama_context *make_ctx(struct llama_model *m, enum ggml_type kv)
{
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 64;
    cp.n_batch = 64;
    cp.n_threads = cp.n_threads_batch = 2;
    cp.embedding = true;
    cp.type_k = cp.type_v = kv;
    return llama_new_context_with_model(m, cp);
}

/* Embeddings of ids (rows * NE floats copied to out); false if decode fails. */
static bool embed(struct llama_context *c, const llama_token *ids, int n, float *out, int rows)
{
    if (llama_decode(c, llama_batch_get_one((llama_token *)ids, n, 0, 0)) != 0)
        return false;
    memcpy(out, llama_get_embeddings(c), (size_t)rows * NE * sizeof(float));
    return true;
}

/* max over i of |a - b| / (1 + |b|) */
static double rel_diff(const float *a, const float *b, int n)
{
    double worst = 0.0;
    for (int i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]) / (1.0 + fabs((double)b[i]));
        if (!(d <= worst))
            worst = isnan(d) ? INFINITY : d;
    }
    return worst;
}

static void test_reference(const struct ref *r)
{
    static const struct {
        int pooling;
        const char *name;
    } modes[3] = {{-1, "mean (the file's)"}, {2, "cls"}, {0, "none"}};
    static const struct {
        enum ggml_type type;
        const char *name;
        double bound;
    } caches[2] = {{GGML_TYPE_F32, "F32", 3e-3}, {GGML_TYPE_F16, "F16", 1e-2}};
    for (int mi = 0; mi < 3; mi++) {
        struct llama_model *m = load(modes[mi].pooling, -1);
        if (!m)
            continue;
        int rows = modes[mi].pooling == 0 ? r->n : 1;
        const float *want = modes[mi].pooling == 0 ? r->none : modes[mi].pooling == 2 ? r->cls : r->mean;
        CHECK(llama_n_embd(m) == NE);
        for (int ci = 0; ci < 2; ci++) {
            struct llama_context *c = make_ctx(m, caches[ci].type);
            CHECK(c != NULL);
            if (!c)
                continue;
            float got[MAXT * NE], again[MAXT * NE];
            CHECK(embed(c, r->ids, r->n, got, rows));
            double d = rel_diff(got, want, rows * NE);
            CHECKF(d <= caches[ci].bound, "%s pooling, %s cache: max rel diff %.3g > %.3g", modes[mi].name,
                   caches[ci].name, d, caches[ci].bound);
            if (getenv("LAMINA_TEST_VERBOSE"))
                printf("bert %s pooling, %s cache: max |a-b|/(1+|b|) = %.3g\n", modes[mi].name, caches[ci].name, d);
            /* each decode stands alone: the same batch again gives the same bits */
            CHECK(embed(c, r->ids, r->n, again, rows));
            CHECK(memcmp(got, again, (size_t)rows * NE * sizeof(float)) == 0);
            CHECK(llama_get_logits_ith(c, 0) == NULL); /* no LM head: no logits rows */
            llama_free(c);
        }
        llama_free_model(m);
    }
}

/* The [CLS] embedding of ids and of ids with the last word changed. */
static double cls_shift(struct llama_model *m, const struct ref *r)
{
    struct llama_context *c = make_ctx(m, GGML_TYPE_F32);
    llama_token alt[MAXT];
    memcpy(alt, r->ids, (size_t)r->n * sizeof *alt);
    alt[r->n - 3] = alt[r->n - 3] == 10 ? 11 : 10; /* a word token before "!" [SEP] */
    float a[NE], b[NE];
    double d = -1.0;
    if (c && embed(c, r->ids, r->n, a, 1) && embed(c, alt, r->n, b, 1))
        d = api_max_diff(a, b, NE);
    llama_free(c);
    return d;
}

static void test_non_causal(const struct ref *r)
{
    struct llama_model *m = load(2, -1);
    if (m) {
        double d = cls_shift(m, r);
        CHECKF(d > 1e-3, "the [CLS] embedding does not see a later token (diff %g)", d);
        llama_free_model(m);
    }
    m = load(2, 1); /* the same model made causal: [CLS] sees only itself */
    if (m) {
        double d = cls_shift(m, r);
        CHECKF(d == 0.0, "causal override: the [CLS] embedding changed with a later token (diff %g)", d);
        llama_free_model(m);
    }
}

static void test_api(const struct ref *r)
{
    struct llama_model *m = load(-1, -1);
    if (!m)
        return;
    llama_token ids[MAXT];
    int n = llama_tokenize(m, SENTENCE, (int)strlen(SENTENCE), ids, MAXT, true, false);
    CHECKF(n == r->n && !memcmp(ids, r->ids, (size_t)n * sizeof *ids), "tokens differ from llama.cpp's (%d vs %d)", n,
           r->n);

    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 64;
    cp.embedding = false; /* an embedding model cannot generate text */
    struct llama_context *c = llama_new_context_with_model(m, cp);
    CHECK(c == NULL);
    llama_free(c);

    c = make_ctx(m, GGML_TYPE_F32);
    if (c) {
        /* two sequences in one batch: refused */
        struct llama_batch b = llama_batch_init(4, 0, 1);
        for (int i = 0; i < 4; i++) {
            b.token[i] = r->ids[i % 2];
            b.pos[i] = i / 2;
            b.n_seq_id[i] = 1;
            b.seq_id[i][0] = i % 2;
            b.logits[i] = 1;
        }
        b.n_tokens = 4;
        CHECK(llama_decode(c, b) == -1);
        llama_batch_free(b);
        /* positions past the position table: refused */
        CHECK(llama_decode(c, llama_batch_get_one(ids, n, 60, 0)) == -1);
        float e[NE];
        CHECK(embed(c, r->ids, r->n, e, 1));
        CHECK(rel_diff(e, r->mean, NE) <= 3e-3);
        llama_free(c);
    }
    llama_free_model(m);
}

int main(void)
{
    api_test_init();
    static struct ref r;
    CHECKF(read_ref(&r), "cannot read %s", REF);
    if (r.n > 2) {
        test_api(&r);
        test_reference(&r);
        test_non_causal(&r);
    }
    return lm_test_summary();
}
