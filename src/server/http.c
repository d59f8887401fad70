/* http.c - the HTTP side of the server over libmicrohttpd: start/stop,
 * routing, authentication, the request body limit, JSON and error responses,
 * and waiting for the engine while watching for a client that went away.
 *
 * Threading: MHD runs one thread per connection (so handlers may block while
 * a request generates); connections are bounded (--max-conns) and time out
 * while a request is being read (--conn-timeout, against slow senders); once
 * a request is complete its connection has no idle timeout until the
 * response is done (generation may take long). Invariants: every response
 * that is not 2xx has OpenAI's error shape; no handler trusts the body. */
#include <arpa/inet.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "chat/chat.h"
#include "server/server_int.h"

struct lm_server_params lm_server_default_params(void)
{
    return (struct lm_server_params){
        .host = "127.0.0.1", .port = 8080, .model_id = "model", .n_parallel = 4, .n_threads = 1,
        .n_threads_batch = 1, .timeout_s = 600, .conn_timeout_s = 30, .max_body = 8u << 20, .max_queue = 256,
        .max_conns = 512, .sampling = lm_sampler_default_params(),
    };
}

static enum MHD_Result queue(struct MHD_Connection *c, unsigned status, struct MHD_Response *resp)
{
    if (!resp)
        return MHD_NO;
    enum MHD_Result rc = MHD_queue_response(c, status, resp);
    MHD_destroy_response(resp);
    return rc;
}

enum MHD_Result srv_text(struct MHD_Connection *c, unsigned status, const char *ctype, const char *text,
                         size_t len, bool copy)
{
    struct MHD_Response *resp = MHD_create_response_from_buffer(
        len, (void *)text, copy ? MHD_RESPMEM_MUST_COPY : MHD_RESPMEM_PERSISTENT);
    if (resp)
        MHD_add_response_header(resp, "Content-Type", ctype);
    return queue(c, status, resp);
}

enum MHD_Result srv_json(struct MHD_Connection *c, unsigned status, json_t *j)
{
    char *text = j ? json_dumps(j, JSON_COMPACT | JSON_REAL_PRECISION(9)) : NULL;
    json_decref(j);
    if (!text)
        return MHD_NO;
    struct MHD_Response *resp = MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE);
    if (!resp) {
        free(text);
        return MHD_NO;
    }
    MHD_add_response_header(resp, "Content-Type", "application/json");
    if (status == 503)
        MHD_add_response_header(resp, "Retry-After", "1");
    return queue(c, status, resp);
}

enum MHD_Result srv_error(struct MHD_Connection *c, unsigned status, const char *type, const char *param,
                          const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    const char *code = status == 401 ? "invalid_api_key" : status == 404 ? "not_found" : status == 413 ? "request_too_large"
                       : status == 503 ? "unavailable" : status >= 500 ? "server_error" : "invalid_request";
    json_t *err = json_pack("{s:o,s:s,s:o,s:s}", "message", srv_str(msg, strlen(msg)), "type", type, "param",
                            param ? json_string(param) : json_null(), "code", code);
    return srv_json(c, status, json_pack("{s:o}", "error", err));
}

enum MHD_Result srv_req_error(struct MHD_Connection *c, const struct lm_srv_req *r)
{
    int st = r->err_status ? r->err_status : 500;
    return srv_error(c, (unsigned)st, st == 503 ? "server_error" : st >= 500 ? "server_error" : "invalid_request_error",
                     NULL, "%s", r->err[0] ? r->err : "request failed");
}

json_t *srv_str(const char *s, size_t n)
{
    char *out = malloc(n * 3 + 1);
    if (!out)
        return json_null();
    size_t w = 0;
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        size_t len = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
        bool ok = len > 0 && i + len <= n;
        for (size_t k = 1; ok && k < len; k++)
            ok = ((unsigned char)s[i + k] & 0xC0) == 0x80;
        if (ok && len > 1) { /* overlong forms, surrogates and > U+10FFFF */
            unsigned cp = c & (0x7F >> len);
            for (size_t k = 1; k < len; k++)
                cp = (cp << 6) | ((unsigned char)s[i + k] & 0x3F);
            ok = cp >= (len == 2 ? 0x80u : len == 3 ? 0x800u : 0x10000u) && cp <= 0x10FFFF && (cp < 0xD800 || cp > 0xDFFF);
        }
        if (ok) {
            memcpy(out + w, s + i, len);
            w += len;
            i += len;
        } else {
            memcpy(out + w, "\xEF\xBF\xBD", 3);
            w += 3;
            i++;
        }
    }
    json_t *j = json_stringn(out, w);
    free(out);
    return j ? j : json_null();
}

bool srv_client_gone(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci)
        return true;
    struct pollfd pfd = {.fd = ci->connect_fd, .events = POLLIN | POLLRDHUP};
    if (poll(&pfd, 1, 0) <= 0)
        return false;
    if (pfd.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL))
        return true;
    char b;
    return recv(ci->connect_fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

bool srv_wait(struct lm_server *s, struct MHD_Connection *c, struct lm_srv_req *r)
{
    lm_engine_lock(s->eng);
    while (!lm_engine_wait(s->eng, r, 50)) {
        lm_engine_unlock(s->eng);
        if (srv_client_gone(c)) {
            lm_engine_cancel(s->eng, r);
            return false;
        }
        lm_engine_lock(s->eng);
    }
    lm_engine_unlock(s->eng);
    return true;
}

/* Constant-time check of "Bearer <key>". */
static bool authorized(const struct lm_server *s, struct MHD_Connection *c)
{
    if (!s->p.api_key)
        return true;
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    if (!h || strncmp(h, "Bearer ", 7))
        return false;
    h += 7;
    size_t a = strlen(h), b = strlen(s->p.api_key);
    unsigned diff = (unsigned)(a != b);
    for (size_t i = 0; i < a && i < b + 1; i++)
        diff |= (unsigned char)h[i] ^ (unsigned char)(i < b ? s->p.api_key[i] : 0);
    for (size_t i = a; i < b; i++)
        diff |= (unsigned char)s->p.api_key[i];
    return diff == 0;
}

static const struct route {
    const char *method, *path;
    srv_route_fn fn;
    bool json_body, open; /* open: no API key needed */
} routes[] = {
    {"POST", "/v1/chat/completions", srv_route_chat, true, false},
    {"POST", "/chat/completions", srv_route_chat, true, false},
    {"POST", "/v1/completions", srv_route_cmpl, true, false},
    {"POST", "/v1/embeddings", srv_route_embd, true, false},
    {"POST", "/embeddings", srv_route_embd, true, false},
    {"GET", "/v1/models", srv_route_models, false, false},
    {"GET", "/models", srv_route_models, false, false},
    {"POST", "/completion", srv_route_completion, true, false},
    {"POST", "/completions", srv_route_completion, true, false},
    {"POST", "/tokenize", srv_route_tokenize, true, false},
    {"POST", "/detokenize", srv_route_detokenize, true, false},
    {"GET", "/health", srv_route_health, false, true},
    {"GET", "/props", srv_route_props, false, false},
    {"GET", "/metrics", srv_route_metrics, false, false},
    {"GET", "/", srv_route_webui, false, true},
    {"GET", "/index.html", srv_route_webui, false, true},
};

static enum MHD_Result dispatch(struct lm_server *s, struct MHD_Connection *c, const char *url, const char *method,
                                struct srv_conn *rc)
{
    const struct route *rt = NULL;
    bool path_known = false;
    for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++)
        if (!strcmp(url, routes[i].path)) {
            path_known = true;
            if (!strcmp(method, routes[i].method) || (!strcmp(method, "HEAD") && !strcmp(routes[i].method, "GET")))
                rt = &routes[i];
        }
    if (!rt && path_known)
        return srv_error(c, 405, "invalid_request_error", NULL, "method %s not allowed on %s", method, url);
    if (!rt)
        return srv_error(c, 404, "invalid_request_error", NULL, "no route %s %s", method, url);
    if (!rt->open && !authorized(s, c))
        return srv_error(c, 401, "invalid_request_error", NULL, "invalid or missing API key");
    if (rc->too_big)
        return srv_error(c, 413, "invalid_request_error", NULL, "the request body exceeds %zu bytes", s->p.max_body);
    json_t *body = NULL;
    if (rt->json_body) {
        json_error_t je;
        body = json_loadb(rc->body ? rc->body : "", rc->n_body, JSON_REJECT_DUPLICATES, &je);
        if (!body)
            return srv_error(c, 400, "invalid_request_error", NULL, "malformed JSON: %s (line %d)", je.text, je.line);
        if (!json_is_object(body)) {
            json_decref(body);
            return srv_error(c, 400, "invalid_request_error", NULL, "the request body must be a JSON object");
        }
    }
    enum MHD_Result r = rt->fn(s, c, body);
    json_decref(body);
    return r;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **con_cls)
{
    (void)version;
    struct lm_server *s = cls;
    struct srv_conn *rc = *con_cls;
    if (!rc) {
        rc = calloc(1, sizeof *rc);
        if (!rc)
            return MHD_NO;
        *con_cls = rc;
        atomic_fetch_add(&s->n_active, 1);
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
        if (cl && strtoull(cl, NULL, 10) > s->p.max_body) {
            rc->too_big = true;
            return srv_error(c, 413, "invalid_request_error", NULL, "the request body exceeds %zu bytes",
                             s->p.max_body);
        }
        return MHD_YES;
    }
    if (*upload_size) {
        size_t n = *upload_size;
        *upload_size = 0;
        if (rc->too_big || rc->n_body + n > s->p.max_body) {
            rc->too_big = true;
            return MHD_YES;
        }
        if (rc->n_body + n + 1 > rc->cap_body) {
            size_t cap = rc->cap_body ? rc->cap_body : 4096;
            while (cap < rc->n_body + n + 1)
                cap *= 2;
            char *b = realloc(rc->body, cap);
            if (!b)
                return MHD_NO;
            rc->body = b;
            rc->cap_body = cap;
        }
        memcpy(rc->body + rc->n_body, upload, n);
        rc->n_body += n;
        return MHD_YES;
    }
    /* The request is complete: no idle timeout while it is served. */
    MHD_set_connection_option(c, MHD_CONNECTION_OPTION_TIMEOUT, 0u);
    return dispatch(s, c, url, method, rc);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe)
{
    (void)toe;
    struct lm_server *s = cls;
    struct srv_conn *rc = *con_cls;
    if (rc) {
        free(rc->body);
        free(rc);
        *con_cls = NULL;
        atomic_fetch_sub(&s->n_active, 1);
    }
    MHD_set_connection_option(c, MHD_CONNECTION_OPTION_TIMEOUT, s->p.conn_timeout_s);
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    const struct lm_server *s = cls;
    if (s->p.verbose)
        vfprintf(stderr, fmt, ap);
}

/* Bind and start MHD. */
lm_status srv_http_start(struct lm_server *s, char *err, size_t errlen)
{
    struct sockaddr_in a4 = {.sin_family = AF_INET, .sin_port = htons((uint16_t)s->p.port)};
    struct sockaddr_in6 a6 = {.sin6_family = AF_INET6, .sin6_port = htons((uint16_t)s->p.port)};
    bool v6 = strchr(s->p.host, ':') != NULL;
    if (v6 ? inet_pton(AF_INET6, s->p.host, &a6.sin6_addr) != 1 : inet_pton(AF_INET, s->p.host, &a4.sin_addr) != 1) {
        snprintf(err, errlen, "--host: '%s' is not an IPv4 or IPv6 address", s->p.host);
        return LM_ERR_INVALID_ARG;
    }
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_USE_ITC |
                     MHD_USE_ERROR_LOG | (v6 ? MHD_USE_IPv6 : 0);
    s->mhd = MHD_start_daemon(flags, (uint16_t)s->p.port, NULL, NULL, on_request, s,
                              MHD_OPTION_SOCK_ADDR, v6 ? (struct sockaddr *)&a6 : (struct sockaddr *)&a4,
                              MHD_OPTION_CONNECTION_TIMEOUT, s->p.conn_timeout_s,
                              MHD_OPTION_CONNECTION_LIMIT, s->p.max_conns,
                              MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
                              MHD_OPTION_EXTERNAL_LOGGER, mhd_log, s,
                              MHD_OPTION_LISTENING_ADDRESS_REUSE, 1u, MHD_OPTION_END);
    if (!s->mhd) {
        snprintf(err, errlen, "cannot listen on %s:%d", s->p.host, s->p.port);
        return LM_ERR_IO;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(s->mhd, MHD_DAEMON_INFO_BIND_PORT);
    s->port = di ? di->port : s->p.port;
    return LM_OK;
}

void srv_http_stop(struct lm_server *s)
{
    if (!s->mhd)
        return;
    MHD_socket fd = MHD_quiesce_daemon(s->mhd);
    lm_engine_shutdown(s->eng);
    /* let the responses of ended requests reach their clients (bounded: a
     * request still being read ends at its connection timeout) */
    for (int i = 0; i < 1000 && atomic_load(&s->n_active) > 0; i++)
        nanosleep(&(struct timespec){0, 10000000L}, NULL);
    MHD_stop_daemon(s->mhd);
    if (fd != MHD_INVALID_SOCKET)
        close(fd);
    s->mhd = NULL;
}
