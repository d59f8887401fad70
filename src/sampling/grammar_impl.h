/* grammar_impl.h - internal: the grammar engine's data structures and primitives.
 *
 * Rules are stored flat: elems[] holds every rule back to back, each ending with END;
 * a position is an index into elems[]. A stack is an array of positions (top last).
 * A stack set stores its stacks back to back in one pool. Positions, not pointers,
 * make copying a grammar a plain memcpy.
 */
#ifndef LM_GRAMMAR_IMPL_H
#define LM_GRAMMAR_IMPL_H

#include "sampling/grammar.h"

struct lm_partial_utf8 {
    uint32_t value; /* bits decoded so far (unshifted) */
    int n_remain;   /* continuation bytes still expected; -1: invalid sequence */
};

struct lm_stack_span {
    size_t off, len; /* the stack is pool[off .. off + len) */
};

struct lm_stackset {
    uint32_t *pool;
    size_t pool_len, pool_cap;
    struct lm_stack_span *st;
    size_t n, cap;
};

struct lm_grammar {
    struct lm_grammar_element *elems; /* all rules, each ending with END */
    size_t n_elems;
    uint32_t *rule_start; /* [n_rules] position of each rule's first element */
    uint32_t *alt_first;  /* [n_rules] index into alts[] of each rule's first alternative */
    uint32_t *alt_count;  /* [n_rules] number of alternatives */
    uint32_t *alts;       /* start position of every alternative, rule by rule */
    size_t n_rules, n_alts;
    struct lm_stackset stacks;
    struct lm_partial_utf8 partial;
};

/* scratch for advance(): a LIFO work list and one stack buffer */
struct lm_grammar_scratch {
    struct lm_stackset work;
    uint32_t *buf;
    size_t buf_cap;
};

void lm_stackset_free(struct lm_stackset *s);
/* append a stack unless an identical one is present */
lm_status lm_stackset_add(struct lm_stackset *s, const uint32_t *stack, size_t len);
lm_status lm_stackset_copy(struct lm_stackset *dst, const struct lm_stackset *src);

void lm_grammar_scratch_free(struct lm_grammar_scratch *sc);

/* Expand a stack into stacks that each end at a char class (or are empty), adding
 * them to out (llama_grammar_advance_stack). */
lm_status lm_grammar_advance(const struct lm_grammar *g, const uint32_t *stack, size_t len,
                             struct lm_stackset *out, struct lm_grammar_scratch *sc);

/* Does chr match the char class at pos? *next receives the position after the class. */
bool lm_grammar_match_char(const struct lm_grammar *g, uint32_t pos, uint32_t chr, uint32_t *next);

/* Could a completion of the partial UTF-8 sequence match the class at pos? */
bool lm_grammar_match_partial(const struct lm_grammar *g, uint32_t pos, struct lm_partial_utf8 pu);

/* The stacks after reading code point chr from every stack in `in` (added to out). */
lm_status lm_grammar_step(const struct lm_grammar *g, const struct lm_stackset *in, uint32_t chr,
                          struct lm_stackset *out, struct lm_grammar_scratch *sc);

/* b1892's decode_utf8: decode s[0..len) (stopping at a NUL byte) continuing the
 * partial sequence `start`. Writes the code points to cps (room for len + 1) and
 * returns their number; *end receives the new partial state. An invalid sequence
 * yields no code points and end->n_remain == -1. */
size_t lm_grammar_decode_utf8(const char *s, size_t len, struct lm_partial_utf8 start, uint32_t *cps,
                              struct lm_partial_utf8 *end);

/* Internal entry of lm_grammar_sample: from code point max_depth on, candidates are
 * checked one by one (stepping the stack set) instead of by the batched recursion.
 * Both give the same answer; tests compare max_depth 0 (all one by one) with the
 * default. */
lm_status lm_grammar_sample_depth(const struct lm_grammar *g, struct lm_token_data_array *c,
                                  const struct lm_grammar_vocab *vocab, size_t max_depth);

/* lm_grammar_init with rule names for messages (names may be NULL). */
lm_status lm_grammar_init_named(const struct lm_grammar_element *const *rules, size_t n_rules, size_t start_rule,
                                const char *const *names, struct lm_grammar **out, char *err, size_t err_size);

/* write a message to err (err_size > 0) or log it */
/* Make room for `need` elements of `elem` bytes in *p (capacity *cap):
 * the capacity doubles from 16 until it is enough. LM_ERR_NOMEM (nothing
 * changed) when the allocation fails or the size would overflow. */
lm_status lm_grammar_grow(void **p, size_t *cap, size_t need, size_t elem);

void lm_grammar_error(char *err, size_t err_size, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

#endif
