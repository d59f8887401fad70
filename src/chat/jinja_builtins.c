/* jinja_builtins.c - operators, filters, tests, global functions and the
 * methods of dicts, lists and loops, with Python's semantics.
 *
 * Filters and tests are tables (name -> id) looked up once by the parser;
 * their bodies switch on the id. Integers are 64-bit: where Python would grow
 * a big integer, this is an error. Anything a template cannot do in
 * transformers' ImmutableSandboxedEnvironment (changing a list or dict in
 * place, ranges over 100000 items) is an error here too. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "chat/jinja.h"

#define V_LIST(x_) ((struct jv){.kind = JV_LIST, .u.l = (x_)})
#define V_DICT(x_) ((struct jv){.kind = JV_DICT, .u.d = (x_)})

static int type_error(struct jctx *c, const char *what, struct jv a, struct jv b)
{
    if (a.kind == JV_UNDEF || b.kind == JV_UNDEF) {
        const struct jv u = a.kind == JV_UNDEF ? a : b;
        return j_fail(c, LM_ERR_CORRUPT, "line %d: UndefinedError: %s", c->line,
                      u.u.s.n ? u.u.s.p : "value is undefined");
    }
    return j_fail(c, LM_ERR_CORRUPT, "line %d: TypeError: unsupported operand type(s) for %s: '%s' and '%s'", c->line,
                  what, jv_type_name(a), jv_type_name(b));
}

static bool is_int(struct jv v) { return v.kind == JV_INT || v.kind == JV_BOOL; }
static bool is_num(struct jv v) { return is_int(v) || v.kind == JV_FLOAT; }
static int64_t as_i(struct jv v) { return v.kind == JV_INT ? v.u.i : v.u.b; }
static double as_f(struct jv v) { return v.kind == JV_FLOAT ? v.u.f : (double)as_i(v); }

static int overflow(struct jctx *c) { return j_fail(c, LM_ERR_CORRUPT, "line %d: integer overflow", c->line); }

static int repeat(struct jctx *c, struct jv seq, int64_t times, struct jv *out)
{
    if (times < 0)
        times = 0;
    const size_t n = seq.kind == JV_STR ? seq.u.s.n : seq.u.l->n;
    if (n && (uint64_t)times > c->ar.budget / n)
        return j_fail(c, LM_ERR_FULL, "line %d: memory limit reached (repeat %lld times)", c->line, (long long)times);
    if (seq.kind == JV_STR) {
        char *p = j_alloc(c, n * (size_t)times + 1);
        if (!p)
            return -1;
        for (int64_t i = 0; i < times; i++)
            memcpy(p + (size_t)i * n, seq.u.s.p, n);
        *out = jv_str(p, n * (size_t)times);
        return 0;
    }
    struct jlist *l = jl_new(c, n * (size_t)times);
    if (!l)
        return -1;
    for (int64_t i = 0; i < times; i++)
        memcpy(l->v + (size_t)i * n, seq.u.l->v, n * sizeof *l->v);
    *out = V_LIST(l);
    return 0;
}

static int concat(struct jctx *c, struct jv a, struct jv b, struct jv *out)
{
    if (a.kind == JV_STR) {
        char *p = j_alloc(c, a.u.s.n + b.u.s.n + 1);
        if (!p)
            return -1;
        memcpy(p, a.u.s.p, a.u.s.n);
        memcpy(p + a.u.s.n, b.u.s.p, b.u.s.n);
        *out = jv_str(p, a.u.s.n + b.u.s.n);
        return 0;
    }
    struct jlist *l = jl_new(c, a.u.l->n + b.u.l->n);
    if (!l)
        return -1;
    memcpy(l->v, a.u.l->v, a.u.l->n * sizeof *l->v);
    memcpy(l->v + a.u.l->n, b.u.l->v, b.u.l->n * sizeof *l->v);
    l->tuple = a.u.l->tuple;
    *out = V_LIST(l);
    return 0;
}

static int int_arith(struct jctx *c, int op, int64_t x, int64_t y, struct jv *out)
{
    int64_t r = 0;
    switch (op) {
    case OP_ADD: if (__builtin_add_overflow(x, y, &r)) return overflow(c); break;
    case OP_SUB: if (__builtin_sub_overflow(x, y, &r)) return overflow(c); break;
    case OP_MUL: if (__builtin_mul_overflow(x, y, &r)) return overflow(c); break;
    case OP_FLOORDIV:
    case OP_MOD:
        if (y == 0)
            return j_fail(c, LM_ERR_CORRUPT, "line %d: ZeroDivisionError: integer division or modulo by zero",
                          c->line);
        if (x == INT64_MIN && y == -1)
            return overflow(c);
        r = op == OP_MOD ? x % y : x / y;
        if (op == OP_MOD && r != 0 && ((r < 0) != (y < 0)))
            r += y;
        else if (op == OP_FLOORDIV && (x % y != 0) && ((x < 0) != (y < 0)))
            r -= 1;
        break;
    case OP_POW:
        if (y < 0) {
            *out = jv_float(pow((double)x, (double)y));
            return 0;
        }
        r = 1;
        for (int64_t base = x, e = y; e > 0; e >>= 1) {
            if ((e & 1) && __builtin_mul_overflow(r, base, &r))
                return overflow(c);
            if (e > 1 && __builtin_mul_overflow(base, base, &base))
                return overflow(c);
        }
        break;
    }
    *out = jv_int(r);
    return 0;
}

static int float_arith(struct jctx *c, int op, double x, double y, struct jv *out)
{
    double r = 0;
    if ((op == OP_DIV || op == OP_FLOORDIV || op == OP_MOD) && y == 0)
        return j_fail(c, LM_ERR_CORRUPT, "line %d: ZeroDivisionError: float division by zero", c->line);
    switch (op) {
    case OP_ADD: r = x + y; break;
    case OP_SUB: r = x - y; break;
    case OP_MUL: r = x * y; break;
    case OP_DIV: r = x / y; break;
    case OP_FLOORDIV: r = floor(x / y); break;
    case OP_MOD:
        r = fmod(x, y);
        if (r != 0 && ((r < 0) != (y < 0)))
            r += y;
        break;
    case OP_POW: r = pow(x, y); break;
    }
    *out = jv_float(r);
    return 0;
}

static int contains(struct jctx *c, struct jv hay, struct jv needle, bool *out)
{
    *out = false;
    switch (hay.kind) {
    case JV_UNDEF: return 0;
    case JV_STR:
        if (needle.kind != JV_STR)
            return j_fail(c, LM_ERR_CORRUPT, "line %d: TypeError: 'in <string>' requires string as left operand",
                          c->line);
        if (needle.u.s.n == 0)
            *out = true;
        else
            *out = memmem(hay.u.s.p, hay.u.s.n, needle.u.s.p, needle.u.s.n) != NULL;
        return 0;
    case JV_LIST:
        for (size_t i = 0; i < hay.u.l->n && !*out; i++)
            *out = jv_equal(hay.u.l->v[i], needle);
        return 0;
    case JV_DICT: *out = jd_get(hay.u.d, needle) != NULL; return 0;
    default:
        return j_fail(c, LM_ERR_CORRUPT, "line %d: TypeError: argument of type '%s' is not iterable", c->line,
                      jv_type_name(hay));
    }
}

static int arith(struct jctx *c, int op, struct jv a, struct jv b, struct jv *out)
{
    static const char *const sym[] = {[OP_ADD] = "+", [OP_SUB] = "-", [OP_MUL] = "*", [OP_DIV] = "/",
                                      [OP_FLOORDIV] = "//", [OP_MOD] = "%", [OP_POW] = "**"};
    if (is_num(a) && is_num(b)) {
        if (op == OP_DIV || a.kind == JV_FLOAT || b.kind == JV_FLOAT)
            return float_arith(c, op, as_f(a), as_f(b), out);
        return int_arith(c, op, as_i(a), as_i(b), out);
    }
    if (op == OP_ADD && a.kind == b.kind && (a.kind == JV_STR || a.kind == JV_LIST))
        return concat(c, a, b, out);
    if (op == OP_MUL && (a.kind == JV_STR || a.kind == JV_LIST) && is_int(b))
        return repeat(c, a, as_i(b), out);
    if (op == OP_MUL && (b.kind == JV_STR || b.kind == JV_LIST) && is_int(a))
        return repeat(c, b, as_i(a), out);
    if (op == OP_MOD && a.kind == JV_STR)
        return j_str_format_pct(c, a, b, out);
    return type_error(c, sym[op], a, b);
}

int j_binop(struct jctx *c, int op, struct jv a, struct jv b, struct jv *out)
{
    int r;
    bool in;
    switch (op) {
    case OP_CONCAT: {
        struct jv sa, sb;
        if (jv_to_str(c, a, &sa) || jv_to_str(c, b, &sb))
            return -1;
        return concat(c, sa, sb, out);
    }
    case OP_EQ: *out = jv_bool(jv_equal(a, b)); return 0;
    case OP_NE: *out = jv_bool(!jv_equal(a, b)); return 0;
    case OP_LT:
    case OP_LE:
    case OP_GT:
    case OP_GE:
        if (a.kind == JV_UNDEF || b.kind == JV_UNDEF)
            return type_error(c, "<", a, b);
        if (jv_compare(c, a, b, &r))
            return -1;
        *out = jv_bool(r != 2 && (op == OP_LT ? r < 0 : op == OP_LE ? r <= 0 : op == OP_GT ? r > 0 : r >= 0));
        return 0;
    case OP_IN:
    case OP_NOTIN:
        if (contains(c, b, a, &in))
            return -1;
        *out = jv_bool(in == (op == OP_IN));
        return 0;
    default: return arith(c, op, a, b, out);
    }
}

/* ---- argument helpers ---- */

/* argument i (after the value), or keyword name; def when absent */
struct jv j_arg(const struct jargs *a, size_t i, const char *name, struct jv def)
{
    if (i < a->n_pos)
        return a->pos[i];
    for (size_t k = 0; name && k < a->n_kw; k++)
        if (!strcmp(a->kw_names[k], name))
            return a->kw_vals[k];
    return def;
}

int j_need_str(struct jctx *c, struct jv v, const char *what)
{
    if (v.kind == JV_STR)
        return 0;
    return j_fail(c, LM_ERR_CORRUPT, "line %d: TypeError: %s expects a string, got '%s'", c->line, what,
                  jv_type_name(v));
}

int j_need_int(struct jctx *c, struct jv v, const char *what, int64_t *out)
{
    if (is_int(v)) {
        *out = as_i(v);
        return 0;
    }
    return j_fail(c, LM_ERR_CORRUPT, "line %d: TypeError: %s expects an integer, got '%s'", c->line, what,
                  jv_type_name(v));
}

/* item.attribute (dotted paths, integer parts as indexes), as jinja2's make_attrgetter */
int j_attr_path(struct jctx *c, struct jv item, struct jv path, struct jv *out)
{
    if (is_int(path))
        return j_getitem(c, item, path, out);
    if (j_need_str(c, path, "attribute"))
        return -1;
    const char *p = path.u.s.p, *end = p + path.u.s.n;
    while (p <= end) {
        const char *dot = memchr(p, '.', (size_t)(end - p));
        if (!dot)
            dot = end;
        struct jv key = jv_str(p, (size_t)(dot - p));
        bool digits = dot > p;
        for (const char *q = p; q < dot; q++)
            digits &= *q >= '0' && *q <= '9';
        if (digits && dot - p < 18)
            key = jv_int(strtoll(p, NULL, 10));
        if (j_getitem(c, item, key, &item))
            return -1;
        p = dot + 1;
    }
    *out = item;
    return 0;
}

/* ---- tests ---- */

enum {
    T_DEFINED, T_UNDEFINED, T_NONE, T_BOOLEAN, T_FALSE, T_TRUE, T_INTEGER, T_FLOAT_, T_NUMBER, T_STRING_,
    T_MAPPING, T_ITERABLE, T_SEQUENCE, T_CALLABLE, T_SAMEAS, T_ESCAPED, T_ODD, T_EVEN, T_DIVISIBLEBY, T_EQ,
    T_NE, T_LT, T_LE, T_GT, T_GE, T_IN, T_LOWER, T_UPPER,
};
static const struct {
    const char *name;
    int id;
} TESTS[] = {
    {"defined", T_DEFINED}, {"undefined", T_UNDEFINED}, {"none", T_NONE}, {"boolean", T_BOOLEAN},
    {"false", T_FALSE}, {"true", T_TRUE}, {"integer", T_INTEGER}, {"float", T_FLOAT_}, {"number", T_NUMBER},
    {"string", T_STRING_}, {"mapping", T_MAPPING}, {"iterable", T_ITERABLE}, {"sequence", T_SEQUENCE},
    {"callable", T_CALLABLE}, {"sameas", T_SAMEAS}, {"escaped", T_ESCAPED}, {"odd", T_ODD}, {"even", T_EVEN},
    {"divisibleby", T_DIVISIBLEBY}, {"eq", T_EQ}, {"equalto", T_EQ}, {"==", T_EQ}, {"ne", T_NE}, {"!=", T_NE},
    {"lt", T_LT}, {"lessthan", T_LT}, {"<", T_LT}, {"le", T_LE}, {"<=", T_LE}, {"gt", T_GT},
    {"greaterthan", T_GT}, {">", T_GT}, {"ge", T_GE}, {">=", T_GE}, {"in", T_IN}, {"lower", T_LOWER},
    {"upper", T_UPPER},
};

int j_test_id(const char *name)
{
    for (size_t i = 0; i < sizeof TESTS / sizeof *TESTS; i++)
        if (!strcmp(TESTS[i].name, name))
            return TESTS[i].id;
    return -1;
}

static int test_cmp(struct jctx *c, int id, struct jv v, struct jv other, bool *out)
{
    static const int ops[] = {[T_EQ] = OP_EQ, [T_NE] = OP_NE, [T_LT] = OP_LT, [T_LE] = OP_LE,
                              [T_GT] = OP_GT, [T_GE] = OP_GE, [T_IN] = OP_IN};
    struct jv r;
    if (j_binop(c, ops[id], v, other, &r))
        return -1;
    *out = r.u.b;
    return 0;
}

static int test_case(struct jctx *c, struct jv v, int mode, bool *out)
{
    struct jv s, conv;
    if (jv_to_str(c, v, &s) || j_case(c, s, mode, &conv))
        return -1;
    bool cased = false;
    for (size_t i = 0; i < s.u.s.n; i++)
        cased |= (s.u.s.p[i] >= 'a' && s.u.s.p[i] <= 'z') || (s.u.s.p[i] >= 'A' && s.u.s.p[i] <= 'Z');
    *out = cased && jv_equal(s, conv);
    return 0;
}

int j_apply_test(struct jctx *c, int id, struct jv v, const struct jv *args, size_t n_args, bool *out)
{
    const struct jv a0 = n_args ? args[0] : jv_undef(NULL);
    int64_t k;
    switch (id) {
    case T_DEFINED: *out = v.kind != JV_UNDEF; return 0;
    case T_UNDEFINED: *out = v.kind == JV_UNDEF; return 0;
    case T_NONE: *out = v.kind == JV_NONE; return 0;
    case T_BOOLEAN: *out = v.kind == JV_BOOL; return 0;
    case T_FALSE: *out = v.kind == JV_BOOL && !v.u.b; return 0;
    case T_TRUE: *out = v.kind == JV_BOOL && v.u.b; return 0;
    case T_INTEGER: *out = v.kind == JV_INT; return 0;
    case T_FLOAT_: *out = v.kind == JV_FLOAT; return 0;
    case T_NUMBER: *out = is_num(v); return 0;
    case T_STRING_: *out = v.kind == JV_STR; return 0;
    case T_MAPPING: *out = v.kind == JV_DICT; return 0;
    case T_ITERABLE:
    case T_SEQUENCE:
        *out = v.kind == JV_STR || v.kind == JV_LIST || v.kind == JV_DICT || v.kind == JV_UNDEF;
        return 0;
    case T_CALLABLE: *out = v.kind == JV_MACRO || v.kind == JV_FUNC || v.kind == JV_METHOD; return 0;
    case T_SAMEAS:
        *out = v.kind == a0.kind && (v.kind == JV_LIST || v.kind == JV_DICT || v.kind == JV_NS
                                         ? v.u.l == a0.u.l
                                         : jv_equal(v, a0));
        return 0;
    case T_ESCAPED: *out = false; return 0;
    case T_ODD:
    case T_EVEN:
    case T_DIVISIBLEBY: {
        struct jv r;
        if (id != T_DIVISIBLEBY && j_need_int(c, v, id == T_ODD ? "odd" : "even", &k))
            return -1;
        if (j_binop(c, OP_MOD, v, id == T_DIVISIBLEBY ? a0 : jv_int(2), &r))
            return -1;
        *out = id == T_ODD ? jv_truthy(r) : !jv_truthy(r);
        return 0;
    }
    case T_LOWER: return test_case(c, v, 0, out);
    case T_UPPER: return test_case(c, v, 1, out);
    default: return test_cmp(c, id, v, a0, out);
    }
}

/* ---- global functions ---- */

enum { G_RAISE, G_STRFTIME, G_NAMESPACE, G_RANGE, G_DICT };
static const char *const GLOBALS[] = {"raise_exception", "strftime_now", "namespace", "range", "dict"};

int j_global_id(const char *name, size_t n)
{
    for (int i = 0; i < (int)(sizeof GLOBALS / sizeof *GLOBALS); i++)
        if (strlen(GLOBALS[i]) == n && !memcmp(GLOBALS[i], name, n))
            return i;
    return -1;
}

static int g_range(struct jctx *c, const struct jargs *a, struct jv *out)
{
    int64_t start = 0, stop, step = 1;
    if (a->n_pos < 1 || a->n_pos > 3)
        return j_fail(c, LM_ERR_CORRUPT, "line %d: TypeError: range expected 1 to 3 arguments", c->line);
    if (j_need_int(c, a->pos[0], "range", a->n_pos == 1 ? &stop : &start) ||
        (a->n_pos > 1 && j_need_int(c, a->pos[1], "range", &stop)) ||
        (a->n_pos > 2 && j_need_int(c, a->pos[2], "range", &step)))
        return -1;
    if (step == 0)
        return j_fail(c, LM_ERR_CORRUPT, "line %d: ValueError: range() arg 3 must not be zero", c->line);
    /* count in double: the bounds may be anywhere in int64 */
    const double span = step > 0 ? (double)stop - (double)start : (double)start - (double)stop;
    const double count = span <= 0 ? 0 : ceil(span / fabs((double)step));
    if (count > J_MAX_RANGE)
        return j_fail(c, LM_ERR_CORRUPT,
                      "line %d: OverflowError: Range too big. The sandbox blocks ranges larger than MAX_RANGE (%d).",
                      c->line, J_MAX_RANGE);
    struct jlist *l = jl_new(c, (size_t)count);
    if (!l)
        return -1;
    for (size_t i = 0; i < l->n; i++)
        l->v[i] = jv_int(start + (int64_t)i * step);
    *out = V_LIST(l);
    return 0;
}

/* dict(...) and namespace(...): positional dicts (or lists of pairs), then keywords */
static int g_dict(struct jctx *c, const struct jargs *a, bool ns, struct jv *out)
{
    struct jdict *d = jd_new(c);
    if (!d)
        return -1;
    for (size_t i = 0; i < a->n_pos; i++) {
        const struct jv p = a->pos[i];
        if (p.kind == JV_DICT) {
            for (size_t k = 0; k < p.u.d->n; k++)
                if (jd_set(c, d, p.u.d->k[k], p.u.d->v[k]))
                    return -1;
        } else if (p.kind == JV_LIST) {
            for (size_t k = 0; k < p.u.l->n; k++) {
                const struct jv kv = p.u.l->v[k];
                if (kv.kind != JV_LIST || kv.u.l->n != 2)
                    return j_fail(c, LM_ERR_CORRUPT, "line %d: ValueError: dictionary update sequence element "
                                                     "has the wrong length", c->line);
                if (jd_set(c, d, kv.u.l->v[0], kv.u.l->v[1]))
                    return -1;
            }
        } else {
            return j_fail(c, LM_ERR_CORRUPT, "line %d: TypeError: '%s' object is not iterable", c->line,
                          jv_type_name(p));
        }
    }
    for (size_t k = 0; k < a->n_kw; k++)
        if (jd_set(c, d, jv_cstr(a->kw_names[k]), a->kw_vals[k]))
            return -1;
    *out = (struct jv){.kind = ns ? JV_NS : JV_DICT, .u.d = d};
    return 0;
}

static int g_strftime(struct jctx *c, const struct jargs *a, struct jv *out)
{
    const struct jv f = j_arg(a, 0, "format", jv_undef(NULL));
    if (j_need_str(c, f, "strftime_now"))
        return -1;
    if (c->now_string) {
        *out = jv_cstr(c->now_string);
        return 0;
    }
    const time_t t = c->now ? (time_t)c->now : time(NULL);
    struct tm tm;
    char *fmt = j_strdup(c, f.u.s.p, f.u.s.n < 256 ? f.u.s.n : 256), *buf = j_alloc(c, 1024);
    if (!fmt || !buf)
        return -1;
    if (!localtime_r(&t, &tm))
        return j_fail(c, LM_ERR_CORRUPT, "line %d: strftime_now: no local time", c->line);
    const size_t n = strftime(buf, 1024, fmt, &tm);
    *out = jv_str(buf, n);
    return 0;
}

int j_call_global(struct jctx *c, int id, const struct jv *args, size_t n_args, const char *const *kw_names,
                  const struct jv *kw_vals, size_t n_kw, struct jv *out)
{
    const struct jargs a = {args, n_args, kw_names, kw_vals, n_kw};
    switch (id) {
    case G_RAISE: {
        struct jv msg;
        if (jv_to_str(c, j_arg(&a, 0, "message", jv_str("", 0)), &msg))
            return -1;
        return j_fail(c, LM_ERR_CORRUPT, "TemplateError: %.*s", (int)(msg.u.s.n < 4000 ? msg.u.s.n : 4000),
                      msg.u.s.p);
    }
    case G_STRFTIME: return g_strftime(c, &a, out);
    case G_NAMESPACE: return g_dict(c, &a, true, out);
    case G_RANGE: return g_range(c, &a, out);
    default: return g_dict(c, &a, false, out);
    }
}

/* ---- methods of dicts, lists and loops (strings: jinja_str.c) ---- */

static const char *const DICT_METHODS[] = {"items", "keys", "values", "get", "copy", NULL};
static const char *const LIST_METHODS[] = {"index", "count", "copy", NULL};
/* in place changes: refused, as the immutable sandbox does */
static const char *const UNSAFE[] = {"append", "extend", "insert", "pop", "remove", "clear", "sort", "reverse",
                                     "update", "popitem", "setdefault", NULL};

static bool in_list(const char *const *names, const char *name, size_t n)
{
    for (; *names; names++)
        if (strlen(*names) == n && !memcmp(*names, name, n))
            return true;
    return false;
}

bool j_has_method(struct jv self, const char *name, size_t n)
{
    if (self.kind == JV_STR)
        return j_str_has_method(name, n);
    if (in_list(UNSAFE, name, n))
        return self.kind == JV_LIST || self.kind == JV_DICT;
    if (self.kind == JV_DICT)
        return in_list(DICT_METHODS, name, n);
    return self.kind == JV_LIST && in_list(LIST_METHODS, name, n);
}

static int dict_method(struct jctx *c, const struct jdict *d, const char *name, const struct jargs *a,
                       struct jv *out)
{
    if (!strcmp(name, "get")) {
        const struct jv *hit = jd_get(d, j_arg(a, 0, "key", jv_none()));
        *out = hit ? *hit : j_arg(a, 1, "default", jv_none());
        return 0;
    }
    if (!strcmp(name, "copy")) {
        *out = V_DICT((struct jdict *)d);
        return 0;
    }
    struct jlist *l = jl_new(c, d->n);
    if (!l)
        return -1;
    for (size_t i = 0; i < d->n; i++) {
        if (name[0] == 'k') {
            l->v[i] = d->k[i];
        } else if (name[0] == 'v') {
            l->v[i] = d->v[i];
        } else {
            struct jlist *kv = jl_new(c, 2);
            if (!kv)
                return -1;
            kv->tuple = true;
            kv->v[0] = d->k[i];
            kv->v[1] = d->v[i];
            l->v[i] = V_LIST(kv);
        }
    }
    *out = V_LIST(l);
    return 0;
}

static int list_method(struct jctx *c, const struct jlist *l, const char *name, const struct jargs *a,
                       struct jv *out)
{
    const struct jv x = j_arg(a, 0, NULL, jv_undef(NULL));
    if (!strcmp(name, "copy")) {
        *out = V_LIST((struct jlist *)l);
        return 0;
    }
    int64_t count = 0;
    for (size_t i = 0; i < l->n; i++) {
        if (!jv_equal(l->v[i], x))
            continue;
        if (name[0] == 'i') {
            *out = jv_int((int64_t)i);
            return 0;
        }
        count++;
    }
    if (name[0] == 'i')
        return j_fail(c, LM_ERR_CORRUPT, "line %d: ValueError: item is not in list", c->line);
    *out = jv_int(count);
    return 0;
}

int j_call_method(struct jctx *c, const struct jmethod *m, const struct jv *args, size_t n_args,
                  const char *const *kw_names, const struct jv *kw_vals, size_t n_kw, struct jv *out)
{
    const struct jargs a = {args, n_args, kw_names, kw_vals, n_kw};
    const struct jv self = m->self;
    if (self.kind == JV_STR)
        return j_str_method(c, self, m->name, args, n_args, kw_names, kw_vals, n_kw, out);
    if (in_list(UNSAFE, m->name, strlen(m->name)))
        return j_fail(c, LM_ERR_CORRUPT, "line %d: SecurityError: access to attribute '%s' of '%s' object is unsafe.",
                      c->line, m->name, jv_type_name(self));
    if (self.kind == JV_DICT)
        return dict_method(c, self.u.d, m->name, &a, out);
    if (self.kind == JV_LIST)
        return list_method(c, self.u.l, m->name, &a, out);
    if (self.kind == JV_LOOP && n_args > 0) { /* loop.cycle(a, b, ...) */
        *out = args[self.u.loop->index0 % (int64_t)n_args];
        return 0;
    }
    return j_fail(c, LM_ERR_CORRUPT, "line %d: TypeError: bad call of method '%s'", c->line, m->name);
}
