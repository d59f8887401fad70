/* jinja_parse.c - the template parser: tokens to a tree of statements and
 * expressions, with jinja2's grammar and operator precedence.
 *
 * Precedence, loosest first (as jinja2): `x if c else y`, or, and, not,
 * comparisons and in/not in (chained), + -, ~, * / // %, ** (left
 * associative, as jinja2), unary - +, then postfix (.attr [item] (call)),
 * filters `|` and tests `is`. An unknown filter or test name is an error
 * here unless it sits under an `if` (check_names), as in jinja2. Nesting is
 * bounded (J_MAX_PARSE_DEPTH). */
#include <stdio.h>
#include <string.h>

#include "chat/jinja.h"

struct parser {
    struct jctx *c;
    const struct jtok *t;
    size_t n, i;
    int depth;
    int loops; /* for loops around the current statement (break/continue need one) */
};

struct nvec {
    struct jnode **v;
    size_t n, cap;
};

static int push(struct parser *P, struct nvec *v, struct jnode *x)
{
    if (v->n == v->cap) {
        const size_t cap = v->cap ? v->cap * 2 : 8;
        struct jnode **nv = j_alloc(P->c, cap * sizeof *nv);
        if (!nv)
            return -1;
        if (v->n)
            memcpy(nv, v->v, v->n * sizeof *nv);
        v->v = nv;
        v->cap = cap;
    }
    v->v[v->n++] = x;
    return 0;
}

static const struct jtok *cur(struct parser *P) { return &P->t[P->i < P->n ? P->i : P->n - 1]; }
static const struct jtok *peek(struct parser *P, size_t k)
{
    return &P->t[P->i + k < P->n ? P->i + k : P->n - 1];
}
static void advance(struct parser *P)
{
    if (P->i + 1 < P->n)
        P->i++;
}

static bool tok_is(const struct jtok *t, int kind, const char *text)
{
    return t->kind == kind && t->n == strlen(text) && !memcmp(t->p, text, t->n);
}
static bool is_op(struct parser *P, const char *op) { return tok_is(cur(P), T_OP, op); }
static bool is_name(struct parser *P, const char *name) { return tok_is(cur(P), T_NAME, name); }

static const char *describe(const struct jtok *t, char *buf, size_t len)
{
    switch (t->kind) {
    case T_EOF: return "end of template";
    case T_DATA: return "template data";
    case T_BLOCK_BEGIN: return "begin of statement block";
    case T_BLOCK_END: return "end of statement block";
    case T_VAR_BEGIN: return "begin of print statement";
    case T_VAR_END: return "end of print statement";
    case T_STRING: return "string";
    case T_INT:
    case T_FLOAT: return "number";
    default: snprintf(buf, len, "%.*s", (int)(t->n < 40 ? t->n : 40), t->p); return buf;
    }
}

static int unexpected(struct parser *P, const char *expected)
{
    char buf[48];
    const struct jtok *t = cur(P);
    if (expected)
        return j_fail(P->c, LM_ERR_CORRUPT, "syntax error at line %d: expected %s, got '%s'", t->line, expected,
                      describe(t, buf, sizeof buf));
    return j_fail(P->c, LM_ERR_CORRUPT, "syntax error at line %d: unexpected '%s'", t->line,
                  describe(t, buf, sizeof buf));
}

static int expect_op(struct parser *P, const char *op)
{
    if (!is_op(P, op)) {
        char want[16];
        snprintf(want, sizeof want, "'%s'", op);
        return unexpected(P, want);
    }
    advance(P);
    return 0;
}

static int expect_kind(struct parser *P, int kind, const char *what)
{
    if (cur(P)->kind != kind)
        return unexpected(P, what);
    advance(P);
    return 0;
}

static struct jnode *node(struct parser *P, int kind, int line)
{
    struct jnode *x = j_alloc(P->c, sizeof *x);
    if (x) {
        x->kind = kind;
        x->line = line;
    }
    return x;
}

static const char *tok_name(struct parser *P, const struct jtok *t) { return j_strdup(P->c, t->p, t->n); }

static int enter(struct parser *P)
{
    if (++P->depth > J_MAX_PARSE_DEPTH)
        return j_fail(P->c, LM_ERR_CORRUPT, "syntax error at line %d: nested too deeply", cur(P)->line);
    return j_step(P->c);
}

static struct jnode *parse_expr(struct parser *P, bool with_cond);
static struct jnode *parse_tuple(struct parser *P, bool with_cond, bool explicit_parens);
static struct jnode *parse_unary(struct parser *P, bool with_filter);

/* ( args ) of a call, filter or test: positional and name=value */
static int parse_args(struct parser *P, struct jnode *x)
{
    struct nvec v = {0};
    if (expect_op(P, "("))
        return -1;
    while (!is_op(P, ")")) {
        if (v.n && expect_op(P, ","))
            return -1;
        if (is_op(P, ")"))
            break;
        struct jnode *a;
        if (cur(P)->kind == T_NAME && tok_is(peek(P, 1), T_OP, "=")) {
            a = node(P, N_KWARG, cur(P)->line);
            if (!a || !(a->name = tok_name(P, cur(P))))
                return -1;
            advance(P);
            advance(P);
            if (!(a->a = parse_expr(P, true)))
                return -1;
        } else if (!(a = parse_expr(P, true))) {
            return -1;
        }
        if (push(P, &v, a))
            return -1;
    }
    advance(P);
    x->kids = v.v;
    x->n_kids = v.n;
    return 0;
}

static struct jnode *parse_list_or_dict(struct parser *P, bool dict)
{
    struct jnode *x = node(P, dict ? N_DICT : N_LIST, cur(P)->line);
    struct nvec v = {0};
    const char *close = dict ? "}" : "]";
    advance(P);
    while (x && !is_op(P, close)) {
        if (v.n && expect_op(P, ","))
            return NULL;
        if (is_op(P, close))
            break;
        struct jnode *e = parse_expr(P, true);
        if (!e || push(P, &v, e))
            return NULL;
        if (dict && (expect_op(P, ":") || !(e = parse_expr(P, true)) || push(P, &v, e)))
            return NULL;
    }
    advance(P);
    if (x) {
        x->kids = v.v;
        x->n_kids = v.n;
    }
    return x;
}

static struct jnode *literal(struct parser *P, struct jv v, int line)
{
    struct jnode *x = node(P, N_LIT, line);
    if (x)
        x->val = v;
    return x;
}

static struct jnode *parse_primary(struct parser *P)
{
    const struct jtok *t = cur(P);
    if (t->kind == T_NAME) {
        static const char *const lits[] = {"true", "false", "none", "True", "False", "None"};
        for (int k = 0; k < 6; k++) {
            if (tok_is(t, T_NAME, lits[k])) {
                advance(P);
                return literal(P, k % 3 == 2 ? jv_none() : jv_bool(k % 3 == 0), t->line);
            }
        }
        struct jnode *x = node(P, N_NAME, t->line);
        if (x && (x->name = tok_name(P, t)))
            x->name_len = t->n;
        advance(P);
        return x && x->name ? x : NULL;
    }
    if (t->kind == T_STRING) {
        struct jbuf b = {0};
        const int line = t->line;
        for (; cur(P)->kind == T_STRING; advance(P))
            if (j_buf_put(P->c, &b, cur(P)->p, cur(P)->n))
                return NULL;
        return literal(P, jv_str(b.p ? b.p : "", b.n), line);
    }
    if (t->kind == T_INT || t->kind == T_FLOAT) {
        advance(P);
        return literal(P, t->kind == T_INT ? jv_int(t->i) : jv_float(t->f), t->line);
    }
    if (tok_is(t, T_OP, "(")) {
        advance(P);
        struct jnode *x = parse_tuple(P, true, true);
        return x && !expect_op(P, ")") ? x : NULL;
    }
    if (tok_is(t, T_OP, "[") || tok_is(t, T_OP, "{"))
        return parse_list_or_dict(P, t->p[0] == '{');
    unexpected(P, NULL);
    return NULL;
}

/* [b], [b:c:d] after an expression */
static struct jnode *parse_subscript(struct parser *P, struct jnode *obj)
{
    const int line = cur(P)->line;
    advance(P);
    struct jnode *parts[3] = {NULL, NULL, NULL};
    int k = 0;
    bool slice = false;
    while (!is_op(P, "]")) {
        if (is_op(P, ":")) {
            if (++k > 2)
                return unexpected(P, NULL), NULL;
            slice = true;
            advance(P);
            continue;
        }
        if (parts[k])
            return unexpected(P, "']'"), NULL;
        if (!(parts[k] = parse_expr(P, true)))
            return NULL;
    }
    advance(P);
    if (!slice && !parts[0])
        return unexpected(P, "an expression"), NULL;
    struct jnode *x = node(P, slice ? N_SLICE : N_ITEM, line);
    if (x) {
        x->a = obj;
        x->b = parts[0];
        x->c = parts[1];
        x->d = parts[2];
    }
    return x;
}

static struct jnode *parse_postfix(struct parser *P, struct jnode *x)
{
    while (x) {
        const int line = cur(P)->line;
        if (is_op(P, ".")) {
            advance(P);
            const struct jtok *t = cur(P);
            if (t->kind == T_INT) {
                struct jnode *it = node(P, N_ITEM, line);
                if (!it || !(it->b = literal(P, jv_int(t->i), line)))
                    return NULL;
                it->a = x;
                x = it;
            } else if (t->kind == T_NAME) {
                struct jnode *at = node(P, N_ATTR, line);
                if (!at || !(at->name = tok_name(P, t)))
                    return NULL;
                at->name_len = t->n;
                at->a = x;
                x = at;
            } else {
                return unexpected(P, "a name"), NULL;
            }
            advance(P);
        } else if (is_op(P, "[")) {
            x = parse_subscript(P, x);
        } else if (is_op(P, "(")) {
            struct jnode *call = node(P, N_CALL, line);
            if (!call || parse_args(P, call))
                return NULL;
            call->a = x;
            x = call;
        } else {
            break;
        }
    }
    return x;
}

static struct jnode *parse_test(struct parser *P, struct jnode *x)
{
    struct jnode *t = node(P, N_TEST, cur(P)->line);
    if (!t)
        return NULL;
    advance(P); /* is */
    if (is_name(P, "not")) {
        t->neg = true;
        advance(P);
    }
    if (cur(P)->kind != T_NAME)
        return unexpected(P, "a test name"), NULL;
    if (!(t->name = tok_name(P, cur(P))))
        return NULL;
    t->op = j_test_id(t->name); /* unknown: checked by check_names */
    advance(P);
    t->a = x;
    const struct jtok *n = cur(P);
    if (is_op(P, "(")) {
        if (parse_args(P, t))
            return NULL;
    } else if ((n->kind == T_NAME && !is_name(P, "else") && !is_name(P, "or") && !is_name(P, "and") &&
                !is_name(P, "if") && !is_name(P, "is") && !is_name(P, "in") && !is_name(P, "not")) ||
               n->kind == T_STRING || n->kind == T_INT || n->kind == T_FLOAT || is_op(P, "[") || is_op(P, "{")) {
        struct jnode *arg = parse_postfix(P, parse_primary(P));
        if (!arg || !(t->kids = j_alloc(P->c, sizeof *t->kids)))
            return NULL;
        t->kids[0] = arg;
        t->n_kids = 1;
    }
    return t;
}

static struct jnode *parse_filters(struct parser *P, struct jnode *x)
{
    while (x) {
        if (is_op(P, "|")) {
            struct jnode *f = node(P, N_FILTER, cur(P)->line);
            if (!f)
                return NULL;
            advance(P);
            if (cur(P)->kind != T_NAME)
                return unexpected(P, "a filter name"), NULL;
            if (!(f->name = tok_name(P, cur(P))))
                return NULL;
            f->op = j_filter_id(f->name); /* unknown: checked by check_names */
            advance(P);
            if (is_op(P, "(") && parse_args(P, f))
                return NULL;
            f->a = x;
            x = f;
        } else if (is_name(P, "is")) {
            x = parse_test(P, x);
        } else if (is_op(P, "(")) {
            x = parse_postfix(P, x);
        } else {
            break;
        }
    }
    return x;
}

static struct jnode *parse_unary(struct parser *P, bool with_filter)
{
    if (enter(P))
        return NULL;
    struct jnode *x;
    if (is_op(P, "-") || is_op(P, "+")) {
        x = node(P, N_NEG, cur(P)->line);
        if (x) {
            x->op = cur(P)->p[0];
            advance(P);
            x->a = parse_unary(P, false);
            if (!x->a)
                x = NULL;
        }
    } else {
        x = parse_primary(P);
    }
    x = parse_postfix(P, x);
    if (with_filter)
        x = parse_filters(P, x);
    P->depth--;
    return x;
}

static struct jnode *binary(struct parser *P, int kind, int op, struct jnode *a, struct jnode *b, int line)
{
    if (!a || !b)
        return NULL;
    struct jnode *x = node(P, kind, line);
    if (x) {
        x->op = op;
        x->a = a;
        x->b = b;
    }
    return x;
}

/* one precedence level of left-associative binary operators */
struct level {
    const char *ops[4];
    int codes[4];
};
static const struct level LEVELS[] = {
    {{"+", "-"}, {OP_ADD, OP_SUB}},
    {{"~"}, {OP_CONCAT}},
    {{"*", "/", "//", "%"}, {OP_MUL, OP_DIV, OP_FLOORDIV, OP_MOD}},
    {{"**"}, {OP_POW}},
};

static struct jnode *parse_math(struct parser *P, int level)
{
    if (level == 4)
        return parse_unary(P, true);
    struct jnode *x = parse_math(P, level + 1);
    for (;;) {
        int op = 0;
        for (int k = 0; k < 4 && LEVELS[level].ops[k]; k++)
            if (is_op(P, LEVELS[level].ops[k]))
                op = LEVELS[level].codes[k];
        if (!op || !x)
            return x;
        const int line = cur(P)->line;
        advance(P);
        x = binary(P, N_BIN, op, x, parse_math(P, level + 1), line);
    }
}

static int cmp_op(struct parser *P)
{
    static const char *const ops[] = {"==", "!=", "<", "<=", ">", ">="};
    static const int codes[] = {OP_EQ, OP_NE, OP_LT, OP_LE, OP_GT, OP_GE};
    for (int k = 0; k < 6; k++)
        if (is_op(P, ops[k]))
            return codes[k];
    if (is_name(P, "in"))
        return OP_IN;
    if (is_name(P, "not") && tok_is(peek(P, 1), T_NAME, "in"))
        return OP_NOTIN;
    return 0;
}

static struct jnode *parse_compare(struct parser *P)
{
    struct jnode *first = parse_math(P, 0);
    if (!first || !cmp_op(P))
        return first;
    struct jnode *x = node(P, N_CMP, cur(P)->line);
    struct nvec v = {0};
    int *ops = NULL;
    size_t cap = 0;
    if (!x)
        return NULL;
    x->a = first;
    for (int op; (op = cmp_op(P));) {
        advance(P);
        if (op == OP_NOTIN)
            advance(P);
        struct jnode *e = parse_math(P, 0);
        if (!e || push(P, &v, e))
            return NULL;
        if (v.n > cap) {
            cap = v.cap;
            int *no = j_alloc(P->c, cap * sizeof *no);
            if (!no)
                return NULL;
            if (ops)
                memcpy(no, ops, (v.n - 1) * sizeof *no);
            ops = no;
        }
        ops[v.n - 1] = op;
    }
    x->kids = v.v;
    x->n_kids = v.n;
    x->ops = ops;
    return x;
}

static struct jnode *parse_not(struct parser *P)
{
    if (!is_name(P, "not"))
        return parse_compare(P);
    if (enter(P))
        return NULL;
    struct jnode *x = node(P, N_NOT, cur(P)->line);
    advance(P);
    if (x && !(x->a = parse_not(P)))
        x = NULL;
    P->depth--;
    return x;
}

static struct jnode *parse_logic(struct parser *P, bool is_or)
{
    struct jnode *x = is_or ? parse_logic(P, false) : parse_not(P);
    while (x && is_name(P, is_or ? "or" : "and")) {
        const int line = cur(P)->line;
        advance(P);
        x = binary(P, is_or ? N_OR : N_AND, 0, x, is_or ? parse_logic(P, false) : parse_not(P), line);
    }
    return x;
}

static struct jnode *parse_expr(struct parser *P, bool with_cond)
{
    if (enter(P))
        return NULL;
    struct jnode *x = parse_logic(P, true);
    while (with_cond && x && is_name(P, "if")) {
        struct jnode *c = node(P, N_COND, cur(P)->line);
        advance(P);
        if (!c || !(c->b = parse_logic(P, true)))
            return NULL;
        c->a = x;
        if (is_name(P, "else")) {
            advance(P);
            if (!(c->c = parse_expr(P, true)))
                return NULL;
        }
        x = c;
    }
    P->depth--;
    return x;
}

/* a, b, ... (a tuple when there is a comma) */
static struct jnode *parse_tuple(struct parser *P, bool with_cond, bool explicit_parens)
{
    const int line = cur(P)->line;
    struct nvec v = {0};
    bool comma = false;
    for (;;) {
        if (v.n && !is_op(P, ","))
            break;
        if (v.n) {
            advance(P);
            comma = true;
        }
        if (cur(P)->kind == T_BLOCK_END || cur(P)->kind == T_VAR_END || is_op(P, ")") ||
            (v.n && (is_name(P, "if") || is_name(P, "in"))))
            break;
        struct jnode *e = parse_expr(P, with_cond);
        if (!e || push(P, &v, e))
            return NULL;
    }
    if (v.n == 1 && !comma)
        return v.v[0];
    if (v.n == 0 && !explicit_parens)
        return unexpected(P, "an expression"), NULL;
    struct jnode *x = node(P, N_TUPLE, line);
    if (x) {
        x->kids = v.v;
        x->n_kids = v.n;
    }
    return x;
}

/* ---- statements ---- */

static int parse_body(struct parser *P, const char *const *ends, struct nvec *out);

static int end_block(struct parser *P) { return expect_kind(P, T_BLOCK_END, "end of statement block"); }

/* the target of for/set: name, ns.attr, or names separated by commas */
static struct jnode *parse_target(struct parser *P, bool allow_attr)
{
    const int line = cur(P)->line;
    struct nvec v = {0};
    bool paren = is_op(P, "(");
    if (paren)
        advance(P);
    do {
        if (v.n)
            advance(P);
        if (cur(P)->kind != T_NAME)
            return unexpected(P, "a name"), NULL;
        struct jnode *x = node(P, N_NAME, cur(P)->line);
        if (!x || !(x->name = tok_name(P, cur(P))))
            return NULL;
        x->name_len = cur(P)->n;
        advance(P);
        if (allow_attr && v.n == 0 && is_op(P, ".")) {
            advance(P);
            if (cur(P)->kind != T_NAME)
                return unexpected(P, "a name"), NULL;
            struct jnode *at = node(P, N_ATTR, line);
            if (!at || !(at->name = tok_name(P, cur(P))))
                return NULL;
            at->name_len = cur(P)->n;
            at->a = x;
            advance(P);
            return at;
        }
        if (push(P, &v, x))
            return NULL;
    } while (is_op(P, ","));
    if (paren && expect_op(P, ")"))
        return NULL;
    if (v.n == 1 && !paren)
        return v.v[0];
    struct jnode *t = node(P, N_TUPLE, line);
    if (t) {
        t->kids = v.v;
        t->n_kids = v.n;
    }
    return t;
}

static int parse_for(struct parser *P, struct jnode *s)
{
    static const char *const ends[] = {"else", "endfor", NULL};
    struct nvec body = {0}, orelse = {0};
    if (!(s->a = parse_target(P, false)))
        return -1;
    if (!is_name(P, "in"))
        return unexpected(P, "'in'");
    advance(P);
    if (!(s->b = parse_tuple(P, false, false)))
        return -1;
    if (is_name(P, "if")) {
        advance(P);
        if (!(s->c = parse_expr(P, true)))
            return -1;
    }
    if (is_name(P, "recursive"))
        return j_fail(P->c, LM_ERR_UNSUPPORTED, "line %d: recursive loops are not supported", s->line);
    if (end_block(P))
        return -1;
    P->loops++;
    if (parse_body(P, ends, &body))
        return -1;
    P->loops--;
    if (is_name(P, "else")) {
        advance(P);
        static const char *const end2[] = {"endfor", NULL};
        if (end_block(P) || parse_body(P, end2, &orelse))
            return -1;
    }
    advance(P);
    s->kids = body.v, s->n_kids = body.n;
    s->kids2 = orelse.v, s->n_kids2 = orelse.n;
    return end_block(P);
}

static int parse_if(struct parser *P, struct jnode *s)
{
    static const char *const ends[] = {"elif", "else", "endif", NULL};
    struct nvec body = {0}, orelse = {0};
    if (!(s->a = parse_tuple(P, true, false)) || end_block(P) || parse_body(P, ends, &body))
        return -1;
    s->kids = body.v, s->n_kids = body.n;
    if (is_name(P, "elif")) {
        struct jnode *e = node(P, S_IF, cur(P)->line);
        advance(P);
        if (!e || enter(P) || parse_if(P, e) || push(P, &orelse, e))
            return -1;
        P->depth--;
        s->kids2 = orelse.v, s->n_kids2 = orelse.n;
        return 0; /* the nested if consumed endif */
    }
    if (is_name(P, "else")) {
        static const char *const end2[] = {"endif", NULL};
        advance(P);
        if (end_block(P) || parse_body(P, end2, &orelse))
            return -1;
    }
    advance(P);
    s->kids2 = orelse.v, s->n_kids2 = orelse.n;
    return end_block(P);
}

static int parse_set(struct parser *P, struct jnode *s)
{
    if (!(s->a = parse_target(P, true)))
        return -1;
    if (is_op(P, "=")) {
        advance(P);
        if (!(s->b = parse_tuple(P, true, false)))
            return -1;
        return end_block(P);
    }
    if (s->a->kind != N_NAME)
        return unexpected(P, "'='");
    static const char *const ends[] = {"endset", NULL};
    struct nvec body = {0};
    s->kind = S_SETBLOCK;
    if (end_block(P) || parse_body(P, ends, &body))
        return -1;
    advance(P);
    s->kids = body.v, s->n_kids = body.n;
    return end_block(P);
}

static int parse_macro(struct parser *P, struct jnode *s)
{
    static const char *const ends[] = {"endmacro", NULL};
    struct nvec body = {0};
    if (cur(P)->kind != T_NAME)
        return unexpected(P, "a macro name");
    if (!(s->name = tok_name(P, cur(P))))
        return -1;
    s->name_len = cur(P)->n;
    advance(P);
    struct jnode params = {0};
    if (parse_args(P, &params))
        return -1;
    for (size_t k = 0; k < params.n_kids; k++)
        if (params.kids[k]->kind != N_NAME && params.kids[k]->kind != N_KWARG)
            return j_fail(P->c, LM_ERR_CORRUPT, "syntax error at line %d: bad macro parameter", s->line);
    s->kids2 = params.kids, s->n_kids2 = params.n_kids;
    const int loops = P->loops;
    P->loops = 0;
    if (end_block(P) || parse_body(P, ends, &body))
        return -1;
    P->loops = loops;
    advance(P);
    s->kids = body.v, s->n_kids = body.n;
    return end_block(P);
}

static struct jnode *parse_statement(struct parser *P)
{
    const struct jtok *t = cur(P);
    struct jnode *s = node(P, S_DATA, t->line);
    if (!s)
        return NULL;
    int r = 0;
    if (t->kind != T_NAME) {
        r = unexpected(P, "a statement");
    } else if (tok_is(t, T_NAME, "for")) {
        s->kind = S_FOR, advance(P), r = parse_for(P, s);
    } else if (tok_is(t, T_NAME, "if")) {
        s->kind = S_IF, advance(P), r = parse_if(P, s);
    } else if (tok_is(t, T_NAME, "set")) {
        s->kind = S_SET, advance(P), r = parse_set(P, s);
    } else if (tok_is(t, T_NAME, "macro")) {
        s->kind = S_MACRO, advance(P), r = parse_macro(P, s);
    } else if ((tok_is(t, T_NAME, "break") || tok_is(t, T_NAME, "continue")) && P->loops > 0) {
        s->kind = t->p[0] == 'b' ? S_BREAK : S_CONTINUE, advance(P), r = end_block(P);
    } else {
        r = j_fail(P->c, LM_ERR_CORRUPT, "syntax error at line %d: unknown tag '%.*s'", t->line,
                   (int)(t->n < 40 ? t->n : 40), t->p);
    }
    return r ? NULL : s;
}

/* statements until a block tag named in ends (left at that name) or the end */
static int parse_body(struct parser *P, const char *const *ends, struct nvec *out)
{
    if (enter(P))
        return -1;
    for (;;) {
        const struct jtok *t = cur(P);
        struct jnode *s = NULL;
        if (t->kind == T_EOF) {
            if (ends) {
                const char *want = ends[0];
                for (size_t k = 1; ends[k]; k++)
                    want = ends[k];
                return j_fail(P->c, LM_ERR_CORRUPT,
                              "syntax error at line %d: unexpected end of template, expected '%s'", t->line, want);
            }
            break;
        }
        if (t->kind == T_DATA) {
            if (!(s = node(P, S_DATA, t->line)))
                return -1;
            s->name = t->p, s->name_len = t->n;
            advance(P);
        } else if (t->kind == T_VAR_BEGIN) {
            advance(P);
            if (!(s = node(P, S_OUTPUT, t->line)) || !(s->a = parse_tuple(P, true, false)) ||
                expect_kind(P, T_VAR_END, "end of print statement"))
                return -1;
        } else if (t->kind == T_BLOCK_BEGIN) {
            advance(P);
            for (size_t k = 0; ends && ends[k]; k++)
                if (is_name(P, ends[k]))
                    goto done;
            if (!(s = parse_statement(P)))
                return -1;
        } else {
            return unexpected(P, NULL);
        }
        if (push(P, out, s))
            return -1;
    }
done:
    P->depth--;
    return 0;
}

/* unknown filters and tests are errors now, as jinja2 reports them when it
 * compiles, except under an `if` or a conditional expression, where jinja2
 * (and eval) report them only when they run */
static int check_names(struct jctx *c, const struct jnode *x, bool soft)
{
    if (!x)
        return 0;
    if ((x->kind == N_FILTER || x->kind == N_TEST) && x->op < 0 && !soft)
        return j_fail(c, LM_ERR_CORRUPT, "syntax error at line %d: no %s named '%s'", x->line,
                      x->kind == N_FILTER ? "filter" : "test", x->name);
    soft |= x->kind == S_IF || x->kind == N_COND;
    const struct jnode *parts[4] = {x->a, x->b, x->c, x->d};
    for (int k = 0; k < 4; k++)
        if (check_names(c, parts[k], soft))
            return -1;
    for (size_t k = 0; k < x->n_kids; k++)
        if (check_names(c, x->kids[k], soft))
            return -1;
    for (size_t k = 0; k < x->n_kids2; k++)
        if (check_names(c, x->kids2[k], soft))
            return -1;
    return 0;
}

int j_parse(struct jctx *c, const struct jtok *toks, size_t n_toks, struct jnode **root)
{
    struct parser P = {.c = c, .t = toks, .n = n_toks};
    struct nvec body = {0};
    if (parse_body(&P, NULL, &body))
        return -1;
    struct jnode *r = node(&P, S_IF, 1); /* a root: `if true` around the body */
    if (!r)
        return -1;
    r->kids = body.v, r->n_kids = body.n;
    for (size_t k = 0; k < body.n; k++)
        if (check_names(c, body.v[k], false))
            return -1;
    *root = r;
    return 0;
}
