/* jinja_lex.c - the template lexer: text, tags and expression tokens, with
 * jinja2's whitespace control under trim_blocks and lstrip_blocks.
 *
 * As jinja2: newlines are first normalized to "\n" and one trailing newline
 * is dropped; `{%-`/`{{-`/`{#-` strip all whitespace before a tag, `-%}`/
 * `-}}`/`-#}` all whitespace after; a block or comment tag alone on its line
 * (only spaces before it) loses that indentation unless written `{%+`; the
 * newline right after a block or comment tag is dropped unless `+%}`.
 * `{% raw %}` ... `{% endraw %}` is passed through as text. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/jinja.h"

struct lexer {
    struct jctx *c;
    const char *s; /* normalized source */
    size_t n, pos;
    int line;
    bool line_starting; /* the text so far ends a line (lstrip_blocks may apply) */
    struct jtok *toks;
    size_t n_toks, cap;
    char stack[J_MAX_PARSE_DEPTH]; /* open brackets in a tag */
    int depth;
};

static int emit(struct lexer *L, int kind, const char *p, size_t n, int line)
{
    if (L->n_toks == L->cap) {
        const size_t cap = L->cap ? L->cap * 2 : 256;
        struct jtok *t = j_alloc(L->c, cap * sizeof *t);
        if (!t)
            return -1;
        if (L->n_toks)
            memcpy(t, L->toks, L->n_toks * sizeof *t);
        L->toks = t;
        L->cap = cap;
    }
    L->toks[L->n_toks++] = (struct jtok){.kind = kind, .line = line, .p = p, .n = n};
    return 0;
}

static struct jtok *last(struct lexer *L) { return &L->toks[L->n_toks - 1]; }

static int count_lines(const char *p, size_t n)
{
    int k = 0;
    for (size_t i = 0; i < n; i++)
        k += p[i] == '\n';
    return k;
}

/* length of the whitespace run at s[i..n) */
static size_t ws_run(const char *s, size_t n, size_t i)
{
    size_t j = i, l;
    while (j < n && j_isspace_at(s, n, j, &l))
        j += l;
    return j - i;
}

/* text before a tag, after the whitespace rules: returns its new length */
static size_t strip_before(struct lexer *L, const char *text, size_t len, char mod, bool lstrip_kind)
{
    if (mod == '-') {
        /* rstrip: walk back over whitespace code points */
        size_t end = len;
        while (end > 0) {
            size_t start = end - 1, l;
            while (start > 0 && ((unsigned char)text[start] & 0xC0) == 0x80 && end - start < 4)
                start--;
            if (!j_isspace_at(text, end, start, &l) || start + l != end)
                break;
            end = start;
        }
        return end;
    }
    if (mod == '+' || !lstrip_kind)
        return len;
    size_t lpos = len;
    while (lpos > 0 && text[lpos - 1] != '\n')
        lpos--;
    if ((lpos > 0 || L->line_starting) && lpos < len && ws_run(text, len, lpos) == len - lpos)
        return lpos;
    return len;
}

/* after a closer: `-` eats all whitespace, trim_blocks one newline */
static void skip_after(struct lexer *L, char mod, bool trim)
{
    size_t eaten = 0;
    if (mod == '-')
        eaten = ws_run(L->s, L->n, L->pos);
    else if (mod != '+' && trim && L->pos < L->n && L->s[L->pos] == '\n')
        eaten = 1;
    L->line += count_lines(L->s + L->pos, eaten);
    L->pos += eaten;
}

static int decode_escape(struct lexer *L, const char *s, size_t n, size_t *i, struct jbuf *b);

/* a string literal at L->pos (the quote); decoded into the arena */
static int lex_string(struct lexer *L)
{
    const char q = L->s[L->pos];
    const int line = L->line;
    size_t i = L->pos + 1;
    struct jbuf b = {0};
    while (i < L->n && L->s[i] != q) {
        if (L->s[i] == '\\' && i + 1 < L->n) {
            if (decode_escape(L, L->s, L->n, &i, &b))
                return -1;
            continue;
        }
        if (L->s[i] == '\n')
            L->line++;
        if (j_buf_putc(L->c, &b, L->s[i++]))
            return -1;
    }
    if (i >= L->n)
        return j_fail(L->c, LM_ERR_CORRUPT, "syntax error at line %d: unterminated string", line);
    L->pos = i + 1;
    if (emit(L, T_STRING, b.p ? b.p : "", b.n, line))
        return -1;
    return 0;
}

static int put_utf8(struct lexer *L, struct jbuf *b, uint32_t cp)
{
    char u[4];
    size_t n;
    if (cp < 0x80) {
        u[0] = (char)cp, n = 1;
    } else if (cp < 0x800) {
        u[0] = (char)(0xC0 | (cp >> 6)), u[1] = (char)(0x80 | (cp & 0x3F)), n = 2;
    } else if (cp < 0x10000) {
        u[0] = (char)(0xE0 | (cp >> 12)), u[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        u[2] = (char)(0x80 | (cp & 0x3F)), n = 3;
    } else {
        u[0] = (char)(0xF0 | (cp >> 18)), u[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        u[2] = (char)(0x80 | ((cp >> 6) & 0x3F)), u[3] = (char)(0x80 | (cp & 0x3F)), n = 4;
    }
    return j_buf_put(L->c, b, u, n);
}

static int hexval(char ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return -1;
}

/* Python's unicode-escape for one backslash sequence at s[*i] */
static int decode_escape(struct lexer *L, const char *s, size_t n, size_t *i, struct jbuf *b)
{
    const char e = s[*i + 1];
    static const char simple_in[] = "\\'\"abfnrtv", simple_out[] = "\\'\"\a\b\f\n\r\t\v";
    const char *k = strchr(simple_in, e);
    if (e && k) {
        *i += 2;
        return j_buf_putc(L->c, b, simple_out[k - simple_in]);
    }
    if (e == '\n') { /* line continuation */
        *i += 2;
        L->line++;
        return 0;
    }
    if (e >= '0' && e <= '7') {
        uint32_t v = 0;
        size_t j = *i + 1;
        for (int d = 0; d < 3 && j < n && s[j] >= '0' && s[j] <= '7'; d++, j++)
            v = v * 8 + (uint32_t)(s[j] - '0');
        *i = j;
        return put_utf8(L, b, v);
    }
    const int digits = e == 'x' ? 2 : e == 'u' ? 4 : e == 'U' ? 8 : 0;
    if (digits) {
        uint32_t v = 0;
        for (int d = 0; d < digits; d++) {
            const size_t j = *i + 2 + (size_t)d;
            const int h = j < n ? hexval(s[j]) : -1;
            if (h < 0)
                return j_fail(L->c, LM_ERR_CORRUPT, "syntax error at line %d: truncated \\%c escape", L->line, e);
            v = v * 16 + (uint32_t)h;
        }
        if (v > 0x10FFFF || (v >= 0xD800 && v < 0xE000))
            return j_fail(L->c, LM_ERR_CORRUPT, "syntax error at line %d: invalid \\%c escape", L->line, e);
        *i += 2 + (size_t)digits;
        return put_utf8(L, b, v);
    }
    /* unknown escape: kept as written */
    *i += 1;
    return j_buf_putc(L->c, b, '\\');
}

static int lex_number(struct lexer *L)
{
    const char *s = L->s;
    size_t i = L->pos;
    char buf[64];
    size_t k = 0;
    bool is_float = false;
    const bool after_dot = i > 0 && s[i - 1] == '.';
    if (s[i] == '0' && i + 1 < L->n && strchr("xXoObB", s[i + 1])) {
        const int base = strchr("xX", s[i + 1]) ? 16 : strchr("oO", s[i + 1]) ? 8 : 2;
        i += 2;
        int64_t v = 0;
        size_t nd = 0;
        for (int h; i < L->n && ((h = hexval(s[i])) >= 0 || s[i] == '_'); i++) {
            if (s[i] == '_')
                continue;
            if (h >= base || v > (INT64_MAX - h) / base)
                return j_fail(L->c, LM_ERR_CORRUPT, "syntax error at line %d: bad number", L->line);
            v = v * base + h, nd++;
        }
        if (!nd)
            return j_fail(L->c, LM_ERR_CORRUPT, "syntax error at line %d: bad number", L->line);
        L->pos = i;
        if (emit(L, T_INT, s + L->pos, 0, L->line))
            return -1;
        last(L)->i = v;
        return 0;
    }
    for (; i < L->n && k < sizeof buf - 8; i++) {
        if (s[i] >= '0' && s[i] <= '9')
            buf[k++] = s[i];
        else if (s[i] == '_' && i + 1 < L->n && s[i + 1] >= '0' && s[i + 1] <= '9' && k)
            continue;
        else if (!after_dot && !is_float && s[i] == '.' && i + 1 < L->n && s[i + 1] >= '0' && s[i + 1] <= '9')
            buf[k++] = '.', is_float = true;
        else if (!after_dot && (s[i] == 'e' || s[i] == 'E') &&
                 ((i + 1 < L->n && s[i + 1] >= '0' && s[i + 1] <= '9') ||
                  (i + 2 < L->n && (s[i + 1] == '+' || s[i + 1] == '-') && s[i + 2] >= '0' && s[i + 2] <= '9'))) {
            buf[k++] = 'e', buf[k++] = s[++i], is_float = true;
        } else
            break;
    }
    if (k >= sizeof buf - 8)
        return j_fail(L->c, LM_ERR_CORRUPT, "syntax error at line %d: number too long", L->line);
    buf[k] = 0;
    L->pos = i;
    if (emit(L, is_float ? T_FLOAT : T_INT, NULL, 0, L->line))
        return -1;
    if (is_float) {
        last(L)->f = strtod(buf, NULL);
    } else {
        char *end;
        const unsigned long long v = strtoull(buf, &end, 10);
        if (k > 18 && (k > 19 || v > (unsigned long long)INT64_MAX))
            return j_fail(L->c, LM_ERR_CORRUPT, "syntax error at line %d: integer too large", L->line);
        last(L)->i = (int64_t)v;
    }
    return 0;
}

static const char *const OPS2[] = {"//", "**", "==", "!=", "<=", ">="};

static int lex_op(struct lexer *L)
{
    const char *p = L->s + L->pos;
    for (size_t k = 0; k < sizeof OPS2 / sizeof *OPS2; k++) {
        if (L->pos + 1 < L->n && p[0] == OPS2[k][0] && p[1] == OPS2[k][1]) {
            L->pos += 2;
            return emit(L, T_OP, p, 2, L->line);
        }
    }
    if (!strchr("+-*/%~<>=()[]{},.:|;", *p) || !*p)
        return j_fail(L->c, LM_ERR_CORRUPT, "syntax error at line %d: unexpected char '%c'", L->line, *p);
    if (strchr("([{", *p)) {
        if (L->depth >= J_MAX_PARSE_DEPTH)
            return j_fail(L->c, LM_ERR_CORRUPT, "syntax error at line %d: brackets nested too deeply", L->line);
        L->stack[L->depth++] = *p == '(' ? ')' : *p == '[' ? ']' : '}';
    } else if (strchr(")]}", *p)) {
        if (L->depth == 0)
            return j_fail(L->c, LM_ERR_CORRUPT, "syntax error at line %d: unexpected '%c'", L->line, *p);
        if (L->stack[L->depth - 1] != *p)
            return j_fail(L->c, LM_ERR_CORRUPT, "syntax error at line %d: unexpected '%c', expected '%c'", L->line,
                          *p, L->stack[L->depth - 1]);
        L->depth--;
    }
    L->pos++;
    return emit(L, T_OP, p, 1, L->line);
}

/* a closer at L->pos? sets *mod ('-', '+' or 0) and returns its length */
static size_t closer_at(struct lexer *L, const char *close, char *mod)
{
    const char *p = L->s + L->pos;
    const size_t left = L->n - L->pos;
    *mod = 0;
    if (left >= 2 && p[0] == close[0] && p[1] == close[1])
        return 2;
    if (left >= 3 && (p[0] == '-' || (p[0] == '+' && close[0] == '%')) && p[1] == close[0] && p[2] == close[1]) {
        *mod = p[0];
        return 3;
    }
    return 0;
}

/* the tokens of one tag up to its closer */
static int lex_tag(struct lexer *L, bool block)
{
    const char *close = block ? "%}" : "}}";
    L->depth = 0;
    for (;;) {
        const size_t ws = ws_run(L->s, L->n, L->pos);
        L->line += count_lines(L->s + L->pos, ws);
        L->pos += ws;
        if (L->pos >= L->n)
            return j_fail(L->c, LM_ERR_CORRUPT, "syntax error at line %d: unexpected end of template in a tag",
                          L->line);
        char mod;
        const size_t cl = L->depth == 0 ? closer_at(L, close, &mod) : 0;
        if (cl) {
            if (emit(L, block ? T_BLOCK_END : T_VAR_END, L->s + L->pos, cl, L->line))
                return -1;
            L->pos += cl;
            skip_after(L, mod, block);
            L->line_starting = L->pos > 0 && L->s[L->pos - 1] == '\n';
            return 0;
        }
        const char ch = L->s[L->pos];
        int r;
        if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch == '_') {
            size_t j = L->pos;
            while (j < L->n && ((L->s[j] >= 'a' && L->s[j] <= 'z') || (L->s[j] >= 'A' && L->s[j] <= 'Z') ||
                                (L->s[j] >= '0' && L->s[j] <= '9') || L->s[j] == '_'))
                j++;
            r = emit(L, T_NAME, L->s + L->pos, j - L->pos, L->line);
            L->pos = j;
        } else if (ch >= '0' && ch <= '9') {
            r = lex_number(L);
        } else if (ch == '\'' || ch == '"') {
            r = lex_string(L);
        } else {
            r = lex_op(L);
        }
        if (r)
            return -1;
    }
}

/* `{% raw %}` at the tag start? returns the length of the whole opening tag and its closer's modifier */
static size_t raw_open(const struct lexer *L, size_t at, const char *word, char *endmod)
{
    const char *s = L->s;
    size_t i = at + 2;
    if (i < L->n && (s[i] == '-' || s[i] == '+'))
        i++;
    i += ws_run(s, L->n, i);
    const size_t wl = strlen(word);
    if (i + wl > L->n || memcmp(s + i, word, wl))
        return 0;
    i += wl;
    i += ws_run(s, L->n, i);
    *endmod = 0;
    if (i < L->n && (s[i] == '-' || s[i] == '+'))
        *endmod = s[i++];
    if (i + 2 > L->n || s[i] != '%' || s[i + 1] != '}')
        return 0;
    return i + 2 - at;
}

static int lex_raw(struct lexer *L, char open_mod)
{
    skip_after(L, open_mod == '-' ? '-' : '+', false);
    const int line = L->line;
    for (size_t i = L->pos; i + 1 < L->n; i++) {
        char endmod;
        size_t len;
        if (L->s[i] != '{' || L->s[i + 1] != '%' || !(len = raw_open(L, i, "endraw", &endmod)))
            continue;
        const char mod = i + 2 < L->n && (L->s[i + 2] == '-' || L->s[i + 2] == '+') ? L->s[i + 2] : 0;
        L->line_starting = false;
        const size_t keep = strip_before(L, L->s + L->pos, i - L->pos, mod, true);
        if (emit(L, T_DATA, L->s + L->pos, keep, line))
            return -1;
        L->line += count_lines(L->s + L->pos, i + len - L->pos);
        L->pos = i + len;
        skip_after(L, endmod, true);
        L->line_starting = L->pos > 0 && L->s[L->pos - 1] == '\n';
        return 0;
    }
    return j_fail(L->c, LM_ERR_CORRUPT, "syntax error at line %d: missing end of raw directive", line);
}

static int lex_comment(struct lexer *L, size_t body)
{
    for (size_t i = body; i + 1 < L->n; i++) {
        if (L->s[i] != '#' || L->s[i + 1] != '}')
            continue;
        const char mod = i > body && (L->s[i - 1] == '-' || L->s[i - 1] == '+') ? L->s[i - 1] : 0;
        L->line += count_lines(L->s + L->pos, i + 2 - L->pos);
        L->pos = i + 2;
        skip_after(L, mod, true);
        L->line_starting = L->pos > 0 && L->s[L->pos - 1] == '\n';
        return 0;
    }
    return j_fail(L->c, LM_ERR_CORRUPT, "syntax error at line %d: missing end of comment tag", L->line);
}

/* from L->pos: text up to the next tag, then the tag */
static int lex_root(struct lexer *L)
{
    size_t t = L->pos;
    while (t + 1 < L->n && !(L->s[t] == '{' && (L->s[t + 1] == '{' || L->s[t + 1] == '%' || L->s[t + 1] == '#')))
        t++;
    if (t + 1 >= L->n) { /* no more tags */
        const int r = emit(L, T_DATA, L->s + L->pos, L->n - L->pos, L->line);
        L->pos = L->n;
        return r;
    }
    const char kind = L->s[t + 1];
    const char mod = t + 2 < L->n && (L->s[t + 2] == '-' || L->s[t + 2] == '+') ? L->s[t + 2] : 0;
    const size_t keep = strip_before(L, L->s + L->pos, t - L->pos, mod, kind != '{');
    if (keep && emit(L, T_DATA, L->s + L->pos, keep, L->line))
        return -1;
    L->line += count_lines(L->s + L->pos, t - L->pos);
    L->line_starting = false;
    const size_t body = t + 2 + (mod != 0);
    char endmod;
    size_t rl;
    if (kind == '%' && (rl = raw_open(L, t, "raw", &endmod))) {
        L->pos = t + rl;
        return lex_raw(L, endmod);
    }
    if (kind == '#') {
        L->pos = body;
        return lex_comment(L, body);
    }
    if (emit(L, kind == '%' ? T_BLOCK_BEGIN : T_VAR_BEGIN, L->s + t, body - t, L->line))
        return -1;
    L->pos = body;
    return lex_tag(L, kind == '%');
}

/* normalized copy of the source: "\r\n" and "\r" become "\n", one trailing newline dropped */
static char *normalize(struct jctx *c, const char *src, size_t *len)
{
    const size_t n = strlen(src);
    char *s = j_alloc(c, n + 1);
    if (!s)
        return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (src[i] == '\r') {
            s[k++] = '\n';
            if (i + 1 < n && src[i + 1] == '\n')
                i++;
        } else {
            s[k++] = src[i];
        }
    }
    if (k && s[k - 1] == '\n')
        k--;
    s[k] = 0;
    *len = k;
    return s;
}

int j_lex(struct jctx *c, const char *src, struct jtok **toks, size_t *n_toks)
{
    struct lexer L = {.c = c, .line = 1, .line_starting = true};
    L.s = normalize(c, src, &L.n);
    if (!L.s)
        return -1;
    while (L.pos < L.n)
        if (j_step(c) || lex_root(&L))
            return -1;
    if (emit(&L, T_EOF, NULL, 0, L.line))
        return -1;
    *toks = L.toks;
    *n_toks = L.n_toks;
    return 0;
}
