/* trainer.c - training steps on the CPU backend, AdamW, checkpoints (see
 * trainer.h and docs/training.md). */
#include "train/trainer.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sched/sched.h"
#include "core/fp16.h"
#include "cpu/cpu.h"
#include "quant/quant.h"

struct lm_trainer_params lm_trainer_default_params(void)
{
    return (struct lm_trainer_params){
        .n_threads = 1,
        .batch = 8,
        .ctx = 128,
        .accum = 1,
        .steps = 1000,
        .warmup = 100,
        .lr = 1e-3f,
        .lr_min = 1e-4f,
        .beta1 = 0.9f,
        .beta2 = 0.95f,
        .eps = 1e-8f,
        .weight_decay = 0.1f,
        .clip = 1.0f,
        .seed = 1,
        .bos = -1,
        .checkpoint = false,
    };
}

struct lm_trainer {
    struct lm_train_model *m;
    struct lm_trainer_params p;
    lm_backend_t be;
    struct lm_sched *sched;
    struct lm_ctx *gctx;         /* training graph */
    struct lm_train_graph tg;
    struct lm_ctx *ectx;         /* evaluation graph (built on first use) */
    struct lm_train_graph eg;
    struct lm_graph *allocated;  /* the graph the scheduler holds */
    float **mom1, **mom2;        /* AdamW moments per parameter */
    float **acc;                 /* gradient sums per parameter (accum > 1) */
    int32_t *tok, *tgt, *pos;    /* batch staging [B T] */
    float *mask;                 /* [T T] */
    int64_t step;
};

static lm_status fail(char *err, size_t err_size, lm_status st, const char *msg)
{
    if (err && err_size)
        snprintf(err, err_size, "%s", msg);
    return st;
}

void lm_trainer_free(struct lm_trainer *tr)
{
    if (!tr)
        return;
    for (int i = 0; tr->m && i < tr->m->n_train; i++) {
        if (tr->mom1)
            free(tr->mom1[i]);
        if (tr->mom2)
            free(tr->mom2[i]);
        if (tr->acc)
            free(tr->acc[i]);
    }
    free(tr->mom1);
    free(tr->mom2);
    free(tr->acc);
    lm_train_graph_release(&tr->tg);
    lm_train_graph_release(&tr->eg);
    lm_sched_free(tr->sched);
    lm_backend_free(tr->be);
    lm_ctx_free(tr->gctx);
    lm_ctx_free(tr->ectx);
    free(tr->tok);
    free(tr->tgt);
    free(tr->pos);
    free(tr->mask);
    free(tr);
}

static lm_status new_graph_ctx(const struct lm_train_hparams *hp, struct lm_ctx **out)
{
    struct lm_ctx_params cp = {.mem_size = lm_train_graph_ctx_size(hp), .mem_buffer = NULL, .no_alloc = true};
    return lm_ctx_new(&cp, out);
}

lm_status lm_trainer_new(struct lm_train_model *m, const struct lm_trainer_params *p, struct lm_trainer **out,
                         char *err, size_t err_size)
{
    *out = NULL;
    if (!m || !p)
        return LM_ERR_INVALID_ARG;
    if (p->batch < 1 || p->ctx < 2 || p->ctx > m->hp.n_ctx || p->accum < 1 || p->steps < 1 || p->warmup < 0 ||
        (int64_t)p->batch * p->ctx > (1 << 22))
        return fail(err, err_size, LM_ERR_INVALID_ARG,
                    "batch, context (at most the model's), accumulation and steps must be positive");
    if (!(p->lr > 0 && p->lr < 10) || !(p->lr_min >= 0 && p->lr_min <= p->lr) || !(p->beta1 >= 0 && p->beta1 < 1) ||
        !(p->beta2 >= 0 && p->beta2 < 1) || !(p->eps > 0) || !(p->weight_decay >= 0) || !(p->clip >= 0))
        return fail(err, err_size, LM_ERR_INVALID_ARG, "optimizer settings out of range");
    if (p->bos >= m->hp.n_vocab)
        return fail(err, err_size, LM_ERR_INVALID_ARG, "BOS id outside the vocabulary");
    if (p->n_threads < 1 || p->n_threads > 512)
        return fail(err, err_size, LM_ERR_INVALID_ARG, "threads must be 1 .. 512");
    struct lm_trainer *tr = calloc(1, sizeof(*tr));
    if (!tr)
        return LM_ERR_NOMEM;
    tr->m = m;
    tr->p = *p;
    const int n = m->n_train;
    const size_t bt = (size_t)p->batch * (size_t)p->ctx;
    tr->mom1 = calloc((size_t)n, sizeof(float *));
    tr->mom2 = calloc((size_t)n, sizeof(float *));
    tr->acc = calloc((size_t)n, sizeof(float *));
    tr->tok = malloc(bt * sizeof(int32_t));
    tr->tgt = malloc(bt * sizeof(int32_t));
    tr->pos = malloc(bt * sizeof(int32_t));
    tr->mask = malloc((size_t)p->ctx * (size_t)p->ctx * sizeof(float));
    lm_status st = tr->mom1 && tr->mom2 && tr->acc && tr->tok && tr->tgt && tr->pos && tr->mask ? LM_OK : LM_ERR_NOMEM;
    for (int i = 0; i < n && !st; i++) {
        size_t ne = (size_t)lm_nelements(m->train[i]);
        tr->mom1[i] = calloc(ne, sizeof(float));
        tr->mom2[i] = calloc(ne, sizeof(float));
        if (p->accum > 1)
            tr->acc[i] = calloc(ne, sizeof(float));
        if (!tr->mom1[i] || !tr->mom2[i] || (p->accum > 1 && !tr->acc[i]))
            st = LM_ERR_NOMEM;
    }
    if (!st) {
        lm_train_fill_pos(tr->pos, p->batch, p->ctx);
        lm_train_fill_mask(tr->mask, p->ctx);
        st = lm_cpu_backend_new(p->n_threads, &tr->be);
    }
    if (!st)
        st = lm_sched_new(&tr->be, 1, lm_train_graph_size(&m->hp) * 2, &tr->sched);
    if (!st)
        st = new_graph_ctx(&m->hp, &tr->gctx);
    if (!st) {
        unsigned fl = LM_TRAIN_BACKWARD | (p->checkpoint ? LM_TRAIN_CHECKPOINT : 0);
        st = lm_train_build(m, tr->gctx, p->batch, p->ctx, fl, &tr->tg);
        if (st)
            snprintf(err, err_size, "cannot build the training graph: %s", lm_ctx_error(tr->gctx));
    }
    if (st) {
        lm_trainer_free(tr);
        return st;
    }
    *out = tr;
    return LM_OK;
}

int64_t lm_trainer_step_count(const struct lm_trainer *tr)
{
    return tr->step;
}

float lm_trainer_lr(const struct lm_trainer_params *p, int64_t s)
{
    if (s < p->warmup)
        return p->lr * (float)(s + 1) / (float)p->warmup;
    double span = (double)(p->steps - p->warmup);
    double f = span > 0 ? (double)(s - p->warmup) / span : 1.0;
    if (f > 1.0)
        f = 1.0;
    return (float)(p->lr_min + 0.5 * (p->lr - p->lr_min) * (1.0 + cos(3.14159265358979323846 * f)));
}

static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Run graph g after filling its inputs from the staging buffers. */
static lm_status run(struct lm_trainer *tr, struct lm_train_graph *g, float dloss)
{
    lm_status st = LM_OK;
    if (tr->allocated != g->graph) {
        lm_sched_reset(tr->sched);
        st = lm_sched_alloc_graph(tr->sched, g->graph);
        tr->allocated = st ? NULL : g->graph;
    }
    const size_t bt = (size_t)lm_nelements(g->tokens) * sizeof(int32_t);
    if (!st)
        st = lm_tensor_set(g->tokens, tr->tok, 0, bt);
    if (!st)
        st = lm_tensor_set(g->targets, tr->tgt, 0, bt);
    if (!st)
        st = lm_tensor_set(g->pos, tr->pos, 0, bt);
    if (!st)
        st = lm_tensor_set(g->mask, tr->mask, 0, lm_nbytes(g->mask));
    if (!st && g->dloss)
        st = lm_tensor_set(g->dloss, &dloss, 0, sizeof dloss);
    if (!st)
        st = lm_sched_graph_compute(tr->sched, g->graph);
    return st;
}

lm_status lm_trainer_step(struct lm_trainer *tr, const int32_t *tokens, int64_t n, float *loss, float *gnorm)
{
    const struct lm_trainer_params *p = &tr->p;
    const int B = p->batch, T = p->ctx;
    if (!tokens || n <= T + 1)
        return LM_ERR_INVALID_ARG;
    struct lm_train_model *m = tr->m;
    double loss_sum = 0.0;
    for (int a = 0; a < p->accum; a++) {
        for (int b = 0; b < B; b++) {
            uint64_t key = (uint64_t)p->seed * 0x9e3779b97f4a7c15ULL ^ mix64((uint64_t)tr->step * 1000003u + 1) ^
                           mix64(((uint64_t)a << 32) + (uint64_t)b + 7);
            int64_t start = (int64_t)(mix64(key) % (uint64_t)(n - T));
            memcpy(tr->tok + (size_t)b * T, tokens + start, (size_t)T * sizeof(int32_t));
            memcpy(tr->tgt + (size_t)b * T, tokens + start + 1, (size_t)T * sizeof(int32_t));
            if (p->bos >= 0)
                tr->tok[(size_t)b * T] = p->bos;
        }
        lm_status st = run(tr, &tr->tg, 1.0f / (float)p->accum);
        if (st)
            return st;
        float l = 0.0f;
        lm_tensor_get(tr->tg.loss, &l, 0, sizeof l);
        loss_sum += l;
        if (p->accum > 1)
            for (int i = 0; i < m->n_train; i++) {
                const float *g = tr->tg.grads[i]->data;
                float *acc = tr->acc[i];
                int64_t ne = lm_nelements(m->train[i]);
                if (a == 0)
                    memcpy(acc, g, (size_t)ne * sizeof(float));
                else
                    for (int64_t j = 0; j < ne; j++)
                        acc[j] += g[j];
            }
    }
    /* global norm and clipping */
    double ss = 0.0;
    for (int i = 0; i < m->n_train; i++) {
        const float *g = p->accum > 1 ? tr->acc[i] : tr->tg.grads[i]->data;
        for (int64_t j = 0, ne = lm_nelements(m->train[i]); j < ne; j++)
            ss += (double)g[j] * g[j];
    }
    double norm = sqrt(ss);
    float gscale = p->clip > 0 && norm > p->clip ? (float)(p->clip / norm) : 1.0f;
    if (!isfinite(norm))
        return LM_ERR_CORRUPT; /* diverged: the caller says so */

    /* AdamW (decoupled weight decay on matrices) */
    const double t = (double)(tr->step + 1);
    const float lr = lm_trainer_lr(p, tr->step);
    const float bc1 = (float)(1.0 - pow(p->beta1, t)), bc2 = (float)(1.0 - pow(p->beta2, t));
    for (int i = 0; i < m->n_train; i++) {
        struct lm_tensor *w = m->train[i];
        const float *g = p->accum > 1 ? tr->acc[i] : tr->tg.grads[i]->data;
        float *x = w->data, *m1 = tr->mom1[i], *m2 = tr->mom2[i];
        const float wd = lm_n_dims(w) >= 2 ? p->weight_decay : 0.0f;
        for (int64_t j = 0, ne = lm_nelements(w); j < ne; j++) {
            float gj = g[j] * gscale;
            m1[j] = p->beta1 * m1[j] + (1.0f - p->beta1) * gj;
            m2[j] = p->beta2 * m2[j] + (1.0f - p->beta2) * gj * gj;
            float upd = (m1[j] / bc1) / (sqrtf(m2[j] / bc2) + p->eps);
            x[j] -= lr * (upd + wd * x[j]);
        }
    }
    tr->step++;
    if (loss)
        *loss = (float)(loss_sum / p->accum);
    if (gnorm)
        *gnorm = (float)norm;
    return LM_OK;
}

lm_status lm_trainer_eval(struct lm_trainer *tr, const int32_t *tokens, int64_t n, int64_t max_windows,
                          double *loss)
{
    const int B = tr->p.batch, T = tr->p.ctx;
    lm_status st = LM_OK;
    if (!tokens || n < 2)
        return LM_ERR_INVALID_ARG;
    if (!tr->ectx) {
        st = new_graph_ctx(&tr->m->hp, &tr->ectx);
        if (!st)
            st = lm_train_build(tr->m, tr->ectx, B, T, 0, &tr->eg);
        if (st)
            return st;
    }
    int64_t n_win = (n - 1 + T - 1) / T;
    if (max_windows > 0 && n_win > max_windows)
        n_win = max_windows;
    double sum = 0.0;
    int64_t count = 0;
    for (int64_t w0 = 0; w0 < n_win && !st; w0 += B) {
        int64_t valid = 0;
        for (int b = 0; b < B; b++) {
            int64_t w = w0 + b;
            for (int t = 0; t < T; t++) {
                int64_t i = w * T + t;
                bool ok = w < n_win && i + 1 < n;
                tr->tok[(size_t)b * T + t] = ok ? (t == 0 && tr->p.bos >= 0 ? tr->p.bos : tokens[i]) : 0;
                tr->tgt[(size_t)b * T + t] = ok ? tokens[i + 1] : -1;
                valid += ok;
            }
        }
        st = run(tr, &tr->eg, 1.0f);
        float l = 0.0f;
        if (!st)
            st = lm_tensor_get(tr->eg.loss, &l, 0, sizeof l);
        sum += (double)l * (double)valid;
        count += valid;
    }
    *loss = count ? sum / (double)count : 0.0;
    return st;
}

/* ---- files ---- */

#define KEY(k) "llama." k

lm_status lm_train_model_write(const struct lm_train_model *m, enum lm_type type, struct lm_gguf_writer *w,
                               void **hold)
{
    *hold = NULL;
    if (type != LM_TYPE_F32 && type != LM_TYPE_F16)
        return LM_ERR_UNSUPPORTED;
    const struct lm_train_hparams *hp = &m->hp;
    lm_status st = lm_gguf_set_str(w, "general.architecture", "llama");
    if (!st) st = lm_gguf_set_u32(w, KEY("context_length"), (uint32_t)hp->n_ctx);
    if (!st) st = lm_gguf_set_u32(w, KEY("embedding_length"), (uint32_t)hp->n_embd);
    if (!st) st = lm_gguf_set_u32(w, KEY("block_count"), (uint32_t)hp->n_layer);
    if (!st) st = lm_gguf_set_u32(w, KEY("feed_forward_length"), (uint32_t)hp->n_ff);
    if (!st) st = lm_gguf_set_u32(w, KEY("rope.dimension_count"), (uint32_t)(hp->n_embd / hp->n_head));
    if (!st) st = lm_gguf_set_u32(w, KEY("attention.head_count"), (uint32_t)hp->n_head);
    if (!st) st = lm_gguf_set_u32(w, KEY("attention.head_count_kv"), (uint32_t)hp->n_head_kv);
    if (!st) st = lm_gguf_set_f32(w, KEY("attention.layer_norm_rms_epsilon"), hp->norm_eps);
    if (!st) st = lm_gguf_set_f32(w, KEY("rope.freq_base"), hp->rope_base);
    if (!st) st = lm_gguf_set_u32(w, "general.file_type", type == LM_TYPE_F16 ? 1 : 0);
    if (st)
        return st;
    size_t n16 = 0;
    for (int i = 0; i < m->n_params; i++)
        if (type == LM_TYPE_F16 && lm_n_dims(m->params[i]) >= 2)
            n16 += (size_t)lm_nelements(m->params[i]);
    lm_fp16 *h = n16 ? malloc(n16 * sizeof(lm_fp16)) : NULL;
    if (n16 && !h)
        return LM_ERR_NOMEM;
    *hold = h;
    for (int i = 0; i < m->n_params && !st; i++) {
        const struct lm_tensor *t = m->params[i];
        int nd = lm_n_dims(t) >= 2 ? 2 : 1;
        if (type == LM_TYPE_F16 && nd == 2) {
            const float *x = t->data;
            int64_t ne = lm_nelements(t);
            for (int64_t j = 0; j < ne; j++)
                h[j] = lm_fp32_to_fp16(x[j]);
            st = lm_gguf_add_tensor(w, t->name, LM_TYPE_F16, nd, t->ne, h);
            h += ne;
        } else {
            st = lm_gguf_add_tensor(w, t->name, LM_TYPE_F32, nd, t->ne, t->data);
        }
    }
    return st;
}

static bool get_u32(const struct lm_gguf *g, const char *key, int32_t *out)
{
    int64_t i = lm_gguf_find_key(g, key);
    uint32_t v = 0;
    if (i < 0 || lm_gguf_get_u32(g, i, &v) || v > INT32_MAX)
        return false;
    *out = (int32_t)v;
    return true;
}

static bool get_f32(const struct lm_gguf *g, const char *key, float *out)
{
    int64_t i = lm_gguf_find_key(g, key);
    return i >= 0 && lm_gguf_get_f32(g, i, out) == LM_OK;
}

/* Copy tensor `name` of g (F32, or with decode any type quant/ decodes:
 * F16, BF16, the quantized ones) into dst of shape like, as F32. */
static lm_status read_tensor(const struct lm_gguf *g, const char *name, const struct lm_tensor *like, void *dst,
                             bool decode, char *err, size_t err_size)
{
    int64_t i = lm_gguf_find_tensor(g, name);
    const struct lm_gguf_tensor_info *ti = i >= 0 ? lm_gguf_tensor_info(g, i) : NULL;
    const unsigned char *base = lm_gguf_data(g);
    if (!ti || !base) {
        snprintf(err, err_size, "tensor %s missing", name);
        return LM_ERR_NOT_FOUND;
    }
    for (int d = 0; d < 4; d++)
        if (ti->ne[d] != like->ne[d]) {
            snprintf(err, err_size, "tensor %s has the wrong shape", name);
            return LM_ERR_CORRUPT;
        }
    int64_t ne = lm_nelements(like);
    if (ti->type == LM_TYPE_F32) {
        memcpy(dst, base + ti->offset, (size_t)ne * sizeof(float));
    } else if (decode && lm_quant_traits(ti->type) && lm_quant_traits(ti->type)->to_float) {
        lm_quant_traits(ti->type)->to_float(base + ti->offset, dst, ne); /* F16, BF16, quantized */
    } else {
        snprintf(err, err_size, "tensor %s: type must be F32%s", name, decode ? " or decodable" : "");
        return LM_ERR_UNSUPPORTED;
    }
    return LM_OK;
}

lm_status lm_train_model_read(const struct lm_gguf *g, struct lm_train_model **out, char *err, size_t err_size)
{
    *out = NULL;
    struct lm_train_hparams hp = {0};
    int64_t ka = lm_gguf_find_key(g, "general.architecture"), te = lm_gguf_find_tensor(g, "token_embd.weight");
    const char *arch = NULL;
    size_t alen = 0;
    if (ka < 0 || lm_gguf_get_str(g, ka, &arch, &alen) || alen != 5 || memcmp(arch, "llama", 5) || te < 0)
        return fail(err, err_size, LM_ERR_UNSUPPORTED, "not a llama model with token_embd.weight");
    hp.n_vocab = (int32_t)lm_gguf_tensor_info(g, te)->ne[1];
    int32_t rot = 0;
    if (!get_u32(g, KEY("context_length"), &hp.n_ctx) || !get_u32(g, KEY("embedding_length"), &hp.n_embd) ||
        !get_u32(g, KEY("block_count"), &hp.n_layer) || !get_u32(g, KEY("feed_forward_length"), &hp.n_ff) ||
        !get_u32(g, KEY("attention.head_count"), &hp.n_head) ||
        !get_u32(g, KEY("attention.head_count_kv"), &hp.n_head_kv) ||
        !get_f32(g, KEY("attention.layer_norm_rms_epsilon"), &hp.norm_eps))
        return fail(err, err_size, LM_ERR_CORRUPT, "llama hyperparameters missing");
    if (!get_f32(g, KEY("rope.freq_base"), &hp.rope_base))
        hp.rope_base = 10000.0f;
    if (get_u32(g, KEY("rope.dimension_count"), &rot) && hp.n_head > 0 && rot != hp.n_embd / hp.n_head)
        return fail(err, err_size, LM_ERR_UNSUPPORTED, "partial RoPE is not trainable here");
    /* the file must hold the weights its hyperparameters promise (a tied
     * output may be missing) before anything is allocated for them: a small
     * hostile file cannot ask for a huge model */
    if (lm_train_hparams_check(&hp, err, err_size))
        return LM_ERR_CORRUPT;
    const double need = lm_train_hparams_n_weights(&hp) - (double)hp.n_embd * hp.n_vocab;
    double have = 0;
    for (int64_t i = 0; i < lm_gguf_n_tensors(g); i++) {
        const struct lm_gguf_tensor_info *ti = lm_gguf_tensor_info(g, i);
        have += (double)ti->ne[0] * (double)ti->ne[1] * (double)ti->ne[2] * (double)ti->ne[3];
    }
    if (have < need)
        return fail(err, err_size, LM_ERR_CORRUPT, "the file holds fewer weights than its hyperparameters need");
    struct lm_train_model *m = NULL;
    lm_status st = lm_train_model_new(&hp, 0, &m, err, err_size);
    for (int i = 0; i < (m ? m->n_params : 0) && !st; i++) {
        struct lm_tensor *t = m->params[i];
        const char *name = t->name;
        if (t == m->output && lm_gguf_find_tensor(g, name) < 0)
            name = "token_embd.weight"; /* a tied output matrix */
        st = read_tensor(g, name, t, t->data, true, err, err_size);
    }
    if (st) {
        lm_train_model_free(m);
        return st;
    }
    *out = m;
    return LM_OK;
}

lm_status lm_trainer_write_state(const struct lm_trainer *tr, struct lm_gguf_writer *w)
{
    lm_status st = lm_gguf_set_u64(w, "training.step", (uint64_t)tr->step);
    if (!st)
        st = lm_gguf_set_u64(w, "training.seed", tr->p.seed);
    char name[LM_MAX_NAME + 16];
    for (int i = 0; i < tr->m->n_train && !st; i++) {
        const struct lm_tensor *t = tr->m->train[i];
        int nd = lm_n_dims(t) >= 2 ? 2 : 1;
        snprintf(name, sizeof name, "optim.m.%s", t->name);
        st = lm_gguf_add_tensor(w, name, LM_TYPE_F32, nd, t->ne, tr->mom1[i]);
        snprintf(name, sizeof name, "optim.v.%s", t->name);
        if (!st)
            st = lm_gguf_add_tensor(w, name, LM_TYPE_F32, nd, t->ne, tr->mom2[i]);
    }
    return st;
}

lm_status lm_trainer_read_state(struct lm_trainer *tr, const struct lm_gguf *g, char *err, size_t err_size)
{
    int64_t k = lm_gguf_find_key(g, "training.step");
    uint64_t step = 0;
    if (k < 0 || lm_gguf_get_u64(g, k, &step) || step > (uint64_t)1 << 40)
        return fail(err, err_size, LM_ERR_CORRUPT, "not a checkpoint: training.step missing");
    char name[LM_MAX_NAME + 16];
    lm_status st = LM_OK;
    for (int i = 0; i < tr->m->n_train && !st; i++) {
        const struct lm_tensor *t = tr->m->train[i];
        snprintf(name, sizeof name, "optim.m.%s", t->name);
        st = read_tensor(g, name, t, tr->mom1[i], false, err, err_size);
        snprintf(name, sizeof name, "optim.v.%s", t->name);
        if (!st)
            st = read_tensor(g, name, t, tr->mom2[i], false, err, err_size);
    }
    if (!st)
        tr->step = (int64_t)step;
    return st;
}

char *lm_train_tmp_path(const char *path)
{
    size_t n = strlen(path) + 32;
    char *tmp = malloc(n);
    if (tmp)
        snprintf(tmp, n, "%s.tmp.%ld", path, (long)getpid());
    return tmp;
}

lm_status lm_train_write_atomic(const struct lm_gguf_writer *w, const char *path)
{
    char *tmp = lm_train_tmp_path(path);
    if (!tmp)
        return LM_ERR_NOMEM;
    lm_status st = lm_gguf_write_file(w, tmp);
    if (!st && rename(tmp, path) != 0)
        st = LM_ERR_IO;
    if (st)
        remove(tmp);
    free(tmp);
    return st;
}
