/* server.c - the server object: start (chat template, engine, HTTP) and
 * graceful stop, in that order and its reverse.
 *
 * Invariant: after lm_server_start returns LM_OK, the engine thread and the
 * HTTP threads run until lm_server_stop; the struct is then read-only for
 * them except the atomic id counter. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/chat.h"
#include "server/server_int.h"

static char *meta_str(const struct llama_model *m, const char *key)
{
    int32_t n = llama_model_meta_val_str(m, key, NULL, 0);
    if (n < 0)
        return NULL;
    char *buf = malloc((size_t)n + 1);
    if (buf && llama_model_meta_val_str(m, key, buf, (size_t)n + 1) < 0) {
        free(buf);
        buf = NULL;
    }
    return buf;
}

static bool has_token_text(const struct llama_model *m, const char *text)
{
    int32_t n = llama_n_vocab(m);
    for (int32_t t = 0; t < n; t++) {
        const char *s = llama_token_get_text(m, t);
        if (s && !strcmp(s, text))
            return true;
    }
    return false;
}

/* The template (override, the model's, or a built-in) and the BOS/EOS texts;
 * a test render catches a template that cannot work. */
static lm_status pick_template(struct lm_server *s, char *err, size_t errlen)
{
    const char *o = s->p.chat_template;
    if (o && *o) {
        const char *b = lm_chat_builtin(o);
        s->tmpl = strdup(b ? b : o);
    } else if (!(s->tmpl = meta_str(s->model, "tokenizer.chat_template"))) {
        char *arch = meta_str(s->model, "general.architecture");
        s->tmpl = strdup(lm_chat_builtin(lm_chat_builtin_for(arch ? arch : "", has_token_text(s->model, "<|eot_id|>"),
                                                             has_token_text(s->model, "<|im_start|>"))));
        free(arch);
    }
    llama_token bos = llama_token_bos(s->model), eos = llama_token_eos(s->model);
    const char *bt = bos >= 0 ? llama_token_get_text(s->model, bos) : NULL;
    const char *et = eos >= 0 ? llama_token_get_text(s->model, eos) : NULL;
    s->bos_text = strdup(bt ? bt : "");
    s->eos_text = strdup(et ? et : "");
    if (!s->tmpl || !s->bos_text || !s->eos_text)
        return LM_ERR_NOMEM;
    struct lm_chat_msg msgs[] = {{"system", "You are helpful."}, {"user", "Hello"}, {"assistant", "Hi"},
                                 {"user", "Bye"}};
    struct lm_chat_opts co = {.add_generation_prompt = true, .bos_token = s->bos_text, .eos_token = s->eos_text};
    char *out = NULL, msg[256] = "";
    lm_status st = lm_chat_render(s->tmpl, msgs, 4, &co, &out, msg, sizeof msg);
    if (st == LM_ERR_CORRUPT && strstr(msg, "TemplateError")) /* e.g. no system role: fine, it raises per request */
        st = LM_OK;
    free(out);
    if (st)
        snprintf(err, errlen, "the chat template does not render: %s", msg);
    return st;
}

static void server_free(struct lm_server *s)
{
    free(s->tmpl);
    free(s->bos_text);
    free(s->eos_text);
    free(s);
}

lm_status lm_server_start(struct llama_model *model, struct llama_context *ctx, const struct lm_server_params *p,
                          struct lm_server **out, char *err, size_t errlen)
{
    if (!model || !ctx || !p || !out || p->n_parallel < 1 || p->n_parallel > 64 || p->max_queue < 1) {
        snprintf(err, errlen, "invalid server parameters");
        return LM_ERR_INVALID_ARG;
    }
    struct lm_server *s = calloc(1, sizeof *s);
    if (!s)
        return LM_ERR_NOMEM;
    s->p = *p;
    s->model = model;
    s->ctx = ctx;
    s->t_start = llama_time_us();
    atomic_init(&s->next_id, 1);
    atomic_init(&s->n_active, 0);
    lm_status st = pick_template(s, err, errlen);
    if (st)
        goto out_free;
    struct lm_engine_params ep = {.n_parallel = p->n_parallel, .max_queue = p->max_queue,
                                  .n_threads = p->n_threads, .n_threads_batch = p->n_threads_batch};
    st = lm_engine_new(model, ctx, &ep, &s->eng);
    if (st) {
        snprintf(err, errlen, "cannot start the engine (%s): each slot needs >= 8 tokens of context "
                 "and n_batch >= --parallel", lm_status_str(st));
        goto out_free;
    }
    s->n_ctx_slot = lm_engine_slot_ctx(s->eng);
    st = srv_http_start(s, err, errlen);
    if (st)
        goto out_engine;
    *out = s;
    return LM_OK;
out_engine:
    lm_engine_free(s->eng);
out_free:
    server_free(s);
    return st;
}

int lm_server_port(const struct lm_server *s)
{
    return s->port;
}

void lm_server_stop(struct lm_server *s)
{
    if (!s)
        return;
    srv_http_stop(s);
    lm_engine_free(s->eng);
    server_free(s);
}
