/* grammar_stack.c - stack sets and stack expansion for the grammar engine
 * (llama_grammar_advance_stack and the per-character step of b1892).
 *
 * A stack set is a hash set: stacks back to back in a pool, an open-addressing
 * index (linear probing) over their hashes. Adding, and so merging identical
 * stacks, is O(len) expected, not a scan of the set.
 *
 * Expansion replaces a RULE_REF on top of a stack by each alternative of the rule
 * until every stack ends at a char class or is empty. It is memoized: within one
 * output set (lm_grammar_expand_begin), an intermediate stack met again has already
 * been expanded into that set and is skipped. Without the memo, rules with nullable
 * alternatives re-expand the same stack along exponentially many paths
 * (root ::= x x ... x "z", x ::= "" | ""); with it, each distinct intermediate
 * stack is expanded once. No left recursion (checked at init) bounds the pushes.
 *
 * Every stack handled is charged to the call's budget (STACK_UNITS), and every
 * class tested against a code point its length, so one call's time and memory are
 * bounded by LM_GRAMMAR_MAX_WORK whatever the grammar.
 */
#include <stdlib.h>
#include <string.h>

#include "sampling/grammar_impl.h"

/* budget units for hashing, comparing or storing a stack of len positions (about
 * the bytes it occupies, over 4, so the budget bounds memory too) */
#define STACK_UNITS(len) ((uint64_t)(len) + 8)

/* ---- stack sets ------------------------------------------------------------------ */

static uint32_t hash_stack(const uint32_t *s, size_t len)
{
    uint64_t h = 0x9e3779b97f4a7c15u ^ (uint64_t)len;
    for (size_t i = 0; i < len; i++) {
        h = (h ^ s[i]) * 0xbf58476d1ce4e5b9u;
        h ^= h >> 31;
    }
    return (uint32_t)(h ^ (h >> 32));
}

void lm_stackset_free(struct lm_stackset *s)
{
    free(s->pool);
    free(s->st);
    free(s->slot);
    free(s->stamp);
    memset(s, 0, sizeof *s);
}

void lm_stackset_clear(struct lm_stackset *s)
{
    s->n = 0;
    s->pool_len = 0;
    if (s->n_slots && ++s->cur == 0) { /* stamps wrapped: really clear */
        memset(s->stamp, 0, s->n_slots * sizeof *s->stamp);
        s->cur = 1;
    }
}

static bool same_stack(const struct lm_stackset *s, uint32_t k, const uint32_t *stack, size_t len, uint32_t h)
{
    const struct lm_stack_span sp = s->st[k];
    return sp.hash == h && sp.len == len && (len == 0 || !memcmp(s->pool + sp.off, stack, len * sizeof *stack));
}

/* slot for stack k (hash h): the first free one on its probe sequence */
static void index_insert(struct lm_stackset *s, uint32_t k, uint32_t h)
{
    const size_t mask = s->n_slots - 1;
    size_t i = h & mask;
    while (s->stamp[i] == s->cur)
        i = (i + 1) & mask;
    s->stamp[i] = s->cur;
    s->slot[i] = k + 1;
}

/* make the index at least twice as large as `need` stacks, rehashing */
static lm_status index_reserve(struct lm_stackset *s, size_t need)
{
    if (s->n_slots && s->n_slots / 2 >= need)
        return LM_OK;
    size_t ns = s->n_slots ? s->n_slots : 16;
    while (ns / 2 < need) {
        if (ns > SIZE_MAX / 2 / sizeof *s->slot)
            return LM_ERR_NOMEM;
        ns *= 2;
    }
    uint32_t *slot = malloc(ns * sizeof *slot), *stamp = calloc(ns, sizeof *stamp);
    if (!slot || !stamp) {
        free(slot);
        free(stamp);
        return LM_ERR_NOMEM;
    }
    free(s->slot);
    free(s->stamp);
    s->slot = slot;
    s->stamp = stamp;
    s->n_slots = ns;
    s->cur = 1;
    for (size_t k = 0; k < s->n; k++)
        index_insert(s, (uint32_t)k, s->st[k].hash);
    return LM_OK;
}

lm_status lm_stackset_add(struct lm_stackset *s, const uint32_t *stack, size_t len, bool *added, uint32_t *index)
{
    if (len > UINT32_MAX || s->n >= UINT32_MAX - 1)
        return LM_ERR_NOMEM;
    const uint32_t h = hash_stack(stack, len);
    if (s->n_slots) {
        const size_t mask = s->n_slots - 1;
        for (size_t i = h & mask; s->stamp[i] == s->cur; i = (i + 1) & mask) {
            if (same_stack(s, s->slot[i] - 1, stack, len, h)) {
                if (added)
                    *added = false;
                if (index)
                    *index = s->slot[i] - 1;
                return LM_OK;
            }
        }
    }
    /* the pool is allocated even for an empty stack: a set that holds stacks has one */
    if (lm_grammar_grow((void **)&s->pool, &s->pool_cap, s->pool_len + (len ? len : 1), sizeof *s->pool) ||
        lm_grammar_grow((void **)&s->st, &s->cap, s->n + 1, sizeof *s->st) || index_reserve(s, s->n + 1))
        return LM_ERR_NOMEM;
    if (len)
        memcpy(s->pool + s->pool_len, stack, len * sizeof *stack);
    s->st[s->n] = (struct lm_stack_span){s->pool_len, (uint32_t)len, h};
    index_insert(s, (uint32_t)s->n, h);
    s->pool_len += len;
    if (added)
        *added = true;
    if (index)
        *index = (uint32_t)s->n;
    s->n++;
    return LM_OK;
}

static void *dup_or_null(const void *src, size_t n, size_t cap, size_t elem, bool *fail)
{
    if (cap == 0)
        return NULL;
    void *p = malloc(cap * elem);
    if (p && n)
        memcpy(p, src, n * elem);
    else if (!p)
        *fail = true;
    return p;
}

lm_status lm_stackset_copy(struct lm_stackset *dst, const struct lm_stackset *src)
{
    bool fail = false;
    /* a set that holds stacks has a pool, even if they are all empty */
    const size_t pool_cap = src->n ? (src->pool_len ? src->pool_len : 1) : 0;
    memset(dst, 0, sizeof *dst);
    dst->pool = dup_or_null(src->pool, src->pool_len, pool_cap, sizeof *src->pool, &fail);
    dst->st = dup_or_null(src->st, src->n, src->n, sizeof *src->st, &fail);
    dst->slot = dup_or_null(src->slot, src->n_slots, src->n_slots, sizeof *src->slot, &fail);
    dst->stamp = dup_or_null(src->stamp, src->n_slots, src->n_slots, sizeof *src->stamp, &fail);
    if (fail) {
        lm_stackset_free(dst);
        return LM_ERR_NOMEM;
    }
    dst->pool_len = src->pool_len;
    dst->pool_cap = pool_cap;
    dst->n = dst->cap = src->n;
    dst->n_slots = src->n_slots;
    dst->cur = src->cur;
    return LM_OK;
}

/* ---- matching --------------------------------------------------------------------- */

static bool is_end_of_sequence(const struct lm_grammar *g, uint32_t pos)
{
    return g->elems[pos].type == LM_GRETYPE_END || g->elems[pos].type == LM_GRETYPE_ALT;
}

static bool is_class(const struct lm_grammar *g, uint32_t pos)
{
    return g->elems[pos].type == LM_GRETYPE_CHAR || g->elems[pos].type == LM_GRETYPE_CHAR_NOT;
}

bool lm_grammar_match_char(const struct lm_grammar *g, uint32_t pos, uint32_t chr, uint32_t *next)
{
    const struct lm_grammar_element *e = g->elems;
    const bool positive = e[pos].type == LM_GRETYPE_CHAR;
    bool found = false;
    do {
        if (e[pos + 1].type == LM_GRETYPE_CHAR_RNG_UPPER) {
            found = found || (e[pos].value <= chr && chr <= e[pos + 1].value);
            pos += 2;
        } else {
            found = found || e[pos].value == chr;
            pos += 1;
        }
    } while (e[pos].type == LM_GRETYPE_CHAR_ALT);
    *next = pos;
    return found == positive;
}

uint32_t lm_grammar_class_end(const struct lm_grammar *g, uint32_t pos)
{
    uint32_t next;
    lm_grammar_match_char(g, pos, 0, &next);
    return next;
}

bool lm_grammar_match_partial(const struct lm_grammar *g, uint32_t pos, struct lm_partial_utf8 pu)
{
    const struct lm_grammar_element *e = g->elems;
    const bool positive = e[pos].type == LM_GRETYPE_CHAR;
    /* invalid sequence, or a 7-bit char split over two bytes (overlong) */
    if (pu.n_remain < 0 || (pu.n_remain == 1 && pu.value < 2))
        return false;
    /* the code points this partial sequence could still complete to */
    uint32_t low = pu.value << (pu.n_remain * 6);
    uint32_t high = low | ((1u << (pu.n_remain * 6)) - 1);
    if (low == 0) {
        if (pu.n_remain == 2)
            low = 1u << 11;
        else if (pu.n_remain == 3)
            low = 1u << 16;
    }
    do {
        if (e[pos + 1].type == LM_GRETYPE_CHAR_RNG_UPPER) {
            if (e[pos].value <= high && low <= e[pos + 1].value)
                return positive;
            pos += 2;
        } else {
            if (low <= e[pos].value && e[pos].value <= high)
                return positive;
            pos += 1;
        }
    } while (e[pos].type == LM_GRETYPE_CHAR_ALT);
    return !positive;
}

/* ---- scratch and budget ------------------------------------------------------------ */

lm_status lm_grammar_scratch_init(struct lm_grammar_scratch *sc, const struct lm_grammar *g)
{
    memset(sc, 0, sizeof *sc);
    sc->work_left = LM_GRAMMAR_MAX_WORK;
    sc->pos_stamp = calloc(g->n_elems, sizeof *sc->pos_stamp);
    sc->pos_val = malloc(g->n_elems * sizeof *sc->pos_val);
    sc->pos_cur = 1;
    sc->n_pos = g->n_elems;
    if (!sc->pos_stamp || !sc->pos_val) {
        lm_grammar_scratch_free(sc);
        return LM_ERR_NOMEM;
    }
    return LM_OK;
}

void lm_grammar_scratch_free(struct lm_grammar_scratch *sc)
{
    lm_stackset_free(&sc->seen);
    free(sc->work);
    free(sc->buf);
    free(sc->popped);
    free(sc->pos_stamp);
    free(sc->pos_val);
    memset(sc, 0, sizeof *sc);
}

lm_status lm_grammar_charge(struct lm_grammar_scratch *sc, uint64_t units)
{
    if (units > sc->work_left) {
        sc->work_left = 0;
        sc->exhausted = true;
        return LM_ERR_FULL;
    }
    sc->work_left -= units;
    return LM_OK;
}

void lm_grammar_match_reset(struct lm_grammar_scratch *sc)
{
    if (++sc->pos_cur == 0) { /* stamps wrapped: really clear */
        memset(sc->pos_stamp, 0, sc->n_pos * sizeof *sc->pos_stamp);
        sc->pos_cur = 1;
    }
}

lm_status lm_grammar_match_cached(const struct lm_grammar *g, struct lm_grammar_scratch *sc, uint32_t pos,
                                  uint32_t chr, bool *match)
{
    if (sc->pos_stamp[pos] == sc->pos_cur) {
        *match = sc->pos_val[pos] != 0;
        return LM_OK;
    }
    uint32_t next;
    const bool m = lm_grammar_match_char(g, pos, chr, &next);
    lm_status st = lm_grammar_charge(sc, next - pos);
    if (st == LM_OK) {
        sc->pos_stamp[pos] = sc->pos_cur;
        sc->pos_val[pos] = m;
        *match = m;
    }
    return st;
}

/* ---- expansion ------------------------------------------------------------------------ */

void lm_grammar_expand_begin(struct lm_grammar_scratch *sc)
{
    lm_stackset_clear(&sc->seen);
    sc->work_n = 0;
}

/* a stack that ends at a class (or is empty) goes to the output set */
static lm_status emit(struct lm_stackset *out, const uint32_t *stack, size_t len, struct lm_grammar_scratch *sc)
{
    bool added;
    lm_status st = lm_grammar_charge(sc, STACK_UNITS(len));
    if (st == LM_OK)
        st = lm_stackset_add(out, stack, len, &added, NULL);
    if (st == LM_OK && added && out->n > LM_GRAMMAR_MAX_STACKS)
        st = LM_ERR_FULL;
    return st;
}

/* a stack to expand: final ones are emitted, others queued unless met before */
static lm_status queue(const struct lm_grammar *g, const uint32_t *stack, size_t len, struct lm_stackset *out,
                       struct lm_grammar_scratch *sc)
{
    if (len == 0 || is_class(g, stack[len - 1]))
        return emit(out, stack, len, sc);
    bool added;
    uint32_t k;
    lm_status st = lm_grammar_charge(sc, STACK_UNITS(len));
    if (st == LM_OK)
        st = lm_stackset_add(&sc->seen, stack, len, &added, &k);
    if (st == LM_OK && added) {
        st = lm_grammar_grow((void **)&sc->work, &sc->work_cap, sc->work_n + 1, sizeof *sc->work);
        if (st == LM_OK)
            sc->work[sc->work_n++] = k;
    }
    return st;
}

lm_status lm_grammar_advance(const struct lm_grammar *g, const uint32_t *stack, size_t len,
                             struct lm_stackset *out, struct lm_grammar_scratch *sc)
{
    lm_status st = queue(g, stack, len, out, sc);
    while (st == LM_OK && sc->work_n > 0) {
        size_t n;
        const uint32_t *s = lm_stackset_get(&sc->seen, sc->work[--sc->work_n], &n);
        /* copy: queueing below may move the seen pool */
        if ((st = lm_grammar_grow((void **)&sc->buf, &sc->buf_cap, n + 1, sizeof *sc->buf)) != LM_OK)
            break;
        uint32_t *buf = sc->buf;
        memcpy(buf, s, n * sizeof *buf); /* n > 0: only non-empty stacks are queued */
        const uint32_t pos = buf[n - 1];
        const struct lm_grammar_element el = g->elems[pos];
        if (el.type != LM_GRETYPE_RULE_REF) { /* excluded by validation */
            st = LM_ERR_CORRUPT;
            break;
        }
        /* replace the reference by its continuation, then each alternative on top */
        size_t base = n - 1;
        if (!is_end_of_sequence(g, pos + 1))
            buf[base++] = pos + 1;
        const uint32_t rule = el.value;
        for (uint32_t a = 0; a < g->alt_count[rule] && st == LM_OK; a++) {
            const uint32_t start = g->alts[g->alt_first[rule] + a];
            size_t m = base;
            if (!is_end_of_sequence(g, start))
                buf[m++] = start;
            st = queue(g, buf, m, out, sc);
        }
    }
    if (st != LM_OK)
        sc->work_n = 0;
    return st;
}

lm_status lm_grammar_advance_popped(const struct lm_grammar *g, const uint32_t *stack, size_t len,
                                    struct lm_stackset *out, struct lm_grammar_scratch *sc)
{
    lm_status st = lm_grammar_grow((void **)&sc->popped, &sc->popped_cap, len, sizeof *sc->popped);
    if (st != LM_OK)
        return st;
    size_t n = len - 1;
    memcpy(sc->popped, stack, n * sizeof *stack);
    const uint32_t next = lm_grammar_class_end(g, stack[len - 1]);
    if (!is_end_of_sequence(g, next))
        sc->popped[n++] = next;
    return lm_grammar_advance(g, sc->popped, n, out, sc);
}

lm_status lm_grammar_step(const struct lm_grammar *g, const struct lm_stackset *in, uint32_t chr,
                          struct lm_stackset *out, struct lm_grammar_scratch *sc)
{
    lm_status st = lm_grammar_charge(sc, in->n);
    lm_grammar_match_reset(sc);
    lm_grammar_expand_begin(sc);
    for (size_t i = 0; i < in->n && st == LM_OK; i++) {
        size_t len;
        const uint32_t *s = lm_stackset_get(in, i, &len);
        bool match = false;
        if (len == 0)
            continue;
        st = lm_grammar_match_cached(g, sc, s[len - 1], chr, &match);
        if (st == LM_OK && match)
            st = lm_grammar_advance_popped(g, s, len, out, sc);
    }
    return st;
}
