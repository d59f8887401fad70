/* context.h - an inference context: KV cache, backends, decode, outputs.
 *
 * A context borrows a model (read-only) and owns the per-step state: the KV
 * cache, the graph arena and allocator, the logits and embedding buffers and
 * timings. lm_context_decode runs one batch through the model (b1892's
 * llama_decode semantics). Not thread-safe: one caller at a time.
 */
#ifndef LM_CONTEXT_H
#define LM_CONTEXT_H

#include "sched/sched.h"
#include "model/build.h"
#include "model/kv_cache.h"
#include "model/placement.h"

/* Same layout as llama.h's llama_batch (the API casts between them). */
struct lm_batch {
    int32_t n_tokens;
    int32_t *token;
    float *embd;
    int32_t *pos;
    int32_t *n_seq_id;
    int32_t **seq_id;
    int8_t *logits;
    int32_t all_pos_0;
    int32_t all_pos_1;
    int32_t all_seq_id;
};

struct lm_context {
    const struct lm_model *model;
    struct lm_cparams cp;
    struct lm_kv_cache kv;

    lm_backend_t cpu;             /* the host device's backend (also in backends) */
    lm_backend_t backends[LM_MAX_DEVICES]; /* one per device the model's plan uses, GPUs first */
    int n_backends;
    struct lm_sched *sched;
    struct lm_ctx *gctx;          /* graph arena, reset per graph build */

    /* The last decode's graph, kept built and allocated: the next decode of
     * the same shape (tokens, outputs, cache window) only sets its inputs
     * (the cache cells it writes among them). kept_valid is cleared by every
     * other use of the graph arena or the scheduler. */
    struct lm_build kept;
    bool kept_valid;
    bool reuse;                   /* keep graphs (lm_context_params.no_graph_reuse not set) */
    int64_t n_reused;             /* decodes that ran the kept graph */

    /* A decode's per-token arrays (context.c's struct lm_batch_scratch), n_batch
     * entries each, made with the context; and the attention mask's host
     * copy, grown to the largest n_kv x n_tokens seen and never shrunk. */
    struct lm_batch_scratch *scratch;
    float *mask;
    size_t mask_cap; /* floats allocated */

    float *logits;                /* rows of n_vocab floats */
    size_t logits_cap;            /* floats allocated */
    int32_t n_logit_rows;         /* rows valid after the last decode */
    bool logits_ready;
    float *embd;                  /* [n_embd] last token's final hidden state; an encoder's
                                     pooled embedding, or n_tokens rows without pooling */
    size_t embd_cap;              /* floats allocated beyond n_embd (0: just n_embd) */
    bool embd_ready;

    int64_t t_p_eval_us, t_eval_us;
    int32_t n_p_eval, n_eval;
};

/* Resolve defaults (0 = from the model, as llama_context_params documents). */
struct lm_context_params {
    uint32_t n_ctx, n_batch, n_threads, n_threads_batch;
    int rope_scaling_type;   /* -1 unspecified, 0 none, 1 linear, 2 yarn */
    float rope_freq_base, rope_freq_scale;
    float yarn_ext_factor, yarn_attn_factor, yarn_beta_fast, yarn_beta_slow;
    uint32_t yarn_orig_ctx;
    enum lm_type type_k, type_v;
    bool logits_all, embedding;
    bool offload_kqv;        /* each layer's KV cache on the layer's device (placement.h); false: the host */
    /* Switches the API layer reads from the environment at context creation
     * (api/context_api.c, core/env.c); zero is the default. */
    bool attn_unfused;              /* attention as MUL_MAT, SOFT_MAX, MUL_MAT instead of the ATTN op */
    bool no_graph_reuse;            /* every decode builds and allocates its graph anew */
    struct lm_backend_opts backend; /* given to every backend the context creates */
};

lm_status lm_context_new(const struct lm_model *model, const struct lm_context_params *p, struct lm_context **out);
void lm_context_free(struct lm_context *c);

/* Decode a batch. Returns 0 on success, 1 when the KV cache has no room,
 * -1 for an invalid batch (message logged), -2 when computing failed. */
int lm_context_decode(struct lm_context *c, const struct lm_batch *batch);

/* Apply pending K rotations (after seq_shift/seq_div); LM_OK if none. */
lm_status lm_context_apply_k_shift(struct lm_context *c);

void lm_context_set_threads(struct lm_context *c, uint32_t n_threads, uint32_t n_threads_batch);

/* Let an observer see chosen nodes of every graph the context computes from
 * now on (decodes and K shifts), as sched/sched.h describes; observe NULL
 * removes it. Without one, computing costs nothing extra. */
void lm_context_set_observer(struct lm_context *c, lm_sched_want_fn want, lm_sched_observe_fn observe, void *user);

#endif
