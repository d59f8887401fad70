/* test_grammar_limits.c - the grammar engine's cost bounds (docs/hostile-input.md,
 * "Grammars"), through the internal API with a toy vocabulary:
 *
 *  - stack sets are hash sets: 100000 distinct stacks added and found again fast,
 *    empty stacks stored without a NULL pool, copies independent;
 *  - validation is linear: nullable rules found through a chain of 50000 rules
 *    (the fixpoint used to take one pass per rule), left recursion through it
 *    refused; a GBNF text of 40000 rules parses in linear time;
 *  - limits: a start rule past LM_GRAMMAR_MAX_STACKS or the work budget is
 *    LM_ERR_UNSUPPORTED with a message; a token past the stack limit is masked and
 *    LM_ERR_FULL to accept, the grammar unchanged; a sample that runs out of budget
 *    returns LM_ERR_FULL with a conservative mask (every allowed token accepted);
 *  - the mask and accepting agree near the limit, and on an overlong NUL.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lm_test.h"
#include "sampling/grammar.h"
#include "sampling/grammar_impl.h"

static double cpu_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* ---- a toy vocabulary ---------------------------------------------------------------- */

struct toy {
    const char *const *pieces;
    size_t n;
};

static const char *toy_piece(void *user, int32_t token, size_t *len)
{
    const struct toy *t = user;
    if (token < 0 || (size_t)token >= t->n || !t->pieces[token]) {
        *len = 0;
        return NULL;
    }
    *len = strlen(t->pieces[token]);
    return t->pieces[token];
}

/* mask of the allowed tokens; *st receives the sampler's status */
static uint32_t mask_of(const struct lm_grammar *g, const struct lm_grammar_vocab *v, size_t n, lm_status *st)
{
    struct lm_token_data d[32];
    for (size_t i = 0; i < n; i++)
        d[i] = (struct lm_token_data){(int32_t)i, 1.0f, 0.0f};
    struct lm_token_data_array c = {d, n, false};
    *st = lm_grammar_sample(g, &c, v);
    uint32_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (isfinite(d[i].logit))
            m |= 1u << i;
    return m;
}

/* tokens accepted on a copy (EOS: when complete) */
static uint32_t accepted_on_copy(const struct lm_grammar *g, const struct lm_grammar_vocab *v, size_t n)
{
    uint32_t m = 0;
    for (size_t i = 0; i < n; i++) {
        struct lm_grammar *c = NULL;
        CHECK(lm_grammar_copy(g, &c) == LM_OK);
        if (c && lm_grammar_accept_token(c, (int32_t)i, v) == LM_OK)
            m |= 1u << i;
        lm_grammar_free(c);
    }
    return m;
}

static struct lm_grammar *make(const char *gbnf)
{
    struct lm_grammar *g = NULL;
    char err[256] = "";
    CHECKF(lm_grammar_from_gbnf(gbnf, NULL, &g, err, sizeof err) == LM_OK, "%s", err);
    return g;
}

/* ---- stack sets ------------------------------------------------------------------------ */

static void test_stackset(void)
{
    struct lm_stackset s = {0}, c;
    bool added = false;
    uint32_t k = 99;
    CHECK(lm_stackset_add(&s, NULL, 0, &added, &k) == LM_OK && added && k == 0);
    CHECK(s.pool != NULL); /* a set that holds a stack has a pool, even an empty stack */
    size_t len = 7;
    CHECK(lm_stackset_get(&s, 0, &len) == NULL && len == 0);
    CHECK(lm_stackset_add(&s, NULL, 0, &added, &k) == LM_OK && !added && k == 0 && s.n == 1);
    const double t0 = cpu_now();
    uint32_t st[3];
    for (uint32_t i = 0; i < 100000; i++) {
        st[0] = i;
        st[1] = 3 * i;
        st[2] = i % 7;
        if (lm_stackset_add(&s, st, 1 + i % 3, &added, &k) != LM_OK || !added || k != i + 1) {
            CHECKF(0, "stack %u", i);
            break;
        }
    }
    for (uint32_t i = 0; i < 100000; i += 7) {
        st[0] = i;
        st[1] = 3 * i;
        st[2] = i % 7;
        if (lm_stackset_add(&s, st, 1 + i % 3, &added, &k) != LM_OK || added || k != i + 1) {
            CHECKF(0, "stack %u found again", i);
            break;
        }
    }
    const double cpu = cpu_now() - t0;
    CHECKF(cpu < 1.0, "100000 stacks took %.2f s", cpu);
    CHECK(s.n == 100001);
    CHECK(lm_stackset_copy(&c, &s) == LM_OK && c.n == s.n);
    st[0] = 4; /* stack 5: [4, 12] */
    st[1] = 12;
    lm_stackset_clear(&s); /* the copy keeps its stacks */
    CHECK(s.n == 0 && lm_stackset_add(&s, st, 2, &added, &k) == LM_OK && added && k == 0);
    CHECK(lm_stackset_add(&c, st, 2, &added, &k) == LM_OK && !added);
    const uint32_t *p = lm_stackset_get(&c, k, &len);
    CHECK(k == 5 && p && len == 2 && p[0] == 4 && p[1] == 12);
    lm_stackset_free(&s);
    lm_stackset_free(&c);
    lm_stackset_free(&s); /* freeing twice is harmless */
}

/* ---- linear validation and parsing ----------------------------------------------------- */

static char *chain_text(int n, bool left_recursive)
{
    char *t = malloc((size_t)n * 40 + 200);
    size_t o = (size_t)sprintf(t, "root ::= r0\nr0 ::= n1 %s \"x\" | \"y\"\n", left_recursive ? "r0" : "\"z\"");
    /* n_i ::= n_i+1: nullable only once the last one is, found back to front */
    for (int i = 1; i < n; i++)
        o += (size_t)sprintf(t + o, "n%d ::= n%d\n", i, i + 1);
    sprintf(t + o, "n%d ::= \"\" | \"q\"\n", n);
    return t;
}

static void test_linear_validation(void)
{
    char *t = chain_text(50000, true);
    struct lm_grammar *g = NULL;
    char err[256] = "";
    double t0 = cpu_now();
    CHECK(lm_grammar_from_gbnf(t, NULL, &g, err, sizeof err) == LM_ERR_CORRUPT && g == NULL);
    double cpu = cpu_now() - t0;
    CHECKF(strstr(err, "rule r0 is left-recursive") != NULL, "%s", err);
    CHECKF(cpu < 1.0, "parse + validation of 50000 rules took %.2f s", cpu);
    free(t);

    t = chain_text(50000, false);
    t0 = cpu_now();
    g = make(t);
    cpu = cpu_now() - t0;
    CHECKF(cpu < 1.0, "parse + init of 50000 rules took %.2f s", cpu);
    CHECK(g && lm_grammar_accept_bytes(g, "zx", 2) == LM_OK && lm_grammar_is_complete(g));
    lm_grammar_free(g);
    free(t);

    /* 40000 distinct names: the parser's symbol table is hashed */
    t = malloc(40000 * 40);
    size_t o = (size_t)sprintf(t, "root ::= w0\n");
    for (int i = 0; i < 40000; i++)
        o += (size_t)sprintf(t + o, "w%d ::= \"%c\" w%d | \"e\"\n", i, 'a' + i % 26, i + 1);
    sprintf(t + o, "w40000 ::= \"!\"\n");
    struct lm_gbnf *p = NULL;
    t0 = cpu_now();
    CHECK(lm_gbnf_parse(t, &p, err, sizeof err) == LM_OK && p && p->n_rules == 40002);
    cpu = cpu_now() - t0;
    CHECKF(cpu < 1.0, "parsing 40000 rules took %.2f s", cpu);
    lm_gbnf_free(p);
    free(t);
}

/* ---- limits ---------------------------------------------------------------------------- */

static void test_init_limits(void)
{
    char *t = malloc(1 << 20);
    struct lm_grammar *g = NULL;
    char err[256] = "";
    /* 2^15 stacks at the start */
    size_t o = (size_t)sprintf(t, "root ::= s0\n");
    for (int i = 0; i < 15; i++)
        o += (size_t)sprintf(t + o, "s%d ::= s%d \"a\" | s%d \"b\"\n", i, i + 1, i + 1);
    sprintf(t + o, "s15 ::= \"c\"\n");
    CHECK(lm_grammar_from_gbnf(t, NULL, &g, err, sizeof err) == LM_ERR_UNSUPPORTED && !g);
    CHECKF(strstr(err, "more than 16384 stacks") != NULL, "%s", err);
    /* 2^14 is the limit itself: accepted */
    o = (size_t)sprintf(t, "root ::= s0\n");
    for (int i = 0; i < 14; i++)
        o += (size_t)sprintf(t + o, "s%d ::= s%d \"a\" | s%d \"b\"\n", i, i + 1, i + 1);
    sprintf(t + o, "s14 ::= \"c\"\n");
    g = make(t);
    CHECK(g && lm_grammar_n_stacks(g) == LM_GRAMMAR_MAX_STACKS);
    lm_grammar_free(g);
    g = NULL;
    /* 4096 stacks of 3000 positions: past the work budget */
    o = (size_t)sprintf(t, "root ::= r0\n");
    for (int i = 0; i < 3000; i++)
        o += (size_t)sprintf(t + o, "r%d ::= r%d \"x\"\n", i, i + 1);
    o += (size_t)sprintf(t + o, "r3000 ::= s0\n");
    for (int i = 0; i < 12; i++)
        o += (size_t)sprintf(t + o, "s%d ::= s%d \"a\" | s%d \"b\"\n", i, i + 1, i + 1);
    sprintf(t + o, "s12 ::= \"c\"\n");
    const double t0 = cpu_now();
    CHECK(lm_grammar_from_gbnf(t, NULL, &g, err, sizeof err) == LM_ERR_UNSUPPORTED && !g);
    const double cpu = cpu_now() - t0;
    CHECKF(strstr(err, "work units") != NULL, "%s", err);
    CHECKF(cpu < 5.0, "running out of budget took %.2f s", cpu);
    free(t);
}

/* a ::= "x" a "y" | "x" a "z" | "w": 3 * 2^k stacks after k x's */
static const char *const XAYZ_VOCAB[] = {"", "x", "xx", "w", "y", "z", "xw", "xxxw", "wy", NULL};
#define N_XAYZ 9

static void test_stack_limit(void)
{
    struct toy toy = {XAYZ_VOCAB, N_XAYZ};
    struct lm_grammar_vocab v = {toy_piece, &toy, 0};
    struct lm_grammar *g = make("root ::= a\na ::= \"x\" a \"y\" | \"x\" a \"z\" | \"w\"\n");
    if (!g)
        return;
    int kmax = 0;
    while (3L << (kmax + 1) <= LM_GRAMMAR_MAX_STACKS)
        kmax++;
    for (int k = 0; k <= kmax + 1; k++) {
        lm_status st;
        const uint32_t m = mask_of(g, &v, N_XAYZ, &st);
        const uint32_t a = accepted_on_copy(g, &v, N_XAYZ);
        CHECKF(st == LM_OK && m == a, "after %d x: mask %#x, accepted %#x", k, m, a);
        const int k_held = k < kmax ? k : kmax;
        CHECK(!!(m & 1u << 1) == (k_held + 1 <= kmax)); /* "x" */
        CHECK(!!(m & 1u << 2) == (k_held + 2 <= kmax)); /* "xx" */
        CHECK((m & 1u << 3) && !(m & 1u << 0));         /* "w", not EOS */
        const size_t n = lm_grammar_n_stacks(g);
        const lm_status acc = lm_grammar_accept_token(g, 1, &v);
        if (k < kmax) {
            CHECK(acc == LM_OK && lm_grammar_n_stacks(g) == 3u << (k + 1));
        } else {
            CHECK(acc == LM_ERR_FULL && lm_grammar_n_stacks(g) == n); /* unchanged */
        }
    }
    lm_grammar_free(g);
}

/* long stacks under tops with overlapping classes: each class's child set costs
 * the whole budget share, so sampling runs out */
static const char *const BIG_VOCAB[] = {"", "a", "h", "q", "ab", "hq", "!", "qq", "m", NULL};
#define N_BIG 9

static void test_sample_budget(void)
{
    char *t = malloc(1 << 20);
    size_t o = (size_t)sprintf(t, "root ::= r0\n");
    for (int i = 0; i < 400; i++)
        o += (size_t)sprintf(t + o, "r%d ::= r%d \"x\"\n", i, i + 1);
    o += (size_t)sprintf(t + o, "r400 ::= s0\n");
    for (int i = 0; i < 12; i++)
        o += (size_t)sprintf(t + o, "s%d ::= s%d \"a\" | s%d \"b\"\n", i, i + 1, i + 1);
    sprintf(t + o, "s12 ::= [a-m] tail | [h-z] tail\ntail ::= [a-z] tail | \"\"\n");
    struct lm_grammar *g = make(t);
    free(t);
    if (!g)
        return;
    struct toy toy = {BIG_VOCAB, N_BIG};
    struct lm_grammar_vocab v = {toy_piece, &toy, 0};
    lm_status st;
    const double t0 = cpu_now();
    const uint32_t m = mask_of(g, &v, N_BIG, &st);
    const double cpu = cpu_now() - t0;
    CHECKF(st == LM_ERR_FULL, "status %d", (int)st);
    CHECKF(cpu < 5.0, "running out of budget took %.2f s", cpu);
    const uint32_t a = accepted_on_copy(g, &v, N_BIG);
    CHECKF((m & ~a) == 0, "mask %#x allows tokens accept refuses (%#x)", m, a); /* conservative */
    CHECK(!(m & 1u << 6) && !(m & 1u << 0)); /* "!" never fits here; EOS not yet */
    lm_grammar_free(g);
}

/* "\xc0\x80" decodes to code point 0, which ends a piece when sampling; accepting
 * now stops there too, so what the mask allows is accepted */
static const char *const NUL_VOCAB[] = {"", "a", "\xc0\x80", ("a\xc0\x80" "b"), "b", NULL};

static void test_overlong_nul(void)
{
    struct toy toy = {NUL_VOCAB, 5};
    struct lm_grammar_vocab v = {toy_piece, &toy, 0};
    struct lm_grammar *g = make("root ::= \"a\" [^a]*\n");
    if (!g)
        return;
    CHECK(lm_grammar_accept_token(g, 1, &v) == LM_OK);
    lm_status st;
    const uint32_t m = mask_of(g, &v, 5, &st);
    CHECKF(st == LM_OK && m == ((1u << 0) | (1u << 2) | (1u << 4)), "mask %#x", m);
    CHECK(accepted_on_copy(g, &v, 5) == m);
    lm_grammar_free(g);
}

int main(void)
{
    test_stackset();
    test_linear_validation();
    test_init_limits();
    test_stack_limit();
    test_sample_budget();
    test_overlong_nul();
    return lm_test_summary();
}
