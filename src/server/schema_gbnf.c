/* schema_gbnf.c - grammar text for the JSON Schema converter (schema_int.h):
 * growable text buffers with the size cap, GBNF literals and rule names, the
 * shared JSON rules, bounded repetitions as rule chains, and the checks every
 * grammar passes before it is returned.
 *
 * lamina's GBNF (sampling/gbnf.c) has no {m,n} and lets a rule continue on the
 * next line after `::=` or `|`: so repetitions are chains "<item>-upto-k ::= |
 * <item> <item>-upto-(k-1)", an empty alternative always comes first, and an
 * empty rule is written `""`.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sampling/grammar.h"
#include "server/schema_int.h"

void lm_schema_fail(struct gen *g, lm_status st, const char *fmt, ...)
{
    if (g->st != LM_OK)
        return;
    g->st = st;
    if (g->errlen > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(g->err, g->errlen, fmt, ap);
        va_end(ap);
    }
}

/* ---- text buffers ------------------------------------------------------------ */

/* After a failed put or printf: record why (the first failure wins). */
static void put_failed(struct gen *g, lm_status st)
{
    if (st == LM_ERR_FULL)
        lm_schema_fail(g, LM_ERR_UNSUPPORTED, "schema: the grammar would exceed %u bytes", (unsigned)LM_SCHEMA_MAX_GBNF);
    else if (st == LM_ERR_NOMEM)
        lm_schema_fail(g, LM_ERR_NOMEM, "schema: out of memory");
    else
        lm_schema_fail(g, LM_ERR_INVALID_ARG, "schema: formatting failed");
}

/* Every buffer is held below LM_SCHEMA_MAX_GBNF, and so is the output. */
static bool room(struct gen *g, struct lm_strbuf *b, size_t n)
{
    if (g->st != LM_OK)
        return false;
    b->max = LM_SCHEMA_MAX_GBNF - 1;
    if (n > LM_SCHEMA_MAX_GBNF || g->out.n + n >= LM_SCHEMA_MAX_GBNF) {
        put_failed(g, LM_ERR_FULL);
        return false;
    }
    return true;
}

void lm_schema_put(struct gen *g, struct lm_strbuf *b, const char *s, size_t n)
{
    if (room(g, b, n)) {
        const lm_status st = lm_strbuf_put(b, s, n);
        if (st != LM_OK)
            put_failed(g, st);
    }
}

void lm_schema_puts(struct gen *g, struct lm_strbuf *b, const char *s) { lm_schema_put(g, b, s, strlen(s)); }

void lm_schema_printf(struct gen *g, struct lm_strbuf *b, const char *fmt, ...)
{
    if (g->st != LM_OK)
        return;
    b->max = LM_SCHEMA_MAX_GBNF - 1;
    const size_t before = b->n, out_before = b == &g->out ? before : g->out.n;
    va_list ap;
    va_start(ap, fmt);
    const lm_status st = lm_strbuf_vprintf(b, fmt, ap);
    va_end(ap);
    if (st != LM_OK)
        put_failed(g, st);
    else if (out_before + (b->n - before) >= LM_SCHEMA_MAX_GBNF) /* the check room() makes before a put */
        put_failed(g, LM_ERR_FULL);
}

/* append s as a GBNF string literal */
void lm_schema_literal(struct gen *g, struct lm_strbuf *b, const char *s, size_t n)
{
    lm_schema_put(g, b, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        const unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\')
            lm_schema_printf(g, b, "\\%c", c);
        else if (c < 0x20 || c == 0x7f)
            lm_schema_printf(g, b, "\\x%02X", c);
        else
            lm_schema_put(g, b, (const char *)&s[i], 1);
    }
    lm_schema_put(g, b, "\"", 1);
}

/* write the rule `name ::= body` */
void lm_schema_emit(struct gen *g, const char *name, const struct lm_strbuf *body)
{
    lm_schema_printf(g, &g->out, "%s ::= %s\n", name,
                     body->n ? body->p : "\"\""); /* empty: `""`, or it joins the next line */
}

/* a fresh rule name from a hint (any bytes) */
void lm_schema_new_name(struct gen *g, const char *hint, char name[NAME_LEN])
{
    int n = snprintf(name, NAME_LEN, "r%zu", g->n_names++);
    if (hint && *hint && n > 0 && n < NAME_LEN - HINT_LEN - 2) {
        name[n++] = '-';
        for (size_t i = 0; hint[i] && i < HINT_LEN; i++) {
            const char c = hint[i];
            const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
            name[n++] = ok ? c : '-';
        }
        name[n] = 0;
    }
}

/* compact JSON text of a value (caller frees), NULL on failure */
char *lm_schema_json_text(struct gen *g, const json_t *v)
{
    char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY | JSON_REAL_PRECISION(15));
    if (!s)
        lm_schema_fail(g, LM_ERR_NOMEM, "schema: cannot serialize a value");
    return s;
}

/* ---- shared rules ---------------------------------------------------------- */

static const struct prim {
    const char *name, *body;
    unsigned deps;
} PRIMS[P_COUNT] = {
    [P_WS] = {"ws", NULL, 1u << P_WSC}, /* body: a chain of WS_MAX wsc */
    [P_WSC] = {"wsc", "[ \\t\\n]", 0},
    [P_VALUE] = {"value", "object | array | string | number | boolean | null",
                 1u << P_OBJECT | 1u << P_ARRAY | 1u << P_STRING | 1u << P_NUMBER | 1u << P_BOOLEAN | 1u << P_NULL},
    [P_OBJECT] = {"object", "\"{\" ws ( member ws ( \",\" ws member ws )* )? \"}\"", 1u << P_WS | 1u << P_MEMBER},
    [P_MEMBER] = {"member", "string ws \":\" ws value", 1u << P_STRING | 1u << P_WS | 1u << P_VALUE},
    [P_ARRAY] = {"array", "\"[\" ws ( value ws ( \",\" ws value ws )* )? \"]\"", 1u << P_WS | 1u << P_VALUE},
    [P_STRING] = {"string", "\"\\\"\" char* \"\\\"\"", 1u << P_CHAR},
    [P_CHAR] = {"char",
                "[^\"\\\\\\x00-\\x1F] | \"\\\\\" ( [\"\\\\/bfnrt] | \"u\" [0-9a-fA-F] [0-9a-fA-F] "
                "[0-9a-fA-F] [0-9a-fA-F] )",
                0},
    [P_NUMBER] = {"number", "integer ( \".\" [0-9]+ )? ( [eE] [-+]? [0-9]+ )?", 1u << P_INTEGER},
    [P_INTEGER] = {"integer", "\"-\"? ( \"0\" | [1-9] [0-9]* )", 0},
    [P_BOOLEAN] = {"boolean", "\"true\" | \"false\"", 0},
    [P_NULL] = {"null", "\"null\"", 0},
    [P_XTAIL] = {"xtail", "[^\"\\\\\\x00-\\x1F]* \"\\\"\"", 0},
};

static void rep_chain(struct gen *g, const char *item, int64_t k, bool star, char out[NAME_LEN]);

/* name of shared rule id, written on first use */
const char *lm_schema_prim(struct gen *g, int id)
{
    if (!(g->prims & 1u << id)) {
        g->prims |= 1u << id;
        if (id == P_WS) {
            char chain[NAME_LEN];
            rep_chain(g, "wsc", WS_MAX, false, chain);
            lm_schema_printf(g, &g->out, "ws ::= %s\n", chain);
        } else {
            lm_schema_printf(g, &g->out, "%s ::= %s\n", PRIMS[id].name, PRIMS[id].body);
        }
        for (int d = 0; d < P_COUNT; d++)
            if (PRIMS[id].deps & 1u << d)
                lm_schema_prim(g, d);
    }
    return PRIMS[id].name;
}

/* ---- repetition -------------------------------------------------------------- */

/* Name of "<item>-upto-k" (k >= 1: 0 to k items) or, if star, "<item>-star" (any
 * number), writing the rules not yet written. */
static void rep_chain(struct gen *g, const char *item, int64_t k, bool star, char out[NAME_LEN])
{
    struct rep_memo *m = NULL;
    for (size_t i = 0; i < g->n_reps && !m; i++)
        if (!strcmp(g->reps[i].item, item))
            m = &g->reps[i];
    if (!m) {
        if (g->n_reps == g->cap_reps) {
            const size_t cap = g->cap_reps ? 2 * g->cap_reps : 16;
            struct rep_memo *r = realloc(g->reps, cap * sizeof *r);
            if (!r) {
                lm_schema_fail(g, LM_ERR_NOMEM, "schema: out of memory");
                snprintf(out, NAME_LEN, "%s", item);
                return;
            }
            g->reps = r;
            g->cap_reps = cap;
        }
        m = &g->reps[g->n_reps++];
        snprintf(m->item, NAME_LEN, "%s", item);
        m->upto = 0;
        m->star = false;
    }
    if (star) {
        snprintf(out, NAME_LEN, "%s-star", item);
        if (!m->star)
            lm_schema_printf(g, &g->out, "%s ::= | %s %s\n", out, item, out);
        m->star = true;
        return;
    }
    for (int64_t j = m->upto + 1; j <= k && g->st == LM_OK; j++) {
        if (j == 1)
            lm_schema_printf(g, &g->out, "%s-upto-1 ::= | %s\n", item, item);
        else
            lm_schema_printf(g, &g->out, "%s-upto-%lld ::= | %s %s-upto-%lld\n", item, (long long)j, item, item,
                             (long long)(j - 1));
    }
    if (k > m->upto)
        m->upto = k;
    snprintf(out, NAME_LEN, "%s-upto-%lld", item, (long long)k);
}

/* append lo to hi (hi < 0: any number of) copies of rule item to b */
void lm_schema_repeat(struct gen *g, struct lm_strbuf *b, const char *item, int64_t lo, int64_t hi)
{
    for (int64_t i = 0; i < lo && g->st == LM_OK; i++)
        lm_schema_printf(g, b, " %s", item);
    if (hi < 0 || hi > lo) {
        char chain[NAME_LEN];
        rep_chain(g, item, hi < 0 ? 0 : hi - lo, hi < 0, chain);
        lm_schema_printf(g, b, " %s", chain);
    }
}

/* ---- checks of the result ------------------------------------------------------ */

/* Can every rule of p derive some finite text? (worklist over alternatives: an
 * alternative is productive when all rules it references are). On false, *bad is
 * an unproductive rule. */
static lm_status all_productive(const struct lm_gbnf *p, bool *ok, size_t *bad)
{
    size_t n_alt = 0, n_ref = 0;
    for (size_t r = 0; r < p->n_rules; r++)
        for (size_t i = 0; i < p->rule_len[r]; i++) {
            const enum lm_gretype t = p->rules[r][i].type;
            n_alt += t == LM_GRETYPE_ALT || t == LM_GRETYPE_END;
            n_ref += t == LM_GRETYPE_RULE_REF;
        }
    size_t *alt_rule = calloc(n_alt + 1, sizeof *alt_rule), *need = calloc(n_alt + 1, sizeof *need);
    size_t *first = calloc(p->n_rules + 1, sizeof *first), *occ = calloc(n_ref + 1, sizeof *occ);
    size_t *queue = calloc(p->n_rules + 1, sizeof *queue), *fill = calloc(p->n_rules + 1, sizeof *fill);
    bool *done = calloc(p->n_rules + 1, sizeof *done);
    lm_status st = LM_ERR_NOMEM;
    if (!alt_rule || !need || !first || !occ || !queue || !fill || !done)
        goto out_free;
    /* occurrences of each rule (CSR: first[t]..first[t+1]) -> alternative ids */
    for (size_t r = 0; r < p->n_rules; r++)
        for (size_t i = 0; i < p->rule_len[r]; i++)
            if (p->rules[r][i].type == LM_GRETYPE_RULE_REF)
                first[p->rules[r][i].value + 1]++;
    for (size_t t = 0; t < p->n_rules; t++)
        first[t + 1] += first[t];
    size_t a = 0, head = 0, tail = 0;
    for (size_t r = 0; r < p->n_rules; r++)
        for (size_t i = 0; i < p->rule_len[r]; i++) {
            const struct lm_grammar_element e = p->rules[r][i];
            if (e.type == LM_GRETYPE_RULE_REF) {
                occ[first[e.value] + fill[e.value]++] = a;
                need[a]++;
            } else if (e.type == LM_GRETYPE_ALT || e.type == LM_GRETYPE_END) {
                alt_rule[a] = r;
                if (need[a] == 0 && !done[r])
                    done[r] = true, queue[tail++] = r;
                a++;
            }
        }
    while (head < tail) {
        const size_t t = queue[head++];
        for (size_t k = first[t]; k < first[t + 1]; k++) {
            const size_t alt = occ[k];
            if (--need[alt] == 0 && !done[alt_rule[alt]])
                done[alt_rule[alt]] = true, queue[tail++] = alt_rule[alt];
        }
    }
    *ok = tail == p->n_rules;
    for (size_t r = 0; r < p->n_rules && !*ok; r++)
        if (!done[r]) {
            *bad = r;
            break;
        }
    st = LM_OK;
out_free:
    free(alt_rule), free(need), free(first), free(occ), free(queue), free(fill), free(done);
    return st;
}

/* parse the grammar back, check that every rule can end, build it */
void lm_schema_check(struct gen *g, const char *text)
{
    struct lm_gbnf *p = NULL;
    struct lm_grammar *gr = NULL;
    char msg[256] = "";
    bool ok = false;
    size_t bad = 0;
    if (lm_gbnf_parse(text, &p, msg, sizeof msg) != LM_OK) {
        lm_schema_fail(g, LM_ERR_UNSUPPORTED, "schema: internal error, the grammar does not parse: %s", msg);
    } else if (all_productive(p, &ok, &bad) != LM_OK) {
        lm_schema_fail(g, LM_ERR_NOMEM, "schema: out of memory");
    } else if (!ok) {
        lm_schema_fail(g, LM_ERR_UNSUPPORTED, "schema: a $ref recursion has no finite instance (rule %s)",
                       p->names[bad]);
    } else if (lm_grammar_from_gbnf(text, "root", &gr, msg, sizeof msg) != LM_OK) {
        lm_schema_fail(g, LM_ERR_UNSUPPORTED, "schema: the grammar engine refuses the grammar: %s", msg);
    }
    lm_grammar_free(gr);
    lm_gbnf_free(p);
}
