/* test_grammar.c - the grammar engine: sentences accepted and refused for a JSON-like,
 * an arithmetic and a list grammar (fed whole, code point by code point and byte by
 * byte), candidate masking with a toy vocabulary checked against an independent
 * oracle (accepting each piece on a copy), partial UTF-8, EOS, copies, rules passed
 * in llama.h form from the stack, and refusal of left recursion and malformed rules.
 */
#include <math.h>
#include <string.h>

#include "lm_test.h"
#include "sampling/grammar.h"
#include "sampling/grammar_impl.h"

static const char *ARITH = "root   ::= expr\n"
                           "expr   ::= term ((\"+\" | \"-\") term)*\n"
                           "term   ::= factor ((\"*\" | \"/\") factor)*\n"
                           "factor ::= num | \"(\" expr \")\"\n"
                           "num    ::= [0-9]+\n";

static const char *JSON = "root   ::= value\n"
                          "value  ::= object | array | string | number | \"true\" | \"false\" | \"null\"\n"
                          "object ::= \"{\" ws ( member ( \",\" ws member )* )? \"}\" ws\n"
                          "member ::= string \":\" ws value\n"
                          "array  ::= \"[\" ws ( value ( \",\" ws value )* )? \"]\" ws\n"
                          "string ::= \"\\\"\" ( [^\"\\\\] | \"\\\\\" [\"\\\\/bfnrt] )* \"\\\"\" ws\n"
                          "number ::= \"-\"? [0-9]+ (\".\" [0-9]+)? ws\n"
                          "ws     ::= [ \\t\\n]*\n";

static const char *LIST = "root ::= item+\n"
                          "item ::= \"- \" [a-z]+ \"\\n\"   # one entry per line\n";

static struct lm_grammar *make(const char *gbnf)
{
    struct lm_grammar *g = NULL;
    char err[256] = "";
    lm_status st = lm_grammar_from_gbnf(gbnf, NULL, &g, err, sizeof err);
    CHECKF(st == LM_OK, "%s", err);
    return g;
}

/* feed text in pieces of `step` bytes (0: one UTF-8 character at a time) */
static bool matches_fed(const char *gbnf, const char *text, size_t step)
{
    struct lm_grammar *g = make(gbnf);
    if (!g)
        return false;
    size_t len = strlen(text), i = 0;
    bool ok = true;
    while (ok && i < len) {
        size_t n = step;
        if (step == 0) { /* one code point */
            n = 1;
            while (i + n < len && ((unsigned char)text[i + n] & 0xc0) == 0x80)
                n++;
        }
        if (n > len - i)
            n = len - i;
        ok = lm_grammar_accept_bytes(g, text + i, n) == LM_OK;
        i += n;
    }
    ok = ok && lm_grammar_is_complete(g);
    lm_grammar_free(g);
    return ok;
}

/* a sentence of the grammar, whichever way the text is cut */
static bool matches(const char *gbnf, const char *text)
{
    bool whole = matches_fed(gbnf, text, strlen(text) ? strlen(text) : 1);
    bool by_char = matches_fed(gbnf, text, 0);
    bool by_byte = matches_fed(gbnf, text, 1);
    CHECKF(whole == by_char && whole == by_byte, "cuts disagree on \"%s\"", text);
    return whole;
}

static void test_arithmetic(void)
{
    const char *yes[] = {"1+2*3", "(1+2)*3", "42", "((7))", "10/2-3*(4+5)"};
    const char *no[] = {"1+", "+1", "1++2", "(1", "a", "", "1)", "()"};
    for (size_t i = 0; i < sizeof yes / sizeof *yes; i++)
        CHECKF(matches(ARITH, yes[i]), "should accept \"%s\"", yes[i]);
    for (size_t i = 0; i < sizeof no / sizeof *no; i++)
        CHECKF(!matches(ARITH, no[i]), "should refuse \"%s\"", no[i]);
}

static void test_json(void)
{
    const char *yes[] = {"{\"a\": [1, 2.5, \"x\"], \"b\": null}", "[]", "\"h\xc3\xa9llo \\\"q\\\"\"",
                         "{\"k\":{\"n\":-3}}", "true", "[ [ ], { } ]\n"};
    const char *no[] = {"{\"a\" 1}", "[1,]", "{'a':1}", "\"unterminated", "01.", "nul", "[1 2]", "\"\\x\""};
    for (size_t i = 0; i < sizeof yes / sizeof *yes; i++)
        CHECKF(matches(JSON, yes[i]), "should accept %s", yes[i]);
    for (size_t i = 0; i < sizeof no / sizeof *no; i++)
        CHECKF(!matches(JSON, no[i]), "should refuse %s", no[i]);
}

static void test_list(void)
{
    CHECK(matches(LIST, "- apple\n- pear\n"));
    CHECK(matches(LIST, "- x\n"));
    CHECK(!matches(LIST, "- apple"));
    CHECK(!matches(LIST, "-apple\n"));
    CHECK(!matches(LIST, "- Apple\n"));
    CHECK(!matches(LIST, ""));
    /* non-ASCII classes, fed byte by byte through partial UTF-8 sequences */
    const char *greek = "root ::= [\xce\xb1-\xcf\x89]+ \"!\"\n"; /* [α-ω]+ "!" */
    CHECK(matches(greek, "\xce\xb1\xce\xb2\xce\xb3!"));
    CHECK(!matches(greek, "abc!"));
    CHECK(!matches(greek, "\xce\x91!")); /* capital alpha is outside the range */
    CHECK(matches("root ::= [^a]* \"a\"\n", "\xf0\x9f\x98\x80xa"));
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

static const char *const ARITH_VOCAB[] = {
    "",    /* 0: EOS (its piece is empty) */
    "1",   /* 1 */
    "2",   /* 2 */
    "+",   /* 3 */
    "*",   /* 4 */
    "(",   /* 5 */
    ")",   /* 6 */
    "12",  /* 7 */
    "1+",  /* 8 */
    "+(",  /* 9 */
    "a",   /* 10 */
    "",    /* 11: empty piece, never allowed */
    "3)",  /* 12 */
    "))",  /* 13 */
    "1 ",  /* 14 */
    "*(2", /* 15 */
};
#define N_ARITH (sizeof ARITH_VOCAB / sizeof *ARITH_VOCAB)

/* mask bits of the allowed tokens after lm_grammar_sample */
static uint32_t allowed_mask(const struct lm_grammar *g, const struct lm_grammar_vocab *v, size_t n, size_t depth)
{
    struct lm_token_data d[32];
    for (size_t i = 0; i < n; i++)
        d[i] = (struct lm_token_data){(int32_t)i, 0.5f, 0.0f};
    struct lm_token_data_array c = {d, n, false};
    lm_status st = lm_grammar_sample_depth(g, &c, v, depth);
    CHECK(st == LM_OK && c.size == n && !c.sorted);
    uint32_t m = 0;
    for (size_t i = 0; i < n; i++) {
        CHECK(d[i].id == (int32_t)i);
        if (d[i].logit == 0.5f)
            m |= 1u << i;
        else
            CHECK(isinf(d[i].logit) && d[i].logit < 0);
    }
    return m;
}

/* the oracle: a token is allowed iff accepting its piece on a copy succeeds (all
 * ARITH_VOCAB pieces are complete UTF-8), EOS iff the grammar is complete */
static uint32_t oracle_mask(const struct lm_grammar *g, const struct lm_grammar_vocab *v, size_t n)
{
    uint32_t m = lm_grammar_is_complete(g) ? 1u << v->eos : 0;
    for (size_t i = 0; i < n; i++) {
        size_t len;
        const char *p = v->piece(v->user, (int32_t)i, &len);
        if ((int32_t)i == v->eos || !p || len == 0)
            continue;
        struct lm_grammar *c = NULL;
        CHECK(lm_grammar_copy(g, &c) == LM_OK);
        if (c && lm_grammar_accept_bytes(c, p, len) == LM_OK)
            m |= 1u << i;
        lm_grammar_free(c);
    }
    return m;
}

static void test_candidates(void)
{
    struct toy toy = {ARITH_VOCAB, N_ARITH};
    struct lm_grammar_vocab v = {toy_piece, &toy, 0};
    struct lm_grammar *g = make(ARITH);
    if (!g)
        return;
    /* at the start: a number or "(" (tokens 1 2 5 7 8), not EOS, not the empty piece */
    uint32_t m = allowed_mask(g, &v, N_ARITH, 1024);
    CHECKF(m == ((1u << 1) | (1u << 2) | (1u << 5) | (1u << 7) | (1u << 8)), "mask %#x", m);
    /* after "(1": digits, operators, ")", "+(", "3)", "*(2"; "))" and EOS not yet */
    CHECK(lm_grammar_accept_token(g, 5, &v) == LM_OK && lm_grammar_accept_token(g, 1, &v) == LM_OK);
    m = allowed_mask(g, &v, N_ARITH, 1024);
    CHECKF(m == ((1u << 1) | (1u << 2) | (1u << 3) | (1u << 4) | (1u << 6) | (1u << 7) | (1u << 8) | (1u << 9) |
                 (1u << 12) | (1u << 15)),
           "mask %#x", m);
    CHECK(!lm_grammar_is_complete(g));
    CHECK(lm_grammar_accept_token(g, 0, &v) == LM_ERR_INVALID_ARG); /* EOS refused, no change */
    CHECK(lm_grammar_accept_token(g, 13, &v) == LM_ERR_INVALID_ARG); /* "))" refused, no change */
    CHECK(lm_grammar_accept_token(g, 6, &v) == LM_OK);               /* ")": now complete */
    CHECK(lm_grammar_is_complete(g));
    m = allowed_mask(g, &v, N_ARITH, 1024);
    CHECK(m & 1u); /* EOS allowed */
    CHECK(!(m & (1u << 6)) && !(m & (1u << 1)) && (m & (1u << 3)));
    CHECK(lm_grammar_accept_token(g, 0, &v) == LM_OK && lm_grammar_is_complete(g));
    lm_grammar_free(g);

    /* the batched masking equals the one-by-one check and the accept oracle along
     * every prefix of a few sentences, in all three grammars */
    const char *gs[3] = {ARITH, JSON, LIST};
    const char *texts[3] = {"(12+3)*4/(5-6)", "{\"a\": [1, {\"b\": \"c\\n\"}], \"d\": -2.5}", "- ab\n- cd\n"};
    static const char *const mixed[] = {"", "1", "2", "+", "(", ")", "*", "{", "}", "[", "]", "\"", ":",
                                        ",", " ", "a", "b", "-", "- ", "\n", "ab", "\": ", "1, ", "12",
                                        ".5", "true", "\\n", "c\\", "]}", "x"};
    struct toy mt = {mixed, sizeof mixed / sizeof *mixed};
    struct lm_grammar_vocab mv = {toy_piece, &mt, 0};
    for (int k = 0; k < 3; k++) {
        g = make(gs[k]);
        if (!g)
            continue;
        int bad = 0;
        for (size_t i = 0; texts[k][i]; i++) {
            uint32_t a = allowed_mask(g, &mv, mt.n, 1024), b = allowed_mask(g, &mv, mt.n, 0);
            uint32_t o = oracle_mask(g, &mv, mt.n);
            bad += a != b || a != o;
            CHECK(lm_grammar_accept_bytes(g, texts[k] + i, 1) == LM_OK);
        }
        CHECKF(bad == 0, "grammar %d: %d positions disagree", k, bad);
        CHECK(lm_grammar_is_complete(g));
        lm_grammar_free(g);
    }
}

static void test_partial_utf8(void)
{
    /* root ::= "α" | "b"  (α = CE B1). A token ending inside a sequence is allowed
     * when some completion can match: CE -> U+0380..U+03BF (α fits), CF ->
     * U+03C0..U+03FF (no), E0 -> U+0800..U+0FFF (no), a lone continuation byte is
     * invalid; "b" followed by a partial sequence cannot continue a complete rule. */
    static const char *const pieces[] = {"", "\xce", "\xcf", "\xe0", "\xb1", "b", "\xce\xb1", "a\xce", "b\xce"};
    struct toy t = {pieces, 9};
    struct lm_grammar_vocab v = {toy_piece, &t, 0};
    struct lm_grammar *g = make("root ::= \"\xce\xb1\" | \"b\"\n");
    if (!g)
        return;
    uint32_t m = allowed_mask(g, &v, 9, 1024);
    CHECKF(m == ((1u << 1) | (1u << 5) | (1u << 6)), "mask %#x", m);
    CHECK(allowed_mask(g, &v, 9, 0) == m);
    CHECK(lm_grammar_accept_token(g, 1, &v) == LM_OK && !lm_grammar_is_complete(g));
    m = allowed_mask(g, &v, 9, 1024); /* only the continuation byte B1 completes α */
    CHECKF(m == (1u << 4), "mask %#x", m);
    CHECK(lm_grammar_accept_token(g, 4, &v) == LM_OK && lm_grammar_is_complete(g));
    lm_grammar_free(g);
}

/* pieces longer than the batching depth (1024 code points) are checked one by one */
static void test_long_pieces(void)
{
    static char ok_piece[1501], bad_piece[1501], short_piece[3] = "aa";
    memset(ok_piece, 'a', 1500);
    memset(bad_piece, 'a', 1500);
    bad_piece[1400] = 'b';
    const char *const pieces[] = {"", ok_piece, bad_piece, short_piece};
    struct toy t = {pieces, 4};
    struct lm_grammar_vocab v = {toy_piece, &t, 0};
    struct lm_grammar *g = make("root ::= \"a\"* \"!\"?\n");
    if (!g)
        return;
    CHECK(allowed_mask(g, &v, 4, 1024) == ((1u << 0) | (1u << 1) | (1u << 3)));
    CHECK(allowed_mask(g, &v, 4, 0) == ((1u << 0) | (1u << 1) | (1u << 3)));
    CHECK(lm_grammar_accept_token(g, 1, &v) == LM_OK && lm_grammar_accept_token(g, 2, &v) == LM_ERR_INVALID_ARG);
    CHECK(lm_grammar_accept_bytes(g, "!", 1) == LM_OK && lm_grammar_is_complete(g));
    lm_grammar_free(g);
}

static void test_copy(void)
{
    struct toy toy = {ARITH_VOCAB, N_ARITH};
    struct lm_grammar_vocab v = {toy_piece, &toy, 0};
    struct lm_grammar *g = make(ARITH), *c = NULL;
    if (!g)
        return;
    CHECK(lm_grammar_accept_token(g, 1, &v) == LM_OK);
    CHECK(lm_grammar_copy(g, &c) == LM_OK);
    CHECK(lm_grammar_accept_token(g, 3, &v) == LM_OK); /* g: "1+", c: "1" */
    CHECK(!lm_grammar_is_complete(g) && lm_grammar_is_complete(c));
    CHECK(lm_grammar_accept_token(c, 4, &v) == LM_OK && lm_grammar_accept_token(c, 2, &v) == LM_OK);
    lm_grammar_free(g); /* the copy owns its rules */
    CHECK(lm_grammar_is_complete(c) && lm_grammar_n_stacks(c) > 0);
    CHECK(lm_grammar_accept_bytes(c, "+(1)", 4) == LM_OK && lm_grammar_is_complete(c));
    lm_grammar_free(c);
    lm_grammar_free(NULL);
}

/* llama.h style: rules built on the caller's stack, destroyed after init */
static struct lm_grammar *init_from_stack(void)
{
    /* root ::= "a" [b-d]* | "x" */
    struct lm_grammar_element root[] = {
        {LM_GRETYPE_CHAR, 'a'}, {LM_GRETYPE_RULE_REF, 1}, {LM_GRETYPE_ALT, 0}, {LM_GRETYPE_CHAR, 'x'},
        {LM_GRETYPE_END, 0}};
    /* rep ::= [b-d] rep | */
    struct lm_grammar_element rep[] = {{LM_GRETYPE_CHAR, 'b'}, {LM_GRETYPE_CHAR_RNG_UPPER, 'd'},
                                       {LM_GRETYPE_RULE_REF, 1}, {LM_GRETYPE_ALT, 0}, {LM_GRETYPE_END, 0}};
    const struct lm_grammar_element *rules[2] = {root, rep};
    struct lm_grammar *g = NULL;
    CHECK(lm_grammar_init(rules, 2, 0, &g, NULL, 0) == LM_OK);
    memset(root, 0x5a, sizeof root);
    memset(rep, 0x5a, sizeof rep);
    return g;
}

static void test_element_rules(void)
{
    struct lm_grammar *g = init_from_stack();
    if (g) {
        CHECK(lm_grammar_accept_bytes(g, "abdc", 4) == LM_OK && lm_grammar_is_complete(g));
        CHECK(lm_grammar_accept_bytes(g, "e", 1) == LM_ERR_INVALID_ARG && lm_grammar_is_complete(g));
        lm_grammar_free(g);
    }
    char err[256];
    struct lm_grammar *bad = NULL;
    const struct lm_grammar_element ref_out[] = {{LM_GRETYPE_RULE_REF, 5}, {LM_GRETYPE_END, 0}};
    const struct lm_grammar_element rng_first[] = {{LM_GRETYPE_CHAR_RNG_UPPER, 'z'}, {LM_GRETYPE_END, 0}};
    const struct lm_grammar_element alt_after_ref[] = {{LM_GRETYPE_RULE_REF, 0}, {LM_GRETYPE_CHAR_ALT, 'q'},
                                                       {LM_GRETYPE_END, 0}};
    const struct lm_grammar_element two_ranges[] = {{LM_GRETYPE_CHAR, 'a'}, {LM_GRETYPE_CHAR_RNG_UPPER, 'c'},
                                                    {LM_GRETYPE_CHAR_RNG_UPPER, 'z'}, {LM_GRETYPE_END, 0}};
    const struct lm_grammar_element bad_type[] = {{(enum lm_gretype)9, 0}, {LM_GRETYPE_END, 0}};
    const struct lm_grammar_element *sets[5][1] = {{ref_out}, {rng_first}, {alt_after_ref}, {two_ranges}, {bad_type}};
    for (int i = 0; i < 5; i++) {
        err[0] = 0;
        CHECKF(lm_grammar_init(sets[i], 1, 0, &bad, err, sizeof err) == LM_ERR_CORRUPT && err[0], "set %d", i);
    }
    const struct lm_grammar_element ok_rule[] = {{LM_GRETYPE_CHAR, 'a'}, {LM_GRETYPE_END, 0}};
    const struct lm_grammar_element *one[1] = {ok_rule};
    CHECK(lm_grammar_init(one, 1, 1, &bad, err, sizeof err) == LM_ERR_INVALID_ARG);
    CHECK(lm_grammar_init(one, 0, 0, &bad, err, sizeof err) == LM_ERR_INVALID_ARG);
    const struct lm_grammar_element *null_rule[2] = {ok_rule, NULL};
    CHECK(lm_grammar_init(null_rule, 2, 0, &bad, err, sizeof err) == LM_ERR_INVALID_ARG);
    /* an empty rule matches the empty string */
    const struct lm_grammar_element empty[] = {{LM_GRETYPE_END, 0}};
    const struct lm_grammar_element *er[1] = {empty};
    CHECK(lm_grammar_init(er, 1, 0, &bad, err, sizeof err) == LM_OK);
    if (bad) {
        CHECK(lm_grammar_is_complete(bad) && lm_grammar_accept_bytes(bad, "a", 1) == LM_ERR_INVALID_ARG);
        lm_grammar_free(bad);
    }
}

static void test_left_recursion(void)
{
    const char *bad[] = {
        "root ::= root \"a\" | \"b\"\n",
        "root ::= a \"x\"\na ::= b\nb ::= root \"y\" | \"z\"\n",
        "root ::= e root \"x\" | \"y\"\ne ::= \"e\"?\n", /* through a rule that can be empty */
        "root ::= (\"a\"*)* \"b\"\n",                    /* a repeated item that can be empty */
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char err[256] = "";
        struct lm_grammar *g = NULL;
        CHECKF(lm_grammar_from_gbnf(bad[i], NULL, &g, err, sizeof err) == LM_ERR_CORRUPT, "grammar %zu", i);
        CHECKF(strstr(err, "left-recursive") != NULL, "message: %s", err);
    }
    char err[256] = "";
    struct lm_grammar *g = NULL;
    CHECK(lm_grammar_from_gbnf(bad[0], NULL, &g, err, sizeof err) == LM_ERR_CORRUPT);
    CHECKF(strstr(err, "root -> root") != NULL, "%s", err);
    /* right recursion is fine */
    CHECK(matches("root ::= \"a\" root | \"b\"\n", "aaab"));
    CHECK(matches("root ::= \"(\" root \")\" | \"\"\n", "((()))"));
    CHECK(!matches("root ::= \"(\" root \")\" | \"\"\n", "(()"));
}

int main(void)
{
    test_arithmetic();
    test_json();
    test_list();
    test_candidates();
    test_partial_utf8();
    test_long_pieces();
    test_copy();
    test_element_rules();
    test_left_recursion();
    return lm_test_summary();
}
