/* jinja_filters.c - the filters (`value | name(args)`), as jinja2 3.1 and
 * transformers define them.
 *
 * `tojson` is Python's json.dumps(value, ensure_ascii=False, indent=None,
 * separators=None, sort_keys=False), the override transformers installs (not
 * jinja2's HTML-safe one). Case mapping is ASCII only. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/jinja.h"

#define V_LIST(x_) ((struct jv){.kind = JV_LIST, .u.l = (x_)})

enum {
    F_ABS, F_CAPITALIZE, F_COUNT, F_DEFAULT, F_ESCAPE, F_FIRST, F_FLOAT, F_FORMAT, F_INDENT, F_INT, F_ITEMS,
    F_JOIN, F_LAST, F_LIST, F_LOWER, F_MAP, F_MAX, F_MIN, F_REJECT, F_REJECTATTR, F_REPLACE, F_REVERSE, F_ROUND,
    F_SAFE, F_SELECT, F_SELECTATTR, F_SORT, F_STRING, F_SUM, F_TITLE, F_TOJSON, F_TRIM, F_UNIQUE, F_UPPER,
};
static const struct {
    const char *name;
    int id;
} FILTERS[] = {
    {"abs", F_ABS}, {"capitalize", F_CAPITALIZE}, {"count", F_COUNT}, {"length", F_COUNT}, {"d", F_DEFAULT},
    {"default", F_DEFAULT}, {"e", F_ESCAPE}, {"escape", F_ESCAPE}, {"first", F_FIRST}, {"float", F_FLOAT},
    {"format", F_FORMAT}, {"indent", F_INDENT}, {"int", F_INT}, {"items", F_ITEMS}, {"join", F_JOIN},
    {"last", F_LAST}, {"list", F_LIST}, {"lower", F_LOWER}, {"map", F_MAP}, {"max", F_MAX}, {"min", F_MIN},
    {"reject", F_REJECT}, {"rejectattr", F_REJECTATTR}, {"replace", F_REPLACE}, {"reverse", F_REVERSE},
    {"round", F_ROUND}, {"safe", F_SAFE}, {"select", F_SELECT}, {"selectattr", F_SELECTATTR}, {"sort", F_SORT},
    {"string", F_STRING}, {"sum", F_SUM}, {"title", F_TITLE}, {"tojson", F_TOJSON}, {"trim", F_TRIM},
    {"unique", F_UNIQUE}, {"upper", F_UPPER},
};

int j_filter_id(const char *name)
{
    for (size_t i = 0; i < sizeof FILTERS / sizeof *FILTERS; i++)
        if (!strcmp(FILTERS[i].name, name))
            return FILTERS[i].id;
    return -1;
}

static int f_length(struct jctx *c, struct jv v, struct jv *out)
{
    switch (v.kind) {
    case JV_UNDEF: *out = jv_int(0); return 0;
    case JV_STR: *out = jv_int((int64_t)j_utf8_len(v.u.s.p, v.u.s.n)); return 0;
    case JV_LIST: *out = jv_int((int64_t)v.u.l->n); return 0;
    case JV_DICT:
    case JV_NS: *out = jv_int((int64_t)v.u.d->n); return 0;
    default:
        return j_fail(c, LM_ERR_CORRUPT, "line %d: TypeError: object of type '%s' has no len()", c->line,
                      jv_type_name(v));
    }
}

static int f_first_last(struct jctx *c, struct jv v, bool last, struct jv *out)
{
    struct jlist *l;
    if (v.kind == JV_UNDEF) {
        *out = v;
        return 0;
    }
    if (j_iterate(c, v, &l))
        return -1;
    if (l->n == 0)
        *out = jv_undef(last ? "No last item, sequence was empty." : "No first item, sequence was empty.");
    else
        *out = l->v[last ? l->n - 1 : 0];
    return 0;
}

static int f_join(struct jctx *c, struct jv v, const struct jargs *a, struct jv *out)
{
    struct jlist *l;
    struct jv sep = j_arg(a, 0, "d", jv_str("", 0)), attr = j_arg(a, 1, "attribute", jv_none());
    struct jbuf b = {0};
    if (j_iterate(c, v, &l) || jv_to_str(c, sep, &sep))
        return -1;
    for (size_t i = 0; i < l->n; i++) {
        struct jv item = l->v[i], s;
        if (attr.kind != JV_NONE && j_attr_path(c, item, attr, &item))
            return -1;
        if ((i && j_buf_put(c, &b, sep.u.s.p, sep.u.s.n)) || jv_to_str(c, item, &s) ||
            j_buf_put(c, &b, s.u.s.p, s.u.s.n))
            return -1;
    }
    *out = jv_str(b.p ? b.p : "", b.n);
    return 0;
}

/* select/reject/selectattr/rejectattr/map */
static int f_select(struct jctx *c, int id, struct jv v, const struct jargs *a, struct jv *out)
{
    const bool by_attr = id == F_SELECTATTR || id == F_REJECTATTR;
    const bool keep_if = id == F_SELECT || id == F_SELECTATTR;
    struct jlist *l, *r;
    if (j_iterate(c, v, &l) || !(r = jl_new(c, l->n)))
        return -1;
    r->n = 0;
    const size_t t = by_attr ? 1 : 0; /* index of the test name */
    const struct jv attr = by_attr ? j_arg(a, 0, "attribute", jv_undef(NULL)) : jv_none();
    const struct jv test = t < a->n_pos ? a->pos[t] : jv_none();
    int tid = -1;
    if (test.kind != JV_NONE) {
        char *name = test.kind == JV_STR ? j_strdup(c, test.u.s.p, test.u.s.n) : NULL;
        if (!name || (tid = j_test_id(name)) < 0)
            return j_fail(c, LM_ERR_CORRUPT, "line %d: TemplateRuntimeError: no test named '%s'", c->line,
                          name ? name : "?");
    }
    const size_t n_targs = a->n_pos > t + 1 ? a->n_pos - t - 1 : 0;
    for (size_t i = 0; i < l->n; i++) {
        struct jv item = l->v[i];
        bool ok;
        if (by_attr && j_attr_path(c, item, attr, &item))
            return -1;
        if (tid < 0)
            ok = jv_truthy(item);
        else if (j_apply_test(c, tid, item, a->pos + t + 1, n_targs, &ok))
            return -1;
        if (ok == keep_if)
            r->v[r->n++] = l->v[i];
    }
    *out = V_LIST(r);
    return 0;
}

static int f_map(struct jctx *c, struct jv v, const struct jargs *a, struct jv *out)
{
    struct jlist *l, *r;
    if (j_iterate(c, v, &l) || !(r = jl_new(c, l->n)))
        return -1;
    const struct jv attr = j_arg(a, SIZE_MAX, "attribute", jv_undef(NULL));
    const struct jv def = j_arg(a, SIZE_MAX, "default", jv_undef(NULL));
    int fid = -1;
    if (attr.kind == JV_UNDEF) {
        const struct jv f = j_arg(a, 0, NULL, jv_none());
        char *name = f.kind == JV_STR ? j_strdup(c, f.u.s.p, f.u.s.n) : NULL;
        if (!name || (fid = j_filter_id(name)) < 0)
            return j_fail(c, LM_ERR_CORRUPT, "line %d: map: no filter named '%s'", c->line, name ? name : "?");
    }
    for (size_t i = 0; i < l->n; i++) {
        if (fid >= 0) {
            if (j_apply_filter(c, fid, l->v[i], a->pos + 1, a->n_pos - 1, NULL, NULL, 0, &r->v[i]))
                return -1;
        } else {
            if (j_attr_path(c, l->v[i], attr, &r->v[i]))
                return -1;
            if (r->v[i].kind == JV_UNDEF && def.kind != JV_UNDEF)
                r->v[i] = def;
        }
    }
    *out = V_LIST(r);
    return 0;
}

static int f_items(struct jctx *c, struct jv v, struct jv *out)
{
    if (v.kind == JV_UNDEF) {
        struct jlist *l = jl_new(c, 0);
        *out = V_LIST(l);
        return l ? 0 : -1;
    }
    if (v.kind != JV_DICT)
        return j_fail(c, LM_ERR_CORRUPT, "line %d: TypeError: can only get item pairs from a mapping.", c->line);
    struct jmethod me = {v, "items"};
    return j_call_method(c, &me, NULL, 0, NULL, NULL, 0, out);
}

/* the int filter: Python int() of a string, else default */
static int f_int(struct jctx *c, struct jv v, const struct jargs *a, struct jv *out)
{
    const struct jv def = j_arg(a, 0, "default", jv_int(0));
    int64_t base = 10;
    if (j_need_int(c, j_arg(a, 1, "base", jv_int(10)), "int", &base))
        return -1;
    if (v.kind == JV_INT || v.kind == JV_BOOL) {
        *out = jv_int(v.kind == JV_INT ? v.u.i : v.u.b);
        return 0;
    }
    if (v.kind == JV_FLOAT) {
        if (!isfinite(v.u.f) || fabs(v.u.f) >= 9.2e18)
            return j_fail(c, LM_ERR_CORRUPT, "line %d: integer overflow", c->line);
        *out = jv_int((int64_t)v.u.f);
        return 0;
    }
    *out = def;
    if (v.kind != JV_STR || v.u.s.n > 64 || base < 2 || base > 36)
        return 0;
    char buf[72], clean[72];
    size_t k = 0;
    memcpy(buf, v.u.s.p, v.u.s.n);
    buf[v.u.s.n] = 0;
    for (size_t i = 0; i < v.u.s.n; i++)
        if (buf[i] != '_')
            clean[k++] = buf[i];
    clean[k] = 0;
    char *end;
    const long long x = strtoll(clean, &end, (int)base);
    while (*end == ' ' || *end == '\t' || *end == '\n')
        end++;
    if (end != clean && !*end) {
        *out = jv_int(x);
        return 0;
    }
    const double f = strtod(clean, &end); /* jinja2 falls back to int(float(value)) */
    while (*end == ' ' || *end == '\t' || *end == '\n')
        end++;
    if (end != clean && !*end && isfinite(f) && fabs(f) < 9.2e18)
        *out = jv_int((int64_t)f);
    return 0;
}

static int f_float(struct jctx *c, struct jv v, const struct jargs *a, struct jv *out)
{
    *out = j_arg(a, 0, "default", jv_float(0.0));
    if (v.kind == JV_INT || v.kind == JV_BOOL || v.kind == JV_FLOAT) {
        *out = jv_float(v.kind == JV_FLOAT ? v.u.f : v.kind == JV_INT ? (double)v.u.i : v.u.b);
    } else if (v.kind == JV_STR && v.u.s.n < 64) {
        char buf[72], *end;
        memcpy(buf, v.u.s.p, v.u.s.n);
        buf[v.u.s.n] = 0;
        const double f = strtod(buf, &end);
        while (*end == ' ' || *end == '\t' || *end == '\n')
            end++;
        if (end != buf && !*end)
            *out = jv_float(f);
    }
    return 0;
}

static int f_tojson(struct jctx *c, struct jv v, const struct jargs *a, struct jv *out)
{
    const struct jv ea = j_arg(a, 0, "ensure_ascii", jv_bool(false)), ind = j_arg(a, 1, "indent", jv_none());
    const struct jv seps = j_arg(a, 2, "separators", jv_none()), sk = j_arg(a, 3, "sort_keys", jv_bool(false));
    const char *indent = NULL, *item_sep = ", ", *key_sep = ": ";
    if (ind.kind == JV_INT || ind.kind == JV_BOOL) {
        const int64_t n = ind.kind == JV_INT ? ind.u.i : ind.u.b;
        char *sp = j_alloc(c, (size_t)(n > 0 ? (n < 256 ? n : 256) : 0) + 1);
        if (!sp)
            return -1;
        memset(sp, ' ', (size_t)(n > 0 ? (n < 256 ? n : 256) : 0));
        indent = sp;
    } else if (ind.kind == JV_STR) {
        if (!(indent = j_strdup(c, ind.u.s.p, ind.u.s.n)))
            return -1;
    } else if (ind.kind != JV_NONE) {
        return j_fail(c, LM_ERR_CORRUPT, "line %d: TypeError: tojson: bad indent", c->line);
    }
    if (indent)
        item_sep = ",";
    if (seps.kind == JV_LIST) {
        if (seps.u.l->n != 2 || seps.u.l->v[0].kind != JV_STR || seps.u.l->v[1].kind != JV_STR)
            return j_fail(c, LM_ERR_CORRUPT, "line %d: tojson: separators must be two strings", c->line);
        item_sep = j_strdup(c, seps.u.l->v[0].u.s.p, seps.u.l->v[0].u.s.n);
        key_sep = j_strdup(c, seps.u.l->v[1].u.s.p, seps.u.l->v[1].u.s.n);
        if (!item_sep || !key_sep)
            return -1;
    }
    struct jbuf b = {0};
    if (jv_tojson(c, &b, v, indent, jv_truthy(ea), jv_truthy(sk), item_sep, key_sep, 0))
        return -1;
    *out = jv_str(b.p ? b.p : "", b.n);
    return 0;
}

/* jinja2 3.1's indent(width=4, first=False, blank=False) */
static int f_indent(struct jctx *c, struct jv v, const struct jargs *a, struct jv *out)
{
    struct jv s, width = j_arg(a, 0, "width", jv_int(4));
    const bool first = jv_truthy(j_arg(a, 1, "first", jv_bool(false)));
    const bool blank = jv_truthy(j_arg(a, 2, "blank", jv_bool(false)));
    struct jv ind = width;
    if (jv_to_str(c, v, &s))
        return -1;
    if (width.kind == JV_INT) {
        if (width.u.i > 256 || width.u.i < 0)
            width.u.i = width.u.i < 0 ? 0 : 256;
        char *sp = j_alloc(c, (size_t)width.u.i + 1);
        if (!sp)
            return -1;
        memset(sp, ' ', (size_t)width.u.i);
        ind = jv_str(sp, (size_t)width.u.i);
    } else if (j_need_str(c, width, "indent")) {
        return -1;
    }
    struct jbuf b = {0};
    if (first && j_buf_put(c, &b, ind.u.s.p, ind.u.s.n))
        return -1;
    /* the lines of s + "\n": s split at its line breaks, the last piece always kept */
    size_t start = 0, line = 0;
    for (size_t i = 0;;) {
        const size_t br = i < s.u.s.n ? j_line_break_at(s.u.s.p, s.u.s.n, i) : 0;
        if (i < s.u.s.n && !br) {
            i++;
            continue;
        }
        const size_t len = i - start;
        if (line++ > 0 && (j_buf_putc(c, &b, '\n') || ((blank || len) && j_buf_put(c, &b, ind.u.s.p, ind.u.s.n))))
            return -1;
        if (j_buf_put(c, &b, s.u.s.p + start, len))
            return -1;
        if (i >= s.u.s.n)
            break;
        i += br;
        start = i;
    }
    *out = jv_str(b.p ? b.p : "", b.n);
    return 0;
}

static int f_escape(struct jctx *c, struct jv v, struct jv *out)
{
    struct jv s;
    struct jbuf b = {0};
    if (jv_to_str(c, v, &s))
        return -1;
    for (size_t i = 0; i < s.u.s.n; i++) {
        const char ch = s.u.s.p[i];
        const char *e = ch == '&' ? "&amp;" : ch == '<' ? "&lt;" : ch == '>' ? "&gt;" : ch == '"' ? "&#34;"
                        : ch == '\'' ? "&#39;" : NULL;
        if (e ? j_buf_put(c, &b, e, strlen(e)) : j_buf_putc(c, &b, ch))
            return -1;
    }
    *out = jv_str(b.p ? b.p : "", b.n);
    return 0;
}

/* merge sort of l by key (attribute) with jv_compare; case-insensitive on strings unless asked */
static int sort_cmp(struct jctx *c, struct jv x, struct jv y, bool cs, int *r)
{
    if (!cs && x.kind == JV_STR && y.kind == JV_STR) {
        struct jv lx, ly;
        if (j_case(c, x, 0, &lx) || j_case(c, y, 0, &ly))
            return -1;
        x = lx, y = ly;
    }
    return j_step(c) || jv_compare(c, x, y, r);
}

static int sort_keys(struct jctx *c, struct jlist *l, const struct jargs *a, struct jlist **keys)
{
    const struct jv attr = j_arg(a, SIZE_MAX, "attribute", jv_none());
    struct jlist *k = jl_new(c, l->n);
    if (!k)
        return -1;
    for (size_t i = 0; i < l->n; i++) {
        k->v[i] = l->v[i];
        if (attr.kind != JV_NONE && j_attr_path(c, l->v[i], attr, &k->v[i]))
            return -1;
    }
    *keys = k;
    return 0;
}

static int f_sort(struct jctx *c, struct jv v, const struct jargs *a, struct jv *out)
{
    struct jlist *l, *keys, *r;
    const bool rev = jv_truthy(j_arg(a, 0, "reverse", jv_bool(false)));
    const bool cs = jv_truthy(j_arg(a, 1, "case_sensitive", jv_bool(false)));
    if (j_iterate(c, v, &l) || sort_keys(c, l, a, &keys) || !(r = jl_new(c, l->n)))
        return -1;
    size_t *idx = j_alloc(c, (l->n ? l->n : 1) * sizeof *idx), *tmp = j_alloc(c, (l->n ? l->n : 1) * sizeof *tmp);
    if (!idx || !tmp)
        return -1;
    for (size_t i = 0; i < l->n; i++)
        idx[i] = i;
    for (size_t w = 1; w < l->n; w *= 2) { /* bottom-up merge sort: stable, like Python's */
        for (size_t lo = 0; lo < l->n; lo += 2 * w) {
            const size_t mid = lo + w < l->n ? lo + w : l->n, hi = lo + 2 * w < l->n ? lo + 2 * w : l->n;
            size_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi) {
                int cmp;
                if (sort_cmp(c, keys->v[idx[j]], keys->v[idx[i]], cs, &cmp))
                    return -1;
                tmp[k++] = (rev ? cmp > 0 : cmp < 0) ? idx[j++] : idx[i++];
            }
            while (i < mid)
                tmp[k++] = idx[i++];
            while (j < hi)
                tmp[k++] = idx[j++];
        }
        memcpy(idx, tmp, l->n * sizeof *idx);
    }
    for (size_t i = 0; i < l->n; i++)
        r->v[i] = l->v[idx[i]];
    *out = V_LIST(r);
    return 0;
}

static int f_minmax_sum_unique(struct jctx *c, int id, struct jv v, const struct jargs *a, struct jv *out)
{
    struct jlist *l, *keys;
    const bool cs = jv_truthy(j_arg(a, 0, id == F_SUM ? "" : "case_sensitive", jv_bool(false)));
    if (j_iterate(c, v, &l) || sort_keys(c, l, a, &keys))
        return -1;
    if (id == F_SUM) {
        struct jv acc = j_arg(a, SIZE_MAX, "start", jv_int(0));
        for (size_t i = 0; i < l->n; i++)
            if (j_binop(c, OP_ADD, acc, keys->v[i], &acc))
                return -1;
        *out = acc;
        return 0;
    }
    struct jlist *r = jl_new(c, l->n);
    if (!r)
        return -1;
    r->n = 0;
    size_t best = 0;
    for (size_t i = 0; i < l->n; i++) {
        int cmp = 1;
        if (id == F_UNIQUE) {
            bool seen = false;
            for (size_t j = 0; j < i && !seen; j++) {
                if (sort_cmp(c, keys->v[j], keys->v[i], cs, &cmp))
                    return -1;
                seen = cmp == 0;
            }
            if (!seen)
                r->v[r->n++] = l->v[i];
        } else if (i > 0) {
            if (sort_cmp(c, keys->v[i], keys->v[best], cs, &cmp))
                return -1;
            if (id == F_MIN ? cmp < 0 : cmp > 0)
                best = i;
        }
    }
    if (id == F_UNIQUE)
        *out = V_LIST(r);
    else
        *out = l->n ? l->v[best] : jv_undef("No aggregated item, sequence was empty.");
    return 0;
}

static int f_misc(struct jctx *c, int id, struct jv v, const struct jargs *a, struct jv *out)
{
    struct jv s;
    struct jlist *l, *r;
    switch (id) {
    case F_ABS:
        if (v.kind == JV_FLOAT)
            *out = jv_float(fabs(v.u.f));
        else if (v.kind == JV_INT && v.u.i != INT64_MIN)
            *out = jv_int(v.u.i < 0 ? -v.u.i : v.u.i);
        else if (v.kind == JV_BOOL)
            *out = jv_int(v.u.b);
        else
            return j_fail(c, LM_ERR_CORRUPT, "line %d: TypeError: bad operand type for abs(): '%s'", c->line,
                          jv_type_name(v));
        return 0;
    case F_ROUND: {
        int64_t prec;
        const struct jv method = j_arg(a, 1, "method", jv_cstr("common"));
        if (j_need_int(c, j_arg(a, 0, "precision", jv_int(0)), "round", &prec))
            return -1;
        double x = v.kind == JV_FLOAT ? v.u.f : v.kind == JV_INT ? (double)v.u.i : v.kind == JV_BOOL ? v.u.b : NAN;
        if (isnan(x) && v.kind != JV_FLOAT)
            return j_fail(c, LM_ERR_CORRUPT, "line %d: TypeError: round expects a number", c->line);
        prec = prec < 0 ? 0 : prec > 15 ? 15 : prec;
        const double scale = pow(10.0, (double)prec);
        if (jv_is_str(method, "floor"))
            x = floor(x * scale) / scale;
        else if (jv_is_str(method, "ceil"))
            x = ceil(x * scale) / scale;
        else if (isfinite(x)) {
            char buf[512];
            snprintf(buf, sizeof buf, "%.*f", (int)prec, x); /* correctly rounded, half to even: Python's round */
            x = strtod(buf, NULL);
        }
        *out = jv_float(x);
        return 0;
    }
    case F_REVERSE:
        if (j_iterate(c, v, &l) || !(r = jl_new(c, l->n)))
            return -1;
        for (size_t i = 0; i < l->n; i++)
            r->v[i] = l->v[l->n - 1 - i];
        if (v.kind != JV_STR) {
            *out = V_LIST(r);
            return 0;
        }
        struct jbuf b = {0};
        for (size_t i = 0; i < r->n; i++)
            if (j_buf_put(c, &b, r->v[i].u.s.p, r->v[i].u.s.n))
                return -1;
        *out = jv_str(b.p ? b.p : "", b.n);
        return 0;
    case F_FORMAT: {
        struct jlist *t = jl_new(c, a->n_pos);
        if (!t || jv_to_str(c, v, &s))
            return -1;
        t->tuple = true;
        memcpy(t->v, a->pos, a->n_pos * sizeof *t->v);
        return j_str_format_pct(c, s, V_LIST(t), out);
    }
    default: return j_fail(c, LM_ERR_CORRUPT, "line %d: unknown filter", c->line);
    }
}

static int f_text(struct jctx *c, int id, struct jv v, const struct jargs *a, struct jv *out)
{
    struct jv s;
    if (jv_to_str(c, v, &s))
        return -1;
    switch (id) {
    case F_TRIM: return j_strip(c, s, j_arg(a, 0, "chars", jv_none()), true, true, out);
    case F_UPPER: return j_case(c, s, 1, out);
    case F_LOWER: return j_case(c, s, 0, out);
    case F_TITLE: return j_case(c, s, 4, out);
    case F_CAPITALIZE: return j_case(c, s, 3, out);
    case F_STRING: *out = s; return 0;
    default: { /* replace(old, new, count=None) */
        const struct jv args[3] = {j_arg(a, 0, "old", jv_undef(NULL)), j_arg(a, 1, "new", jv_undef(NULL)),
                                   j_arg(a, 2, "count", jv_int(-1))};
        struct jv old, new;
        if (jv_to_str(c, args[0], &old) || jv_to_str(c, args[1], &new))
            return -1;
        const struct jv pass[3] = {old, new, args[2].kind == JV_NONE ? jv_int(-1) : args[2]};
        return j_str_method(c, s, "replace", pass, 3, NULL, NULL, 0, out);
    }
    }
}

int j_apply_filter(struct jctx *c, int id, struct jv v, const struct jv *args, size_t n_args,
                   const char *const *kw_names, const struct jv *kw_vals, size_t n_kw, struct jv *out)
{
    const struct jargs a = {args, n_args, kw_names, kw_vals, n_kw};
    struct jlist *l;
    switch (id) {
    case F_COUNT: return f_length(c, v, out);
    case F_DEFAULT: {
        const bool boolean = jv_truthy(j_arg(&a, 1, "boolean", jv_bool(false)));
        *out = v.kind == JV_UNDEF || (boolean && !jv_truthy(v)) ? j_arg(&a, 0, "default_value", jv_str("", 0)) : v;
        return 0;
    }
    case F_ESCAPE: return f_escape(c, v, out);
    case F_FIRST:
    case F_LAST: return f_first_last(c, v, id == F_LAST, out);
    case F_FLOAT: return f_float(c, v, &a, out);
    case F_INDENT: return f_indent(c, v, &a, out);
    case F_INT: return f_int(c, v, &a, out);
    case F_ITEMS: return f_items(c, v, out);
    case F_JOIN: return f_join(c, v, &a, out);
    case F_LIST:
        if (j_iterate(c, v, &l))
            return -1;
        *out = V_LIST(l);
        if (l->tuple) {
            struct jlist *copy = jl_new(c, l->n);
            if (!copy)
                return -1;
            memcpy(copy->v, l->v, l->n * sizeof *l->v);
            *out = V_LIST(copy);
        }
        return 0;
    case F_MAP: return f_map(c, v, &a, out);
    case F_MAX:
    case F_MIN:
    case F_SUM:
    case F_UNIQUE: return f_minmax_sum_unique(c, id, v, &a, out);
    case F_REJECT:
    case F_REJECTATTR:
    case F_SELECT:
    case F_SELECTATTR: return f_select(c, id, v, &a, out);
    case F_SAFE: *out = v; return 0;
    case F_SORT: return f_sort(c, v, &a, out);
    case F_TOJSON: return f_tojson(c, v, &a, out);
    case F_TRIM:
    case F_UPPER:
    case F_LOWER:
    case F_TITLE:
    case F_CAPITALIZE:
    case F_STRING:
    case F_REPLACE: return f_text(c, id, v, &a, out);
    default: return f_misc(c, id, v, &a, out);
    }
}
