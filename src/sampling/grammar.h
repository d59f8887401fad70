/* grammar.h - grammar-constrained sampling (llama_grammar of b1892) and GBNF parsing.
 *
 * A grammar is a set of rules; each rule is an array of elements, alternatives
 * separated by LM_GRETYPE_ALT, ended by LM_GRETYPE_END (the llama_grammar_element
 * layout, which the API layer casts to). The engine keeps a set of pushdown stacks of
 * element positions; each stack ends at a character class, or is empty (the start
 * rule is complete). Text is fed as UTF-8, possibly split inside a code point: the
 * partial sequence is carried between tokens as in b1892.
 *
 * The engine never sees the vocabulary: callers pass a struct lm_grammar_vocab whose
 * piece() returns the bytes a token decodes to. As in b1892 a piece ends at its first
 * NUL byte, and a piece that is empty or starts with NUL is never allowed.
 *
 * Differences from b1892 (safety, not behaviour on valid input): rules are validated
 * (unknown types, references to missing rules, malformed character classes and left
 * recursion are refused with a message instead of crashing or overflowing the stack);
 * identical stacks are merged; an EOS or a token the grammar cannot take makes
 * lm_grammar_accept_token fail and leave the grammar unchanged instead of aborting;
 * the limits below bound what any one call costs (docs/hostile-input.md, "Grammars").
 *
 * Thread-safety: a grammar is not shared-mutable; distinct grammars are independent,
 * and const functions may run concurrently on one grammar.
 */
#ifndef LM_GRAMMAR_H
#define LM_GRAMMAR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "sampling/sampling.h"

/* Limits on what a grammar may cost, whoever wrote it:
 *  - LM_GRAMMAR_MAX_STACKS: live stacks after any character. A start rule that
 *    expands to more is refused by lm_grammar_init; a token whose text would make
 *    more is masked by lm_grammar_sample and refused by lm_grammar_accept_token.
 *  - LM_GRAMMAR_MAX_WORK: budget of one lm_grammar_init / _sample / _accept_* call,
 *    in units of about one stack position hashed, compared or copied (plus 8 per
 *    stack), one stack visited, or one class element tested against a character.
 *    Running out of 2^23 units takes about 0.2 s and 35 MiB (release build);
 *    sampling a JSON grammar over a 32000-token vocabulary uses 5000 to 50000. */
#define LM_GRAMMAR_MAX_STACKS 16384
#define LM_GRAMMAR_MAX_WORK (UINT64_C(1) << 23)

/* Same values as llama.h's enum llama_gretype. */
enum lm_gretype {
    LM_GRETYPE_END = 0,            /* end of rule definition */
    LM_GRETYPE_ALT = 1,            /* start of an alternate definition of the rule */
    LM_GRETYPE_RULE_REF = 2,       /* non-terminal: value is the rule id */
    LM_GRETYPE_CHAR = 3,           /* terminal: value is a Unicode code point */
    LM_GRETYPE_CHAR_NOT = 4,       /* inverse class ([^...]); otherwise like CHAR */
    LM_GRETYPE_CHAR_RNG_UPPER = 5, /* makes the preceding CHAR/CHAR_ALT a range [a-z] */
    LM_GRETYPE_CHAR_ALT = 6,       /* another char (or range start) in the same class */
};

/* Same layout as llama_grammar_element. */
struct lm_grammar_element {
    enum lm_gretype type;
    uint32_t value; /* code point or rule id */
};

struct lm_grammar;

/* How the engine sees tokens. piece() returns the token's text (its bytes, not
 * necessarily NUL-terminated) and its length in *len; it may return NULL for "no
 * text". The pointer need only stay valid until the next piece() call. */
struct lm_grammar_vocab {
    const char *(*piece)(void *user, int32_t token, size_t *len);
    void *user;
    int32_t eos; /* end-of-sequence token: allowed exactly when a stack is complete */
};

/* Build a grammar from n_rules rules (each read up to its END; the arrays are deep-
 * copied, so they may live on the caller's stack) starting at rule start_rule.
 * On error returns LM_ERR_INVALID_ARG (NULL arguments, start out of range),
 * LM_ERR_CORRUPT (bad rules, left recursion) or LM_ERR_UNSUPPORTED (the start rule
 * expands to more than LM_GRAMMAR_MAX_STACKS stacks or past the work budget) and
 * writes a message to err (if err_size > 0; otherwise the message is logged). *out
 * is the caller's; free it with lm_grammar_free. */
lm_status lm_grammar_init(const struct lm_grammar_element *const *rules, size_t n_rules, size_t start_rule,
                          struct lm_grammar **out, char *err, size_t err_size);

/* Free a grammar; NULL is a no-op. */
void lm_grammar_free(struct lm_grammar *g);

/* Deep copy (rules, stacks and the partial UTF-8 state); the copy is independent. */
lm_status lm_grammar_copy(const struct lm_grammar *g, struct lm_grammar **out);

/* llama_sample_grammar: set logit = -INFINITY for every candidate whose piece cannot
 * continue any stack, for the EOS token unless a stack is complete, and for empty
 * pieces. Nothing else changes (order, size, sorted). A candidate left finite is
 * one lm_grammar_accept_token takes: tokens needing more than LM_GRAMMAR_MAX_STACKS
 * stacks are masked too. If the call's work budget runs out, every candidate not
 * yet found acceptable is masked and LM_ERR_FULL returned (a warning is logged).
 * LM_ERR_NOMEM on scratch failure (some logits may already be masked then). */
lm_status lm_grammar_sample(const struct lm_grammar *g, struct lm_token_data_array *c,
                            const struct lm_grammar_vocab *vocab);

/* llama_grammar_accept_token: advance the stacks over the token's piece. EOS is
 * accepted (and changes nothing) when a stack is complete. If the grammar cannot
 * take the token, returns LM_ERR_INVALID_ARG and leaves the grammar unchanged
 * (b1892 aborts); LM_ERR_FULL (unchanged too) when taking it would need more than
 * LM_GRAMMAR_MAX_STACKS stacks or more than the work budget. LM_ERR_NOMEM leaves
 * it unchanged too. */
lm_status lm_grammar_accept_token(struct lm_grammar *g, int32_t token, const struct lm_grammar_vocab *vocab);

/* Feed raw UTF-8 text, as if it were one token's piece (a NUL byte ends it).
 * Same result codes and all-or-nothing update as lm_grammar_accept_token. */
lm_status lm_grammar_accept_bytes(struct lm_grammar *g, const char *text, size_t len);

/* True when some stack is complete, i.e. the text so far is a sentence of the
 * grammar (up to a pending partial UTF-8 sequence) and EOS would be allowed. */
bool lm_grammar_is_complete(const struct lm_grammar *g);

/* Number of live stacks (for diagnostics and tests). */
size_t lm_grammar_n_stacks(const struct lm_grammar *g);

/* ---- GBNF (the language of llama.cpp's common/grammar-parser.cpp) ---------------- */

/* A parsed GBNF text: rule ids are numbered as grammar-parser.cpp numbers them (in
 * order of first appearance of a name; groups and repetitions get generated rules
 * named "<rule>_<id>"), so the element arrays equal that parser's output. */
struct lm_gbnf {
    size_t n_rules;
    struct lm_grammar_element **rules; /* rules[i]: elements ending with END */
    size_t *rule_len;                  /* elements in rules[i], END included */
    char **names;                      /* names[i]: symbol name of rule i */
};

/* Parse GBNF text (NUL-terminated). On error returns LM_ERR_CORRUPT and a message
 * "line L, column C: <what>" in err (if err_size > 0; otherwise it is logged).
 * Rules that are referenced but never defined are errors. *out is the caller's;
 * free it with lm_gbnf_free. */
lm_status lm_gbnf_parse(const char *text, struct lm_gbnf **out, char *err, size_t err_size);

/* Free a parse result; NULL is a no-op. */
void lm_gbnf_free(struct lm_gbnf *g);

/* Id of the rule called name; LM_ERR_NOT_FOUND if there is none. */
lm_status lm_gbnf_rule_id(const struct lm_gbnf *g, const char *name, size_t *out_id);

/* Parse text and build a grammar starting at rule `start` ("root" if NULL). Errors
 * as lm_gbnf_parse and lm_grammar_init; a missing start rule is LM_ERR_NOT_FOUND. */
lm_status lm_grammar_from_gbnf(const char *text, const char *start, struct lm_grammar **out, char *err,
                               size_t err_size);

#endif
