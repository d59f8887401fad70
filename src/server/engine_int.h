/* engine_int.h - the engine's internals shared by engine.c (lifetime, queue,
 * requests) and engine_loop.c (the batching loop). Not for the HTTP side. */
#ifndef LM_SERVER_ENGINE_INT_H
#define LM_SERVER_ENGINE_INT_H

#include "core/strbuf.h"
#include "server/engine.h"

enum slot_state { SLOT_IDLE, SLOT_PROMPT, SLOT_GEN };

struct srv_slot {
    int32_t id;                   /* = its KV-cache sequence id */
    enum slot_state state;
    struct lm_srv_req *req;       /* NULL when idle (owner under e->mu) */
    int32_t choice;
    llama_token *cache;           /* [n_ctx_slot] tokens in the KV cache */
    int32_t n_cache;
    llama_token next;             /* GEN: the sampled token to feed next */
    int32_t n_gen;
    struct lm_strbuf gen;         /* the choice's generated text so far */
    size_t sent;
    struct lm_srv_lp *lps;        /* logprob records not yet published */
    size_t n_lps, cap_lps;
    int64_t t_start_us, t_first_us;
    uint64_t last_used;
};

struct srv_item {
    struct lm_srv_req *req;
    int32_t choice;
};

struct lm_engine {
    struct llama_model *model;
    struct llama_context *ctx;
    struct llama_context *ectx;   /* embeddings, made on first use */
    struct lm_engine_params p;
    int32_t n_slots, n_ctx_slot, n_batch, n_vocab;
    struct srv_slot *slots;
    struct llama_batch batch;     /* capacity n_batch + n_slots */
    int32_t *rows;                /* batch row -> slot index */
    uint64_t clock;               /* slot use counter (LRU) */
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t work;          /* the engine waits here for requests */
    struct srv_item *queue;       /* FIFO [0, n_queue) */
    int32_t n_queue, cap_queue;
    bool stopping;
    struct lm_engine_stats stats;
};

lm_status srv_queue_grow(struct lm_engine *e, int32_t n);
void srv_req_unref(struct lm_srv_req *r);
void srv_req_fail(struct lm_srv_req *r, int status, const char *msg);
void srv_engine_loop(struct lm_engine *e);
/* The embedding of r's inputs (engine thread). */
void srv_embed(struct lm_engine *e, struct lm_srv_req *r);

#endif
