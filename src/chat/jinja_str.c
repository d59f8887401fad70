/* jinja_str.c - Python's str methods that templates call (strip, split,
 * startswith, replace, format, ...) and `%` formatting.
 *
 * Strings are UTF-8; positions and lengths a template sees count code points,
 * as Python's do. Whitespace is Python's (str.isspace), case mapping ASCII. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/jinja.h"

#define V_LIST(x_) ((struct jv){.kind = JV_LIST, .u.l = (x_)})

static const char *const METHODS[] = {
    "strip", "lstrip", "rstrip", "split", "rsplit", "splitlines", "startswith", "endswith", "upper", "lower",
    "title", "capitalize", "replace", "join", "find", "rfind", "count", "format", "isdigit", "isalpha",
    "isalnum", "isspace", "islower", "isupper", NULL,
};

bool j_str_has_method(const char *name, size_t n)
{
    for (const char *const *m = METHODS; *m; m++)
        if (strlen(*m) == n && !memcmp(*m, name, n))
            return true;
    return false;
}

static bool is_alpha(char ch) { return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z'); }
static char up(char ch) { return ch >= 'a' && ch <= 'z' ? (char)(ch - 32) : ch; }
static char low(char ch) { return ch >= 'A' && ch <= 'Z' ? (char)(ch + 32) : ch; }

/* mode: 0 lower, 1 upper, 2 str.title(), 3 capitalize, 4 jinja2's title filter */
int j_case(struct jctx *c, struct jv s, int mode, struct jv *out)
{
    char *p = j_alloc(c, s.u.s.n + 1);
    if (!p)
        return -1;
    bool prev_cased = false;
    for (size_t i = 0; i < s.u.s.n; i++) {
        const char ch = s.u.s.p[i];
        const bool cased = is_alpha(ch) || ((unsigned char)ch >= 0x80);
        switch (mode) {
        case 0: p[i] = low(ch); break;
        case 1: p[i] = up(ch); break;
        case 2: p[i] = prev_cased ? low(ch) : up(ch); break;
        case 3: p[i] = i == 0 ? up(ch) : low(ch); break;
        default: {
            const char b = i ? s.u.s.p[i - 1] : ' ';
            const bool start = b == '-' || b == '(' || b == '{' || b == '[' || b == '<' || b == ' ' ||
                               (b >= 0x09 && b <= 0x0D) || (b >= 0x1C && b <= 0x1F);
            p[i] = start ? up(ch) : low(ch);
        }
        }
        prev_cased = cased;
    }
    *out = jv_str(p, s.u.s.n);
    return 0;
}

size_t j_line_break_at(const char *p, size_t n, size_t i)
{
    const unsigned char ch = (unsigned char)p[i];
    if (ch == '\r')
        return i + 1 < n && p[i + 1] == '\n' ? 2 : 1;
    if (ch == '\n' || ch == '\v' || ch == '\f' || (ch >= 0x1C && ch <= 0x1E))
        return 1;
    if (ch == 0xC2 && i + 1 < n && (unsigned char)p[i + 1] == 0x85)
        return 2;
    if (ch == 0xE2 && i + 2 < n && (unsigned char)p[i + 1] == 0x80 &&
        ((unsigned char)p[i + 2] == 0xA8 || (unsigned char)p[i + 2] == 0xA9))
        return 3;
    return 0;
}

static size_t cp_len(const char *p, size_t n, size_t i) { return j_utf8_offset(p + i, n - i, 1); }

/* is the code point at s[i] one of chars (NULL: whitespace)? its length in *len */
static bool strip_hit(const char *s, size_t n, size_t i, struct jv chars, size_t *len)
{
    if (chars.kind != JV_STR)
        return j_isspace_at(s, n, i, len);
    *len = cp_len(s, n, i);
    for (size_t k = 0; k < chars.u.s.n;) {
        const size_t l = cp_len(chars.u.s.p, chars.u.s.n, k);
        if (l == *len && !memcmp(chars.u.s.p + k, s + i, l))
            return true;
        k += l;
    }
    return false;
}

int j_strip(struct jctx *c, struct jv s, struct jv chars, bool left, bool right, struct jv *out)
{
    if (chars.kind != JV_STR && chars.kind != JV_NONE && chars.kind != JV_UNDEF)
        return j_need_str(c, chars, "strip");
    const char *p = s.u.s.p;
    size_t a = 0, b = s.u.s.n, l;
    while (left && a < b && strip_hit(p, b, a, chars, &l))
        a += l;
    while (right && b > a) {
        size_t st = b - 1;
        while (st > a && ((unsigned char)p[st] & 0xC0) == 0x80 && b - st < 4)
            st--;
        if (!strip_hit(p, b, st, chars, &l) || st + l != b)
            break;
        b = st;
    }
    *out = jv_str(p + a, b - a);
    return 0;
}

static int push_str(struct jctx *c, struct jlist **l, size_t *cap, const char *p, size_t n)
{
    if ((*l)->n == *cap) {
        struct jlist *g = jl_new(c, *cap * 2);
        if (!g)
            return -1;
        memcpy(g->v, (*l)->v, (*l)->n * sizeof *g->v);
        g->n = (*l)->n;
        *l = g;
        *cap *= 2;
    }
    (*l)->v[(*l)->n++] = jv_str(p, n);
    return j_step(c);
}

/* rsplit() with maxsplit on whitespace: words from the right */
static int rsplit_ws(struct jctx *c, struct jv s, int64_t maxsplit, struct jlist **l, size_t *cap)
{
    const char *p = s.u.s.p;
    struct jv rest;
    if (j_strip(c, s, jv_none(), false, true, &rest))
        return -1;
    size_t end = rest.u.s.n, k = 0, l2;
    size_t *cuts = j_alloc(c, (s.u.s.n + 1) * 2 * sizeof *cuts);
    if (!cuts)
        return -1;
    while (end > 0 && (int64_t)k < maxsplit) {
        size_t i = end;
        while (i > 0) {
            size_t st = i - 1;
            while (st > 0 && ((unsigned char)p[st] & 0xC0) == 0x80)
                st--;
            if (j_isspace_at(p, s.u.s.n, st, &l2))
                break;
            i = st;
        }
        if (i == 0)
            break;
        cuts[2 * k] = i, cuts[2 * k + 1] = end - i, k++;
        if (j_strip(c, jv_str(p, i), jv_none(), false, true, &rest))
            return -1;
        end = rest.u.s.n;
    }
    if (end > 0 && push_str(c, l, cap, p, end))
        return -1;
    for (size_t i = k; i-- > 0;)
        if (push_str(c, l, cap, p + cuts[2 * i], cuts[2 * i + 1]))
            return -1;
    return 0;
}

/* split() on runs of whitespace, none at the ends */
static int split_ws(struct jctx *c, struct jv s, int64_t maxsplit, struct jlist **l, size_t *cap)
{
    const char *p = s.u.s.p;
    const size_t n = s.u.s.n;
    size_t i = 0, len;
    for (int64_t splits = 0; i < n; splits++) {
        while (i < n && j_isspace_at(p, n, i, &len))
            i += len;
        if (i >= n)
            break;
        if (maxsplit >= 0 && splits >= maxsplit) {
            struct jv rest;
            return j_strip(c, jv_str(p + i, n - i), jv_none(), false, true, &rest) ||
                           push_str(c, l, cap, rest.u.s.p, rest.u.s.n)
                       ? -1
                       : 0;
        }
        const size_t start = i;
        while (i < n && !j_isspace_at(p, n, i, &len))
            i += len;
        if (push_str(c, l, cap, p + start, i - start))
            return -1;
    }
    return 0;
}

/* split() / rsplit() on a separator */
static int split_sep(struct jctx *c, struct jv s, struct jv sep, int64_t maxsplit, bool right, struct jlist **l,
                     size_t *cap)
{
    const char *p = s.u.s.p, *q = sep.u.s.p;
    const size_t n = s.u.s.n, m = sep.u.s.n;
    if (right && maxsplit >= 0) {
        size_t end = n;
        const int64_t most = maxsplit < (int64_t)n ? maxsplit : (int64_t)n;
        size_t *cuts = j_alloc(c, ((size_t)most + 1) * 2 * sizeof *cuts);
        int64_t k = 0;
        if (!cuts)
            return -1;
        for (size_t i = end; k < most && i >= m;) {
            if (!memcmp(p + i - m, q, m)) {
                cuts[2 * k] = i, cuts[2 * k + 1] = end - i, k++;
                end = i = i - m;
            } else {
                i--;
            }
        }
        if (push_str(c, l, cap, p, end))
            return -1;
        for (int64_t i = k; i-- > 0;)
            if (push_str(c, l, cap, p + cuts[2 * i], cuts[2 * i + 1]))
                return -1;
        return 0;
    }
    size_t start = 0;
    for (int64_t splits = 0;; splits++) {
        const char *hit = maxsplit >= 0 && splits >= maxsplit ? NULL : memmem(p + start, n - start, q, m);
        if (!hit)
            break;
        if (push_str(c, l, cap, p + start, (size_t)(hit - (p + start))))
            return -1;
        start = (size_t)(hit - p) + m;
    }
    return push_str(c, l, cap, p + start, n - start);
}

/* split / rsplit (right: from the end, only differs with maxsplit) */
static int str_split(struct jctx *c, struct jv s, struct jv sep, int64_t maxsplit, bool right, struct jv *out)
{
    size_t cap = 8;
    struct jlist *l = jl_new(c, cap);
    if (!l)
        return -1;
    l->n = 0;
    if (sep.kind == JV_STR && sep.u.s.n == 0)
        return j_fail(c, LM_ERR_CORRUPT, "line %d: ValueError: empty separator", c->line);
    int r;
    if (sep.kind == JV_STR)
        r = split_sep(c, s, sep, maxsplit, right, &l, &cap);
    else if (right && maxsplit >= 0)
        r = rsplit_ws(c, s, maxsplit, &l, &cap);
    else
        r = split_ws(c, s, maxsplit, &l, &cap);
    if (r)
        return -1;
    *out = V_LIST(l);
    return 0;
}

static int str_replace(struct jctx *c, struct jv s, struct jv old, struct jv new, int64_t count, struct jv *out)
{
    struct jbuf b = {0};
    const char *p = s.u.s.p;
    const size_t n = s.u.s.n;
    int64_t done = 0;
    if (old.u.s.n == 0) { /* new before every code point and at the end */
        for (size_t i = 0; i <= n; i += i < n ? cp_len(p, n, i) : 1) {
            if ((count < 0 || done++ < count) && j_buf_put(c, &b, new.u.s.p, new.u.s.n))
                return -1;
            if (i < n && j_buf_put(c, &b, p + i, cp_len(p, n, i)))
                return -1;
        }
        *out = jv_str(b.p ? b.p : "", b.n);
        return 0;
    }
    size_t i = 0;
    while (i <= n) {
        const char *hit = count >= 0 && done >= count ? NULL : memmem(p + i, n - i, old.u.s.p, old.u.s.n);
        if (!hit) {
            if (j_buf_put(c, &b, p + i, n - i))
                return -1;
            break;
        }
        if (j_buf_put(c, &b, p + i, (size_t)(hit - (p + i))) || j_buf_put(c, &b, new.u.s.p, new.u.s.n) || j_step(c))
            return -1;
        i = (size_t)(hit - p) + old.u.s.n;
        done++;
    }
    *out = jv_str(b.p ? b.p : "", b.n);
    return 0;
}

static int str_affix(struct jctx *c, struct jv s, struct jv x, bool end, struct jv *out)
{
    struct jlist one = {1, false, &x};
    const struct jlist *l = x.kind == JV_LIST ? x.u.l : &one;
    *out = jv_bool(false);
    for (size_t i = 0; i < l->n; i++) {
        const struct jv a = l->v[i];
        if (j_need_str(c, a, end ? "endswith" : "startswith"))
            return -1;
        if (a.u.s.n <= s.u.s.n && !memcmp(s.u.s.p + (end ? s.u.s.n - a.u.s.n : 0), a.u.s.p, a.u.s.n))
            *out = jv_bool(true);
    }
    return 0;
}

static int str_join(struct jctx *c, struct jv sep, struct jv items, struct jv *out)
{
    struct jlist *l;
    struct jbuf b = {0};
    if (j_iterate(c, items, &l))
        return -1;
    for (size_t i = 0; i < l->n; i++) {
        if (l->v[i].kind != JV_STR)
            return j_fail(c, LM_ERR_CORRUPT, "line %d: TypeError: sequence item %zu: expected str instance, %s found",
                          c->line, i, jv_type_name(l->v[i]));
        if ((i && j_buf_put(c, &b, sep.u.s.p, sep.u.s.n)) || j_buf_put(c, &b, l->v[i].u.s.p, l->v[i].u.s.n))
            return -1;
    }
    *out = jv_str(b.p ? b.p : "", b.n);
    return 0;
}

static int str_find(struct jctx *c, struct jv s, struct jv sub, int mode, struct jv *out)
{
    if (j_need_str(c, sub, "find"))
        return -1;
    const char *p = s.u.s.p, *q = sub.u.s.p;
    const size_t n = s.u.s.n, m = sub.u.s.n;
    if (mode == 2) { /* count: non-overlapping */
        int64_t k = 0;
        if (m == 0) {
            *out = jv_int((int64_t)j_utf8_len(p, n) + 1);
            return 0;
        }
        for (const char *h = p; (h = memmem(h, n - (size_t)(h - p), q, m)); h += m)
            k++;
        *out = jv_int(k);
        return 0;
    }
    const char *hit = NULL;
    if (mode == 0) {
        hit = m == 0 ? p : memmem(p, n, q, m);
    } else {
        for (size_t i = n >= m ? n - m + 1 : 0; i-- > 0 && !hit;)
            if (!memcmp(p + i, q, m))
                hit = p + i;
    }
    *out = jv_int(hit ? (int64_t)j_utf8_len(p, (size_t)(hit - p)) : -1);
    return 0;
}

/* str.format: {} {0} {name}, with !s / !r; no format specs */
static int str_format(struct jctx *c, struct jv s, const struct jargs *a, struct jv *out)
{
    struct jbuf b = {0};
    const char *p = s.u.s.p;
    const size_t n = s.u.s.n;
    size_t auto_i = 0;
    for (size_t i = 0; i < n; i++) {
        if ((p[i] == '{' || p[i] == '}') && i + 1 < n && p[i + 1] == p[i]) {
            if (j_buf_putc(c, &b, p[i++]))
                return -1;
            continue;
        }
        if (p[i] == '}')
            return j_fail(c, LM_ERR_CORRUPT, "line %d: ValueError: Single '}' encountered in format string", c->line);
        if (p[i] != '{') {
            if (j_buf_putc(c, &b, p[i]))
                return -1;
            continue;
        }
        const char *close = memchr(p + i, '}', n - i);
        if (!close)
            return j_fail(c, LM_ERR_CORRUPT, "line %d: ValueError: Single '{' encountered in format string", c->line);
        const char *f = p + i + 1;
        size_t fl = (size_t)(close - f);
        bool repr = false;
        if (fl >= 2 && f[fl - 2] == '!' && (f[fl - 1] == 'r' || f[fl - 1] == 's'))
            repr = f[fl - 1] == 'r', fl -= 2;
        if (memchr(f, ':', fl) || memchr(f, '.', fl) || memchr(f, '[', fl))
            return j_fail(c, LM_ERR_CORRUPT, "line %d: str.format: format specs are not supported", c->line);
        struct jv v = jv_undef(NULL);
        bool found = false;
        if (fl == 0 || (f[0] >= '0' && f[0] <= '9')) {
            const size_t k = fl == 0 ? auto_i++ : (size_t)strtoul(f, NULL, 10);
            found = k < a->n_pos;
            if (found)
                v = a->pos[k];
        } else {
            for (size_t k = 0; k < a->n_kw && !found; k++)
                if (strlen(a->kw_names[k]) == fl && !memcmp(a->kw_names[k], f, fl))
                    v = a->kw_vals[k], found = true;
        }
        if (!found)
            return j_fail(c, LM_ERR_CORRUPT, "line %d: str.format: missing argument '%.*s'", c->line,
                          (int)(fl < 40 ? fl : 40), f);
        if (jv_write(c, &b, v, repr))
            return -1;
        i = (size_t)(close - p);
    }
    *out = jv_str(b.p ? b.p : "", b.n);
    return 0;
}

static int str_class(struct jctx *c, struct jv s, const char *name, struct jv *out)
{
    bool ok = s.u.s.n > 0, cased = false;
    size_t len;
    for (size_t i = 0; i < s.u.s.n; i += len) {
        const char ch = s.u.s.p[i];
        len = 1;
        if (!strcmp(name, "isspace")) {
            ok &= j_isspace_at(s.u.s.p, s.u.s.n, i, &len);
        } else if (!strcmp(name, "isdigit")) {
            ok &= ch >= '0' && ch <= '9';
        } else if (!strcmp(name, "isalpha")) {
            ok &= is_alpha(ch);
        } else if (!strcmp(name, "isalnum")) {
            ok &= is_alpha(ch) || (ch >= '0' && ch <= '9');
        } else {
            cased |= is_alpha(ch);
            ok &= !is_alpha(ch) || (name[2] == 'l' ? ch == low(ch) : ch == up(ch));
        }
    }
    if (name[2] == 'l' || name[2] == 'u')
        ok = ok && cased;
    *out = jv_bool(ok);
    return 0;
}

int j_str_method(struct jctx *c, struct jv self, const char *name, const struct jv *args, size_t n_args,
                 const char *const *kw_names, const struct jv *kw_vals, size_t n_kw, struct jv *out)
{
    const struct jargs a = {args, n_args, kw_names, kw_vals, n_kw};
    const struct jv a0 = j_arg(&a, 0, NULL, jv_none());
    int64_t k = -1;
    if (!strcmp(name, "strip") || !strcmp(name, "lstrip") || !strcmp(name, "rstrip"))
        return j_strip(c, self, j_arg(&a, 0, "chars", jv_none()), name[0] != 'r', name[0] != 'l', out);
    if (!strcmp(name, "split") || !strcmp(name, "rsplit")) {
        const struct jv sep = j_arg(&a, 0, "sep", jv_none());
        if (sep.kind != JV_NONE && j_need_str(c, sep, name))
            return -1;
        if (j_need_int(c, j_arg(&a, 1, "maxsplit", jv_int(-1)), name, &k))
            return -1;
        return str_split(c, self, sep, k, name[0] == 'r', out);
    }
    if (!strcmp(name, "startswith") || !strcmp(name, "endswith"))
        return str_affix(c, self, a0, name[0] == 'e', out);
    if (!strcmp(name, "upper") || !strcmp(name, "lower") || !strcmp(name, "title") || !strcmp(name, "capitalize"))
        return j_case(c, self, name[0] == 'l' ? 0 : name[0] == 'u' ? 1 : name[0] == 't' ? 2 : 3, out);
    if (!strcmp(name, "replace")) {
        const struct jv old = a0, new = j_arg(&a, 1, NULL, jv_none());
        if (j_need_str(c, old, name) || j_need_str(c, new, name) ||
            j_need_int(c, j_arg(&a, 2, "count", jv_int(-1)), name, &k))
            return -1;
        return str_replace(c, self, old, new, k, out);
    }
    if (!strcmp(name, "join"))
        return str_join(c, self, a0, out);
    if (!strcmp(name, "find") || !strcmp(name, "rfind") || !strcmp(name, "count"))
        return str_find(c, self, a0, name[0] == 'f' ? 0 : name[0] == 'r' ? 1 : 2, out);
    if (!strcmp(name, "format"))
        return str_format(c, self, &a, out);
    if (!strcmp(name, "splitlines")) {
        size_t cap = 8;
        struct jlist *l = jl_new(c, cap);
        if (!l)
            return -1;
        l->n = 0;
        for (size_t i = 0, start = 0, br; i < self.u.s.n; i += br ? br : 1) {
            br = j_line_break_at(self.u.s.p, self.u.s.n, i);
            const bool last = i + (br ? br : 1) >= self.u.s.n;
            if ((br || last) && push_str(c, &l, &cap, self.u.s.p + start, (br ? i : self.u.s.n) - start))
                return -1;
            if (br)
                start = i + br;
        }
        *out = V_LIST(l);
        return 0;
    }
    if (!strncmp(name, "is", 2))
        return str_class(c, self, name, out);
    return j_fail(c, LM_ERR_CORRUPT, "line %d: str has no method '%s'", c->line, name);
}

/* %s / %r with optional '-' and width */
static int pct_text(struct jctx *c, struct jbuf *b, struct jv v, bool repr, const char *spec)
{
    struct jbuf t = {0};
    if (jv_write(c, &t, v, repr))
        return -1;
    const int width = atoi(spec + 1 + strspn(spec + 1, "-+ 0#"));
    const bool left = strchr(spec, '-') != NULL;
    if (width > 1000)
        return j_fail(c, LM_ERR_CORRUPT, "line %d: format width too large", c->line);
    const int pad = width - (int)j_utf8_len(t.p ? t.p : "", t.n);
    for (int i = 0; !left && i < pad; i++)
        if (j_buf_putc(c, b, ' '))
            return -1;
    if (j_buf_put(c, b, t.p ? t.p : "", t.n))
        return -1;
    for (int i = 0; left && i < pad; i++)
        if (j_buf_putc(c, b, ' '))
            return -1;
    return 0;
}

/* fmt % args: %s %r %d %i %x %o %f %e %g %c %%, flags, width, precision, %(name)s */
int j_str_format_pct(struct jctx *c, struct jv fmt, struct jv args, struct jv *out)
{
    struct jbuf b = {0};
    const char *p = fmt.u.s.p;
    const size_t n = fmt.u.s.n;
    const bool tuple = args.kind == JV_LIST && args.u.l->tuple;
    size_t next = 0;
    for (size_t i = 0; i < n; i++) {
        if (p[i] != '%') {
            if (j_buf_putc(c, &b, p[i]))
                return -1;
            continue;
        }
        struct jv v = args;
        size_t j = i + 1;
        if (j < n && p[j] == '(') {
            const char *close = memchr(p + j, ')', n - j);
            if (!close || args.kind != JV_DICT)
                return j_fail(c, LM_ERR_CORRUPT, "line %d: TypeError: format requires a mapping", c->line);
            const struct jv *hit = jd_get_str(args.u.d, p + j + 1, (size_t)(close - p) - j - 1);
            if (!hit)
                return j_fail(c, LM_ERR_CORRUPT, "line %d: KeyError in %% format", c->line);
            v = *hit;
            j = (size_t)(close - p) + 1;
        }
        char spec[40] = "%";
        size_t sl = 1;
        while (j < n && strchr("-+ 0#", p[j]) && sl < 8)
            spec[sl++] = p[j++];
        while (j < n && ((p[j] >= '0' && p[j] <= '9') || p[j] == '.') && sl < 14)
            spec[sl++] = p[j++];
        if (j >= n)
            return j_fail(c, LM_ERR_CORRUPT, "line %d: ValueError: incomplete format", c->line);
        const char conv = p[j];
        i = j;
        if (conv == '%') {
            if (j_buf_putc(c, &b, '%'))
                return -1;
            continue;
        }
        if (v.kind == args.kind && v.u.l == args.u.l && tuple) {
            if (next >= args.u.l->n)
                return j_fail(c, LM_ERR_CORRUPT, "line %d: TypeError: not enough arguments for format string",
                              c->line);
            v = args.u.l->v[next++];
        }
        int r;
        if (conv == 's' || conv == 'r') {
            spec[sl] = 0;
            r = pct_text(c, &b, v, conv == 'r', spec);
        } else if (strchr("dixXo", conv) && (v.kind == JV_INT || v.kind == JV_BOOL || v.kind == JV_FLOAT)) {
            const long long x = v.kind == JV_INT ? v.u.i : v.kind == JV_BOOL ? v.u.b : (long long)v.u.f;
            spec[sl++] = 'l', spec[sl++] = 'l', spec[sl++] = conv == 'i' ? 'd' : conv, spec[sl] = 0;
            r = j_buf_printf(c, &b, spec, x);
        } else if (strchr("feEgG", conv) && (v.kind == JV_INT || v.kind == JV_BOOL || v.kind == JV_FLOAT)) {
            spec[sl++] = conv, spec[sl] = 0;
            r = j_buf_printf(c, &b, spec, v.kind == JV_FLOAT ? v.u.f : v.kind == JV_INT ? (double)v.u.i : v.u.b);
        } else {
            return j_fail(c, LM_ERR_CORRUPT, "line %d: TypeError: unsupported %% format '%c' for %s", c->line, conv,
                          jv_type_name(v));
        }
        if (r)
            return -1;
    }
    if (tuple && next < args.u.l->n)
        return j_fail(c, LM_ERR_CORRUPT, "line %d: TypeError: not all arguments converted during string formatting",
                      c->line);
    *out = jv_str(b.p ? b.p : "", b.n);
    return 0;
}
