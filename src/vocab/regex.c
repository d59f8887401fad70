/* regex.c - compile and match the pre-tokenizer regex subset of regex.h.
 *
 * A pattern compiles into a flat array of nodes linked by index:
 *   CLASS  one code point in a set (a literal is a one-range class)
 *   REPEAT a CLASS child repeated min..max times (greedy)
 *   ALT    alternatives, each the head of a node sequence (groups too)
 *   LOOK   lookahead over an ALT child, positive or negative
 *   BOL/EOL anchors
 * Every node has `next`, the node after it in its sequence (-1 at the end).
 * Matching walks a sequence and keeps "what comes after this group" as a
 * chain of continuation frames on the C stack, so nesting depth, not text
 * length, bounds the recursion.
 */
#include "vocab/regex.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vocab/unicode.h"

enum node_kind { N_CLASS, N_REPEAT, N_ALT, N_LOOK, N_BOL, N_EOL };
enum item_kind { IT_RANGE, IT_CAT, IT_NOT_CAT, IT_WS, IT_NOT_WS };

struct item {
    uint8_t kind;
    uint32_t lo, hi; /* IT_RANGE: [lo, hi]; IT_CAT/IT_NOT_CAT: lo = LM_UNI_* */
};

struct node {
    uint8_t kind;
    bool negate;  /* CLASS: [^...]; LOOK: (?!...) */
    int next;     /* following node of the sequence, -1: end */
    int first, n; /* CLASS: items[first..first+n); ALT: alts[first..first+n) */
    int child;    /* REPEAT: the CLASS node; LOOK: the ALT node */
    int min, max; /* REPEAT; max < 0: unbounded */
};

struct lm_vocab_regex {
    struct node *nodes;
    int n_nodes, cap_nodes;
    struct item *items;
    int n_items, cap_items;
    int *alts; /* heads of alternatives (-1: empty alternative) */
    int n_alts, cap_alts;
    int root; /* an ALT node */
    /* The single alternative starts with an unbounded repeat of this CLASS
     * node (-1: no): lets find() skip a failed run, see there. */
    int lead_class;
};

struct parser {
    struct lm_vocab_regex *re;
    const char *pat;
    size_t pos, len;
    int depth;
    char *err;
    size_t err_size;
    bool failed;
};

/* ---- building ---- */

static void fail(struct parser *p, const char *what)
{
    if (!p->failed && p->err && p->err_size) {
        snprintf(p->err, p->err_size, "regex: %s at offset %zu of \"%s\"", what, p->pos, p->pat);
    }
    p->failed = true;
}

static bool grow(void **arr, int *cap, int need, size_t elem)
{
    if (need <= *cap) {
        return true;
    }
    int nc = *cap ? *cap * 2 : 16;
    while (nc < need) {
        nc *= 2;
    }
    void *na = realloc(*arr, (size_t)nc * elem);
    if (!na) {
        return false;
    }
    *arr = na;
    *cap = nc;
    return true;
}

static int new_node(struct parser *p, enum node_kind kind)
{
    struct lm_vocab_regex *re = p->re;
    if (!grow((void **)&re->nodes, &re->cap_nodes, re->n_nodes + 1, sizeof(struct node))) {
        fail(p, "out of memory");
        return -1;
    }
    struct node *nd = &re->nodes[re->n_nodes];
    memset(nd, 0, sizeof(*nd));
    nd->kind = (uint8_t)kind;
    nd->next = -1;
    nd->child = -1;
    return re->n_nodes++;
}

static void add_item(struct parser *p, enum item_kind kind, uint32_t lo, uint32_t hi)
{
    struct lm_vocab_regex *re = p->re;
    if (!grow((void **)&re->items, &re->cap_items, re->n_items + 1, sizeof(struct item))) {
        fail(p, "out of memory");
        return;
    }
    re->items[re->n_items++] = (struct item){.kind = (uint8_t)kind, .lo = lo, .hi = hi};
}

/* ---- parsing ---- */

static bool at_end(const struct parser *p) { return p->pos >= p->len; }
static char peek(const struct parser *p) { return at_end(p) ? '\0' : p->pat[p->pos]; }

/* Next code point of the pattern (which must be valid UTF-8). */
static uint32_t take_cp(struct parser *p)
{
    uint32_t cp;
    int l = lm_vocab_utf8_decode(p->pat + p->pos, p->len - p->pos, &cp);
    if (cp == LM_UNI_INVALID) {
        fail(p, "invalid UTF-8 in pattern");
    }
    p->pos += (size_t)l;
    return cp;
}

static int cat_from_letter(char c)
{
    switch (c) {
    case 'L': return LM_UNI_LETTER;
    case 'M': return LM_UNI_MARK;
    case 'N': return LM_UNI_NUMBER;
    case 'P': return LM_UNI_PUNCT;
    case 'S': return LM_UNI_SYMBOL;
    case 'Z': return LM_UNI_SEPARATOR;
    case 'C': return LM_UNI_OTHER;
    default: return -1;
    }
}

static int hex_digit(char c)
{
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    if (c >= 'A' && c <= 'F') {
        return c - 'A' + 10;
    }
    return -1;
}

/* After "\x": {H...} (1 to 6 hex digits) or exactly two hex digits. */
static uint32_t parse_hex_escape(struct parser *p)
{
    bool braced = peek(p) == '{';
    size_t max_digits = braced ? 6 : 2;
    uint32_t v = 0;
    size_t nd = 0;
    p->pos += braced;
    while (nd < max_digits && !at_end(p)) {
        int d = hex_digit(peek(p));
        if (d < 0) {
            break;
        }
        v = v * 16 + (uint32_t)d;
        nd++;
        p->pos++;
    }
    if (nd == 0 || (!braced && nd != 2) || (braced && peek(p) != '}') || v > 0x10FFFF) {
        fail(p, "bad \\x escape");
        return 0;
    }
    p->pos += braced;
    return v;
}

/* After a backslash: either a set item (returns true, *kind and *cat set) or a
 * literal code point (returns false, *lit set). */
static bool parse_escape(struct parser *p, enum item_kind *kind, int *cat, uint32_t *lit)
{
    if (at_end(p)) {
        fail(p, "pattern ends with a backslash");
        *lit = 0;
        return false;
    }
    char c = p->pat[p->pos++];
    switch (c) {
    case 's': *kind = IT_WS; return true;
    case 'S': *kind = IT_NOT_WS; return true;
    case 'p':
    case 'P': {
        char name = '\0';
        if (peek(p) == '{' && p->pos + 2 < p->len && p->pat[p->pos + 2] == '}') {
            name = p->pat[p->pos + 1];
            p->pos += 3;
        } else if (!at_end(p)) {
            name = p->pat[p->pos++];
        }
        *cat = cat_from_letter(name);
        if (*cat < 0) {
            fail(p, "unsupported \\p{...} category");
        }
        *kind = c == 'p' ? IT_CAT : IT_NOT_CAT;
        return true;
    }
    case 'r': *lit = '\r'; return false;
    case 'n': *lit = '\n'; return false;
    case 't': *lit = '\t'; return false;
    case 'f': *lit = '\f'; return false;
    case 'v': *lit = '\v'; return false;
    case '0': *lit = 0; return false;
    case 'x': *lit = parse_hex_escape(p); return false;
    default:
        if ((unsigned char)c < 0x80 && !((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))) {
            *lit = (uint32_t)(unsigned char)c;
            return false;
        }
        p->pos--;
        fail(p, "unsupported escape");
        *lit = 0;
        return false;
    }
}

/* One class member after '[' or '[^': a range, a single code point or an
 * escape set. */
static void parse_class_member(struct parser *p)
{
    uint32_t lo;
    if (peek(p) == '\\') {
        p->pos++;
        enum item_kind kind;
        int cat = 0;
        if (parse_escape(p, &kind, &cat, &lo)) {
            add_item(p, kind, (uint32_t)cat, 0);
            return;
        }
    } else {
        lo = take_cp(p);
    }
    uint32_t hi = lo;
    if (peek(p) == '-' && p->pos + 1 < p->len && p->pat[p->pos + 1] != ']') {
        p->pos++;
        if (peek(p) == '\\') {
            p->pos++;
            enum item_kind kind;
            int cat = 0;
            if (parse_escape(p, &kind, &cat, &hi)) {
                fail(p, "a class set cannot end a range");
                return;
            }
        } else {
            hi = take_cp(p);
        }
        if (hi < lo) {
            fail(p, "reversed range in class");
            return;
        }
    }
    add_item(p, IT_RANGE, lo, hi);
}

static int parse_class(struct parser *p)
{
    int nd = new_node(p, N_CLASS);
    if (nd < 0) {
        return -1;
    }
    int first = p->re->n_items;
    bool negate = false;
    if (peek(p) == '^') {
        negate = true;
        p->pos++;
    }
    bool first_member = true;
    while (!p->failed) {
        if (at_end(p)) {
            fail(p, "unterminated class");
            break;
        }
        if (peek(p) == ']' && !first_member) {
            p->pos++;
            break;
        }
        if (peek(p) == '[') {
            fail(p, "nested classes are not supported");
            break;
        }
        parse_class_member(p);
        first_member = false;
    }
    struct node *n = &p->re->nodes[nd];
    n->negate = negate;
    n->first = first;
    n->n = p->re->n_items - first;
    return nd;
}

static int literal_node(struct parser *p, uint32_t cp)
{
    int nd = new_node(p, N_CLASS);
    if (nd >= 0) {
        p->re->nodes[nd].first = p->re->n_items;
        p->re->nodes[nd].n = 1;
        add_item(p, IT_RANGE, cp, cp);
    }
    return nd;
}

static int parse_number(struct parser *p)
{
    int v = -1;
    while (peek(p) >= '0' && peek(p) <= '9') {
        v = (v < 0 ? 0 : v) * 10 + (peek(p) - '0');
        if (v > 100000) {
            fail(p, "repeat count too large");
            return -1;
        }
        p->pos++;
    }
    return v;
}

/* A quantifier after the atom nd, if any: wraps it in a REPEAT node. */
static int parse_quantifier(struct parser *p, int nd)
{
    int min, max;
    char c = peek(p);
    if (c == '?') {
        min = 0, max = 1;
    } else if (c == '*') {
        min = 0, max = -1;
    } else if (c == '+') {
        min = 1, max = -1;
    } else if (c == '{') {
        p->pos++;
        min = parse_number(p);
        max = min;
        if (peek(p) == ',') {
            p->pos++;
            max = parse_number(p); /* -1 when absent: unbounded */
        }
        if (min < 0 || peek(p) != '}' || (max >= 0 && max < min)) {
            fail(p, "bad {m,n} quantifier");
            return -1;
        }
    } else {
        return nd;
    }
    p->pos++;
    if (p->re->nodes[nd].kind != N_CLASS) {
        fail(p, "quantifiers apply only to a literal or a class");
        return -1;
    }
    if (peek(p) == '?' || peek(p) == '+') {
        fail(p, "lazy and possessive quantifiers are not supported");
        return -1;
    }
    int rep = new_node(p, N_REPEAT);
    if (rep < 0) {
        return -1;
    }
    struct node *r = &p->re->nodes[rep];
    r->child = nd;
    r->min = min;
    r->max = max;
    return rep;
}

static int parse_alt(struct parser *p);

static int parse_group(struct parser *p)
{
    /* after '(' */
    int look = -1;
    if (peek(p) != '?') {
        fail(p, "capturing groups are not supported (use (?:...))");
        return -1;
    }
    p->pos++;
    char c = peek(p);
    if (c == '=' || c == '!') {
        look = new_node(p, N_LOOK);
        if (look < 0) {
            return -1;
        }
        p->re->nodes[look].negate = c == '!';
    } else if (c != ':') {
        fail(p, "unsupported group kind");
        return -1;
    }
    p->pos++;
    if (++p->depth > 64) {
        fail(p, "groups nested too deeply");
        return -1;
    }
    int alt = parse_alt(p);
    p->depth--;
    if (p->failed) {
        return -1;
    }
    if (peek(p) != ')') {
        fail(p, "missing )");
        return -1;
    }
    p->pos++;
    if (look >= 0) {
        p->re->nodes[look].child = alt;
        return look;
    }
    return alt;
}

static int parse_atom(struct parser *p)
{
    char c = peek(p);
    int nd;
    switch (c) {
    case '(':
        p->pos++;
        nd = parse_group(p);
        break;
    case '[':
        p->pos++;
        nd = parse_class(p);
        break;
    case '^': p->pos++; return new_node(p, N_BOL);
    case '$': p->pos++; return new_node(p, N_EOL);
    case '.':
    case '*':
    case '+':
    case '?':
    case '{': fail(p, "unsupported or misplaced operator"); return -1;
    case '\\': {
        p->pos++;
        enum item_kind kind;
        int cat = 0;
        uint32_t lit = 0;
        if (parse_escape(p, &kind, &cat, &lit)) {
            nd = new_node(p, N_CLASS);
            if (nd >= 0) {
                p->re->nodes[nd].first = p->re->n_items;
                p->re->nodes[nd].n = 1;
                add_item(p, kind, (uint32_t)cat, 0);
            }
        } else {
            nd = literal_node(p, lit);
        }
        break;
    }
    default: nd = literal_node(p, take_cp(p)); break;
    }
    if (nd < 0 || p->failed) {
        return -1;
    }
    return parse_quantifier(p, nd);
}

/* A sequence up to '|', ')' or the end; returns its head (-1 if empty). */
static int parse_seq(struct parser *p)
{
    int head = -1, tail = -1;
    while (!p->failed && !at_end(p) && peek(p) != '|' && peek(p) != ')') {
        int nd = parse_atom(p);
        if (nd < 0) {
            return -1;
        }
        if (tail < 0) {
            head = nd;
        } else {
            p->re->nodes[tail].next = nd;
        }
        tail = nd;
    }
    return head;
}

/* Alternatives up to ')' or the end, as one ALT node. */
static int parse_alt(struct parser *p)
{
    int heads[256];
    int n = 0;
    for (;;) {
        int h = parse_seq(p);
        if (p->failed) {
            return -1;
        }
        if (n == 256) {
            fail(p, "too many alternatives");
            return -1;
        }
        heads[n++] = h;
        if (peek(p) != '|') {
            break;
        }
        p->pos++;
    }
    struct lm_vocab_regex *re = p->re;
    int nd = new_node(p, N_ALT);
    if (nd < 0 || !grow((void **)&re->alts, &re->cap_alts, re->n_alts + n, sizeof(int))) {
        fail(p, "out of memory");
        return -1;
    }
    memcpy(re->alts + re->n_alts, heads, (size_t)n * sizeof(int));
    re->nodes[nd].first = re->n_alts;
    re->nodes[nd].n = n;
    re->n_alts += n;
    return nd;
}

void lm_vocab_regex_free(struct lm_vocab_regex *re)
{
    if (!re) {
        return;
    }
    free(re->nodes);
    free(re->items);
    free(re->alts);
    free(re);
}

lm_status lm_vocab_regex_compile(const char *pattern, struct lm_vocab_regex **out, char *err, size_t err_size)
{
    if (!pattern || !out) {
        return LM_ERR_INVALID_ARG;
    }
    struct lm_vocab_regex *re = calloc(1, sizeof(*re));
    if (!re) {
        return LM_ERR_NOMEM;
    }
    struct parser p = {.re = re, .pat = pattern, .len = strlen(pattern), .err = err, .err_size = err_size};
    re->root = parse_alt(&p);
    if (!p.failed && !at_end(&p)) {
        fail(&p, "unbalanced )");
    }
    if (p.failed) {
        lm_vocab_regex_free(re);
        return LM_ERR_CORRUPT;
    }
    re->lead_class = -1;
    const struct node *root = &re->nodes[re->root];
    if (root->n == 1 && re->alts[root->first] >= 0) {
        const struct node *head = &re->nodes[re->alts[root->first]];
        if (head->kind == N_REPEAT && head->max < 0) {
            re->lead_class = head->child;
        }
    }
    *out = re;
    return LM_OK;
}

/* ---- matching ---- */

static bool item_match(const struct item *it, uint32_t cp)
{
    switch (it->kind) {
    case IT_RANGE: return cp >= it->lo && cp <= it->hi;
    case IT_CAT: return lm_vocab_uni_cat(cp) == it->lo;
    case IT_NOT_CAT: return lm_vocab_uni_cat(cp) != it->lo;
    case IT_WS: return (lm_vocab_uni_flags(cp) & LM_UNI_WHITESPACE) != 0;
    case IT_NOT_WS: return (lm_vocab_uni_flags(cp) & LM_UNI_WHITESPACE) == 0;
    default: return false;
    }
}

static bool class_match(const struct lm_vocab_regex *re, const struct node *nd, uint32_t cp)
{
    bool hit = false;
    for (int i = 0; i < nd->n && !hit; i++) {
        hit = item_match(&re->items[nd->first + i], cp);
    }
    return hit != nd->negate;
}

struct cont {
    int node;
    const struct cont *next;
};

struct subject {
    const uint32_t *cps;
    size_t n;
};

static int64_t match(const struct lm_vocab_regex *re, int nd, size_t pos, const struct cont *k, const struct subject *s)
{
    for (;;) {
        if (nd < 0) {
            if (!k) {
                return (int64_t)pos;
            }
            nd = k->node;
            k = k->next;
            continue;
        }
        const struct node *node = &re->nodes[nd];
        switch (node->kind) {
        case N_CLASS:
            if (pos >= s->n || !class_match(re, node, s->cps[pos])) {
                return -1;
            }
            pos++;
            break;
        case N_BOL:
            if (pos != 0) {
                return -1;
            }
            break;
        case N_EOL:
            if (pos != s->n) {
                return -1;
            }
            break;
        case N_LOOK: {
            int64_t r = match(re, node->child, pos, NULL, s);
            if ((r >= 0) == node->negate) {
                return -1;
            }
            break;
        }
        case N_REPEAT: {
            const struct node *ch = &re->nodes[node->child];
            size_t c = 0;
            while ((node->max < 0 || c < (size_t)node->max) && pos + c < s->n && class_match(re, ch, s->cps[pos + c])) {
                c++;
            }
            if (c < (size_t)node->min) {
                return -1;
            }
            if (node->next < 0 && !k) {
                return (int64_t)(pos + c);
            }
            for (size_t i = c + 1; i-- > (size_t)node->min;) {
                int64_t r = match(re, node->next, pos + i, k, s);
                if (r >= 0) {
                    return r;
                }
            }
            return -1;
        }
        case N_ALT: {
            struct cont after = {node->next, k};
            for (int i = 0; i < node->n; i++) {
                int64_t r = match(re, re->alts[node->first + i], pos, &after, s);
                if (r >= 0) {
                    return r;
                }
            }
            return -1;
        }
        default: return -1;
        }
        nd = node->next;
    }
}

int64_t lm_vocab_regex_match_at(const struct lm_vocab_regex *re, const uint32_t *cps, size_t n, size_t pos)
{
    if (!re || pos > n) {
        return -1;
    }
    struct subject s = {cps, n};
    return match(re, re->root, pos, NULL, &s);
}

int64_t lm_vocab_regex_find(const struct lm_vocab_regex *re, const uint32_t *cps, size_t n, size_t from, size_t *start)
{
    if (!re) {
        return -1;
    }
    struct subject s = {cps, n};
    const struct node *lead = re->lead_class >= 0 ? &re->nodes[re->lead_class] : NULL;
    for (size_t p = from; p < n;) {
        int64_t e = match(re, re->root, p, NULL, &s);
        if (e > (int64_t)p) {
            *start = p;
            return e;
        }
        /* For "C+ REST": if it fails at p and cps[p] is in C, it fails at
         * p+1 too (a match there would extend to one at p), so skip the run
         * of C. This keeps patterns like \s+$ linear on long runs. */
        if (lead && e < 0 && class_match(re, lead, cps[p])) {
            while (p < n && class_match(re, lead, cps[p])) {
                p++;
            }
        } else {
            p++;
        }
    }
    return -1;
}
