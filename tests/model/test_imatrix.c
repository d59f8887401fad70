/* test_imatrix.c - model/imatrix.h: the imatrix.dat format and the
 * collector's arithmetic.
 *  - a file written by hand in the b1892 layout parses to its values; a set
 *    written and read back is equal, and re-written byte for byte the same,
 *    with and without later llama.cpp's trailer;
 *  - every truncation of a valid file, absurd counts, bad names, duplicate
 *    names, non-finite or negative values and trailing garbage are errors
 *    with a message;
 *  - the check against a model file (names, row lengths), the filters, and
 *    the weights quantize gets (values / ncall);
 *  - the collector on MUL_MAT and MUL_MAT_ID nodes built by hand: which
 *    nodes it wants (b1892's rules), exact per-column sums, per-expert
 *    routing with ids out of range and B1 = 1 or n_used, split and merged
 *    expert naming, experts no row reached.
 * The collection through a real decode is in tests/api/test_api_imatrix.c.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "lm_test.h"
#include "model/imatrix.h"
#include "model/model.h"

static char tmpdir[256];

static void path_in_tmp(char *buf, size_t size, const char *name) { snprintf(buf, size, "%s/%s", tmpdir, name); }

/* ---- a byte builder for hand-made files ---- */

struct bytes {
    uint8_t b[4096];
    size_t n;
};

static void put_i32(struct bytes *b, int32_t v)
{
    uint32_t u = (uint32_t)v;
    for (int i = 0; i < 4; i++)
        b->b[b->n++] = (uint8_t)(u >> (8 * i));
}

static void put_str(struct bytes *b, const char *s)
{
    put_i32(b, (int32_t)strlen(s));
    memcpy(b->b + b->n, s, strlen(s));
    b->n += strlen(s);
}

static void put_f32(struct bytes *b, float f)
{
    memcpy(b->b + b->n, &f, 4);
    b->n += 4;
}

/* Two entries as b1892's save_imatrix writes them. */
static void seed_file(struct bytes *b)
{
    b->n = 0;
    put_i32(b, 2);
    put_str(b, "blk.0.attn_q.weight");
    put_i32(b, 3);
    put_i32(b, 4);
    for (int j = 0; j < 4; j++)
        put_f32(b, 1.5f * (float)(j + 1));
    put_str(b, "blk.0.ffn_down.weight");
    put_i32(b, 2);
    put_i32(b, 2);
    put_f32(b, 0.0f);
    put_f32(b, 8.0f);
}

static lm_status parse(const struct bytes *b, size_t n, struct lm_imatrix **out, char *err, size_t err_size)
{
    return lm_imatrix_parse(b->b, n, out, err, err_size);
}

static void test_parse_seed(void)
{
    struct bytes b;
    struct lm_imatrix *im = NULL;
    char err[256] = "";
    seed_file(&b);
    CHECKF(parse(&b, b.n, &im, err, sizeof err) == LM_OK, "%s", err);
    CHECK(lm_imatrix_n_entries(im) == 2);
    struct lm_imatrix_entry e;
    CHECK(lm_imatrix_entry(im, 0, &e) && !strcmp(e.name, "blk.0.attn_q.weight") && e.ncall == 3 &&
          e.n_values == 4 && e.values[3] == 6.0f);
    CHECK(lm_imatrix_entry(im, 1, &e) && !strcmp(e.name, "blk.0.ffn_down.weight") && e.ncall == 2 &&
          e.n_values == 2 && e.values[1] == 8.0f);
    CHECK(!lm_imatrix_entry(im, 2, &e) && !lm_imatrix_entry(im, -1, &e));
    CHECK(!lm_imatrix_trailer(im, NULL, NULL, NULL));
    /* quantize's weights: values / ncall, only for the exact row length */
    const float *w = lm_imatrix_weights(im, "blk.0.attn_q.weight", 4);
    CHECK(w && w[0] == 0.5f && w[3] == 2.0f);
    CHECK(lm_imatrix_weights(im, "blk.0.attn_q.weight", 8) == NULL);
    CHECK(lm_imatrix_weights(im, "blk.1.attn_q.weight", 4) == NULL);
    CHECK(lm_imatrix_lookup(im, "blk.0.ffn_down.weight", 2)[1] == 4.0f);

    /* write: the same bytes as the hand-made file */
    char path[512];
    path_in_tmp(path, sizeof path, "seed.dat");
    CHECKF(lm_imatrix_write(im, path, err, sizeof err) == LM_OK, "%s", err);
    size_t n;
    uint8_t *got = lm_test_read_file(path, &n);
    CHECK(got && n == b.n && !memcmp(got, b.b, n));
    free(got);
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    CHECK(access(tmp, F_OK) != 0); /* the temporary is gone */
    struct lm_imatrix *back = NULL;
    CHECK(lm_imatrix_read(path, &back, err, sizeof err) == LM_OK && lm_imatrix_n_entries(back) == 2);
    lm_imatrix_free(back);
    lm_imatrix_free(im);
}

/* Later llama.cpp appends the chunk count and the dataset's name: read, kept, written back. */
static void test_trailer(void)
{
    struct bytes b;
    struct lm_imatrix *im = NULL;
    char err[256] = "", path[512];
    seed_file(&b);
    put_i32(&b, 100);
    put_str(&b, "wiki.train.raw");
    CHECKF(parse(&b, b.n, &im, err, sizeof err) == LM_OK, "%s", err);
    int32_t chunks = 0;
    const char *ds = NULL;
    size_t dl = 0;
    CHECK(lm_imatrix_trailer(im, &chunks, &ds, &dl) && chunks == 100 && dl == 14 && !memcmp(ds, "wiki.train.raw", 14));
    path_in_tmp(path, sizeof path, "trailer.dat");
    CHECK(lm_imatrix_write(im, path, err, sizeof err) == LM_OK);
    size_t n;
    uint8_t *got = lm_test_read_file(path, &n);
    CHECK(got && n == b.n && !memcmp(got, b.b, n));
    free(got);
    lm_imatrix_free(im);
    /* an empty dataset name */
    seed_file(&b);
    put_i32(&b, 7);
    put_i32(&b, 0);
    im = NULL;
    CHECK(parse(&b, b.n, &im, err, sizeof err) == LM_OK && lm_imatrix_trailer(im, &chunks, NULL, &dl) &&
          chunks == 7 && dl == 0);
    lm_imatrix_free(im);
}

/* Every malformed file is refused with a message, never a crash. */
static void expect_corrupt(const struct bytes *b, const char *what, const char *needle)
{
    struct lm_imatrix *im = NULL;
    char err[256] = "";
    lm_status st = parse(b, b->n, &im, err, sizeof err);
    CHECKF(st == LM_ERR_CORRUPT && im == NULL && err[0], "%s: status %d, '%s'", what, (int)st, err);
    if (needle)
        CHECKF(strstr(err, needle) != NULL, "%s: message '%s' lacks '%s'", what, err, needle);
    lm_imatrix_free(im);
}

static void test_bad_files(void)
{
    struct bytes b, t;
    char err[256];
    seed_file(&b);
    /* every truncation (and the empty file) */
    int bad = 0;
    for (size_t n = 0; n < b.n; n++) {
        struct lm_imatrix *im = NULL;
        err[0] = 0;
        if (lm_imatrix_parse(b.b, n, &im, err, sizeof err) != LM_ERR_CORRUPT || im || !err[0])
            bad++;
        lm_imatrix_free(im);
    }
    CHECKF(bad == 0, "%d truncations not refused", bad);
    /* absurd or invalid counts */
    t = b;
    t.n = 0;
    put_i32(&t, 0);
    t.n = b.n;
    expect_corrupt(&t, "0 entries", "entries");
    t = b;
    t.n = 0;
    put_i32(&t, 0x7fffffff);
    t.n = b.n;
    expect_corrupt(&t, "huge entry count", "entries");
    t = b;
    t.n = 0;
    put_i32(&t, -1);
    t.n = b.n;
    expect_corrupt(&t, "negative entry count", NULL);
    t = b; /* name length */
    t.n = 4;
    put_i32(&t, 1000000);
    t.n = b.n;
    expect_corrupt(&t, "huge name", "name length");
    t = b;
    t.n = 4;
    put_i32(&t, 0);
    t.n = b.n;
    expect_corrupt(&t, "empty name", "name length");
    t = b;
    t.n = 4;
    put_i32(&t, -5);
    t.n = b.n;
    expect_corrupt(&t, "negative name length", "name length");
    t = b; /* a NUL inside the name */
    t.b[4 + 4 + 3] = 0;
    expect_corrupt(&t, "NUL in name", "NUL");
    size_t at_counts = 4 + 4 + strlen("blk.0.attn_q.weight");
    t = b;
    t.n = at_counts;
    put_i32(&t, -1);
    t.n = b.n;
    expect_corrupt(&t, "negative ncall", "ncall");
    t = b;
    t.n = at_counts + 4;
    put_i32(&t, 0x7fffffff);
    t.n = b.n;
    expect_corrupt(&t, "huge nval", "truncated");
    t = b;
    t.n = at_counts + 4;
    put_i32(&t, 0);
    t.n = b.n;
    expect_corrupt(&t, "nval 0", "nval");
    /* values */
    size_t at_vals = at_counts + 8;
    t = b;
    t.n = at_vals;
    put_f32(&t, NAN);
    t.n = b.n;
    expect_corrupt(&t, "NaN value", "value 0");
    t = b;
    t.n = at_vals + 4;
    put_f32(&t, INFINITY);
    t.n = b.n;
    expect_corrupt(&t, "Inf value", "value 1");
    t = b;
    t.n = at_vals + 8;
    put_f32(&t, -1.0f);
    t.n = b.n;
    expect_corrupt(&t, "negative value", "value 2");
    /* the same name twice */
    t = b;
    t.n = at_vals + 16; /* the second entry, named as the first */
    put_str(&t, "blk.0.attn_q.weight");
    put_i32(&t, 1);
    put_i32(&t, 1);
    put_f32(&t, 1.0f);
    expect_corrupt(&t, "duplicate", "twice");
    /* trailing bytes that are not the later trailer */
    for (int extra = 1; extra <= 12; extra++) {
        t = b;
        for (int k = 0; k < extra; k++)
            t.b[t.n++] = (uint8_t)(0x41 + k);
        expect_corrupt(&t, "trailing garbage", "unexpected bytes");
    }
    t = b; /* a trailer whose length runs past the end */
    put_i32(&t, 1);
    put_i32(&t, 100);
    put_str(&t, "x");
    expect_corrupt(&t, "long trailer", "unexpected bytes");
    /* many entries: linear time; more than LM_IMATRIX_MAX_ENTRIES: refused */
    {
        size_t cap = 4 + (size_t)(LM_IMATRIX_MAX_ENTRIES + 1) * 24;
        uint8_t *big = malloc(cap);
        struct bytes hdr;
        size_t n = 4;
        for (int32_t i = 0; big && i <= LM_IMATRIX_MAX_ENTRIES; i++) {
            char name[32];
            hdr.n = 0;
            snprintf(name, sizeof name, "t%d", i);
            put_str(&hdr, name);
            put_i32(&hdr, 1);
            put_i32(&hdr, 1);
            put_f32(&hdr, 1.0f);
            memcpy(big + n, hdr.b, hdr.n);
            n += hdr.n;
        }
        struct lm_imatrix *im = NULL;
        int32_t count = LM_IMATRIX_MAX_ENTRIES + 1;
        if (big) {
            memcpy(big, &count, 4);
            CHECK(lm_imatrix_parse(big, n, &im, err, sizeof err) == LM_ERR_CORRUPT && strstr(err, "more than"));
            count = LM_IMATRIX_MAX_ENTRIES;
            memcpy(big, &count, 4);
            n -= 4 + strlen("t262144") + 12; /* drop the last entry */
            CHECKF(lm_imatrix_parse(big, n, &im, err, sizeof err) == LM_OK, "%s", err);
            CHECK(lm_imatrix_n_entries(im) == LM_IMATRIX_MAX_ENTRIES && lm_imatrix_find(im, "t262143") ==
                  LM_IMATRIX_MAX_ENTRIES - 1 && lm_imatrix_find(im, "t262144") < 0);
            lm_imatrix_free(im);
        }
        free(big);
    }
    /* random garbage */
    uint32_t s = 12345;
    int crashes_not_refused = 0;
    for (int k = 0; k < 200; k++) {
        t.n = 1 + k % 300;
        for (size_t i = 0; i < t.n; i++) {
            s = s * 1664525u + 1013904223u;
            t.b[i] = (uint8_t)(s >> 24);
        }
        struct lm_imatrix *im = NULL;
        if (lm_imatrix_parse(t.b, t.n, &im, err, sizeof err) == LM_OK)
            crashes_not_refused++;
        lm_imatrix_free(im);
    }
    CHECK(crashes_not_refused == 0);
    /* files */
    struct lm_imatrix *im = NULL;
    CHECK(lm_imatrix_read("/nonexistent/imatrix.dat", &im, err, sizeof err) == LM_ERR_IO && !im && strstr(err, "cannot open"));
    CHECK(lm_imatrix_read("/", &im, err, sizeof err) != LM_OK && !im);
}

static void test_add_write(void)
{
    struct lm_imatrix *im = lm_imatrix_new();
    float v[3] = {1, 2, 3}, nan_v[1] = {NAN}, neg[1] = {-1.0f};
    char err[256], path[512];
    CHECK(lm_imatrix_add(im, "a", 1, v, 3) == LM_OK);
    CHECK(lm_imatrix_add(im, "a", 1, v, 3) == LM_ERR_INVALID_ARG);       /* duplicate */
    CHECK(lm_imatrix_add(im, "", 1, v, 3) == LM_ERR_INVALID_ARG);        /* empty name */
    CHECK(lm_imatrix_add(im, "b", -1, v, 3) == LM_ERR_INVALID_ARG);      /* ncall */
    CHECK(lm_imatrix_add(im, "b", 1, v, 0) == LM_ERR_INVALID_ARG);       /* no values */
    CHECK(lm_imatrix_add(im, "b", 1, nan_v, 1) == LM_ERR_INVALID_ARG);   /* NaN */
    CHECK(lm_imatrix_add(im, "b", 1, neg, 1) == LM_ERR_INVALID_ARG);     /* negative */
    char longname[LM_MAX_NAME + 1];
    memset(longname, 'x', LM_MAX_NAME);
    longname[LM_MAX_NAME] = 0;
    CHECK(lm_imatrix_add(im, longname, 1, v, 3) == LM_ERR_INVALID_ARG);
    CHECK(lm_imatrix_add(im, "b", 0, v, 2) == LM_OK);
    const float *wb = lm_imatrix_weights(im, "b", 2);
    CHECK(wb && wb[1] == 2.0f); /* ncall 0: the values as they are */
    CHECK(lm_imatrix_find(im, "b") == 1 && lm_imatrix_find(im, "c") == -1);
    /* write errors */
    CHECK(lm_imatrix_write(im, "/nonexistent/dir/x.dat", err, sizeof err) == LM_ERR_IO && strstr(err, "cannot"));
    struct lm_imatrix *empty = lm_imatrix_new();
    path_in_tmp(path, sizeof path, "empty.dat");
    CHECK(lm_imatrix_write(empty, path, err, sizeof err) == LM_ERR_INVALID_ARG);
    lm_imatrix_free(empty);
    /* filters (b1892's substring match) */
    const char *inc[] = {"attn", NULL}, *exc[] = {"attn_k", NULL};
    CHECK(lm_imatrix_add(im, "blk.0.attn_q.weight", 1, v, 3) == LM_OK);
    CHECK(lm_imatrix_add(im, "blk.0.attn_k.weight", 1, v, 3) == LM_OK);
    lm_imatrix_filter(im, inc, exc);
    CHECK(lm_imatrix_n_entries(im) == 1 && lm_imatrix_find(im, "blk.0.attn_q.weight") == 0);
    lm_imatrix_filter(im, NULL, inc);
    CHECK(lm_imatrix_n_entries(im) == 0);
    lm_imatrix_free(im);
    lm_imatrix_free(NULL);
}

/* ---- the check against a model file ---- */

static void test_check(void)
{
    struct lm_gguf *g = NULL;
    char err[256];
    CHECK(lm_gguf_open(lm_test_shared("models/stories260K.gguf"), &g, err, sizeof err) == LM_OK);
    if (!g)
        return;
    float v[172];
    for (int j = 0; j < 172; j++)
        v[j] = 1.0f;
    struct lm_imatrix *im = lm_imatrix_new();
    CHECK(lm_imatrix_add(im, "blk.0.attn_q.weight", 1, v, 64) == LM_OK);
    CHECK(lm_imatrix_add(im, "blk.4.ffn_down.weight", 1, v, 172) == LM_OK);
    CHECK(lm_imatrix_add(im, "output.weight", 1, v, 64) == LM_OK);
    CHECK(lm_imatrix_check(im, g, err, sizeof err) == LM_OK);
    CHECK(lm_imatrix_add(im, "blk.5.attn_q.weight", 1, v, 64) == LM_OK); /* stories260K has 5 layers */
    CHECK(lm_imatrix_check(im, g, err, sizeof err) == LM_ERR_NOT_FOUND && strstr(err, "blk.5.attn_q.weight"));
    lm_imatrix_free(im);
    im = lm_imatrix_new();
    CHECK(lm_imatrix_add(im, "blk.0.ffn_down.weight", 1, v, 64) == LM_OK); /* rows of 172 */
    CHECK(lm_imatrix_check(im, g, err, sizeof err) == LM_ERR_SHAPE && strstr(err, "172"));
    lm_imatrix_free(im);
    lm_gguf_close(g);
}

/* ---- the collector on hand-built nodes ---- */

static struct lm_ctx *arena(void)
{
    struct lm_ctx *ctx = NULL;
    struct lm_ctx_params p = {.mem_size = 1 << 20};
    CHECK(lm_ctx_new(&p, &ctx) == LM_OK);
    return ctx;
}

static void fill(struct lm_tensor *t, uint32_t seed)
{
    float *d = t->data;
    for (int64_t i = 0; i < t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3]; i++) {
        seed = seed * 1664525u + 1013904223u;
        d[i] = (float)((int)(seed >> 20) - 2048) / 512.0f; /* multiples of 1/512: exact squares and sums */
    }
}

static bool near(double got, double want) { return fabs(got - want) <= 1e-6 * (1.0 + fabs(want)); }

static void test_want(void)
{
    struct lm_model m;
    memset(&m, 0, sizeof m);
    struct lm_ctx *ctx = arena();
    struct lm_imatrix_collector *c = lm_imatrix_collector_new(&m, false), *co = lm_imatrix_collector_new(&m, true);
    struct lm_tensor *w = lm_new_tensor_2d(ctx, LM_TYPE_F32, 8, 4), *out = lm_new_tensor_2d(ctx, LM_TYPE_F32, 8, 4);
    struct lm_tensor *x16 = lm_new_tensor_2d(ctx, LM_TYPE_F32, 8, 16), *x15 = lm_new_tensor_2d(ctx, LM_TYPE_F32, 8, 15);
    struct lm_tensor *x16h = lm_new_tensor_2d(ctx, LM_TYPE_F16, 8, 16);
    lm_set_name(w, "blk.3.attn_q.weight");
    lm_set_name(out, "output.weight");
    CHECK(lm_imatrix_collector_want(lm_mul_mat(ctx, w, x16), c));
    CHECK(!lm_imatrix_collector_want(lm_mul_mat(ctx, w, x15), c));  /* fewer than 16 rows */
    CHECK(!lm_imatrix_collector_want(lm_mul_mat(ctx, out, x16), c)); /* output only when asked */
    CHECK(lm_imatrix_collector_want(lm_mul_mat(ctx, out, x16), co));
    struct lm_tensor *y = lm_add(ctx, x16, x16); /* not a product */
    CHECK(!lm_imatrix_collector_want(y, c));
    struct lm_tensor *act = lm_scale(ctx, x16, 2.0f); /* src0 computed, not a weight */
    lm_set_name(act, "blk.0.x");
    CHECK(!lm_imatrix_collector_want(lm_mul_mat(ctx, act, x16), c));
    x16->flags |= LM_FLAG_INPUT; /* an input as src0 is not a weight */
    lm_set_name(x16, "blk.0.inp");
    CHECK(!lm_imatrix_collector_want(lm_mul_mat(ctx, x16, x16), c));
    struct lm_tensor *mm16 = lm_mul_mat(ctx, w, x16h); /* last: it may fail and stop the arena */
    CHECK(!mm16 || !lm_imatrix_collector_want(mm16, c)); /* F16 activations (if the constructor allows them) */
    lm_imatrix_collector_free(c);
    lm_imatrix_collector_free(co);
    lm_imatrix_collector_free(NULL);
    lm_ctx_free(ctx);
}

static void test_collect_mul_mat(void)
{
    struct lm_model m;
    memset(&m, 0, sizeof m);
    struct lm_ctx *ctx = arena();
    struct lm_imatrix_collector *c = lm_imatrix_collector_new(&m, false);
    struct lm_tensor *w = lm_new_tensor_2d(ctx, LM_TYPE_F32, 8, 4);
    struct lm_tensor *x = lm_new_tensor_2d(ctx, LM_TYPE_F32, 8, 20), *x2 = lm_new_tensor_2d(ctx, LM_TYPE_F32, 8, 17);
    lm_set_name(w, "blk.0.attn_q.weight");
    fill(x, 1);
    fill(x2, 2);
    struct lm_tensor *n1 = lm_mul_mat(ctx, w, x), *n2 = lm_mul_mat(ctx, w, x2);
    CHECK(lm_imatrix_collector_observe(n1, c) == LM_OK && lm_imatrix_collector_observe(n2, c) == LM_OK);
    CHECK(lm_imatrix_collector_calls(c) == 2);
    struct lm_imatrix *im = NULL;
    CHECK(lm_imatrix_collector_result(c, &im) == LM_OK && lm_imatrix_n_entries(im) == 1);
    struct lm_imatrix_entry e;
    if (lm_imatrix_entry(im, 0, &e)) {
        CHECK(!strcmp(e.name, "blk.0.attn_q.weight") && e.ncall == 2 && e.n_values == 8);
        int wrong = 0;
        for (int j = 0; j < 8; j++) {
            double want = 0;
            for (int r = 0; r < 20; r++)
                want += (double)((float *)x->data)[r * 8 + j] * ((float *)x->data)[r * 8 + j];
            for (int r = 0; r < 17; r++)
                want += (double)((float *)x2->data)[r * 8 + j] * ((float *)x2->data)[r * 8 + j];
            wrong += !near(e.values[j], want);
        }
        CHECK(wrong == 0);
    }
    lm_imatrix_free(im);
    /* a non-finite activation stops the collection with a message */
    ((float *)x->data)[5] = INFINITY;
    CHECK(lm_imatrix_collector_observe(n1, c) == LM_ERR_CORRUPT && strstr(lm_imatrix_collector_error(c), "attn_q"));
    lm_imatrix_collector_free(c);
    lm_ctx_free(ctx);
}

/* Expected per-expert sums of a MUL_MAT_ID node. */
static void expert_sums(const struct lm_tensor *x, const int32_t *ids, int n_used, int T, int E, double *sum,
                        int *rows)
{
    int64_t K = x->ne[0], B1 = x->ne[1];
    memset(sum, 0, (size_t)(E * K) * sizeof *sum);
    memset(rows, 0, (size_t)E * sizeof *rows);
    for (int t = 0; t < T; t++)
        for (int s = 0; s < n_used; s++) {
            int e = ids[t * n_used + s];
            if (e < 0 || e >= E)
                continue;
            const float *row = (const float *)x->data + (t * B1 + s % B1) * K;
            for (int64_t j = 0; j < K; j++)
                sum[e * K + j] += (double)row[j] * row[j];
            rows[e]++;
        }
}

static void test_collect_experts_split(void)
{
    enum { K = 8, M = 4, E = 4, NU = 2, T = 18 };
    struct lm_model m;
    memset(&m, 0, sizeof m); /* no file: experts named as split tensors */
    struct lm_ctx *ctx = arena();
    struct lm_imatrix_collector *c = lm_imatrix_collector_new(&m, false);
    struct lm_tensor *as = lm_new_tensor_3d(ctx, LM_TYPE_F32, K, M, E);
    struct lm_tensor *x1 = lm_new_tensor_3d(ctx, LM_TYPE_F32, K, 1, T);  /* B1 = 1 */
    struct lm_tensor *x2 = lm_new_tensor_3d(ctx, LM_TYPE_F32, K, NU, T); /* B1 = n_used */
    struct lm_tensor *ids = lm_new_tensor_2d(ctx, LM_TYPE_I32, NU, T);
    lm_set_name(as, "blk.1.ffn_up_exps.weight");
    fill(x1, 3);
    fill(x2, 4);
    int32_t *id = ids->data;
    for (int t = 0; t < T; t++) { /* expert 3 is never chosen; some ids are out of range */
        id[t * NU] = t % 3;
        id[t * NU + 1] = t % 5 == 0 ? -1 : t % 7 == 0 ? 9 : (t + 1) % 3;
    }
    struct lm_tensor *n1 = lm_mul_mat_id(ctx, as, x1, ids), *n2 = lm_mul_mat_id(ctx, as, x2, ids);
    CHECK(n1 && n2 && lm_imatrix_collector_want(n1, c) && lm_imatrix_collector_want(n2, c));
    CHECK(lm_imatrix_collector_observe(n1, c) == LM_OK && lm_imatrix_collector_observe(n2, c) == LM_OK);
    double s1[E * K], s2[E * K];
    int r1[E], r2[E];
    expert_sums(x1, id, NU, T, E, s1, r1);
    expert_sums(x2, id, NU, T, E, s2, r2);
    struct lm_imatrix *im = NULL;
    CHECK(lm_imatrix_collector_result(c, &im) == LM_OK);
    CHECK(lm_imatrix_n_entries(im) == 3); /* expert 3 got no row: not stored */
    int wrong = 0;
    for (int e = 0; e < 3; e++) {
        char name[64];
        snprintf(name, sizeof name, "blk.1.ffn_up.%d.weight", e);
        struct lm_imatrix_entry en;
        if (!lm_imatrix_entry(im, lm_imatrix_find(im, name), &en)) {
            wrong++;
            continue;
        }
        wrong += en.ncall != 2 || en.n_values != K;
        for (int j = 0; j < K; j++)
            wrong += !near(en.values[j], s1[e * K + j] + s2[e * K + j]);
    }
    CHECKF(wrong == 0, "%d wrong", wrong);
    CHECK(lm_imatrix_find(im, "blk.1.ffn_up.3.weight") < 0);
    lm_imatrix_free(im);
    lm_imatrix_collector_free(c);
    lm_ctx_free(ctx);
}

/* A model file with merged experts: one entry of ne0 * n_expert values,
 * each expert's mean times ncall (later llama.cpp's legacy format). */
static void test_collect_experts_merged(void)
{
    enum { K = 8, M = 4, E = 3, NU = 2, T = 16 };
    char path[512], err[256];
    path_in_tmp(path, sizeof path, "merged.gguf");
    struct lm_gguf_writer *wr = NULL;
    static float zeros[K * M * E];
    CHECK(lm_gguf_writer_new(&wr) == LM_OK);
    CHECK(lm_gguf_add_tensor(wr, "blk.0.ffn_gate_exps.weight", LM_TYPE_F32, 3, (const int64_t[]){K, M, E}, zeros) ==
          LM_OK);
    CHECK(lm_gguf_write_file(wr, path) == LM_OK);
    lm_gguf_writer_free(wr);
    struct lm_model m;
    memset(&m, 0, sizeof m);
    CHECK(lm_gguf_open(path, &m.gguf, err, sizeof err) == LM_OK);
    struct lm_ctx *ctx = arena();
    struct lm_imatrix_collector *c = lm_imatrix_collector_new(&m, false);
    struct lm_tensor *as = lm_new_tensor_3d(ctx, LM_TYPE_F32, K, M, E);
    struct lm_tensor *x = lm_new_tensor_3d(ctx, LM_TYPE_F32, K, 1, T);
    struct lm_tensor *ids = lm_new_tensor_2d(ctx, LM_TYPE_I32, NU, T);
    lm_set_name(as, "blk.0.ffn_gate_exps.weight");
    fill(x, 5);
    int32_t *id = ids->data;
    for (int t = 0; t < T; t++) {
        id[t * NU] = t % E;
        id[t * NU + 1] = (t + 1) % E;
    }
    struct lm_tensor *n = lm_mul_mat_id(ctx, as, x, ids);
    CHECK(lm_imatrix_collector_observe(n, c) == LM_OK && lm_imatrix_collector_observe(n, c) == LM_OK);
    double s[E * K];
    int r[E];
    expert_sums(x, id, NU, T, E, s, r);
    struct lm_imatrix *im = NULL;
    struct lm_imatrix_entry en;
    CHECK(lm_imatrix_collector_result(c, &im) == LM_OK && lm_imatrix_n_entries(im) == 1);
    if (lm_imatrix_entry(im, 0, &en)) {
        CHECK(!strcmp(en.name, "blk.0.ffn_gate_exps.weight") && en.ncall == 2 && en.n_values == K * E);
        int wrong = 0;
        for (int e = 0; e < E; e++) /* two calls: sums 2 s over 2 r rows, times ncall 2 */
            for (int j = 0; j < K; j++)
                wrong += !near(en.values[e * K + j], 2.0 * s[e * K + j] / (2.0 * r[e]) * 2.0);
        CHECK(wrong == 0);
    }
    CHECK(lm_imatrix_check(im, m.gguf, err, sizeof err) == LM_OK); /* ne0 * n_expert values fit */
    CHECK(lm_imatrix_weights(im, "blk.0.ffn_gate_exps.weight", K) == NULL);
    lm_imatrix_free(im);
    /* an expert without rows: the merged entry is left out */
    for (int t = 0; t < T; t++)
        id[t * NU] = id[t * NU + 1] = t % 2;
    struct lm_imatrix_collector *c2 = lm_imatrix_collector_new(&m, false);
    CHECK(lm_imatrix_collector_observe(n, c2) == LM_OK);
    CHECK(lm_imatrix_collector_result(c2, &im) == LM_OK && lm_imatrix_n_entries(im) == 0);
    lm_imatrix_free(im);
    lm_imatrix_collector_free(c2);
    lm_imatrix_collector_free(c);
    lm_gguf_close(m.gguf);
    lm_ctx_free(ctx);
    unlink(path);
}

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/lm_test_imatrix_XXXXXX");
    if (!mkdtemp(tmpdir)) {
        fprintf(stderr, "cannot make a temporary folder\n");
        return 1;
    }
    test_parse_seed();
    test_trailer();
    test_bad_files();
    test_add_write();
    test_check();
    test_want();
    test_collect_mul_mat();
    test_collect_experts_split();
    test_collect_experts_merged();
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0)
        fprintf(stderr, "warning: could not remove %s\n", tmpdir);
    return lm_test_summary();
}
