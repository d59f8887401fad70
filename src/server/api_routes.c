/* api_routes.c - the route handlers: OpenAI's (chat, completions,
 * embeddings, models) and llama.cpp's (/completion, /tokenize, /detokenize,
 * /health, /props, /metrics), plus the web page.
 *
 * Each handler checks its body's fields (400 naming the field), builds an
 * engine request where it needs the model to run, and answers through
 * srv_generate / srv_json / srv_error. No state of its own. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server/server_int.h"

static enum MHD_Result gen_route(struct lm_server *s, struct MHD_Connection *c, json_t *body, enum srv_api api)
{
    struct lm_srv_req *r = lm_srv_req_new();
    if (!r)
        return MHD_NO;
    struct srv_err e = {0};
    int rc = srv_parse_gen(s, body, api, r, &e);
    struct srv_gen g = {.api = api, .id = atomic_fetch_add(&s->next_id, 1), .created = (long)time(NULL)};
    json_t *stream = json_object_get(body, "stream"), *so = json_object_get(body, "stream_options");
    if (!rc && stream && !json_is_boolean(stream) && !json_is_null(stream))
        rc = 400, e.param = "stream", snprintf(e.msg, sizeof e.msg, "'stream' must be a boolean");
    if (!rc && so && !json_is_null(so) && !json_is_object(so))
        rc = 400, e.param = "stream_options", snprintf(e.msg, sizeof e.msg, "'stream_options' must be an object");
    if (rc) {
        lm_srv_req_release(s->eng, r);
        return rc == 400 ? srv_error(c, 400, "invalid_request_error", e.param, "%s", e.msg)
                         : srv_error(c, (unsigned)rc, "server_error", NULL, "cannot serve the request");
    }
    g.stream = json_is_true(stream);
    g.include_usage = json_is_true(json_object_get(so, "include_usage"));
    return srv_generate(s, c, r, &g);
}

enum MHD_Result srv_route_chat(struct lm_server *s, struct MHD_Connection *c, json_t *body)
{
    return gen_route(s, c, body, SRV_OAI_CHAT);
}

enum MHD_Result srv_route_cmpl(struct lm_server *s, struct MHD_Connection *c, json_t *body)
{
    if (json_is_true(json_object_get(body, "echo")))
        return srv_error(c, 400, "invalid_request_error", "echo", "'echo' is not supported");
    return gen_route(s, c, body, SRV_OAI_CMPL);
}

enum MHD_Result srv_route_completion(struct lm_server *s, struct MHD_Connection *c, json_t *body)
{
    return gen_route(s, c, body, SRV_LLAMA);
}

/* The inputs of an embeddings request as one token array with offsets. */
static int embd_inputs(struct lm_server *s, json_t *input, struct lm_srv_req *r, struct srv_err *e)
{
    json_t *one = json_array();
    if (json_is_string(input) || (json_is_array(input) && json_is_integer(json_array_get(input, 0))))
        json_array_append(one, input);
    else if (json_is_array(input))
        json_array_extend(one, input);
    size_t n = json_array_size(one), i;
    int rc = n == 0 || n > 256 ? 400 : 0;
    if (rc) {
        snprintf(e->msg, sizeof e->msg, "'input' must be a string, a list of 1..256 strings or token lists");
        e->param = "input";
    }
    r->emb_off = rc ? NULL : calloc(n + 1, sizeof *r->emb_off);
    json_t *v;
    json_array_foreach(one, i, v) {
        if (rc || !r->emb_off)
            break;
        llama_token *t = NULL;
        int32_t k = 0;
        rc = srv_prompt_tokens(s, v, "input", &t, &k, e);
        if (!rc && (k == 0 || k > s->n_ctx_slot)) {
            rc = 400;
            e->param = "input";
            snprintf(e->msg, sizeof e->msg, "input %zu has %d tokens (1..%d allowed)", i, k, s->n_ctx_slot);
        }
        llama_token *np = rc ? NULL : realloc(r->prompt, ((size_t)r->n_prompt + (size_t)k) * sizeof *np);
        if (np) {
            memcpy(np + r->n_prompt, t, (size_t)k * sizeof *t);
            r->prompt = np;
            r->n_prompt += k;
            r->emb_off[i + 1] = r->n_prompt;
        } else if (!rc) {
            rc = 500;
        }
        free(t);
    }
    r->n_inputs = (int32_t)n;
    json_decref(one);
    return rc ? rc : r->emb_off ? 0 : 500;
}

static json_t *base64_floats(const float *v, size_t n)
{
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const unsigned char *b = (const unsigned char *)v; /* little-endian float32, as OpenAI sends */
    size_t nb = n * sizeof *v, w = 0;
    char *out = malloc((nb + 2) / 3 * 4 + 1);
    if (!out)
        return json_null();
    for (size_t i = 0; i < nb; i += 3) {
        unsigned x = (unsigned)b[i] << 16 | (i + 1 < nb ? (unsigned)b[i + 1] << 8 : 0) | (i + 2 < nb ? b[i + 2] : 0);
        out[w++] = tab[x >> 18 & 63];
        out[w++] = tab[x >> 12 & 63];
        out[w++] = i + 1 < nb ? tab[x >> 6 & 63] : '=';
        out[w++] = i + 2 < nb ? tab[x & 63] : '=';
    }
    json_t *j = json_stringn(out, w);
    free(out);
    return j;
}

static json_t *embd_json(const struct lm_server *s, const struct lm_srv_req *r, bool b64)
{
    json_t *data = json_array();
    for (int32_t i = 0; i < r->n_inputs; i++) {
        const float *v = r->emb + (size_t)i * (size_t)r->n_embd;
        json_t *vec;
        if (b64) {
            vec = base64_floats(v, (size_t)r->n_embd);
        } else {
            vec = json_array();
            for (int32_t j = 0; j < r->n_embd; j++)
                json_array_append_new(vec, json_real(v[j]));
        }
        json_array_append_new(data, json_pack("{s:s,s:i,s:o}", "object", "embedding", "index", i, "embedding", vec));
    }
    return json_pack("{s:s,s:o,s:s,s:{s:i,s:i}}", "object", "list", "data", data, "model", s->p.model_id, "usage",
                     "prompt_tokens", r->n_prompt, "total_tokens", r->n_prompt);
}

enum MHD_Result srv_route_embd(struct lm_server *s, struct MHD_Connection *c, json_t *body)
{
    json_t *fmt = json_object_get(body, "encoding_format");
    const char *f = fmt ? json_string_value(fmt) : "float";
    if (!f || (strcmp(f, "float") && strcmp(f, "base64")))
        return srv_error(c, 400, "invalid_request_error", "encoding_format", "'encoding_format' must be float or base64");
    struct lm_srv_req *r = lm_srv_req_new();
    if (!r)
        return MHD_NO;
    r->kind = LM_SRV_EMBED;
    r->n_choices = 1;
    r->deadline_us = llama_time_us() + (int64_t)(s->p.timeout_s * 1e6);
    struct srv_err e = {0};
    json_t *input = json_object_get(body, "input");
    if (!input)
        input = json_object_get(body, "content");
    int rc = embd_inputs(s, input, r, &e);
    if (rc) {
        lm_srv_req_release(s->eng, r);
        return rc == 400 ? srv_error(c, 400, "invalid_request_error", e.param, "%s", e.msg)
                         : srv_error(c, 500, "server_error", NULL, "cannot serve the request");
    }
    enum MHD_Result res = MHD_NO;
    if (lm_engine_submit(s->eng, r))
        res = srv_req_error(c, r);
    else if (srv_wait(s, c, r))
        res = r->err_status ? srv_req_error(c, r) : srv_json(c, 200, embd_json(s, r, !strcmp(f, "base64")));
    lm_srv_req_release(s->eng, r);
    return res;
}

enum MHD_Result srv_route_models(struct lm_server *s, struct MHD_Connection *c, json_t *body)
{
    (void)body;
    json_t *m = json_pack("{s:s,s:s,s:I,s:s,s:{s:i,s:i}}", "id", s->p.model_id, "object", "model", "created",
                          (json_int_t)time(NULL), "owned_by", "lamina", "meta", "n_ctx_slot", s->n_ctx_slot,
                          "n_vocab", llama_n_vocab(s->model));
    return srv_json(c, 200, json_pack("{s:s,s:[o]}", "object", "list", "data", m));
}

enum MHD_Result srv_route_tokenize(struct lm_server *s, struct MHD_Connection *c, json_t *body)
{
    json_t *content = json_object_get(body, "content");
    bool add_special = json_is_true(json_object_get(body, "add_special"));
    bool special = json_is_true(json_object_get(body, "parse_special"));
    if (!json_is_string(content))
        return srv_error(c, 400, "invalid_request_error", "content", "'content' must be a string");
    llama_token *t = NULL;
    int32_t n = 0;
    int rc = srv_tokenize(s, json_string_value(content), json_string_length(content), add_special, special, &t, &n);
    if (rc)
        return srv_error(c, (unsigned)rc, "invalid_request_error", "content", "cannot tokenize the content");
    json_t *a = json_array();
    for (int32_t i = 0; i < n; i++)
        json_array_append_new(a, json_integer(t[i]));
    free(t);
    return srv_json(c, 200, json_pack("{s:o}", "tokens", a));
}

enum MHD_Result srv_route_detokenize(struct lm_server *s, struct MHD_Connection *c, json_t *body)
{
    json_t *tokens = json_object_get(body, "tokens"), *v;
    if (!json_is_array(tokens))
        return srv_error(c, 400, "invalid_request_error", "tokens", "'tokens' must be a list of token ids");
    size_t i;
    struct lm_strbuf text = {0};
    json_array_foreach(tokens, i, v) {
        json_int_t t = json_integer_value(v);
        if (!json_is_integer(v) || t < 0 || t >= llama_n_vocab(s->model)) {
            lm_strbuf_free(&text);
            return srv_error(c, 400, "invalid_request_error", "tokens", "token %zu is not a valid id", i);
        }
        if (lm_token_append(s->model, (llama_token)t, &text) != LM_OK) {
            lm_strbuf_free(&text);
            return MHD_NO;
        }
    }
    json_t *o = json_pack("{s:o}", "content", srv_str(text.p ? text.p : "", text.n));
    lm_strbuf_free(&text);
    return srv_json(c, 200, o);
}

enum MHD_Result srv_route_health(struct lm_server *s, struct MHD_Connection *c, json_t *body)
{
    (void)body;
    struct lm_engine_stats st = lm_engine_get_stats(s->eng);
    return srv_json(c, 200, json_pack("{s:s,s:i,s:i,s:i}", "status", "ok", "slots_idle", st.n_slots - st.n_busy,
                                      "slots_processing", st.n_busy, "requests_queued", st.n_queued));
}

enum MHD_Result srv_route_props(struct lm_server *s, struct MHD_Connection *c, json_t *body)
{
    (void)body;
    struct lm_engine_stats st = lm_engine_get_stats(s->eng);
    const struct lm_sampler_params *p = &s->p.sampling;
    json_t *dg = json_pack("{s:i,s:i,s:f,s:i,s:f,s:f,s:f,s:i,s:s}", "n_ctx", s->n_ctx_slot, "n_predict",
                           s->p.n_predict > 0 ? s->p.n_predict : s->n_ctx_slot, "temperature", p->temp, "top_k",
                           p->top_k, "top_p", p->top_p, "min_p", p->min_p, "repeat_penalty", p->penalty_repeat,
                           "repeat_last_n", p->penalty_last_n, "model", s->p.model_id);
    return srv_json(c, 200, json_pack("{s:o,s:i,s:i,s:i,s:o,s:s,s:s}", "default_generation_settings", dg,
                                      "total_slots", st.n_slots, "slots_processing", st.n_busy, "requests_queued",
                                      st.n_queued, "chat_template", srv_str(s->tmpl, strlen(s->tmpl)), "bos_token",
                                      s->bos_text, "eos_token", s->eos_text));
}

enum MHD_Result srv_route_metrics(struct lm_server *s, struct MHD_Connection *c, json_t *body)
{
    (void)body;
    struct lm_engine_stats st = lm_engine_get_stats(s->eng);
    char *text = NULL;
    int n = asprintf(&text,
        "# HELP lamina_requests_total Requests accepted by the engine.\n# TYPE lamina_requests_total counter\n"
        "lamina_requests_total %llu\n"
        "# HELP lamina_requests_cancelled_total Requests whose client left before the end.\n"
        "# TYPE lamina_requests_cancelled_total counter\nlamina_requests_cancelled_total %llu\n"
        "# HELP lamina_prompt_tokens_total Prompt tokens evaluated.\n# TYPE lamina_prompt_tokens_total counter\n"
        "lamina_prompt_tokens_total %llu\n"
        "# HELP lamina_tokens_predicted_total Tokens generated.\n# TYPE lamina_tokens_predicted_total counter\n"
        "lamina_tokens_predicted_total %llu\n"
        "# HELP lamina_prompt_seconds_total Decode time attributed to prompt tokens.\n"
        "# TYPE lamina_prompt_seconds_total counter\nlamina_prompt_seconds_total %.6f\n"
        "# HELP lamina_tokens_predicted_seconds_total Decode time attributed to generated tokens.\n"
        "# TYPE lamina_tokens_predicted_seconds_total counter\nlamina_tokens_predicted_seconds_total %.6f\n"
        "# HELP lamina_prompt_tokens_per_second Prompt throughput since start.\n"
        "# TYPE lamina_prompt_tokens_per_second gauge\nlamina_prompt_tokens_per_second %.3f\n"
        "# HELP lamina_predicted_tokens_per_second Generation throughput since start.\n"
        "# TYPE lamina_predicted_tokens_per_second gauge\nlamina_predicted_tokens_per_second %.3f\n"
        "# HELP lamina_requests_queued Requests waiting for a slot.\n# TYPE lamina_requests_queued gauge\n"
        "lamina_requests_queued %d\n"
        "# HELP lamina_slots_busy Slots running a request.\n# TYPE lamina_slots_busy gauge\nlamina_slots_busy %d\n"
        "# HELP lamina_slots_total Slots.\n# TYPE lamina_slots_total gauge\nlamina_slots_total %d\n"
        "# HELP lamina_decode_calls_total Engine steps.\n# TYPE lamina_decode_calls_total counter\n"
        "lamina_decode_calls_total %llu\n",
        (unsigned long long)st.n_requests, (unsigned long long)st.n_cancelled, (unsigned long long)st.n_prompt_tokens,
        (unsigned long long)st.n_gen_tokens, st.t_prompt_s, st.t_gen_s,
        st.t_prompt_s > 0 ? st.n_prompt_tokens / st.t_prompt_s : 0.0,
        st.t_gen_s > 0 ? st.n_gen_tokens / st.t_gen_s : 0.0, st.n_queued, st.n_busy, st.n_slots,
        (unsigned long long)st.n_decode);
    if (n < 0)
        return MHD_NO;
    struct MHD_Response *resp = MHD_create_response_from_buffer((size_t)n, text, MHD_RESPMEM_MUST_FREE);
    if (!resp) {
        free(text);
        return MHD_NO;
    }
    MHD_add_response_header(resp, "Content-Type", "text/plain; version=0.0.4");
    enum MHD_Result rc = MHD_queue_response(c, 200, resp);
    MHD_destroy_response(resp);
    return rc;
}

enum MHD_Result srv_route_webui(struct lm_server *s, struct MHD_Connection *c, json_t *body)
{
    (void)s;
    (void)body;
    return srv_text(c, 200, "text/html; charset=utf-8", lm_srv_webui_html, strlen(lm_srv_webui_html), false);
}
