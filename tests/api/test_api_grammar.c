/* test_api_grammar.c - grammars through llama.h with a real vocabulary
 * (stories260K: 512 SentencePiece tokens, byte tokens <0x00>..<0xFF>).
 *
 *  - llama_grammar_init takes element arrays that live on the caller's stack
 *    (as a binding's ALLOCA_N does) and copies them: after init the arrays are
 *    overwritten with garbage and the grammar still works. One grammar is
 *    written by hand as elements; three (JSON-like, arithmetic, list) come
 *    from lamina's GBNF parser (sampling/grammar.h, b1892's grammar-parser.cpp
 *    numbering) and are copied onto the stack.
 *  - For sentences each grammar accepts, fed as multi-character vocab tokens
 *    (longest piece match) and as byte tokens: before every token,
 *    llama_sample_grammar must leave that token's logit finite; after the last
 *    one EOS must be allowed. For strings the grammar rejects, some token is
 *    masked (-inf) or EOS is not allowed at the end. BOS (empty piece) is
 *    always masked.
 *  - llama_grammar_copy is independent of the original; accepting a token the
 *    grammar cannot take leaves the grammar unchanged (b1892 aborts).
 *  - Malformed element arrays (unknown rule reference, bad start index, no
 *    rules, left recursion, unknown element type, range without a start)
 *    return NULL. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sampling/grammar.h"
#include "util_api.h"

static struct llama_model *M;
static struct llama_context *CTX;
static int NV;
static char PIECE[512][64];
static int PIECE_LEN[512];

static bool allowed(const struct llama_grammar *g, llama_token tok)
{
    float *zeros = calloc((size_t)NV, sizeof *zeros);
    llama_token_data_array c = api_candidates(zeros, NV);
    free(zeros);
    llama_sample_grammar(CTX, &c, g);
    bool ok = isfinite(c.data[tok].logit) && c.size == (size_t)NV && c.data[tok].id == tok;
    free(c.data);
    return ok;
}

/* Tokens spelling s: longest vocab piece at each position (bytes = false) or
 * one byte token per byte (bytes = true). Returns the count. */
static int spell(const char *s, bool bytes, llama_token *out, int cap)
{
    int n = 0;
    for (size_t i = 0; s[i] && n < cap;) {
        int best = -1, best_len = 0;
        if (bytes) {
            best = 3 + (unsigned char)s[i];
            best_len = 1;
        } else {
            for (int t = 0; t < NV; t++)
                if (PIECE_LEN[t] > best_len && !strncmp(s + i, PIECE[t], (size_t)PIECE_LEN[t]))
                    best = t, best_len = PIECE_LEN[t];
        }
        out[n++] = best;
        i += (size_t)best_len;
    }
    return n;
}

/* 1: accepted (every token allowed, EOS allowed at the end); 0: rejected.
 * *multi counts tokens of more than one byte. */
static int run(const struct llama_grammar *proto, const char *s, bool bytes, int *multi)
{
    struct llama_grammar *g = llama_grammar_copy(proto);
    llama_token toks[256];
    int n = spell(s, bytes, toks, 256), ok = 1;
    for (int i = 0; i < n && ok; i++) {
        CHECK(!allowed(g, llama_token_bos(M)));
        if (!allowed(g, toks[i]))
            ok = 0;
        else
            llama_grammar_accept_token(CTX, g, toks[i]);
        if (multi && PIECE_LEN[toks[i]] > 1)
            (*multi)++;
    }
    if (ok && !allowed(g, llama_token_eos(M)))
        ok = 0;
    llama_grammar_free(g);
    return ok;
}

/* A GBNF grammar, its element arrays copied onto this stack frame, built,
 * then the stack copies overwritten; checks accept and reject lists. */
static void check_gbnf(const char *name, const char *gbnf, const char *const *good, const char *const *bad,
                       int min_multi)
{
    struct lm_gbnf *parsed = NULL;
    char err[256];
    CHECKF(lm_gbnf_parse(gbnf, &parsed, err, sizeof err) == LM_OK, "%s: %s", name, err);
    if (!parsed)
        return;
    size_t total = 0, root = 0;
    for (size_t r = 0; r < parsed->n_rules; r++)
        total += parsed->rule_len[r];
    CHECK(lm_gbnf_rule_id(parsed, "root", &root) == LM_OK);
    llama_grammar_element stack_elems[512];
    const llama_grammar_element *rules[64];
    CHECK(total <= 512 && parsed->n_rules <= 64);
    size_t off = 0;
    for (size_t r = 0; r < parsed->n_rules && total <= 512; r++) {
        memcpy(&stack_elems[off], parsed->rules[r], parsed->rule_len[r] * sizeof(llama_grammar_element));
        rules[r] = &stack_elems[off];
        off += parsed->rule_len[r];
    }
    struct llama_grammar *g = llama_grammar_init(rules, parsed->n_rules, root);
    CHECK(g != NULL);
    memset(stack_elems, 0xA5, sizeof stack_elems); /* the caller's memory is gone */
    memset(rules, 0, sizeof rules);
    int multi = 0, n_good = 0, n_bad = 0;
    for (int i = 0; g && good[i]; i++, n_good++) {
        CHECKF(run(g, good[i], false, &multi) == 1, "%s: '%s' (vocab pieces) rejected", name, good[i]);
        CHECKF(run(g, good[i], true, NULL) == 1, "%s: '%s' (bytes) rejected", name, good[i]);
    }
    for (int i = 0; g && bad[i]; i++, n_bad++) {
        CHECKF(run(g, bad[i], false, NULL) == 0, "%s: '%s' (vocab pieces) accepted", name, bad[i]);
        CHECKF(run(g, bad[i], true, NULL) == 0, "%s: '%s' (bytes) accepted", name, bad[i]);
    }
    CHECK(multi >= min_multi); /* the piece spelling really used multi-byte tokens */
    printf("grammar %s: %zu rules, %d sentences accepted, %d rejected (%d multi-byte tokens)\n", name,
           parsed->n_rules, n_good, n_bad, multi);
    llama_grammar_free(g);
    lm_gbnf_free(parsed);
}

static void test_gbnf_grammars(void)
{
    static const char json[] = "root   ::= value\n"
                               "value  ::= object | array | string | number | \"true\" | \"false\" | \"null\"\n"
                               "object ::= \"{\" ws ( member ( \",\" ws member )* )? \"}\" ws\n"
                               "member ::= string \":\" ws value\n"
                               "array  ::= \"[\" ws ( value ( \",\" ws value )* )? \"]\" ws\n"
                               "string ::= \"\\\"\" ( [^\"\\\\] | \"\\\\\" [\"\\\\/bfnrt] )* \"\\\"\" ws\n"
                               "number ::= \"-\"? [0-9]+ (\".\" [0-9]+)? ws\n"
                               "ws     ::= [ \\t\\n]*\n";
    const char *json_good[] = {"{\"a\": [1, 2.5, \"x\\n\"], \"b\": {\"c\": null}, \"d\": true}",
                               "[]",
                               "\"Once upon a time, there was a little girl\"",
                               "-12.5",
                               "{\"name\": \"Lily\", \"happy\": false}",
                               NULL};
    const char *json_bad[] = {"{\"a\" 1}", "[1,,2]", "{\"a\": tru}", "{'a': 1}", "[1, 2", "\"open", "1.", NULL};
    check_gbnf("json", json, json_good, json_bad, 10);

    static const char arith[] = "root   ::= expr\n"
                                "expr   ::= term ((\"+\" | \"-\") term)*\n"
                                "term   ::= factor ((\"*\" | \"/\") factor)*\n"
                                "factor ::= num | \"(\" expr \")\"\n"
                                "num    ::= [0-9]+\n";
    const char *arith_good[] = {"(12+3)*4/(5-6)", "7", "1+2*3", "((100))", "2023-1999", NULL};
    const char *arith_bad[] = {"1+", "(1", "1++2", "a", ")", "1 + 2", "()", NULL};
    check_gbnf("arithmetic", arith, arith_good, arith_bad, 0); /* digits are single-byte pieces */

    static const char list[] = "root ::= item+\n"
                               "item ::= \"- \" [^\\n\\r]+ \"\\n\"\n";
    const char *list_good[] = {"- apple\n- pear\n", "- Once upon a time\n", "- the cat sat\n- on the mat\n- and slept\n",
                               NULL};
    const char *list_bad[] = {"apple\n", "- \n", "- a", "-apple\n", "\n", NULL};
    check_gbnf("list", list, list_good, list_bad, 10);
}

/* root ::= "a" [0-9]+ | "b"   (rule 0), written as elements on the stack */
static void test_hand_rules(void)
{
    llama_grammar_element r0[] = {
        {LLAMA_GRETYPE_CHAR, 'a'}, {LLAMA_GRETYPE_RULE_REF, 1}, {LLAMA_GRETYPE_ALT, 0},
        {LLAMA_GRETYPE_CHAR, 'b'}, {LLAMA_GRETYPE_END, 0},
    };
    /* digits ::= [0-9] digits | [0-9] */
    llama_grammar_element r1[] = {
        {LLAMA_GRETYPE_CHAR, '0'}, {LLAMA_GRETYPE_CHAR_RNG_UPPER, '9'}, {LLAMA_GRETYPE_RULE_REF, 1},
        {LLAMA_GRETYPE_ALT, 0},    {LLAMA_GRETYPE_CHAR, '0'},           {LLAMA_GRETYPE_CHAR_RNG_UPPER, '9'},
        {LLAMA_GRETYPE_END, 0},
    };
    const llama_grammar_element *rules[2] = {r0, r1};
    struct llama_grammar *g = llama_grammar_init(rules, 2, 0);
    CHECK(g != NULL);
    memset(r0, 0, sizeof r0);
    memset(r1, 0xff, sizeof r1);
    rules[0] = rules[1] = NULL;
    if (!g)
        return;
    CHECK(run(g, "a123", true, NULL) == 1);
    CHECK(run(g, "b", true, NULL) == 1);
    CHECK(run(g, "a", true, NULL) == 0);
    CHECK(run(g, "b1", true, NULL) == 0);
    CHECK(run(g, "ab", true, NULL) == 0);

    /* copies are independent; a rejected token changes nothing */
    llama_grammar_accept_token(CTX, g, 3 + 'a');
    struct llama_grammar *c = llama_grammar_copy(g);
    CHECK(c != NULL);
    llama_grammar_accept_token(CTX, g, 3 + '7');
    CHECK(allowed(g, llama_token_eos(M)) && !allowed(c, llama_token_eos(M)));
    CHECK(allowed(c, 3 + '5') && !allowed(c, 3 + 'b'));
    llama_grammar_accept_token(CTX, c, 3 + 'x'); /* refused, logged, no change */
    CHECK(allowed(c, 3 + '5') && !allowed(c, llama_token_eos(M)));
    llama_grammar_accept_token(CTX, c, llama_token_eos(M)); /* EOS before the end: refused too */
    CHECK(allowed(c, 3 + '5'));
    llama_grammar_free(c);
    llama_grammar_free(g);
}

static void test_malformed(void)
{
    const llama_grammar_element ref_missing[] = {{LLAMA_GRETYPE_RULE_REF, 5}, {LLAMA_GRETYPE_END, 0}};
    const llama_grammar_element left_rec[] = {{LLAMA_GRETYPE_RULE_REF, 0}, {LLAMA_GRETYPE_CHAR, 'a'},
                                              {LLAMA_GRETYPE_END, 0}};
    const llama_grammar_element bad_type[] = {{(enum llama_gretype)99, 'a'}, {LLAMA_GRETYPE_END, 0}};
    const llama_grammar_element bad_range[] = {{LLAMA_GRETYPE_CHAR_RNG_UPPER, 'z'}, {LLAMA_GRETYPE_END, 0}};
    const llama_grammar_element ok[] = {{LLAMA_GRETYPE_CHAR, 'a'}, {LLAMA_GRETYPE_END, 0}};
    const llama_grammar_element *r[1];
    r[0] = ref_missing;
    CHECK(llama_grammar_init(r, 1, 0) == NULL);
    r[0] = left_rec;
    CHECK(llama_grammar_init(r, 1, 0) == NULL);
    r[0] = bad_type;
    CHECK(llama_grammar_init(r, 1, 0) == NULL);
    r[0] = bad_range;
    CHECK(llama_grammar_init(r, 1, 0) == NULL);
    r[0] = ok;
    CHECK(llama_grammar_init(r, 1, 1) == NULL); /* start index out of range */
    CHECK(llama_grammar_init(r, 0, 0) == NULL); /* no rules */
    CHECK(llama_grammar_init(NULL, 1, 0) == NULL);
    struct llama_grammar *g = llama_grammar_init(r, 1, 0);
    CHECK(g != NULL);
    llama_token_data_array empty = {NULL, 0, false};
    llama_sample_grammar(CTX, &empty, g); /* an empty array: nothing to do */
    llama_grammar_free(g);
}

int main(void)
{
    M = api_start("models/stories260K.gguf");
    if (!M)
        return lm_test_summary();
    CTX = api_ctx(M, 32, 32, false);
    NV = llama_n_vocab(M);
    CHECK(NV == 512);
    for (int t = 0; t < NV && t < 512; t++) {
        int n = llama_token_to_piece(M, t, PIECE[t], 63);
        PIECE_LEN[t] = n > 0 ? n : 0;
        PIECE[t][PIECE_LEN[t]] = 0;
    }
    CHECK(PIECE_LEN[3 + 'a'] == 1 && PIECE[3 + 'a'][0] == 'a'); /* byte tokens */
    test_hand_rules();
    test_gbnf_grammars();
    test_malformed();
    llama_free(CTX);
    llama_free_model(M);
    return lm_test_summary();
}
