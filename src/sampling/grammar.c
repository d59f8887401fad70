/* grammar.c - the grammar engine: rule storage, validation and construction, copies
 * (llama_grammar_init / _copy / _free of b1892). Stack sets and expansion are in
 * grammar_stack.c, masking and accepting in grammar_sample.c.
 *
 * Invariants once a grammar is built: every RULE_REF names an existing rule; every
 * CHAR_RNG_UPPER / CHAR_ALT continues a char class; no rule can reach itself without
 * consuming a character (no left recursion), so expanding a stack terminates; every
 * stack in g->stacks is empty or ends at a CHAR / CHAR_NOT position; g->stacks is
 * never empty and holds at most LM_GRAMMAR_MAX_STACKS stacks.
 *
 * Validation is linear in the number of elements (nullable rules by a work list,
 * left recursion by one depth-first search); the initial expansion is bounded by
 * the stack limit and the work budget, past which the grammar is refused.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "sampling/grammar_impl.h"

void lm_grammar_error(char *err, size_t err_size, const char *fmt, ...)
{
    char buf[512];
    const bool to_caller = err && err_size;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(to_caller ? err : buf, to_caller ? err_size : sizeof buf, fmt, ap);
    va_end(ap);
    if (!to_caller)
        LM_LOG_ERR("grammar: %s\n", buf);
}

lm_status lm_grammar_grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return LM_OK;
    size_t n = *cap ? *cap : 16;
    while (n < need) {
        if (n > SIZE_MAX / 2 / elem)
            return LM_ERR_NOMEM;
        n *= 2;
    }
    void *q = realloc(*p, n * elem);
    if (!q)
        return LM_ERR_NOMEM;
    *p = q;
    *cap = n;
    return LM_OK;
}

static bool is_end_of_sequence(const struct lm_grammar *g, uint32_t pos)
{
    return g->elems[pos].type == LM_GRETYPE_END || g->elems[pos].type == LM_GRETYPE_ALT;
}

/* ---- rule validation --------------------------------------------------------------- */

static const char *rule_name(const char *const *names, size_t r, char *buf, size_t cap)
{
    if (names && names[r])
        return names[r];
    snprintf(buf, cap, "#%zu", r);
    return buf;
}

static lm_status validate_elements(const struct lm_grammar *g, const char *const *names, char *err, size_t cap)
{
    char nb[32];
    for (size_t r = 0; r < g->n_rules; r++) {
        const uint32_t s = g->rule_start[r];
        for (uint32_t p = s; g->elems[p].type != LM_GRETYPE_END; p++) {
            const struct lm_grammar_element e = g->elems[p];
            const enum lm_gretype prev = p > s ? g->elems[p - 1].type : LM_GRETYPE_END;
            const char *why = NULL;
            if ((unsigned)e.type > LM_GRETYPE_CHAR_ALT)
                why = "unknown element type";
            else if (e.type == LM_GRETYPE_RULE_REF && e.value >= g->n_rules)
                why = "reference to a rule that does not exist";
            else if (e.type == LM_GRETYPE_CHAR_RNG_UPPER && prev != LM_GRETYPE_CHAR &&
                     prev != LM_GRETYPE_CHAR_NOT && prev != LM_GRETYPE_CHAR_ALT)
                why = "range end without a preceding character";
            else if (e.type == LM_GRETYPE_CHAR_ALT && prev != LM_GRETYPE_CHAR && prev != LM_GRETYPE_CHAR_NOT &&
                     prev != LM_GRETYPE_CHAR_ALT && prev != LM_GRETYPE_CHAR_RNG_UPPER)
                why = "alternate character outside a character class";
            if (why) {
                lm_grammar_error(err, cap, "rule %s, element %u (type %d, value %u): %s",
                                 rule_name(names, r, nb, sizeof nb), p - s, (int)e.type, e.value, why);
                return LM_ERR_CORRUPT;
            }
        }
    }
    return LM_OK;
}

/* Rules reachable from rule r before any character is consumed, in alt order. */
static lm_status left_edges(const struct lm_grammar *g, const bool *nullable, uint32_t **adj_off, uint32_t **adj)
{
    size_t n = 0, cap = 0;
    uint32_t *off = malloc((g->n_rules + 1) * sizeof *off), *a = NULL;
    if (!off)
        return LM_ERR_NOMEM;
    for (size_t r = 0; r < g->n_rules; r++) {
        off[r] = (uint32_t)n;
        for (uint32_t i = 0; i < g->alt_count[r]; i++) {
            for (uint32_t p = g->alts[g->alt_first[r] + i]; !is_end_of_sequence(g, p); p++) {
                if (g->elems[p].type != LM_GRETYPE_RULE_REF)
                    break;
                if (lm_grammar_grow((void **)&a, &cap, n + 1, sizeof *a)) {
                    free(off);
                    free(a);
                    return LM_ERR_NOMEM;
                }
                a[n++] = g->elems[p].value;
                if (!nullable[g->elems[p].value])
                    break;
            }
        }
    }
    off[g->n_rules] = (uint32_t)n;
    *adj_off = off;
    *adj = a;
    return LM_OK;
}

/* Which rules can match the empty string, in O(elements): an alternative is nullable
 * when each of its elements is a reference to a nullable rule. pending[a] counts the
 * references of alternative a not yet known nullable (UINT32_MAX: it has a
 * terminal); when a rule becomes nullable, each alternative referring to it counts
 * down, and one reaching zero makes its rule nullable in turn. */
static lm_status compute_nullable(const struct lm_grammar *g, bool *nullable)
{
    const size_t nr = g->n_rules, na = g->n_alts;
    uint32_t *pending = calloc(na, sizeof *pending), *alt_rule = malloc(na * sizeof *alt_rule);
    uint32_t *occ_off = calloc(nr + 1, sizeof *occ_off), *occ = malloc(g->n_elems * sizeof *occ);
    uint32_t *queue = malloc(nr * sizeof *queue);
    size_t qn = 0;
    lm_status st = pending && alt_rule && occ_off && occ && queue ? LM_OK : LM_ERR_NOMEM;
    /* pass 1: count references per alternative and per rule referred to */
    for (uint32_t r = 0; st == LM_OK && r < nr; r++) {
        for (uint32_t i = g->alt_first[r]; i < g->alt_first[r] + g->alt_count[r]; i++) {
            alt_rule[i] = r;
            for (uint32_t p = g->alts[i]; !is_end_of_sequence(g, p); p++) {
                if (g->elems[p].type != LM_GRETYPE_RULE_REF) {
                    pending[i] = UINT32_MAX;
                    break;
                }
                pending[i]++;
                occ_off[g->elems[p].value + 1]++;
            }
        }
    }
    for (size_t r = 0; st == LM_OK && r < nr; r++)
        occ_off[r + 1] += occ_off[r];
    /* pass 2: the alternatives each rule occurs in (occ_off[r] advances as it fills) */
    for (uint32_t i = 0; st == LM_OK && i < na; i++)
        for (uint32_t p = g->alts[i]; !is_end_of_sequence(g, p) && g->elems[p].type == LM_GRETYPE_RULE_REF; p++)
            occ[occ_off[g->elems[p].value]++] = i;
    for (size_t r = nr; st == LM_OK && r > 0; r--) /* restore the starts */
        occ_off[r] = occ_off[r - 1];
    if (st == LM_OK)
        occ_off[0] = 0;
    for (uint32_t i = 0; st == LM_OK && i < na; i++) {
        if (pending[i] == 0 && !nullable[alt_rule[i]]) {
            nullable[alt_rule[i]] = true;
            queue[qn++] = alt_rule[i];
        }
    }
    while (st == LM_OK && qn > 0) {
        const uint32_t r = queue[--qn];
        for (uint32_t k = occ_off[r]; k < occ_off[r + 1]; k++) {
            const uint32_t i = occ[k];
            if (pending[i] != UINT32_MAX && --pending[i] == 0 && !nullable[alt_rule[i]]) {
                nullable[alt_rule[i]] = true;
                queue[qn++] = alt_rule[i];
            }
        }
    }
    free(pending);
    free(alt_rule);
    free(occ_off);
    free(occ);
    free(queue);
    return st;
}

static void report_cycle(const uint32_t *path, size_t depth, uint32_t target, const char *const *names, char *err,
                         size_t cap)
{
    char msg[400], nb[32];
    size_t i = 0, len = 0;
    while (i < depth && path[i] != target)
        i++;
    for (size_t j = i; j <= depth && len < sizeof msg; j++) {
        uint32_t r = j < depth ? path[j] : target;
        len += (size_t)snprintf(msg + len, sizeof msg - len, "%s%s", j > i ? " -> " : "",
                                rule_name(names, r, nb, sizeof nb));
    }
    lm_grammar_error(err, cap, "rule %s is left-recursive (%s)", rule_name(names, target, nb, sizeof nb), msg);
}

/* Depth-first search for a cycle of left edges, iteratively (rules may be many). */
static lm_status check_left_recursion(const struct lm_grammar *g, const char *const *names, char *err, size_t cap)
{
    const size_t n = g->n_rules;
    bool *nullable = calloc(n, sizeof *nullable);
    uint8_t *color = calloc(n, 1); /* 0 new, 1 on the path, 2 done */
    uint32_t *path = malloc(n * sizeof *path), *next = malloc(n * sizeof *next);
    uint32_t *off = NULL, *adj = NULL;
    lm_status st = LM_ERR_NOMEM;
    if (!nullable || !color || !path || !next)
        goto out;
    if ((st = compute_nullable(g, nullable)) != LM_OK)
        goto out;
    if ((st = left_edges(g, nullable, &off, &adj)) != LM_OK)
        goto out;
    for (uint32_t root = 0; root < n && st == LM_OK; root++) {
        if (color[root])
            continue;
        size_t depth = 0;
        path[0] = root;
        next[0] = off[root];
        color[root] = 1;
        while (depth != SIZE_MAX) {
            const uint32_t r = path[depth];
            if (next[depth] == off[r + 1]) {
                color[r] = 2;
                depth--; /* wraps to SIZE_MAX after the root */
                continue;
            }
            const uint32_t q = adj[next[depth]++];
            if (color[q] == 1) {
                report_cycle(path, depth + 1, q, names, err, cap);
                st = LM_ERR_CORRUPT;
                break;
            }
            if (color[q] == 0) {
                color[q] = 1;
                path[++depth] = q;
                next[depth] = off[q];
            }
        }
    }
out:
    free(nullable);
    free(color);
    free(path);
    free(next);
    free(off);
    free(adj);
    return st;
}

/* ---- construction ------------------------------------------------------------------- */

void lm_grammar_free(struct lm_grammar *g)
{
    if (!g)
        return;
    free(g->elems);
    free(g->rule_start);
    free(g->alt_first);
    free(g->alt_count);
    free(g->alts);
    lm_stackset_free(&g->stacks);
    free(g);
}

/* copy the caller's rules into g->elems and index rules and alternatives */
static lm_status copy_rules(struct lm_grammar *g, const struct lm_grammar_element *const *rules, size_t n_rules,
                            char *err, size_t cap)
{
    size_t total = 0, n_alts = 0;
    for (size_t r = 0; r < n_rules; r++) {
        if (!rules[r]) {
            lm_grammar_error(err, cap, "rule #%zu is NULL", r);
            return LM_ERR_INVALID_ARG;
        }
        size_t i = 0;
        for (; rules[r][i].type != LM_GRETYPE_END; i++)
            n_alts += rules[r][i].type == LM_GRETYPE_ALT;
        total += i + 1;
        n_alts++;
        if (total >= UINT32_MAX / 2) {
            lm_grammar_error(err, cap, "grammar too large");
            return LM_ERR_INVALID_ARG;
        }
    }
    g->n_rules = n_rules;
    g->n_elems = total;
    g->n_alts = n_alts;
    g->elems = malloc(total * sizeof *g->elems);
    g->rule_start = malloc(n_rules * sizeof *g->rule_start);
    g->alt_first = malloc(n_rules * sizeof *g->alt_first);
    g->alt_count = malloc(n_rules * sizeof *g->alt_count);
    g->alts = malloc(n_alts * sizeof *g->alts);
    if (!g->elems || !g->rule_start || !g->alt_first || !g->alt_count || !g->alts)
        return LM_ERR_NOMEM;
    uint32_t pos = 0, a = 0;
    for (size_t r = 0; r < n_rules; r++) {
        g->rule_start[r] = pos;
        g->alt_first[r] = a;
        g->alts[a++] = pos;
        for (size_t i = 0; rules[r][i].type != LM_GRETYPE_END; i++) {
            g->elems[pos++] = rules[r][i];
            if (rules[r][i].type == LM_GRETYPE_ALT)
                g->alts[a++] = pos;
        }
        g->elems[pos++] = (struct lm_grammar_element){LM_GRETYPE_END, 0};
        g->alt_count[r] = a - g->alt_first[r];
    }
    return LM_OK;
}

lm_status lm_grammar_init_named(const struct lm_grammar_element *const *rules, size_t n_rules, size_t start_rule,
                                const char *const *names, struct lm_grammar **out, char *err, size_t err_size)
{
    if (!rules || !out || n_rules == 0 || start_rule >= n_rules) {
        lm_grammar_error(err, err_size, "invalid arguments (%zu rules, start rule %zu)", n_rules, start_rule);
        return LM_ERR_INVALID_ARG;
    }
    struct lm_grammar *g = calloc(1, sizeof *g);
    struct lm_grammar_scratch sc = {0};
    lm_status st = g ? copy_rules(g, rules, n_rules, err, err_size) : LM_ERR_NOMEM;
    if (st == LM_OK)
        st = validate_elements(g, names, err, err_size);
    if (st == LM_OK)
        st = check_left_recursion(g, names, err, err_size);
    if (st == LM_OK)
        st = lm_grammar_scratch_init(&sc, g);
    /* the initial stacks: one expansion per alternative of the start rule */
    if (st == LM_OK)
        lm_grammar_expand_begin(&sc);
    for (uint32_t a = 0; st == LM_OK && a < g->alt_count[start_rule]; a++) {
        uint32_t pos = g->alts[g->alt_first[start_rule] + a];
        st = lm_grammar_advance(g, &pos, is_end_of_sequence(g, pos) ? 0 : 1, &g->stacks, &sc);
    }
    if (st == LM_ERR_FULL) {
        if (sc.exhausted)
            lm_grammar_error(err, err_size, "the grammar is too ambiguous: expanding its start rule takes more "
                                            "than %llu work units", (unsigned long long)LM_GRAMMAR_MAX_WORK);
        else
            lm_grammar_error(err, err_size, "the grammar is too ambiguous: its start rule expands to more than %d "
                                            "stacks", LM_GRAMMAR_MAX_STACKS);
        st = LM_ERR_UNSUPPORTED;
    }
    lm_grammar_scratch_free(&sc);
    if (st == LM_ERR_NOMEM)
        lm_grammar_error(err, err_size, "out of memory");
    if (st != LM_OK) {
        lm_grammar_free(g);
        return st;
    }
    *out = g;
    return LM_OK;
}

lm_status lm_grammar_init(const struct lm_grammar_element *const *rules, size_t n_rules, size_t start_rule,
                          struct lm_grammar **out, char *err, size_t err_size)
{
    return lm_grammar_init_named(rules, n_rules, start_rule, NULL, out, err, err_size);
}

static void *dup_array(const void *src, size_t n, size_t elem)
{
    void *p = malloc(n ? n * elem : 1);
    if (p && n)
        memcpy(p, src, n * elem);
    return p;
}

lm_status lm_grammar_copy(const struct lm_grammar *g, struct lm_grammar **out)
{
    if (!g || !out)
        return LM_ERR_INVALID_ARG;
    struct lm_grammar *c = calloc(1, sizeof *c);
    if (!c)
        return LM_ERR_NOMEM;
    c->n_elems = g->n_elems;
    c->n_rules = g->n_rules;
    c->n_alts = g->n_alts;
    c->partial = g->partial;
    c->elems = dup_array(g->elems, g->n_elems, sizeof *g->elems);
    c->rule_start = dup_array(g->rule_start, g->n_rules, sizeof *g->rule_start);
    c->alt_first = dup_array(g->alt_first, g->n_rules, sizeof *g->alt_first);
    c->alt_count = dup_array(g->alt_count, g->n_rules, sizeof *g->alt_count);
    c->alts = dup_array(g->alts, g->n_alts, sizeof *g->alts);
    lm_status st = lm_stackset_copy(&c->stacks, &g->stacks);
    if (st != LM_OK || !c->elems || !c->rule_start || !c->alt_first || !c->alt_count || !c->alts) {
        lm_grammar_free(c);
        return LM_ERR_NOMEM;
    }
    *out = c;
    return LM_OK;
}

bool lm_grammar_is_complete(const struct lm_grammar *g)
{
    for (size_t i = 0; i < g->stacks.n; i++)
        if (g->stacks.st[i].len == 0)
            return true;
    return false;
}

size_t lm_grammar_n_stacks(const struct lm_grammar *g)
{
    return g->stacks.n;
}
