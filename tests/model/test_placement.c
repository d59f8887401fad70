/* test_placement.c - the device plan (model/placement.h): with the CPU alone
 * everything is on the CPU and every weight in the buffer type the CPU's
 * hook prefers (as loaded and as planned); with fake GPU regs, n_gpu_layers,
 * split modes, main_gpu and tensor_split place layers as llama.cpp b1892,
 * and split_mode ROW cuts the matrices of offloaded layers into row slices
 * (tests/api/test_row_split.c loads and runs such models). */
#include <string.h>

#include "cpu/cpu.h"
#include "lm_test.h"
#include "model/context.h"
#include "model/model.h"
#include "model/placement.h"
#include "ref/ref.h"

/* ---- a fake GPU: a buffer type that is never allocated ---- */

static const char *fake_name(lm_buft b)
{
    (void)b;
    return "fake";
}
static lm_status fake_alloc(lm_buft b, size_t size, struct lm_buffer **out)
{
    (void)b, (void)size, (void)out;
    return LM_ERR_UNSUPPORTED;
}
static size_t fake_align(lm_buft b)
{
    (void)b;
    return 256;
}
static struct lm_buffer_type fake_buft = {.iface = {.get_name = fake_name, .alloc_buffer = fake_alloc,
                                                    .get_alignment = fake_align}};
static lm_buft fake_default(void) { return &fake_buft; }
static lm_status fake_init(lm_backend_t *out)
{
    (void)out;
    return LM_ERR_UNSUPPORTED;
}
static const struct lm_backend_reg gpu0 = {.name = "gpu0", .init = fake_init, .kind = LM_DEV_GPU,
                                           .default_buft = fake_default};
static const struct lm_backend_reg gpu1 = {.name = "gpu1", .init = fake_init, .kind = LM_DEV_GPU,
                                           .default_buft = fake_default};
/* fake GPUs reporting 3 GiB and 1 GiB free, and one failing to say */
static bool mem3(size_t *free_b, size_t *total_b)
{
    *free_b = (size_t)3 << 30;
    *total_b = (size_t)8 << 30;
    return true;
}
static bool mem1(size_t *free_b, size_t *total_b)
{
    *free_b = (size_t)1 << 30;
    *total_b = (size_t)8 << 30;
    return true;
}
static bool mem_unknown(size_t *free_b, size_t *total_b)
{
    (void)free_b, (void)total_b;
    return false;
}
static const struct lm_backend_reg gpu_free3 = {.name = "gpu_free3", .init = fake_init, .kind = LM_DEV_GPU,
                                                .default_buft = fake_default, .memory = mem3};
static const struct lm_backend_reg gpu_free1 = {.name = "gpu_free1", .init = fake_init, .kind = LM_DEV_GPU,
                                                .default_buft = fake_default, .memory = mem1};
static const struct lm_backend_reg gpu_unknown = {.name = "gpu_unknown", .init = fake_init, .kind = LM_DEV_GPU,
                                                  .default_buft = fake_default, .memory = mem_unknown};

static void check_layers(const struct lm_placement *pl, const int *want, uint32_t n, int output)
{
    for (uint32_t il = 0; il < n; il++)
        CHECKF(pl->layer_dev[il] == want[il], "layer %u on %d, want %d", il, pl->layer_dev[il], want[il]);
    CHECKF(pl->output_dev == output, "output on %d, want %d", pl->output_dev, output);
    CHECK(pl->input_dev == 0);
}

static void test_cpu_only_plan(void)
{
    /* the registry as llama_backend_init leaves it: cpu, then ref (no weights) */
    CHECK(lm_backend_register(lm_cpu_backend_reg()) == LM_OK);
    CHECK(lm_backend_register(lm_ref_backend_reg()) == LM_OK);
    const int32_t ngl[] = {0, 3, 99, -1};
    for (int k = 0; k < 4; k++) {
        struct lm_placement pl;
        struct lm_placement_params p = {.n_gpu_layers = ngl[k], .split_mode = LM_SPLIT_LAYER, .repack = true};
        CHECK(lm_placement_plan(&p, 6, &pl) == LM_OK);
        CHECK(pl.n_dev == 1 && pl.dev[0] == lm_cpu_backend_reg());
        const int zero[6] = {0};
        check_layers(&pl, zero, 6, 0);
        for (uint32_t il = 0; il < 6; il++)
            CHECK(lm_placement_kv_dev(&pl, il, true) == 0 && lm_placement_kv_dev(&pl, il, false) == 0);
    }
    /* no host backend at all */
    struct lm_placement pl;
    struct lm_placement_params p = {0};
    const struct lm_backend_reg *only_gpu[] = {&gpu0};
    CHECK(lm_placement_plan_regs(&p, 4, only_gpu, 1, &pl) == LM_ERR_NOT_FOUND);
}

/* A loaded model: every weight sits in the buffer type the plan names, which
 * is the CPU hook's choice; contexts compute on the CPU alone. */
static void test_cpu_only_model(bool repack, bool mmap)
{
    struct lm_model *m = NULL;
    char err[256];
    struct lm_model_params mp = {.use_mmap = mmap, .repack = repack, .n_gpu_layers = 99};
    CHECKF(lm_model_load(lm_test_shared("models/stories260K.gguf"), &mp, &m, err, sizeof err) == LM_OK, "%s", err);
    if (!m)
        return;
    CHECK(m->place && m->place->n_dev == 1 && m->place->n_layer == m->hp.n_layer);
    int n = 0, n_repacked = 0, bad = 0;
    for (struct lm_tensor *t = lm_ctx_first_tensor(m->ctx); t; t = lm_ctx_next_tensor(m->ctx, t)) {
        bool input = t == m->tok_embd || t == m->pos_embd;
        lm_buft want = lm_backend_reg_weight_buft(lm_cpu_backend_reg(), t, repack && !input ? LM_WEIGHT_MATMUL_ONLY : 0);
        lm_buft plan = lm_placement_weight_buft(m->place, m, t);
        if (!t->buffer || t->buffer->buft != want || plan != want || lm_placement_weight_dev(m->place, m, t) != 0) {
            bad++;
            fprintf(stderr, "%s: in %s, planned %s\n", t->name, t->buffer ? lm_buft_name(t->buffer->buft) : "-",
                    lm_buft_name(plan));
        }
        n++;
        n_repacked += want == lm_cpu_repack_buft();
    }
    CHECK(n > 0 && bad == 0);
    CHECK(m->tok_embd->buffer->buft == lm_host_buft());
    CHECK(m->n_bufs == (repack ? 2 : 1)); /* one buffer per buffer type (the mapping or a copy) */
    CHECKF(repack ? n_repacked > 0 : n_repacked == 0, "%d of %d repacked", n_repacked, n);
    struct lm_context_params cp = {.n_ctx = 32, .n_batch = 32, .n_threads = 1, .n_threads_batch = 1,
                                   .rope_scaling_type = -1, .yarn_ext_factor = -1.0f, .yarn_attn_factor = 1.0f,
                                   .type_k = LM_TYPE_F16, .type_v = LM_TYPE_F16, .offload_kqv = true};
    struct lm_context *c = NULL;
    CHECK(lm_context_new(m, &cp, &c) == LM_OK);
    if (c) {
        CHECK(c->n_backends == 1 && c->backends[0] == c->cpu && lm_backend_is_cpu(c->cpu));
        CHECK(c->kv.n_buf == 1 && c->kv.buf[0] && c->kv.buf[0]->buft == lm_host_buft());
    }
    lm_context_free(c);
    lm_model_free(m);
}

static void test_gpu_plans(void)
{
    const struct lm_backend_reg *regs[] = {&gpu0, lm_ref_backend_reg(), lm_cpu_backend_reg(), &gpu1};
    struct lm_placement pl;
    struct lm_placement_params p = {.split_mode = LM_SPLIT_LAYER, .repack = true};
    /* host first whatever the registry order; GPUs in registry order */
    CHECK(lm_placement_plan_regs(&p, 10, regs, 4, &pl) == LM_OK);
    CHECK(pl.n_dev == 3 && pl.dev[0] == lm_cpu_backend_reg() && pl.dev[1] == &gpu0 && pl.dev[2] == &gpu1);
    check_layers(&pl, (const int[10]){0}, 10, 0);

    /* the last 4 of 10 layers, equal shares: 2 each, output stays on the host */
    p.n_gpu_layers = 4;
    CHECK(lm_placement_plan_regs(&p, 10, regs, 4, &pl) == LM_OK);
    check_layers(&pl, (const int[]){0, 0, 0, 0, 0, 0, 1, 1, 2, 2}, 10, 0);
    CHECK(lm_placement_kv_dev(&pl, 8, true) == 2 && lm_placement_kv_dev(&pl, 8, false) == 0);

    /* more than n_layer: the output too, on the last layer's device */
    p.n_gpu_layers = 11;
    CHECK(lm_placement_plan_regs(&p, 10, regs, 4, &pl) == LM_OK);
    check_layers(&pl, (const int[]){1, 1, 1, 1, 1, 2, 2, 2, 2, 2}, 10, 2);

    /* tensor_split 3:1 over 8 layers: fractions 0..5/8 < 3/4 on the first GPU */
    p.n_gpu_layers = 99;
    p.tensor_split = (const float[LM_MAX_DEVICES]){3.0f, 1.0f};
    CHECK(lm_placement_plan_regs(&p, 8, regs, 4, &pl) == LM_OK);
    check_layers(&pl, (const int[]){1, 1, 1, 1, 1, 1, 2, 2}, 8, 2);
    p.tensor_split = (const float[LM_MAX_DEVICES]){0.0f, 1.0f};
    CHECK(lm_placement_plan_regs(&p, 4, regs, 4, &pl) == LM_OK);
    check_layers(&pl, (const int[]){2, 2, 2, 2}, 4, 2);
    p.tensor_split = (const float[LM_MAX_DEVICES]){-1.0f, 1.0f};
    CHECK(lm_placement_plan_regs(&p, 4, regs, 4, &pl) == LM_ERR_INVALID_ARG);
    p.tensor_split = NULL;

    /* NONE and ROW: everything offloaded on main_gpu */
    p.split_mode = LM_SPLIT_NONE;
    p.main_gpu = 1;
    p.n_gpu_layers = 2;
    CHECK(lm_placement_plan_regs(&p, 4, regs, 4, &pl) == LM_OK);
    check_layers(&pl, (const int[]){0, 0, 2, 2}, 4, 0);
    p.split_mode = LM_SPLIT_ROW;
    p.n_gpu_layers = 5;
    CHECK(lm_placement_plan_regs(&p, 4, regs, 4, &pl) == LM_OK);
    check_layers(&pl, (const int[]){2, 2, 2, 2}, 4, 2);
    p.main_gpu = 2;
    CHECK(lm_placement_plan_regs(&p, 4, regs, 4, &pl) == LM_ERR_INVALID_ARG);
    p.main_gpu = -1;
    CHECK(lm_placement_plan_regs(&p, 4, regs, 4, &pl) == LM_ERR_INVALID_ARG);
    p.main_gpu = 0;
    p.split_mode = (enum lm_split_mode)7;
    CHECK(lm_placement_plan_regs(&p, 4, regs, 4, &pl) == LM_ERR_INVALID_ARG);
}

/* A model with a context for a few tensors and nothing else. */
static bool empty_model(struct lm_model *m)
{
    memset(m, 0, sizeof *m);
    struct lm_ctx_params cp = {.mem_size = 16 * lm_tensor_overhead(), .no_alloc = true};
    CHECK(lm_ctx_new(&cp, &m->ctx) == LM_OK);
    return m->ctx != NULL;
}

static struct lm_tensor *named(struct lm_ctx *ctx, const char *name)
{
    const int64_t ne[2] = {64, 64};
    struct lm_tensor *t = lm_new_tensor(ctx, LM_TYPE_F32, 2, ne);
    if (t)
        lm_set_name(t, name);
    return t;
}

/* Weights follow their layer: the input layer on the host, blk.N on layer
 * N's device (the GPU's default buffer type), the rest on the output's. */
static void test_weight_bufts(void)
{
    const struct lm_backend_reg *regs[] = {lm_cpu_backend_reg(), &gpu0};
    struct lm_placement pl;
    struct lm_placement_params p = {.split_mode = LM_SPLIT_LAYER, .n_gpu_layers = 3, .repack = true};
    CHECK(lm_placement_plan_regs(&p, 4, regs, 2, &pl) == LM_OK);
    struct lm_model m;
    if (!empty_model(&m))
        return;
    struct lm_tensor *emb = named(m.ctx, "token_embd.weight"), *w0 = named(m.ctx, "blk.0.attn_q.weight");
    struct lm_tensor *w3 = named(m.ctx, "blk.3.attn_q.weight"), *out = named(m.ctx, "output.weight");
    CHECK(emb && w0 && w3 && out);
    m.tok_embd = emb;
    m.output = out;
    CHECK(lm_placement_weight_dev(&pl, &m, emb) == 0 && lm_placement_weight_buft(&pl, &m, emb) == lm_host_buft());
    CHECK(lm_placement_weight_dev(&pl, &m, w0) == 0);
    CHECK(lm_placement_weight_buft(&pl, &m, w0) ==
          lm_backend_reg_weight_buft(lm_cpu_backend_reg(), w0, LM_WEIGHT_MATMUL_ONLY));
    CHECK(lm_placement_weight_dev(&pl, &m, w3) == 1 && lm_placement_weight_buft(&pl, &m, w3) == &fake_buft);
    CHECK(lm_placement_weight_dev(&pl, &m, out) == 0);
    /* tied output = the token embedding: the input layer wins */
    m.output = emb;
    p.n_gpu_layers = 9;
    CHECK(lm_placement_plan_regs(&p, 4, regs, 2, &pl) == LM_OK);
    CHECK(lm_placement_weight_dev(&pl, &m, out) == 1 && lm_placement_weight_dev(&pl, &m, emb) == 0);
    lm_ctx_free(m.ctx);
}

/* A tied embedding (gemma: no output.weight) is the input table and the
 * output matrix: with repacking on it goes to the repacking buffer type (the
 * CPU's GET_ROWS reads that layout), off it stays plain; the fixture's own
 * logits test (tests/api/test_arch.c) computes through it. */
static void test_tied_model(bool repack)
{
    struct lm_model *m = NULL;
    char err[256];
    struct lm_model_params mp = {.use_mmap = true, .repack = repack};
    CHECKF(lm_model_load(lm_test_shared("fixtures/arch/gemma.gguf"), &mp, &m, err, sizeof err) == LM_OK, "%s", err);
    if (!m)
        return;
    CHECK(m->output == m->tok_embd && lm_cpu_can_repack(m->tok_embd));
    CHECK(m->tok_embd->buffer->buft == (repack ? lm_cpu_repack_buft() : lm_host_buft()));
    lm_model_free(m);
}

/* Slices of one weight: n, then (first row, device) per slice. */
static void check_slices(const struct lm_placement *pl, const struct lm_model *m, const struct lm_tensor *w, int n,
                         const int64_t *first, const int *dev)
{
    int64_t f[LM_MAX_DEVICES + 1];
    uint8_t d[LM_MAX_DEVICES];
    int got = lm_placement_row_slices(pl, m, w, f, d);
    CHECKF(got == n, "%s [%lld]: %d slices, want %d", w->name, (long long)w->ne[1], got, n);
    for (int s = 0; s < n && got == n; s++)
        CHECKF(f[s] == first[s] && d[s] == dev[s], "%s slice %d: rows from %lld on %d, want %lld on %d", w->name, s,
               (long long)f[s], d[s], (long long)first[s], dev[s]);
    if (n > 0 && got == n)
        CHECK(f[n] == w->ne[1]);
}

/* ROW over two GPUs: main_gpu's slice first, the others in whole granules of
 * LM_ROW_SPLIT_ROWS rows by tensor_split, main_gpu taking the remainder;
 * only the matrices of offloaded layers. */
static void test_row_slices(void)
{
    const struct lm_backend_reg *regs[] = {lm_cpu_backend_reg(), &gpu0, &gpu1};
    struct lm_model m;
    if (!empty_model(&m))
        return;
    struct lm_tensor *q = lm_new_tensor_2d(m.ctx, LM_TYPE_Q4_0, 64, 100);
    struct lm_tensor *small = lm_new_tensor_2d(m.ctx, LM_TYPE_F32, 64, 8);
    struct lm_tensor *norm = lm_new_tensor_1d(m.ctx, LM_TYPE_F32, 64);
    struct lm_tensor *exps = lm_new_tensor_3d(m.ctx, LM_TYPE_F32, 64, 64, 4);
    struct lm_tensor *q0 = lm_new_tensor_2d(m.ctx, LM_TYPE_F32, 64, 100);
    struct lm_tensor *emb = named(m.ctx, "token_embd.weight"), *out = named(m.ctx, "output.weight");
    CHECK(q && small && norm && exps && q0 && emb && out);
    if (!q || !small || !norm || !exps || !q0 || !emb || !out) {
        lm_ctx_free(m.ctx);
        return;
    }
    lm_set_name(q, "blk.3.attn_q.weight");
    lm_set_name(small, "blk.3.ffn_gate_inp.weight");
    lm_set_name(norm, "blk.3.attn_norm.weight");
    lm_set_name(exps, "blk.3.ffn_up_exps.weight");
    lm_set_name(q0, "blk.0.attn_q.weight");
    m.tok_embd = emb;
    m.output = out;

    struct lm_placement pl;
    struct lm_placement_params p = {.split_mode = LM_SPLIT_ROW, .n_gpu_layers = 99};
    CHECK(lm_placement_plan_regs(&p, 4, regs, 3, &pl) == LM_OK);
    CHECK(pl.n_row_dev == 2 && pl.row_dev[0] == 1 && pl.row_dev[1] == 2);
    /* equal shares: 100 rows, the second GPU 48 (50 rounded down to 16s) */
    check_slices(&pl, &m, q, 2, (const int64_t[]){0, 52}, (const int[]){1, 2});
    check_slices(&pl, &m, q0, 2, (const int64_t[]){0, 52}, (const int[]){1, 2});
    check_slices(&pl, &m, small, 1, (const int64_t[]){0}, (const int[]){1}); /* too few rows: whole on main */
    check_slices(&pl, &m, norm, 0, NULL, NULL);
    check_slices(&pl, &m, exps, 0, NULL, NULL);
    check_slices(&pl, &m, emb, 0, NULL, NULL);
    check_slices(&pl, &m, out, 0, NULL, NULL);
    /* main_gpu 1 takes the first slice */
    p.main_gpu = 1;
    CHECK(lm_placement_plan_regs(&p, 4, regs, 3, &pl) == LM_OK);
    check_slices(&pl, &m, q, 2, (const int64_t[]){0, 52}, (const int[]){2, 1});
    /* 3:1: the second GPU 16 rows (25 rounded down) */
    p.main_gpu = 0;
    p.tensor_split = (const float[LM_MAX_DEVICES]){3.0f, 1.0f};
    CHECK(lm_placement_plan_regs(&p, 4, regs, 3, &pl) == LM_OK);
    check_slices(&pl, &m, q, 2, (const int64_t[]){0, 84}, (const int[]){1, 2});
    /* main_gpu without a share keeps the remainder only */
    p.tensor_split = (const float[LM_MAX_DEVICES]){0.0f, 1.0f};
    CHECK(lm_placement_plan_regs(&p, 4, regs, 3, &pl) == LM_OK);
    check_slices(&pl, &m, q, 2, (const int64_t[]){0, 4}, (const int[]){1, 2});
    check_slices(&pl, &m, small, 1, (const int64_t[]){0}, (const int[]){1});
    /* the other GPU without a share: no split */
    p.tensor_split = (const float[LM_MAX_DEVICES]){1.0f, 0.0f};
    CHECK(lm_placement_plan_regs(&p, 4, regs, 3, &pl) == LM_OK);
    CHECK(pl.n_row_dev == 0);
    check_slices(&pl, &m, q, 0, NULL, NULL);
    /* only offloaded layers: blk.0 stays on the host with 3 of 4 offloaded */
    p.tensor_split = NULL;
    p.n_gpu_layers = 3;
    CHECK(lm_placement_plan_regs(&p, 4, regs, 3, &pl) == LM_OK);
    check_slices(&pl, &m, q0, 0, NULL, NULL);
    check_slices(&pl, &m, q, 2, (const int64_t[]){0, 52}, (const int[]){1, 2});
    /* no tensor_split: shares by free memory (3 GiB : 1 GiB), equal where a
     * GPU cannot say */
    p.n_gpu_layers = 99;
    const struct lm_backend_reg *by_mem[] = {lm_cpu_backend_reg(), &gpu_free3, &gpu_free1};
    CHECK(lm_placement_plan_regs(&p, 4, by_mem, 3, &pl) == LM_OK);
    check_slices(&pl, &m, q, 2, (const int64_t[]){0, 84}, (const int[]){1, 2});
    const struct lm_backend_reg *unknown[] = {lm_cpu_backend_reg(), &gpu_free3, &gpu_unknown};
    CHECK(lm_placement_plan_regs(&p, 4, unknown, 3, &pl) == LM_OK);
    check_slices(&pl, &m, q, 2, (const int64_t[]){0, 52}, (const int[]){1, 2});
    p.split_mode = LM_SPLIT_LAYER;
    CHECK(lm_placement_plan_regs(&p, 8, by_mem, 3, &pl) == LM_OK);
    check_layers(&pl, (const int[]){1, 1, 1, 1, 1, 1, 2, 2}, 8, 2);
    p.tensor_split = (const float[LM_MAX_DEVICES]){1.0f, 1.0f}; /* given shares win */
    CHECK(lm_placement_plan_regs(&p, 8, by_mem, 3, &pl) == LM_OK);
    check_layers(&pl, (const int[]){1, 1, 1, 1, 2, 2, 2, 2}, 8, 2);
    p.tensor_split = NULL;
    p.split_mode = LM_SPLIT_ROW;
    p.n_gpu_layers = 3;
    /* one GPU, or another split mode: nothing split */
    CHECK(lm_placement_plan_regs(&p, 4, regs, 2, &pl) == LM_OK && pl.n_row_dev == 0);
    p.split_mode = LM_SPLIT_LAYER;
    CHECK(lm_placement_plan_regs(&p, 4, regs, 3, &pl) == LM_OK && pl.n_row_dev == 0);
    check_slices(&pl, &m, q, 0, NULL, NULL);
    lm_ctx_free(m.ctx);
}

int main(void)
{
    test_cpu_only_plan();
    test_cpu_only_model(true, true);
    test_cpu_only_model(false, true);
    test_cpu_only_model(true, false);
    test_cpu_only_model(false, false);
    test_tied_model(true);
    test_tied_model(false);
    test_gpu_plans();
    test_weight_bufts();
    test_row_slices();
    return lm_test_summary();
}
