/* fuzz_grammar.c - fuzz target for GBNF grammars: parse, build, mask, accept.
 *
 * Input: GBNF text, a NUL byte, then actions. The text is parsed (lm_gbnf_parse),
 * built from its last rule (lm_grammar_init_named) and from `root`
 * (lm_grammar_from_gbnf; llama_grammar_init is a cast over the same call). Each
 * action byte then drives the engine over a toy vocabulary (EOS, the 255 single
 * bytes, and multi-byte pieces: words, JSON punctuation, UTF-8 sequences whole and
 * cut, an embedded and an overlong NUL):
 *   0xFF      mask check: lm_grammar_sample over the whole vocabulary (at most
 *             MAX_CHECKS per input), then its promises;
 *   0xFE k    accept multi-byte piece k;
 *   0x00      accept EOS;
 *   other b   accept the single byte b.
 * Without actions: one mask check, then the grammar's own text fed to it.
 *
 * Promises (a broken one calls abort()):
 *  - errors come with a message and one of the documented codes;
 *  - a built grammar has 1..LM_GRAMMAR_MAX_STACKS stacks, after every call;
 *  - sampling changes only logits, to -INFINITY; EOS is allowed exactly when
 *    the grammar is complete; the batched and one-by-one checks agree;
 *  - a token the mask allows is accepted (on a copy); a token the mask refuses
 *    whose text ends on a complete code point and holds no NUL is refused;
 *  - a refused accept leaves the grammar unchanged (stacks, partial UTF-8).
 * Every call is bounded by the engine's work budget, so no input runs long.
 * Built by fuzz/CMakeLists.txt as a libFuzzer binary (clang) and with the shared
 * replay_main.c, which replays corpus/grammar as ctest case fuzz/grammar_replay.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "sampling/grammar_impl.h"

#define MAX_CHECKS 6
#define MAX_ACTIONS 64
#define MAX_FUZZ_STACKS 256 /* past this, one sample and stop: every check copies the stacks */

#define REQUIRE(c)                                                                                                \
    do {                                                                                                          \
        if (!(c)) {                                                                                               \
            fprintf(stderr, "fuzz_grammar: %s:%d: broken promise: %s\n", __FILE__, __LINE__, #c);                  \
            abort();                                                                                              \
        }                                                                                                         \
    } while (0)

struct text {
    const char *s;
    size_t len;
};
#define T(s) {s, sizeof s - 1}
static const struct text MULTI[] = {
    T("  "),   T("ab"),       T("xx"),       T("xxx"),       T("{\""),   T("\":"),     T("\","),
    T("true"), T("false"),    T("null"),     T("123"),       T("-1.5e3"), T("\\n"),   T("\\\""),
    T("}, "),  T("]"),        T("hello"),    T(" world"),    T("z"),      T("\n\n"),   T("aaaaaaaaaaaaaaaa"),
    T("                "),   /* runs: deep batching */
    T("\xc3\xa9"), T("\xc3"), T("\xa9"),                      /* e acute, cut */
    T("\xe6\x97\xa5\xe6\x9c\xac"), T("\xe6\x97"),               /* CJK, cut */
    T("\xf0\x9f\x98\x80"), T("\xf0\x9f"), T("\xff\xfe"),          /* emoji, cut; invalid */
    T("a\0b"), T("\xc0\x80"), T("\xc0\x80x"), T("\xed\xa0\x80"),   /* NUL inside, overlong NUL, surrogate */
};
#undef T
#define N_MULTI (sizeof MULTI / sizeof *MULTI)
#define N_VOCAB (256 + N_MULTI) /* 0: EOS, 1..255: single bytes, then MULTI */

static char BYTE[256];

static const char *piece(void *user, int32_t token, size_t *len)
{
    (void)user;
    if (token <= 0 || token >= (int32_t)N_VOCAB) {
        *len = 0;
        return "";
    }
    if (token < 256) {
        *len = 1;
        return &BYTE[token];
    }
    *len = MULTI[token - 256].len;
    return MULTI[token - 256].s;
}

static const struct lm_grammar_vocab VOCAB = {piece, NULL, 0};

static void quiet(enum lm_log_level level, const char *text, void *user) { (void)level, (void)text, (void)user; }

static void require_sane(const struct lm_grammar *g)
{
    const size_t n = lm_grammar_n_stacks(g);
    REQUIRE(n >= 1 && n <= LM_GRAMMAR_MAX_STACKS);
}

/* the mask over the whole vocabulary; returns the sampler's status */
static lm_status sample(const struct lm_grammar *g, bool *allowed, size_t depth)
{
    struct lm_token_data d[N_VOCAB];
    for (size_t i = 0; i < N_VOCAB; i++)
        d[i] = (struct lm_token_data){(int32_t)i, 0.0f, 0.0f};
    struct lm_token_data_array c = {d, N_VOCAB, false};
    const lm_status st = lm_grammar_sample_depth(g, &c, &VOCAB, depth);
    REQUIRE(st == LM_OK || st == LM_ERR_FULL);
    REQUIRE(c.data == d && c.size == N_VOCAB && !c.sorted);
    for (size_t i = 0; i < N_VOCAB; i++) {
        REQUIRE(d[i].id == (int32_t)i && d[i].p == 0.0f);
        REQUIRE(d[i].logit == 0.0f || (isinf(d[i].logit) && d[i].logit < 0));
        allowed[i] = d[i].logit == 0.0f;
    }
    return st;
}

/* does the token's text, read after the grammar's pending bytes, end on a complete
 * code point with no NUL among them? (then the mask is exact both ways) */
static bool exact(const struct lm_grammar *g, int32_t token)
{
    size_t len;
    const char *s = piece(NULL, token, &len);
    uint32_t cps[32];
    struct lm_partial_utf8 end;
    const size_t n = lm_grammar_decode_utf8(s, len, g->partial, cps, &end);
    for (size_t i = 0; i < len; i++)
        if (s[i] == 0)
            return false;
    for (size_t i = 0; i < n; i++)
        if (cps[i] == 0)
            return false;
    return end.n_remain == 0;
}

/* accept token t on a copy of g and check it against the mask */
static void check_token(const struct lm_grammar *g, int32_t t, bool allowed, lm_status mask_st)
{
    struct lm_grammar *c = NULL;
    REQUIRE(lm_grammar_copy(g, &c) == LM_OK);
    const lm_status a = lm_grammar_accept_token(c, t, &VOCAB);
    REQUIRE(a == LM_OK || a == LM_ERR_INVALID_ARG || a == LM_ERR_FULL);
    if (allowed)
        REQUIRE(a == LM_OK);
    else if (mask_st == LM_OK && exact(g, t))
        REQUIRE(a != LM_OK);
    require_sane(c);
    lm_grammar_free(c);
}

static void check_mask(const struct lm_grammar *g)
{
    bool allowed[N_VOCAB], one_by_one[N_VOCAB];
    const lm_status st = sample(g, allowed, SIZE_MAX / 2);
    REQUIRE(allowed[0] == lm_grammar_is_complete(g)); /* EOS */
    /* every token against an accept on a copy; with many stacks (each copy costs
     * them all) the allowed ones and a few refused ones, so no input runs long */
    const int limit = lm_grammar_n_stacks(g) > 64 ? 12 : (int)N_VOCAB;
    int n_allowed = 0, n_refused = 0;
    for (int32_t t = 1; t < (int32_t)N_VOCAB; t++) {
        int *n = allowed[t] ? &n_allowed : &n_refused;
        if ((*n)++ < limit)
            check_token(g, t, allowed[t], st);
    }
    if (st == LM_OK && sample(g, one_by_one, 0) == LM_OK)
        REQUIRE(!memcmp(allowed, one_by_one, sizeof allowed));
}

/* accept a token; a refusal must leave the grammar as it was */
static void accept(struct lm_grammar *g, int32_t token)
{
    struct lm_grammar *before = NULL;
    REQUIRE(lm_grammar_copy(g, &before) == LM_OK);
    const lm_status st = lm_grammar_accept_token(g, token, &VOCAB);
    REQUIRE(st == LM_OK || st == LM_ERR_INVALID_ARG || st == LM_ERR_FULL);
    require_sane(g);
    if (st != LM_OK) {
        REQUIRE(lm_grammar_n_stacks(g) == lm_grammar_n_stacks(before));
        REQUIRE(g->partial.value == before->partial.value && g->partial.n_remain == before->partial.n_remain);
        REQUIRE(lm_grammar_is_complete(g) == lm_grammar_is_complete(before));
    }
    lm_grammar_free(before);
}

/* the rules built from another start rule (the last one, often a generated group):
 * refused or sane, and a copy independent of the parsed arrays */
static void check_other_start(const struct lm_gbnf *p)
{
    struct lm_grammar *g = NULL;
    char err[256] = "";
    const lm_status st = lm_grammar_init_named((const struct lm_grammar_element *const *)p->rules, p->n_rules,
                                               p->n_rules - 1, (const char *const *)p->names, &g, err, sizeof err);
    REQUIRE(st == LM_OK ? g != NULL : ((st == LM_ERR_CORRUPT || st == LM_ERR_UNSUPPORTED) && err[0] && !g));
    if (g)
        require_sane(g);
    lm_grammar_free(g);
}

static void run_actions(struct lm_grammar *g, const uint8_t *act, size_t n)
{
    int checks = 0;
    for (size_t i = 0; i < n && i < MAX_ACTIONS && lm_grammar_n_stacks(g) <= MAX_FUZZ_STACKS; i++) {
        if (act[i] == 0xFF) {
            if (checks++ < MAX_CHECKS)
                check_mask(g);
        } else if (act[i] == 0xFE && i + 1 < n) {
            accept(g, (int32_t)(256 + act[++i] % N_MULTI));
        } else {
            accept(g, act[i]); /* 0 is EOS */
        }
    }
}

/* a grammar with many stacks (an ambiguous one): sample once, keep the inputs fast */
static void sample_only(const struct lm_grammar *g)
{
    bool allowed[N_VOCAB];
    sample(g, allowed, SIZE_MAX / 2);
    REQUIRE(allowed[0] == lm_grammar_is_complete(g));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int once;
    if (!once) {
        lm_log_set(quiet, NULL);
        for (int i = 0; i < 256; i++)
            BYTE[i] = (char)i;
        once = 1;
    }
    const uint8_t *nul = memchr(data, 0, size);
    const size_t text_len = nul ? (size_t)(nul - data) : size;
    char *text = malloc(text_len + 1);
    if (!text)
        return 0;
    memcpy(text, data, text_len);
    text[text_len] = 0;

    struct lm_gbnf *p = NULL;
    char err[256] = "";
    lm_status st = lm_gbnf_parse(text, &p, err, sizeof err);
    REQUIRE(st == LM_OK ? p != NULL : (st == LM_ERR_CORRUPT && err[0]));
    if (st == LM_OK)
        check_other_start(p);
    lm_gbnf_free(p);

    struct lm_grammar *g = NULL;
    err[0] = 0;
    st = lm_grammar_from_gbnf(text, NULL, &g, err, sizeof err);
    REQUIRE(st == LM_OK ? g != NULL
                        : ((st == LM_ERR_CORRUPT || st == LM_ERR_NOT_FOUND || st == LM_ERR_UNSUPPORTED) && err[0]));
    if (g) {
        require_sane(g);
        const uint8_t *act = nul ? nul + 1 : data + size;
        const size_t n_act = nul ? size - text_len - 1 : 0;
        if (lm_grammar_n_stacks(g) > MAX_FUZZ_STACKS) {
            sample_only(g);
        } else if (n_act > 0) {
            run_actions(g, act, n_act);
        } else {
            check_mask(g);
            const lm_status a = lm_grammar_accept_bytes(g, text, text_len);
            REQUIRE(a == LM_OK || a == LM_ERR_INVALID_ARG || a == LM_ERR_FULL);
            require_sane(g);
        }
    }
    lm_grammar_free(g);
    free(text);
    return 0;
}
