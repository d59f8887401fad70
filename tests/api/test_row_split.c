/* test_row_split.c - split_mode ROW over two devices (model/row_split.h),
 * with no GPU: two fake "GPUs" registered here compute on the ref backend,
 * each with a buffer type of its own (a backend reads only its own, so every
 * slice's product runs where the slice lives and the scheduler copies
 * activations between the two).
 *
 * For stories260K and every fixture of shared/fixtures/arch (12 token ids):
 *   1. the plan: with tensor_split 1:1 every matrix of the offloaded layers is
 *      cut in two, main_gpu's slice first, each slice in its device's buffer
 *      type, every slice but the first a multiple of LM_ROW_SPLIT_ROWS rows;
 *      the slices read back (lm_weight_get) are the file's bytes;
 *   2. every context's KV cache (offload_kqv, the default) has each layer's K
 *      and V on the layer's device, also when only some layers are offloaded
 *      (a cache over two devices);
 *   3. one batch of the 12 ids on the fake GPUs (all layers, and half of
 *      them with the rest and the output on the CPU): the CPU's logits
 *      within the fixture bound 2e-3 * max(1, max|cpu|);
 *   4. ROW (1:1, and 3:1 with main_gpu 1; all layers and half) bit-identical
 *      to NONE with the same layers (the same ref kernels, each output row a
 *      dot product of its own, CONCAT copies);
 *   5. ROW with half the layers: the first 6 ids at positions 17.., the cache
 *      shifted back by 17 (keys re-rotated on both devices), the next 6:
 *      within the bound of the CPU's batch (not for learned positions);
 *   6. (stories260K, llama-moe) ROW with half the layers, one token at a
 *      time: within 1e-4 of the batch (the decode path through the slices);
 *   7. (stories260K) a weight rewritten through lm_weight_set (LoRA's path)
 *      on the split and the whole model: the same new logits;
 *   8. (stories260K) the importance matrix collected on the split model is
 *      the whole model's (each weight counted once, the same sums);
 *   9. a negative or NaN share, or a main_gpu past the GPUs: no model.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "api/imatrix_api.h"
#include "backend/backend.h"
#include "sched/sched.h"
#include "gguf/gguf.h"
#include "model/placement.h"
#include "model/row_split.h"
#include "ref/ref.h"
#include "util_api.h"

#define N_IDS 12

/* ---- two fake GPUs: the ref backend over a buffer type of their own ---- */

static struct lm_buffer_type fake_buft[2];
static const char *fake_buft_name(lm_buft b) { return b == &fake_buft[0] ? "fake0" : "fake1"; }
static lm_buft fake_default0(void) { return &fake_buft[0]; }
static lm_buft fake_default1(void) { return &fake_buft[1]; }
static lm_buft fake_be_buft(lm_backend_t be) { return be->context; }
static bool fake_be_reads(lm_backend_t be, lm_buft b) { return b == be->context; }

static lm_status fake_init(lm_buft own, lm_backend_t *out)
{
    lm_status st = lm_ref_backend_new(out);
    if (!st) {
        (*out)->context = own;
        (*out)->iface.get_default_buffer_type = fake_be_buft;
        (*out)->iface.supports_buft = fake_be_reads;
    }
    return st;
}
static lm_status fake_init0(lm_backend_t *out) { return fake_init(&fake_buft[0], out); }
static lm_status fake_init1(lm_backend_t *out) { return fake_init(&fake_buft[1], out); }

static const struct lm_backend_reg fake_gpu[2] = {
    {.name = "fakegpu0", .init = fake_init0, .kind = LM_DEV_GPU, .default_buft = fake_default0},
    {.name = "fakegpu1", .init = fake_init1, .kind = LM_DEV_GPU, .default_buft = fake_default1},
};

static void register_fakes(void)
{
    for (int i = 0; i < 2; i++) {
        fake_buft[i] = *lm_ref_buft();
        fake_buft[i].iface.get_name = fake_buft_name;
        CHECK(lm_backend_register(&fake_gpu[i]) == LM_OK);
    }
}

/* ---- models and logits ---- */

static struct llama_model *load(const char *path, int ngl, enum llama_split_mode mode, int main_gpu,
                                const float *split)
{
    struct llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = ngl;
    mp.split_mode = mode;
    mp.main_gpu = main_gpu;
    mp.tensor_split = split;
    struct llama_model *m = llama_load_model_from_file(path, mp);
    CHECKF(m != NULL, "cannot load %s (ngl %d, split %d)", path, ngl, (int)mode);
    return m;
}

static int last_splits; /* graph splits of the last logits() call's last decode */

/* ids in batches of `step` tokens on a fresh context; logits of every
 * position into out [n * n_vocab]. With `shift` the first half goes in at
 * positions 17.., the cache is shifted back by 17 (llama_kv_cache_seq_shift:
 * keys re-rotated where they are), and the rest follows at its own
 * positions. */
static bool logits(struct llama_model *m, const llama_token *ids, int n, int step, bool shift, float *out)
{
    const int n_vocab = llama_n_vocab(m);
    struct llama_context *ctx = m ? api_ctx(m, 64, 64, true) : NULL;
    /* offload_kqv (the default): each layer's cache on its layer's device */
    const struct lm_placement *pl = m->m->place;
    for (uint32_t il = 0; ctx && il < pl->n_layer; il++) {
        lm_buft want = lm_backend_reg_default_buft(pl->dev[pl->layer_dev[il]]);
        CHECKF(ctx->c->kv.k[il]->buffer->buft == want && ctx->c->kv.v[il]->buffer->buft == want,
               "layer %u: cache in %s, want %s", il, lm_buft_name(ctx->c->kv.k[il]->buffer->buft), lm_buft_name(want));
    }
    bool ok = ctx != NULL;
    for (int s = 0; s < n && ok; s += step) {
        const int k = n - s < step ? n - s : step;
        ok = api_decode_ids(ctx, ids + s, k, s + (shift && s < n / 2 ? 17 : 0), out + (size_t)s * n_vocab);
        if (shift && s + k == n / 2)
            llama_kv_cache_seq_shift(ctx, 0, 0, -1, -17);
    }
    last_splits = ctx ? lm_sched_n_splits(ctx->c->sched) : 0;
    llama_free(ctx);
    return ok;
}

/* The logits of model file `path` under one placement; NULL on failure. */
static float *run(const char *path, const llama_token *ids, int step, bool shift, int ngl, enum llama_split_mode mode,
                  int main_gpu, const float *split)
{
    struct llama_model *m = load(path, ngl, mode, main_gpu, split);
    float *out = m ? malloc((size_t)N_IDS * llama_n_vocab(m) * sizeof(float)) : NULL;
    if (out && !logits(m, ids, N_IDS, step, shift, out)) {
        free(out);
        out = NULL;
    }
    llama_free_model(m);
    return out;
}

/* ---- the plan as loaded ---- */

/* Every matrix of an offloaded layer split as the plan says; false if not. */
static bool check_splits(struct llama_model *lm, const char *path, int main_gpu)
{
    const struct lm_model *m = lm->m;
    struct lm_gguf *g = NULL;
    char err[128];
    CHECK(lm_gguf_open(path, &g, err, sizeof err) == LM_OK);
    FILE *f = fopen(path, "rb");
    int n_matrix = 0, bad = 0;
    for (struct lm_tensor *t = lm_ctx_first_tensor(m->ctx); t && g && f; t = lm_ctx_next_tensor(m->ctx, t)) {
        if (strncmp(t->name, "blk.", 4) || t->ne[1] < 2 || t->ne[2] != 1)
            continue;
        n_matrix++;
        const struct lm_row_split *rs = lm_row_split_of(m, t);
        if (!rs || t->data || rs->first[0] != 0 || rs->first[rs->n] != t->ne[1] || rs->dev[0] != 1 + main_gpu) {
            bad++;
            continue;
        }
        for (int s = 0; s < rs->n; s++) {
            const struct lm_tensor *p = rs->part[s];
            int64_t rows = rs->first[s + 1] - rs->first[s];
            bad += !p->buffer || p->buffer->buft != &fake_buft[rs->dev[s] - 1] || p->ne[1] != rows ||
                   p->ne[0] != t->ne[0] || (s > 0 && rows % LM_ROW_SPLIT_ROWS) || strcmp(p->name, t->name) ||
                   lm_row_split_part(m, p) != s;
        }
        /* two slices wherever the rows allow: past main_gpu's remainder the
         * other device takes its half rounded down to whole granules */
        bad += (rs->n == 2) != (t->ne[1] / 2 / LM_ROW_SPLIT_ROWS > 0);
        const struct lm_gguf_tensor_info *ti = lm_gguf_tensor_info(g, lm_gguf_find_tensor(g, t->name));
        uint8_t *want = malloc(ti->size), *got = malloc(ti->size);
        if (!want || !got || fseek(f, (long)ti->offset, SEEK_SET) || fread(want, 1, ti->size, f) != ti->size ||
            lm_weight_get(m, t, got) || memcmp(want, got, ti->size))
            bad++;
        free(want);
        free(got);
    }
    if (f)
        fclose(f);
    lm_gguf_close(g);
    CHECKF(n_matrix > 0 && bad == 0, "%s: %d of %d layer matrices not split as planned", path, bad, n_matrix);
    return n_matrix > 0 && bad == 0;
}

/* ---- one model ---- */


/* tensor_split arrays have one proportion per possible GPU (llama.h) */
static const float half[LLAMA_MAX_DEVICES] = {1.0f, 1.0f}, three_one[LLAMA_MAX_DEVICES] = {3.0f, 1.0f};

/* max |x| over n values */
static double max_abs(const float *x, size_t n)
{
    double m = 0.0;
    for (size_t i = 0; i < n; i++)
        m = fmax(m, fabs((double)x[i]));
    return m;
}

static void test_model(const char *name, const char *path, const llama_token *ids, bool one_by_one)
{
    struct llama_model *m = load(path, 99, LLAMA_SPLIT_ROW, 0, half);
    if (!m)
        return;
    const int n_vocab = llama_n_vocab(m), n_layer = (int)m->m->hp.n_layer, nh = n_layer / 2;
    const size_t n = (size_t)N_IDS * n_vocab, n6 = (size_t)(N_IDS / 2) * n_vocab;
    bool planned = check_splits(m, path, 0);
    /* learned positions (gpt2, starcoder) are added to the input: a shifted
     * cache holds other keys, only renumbered */
    const bool shiftable = m->m->pos_embd == NULL;
    llama_free_model(m);

    float *cpu = run(path, ids, N_IDS, false, 0, LLAMA_SPLIT_NONE, 0, NULL);
    float *none = run(path, ids, N_IDS, false, 99, LLAMA_SPLIT_NONE, 0, NULL);
    float *row = run(path, ids, N_IDS, false, 99, LLAMA_SPLIT_ROW, 0, half);
    /* each layer's products run on both devices: at least two splits per layer */
    CHECKF(last_splits >= 2 * n_layer, "%s: %d graph splits for %d layers", name, last_splits, n_layer);
    float *row31 = run(path, ids, N_IDS, false, 99, LLAMA_SPLIT_ROW, 1, three_one);
    float *none_half = run(path, ids, N_IDS, false, nh, LLAMA_SPLIT_NONE, 0, NULL);
    float *row_half = run(path, ids, N_IDS, false, nh, LLAMA_SPLIT_ROW, 0, half);
    float *row_shift = run(path, ids, N_IDS / 2, true, nh, LLAMA_SPLIT_ROW, 0, half);
    float *row_tok = one_by_one ? run(path, ids, 1, false, nh, LLAMA_SPLIT_ROW, 0, half) : NULL;
    if (!cpu || !none || !row || !row31 || !none_half || !row_half || !row_shift || (one_by_one && !row_tok)) {
        CHECKF(false, "%s: a run failed", name);
    } else {
        /* the fake GPUs compute on ref: the CPU's logits within the fixture bound */
        const double bound = 2e-3 * fmax(1.0, max_abs(cpu, n));
        double d_gpu = api_max_diff(none, cpu, n), d_half = api_max_diff(none_half, cpu, n);
        double d_row = api_max_diff(none, row, n), d_31 = api_max_diff(none, row31, n);
        double d_rh = api_max_diff(none_half, row_half, n);
        double d_shift = shiftable ? api_max_diff(row_shift + n6, cpu + n6, n6) : 0.0;
        double d_tok = row_tok ? api_max_diff(row_tok, row_half, n) : 0.0;
        CHECKF(d_gpu <= bound && d_half <= bound, "%s: NONE vs CPU %g (all layers) %g (%d/%d), bound %g", name,
               d_gpu, d_half, nh, n_layer, bound);
        CHECKF(d_row == 0.0 && d_31 == 0.0, "%s: ROW vs NONE %g (1:1), %g (3:1, main_gpu 1)", name, d_row, d_31);
        CHECKF(d_rh == 0.0, "%s: ROW vs NONE with %d of %d layers offloaded: %g", name, nh, n_layer, d_rh);
        CHECKF(d_shift <= bound, "%s: ROW, %d/%d layers, after a cache shift vs CPU %g", name, nh, n_layer, d_shift);
        CHECKF(d_tok <= 1e-4, "%s: ROW one token at a time vs one batch: %g", name, d_tok);
        printf("%-14s %s  GPU-CPU %.2g  ROW-NONE %g (1:1) %g (3:1) %g (%d/%d layers)  shifted-CPU %.2g", name,
               planned ? "split ok" : "SPLIT BAD", d_gpu, d_row, d_31, d_rh, nh, n_layer, d_shift);
        if (one_by_one)
            printf("  tokens-batch %.2g", d_tok);
        printf("\n");
    }
    free(cpu);
    free(none);
    free(row);
    free(row31);
    free(none_half);
    free(row_half);
    free(row_shift);
    free(row_tok);
}

/* A weight rewritten through lm_weight_set (LoRA's write) on a split and a
 * whole model: the same logits, and not the old ones. */
static void test_weight_set(const char *path, const llama_token *ids)
{
    struct llama_model *ms = load(path, 99, LLAMA_SPLIT_ROW, 0, half), *mw = load(path, 99, LLAMA_SPLIT_NONE, 0, NULL);
    if (!ms || !mw)
        return;
    const size_t n = (size_t)N_IDS * llama_n_vocab(ms);
    float *before = malloc(n * sizeof(float)), *a = malloc(n * sizeof(float)), *b = malloc(n * sizeof(float));
    struct lm_tensor *ws = lm_ctx_get_tensor(ms->m->ctx, "blk.0.ffn_down.weight");
    struct lm_tensor *ww = lm_ctx_get_tensor(mw->m->ctx, "blk.0.ffn_down.weight");
    CHECK(ws && ww && lm_row_split_of(ms->m, ws) && !lm_row_split_of(mw->m, ww));
    size_t nb = ws ? lm_nbytes(ws) : 0;
    uint8_t *bytes = malloc(nb);
    CHECK(before && a && b && bytes && logits(mw, ids, N_IDS, N_IDS, false, before));
    if (ws && ww && bytes && lm_weight_get(ms->m, ws, bytes) == LM_OK) {
        /* the rows in reverse order: every slice changes */
        const size_t row = nb / (size_t)ws->ne[1];
        uint8_t *tmp = malloc(row);
        for (int64_t r = 0; tmp && r < ws->ne[1] / 2; r++) {
            uint8_t *x = bytes + (size_t)r * row, *y = bytes + (size_t)(ws->ne[1] - 1 - r) * row;
            memcpy(tmp, x, row);
            memcpy(x, y, row);
            memcpy(y, tmp, row);
        }
        free(tmp);
        CHECK(lm_weight_set(ms->m, ws, bytes) == LM_OK && lm_weight_set(mw->m, ww, bytes) == LM_OK);
        CHECK(logits(ms, ids, N_IDS, N_IDS, false, a) && logits(mw, ids, N_IDS, N_IDS, false, b));
        CHECKF(api_max_diff(a, b, n) == 0.0, "weight set: split vs whole %g", api_max_diff(a, b, n));
        CHECKF(api_max_diff(a, before, n) > 0.0, "weight set changed nothing");
    }
    free(bytes);
    free(before);
    free(a);
    free(b);
    llama_free_model(ms);
    llama_free_model(mw);
}

/* Bad placements are refused with an error, never a crash: a negative or
 * NaN share, a main_gpu past the GPUs. */
static void test_bad_params(const char *path)
{
    static const float negative[LLAMA_MAX_DEVICES] = {-1.0f, 1.0f}, nan_share[LLAMA_MAX_DEVICES] = {NAN, 1.0f};
    struct llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 99;
    mp.split_mode = LLAMA_SPLIT_ROW;
    const float *bad[2] = {negative, nan_share};
    for (int k = 0; k < 2; k++) {
        mp.tensor_split = bad[k];
        struct llama_model *m = llama_load_model_from_file(path, mp);
        CHECKF(m == NULL, "ROW with a bad share %d loaded", k);
        llama_free_model(m);
    }
    mp.tensor_split = NULL;
    mp.main_gpu = 7;
    struct llama_model *m = llama_load_model_from_file(path, mp);
    CHECKF(m == NULL, "ROW with main_gpu 7 of 2 GPUs loaded");
    llama_free_model(m);
}

/* The importance matrix of 24 tokens (imatrix_api.h) on model m. */
static struct lm_imatrix *collect(struct llama_model *m)
{
    struct llama_context *ctx = api_ctx(m, 64, 64, false);
    struct lm_imatrix_collector *c = NULL;
    struct lm_imatrix *im = NULL;
    llama_token toks[24];
    for (int i = 0; i < 24; i++)
        toks[i] = 1 + (i * 29) % 400;
    CHECK(ctx && lm_api_imatrix_start(ctx, true, &c) == LM_OK);
    CHECK(ctx && llama_decode(ctx, llama_batch_get_one(toks, 24, 0, 0)) == 0);
    if (ctx)
        lm_api_imatrix_stop(ctx);
    CHECK(c && lm_imatrix_collector_result(c, &im) == LM_OK);
    lm_imatrix_collector_free(c);
    llama_free(ctx);
    return im;
}

/* Collected on a split model, the importance matrix of the whole one: each
 * weight once (its first slice), the same calls and sums. */
static void test_imatrix(const char *path)
{
    struct llama_model *ms = load(path, 99, LLAMA_SPLIT_ROW, 0, half), *mw = load(path, 99, LLAMA_SPLIT_NONE, 0, NULL);
    struct lm_imatrix *a = ms ? collect(ms) : NULL, *b = mw ? collect(mw) : NULL;
    int64_t n = a ? lm_imatrix_n_entries(a) : -1, bad = 0;
    CHECK(a && b && n > 0 && n == lm_imatrix_n_entries(b));
    for (int64_t i = 0; a && b && i < n; i++) {
        struct lm_imatrix_entry x, y;
        bool ok = lm_imatrix_entry(a, i, &x) && lm_imatrix_entry(b, lm_imatrix_find(b, x.name), &y) &&
                  x.ncall == y.ncall && x.n_values == y.n_values &&
                  !memcmp(x.values, y.values, (size_t)x.n_values * sizeof(float));
        bad += !ok;
    }
    CHECKF(bad == 0, "imatrix: %lld of %lld entries differ between ROW and NONE", (long long)bad, (long long)n);
    lm_imatrix_free(a);
    lm_imatrix_free(b);
    llama_free_model(ms);
    llama_free_model(mw);
}


int main(void)
{
    /* before llama_backend_init: the fakes are GPUs 0 and 1 (devices 1 and
     * 2 of every plan) even where a real GPU registers after them */
    register_fakes();
    api_test_init();
    const char *stories = lm_test_shared("models/stories260K.gguf");
    llama_token ids[N_IDS];
    for (int i = 0; i < N_IDS; i++)
        ids[i] = 1 + (i * 37) % 500;
    test_model("stories260K", stories, ids, true);
    test_weight_set(stories, ids);
    test_imatrix(stories);
    test_bad_params(stories);
    for (int k = 0; k < api_n_arch_fixtures; k++) {
        const char *name = api_arch_fixtures[k];
        char rel[128];
        snprintf(rel, sizeof rel, "fixtures/arch/%s.gguf", name);
        if (api_fixture_ids(name, ids, N_IDS) != N_IDS) {
            CHECKF(false, "%s: no ids", name);
            continue;
        }
        test_model(name, lm_test_shared(rel), ids, !strcmp(name, "llama-moe"));
    }
    return lm_test_summary();
}
