/* jinja_eval.c - runs the tree: scopes, expressions, statements, macros.
 *
 * Scoping as jinja2: `if` shares its scope, a for loop has its own (its
 * variables do not leak, and each iteration starts from the outer values
 * again), a macro runs in a scope over the template's top level. Undefined
 * names are values (empty when printed, false, `is defined` false); using
 * one as an object (attribute, call, arithmetic) is an error. Every node run
 * counts a step and the nesting of calls is bounded (struct jctx). */
#include <stdio.h>
#include <string.h>

#include "chat/jinja.h"

struct jscope {
    struct jscope *parent;
    size_t n, cap;
    const char **names;
    size_t *lens;
    struct jv *vals;
};

enum { EX_OK = 0, EX_BREAK = 1, EX_CONTINUE = 2 }; /* and -1: error */

static struct jscope *scope_new(struct jctx *c, struct jscope *parent)
{
    struct jscope *s = j_alloc(c, sizeof *s);
    if (s)
        s->parent = parent;
    return s;
}

int j_set_var(struct jctx *c, const char *name, size_t n, struct jv v)
{
    struct jscope *s = c->scope;
    for (size_t i = 0; i < s->n; i++) {
        if (s->lens[i] == n && !memcmp(s->names[i], name, n)) {
            s->vals[i] = v;
            return 0;
        }
    }
    if (s->n == s->cap) {
        const size_t cap = s->cap ? s->cap * 2 : 8;
        const char **nn = j_alloc(c, cap * sizeof *nn);
        size_t *nl = j_alloc(c, cap * sizeof *nl);
        struct jv *nv = j_alloc(c, cap * sizeof *nv);
        if (!nn || !nl || !nv)
            return -1;
        if (s->n) {
            memcpy(nn, s->names, s->n * sizeof *nn);
            memcpy(nl, s->lens, s->n * sizeof *nl);
            memcpy(nv, s->vals, s->n * sizeof *nv);
        }
        s->names = nn, s->lens = nl, s->vals = nv, s->cap = cap;
    }
    s->names[s->n] = name;
    s->lens[s->n] = n;
    s->vals[s->n] = v;
    s->n++;
    return 0;
}

static int lookup(struct jctx *c, const struct jnode *e, struct jv *out)
{
    for (const struct jscope *s = c->scope; s; s = s->parent) {
        for (size_t i = s->n; i-- > 0;) {
            if (s->lens[i] == e->name_len && !memcmp(s->names[i], e->name, e->name_len)) {
                *out = s->vals[i];
                return 0;
            }
        }
    }
    const int g = j_global_id(e->name, e->name_len);
    if (g >= 0) {
        *out = (struct jv){.kind = JV_FUNC, .u.fn = g};
        return 0;
    }
    char *hint = j_alloc(c, e->name_len + 32);
    if (!hint)
        return -1;
    snprintf(hint, e->name_len + 32, "'%s' is undefined", e->name);
    *out = jv_undef(hint);
    return 0;
}

static struct jv undef_attr(struct jctx *c, struct jv obj, const char *what, const char *name, size_t n)
{
    const size_t len = n + 64;
    char *hint = j_alloc(c, len);
    if (!hint)
        return jv_undef(NULL);
    snprintf(hint, len, "'%s object' has no %s '%.*s'", jv_type_name(obj), what, (int)(n < 200 ? n : 200), name);
    return jv_undef(hint);
}

static int undefined_error(struct jctx *c, struct jv u)
{
    return j_fail(c, LM_ERR_CORRUPT, "line %d: UndefinedError: %s", c->line,
                  u.u.s.n ? u.u.s.p : "value is undefined");
}

static struct jv method(struct jctx *c, struct jv self, const char *name)
{
    struct jmethod *m = j_alloc(c, sizeof *m);
    if (!m)
        return jv_undef(NULL);
    m->self = self;
    m->name = name;
    return (struct jv){.kind = JV_METHOD, .u.m = m};
}

static int loop_attr(struct jctx *c, const struct jloop *L, const char *name, struct jv *out)
{
    const int64_t i = L->index0, n = L->length;
    if (!strcmp(name, "index"))
        *out = jv_int(i + 1);
    else if (!strcmp(name, "index0"))
        *out = jv_int(i);
    else if (!strcmp(name, "revindex"))
        *out = jv_int(n - i);
    else if (!strcmp(name, "revindex0"))
        *out = jv_int(n - i - 1);
    else if (!strcmp(name, "first"))
        *out = jv_bool(i == 0);
    else if (!strcmp(name, "last"))
        *out = jv_bool(i == n - 1);
    else if (!strcmp(name, "length"))
        *out = jv_int(n);
    else if (!strcmp(name, "depth"))
        *out = jv_int(L->depth0 + 1);
    else if (!strcmp(name, "depth0"))
        *out = jv_int(L->depth0);
    else if (!strcmp(name, "previtem"))
        *out = i > 0 ? L->items->v[i - 1] : jv_undef("there is no previous item");
    else if (!strcmp(name, "nextitem"))
        *out = i + 1 < n ? L->items->v[i + 1] : jv_undef("there is no next item");
    else
        return 1;
    return 0;
}

int j_getattr(struct jctx *c, struct jv obj, const char *name, size_t n, struct jv *out)
{
    const struct jv *hit;
    switch (obj.kind) {
    case JV_UNDEF: return undefined_error(c, obj);
    case JV_DICT:
    case JV_NS:
        if (obj.kind == JV_DICT && j_has_method(obj, name, n)) {
            *out = method(c, obj, name);
            return c->failed ? -1 : 0;
        }
        hit = jd_get_str(obj.u.d, name, n);
        *out = hit ? *hit : undef_attr(c, obj, "attribute", name, n);
        return c->failed ? -1 : 0;
    case JV_LOOP:
        if (!strcmp(name, "cycle")) {
            *out = method(c, obj, name);
            return c->failed ? -1 : 0;
        }
        if (loop_attr(c, obj.u.loop, name, out) == 0)
            return 0;
        break;
    case JV_STR:
    case JV_LIST:
        if (j_has_method(obj, name, n)) {
            *out = method(c, obj, name);
            return c->failed ? -1 : 0;
        }
        break;
    default: break;
    }
    *out = undef_attr(c, obj, "attribute", name, n);
    return c->failed ? -1 : 0;
}

/* Python's index for position i of n items (negative counts from the end); false when out of range */
static bool norm_index(int64_t i, size_t n, size_t *out)
{
    if (i < 0)
        i += (int64_t)n;
    if (i < 0 || (uint64_t)i >= n)
        return false;
    *out = (size_t)i;
    return true;
}

int j_getitem(struct jctx *c, struct jv obj, struct jv key, struct jv *out)
{
    size_t k;
    if (obj.kind == JV_UNDEF)
        return undefined_error(c, obj);
    if (obj.kind == JV_DICT || obj.kind == JV_NS) {
        const struct jv *hit = jd_get(obj.u.d, key);
        if (hit) {
            *out = *hit;
            return 0;
        }
    } else if ((obj.kind == JV_LIST || obj.kind == JV_STR) && (key.kind == JV_INT || key.kind == JV_BOOL)) {
        const int64_t i = key.kind == JV_INT ? key.u.i : key.u.b;
        if (obj.kind == JV_LIST) {
            if (norm_index(i, obj.u.l->n, &k)) {
                *out = obj.u.l->v[k];
                return 0;
            }
        } else {
            const char *p = obj.u.s.p;
            const size_t n = obj.u.s.n;
            if (norm_index(i, j_utf8_len(p, n), &k)) {
                const size_t a = j_utf8_offset(p, n, k), b = j_utf8_offset(p, n, k + 1);
                *out = jv_str(p + a, b - a);
                return 0;
            }
        }
        *out = jv_undef(obj.kind == JV_LIST ? "list index out of range" : "string index out of range");
        return 0;
    }
    if (key.kind == JV_STR)
        return j_getattr(c, obj, key.u.s.p, key.u.s.n, out);
    *out = jv_undef("no such item");
    return 0;
}

/* the items a for loop, `in` or a filter sees */
int j_iterate(struct jctx *c, struct jv v, struct jlist **out)
{
    struct jlist *l;
    switch (v.kind) {
    case JV_LIST: *out = v.u.l; return 0;
    case JV_UNDEF: *out = jl_new(c, 0); return *out ? 0 : -1;
    case JV_DICT:
        if (!(l = jl_new(c, v.u.d->n)))
            return -1;
        for (size_t i = 0; i < v.u.d->n; i++)
            l->v[i] = v.u.d->k[i];
        *out = l;
        return 0;
    case JV_STR: {
        const size_t n = j_utf8_len(v.u.s.p, v.u.s.n);
        if (!(l = jl_new(c, n)))
            return -1;
        for (size_t i = 0, off = 0; i < n; i++) {
            const size_t next = off + j_utf8_offset(v.u.s.p + off, v.u.s.n - off, 1);
            l->v[i] = jv_str(v.u.s.p + off, next - off);
            off = next;
        }
        *out = l;
        return 0;
    }
    default:
        return j_fail(c, LM_ERR_CORRUPT, "line %d: TypeError: '%s' object is not iterable", c->line,
                      jv_type_name(v));
    }
}

static int64_t clamp_slice(int64_t i, int64_t n, int64_t step)
{
    if (i < 0) {
        i += n;
        if (i < 0)
            i = step < 0 ? -1 : 0;
    } else if (i >= n) {
        i = step < 0 ? n - 1 : n;
    }
    return i;
}

static int slice_bound(struct jctx *c, struct jv v, bool *given, int64_t *out)
{
    *given = false;
    if (v.kind == JV_NONE || v.kind == JV_UNDEF)
        return 0;
    if (v.kind != JV_INT && v.kind != JV_BOOL)
        return j_fail(c, LM_ERR_CORRUPT, "line %d: TypeError: slice indices must be integers", c->line);
    *given = true;
    *out = v.kind == JV_INT ? v.u.i : v.u.b;
    if (*out < -(INT64_MAX / 2) || *out > INT64_MAX / 2)
        *out = *out < 0 ? -(INT64_MAX / 2) : INT64_MAX / 2;
    return 0;
}

static int eval_slice(struct jctx *c, const struct jnode *e, struct jv *out)
{
    struct jv obj, b[3] = {jv_none(), jv_none(), jv_none()};
    const struct jnode *parts[3] = {e->b, e->c, e->d};
    if (j_eval(c, e->a, &obj))
        return -1;
    for (int k = 0; k < 3; k++)
        if (parts[k] && j_eval(c, parts[k], &b[k]))
            return -1;
    int64_t start = 0, stop = 0, step = 1;
    bool gs, ge, gt;
    if (slice_bound(c, b[2], &gt, &step) || slice_bound(c, b[0], &gs, &start) || slice_bound(c, b[1], &ge, &stop))
        return -1;
    if (step == 0)
        return j_fail(c, LM_ERR_CORRUPT, "line %d: ValueError: slice step cannot be zero", c->line);
    if (obj.kind == JV_UNDEF)
        return undefined_error(c, obj);
    if (obj.kind != JV_LIST && obj.kind != JV_STR)
        return j_fail(c, LM_ERR_CORRUPT, "line %d: TypeError: '%s' object is not subscriptable", c->line,
                      jv_type_name(obj));
    const bool is_str = obj.kind == JV_STR;
    struct jlist *items = NULL;
    if (j_iterate(c, obj, &items))
        return -1;
    const int64_t n = (int64_t)items->n;
    start = gs ? clamp_slice(start, n, step) : step < 0 ? n - 1 : 0;
    stop = ge ? clamp_slice(stop, n, step) : step < 0 ? -1 : n;
    size_t count = 0;
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step)
        count++;
    struct jlist *r = jl_new(c, count);
    if (!r)
        return -1;
    size_t k = 0;
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step)
        r->v[k++] = items->v[i];
    if (!is_str) {
        *out = (struct jv){.kind = JV_LIST, .u.l = r};
        return 0;
    }
    struct jbuf sb = {0};
    for (size_t i = 0; i < r->n; i++)
        if (j_buf_put(c, &sb, r->v[i].u.s.p, r->v[i].u.s.n))
            return -1;
    *out = jv_str(sb.p ? sb.p : "", sb.n);
    return 0;
}

/* evaluated arguments of a call, filter or test */
struct args {
    struct jv *pos;
    size_t n_pos;
    const char **kw_names;
    struct jv *kw_vals;
    size_t n_kw;
};

static int eval_args(struct jctx *c, const struct jnode *e, struct args *a)
{
    const size_t n = e->n_kids ? e->n_kids : 1;
    a->pos = j_alloc(c, n * sizeof *a->pos);
    a->kw_vals = j_alloc(c, n * sizeof *a->kw_vals);
    a->kw_names = j_alloc(c, n * sizeof *a->kw_names);
    if (!a->pos || !a->kw_vals || !a->kw_names)
        return -1;
    a->n_pos = a->n_kw = 0;
    for (size_t i = 0; i < e->n_kids; i++) {
        const struct jnode *k = e->kids[i];
        if (k->kind == N_KWARG) {
            a->kw_names[a->n_kw] = k->name;
            if (j_eval(c, k->a, &a->kw_vals[a->n_kw++]))
                return -1;
        } else if (j_eval(c, k, &a->pos[a->n_pos++])) {
            return -1;
        }
    }
    return 0;
}

static int call_macro(struct jctx *c, const struct jnode *m, const struct jv *args, size_t n_args,
                      const char *const *kw_names, const struct jv *kw_vals, size_t n_kw, struct jv *out)
{
    if (n_args > m->n_kids2)
        return j_fail(c, LM_ERR_CORRUPT, "line %d: TypeError: macro '%s' takes not more than %zu argument(s)",
                      c->line, m->name, m->n_kids2);
    struct jscope *saved = c->scope;
    struct jbuf *saved_out = c->out;
    struct jbuf buf = {0};
    if (!(c->scope = scope_new(c, c->root)))
        return -1;
    int r = 0;
    for (size_t i = 0; i < m->n_kids2 && !r; i++) {
        const struct jnode *p = m->kids2[i];
        struct jv v = jv_undef(NULL);
        bool set = i < n_args;
        if (set)
            v = args[i];
        for (size_t k = 0; k < n_kw && !set; k++)
            if (!strcmp(kw_names[k], p->name))
                v = kw_vals[k], set = true;
        if (!set && p->kind == N_KWARG)
            r = j_eval(c, p->a, &v);
        if (!r)
            r = j_set_var(c, p->name, strlen(p->name), v);
    }
    for (size_t k = 0; k < n_kw && !r; k++) {
        bool known = false;
        for (size_t i = 0; i < m->n_kids2; i++)
            known |= !strcmp(kw_names[k], m->kids2[i]->name);
        if (!known)
            r = j_fail(c, LM_ERR_CORRUPT, "line %d: TypeError: macro '%s' takes no keyword argument '%s'", c->line,
                       m->name, kw_names[k]);
    }
    c->out = &buf;
    if (!r)
        r = j_exec_body(c, m->kids, m->n_kids) < 0 ? -1 : 0;
    c->scope = saved;
    c->out = saved_out;
    if (!r)
        *out = jv_str(buf.p ? buf.p : "", buf.n);
    return r;
}

int j_call(struct jctx *c, struct jv fn, const struct jv *args, size_t n_args, const char *const *kw_names,
           const struct jv *kw_vals, size_t n_kw, struct jv *out)
{
    switch (fn.kind) {
    case JV_MACRO: return call_macro(c, fn.u.macro, args, n_args, kw_names, kw_vals, n_kw, out);
    case JV_FUNC: return j_call_global(c, fn.u.fn, args, n_args, kw_names, kw_vals, n_kw, out);
    case JV_METHOD: return j_call_method(c, fn.u.m, args, n_args, kw_names, kw_vals, n_kw, out);
    case JV_UNDEF: return undefined_error(c, fn);
    default:
        return j_fail(c, LM_ERR_CORRUPT, "line %d: TypeError: '%s' object is not callable", c->line,
                      jv_type_name(fn));
    }
}

static int eval_seq(struct jctx *c, const struct jnode *e, struct jv *out)
{
    if (e->kind == N_DICT) {
        struct jdict *d = jd_new(c);
        if (!d)
            return -1;
        for (size_t i = 0; i + 1 < e->n_kids; i += 2) {
            struct jv k, v;
            if (j_eval(c, e->kids[i], &k) || j_eval(c, e->kids[i + 1], &v) || jd_set(c, d, k, v))
                return -1;
        }
        *out = (struct jv){.kind = JV_DICT, .u.d = d};
        return 0;
    }
    struct jlist *l = jl_new(c, e->n_kids);
    if (!l)
        return -1;
    l->tuple = e->kind == N_TUPLE;
    for (size_t i = 0; i < e->n_kids; i++)
        if (j_eval(c, e->kids[i], &l->v[i]))
            return -1;
    *out = (struct jv){.kind = JV_LIST, .u.l = l};
    return 0;
}

static int eval_cmp(struct jctx *c, const struct jnode *e, struct jv *out)
{
    struct jv left, right;
    if (j_eval(c, e->a, &left))
        return -1;
    for (size_t i = 0; i < e->n_kids; i++) {
        if (j_eval(c, e->kids[i], &right) || j_binop(c, e->ops[i], left, right, out))
            return -1;
        if (!out->u.b)
            return 0;
        left = right;
    }
    return 0;
}

static int eval_call_like(struct jctx *c, const struct jnode *e, struct jv *out)
{
    struct args a;
    struct jv self;
    if (e->kind != N_CALL && e->op < 0)
        return j_fail(c, LM_ERR_CORRUPT, "line %d: TemplateRuntimeError: no %s named '%s'", e->line,
                      e->kind == N_FILTER ? "filter" : "test", e->name);
    if (j_eval(c, e->a, &self) || eval_args(c, e, &a))
        return -1;
    if (e->kind == N_CALL)
        return j_call(c, self, a.pos, a.n_pos, a.kw_names, a.kw_vals, a.n_kw, out);
    if (e->kind == N_FILTER)
        return j_apply_filter(c, e->op, self, a.pos, a.n_pos, a.kw_names, a.kw_vals, a.n_kw, out);
    bool r;
    if (j_apply_test(c, e->op, self, a.pos, a.n_pos, &r))
        return -1;
    *out = jv_bool(r != e->neg);
    return 0;
}

static int eval_inner(struct jctx *c, const struct jnode *e, struct jv *out)
{
    struct jv a, b;
    switch (e->kind) {
    case N_LIT: *out = e->val; return 0;
    case N_NAME: return lookup(c, e, out);
    case N_LIST:
    case N_TUPLE:
    case N_DICT: return eval_seq(c, e, out);
    case N_ATTR: return j_eval(c, e->a, &a) || j_getattr(c, a, e->name, e->name_len, out) ? -1 : 0;
    case N_ITEM: return j_eval(c, e->a, &a) || j_eval(c, e->b, &b) || j_getitem(c, a, b, out) ? -1 : 0;
    case N_SLICE: return eval_slice(c, e, out);
    case N_CALL:
    case N_FILTER:
    case N_TEST: return eval_call_like(c, e, out);
    case N_BIN: return j_eval(c, e->a, &a) || j_eval(c, e->b, &b) || j_binop(c, e->op, a, b, out) ? -1 : 0;
    case N_NEG:
        if (j_eval(c, e->a, &a))
            return -1;
        if (a.kind == JV_BOOL)
            a = jv_int(a.u.b);
        if (e->op == '+' && (a.kind == JV_INT || a.kind == JV_FLOAT)) {
            *out = a;
            return 0;
        }
        return j_binop(c, OP_SUB, jv_int(0), a, out);
    case N_NOT:
        if (j_eval(c, e->a, &a))
            return -1;
        *out = jv_bool(!jv_truthy(a));
        return 0;
    case N_AND:
    case N_OR:
        if (j_eval(c, e->a, &a))
            return -1;
        if (jv_truthy(a) == (e->kind == N_OR)) {
            *out = a;
            return 0;
        }
        return j_eval(c, e->b, out);
    case N_CMP: return eval_cmp(c, e, out);
    case N_COND:
        if (j_eval(c, e->b, &a))
            return -1;
        if (jv_truthy(a))
            return j_eval(c, e->a, out);
        if (e->c)
            return j_eval(c, e->c, out);
        *out = jv_undef("the inline if-expression evaluated to false and no else section was defined");
        return 0;
    default: return j_fail(c, LM_ERR_CORRUPT, "line %d: not an expression", e->line);
    }
}

int j_eval(struct jctx *c, const struct jnode *e, struct jv *out)
{
    if (j_step(c))
        return -1;
    if (++c->depth > c->max_depth) {
        c->depth--;
        return j_fail(c, LM_ERR_CORRUPT, "line %d: recursion limit reached (depth %d)", e->line, c->max_depth);
    }
    const int line = c->line;
    c->line = e->line;
    const int r = eval_inner(c, e, out);
    c->line = line;
    c->depth--;
    return r;
}

/* ---- statements ---- */

static int assign(struct jctx *c, const struct jnode *target, struct jv v)
{
    if (target->kind == N_NAME)
        return j_set_var(c, target->name, target->name_len, v);
    if (target->kind == N_ATTR) {
        struct jv ns;
        if (lookup(c, target->a, &ns))
            return -1;
        if (ns.kind != JV_NS)
            return j_fail(c, LM_ERR_CORRUPT, "line %d: cannot assign attribute on non-namespace object", c->line);
        return jd_set(c, ns.u.d, jv_str(target->name, target->name_len), v);
    }
    struct jlist *items;
    if (j_iterate(c, v, &items))
        return -1;
    if (items->n != target->n_kids)
        return j_fail(c, LM_ERR_CORRUPT, "line %d: ValueError: cannot unpack %zu values into %zu names", c->line,
                      items->n, target->n_kids);
    for (size_t i = 0; i < items->n; i++)
        if (assign(c, target->kids[i], items->v[i]))
            return -1;
    return 0;
}

/* the items of a for after its `if` filter */
static int for_items(struct jctx *c, const struct jnode *s, struct jlist **out)
{
    struct jv it;
    struct jlist *all;
    if (j_eval(c, s->b, &it) || j_iterate(c, it, &all))
        return -1;
    if (!s->c) {
        *out = all;
        return 0;
    }
    struct jlist *kept = jl_new(c, all->n);
    if (!kept)
        return -1;
    kept->n = 0;
    for (size_t i = 0; i < all->n; i++) {
        struct jv keep;
        c->scope->n = 0;
        if (assign(c, s->a, all->v[i]) || j_eval(c, s->c, &keep))
            return -1;
        if (jv_truthy(keep))
            kept->v[kept->n++] = all->v[i];
    }
    *out = kept;
    return 0;
}

static int exec_for(struct jctx *c, const struct jnode *s)
{
    struct jscope *saved = c->scope;
    struct jloop *L = j_alloc(c, sizeof *L);
    if (!L || !(c->scope = scope_new(c, saved))) {
        c->scope = saved;
        return -1;
    }
    int r = for_items(c, s, &L->items);
    if (!r)
        L->length = (int64_t)L->items->n;
    for (size_t i = 0; !r && i < L->items->n; i++) {
        L->index0 = (int64_t)i;
        c->scope->n = 0; /* each iteration starts from the outer scope */
        if (j_step(c) || assign(c, s->a, L->items->v[i]) ||
            j_set_var(c, "loop", 4, (struct jv){.kind = JV_LOOP, .u.loop = L})) {
            r = -1;
            break;
        }
        r = j_exec_body(c, s->kids, s->n_kids);
        if (r == EX_BREAK) {
            r = 0;
            break;
        }
        if (r == EX_CONTINUE)
            r = 0;
    }
    if (!r && L->items->n == 0) {
        c->scope->n = 0;
        r = j_exec_body(c, s->kids2, s->n_kids2);
    }
    c->scope = saved;
    return r;
}

static int exec_stmt(struct jctx *c, const struct jnode *s)
{
    struct jv v;
    c->line = s->line;
    switch (s->kind) {
    case S_DATA: return j_buf_put(c, c->out, s->name, s->name_len);
    case S_OUTPUT: return j_eval(c, s->a, &v) || jv_write(c, c->out, v, false) ? -1 : 0;
    case S_IF:
        if (j_eval(c, s->a, &v))
            return -1;
        return jv_truthy(v) ? j_exec_body(c, s->kids, s->n_kids) : j_exec_body(c, s->kids2, s->n_kids2);
    case S_FOR: return exec_for(c, s);
    case S_SET: return j_eval(c, s->b, &v) || assign(c, s->a, v) ? -1 : 0;
    case S_SETBLOCK: {
        struct jbuf *saved = c->out, buf = {0};
        c->out = &buf;
        int r = j_exec_body(c, s->kids, s->n_kids);
        c->out = saved;
        if (r < 0)
            return -1;
        return r ? r : assign(c, s->a, jv_str(buf.p ? buf.p : "", buf.n));
    }
    case S_MACRO:
        return j_set_var(c, s->name, s->name_len, (struct jv){.kind = JV_MACRO, .u.macro = s});
    case S_BREAK: return EX_BREAK;
    case S_CONTINUE: return EX_CONTINUE;
    default: return j_fail(c, LM_ERR_CORRUPT, "line %d: not a statement", s->line);
    }
}

int j_exec_body(struct jctx *c, struct jnode *const *kids, size_t n)
{
    if (++c->depth > c->max_depth) {
        c->depth--;
        return j_fail(c, LM_ERR_CORRUPT, "line %d: recursion limit reached (depth %d)", c->line, c->max_depth);
    }
    int r = 0;
    for (size_t i = 0; i < n && r == 0; i++)
        r = j_step(c) ? -1 : exec_stmt(c, kids[i]);
    c->depth--;
    return r;
}
