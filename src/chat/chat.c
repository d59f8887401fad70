/* chat.c - lm_chat_render (lex, parse and run a template over a
 * conversation) and the built-in formats with their architecture table.
 *
 * One render owns one arena (jinja.h): the result is copied out with malloc
 * and everything else freed at once, on success and on every error. */
#include <stdlib.h>
#include <string.h>

#include "chat/chat.h"
#include "chat/jinja.h"

/* the variables a template sees */
static int bind_inputs(struct jctx *c, const struct lm_chat_msg *msgs, size_t n_msgs,
                       const struct lm_chat_opts *opts)
{
    struct jlist *l = jl_new(c, n_msgs);
    if (!l)
        return -1;
    for (size_t i = 0; i < n_msgs; i++) {
        struct jdict *d = jd_new(c);
        if (!d || jd_set(c, d, jv_cstr("role"), msgs[i].role ? jv_cstr(msgs[i].role) : jv_none()) ||
            jd_set(c, d, jv_cstr("content"), msgs[i].content ? jv_cstr(msgs[i].content) : jv_none()))
            return -1;
        l->v[i] = (struct jv){.kind = JV_DICT, .u.d = d};
    }
    if (j_set_var(c, "messages", 8, (struct jv){.kind = JV_LIST, .u.l = l}) ||
        j_set_var(c, "add_generation_prompt", 21, jv_bool(opts && opts->add_generation_prompt)) ||
        j_set_var(c, "bos_token", 9, jv_cstr(opts && opts->bos_token ? opts->bos_token : "")) ||
        j_set_var(c, "eos_token", 9, jv_cstr(opts && opts->eos_token ? opts->eos_token : "")))
        return -1;
    return 0;
}

static size_t input_bytes(const char *tmpl, const struct lm_chat_msg *msgs, size_t n_msgs)
{
    size_t n = strlen(tmpl);
    for (size_t i = 0; i < n_msgs; i++)
        n += (msgs[i].role ? strlen(msgs[i].role) : 0) + (msgs[i].content ? strlen(msgs[i].content) : 0) + 64;
    return n;
}

static void set_err(char *err, size_t errlen, const char *msg)
{
    if (err && errlen) {
        strncpy(err, msg, errlen - 1);
        err[errlen - 1] = 0;
    }
}

lm_status lm_chat_render(const char *tmpl, const struct lm_chat_msg *msgs, size_t n_msgs,
                         const struct lm_chat_opts *opts, char **out, char *err, size_t errlen)
{
    if (!tmpl || !out || (n_msgs && !msgs)) {
        set_err(err, errlen, "lm_chat_render: NULL argument");
        return LM_ERR_INVALID_ARG;
    }
    if (err && errlen)
        err[0] = 0;
    struct jctx c = {.err = err, .errlen = errlen, .status = LM_OK, .max_depth = J_MAX_DEPTH};
    c.max_steps = opts && opts->max_steps ? opts->max_steps : LM_CHAT_MAX_STEPS;
    c.max_output = opts && opts->max_output ? opts->max_output : LM_CHAT_MAX_OUTPUT;
    c.now = opts ? opts->now : 0;
    c.now_string = opts ? opts->now_string : NULL;
    const size_t in = input_bytes(tmpl, msgs, n_msgs);
    c.ar.budget = (size_t)64 << 20;
    c.ar.budget += c.max_output < SIZE_MAX / 8 ? 2 * c.max_output : SIZE_MAX / 4;
    c.ar.budget += in < SIZE_MAX / 64 ? 16 * in : SIZE_MAX / 4;

    struct jtok *toks = NULL;
    size_t n_toks = 0;
    struct jnode *root = NULL;
    struct jbuf buf = {0};
    lm_status st = LM_OK;
    if (j_lex(&c, tmpl, &toks, &n_toks) || j_parse(&c, toks, n_toks, &root) ||
        !(c.scope = c.root = j_alloc(&c, 64)) || bind_inputs(&c, msgs, n_msgs, opts))
        goto out_free;
    c.out = &buf;
    if (j_exec_body(&c, root->kids, root->n_kids) < 0)
        goto out_free;
    char *text = malloc(buf.n + 1);
    if (!text) {
        j_fail(&c, LM_ERR_NOMEM, "out of memory");
        goto out_free;
    }
    if (buf.n)
        memcpy(text, buf.p, buf.n);
    text[buf.n] = 0;
    *out = text;
out_free:
    st = c.failed ? (c.status != LM_OK ? c.status : LM_ERR_CORRUPT) : LM_OK;
    j_arena_free(&c.ar);
    return st;
}

/* ---- built-in formats ---- */

static const char CHATML[] =
    "{%- for message in messages -%}\n"
    "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' -}}\n"
    "{%- endfor -%}\n"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}\n";

static const char LLAMA2[] =
    "{%- if messages and messages[0].role == 'system' -%}\n"
    "  {%- set sys = messages[0].content -%}{%- set turns = messages[1:] -%}\n"
    "{%- else -%}\n"
    "  {%- set sys = none -%}{%- set turns = messages -%}\n"
    "{%- endif -%}\n"
    "{%- for message in turns -%}\n"
    "  {%- if (message.role == 'user') != (loop.index0 % 2 == 0) -%}\n"
    "    {{- raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') -}}\n"
    "  {%- endif -%}\n"
    "  {%- set text = message.content -%}\n"
    "  {%- if loop.first and sys is not none -%}\n"
    "    {%- set text = '<<SYS>>\\n' + sys + '\\n<</SYS>>\\n\\n' + text -%}\n"
    "  {%- endif -%}\n"
    "  {%- if message.role == 'user' -%}\n"
    "    {{- bos_token + '[INST] ' + text.strip() + ' [/INST]' -}}\n"
    "  {%- elif message.role == 'assistant' -%}\n"
    "    {{- ' ' + text.strip() + ' ' + eos_token -}}\n"
    "  {%- endif -%}\n"
    "{%- endfor -%}\n";

static const char ZEPHYR[] =
    "{%- for message in messages -%}\n"
    "  {%- if message.role in ['user', 'system', 'assistant'] -%}\n"
    "    {{- '<|' + message.role + '|>\\n' + message.content + eos_token + '\\n' -}}\n"
    "  {%- endif -%}\n"
    "  {%- if loop.last and add_generation_prompt -%}{{- '<|assistant|>\\n' -}}{%- endif -%}\n"
    "{%- endfor -%}\n";

/* Gemma has no system role: a system message goes before the first user turn's text */
static const char GEMMA[] =
    "{{- bos_token -}}\n"
    "{%- set ns = namespace(sys='') -%}\n"
    "{%- for message in messages -%}\n"
    "  {%- if message.role == 'system' -%}\n"
    "    {%- set ns.sys = ns.sys + message.content | trim + '\\n\\n' -%}\n"
    "  {%- else -%}\n"
    "    {%- set role = 'model' if message.role == 'assistant' else message.role -%}\n"
    "    {%- set text = message.content | trim -%}\n"
    "    {%- if role == 'user' and ns.sys -%}{%- set text = ns.sys + text -%}{%- set ns.sys = '' -%}{%- endif -%}\n"
    "    {{- '<start_of_turn>' + role + '\\n' + text + '<end_of_turn>\\n' -}}\n"
    "  {%- endif -%}\n"
    "{%- endfor -%}\n"
    "{%- if add_generation_prompt -%}{{- '<start_of_turn>model\\n' -}}{%- endif -%}\n";

static const char PHI3[] =
    "{%- for message in messages -%}\n"
    "  {%- if message.role in ['system', 'user', 'assistant'] -%}\n"
    "    {{- '<|' + message.role + '|>\\n' + message.content + '<|end|>\\n' -}}\n"
    "  {%- endif -%}\n"
    "{%- endfor -%}\n"
    "{%- if add_generation_prompt -%}{{- '<|assistant|>\\n' -}}{%- endif -%}\n";

static const char LLAMA3[] =
    "{%- for message in messages -%}\n"
    "  {%- if loop.first -%}{{- bos_token -}}{%- endif -%}\n"
    "  {{- '<|start_header_id|>' + message.role + '<|end_header_id|>\\n\\n' + message.content | trim + "
    "'<|eot_id|>' -}}\n"
    "{%- endfor -%}\n"
    "{%- if add_generation_prompt -%}{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' -}}{%- endif -%}\n";

/* Mistral instruct (v1): a system message is put before the first user turn's text */
static const char MISTRAL[] =
    "{%- if messages and messages[0].role == 'system' -%}\n"
    "  {%- set sys = messages[0].content + '\\n\\n' -%}{%- set turns = messages[1:] -%}\n"
    "{%- else -%}\n"
    "  {%- set sys = '' -%}{%- set turns = messages -%}\n"
    "{%- endif -%}\n"
    "{{- bos_token -}}\n"
    "{%- for message in turns -%}\n"
    "  {%- if (message.role == 'user') != (loop.index0 % 2 == 0) -%}\n"
    "    {{- raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') -}}\n"
    "  {%- endif -%}\n"
    "  {%- if message.role == 'user' -%}\n"
    "    {{- '[INST] ' + (sys if loop.first else '') + message.content + ' [/INST]' -}}\n"
    "  {%- elif message.role == 'assistant' -%}\n"
    "    {{- message.content + eos_token -}}\n"
    "  {%- endif -%}\n"
    "{%- endfor -%}\n";

static const struct {
    const char *name, *src;
} BUILTINS[] = {
    {"chatml", CHATML}, {"llama-2", LLAMA2}, {"zephyr", ZEPHYR}, {"gemma", GEMMA},
    {"phi-3", PHI3},    {"llama-3", LLAMA3}, {"mistral", MISTRAL},
};

static const char *const NAMES[] = {"chatml", "llama-2", "zephyr", "gemma", "phi-3", "llama-3", "mistral", NULL};

const char *lm_chat_builtin(const char *name)
{
    for (size_t i = 0; name && i < sizeof BUILTINS / sizeof *BUILTINS; i++)
        if (!strcmp(BUILTINS[i].name, name))
            return BUILTINS[i].src;
    return NULL;
}

const char *const *lm_chat_builtin_names(void) { return NAMES; }

/* GGUF general.architecture -> default format (models of these families
 * that ship no template); llama is decided by its vocabulary */
static const struct {
    const char *arch, *format;
} ARCH_FORMATS[] = {
    {"llama", "llama-2"},   {"qwen2", "chatml"},     {"qwen", "chatml"},    {"gemma", "gemma"},
    {"phi3", "phi-3"},      {"phi2", "chatml"},      {"stablelm", "zephyr"}, {"falcon", "chatml"},
    {"mpt", "chatml"},      {"gpt2", "chatml"},      {"starcoder", "chatml"}, {"bloom", "chatml"},
    {"baichuan", "chatml"}, {"refact", "chatml"},    {"plamo", "chatml"},   {"persimmon", "chatml"},
};

const char *lm_chat_builtin_for(const char *arch, bool has_eot_id, bool has_im_start)
{
    if (has_eot_id)
        return "llama-3";
    if (has_im_start)
        return "chatml";
    for (size_t i = 0; arch && i < sizeof ARCH_FORMATS / sizeof *ARCH_FORMATS; i++)
        if (!strcmp(ARCH_FORMATS[i].arch, arch))
            return ARCH_FORMATS[i].format;
    return "chatml";
}
