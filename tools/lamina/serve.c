/* serve.c - `lamina serve`: parse the flags, load the model, run the HTTP
 * server (src/server/) until SIGINT or SIGTERM, then shut down gracefully.
 *
 * The signals are blocked in every thread (the mask is set before any thread
 * exists) and taken with sigwait in the main thread: no handler, no global
 * state. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

#ifdef LM_HAVE_SERVER
#include "server/server.h"

static void usage(FILE *f)
{
    fputs("usage: lamina serve -m MODEL [options]\n"
          "An OpenAI-compatible (/v1/chat/completions, /v1/completions, /v1/embeddings, /v1/models)\n"
          "and llama.cpp-compatible (/completion, /tokenize, /detokenize, /health, /props, /metrics)\n"
          "HTTP server with continuous batching, and a chat page at /.\n\n"
          "server:\n"
          "  --host ADDR               address to bind (default 127.0.0.1)\n"
          "  --port N                  port (default 8080; 0: any free port)\n"
          "  -np, --parallel N         slots decoded together (default 4); each gets ctx-size/N tokens\n"
          "  -n, --n-predict N         default and cap of max_tokens (default: the slot size)\n"
          "  --api-key KEY             require 'Authorization: Bearer KEY'\n"
          "  --alias NAME              the model name /v1/models reports (default: the file name)\n"
          "  --chat-template T         a built-in name (chatml, llama-2, llama-3, zephyr, gemma, phi-3,\n"
          "                            mistral) or a Jinja template (default: the model's)\n"
          "  --timeout S               per-request deadline in seconds (default 600)\n"
          "  --conn-timeout S          idle seconds while a request is read (default 30)\n"
          "  --max-body BYTES          largest request body (default 8388608)\n"
          "  --max-queue N             requests waiting for a slot before 503 (default 256)\n"
          "  --max-conns N             simultaneous connections (default 512)\n\n"
          "model and context (-c is the total, split across the slots; default 4096):\n",
          f);
    cli_model_usage(f);
    fputs("\nsampling defaults of every request (a request's fields override them):\n", f);
    cli_sampling_usage(f);
}

struct serve_opts {
    struct cli_model_opts m;
    struct lm_server_params sp;
};

static int server_flag(int argc, char **argv, int *i, struct lm_server_params *p)
{
    const char *a = argv[*i], *v;
    long long ll;
    float f;
#define VAL() do { if (!(v = cli_value(argc, argv, i))) return -1; } while (0)
#define INT(lo, hi) do { VAL(); if (!cli_int(a, v, lo, hi, &ll)) return -1; } while (0)
    if (!strcmp(a, "--host")) { VAL(); p->host = v; }
    else if (!strcmp(a, "--port")) { INT(0, 65535); p->port = (int)ll; }
    else if (!strcmp(a, "-np") || !strcmp(a, "--parallel")) { INT(1, 64); p->n_parallel = (int32_t)ll; }
    else if (!strcmp(a, "-n") || !strcmp(a, "--n-predict")) { INT(-1, 1 << 24); p->n_predict = (int32_t)ll; }
    else if (!strcmp(a, "--api-key")) { VAL(); p->api_key = v; }
    else if (!strcmp(a, "--alias")) { VAL(); p->model_id = v; }
    else if (!strcmp(a, "--chat-template")) { VAL(); p->chat_template = v; }
    else if (!strcmp(a, "--timeout")) {
        VAL();
        if (!cli_float(a, v, &f) || f <= 0) return -1;
        p->timeout_s = f;
    }
    else if (!strcmp(a, "--conn-timeout")) { INT(1, 86400); p->conn_timeout_s = (unsigned)ll; }
    else if (!strcmp(a, "--max-body")) { INT(1024, 1LL << 32); p->max_body = (size_t)ll; }
    else if (!strcmp(a, "--max-queue")) { INT(1, 1 << 20); p->max_queue = (int32_t)ll; }
    else if (!strcmp(a, "--max-conns")) { INT(4, 1 << 16); p->max_conns = (unsigned)ll; }
    else return 0;
#undef VAL
#undef INT
    return 1;
}

static int parse(int argc, char **argv, struct serve_opts *o)
{
    o->m = cli_model_defaults();
    o->m.n_ctx = 4096;
    o->sp = lm_server_default_params();
    for (int i = 0; i < argc; i++) {
        int r = cli_model_flag(argc, argv, &i, &o->m);
        if (!r)
            r = cli_sampling_flag(argc, argv, &i, &o->sp.sampling);
        if (!r)
            r = server_flag(argc, argv, &i, &o->sp);
        if (r < 0)
            return 2;
        if (r)
            continue;
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            return 0;
        }
        fprintf(stderr, "error: unknown option '%s' (see lamina serve --help)\n", argv[i]);
        return 2;
    }
    if (!o->m.model) {
        fprintf(stderr, "error: -m MODEL is required (see lamina serve --help)\n");
        return 2;
    }
    if (o->m.n_batch < o->sp.n_parallel)
        o->m.n_batch = o->sp.n_parallel;
    return -1;
}

int cmd_serve(int argc, char **argv)
{
    struct serve_opts o;
    int rc = parse(argc, argv, &o);
    if (rc >= 0)
        return rc;
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL); /* before any thread exists: all inherit it */
    signal(SIGPIPE, SIG_IGN);
    llama_backend_init(false);
    struct llama_model *model = NULL;
    struct llama_context *ctx = NULL;
    rc = 1;
    if (cli_model_load(&o.m, &model, &ctx))
        goto out;
    const char *base = strrchr(o.m.model, '/');
    if (!strcmp(o.sp.model_id, "model"))
        o.sp.model_id = base ? base + 1 : o.m.model;
    o.sp.n_threads = (int32_t)o.m.n_threads;
    o.sp.n_threads_batch = (int32_t)(o.m.n_threads_batch < 0 ? o.m.n_threads : o.m.n_threads_batch);
    o.sp.verbose = o.m.verbose;
    struct lm_server *srv = NULL;
    char err[512] = "";
    if (lm_server_start(model, ctx, &o.sp, &srv, err, sizeof err)) {
        fprintf(stderr, "error: %s\n", err[0] ? err : "cannot start the server");
        goto out_free;
    }
    fprintf(stderr, "lamina serve: listening on http://%s:%d (%d slots of %u tokens)\n", o.sp.host,
            lm_server_port(srv), o.sp.n_parallel, llama_n_ctx(ctx) / (uint32_t)o.sp.n_parallel);
    int sig = 0;
    sigwait(&set, &sig);
    fprintf(stderr, "lamina serve: %s, shutting down\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
    lm_server_stop(srv);
    rc = 0;
out_free:
    llama_free(ctx);
    llama_free_model(model);
out:
    llama_backend_free();
    return rc;
}

#else

int cmd_serve(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "lamina serve: this lamina was built without the server "
                    "(libmicrohttpd and jansson were not found; scripts/deps.sh installs them)\n");
    return 1;
}

#endif
