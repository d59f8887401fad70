/* chat.c - `lamina chat -m MODEL`: an interactive chat on the terminal.
 *
 * Each turn the whole conversation is rendered with the model's chat
 * template (src/chat/chat.h) and tokenized; only the tokens after the longest
 * common prefix with what the KV cache already holds are decoded, so a turn
 * costs its new tokens. The invariant: cache[0..n_cache) are exactly the
 * tokens at positions 0..n_cache-1 of sequence 0 in the KV cache.
 *
 * Context shift: when a turn's prompt plus room for the reply does not fit,
 * the oldest turns (user message and its reply) are dropped, the system
 * prompt kept, and the conversation re-rendered; the common prefix then ends
 * right after the system prompt, so the rest is decoded again. A reply that
 * outgrows the room left fills the window: then the older half of the reply
 * so far leaves the KV cache and the rest is shifted down, as `lamina run`
 * does (the prompt stays); the next turn re-renders the conversation.
 *
 * A reply ends on the end-of-text token, on a special end-of-turn token of
 * the vocabulary (<|im_end|>, <|eot_id|>, <end_of_turn>, ...), when the text
 * ends with the template's end-of-turn string, after -n tokens, or on Ctrl-C.
 * Replies stream to stdout (an end-of-turn string is held back until it is
 * known not to be one); messages and errors go to stderr.
 *
 * Input: libedit's line editing and history on a terminal; plain lines from
 * a pipe (so it can be scripted). A line ending in '\' continues on the next.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef LM_HAVE_LIBEDIT
#include <editline/readline.h>
#endif

#include "chat/chat.h"
#include "cli.h"
#include "common/sampler.h"
#include "llama.h"

struct chat_opts {
    struct cli_model_opts m;
    struct lm_sampler_params sampling;
    const char *system, *tmpl;
    long long n_predict;
};

/* End-of-turn strings: special tokens of the vocabulary stop a reply when
 * sampled; the text of the template's own stops it when the reply ends in it. */
static const char *const eot_strings[] = {"<|im_end|>", "<|eot_id|>", "<end_of_turn>", "<|end|>", "<|endoftext|>",
                                          "</s>"};
#define N_EOT_STRINGS (sizeof eot_strings / sizeof eot_strings[0])
#define MAX_EOG 8

struct chat {
    const struct chat_opts *o;
    struct llama_model *model;
    struct llama_context *ctx;
    struct lm_sampler *sampler;
    char *tmpl;                    /* the Jinja source in use */
    char bos_text[64], eos_text[64];
    bool add_bos;
    const char *stop_text[N_EOT_STRINGS]; /* end-of-turn strings in the template's text */
    int n_stop_text;
    llama_token eog[MAX_EOG];      /* tokens that end a reply */
    int n_eog;
    struct lm_chat_msg *msgs;      /* role and content strings owned */
    size_t n_msgs, cap_msgs;
    llama_token *cache;            /* tokens in the KV cache (positions 0..n_cache) */
    int n_cache, n_ctx;
    int n_prompt;                  /* tokens of this turn's prompt */
    char *last_prompt;             /* the last rendered prompt text (for /prompt) */
    bool interactive;
};

static volatile sig_atomic_t interrupted;

static void on_sigint(int sig)
{
    (void)sig;
    interrupted = 1;
}

/* ---- options ---- */

static void chat_usage(FILE *f)
{
    fputs("usage: lamina chat -m MODEL [options]\n\n"
          "An interactive chat. Type a message and press Enter; end a line with '\\' to continue\n"
          "the message on the next line. Commands: /help, /clear, /save FILE, /prompt [FILE], /exit.\n"
          "Ctrl-C stops a reply. Without a terminal, messages are read line by line from stdin.\n\n"
          "  -sys, --system-prompt TEXT  the system message of the conversation\n"
          "  --chat-template NAME|JINJA  a built-in format (chatml, llama-2, zephyr, gemma, phi-3,\n"
          "                              llama-3, mistral) or a Jinja template (default: the model's)\n"
          "  -n, --n-predict N           most tokens per reply (default -1: until end of turn)\n",
          f);
    cli_model_usage(f);
    cli_sampling_usage(f);
    fputs("  -h, --help                  this text\n", f);
}

/* Returns 0 ok, 1 help shown, 2 usage error. */
static int parse_chat(int argc, char **argv, struct chat_opts *o)
{
    *o = (struct chat_opts){.m = cli_model_defaults(), .sampling = lm_sampler_default_params(), .n_predict = -1};
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        int r = cli_model_flag(argc, argv, &i, &o->m);
        if (!r)
            r = cli_sampling_flag(argc, argv, &i, &o->sampling);
        if (r < 0)
            return 2;
        if (r > 0)
            continue;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            chat_usage(stdout);
            return 1;
        } else if (!strcmp(a, "-sys") || !strcmp(a, "--system-prompt")) {
            if (!(o->system = cli_value(argc, argv, &i)))
                return 2;
        } else if (!strcmp(a, "--chat-template")) {
            if (!(o->tmpl = cli_value(argc, argv, &i)))
                return 2;
        } else if (!strcmp(a, "-n") || !strcmp(a, "--n-predict")) {
            const char *v = cli_value(argc, argv, &i);
            if (!v || !cli_int(a, v, -1, 1LL << 30, &o->n_predict))
                return 2;
        } else {
            fprintf(stderr, "error: unknown option '%s' (see lamina chat --help)\n", a);
            return 2;
        }
    }
    if (!o->m.model) {
        fprintf(stderr, "error: lamina chat needs a model: -m FILE (see lamina chat --help)\n");
        return 2;
    }
    if (o->tmpl && !lm_chat_builtin(o->tmpl) && !strstr(o->tmpl, "{{") && !strstr(o->tmpl, "{%")) {
        fprintf(stderr, "error: --chat-template: '%s' is neither a built-in format nor a Jinja template:", o->tmpl);
        for (const char *const *n = lm_chat_builtin_names(); *n; n++)
            fprintf(stderr, " %s", *n);
        fputc('\n', stderr);
        return 2;
    }
    return 0;
}

/* ---- the conversation ---- */

static bool conv_push(struct chat *c, const char *role, const char *content)
{
    if (c->n_msgs == c->cap_msgs) {
        size_t nc = c->cap_msgs ? 2 * c->cap_msgs : 8;
        struct lm_chat_msg *nm = realloc(c->msgs, nc * sizeof *nm);
        if (!nm)
            return false;
        c->msgs = nm;
        c->cap_msgs = nc;
    }
    char *r = strdup(role), *t = strdup(content);
    if (!r || !t) {
        free(r);
        free(t);
        return false;
    }
    c->msgs[c->n_msgs++] = (struct lm_chat_msg){r, t};
    return true;
}

/* Remove messages [from, from + n). */
static void conv_remove(struct chat *c, size_t from, size_t n)
{
    for (size_t i = from; i < from + n; i++) {
        free((char *)c->msgs[i].role);
        free((char *)c->msgs[i].content);
    }
    memmove(c->msgs + from, c->msgs + from + n, (c->n_msgs - from - n) * sizeof *c->msgs);
    c->n_msgs -= n;
}

/* Drop the oldest turn (a user message and what follows up to the next user
 * message), never the system prompt nor the last user message. False when
 * there is nothing left to drop. */
static bool conv_drop_oldest(struct chat *c)
{
    size_t first = c->n_msgs && !strcmp(c->msgs[0].role, "system") ? 1 : 0, last_user = c->n_msgs;
    for (size_t i = c->n_msgs; i-- > first;)
        if (!strcmp(c->msgs[i].role, "user")) {
            last_user = i;
            break;
        }
    if (last_user == c->n_msgs || last_user <= first)
        return false;
    size_t end = first + 1;
    while (end < last_user && strcmp(c->msgs[end].role, "user"))
        end++;
    conv_remove(c, first, end - first);
    return true;
}

/* ---- template, special tokens ---- */

/* The single special token text s is, or -1. */
static llama_token special_token(const struct llama_model *model, const char *s)
{
    llama_token t[4];
    int n = llama_tokenize(model, s, (int32_t)strlen(s), t, 4, false, true);
    if (n != 1 || llama_token_get_type(model, t[0]) == LLAMA_TOKEN_TYPE_NORMAL)
        return -1;
    return t[0];
}

static void token_text(const struct llama_model *model, llama_token t, char *buf, size_t cap)
{
    const char *s = t >= 0 && t < llama_n_vocab(model) ? llama_token_get_text(model, t) : NULL;
    snprintf(buf, cap, "%s", s ? s : "");
}

/* The Jinja source: --chat-template, else the model's, else the built-in
 * format for its architecture and vocabulary. */
static int choose_template(struct chat *c)
{
    const char *name = c->o->tmpl;
    if (name && !lm_chat_builtin(name)) {
        c->tmpl = strdup(name);
        return c->tmpl ? 0 : 1;
    }
    int32_t n = name ? -1 : llama_model_meta_val_str(c->model, "tokenizer.chat_template", NULL, 0);
    if (n >= 0) {
        if (!(c->tmpl = malloc((size_t)n + 1)))
            return 1;
        llama_model_meta_val_str(c->model, "tokenizer.chat_template", c->tmpl, (size_t)n + 1);
        return 0;
    }
    if (!name) {
        char arch[64] = "";
        llama_model_meta_val_str(c->model, "general.architecture", arch, sizeof arch);
        name = lm_chat_builtin_for(arch, special_token(c->model, "<|eot_id|>") >= 0,
                                   special_token(c->model, "<|im_start|>") >= 0);
    }
    const char *src = lm_chat_builtin(name);
    if (c->o->m.verbose)
        fprintf(stderr, "chat: built-in format %s\n", name);
    c->tmpl = strdup(src ? src : "");
    return c->tmpl ? 0 : 1;
}

/* What ends a reply: the EOS token, the vocabulary's special end-of-turn
 * tokens, and the end-of-turn strings the template writes literally. */
static void find_stops(struct chat *c)
{
    c->eog[c->n_eog++] = llama_token_eos(c->model);
    for (size_t i = 0; i < N_EOT_STRINGS; i++) {
        llama_token t = special_token(c->model, eot_strings[i]);
        if (t >= 0 && c->n_eog < MAX_EOG)
            c->eog[c->n_eog++] = t;
        if (strstr(c->tmpl, eot_strings[i]))
            c->stop_text[c->n_stop_text++] = eot_strings[i];
    }
    token_text(c->model, llama_token_bos(c->model), c->bos_text, sizeof c->bos_text);
    token_text(c->model, llama_token_eos(c->model), c->eos_text, sizeof c->eos_text);
    c->add_bos = llama_add_bos_token(c->model) != 0;
}

static bool is_eog(const struct chat *c, llama_token t)
{
    for (int i = 0; i < c->n_eog; i++)
        if (c->eog[i] == t)
            return true;
    return false;
}

/* ---- prompt and KV cache ---- */

/* Render the conversation, ending with the assistant's header. A leading BOS
 * text is dropped when the tokenizer adds BOS, so that the text tokenizes as
 * `lamina run -p TEXT` would. */
static int render(struct chat *c, char **out)
{
    struct lm_chat_opts co = {.add_generation_prompt = true, .bos_token = c->bos_text, .eos_token = c->eos_text};
    char err[256] = "", *text = NULL;
    lm_status st = lm_chat_render(c->tmpl, c->msgs, c->n_msgs, &co, &text, err, sizeof err);
    if (st) {
        fprintf(stderr, "error: chat template: %s\n", err[0] ? err : lm_status_str(st));
        return 1;
    }
    size_t skip = c->add_bos && c->bos_text[0] && !strncmp(text, c->bos_text, strlen(c->bos_text))
                      ? strlen(c->bos_text) : 0;
    memmove(text, text + skip, strlen(text + skip) + 1);
    *out = text;
    return 0;
}

/* Tokens of text into *toks (caller frees); the count, or -1. */
static int tokenize(const struct chat *c, const char *text, llama_token **toks)
{
    int32_t len = (int32_t)strlen(text), cap = len + 2;
    *toks = malloc((size_t)cap * sizeof **toks);
    if (!*toks)
        return -1;
    int n = llama_tokenize(c->model, text, len, *toks, cap, c->add_bos, true);
    if (n < 0) {
        free(*toks);
        *toks = NULL;
    }
    return n;
}

/* Make the cache hold toks[0..n): keep the common prefix, decode the rest
 * (at least the last token, for fresh logits). */
static int sync_cache(struct chat *c, const llama_token *toks, int n)
{
    if (n <= 0) {
        fprintf(stderr, "error: the chat template rendered an empty prompt\n");
        return 1;
    }
    int same = 0;
    while (same < n && same < c->n_cache && c->cache[same] == toks[same])
        same++;
    if (same == n)
        same--;
    llama_kv_cache_seq_rm(c->ctx, 0, same, -1);
    c->n_cache = same;
    int n_batch = (int)llama_n_batch(c->ctx);
    while (c->n_cache < n) {
        int k = n - c->n_cache < n_batch ? n - c->n_cache : n_batch;
        memcpy(c->cache + c->n_cache, toks + c->n_cache, (size_t)k * sizeof *toks);
        int32_t r = llama_decode(c->ctx, llama_batch_get_one(c->cache + c->n_cache, k, c->n_cache, 0));
        if (r) {
            fprintf(stderr, "error: decode failed (%d)\n", r);
            llama_kv_cache_seq_rm(c->ctx, 0, c->n_cache, -1);
            return 1;
        }
        c->n_cache += k;
    }
    return 0;
}

/* Render, dropping the oldest turns until the prompt leaves `room` tokens
 * free, and bring the cache up to date; the sampler restarts with the prompt
 * as its history. Returns 0, 1 on an error, 3 when even the shortest
 * conversation does not fit. */
static int fit_prompt(struct chat *c, int room)
{
    for (;;) {
        char *text = NULL;
        llama_token *toks = NULL;
        if (render(c, &text))
            return 1;
        int n = tokenize(c, text, &toks);
        if (n < 0) {
            free(text);
            return 1;
        }
        bool fits = n + room <= c->n_ctx;
        if (fits || !conv_drop_oldest(c)) {
            int rc = n + 1 > c->n_ctx ? 3 : 0;
            if (rc == 0 && (rc = sync_cache(c, toks, n)) == 0) {
                c->n_prompt = n;
                lm_sampler_reset(c->sampler);
                for (int i = 0; i < n; i++)
                    lm_sampler_accept(c->sampler, c->ctx, toks[i], false);
                free(c->last_prompt);
                c->last_prompt = text;
                text = NULL;
            }
            free(text);
            free(toks);
            return rc;
        }
        if (c->o->m.verbose)
            fprintf(stderr, "chat: context full: dropped the oldest turn\n");
        free(text);
        free(toks);
    }
}

/* ---- the reply ---- */

struct reply {
    struct lm_strbuf b; /* the text so far */
    size_t printed;
    bool started; /* past the leading white space */
};

/* True when the text ends with a stop string (which is then cut off).
 * Print what can no longer be the start of one (everything when `flush`);
 * leading white space is not printed. */
static bool reply_stream(const struct chat *c, struct reply *r, bool flush)
{
    bool stop = false;
    for (int i = 0; i < c->n_stop_text && !stop; i++) {
        size_t k = strlen(c->stop_text[i]);
        if (r->b.n >= k && !memcmp(r->b.p + r->b.n - k, c->stop_text[i], k)) {
            r->b.n -= k;
            r->b.p[r->b.n] = 0;
            stop = true;
        }
    }
    size_t safe = r->b.n;
    for (int i = 0; i < c->n_stop_text && !flush && !stop; i++) {
        size_t k = strlen(c->stop_text[i]);
        for (size_t j = k - 1; j > 0; j--) /* the longest tail that starts the stop string */
            if (r->b.n >= j && !memcmp(r->b.p + r->b.n - j, c->stop_text[i], j)) {
                if (r->b.n - j < safe)
                    safe = r->b.n - j;
                break;
            }
    }
    if (!r->started)
        while (r->printed < safe && strchr(" \t\r\n", r->b.p[r->printed]))
            r->printed++;
    if (r->printed < safe) {
        r->started = true;
        fwrite(r->b.p + r->printed, 1, safe - r->printed, stdout);
        fflush(stdout);
        r->printed = safe;
    }
    return stop;
}

/* Append token t's text to the reply. */
static bool reply_token(const struct chat *c, struct reply *r, llama_token t)
{
    return lm_token_append(c->model, t, &r->b) == LM_OK;
}

/* Tokens kept free for a reply when a turn starts. */
static int reply_room(const struct chat *c)
{
    long long n = c->o->n_predict;
    return n > 0 && n < c->n_ctx / 2 ? (int)n : c->n_ctx / (n > 0 ? 2 : 4);
}

/* The window is full during a reply: the older half of the reply so far
 * leaves the cache and the rest moves down (the prompt stays), as `lamina
 * run` does. False when the reply holds nothing to drop. */
static bool shift_reply(struct chat *c)
{
    int keep = c->n_prompt, n_discard = (c->n_cache - c->n_prompt) / 2;
    if (n_discard <= 0)
        return false;
    llama_kv_cache_seq_rm(c->ctx, 0, keep, keep + n_discard);
    llama_kv_cache_seq_shift(c->ctx, 0, keep + n_discard, c->n_cache, -n_discard);
    memmove(c->cache + keep, c->cache + keep + n_discard,
            (size_t)(c->n_cache - keep - n_discard) * sizeof *c->cache);
    c->n_cache -= n_discard;
    if (c->o->m.verbose)
        fprintf(stderr, "chat: context full: %d reply tokens dropped from the cache\n", n_discard);
    return true;
}

/* Decode the sampled token t at the end of the cache, shifting first when
 * the window is full. Returns 0, 1 on an error, 3 when nothing can be dropped. */
static int append_token(struct chat *c, llama_token t)
{
    if (c->n_cache + 1 > c->n_ctx && !shift_reply(c))
        return 3;
    c->cache[c->n_cache] = t;
    int32_t rc = llama_decode(c->ctx, llama_batch_get_one(c->cache + c->n_cache, 1, c->n_cache, 0));
    if (rc) {
        fprintf(stderr, "error: decode failed (%d)\n", rc);
        return 1;
    }
    c->n_cache++;
    return 0;
}

/* Answer the conversation's last message, streaming the reply into r.
 * Returns 0, 1 on an error, 3 when the conversation does not fit. */
static int generate(struct chat *c, struct reply *r)
{
    int rc = fit_prompt(c, reply_room(c));
    if (rc)
        return rc;
    struct sigaction old, sa = {.sa_handler = on_sigint};
    sigemptyset(&sa.sa_mask);
    interrupted = 0;
    sigaction(SIGINT, &sa, &old);
    for (long long i = 0; (c->o->n_predict < 0 || i < c->o->n_predict) && !interrupted; i++) {
        llama_token t = lm_sampler_sample(c->sampler, c->ctx, -1);
        if (t < 0) {
            fprintf(stderr, "error: no token to sample\n");
            rc = 1;
            break;
        }
        if (is_eog(c, t))
            break;
        if (lm_sampler_accept(c->sampler, c->ctx, t, true) || !reply_token(c, r, t)) {
            rc = 1;
            break;
        }
        if (reply_stream(c, r, false))
            break;
        if ((rc = append_token(c, t)) != 0) {
            if (rc == 3)
                fprintf(stderr, "\n(context full: the reply is cut here)\n");
            rc = rc == 3 ? 0 : rc;
            break;
        }
    }
    sigaction(SIGINT, &old, NULL);
    reply_stream(c, r, true);
    return rc;
}

/* One exchange: add the user's message, answer it, keep the answer. */
static int chat_turn(struct chat *c, const char *msg)
{
    if (!conv_push(c, "user", msg))
        return 1;
    struct reply r = {0};
    int rc = generate(c, &r);
    if (rc == 3) {
        fprintf(stderr, "error: the message does not fit the context (%d tokens); not sent\n", c->n_ctx);
        conv_remove(c, c->n_msgs - 1, 1);
        rc = 0;
    } else if (rc == 0) {
        fputc('\n', stdout);
        fflush(stdout);
        const char *t = r.b.p ? r.b.p : "";
        t += strspn(t, " \t\r\n");
        if (!conv_push(c, "assistant", t))
            rc = 1;
    }
    if (interrupted && c->interactive)
        fprintf(stderr, "(stopped)\n");
    lm_strbuf_free(&r.b);
    return rc;
}

/* ---- /save, /prompt ---- */

/* Length of the valid UTF-8 sequence at s, or 0. */
static size_t utf8_len(const unsigned char *s)
{
    size_t n = s[0] < 0x80 ? 1 : s[0] >= 0xC2 && s[0] < 0xE0 ? 2 : s[0] >= 0xE0 && s[0] < 0xF0 ? 3
             : s[0] >= 0xF0 && s[0] < 0xF5 ? 4 : 0;
    for (size_t i = 1; i < n; i++)
        if ((s[i] & 0xC0) != 0x80)
            return 0;
    return n;
}

/* s as a JSON string; invalid UTF-8 (a reply cut inside a character) becomes U+FFFD. */
static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p;) {
        size_t n = utf8_len(p);
        if (n == 0) {
            fputs("\\ufffd", f);
            p++;
        } else if (*p == '"' || *p == '\\') {
            fprintf(f, "\\%c", *p++);
        } else if (*p == '\n' || *p == '\t') {
            fputs(*p++ == '\n' ? "\\n" : "\\t", f);
        } else if (*p < 0x20) {
            fprintf(f, "\\u%04x", *p++);
        } else {
            fwrite(p, 1, n, f);
            p += n;
        }
    }
    fputc('"', f);
}

/* The conversation as JSON: {"messages": [{"role": ..., "content": ...}, ...]},
 * the shape of OpenAI's chat API. */
static void save_conversation(const struct chat *c, const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "error: cannot write %s\n", path);
        return;
    }
    fputs("{\n  \"messages\": [", f);
    for (size_t i = 0; i < c->n_msgs; i++) {
        fputs(i ? ",\n    {\"role\": " : "\n    {\"role\": ", f);
        json_str(f, c->msgs[i].role);
        fputs(", \"content\": ", f);
        json_str(f, c->msgs[i].content);
        fputc('}', f);
    }
    fputs(c->n_msgs ? "\n  ]\n}\n" : "]\n}\n", f);
    if (fclose(f))
        fprintf(stderr, "error: cannot write %s\n", path);
    else
        fprintf(stderr, "(saved %zu messages to %s)\n", c->n_msgs, path);
}

static void save_prompt(const struct chat *c, const char *path)
{
    const char *p = c->last_prompt ? c->last_prompt : "";
    FILE *f = path ? fopen(path, "w") : stdout;
    if (!f) {
        fprintf(stderr, "error: cannot write %s\n", path);
        return;
    }
    fputs(p, f);
    if (path ? fclose(f) != 0 : fflush(f) != 0)
        fprintf(stderr, "error: cannot write %s\n", path ? path : "stdout");
}

/* ---- input and commands ---- */

static const char chat_help[] =
    "  /help           this text\n"
    "  /clear          forget the conversation (the system prompt stays) and the KV cache\n"
    "  /save FILE      write the conversation to FILE as JSON ({\"messages\": [{\"role\", \"content\"}]})\n"
    "  /prompt [FILE]  the prompt text the last reply was generated from (to FILE or stdout)\n"
    "  /exit, /quit    leave (so does end of input, Ctrl-D)\n"
    "  A line ending in '\\' continues the message on the next line. Ctrl-C stops a reply.\n";

/* One line without its newline (caller frees), or NULL at end of input. */
static char *read_line(const struct chat *c, const char *prompt)
{
#ifdef LM_HAVE_LIBEDIT
    if (c->interactive) {
        char *l = readline(prompt);
        if (l && *l)
            add_history(l);
        return l;
    }
#endif
    if (c->interactive) {
        fputs(prompt, stdout);
        fflush(stdout);
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t n = getline(&line, &cap, stdin);
    if (n < 0) {
        free(line);
        return NULL;
    }
    while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
        line[--n] = 0;
    return line;
}

/* A message: lines joined while they end in '\' (caller frees); NULL at end of input. */
static char *read_message(const struct chat *c)
{
    char *msg = read_line(c, "> ");
    size_t len = msg ? strlen(msg) : 0;
    while (msg && len > 0 && msg[len - 1] == '\\') {
        msg[len - 1] = '\n';
        char *more = read_line(c, "... ");
        if (!more) {
            msg[--len] = 0;
            break;
        }
        size_t m = strlen(more);
        char *nm = realloc(msg, len + m + 1);
        if (!nm) {
            free(more);
            break;
        }
        msg = nm;
        memcpy(msg + len, more, m + 1);
        len += m;
        free(more);
    }
    return msg;
}

/* A /command: 0 go on, 1 leave. */
static int command(struct chat *c, const char *line)
{
    char name[16] = "";
    size_t n = strcspn(line, " \t");
    const char *arg = line + n + strspn(line + n, " \t");
    if (n < sizeof name)
        memcpy(name, line, n);
    if (!strcmp(name, "/exit") || !strcmp(name, "/quit"))
        return 1;
    if (!strcmp(name, "/help")) {
        fputs(chat_help, stdout);
    } else if (!strcmp(name, "/clear")) {
        size_t first = c->n_msgs && !strcmp(c->msgs[0].role, "system") ? 1 : 0;
        conv_remove(c, first, c->n_msgs - first);
        llama_kv_cache_clear(c->ctx);
        c->n_cache = 0;
        fprintf(stderr, "(conversation cleared)\n");
    } else if (!strcmp(name, "/save") && *arg) {
        save_conversation(c, arg);
    } else if (!strcmp(name, "/save")) {
        fprintf(stderr, "error: /save needs a file name\n");
    } else if (!strcmp(name, "/prompt")) {
        save_prompt(c, *arg ? arg : NULL);
    } else {
        fprintf(stderr, "error: unknown command '%s' (type /help)\n", line);
    }
    return 0;
}

/* ---- main ---- */

/* Set up the template, the stops and the sampler; check that the template renders. */
static int chat_setup(struct chat *c)
{
    char err[256] = "";
    if (!(c->cache = malloc((size_t)c->n_ctx * sizeof *c->cache)) || choose_template(c))
        return 1;
    find_stops(c);
    if (lm_sampler_new(c->model, &c->o->sampling, NULL, LM_SAMPLER_CTX_RNG, &c->sampler, err, sizeof err)) {
        fprintf(stderr, "error: %s\n", err[0] ? err : "cannot make the sampler");
        return 1;
    }
    if (c->o->system && !conv_push(c, "system", c->o->system))
        return 1;
    char *probe = NULL;
    if (!conv_push(c, "user", "hello") || render(c, &probe))
        return 1;
    free(probe);
    conv_remove(c, c->n_msgs - 1, 1);
    return 0;
}

static int chat_loop(struct chat *c)
{
    if (c->interactive)
        fprintf(stderr, "lamina chat: %s (%d tokens of context). /help for commands, a line ending in '\\' "
                        "continues, Ctrl-D leaves.\n", c->o->m.model, c->n_ctx);
    for (;;) {
        char *msg = read_message(c);
        if (!msg)
            break;
        int rc = 0;
        if (msg[0] == '/')
            rc = command(c, msg) ? -1 : 0;
        else if (msg[strspn(msg, " \t\r\n")])
            rc = chat_turn(c, msg);
        free(msg);
        if (rc < 0)
            break;
        if (rc)
            return 1;
    }
    if (c->interactive)
        fputc('\n', stdout);
    return 0;
}

static int chat_model(const struct chat_opts *o)
{
    struct chat c = {.o = o, .interactive = isatty(STDIN_FILENO)};
    if (cli_model_load(&o->m, &c.model, &c.ctx))
        return 1;
    c.n_ctx = (int)llama_n_ctx(c.ctx);
    int rc = chat_setup(&c);
    if (rc == 0)
        rc = chat_loop(&c);
    conv_remove(&c, 0, c.n_msgs);
    free(c.msgs);
    free(c.cache);
    free(c.tmpl);
    free(c.last_prompt);
    lm_sampler_free(c.sampler);
    llama_free(c.ctx);
    llama_free_model(c.model);
    return rc;
}

int cmd_chat(int argc, char **argv)
{
    struct chat_opts o;
    int r = parse_chat(argc, argv, &o);
    if (r == 1)
        return 0;
    if (r)
        return r;
    llama_backend_init(false);
    r = chat_model(&o);
    llama_backend_free();
    return r;
}
