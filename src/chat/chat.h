/* chat.h - chat templates: turn a conversation into the prompt text a model
 * was trained on.
 *
 * A model's GGUF carries its template in `tokenizer.chat_template`, a Jinja
 * source (as Hugging Face's tokenizer_config.json has it). lm_chat_render runs
 * the subset of Jinja those templates use and produces what Python's jinja2
 * produces for them, byte for byte, under the settings transformers uses
 * (trim_blocks, lstrip_blocks, loop controls, `raise_exception`, `tojson`,
 * `strftime_now`). Models without a template get one of the built-in formats,
 * which are themselves Jinja sources run by the same engine.
 *
 * Templates are untrusted input (they come from model files and, through the
 * server, from users): a bad template, a runaway loop or deep recursion ends
 * in an error message, never a crash; rendering is bounded in output size,
 * steps and nesting depth.
 *
 * Everything here is thread-safe: no global state. Layer: above core only
 * (no model, no llama.h). */
#ifndef LM_CHAT_H
#define LM_CHAT_H

#include <stdbool.h>
#include <stddef.h>

#include "core/status.h"

/* One message of a conversation. role is "system", "user", "assistant" (or
 * whatever the caller passes through; templates decide what they accept). */
struct lm_chat_msg {
    const char *role;
    const char *content;
};

struct lm_chat_opts {
    bool add_generation_prompt; /* end with the header of the assistant's turn */
    const char *bos_token;      /* the template's `bos_token` ("" if NULL) */
    const char *eos_token;      /* the template's `eos_token` ("" if NULL) */
    /* Optional (zero: the default). */
    long long now;              /* strftime_now's clock, seconds since 1970 (0: the current time), local time */
    const char *now_string;     /* when set, strftime_now returns it whatever the format (reproducible prompts) */
    unsigned long long max_steps; /* 0: LM_CHAT_MAX_STEPS nodes evaluated */
    size_t max_output;            /* 0: LM_CHAT_MAX_OUTPUT bytes */
};

/* Default bounds of one render: nodes evaluated and bytes of output. Memory
 * is bounded too (twice the output limit plus 64 MiB plus 16 bytes per input
 * byte), nesting at 400 levels. */
#define LM_CHAT_MAX_STEPS 5000000ull
#define LM_CHAT_MAX_OUTPUT ((size_t)64 << 20)

/* Render msgs[0..n_msgs) with the Jinja template tmpl. The template sees
 * `messages` (a list of {"role", "content"} dicts; a NULL content is none),
 * `add_generation_prompt`, `bos_token` and `eos_token`; opts may be NULL (all
 * defaults). On LM_OK *out is the
 * NUL-terminated text (caller frees with free()). On failure *out is left
 * alone and err (when errlen > 0) holds a one-line message: a syntax error
 * with its line, an unknown filter/method, the template's own
 * raise_exception message ("TemplateError: <message>"), or a limit reached.
 * Returns LM_OK, LM_ERR_CORRUPT (a bad template, or one that raised, or a
 * step or nesting limit reached), LM_ERR_FULL (the output or memory limit),
 * LM_ERR_UNSUPPORTED (a jinja feature outside the subset, docs/chat.md),
 * LM_ERR_INVALID_ARG (NULL arguments) or LM_ERR_NOMEM. Thread-safe. */
lm_status lm_chat_render(const char *tmpl, const struct lm_chat_msg *msgs, size_t n_msgs,
                         const struct lm_chat_opts *opts, char **out, char *err, size_t errlen);

/* The Jinja source of a built-in format: "chatml", "llama-2", "zephyr",
 * "gemma", "phi-3", "llama-3", "mistral"; NULL for an unknown name. The
 * returned string is static. */
const char *lm_chat_builtin(const char *name);

/* The NULL-terminated list of built-in format names (static). */
const char *const *lm_chat_builtin_names(void);

/* The name of the built-in format for a model without a template (pass it
 * to lm_chat_builtin for the source), from its GGUF `general.architecture`
 * (and the vocabulary's special tokens when given: a vocabulary with
 * "<|eot_id|>" is llama-3, with "<|im_start|>" chatml). arch may be NULL.
 * Never NULL: "chatml" when nothing better is known. Static string. */
const char *lm_chat_builtin_for(const char *arch, bool has_eot_id, bool has_im_start);

#endif
