/* engine.h - the server's generation engine: one thread, one llama_context,
 * N slots (KV-cache sequences), continuous batching (docs/server.md).
 *
 * Connection threads make a request (lm_srv_req) holding one task per choice,
 * submit it, then wait on it: the engine appends each choice's text, logprobs
 * and finish reason to the request under the engine mutex and signals the
 * request's condvar. A request is reference-counted (its connection and the
 * engine); the last release frees it.
 *
 * Invariants: only the engine thread touches the llama_context(s) and the
 * samplers; everything shared (queue, results, counters) is under
 * eng->mu. Thread-safe as stated per function. */
#ifndef LM_SERVER_ENGINE_H
#define LM_SERVER_ENGINE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/sampler.h"
#include "core/status.h"
#include "llama.h"

#define LM_SRV_MAX_STOP 8       /* stop strings per request */
#define LM_SRV_MAX_TOP 20       /* top logprobs per token */
#define LM_SRV_MAX_N 16         /* choices per request */

/* One generated token's logprob record. off: the token's text starts at
 * text[off] of its choice. */
struct lm_srv_lp {
    llama_token id;
    float lp;
    size_t off;
    int32_t n_top;
    llama_token top_id[LM_SRV_MAX_TOP];
    float top_lp[LM_SRV_MAX_TOP];
};

/* What a choice has produced so far (under eng->mu). text[0..n_text) is
 * final (stop strings already cut); lps[0..n_lps) have off < n_text. */
struct lm_srv_choice {
    char *text;
    size_t n_text, cap_text;
    struct lm_srv_lp *lps;
    size_t n_lps, cap_lps;
    int32_t n_prompt, n_gen;   /* tokens */
    int64_t t_prompt_us, t_gen_us;
    const char *finish;        /* NULL while running: "stop" or "length" */
    bool done;
    int32_t stopped_eos;       /* finish "stop" because of EOS (not a stop string) */
};

enum lm_srv_kind { LM_SRV_GENERATE, LM_SRV_EMBED };

/* A request: inputs (read-only once submitted) and outputs. */
struct lm_srv_req {
    enum lm_srv_kind kind;
    /* inputs */
    llama_token *prompt;                /* generate: the prompt; embed: input i at emb_off[i] */
    int32_t n_prompt;
    int32_t *emb_off, n_inputs;         /* embed: n_inputs+1 offsets into prompt */
    int32_t n_choices;
    struct lm_sampler_params sp;
    char *grammar;                      /* GBNF or NULL */
    uint64_t seed;                      /* LM_SAMPLER_CTX_RNG: random */
    int32_t n_predict;                  /* max generated tokens (> 0) */
    char *stop[LM_SRV_MAX_STOP];
    int32_t n_stop;
    int32_t n_probs;                    /* top logprobs per token (0: none); want_lp: record lps */
    bool want_lp;
    bool ignore_eos;
    struct lm_sampler *smp[LM_SRV_MAX_N]; /* one per choice, made by the connection; freed with r */
    int64_t deadline_us;                /* llama_time_us() clock */
    /* outputs (under eng->mu) */
    struct lm_srv_choice ch[LM_SRV_MAX_N];
    float *emb;                         /* embed: n_inputs * n_embd, normalized */
    int32_t n_embd;
    int err_status;                     /* != 0: failed with this HTTP status and err */
    char err[256];
    bool cancelled;                     /* set by the connection (disconnect) */
    int32_t n_done;                     /* choices done (embed: 1 when done) */
    /* lifetime */
    int refs;
    pthread_cond_t cond;
};

struct lm_engine_params {
    int32_t n_parallel;
    int32_t n_predict_max;   /* cap of a request's n_predict (<= 0: the slot size) */
    int32_t max_queue;
    int32_t n_threads, n_threads_batch; /* for the embedding context */
};

/* Counters for /metrics and /props (a snapshot). */
struct lm_engine_stats {
    uint64_t n_requests, n_prompt_tokens, n_gen_tokens;
    double t_prompt_s, t_gen_s;
    int32_t n_queued, n_busy, n_slots, n_ctx_slot;
    uint64_t n_decode, n_cancelled;
};

struct lm_engine;

/* An engine over model/ctx (borrowed: the caller frees them after
 * lm_engine_free). Starts the engine thread. Not thread-safe. */
lm_status lm_engine_new(struct llama_model *model, struct llama_context *ctx, const struct lm_engine_params *p,
                        struct lm_engine **out);
/* Stop: fail queued requests (503), finish running ones ("length"), join the
 * thread, free. Requests still referenced by connections stay valid until
 * released. NULL does nothing. */
void lm_engine_free(struct lm_engine *e);
/* Mark the engine as shutting down: queued requests fail, running ones stop,
 * new submissions are refused. Thread-safe. */
void lm_engine_shutdown(struct lm_engine *e);

/* A new request with one reference (the caller's); NULL on no memory. */
struct lm_srv_req *lm_srv_req_new(void);
/* Drop a reference; the last one frees it. Thread-safe (takes eng->mu). */
void lm_srv_req_release(struct lm_engine *e, struct lm_srv_req *r);

/* Queue r (its inputs filled). On LM_OK the engine holds a reference.
 * Returns LM_ERR_INVALID_ARG with r->err_status/err set when it cannot be
 * taken (queue full: 503; shutting down: 503; prompt too long: 400).
 * Thread-safe. */
lm_status lm_engine_submit(struct lm_engine *e, struct lm_srv_req *r);

/* Wait until r changed or ms milliseconds passed; call with lm_engine_lock
 * held. Returns true when r is finished (all choices done or failed). */
bool lm_engine_wait(struct lm_engine *e, struct lm_srv_req *r, int ms);
void lm_engine_lock(struct lm_engine *e);
void lm_engine_unlock(struct lm_engine *e);
/* Ask the engine to stop r (client gone, timeout). Takes the lock. */
void lm_engine_cancel(struct lm_engine *e, struct lm_srv_req *r);

/* A snapshot of the counters. Thread-safe. */
struct lm_engine_stats lm_engine_get_stats(struct lm_engine *e);
/* The tokens a slot may hold. */
int32_t lm_engine_slot_ctx(const struct lm_engine *e);

#endif
