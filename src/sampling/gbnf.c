/* gbnf.c - parser for GBNF, the grammar language of llama.cpp's grammar-parser.cpp.
 *
 *   rule     ::= name ws "::=" ws alts (newline | end)
 *   alts     ::= seq ("|" ws seq)*
 *   seq      ::= (item ("*" | "+" | "?")*)*
 *   item     ::= '"' char* '"' | "[" "^"? (char ("-" char)?)* "]" | name | "(" ws alts ")"
 *   char     ::= any UTF-8 character | \n \r \t \\ \" \[ \] | \xHH | \uHHHH | \UHHHHHHHH
 *   ws       ::= spaces, tabs and # comments; newlines too after "::=", "|" and inside ()
 *
 * Output equals grammar-parser.cpp's: ids in order of first appearance of a name, a
 * generated rule "<rule>_<id>" for each group and each repetition (S* -> S' ::= S S' |,
 * S+ -> S' ::= S S' | S, S? -> S' ::= S |), a later definition of a name replacing an
 * earlier one. Stricter than it (each is an error with line and column): references
 * to undefined rules, invalid UTF-8, empty or reversed character classes, nesting
 * deeper than MAX_NESTING. The parser never reads past the terminating NUL.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sampling/grammar_impl.h"

#define MAX_NESTING 256

struct evec {
    struct lm_grammar_element *v;
    size_t n, cap;
};

struct symbol {
    char *name;
    size_t len;
    struct evec rule;
    bool defined;
    const char *first_ref; /* first reference in the text (for "undefined rule") */
};

struct parser {
    const char *src;
    struct symbol *sym;
    size_t n_sym, cap_sym;
    uint32_t *index; /* symbol id + 1 by hash of its name (0: empty); size n_index, a power of 2 */
    size_t n_index;
    int depth;
    lm_status st;
    char *err;
    size_t err_size;
};

/* 1-based line and column (in characters) of position at */
static void line_col(const struct parser *p, const char *at, int *line, int *col)
{
    *line = 1;
    *col = 1;
    for (const char *s = p->src; s < at; s++) {
        if (*s == '\n') {
            ++*line;
            *col = 1;
        } else if (((unsigned char)*s & 0xc0) != 0x80 && *s != '\r') {
            ++*col;
        }
    }
}

static void fail(struct parser *p, const char *at, lm_status st, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

static void fail(struct parser *p, const char *at, lm_status st, const char *fmt, ...)
{
    if (p->st != LM_OK)
        return;
    p->st = st;
    if (st == LM_ERR_NOMEM) {
        lm_grammar_error(p->err, p->err_size, "out of memory");
        return;
    }
    int line, col;
    line_col(p, at, &line, &col);
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    lm_grammar_error(p->err, p->err_size, "line %d, column %d: %s", line, col, msg);
}

static bool evec_push(struct parser *p, struct evec *e, enum lm_gretype type, uint32_t value)
{
    if (lm_grammar_grow((void **)&e->v, &e->cap, e->n + 1, sizeof *e->v)) {
        fail(p, p->src, LM_ERR_NOMEM, "out of memory");
        return false;
    }
    e->v[e->n++] = (struct lm_grammar_element){type, value};
    return true;
}

static size_t name_hash(const char *name, size_t len)
{
    uint64_t h = 0xcbf29ce484222325u; /* FNV-1a */
    for (size_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)name[i]) * 0x100000001b3u;
    return (size_t)(h ^ (h >> 32));
}

/* the index slot of name: where it is, or the empty slot where it would go */
static size_t find_slot(const struct parser *p, const char *name, size_t len)
{
    size_t i = name_hash(name, len) & (p->n_index - 1);
    for (; p->index[i]; i = (i + 1) & (p->n_index - 1)) {
        const struct symbol *s = &p->sym[p->index[i] - 1];
        if (s->len == len && !memcmp(s->name, name, len))
            break;
    }
    return i;
}

/* keep the index at most half full for n symbols */
static bool reserve_index(struct parser *p, size_t n)
{
    if (2 * n <= p->n_index)
        return true;
    size_t ns = p->n_index ? 2 * p->n_index : 64;
    uint32_t *old = p->index;
    const size_t n_old = p->n_index;
    if (!(p->index = calloc(ns, sizeof *p->index))) {
        p->index = old;
        fail(p, p->src, LM_ERR_NOMEM, "out of memory");
        return false;
    }
    p->n_index = ns;
    for (size_t i = 0; i < n_old; i++)
        if (old[i])
            p->index[find_slot(p, p->sym[old[i] - 1].name, p->sym[old[i] - 1].len)] = old[i];
    free(old);
    return true;
}

/* append a new symbol (its name copied) as id n_sym */
static bool add_symbol(struct parser *p, const char *name, size_t len, uint32_t *id)
{
    if (p->n_sym >= UINT32_MAX / 2 ||
        lm_grammar_grow((void **)&p->sym, &p->cap_sym, p->n_sym + 1, sizeof *p->sym)) {
        fail(p, p->src, LM_ERR_NOMEM, "out of memory");
        return false;
    }
    if (!reserve_index(p, p->n_sym + 1))
        return false;
    struct symbol *s = &p->sym[p->n_sym];
    memset(s, 0, sizeof *s);
    s->name = malloc(len + 1);
    if (!s->name) {
        fail(p, p->src, LM_ERR_NOMEM, "out of memory");
        return false;
    }
    memcpy(s->name, name, len);
    s->name[len] = '\0';
    s->len = len;
    p->index[find_slot(p, name, len)] = (uint32_t)p->n_sym + 1;
    *id = (uint32_t)p->n_sym++;
    return true;
}

/* id of a name, adding it (grammar-parser.cpp's get_symbol_id) */
static bool symbol_id(struct parser *p, const char *name, size_t len, uint32_t *id)
{
    if (p->n_index) {
        const size_t i = find_slot(p, name, len);
        if (p->index[i]) {
            *id = p->index[i] - 1;
            return true;
        }
    }
    return add_symbol(p, name, len, id);
}

/* a fresh rule id named "<base>_<id>" (generate_symbol_id); '_' is not a name
 * character, so the name never matches a rule of the text */
static bool generate_id(struct parser *p, uint32_t base, uint32_t *id)
{
    const size_t cap = p->sym[base].len + 24;
    char *name = malloc(cap);
    if (!name) {
        fail(p, p->src, LM_ERR_NOMEM, "out of memory");
        return false;
    }
    int n = snprintf(name, cap, "%s_%zu", p->sym[base].name, p->n_sym);
    bool ok = n > 0 && add_symbol(p, name, (size_t)n, id);
    free(name);
    if (ok)
        p->sym[*id].defined = true; /* the caller defines it */
    return ok;
}

static bool is_word_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-' || (c >= '0' && c <= '9');
}

static const char *parse_space(const char *pos, bool newline_ok)
{
    while (*pos == ' ' || *pos == '\t' || *pos == '#' || (newline_ok && (*pos == '\r' || *pos == '\n'))) {
        if (*pos == '#') {
            while (*pos && *pos != '\r' && *pos != '\n')
                pos++;
        } else {
            pos++;
        }
    }
    return pos;
}

static const char *parse_hex(struct parser *p, const char *pos, int digits, uint32_t *out)
{
    uint32_t v = 0;
    for (int i = 0; i < digits; i++, pos++) {
        const char c = *pos;
        if (c >= '0' && c <= '9')
            v = (v << 4) + (uint32_t)(c - '0');
        else if (c >= 'a' && c <= 'f')
            v = (v << 4) + (uint32_t)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            v = (v << 4) + (uint32_t)(c - 'A' + 10);
        else {
            fail(p, pos, LM_ERR_CORRUPT, "expected %d hex digits", digits);
            return NULL;
        }
    }
    *out = v;
    return pos;
}

/* one UTF-8 character, validated */
static const char *parse_utf8(struct parser *p, const char *pos, uint32_t *out)
{
    const unsigned char *b = (const unsigned char *)pos;
    int extra = b[0] < 0x80 ? 0 : b[0] >= 0xc2 && b[0] < 0xe0 ? 1 : b[0] >= 0xe0 && b[0] < 0xf0 ? 2
                                                               : b[0] >= 0xf0 && b[0] < 0xf5 ? 3 : -1;
    if (extra < 0) {
        fail(p, pos, LM_ERR_CORRUPT, "invalid UTF-8 byte 0x%02x", b[0]);
        return NULL;
    }
    uint32_t v = extra ? b[0] & (0x3fu >> extra) : b[0];
    for (int i = 1; i <= extra; i++) {
        if ((b[i] & 0xc0) != 0x80) {
            fail(p, pos, LM_ERR_CORRUPT, "invalid UTF-8 sequence");
            return NULL;
        }
        v = (v << 6) | (b[i] & 0x3f);
    }
    *out = v;
    return pos + 1 + extra;
}

/* one character of a literal or class, with escapes (parse_char) */
static const char *parse_char(struct parser *p, const char *pos, uint32_t *out)
{
    if (*pos != '\\')
        return parse_utf8(p, pos, out);
    switch (pos[1]) {
    case 'x': return parse_hex(p, pos + 2, 2, out);
    case 'u': return parse_hex(p, pos + 2, 4, out);
    case 'U': return parse_hex(p, pos + 2, 8, out);
    case 't': *out = '\t'; return pos + 2;
    case 'r': *out = '\r'; return pos + 2;
    case 'n': *out = '\n'; return pos + 2;
    case '\\':
    case '"':
    case '[':
    case ']': *out = (unsigned char)pos[1]; return pos + 2;
    case '\0': fail(p, pos, LM_ERR_CORRUPT, "unexpected end of input after '\\'"); return NULL;
    default: break;
    }
    if ((unsigned char)pos[1] >= 0x20 && (unsigned char)pos[1] < 0x7f)
        fail(p, pos, LM_ERR_CORRUPT, "unknown escape '\\%c'", pos[1]);
    else
        fail(p, pos, LM_ERR_CORRUPT, "unknown escape");
    return NULL;
}

static const char *parse_alternates(struct parser *p, const char *pos, uint32_t base, uint32_t rule_id, bool nested);

static const char *parse_literal(struct parser *p, const char *pos, struct evec *out)
{
    const char *open = pos++;
    while (*pos != '"') {
        uint32_t c;
        if (!*pos) {
            fail(p, open, LM_ERR_CORRUPT, "unterminated string literal");
            return NULL;
        }
        if (!(pos = parse_char(p, pos, &c)) || !evec_push(p, out, LM_GRETYPE_CHAR, c))
            return NULL;
    }
    return pos + 1;
}

static const char *parse_class(struct parser *p, const char *pos, struct evec *out)
{
    const char *open = pos++;
    enum lm_gretype start_type = LM_GRETYPE_CHAR;
    if (*pos == '^') {
        pos++;
        start_type = LM_GRETYPE_CHAR_NOT;
    }
    const size_t first = out->n;
    while (*pos != ']') {
        uint32_t lo, hi;
        const char *at = pos;
        if (!*pos) {
            fail(p, open, LM_ERR_CORRUPT, "unterminated character class");
            return NULL;
        }
        if (!(pos = parse_char(p, pos, &lo)) ||
            !evec_push(p, out, out->n > first ? LM_GRETYPE_CHAR_ALT : start_type, lo))
            return NULL;
        if (pos[0] == '-' && pos[1] != ']') {
            if (!pos[1]) {
                fail(p, open, LM_ERR_CORRUPT, "unterminated character class");
                return NULL;
            }
            if (!(pos = parse_char(p, pos + 1, &hi)))
                return NULL;
            if (hi < lo) {
                fail(p, at, LM_ERR_CORRUPT, "bad character range: U+%04X-U+%04X is empty", (unsigned)lo, (unsigned)hi);
                return NULL;
            }
            if (!evec_push(p, out, LM_GRETYPE_CHAR_RNG_UPPER, hi))
                return NULL;
        }
    }
    if (out->n == first) {
        fail(p, open, LM_ERR_CORRUPT, "empty character class");
        return NULL;
    }
    return pos + 1;
}

/* S* / S+ / S? applied to out[last..]: a generated rule replaces the item */
static bool apply_repetition(struct parser *p, char op, uint32_t base, struct evec *out, size_t last)
{
    uint32_t sub;
    if (!generate_id(p, base, &sub))
        return false;
    struct evec r = {0};
    bool ok = true;
    for (size_t i = last; ok && i < out->n; i++)
        ok = evec_push(p, &r, out->v[i].type, out->v[i].value);
    if (ok && op != '?')
        ok = evec_push(p, &r, LM_GRETYPE_RULE_REF, sub);
    ok = ok && evec_push(p, &r, LM_GRETYPE_ALT, 0);
    for (size_t i = last; ok && op == '+' && i < out->n; i++)
        ok = evec_push(p, &r, out->v[i].type, out->v[i].value);
    ok = ok && evec_push(p, &r, LM_GRETYPE_END, 0);
    if (!ok) {
        free(r.v);
        return false;
    }
    free(p->sym[sub].rule.v);
    p->sym[sub].rule = r;
    out->n = last;
    return evec_push(p, out, LM_GRETYPE_RULE_REF, sub);
}

static const char *parse_group(struct parser *p, const char *pos, uint32_t base, struct evec *out, bool nested)
{
    const char *open = pos;
    uint32_t sub;
    if (++p->depth > MAX_NESTING) {
        fail(p, open, LM_ERR_CORRUPT, "groups nested deeper than %d", MAX_NESTING);
        return NULL;
    }
    pos = parse_space(pos + 1, true);
    if (!generate_id(p, base, &sub) || !(pos = parse_alternates(p, pos, base, sub, true)))
        return NULL;
    p->depth--;
    if (!evec_push(p, out, LM_GRETYPE_RULE_REF, sub))
        return NULL;
    if (*pos != ')') {
        int line, col;
        line_col(p, open, &line, &col);
        fail(p, pos, LM_ERR_CORRUPT, "expected ')' to close the '(' at line %d, column %d", line, col);
        return NULL;
    }
    return parse_space(pos + 1, nested);
}

static const char *parse_sequence(struct parser *p, const char *pos, uint32_t base, struct evec *out, bool nested)
{
    size_t last = out->n; /* start of the last item, for a repetition operator */
    while (*pos) {
        if (*pos == '"') {
            last = out->n;
            if (!(pos = parse_literal(p, pos, out)))
                return NULL;
            pos = parse_space(pos, nested);
        } else if (*pos == '[') {
            last = out->n;
            if (!(pos = parse_class(p, pos, out)))
                return NULL;
            pos = parse_space(pos, nested);
        } else if (is_word_char(*pos)) {
            const char *name = pos;
            while (is_word_char(*pos))
                pos++;
            uint32_t id;
            if (!symbol_id(p, name, (size_t)(pos - name), &id))
                return NULL;
            if (!p->sym[id].first_ref)
                p->sym[id].first_ref = name;
            pos = parse_space(pos, nested);
            last = out->n;
            if (!evec_push(p, out, LM_GRETYPE_RULE_REF, id))
                return NULL;
        } else if (*pos == '(') {
            size_t at = out->n;
            if (!(pos = parse_group(p, pos, base, out, nested)))
                return NULL;
            last = at;
        } else if (*pos == '*' || *pos == '+' || *pos == '?') {
            if (last == out->n) {
                fail(p, pos, LM_ERR_CORRUPT, "'%c' has no preceding item to repeat", *pos);
                return NULL;
            }
            if (!apply_repetition(p, *pos, base, out, last))
                return NULL;
            pos = parse_space(pos + 1, nested);
        } else {
            break;
        }
    }
    return pos;
}

static const char *parse_alternates(struct parser *p, const char *pos, uint32_t base, uint32_t rule_id, bool nested)
{
    struct evec rule = {0};
    pos = parse_sequence(p, pos, base, &rule, nested);
    while (pos && *pos == '|') {
        if (!evec_push(p, &rule, LM_GRETYPE_ALT, 0))
            pos = NULL;
        else
            pos = parse_sequence(p, parse_space(pos + 1, true), base, &rule, nested);
    }
    if (!pos || !evec_push(p, &rule, LM_GRETYPE_END, 0)) {
        free(rule.v);
        return NULL;
    }
    free(p->sym[rule_id].rule.v); /* a later definition replaces an earlier one */
    p->sym[rule_id].rule = rule;
    p->sym[rule_id].defined = true;
    return pos;
}

static const char *parse_rule(struct parser *p, const char *pos)
{
    const char *name = pos;
    while (is_word_char(*pos))
        pos++;
    if (pos == name) {
        fail(p, pos, LM_ERR_CORRUPT, "expected a rule name");
        return NULL;
    }
    const char *name_end = pos;
    pos = parse_space(pos, false);
    uint32_t id;
    if (!symbol_id(p, name, (size_t)(name_end - name), &id))
        return NULL;
    if (!(pos[0] == ':' && pos[1] == ':' && pos[2] == '=')) {
        fail(p, pos, LM_ERR_CORRUPT, "expected ::=");
        return NULL;
    }
    pos = parse_space(pos + 3, true);
    if (!(pos = parse_alternates(p, pos, id, id, false)))
        return NULL;
    if (*pos == '\r') {
        pos += pos[1] == '\n' ? 2 : 1;
    } else if (*pos == '\n') {
        pos++;
    } else if (*pos) {
        fail(p, pos, LM_ERR_CORRUPT, "expected newline or end of input");
        return NULL;
    }
    return parse_space(pos, true);
}

void lm_gbnf_free(struct lm_gbnf *g)
{
    if (!g)
        return;
    for (size_t i = 0; i < g->n_rules; i++) {
        free(g->rules ? g->rules[i] : NULL);
        free(g->names ? g->names[i] : NULL);
    }
    free(g->rules);
    free(g->names);
    free(g->rule_len);
    free(g);
}

/* move the parsed symbols into a struct lm_gbnf */
static lm_status build_output(struct parser *p, struct lm_gbnf **out)
{
    struct lm_gbnf *g = calloc(1, sizeof *g);
    if (!g)
        return LM_ERR_NOMEM;
    g->rules = calloc(p->n_sym, sizeof *g->rules);
    g->names = calloc(p->n_sym, sizeof *g->names);
    g->rule_len = calloc(p->n_sym, sizeof *g->rule_len);
    g->n_rules = p->n_sym;
    if (!g->rules || !g->names || !g->rule_len) {
        lm_gbnf_free(g);
        return LM_ERR_NOMEM;
    }
    for (size_t i = 0; i < p->n_sym; i++) {
        g->rules[i] = p->sym[i].rule.v;
        g->rule_len[i] = p->sym[i].rule.n;
        g->names[i] = p->sym[i].name;
        p->sym[i].rule.v = NULL;
        p->sym[i].name = NULL;
    }
    *out = g;
    return LM_OK;
}

lm_status lm_gbnf_parse(const char *text, struct lm_gbnf **out, char *err, size_t err_size)
{
    if (!text || !out) {
        lm_grammar_error(err, err_size, "invalid arguments");
        return LM_ERR_INVALID_ARG;
    }
    struct parser p = {.src = text, .err = err, .err_size = err_size};
    const char *pos = parse_space(text, true);
    while (pos && *pos)
        pos = parse_rule(&p, pos);
    if (p.st == LM_OK && p.n_sym == 0)
        fail(&p, pos, LM_ERR_CORRUPT, "the grammar has no rules");
    for (size_t i = 0; p.st == LM_OK && i < p.n_sym; i++)
        if (!p.sym[i].defined)
            fail(&p, p.sym[i].first_ref ? p.sym[i].first_ref : text, LM_ERR_CORRUPT, "undefined rule '%s'",
                 p.sym[i].name);
    if (p.st == LM_OK && (p.st = build_output(&p, out)) == LM_ERR_NOMEM)
        lm_grammar_error(err, err_size, "out of memory");
    for (size_t i = 0; i < p.n_sym; i++) {
        free(p.sym[i].name);
        free(p.sym[i].rule.v);
    }
    free(p.sym);
    free(p.index);
    return p.st;
}

lm_status lm_gbnf_rule_id(const struct lm_gbnf *g, const char *name, size_t *out_id)
{
    if (!g || !name || !out_id)
        return LM_ERR_INVALID_ARG;
    for (size_t i = 0; i < g->n_rules; i++) {
        if (!strcmp(g->names[i], name)) {
            *out_id = i;
            return LM_OK;
        }
    }
    return LM_ERR_NOT_FOUND;
}

lm_status lm_grammar_from_gbnf(const char *text, const char *start, struct lm_grammar **out, char *err,
                               size_t err_size)
{
    struct lm_gbnf *g = NULL;
    size_t start_id = 0;
    if (!start)
        start = "root";
    lm_status st = lm_gbnf_parse(text, &g, err, err_size);
    if (st == LM_OK && (st = lm_gbnf_rule_id(g, start, &start_id)) != LM_OK)
        lm_grammar_error(err, err_size, "the grammar has no rule '%s'", start);
    if (st == LM_OK)
        st = lm_grammar_init_named((const struct lm_grammar_element *const *)g->rules, g->n_rules, start_id,
                                   (const char *const *)g->names, out, err, err_size);
    lm_gbnf_free(g);
    return st;
}
