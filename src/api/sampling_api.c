/* sampling_api.c - llama.h: samplers, the context RNG and grammars, as thin
 * wrappers over src/sampling/ (which works on layout-identical arrays). */
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "core/log.h"
#include "core/time.h"
#include "vocab/vocab.h"

_Static_assert(sizeof(llama_token_data) == sizeof(struct lm_token_data), "token data layout");
_Static_assert(sizeof(llama_token_data_array) == sizeof(struct lm_token_data_array), "token array layout");
_Static_assert(sizeof(llama_grammar_element) == sizeof(struct lm_grammar_element), "grammar element layout");

#define ARR(c) ((struct lm_token_data_array *)(c))

/* Run the statement `call` (a sampler step) and add its time to ctx's
 * sampling time, counting no sample. */
#define TIMED(ctx, call)                   \
    do {                                   \
        const int64_t t0_ = lm_time_us();  \
        call;                              \
        lm_api_sample_time((ctx), t0_, 0); \
    } while (0)

/* The end of a token draw started at t0: log a failed draw (no candidates),
 * count one sample and its time, and return tok (-1 on failure). */
static llama_token picked(struct llama_context *ctx, int64_t t0, lm_status st, int32_t tok, const char *fn)
{
    if (st)
        LM_LOG_ERR("%s: no candidates\n", fn);
    lm_api_sample_time(ctx, t0, 1);
    return tok;
}

void llama_set_rng_seed(struct llama_context *ctx, uint32_t seed) { lm_rng_seed(&ctx->rng, lm_rng_resolve_seed(seed)); }

void llama_sample_repetition_penalties(struct llama_context *ctx, llama_token_data_array *candidates,
                                       const llama_token *last_tokens, size_t penalty_last_n, float penalty_repeat,
                                       float penalty_freq, float penalty_present)
{
    TIMED(ctx, lm_sample_repetition_penalties(ARR(candidates), last_tokens, penalty_last_n, penalty_repeat,
                                              penalty_freq, penalty_present));
}

void llama_sample_apply_guidance(struct llama_context *ctx, float *logits, float *logits_guidance, float scale)
{
    TIMED(ctx, lm_sample_apply_guidance(logits, logits_guidance, (size_t)llama_n_vocab(ctx->model), scale));
}

void llama_sample_classifier_free_guidance(struct llama_context *ctx, llama_token_data_array *candidates,
                                           struct llama_context *guidance_ctx, float scale)
{
    int64_t t0 = lm_time_us();
    int32_t n_vocab = llama_n_vocab(ctx->model);
    if (!guidance_ctx || llama_n_vocab(guidance_ctx->model) != n_vocab || candidates->size != (size_t)n_vocab) {
        LM_LOG_ERR("llama_sample_classifier_free_guidance: contexts or candidates do not match\n");
        return;
    }
    lm_sample_cfg(ARR(candidates), llama_get_logits(guidance_ctx), (size_t)n_vocab, scale);
    lm_api_sample_time(ctx, t0, 0);
}

void llama_sample_softmax(struct llama_context *ctx, llama_token_data_array *candidates)
{
    TIMED(ctx, lm_sample_softmax(ARR(candidates)));
}

void llama_sample_top_k(struct llama_context *ctx, llama_token_data_array *candidates, int32_t k, size_t min_keep)
{
    TIMED(ctx, lm_sample_top_k(ARR(candidates), k, min_keep));
}

void llama_sample_top_p(struct llama_context *ctx, llama_token_data_array *candidates, float p, size_t min_keep)
{
    TIMED(ctx, lm_sample_top_p(ARR(candidates), p, min_keep));
}

void llama_sample_min_p(struct llama_context *ctx, llama_token_data_array *candidates, float p, size_t min_keep)
{
    TIMED(ctx, lm_sample_min_p(ARR(candidates), p, min_keep));
}

void llama_sample_tail_free(struct llama_context *ctx, llama_token_data_array *candidates, float z, size_t min_keep)
{
    TIMED(ctx, lm_sample_tail_free(ARR(candidates), z, min_keep));
}

void llama_sample_typical(struct llama_context *ctx, llama_token_data_array *candidates, float p, size_t min_keep)
{
    TIMED(ctx, lm_sample_typical(ARR(candidates), p, min_keep));
}

void llama_sample_entropy(struct llama_context *ctx, llama_token_data_array *candidates_p, float min_temp,
                          float max_temp, float exponent_val)
{
    TIMED(ctx, lm_sample_entropy(ARR(candidates_p), min_temp, max_temp, exponent_val));
}

void llama_sample_temp(struct llama_context *ctx, llama_token_data_array *candidates, float temp)
{
    TIMED(ctx, lm_sample_temp(ARR(candidates), temp));
}

void llama_sample_temperature(struct llama_context *ctx, llama_token_data_array *candidates, float temp)
{
    llama_sample_temp(ctx, candidates, temp);
}

llama_token llama_sample_token_mirostat(struct llama_context *ctx, llama_token_data_array *candidates, float tau,
                                        float eta, int32_t m, float *mu)
{
    const int64_t t0 = lm_time_us();
    int32_t tok = -1;
    const lm_status st =
        lm_sample_mirostat(ARR(candidates), &ctx->rng, tau, eta, m, llama_n_vocab(ctx->model), mu, &tok);
    return picked(ctx, t0, st, tok, "llama_sample_token_mirostat");
}

llama_token llama_sample_token_mirostat_v2(struct llama_context *ctx, llama_token_data_array *candidates, float tau,
                                           float eta, float *mu)
{
    const int64_t t0 = lm_time_us();
    int32_t tok = -1;
    const lm_status st = lm_sample_mirostat_v2(ARR(candidates), &ctx->rng, tau, eta, mu, &tok);
    return picked(ctx, t0, st, tok, "llama_sample_token_mirostat_v2");
}

llama_token llama_sample_token_greedy(struct llama_context *ctx, llama_token_data_array *candidates)
{
    const int64_t t0 = lm_time_us();
    int32_t tok = -1;
    const lm_status st = lm_sample_greedy(ARR(candidates), &tok);
    return picked(ctx, t0, st, tok, "llama_sample_token_greedy");
}

llama_token llama_sample_token(struct llama_context *ctx, llama_token_data_array *candidates)
{
    const int64_t t0 = lm_time_us();
    int32_t tok = -1;
    const lm_status st = lm_sample_token(ARR(candidates), &ctx->rng, &tok);
    return picked(ctx, t0, st, tok, "llama_sample_token");
}

/* ---- grammars ---- */

struct llama_grammar *llama_grammar_init(const llama_grammar_element **rules, size_t n_rules, size_t start_rule_index)
{
    struct llama_grammar *g = calloc(1, sizeof *g);
    char err[256] = "";
    if (!g)
        return NULL;
    if (lm_grammar_init((const struct lm_grammar_element *const *)rules, n_rules, start_rule_index, &g->g, err,
                        sizeof err)) {
        LM_LOG_ERR("llama_grammar_init: %s\n", err);
        free(g);
        return NULL;
    }
    return g;
}

void llama_grammar_free(struct llama_grammar *grammar)
{
    if (!grammar)
        return;
    lm_grammar_free(grammar->g);
    free(grammar);
}

struct llama_grammar *llama_grammar_copy(const struct llama_grammar *grammar)
{
    if (!grammar)
        return NULL;
    struct llama_grammar *g = calloc(1, sizeof *g);
    if (g && lm_grammar_copy(grammar->g, &g->g)) {
        free(g);
        g = NULL;
    }
    return g;
}

static const char *piece_of(void *user, int32_t token, size_t *len)
{
    struct llama_model *model = user;
    if (token < 0 || token >= lm_vocab_n_tokens(model->m->vocab)) {
        *len = 0;
        return "";
    }
    *len = model->piece_len[token];
    return model->pieces[token];
}

/* Decode every token once (the grammar engine matches decoded text). */
static bool build_pieces(struct llama_model *model)
{
    int32_t n = lm_vocab_n_tokens(model->m->vocab);
    model->pieces = calloc((size_t)n, sizeof *model->pieces);
    model->piece_len = calloc((size_t)n, sizeof *model->piece_len);
    if (!model->pieces || !model->piece_len)
        return false;
    for (int32_t t = 0; t < n; t++) {
        char small[64];
        int32_t len = lm_vocab_token_to_piece(model->m->vocab, t, small, (int32_t)sizeof small);
        int32_t need = len < 0 ? -len : len;
        model->pieces[t] = malloc((size_t)need + 1);
        if (!model->pieces[t])
            return false;
        if (len < 0)
            lm_vocab_token_to_piece(model->m->vocab, t, model->pieces[t], need);
        else
            memcpy(model->pieces[t], small, (size_t)len);
        model->pieces[t][need] = 0;
        model->piece_len[t] = (size_t)need;
    }
    return true;
}

const struct lm_grammar_vocab *lm_api_grammar_vocab(struct llama_context *ctx, struct lm_grammar_vocab *out)
{
    struct llama_model *model = ctx->model;
    if (!model->pieces && !build_pieces(model))
        return NULL;
    out->piece = piece_of;
    out->user = model;
    out->eos = lm_vocab_eos(model->m->vocab);
    return out;
}

void llama_sample_grammar(struct llama_context *ctx, llama_token_data_array *candidates,
                          const struct llama_grammar *grammar)
{
    int64_t t0 = lm_time_us();
    struct lm_grammar_vocab gv;
    if (grammar && lm_api_grammar_vocab(ctx, &gv))
        lm_grammar_sample(grammar->g, ARR(candidates), &gv);
    lm_api_sample_time(ctx, t0, 0);
}

void llama_grammar_accept_token(struct llama_context *ctx, struct llama_grammar *grammar, llama_token token)
{
    int64_t t0 = lm_time_us();
    struct lm_grammar_vocab gv;
    if (grammar && lm_api_grammar_vocab(ctx, &gv) && lm_grammar_accept_token(grammar->g, token, &gv))
        LM_LOG_ERR("llama_grammar_accept_token: token %d does not fit the grammar\n", token);
    lm_api_sample_time(ctx, t0, 0);
}
