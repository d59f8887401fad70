/* engine.c - the engine thread: slots, the queue, continuous batching
 * (docs/server.md, "Threads and ownership").
 *
 * Invariants:
 * - Only the engine thread touches e->ctx, e->ectx, slots' caches and the
 *   samplers of requests it runs; everything a connection reads (queue,
 *   request results, counters, slot owners) changes under e->mu.
 * - Slot i is KV-cache sequence i; slot->cache[0..n_cache) are the tokens
 *   whose K/V the cache holds for it at positions 0..n_cache-1, and
 *   n_cache < n_ctx_slot.
 * - A queued or running request holds one reference owned by the engine,
 *   dropped when all its choices are done.
 * Workload: one step per generated token of the busiest slot; a step costs one
 * llama_decode of <= n_batch tokens (more calls only when the cache has fewer
 * free cells than the batch has tokens). */
#include "server/engine.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server/engine_int.h"

struct lm_srv_req *lm_srv_req_new(void)
{
    struct lm_srv_req *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    pthread_condattr_t ca; /* lm_engine_wait's deadlines are on the monotonic clock */
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    int rc = pthread_cond_init(&r->cond, &ca);
    pthread_condattr_destroy(&ca);
    if (rc) {
        free(r);
        return NULL;
    }
    r->refs = 1;
    r->seed = LM_SAMPLER_CTX_RNG;
    return r;
}

static void req_free(struct lm_srv_req *r)
{
    free(r->prompt);
    free(r->emb_off);
    free(r->grammar);
    for (int i = 0; i < r->n_stop; i++)
        free(r->stop[i]);
    for (int i = 0; i < LM_SRV_MAX_N; i++) {
        free(r->ch[i].text);
        free(r->ch[i].lps);
        lm_sampler_free(r->smp[i]);
    }
    free(r->emb);
    pthread_cond_destroy(&r->cond);
    free(r);
}

/* Drop a reference with e->mu held. */
void srv_req_unref(struct lm_srv_req *r)
{
    if (--r->refs == 0)
        req_free(r);
}

void lm_srv_req_release(struct lm_engine *e, struct lm_srv_req *r)
{
    if (!r)
        return;
    pthread_mutex_lock(&e->mu);
    srv_req_unref(r);
    pthread_mutex_unlock(&e->mu);
}

void lm_engine_lock(struct lm_engine *e)
{
    pthread_mutex_lock(&e->mu);
}

void lm_engine_unlock(struct lm_engine *e)
{
    pthread_mutex_unlock(&e->mu);
}

static bool req_finished(const struct lm_srv_req *r)
{
    if (r->err_status)
        return true;
    return r->kind == LM_SRV_EMBED ? r->n_done > 0 : r->n_done >= r->n_choices;
}

bool lm_engine_wait(struct lm_engine *e, struct lm_srv_req *r, int ms)
{
    if (req_finished(r))
        return true;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_nsec += (long)ms * 1000000L;
    ts.tv_sec += ts.tv_nsec / 1000000000L;
    ts.tv_nsec %= 1000000000L;
    pthread_cond_timedwait(&r->cond, &e->mu, &ts);
    return req_finished(r);
}

void lm_engine_cancel(struct lm_engine *e, struct lm_srv_req *r)
{
    pthread_mutex_lock(&e->mu);
    r->cancelled = true;
    pthread_cond_signal(&e->work);
    pthread_mutex_unlock(&e->mu);
}

/* Fail r with status/message (e->mu held); it leaves the queue elsewhere. */
void srv_req_fail(struct lm_srv_req *r, int status, const char *msg)
{
    if (!r->err_status) {
        r->err_status = status;
        snprintf(r->err, sizeof r->err, "%s", msg);
    }
    pthread_cond_broadcast(&r->cond);
}

lm_status lm_engine_submit(struct lm_engine *e, struct lm_srv_req *r)
{
    lm_status st = LM_ERR_INVALID_ARG;
    int32_t n_items = r->kind == LM_SRV_EMBED ? 1 : r->n_choices;
    pthread_mutex_lock(&e->mu);
    if (e->stopping) {
        r->err_status = 503;
        snprintf(r->err, sizeof r->err, "the server is shutting down");
    } else if (e->n_queue + n_items > e->p.max_queue) {
        r->err_status = 503;
        snprintf(r->err, sizeof r->err, "the queue is full (%d requests waiting); retry later", e->n_queue);
    } else if (srv_queue_grow(e, e->n_queue + n_items)) {
        r->err_status = 500;
        snprintf(r->err, sizeof r->err, "out of memory");
    } else {
        for (int32_t i = 0; i < n_items; i++)
            e->queue[e->n_queue++] = (struct srv_item){r, i};
        r->refs++;
        e->stats.n_requests++;
        pthread_cond_signal(&e->work);
        st = LM_OK;
    }
    pthread_mutex_unlock(&e->mu);
    return st;
}

struct lm_engine_stats lm_engine_get_stats(struct lm_engine *e)
{
    pthread_mutex_lock(&e->mu);
    struct lm_engine_stats s = e->stats;
    s.n_queued = e->n_queue;
    s.n_busy = 0;
    for (int32_t i = 0; i < e->n_slots; i++)
        s.n_busy += e->slots[i].req != NULL;
    s.n_slots = e->n_slots;
    s.n_ctx_slot = e->n_ctx_slot;
    pthread_mutex_unlock(&e->mu);
    return s;
}

int32_t lm_engine_slot_ctx(const struct lm_engine *e)
{
    return e->n_ctx_slot;
}

void lm_engine_shutdown(struct lm_engine *e)
{
    pthread_mutex_lock(&e->mu);
    e->stopping = true;
    pthread_cond_signal(&e->work);
    pthread_mutex_unlock(&e->mu);
}

static void *engine_main(void *arg)
{
    srv_engine_loop(arg);
    return NULL;
}

static lm_status slots_new(struct lm_engine *e)
{
    e->slots = calloc((size_t)e->n_slots, sizeof *e->slots);
    if (!e->slots)
        return LM_ERR_NOMEM;
    for (int32_t i = 0; i < e->n_slots; i++) {
        e->slots[i].id = i;
        e->slots[i].cache = malloc((size_t)e->n_ctx_slot * sizeof(llama_token));
        if (!e->slots[i].cache)
            return LM_ERR_NOMEM;
    }
    return LM_OK;
}

static void engine_free_parts(struct lm_engine *e)
{
    if (e->slots)
        for (int32_t i = 0; i < e->n_slots; i++) {
            free(e->slots[i].cache);
            lm_strbuf_free(&e->slots[i].gen);
            free(e->slots[i].lps);
        }
    free(e->slots);
    free(e->queue);
    free(e->rows);
    if (e->batch.token)
        llama_batch_free(e->batch);
    pthread_cond_destroy(&e->work);
    pthread_mutex_destroy(&e->mu);
    free(e);
}

lm_status lm_engine_new(struct llama_model *model, struct llama_context *ctx, const struct lm_engine_params *p,
                        struct lm_engine **out)
{
    if (!model || !ctx || !p || !out || p->n_parallel < 1 || p->n_parallel > 64)
        return LM_ERR_INVALID_ARG;
    struct lm_engine *e = calloc(1, sizeof *e);
    if (!e)
        return LM_ERR_NOMEM;
    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->work, NULL);
    e->model = model;
    e->ctx = ctx;
    e->p = *p;
    e->n_slots = p->n_parallel;
    e->n_ctx_slot = (int32_t)(llama_n_ctx(ctx) / (uint32_t)p->n_parallel);
    e->n_batch = (int32_t)llama_n_batch(ctx);
    e->n_vocab = llama_n_vocab(model);
    lm_status st = LM_ERR_INVALID_ARG;
    if (e->n_ctx_slot < 8)
        goto out_free;
    st = LM_ERR_NOMEM;
    int32_t cap = e->n_batch + e->n_slots;
    e->batch = llama_batch_init(cap, 0, 1);
    e->rows = malloc((size_t)cap * sizeof *e->rows);
    if (!e->batch.token || !e->rows || slots_new(e) || srv_queue_grow(e, 16))
        goto out_free;
    if (pthread_create(&e->thread, NULL, engine_main, e))
        goto out_free;
    *out = e;
    return LM_OK;
out_free:
    engine_free_parts(e);
    return st;
}

void lm_engine_free(struct lm_engine *e)
{
    if (!e)
        return;
    lm_engine_shutdown(e);
    pthread_join(e->thread, NULL);
    if (e->ectx)
        llama_free(e->ectx);
    engine_free_parts(e);
}

lm_status srv_queue_grow(struct lm_engine *e, int32_t n)
{
    if (n <= e->cap_queue)
        return LM_OK;
    int32_t cap = e->cap_queue ? e->cap_queue : 16;
    while (cap < n)
        cap *= 2;
    struct srv_item *q = realloc(e->queue, (size_t)cap * sizeof *q);
    if (!q)
        return LM_ERR_NOMEM;
    e->queue = q;
    e->cap_queue = cap;
    return LM_OK;
}

/* Make the embedding context on first use (engine thread). */
static bool embed_ctx(struct lm_engine *e)
{
    if (e->ectx)
        return true;
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = (uint32_t)e->n_ctx_slot;
    cp.n_batch = (uint32_t)e->n_ctx_slot;
    cp.n_threads = (uint32_t)e->p.n_threads;
    cp.n_threads_batch = (uint32_t)e->p.n_threads_batch;
    cp.embedding = true;
    e->ectx = llama_new_context_with_model(e->model, cp);
    return e->ectx != NULL;
}

void srv_embed(struct lm_engine *e, struct lm_srv_req *r)
{
    int32_t n_embd = llama_n_embd(e->model);
    float *out = embed_ctx(e) ? malloc((size_t)r->n_inputs * (size_t)n_embd * sizeof *out) : NULL;
    const char *err = out ? NULL : "cannot make the embedding context";
    for (int32_t i = 0; i < r->n_inputs && !err; i++) {
        int32_t a = r->emb_off[i], n = r->emb_off[i + 1] - a;
        llama_kv_cache_clear(e->ectx);
        struct llama_batch b = llama_batch_get_one(r->prompt + a, n, 0, 0);
        if (llama_decode(e->ectx, b)) {
            err = "decode failed";
            break;
        }
        const float *v = llama_get_embeddings(e->ectx);
        double ss = 0;
        for (int32_t j = 0; j < n_embd; j++)
            ss += (double)v[j] * v[j];
        float inv = ss > 0 ? (float)(1.0 / sqrt(ss)) : 1.0f;
        for (int32_t j = 0; j < n_embd; j++)
            out[(size_t)i * (size_t)n_embd + (size_t)j] = v[j] * inv;
    }
    pthread_mutex_lock(&e->mu);
    e->stats.n_prompt_tokens += (uint64_t)r->n_prompt;
    if (err) {
        free(out);
        srv_req_fail(r, 500, err);
    } else {
        r->emb = out;
        r->n_embd = n_embd;
    }
    pthread_mutex_unlock(&e->mu);
}
