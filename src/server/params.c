/* params.c - request JSON to an engine request: prompts (chat template,
 * text, token lists), sampling fields, stop strings, limits, logprobs,
 * grammar / response_format, and one sampler per choice.
 *
 * Every field is type-checked; a wrong type or value is a 400 naming the
 * field. Nothing here keeps state between requests; it runs on connection
 * threads (the model is only read). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/chat.h"
#include "server/schema.h"
#include "server/server_int.h"

static int bad(struct srv_err *e, const char *param, const char *fmt, const char *what)
{
    snprintf(e->msg, sizeof e->msg, fmt, what);
    e->param = param;
    return 400;
}

int srv_tokenize(const struct lm_server *s, const char *text, size_t len, bool add_bos, bool special,
                 llama_token **out, int32_t *n_out)
{
    if (len > (size_t)INT32_MAX - 8)
        return 400;
    int32_t cap = (int32_t)len + 4;
    llama_token *t = malloc((size_t)cap * sizeof *t);
    if (!t)
        return 500;
    int32_t n = llama_tokenize(s->model, text, (int32_t)len, t, cap, add_bos, special);
    if (n < 0) {
        free(t);
        return 400;
    }
    *out = t;
    *n_out = n;
    return 0;
}

/* Text of a message's content: a string, null, or a list of text parts. */
static int content_text(json_t *content, char **out, struct srv_err *e)
{
    if (json_is_null(content) || !content) {
        *out = strdup("");
    } else if (json_is_string(content)) {
        *out = strndup(json_string_value(content), json_string_length(content));
    } else if (json_is_array(content)) {
        size_t n = 0, i;
        json_t *part;
        json_array_foreach(content, i, part) {
            json_t *txt = json_object_get(part, "text");
            if (!json_is_object(part) || !json_is_string(txt))
                return bad(e, "messages", "%s", "message content parts must be {\"type\": \"text\", \"text\": ...}");
            n += json_string_length(txt);
        }
        char *buf = malloc(n + 1);
        size_t w = 0;
        json_array_foreach(content, i, part) {
            json_t *txt = json_object_get(part, "text");
            if (buf)
                memcpy(buf + w, json_string_value(txt), json_string_length(txt));
            w += json_string_length(txt);
        }
        if (buf)
            buf[w] = '\0';
        *out = buf;
    } else {
        return bad(e, "messages", "%s", "message content must be a string or a list of text parts");
    }
    return *out ? 0 : 500;
}

int srv_chat_prompt(struct lm_server *s, json_t *messages, char **text, struct srv_err *e)
{
    if (!json_is_array(messages) || json_array_size(messages) == 0)
        return bad(e, "messages", "%s", "'messages' must be a non-empty list");
    size_t n = json_array_size(messages), i;
    struct lm_chat_msg *msgs = calloc(n, sizeof *msgs);
    char **texts = calloc(n, sizeof *texts);
    int rc = msgs && texts ? 0 : 500;
    json_t *m;
    json_array_foreach(messages, i, m) {
        if (rc)
            break;
        json_t *role = json_object_get(m, "role");
        if (!json_is_object(m) || !json_is_string(role)) {
            rc = bad(e, "messages", "%s", "each message needs a string 'role'");
            break;
        }
        rc = content_text(json_object_get(m, "content"), &texts[i], e);
        msgs[i] = (struct lm_chat_msg){json_string_value(role), texts[i]};
    }
    if (!rc) {
        struct lm_chat_opts co = {.add_generation_prompt = true, .bos_token = s->bos_text, .eos_token = s->eos_text};
        char err[200] = "";
        lm_status st = lm_chat_render(s->tmpl, msgs, n, &co, text, err, sizeof err);
        if (st == LM_ERR_NOMEM)
            rc = 500;
        else if (st)
            rc = bad(e, "messages", "the chat template refused the conversation: %s", err);
    }
    for (i = 0; texts && i < n; i++)
        free(texts[i]);
    free(texts);
    free(msgs);
    return rc;
}

/* Tokens of a prompt: a string, a list of token ids, or a list of one string. */
int srv_prompt_tokens(struct lm_server *s, json_t *prompt, const char *param, llama_token **out, int32_t *n,
                      struct srv_err *e)
{
    if (json_is_array(prompt) && json_array_size(prompt) == 1 && json_is_string(json_array_get(prompt, 0)))
        prompt = json_array_get(prompt, 0);
    if (json_is_string(prompt)) {
        int rc = srv_tokenize(s, json_string_value(prompt), json_string_length(prompt),
                              llama_add_bos_token(s->model) != 0, true, out, n);
        return rc == 400 ? bad(e, param, "%s", "the prompt cannot be tokenized") : rc;
    }
    if (!json_is_array(prompt) || json_array_size(prompt) == 0)
        return bad(e, param, "'%s' must be a string or a non-empty list of token ids", param);
    size_t k = json_array_size(prompt), i;
    if (k > (size_t)s->n_ctx_slot)
        return bad(e, param, "%s", "the prompt does not fit the slot's context");
    llama_token *t = malloc(k * sizeof *t);
    if (!t)
        return 500;
    json_t *v;
    int32_t n_vocab = llama_n_vocab(s->model);
    json_array_foreach(prompt, i, v) {
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) >= n_vocab) {
            free(t);
            return bad(e, param, "'%s' must be a string or a list of valid token ids", param);
        }
        t[i] = (llama_token)json_integer_value(v);
    }
    *out = t;
    *n = (int32_t)k;
    return 0;
}

/* Optional number / integer / bool fields: 0 absent (or null), 1 read, -1 wrong type. */
static int get_num(json_t *o, const char *k, double *v)
{
    json_t *j = json_object_get(o, k);
    if (!j || json_is_null(j))
        return 0;
    if (!json_is_number(j))
        return -1;
    *v = json_number_value(j);
    return 1;
}

static int get_int(json_t *o, const char *k, long long *v)
{
    json_t *j = json_object_get(o, k);
    if (!j || json_is_null(j))
        return 0;
    if (!json_is_integer(j)) {
        if (json_is_real(j) && json_real_value(j) == (double)(long long)json_real_value(j)) {
            *v = (long long)json_real_value(j);
            return 1;
        }
        return -1;
    }
    *v = json_integer_value(j);
    return 1;
}

static int get_bool(json_t *o, const char *k, bool *v)
{
    json_t *j = json_object_get(o, k);
    if (!j || json_is_null(j))
        return 0;
    if (!json_is_boolean(j))
        return -1;
    *v = json_is_true(j);
    return 1;
}

struct num_field {
    const char *name;
    size_t off; /* in lm_sampler_params */
    bool is_int;
    double lo, hi;
};

#define SPF(f) offsetof(struct lm_sampler_params, f)
static const struct num_field num_fields[] = {
    {"temperature", SPF(temp), false, 0, 100},
    {"top_p", SPF(top_p), false, 0, 1},
    {"top_k", SPF(top_k), true, 0, 1 << 30},
    {"min_p", SPF(min_p), false, 0, 1},
    {"tfs_z", SPF(tfs_z), false, 0, 1},
    {"typical_p", SPF(typical_p), false, 0, 1},
    {"repeat_penalty", SPF(penalty_repeat), false, 0, 100},
    {"repeat_last_n", SPF(penalty_last_n), true, -1, 1 << 24},
    {"frequency_penalty", SPF(penalty_freq), false, -2, 2},
    {"presence_penalty", SPF(penalty_present), false, -2, 2},
    {"mirostat", SPF(mirostat), true, 0, 2},
    {"mirostat_tau", SPF(mirostat_tau), false, 0, 100},
    {"mirostat_eta", SPF(mirostat_eta), false, 0, 1},
};
#undef SPF

static int parse_sampling(json_t *body, struct lm_sampler_params *sp, struct srv_err *e)
{
    for (size_t i = 0; i < sizeof num_fields / sizeof num_fields[0]; i++) {
        const struct num_field *f = &num_fields[i];
        double v;
        int got = get_num(body, f->name, &v);
        if (got < 0 || (got > 0 && (v < f->lo || v > f->hi || (f->is_int && v != (double)(long long)v))))
            return bad(e, f->name, "'%s' must be a number in range", f->name);
        if (got && f->is_int)
            *(int32_t *)((char *)sp + f->off) = (int32_t)v;
        else if (got)
            *(float *)((char *)sp + f->off) = (float)v;
    }
    return 0;
}

static int parse_stop(json_t *body, struct lm_srv_req *r, struct srv_err *e)
{
    json_t *st = json_object_get(body, "stop");
    if (!st || json_is_null(st))
        return 0;
    if (json_is_string(st)) {
        if (json_string_length(st) && !(r->stop[r->n_stop++] = strdup(json_string_value(st))))
            return 500;
        return 0;
    }
    if (!json_is_array(st) || json_array_size(st) > LM_SRV_MAX_STOP)
        return bad(e, "stop", "'stop' must be a string or a list of at most %s strings", "8");
    size_t i;
    json_t *v;
    json_array_foreach(st, i, v) {
        if (!json_is_string(v))
            return bad(e, "stop", "%s", "'stop' must be a string or a list of strings");
        if (json_string_length(v) && !(r->stop[r->n_stop++] = strdup(json_string_value(v))))
            return 500;
    }
    return 0;
}

/* The grammar: `grammar` (GBNF) or `response_format` (JSON schema). */
static int parse_grammar(json_t *body, struct lm_srv_req *r, struct srv_err *e)
{
    json_t *g = json_object_get(body, "grammar"), *rf = json_object_get(body, "response_format");
    if (g && !json_is_null(g)) {
        if (!json_is_string(g))
            return bad(e, "grammar", "%s", "'grammar' must be a GBNF string");
        if (json_string_length(g) && !(r->grammar = strdup(json_string_value(g))))
            return 500;
    }
    if (!rf || json_is_null(rf))
        return 0;
    const char *type = json_string_value(json_object_get(rf, "type"));
    if (!json_is_object(rf) || !type)
        return bad(e, "response_format", "%s", "'response_format' must be an object with a 'type'");
    if (!strcmp(type, "text"))
        return 0;
    const json_t *schema = json_object_get(rf, "schema");
    if (!strcmp(type, "json_schema")) {
        json_t *js = json_object_get(rf, "json_schema");
        schema = json_is_object(js) ? json_object_get(js, "schema") : NULL;
        if (!schema)
            return bad(e, "response_format", "%s", "json_schema needs 'json_schema': {'schema': {...}}");
    } else if (strcmp(type, "json_object")) {
        return bad(e, "response_format", "unknown response_format type '%s'", type);
    }
    char *gbnf = NULL, err[200] = "";
    lm_status st = lm_schema_to_gbnf(schema, &gbnf, err, sizeof err);
    if (st == LM_ERR_NOMEM)
        return 500;
    if (st)
        return bad(e, "response_format", "unusable JSON schema: %s", err);
    free(r->grammar);
    r->grammar = gbnf;
    return 0;
}

static int parse_limits(struct lm_server *s, json_t *body, enum srv_api api, struct lm_srv_req *r, struct srv_err *e)
{
    long long v = -1, n = 1;
    const char *key = api == SRV_LLAMA ? "n_predict" : json_object_get(body, "max_completion_tokens")
                                                           ? "max_completion_tokens" : "max_tokens";
    if (get_int(body, key, &v) < 0)
        return bad(e, key, "'%s' must be an integer", key);
    int32_t cap = s->p.n_predict > 0 ? s->p.n_predict : s->n_ctx_slot;
    r->n_predict = v <= 0 || v > cap ? cap : (int32_t)v;
    if (get_int(body, "n", &n) < 0 || n < 1 || n > LM_SRV_MAX_N)
        return bad(e, "n", "'n' must be an integer in 1..%s", "16");
    r->n_choices = (int32_t)n;
    long long seed;
    int got = get_int(body, "seed", &seed);
    if (got < 0)
        return bad(e, "seed", "%s", "'seed' must be an integer");
    if (got && seed >= 0)
        r->seed = (uint64_t)seed;
    if (get_bool(body, "ignore_eos", &r->ignore_eos) < 0)
        return bad(e, "ignore_eos", "%s", "'ignore_eos' must be a boolean");
    return 0;
}

static int parse_logprobs(json_t *body, enum srv_api api, struct lm_srv_req *r, struct srv_err *e)
{
    long long k = 0;
    if (api == SRV_OAI_CHAT) {
        bool on = false;
        if (get_bool(body, "logprobs", &on) < 0)
            return bad(e, "logprobs", "%s", "'logprobs' must be a boolean");
        if (get_int(body, "top_logprobs", &k) < 0 || k < 0 || k > LM_SRV_MAX_TOP)
            return bad(e, "top_logprobs", "%s", "'top_logprobs' must be an integer in 0..20");
        r->want_lp = on;
    } else {
        const char *key = api == SRV_LLAMA ? "n_probs" : "logprobs";
        if (get_int(body, key, &k) < 0 || k < 0 || k > LM_SRV_MAX_TOP)
            return bad(e, key, "'%s' must be an integer in 0..20", key);
        r->want_lp = api == SRV_LLAMA ? k > 0 : json_is_integer(json_object_get(body, key));
    }
    r->n_probs = (int32_t)k;
    return 0;
}

/* One sampler per choice; a bad grammar is the client's error. */
static int make_samplers(struct lm_server *s, struct lm_srv_req *r, struct srv_err *e)
{
    for (int32_t i = 0; i < r->n_choices; i++) {
        uint64_t seed = r->seed == LM_SAMPLER_CTX_RNG ? LM_SAMPLER_CTX_RNG : r->seed + (uint64_t)i;
        char err[200] = "";
        lm_status st = lm_sampler_new(s->model, &r->sp, r->grammar, seed, &r->smp[i], err, sizeof err);
        if (st == LM_ERR_NOMEM)
            return 500;
        if (st)
            return bad(e, "grammar", "invalid grammar: %s", err);
    }
    return 0;
}

int srv_parse_gen(struct lm_server *s, json_t *body, enum srv_api api, struct lm_srv_req *r, struct srv_err *e)
{
    r->kind = LM_SRV_GENERATE;
    r->sp = s->p.sampling;
    if (api != SRV_LLAMA)
        r->sp.penalty_repeat = 1.0f; /* OpenAI has no repetition penalty: off unless the request sets it */
    int rc = parse_sampling(body, &r->sp, e);
    if (!rc)
        rc = parse_limits(s, body, api, r, e);
    if (!rc)
        rc = parse_stop(body, r, e);
    if (!rc)
        rc = parse_logprobs(body, api, r, e);
    if (!rc)
        rc = parse_grammar(body, r, e);
    if (!rc) {
        char *text = NULL;
        if (api == SRV_OAI_CHAT) {
            rc = srv_chat_prompt(s, json_object_get(body, "messages"), &text, e);
            if (!rc) {
                size_t nb = strlen(s->bos_text);
                bool add_bos = llama_add_bos_token(s->model) && !(nb && !strncmp(text, s->bos_text, nb));
                rc = srv_tokenize(s, text, strlen(text), add_bos, true, &r->prompt, &r->n_prompt);
                if (rc == 400)
                    rc = bad(e, "messages", "%s", "the conversation cannot be tokenized");
            }
            free(text);
        } else {
            json_t *p = json_object_get(body, "prompt");
            rc = p ? srv_prompt_tokens(s, p, "prompt", &r->prompt, &r->n_prompt, e)
                   : bad(e, "prompt", "%s", "'prompt' is required");
        }
    }
    if (!rc && r->n_prompt == 0)
        rc = bad(e, "prompt", "%s", "the prompt is empty");
    if (!rc && r->n_prompt >= s->n_ctx_slot) {
        char n[64];
        snprintf(n, sizeof n, "%d tokens, a slot holds %d", r->n_prompt, s->n_ctx_slot);
        rc = bad(e, api == SRV_OAI_CHAT ? "messages" : "prompt", "the prompt is too long (%s)", n);
    }
    if (!rc)
        rc = make_samplers(s, r, e);
    r->deadline_us = llama_time_us() + (int64_t)(s->p.timeout_s * 1e6);
    return rc;
}
