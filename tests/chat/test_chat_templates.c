/* test_chat_templates.c - the chat-template engine against jinja2: the
 * shared fixtures (13 publishers' templates x 10 conversations, rendered by
 * Python's jinja2 under transformers' settings), engine features case by case
 * (expectations checked with jinja2 3.1), errors and limits, and the
 * built-in formats. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/chat.h"
#include "lm_test.h"
#include "test_chat_cases.h"

#ifdef LM_HAVE_JANSSON
#include <jansson.h>
#endif

static const struct lm_chat_msg HI[] = {{"user", "Hi"}};
static const struct lm_chat_opts BASE = {.bos_token = "<s>", .eos_token = "</s>", .now_string = "04 Dec 2026"};

/* render with one user message "Hi"; returns the status, *out (malloc'd) on success */
static lm_status render(const char *tmpl, const struct lm_chat_opts *o, char **out, char *err, size_t errlen)
{
    *out = NULL;
    return lm_chat_render(tmpl, HI, 1, o ? o : &BASE, out, err, errlen);
}

static void test_units(void)
{
    for (size_t i = 0; i < sizeof UNIT_CASES / sizeof *UNIT_CASES; i++) {
        const struct unit_case *u = &UNIT_CASES[i];
        char *out = NULL, err[512] = "";
        const lm_status st = render(u->tmpl, NULL, &out, err, sizeof err);
        if (u->expected) {
            CHECKF(st == LM_OK && out && !strcmp(out, u->expected), "case %zu %s: status %d err '%s'\n got '%s'\nwant '%s'",
                   i, u->tmpl, st, err, out ? out : "", u->expected);
        } else {
            CHECKF(st != LM_OK && !out && strstr(err, u->error), "case %zu %s: status %d, err '%s', want '%s'", i,
                   u->tmpl, st, err, u->error);
        }
        free(out);
    }
}

/* errors a template cannot avoid: every one a message, never a crash */
static void test_limits(void)
{
    char *out = NULL, err[512] = "";
    /* runaway recursion */
    lm_status st = render("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", NULL, &out, err, sizeof err);
    CHECKF(st == LM_ERR_CORRUPT && strstr(err, "recursion limit"), "%d %s", st, err);
    /* huge output: refused at the output limit */
    struct lm_chat_opts o = BASE;
    o.max_output = 1 << 20;
    st = render("{% for i in range(100000) %}{{ 'x' * 100 }}{% endfor %}", &o, &out, err, sizeof err);
    CHECKF(st == LM_ERR_FULL && strstr(err, "output limit"), "%d %s", st, err);
    /* huge values: refused by the memory budget, not allocated */
    st = render("{{ ('x' * 1000000000) | length }}", NULL, &out, err, sizeof err);
    CHECKF(st == LM_ERR_FULL && strstr(err, "memory limit"), "%d %s", st, err);
    st = render("{% set ns = namespace(s='xxxxxxxxxxxxxxxx') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}"
                "{% endfor %}{{ ns.s | length }}", NULL, &out, err, sizeof err);
    CHECKF(st == LM_ERR_FULL && strstr(err, "memory limit"), "%d %s", st, err);
    /* a long loop: the step limit */
    o = BASE;
    o.max_steps = 100000;
    st = render("{% for i in range(1000) %}{% for j in range(1000) %}{% endfor %}{% endfor %}", &o, &out, err, sizeof err);
    CHECKF(st == LM_ERR_CORRUPT && strstr(err, "step limit"), "%d %s", st, err);
    /* deep nesting in the source */
    char deep[4096];
    size_t n = 0;
    n += (size_t)snprintf(deep, sizeof deep, "{{ ");
    for (int i = 0; i < 1000; i++)
        deep[n++] = '(';
    deep[n] = 0;
    st = render(deep, NULL, &out, err, sizeof err);
    CHECKF(st == LM_ERR_CORRUPT && strstr(err, "nested too deeply"), "%d %s", st, err);
    n = 0;
    for (int i = 0; i < 300; i++)
        n += (size_t)snprintf(deep + n, sizeof deep - n, "{%% if true %%}");
    st = render(deep, NULL, &out, err, sizeof err);
    CHECKF(st == LM_ERR_CORRUPT && strstr(err, "nested too deeply"), "%d %s", st, err);
    /* bad arguments; errlen 0 and a tiny err buffer */
    CHECK(lm_chat_render(NULL, HI, 1, &BASE, &out, err, sizeof err) == LM_ERR_INVALID_ARG);
    CHECK(lm_chat_render("x", HI, 1, &BASE, NULL, err, sizeof err) == LM_ERR_INVALID_ARG);
    CHECK(lm_chat_render("x", NULL, 1, &BASE, &out, err, sizeof err) == LM_ERR_INVALID_ARG);
    CHECK(lm_chat_render("{{ x.y }}", HI, 1, &BASE, &out, NULL, 0) == LM_ERR_CORRUPT);
    char tiny[4] = "zzz";
    CHECK(lm_chat_render("{% if %}", HI, 1, &BASE, &out, tiny, sizeof tiny) == LM_ERR_CORRUPT && strlen(tiny) == 3);
    CHECK(out == NULL);
    /* NULL opts, no messages, NULL content */
    CHECK(lm_chat_render("[{{ messages | length }}{{ bos_token }}]", NULL, 0, NULL, &out, err, sizeof err) == LM_OK &&
          !strcmp(out, "[0]"));
    free(out);
    const struct lm_chat_msg nul[] = {{"assistant", NULL}};
    CHECK(lm_chat_render("{{ messages[0].content is none }}", nul, 1, NULL, &out, err, sizeof err) == LM_OK &&
          !strcmp(out, "True"));
    free(out);
}

static void test_clock(void)
{
    char *out = NULL, err[256] = "";
    struct lm_chat_opts o = BASE;
    o.now_string = NULL;
    o.now = 1796385600; /* 2026-12-04 12:00 UTC: the 4th in every time zone but the farthest */
    CHECKF(render("{{ strftime_now('%Y-%m') }}", &o, &out, err, sizeof err) == LM_OK && !strcmp(out, "2026-12"),
           "%s %s", err, out ? out : "");
    free(out);
    o.now = 0; /* the real clock: some year */
    CHECK(render("{{ strftime_now('%Y') | int > 2000 }}", &o, &out, err, sizeof err) == LM_OK && !strcmp(out, "True"));
    free(out);
}

static void test_builtins(void)
{
    static const struct lm_chat_msg conv[] = {
        {"system", "You are terse."}, {"user", "Hello"}, {"assistant", "Hi there."}};
    size_t n = 0;
    for (const char *const *name = lm_chat_builtin_names(); *name; name++, n++) {
        const char *src = lm_chat_builtin(*name);
        CHECKF(src != NULL, "%s", *name);
        for (int gen = 0; gen < 2 && src; gen++) {
            struct lm_chat_opts o = BASE;
            o.add_generation_prompt = gen;
            char *out = NULL, err[256] = "";
            const lm_status st = lm_chat_render(src, conv, 3, &o, &out, err, sizeof err);
            CHECKF(st == LM_OK && out && strstr(out, "Hello") && strstr(out, "Hi there.") &&
                       strstr(out, "You are terse."),
                   "%s: %d %s", *name, st, err);
            free(out);
        }
    }
    CHECK(n == 7);
    CHECK(lm_chat_builtin("nope") == NULL && lm_chat_builtin(NULL) == NULL);
    CHECK(!strcmp(lm_chat_builtin_for("llama", false, false), "llama-2"));
    CHECK(!strcmp(lm_chat_builtin_for("llama", true, false), "llama-3"));
    CHECK(!strcmp(lm_chat_builtin_for("llama", false, true), "chatml"));
    CHECK(!strcmp(lm_chat_builtin_for("qwen2", false, false), "chatml"));
    CHECK(!strcmp(lm_chat_builtin_for("gemma", false, false), "gemma"));
    CHECK(!strcmp(lm_chat_builtin_for("phi3", false, false), "phi-3"));
    CHECK(!strcmp(lm_chat_builtin_for("stablelm", false, false), "zephyr"));
    CHECK(!strcmp(lm_chat_builtin_for("no-such-arch", false, false), "chatml"));
    CHECK(!strcmp(lm_chat_builtin_for(NULL, false, false), "chatml"));
    static const char *const archs[] = {"llama", "qwen2", "qwen", "gemma", "phi3", "phi2", "stablelm", "falcon",
                                        "mpt", "gpt2", "starcoder", "bloom", "baichuan", "refact", "plamo",
                                        "persimmon"};
    for (size_t i = 0; i < sizeof archs / sizeof *archs; i++)
        CHECK(lm_chat_builtin(lm_chat_builtin_for(archs[i], false, false)) != NULL);
}

#ifdef LM_HAVE_JANSSON
/* which built-in renders exactly as a fixture template */
static const char *builtin_twin(const char *file)
{
    if (!strcmp(file, "chatml.jinja"))
        return "chatml";
    if (!strcmp(file, "zephyr.jinja"))
        return "zephyr";
    if (!strcmp(file, "llama-2.jinja"))
        return "llama-2";
    return NULL;
}

/* render one case with src; check it against expected/error */
static void check_case(const char *src, const char *what, json_t *c)
{
    json_t *msgs = json_object_get(c, "messages");
    const size_t n = json_array_size(msgs);
    struct lm_chat_msg *m = calloc(n ? n : 1, sizeof *m);
    for (size_t i = 0; i < n; i++) {
        m[i].role = json_string_value(json_object_get(json_array_get(msgs, i), "role"));
        m[i].content = json_string_value(json_object_get(json_array_get(msgs, i), "content"));
    }
    struct lm_chat_opts o = BASE;
    o.add_generation_prompt = json_is_true(json_object_get(c, "add_generation_prompt"));
    o.bos_token = json_string_value(json_object_get(c, "bos_token"));
    o.eos_token = json_string_value(json_object_get(c, "eos_token"));
    const char *expected = json_string_value(json_object_get(c, "expected"));
    const char *error = json_string_value(json_object_get(c, "error"));
    char *out = NULL, err[1024] = "";
    const lm_status st = lm_chat_render(src, m, n, &o, &out, err, sizeof err);
    const char *id = json_string_value(json_object_get(c, "case"));
    if (expected)
        CHECKF(st == LM_OK && out && !strcmp(out, expected), "%s %s agp=%d: status %d err '%s'\n got '%s'\nwant '%s'",
               what, id, o.add_generation_prompt, st, err, out ? out : "", expected);
    else
        CHECKF(st == LM_ERR_CORRUPT && !strcmp(err, error ? error : "?"), "%s %s: status %d err '%s' want '%s'",
               what, id, st, err, error ? error : "?");
    free(out);
    free(m);
}

static void test_fixtures(void)
{
    size_t size = 0;
    char *all = lm_test_read_file(lm_test_shared("fixtures/chat/cases.jsonl"), &size);
    CHECKF(all != NULL, "fixtures/chat/cases.jsonl missing");
    if (!all)
        return;
    int n_cases = 0, n_twins = 0;
    for (char *line = all, *end; line < all + size; line = end + 1) {
        end = memchr(line, '\n', (size_t)(all + size - line));
        if (!end)
            end = all + size;
        json_error_t je;
        json_t *c = json_loadb(line, (size_t)(end - line), 0, &je);
        if (!c)
            continue;
        const char *file = json_string_value(json_object_get(c, "template"));
        char rel[512];
        snprintf(rel, sizeof rel, "fixtures/chat/templates/%s", file ? file : "?");
        size_t tsize = 0;
        char *src = lm_test_read_file(lm_test_shared(rel), &tsize);
        CHECKF(src != NULL, "%s", rel);
        if (src) {
            char *z = realloc(src, tsize + 1);
            src = z ? z : src;
            if (z)
                z[tsize] = 0;
            check_case(src, file, c);
            n_cases++;
            if (builtin_twin(file)) {
                check_case(lm_chat_builtin(builtin_twin(file)), builtin_twin(file), c);
                n_twins++;
            }
        }
        free(src);
        json_decref(c);
    }
    CHECKF(n_cases == 130 && n_twins == 30, "%d cases, %d built-in twins", n_cases, n_twins);
    free(all);
}
#endif

int main(void)
{
    test_units();
    test_limits();
    test_clock();
    test_builtins();
#ifdef LM_HAVE_JANSSON
    test_fixtures();
#else
    fprintf(stderr, "test_chat_templates: no jansson: fixture cases skipped\n");
#endif
    return lm_test_summary();
}
