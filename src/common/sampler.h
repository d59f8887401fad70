/* sampler.h - the sampling chain of lamina's tools, over llama.h's samplers.
 *
 * `lamina run`, `lamina chat` and `lamina serve` pick each next token the
 * same way: repetition penalties over the recent history, an optional GBNF
 * grammar, then greedy, Mirostat 1/2, or top-k -> tail-free -> typical ->
 * top-p -> min-p -> temperature -> a draw. A struct lm_sampler holds what one
 * generation stream needs between tokens: the token history, the grammar
 * state, Mirostat's mu, its own random generator (so that parallel streams of
 * a server draw independently and reproducibly per request seed) and the
 * candidate array.
 *
 * A sampler is used by one thread at a time; distinct samplers are
 * independent. Layer: above the public API (llama.h) and the GBNF parser. */
#ifndef LM_COMMON_SAMPLER_H
#define LM_COMMON_SAMPLER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "core/strbuf.h"
#include "llama.h"

struct lm_sampler_params {
    float temp;             /* <= 0: greedy */
    int32_t top_k;          /* <= 0: off */
    float top_p;            /* 1: off */
    float min_p;            /* 0: off */
    float tfs_z;            /* 1: off */
    float typical_p;        /* 1: off */
    int32_t penalty_last_n; /* history tokens the penalties look at; -1: the context size */
    float penalty_repeat;   /* 1: off */
    float penalty_freq;     /* 0: off */
    float penalty_present;  /* 0: off */
    int32_t mirostat;       /* 0 off, 1 or 2 */
    float mirostat_tau, mirostat_eta;
};

/* lamina run's defaults: temp 0.8, top-k 40, top-p 0.95, min-p 0.05, repeat
 * penalty 1.1 over the last 64 tokens, Mirostat off (tau 5, eta 0.1). */
struct lm_sampler_params lm_sampler_default_params(void);

/* Where the draw's randomness comes from: the context's generator (seeded by
 * llama_context_params.seed / llama_set_rng_seed, as llama.cpp's tools do),
 * or the sampler's own generator seeded with `seed`. */
#define LM_SAMPLER_CTX_RNG UINT64_MAX

struct lm_sampler;

/* A sampler for `model` with params p. grammar: GBNF text whose `root` rule
 * constrains the output, or NULL. seed: LM_SAMPLER_CTX_RNG or a seed of the
 * sampler's own generator. On LM_OK *out is the sampler (free with
 * lm_sampler_free); a bad grammar is LM_ERR_CORRUPT with the parser's message
 * in err. */
lm_status lm_sampler_new(const struct llama_model *model, const struct lm_sampler_params *p, const char *grammar,
                         uint64_t seed, struct lm_sampler **out, char *err, size_t errlen);
void lm_sampler_free(struct lm_sampler *s);

/* Forget the history and restart the grammar and Mirostat; the generator
 * goes back to its seed. */
lm_status lm_sampler_reset(struct lm_sampler *s);

/* Add t to the history (prompt tokens and generated ones alike). Generated
 * tokens also advance the grammar when `advance_grammar`. */
lm_status lm_sampler_accept(struct lm_sampler *s, struct llama_context *ctx, llama_token t, bool advance_grammar);

/* Pick the next token from the logits of batch row idx (llama_get_logits_ith;
 * -1: llama_get_logits, the one row of a llama_batch_get_one batch). Returns
 * the token, or -1 when the grammar admits no token or idx has no logits. */
llama_token lm_sampler_sample(struct lm_sampler *s, struct llama_context *ctx, int32_t idx);

/* True when the grammar (if any) has reached an accepting end: the output may
 * stop here. Without a grammar, always true. */
bool lm_sampler_grammar_done(const struct lm_sampler *s);

/* Append the text of token t, as llama_token_to_piece gives it (any length),
 * to b. LM_ERR_NOMEM / LM_ERR_FULL (b's limit) leave b unchanged. */
lm_status lm_token_append(const struct llama_model *model, llama_token t, struct lm_strbuf *b);

#endif
