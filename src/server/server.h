/* server.h - `lamina serve`: an OpenAI- and llama.cpp-compatible HTTP server
 * over one model with continuous batching (docs/server.md).
 *
 * lm_server_start binds, starts the HTTP threads and the engine thread and
 * returns; lm_server_stop shuts it all down gracefully. The caller keeps the
 * model and context alive until lm_server_stop has returned, then frees them.
 * One server per model/context; distinct servers are independent (no global
 * state). */
#ifndef LM_SERVER_SERVER_H
#define LM_SERVER_SERVER_H

#include <stddef.h>
#include <stdint.h>

#include "common/sampler.h"
#include "core/status.h"
#include "llama.h"

struct lm_server_params {
    const char *host;           /* bind address (default "127.0.0.1") */
    int port;                   /* 0: any free port (see lm_server_port) */
    const char *api_key;        /* NULL: no authentication */
    const char *model_id;       /* the name /v1/models reports */
    const char *chat_template;  /* NULL: the model's; else a built-in name or a Jinja source */
    int32_t n_parallel;         /* slots */
    int32_t n_predict;          /* > 0: default and cap of max_tokens; else the slot size */
    int32_t n_threads, n_threads_batch;
    double timeout_s;           /* per-request deadline */
    unsigned conn_timeout_s;    /* idle connection while a request is read */
    size_t max_body;            /* bytes */
    int32_t max_queue;          /* queued choices */
    unsigned max_conns;
    struct lm_sampler_params sampling; /* defaults of every request */
    int verbose;
};

/* The defaults listed in docs/server.md. */
struct lm_server_params lm_server_default_params(void);

struct lm_server;

/* Start serving model/ctx (borrowed) with p (strings borrowed until stop).
 * On LM_OK *out is the running server. Errors: LM_ERR_INVALID_ARG (bad
 * parameters, a chat template that does not render; message in err),
 * LM_ERR_IO (cannot bind), LM_ERR_NOMEM. */
lm_status lm_server_start(struct llama_model *model, struct llama_context *ctx, const struct lm_server_params *p,
                          struct lm_server **out, char *err, size_t errlen);
/* The port the server listens on. */
int lm_server_port(const struct lm_server *s);
/* Stop accepting, end queued and running requests, join every thread, free.
 * NULL does nothing. */
void lm_server_stop(struct lm_server *s);

#endif
