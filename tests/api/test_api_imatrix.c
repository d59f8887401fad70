/* test_api_imatrix.c - importance matrices end to end: collection during
 * llama_decode (src/api/imatrix_api.h, the scheduler observer) and their use
 * by llama_model_quantize (include/lamina_imatrix.h).
 *  - stories260K: the sums entering blk.0.attn_q/k/v equal a computation by
 *    hand from the GGUF weights (token embedding rows, RMS norm, attn_norm
 *    weight); q, k, v agree exactly, and so do ffn_gate and ffn_up of every
 *    layer; ncall counts decodes of 16 or more tokens only; output.weight
 *    only with process_output; the logits do not change while collecting;
 *    fused and unfused kernels, repacked and plain weights give the same sums;
 *  - llama-moe (split experts): one entry per expert, and the experts of a
 *    layer together saw each token twice (2 used): their sums add up to twice
 *    the router's;
 *  - llama_model_quantize: Q4_K_M with an imatrix works and differs from
 *    without, and the same weights given in memory give the same file; exclude-all equals no imatrix; Q2_K_S works with it and fails
 *    without; a wrong magic, a missing path, another
 *    model's imatrix and a truncated file are refused before the output exists.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/api.h"
#include "api/imatrix_api.h"
#include "cpu/cpu_internal.h"
#include "cpu/repack.h"
#include "gguf/gguf.h"
#include "lamina_imatrix.h"
#include "util_api.h"

#define STORIES "models/stories260K.gguf"
#define SYNTH "fixtures/quantize/synth-llama-f16.gguf"
#define N_TOK 40

static const char *TEXT = "Once upon a time, there was a little girl named Lily. She loved to play outside in the "
                          "park with her friends. One day, she saw a big red ball under a tree and ran to get it.";

static int tokens(struct llama_model *m, llama_token *out, int n_max)
{
    int n = llama_tokenize(m, TEXT, (int32_t)strlen(TEXT), out, n_max, true, false);
    return n < 0 ? n_max : n;
}

/* Decode toks[0..n) at positions 0.. on a cleared cache, collecting into *out
 * (NULL: no collection). Returns llama_decode's result. */
static int decode(struct llama_context *ctx, llama_token *toks, int n)
{
    llama_kv_cache_clear(ctx);
    return llama_decode(ctx, llama_batch_get_one(toks, n, 0, 0));
}

static struct lm_imatrix *collect(struct llama_context *ctx, llama_token *toks, int n, bool process_output)
{
    struct lm_imatrix_collector *c = NULL;
    struct lm_imatrix *im = NULL;
    CHECK(lm_api_imatrix_start(ctx, process_output, &c) == LM_OK);
    CHECK(decode(ctx, toks, n) == 0);
    lm_api_imatrix_stop(ctx);
    CHECK(lm_imatrix_collector_result(c, &im) == LM_OK);
    lm_imatrix_collector_free(c);
    return im;
}

static const float *values(const struct lm_imatrix *im, const char *name, int32_t *ncall, int32_t *n)
{
    struct lm_imatrix_entry e;
    if (!lm_imatrix_entry(im, lm_imatrix_find(im, name), &e))
        return NULL;
    if (ncall)
        *ncall = e.ncall;
    if (n)
        *n = e.n_values;
    return e.values;
}

/* Same entries with values within rel of each other (0: bit for bit). */
static bool close_values(const struct lm_imatrix *a, const struct lm_imatrix *b, double rel)
{
    if (!a || !b || lm_imatrix_n_entries(a) != lm_imatrix_n_entries(b))
        return false;
    for (int64_t i = 0; i < lm_imatrix_n_entries(a); i++) {
        struct lm_imatrix_entry ea, eb;
        lm_imatrix_entry(a, i, &ea);
        if (!lm_imatrix_entry(b, lm_imatrix_find(b, ea.name), &eb) || ea.ncall != eb.ncall ||
            ea.n_values != eb.n_values)
            return false;
        for (int32_t j = 0; j < ea.n_values; j++)
            if (fabs((double)ea.values[j] - eb.values[j]) > rel * fabs((double)ea.values[j]))
                return false;
    }
    return true;
}

static bool same_values(const struct lm_imatrix *a, const struct lm_imatrix *b) { return close_values(a, b, 0.0); }

/* sum_t (rms_norm(embd[tok_t]) * attn_norm)^2 from the file's bytes, in double. */
static void by_hand(const llama_token *toks, int n, double *want)
{
    struct lm_gguf *g = NULL;
    char err[200];
    size_t size;
    uint8_t *file = lm_test_read_file(lm_test_shared(STORIES), &size);
    CHECK(file && lm_gguf_open(lm_test_shared(STORIES), &g, err, sizeof err) == LM_OK);
    memset(want, 0, 64 * sizeof *want);
    if (!file || !g)
        return;
    const struct lm_gguf_tensor_info *emb = lm_gguf_tensor_info(g, lm_gguf_find_tensor(g, "token_embd.weight"));
    const struct lm_gguf_tensor_info *nw = lm_gguf_tensor_info(g, lm_gguf_find_tensor(g, "blk.0.attn_norm.weight"));
    float eps = 0;
    CHECK(lm_gguf_get_f32(g, lm_gguf_find_key(g, "llama.attention.layer_norm_rms_epsilon"), &eps) == LM_OK);
    CHECK(emb->type == LM_TYPE_F32 && emb->ne[0] == 64 && nw->type == LM_TYPE_F32);
    const float *w = (const float *)(file + nw->offset);
    for (int t = 0; t < n; t++) {
        const float *x = (const float *)(file + emb->offset) + (size_t)toks[t] * 64;
        double ss = 0;
        for (int j = 0; j < 64; j++)
            ss += (double)x[j] * x[j];
        double scale = 1.0 / sqrt(ss / 64 + eps);
        for (int j = 0; j < 64; j++) {
            double v = x[j] * scale * w[j];
            want[j] += v * v;
        }
    }
    lm_gguf_close(g);
    free(file);
}

static void test_stories(void)
{
    struct llama_model *m = api_start(STORIES);
    if (!m)
        return;
    struct llama_context *ctx = api_ctx(m, 128, 64, true);
    llama_token toks[128];
    int n = tokens(m, toks, 128);
    CHECK(n >= N_TOK);
    /* the logits while collecting are those without */
    const int nv = llama_n_vocab(m);
    float *ref = malloc((size_t)N_TOK * nv * sizeof *ref);
    CHECK(decode(ctx, toks, N_TOK) == 0);
    memcpy(ref, llama_get_logits(ctx), (size_t)N_TOK * nv * sizeof *ref);
    struct lm_imatrix *im = collect(ctx, toks, N_TOK, false);
    CHECK(!memcmp(ref, llama_get_logits(ctx), (size_t)N_TOK * nv * sizeof *ref));
    free(ref);
    CHECK(lm_imatrix_n_entries(im) == 7 * 5 && lm_imatrix_find(im, "output.weight") < 0);

    /* blk.0's attention input, by hand */
    double want[64], maxw = 0;
    by_hand(toks, N_TOK, want);
    int32_t ncall = 0, nval = 0;
    const float *q = values(im, "blk.0.attn_q.weight", &ncall, &nval);
    const float *k = values(im, "blk.0.attn_k.weight", NULL, NULL), *v = values(im, "blk.0.attn_v.weight", NULL, NULL);
    CHECK(q && k && v && ncall == 1 && nval == 64);
    if (q && k && v) {
        for (int j = 0; j < 64; j++)
            maxw = want[j] > maxw ? want[j] : maxw;
        int wrong = 0;
        for (int j = 0; j < 64; j++)
            wrong += fabs(q[j] - want[j]) > 1e-5 * maxw;
        CHECKF(wrong == 0, "%d of 64 columns differ from the computation by hand (q[0] %g, want %g)", wrong,
               (double)q[0], want[0]);
        CHECK(!memcmp(q, k, 64 * sizeof *q) && !memcmp(q, v, 64 * sizeof *q));
        CHECK(maxw > 1.0); /* the text really reached the sums */
    }
    /* gate and up share their input in every layer; down's rows are n_ff long */
    for (int il = 0; il < 5; il++) {
        char g[64], u[64], d[64];
        snprintf(g, sizeof g, "blk.%d.ffn_gate.weight", il);
        snprintf(u, sizeof u, "blk.%d.ffn_up.weight", il);
        snprintf(d, sizeof d, "blk.%d.ffn_down.weight", il);
        const float *gv = values(im, g, NULL, &nval), *uv = values(im, u, NULL, NULL);
        CHECK(gv && uv && nval == 64 && !memcmp(gv, uv, 64 * sizeof *gv));
        CHECK(values(im, d, NULL, &nval) && nval == 172);
    }

    /* fused / unfused kernels and plain weights give the same sums */
    CHECK(lm_tensor_is_repacked((const struct lm_tensor *)llama_get_model_tensor(m, "blk.0.attn_q.weight")));
    lm_cpu_backend_set_fuse(ctx->c->cpu, false);
    struct lm_imatrix *unfused = collect(ctx, toks, N_TOK, false);
    lm_cpu_backend_set_fuse(ctx->c->cpu, true);
    CHECK(same_values(im, unfused));
    lm_imatrix_free(unfused);
    setenv("LAMINA_NO_REPACK", "1", 1);
    struct llama_model *mp = api_load(STORIES);
    unsetenv("LAMINA_NO_REPACK");
    struct llama_context *cp = mp ? api_ctx(mp, 128, 64, true) : NULL;
    CHECK(cp && !lm_tensor_is_repacked((const struct lm_tensor *)llama_get_model_tensor(mp, "blk.0.attn_q.weight")));
    if (cp) {
        /* the plain F32 kernels round differently from the repacked ones: the
         * first products' inputs agree exactly, later ones to rounding (measured
         * up to 6e-4 relative, over 4 chunks of text) */
        struct lm_imatrix *plain = collect(cp, toks, N_TOK, false);
        const float *a = values(im, "blk.0.attn_q.weight", NULL, NULL), *b = values(plain, "blk.0.attn_q.weight", NULL, NULL);
        CHECK(a && b && !memcmp(a, b, 64 * sizeof *a));
        CHECK(close_values(im, plain, 3e-3));
        lm_imatrix_free(plain);
    }
    llama_free(cp);
    llama_free_model(mp);
    lm_imatrix_free(im);

    /* ncall: decodes of fewer than 16 tokens do not count */
    struct lm_imatrix_collector *c = NULL;
    CHECK(lm_api_imatrix_start(ctx, true, &c) == LM_OK);
    llama_kv_cache_clear(ctx);
    CHECK(llama_decode(ctx, llama_batch_get_one(toks, 20, 0, 0)) == 0);
    CHECK(llama_decode(ctx, llama_batch_get_one(toks + 20, 8, 20, 0)) == 0);  /* not counted */
    CHECK(llama_decode(ctx, llama_batch_get_one(toks + 28, 16, 28, 0)) == 0); /* counted */
    lm_api_imatrix_stop(ctx);
    CHECK(lm_imatrix_collector_calls(c) == 2);
    CHECK(decode(ctx, toks, 20) == 0); /* after stop: nothing more */
    CHECK(lm_imatrix_collector_calls(c) == 2);
    CHECK(lm_imatrix_collector_result(c, &im) == LM_OK);
    CHECK(values(im, "blk.3.attn_output.weight", &ncall, NULL) && ncall == 2);
    CHECK(values(im, "output.weight", &ncall, &nval) && ncall == 2 && nval == 64); /* logits_all: every row */
    lm_imatrix_free(im);
    lm_imatrix_collector_free(c);
    llama_free(ctx);
    llama_free_model(m);
}

/* Split experts: per-expert entries; each token reaches 2 experts. */
static void test_moe(void)
{
    struct llama_model *m = api_load("fixtures/arch/llama-moe.gguf");
    CHECK(m != NULL);
    if (!m)
        return;
    struct llama_context *ctx = api_ctx(m, 64, 64, false);
    llama_token toks[64];
    for (int i = 0; i < 48; i++)
        toks[i] = (llama_token)(3 + (i * 37) % (llama_n_vocab(m) - 3));
    struct lm_imatrix *im = collect(ctx, toks, 48, false);
    CHECK(lm_imatrix_find(im, "blk.0.ffn_up_exps.weight") < 0);
    for (int il = 0; il < 2; il++) {
        char name[64];
        int32_t n = 0, ncall = 0;
        snprintf(name, sizeof name, "blk.%d.ffn_gate_inp.weight", il);
        const float *router = values(im, name, &ncall, &n);
        CHECK(router && n == 64 && ncall == 1);
        double sum[64] = {0};
        int n_experts = 0;
        for (int x = 0; x < 4; x++) {
            snprintf(name, sizeof name, "blk.%d.ffn_gate.%d.weight", il, x);
            const float *gv = values(im, name, &ncall, &n);
            snprintf(name, sizeof name, "blk.%d.ffn_up.%d.weight", il, x);
            const float *uv = values(im, name, NULL, NULL);
            snprintf(name, sizeof name, "blk.%d.ffn_down.%d.weight", il, x);
            int32_t nd = 0;
            const float *dv = values(im, name, NULL, &nd);
            if (!gv)
                continue; /* an expert no token chose */
            n_experts++;
            CHECK(uv && !memcmp(gv, uv, 64 * sizeof *gv) && ncall == 1 && dv && nd == 128);
            for (int j = 0; j < 64; j++)
                sum[j] += gv[j];
        }
        CHECK(n_experts >= 2);
        int wrong = 0;
        for (int j = 0; router && j < 64; j++)
            wrong += fabs(sum[j] - 2.0 * router[j]) > 1e-4 * (1.0 + 2.0 * router[j]);
        CHECKF(wrong == 0, "layer %d: %d columns of the experts' sums are not twice the router's", il, wrong);
    }
    /* the file round-trips and fits the model it came from */
    const char *path = api_tmp_path("moe.dat");
    char err[256];
    struct lm_imatrix *back = NULL;
    struct lm_gguf *g = NULL;
    CHECK(lm_imatrix_write(im, path, err, sizeof err) == LM_OK && lm_imatrix_read(path, &back, err, sizeof err) ==
          LM_OK && same_values(im, back));
    CHECK(lm_gguf_open(lm_test_shared("fixtures/arch/llama-moe.gguf"), &g, err, sizeof err) == LM_OK &&
          lm_imatrix_check(im, g, err, sizeof err) == LM_OK);
    lm_gguf_close(g);
    lm_imatrix_free(back);
    lm_imatrix_free(im);
    unlink(path);
    llama_free(ctx);
    llama_free_model(m);
}

/* ---- llama_model_quantize with an importance matrix ---- */

static uint32_t quantize(const char *out, enum llama_ftype ft, void *imatrix)
{
    llama_model_quantize_params p = llama_model_quantize_default_params();
    p.ftype = ft;
    p.nthread = 2;
    p.imatrix = imatrix;
    unlink(out);
    return llama_model_quantize(lm_test_shared(SYNTH), out, &p);
}

static bool same_file(const char *a, const char *b)
{
    size_t na, nb;
    uint8_t *da = lm_test_read_file(a, &na), *db = lm_test_read_file(b, &nb);
    bool same = da && db && na == nb && !memcmp(da, db, na);
    free(da);
    free(db);
    return same;
}

static void test_quantize(void)
{
    struct llama_model *m = api_load(SYNTH);
    CHECK(m != NULL);
    if (!m)
        return;
    struct llama_context *ctx = api_ctx(m, 64, 64, false);
    llama_token toks[128];
    int n = tokens(m, toks, 128);
    struct lm_imatrix *im = collect(ctx, toks, n < 64 ? n : 64, false);
    llama_free(ctx);
    llama_free_model(m);
    const char *dat = api_tmp_path("synth.dat"), *plain = api_tmp_path("plain.gguf"),
               *with = api_tmp_path("with.gguf"), *none = api_tmp_path("none.gguf");
    char err[256];
    CHECK(lm_imatrix_n_entries(im) == 7 * 8 && lm_imatrix_write(im, dat, err, sizeof err) == LM_OK);
    lm_imatrix_free(im);

    struct lamina_imatrix_params ip = LAMINA_IMATRIX_PARAMS_INIT;
    ip.path = dat;
    CHECK(quantize(plain, LLAMA_FTYPE_MOSTLY_Q4_K_M, NULL) == 0);
    CHECK(quantize(with, LLAMA_FTYPE_MOSTLY_Q4_K_M, &ip) == 0);
    CHECK(!same_file(plain, with));
    const char *all[] = {"blk.", NULL};
    ip.exclude_weights = all; /* nothing left: as without an imatrix */
    CHECK(quantize(none, LLAMA_FTYPE_MOSTLY_Q4_K_M, &ip) == 0 && same_file(plain, none));
    ip.exclude_weights = NULL;
    const char *only_q[] = {"attn_q", NULL};
    ip.include_weights = only_q;
    CHECK(quantize(none, LLAMA_FTYPE_MOSTLY_Q4_K_M, &ip) == 0 && !same_file(plain, none) && !same_file(with, none));
    ip.include_weights = NULL;
    /* the same weights in memory (values / ncall, as quantize divides a file's) */
    struct lm_imatrix *fim = NULL;
    CHECK(lm_imatrix_read(dat, &fim, err, sizeof err) == LM_OK);
    int64_t ne = lm_imatrix_n_entries(fim);
    struct lamina_imatrix_entry *ents = calloc((size_t)ne + 1, sizeof *ents);
    for (int64_t i = 0; ents && i < ne; i++) {
        struct lm_imatrix_entry e;
        lm_imatrix_entry(fim, i, &e);
        ents[i] = (struct lamina_imatrix_entry){e.name, lm_imatrix_weights(fim, e.name, e.n_values),
                                                (size_t)e.n_values};
    }
    struct lamina_imatrix_params mp = LAMINA_IMATRIX_PARAMS_INIT;
    mp.entries = ents;
    CHECK(ents && quantize(none, LLAMA_FTYPE_MOSTLY_Q4_K_M, &mp) == 0 && same_file(with, none));
    mp.path = dat; /* both: refused */
    CHECK(quantize(none, LLAMA_FTYPE_MOSTLY_Q4_K_M, &mp) == 1 && access(none, F_OK) != 0);
    mp.path = NULL;
    if (ents && ne > 2) {
        float bad[512];
        memcpy(bad, ents[1].data, ents[1].size * sizeof *bad);
        bad[3] = NAN;
        const float *keep = ents[1].data;
        ents[1].data = bad; /* a value that is not finite */
        CHECK(quantize(none, LLAMA_FTYPE_MOSTLY_Q4_K_M, &mp) == 1 && access(none, F_OK) != 0);
        ents[1].data = keep;
        ents[1].size = 7; /* another row length */
        CHECK(quantize(none, LLAMA_FTYPE_MOSTLY_Q4_K_M, &mp) == 1 && access(none, F_OK) != 0);
        ents[0].name = NULL; /* empty */
        CHECK(quantize(none, LLAMA_FTYPE_MOSTLY_Q4_K_M, &mp) == 1 && access(none, F_OK) != 0);
    }
    free(ents);
    lm_imatrix_free(fim);
    /* IQ2_XS with and without: tests/tools/test_imatrix.sh (slow to encode) */
    CHECK(quantize(none, LLAMA_FTYPE_MOSTLY_Q2_K_S, &ip) == 0);
    CHECK(quantize(none, LLAMA_FTYPE_MOSTLY_Q2_K_S, NULL) == 1 && access(none, F_OK) != 0);

    /* refused before any output exists */
    struct { uint64_t not_magic[4]; } other = {{0x1234, 0, 0, 0}};
    CHECK(quantize(none, LLAMA_FTYPE_MOSTLY_Q4_K_M, &other) == 1 && access(none, F_OK) != 0);
    struct lamina_imatrix_params nopath = LAMINA_IMATRIX_PARAMS_INIT;
    CHECK(quantize(none, LLAMA_FTYPE_MOSTLY_Q4_K_M, &nopath) == 1 && access(none, F_OK) != 0);
    struct lamina_imatrix_params missing = LAMINA_IMATRIX_PARAMS_INIT;
    missing.path = "/nonexistent/imatrix.dat";
    CHECK(quantize(none, LLAMA_FTYPE_MOSTLY_Q4_K_M, &missing) == 1 && access(none, F_OK) != 0);
    /* another model's imatrix (stories260K: rows of 64, not 256) */
    struct llama_model *sm = api_load(STORIES);
    struct llama_context *sc = sm ? api_ctx(sm, 64, 64, false) : NULL;
    const char *wrong = api_tmp_path("wrong.dat");
    if (sc) {
        n = tokens(sm, toks, 128);
        im = collect(sc, toks, n < 64 ? n : 64, false);
        CHECK(lm_imatrix_write(im, wrong, err, sizeof err) == LM_OK);
        lm_imatrix_free(im);
        struct lamina_imatrix_params wp = LAMINA_IMATRIX_PARAMS_INIT;
        wp.path = wrong;
        CHECK(quantize(none, LLAMA_FTYPE_MOSTLY_Q4_K_M, &wp) == 1 && access(none, F_OK) != 0);
    }
    llama_free(sc);
    llama_free_model(sm);
    /* a truncated file */
    size_t size;
    uint8_t *bytes = lm_test_read_file(dat, &size);
    const char *cut = api_tmp_path("cut.dat");
    CHECK(bytes && api_write_file(cut, bytes, size - 3));
    free(bytes);
    struct lamina_imatrix_params cp = LAMINA_IMATRIX_PARAMS_INIT;
    cp.path = cut;
    CHECK(quantize(none, LLAMA_FTYPE_MOSTLY_Q4_K_M, &cp) == 1 && access(none, F_OK) != 0);
    const char *files[] = {dat, plain, with, none, wrong, cut};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++)
        unlink(files[i]);
}

int main(void)
{
    test_stories();
    test_moe();
    test_quantize();
    return lm_test_summary();
}
