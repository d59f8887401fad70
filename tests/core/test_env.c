/* test_env.c - the LAMINA_* switch table and parser (core/env.h): every row
 * well-formed; each switch's value set, read, unset and read again, with the
 * values each switch accepts and garbage (which must fall back to the
 * default: a bad LAMINA_ISA means the best level, a LAMINA_PREFETCH other
 * than 0/1 the CPU's choice; every flag takes exactly "0" or "1", so
 * LAMINA_NO_*=0 is off and LAMINA_HUGEPAGES=00 the default, on); that nothing
 * is cached (a second read after setenv sees the new value); that
 * docs/architecture.md documents every row and its words; that no file in
 * src/ calls getenv("LAMINA_...") itself; and that configuration is read at
 * the edge: no file in src/ outside api/ and core/env.[ch] names lm_env_*. */
#define _XOPEN_SOURCE 700
#include <ftw.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/env.h"
#include "core/log.h"
#include "lm_test.h"

#define UNSET NULL

struct env_case {
    enum lm_env_id id;
    const char *value; /* UNSET: unsetenv */
    int want;          /* flag: 0/1/LM_ENV_AUTO; word: index/LM_ENV_AUTO; level: number */
};

static const struct env_case cases[] = {
    /* LAMINA_LOG: error|warn|info|debug, case-sensitive; anything else info */
    {LM_ENV_LOG, UNSET, LM_LOG_INFO},
    {LM_ENV_LOG, "debug", LM_LOG_DEBUG},
    {LM_ENV_LOG, "info", LM_LOG_INFO},
    {LM_ENV_LOG, "warn", LM_LOG_WARN},
    {LM_ENV_LOG, "error", LM_LOG_ERROR},
    {LM_ENV_LOG, "DEBUG", LM_LOG_INFO},
    {LM_ENV_LOG, "", LM_LOG_INFO},
    {LM_ENV_LOG, "verbose", LM_LOG_INFO},
    {LM_ENV_LOG, "5", LM_LOG_INFO},
    /* LAMINA_ISA: a level's exact name; anything else none (the best level) */
    {LM_ENV_ISA, UNSET, LM_ENV_AUTO},
    {LM_ENV_ISA, "generic", 0},
    {LM_ENV_ISA, "avx2", 1},
    {LM_ENV_ISA, "avx512", 2},
    {LM_ENV_ISA, "amx", 3},
    {LM_ENV_ISA, "AVX2", LM_ENV_AUTO},
    {LM_ENV_ISA, "avx2 ", LM_ENV_AUTO},
    {LM_ENV_ISA, "sse4", LM_ENV_AUTO},
    {LM_ENV_ISA, "", LM_ENV_AUTO},
    {LM_ENV_ISA, "1", LM_ENV_AUTO},
    /* LAMINA_PREFETCH: exactly 0 or 1; anything else the CPU's choice */
    {LM_ENV_PREFETCH, UNSET, LM_ENV_AUTO},
    {LM_ENV_PREFETCH, "0", 0},
    {LM_ENV_PREFETCH, "1", 1},
    {LM_ENV_PREFETCH, "00", LM_ENV_AUTO},
    {LM_ENV_PREFETCH, "2", LM_ENV_AUTO},
    {LM_ENV_PREFETCH, "", LM_ENV_AUTO},
    {LM_ENV_PREFETCH, "on", LM_ENV_AUTO},
    /* LAMINA_HUGEPAGES: exactly "0" is off (no longer any value beginning with '0') */
    {LM_ENV_HUGEPAGES, UNSET, 1},
    {LM_ENV_HUGEPAGES, "0", 0},
    {LM_ENV_HUGEPAGES, "00", 1},
    {LM_ENV_HUGEPAGES, "0ff", 1},
    {LM_ENV_HUGEPAGES, "1", 1},
    {LM_ENV_HUGEPAGES, "", 1},
    {LM_ENV_HUGEPAGES, "off", 1},
    /* LAMINA_NO_REPACK, LAMINA_NO_FUSE: exactly "1" is on (no longer any value, "0" included) */
    {LM_ENV_NO_REPACK, UNSET, 0},
    {LM_ENV_NO_REPACK, "1", 1},
    {LM_ENV_NO_REPACK, "0", 0},
    {LM_ENV_NO_REPACK, "", 0},
    {LM_ENV_NO_REPACK, "yes", 0},
    {LM_ENV_NO_FUSE, UNSET, 0},
    {LM_ENV_NO_FUSE, "1", 1},
    {LM_ENV_NO_FUSE, "0", 0},
    {LM_ENV_NO_FUSE, "", 0},
    {LM_ENV_NO_FUSE, "on", 0},
    /* LAMINA_ATTN: exactly "unfused"; anything else fused */
    {LM_ENV_ATTN, UNSET, 0},
    {LM_ENV_ATTN, "unfused", 1},
    {LM_ENV_ATTN, "fused", 0},
    {LM_ENV_ATTN, "UNFUSED", 0},
    {LM_ENV_ATTN, "1", 0},
    {LM_ENV_ATTN, "", 0},
    /* LAMINA_CUDA_GRAPHS: exactly "0" is off */
    {LM_ENV_CUDA_GRAPHS, UNSET, 1},
    {LM_ENV_CUDA_GRAPHS, "0", 0},
    {LM_ENV_CUDA_GRAPHS, "1", 1},
    {LM_ENV_CUDA_GRAPHS, "00", 1},
    {LM_ENV_CUDA_GRAPHS, "no", 1},
    {LM_ENV_CUDA_GRAPHS, "", 1},
    /* LAMINA_CUDA_MMQ: exactly "0" is off */
    {LM_ENV_CUDA_MMQ, UNSET, 1},
    {LM_ENV_CUDA_MMQ, "0", 0},
    {LM_ENV_CUDA_MMQ, "1", 1},
    {LM_ENV_CUDA_MMQ, "off", 1},
    {LM_ENV_GRAPH_REUSE, UNSET, 1},
    {LM_ENV_GRAPH_REUSE, "0", 0},
    {LM_ENV_GRAPH_REUSE, "1", 1},
    {LM_ENV_GRAPH_REUSE, "no", 1},
    /* a path: read_switch says whether it is set; check_cases checks the string */
    {LM_ENV_MODULE_PATH, UNSET, 0},
    {LM_ENV_MODULE_PATH, "", 1},
    {LM_ENV_MODULE_PATH, "/a:/b", 1},
};

static bool is_flag(enum lm_env_kind k) { return k == LM_ENV_FLAG; }

static int n_words(const struct lm_env_switch *s)
{
    int n = 0;
    while (n < LM_ENV_MAX_WORDS && s->words[n])
        n++;
    return n;
}

/* The switch's value now, through the accessor of its kind. */
static int read_switch(enum lm_env_id id)
{
    const struct lm_env_switch *s = lm_env_switch(id);
    if (is_flag(s->kind))
        return lm_env_flag(id);
    if (s->kind == LM_ENV_PATH)
        return lm_env_path(id) != NULL;
    return s->kind == LM_ENV_WORD ? lm_env_word(id) : lm_env_level(id);
}

static void check_table(void)
{
    CHECK(lm_env_switch(LM_ENV_COUNT) == NULL);
    CHECK(lm_env_switch((enum lm_env_id) - 1) == NULL);
    for (int i = 0; i < LM_ENV_COUNT; i++) {
        const struct lm_env_switch *s = lm_env_switch((enum lm_env_id)i);
        CHECKF(s && s->name && strncmp(s->name, "LAMINA_", 7) == 0, "row %d", i);
        if (!s || !s->name)
            continue;
        CHECKF(s->meaning && s->meaning[0] && s->when && s->when[0], "%s: meaning and when", s->name);
        const int nw = n_words(s);
        if (is_flag(s->kind)) {
            CHECKF(nw == 0, "%s: a flag has no words", s->name);
            CHECKF(s->def == 0 || s->def == 1 || s->def == LM_ENV_AUTO, "%s: default %d", s->name, s->def);
        } else if (s->kind == LM_ENV_PATH) {
            CHECKF(nw == 0 && s->def == 0, "%s: a path has no words and default 0", s->name);
        } else if (s->kind == LM_ENV_WORD) {
            CHECKF(nw >= 1 && s->def >= LM_ENV_AUTO && s->def < nw, "%s: %d words, default %d", s->name, nw, s->def);
        } else {
            bool def_is_level = false;
            for (int w = 0; w < nw; w++)
                def_is_level |= s->levels[w] == s->def;
            CHECKF(s->kind == LM_ENV_LEVEL && nw >= 1 && def_is_level, "%s: kind %d", s->name, (int)s->kind);
        }
        for (int j = 0; j < i; j++)
            CHECKF(strcmp(s->name, lm_env_switch((enum lm_env_id)j)->name) != 0, "%s twice", s->name);
    }
}

static void check_cases(void)
{
    int covered[LM_ENV_COUNT] = {0};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const struct env_case *c = &cases[i];
        const char *name = lm_env_switch(c->id)->name;
        if (c->value)
            setenv(name, c->value, 1);
        else
            unsetenv(name);
        const int got = read_switch(c->id);
        CHECKF(got == c->want, "%s=%s%s%s: %d, want %d", name, c->value ? "\"" : "", c->value ? c->value : "(unset)",
               c->value ? "\"" : "", got, c->want);
        unsetenv(name); /* and back to the default at once: nothing cached */
        CHECKF(read_switch(c->id) == lm_env_switch(c->id)->def, "%s unset again", name);
        covered[c->id]++;
    }
    for (int i = 0; i < LM_ENV_COUNT; i++)
        CHECKF(covered[i] >= 3, "%s: %d cases", lm_env_switch((enum lm_env_id)i)->name, covered[i]);

    /* the word accessors' names */
    setenv("LAMINA_ISA", "avx512", 1);
    CHECK(lm_env_word_name(LM_ENV_ISA) && strcmp(lm_env_word_name(LM_ENV_ISA), "avx512") == 0);
    setenv("LAMINA_ISA", "avx-512", 1);
    CHECK(lm_env_word_name(LM_ENV_ISA) == NULL);
    unsetenv("LAMINA_ISA");
    CHECK(lm_env_word_name(LM_ENV_ISA) == NULL);
    CHECK(strcmp(lm_env_word_name(LM_ENV_ATTN), "fused") == 0);
    setenv("LAMINA_ATTN", "unfused", 1);
    CHECK(strcmp(lm_env_word_name(LM_ENV_ATTN), "unfused") == 0);
    setenv("LAMINA_ATTN", "garbage", 1);
    CHECK(strcmp(lm_env_word_name(LM_ENV_ATTN), "fused") == 0);
    unsetenv("LAMINA_ATTN");

    /* a path is the value as it is */
    CHECK(lm_env_path(LM_ENV_MODULE_PATH) == NULL);
    setenv("LAMINA_MODULE_PATH", "/x/y:/z", 1);
    CHECK(lm_env_path(LM_ENV_MODULE_PATH) && strcmp(lm_env_path(LM_ENV_MODULE_PATH), "/x/y:/z") == 0);
    unsetenv("LAMINA_MODULE_PATH");
}

/* A file's bytes with a NUL after them, or NULL. */
static char *read_text(const char *path)
{
    size_t n = 0;
    char *p = lm_test_read_file(path, &n);
    char *s = p ? realloc(p, n + 1) : NULL;
    if (!s) {
        free(p);
        return NULL;
    }
    s[n] = 0;
    return s;
}

/* docs/architecture.md has a table row "| `NAME` | ..." per switch that names each of its words. */
static void check_docs(void)
{
    char *doc = read_text(LM_SOURCE_DIR "/docs/architecture.md");
    CHECKF(doc != NULL, "%s", LM_SOURCE_DIR "/docs/architecture.md");
    for (int i = 0; doc && i < LM_ENV_COUNT; i++) {
        const struct lm_env_switch *s = lm_env_switch((enum lm_env_id)i);
        char key[64];
        snprintf(key, sizeof key, "\n| `%s` |", s->name);
        const char *row = strstr(doc, key);
        CHECKF(row != NULL, "docs/architecture.md: no table row for %s", s->name);
        if (!row)
            continue;
        char line[2048];
        const char *end = strchr(row + 1, '\n');
        snprintf(line, sizeof line, "%.*s", end ? (int)(end - row) : (int)strlen(row), row);
        for (int w = 0; w < n_words(s); w++)
            CHECKF(strstr(line, s->words[w]) != NULL, "docs/architecture.md: %s's row does not name \"%s\"", s->name,
                   s->words[w]);
    }
    free(doc);
}

static int n_getenv_sites, n_deep_sites, n_edge_sites, n_scanned;

/* Whether path (under LM_SOURCE_DIR "/src/") may call the lm_env_* accessors:
 * the API layer, where configuration is read, and the table itself. */
static bool may_read_env(const char *path)
{
    const char *rel = path + strlen(LM_SOURCE_DIR "/src/");
    return strncmp(rel, "api/", 4) == 0 || strcmp(rel, "core/env.c") == 0 || strcmp(rel, "core/env.h") == 0;
}

/* nftw callback: count getenv("LAMINA_ in a source file of src/, and any
 * lm_env_ (a call, a type, a mention) outside api/ and core/env.[ch]. */
static int scan_file(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void)st;
    (void)ftw;
    const char *dot = strrchr(path, '.');
    if (type != FTW_F || !dot || (strcmp(dot, ".c") && strcmp(dot, ".h") && strcmp(dot, ".cu") && strcmp(dot, ".cuh")))
        return 0;
    char *text = read_text(path);
    n_scanned += text != NULL;
    for (const char *p = text; p && (p = strstr(p, "getenv(\"LAMINA_")); p++) {
        n_getenv_sites++;
        fprintf(stderr, "%s: reads a LAMINA_* variable itself; add it to core/env.c's table\n", path);
    }
    for (const char *p = text; p && (p = strstr(p, "lm_env_")); p++) {
        if (may_read_env(path)) {
            n_edge_sites += strncmp(path + strlen(LM_SOURCE_DIR "/src/"), "api/", 4) == 0;
            continue;
        }
        n_deep_sites++;
        fprintf(stderr, "%s: uses lm_env_* (\"%.24s\"); read the switch in src/api/ and pass it down\n", path, p);
    }
    free(text);
    return 0;
}

int main(void)
{
    check_table();
    check_cases();
    check_docs();
    CHECK(nftw(LM_SOURCE_DIR "/src", scan_file, 16, FTW_PHYS) == 0);
    CHECKF(n_getenv_sites == 0, "%d getenv(\"LAMINA_...\") outside core/env.c", n_getenv_sites);
    CHECKF(n_deep_sites == 0, "%d lm_env_* outside src/api/ and core/env.[ch]", n_deep_sites);
    CHECKF(n_scanned > 100, "only %d source files scanned under %s", n_scanned, LM_SOURCE_DIR "/src");
    CHECKF(n_edge_sites >= LM_ENV_COUNT, "%d lm_env_* in src/api/, want one read per switch at least", n_edge_sites);
    return lm_test_summary();
}
