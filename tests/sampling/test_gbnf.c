/* test_gbnf.c - the GBNF parser: element arrays and rule numbering as llama.cpp's
 * grammar-parser.cpp produces them (worked out by hand from its rewrite rules), and
 * errors with line and column for broken grammars; truncated and mutated grammars
 * must never crash (run under ASan/UBSan).
 */
#include <string.h>

#include "lm_test.h"
#include "sampling/grammar.h"

#define E(t, v) {LM_GRETYPE_##t, (v)}

static struct lm_gbnf *parse_ok(const char *text)
{
    struct lm_gbnf *g = NULL;
    char err[256] = "";
    CHECKF(lm_gbnf_parse(text, &g, err, sizeof err) == LM_OK, "%s", err);
    return g;
}

static bool rule_is(const struct lm_gbnf *g, size_t id, const char *name, const struct lm_grammar_element *want,
                    size_t n)
{
    if (!g || id >= g->n_rules || strcmp(g->names[id], name) || g->rule_len[id] != n)
        return false;
    for (size_t i = 0; i < n; i++)
        if (g->rules[id][i].type != want[i].type || g->rules[id][i].value != want[i].value)
            return false;
    return true;
}

#define RULE_IS(g, id, name, ...)                                                                                 \
    do {                                                                                                          \
        const struct lm_grammar_element want_[] = {__VA_ARGS__};                                                  \
        CHECKF(rule_is(g, id, name, want_, sizeof want_ / sizeof *want_), "rule %d (%s)", id, name);              \
    } while (0)

static void expect_error(const char *text, const char *want);

static void test_structure(void)
{
    /* root = 0; "ab" [x-z]* makes root_1 ::= [x-z] root_1 | ; other = 2 (first seen
     * as a reference); other ::= [^a]? makes other_3 ::= [^a] | */
    struct lm_gbnf *g = parse_ok("root ::= \"ab\" [x-z]* | other\nother ::= [^a]?\n");
    if (g) {
        CHECK(g->n_rules == 4);
        RULE_IS(g, 0, "root", E(CHAR, 'a'), E(CHAR, 'b'), E(RULE_REF, 1), E(ALT, 0), E(RULE_REF, 2), E(END, 0));
        RULE_IS(g, 1, "root_1", E(CHAR, 'x'), E(CHAR_RNG_UPPER, 'z'), E(RULE_REF, 1), E(ALT, 0), E(END, 0));
        RULE_IS(g, 2, "other", E(RULE_REF, 3), E(END, 0));
        RULE_IS(g, 3, "other_3", E(CHAR_NOT, 'a'), E(ALT, 0), E(END, 0));
        size_t id = 99;
        CHECK(lm_gbnf_rule_id(g, "other", &id) == LM_OK && id == 2);
        CHECK(lm_gbnf_rule_id(g, "nope", &id) == LM_ERR_NOT_FOUND);
        lm_gbnf_free(g);
    }
    /* a group gets its id before its contents; S+ -> S' ::= S S' | S */
    g = parse_ok("root ::= (\"a\" | \"b\")+ \"c\"\n");
    if (g) {
        CHECK(g->n_rules == 3);
        RULE_IS(g, 0, "root", E(RULE_REF, 2), E(CHAR, 'c'), E(END, 0));
        RULE_IS(g, 1, "root_1", E(CHAR, 'a'), E(ALT, 0), E(CHAR, 'b'), E(END, 0));
        RULE_IS(g, 2, "root_2", E(RULE_REF, 1), E(RULE_REF, 2), E(ALT, 0), E(RULE_REF, 1), E(END, 0));
        lm_gbnf_free(g);
    }
    /* a repeated literal repeats the whole literal; escapes */
    g = parse_ok("root ::= \"xy\"* \"\\x41\\u00e9\\U0001F600\\n\\t\\r\\\\\\\"\\[\\]\"\n");
    if (g) {
        RULE_IS(g, 0, "root", E(RULE_REF, 1), E(CHAR, 0x41), E(CHAR, 0xe9), E(CHAR, 0x1f600), E(CHAR, '\n'),
                E(CHAR, '\t'), E(CHAR, '\r'), E(CHAR, '\\'), E(CHAR, '"'), E(CHAR, '['), E(CHAR, ']'), E(END, 0));
        RULE_IS(g, 1, "root_1", E(CHAR, 'x'), E(CHAR, 'y'), E(RULE_REF, 1), E(ALT, 0), E(END, 0));
        lm_gbnf_free(g);
    }
    /* classes: several items, a trailing '-', UTF-8 bounds, escapes */
    g = parse_ok("root ::= [a-c_\\]-] [\xce\xb1-\xcf\x89] [^\\n]\n");
    if (g) {
        RULE_IS(g, 0, "root", E(CHAR, 'a'), E(CHAR_RNG_UPPER, 'c'), E(CHAR_ALT, '_'), E(CHAR_ALT, ']'),
                E(CHAR_ALT, '-'), E(CHAR, 0x3b1), E(CHAR_RNG_UPPER, 0x3c9), E(CHAR_NOT, '\n'), E(END, 0));
        lm_gbnf_free(g);
    }
    /* comments, blank lines, CRLF, newlines inside groups and after '|' and '::=' */
    g = parse_ok("# a grammar\n\nroot ::=\n  (\n \"a\" # first\n  | \"b\"\n ) |\n  x\r\nx ::= \"x\" # end");
    if (g) {
        RULE_IS(g, 0, "root", E(RULE_REF, 1), E(ALT, 0), E(RULE_REF, 2), E(END, 0));
        RULE_IS(g, 1, "root_1", E(CHAR, 'a'), E(ALT, 0), E(CHAR, 'b'), E(END, 0));
        RULE_IS(g, 2, "x", E(CHAR, 'x'), E(END, 0));
        lm_gbnf_free(g);
    }
    /* '_' is not a name character, so generated names cannot be referenced */
    expect_error("root ::= \"a\"* root_1\n", "line 1, column 19: expected newline or end of input");
    /* a later definition replaces an earlier one; "" is an empty sequence */
    g = parse_ok("root ::= \"a\"\nroot ::= \"\" | \"b\"\n");
    if (g) {
        RULE_IS(g, 0, "root", E(ALT, 0), E(CHAR, 'b'), E(END, 0));
        lm_gbnf_free(g);
    }
}

static void expect_error(const char *text, const char *want)
{
    char err[256] = "";
    struct lm_gbnf *g = NULL;
    lm_status st = lm_gbnf_parse(text, &g, err, sizeof err);
    CHECKF(st == LM_ERR_CORRUPT && g == NULL, "accepted: %s", text);
    CHECKF(strstr(err, want) != NULL, "message \"%s\" lacks \"%s\"", err, want);
}

static void test_errors(void)
{
    expect_error("root ::= a\na = \"x\"\n", "line 2, column 3: expected ::=");
    expect_error("root ::= \"abc\n", "line 1, column 10: unterminated string literal");
    expect_error("root ::= \"a\\qb\"\n", "line 1, column 12: unknown escape '\\q'");
    expect_error("root ::= \"x\" foo\n", "line 1, column 14: undefined rule 'foo'");
    expect_error("root ::= x\nx ::= [z-a]\n", "line 2, column 8: bad character range");
    expect_error("root ::= (\"a\"\n", "line 2, column 1: expected ')' to close the '(' at line 1, column 10");
    expect_error("root ::= (\"a\" ]\n", "line 1, column 15: expected ')' to close the '(' at line 1, column 10");
    expect_error("root ::= *\n", "line 1, column 10: '*' has no preceding item");
    expect_error("root ::= \"\\x4\"\n", "line 1, column 14: expected 2 hex digits");
    expect_error("root ::= \"\\u12G4\"\n", "expected 4 hex digits");
    expect_error("root ::= [abc\n", "line 1, column 10: unterminated character class");
    expect_error("root ::= []\n", "line 1, column 10: empty character class");
    expect_error("", "no rules");
    expect_error("  # only a comment\n", "no rules");
    expect_error("root ::= \"\xff\"\n", "line 1, column 11: invalid UTF-8");
    expect_error("root ::= \"\xce\"\n", "invalid UTF-8");
    expect_error("root ::= \"a\" )\n", "line 1, column 14: expected newline or end of input");
    expect_error("root ::= \"a\"\n  | \"b\"\n", "line 2, column 3: expected a rule name");
    expect_error("r\xc3\xa9 ::= \"a\"\n", "line 1, column 2: expected ::=");
    expect_error("root ::= \"\\", "unexpected end of input");
    expect_error("root ::= [a-", "unterminated character class");

    char deep[3000];
    strcpy(deep, "root ::= ");
    memset(deep + 9, '(', 2000);
    strcpy(deep + 2009, "\"a\"");
    expect_error(deep, "nested deeper than");

    /* through lm_grammar_from_gbnf: the start rule must exist */
    char err[256] = "";
    struct lm_grammar *gr = NULL;
    CHECK(lm_grammar_from_gbnf("start ::= \"a\"\n", NULL, &gr, err, sizeof err) == LM_ERR_NOT_FOUND);
    CHECKF(strstr(err, "no rule 'root'") != NULL, "%s", err);
    CHECK(lm_grammar_from_gbnf("start ::= \"a\"\n", "start", &gr, err, sizeof err) == LM_OK);
    lm_grammar_free(gr);
    CHECK(lm_gbnf_parse(NULL, NULL, err, sizeof err) == LM_ERR_INVALID_ARG);
    lm_gbnf_free(NULL);
}

static const char *const SAMPLES[] = {
    "root ::= object\nobject ::= \"{\" ws ( string \":\" ws value (\",\" ws string \":\" ws value)* )? \"}\"\n"
    "value ::= object | [0-9]+ | string\nstring ::= \"\\\"\" ([^\"\\\\] | \"\\\\\" [nt\"])* \"\\\"\"\n"
    "ws ::= [ \\t\\n]*\n",
    "root ::= (\"a\" | [b-d]+ | \"\\u00e9\")? \"x\"*\n# done\n",
};

static uint32_t lcg(uint32_t *x)
{
    *x = *x * 1664525u + 1013904223u;
    return *x >> 8;
}

/* every prefix and thousands of random byte edits: an answer, never a crash */
static void test_robustness(void)
{
    char buf[512];
    int answered = 0, total = 0;
    for (size_t s = 0; s < sizeof SAMPLES / sizeof *SAMPLES; s++) {
        const size_t len = strlen(SAMPLES[s]);
        for (size_t cut = 0; cut <= len; cut++, total++) {
            memcpy(buf, SAMPLES[s], cut);
            buf[cut] = '\0';
            struct lm_grammar *g = NULL;
            char err[256] = "";
            lm_status st = lm_grammar_from_gbnf(buf, NULL, &g, err, sizeof err);
            answered += st == LM_OK ? g != NULL : err[0] != '\0';
            lm_grammar_free(g);
        }
        uint32_t x = 1234u + (uint32_t)s;
        const char alphabet[] = "()[]|*+?\"\\-^:= \n#axu0\xce\xb1";
        for (int k = 0; k < 3000; k++, total++) {
            memcpy(buf, SAMPLES[s], len + 1);
            for (int e = 0, ne = 1 + (int)(lcg(&x) % 3); e < ne; e++)
                buf[lcg(&x) % len] = alphabet[lcg(&x) % (sizeof alphabet - 1)];
            struct lm_grammar *g = NULL;
            char err[256] = "";
            lm_status st = lm_grammar_from_gbnf(buf, NULL, &g, err, sizeof err);
            answered += st == LM_OK ? g != NULL : err[0] != '\0';
            if (g)
                lm_grammar_accept_bytes(g, "{\"a\": 1}", 8);
            lm_grammar_free(g);
        }
    }
    CHECKF(answered == total, "%d of %d calls gave no result and no message", total - answered, total);
}

int main(void)
{
    test_structure();
    test_errors();
    test_robustness();
    return lm_test_summary();
}
