/* strbuf.h - a growable byte string, always NUL-terminated, with an optional
 * size limit. One implementation for the places that build text piece by
 * piece (chat replies, JSON Schema grammars, token texts); the Jinja engine
 * keeps its own because its memory comes from the template's arena. */
#ifndef LM_CORE_STRBUF_H
#define LM_CORE_STRBUF_H

#include <stdarg.h>
#include <stddef.h>

#include "core/status.h"

/* Zero-initialise ({0}) before use; max 0 means no limit. p is NULL until the
 * first successful put, then always NUL-terminated at p[n]. */
struct lm_strbuf {
    char *p;
    size_t n, cap;
    size_t max; /* > 0: puts that would make n exceed max fail with LM_ERR_FULL */
};

/* Append n bytes. LM_ERR_FULL (over max) or LM_ERR_NOMEM leave b unchanged. */
lm_status lm_strbuf_put(struct lm_strbuf *b, const void *s, size_t n);
lm_status lm_strbuf_puts(struct lm_strbuf *b, const char *s);
/* Append formatted text (any length). LM_ERR_INVALID_ARG when formatting fails. */
lm_status lm_strbuf_printf(struct lm_strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
lm_status lm_strbuf_vprintf(struct lm_strbuf *b, const char *fmt, va_list ap);
/* Make room for n more bytes (plus the NUL) without appending. */
lm_status lm_strbuf_reserve(struct lm_strbuf *b, size_t n);
/* Free the bytes and reset to empty (max kept). */
void lm_strbuf_free(struct lm_strbuf *b);

#endif
