/* grammar_impl.h - internal: the grammar engine's data structures and primitives.
 *
 * Rules are stored flat: elems[] holds every rule back to back, each ending with END;
 * a position is an index into elems[]. A stack is an array of positions (top last).
 * A stack set stores its stacks back to back in one pool and indexes them with an
 * open-addressing hash table, so adding a stack (or finding it is already there)
 * takes O(len) expected time. Positions, not pointers, make copying a grammar a
 * plain memcpy.
 *
 * Cost control (docs/hostile-input.md, "Grammars"): every public call that
 * expands stacks gets a work budget of LM_GRAMMAR_MAX_WORK units in its scratch
 * (struct lm_grammar_scratch) and no stack set may hold more than
 * LM_GRAMMAR_MAX_STACKS stacks; either limit makes the expansion fail with
 * LM_ERR_FULL (sc->exhausted tells which).
 */
#ifndef LM_GRAMMAR_IMPL_H
#define LM_GRAMMAR_IMPL_H

#include "sampling/grammar.h"

struct lm_partial_utf8 {
    uint32_t value; /* bits decoded so far (unshifted) */
    int n_remain;   /* continuation bytes still expected; -1: invalid sequence */
};

struct lm_stack_span {
    size_t off;    /* the stack is pool[off .. off + len) */
    uint32_t len;  /* positions; 0 is the empty (complete) stack */
    uint32_t hash; /* of the positions, for the index */
};

/* A set of distinct stacks. slot[i] holds a stack number + 1 and is in use only
 * when stamp[i] == cur, so clearing the index is `cur++`. n_slots is 0 or a power
 * of two at least twice n. pool is allocated whenever n > 0, even if every stack
 * is empty, and stacks are read through lm_stackset_get, so no code offsets a NULL
 * pool (it did once every stack was empty). A zeroed struct is an empty set. */
struct lm_stackset {
    uint32_t *pool;
    size_t pool_len, pool_cap;
    struct lm_stack_span *st;
    size_t n, cap;
    uint32_t *slot, *stamp;
    size_t n_slots;
    uint32_t cur;
};

struct lm_grammar {
    struct lm_grammar_element *elems; /* all rules, each ending with END */
    size_t n_elems;
    uint32_t *rule_start; /* [n_rules] position of each rule's first element */
    uint32_t *alt_first;  /* [n_rules] index into alts[] of each rule's first alternative */
    uint32_t *alt_count;  /* [n_rules] number of alternatives */
    uint32_t *alts;       /* start position of every alternative, rule by rule */
    size_t n_rules, n_alts;
    struct lm_stackset stacks; /* never empty; at most LM_GRAMMAR_MAX_STACKS */
    struct lm_partial_utf8 partial;
};

/* Scratch of one public call: the expansion memo, work lists, the budget and a
 * per-position cache for matching one code point against many stack tops. */
struct lm_grammar_scratch {
    struct lm_stackset seen; /* intermediate stacks met since lm_grammar_expand_begin */
    uint32_t *work;          /* LIFO of stacks (indices into seen) still to expand */
    size_t work_n, work_cap;
    uint32_t *buf; /* the stack being built */
    size_t buf_cap;
    uint32_t *popped; /* the stack after a class is read (lm_grammar_advance_popped) */
    size_t popped_cap;
    uint64_t work_left; /* budget units left */
    bool exhausted;     /* the budget ran out (rather than the stack limit) */
    uint32_t *pos_stamp, *pos_val; /* [n_elems] cache: valid when pos_stamp[p] == pos_cur */
    uint32_t pos_cur;
    size_t n_pos;
};

/* ---- stack sets (grammar_stack.c) ---------------------------------------------------- */

void lm_stackset_free(struct lm_stackset *s);
/* Forget every stack, keeping the memory. */
void lm_stackset_clear(struct lm_stackset *s);
/* Add a stack unless an identical one is present; *added (may be NULL) says which
 * and *index (may be NULL) receives its number. LM_ERR_NOMEM leaves s unchanged. */
lm_status lm_stackset_add(struct lm_stackset *s, const uint32_t *stack, size_t len, bool *added, uint32_t *index);
/* dst (uninitialised) becomes an independent copy of src. */
lm_status lm_stackset_copy(struct lm_stackset *dst, const struct lm_stackset *src);

/* Stack i of s: returns its positions (NULL when it is empty; never pointer
 * arithmetic on a NULL pool) and writes its length. */
static inline const uint32_t *lm_stackset_get(const struct lm_stackset *s, size_t i, size_t *len)
{
    *len = s->st[i].len;
    return *len ? s->pool + s->st[i].off : NULL;
}

/* ---- expansion (grammar_stack.c) ----------------------------------------------------- */

/* Prepare sc for grammar g with a full budget (allocates the position cache). */
lm_status lm_grammar_scratch_init(struct lm_grammar_scratch *sc, const struct lm_grammar *g);
void lm_grammar_scratch_free(struct lm_grammar_scratch *sc);

/* Spend `units` of the budget: LM_ERR_FULL (and sc->exhausted) when it is spent. */
lm_status lm_grammar_charge(struct lm_grammar_scratch *sc, uint64_t units);

/* Start filling a new output set: forgets the memo of intermediate stacks, which is
 * valid only while every expansion goes to the same output set. */
void lm_grammar_expand_begin(struct lm_grammar_scratch *sc);

/* Expand a stack into stacks that each end at a char class (or are empty), adding
 * them to out (llama_grammar_advance_stack). Intermediate stacks already expanded
 * since lm_grammar_expand_begin are skipped (their results are in out already).
 * LM_ERR_FULL when out would exceed LM_GRAMMAR_MAX_STACKS or the budget is spent. */
lm_status lm_grammar_advance(const struct lm_grammar *g, const uint32_t *stack, size_t len,
                             struct lm_stackset *out, struct lm_grammar_scratch *sc);

/* Does chr match the char class at pos? *next receives the position after the class. */
bool lm_grammar_match_char(const struct lm_grammar *g, uint32_t pos, uint32_t chr, uint32_t *next);

/* Position after the char class at pos. */
uint32_t lm_grammar_class_end(const struct lm_grammar *g, uint32_t pos);

/* Could a completion of the partial UTF-8 sequence match the class at pos? */
bool lm_grammar_match_partial(const struct lm_grammar *g, uint32_t pos, struct lm_partial_utf8 pu);

/* Does chr match the class at pos? Cached per position until the next
 * lm_grammar_match_reset; the first test of a position is charged its class length. */
lm_status lm_grammar_match_cached(const struct lm_grammar *g, struct lm_grammar_scratch *sc, uint32_t pos,
                                  uint32_t chr, bool *match);
/* Forget the cache of lm_grammar_match_cached (a new code point follows). */
void lm_grammar_match_reset(struct lm_grammar_scratch *sc);

/* The stacks after reading code point chr from every stack in `in`, added to out
 * (which the caller clears). Same cost accounting, order and limits as the
 * sampler's per-character expansion, so a token the sampler allows is accepted. */
lm_status lm_grammar_step(const struct lm_grammar *g, const struct lm_stackset *in, uint32_t chr,
                          struct lm_stackset *out, struct lm_grammar_scratch *sc);

/* lm_grammar_advance of the stack left when the char class on top of stack (len > 0)
 * has been read: the top replaced by the position after the class, or dropped when
 * the alternative ends there. */
lm_status lm_grammar_advance_popped(const struct lm_grammar *g, const uint32_t *stack, size_t len,
                                    struct lm_stackset *out, struct lm_grammar_scratch *sc);

/* ---- text ----------------------------------------------------------------------------- */

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

/* Make room for `need` elements of `elem` bytes in *p (capacity *cap):
 * the capacity doubles from 16 until it is enough. LM_ERR_NOMEM (nothing
 * changed) when the allocation fails or the size would overflow. */
lm_status lm_grammar_grow(void **p, size_t *cap, size_t need, size_t elem);

/* write a message to err (err_size > 0) or log it */
void lm_grammar_error(char *err, size_t err_size, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

#endif
