/* test_api_samplers.c - every llama_sample_* function through llama.h on small
 * arrays whose results are worked out by hand here (b1892 semantics; the bit-
 * exact comparison with b1892's own sampler code is tests/sampling/):
 *   softmax, top_k, top_p, min_p, tail_free, typical, temp (and the deprecated
 *   temperature), repetition / frequency / presence penalties, mirostat 1.0
 *   and 2.0 (token range and the *mu update), greedy, llama_sample_token with
 *   the context RNG (same seed, same draws; llama_set_rng_seed resets;
 *   frequencies follow p), llama_sample_apply_guidance on n_vocab-long arrays
 *   and the deprecated llama_sample_classifier_free_guidance on two contexts.
 * Arrays are built from probabilities: logit_i = ln p_i, so each cut point
 * is easy to reason about. Samplers that need no context get NULL, as b1892
 * allows. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util_api.h"

/* the deprecated aliases are part of what is tested */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

#define TOL 1e-6

/* Candidates with ids 10, 11, ... and logits ln(p[i]) in the order given. */
static llama_token_data_array from_p(llama_token_data *buf, const double *p, int n)
{
    for (int i = 0; i < n; i++)
        buf[i] = (llama_token_data){10 + i, (float)log(p[i]), 0.0f};
    return (llama_token_data_array){buf, (size_t)n, false};
}

static bool ids_are(const llama_token_data_array *c, const llama_token *ids, size_t n)
{
    if (c->size != n)
        return false;
    for (size_t i = 0; i < n; i++)
        if (c->data[i].id != ids[i])
            return false;
    return true;
}

static void test_softmax(void)
{
    llama_token_data d[4] = {{0, 1, 0}, {1, 3, 0}, {2, 2, 0}, {3, 0, 0}};
    llama_token_data_array c = {d, 4, false};
    llama_sample_softmax(NULL, &c);
    /* e^0, e^-1, e^-2, e^-3 over their sum 1.5530017905 */
    const double want[4] = {0.6439142598, 0.2368828180, 0.0871443187, 0.0320586033};
    const llama_token ids[4] = {1, 2, 0, 3};
    CHECK(c.sorted && ids_are(&c, ids, 4));
    for (int i = 0; i < 4; i++)
        CHECKF(fabs(d[i].p - want[i]) < TOL, "softmax p[%d] = %.8f, want %.8f", i, d[i].p, want[i]);
}

static void test_top_k(void)
{
    llama_token_data d[5];
    const float l[5] = {1, 3, 2, 0, 5};
    llama_token_data_array c;
#define RESET()                                                                                                       \
    do {                                                                                                              \
        for (int i = 0; i < 5; i++)                                                                                   \
            d[i] = (llama_token_data){i, l[i], 0};                                                                    \
        c = (llama_token_data_array){d, 5, false};                                                                    \
    } while (0)
    RESET();
    llama_sample_top_k(NULL, &c, 2, 1);
    CHECK(c.sorted && ids_are(&c, (const llama_token[]){4, 1}, 2));
    RESET();
    llama_sample_top_k(NULL, &c, 1, 3); /* min_keep wins */
    CHECK(ids_are(&c, (const llama_token[]){4, 1, 2}, 3));
    RESET();
    llama_sample_top_k(NULL, &c, 10, 1); /* more than size: all, sorted */
    CHECK(c.sorted && ids_are(&c, (const llama_token[]){4, 1, 2, 0, 3}, 5));
    RESET();
    llama_sample_top_k(NULL, &c, 0, 1); /* lamina: k <= 0 keeps all (b1892 kept min_keep; docs/api.md) */
    CHECK(c.sorted && c.size == 5 && d[0].id == 4);
#undef RESET
}

static const double P4[4] = {0.1, 0.5, 0.15, 0.25}; /* sorted: 0.5 (id 11), 0.25 (13), 0.15 (12), 0.1 (10) */

static void test_top_p(void)
{
    llama_token_data d[4];
    llama_token_data_array c = from_p(d, P4, 4);
    llama_sample_top_p(NULL, &c, 0.7f, 1); /* 0.5, 0.75 >= 0.7 */
    CHECK(ids_are(&c, (const llama_token[]){11, 13}, 2));
    c = from_p(d, P4, 4);
    llama_sample_top_p(NULL, &c, 0.8f, 1); /* 0.5, 0.75, 0.9 */
    CHECK(ids_are(&c, (const llama_token[]){11, 13, 12}, 3));
    CHECK(fabs(d[2].p - 0.15) < TOL);
    c = from_p(d, P4, 4);
    llama_sample_top_p(NULL, &c, 0.3f, 2); /* 0.5 reaches it, min_keep 2 */
    CHECK(ids_are(&c, (const llama_token[]){11, 13}, 2));
    c = from_p(d, P4, 4);
    llama_sample_top_p(NULL, &c, 1.0f, 1); /* no-op, not even sorted */
    CHECK(c.size == 4 && !c.sorted && d[0].id == 10);
}

static void test_min_p(void)
{
    llama_token_data d[4];
    llama_token_data_array c = from_p(d, P4, 4);
    llama_sample_min_p(NULL, &c, 0.28f, 1); /* keep p >= 0.14 */
    CHECK(ids_are(&c, (const llama_token[]){11, 13, 12}, 3));
    c = from_p(d, P4, 4);
    llama_sample_min_p(NULL, &c, 0.6f, 1); /* keep p >= 0.3 */
    CHECK(ids_are(&c, (const llama_token[]){11}, 1));
    c = from_p(d, P4, 4);
    llama_sample_min_p(NULL, &c, 0.6f, 2);
    CHECK(ids_are(&c, (const llama_token[]){11, 13}, 2));
    c = from_p(d, P4, 4);
    llama_sample_min_p(NULL, &c, 0.0f, 1); /* no-op */
    CHECK(c.size == 4 && !c.sorted);
}

static void test_tail_free(void)
{
    /* p 0.35 0.3 0.2 0.1 0.05: first differences .05 .1 .1 .05, second -.05 0 .05,
     * normalised |second| .5 0 .5, cumulative .5 .5 1 */
    const double p[5] = {0.05, 0.35, 0.1, 0.3, 0.2};
    llama_token_data d[5];
    llama_token_data_array c = from_p(d, p, 5);
    llama_sample_tail_free(NULL, &c, 0.6f, 1); /* first cumulative > 0.6 at i = 2 */
    CHECK(ids_are(&c, (const llama_token[]){11, 13}, 2));
    c = from_p(d, p, 5);
    llama_sample_tail_free(NULL, &c, 0.4f, 1); /* > 0.4 at i = 0, but i >= min_keep first at 1 */
    CHECK(ids_are(&c, (const llama_token[]){11}, 1));
    c = from_p(d, p, 5);
    llama_sample_tail_free(NULL, &c, 0.4f, 0); /* b1892: min_keep 0 can keep nothing */
    CHECK(c.size == 0);
    c = from_p(d, p, 5);
    llama_sample_tail_free(NULL, &c, 1.0f, 1); /* no-op */
    CHECK(c.size == 5 && !c.sorted);
}

static void test_typical(void)
{
    /* H = -sum p ln p = 1.2079700; |-ln p - H|: 0.5 -> .5148, 0.25 -> .1783,
     * 0.15 -> .6891, 0.1 -> 1.0946: order 0.25, 0.5, 0.15, 0.1 */
    llama_token_data d[4];
    llama_token_data_array c = from_p(d, P4, 4);
    llama_sample_typical(NULL, &c, 0.5f, 1); /* cumulative .25, .75 > .5 */
    CHECK(!c.sorted && ids_are(&c, (const llama_token[]){13, 11}, 2));
    c = from_p(d, P4, 4);
    llama_sample_typical(NULL, &c, 0.8f, 1); /* .25 .75 .9 */
    CHECK(ids_are(&c, (const llama_token[]){13, 11, 12}, 3));
    c = from_p(d, P4, 4);
    llama_sample_typical(NULL, &c, 0.1f, 3); /* min_keep 3 */
    CHECK(ids_are(&c, (const llama_token[]){13, 11, 12}, 3));
    c = from_p(d, P4, 4);
    llama_sample_typical(NULL, &c, 1.0f, 1);
    CHECK(c.size == 4 && d[0].id == 10);
}

static void test_temp(void)
{
    llama_token_data d[3] = {{0, 1, 0}, {1, -2, 0}, {2, 4, 0}};
    llama_token_data_array c = {d, 3, false};
    llama_sample_temp(NULL, &c, 2.0f);
    CHECK(d[0].logit == 0.5f && d[1].logit == -1.0f && d[2].logit == 2.0f && c.size == 3 && d[2].id == 2);
    llama_sample_temperature(NULL, &c, 0.25f);
    CHECK(d[0].logit == 2.0f && d[1].logit == -4.0f && d[2].logit == 8.0f);
}

static void test_penalties(void)
{
    llama_token_data d[4] = {{0, 2, 0}, {1, -1, 0}, {2, 0.5f, 0}, {3, 3, 0}};
    llama_token_data_array c = {d, 4, true};
    const llama_token last[3] = {0, 1, 0};
    /* token 0 (twice): 2 / 2 - (2 * 0.1 + 0.5) = 0.3; token 1 (once): -1 * 2 - (0.1 + 0.5) = -2.6 */
    llama_sample_repetition_penalties(NULL, &c, last, 3, 2.0f, 0.1f, 0.5f);
    CHECK(fabsf(d[0].logit - 0.3f) < 1e-6f && fabsf(d[1].logit + 2.6f) < 1e-6f);
    CHECK(d[2].logit == 0.5f && d[3].logit == 3.0f && !c.sorted && c.size == 4);
    /* only the first penalty_last_n entries count: token 0 once, token 1 once */
    llama_token_data e[4] = {{0, 2, 0}, {1, -1, 0}, {2, 0.5f, 0}, {3, 3, 0}};
    c = (llama_token_data_array){e, 4, false};
    llama_sample_repetition_penalties(NULL, &c, last, 2, 2.0f, 0.1f, 0.5f);
    CHECK(fabsf(e[0].logit - 0.4f) < 1e-6f && fabsf(e[1].logit + 2.6f) < 1e-6f);
    /* nothing to do */
    c = (llama_token_data_array){e, 4, true};
    llama_sample_repetition_penalties(NULL, &c, last, 0, 2.0f, 0.1f, 0.5f);
    CHECK(c.sorted && fabsf(e[0].logit - 0.4f) < 1e-6f);
}

static void test_greedy(struct llama_context *ctx)
{
    llama_token_data d[4] = {{0, 0.1f, 0}, {1, 5, 0}, {2, 5, 0}, {3, -1, 0}};
    llama_token_data_array c = {d, 4, false};
    CHECK(llama_sample_token_greedy(ctx, &c) == 1); /* the first of the tied maxima */
    CHECK(c.size == 4 && d[0].id == 0 && d[1].id == 1);
    CHECK(llama_sample_token_greedy(NULL, &c) == 1);
}

/* Zipf weights (i+1)^-5 over 512 candidates: mirostat's s_hat is exactly 5. */
static llama_token_data_array zipf(llama_token_data *d, int n)
{
    for (int i = 0; i < n; i++)
        d[n - 1 - i] = (llama_token_data){i, (float)(-5.0 * log(i + 1.0)), 0};
    return (llama_token_data_array){d, (size_t)n, false};
}

static void test_mirostat(struct llama_context *ctx)
{
    llama_token_data d[512];
    /* mu 0: k = (4 * 2^0 / (1 - 512^-4))^(1/5) = 1.32 -> 1: token 0, p 1, surprise 0 */
    llama_token_data_array c = zipf(d, 512);
    float mu = 0.0f;
    CHECK(llama_sample_token_mirostat(ctx, &c, 5.0f, 0.1f, 100, &mu) == 0);
    CHECK(fabsf(mu - 0.5f) < 1e-5f); /* mu - eta * (0 - tau) */
    CHECK(c.size == 1);
    /* mu 10: k = (4 * 1024)^(1/5) = 5.28 -> 5 tokens, p_X renormalised over them */
    double w[5], sw = 0;
    for (int i = 0; i < 5; i++)
        sw += w[i] = pow(i + 1.0, -5.0);
    for (int rep = 0; rep < 20; rep++) {
        c = zipf(d, 512);
        mu = 10.0f;
        llama_token x = llama_sample_token_mirostat(ctx, &c, 5.0f, 0.1f, 100, &mu);
        CHECK(x >= 0 && x < 5 && c.size == 5);
        if (x >= 0 && x < 5) {
            double want = 10.0 - 0.1 * (-log2(w[x] / sw) - 5.0);
            CHECKF(fabs(mu - want) < 1e-4, "mirostat: token %d, mu %f, want %f", x, mu, want);
        }
    }
    /* 2.0: surprises of 0.5 0.25 0.15 0.1 are 1, 2, 2.74, 3.32 */
    llama_token_data e[4];
    int seen[4] = {0};
    for (int rep = 0; rep < 40; rep++) {
        c = from_p(e, P4, 4);
        mu = 2.5f; /* keeps 0.5 and 0.25 -> 2/3, 1/3 */
        llama_token x = llama_sample_token_mirostat_v2(ctx, &c, 3.0f, 0.2f, &mu);
        CHECK((x == 11 || x == 13) && c.size == 2);
        double px = x == 11 ? 2.0 / 3.0 : 1.0 / 3.0;
        CHECK(fabs(mu - (2.5 - 0.2 * (-log2(px) - 3.0))) < 1e-5);
        seen[x == 11 ? 0 : 1]++;
    }
    CHECK(seen[0] > 0 && seen[1] > 0);
    c = from_p(e, P4, 4);
    mu = 0.5f; /* nothing within mu: the top token is kept alone */
    CHECK(llama_sample_token_mirostat_v2(ctx, &c, 3.0f, 0.2f, &mu) == 11 && c.size == 1);
    CHECK(fabsf(mu - (0.5f + 0.2f * 3.0f)) < 1e-6f);
}

static void draw(struct llama_context *ctx, llama_token *out, int n)
{
    llama_token_data d[4];
    for (int i = 0; i < n; i++) {
        llama_token_data_array c = from_p(d, P4, 4);
        out[i] = llama_sample_token(ctx, &c);
    }
}

static void test_rng(struct llama_model *m, struct llama_context *ctx)
{
    llama_token a[50], b[50], c[50], e[50];
    llama_set_rng_seed(ctx, 1234);
    draw(ctx, a, 50);
    llama_set_rng_seed(ctx, 1234); /* resets */
    draw(ctx, b, 50);
    CHECK(memcmp(a, b, sizeof a) == 0);
    struct llama_context *fresh = api_ctx(m, 16, 16, false); /* seed 1234 at creation */
    draw(fresh, c, 50);
    CHECK(memcmp(a, c, sizeof a) == 0);
    draw(fresh, c, 50); /* continues: another sequence */
    CHECK(memcmp(a, c, sizeof a) != 0);
    llama_free(fresh);
    llama_set_rng_seed(ctx, 99);
    draw(ctx, e, 50);
    CHECK(memcmp(a, e, sizeof a) != 0);
    /* frequencies follow p */
    int count[4] = {0};
    const int N = 4000;
    for (int i = 0; i < N; i++) {
        llama_token t;
        draw(ctx, &t, 1);
        if (t >= 10 && t < 14)
            count[t - 10]++;
    }
    for (int i = 0; i < 4; i++)
        CHECKF(fabs((double)count[i] / N - P4[i]) < 0.03, "token %d drawn %d / %d times, p %.2f", 10 + i, count[i], N,
               P4[i]);
}

static void test_guidance(struct llama_model *m, struct llama_context *ctx)
{
    int nv = llama_n_vocab(m);
    float *l = calloc((size_t)nv, sizeof *l), *g = calloc((size_t)nv, sizeof *g);
    g[1] = (float)log(nv + 1.0); /* sum of exp(g) = 2 nv */
    const float s = 1.5f;
    llama_sample_apply_guidance(ctx, l, g, s);
    /* log-softmax: l' = -ln nv everywhere; g' = g - ln(2 nv) */
    double lp = -log((double)nv), g_other = -log(2.0 * nv), g_one = log(nv + 1.0) - log(2.0 * nv);
    double worst = 0;
    for (int i = 0; i < nv; i++) {
        double gi = i == 1 ? g_one : g_other, want = gi + s * (lp - gi);
        worst = fmax(worst, fabs(l[i] - want));
        worst = fmax(worst, fabs(g[i] - gi)); /* the guidance array is log-softmaxed in place, as b1892 */
    }
    CHECKF(worst < 1e-5, "apply_guidance off by %g", worst);
    free(l);
    free(g);

    /* the deprecated form over two contexts' logits */
    struct llama_context *gctx = api_ctx(m, 32, 32, false);
    llama_token p1[4] = {1, 403, 407, 261}, p2[2] = {1, 346};
    CHECK(llama_decode(ctx, llama_batch_get_one(p1, 4, 0, 0)) == 0);
    CHECK(llama_decode(gctx, llama_batch_get_one(p2, 2, 0, 0)) == 0);
    float *base = malloc((size_t)nv * sizeof *base), *guid = malloc((size_t)nv * sizeof *guid);
    memcpy(base, llama_get_logits(ctx), (size_t)nv * sizeof *base);
    memcpy(guid, llama_get_logits(gctx), (size_t)nv * sizeof *guid);
    llama_token_data_array c = api_candidates(base, nv);
    llama_sample_classifier_free_guidance(ctx, &c, gctx, 2.0f);
    double lb = 0, lg = 0, mb = base[0], mg = guid[0];
    for (int i = 0; i < nv; i++) {
        mb = fmax(mb, base[i]);
        mg = fmax(mg, guid[i]);
    }
    for (int i = 0; i < nv; i++) {
        lb += exp(base[i] - mb);
        lg += exp(guid[i] - mg);
    }
    worst = 0;
    for (int i = 0; i < nv; i++) {
        double b = base[i] - mb - log(lb), gg = guid[i] - mg - log(lg);
        worst = fmax(worst, fabs(c.data[i].logit - (gg + 2.0 * (b - gg))));
    }
    CHECKF(worst < 1e-4 && c.size == (size_t)nv, "classifier_free_guidance off by %g", worst);
    /* a candidates array that is not the whole vocabulary is left alone (b1892 asserts) */
    c.size = 10;
    float before = c.data[0].logit;
    llama_sample_classifier_free_guidance(ctx, &c, gctx, 2.0f);
    CHECK(c.data[0].logit == before);
    free(c.data);
    free(base);
    free(guid);
    llama_free(gctx);
}

int main(void)
{
    api_test_init();
    test_softmax();
    test_top_k();
    test_top_p();
    test_min_p();
    test_tail_free();
    test_typical();
    test_temp();
    test_penalties();
    struct llama_model *m = api_load("models/stories260K.gguf");
    CHECK(m != NULL);
    if (m) {
        struct llama_context *ctx = api_ctx(m, 64, 64, false);
        test_greedy(ctx);
        test_mirostat(ctx);
        test_rng(m, ctx);
        test_guidance(m, ctx);
        struct llama_timings t = llama_get_timings(ctx);
        CHECK(t.n_sample > 100); /* every chooser counts a sample */
        llama_free(ctx);
        llama_free_model(m);
    }
    return lm_test_summary();
}
