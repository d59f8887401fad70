/* test_samplers.c - every llama_sample_* transform and token choice on small arrays
 * whose expected results are worked out by hand in the comments.
 *
 * Most cases use the distribution P = {0.5, 0.25, 0.15, 0.1} (logits ln p, so
 * softmax gives P back), with ids 10, 11, 12, 13 stored in scrambled order.
 */
#include <math.h>
#include <string.h>

#include "lm_test.h"
#include "sampling/sampling.h"

#define NEAR(a, b, tol) (fabs((double)(a) - (double)(b)) <= (tol))

/* ids 12, 10, 13, 11 with p 0.15, 0.5, 0.1, 0.25: unsorted on purpose */
static void fill_p4(struct lm_token_data *d, struct lm_token_data_array *c)
{
    const int32_t ids[4] = {12, 10, 13, 11};
    const float ps[4] = {0.15f, 0.5f, 0.1f, 0.25f};
    for (int i = 0; i < 4; i++)
        d[i] = (struct lm_token_data){ids[i], logf(ps[i]), 0.0f};
    *c = (struct lm_token_data_array){d, 4, false};
}

static bool ids_are(const struct lm_token_data_array *c, const int32_t *ids, size_t n)
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
    /* logits 1, 2, 3 -> sorted 3, 2, 1; p = e^0, e^-1, e^-2 over 1.503214724 */
    struct lm_token_data d[3] = {{0, 1.0f, 0}, {1, 2.0f, 0}, {2, 3.0f, 0}};
    struct lm_token_data_array c = {d, 3, false};
    lm_sample_softmax(&c);
    const int32_t order[3] = {2, 1, 0};
    CHECK(c.sorted && ids_are(&c, order, 3) && c.data == d);
    CHECK(NEAR(d[0].p, 0.665240956, 1e-6) && NEAR(d[1].p, 0.244728471, 1e-6) && NEAR(d[2].p, 0.090030573, 1e-6));
    /* an already sorted array is not re-sorted, only p is recomputed */
    d[0].logit = 0.0f;
    lm_sample_softmax(&c);
    /* order kept (ids 2, 1, 0 with logits 0, 2, 1) and, as in b1892, the first
     * logit is taken as the maximum: p = e^0, e^2, e^1 over their sum */
    CHECK(d[0].id == 2 && NEAR(d[0].p, 1.0 / (1.0 + exp(2.0) + exp(1.0)), 1e-6));
    CHECK(NEAR(d[1].p, exp(2.0) / (1.0 + exp(2.0) + exp(1.0)), 1e-6));
    struct lm_token_data_array e = {d, 0, false};
    lm_sample_softmax(&e);
    CHECK(e.size == 0 && !e.sorted);
}

static void test_top_k(void)
{
    struct lm_token_data d[4];
    struct lm_token_data_array c;
    const int32_t desc[4] = {10, 11, 12, 13};
    fill_p4(d, &c);
    lm_sample_top_k(&c, 2, 1);
    CHECK(c.sorted && ids_are(&c, desc, 2));
    fill_p4(d, &c);
    lm_sample_top_k(&c, 0, 1); /* k <= 0: no truncation, but sorted */
    CHECK(c.sorted && ids_are(&c, desc, 4));
    fill_p4(d, &c);
    lm_sample_top_k(&c, -3, 1);
    CHECK(ids_are(&c, desc, 4));
    fill_p4(d, &c);
    lm_sample_top_k(&c, 10, 1); /* clamped to size */
    CHECK(ids_are(&c, desc, 4));
    fill_p4(d, &c);
    lm_sample_top_k(&c, 1, 3); /* min_keep wins */
    CHECK(ids_are(&c, desc, 3));
    c.size = 0;
    lm_sample_top_k(&c, 5, 1);
    CHECK(c.size == 0);
}

static void test_top_p(void)
{
    struct lm_token_data d[4];
    struct lm_token_data_array c;
    const int32_t desc[4] = {10, 11, 12, 13};
    /* cumulative 0.5, 0.75, 0.9, 1.0 */
    fill_p4(d, &c);
    lm_sample_top_p(&c, 0.7f, 1);
    CHECK(ids_are(&c, desc, 2) && c.sorted);
    fill_p4(d, &c);
    lm_sample_top_p(&c, 0.8f, 1);
    CHECK(ids_are(&c, desc, 3));
    fill_p4(d, &c);
    lm_sample_top_p(&c, 0.1f, 1);
    CHECK(ids_are(&c, desc, 1));
    fill_p4(d, &c);
    lm_sample_top_p(&c, 0.1f, 3);
    CHECK(ids_are(&c, desc, 3));
    fill_p4(d, &c);
    lm_sample_top_p(&c, 1.0f, 1); /* no-op: not even sorted */
    CHECK(c.size == 4 && !c.sorted && d[0].id == 12);
}

static void test_min_p(void)
{
    struct lm_token_data d[4];
    struct lm_token_data_array c;
    const int32_t desc[4] = {10, 11, 12, 13};
    /* threshold p * 0.5: 0.35 -> 0.175 keeps 0.5, 0.25; 0.25 -> 0.125 keeps three */
    fill_p4(d, &c);
    lm_sample_min_p(&c, 0.35f, 1);
    CHECK(ids_are(&c, desc, 2));
    fill_p4(d, &c);
    lm_sample_min_p(&c, 0.25f, 1);
    CHECK(ids_are(&c, desc, 3));
    fill_p4(d, &c);
    lm_sample_min_p(&c, 0.9f, 3);
    CHECK(ids_are(&c, desc, 3));
    fill_p4(d, &c);
    lm_sample_min_p(&c, 0.0f, 1);
    CHECK(c.size == 4 && !c.sorted);
}

static void test_tail_free(void)
{
    /* p = 0.4, 0.3, 0.2, 0.06, 0.04: first differences 0.1, 0.1, 0.14, 0.02;
     * |second differences| 0, 0.04, 0.12 -> normalised 0, 0.25, 0.75; cumulative
     * 0, 0.25, 1.0. The first index whose cumulative sum exceeds z (and is >=
     * min_keep) is the number of tokens kept. */
    const float ps[5] = {0.06f, 0.4f, 0.04f, 0.2f, 0.3f};
    const int32_t desc[5] = {1, 4, 3, 0, 2};
    struct lm_token_data d[5];
    const float zs[4] = {0.2f, 0.3f, 0.99f, 0.1f};
    const size_t keeps[4] = {1, 1, 1, 0};
    const size_t want[4] = {1, 2, 2, 1};
    for (int t = 0; t < 4; t++) {
        for (int i = 0; i < 5; i++)
            d[i] = (struct lm_token_data){i, logf(ps[i]), 0};
        struct lm_token_data_array c = {d, 5, false};
        lm_sample_tail_free(&c, zs[t], keeps[t]);
        CHECKF(ids_are(&c, desc, want[t]), "z %g: size %zu", zs[t], c.size);
    }
    /* min_keep 0 and z below the first step: b1892 keeps nothing at all */
    for (int i = 0; i < 5; i++)
        d[i] = (struct lm_token_data){i, logf(ps[i]), 0};
    struct lm_token_data_array c = {d, 5, false};
    lm_sample_tail_free(&c, -1.0f, 0);
    CHECK(c.size == 0);
    c = (struct lm_token_data_array){d, 2, false};
    lm_sample_tail_free(&c, 0.1f, 1); /* size <= 2: no-op */
    CHECK(c.size == 2 && !c.sorted);
}

static void test_typical(void)
{
    /* H = -sum p ln p = 1.207974; |-ln p - H| = 0.5148 (0.5), 0.1783 (0.25),
     * 0.6891 (0.15), 1.0946 (0.1): order 11, 10, 12, 13 with cumulative p 0.25,
     * 0.75, 0.9, 1.0; kept up to the first cumulative sum above p. */
    struct lm_token_data d[4];
    struct lm_token_data_array c;
    const int32_t typ[4] = {11, 10, 12, 13};
    fill_p4(d, &c);
    CHECK(lm_sample_typical(&c, 0.5f, 1) == LM_OK);
    CHECK(ids_are(&c, typ, 2) && !c.sorted);
    fill_p4(d, &c);
    CHECK(lm_sample_typical(&c, 0.8f, 1) == LM_OK);
    CHECK(ids_are(&c, typ, 3));
    fill_p4(d, &c);
    CHECK(lm_sample_typical(&c, 0.1f, 3) == LM_OK);
    CHECK(ids_are(&c, typ, 3));
    fill_p4(d, &c);
    CHECK(lm_sample_typical(&c, 0.1f, 0) == LM_OK); /* min_keep - 1 wraps: keeps all */
    CHECK(ids_are(&c, typ, 4));
    fill_p4(d, &c);
    CHECK(lm_sample_typical(&c, 1.0f, 1) == LM_OK);
    CHECK(c.size == 4 && d[0].id == 12);
    c.size = 0;
    CHECK(lm_sample_typical(&c, 0.5f, 1) == LM_OK && c.size == 0);
}

static void test_temp(void)
{
    struct lm_token_data d[3] = {{0, 1.0f, 0}, {1, -2.0f, 0}, {2, 0.5f, 0}};
    struct lm_token_data_array c = {d, 3, false};
    lm_sample_temp(&c, 0.5f);
    CHECK(d[0].logit == 2.0f && d[1].logit == -4.0f && d[2].logit == 1.0f && !c.sorted);
    /* t = 0 divides by zero as b1892 does */
    d[2].logit = 0.0f;
    lm_sample_temp(&c, 0.0f);
    CHECK(isinf(d[0].logit) && d[0].logit > 0 && isinf(d[1].logit) && d[1].logit < 0 && isnan(d[2].logit));
    /* and the random draw over such an array stays in bounds */
    struct lm_rng r;
    lm_rng_seed(&r, 3);
    int32_t tok = -1;
    CHECK(lm_sample_token(&c, &r, &tok) == LM_OK && tok >= 0 && tok <= 2);
}

static void test_entropy(void)
{
    /* uniform: H = H_max, so T = max_temp and p stays 1/4 */
    struct lm_token_data u[4] = {{0, 0, 0}, {1, 0, 0}, {2, 0, 0}, {3, 0, 0}};
    struct lm_token_data_array cu = {u, 4, false};
    lm_sample_entropy(&cu, 0.5f, 1.5f, 1.0f);
    CHECK(NEAR(u[0].p, 0.25, 1e-7) && NEAR(u[3].p, 0.25, 1e-7) && u[0].logit == 0.0f);

    /* P: H = 1.207974, H_max = ln 4 = 1.386294, T = 0.5 + 1.0 * 0.871370 = 1.371370;
     * p_i becomes P_i^(1/T) normalised */
    struct lm_token_data d[4];
    struct lm_token_data_array c;
    fill_p4(d, &c);
    lm_sample_entropy(&c, 0.5f, 1.5f, 1.0f);
    const double P[4] = {0.5, 0.25, 0.15, 0.1};
    double T = 0.5 + (1.207974 / log(4.0)), z = 0;
    for (int i = 0; i < 4; i++)
        z += pow(P[i], 1 / T);
    CHECK(c.sorted && d[0].id == 10);
    for (int i = 0; i < 4; i++)
        CHECKF(NEAR(d[i].p, pow(P[i], 1 / T) / z, 1e-5), "p[%d] = %g", i, d[i].p);
    CHECK(NEAR(d[0].logit, log(0.5) / T, 1e-5));
    struct lm_token_data one = {5, 2.0f, 0};
    struct lm_token_data_array c1 = {&one, 1, false};
    lm_sample_entropy(&c1, 0.5f, 1.5f, 1.0f);
    CHECK(one.logit == 2.0f);
}

static void test_penalties(void)
{
    /* last = {0, 1, 1, 3, 7}; repeat 2, freq 0.1, present 0.5:
     * id 0 (x1):  2 / 2 - (0.1 + 0.5)   =  0.4
     * id 1 (x2): -1 * 2 - (0.2 + 0.5)   = -2.7
     * id 3 (x1):  3 / 2 - 0.6           =  0.9
     * ids 2 and 4 are not in last and keep 0.5, -0.5 */
    struct lm_token_data d[5] = {{0, 2, 0}, {1, -1, 0}, {2, 0.5f, 0}, {3, 3, 0}, {4, -0.5f, 0}};
    struct lm_token_data_array c = {d, 5, true};
    const int32_t last[5] = {0, 1, 1, 3, 7};
    CHECK(lm_sample_repetition_penalties(&c, last, 5, 2.0f, 0.1f, 0.5f) == LM_OK);
    CHECK(NEAR(d[0].logit, 0.4, 1e-6) && NEAR(d[1].logit, -2.7, 1e-6) && d[2].logit == 0.5f);
    CHECK(NEAR(d[3].logit, 0.9, 1e-6) && d[4].logit == -0.5f && !c.sorted && c.size == 5);
    /* no-ops: n == 0, or neutral penalties (sorted flag untouched) */
    c.sorted = true;
    CHECK(lm_sample_repetition_penalties(&c, last, 0, 2.0f, 0.1f, 0.5f) == LM_OK && c.sorted);
    CHECK(lm_sample_repetition_penalties(&c, last, 5, 1.0f, 0.0f, 0.0f) == LM_OK && c.sorted);
    CHECK(NEAR(d[0].logit, 0.4, 1e-6));
    /* only the first n tokens of last count */
    struct lm_token_data e[1] = {{7, 1.0f, 0}};
    struct lm_token_data_array ce = {e, 1, false};
    CHECK(lm_sample_repetition_penalties(&ce, last, 4, 2.0f, 0.0f, 0.0f) == LM_OK && e[0].logit == 1.0f);
    CHECK(lm_sample_repetition_penalties(&ce, last, 5, 2.0f, 0.0f, 0.0f) == LM_OK && e[0].logit == 0.5f);
}

static void test_guidance(void)
{
    /* log_softmax(1, 2, 3) = (1, 2, 3) - 3.407606 ; guidance (3, 2, 1) the reverse.
     * scale 2: 2l - g = (-4.407606, -1.407606, 1.592394) */
    float l[3] = {1, 2, 3}, g[3] = {3, 2, 1};
    lm_sample_apply_guidance(l, g, 3, 2.0f);
    CHECK(NEAR(l[0], -4.407606, 1e-5) && NEAR(l[1], -1.407606, 1e-5) && NEAR(l[2], 1.592394, 1e-5));
    CHECK(NEAR(g[0], -0.407606, 1e-5) && NEAR(g[2], -2.407606, 1e-5));
    float l1[3] = {1, 2, 3}, g1[3] = {3, 2, 1};
    lm_sample_apply_guidance(l1, g1, 3, 1.0f); /* scale 1: plain log_softmax(l) */
    CHECK(NEAR(l1[0], -2.407606, 1e-5) && NEAR(l1[2], -0.407606, 1e-5));

    /* the candidates form gives the same numbers */
    struct lm_token_data d[3] = {{0, 1, 0}, {1, 2, 0}, {2, 3, 0}};
    struct lm_token_data_array c = {d, 3, false};
    float gg[3] = {3, 2, 1};
    CHECK(lm_sample_cfg(&c, gg, 3, 2.0f) == LM_OK);
    CHECK(NEAR(d[0].logit, -4.407606, 1e-5) && NEAR(d[2].logit, 1.592394, 1e-5) && d[2].id == 2);
    CHECK(NEAR(gg[0], -0.407606, 1e-5)); /* guidance logits are log-softmaxed in place */
    c.sorted = true;
    CHECK(lm_sample_cfg(&c, gg, 3, 2.0f) == LM_ERR_INVALID_ARG);
    c.sorted = false;
    CHECK(lm_sample_cfg(&c, gg, 4, 2.0f) == LM_ERR_INVALID_ARG);
}

static void test_greedy(void)
{
    struct lm_token_data d[4] = {{7, 1, 0}, {8, 5, 0}, {9, 5, 0}, {6, 2, 0}};
    struct lm_token_data_array c = {d, 4, false};
    int32_t tok = -1;
    CHECK(lm_sample_greedy(&c, &tok) == LM_OK && tok == 8); /* first of the tied maxima */
    CHECK(!c.sorted && d[0].id == 7);
    c.size = 0;
    CHECK(lm_sample_greedy(&c, &tok) == LM_ERR_INVALID_ARG);
}

static void test_sample_frequencies(void)
{
    struct lm_token_data d[4];
    struct lm_token_data_array c;
    fill_p4(d, &c);
    struct lm_rng r;
    lm_rng_seed(&r, 12345);
    int hist[4] = {0};
    const int n = 40000;
    int errors = 0;
    for (int i = 0; i < n; i++) {
        int32_t tok = -1;
        errors += lm_sample_token(&c, &r, &tok) != LM_OK;
        if (tok >= 10 && tok <= 13)
            hist[tok - 10]++;
    }
    CHECK(errors == 0 && hist[0] + hist[1] + hist[2] + hist[3] == n);
    const double P[4] = {0.5, 0.25, 0.15, 0.1};
    for (int i = 0; i < 4; i++)
        CHECKF(NEAR(hist[i] / (double)n, P[i], 0.01), "id %d: %d", 10 + i, hist[i]);
    /* one candidate: no RNG output is consumed (std::discrete_distribution) */
    struct lm_rng before = r;
    c.size = 1;
    int32_t tok = -1;
    CHECK(lm_sample_token(&c, &r, &tok) == LM_OK && tok == 10 && !memcmp(&before, &r, sizeof r));
    c.size = 0;
    CHECK(lm_sample_token(&c, &r, &tok) == LM_ERR_INVALID_ARG);
}

/* the token the draw over the first n sorted candidates of c picks, from a copy */
static int32_t predict(const struct lm_token_data_array *c, const struct lm_rng *r)
{
    struct lm_rng copy = *r;
    float p[8];
    for (size_t i = 0; i < c->size; i++)
        p[i] = c->data[i].p;
    size_t idx = 0;
    lm_rng_discrete(&copy, p, c->size, &idx);
    return c->data[idx].id;
}

static void test_mirostat_v2(void)
{
    /* surprises -log2 P = 1, 2, 2.74, 3.32. mu 2.5 keeps two tokens, renormalised to
     * 2/3 and 1/3 (surprise 0.585 or 1.585); tau 2, eta 0.1: mu' = mu - 0.1 (s - 2) */
    struct lm_token_data d[4];
    struct lm_token_data_array c;
    fill_p4(d, &c);
    struct lm_rng r;
    lm_rng_seed(&r, 77);
    struct lm_token_data e[2] = {{10, logf(0.5f), 2.0f / 3}, {11, logf(0.25f), 1.0f / 3}};
    struct lm_token_data_array ce = {e, 2, true};
    const int32_t want = predict(&ce, &r);
    float mu = 2.5f;
    int32_t tok = -1;
    CHECK(lm_sample_mirostat_v2(&c, &r, 2.0f, 0.1f, &mu, &tok) == LM_OK);
    CHECK(tok == want && c.size == 2 && NEAR(d[0].p, 2.0 / 3, 1e-6));
    const double s = tok == 10 ? log2(1.5) : log2(3.0);
    CHECKF(NEAR(mu, 2.5 - 0.1 * (s - 2.0), 1e-5), "mu %g tok %d", mu, tok);

    /* mu below every surprise keeps the top token: s = 0, mu' = 0 - 0.1 (0 - 2) */
    fill_p4(d, &c);
    mu = 0.0f;
    struct lm_rng before = r;
    CHECK(lm_sample_mirostat_v2(&c, &r, 2.0f, 0.1f, &mu, &tok) == LM_OK);
    CHECK(tok == 10 && c.size == 1 && NEAR(mu, 0.2, 1e-6) && !memcmp(&before, &r, sizeof r));
}

static void test_mirostat_v1(void)
{
    /* P with m = 100, N = 4: t_i = ln 2, ln 1.5, ln 4/3; b_i = ln 2, ln 5/3, ln 1.5;
     * s_hat = 0.804221 / 0.727616 = 1.105281, eps = 0.105281, 1 - 4^-eps = 0.135799.
     * k = (eps 2^mu / 0.135799)^(1/s_hat): mu 1 -> 1.487 (one token), mu 2 -> 2.784
     * (two tokens, renormalised 2/3, 1/3), mu 3 -> 5.21 (all four). */
    struct lm_token_data d[4];
    struct lm_token_data_array c;
    struct lm_rng r;
    lm_rng_seed(&r, 5);
    float mu = 1.0f;
    int32_t tok = -1;
    fill_p4(d, &c);
    CHECK(lm_sample_mirostat(&c, &r, 1.5f, 0.1f, 100, 4, &mu, &tok) == LM_OK);
    CHECK(tok == 10 && c.size == 1 && NEAR(mu, 1.15, 1e-6)); /* s = 0: mu' = 1 + 0.1 * 1.5 */

    fill_p4(d, &c);
    mu = 2.0f;
    struct lm_token_data e[2] = {{10, logf(0.5f), 2.0f / 3}, {11, logf(0.25f), 1.0f / 3}};
    struct lm_token_data_array ce = {e, 2, true};
    const int32_t want = predict(&ce, &r);
    CHECK(lm_sample_mirostat(&c, &r, 1.5f, 0.1f, 100, 4, &mu, &tok) == LM_OK);
    const double s = tok == 10 ? log2(1.5) : log2(3.0);
    CHECK(tok == want && c.size == 2 && NEAR(mu, 2.0 - 0.1 * (s - 1.5), 1e-5));

    fill_p4(d, &c);
    mu = 3.0f;
    CHECK(lm_sample_mirostat(&c, &r, 1.5f, 0.1f, 100, 4, &mu, &tok) == LM_OK && c.size == 4);
    /* m = 2 uses only the first ratio: s_hat = ln 2 / ln 2 = 1, eps = 0 and k = 0/0:
     * NaN becomes INT_MIN, clamped to one token, as on x86 */
    fill_p4(d, &c);
    mu = 3.0f;
    CHECK(lm_sample_mirostat(&c, &r, 1.5f, 0.1f, 2, 4, &mu, &tok) == LM_OK);
    CHECK(c.size == 1 && tok == 10);
    c.size = 0;
    CHECK(lm_sample_mirostat(&c, &r, 1.5f, 0.1f, 100, 4, &mu, &tok) == LM_ERR_INVALID_ARG);
}

int main(void)
{
    test_softmax();
    test_top_k();
    test_top_p();
    test_min_p();
    test_tail_free();
    test_typical();
    test_temp();
    test_entropy();
    test_penalties();
    test_guidance();
    test_greedy();
    test_sample_frequencies();
    test_mirostat_v2();
    test_mirostat_v1();
    return lm_test_summary();
}
