/* sampler.c - the tools' sampling chain (see sampler.h).
 *
 * Penalties, grammar and the filters run through llama.h's samplers, so the
 * tools are clients of the public API like llama.cpp's are; the draw uses
 * either the context's generator (llama_sample_token) or the sampler's own
 * mt19937 through the sampling layer, which is what lets the server's slots
 * share one context and still honour a seed per request. */
#include "common/sampler.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "sampling/grammar.h"
#include "sampling/sampling.h"

struct lm_sampler {
    const struct llama_model *model;
    struct lm_sampler_params p;
    struct llama_grammar *grammar;      /* NULL: unconstrained */
    struct llama_grammar *grammar_init; /* the grammar's start state, for reset */
    llama_token *hist;
    size_t n_hist, cap_hist;
    llama_token_data *cand; /* n_vocab */
    int32_t n_vocab;
    float mirostat_mu;
    bool own_rng;
    uint32_t seed;
    struct lm_rng rng;
};

struct lm_sampler_params lm_sampler_default_params(void)
{
    return (struct lm_sampler_params){
        .temp = 0.8f,
        .top_k = 40,
        .top_p = 0.95f,
        .min_p = 0.05f,
        .tfs_z = 1.0f,
        .typical_p = 1.0f,
        .penalty_last_n = 64,
        .penalty_repeat = 1.1f,
        .penalty_freq = 0.0f,
        .penalty_present = 0.0f,
        .mirostat = 0,
        .mirostat_tau = 5.0f,
        .mirostat_eta = 0.1f,
    };
}

static lm_status make_grammar(const char *text, struct llama_grammar **out, char *err, size_t errlen)
{
    struct lm_gbnf *parsed = NULL;
    lm_status st = lm_gbnf_parse(text, &parsed, err, errlen);
    if (st)
        return st == LM_ERR_NOMEM ? st : LM_ERR_CORRUPT;
    size_t root;
    if (lm_gbnf_rule_id(parsed, "root", &root)) {
        if (errlen)
            snprintf(err, errlen, "the grammar has no 'root' rule");
        st = LM_ERR_CORRUPT;
    } else if (!(*out = llama_grammar_init((const llama_grammar_element **)parsed->rules, parsed->n_rules, root))) {
        if (errlen)
            snprintf(err, errlen, "the grammar cannot start (left recursion or an empty rule)");
        st = LM_ERR_CORRUPT;
    }
    lm_gbnf_free(parsed);
    return st;
}

lm_status lm_sampler_new(const struct llama_model *model, const struct lm_sampler_params *p, const char *grammar,
                         uint64_t seed, struct lm_sampler **out, char *err, size_t errlen)
{
    if (!model || !p || !out)
        return LM_ERR_INVALID_ARG;
    struct lm_sampler *s = calloc(1, sizeof *s);
    if (!s)
        return LM_ERR_NOMEM;
    s->model = model;
    s->p = *p;
    s->n_vocab = llama_n_vocab(model);
    s->own_rng = seed != LM_SAMPLER_CTX_RNG;
    s->seed = lm_rng_resolve_seed((uint32_t)seed);
    lm_status st = LM_ERR_NOMEM;
    s->cand = malloc((size_t)s->n_vocab * sizeof *s->cand);
    if (!s->cand)
        goto out_free;
    if (grammar) {
        if ((st = make_grammar(grammar, &s->grammar_init, err, errlen)))
            goto out_free;
        st = LM_ERR_NOMEM;
    }
    if ((st = lm_sampler_reset(s)))
        goto out_free;
    *out = s;
    return LM_OK;
out_free:
    lm_sampler_free(s);
    return st;
}

void lm_sampler_free(struct lm_sampler *s)
{
    if (!s)
        return;
    llama_grammar_free(s->grammar);
    llama_grammar_free(s->grammar_init);
    free(s->hist);
    free(s->cand);
    free(s);
}

lm_status lm_sampler_reset(struct lm_sampler *s)
{
    s->n_hist = 0;
    s->mirostat_mu = 2.0f * s->p.mirostat_tau;
    lm_rng_seed(&s->rng, s->seed);
    if (s->grammar_init) {
        struct llama_grammar *g = llama_grammar_copy(s->grammar_init);
        if (!g)
            return LM_ERR_NOMEM;
        llama_grammar_free(s->grammar);
        s->grammar = g;
    }
    return LM_OK;
}

lm_status lm_sampler_accept(struct lm_sampler *s, struct llama_context *ctx, llama_token t, bool advance_grammar)
{
    if (s->n_hist == s->cap_hist) {
        size_t nc = s->cap_hist ? 2 * s->cap_hist : 256;
        llama_token *nh = realloc(s->hist, nc * sizeof *nh);
        if (!nh)
            return LM_ERR_NOMEM;
        s->hist = nh;
        s->cap_hist = nc;
    }
    s->hist[s->n_hist++] = t;
    if (advance_grammar && s->grammar)
        llama_grammar_accept_token(ctx, s->grammar, t);
    return LM_OK;
}

/* The draw at the end of the chain, from the generator the sampler uses. */
static llama_token draw(struct lm_sampler *s, struct llama_context *ctx, llama_token_data_array *arr)
{
    const struct lm_sampler_params *p = &s->p;
    if (!s->own_rng) {
        if (p->mirostat == 1)
            return llama_sample_token_mirostat(ctx, arr, p->mirostat_tau, p->mirostat_eta, 100, &s->mirostat_mu);
        if (p->mirostat == 2)
            return llama_sample_token_mirostat_v2(ctx, arr, p->mirostat_tau, p->mirostat_eta, &s->mirostat_mu);
        return llama_sample_token(ctx, arr);
    }
    struct lm_token_data_array *c = (struct lm_token_data_array *)arr;
    int32_t tok = -1;
    lm_status st;
    if (p->mirostat == 1)
        st = lm_sample_mirostat(c, &s->rng, p->mirostat_tau, p->mirostat_eta, 100, s->n_vocab, &s->mirostat_mu, &tok);
    else if (p->mirostat == 2)
        st = lm_sample_mirostat_v2(c, &s->rng, p->mirostat_tau, p->mirostat_eta, &s->mirostat_mu, &tok);
    else
        st = lm_sample_token(c, &s->rng, &tok);
    return st ? -1 : tok;
}

llama_token lm_sampler_sample(struct lm_sampler *s, struct llama_context *ctx, int32_t idx)
{
    const struct lm_sampler_params *p = &s->p;
    const float *logits = idx < 0 ? llama_get_logits(ctx) : llama_get_logits_ith(ctx, idx);
    if (!logits)
        return -1;
    for (int32_t t = 0; t < s->n_vocab; t++)
        s->cand[t] = (llama_token_data){t, logits[t], 0.0f};
    llama_token_data_array arr = {s->cand, (size_t)s->n_vocab, false};
    size_t last_n = p->penalty_last_n < 0 ? llama_n_ctx(ctx) : (size_t)p->penalty_last_n;
    if (last_n > s->n_hist)
        last_n = s->n_hist;
    llama_sample_repetition_penalties(ctx, &arr, s->hist + s->n_hist - last_n, last_n, p->penalty_repeat,
                                      p->penalty_freq, p->penalty_present);
    if (s->grammar) {
        llama_sample_grammar(ctx, &arr, s->grammar);
        size_t live = 0;
        for (size_t i = 0; i < arr.size; i++)
            live += arr.data[i].logit > -INFINITY;
        if (!live)
            return -1;
    }
    if (p->temp <= 0.0f)
        return llama_sample_token_greedy(ctx, &arr);
    if (p->mirostat == 1 || p->mirostat == 2) {
        llama_sample_temp(ctx, &arr, p->temp);
        return draw(s, ctx, &arr);
    }
    llama_sample_top_k(ctx, &arr, p->top_k, 1);
    llama_sample_tail_free(ctx, &arr, p->tfs_z, 1);
    llama_sample_typical(ctx, &arr, p->typical_p, 1);
    llama_sample_top_p(ctx, &arr, p->top_p, 1);
    llama_sample_min_p(ctx, &arr, p->min_p, 1);
    llama_sample_temp(ctx, &arr, p->temp);
    return draw(s, ctx, &arr);
}

bool lm_sampler_grammar_done(const struct lm_sampler *s)
{
    return !s->grammar || lm_grammar_is_complete(s->grammar->g);
}

lm_status lm_token_append(const struct llama_model *model, llama_token t, struct lm_strbuf *b)
{
    char small[64];
    const int32_t n = llama_token_to_piece(model, t, small, (int32_t)sizeof small);
    if (n >= 0)
        return lm_strbuf_put(b, small, (size_t)n);
    /* longer than small: write it in place, in room made for it */
    const size_t need = (size_t)-(int64_t)n;
    const lm_status st = need > INT32_MAX ? LM_ERR_NOMEM : lm_strbuf_reserve(b, need);
    if (st != LM_OK)
        return st;
    if (llama_token_to_piece(model, t, b->p + b->n, (int32_t)need) != (int32_t)need)
        return LM_ERR_INVALID_ARG;
    b->n += need;
    b->p[b->n] = 0;
    return LM_OK;
}
