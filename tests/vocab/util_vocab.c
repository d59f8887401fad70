/* util_vocab.c - see util_vocab.h. */
#include "util_vocab.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "lm_test.h"

struct lm_vocab *tv_load(const char *name)
{
    char rel[512];
    if (strchr(name, '/')) {
        snprintf(rel, sizeof(rel), "%s", name);
    } else {
        snprintf(rel, sizeof(rel), "models/ggml-vocab/ggml-vocab-%s.gguf", name);
    }
    struct lm_gguf *g = NULL;
    struct lm_vocab *v = NULL;
    char err[256] = "";
    lm_status st = lm_gguf_open(lm_test_shared(rel), &g, err, sizeof(err));
    if (st == LM_OK) {
        st = lm_vocab_load(g, &v, err, sizeof(err));
    }
    if (st != LM_OK) {
        fprintf(stderr, "load %s: %s: %s\n", rel, lm_status_str(st), err);
    }
    lm_gguf_close(g);
    return v;
}

static const char SEP[] = "\n__ggml_vocab_test__\n";
#define TV_MAX_CASES 1024

int tv_read_cases(const char *name, struct tv_case **cases)
{
    char rel[512], inp[512], outp[512];
    snprintf(rel, sizeof(rel), "models/ggml-vocab/ggml-vocab-%s.gguf.inp", name);
    snprintf(inp, sizeof(inp), "%s", lm_test_shared(rel));
    snprintf(rel, sizeof(rel), "models/ggml-vocab/ggml-vocab-%s.gguf.out", name);
    snprintf(outp, sizeof(outp), "%s", lm_test_shared(rel));
    return tv_read_cases_at(inp, outp, cases);
}

int tv_read_cases_at(const char *inp_path, const char *out_path, struct tv_case **cases)
{
    size_t ni = 0, no = 0;
    char *inp = lm_test_read_file(inp_path, &ni);
    char *outp = lm_test_read_file(out_path, &no);
    int n = 0;
    if (!inp || !outp) {
        goto out;
    }
    struct tv_case *c = calloc(TV_MAX_CASES, sizeof(*c));
    const char *p = inp, *end = inp + ni;
    const char *line = outp, *oend = outp + no;
    size_t sl = strlen(SEP);
    while (p < end && n < TV_MAX_CASES) {
        const char *q = p;
        while (q + sl <= end && memcmp(q, SEP, sl) != 0) {
            q++;
        }
        if (q + sl > end) {
            break;
        }
        c[n].len = (size_t)(q - p);
        c[n].text = malloc(c[n].len + 1);
        memcpy(c[n].text, p, c[n].len);
        c[n].text[c[n].len] = '\0';
        /* the matching .out line */
        const char *le = line;
        while (le < oend && *le != '\n') {
            le++;
        }
        c[n].ids = malloc(((size_t)(le - line) / 2 + 1) * sizeof(int32_t));
        for (const char *s = line; s < le;) {
            char *e;
            long x = strtol(s, &e, 10);
            if (e == s) {
                break;
            }
            c[n].ids[c[n].n_ids++] = (int32_t)x;
            s = e;
        }
        line = le < oend ? le + 1 : le;
        n++;
        p = q + sl;
    }
    *cases = c;
out:
    free(inp);
    free(outp);
    return n;
}

void tv_free_cases(struct tv_case *cases, int n)
{
    for (int i = 0; i < n; i++) {
        free(cases[i].text);
        free(cases[i].ids);
    }
    free(cases);
}

int32_t *tv_tokenize(const struct lm_vocab *v, const char *text, size_t len, bool add_bos, bool special, int *n)
{
    int32_t need = lm_vocab_tokenize(v, text, (int32_t)len, NULL, 0, add_bos, special);
    int32_t cap = need < 0 ? -need : need;
    int32_t *ids = malloc(((size_t)cap + 1) * sizeof(*ids));
    *n = lm_vocab_tokenize(v, text, (int32_t)len, ids, cap, add_bos, special);
    return ids;
}

char *tv_detokenize(const struct lm_vocab *v, const int32_t *ids, int n, size_t *len)
{
    size_t cap = 64, used = 0;
    char *s = malloc(cap);
    for (int i = 0; i < n; i++) {
        int32_t k = lm_vocab_token_to_piece(v, ids[i], NULL, 0);
        if (k < 0) {
            k = -k;
            while (used + (size_t)k + 1 > cap) {
                cap *= 2;
                s = realloc(s, cap);
            }
            k = lm_vocab_token_to_piece(v, ids[i], s + used, k);
            used += (size_t)k;
        }
    }
    s[used] = '\0';
    *len = used;
    return s;
}
