/* fuzz_http.c - fuzz target for `lamina serve`: raw HTTP requests.
 *
 * Once per process an in-process server (server/server.h) is started on a
 * free loopback port over stories260K (two slots of 256 cells, at most 16
 * generated tokens per request, so every input finishes in milliseconds).
 * Each input is sent as the bytes of one connection: written, the reply
 * read until the server closes (the sending side is shut once it is quiet). So the fuzzer drives libmicrohttpd's
 * parsing, lamina's routing, body limits, JSON parameters, chat templates,
 * grammars and schemas, tokenization, the engine's batching and streaming.
 * The promises (a broken one calls abort()):
 *  - the server closes the connection within 10 s of our end of input (no
 *    hang, no dead lock);
 *  - a reply, when there is one, is an HTTP/1.x status line with a code of
 *    100..599; a server error (5xx) is a bug too, except 503 (busy) and
 *    libmicrohttpd's 501 (unknown method) and 505 (unsupported version);
 *  - the server keeps serving: GET /health answers 200 after every input in
 *    the replay, and every 64 inputs under libFuzzer.
 * Corpus files named "ok-*" must get a 2xx, "bad-*" a 4xx (lm_fuzz_expect,
 * checked by the replay); fuzz/corpus/http holds requests of each route and
 * the bad inputs of tests/tools/serve_check.py. Built only where lm_server
 * exists (libmicrohttpd and jansson found): fuzz/CMakeLists.txt.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "core/log.h"
#include "llama.h"
#include "server/server.h"

#define REQUIRE(c)                                                                                                     \
    do {                                                                                                               \
        if (!(c)) {                                                                                                    \
            fprintf(stderr, "fuzz_http: %s:%d: broken promise: %s\n", __FILE__, __LINE__, #c);                         \
            abort();                                                                                                   \
        }                                                                                                              \
    } while (0)

static struct llama_model *model;
static struct llama_context *ctx;
static struct lm_server *server;
static int port;
static int last_code;    /* status of the last input's first reply; 0: none (for lm_fuzz_expect) */
static unsigned n_input; /* inputs so far */
static bool replaying;   /* under replay_main.c (lm_fuzz_expect is called): check health every input */

static void quiet(enum lm_log_level level, const char *text, void *user) { (void)level, (void)text, (void)user; }

static void stop_server(void)
{
    lm_server_stop(server);
    llama_free(ctx);
    llama_free_model(model);
    llama_backend_free();
}

static void start_server(void)
{
    lm_log_set(quiet, NULL);
    llama_backend_init(false);
    struct llama_model_params mp = llama_model_default_params();
    model = llama_load_model_from_file(LM_SHARED_DIR "/models/stories260K.gguf", mp);
    REQUIRE(model != NULL);
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 512;
    cp.n_batch = 512;
    cp.n_threads = cp.n_threads_batch = 1;
    cp.seed = 1;
    cp.embedding = true;
    ctx = llama_new_context_with_model(model, cp);
    REQUIRE(ctx != NULL);
    struct lm_server_params p = lm_server_default_params();
    p.host = "127.0.0.1";
    p.port = 0;
    p.n_parallel = 2;
    p.n_predict = 16;
    p.timeout_s = 5;
    p.conn_timeout_s = 2;
    p.max_body = 64u << 10;
    p.model_id = "fuzz";
    char err[256] = "";
    REQUIRE(lm_server_start(model, ctx, &p, &server, err, sizeof err) == LM_OK);
    port = lm_server_port(server);
    REQUIRE(port > 0);
    atexit(stop_server);
}

/* Send data as one connection's request bytes and read the reply (up to
 * cap-1 bytes kept, the rest drained). Returns the bytes kept. */
static size_t exchange(const uint8_t *data, size_t size, char *reply, size_t cap)
{
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    struct timeval tv = {.tv_sec = 10};
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        fprintf(stderr, "fuzz_http: connect: %s\n", strerror(errno));
        abort();
    }
    for (size_t off = 0; off < size;) {
        const ssize_t n = send(fd, data + off, size - off, MSG_NOSIGNAL);
        if (n <= 0) { /* the server closed early (e.g. a refused header): fine */
            REQUIRE(n == 0 || errno != EAGAIN);
            break;
        }
        off += (size_t)n;
    }
    /* Half-closing at once would read as "client gone" to the server, which
     * then cancels a generation in progress (srv_client_gone); so the sending
     * side is shut only once the server has been quiet for IDLE_MS: a reply
     * is complete, or the request is (the server waits for more bytes). After
     * that the server closes the connection; 10 s of silence is a hang.
     * The replay (LM_FUZZ_REPLAY) waits FIRST_MS for the first byte: its ok-
     * inputs generate text, which a loaded machine under a sanitizer can take
     * more than IDLE_MS to start answering, and a shut read as "client gone"
     * would cancel it (a flake once); the fuzzer keeps IDLE_MS for speed. */
#ifdef LM_FUZZ_REPLAY
    enum { IDLE_MS = 100, FIRST_MS = 5000 };
#else
    enum { IDLE_MS = 100, FIRST_MS = IDLE_MS };
#endif
    bool shut = false;
    size_t kept = 0; /* > 0 once any byte came: the first ones are always kept (cap > 1) */
    char sink[4096];
    for (;;) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        const int pr = poll(&pfd, 1, shut ? 10000 : kept ? IDLE_MS : FIRST_MS);
        if (pr < 0 && errno == EINTR)
            continue;
        if (pr == 0) {
            REQUIRE(!shut); /* 10 s without a byte or the close: hung */
            shutdown(fd, SHUT_WR);
            shut = true;
            continue;
        }
        char *dst = kept + 1 < cap ? reply + kept : sink;
        const size_t room = kept + 1 < cap ? cap - 1 - kept : sizeof sink;
        const ssize_t n = recv(fd, dst, room, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break; /* end (or a reset after a refusal) */
        if (dst == reply + kept)
            kept += (size_t)n;
    }
    reply[kept] = 0;
    close(fd);
    return kept;
}

/* The status code of an HTTP/1.x status line at the start of r; -1 if not one. */
static int status_code(const char *r, size_t n)
{
    if (n < 12 || strncmp(r, "HTTP/1.", 7) || r[8] != ' ')
        return -1;
    int code = 0;
    for (int i = 9; i < 12; i++) {
        if (r[i] < '0' || r[i] > '9')
            return -1;
        code = code * 10 + (r[i] - '0');
    }
    return code;
}

static void check_health(void)
{
    static const char req[] = "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    char reply[1024];
    const size_t n = exchange((const uint8_t *)req, sizeof req - 1, reply, sizeof reply);
    REQUIRE(status_code(reply, n) == 200);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!server)
        start_server();
    static char reply[1 << 16];
    const size_t n = exchange(data, size, reply, sizeof reply);
    last_code = 0;
    if (n > 0) {
        const int code = status_code(reply, n);
        REQUIRE(code >= 100 && code <= 599);
        /* 5xx is a server bug, but for 503 (busy) and libmicrohttpd's protocol
         * answers: 501 (a method it does not know), 505 (an HTTP version) */
        REQUIRE(code < 500 || code == 501 || code == 503 || code == 505);
        last_code = code;
    }
    if (replaying || ++n_input % 64 == 0)
        check_health();
    return 0;
}

bool lm_fuzz_expect(const char *base, const uint8_t *data, size_t size)
{
    (void)data, (void)size;
    replaying = true;
    check_health(); /* the replay calls this after each input */
    if (!strncmp(base, "ok-", 3) && (last_code < 200 || last_code > 299)) {
        fprintf(stderr, "fuzz_http: %s should succeed (got %d)\n", base, last_code);
        return false;
    }
    if (!strncmp(base, "bad-", 4) && (last_code < 400 || last_code > 499)) {
        fprintf(stderr, "fuzz_http: %s should be refused with a 4xx (got %d)\n", base, last_code);
        return false;
    }
    return true;
}
