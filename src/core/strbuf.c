/* strbuf.c - the growable byte string of strbuf.h. */
#include "core/strbuf.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

lm_status lm_strbuf_reserve(struct lm_strbuf *b, size_t n)
{
    if (n > SIZE_MAX - 1 - b->n)
        return LM_ERR_NOMEM;
    if (b->max && b->n + n > b->max)
        return LM_ERR_FULL;
    const size_t need = b->n + n + 1;
    if (need <= b->cap)
        return LM_OK;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < need)
        cap = cap > SIZE_MAX / 2 ? need : cap * 2;
    char *p = realloc(b->p, cap);
    if (!p)
        return LM_ERR_NOMEM;
    b->p = p;
    b->cap = cap;
    return LM_OK;
}

lm_status lm_strbuf_put(struct lm_strbuf *b, const void *s, size_t n)
{
    const lm_status st = lm_strbuf_reserve(b, n);
    if (st != LM_OK)
        return st;
    if (n)
        memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
    return LM_OK;
}

lm_status lm_strbuf_puts(struct lm_strbuf *b, const char *s) { return lm_strbuf_put(b, s, strlen(s)); }

lm_status lm_strbuf_vprintf(struct lm_strbuf *b, const char *fmt, va_list ap)
{
    va_list again;
    va_copy(again, ap);
    const int n = vsnprintf(NULL, 0, fmt, ap);
    lm_status st = n < 0 ? LM_ERR_INVALID_ARG : lm_strbuf_reserve(b, (size_t)n);
    if (st == LM_OK) {
        vsnprintf(b->p + b->n, (size_t)n + 1, fmt, again);
        b->n += (size_t)n;
    }
    va_end(again);
    return st;
}

lm_status lm_strbuf_printf(struct lm_strbuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    const lm_status st = lm_strbuf_vprintf(b, fmt, ap);
    va_end(ap);
    return st;
}

void lm_strbuf_free(struct lm_strbuf *b)
{
    free(b->p);
    b->p = NULL;
    b->n = b->cap = 0;
}
