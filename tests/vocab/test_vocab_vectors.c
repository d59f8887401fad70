/* test_vocab_vectors.c - llama.cpp's tokenizer test vectors (made with
 * Hugging Face tokenizers) for every shared vocab: tokenize each .inp case
 * with add_bos=false, special=false and compare with the .out ids; then
 * detokenize the expected ids back to the input. Models whose pre-tokenizer
 * came after b1892 are run and counted without failing the test. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memmem */
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lm_test.h"
#include "util_vocab.h"
#include "vocab/unicode.h"

static void print_ids(const char *tag, const int32_t *ids, int n) {
    fprintf(stderr, "    %s:", tag);
    for (int i = 0; i < n && i < 40; i++) {
        fprintf(stderr, " %d", (int)ids[i]);
    }
    fprintf(stderr, n > 40 ? " ...\n" : "\n");
}

/* Returns the number of cases that tokenize exactly; *n_detok counts the
 * expected id lists that detokenize back to their input. */
static int run_model(const char *name, bool must_pass, int *n_cases, int *n_detok) {
    struct lm_vocab *v = tv_load(name);
    struct tv_case *cases = NULL;
    int n = tv_read_cases(name, &cases);
    int ok = 0;
    *n_cases = n;
    *n_detok = 0;
    if (must_pass) {
        CHECKF(v != NULL, "%s: load", name);
        CHECKF(n >= 40, "%s: %d cases", name, n);
    }
    if (!v || n == 0) {
        lm_vocab_free(v);
        tv_free_cases(cases, n);
        return 0;
    }
    bool spm = lm_vocab_type(v) == LM_VOCAB_SPM;
    for (int i = 0; i < n; i++) {
        struct tv_case *c = &cases[i];
        int got_n;
        int32_t *got = tv_tokenize(v, c->text, c->len, false, false, &got_n);
        bool same = got_n == c->n_ids && memcmp(got, c->ids, (size_t)got_n * sizeof(int32_t)) == 0;
        ok += same;
        if (must_pass) {
            CHECKF(same, "%s case %d \"%.60s\"", name, i, c->text);
        }
        if (!same && must_pass) {
            print_ids("expected", c->ids, c->n_ids);
            print_ids("got     ", got, got_n);
        }
        free(got);
        /* expected ids -> text; SPM drops the space its prefix added */
        size_t dl;
        char *d = tv_detokenize(v, c->ids, c->n_ids, &dl);
        const char *ds = d;
        if (spm && dl > 0 && d[0] == ' ') {
            ds++, dl--;
        }
        bool back = dl == c->len && memcmp(ds, c->text, dl) == 0;
        *n_detok += back;
        if (must_pass) {
            CHECKF(back, "%s case %d detokenizes to \"%.60s\"", name, i, ds);
        }
        free(d);
    }
    lm_vocab_free(v);
    tv_free_cases(cases, n);
    return ok;
}

static uint32_t rnd(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return (uint32_t)(*s >> 11);
}

/* Inputs that stress the splitter and the merge loops: long runs of one
 * class, random bytes (invalid UTF-8), and ordinary mixed text. Each must
 * tokenize in milliseconds and come back byte for byte. */
static void test_stress(const char *name) {
    struct lm_vocab *v = tv_load(name);
    struct tv_case *cases = NULL;
    int nc = tv_read_cases(name, &cases);
    if (!v || nc == 0) {
        CHECK(false);
        lm_vocab_free(v);
        tv_free_cases(cases, nc);
        return;
    }
    /* does every byte have a plain token (SPM <0xXX>, BPE its byte-alphabet
     * char as a NORMAL token; deepseek's vocabs have some of those chars
     * only as user-defined tokens, which decode as their UTF-8 text)? */
    int n_missing = 0;
    for (int b = 0; b < 256; b++) {
        char t[8];
        int l = snprintf(t, sizeof(t), "<0x%02X>", b);
        if (lm_vocab_type(v) == LM_VOCAB_BPE) {
            l = lm_vocab_utf8_encode(lm_vocab_byte_to_cp((uint8_t)b), t);
        }
        int32_t id = lm_vocab_find(v, t, (size_t)l);
        n_missing += id < 0 || lm_vocab_token_type(v, id) == LM_TOKEN_USER_DEFINED;
    }
    bool all_bytes = n_missing == 0;
    enum { N = 16384 };
    char *text = malloc(N);
    uint64_t seed = 42;
    double worst = 0;
    const char *worst_kind = "";
    static const char *kinds[] = {"spaces", "letters", "digits",      "newlines",
                                  "random bytes", "mixed text", "tabs+spaces", "spaces+digit"};
    for (int k = 0; k < 8; k++) {
        for (size_t i = 0; i < N; i++) {
            switch (k) {
            case 0: text[i] = ' '; break;
            case 1: text[i] = 'a'; break;
            case 2: text[i] = (char)('0' + i % 10); break;
            case 3: text[i] = '\n'; break;
            case 4: text[i] = (char)rnd(&seed); break;
            case 6: text[i] = " \t"[rnd(&seed) % 2]; break;
            case 7: text[i] = i + 1 < N ? ' ' : '7'; break;
            default: break;
            }
        }
        if (k == 5) { /* the test-vector inputs, repeated */
            size_t o = 0;
            for (int c = 0; o < N; c = (c + 1) % nc) {
                size_t l = cases[c].len < N - o ? cases[c].len : N - o;
                memcpy(text + o, cases[c].text, l);
                o += l;
            }
        }
        clock_t t0 = clock();
        int n;
        int32_t *ids = tv_tokenize(v, text, N, false, false, &n);
        double dt = (double)(clock() - t0) / CLOCKS_PER_SEC;
        if (dt > worst) {
            worst = dt, worst_kind = kinds[k];
        }
        CHECKF(n > 0, "%s %s", name, kinds[k]);
        size_t dl;
        char *d = tv_detokenize(v, ids, n, &dl);
        const char *ds = d;
        if (lm_vocab_type(v) == LM_VOCAB_SPM && dl > 0 && ds[0] == ' ') {
            ds++, dl--;
        }
        /* U+2581 decodes as ' '; bytes without a token are dropped */
        bool lossy = memmem(text, N, "\xe2\x96\x81", 3) != NULL || (k == 4 && !all_bytes);
        CHECKF(lossy || (dl == N && memcmp(ds, text, N) == 0), "%s: %s do not come back", name, kinds[k]);
        free(d);
        free(ids);
    }
    /* milliseconds in a release build; the bound leaves room for sanitizers */
    CHECKF(worst < 1.0, "%s: %s took %.3f s for %d bytes", name, worst_kind, worst, (int)N);
    printf("%-16s stress: slowest %-12s %6.1f ms for %d bytes; %d bytes have no plain token\n", name, worst_kind,
           worst * 1e3, (int)N, n_missing);
    free(text);
    lm_vocab_free(v);
    tv_free_cases(cases, nc);
}

int main(void) {
    static const char *required[] = {"llama-spm", "phi-3", "gpt-2", "falcon", "starcoder", "mpt", "refact"};
    static const char *extra[] = {"deepseek-coder", "deepseek-llm", "dbrx", "bert-bge"};
    clock_t t0 = clock();
    for (size_t i = 0; i < sizeof(required) / sizeof(required[0]); i++) {
        int n, nd;
        int ok = run_model(required[i], true, &n, &nd);
        printf("%-16s %2d/%2d tokenize, %2d/%2d detokenize\n", required[i], ok, n, nd, n);
    }
    /* stress every vocab we can load, the informational ones too */
    for (size_t i = 0; i < sizeof(required) / sizeof(required[0]); i++) {
        test_stress(required[i]);
    }
    for (size_t i = 0; i + 1 < sizeof(extra) / sizeof(extra[0]); i++) {
        test_stress(extra[i]);
    }
    for (size_t i = 0; i < sizeof(extra) / sizeof(extra[0]); i++) {
        int n, nd;
        int ok = run_model(extra[i], false, &n, &nd);
        printf("%-16s %2d/%2d tokenize, %2d/%2d detokenize (informational)\n", extra[i], ok, n, nd, n);
    }
    printf("time: %.2f s\n", (double)(clock() - t0) / CLOCKS_PER_SEC);
    return lm_test_summary();
}
