/* log.h - the one logging path of the library.
 *
 * Every message goes through lm_log(); the default sink writes to stderr.
 * lm_log_set() redirects all messages (llama_log_set() is built on it). The
 * level values equal ggml_log_level's so the public callback type fits.
 */
#ifndef LM_LOG_H
#define LM_LOG_H

#ifdef __cplusplus
extern "C" { /* the CUDA backend (C++) calls these */
#endif

enum lm_log_level {
    LM_LOG_ERROR = 2,
    LM_LOG_WARN = 3,
    LM_LOG_INFO = 4,
    LM_LOG_DEBUG = 5,
};

typedef void (*lm_log_fn)(enum lm_log_level level, const char *text, void *user);

/* Install a sink (NULL restores the default stderr sink). Not thread-safe with
 * concurrent logging; call it at start-up. */
void lm_log_set(lm_log_fn fn, void *user);

/* Set the least important level the default sink prints, from now on; it
 * wins over the default level. Call at start-up. */
void lm_log_set_level(enum lm_log_level level);

/* Set the level the default sink prints while lm_log_set_level has not been
 * called (LM_LOG_INFO until then). llama_backend_init sets it from LAMINA_LOG
 * (core/env.c), once per process. Call at start-up. */
void lm_log_set_default_level(enum lm_log_level level);

/* printf-style message; the text handed to the sink ends with the caller's
 * newline (if any). Thread-safe when the sink is. */
#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
void lm_log(enum lm_log_level level, const char *fmt, ...);

#define LM_LOG_ERR(...) lm_log(LM_LOG_ERROR, __VA_ARGS__)
#define LM_LOG_WRN(...) lm_log(LM_LOG_WARN, __VA_ARGS__)
#define LM_LOG_INF(...) lm_log(LM_LOG_INFO, __VA_ARGS__)
#define LM_LOG_DBG(...) lm_log(LM_LOG_DEBUG, __VA_ARGS__)

#ifdef __cplusplus
}
#endif

#endif
