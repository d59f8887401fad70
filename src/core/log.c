/* log.c - default stderr sink and the redirectable log path. */
#include "core/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static lm_log_fn sink_fn;
static void *sink_user;
static int min_level = -1;              /* -1: lm_log_set_level not called; default_level applies */
static int default_level = LM_LOG_INFO; /* lm_log_set_default_level (LAMINA_LOG through llama_backend_init) */

void lm_log_set(lm_log_fn fn, void *user)
{
    sink_fn = fn;
    sink_user = user;
}

void lm_log_set_level(enum lm_log_level level)
{
    min_level = (int)level;
}

void lm_log_set_default_level(enum lm_log_level level) { default_level = (int)level; }

void lm_log(enum lm_log_level level, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (sink_fn) {
        sink_fn(level, buf, sink_user);
        return;
    }
    if ((int)level <= (min_level >= 0 ? min_level : default_level))
        fputs(buf, stderr);
}
