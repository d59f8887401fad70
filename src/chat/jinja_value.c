/* jinja_value.c - the render arena, errors, output buffers and the values'
 * Python semantics: truthiness, equality, ordering, str(), repr() and
 * json.dumps().
 *
 * All memory of a render comes from the arena (blocks of 64 KiB, big requests
 * alone) and is freed at once; the budget bounds what a template can make. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/jinja.h"

struct jblock {
    struct jblock *next;
    size_t size, used;
    _Alignas(16) unsigned char data[];
};

#define BLOCK_SIZE (64u << 10)

void *j_alloc(struct jctx *c, size_t bytes)
{
    bytes = (bytes + 15) & ~(size_t)15;
    if (bytes == 0)
        bytes = 16;
    struct jarena *a = &c->ar;
    if (bytes > a->budget || a->used > a->budget - bytes) {
        j_fail(c, LM_ERR_FULL, "memory limit reached (%zu bytes)", a->budget);
        return NULL;
    }
    struct jblock *b = a->head;
    if (!b || b->size - b->used < bytes) {
        const size_t size = bytes > BLOCK_SIZE / 4 ? bytes : BLOCK_SIZE;
        struct jblock *nb = malloc(sizeof *nb + size);
        if (!nb) {
            j_fail(c, LM_ERR_NOMEM, "out of memory");
            return NULL;
        }
        nb->size = size;
        nb->used = 0;
        if (b && size != BLOCK_SIZE) { /* keep the current block for small requests */
            nb->next = b->next;
            b->next = nb;
        } else {
            nb->next = b;
            a->head = nb;
        }
        b = nb;
    }
    void *p = b->data + b->used;
    b->used += bytes;
    a->used += bytes;
    memset(p, 0, bytes);
    return p;
}

void j_arena_free(struct jarena *a)
{
    struct jblock *b = a->head;
    while (b) {
        struct jblock *next = b->next;
        free(b);
        b = next;
    }
    a->head = NULL;
    a->used = 0;
}

char *j_strdup(struct jctx *c, const char *p, size_t n)
{
    if (n == SIZE_MAX) {
        j_fail(c, LM_ERR_NOMEM, "string too long");
        return NULL;
    }
    char *s = j_alloc(c, n + 1);
    if (s && n)
        memcpy(s, p, n);
    return s;
}

int j_fail(struct jctx *c, lm_status st, const char *fmt, ...)
{
    if (c->failed)
        return -1;
    c->failed = true;
    c->status = st;
    if (c->err && c->errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->err, c->errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

int j_step(struct jctx *c)
{
    if (c->failed)
        return -1;
    if (++c->steps > c->max_steps)
        return j_fail(c, LM_ERR_CORRUPT, "line %d: step limit reached (%llu)", c->line,
                      (unsigned long long)c->max_steps);
    return 0;
}

/* ---- buffers ---- */

int j_buf_put(struct jctx *c, struct jbuf *b, const char *p, size_t n)
{
    if (n == 0)
        return 0;
    if (b == c->out && (b->n + n > c->max_output || b->n + n < n))
        return j_fail(c, LM_ERR_FULL, "line %d: output limit reached (%zu bytes)", c->line, c->max_output);
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->n + n + 1) {
            if (cap > SIZE_MAX / 2)
                return j_fail(c, LM_ERR_NOMEM, "string too long");
            cap *= 2;
        }
        char *np = j_alloc(c, cap);
        if (!np)
            return -1;
        if (b->n)
            memcpy(np, b->p, b->n);
        b->p = np;
        b->cap = cap;
    }
    memcpy(b->p + b->n, p, n);
    b->n += n;
    b->p[b->n] = 0;
    return 0;
}

int j_buf_putc(struct jctx *c, struct jbuf *b, char ch) { return j_buf_put(c, b, &ch, 1); }

int j_buf_printf(struct jctx *c, struct jbuf *b, const char *fmt, ...)
{
    char tmp[128];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0)
        return j_fail(c, LM_ERR_CORRUPT, "format error");
    return j_buf_put(c, b, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

/* ---- constructors ---- */

struct jv jv_undef(const char *hint)
{
    struct jv v = {.kind = JV_UNDEF};
    v.u.s.p = hint ? hint : "";
    v.u.s.n = strlen(v.u.s.p);
    return v;
}
struct jv jv_none(void) { return (struct jv){.kind = JV_NONE}; }
struct jv jv_bool(bool b) { return (struct jv){.kind = JV_BOOL, .u.b = b}; }
struct jv jv_int(int64_t i) { return (struct jv){.kind = JV_INT, .u.i = i}; }
struct jv jv_float(double f) { return (struct jv){.kind = JV_FLOAT, .u.f = f}; }
struct jv jv_str(const char *p, size_t n)
{
    struct jv v = {.kind = JV_STR};
    v.u.s.p = p ? p : "";
    v.u.s.n = p ? n : 0;
    return v;
}
struct jv jv_cstr(const char *s) { return jv_str(s, s ? strlen(s) : 0); }

struct jlist *jl_new(struct jctx *c, size_t n)
{
    if (n > c->ar.budget / sizeof(struct jv)) {
        j_fail(c, LM_ERR_FULL, "line %d: memory limit reached (list of %zu items)", c->line, n);
        return NULL;
    }
    struct jlist *l = j_alloc(c, sizeof *l);
    if (!l)
        return NULL;
    l->n = n;
    l->v = j_alloc(c, (n ? n : 1) * sizeof *l->v); /* zeroed: JV_UNDEF with no hint */
    if (!l->v)
        return NULL;
    for (size_t i = 0; i < n; i++)
        l->v[i] = jv_undef(NULL);
    return l;
}

struct jdict *jd_new(struct jctx *c) { return j_alloc(c, sizeof(struct jdict)); }

const struct jv *jd_get(const struct jdict *d, struct jv k)
{
    for (size_t i = 0; i < d->n; i++)
        if (jv_equal(d->k[i], k))
            return &d->v[i];
    return NULL;
}

const struct jv *jd_get_str(const struct jdict *d, const char *k, size_t n)
{
    for (size_t i = 0; i < d->n; i++)
        if (d->k[i].kind == JV_STR && d->k[i].u.s.n == n && !memcmp(d->k[i].u.s.p, k, n))
            return &d->v[i];
    return NULL;
}

int jd_set(struct jctx *c, struct jdict *d, struct jv k, struct jv v)
{
    for (size_t i = 0; i < d->n; i++) {
        if (jv_equal(d->k[i], k)) {
            d->v[i] = v;
            return 0;
        }
    }
    if (d->n == d->cap) {
        const size_t cap = d->cap ? d->cap * 2 : 8;
        struct jv *nk = j_alloc(c, cap * sizeof *nk), *nv = j_alloc(c, cap * sizeof *nv);
        if (!nk || !nv)
            return -1;
        if (d->n) {
            memcpy(nk, d->k, d->n * sizeof *nk);
            memcpy(nv, d->v, d->n * sizeof *nv);
        }
        d->k = nk;
        d->v = nv;
        d->cap = cap;
    }
    d->k[d->n] = k;
    d->v[d->n] = v;
    d->n++;
    return 0;
}

/* ---- semantics ---- */

const char *jv_type_name(struct jv v)
{
    static const char *const names[] = {
        [JV_UNDEF] = "Undefined", [JV_NONE] = "NoneType", [JV_BOOL] = "bool",   [JV_INT] = "int",
        [JV_FLOAT] = "float",     [JV_STR] = "str",       [JV_LIST] = "list",   [JV_DICT] = "dict",
        [JV_NS] = "Namespace",    [JV_LOOP] = "LoopContext", [JV_MACRO] = "Macro", [JV_FUNC] = "function",
        [JV_METHOD] = "builtin_function_or_method",
    };
    if (v.kind == JV_LIST && v.u.l->tuple)
        return "tuple";
    return names[v.kind];
}

bool jv_truthy(struct jv v)
{
    switch (v.kind) {
    case JV_UNDEF:
    case JV_NONE: return false;
    case JV_BOOL: return v.u.b;
    case JV_INT: return v.u.i != 0;
    case JV_FLOAT: return v.u.f != 0.0;
    case JV_STR: return v.u.s.n != 0;
    case JV_LIST: return v.u.l->n != 0;
    case JV_DICT: return v.u.d->n != 0;
    default: return true;
    }
}

static bool is_num(struct jv v) { return v.kind == JV_INT || v.kind == JV_FLOAT || v.kind == JV_BOOL; }
static double num_f(struct jv v) { return v.kind == JV_FLOAT ? v.u.f : v.kind == JV_INT ? (double)v.u.i : v.u.b; }
static int64_t num_i(struct jv v) { return v.kind == JV_INT ? v.u.i : v.u.b; }

bool jv_is_str(struct jv v, const char *s)
{
    return v.kind == JV_STR && v.u.s.n == strlen(s) && !memcmp(v.u.s.p, s, v.u.s.n);
}

bool jv_equal(struct jv a, struct jv b)
{
    if (is_num(a) && is_num(b)) {
        if (a.kind == JV_FLOAT || b.kind == JV_FLOAT)
            return num_f(a) == num_f(b);
        return num_i(a) == num_i(b);
    }
    if (a.kind != b.kind)
        return false;
    switch (a.kind) {
    case JV_UNDEF:
    case JV_NONE: return true;
    case JV_STR: return a.u.s.n == b.u.s.n && !memcmp(a.u.s.p, b.u.s.p, a.u.s.n);
    case JV_LIST:
        if (a.u.l->n != b.u.l->n || a.u.l->tuple != b.u.l->tuple)
            return false;
        for (size_t i = 0; i < a.u.l->n; i++)
            if (!jv_equal(a.u.l->v[i], b.u.l->v[i]))
                return false;
        return true;
    case JV_DICT:
        if (a.u.d->n != b.u.d->n)
            return false;
        for (size_t i = 0; i < a.u.d->n; i++) {
            const struct jv *o = jd_get(b.u.d, a.u.d->k[i]);
            if (!o || !jv_equal(a.u.d->v[i], *o))
                return false;
        }
        return true;
    case JV_NS: return a.u.d == b.u.d;
    case JV_LOOP: return a.u.loop == b.u.loop;
    case JV_MACRO: return a.u.macro == b.u.macro;
    case JV_FUNC: return a.u.fn == b.u.fn;
    default: return false;
    }
}

int jv_compare(struct jctx *c, struct jv a, struct jv b, int *out)
{
    if (is_num(a) && is_num(b)) {
        if (a.kind == JV_FLOAT || b.kind == JV_FLOAT) {
            const double x = num_f(a), y = num_f(b);
            *out = x < y ? -1 : x > y ? 1 : 0; /* NaN compares as equal: callers only test </<=/>/>= */
            if (isnan(x) || isnan(y))
                *out = 2; /* every ordering is false */
        } else {
            const int64_t x = num_i(a), y = num_i(b);
            *out = x < y ? -1 : x > y ? 1 : 0;
        }
        return 0;
    }
    if (a.kind == JV_STR && b.kind == JV_STR) {
        const size_t n = a.u.s.n < b.u.s.n ? a.u.s.n : b.u.s.n;
        int r = n ? memcmp(a.u.s.p, b.u.s.p, n) : 0; /* UTF-8 byte order is code point order */
        if (r == 0)
            r = a.u.s.n < b.u.s.n ? -1 : a.u.s.n > b.u.s.n;
        *out = r < 0 ? -1 : r > 0;
        return 0;
    }
    if (a.kind == JV_LIST && b.kind == JV_LIST) {
        for (size_t i = 0; i < a.u.l->n && i < b.u.l->n; i++) {
            if (jv_equal(a.u.l->v[i], b.u.l->v[i]))
                continue;
            return jv_compare(c, a.u.l->v[i], b.u.l->v[i], out);
        }
        *out = a.u.l->n < b.u.l->n ? -1 : a.u.l->n > b.u.l->n;
        return 0;
    }
    return j_fail(c, LM_ERR_CORRUPT, "line %d: TypeError: ordering not supported between '%s' and '%s'", c->line,
                  jv_type_name(a), jv_type_name(b));
}

/* ---- text forms ---- */

/* Python's repr() of a float: the shortest digits that read back, fixed
 * notation for exponents in [-4, 16), else d.ddde+XX */
static int write_float(struct jctx *c, struct jbuf *b, double f, bool json)
{
    if (isnan(f))
        return j_buf_put(c, b, json ? "NaN" : "nan", json ? 3 : 3);
    if (isinf(f))
        return json ? j_buf_put(c, b, f < 0 ? "-Infinity" : "Infinity", f < 0 ? 9 : 8)
                    : j_buf_put(c, b, f < 0 ? "-inf" : "inf", f < 0 ? 4 : 3);
    char e[40];
    int prec;
    for (prec = 0; prec < 17; prec++) {
        snprintf(e, sizeof e, "%.*e", prec, f);
        if (strtod(e, NULL) == f)
            break;
    }
    snprintf(e, sizeof e, "%.*e", prec, f);
    /* e: [-]d[.ddd]e[+-]XX */
    char digits[24];
    size_t nd = 0;
    const char *p = e;
    bool neg = *p == '-';
    if (neg)
        p++;
    for (; *p && *p != 'e'; p++)
        if (*p != '.')
            digits[nd++] = *p;
    const int exp = atoi(p + 1);
    while (nd > 1 && digits[nd - 1] == '0')
        nd--;
    char out[64];
    size_t o = 0;
    if (neg)
        out[o++] = '-';
    if (exp >= -4 && exp < 16) {
        if (exp < 0) {
            out[o++] = '0';
            out[o++] = '.';
            for (int i = 0; i < -exp - 1; i++)
                out[o++] = '0';
            for (size_t i = 0; i < nd; i++)
                out[o++] = digits[i];
        } else {
            for (int i = 0; i <= exp; i++)
                out[o++] = (size_t)i < nd ? digits[i] : '0';
            out[o++] = '.';
            if ((size_t)exp + 1 < nd)
                for (size_t i = (size_t)exp + 1; i < nd; i++)
                    out[o++] = digits[i];
            else
                out[o++] = '0';
        }
    } else {
        out[o++] = digits[0];
        if (nd > 1) {
            out[o++] = '.';
            for (size_t i = 1; i < nd; i++)
                out[o++] = digits[i];
        }
        o += (size_t)snprintf(out + o, sizeof out - o, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    }
    return j_buf_put(c, b, out, o);
}

/* decode one UTF-8 code point at p[i]; invalid bytes read as themselves (one byte) */
static uint32_t utf8_at(const char *p, size_t n, size_t i, size_t *len)
{
    const unsigned char *s = (const unsigned char *)p + i;
    const size_t left = n - i;
    *len = 1;
    if (s[0] < 0x80)
        return s[0];
    size_t need = s[0] >= 0xF0 && s[0] < 0xF5 ? 4 : s[0] >= 0xE0 ? 3 : s[0] >= 0xC2 && s[0] < 0xE0 ? 2 : 0;
    if (s[0] >= 0xF5)
        need = 0;
    if (need == 0 || need > left)
        return 0xDC00u + s[0];
    uint32_t cp = s[0] & (0x7F >> need);
    for (size_t k = 1; k < need; k++) {
        if ((s[k] & 0xC0) != 0x80)
            return 0xDC00u + s[0];
        cp = (cp << 6) | (s[k] & 0x3F);
    }
    if ((need == 3 && cp < 0x800) || (need == 4 && (cp < 0x10000 || cp > 0x10FFFF)))
        return 0xDC00u + s[0];
    *len = need;
    return cp;
}

bool j_isspace_at(const char *p, size_t n, size_t i, size_t *len)
{
    const uint32_t cp = utf8_at(p, n, i, len);
    if (cp == ' ' || (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x1F))
        return true;
    return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 ||
           cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

size_t j_utf8_len(const char *p, size_t n)
{
    size_t cps = 0;
    for (size_t i = 0, l; i < n; i += l, cps++)
        utf8_at(p, n, i, &l);
    return cps;
}

size_t j_utf8_offset(const char *p, size_t n, size_t cp)
{
    size_t i = 0, l;
    for (; i < n && cp > 0; cp--, i += l)
        utf8_at(p, n, i, &l);
    return i;
}

/* Python's repr() of a str */
static int write_str_repr(struct jctx *c, struct jbuf *b, const char *p, size_t n)
{
    const bool dq = memchr(p, '\'', n) && !memchr(p, '"', n);
    const char q = dq ? '"' : '\'';
    if (j_buf_putc(c, b, q))
        return -1;
    for (size_t i = 0; i < n; i++) {
        const unsigned char ch = (unsigned char)p[i];
        int r;
        if (ch == (unsigned char)q || ch == '\\')
            r = j_buf_putc(c, b, '\\') || j_buf_putc(c, b, (char)ch);
        else if (ch == '\n')
            r = j_buf_put(c, b, "\\n", 2);
        else if (ch == '\r')
            r = j_buf_put(c, b, "\\r", 2);
        else if (ch == '\t')
            r = j_buf_put(c, b, "\\t", 2);
        else if (ch < 0x20 || ch == 0x7F)
            r = j_buf_printf(c, b, "\\x%02x", ch);
        else
            r = j_buf_putc(c, b, (char)ch);
        if (r)
            return -1;
    }
    return j_buf_putc(c, b, q);
}

static int write_seq(struct jctx *c, struct jbuf *b, const struct jlist *l)
{
    if (j_buf_putc(c, b, l->tuple ? '(' : '['))
        return -1;
    for (size_t i = 0; i < l->n; i++) {
        if ((i && j_buf_put(c, b, ", ", 2)) || jv_write(c, b, l->v[i], true))
            return -1;
    }
    if (l->tuple && l->n == 1 && j_buf_putc(c, b, ','))
        return -1;
    return j_buf_putc(c, b, l->tuple ? ')' : ']');
}

static int write_dict(struct jctx *c, struct jbuf *b, const struct jdict *d, bool ns)
{
    if ((ns && j_buf_put(c, b, "<Namespace ", 11)) || j_buf_putc(c, b, '{'))
        return -1;
    for (size_t i = 0; i < d->n; i++) {
        if ((i && j_buf_put(c, b, ", ", 2)) || jv_write(c, b, d->k[i], true) || j_buf_put(c, b, ": ", 2) ||
            jv_write(c, b, d->v[i], true))
            return -1;
    }
    return j_buf_putc(c, b, '}') || (ns && j_buf_putc(c, b, '>')) ? -1 : 0;
}

/* str(v) (repr false) or repr(v) into b */
int jv_write(struct jctx *c, struct jbuf *b, struct jv v, bool repr)
{
    if (j_step(c))
        return -1;
    if (++c->depth > c->max_depth) {
        c->depth--;
        return j_fail(c, LM_ERR_CORRUPT, "line %d: value nested too deeply", c->line);
    }
    int r = 0;
    switch (v.kind) {
    case JV_UNDEF: break;
    case JV_NONE: r = j_buf_put(c, b, "None", 4); break;
    case JV_BOOL: r = v.u.b ? j_buf_put(c, b, "True", 4) : j_buf_put(c, b, "False", 5); break;
    case JV_INT: r = j_buf_printf(c, b, "%lld", (long long)v.u.i); break;
    case JV_FLOAT: r = write_float(c, b, v.u.f, false); break;
    case JV_STR: r = repr ? write_str_repr(c, b, v.u.s.p, v.u.s.n) : j_buf_put(c, b, v.u.s.p, v.u.s.n); break;
    case JV_LIST: r = write_seq(c, b, v.u.l); break;
    case JV_DICT: r = write_dict(c, b, v.u.d, false); break;
    case JV_NS: r = write_dict(c, b, v.u.d, true); break;
    case JV_LOOP: r = j_buf_put(c, b, "<LoopContext>", 13); break;
    case JV_MACRO: r = j_buf_printf(c, b, "<Macro '%s'>", v.u.macro->name); break;
    case JV_FUNC: r = j_buf_put(c, b, "<function>", 10); break;
    default: r = j_buf_printf(c, b, "<built-in method %s>", v.u.m->name); break;
    }
    c->depth--;
    return r;
}

int jv_to_str(struct jctx *c, struct jv v, struct jv *out)
{
    if (v.kind == JV_STR) {
        *out = v;
        return 0;
    }
    if (v.kind == JV_UNDEF) {
        *out = jv_str("", 0);
        return 0;
    }
    struct jbuf b = {0};
    if (jv_write(c, &b, v, false))
        return -1;
    *out = jv_str(b.p, b.n);
    return 0;
}

/* ---- JSON (Python's json.dumps) ---- */

static int json_str(struct jctx *c, struct jbuf *b, const char *p, size_t n, bool ensure_ascii)
{
    if (j_buf_putc(c, b, '"'))
        return -1;
    for (size_t i = 0; i < n;) {
        const unsigned char ch = (unsigned char)p[i];
        int r = 0;
        size_t l = 1;
        switch (ch) {
        case '"': r = j_buf_put(c, b, "\\\"", 2); break;
        case '\\': r = j_buf_put(c, b, "\\\\", 2); break;
        case '\n': r = j_buf_put(c, b, "\\n", 2); break;
        case '\r': r = j_buf_put(c, b, "\\r", 2); break;
        case '\t': r = j_buf_put(c, b, "\\t", 2); break;
        case '\b': r = j_buf_put(c, b, "\\b", 2); break;
        case '\f': r = j_buf_put(c, b, "\\f", 2); break;
        default:
            if (ch < 0x20 || (ensure_ascii && ch == 0x7F)) {
                r = j_buf_printf(c, b, "\\u%04x", ch);
            } else if (ch >= 0x80 && ensure_ascii) {
                uint32_t cp = utf8_at(p, n, i, &l);
                if (cp >= 0x10000) {
                    cp -= 0x10000;
                    r = j_buf_printf(c, b, "\\u%04x\\u%04x", 0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF));
                } else {
                    r = j_buf_printf(c, b, "\\u%04x", cp);
                }
            } else {
                r = j_buf_putc(c, b, (char)ch);
            }
        }
        if (r)
            return -1;
        i += l;
    }
    return j_buf_putc(c, b, '"');
}

static int json_newline(struct jctx *c, struct jbuf *b, const char *indent, int level)
{
    if (j_buf_putc(c, b, '\n'))
        return -1;
    for (int i = 0; i < level; i++)
        if (j_buf_put(c, b, indent, strlen(indent)))
            return -1;
    return 0;
}

/* the keys of a dict in output order (sorted when asked) */
static int json_key_order(struct jctx *c, const struct jdict *d, bool sort, size_t **order)
{
    size_t *o = j_alloc(c, (d->n ? d->n : 1) * sizeof *o);
    if (!o)
        return -1;
    for (size_t i = 0; i < d->n; i++)
        o[i] = i;
    for (size_t i = 1; sort && i < d->n; i++) { /* insertion sort: dicts in templates are small */
        for (size_t j = i; j > 0; j--) {
            int r;
            if (jv_compare(c, d->k[o[j - 1]], d->k[o[j]], &r))
                return -1;
            if (r <= 0)
                break;
            const size_t t = o[j];
            o[j] = o[j - 1];
            o[j - 1] = t;
            if (j_step(c))
                return -1;
        }
    }
    *order = o;
    return 0;
}

static int json_key(struct jctx *c, struct jbuf *b, struct jv k, bool ensure_ascii)
{
    switch (k.kind) {
    case JV_STR: return json_str(c, b, k.u.s.p, k.u.s.n, ensure_ascii);
    case JV_NONE: return j_buf_put(c, b, "\"null\"", 6);
    case JV_BOOL: return k.u.b ? j_buf_put(c, b, "\"true\"", 6) : j_buf_put(c, b, "\"false\"", 7);
    case JV_INT: return j_buf_printf(c, b, "\"%lld\"", (long long)k.u.i);
    case JV_FLOAT:
        return j_buf_putc(c, b, '"') || write_float(c, b, k.u.f, true) || j_buf_putc(c, b, '"') ? -1 : 0;
    default:
        return j_fail(c, LM_ERR_CORRUPT, "line %d: TypeError: keys must be str, int, float, bool or None, not %s",
                      c->line, jv_type_name(k));
    }
}

static int json_container(struct jctx *c, struct jbuf *b, struct jv v, const char *indent, bool ensure_ascii,
                          bool sort_keys, const char *item_sep, const char *key_sep, int level)
{
    const bool is_list = v.kind == JV_LIST;
    const size_t n = is_list ? v.u.l->n : v.u.d->n;
    if (n == 0)
        return j_buf_put(c, b, is_list ? "[]" : "{}", 2);
    size_t *order = NULL;
    if (!is_list && json_key_order(c, v.u.d, sort_keys, &order))
        return -1;
    if (j_buf_putc(c, b, is_list ? '[' : '{'))
        return -1;
    for (size_t i = 0; i < n; i++) {
        if (i && j_buf_put(c, b, item_sep, strlen(item_sep)))
            return -1;
        if (indent && json_newline(c, b, indent, level + 1))
            return -1;
        if (!is_list && (json_key(c, b, v.u.d->k[order[i]], ensure_ascii) || j_buf_put(c, b, key_sep, strlen(key_sep))))
            return -1;
        const struct jv item = is_list ? v.u.l->v[i] : v.u.d->v[order[i]];
        if (jv_tojson(c, b, item, indent, ensure_ascii, sort_keys, item_sep, key_sep, level + 1))
            return -1;
    }
    if (indent && json_newline(c, b, indent, level))
        return -1;
    return j_buf_putc(c, b, is_list ? ']' : '}');
}

int jv_tojson(struct jctx *c, struct jbuf *b, struct jv v, const char *indent, bool ensure_ascii, bool sort_keys,
              const char *item_sep, const char *key_sep, int level)
{
    if (j_step(c))
        return -1;
    if (level > c->max_depth)
        return j_fail(c, LM_ERR_CORRUPT, "line %d: value nested too deeply for tojson", c->line);
    switch (v.kind) {
    case JV_NONE: return j_buf_put(c, b, "null", 4);
    case JV_BOOL: return v.u.b ? j_buf_put(c, b, "true", 4) : j_buf_put(c, b, "false", 5);
    case JV_INT: return j_buf_printf(c, b, "%lld", (long long)v.u.i);
    case JV_FLOAT: return write_float(c, b, v.u.f, true);
    case JV_STR: return json_str(c, b, v.u.s.p, v.u.s.n, ensure_ascii);
    case JV_LIST:
    case JV_DICT:
        return json_container(c, b, v, indent, ensure_ascii, sort_keys, item_sep, key_sep, level);
    default:
        return j_fail(c, LM_ERR_CORRUPT, "line %d: TypeError: Object of type %s is not JSON serializable", c->line,
                      jv_type_name(v));
    }
}
