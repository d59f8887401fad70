/* test_grammar_ref.c - the GBNF parser and the grammar engine against output of
 * llama.cpp b1892's own code (see data/README.md): for four grammars, the element
 * rules grammar-parser.cpp produced (<name>.rules) and, for every prefix of a text fed
 * byte by byte, which tokens of a toy vocabulary b1892's llama_grammar code allowed
 * (<name>.masks: one line per prefix, one '0'/'1' per token, token 0 = EOS).
 */
#include <stdio.h>
#include <string.h>

#include "lm_test.h"
#include "sampling/grammar.h"

#define MAX_TOKENS 512

struct vocab {
    char *piece[MAX_TOKENS];
    size_t len[MAX_TOKENS];
    size_t n;
};

static char *load(const char *name, size_t *len)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/sampling/data/%s", LM_SOURCE_DIR, name);
    size_t n = 0;
    char *raw = lm_test_read_file(path, &n);
    CHECKF(raw != NULL, "cannot read %s", path);
    if (!raw)
        return NULL;
    char *t = malloc(n + 1); /* NUL-terminated copy */
    memcpy(t, raw, n);
    t[n] = '\0';
    free(raw);
    if (len)
        *len = n;
    return t;
}

/* one token per line; the two characters "\n" stand for a newline byte */
static void parse_vocab(char *text, size_t n, struct vocab *v)
{
    v->n = 0;
    for (char *line = text; line < text + n && v->n < MAX_TOKENS;) {
        char *end = memchr(line, '\n', (size_t)(text + n - line));
        if (!end)
            end = text + n;
        char *o = malloc((size_t)(end - line) + 1);
        size_t k = 0;
        for (char *s = line; s < end; s++) {
            if (s[0] == '\\' && s + 1 < end && s[1] == 'n') {
                o[k++] = '\n';
                s++;
            } else {
                o[k++] = *s;
            }
        }
        v->piece[v->n] = o;
        v->len[v->n++] = k;
        line = end + 1;
    }
}

static const char *piece(void *user, int32_t token, size_t *len)
{
    const struct vocab *v = user;
    *len = v->len[token];
    return v->piece[token];
}

/* "N\n" then "i: type,value type,value ...\n" per rule */
static void check_rules(const char *name, const char *gbnf)
{
    char file[64], line[8192], err[256] = "";
    snprintf(file, sizeof file, "%s.rules", name);
    char *want = load(file, NULL);
    struct lm_gbnf *g = NULL;
    CHECKF(lm_gbnf_parse(gbnf, &g, err, sizeof err) == LM_OK, "%s: %s", name, err);
    if (!want || !g) {
        free(want);
        lm_gbnf_free(g);
        return;
    }
    size_t len = (size_t)snprintf(line, sizeof line, "%zu\n", g->n_rules);
    bool same = strncmp(want, line, len) == 0;
    const char *w = want + len;
    for (size_t i = 0; same && i < g->n_rules; i++) {
        len = (size_t)snprintf(line, sizeof line, "%zu:", i);
        for (size_t k = 0; k < g->rule_len[i] && len < sizeof line - 32; k++)
            len += (size_t)snprintf(line + len, sizeof line - len, " %d,%u", (int)g->rules[i][k].type,
                                    g->rules[i][k].value);
        line[len++] = '\n';
        same = strncmp(w, line, len) == 0;
        w += len;
    }
    CHECKF(same && *w == '\0', "%s: rules differ from grammar-parser.cpp's", name);
    free(want);
    lm_gbnf_free(g);
}

static void check_masks(const char *name, const char *gbnf, struct vocab *v)
{
    char file[64];
    snprintf(file, sizeof file, "%s.txt", name);
    size_t text_len = 0;
    char *text = load(file, &text_len);
    snprintf(file, sizeof file, "%s.masks", name);
    char *masks = load(file, NULL);
    char err[256] = "";
    struct lm_grammar *g = NULL;
    CHECKF(lm_grammar_from_gbnf(gbnf, NULL, &g, err, sizeof err) == LM_OK, "%s: %s", name, err);
    struct lm_token_data *d = malloc(v->n * sizeof *d);
    struct lm_grammar_vocab gv = {piece, v, 0};
    const char *want = masks;
    size_t states = 0, bad = 0;
    for (size_t i = 0; g && text && masks && d; i++) {
        for (size_t k = 0; k < v->n; k++)
            d[k] = (struct lm_token_data){(int32_t)k, 1.0f, 0.0f};
        struct lm_token_data_array c = {d, v->n, false};
        CHECK(lm_grammar_sample(g, &c, &gv) == LM_OK);
        for (size_t k = 0; k < v->n; k++)
            bad += want[k] != (d[k].logit == 1.0f ? '1' : '0');
        want += v->n + 1;
        states++;
        if (i == text_len)
            break;
        CHECKF(lm_grammar_accept_bytes(g, text + i, 1) == LM_OK, "%s: byte %zu refused", name, i);
    }
    CHECKF(bad == 0 && want && *want == '\0', "%s: %zu of %zu states x %zu tokens differ from b1892", name, bad,
           states, v->n);
    CHECK(states == text_len + 1);
    free(d);
    free(text);
    free(masks);
    lm_grammar_free(g);
}

int main(void)
{
    size_t n = 0;
    char *vt = load("toy_vocab.txt", &n);
    struct vocab v = {{0}, {0}, 0};
    if (vt)
        parse_vocab(vt, n, &v);
    CHECK(v.n == 337);
    const char *names[] = {"arith", "json", "list", "cjk"};
    for (int i = 0; i < 4; i++) {
        char file[64];
        snprintf(file, sizeof file, "%s.gbnf", names[i]);
        char *gbnf = load(file, NULL);
        if (!gbnf)
            continue;
        check_rules(names[i], gbnf);
        check_masks(names[i], gbnf, &v);
        free(gbnf);
    }
    for (size_t i = 0; i < v.n; i++)
        free(v.piece[i]);
    free(vt);
    return lm_test_summary();
}
