/* api_gen.c - generation results as HTTP responses, for the three APIs
 * (OpenAI chat, OpenAI completions, llama.cpp /completion), whole or
 * streamed as server-sent events.
 *
 * A stream is pulled by libmicrohttpd through stream_read on the connection's
 * thread: each call copies what the engine published since the last call
 * (under the engine lock), formats it outside the lock, and hands the bytes
 * out. Waiting is in 50 ms ticks that check whether the client left; a
 * client that left (or an MHD error) cancels the request, which frees its
 * slot at the engine's next step. Invariant: every chunk is one complete
 * `data: ...\n\n` event; OpenAI streams end with `data: [DONE]`. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/server_int.h"

/* What a choice produced since the last look (copied out of the engine). */
struct delta {
    char *text;
    size_t n_text, off;        /* off: where text starts in the choice */
    struct lm_srv_lp *lps;
    size_t n_lps;
    const char *finish;        /* set once, with the last delta */
};

static json_t *token_str(const struct lm_server *s, llama_token t)
{
    struct lm_strbuf b = {0};
    json_t *j = lm_token_append(s->model, t, &b) == LM_OK ? srv_str(b.p, b.n) : srv_str("", 0);
    lm_strbuf_free(&b);
    return j;
}

static json_t *token_bytes(const struct lm_server *s, llama_token t)
{
    struct lm_strbuf b = {0};
    json_t *a = json_array();
    if (lm_token_append(s->model, t, &b) != LM_OK)
        b.n = 0;
    for (size_t i = 0; i < b.n; i++)
        json_array_append_new(a, json_integer((unsigned char)b.p[i]));
    lm_strbuf_free(&b);
    return a;
}

/* Logprobs of lps[0..n) in the API's shape. */
static json_t *lps_json(const struct lm_server *s, enum srv_api api, const struct lm_srv_lp *lps, size_t n,
                        int32_t n_top)
{
    json_t *content = json_array(), *toks = json_array(), *tlp = json_array(), *tops = json_array(),
           *offs = json_array();
    for (size_t i = 0; i < n; i++) {
        const struct lm_srv_lp *l = &lps[i];
        json_t *top = api == SRV_OAI_CMPL ? json_object() : json_array();
        for (int32_t k = 0; k < l->n_top && k < n_top; k++) {
            if (api == SRV_OAI_CMPL) {
                json_t *key = token_str(s, l->top_id[k]);
                json_object_set_new(top, json_string_value(key), json_real(l->top_lp[k]));
                json_decref(key);
            } else if (api == SRV_OAI_CHAT) {
                json_array_append_new(top, json_pack("{s:o,s:f,s:o}", "token", token_str(s, l->top_id[k]), "logprob",
                                                     l->top_lp[k], "bytes", token_bytes(s, l->top_id[k])));
            } else {
                json_array_append_new(top, json_pack("{s:o,s:f}", "tok_str", token_str(s, l->top_id[k]), "prob",
                                                     exp(l->top_lp[k])));
            }
        }
        if (api == SRV_OAI_CHAT)
            json_array_append_new(content, json_pack("{s:o,s:f,s:o,s:o}", "token", token_str(s, l->id), "logprob",
                                                     l->lp, "bytes", token_bytes(s, l->id), "top_logprobs", top));
        else if (api == SRV_LLAMA)
            json_array_append_new(content, json_pack("{s:o,s:o}", "content", token_str(s, l->id), "probs", top));
        else {
            json_array_append_new(toks, token_str(s, l->id));
            json_array_append_new(tlp, json_real(l->lp));
            json_array_append_new(tops, n_top > 0 ? top : (json_decref(top), json_null()));
            json_array_append_new(offs, json_integer((json_int_t)l->off));
        }
    }
    if (api == SRV_OAI_CMPL) {
        json_decref(content);
        return json_pack("{s:o,s:o,s:o,s:o}", "tokens", toks, "token_logprobs", tlp, "top_logprobs", tops,
                         "text_offset", offs);
    }
    json_decref(toks);
    json_decref(tlp);
    json_decref(tops);
    json_decref(offs);
    return api == SRV_OAI_CHAT ? json_pack("{s:o}", "content", content) : content;
}

static json_t *usage_json(const struct lm_srv_req *r)
{
    int64_t gen = 0;
    for (int32_t i = 0; i < r->n_choices; i++)
        gen += r->ch[i].n_gen;
    return json_pack("{s:i,s:I,s:I}", "prompt_tokens", r->n_prompt, "completion_tokens", (json_int_t)gen,
                     "total_tokens", (json_int_t)(gen + r->n_prompt));
}

static char *make_id(const struct srv_gen *g)
{
    char *id = NULL;
    if (asprintf(&id, "%s-%llu", g->api == SRV_OAI_CHAT ? "chatcmpl" : "cmpl", (unsigned long long)g->id) < 0)
        return NULL;
    return id;
}

/* llama.cpp's summary fields of a finished choice. */
static void llama_summary(const struct lm_server *s, const struct lm_srv_req *r, int32_t i, json_t *o)
{
    const struct lm_srv_choice *ch = &r->ch[i];
    double tp = ch->t_prompt_us * 1e-3, tg = ch->t_gen_us * 1e-3;
    json_t *timings = json_pack("{s:i,s:f,s:f,s:i,s:f,s:f}", "prompt_n", r->n_prompt, "prompt_ms", tp,
                                "prompt_per_second", tp > 0 ? r->n_prompt / tp * 1e3 : 0.0, "predicted_n", ch->n_gen,
                                "predicted_ms", tg, "predicted_per_second", tg > 0 ? ch->n_gen / tg * 1e3 : 0.0);
    bool word = ch->finish && !strcmp(ch->finish, "stop") && !ch->stopped_eos && r->n_stop > 0;
    json_object_set_new(o, "model", json_string(s->p.model_id));
    json_object_set_new(o, "tokens_predicted", json_integer(ch->n_gen));
    json_object_set_new(o, "tokens_evaluated", json_integer(r->n_prompt));
    json_object_set_new(o, "stopped_eos", json_boolean(ch->finish && !strcmp(ch->finish, "stop") && !word));
    json_object_set_new(o, "stopped_limit", json_boolean(ch->finish && !strcmp(ch->finish, "length")));
    json_object_set_new(o, "stopped_word", json_boolean(word));
    json_object_set_new(o, "timings", timings);
}

/* The whole response of a finished request. */
static json_t *full_json(const struct lm_server *s, const struct lm_srv_req *r, const struct srv_gen *g)
{
    if (g->api == SRV_LLAMA && r->n_choices == 1) {
        const struct lm_srv_choice *ch = &r->ch[0];
        json_t *o = json_pack("{s:o,s:b,s:i}", "content", srv_str(ch->text ? ch->text : "", ch->n_text), "stop", 1,
                              "index", 0);
        llama_summary(s, r, 0, o);
        if (r->want_lp)
            json_object_set_new(o, "completion_probabilities", lps_json(s, g->api, ch->lps, ch->n_lps, r->n_probs));
        return o;
    }
    json_t *choices = json_array();
    for (int32_t i = 0; i < r->n_choices; i++) {
        const struct lm_srv_choice *ch = &r->ch[i];
        json_t *text = srv_str(ch->text ? ch->text : "", ch->n_text);
        json_t *lp = r->want_lp ? lps_json(s, g->api, ch->lps, ch->n_lps, r->n_probs) : json_null();
        json_t *c = g->api == SRV_OAI_CHAT
                        ? json_pack("{s:i,s:{s:s,s:o},s:o,s:s}", "index", i, "message", "role", "assistant", "content",
                                    text, "logprobs", lp, "finish_reason", ch->finish ? ch->finish : "stop")
                        : json_pack("{s:i,s:o,s:o,s:s}", "index", i, "text", text, "logprobs", lp, "finish_reason",
                                    ch->finish ? ch->finish : "stop");
        json_array_append_new(choices, c);
    }
    char *id = make_id(g);
    json_t *o = json_pack("{s:s,s:s,s:I,s:s,s:o,s:o,s:s}", "id", id ? id : "cmpl", "object",
                          g->api == SRV_OAI_CHAT ? "chat.completion" : "text_completion", "created", (json_int_t)g->created,
                          "model", s->p.model_id, "choices", choices, "usage", usage_json(r), "system_fingerprint",
                          "lamina");
    free(id);
    return o;
}

struct stream {
    struct lm_server *s;
    struct MHD_Connection *c;
    struct lm_srv_req *r;
    struct srv_gen g;
    char *id;
    size_t text_done[LM_SRV_MAX_N], lps_done[LM_SRV_MAX_N];
    bool started[LM_SRV_MAX_N], finished[LM_SRV_MAX_N];
    char *out;
    size_t n_out, off_out, cap_out;
    bool end;
};

static void emit_raw(struct stream *st, const char *text, size_t n)
{
    if (st->n_out + n > st->cap_out) {
        size_t cap = st->cap_out ? st->cap_out : 4096;
        while (cap < st->n_out + n)
            cap *= 2;
        char *o = realloc(st->out, cap);
        if (!o)
            return;
        st->out = o;
        st->cap_out = cap;
    }
    memcpy(st->out + st->n_out, text, n);
    st->n_out += n;
}

/* Append `data: <j>\n\n` (takes the reference). */
static void emit(struct stream *st, json_t *j)
{
    char *text = j ? json_dumps(j, JSON_COMPACT | JSON_REAL_PRECISION(9)) : NULL;
    json_decref(j);
    if (!text)
        return;
    emit_raw(st, "data: ", 6);
    emit_raw(st, text, strlen(text));
    emit_raw(st, "\n\n", 2);
    free(text);
}

/* One OpenAI chunk holding one choice (or none: the usage chunk). */
static json_t *chunk(const struct stream *st, json_t *choice)
{
    json_t *choices = json_array();
    if (choice)
        json_array_append_new(choices, choice);
    return json_pack("{s:s,s:s,s:I,s:s,s:s,s:o}", "id", st->id ? st->id : "cmpl", "object",
                     st->g.api == SRV_OAI_CHAT ? "chat.completion.chunk" : "text_completion", "created",
                     (json_int_t)st->g.created,
                     "model", st->s->p.model_id, "system_fingerprint", "lamina", "choices", choices);
}

/* Events for choice i's delta d. */
static void emit_delta(struct stream *st, int32_t i, const struct delta *d)
{
    const struct lm_srv_req *r = st->r;
    enum srv_api api = st->g.api;
    bool first = !st->started[i];
    st->started[i] = true;
    if (d->n_text || d->n_lps || (first && api == SRV_OAI_CHAT)) {
        json_t *text = srv_str(d->text ? d->text : "", d->n_text);
        json_t *lp = r->want_lp && d->n_lps ? lps_json(st->s, api, d->lps, d->n_lps, r->n_probs) : json_null();
        if (api == SRV_OAI_CHAT) {
            json_t *delta = first ? json_pack("{s:s,s:o}", "role", "assistant", "content", text)
                                  : json_pack("{s:o}", "content", text);
            emit(st, chunk(st, json_pack("{s:i,s:o,s:o,s:n}", "index", i, "delta", delta, "logprobs", lp,
                                         "finish_reason")));
        } else if (api == SRV_OAI_CMPL) {
            emit(st, chunk(st, json_pack("{s:i,s:o,s:o,s:n}", "index", i, "text", text, "logprobs", lp,
                                         "finish_reason")));
        } else {
            json_t *o = json_pack("{s:o,s:b,s:i}", "content", text, "stop", 0, "index", i);
            if (r->want_lp)
                json_object_set_new(o, "completion_probabilities", json_incref(lp));
            json_decref(lp);
            emit(st, o);
        }
    }
    if (!d->finish)
        return;
    st->finished[i] = true;
    if (api == SRV_OAI_CHAT)
        emit(st, chunk(st, json_pack("{s:i,s:{},s:n,s:s}", "index", i, "delta", "logprobs", "finish_reason", d->finish)));
    else if (api == SRV_OAI_CMPL)
        emit(st, chunk(st, json_pack("{s:i,s:s,s:n,s:s}", "index", i, "text", "", "logprobs", "finish_reason", d->finish)));
    else {
        json_t *o = json_pack("{s:s,s:b,s:i}", "content", "", "stop", 1, "index", i);
        llama_summary(st->s, r, i, o);
        emit(st, o);
    }
}

static bool has_news(const struct stream *st)
{
    const struct lm_srv_req *r = st->r;
    if (r->err_status)
        return true;
    for (int32_t i = 0; i < r->n_choices; i++)
        if (r->ch[i].n_text > st->text_done[i] || r->ch[i].n_lps > st->lps_done[i] ||
            (r->ch[i].done && !st->finished[i]))
            return true;
    return false;
}

/* Copy choice i's news (engine lock held). */
static void take_delta(struct stream *st, int32_t i, struct delta *d)
{
    const struct lm_srv_choice *ch = &st->r->ch[i];
    memset(d, 0, sizeof *d);
    d->off = st->text_done[i];
    d->n_text = ch->n_text - st->text_done[i];
    if (d->n_text && (d->text = malloc(d->n_text)))
        memcpy(d->text, ch->text + st->text_done[i], d->n_text);
    d->n_lps = ch->n_lps - st->lps_done[i];
    if (d->n_lps && (d->lps = malloc(d->n_lps * sizeof *d->lps)))
        memcpy(d->lps, ch->lps + st->lps_done[i], d->n_lps * sizeof *d->lps);
    if (!d->lps)
        d->n_lps = 0;
    st->text_done[i] = ch->n_text;
    st->lps_done[i] = ch->n_lps;
    if (ch->done && !st->finished[i])
        d->finish = ch->finish ? ch->finish : "stop";
}

/* The end of the stream: an error event if the request failed, usage, [DONE]. */
static void emit_end(struct stream *st)
{
    if (st->r->err_status) {
        json_t *e = json_pack("{s:{s:s,s:s,s:n,s:i}}", "error", "message", st->r->err, "type", "server_error",
                              "param", "code", st->r->err_status);
        emit(st, e);
    }
    if (st->g.api != SRV_LLAMA) {
        if (st->g.include_usage) {
            json_t *u = chunk(st, NULL);
            json_object_set_new(u, "usage", usage_json(st->r));
            emit(st, u);
        }
        emit_raw(st, "data: [DONE]\n\n", 14);
    }
    st->end = true;
}

/* Wait for news and format it; false when the client left. */
static bool fill(struct stream *st)
{
    struct lm_engine *e = st->s->eng;
    lm_engine_lock(e);
    while (!has_news(st)) {
        if (lm_engine_wait(e, st->r, 50) || has_news(st))
            break;
        lm_engine_unlock(e);
        if (srv_client_gone(st->c)) {
            lm_engine_cancel(e, st->r);
            return false;
        }
        lm_engine_lock(e);
    }
    struct delta d[LM_SRV_MAX_N];
    for (int32_t i = 0; i < st->r->n_choices; i++)
        take_delta(st, i, &d[i]);
    bool failed = st->r->err_status != 0;
    lm_engine_unlock(e);
    bool all = true;
    for (int32_t i = 0; i < st->r->n_choices; i++) {
        emit_delta(st, i, &d[i]);
        all = all && st->finished[i];
        free(d[i].text);
        free(d[i].lps);
    }
    if (all || failed)
        emit_end(st);
    return true;
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    struct stream *st = cls;
    while (st->off_out == st->n_out) {
        st->n_out = st->off_out = 0;
        if (st->end)
            return MHD_CONTENT_READER_END_OF_STREAM;
        if (!fill(st))
            return MHD_CONTENT_READER_END_WITH_ERROR;
    }
    size_t n = st->n_out - st->off_out < max ? st->n_out - st->off_out : max;
    memcpy(buf, st->out + st->off_out, n);
    st->off_out += n;
    return (ssize_t)n;
}

static void stream_free(void *cls)
{
    struct stream *st = cls;
    lm_engine_cancel(st->s->eng, st->r); /* no-op for a finished request */
    lm_srv_req_release(st->s->eng, st->r);
    free(st->id);
    free(st->out);
    free(st);
}

static enum MHD_Result start_stream(struct lm_server *s, struct MHD_Connection *c, struct lm_srv_req *r,
                                    const struct srv_gen *g)
{
    struct stream *st = calloc(1, sizeof *st);
    if (!st) {
        lm_engine_cancel(s->eng, r);
        lm_srv_req_release(s->eng, r);
        return MHD_NO;
    }
    *st = (struct stream){.s = s, .c = c, .r = r, .g = *g, .id = make_id(g)};
    struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, stream_read, st, stream_free);
    if (!resp) {
        stream_free(st);
        return MHD_NO;
    }
    MHD_add_response_header(resp, "Content-Type", "text/event-stream");
    MHD_add_response_header(resp, "Cache-Control", "no-cache");
    enum MHD_Result rc = MHD_queue_response(c, MHD_HTTP_OK, resp);
    MHD_destroy_response(resp);
    return rc;
}

enum MHD_Result srv_generate(struct lm_server *s, struct MHD_Connection *c, struct lm_srv_req *r,
                             const struct srv_gen *g)
{
    if (lm_engine_submit(s->eng, r)) {
        enum MHD_Result rc = srv_req_error(c, r);
        lm_srv_req_release(s->eng, r);
        return rc;
    }
    if (g->stream)
        return start_stream(s, c, r, g);
    enum MHD_Result rc = MHD_NO;
    if (srv_wait(s, c, r)) {
        lm_engine_lock(s->eng); /* the results are final: no more writes, but read them as the engine wrote them */
        lm_engine_unlock(s->eng);
        rc = r->err_status ? srv_req_error(c, r) : srv_json(c, MHD_HTTP_OK, full_json(s, r, g));
    }
    lm_srv_req_release(s->eng, r);
    return rc;
}
