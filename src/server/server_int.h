/* server_int.h - what the server's HTTP files share: the server object, the
 * per-connection state, error/JSON response helpers, request parsing and
 * streaming. Thread-safety: lm_server's fields are read-only after start
 * except next_id (atomic); a srv_conn belongs to its connection's thread. */
#ifndef LM_SERVER_SERVER_INT_H
#define LM_SERVER_SERVER_INT_H

#include <microhttpd.h>
#include <jansson.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "server/engine.h"
#include "server/server.h"

struct lm_server {
    struct lm_server_params p;
    struct llama_model *model;
    struct llama_context *ctx;
    struct lm_engine *eng;
    struct MHD_Daemon *mhd;
    int port;
    char *tmpl;                  /* the chat template's Jinja source */
    char *bos_text, *eos_text;   /* the vocabulary's BOS/EOS token texts */
    int32_t n_ctx_slot;
    atomic_uint_fast64_t next_id;
    atomic_int n_active;         /* requests between their first byte and their completion */
    int64_t t_start;
};

/* One HTTP request on a connection. */
struct srv_conn {
    char *body;
    size_t n_body, cap_body;
    bool too_big;
};

typedef enum MHD_Result (*srv_route_fn)(struct lm_server *s, struct MHD_Connection *c, json_t *body);

/* Responses: an OpenAI-shape error, a JSON object (takes the reference), a
 * text body. */
enum MHD_Result srv_error(struct MHD_Connection *c, unsigned status, const char *type, const char *param,
                          const char *fmt, ...) __attribute__((format(printf, 5, 6)));
enum MHD_Result srv_json(struct MHD_Connection *c, unsigned status, json_t *j);
enum MHD_Result srv_text(struct MHD_Connection *c, unsigned status, const char *ctype, const char *text,
                         size_t len, bool copy);
/* The error of a request the engine refused or failed. */
enum MHD_Result srv_req_error(struct MHD_Connection *c, const struct lm_srv_req *r);

/* True when the client of c closed its side of the connection. */
bool srv_client_gone(struct MHD_Connection *c);
/* Wait (disconnect-aware) until r is finished; false when the client left
 * (r cancelled). */
bool srv_wait(struct lm_server *s, struct MHD_Connection *c, struct lm_srv_req *r);

/* A JSON string of bytes s[0..n) with invalid UTF-8 replaced by U+FFFD. */
json_t *srv_str(const char *s, size_t n);

/* Request parsing (params.c). Each returns 0, or an HTTP status with the
 * message in err and the offending field in *param. */
struct srv_err {
    char msg[256];
    const char *param;
};
enum srv_api { SRV_OAI_CHAT, SRV_OAI_CMPL, SRV_LLAMA };
int srv_parse_gen(struct lm_server *s, json_t *body, enum srv_api api, struct lm_srv_req *r, struct srv_err *e);
int srv_tokenize(const struct lm_server *s, const char *text, size_t len, bool add_bos, bool special,
                 llama_token **out, int32_t *n_out);
int srv_chat_prompt(struct lm_server *s, json_t *messages, char **text, struct srv_err *e);
int srv_prompt_tokens(struct lm_server *s, json_t *prompt, const char *param, llama_token **out, int32_t *n,
                      struct srv_err *e);

/* Responses (api_*.c). */
enum MHD_Result srv_route_chat(struct lm_server *s, struct MHD_Connection *c, json_t *body);
enum MHD_Result srv_route_cmpl(struct lm_server *s, struct MHD_Connection *c, json_t *body);
enum MHD_Result srv_route_embd(struct lm_server *s, struct MHD_Connection *c, json_t *body);
enum MHD_Result srv_route_models(struct lm_server *s, struct MHD_Connection *c, json_t *body);
enum MHD_Result srv_route_completion(struct lm_server *s, struct MHD_Connection *c, json_t *body);
enum MHD_Result srv_route_tokenize(struct lm_server *s, struct MHD_Connection *c, json_t *body);
enum MHD_Result srv_route_detokenize(struct lm_server *s, struct MHD_Connection *c, json_t *body);
enum MHD_Result srv_route_health(struct lm_server *s, struct MHD_Connection *c, json_t *body);
enum MHD_Result srv_route_props(struct lm_server *s, struct MHD_Connection *c, json_t *body);
enum MHD_Result srv_route_metrics(struct lm_server *s, struct MHD_Connection *c, json_t *body);
enum MHD_Result srv_route_webui(struct lm_server *s, struct MHD_Connection *c, json_t *body);

/* Generation results as JSON (api_gen.c). */
struct srv_gen {
    enum srv_api api;
    bool stream, include_usage;
    uint64_t id;
    long created;
};
enum MHD_Result srv_generate(struct lm_server *s, struct MHD_Connection *c, struct lm_srv_req *r,
                             const struct srv_gen *g);

/* Start/stop libmicrohttpd (http.c). */
lm_status srv_http_start(struct lm_server *s, char *err, size_t errlen);
void srv_http_stop(struct lm_server *s);

/* The web page (webui.c). */
extern const char lm_srv_webui_html[];

#endif
