/* api.h - the objects behind llama.h's opaque handles (src/api/ only).
 *
 * llama_model wraps an lm_model plus caches the API needs (decoded token
 * pieces for grammars); llama_context wraps an lm_context plus the sampling
 * RNG and the timings that llama.h reports.
 */
#ifndef LM_API_H
#define LM_API_H

#include "llama.h"
#include "model/context.h"
#include "model/model.h"
#include "sampling/grammar.h"
#include "sampling/sampling.h"

struct llama_model {
    struct lm_model *m;
    char **pieces;      /* decoded text of every token, built on first grammar use */
    size_t *piece_len;
};

struct llama_context {
    struct lm_context *c;
    struct llama_model *model;
    struct lm_rng rng;
    int64_t t_start_us;
    int64_t t_sample_us;
    int32_t n_sample;
    bool has_evaluated;
};

struct llama_grammar {
    struct lm_grammar *g;
};

/* Decoded pieces for the grammar engine (built lazily); NULL on OOM. */
const struct lm_grammar_vocab *lm_api_grammar_vocab(struct llama_context *ctx, struct lm_grammar_vocab *out);

/* Sampling time accounting. */
void lm_api_sample_time(struct llama_context *ctx, int64_t t0_us, int32_t n);

#endif
