/* select.c - choosing the next token: greedy, random draw, mirostat 1.0 and 2.0.
 *
 * These reproduce llama_sample_token_greedy / llama_sample_token /
 * llama_sample_token_mirostat{,_v2} of b1892, including their internal calls (softmax
 * before every draw, top-k with b1892's clamping inside mirostat) and the RNG draw of
 * std::discrete_distribution, so the same seed yields the same token and mu.
 * All functions work in place on the caller's array; an empty array is
 * LM_ERR_INVALID_ARG (b1892 asserts).
 */
#include <limits.h>
#include <math.h>

#include "sampling/internal.h"
#include "sampling/sampling.h"

lm_status lm_sample_greedy(const struct lm_token_data_array *c, int32_t *out_token)
{
    if (!c || c->size == 0 || !out_token)
        return LM_ERR_INVALID_ARG;
    size_t best = 0; /* std::max_element: the first maximum */
    for (size_t i = 1; i < c->size; i++)
        if (c->data[best].logit < c->data[i].logit)
            best = i;
    *out_token = c->data[best].id;
    return LM_OK;
}

lm_status lm_sample_token(struct lm_token_data_array *c, struct lm_rng *rng, int32_t *out_token)
{
    if (!c || c->size == 0 || !rng || !out_token)
        return LM_ERR_INVALID_ARG;
    lm_sample_softmax(c);
    size_t idx = 0;
    lm_status st = lm_sampling_discrete_strided(rng, &c->data[0].p, c->size, sizeof c->data[0], &idx);
    if (st == LM_OK)
        *out_token = c->data[idx].id;
    return st;
}

/* int(x) as x86-64 computes it (cvttss2si): NaN and out-of-range give INT_MIN */
static int32_t float_to_int_x86(float x)
{
    if (!(x >= -2147483648.0f && x < 2147483648.0f))
        return INT32_MIN;
    return (int32_t)x;
}

/* b1892 finds the drawn token again by id (the first element with that id) */
static float p_of_token(const struct lm_token_data_array *c, int32_t id)
{
    for (size_t i = 0; i < c->size; i++)
        if (c->data[i].id == id)
            return c->data[i].p;
    return 0.0f; /* unreachable: the token came from the array */
}

/* b1892's internal top-k call (k not special-cased at <= 0; the array is sorted) */
static void truncate_top_k(struct lm_token_data_array *c, int32_t k)
{
    if (k < 1)
        k = 1;
    if ((size_t)k < c->size)
        c->size = (size_t)k;
}

/* The end of both mirostat versions: draw a token from the truncated array,
 * then move mu by eta times the error of its surprise against tau. */
static lm_status draw_and_update_mu(struct lm_token_data_array *c, struct lm_rng *rng, float tau, float eta, float *mu,
                                    int32_t *out_token)
{
    int32_t x = 0;
    lm_status st = lm_sample_token(c, rng, &x);
    if (st != LM_OK)
        return st;
    const float observed_surprise = -log2f(p_of_token(c, x));
    const float e = observed_surprise - tau;
    *mu = *mu - eta * e;
    *out_token = x;
    return LM_OK;
}

lm_status lm_sample_mirostat(struct lm_token_data_array *c, struct lm_rng *rng, float tau, float eta, int32_t m,
                             int32_t n_vocab, float *mu, int32_t *out_token)
{
    if (!c || c->size == 0 || !rng || !mu || !out_token)
        return LM_ERR_INVALID_ARG;
    const float N = (float)n_vocab;
    lm_sample_softmax(c);

    /* estimate s_hat from the most probable m tokens (size_t(m - 1) as in C++) */
    const size_t m_1 = (size_t)((int64_t)m - 1);
    float sum_ti_bi = 0.0f, sum_ti_sq = 0.0f;
    for (size_t i = 0; i < m_1 && i < c->size - 1; i++) {
        const float t_i = logf((float)(i + 2) / (float)(i + 1));
        const float b_i = logf(c->data[i].p / c->data[i + 1].p);
        sum_ti_bi += t_i * b_i;
        sum_ti_sq += t_i * t_i;
    }
    const float s_hat = sum_ti_bi / sum_ti_sq;

    /* k from s_hat and the target surprise, then top-k */
    const float epsilon_hat = s_hat - 1;
    const float k = powf((epsilon_hat * powf(2, *mu)) / (1 - powf(N, -epsilon_hat)), 1 / s_hat);
    truncate_top_k(c, float_to_int_x86(k));

    return draw_and_update_mu(c, rng, tau, eta, mu, out_token);
}

lm_status lm_sample_mirostat_v2(struct lm_token_data_array *c, struct lm_rng *rng, float tau, float eta, float *mu,
                                int32_t *out_token)
{
    if (!c || c->size == 0 || !rng || !mu || !out_token)
        return LM_ERR_INVALID_ARG;
    lm_sample_softmax(c);

    /* drop everything from the first token whose surprise exceeds mu, keep one */
    size_t n = 0;
    while (n < c->size && !(-log2f(c->data[n].p) > *mu))
        n++;
    c->size = n == 0 ? 1 : n;
    lm_sample_softmax(c);

    return draw_and_update_mu(c, rng, tau, eta, mu, out_token);
}
