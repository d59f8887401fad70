/* fuzz_chat.c - fuzz target for chat templates: lex, parse and render.
 *
 * Input: a Jinja template, then optionally a NUL byte and a conversation:
 * messages separated by NUL bytes, each "role\x01content" (a message without
 * \x01 is a user message with that content; the first byte of the
 * conversation, when it is \x02, also asks for the generation prompt).
 * Without a conversation the template renders over a fixed three-message one
 * and over none. The input's text is then the user's message to every
 * built-in format, which must render it (content never makes them fail).
 *
 * Promises (a broken one calls abort()):
 *  - a render ends in LM_OK with a NUL-terminated text no longer than the
 *    output limit, or in a documented error code with a non-empty message,
 *    and leaves *out alone on failure;
 *  - the same input renders the same way twice (no hidden state).
 * Every render is bounded by a small step limit so no input runs long.
 * Built by fuzz/CMakeLists.txt as a libFuzzer binary (clang) and with the shared
 * replay_main.c, which replays corpus/chat as ctest case fuzz/chat_replay.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/chat.h"

#define MAX_MSGS 16
#define MAX_OUTPUT (256u << 10)

#define REQUIRE(c)                                                                                                \
    do {                                                                                                          \
        if (!(c)) {                                                                                               \
            fprintf(stderr, "fuzz_chat: %s:%d: broken promise: %s\n", __FILE__, __LINE__, #c);                     \
            abort();                                                                                              \
        }                                                                                                         \
    } while (0)

static const struct lm_chat_msg DEFAULT_MSGS[] = {
    {"system", "Be brief."}, {"user", "Hi {{ x }} {% if %}"}, {"assistant", "Hello \xc3\xa9 \xf0\x9f\x98\x80"}};

/* render, check the promises; returns the status */
static lm_status render(const char *tmpl, const struct lm_chat_msg *msgs, size_t n, bool gen)
{
    const struct lm_chat_opts o = {.add_generation_prompt = gen, .bos_token = "<s>", .eos_token = "</s>",
                                   .now_string = "04 Dec 2026", .max_steps = 200000, .max_output = MAX_OUTPUT};
    char *out = (char *)&o, err[256] = "";
    const lm_status st = lm_chat_render(tmpl, msgs, n, &o, &out, err, sizeof err);
    if (st == LM_OK) {
        REQUIRE(out != NULL && strlen(out) <= MAX_OUTPUT);
        char *again = NULL;
        REQUIRE(lm_chat_render(tmpl, msgs, n, &o, &again, err, sizeof err) == LM_OK);
        REQUIRE(!strcmp(out, again));
        free(again);
        free(out);
    } else {
        REQUIRE(out == (char *)&o);
        REQUIRE(st == LM_ERR_CORRUPT || st == LM_ERR_FULL || st == LM_ERR_UNSUPPORTED || st == LM_ERR_NOMEM);
        REQUIRE(err[0] != 0);
    }
    return st;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = malloc(size + 1);
    if (!buf)
        return 0;
    memcpy(buf, data, size);
    buf[size] = 0;
    const size_t tlen = strlen(buf);
    struct lm_chat_msg msgs[MAX_MSGS];
    size_t n = 0;
    bool gen = true;
    if (tlen < size) { /* a conversation after the template */
        char *p = buf + tlen + 1, *end = buf + size;
        if (p < end && *p == '\x02') {
            gen = false;
            p++;
        }
        while (p <= end && n < MAX_MSGS) {
            char *sep = strchr(p, '\x01');
            if (sep) {
                *sep = 0;
                msgs[n++] = (struct lm_chat_msg){p, sep + 1};
            } else {
                msgs[n++] = (struct lm_chat_msg){"user", p};
            }
            p += strlen(p) + 1;
            if (sep)
                p += strlen(sep + 1) + 1;
        }
        render(buf, msgs, n, gen);
    } else {
        render(buf, DEFAULT_MSGS, 3, true);
        render(buf, DEFAULT_MSGS, 0, false);
    }
    /* the text as a message to each built-in (they must never fail on content) */
    const struct lm_chat_msg conv[2] = {{"user", buf}, {"assistant", "ok"}};
    for (const char *const *name = lm_chat_builtin_names(); *name; name++)
        REQUIRE(render(lm_chat_builtin(*name), conv, 2, gen) == LM_OK);
    free(buf);
    return 0;
}
