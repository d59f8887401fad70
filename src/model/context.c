/* context.c - context creation and llama_decode: batch checks, KV slot,
 * graph build, allocation, inputs, compute, outputs.
 *
 * A decode of the last one's shape allocates nothing (tests/api/
 * test_decode_alloc.c counts): the batch's per-token arrays are made with the
 * context (n_batch entries), the mask's host copy, the scheduler's buffers
 * and the logits buffer only grow, and the kept graph runs again. A new shape
 * builds its graph in the reset arena and plans it (the scheduler's and the
 * graph allocator's planning allocate). Running the kept graph again with
 * new inputs (the cache cells it writes among them) skips the build and the
 * allocation, whose cost docs/performance.md gives.
 */
#include "model/context.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/time.h"
#include "model/placement.h"
#include "model/row_split.h"
#include "vocab/vocab.h"

static void resolve_params(const struct lm_model *m, const struct lm_context_params *p, struct lm_cparams *cp)
{
    const struct lm_hparams *hp = &m->hp;
    memset(cp, 0, sizeof *cp);
    cp->n_ctx = p->n_ctx ? p->n_ctx : hp->n_ctx_train;
    cp->n_batch = p->n_batch < cp->n_ctx ? p->n_batch : cp->n_ctx;
    if (cp->n_batch == 0)
        cp->n_batch = 1;
    cp->n_threads = p->n_threads;
    cp->n_threads_batch = p->n_threads_batch;
    cp->rope_freq_base = p->rope_freq_base != 0.0f ? p->rope_freq_base : hp->rope_freq_base_train;
    cp->rope_freq_scale = p->rope_freq_scale != 0.0f ? p->rope_freq_scale : hp->rope_freq_scale_train;
    cp->n_yarn_orig_ctx = p->yarn_orig_ctx     ? p->yarn_orig_ctx
                          : hp->n_yarn_orig_ctx ? hp->n_yarn_orig_ctx
                                                : hp->n_ctx_train;
    int scaling = p->rope_scaling_type >= 0 ? p->rope_scaling_type : (int)hp->rope_scaling_type_train;
    if (scaling == LM_ROPE_SCALING_NONE)
        cp->rope_freq_scale = 1.0f;
    cp->yarn_ext_factor = p->yarn_ext_factor >= 0.0f ? p->yarn_ext_factor
                                                     : (scaling == LM_ROPE_SCALING_YARN ? 1.0f : 0.0f);
    cp->yarn_attn_factor = p->yarn_attn_factor;
    cp->yarn_beta_fast = p->yarn_beta_fast;
    cp->yarn_beta_slow = p->yarn_beta_slow;
    cp->type_k = p->type_k;
    cp->type_v = p->type_v;
    cp->logits_all = p->logits_all;
    cp->embedding = p->embedding;
    cp->attn_unfused = p->attn_unfused;
}

/* One backend per device of the model's plan that holds a layer, the
 * output or a row slice: GPUs first (the scheduler prefers them), the host last (it
 * computes what nothing else does, and the input layer). */
static lm_status init_backends(struct lm_context *c, const struct lm_backend_opts *opts)
{
    const struct lm_placement *pl = c->model->place;
    bool used[LM_MAX_DEVICES] = {false};
    for (uint32_t il = 0; il < pl->n_layer; il++)
        used[pl->layer_dev[il]] = true;
    used[pl->output_dev] = true;
    for (int k = 0; k < c->model->n_splits; k++) /* row slices (model/row_split.h) */
        for (int s = 0; s < c->model->splits[k].n; s++)
            used[c->model->splits[k].dev[s]] = true;
    for (int d = 1; d < pl->n_dev; d++) {
        if (!used[d])
            continue;
        lm_status st = lm_backend_reg_init_threads(pl->dev[d], (int)c->cp.n_threads, opts, &c->backends[c->n_backends]);
        if (st) {
            LM_LOG_ERR("context: cannot start backend %s (%s)\n", pl->dev[d]->name, lm_status_str(st));
            return st;
        }
        c->n_backends++;
    }
    lm_status st = lm_backend_reg_init_threads(pl->dev[0], (int)c->cp.n_threads, opts, &c->cpu);
    if (!st)
        c->backends[c->n_backends++] = c->cpu;
    return st;
}

/* The KV cache on the plan's devices: each layer's K and V in its device's
 * memory (lm_placement_kv_dev). */
static lm_status init_kv(struct lm_context *c, bool offload_kqv)
{
    const struct lm_placement *pl = c->model->place;
    lm_buft buft[LM_MAX_LAYERS];
    for (uint32_t il = 0; il < pl->n_layer; il++)
        buft[il] = lm_backend_reg_default_buft(pl->dev[lm_placement_kv_dev(pl, il, offload_kqv)]);
    lm_status st = lm_kv_init(&c->kv, &c->model->hp, c->cp.type_k, c->cp.type_v, c->cp.n_ctx, buft);
    if (st == LM_ERR_UNSUPPORTED)
        LM_LOG_ERR("context: no KV cache with K %s and V %s for this model: its K heads of %u and V heads of %u "
                   "elements must be whole blocks of a type that encodes and decodes\n",
                   lm_type_name(c->cp.type_k), lm_type_name(c->cp.type_v), c->model->hp.n_embd_head_k,
                   c->model->hp.n_embd_head_v);
    else if (st)
        LM_LOG_ERR("context: cannot create a KV cache of %u cells (%s)\n", c->cp.n_ctx, lm_status_str(st));
    return st;
}

static struct lm_batch_scratch *scratch_new(uint32_t n);
static void scratch_free(struct lm_batch_scratch *bi);

lm_status lm_context_new(const struct lm_model *model, const struct lm_context_params *p, struct lm_context **out)
{
    if (!model || !p || !out || !model->ctx || !model->place)
        return LM_ERR_INVALID_ARG;
    struct lm_context *c = calloc(1, sizeof *c);
    if (!c)
        return LM_ERR_NOMEM;
    c->model = model;
    resolve_params(model, p, &c->cp);
    lm_status st = LM_OK;
    if (c->cp.n_ctx > (1u << 24) || !(c->cp.rope_freq_base > 0.0f) || !(c->cp.rope_freq_scale > 0.0f)) {
        LM_LOG_ERR("context: bad parameters (n_ctx %u, rope base %g scale %g)\n", c->cp.n_ctx,
                   (double)c->cp.rope_freq_base, (double)c->cp.rope_freq_scale);
        st = LM_ERR_INVALID_ARG;
    }
    const struct lm_arch_def *def = lm_arch_get(model->hp.arch);
    if (!st && def && def->encoder && !c->cp.embedding) {
        LM_LOG_ERR("context: %s is an embedding model: no text generation (create the context with embedding = true)\n",
                   lm_arch_name(model->hp.arch));
        st = LM_ERR_INVALID_ARG;
    }
    if (!st)
        st = init_backends(c, &p->backend);
    if (!st)
        st = init_kv(c, p->offload_kqv);
    if (!st)
        st = lm_sched_new(c->backends, c->n_backends, LM_GRAPH_MAX_NODES, &c->sched);
    if (!st) {
        struct lm_ctx_params gp = {
            .mem_size = LM_GRAPH_MAX_NODES * lm_tensor_overhead() + lm_graph_overhead(LM_GRAPH_MAX_NODES),
            .no_alloc = true,
        };
        st = lm_ctx_new(&gp, &c->gctx);
    }
    if (!st) {
        c->embd = calloc(model->hp.n_embd, sizeof(float));
        c->scratch = scratch_new(c->cp.n_batch ? c->cp.n_batch : 1);
        if (!c->embd || !c->scratch)
            st = LM_ERR_NOMEM;
        c->reuse = !p->no_graph_reuse;
    }
    if (st) {
        lm_context_free(c);
        return st;
    }
    *out = c;
    return LM_OK;
}

void lm_context_free(struct lm_context *c)
{
    if (!c)
        return;
    lm_sched_free(c->sched);
    lm_kv_free(&c->kv);
    for (int i = 0; i < c->n_backends; i++)
        lm_backend_free(c->backends[i]);
    lm_ctx_free(c->gctx);
    free(c->logits);
    free(c->embd);
    scratch_free(c->scratch);
    free(c->mask);
    free(c);
}

void lm_context_set_threads(struct lm_context *c, uint32_t n_threads, uint32_t n_threads_batch)
{
    c->cp.n_threads = n_threads;
    c->cp.n_threads_batch = n_threads_batch;
}

void lm_context_set_observer(struct lm_context *c, lm_sched_want_fn want, lm_sched_observe_fn observe, void *user)
{
    lm_sched_set_observer(c->sched, want, observe, user);
}

/* ---- batch checks ---- */

struct lm_batch_scratch {
    int32_t *pos;
    uint64_t *seq;      /* sequence masks */
    int32_t *seq0;      /* first sequence of each token (for the mask) */
    int32_t *out_ids;   /* rows producing outputs */
    int32_t *cells;     /* the KV cell of each token (lm_kv_find_slot) */
    int32_t n_out;
    bool rows_by_index; /* logits stored as rows by batch index */
};

static void scratch_free(struct lm_batch_scratch *bi)
{
    if (!bi)
        return;
    free(bi->pos);
    free(bi->seq);
    free(bi->seq0);
    free(bi->out_ids);
    free(bi->cells);
    free(bi);
}

/* The per-token arrays for batches of up to n tokens; NULL on OOM. */
static struct lm_batch_scratch *scratch_new(uint32_t n)
{
    struct lm_batch_scratch *bi = calloc(1, sizeof *bi);
    if (!bi)
        return NULL;
    bi->pos = malloc((size_t)n * sizeof *bi->pos);
    bi->seq = malloc((size_t)n * sizeof *bi->seq);
    bi->seq0 = malloc((size_t)n * sizeof *bi->seq0);
    bi->out_ids = malloc((size_t)n * sizeof *bi->out_ids);
    bi->cells = malloc((size_t)n * sizeof *bi->cells);
    if (!bi->pos || !bi->seq || !bi->seq0 || !bi->out_ids || !bi->cells) {
        scratch_free(bi);
        return NULL;
    }
    return bi;
}

static int check_batch(struct lm_context *c, const struct lm_batch *b, struct lm_batch_scratch *bi)
{
    const struct lm_model *m = c->model;
    int32_t n = b->n_tokens;
    if (n <= 0 || (uint32_t)n > c->cp.n_batch) {
        LM_LOG_ERR("decode: batch of %d tokens (n_batch is %u)\n", n, c->cp.n_batch);
        return -1;
    }
    if (!b->token && !b->embd) {
        LM_LOG_ERR("decode: batch has neither tokens nor embeddings\n");
        return -1;
    }
    for (int32_t i = 0; i < n; i++) {
        if (b->token && (b->token[i] < 0 || (uint32_t)b->token[i] >= m->hp.n_vocab)) {
            LM_LOG_ERR("decode: token %d at %d is not in the vocabulary (n_vocab %u)\n", b->token[i], i, m->hp.n_vocab);
            return -1;
        }
        /* in 64 bits: all_pos_0 + i * all_pos_1 may pass INT32_MAX (|i| < 2^24) */
        int64_t pos = b->pos ? b->pos[i] : (int64_t)b->all_pos_0 + (int64_t)i * b->all_pos_1;
        if (pos < 0 || pos > LM_POS_MAX) {
            LM_LOG_ERR("decode: position %lld at %d outside [0, %d]\n", (long long)pos, i, LM_POS_MAX);
            return -1;
        }
        bi->pos[i] = (int32_t)pos;
        int32_t ns = b->seq_id ? (b->n_seq_id ? b->n_seq_id[i] : 1) : 1;
        if (ns < 1 || ns > LM_MAX_SEQ) {
            LM_LOG_ERR("decode: token %d belongs to %d sequences\n", i, ns);
            return -1;
        }
        bi->seq[i] = 0;
        for (int32_t s = 0; s < ns; s++) {
            int32_t id = b->seq_id ? b->seq_id[i][s] : b->all_seq_id;
            if (id < 0 || id >= LM_MAX_SEQ) {
                LM_LOG_ERR("decode: sequence id %d out of range [0, %d)\n", id, LM_MAX_SEQ);
                return -1;
            }
            bi->seq[i] |= (uint64_t)1 << id;
            if (s == 0)
                bi->seq0[i] = id;
        }
    }
    bi->rows_by_index = c->cp.logits_all || b->logits;
    bi->n_out = 0;
    for (int32_t i = 0; i < n; i++) {
        bool want = c->cp.logits_all || (b->logits ? b->logits[i] != 0 : i == n - 1);
        if (c->cp.embedding && i == n - 1)
            want = true;
        if (want)
            bi->out_ids[bi->n_out++] = i;
    }
    return 0;
}

/* An encoder encodes each batch alone (llama.cpp runs BERT without a
 * cache): the batch must be one sequence at positions the model has, and
 * the cache is cleared first, so nothing of an earlier decode is seen. */
static int encoder_begin(struct lm_context *c, const struct lm_batch *b, const struct lm_batch_scratch *bi)
{
    const struct lm_hparams *hp = &c->model->hp;
    for (int32_t i = 0; i < b->n_tokens; i++) {
        if (bi->seq[i] != bi->seq[0]) {
            LM_LOG_ERR("decode: an embedding model's batch must be one sequence (token %d differs)\n", i);
            return -1;
        }
        if ((uint32_t)bi->pos[i] >= hp->n_ctx_train) {
            LM_LOG_ERR("decode: position %d at %d outside the model's %u positions\n", bi->pos[i], i, hp->n_ctx_train);
            return -1;
        }
    }
    lm_kv_clear(&c->kv);
    return 0;
}

/* ---- inputs and outputs ---- */

static lm_status set_inputs(struct lm_context *c, struct lm_build *bd, const struct lm_batch *b,
                            const struct lm_batch_scratch *bi)
{
    lm_status st = LM_OK;
    int32_t n = b->n_tokens;
    if (bd->inp_tokens)
        st = lm_tensor_set(bd->inp_tokens, b->token, 0, (size_t)n * sizeof(int32_t));
    if (!st && bd->inp_embd)
        st = lm_tensor_set(bd->inp_embd, b->embd, 0, (size_t)n * c->model->hp.n_embd * sizeof(float));
    if (!st && bd->inp_pos)
        st = lm_tensor_set(bd->inp_pos, bi->pos, 0, (size_t)n * sizeof(int32_t));
    if (!st && bd->inp_out_ids)
        st = lm_tensor_set(bd->inp_out_ids, bi->out_ids, 0, (size_t)bi->n_out * sizeof(int32_t));
    if (!st && bd->inp_kv_idx)
        st = lm_tensor_set(bd->inp_kv_idx, bi->cells, 0, (size_t)n * sizeof *bi->cells);
    if (!st && bd->inp_mask) {
        size_t sz = (size_t)bd->n_kv * (size_t)n;
        if (sz > c->mask_cap) {
            float *grown = realloc(c->mask, sz * sizeof(float));
            if (!grown)
                return LM_ERR_NOMEM;
            c->mask = grown;
            c->mask_cap = sz;
        }
        float *mask = c->mask;
        for (int32_t j = 0; j < n; j++) {
            uint64_t bit = (uint64_t)1 << bi->seq0[j];
            for (int32_t i = 0; i < bd->n_kv; i++) {
                const struct lm_kv_cell *cell = &c->kv.cells[i];
                bool visible = (cell->seq & bit) && (c->model->hp.non_causal || cell->pos <= bi->pos[j]);
                float v = -INFINITY;
                if (visible)
                    v = bd->alibi_mask ? -fabsf((float)(cell->pos - bi->pos[j])) : 0.0f;
                mask[(size_t)j * (size_t)bd->n_kv + (size_t)i] = v;
            }
        }
        st = lm_tensor_set(bd->inp_mask, mask, 0, sz * sizeof(float));
    }
    return st;
}

/* An encoder's embeddings: every row of out_embd (one when pooled, one per
 * token without pooling) into c->embd, grown as needed. */
static lm_status read_encoder_embd(struct lm_context *c, const struct lm_tensor *out)
{
    size_t ne = c->model->hp.n_embd, n = ne * (size_t)out->ne[1];
    if (n > c->embd_cap && n > ne) {
        float *p = realloc(c->embd, n * sizeof(float));
        if (!p)
            return LM_ERR_NOMEM;
        c->embd = p;
        c->embd_cap = n;
    }
    lm_status st = lm_tensor_get(out, c->embd, 0, n * sizeof(float));
    c->embd_ready = !st;
    return st;
}

static lm_status read_outputs(struct lm_context *c, struct lm_build *bd, const struct lm_batch *b,
                              const struct lm_batch_scratch *bi)
{
    const struct lm_hparams *hp = &c->model->hp;
    size_t nv = hp->n_vocab;
    size_t rows = !bd->out_logits ? 0 : bi->rows_by_index ? (size_t)b->n_tokens : 1; /* 0: an encoder */
    if (rows * nv > c->logits_cap) {
        float *nl = realloc(c->logits, rows * nv * sizeof(float));
        if (!nl)
            return LM_ERR_NOMEM;
        c->logits = nl;
        c->logits_cap = rows * nv;
    }
    /* rows of tokens that asked for no logits are zeros, not stale or
     * uninitialised memory (they are part of a saved state) */
    if (bi->rows_by_index && (size_t)bi->n_out < rows)
        memset(c->logits, 0, rows * nv * sizeof(float));
    lm_status st = LM_OK;
    for (int32_t k = 0; rows && k < bi->n_out && !st; k++) {
        int32_t row = bi->out_ids[k];
        if (!bi->rows_by_index && row != b->n_tokens - 1)
            continue;
        float *dst = c->logits + (bi->rows_by_index ? (size_t)row * nv : 0);
        st = lm_tensor_get(bd->out_logits, dst, (size_t)k * nv * sizeof(float), nv * sizeof(float));
    }
    c->n_logit_rows = (int32_t)rows;
    c->logits_ready = rows > 0;
    if (!st && !bd->out_logits)
        return read_encoder_embd(c, bd->out_embd);
    if (!st && c->cp.embedding) {
        size_t ne = hp->n_embd;
        st = lm_tensor_get(bd->out_embd, c->embd, (size_t)(bi->n_out - 1) * ne * sizeof(float), ne * sizeof(float));
        c->embd_ready = !st;
    }
    return st;
}

/* ---- compute ---- */

/* A new graph in the arena: the kept one (if any) is gone. */
static void build_init(struct lm_context *c, struct lm_build *bd)
{
    c->kept_valid = false;
    lm_sched_reset(c->sched);
    lm_ctx_reset(c->gctx);
    memset(bd, 0, sizeof *bd);
    bd->ctx = c->gctx;
    bd->m = c->model;
    bd->hp = &c->model->hp;
    bd->cp = &c->cp;
    bd->kv = &c->kv;
    bd->alibi_mask = c->model->hp.f_max_alibi_bias > 0.0f;
}

static lm_status run_graph(struct lm_context *c, struct lm_graph *g, int n_threads)
{
    lm_backend_set_n_threads(c->cpu, n_threads);
    return lm_sched_graph_compute(c->sched, g);
}

lm_status lm_context_apply_k_shift(struct lm_context *c)
{
    if (!c->kv.has_shift)
        return LM_OK;
    if (!lm_build_keys_rotated(&c->model->hp)) {
        /* keys without RoPE: only the positions moved, and the mask reads them */
        for (uint32_t i = 0; i < c->kv.size; i++)
            c->kv.cells[i].delta = 0;
        c->kv.has_shift = false;
        return LM_OK;
    }
    struct lm_build bd;
    build_init(c, &bd);
    lm_status st = lm_build_k_shift(&bd);
    if (!st)
        st = lm_sched_alloc_graph(c->sched, bd.graph);
    if (!st) {
        int32_t *d = malloc(c->kv.size * sizeof *d);
        if (!d)
            return LM_ERR_NOMEM;
        for (uint32_t i = 0; i < c->kv.size; i++)
            d[i] = c->kv.cells[i].delta;
        st = lm_tensor_set(bd.inp_pos, d, 0, c->kv.size * sizeof *d);
        free(d);
    }
    if (!st)
        st = run_graph(c, bd.graph, (int)c->cp.n_threads_batch);
    lm_sched_reset(c->sched);
    if (!st) {
        for (uint32_t i = 0; i < c->kv.size; i++)
            c->kv.cells[i].delta = 0;
        c->kv.has_shift = false;
    }
    return st;
}

/* The kept graph serves this batch: the same shape (its cells are an input). */
static bool reuse_kept(struct lm_context *c, const struct lm_batch *b, const struct lm_batch_scratch *bi, int32_t n_kv)
{
    struct lm_build *bd = &c->kept;
    return c->kept_valid && bd->n_tokens == b->n_tokens && bd->n_outputs == bi->n_out && bd->n_kv == n_kv &&
           (bd->inp_embd != NULL) == (b->token == NULL);
}

/* Build and allocate the graph of batch b into c->kept. */
static lm_status build_batch(struct lm_context *c, const struct lm_batch *b, const struct lm_batch_scratch *bi,
                             int32_t n_kv)
{
    struct lm_build *bd = &c->kept;
    build_init(c, bd);
    bd->n_kv = n_kv;
    bd->n_tokens = b->n_tokens;
    bd->n_outputs = bi->n_out;
    if (!b->token) {
        bd->inp_embd = lm_new_tensor_2d(c->gctx, LM_TYPE_F32, c->model->hp.n_embd, b->n_tokens);
        if (bd->inp_embd) {
            bd->inp_embd->flags |= LM_FLAG_INPUT;
            lm_set_name(bd->inp_embd, "inp_embd");
        }
    }
    lm_status st = lm_build_graph(bd);
    if (st)
        LM_LOG_ERR("decode: cannot build the graph: %s (%s)\n", lm_status_str(st), lm_ctx_error(c->gctx));
    if (!st)
        st = lm_sched_alloc_graph(c->sched, bd->graph);
    return st;
}

static lm_status compute_batch(struct lm_context *c, const struct lm_batch *b, const struct lm_batch_scratch *bi)
{
    /* the cells attended to: a multiple of 32 (so the graph's shape changes
     * every 32 tokens, not every token), at most the cache */
    uint32_t cell_max = lm_kv_cell_max(&c->kv);
    uint32_t n_kv = (cell_max + 31) / 32 * 32;
    n_kv = n_kv < 32 ? 32 : n_kv;
    n_kv = n_kv > c->kv.size ? c->kv.size : n_kv;
    struct lm_build *bd = &c->kept;
    lm_status st = LM_OK;
    if (reuse_kept(c, b, bi, (int32_t)n_kv))
        c->n_reused++;
    else
        st = build_batch(c, b, bi, (int32_t)n_kv);
    c->kept_valid = false;
    if (!st)
        st = set_inputs(c, bd, b, bi);
    if (!st)
        st = run_graph(c, bd->graph, (int)(b->n_tokens == 1 ? c->cp.n_threads : c->cp.n_threads_batch));
    if (!st)
        st = read_outputs(c, bd, b, bi);
    if (!st && c->reuse)
        c->kept_valid = true;
    else
        lm_sched_reset(c->sched);
    return st;
}

int lm_context_decode(struct lm_context *c, const struct lm_batch *b)
{
    struct lm_batch_scratch bi = *c->scratch; /* the context's arrays; n_out and rows_by_index are this decode's */
    int64_t t0 = lm_time_us();
    int ret = check_batch(c, b, &bi);
    if (ret)
        return ret;
    if (lm_arch_get(c->model->hp.arch)->encoder && (ret = encoder_begin(c, b, &bi)) != 0)
        return ret;
    lm_status st = lm_context_apply_k_shift(c);
    if (st) {
        LM_LOG_ERR("decode: cannot rotate the cached keys for the shifted positions: %s\n", lm_status_str(st));
        return -2;
    }
    struct lm_kv_cache *kv = &c->kv;
    if (kv->head > kv->used + 2 * (uint32_t)b->n_tokens)
        kv->head = 0;
    uint32_t head = kv->head;
    if (!lm_kv_find_slot(kv, (uint32_t)b->n_tokens, bi.pos, bi.seq, bi.cells))
        return 1;
    st = compute_batch(c, b, &bi);
    if (st) {
        LM_LOG_ERR("decode: %s\n", lm_status_str(st));
        lm_kv_release(kv, bi.cells, (uint32_t)b->n_tokens, head); /* give the cells back */
        return -2;
    }
    int64_t dt = lm_time_us() - t0;
    if (b->n_tokens == 1) {
        c->t_eval_us += dt;
        c->n_eval += 1;
    } else {
        c->t_p_eval_us += dt;
        c->n_p_eval += b->n_tokens;
    }
    return 0;
}
