/* test_train.c - the training model and trainer end to end, on a tiny LLaMA
 * (vocabulary 512, 2 layers, GQA) with 2 threads:
 *
 * 1. the gradient of the whole model's loss against finite differences, one
 *    random direction per parameter tensor (central difference at h = 1e-3
 *    along a unit-RMS direction; bound 3e-2 relative + 2e-4 absolute), with
 *    and without gradient checkpointing, for the whole model and for LoRA
 *    tensors on every matrix of a frozen model; both modes give the same
 *    gradients (relative 1e-5: only the order of a few sums differs);
 * 2. the training graph's logits equal lamina's inference logits for the same
 *    file (written as GGUF with the stories260K tokenizer, loaded through
 *    llama.h with an F32 KV cache), within 1e-4 of the largest logit; also
 *    with LoRA tensors on every matrix, saved as a 'ggla' adapter and applied
 *    with llama_model_apply_lora_from_file (this pins the file's A/B layout);
 * 3. a short run learns a periodic token stream (loss from ln 512 ~ 6.2 to
 *    below 0.5), two runs with the same seed give bit-identical weights, and
 *    a run resumed from a checkpoint file reproduces the uninterrupted run's
 *    losses and weights bit for bit.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sched/sched.h"
#include "cpu/cpu.h"
#include "gguf/gguf.h"
#include "llama.h"
#include "lm_test.h"
#include "train/lora_file.h"
#include "train/model.h"
#include "train/trainer.h"

static const struct lm_train_hparams HP = {
    .n_vocab = 512, .n_embd = 32, .n_layer = 2, .n_head = 4, .n_head_kv = 2, .n_ff = 48, .n_ctx = 32,
    .norm_eps = 1e-5f, .rope_base = 10000.0f,
};

static uint64_t rng = 88172645463325252ULL;
static float frand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)(rng >> 40) / (float)(1 << 24) * 2.0f - 1.0f;
}

/* ---- 1. whole-model gradient ---- */

struct fixed_batch {
    int B, T;
    int32_t tok[64], tgt[64], pos[64];
    float mask[32 * 32];
};

static float run_loss(struct lm_train_model *m, struct lm_train_graph *g, lm_backend_t be, struct lm_sched *s,
                      const struct fixed_batch *fb)
{
    float one = 1.0f, loss = 0.0f;
    size_t bt = (size_t)fb->B * fb->T * sizeof(int32_t);
    lm_tensor_set(g->tokens, fb->tok, 0, bt);
    lm_tensor_set(g->targets, fb->tgt, 0, bt);
    lm_tensor_set(g->pos, fb->pos, 0, bt);
    lm_tensor_set(g->mask, fb->mask, 0, lm_nbytes(g->mask));
    if (g->dloss)
        lm_tensor_set(g->dloss, &one, 0, sizeof one);
    CHECK(lm_sched_graph_compute(s, g->graph) == LM_OK);
    lm_tensor_get(g->loss, &loss, 0, sizeof loss);
    (void)m;
    (void)be;
    return loss;
}

static void check_model_grad(bool lora)
{
    struct lm_train_model *m = NULL;
    char err[256] = "";
    CHECK(lm_train_model_new(&HP, 7, &m, err, sizeof err) == LM_OK);
    struct fixed_batch fb = {.B = 2, .T = 12};
    for (int i = 0; i < fb.B * fb.T; i++) {
        fb.tok[i] = (int32_t)((frand() + 1.0f) * 255.0f);
        fb.tgt[i] = i % 7 == 3 ? -1 : (int32_t)((frand() + 1.0f) * 255.0f);
    }
    lm_train_fill_pos(fb.pos, fb.B, fb.T);
    lm_train_fill_mask(fb.mask, fb.T);
    /* bigger weights than the init, so every path carries signal */
    for (int i = 0; i < m->n_params; i++) {
        float *d = m->params[i]->data;
        for (int64_t j = 0; j < lm_nelements(m->params[i]); j++)
            d[j] += 0.3f * frand();
    }
    if (lora) { /* LoRA on every matrix, B not zero */
        CHECK(lm_train_model_add_lora(m, 3, 5.0f, (1u << LM_LORA_COUNT) - 1, 4, err, sizeof err) == LM_OK);
        for (int i = 0; i < m->n_train; i++) {
            float *d = m->train[i]->data;
            for (int64_t j = 0; j < lm_nelements(m->train[i]); j++)
                d[j] = 0.3f * frand();
        }
    }
    lm_backend_t be = NULL;
    CHECK(lm_cpu_backend_new(2, &be) == LM_OK);
    float *gsave[64] = {0};
    for (int mode = 0; mode < 2; mode++) {
        struct lm_ctx *gctx = NULL;
        struct lm_ctx_params cp = {.mem_size = lm_train_graph_ctx_size(&HP), .no_alloc = true};
        CHECK(lm_ctx_new(&cp, &gctx) == LM_OK);
        struct lm_train_graph g;
        unsigned fl = LM_TRAIN_BACKWARD | (mode ? LM_TRAIN_CHECKPOINT : 0);
        lm_status st = lm_train_build(m, gctx, fb.B, fb.T, fl, &g);
        if (st)
            fprintf(stderr, "build: %s\n", lm_ctx_error(gctx));
        CHECK(st == LM_OK);
        struct lm_sched *s = NULL;
        CHECK(lm_sched_new(&be, 1, lm_train_graph_size(&HP) * 2, &s) == LM_OK);
        CHECK(lm_sched_alloc_graph(s, g.graph) == LM_OK);
        printf("mode %s: %d nodes, compute buffer %.1f KiB\n", mode ? "checkpoint" : "plain", g.graph->n_nodes,
               (double)lm_sched_buffer_size(s, 0) / 1024.0);
        run_loss(m, &g, be, s, &fb);
        CHECK(m->n_train <= 64);
        float *anas[64];
        for (int i = 0; i < m->n_train; i++) { /* all of them before the runs below overwrite them */
            size_t nb = (size_t)lm_nelements(m->train[i]) * sizeof(float);
            anas[i] = malloc(nb);
            lm_tensor_get(g.grads[i], anas[i], 0, nb);
        }
        int bad = 0;
        double worst = 0;
        for (int i = 0; i < m->n_train; i++) {
            struct lm_tensor *p = m->train[i];
            int64_t n = lm_nelements(p);
            float *ana = anas[i], *u = malloc((size_t)n * sizeof(float));
            if (mode == 0) {
                gsave[i] = malloc((size_t)n * sizeof(float));
                memcpy(gsave[i], ana, (size_t)n * sizeof(float));
            } else {
                double dmax = 0, amax = 0;
                for (int64_t j = 0; j < n; j++) {
                    dmax = fmax(dmax, fabs((double)ana[j] - gsave[i][j]));
                    amax = fmax(amax, fabs((double)gsave[i][j]));
                }
                CHECKF(dmax <= 1e-5 * amax + 1e-9, "%s: checkpointed gradient differs by %g (max %g)", p->name, dmax,
                       amax);
            }
            double dir = 0;
            for (int64_t j = 0; j < n; j++) {
                u[j] = frand() * 1.7320508f;
                dir += (double)ana[j] * u[j];
            }
            /* central difference of the loss along u */
            float *x = p->data, *keep = malloc((size_t)n * sizeof(float));
            memcpy(keep, x, (size_t)n * sizeof(float));
            const float h = 1e-3f;
            for (int64_t j = 0; j < n; j++)
                x[j] = keep[j] + h * u[j];
            double lp = run_loss(m, &g, be, s, &fb);
            for (int64_t j = 0; j < n; j++)
                x[j] = keep[j] - h * u[j];
            double lm = run_loss(m, &g, be, s, &fb);
            memcpy(x, keep, (size_t)n * sizeof(float));
            double num = (lp - lm) / (2.0 * h);
            double lim = 3e-2 * fabs(dir) + 2e-4;
            worst = fmax(worst, fabs(num - dir) / lim);
            if (fabs(num - dir) > lim) {
                bad++;
                fprintf(stderr, "%s (%s): directional derivative analytic %.6g numeric %.6g\n", p->name,
                        mode ? "checkpoint" : "plain", dir, num);
            }
            free(keep);
            free(ana);
            free(u);
        }
        printf("model gradient (%s%s): %d tensors, worst |num-ana| / bound = %.3f\n", mode ? "checkpoint" : "plain",
               lora ? ", LoRA" : "", m->n_train, worst);
        CHECK(bad == 0);
        lm_sched_free(s);
        lm_train_graph_release(&g);
        lm_ctx_free(gctx);
    }
    for (int i = 0; i < 64; i++)
        free(gsave[i]);
    lm_backend_free(be);
    lm_train_model_free(m);
}

/* ---- 2. training graph == inference ---- */

static const char *TMP_MODEL = "test_train_tiny.gguf";

static lm_status write_model(const struct lm_train_model *m, const char *path)
{
    struct lm_gguf *voc = NULL;
    char err[256];
    lm_status st = lm_gguf_open(lm_test_shared("models/stories260K.gguf"), &voc, err, sizeof err);
    if (st)
        return st;
    struct lm_gguf_writer *w = NULL;
    void *hold = NULL;
    st = lm_gguf_writer_new(&w);
    if (!st)
        st = lm_train_model_write(m, LM_TYPE_F32, w, &hold);
    for (int64_t i = 0; i < lm_gguf_n_kv(voc) && !st; i++)
        if (strncmp(lm_gguf_key(voc, i), "tokenizer.", 10) == 0)
            st = lm_gguf_copy_kv(w, voc, i);
    if (!st)
        st = lm_train_write_atomic(w, path);
    free(hold);
    lm_gguf_writer_free(w);
    lm_gguf_close(voc);
    return st;
}

/* with_lora: the model gets LoRA tensors (B random, not the zero init), the
 * adapter is saved as a 'ggla' file and applied through llama.h: the adapted
 * inference model must match the training graph with LoRA. */
static void check_inference_match(bool with_lora)
{
    struct lm_train_model *m = NULL;
    char err[256] = "";
    CHECK(lm_train_model_new(&HP, 11, &m, err, sizeof err) == LM_OK);
    for (int i = 0; i < m->n_params; i++) { /* a model with more contrast than the init */
        float *d = m->params[i]->data;
        for (int64_t j = 0; j < lm_nelements(m->params[i]); j++)
            d[j] += 0.2f * frand();
    }
    CHECK(write_model(m, TMP_MODEL) == LM_OK);
    if (with_lora) {
        CHECK(lm_train_model_add_lora(m, 4, 12.0f, (1u << LM_LORA_COUNT) - 1, 9, err, sizeof err) == LM_OK);
        CHECK(m->n_train == 2 * LM_LORA_COUNT * HP.n_layer);
        for (int i = 0; i < m->n_train; i++) {
            float *d = m->train[i]->data;
            for (int64_t j = 0; j < lm_nelements(m->train[i]); j++)
                d[j] = 0.3f * frand();
        }
        CHECK(lm_train_lora_write(m, "test_train_tiny.lora") == LM_OK);
        CHECK(lm_train_model_add_lora(m, 4, 12.0f, 1, 9, err, sizeof err) != LM_OK); /* only once */
    }
    const int T = 20;
    int32_t toks[20];
    for (int i = 0; i < T; i++)
        toks[i] = 3 + (i * 37) % 500;

    /* training graph, one sequence */
    struct lm_ctx *gctx = NULL;
    struct lm_ctx_params cp = {.mem_size = lm_train_graph_ctx_size(&HP), .no_alloc = true};
    CHECK(lm_ctx_new(&cp, &gctx) == LM_OK);
    struct lm_train_graph g;
    CHECK(lm_train_build(m, gctx, 1, T, LM_TRAIN_LOGITS, &g) == LM_OK);
    CHECK(g.grads == NULL && g.dloss == NULL);
    lm_backend_t be = NULL;
    struct lm_sched *s = NULL;
    CHECK(lm_cpu_backend_new(2, &be) == LM_OK);
    CHECK(lm_sched_new(&be, 1, lm_train_graph_size(&HP), &s) == LM_OK);
    CHECK(lm_sched_alloc_graph(s, g.graph) == LM_OK);
    struct fixed_batch fb = {.B = 1, .T = T};
    memcpy(fb.tok, toks, sizeof toks);
    for (int i = 0; i < T; i++)
        fb.tgt[i] = -1;
    lm_train_fill_pos(fb.pos, 1, T);
    lm_train_fill_mask(fb.mask, T);
    run_loss(m, &g, be, s, &fb);
    float *tl = malloc((size_t)HP.n_vocab * T * sizeof(float));
    lm_tensor_get(g.logits, tl, 0, (size_t)HP.n_vocab * T * sizeof(float));

    /* inference through llama.h */
    llama_backend_init(false);
    struct llama_model_params mp = llama_model_default_params();
    struct llama_model *lm = llama_load_model_from_file(TMP_MODEL, mp);
    CHECK(lm != NULL);
    struct llama_context_params ccp = llama_context_default_params();
    ccp.n_ctx = 32;
    ccp.n_threads = ccp.n_threads_batch = 2;
    ccp.type_k = ccp.type_v = GGML_TYPE_F32;
    ccp.logits_all = true;
    if (with_lora && lm)
        CHECK(llama_model_apply_lora_from_file(lm, "test_train_tiny.lora", 1.0f, NULL, 2) == 0);
    struct llama_context *lc = lm ? llama_new_context_with_model(lm, ccp) : NULL;
    CHECK(lc != NULL);
    if (lc) {
        CHECK(llama_decode(lc, llama_batch_get_one(toks, T, 0, 0)) == 0);
        const float *il = llama_get_logits(lc);
        double dmax = 0, amax = 0;
        for (int64_t i = 0; i < (int64_t)HP.n_vocab * T; i++) {
            dmax = fmax(dmax, fabs((double)il[i] - tl[i]));
            amax = fmax(amax, fabs((double)il[i]));
        }
        printf("training graph vs inference logits%s: max |diff| %.3g, max |logit| %.3g\n",
               with_lora ? " (LoRA adapter applied)" : "", dmax, amax);
        CHECK(amax > 0.1);
        CHECK(dmax <= 1e-4 * amax);
        llama_free(lc);
    }
    if (lm)
        llama_free_model(lm);
    free(tl);
    lm_sched_free(s);
    lm_backend_free(be);
    lm_ctx_free(gctx);
    lm_train_model_free(m);
    remove(TMP_MODEL);
    remove("test_train_tiny.lora");
}

/* ---- 3. training runs ---- */

#define N_STREAM 4000
static int32_t stream[N_STREAM];

static struct lm_trainer_params run_params(void)
{
    struct lm_trainer_params p = lm_trainer_default_params();
    p.n_threads = 2;
    p.batch = 4;
    p.ctx = 16;
    p.steps = 40;
    p.warmup = 5;
    p.lr = 1e-2f;
    p.lr_min = 1e-3f;
    p.seed = 5;
    return p;
}

/* Train steps [s0, s1) of a run; losses[s] for each step. */
static void train_steps(struct lm_trainer *tr, int s0, int s1, float *losses)
{
    for (int s = s0; s < s1; s++) {
        CHECK(lm_trainer_step_count(tr) == s);
        CHECK(lm_trainer_step(tr, stream, N_STREAM, &losses[s], NULL) == LM_OK);
    }
}

static void check_runs(void)
{
    for (int i = 0; i < N_STREAM; i++) /* a periodic stream: learnable exactly */
        stream[i] = 3 + (int32_t)((i % 23) * 19 % 97);
    struct lm_trainer_params p = run_params();
    char err[256] = "";
    float la[40], lb[40], lc[40];
    struct lm_train_model *ma = NULL, *mb = NULL, *mc = NULL;
    struct lm_trainer *ta = NULL, *tb = NULL, *tc = NULL;
    CHECK(lm_train_model_new(&HP, 3, &ma, err, sizeof err) == LM_OK);
    CHECK(lm_trainer_new(ma, &p, &ta, err, sizeof err) == LM_OK);
    train_steps(ta, 0, 40, la);
    printf("periodic stream: loss %.3f -> %.3f after 40 steps\n", la[0], la[39]);
    CHECK(la[0] > 5.5f && la[0] < 7.0f);
    CHECK(la[39] < 0.5f);
    double ev = 0;
    CHECK(lm_trainer_eval(ta, stream, 1000, 0, &ev) == LM_OK);
    printf("eval loss %.4f\n", ev);
    CHECK(ev < 0.5);

    /* same seed, same threads: bit-identical */
    CHECK(lm_train_model_new(&HP, 3, &mb, err, sizeof err) == LM_OK);
    p.checkpoint = false;
    CHECK(lm_trainer_new(mb, &p, &tb, err, sizeof err) == LM_OK);
    train_steps(tb, 0, 20, lb);
    CHECK(memcmp(la, lb, 20 * sizeof(float)) == 0);

    /* checkpoint at step 20, resume in a fresh model and trainer */
    struct lm_gguf_writer *w = NULL;
    void *hold = NULL;
    CHECK(lm_gguf_writer_new(&w) == LM_OK);
    CHECK(lm_train_model_write(mb, LM_TYPE_F32, w, &hold) == LM_OK);
    CHECK(lm_trainer_write_state(tb, w) == LM_OK);
    CHECK(lm_train_write_atomic(w, "test_train_ckpt.gguf") == LM_OK);
    free(hold);
    lm_gguf_writer_free(w);
    lm_trainer_free(tb);
    lm_train_model_free(mb);
    size_t size = 0;
    void *img = lm_test_read_file("test_train_ckpt.gguf", &size);
    struct lm_gguf *g = NULL;
    CHECK(img && lm_gguf_open_memory(img, size, &g, err, sizeof err) == LM_OK);
    CHECK(lm_train_model_read(g, &mc, err, sizeof err) == LM_OK);
    CHECK(lm_trainer_new(mc, &p, &tc, err, sizeof err) == LM_OK);
    CHECK(lm_trainer_read_state(tc, g, err, sizeof err) == LM_OK);
    memcpy(lc, lb, 20 * sizeof(float));
    train_steps(tc, 20, 40, lc);
    CHECKF(memcmp(la, lc, 40 * sizeof(float)) == 0, "resumed losses differ: %.9g vs %.9g at step 39", la[39], lc[39]);
    int same = 1;
    for (int i = 0; i < ma->n_params; i++)
        same &= memcmp(ma->params[i]->data, mc->params[i]->data, lm_nbytes(ma->params[i])) == 0;
    CHECK(same);
    /* a model file without optimizer state is not a checkpoint */
    struct lm_trainer *td = NULL;
    CHECK(lm_trainer_new(mc, &p, &td, err, sizeof err) == LM_OK);
    lm_gguf_close(g);
    free(img);
    CHECK(write_model(ma, "test_train_model.gguf") == LM_OK);
    img = lm_test_read_file("test_train_model.gguf", &size);
    CHECK(img && lm_gguf_open_memory(img, size, &g, err, sizeof err) == LM_OK);
    CHECK(lm_trainer_read_state(td, g, err, sizeof err) != LM_OK);
    lm_trainer_free(td);
    td = NULL;
    lm_gguf_close(g);
    free(img);
    remove("test_train_ckpt.gguf");
    remove("test_train_model.gguf");

    /* bad parameters are refused with a reason */
    struct lm_trainer_params bad = p;
    bad.ctx = HP.n_ctx + 1;
    CHECK(lm_trainer_new(mc, &bad, &td, err, sizeof err) != LM_OK && err[0]);
    bad = p;
    bad.lr = -1;
    CHECK(lm_trainer_new(mc, &bad, &td, err, sizeof err) != LM_OK);
    struct lm_train_hparams hb = HP;
    hb.n_head = 5;
    CHECK(lm_train_model_new(&hb, 1, &mb, err, sizeof err) != LM_OK && strstr(err, "heads"));
    CHECK(lm_trainer_step(tc, stream, 10, NULL, NULL) == LM_ERR_INVALID_ARG);

    lm_trainer_free(ta);
    lm_trainer_free(tc);
    lm_trainer_free(td);
    lm_train_model_free(ma);
    lm_train_model_free(mc);
}

int main(void)
{
    check_model_grad(false);
    check_model_grad(true);
    check_inference_match(false);
    check_inference_match(true);
    check_runs();
    return lm_test_summary();
}
