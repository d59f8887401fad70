/* test_vocab_vectors.c - llama.cpp's tokenizer test vectors (made with
 * Hugging Face tokenizers) for every shared vocab: tokenize each .inp case
 * with add_bos=false, special=false and compare with the .out ids; then
 * detokenize the expected ids back to the input (WordPiece: see
 * wpm_detok_ok). Every vocab must pass; each prints "name: n/n". gpt-neox
 * has no vectors of its own but is checked with MPT's: MPT uses the
 * GPT-NeoX-20B tokenizer, and the two files hold the same tokens, types and
 * merges (test_vocab_roundtrip checks that). baichuan has none at all
 * (test_vocab_roundtrip). Then stress inputs for every vocab. */
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

static void print_ids(const char *tag, const int32_t *ids, int n)
{
    fprintf(stderr, "    %s:", tag);
    for (int i = 0; i < n && i < 40; i++) {
        fprintf(stderr, " %d", (int)ids[i]);
    }
    fprintf(stderr, n > 40 ? " ...\n" : "\n");
}

static bool same_ids(const int32_t *a, int na, const int32_t *b, int nb)
{
    return na == nb && (na == 0 || memcmp(a, b, (size_t)na * sizeof(*a)) == 0);
}

/* The input as BERT's normalizer leaves its characters: C* (but \t \n \r)
 * and U+FFFD dropped, each code point folded (lowercase, no accents), and
 * here also every whitespace dropped. malloc'd; length in *len. */
static char *bert_chars(const char *s, size_t n, size_t *len)
{
    char *o = malloc(n * 3 + 1); /* a fold at most triples the bytes (a Hangul syllable: 3 -> 9) */
    size_t k = 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp, f[3];
        i += (size_t)lm_vocab_utf8_decode(s + i, n - i, &cp);
        if (cp == LM_UNI_INVALID || cp == 0 || cp == 0xFFFD || (lm_vocab_uni_flags(cp) & LM_UNI_WHITESPACE) ||
            lm_vocab_uni_cat(cp) == LM_UNI_OTHER) {
            continue;
        }
        int nf = lm_vocab_uni_bert_fold(cp, f);
        for (int j = 0; j < nf; j++) {
            k += (size_t)lm_vocab_utf8_encode(f[j], o + k);
        }
    }
    *len = k;
    return o;
}

/* WordPiece loses case, accents, control characters and the spacing, so
 * its ids cannot detokenize back to the input. What must hold instead:
 * (1) the text of the ids tokenizes back to the same ids (decoding is exact
 * on what encoding can produce: each word start gets a space, each unk word
 * reads " ▅", which is no token and so unk again); (2) when no word became
 * unk, that text without its spaces is the input's characters as BERT's
 * normalizer leaves them, without whitespace: the pieces lose no character
 * and add none. */
static bool wpm_detok_ok(const struct lm_vocab *v, const struct tv_case *c, const char *d, size_t dl)
{
    int n;
    int32_t *again = tv_tokenize(v, d, dl, false, false, &n);
    bool ok = same_ids(again, n, c->ids, c->n_ids);
    bool has_unk = false;
    for (int i = 0; i < c->n_ids; i++) {
        has_unk |= c->ids[i] == lm_vocab_unk(v);
    }
    if (!has_unk) {
        size_t nl, k = 0;
        char *norm = bert_chars(c->text, c->len, &nl);
        for (size_t i = 0; i < dl && ok; i++) {
            if (d[i] != ' ') {
                ok = k < nl && d[i] == norm[k++];
            }
        }
        ok = ok && k == nl;
        free(norm);
    }
    free(again);
    return ok;
}

/* Returns the number of cases of vectors `cases_of` that vocab `name`
 * tokenizes exactly; *n_detok counts the expected id lists that detokenize
 * back to their input. */
static int run_model(const char *name, const char *cases_of, int *n_cases, int *n_detok)
{
    struct lm_vocab *v = tv_load(name);
    struct tv_case *cases = NULL;
    int n = tv_read_cases(cases_of, &cases);
    int ok = 0;
    *n_cases = n;
    *n_detok = 0;
    CHECKF(v != NULL, "%s: load", name);
    CHECKF(n >= 40, "%s: %d cases", cases_of, n);
    if (!v || n == 0) {
        lm_vocab_free(v);
        tv_free_cases(cases, n);
        return 0;
    }
    enum lm_vocab_type type = lm_vocab_type(v);
    for (int i = 0; i < n; i++) {
        struct tv_case *c = &cases[i];
        int got_n;
        int32_t *got = tv_tokenize(v, c->text, c->len, false, false, &got_n);
        bool same = same_ids(got, got_n, c->ids, c->n_ids);
        ok += same;
        CHECKF(same, "%s case %d \"%.60s\"", name, i, c->text);
        if (!same) {
            print_ids("expected", c->ids, c->n_ids);
            print_ids("got     ", got, got_n);
        }
        free(got);
        /* expected ids -> text; SPM drops the space its prefix added */
        size_t dl;
        char *d = tv_detokenize(v, c->ids, c->n_ids, &dl);
        const char *ds = d;
        if (type == LM_VOCAB_SPM && dl > 0 && d[0] == ' ') {
            ds++, dl--;
        }
        bool back = type == LM_VOCAB_WPM ? wpm_detok_ok(v, c, ds, dl) : dl == c->len && memcmp(ds, c->text, dl) == 0;
        *n_detok += back;
        CHECKF(back, "%s case %d detokenizes to \"%.60s\"", name, i, ds);
        free(d);
    }
    lm_vocab_free(v);
    tv_free_cases(cases, n);
    return ok;
}

static uint32_t rnd(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return (uint32_t)(*s >> 11);
}

/* Does every byte have a plain token (SPM <0xXX>, BPE its byte-alphabet
 * char as a NORMAL token; deepseek's vocabs have some of those chars only as
 * user-defined tokens, which decode as their UTF-8 text)? Returns how many
 * bytes have none. */
static int bytes_without_token(const struct lm_vocab *v)
{
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
    return n_missing;
}

enum { N_KINDS = 9 };
static const char *const kinds[N_KINDS] = {"spaces",      "letters",      "digits",
                                           "newlines",    "random bytes", "mixed text",
                                           "tabs+spaces", "spaces+digit", "99-letter words"};

/* Stress input number k, n bytes; mixed text repeats the cases. */
static void make_stress(int k, char *text, size_t n, const struct tv_case *cases, int nc, uint64_t *seed)
{
    for (size_t i = 0; i < n; i++) {
        switch (k) {
        case 0: text[i] = ' '; break;
        case 1: text[i] = 'a'; break;
        case 2: text[i] = (char)('0' + i % 10); break;
        case 3: text[i] = '\n'; break;
        case 4: text[i] = (char)rnd(seed); break;
        case 6: text[i] = " \t"[rnd(seed) % 2]; break;
        case 7: text[i] = i + 1 < n ? ' ' : '7'; break;
        case 8: text[i] = i % 100 == 99 ? ' ' : (char)('a' + rnd(seed) % 26); break;
        default: break;
        }
    }
    if (k == 5) {
        size_t o = 0;
        for (int c = 0; o < n; c = (c + 1) % nc) {
            size_t l = cases[c].len < n - o ? cases[c].len : n - o;
            memcpy(text + o, cases[c].text, l);
            o += l;
        }
    }
}

/* Inputs that stress the splitter and the merge loops: long runs of one
 * class, random bytes (invalid UTF-8), words of 99 letters (WordPiece's
 * longest, the 100-character limit aside) and ordinary mixed text (the
 * cases of `cases_of`). Each must tokenize in milliseconds. SPM and BPE must
 * give the input back byte for byte (but for the bytes a vocab has no token
 * for); WordPiece, which normalizes, must give ids whose text tokenizes to
 * the same ids, and no ids for whitespace. */
static void test_stress(const char *name, const char *cases_of)
{
    struct lm_vocab *v = tv_load(name);
    struct tv_case *cases = NULL;
    int nc = tv_read_cases(cases_of, &cases);
    if (!v || nc == 0) {
        CHECKF(false, "%s: load, or the cases of %s", name, cases_of);
        lm_vocab_free(v);
        tv_free_cases(cases, nc);
        return;
    }
    enum lm_vocab_type type = lm_vocab_type(v);
    int n_missing = type == LM_VOCAB_WPM ? 0 : bytes_without_token(v);
    enum { N = 16384 };
    char *text = malloc(N);
    uint64_t seed = 42;
    double worst = 0;
    const char *worst_kind = "";
    for (int k = 0; k < N_KINDS; k++) {
        make_stress(k, text, N, cases, nc, &seed);
        clock_t t0 = clock();
        int n;
        int32_t *ids = tv_tokenize(v, text, N, false, false, &n);
        double dt = (double)(clock() - t0) / CLOCKS_PER_SEC;
        if (dt > worst) {
            worst = dt, worst_kind = kinds[k];
        }
        bool blank = k == 0 || k == 3 || k == 6;
        CHECKF(type == LM_VOCAB_WPM && blank ? n == 0 : n > 0, "%s %s: %d tokens", name, kinds[k], n);
        size_t dl;
        char *d = tv_detokenize(v, ids, n, &dl);
        const char *ds = d;
        if (type == LM_VOCAB_SPM && dl > 0 && ds[0] == ' ') {
            ds++, dl--;
        }
        if (type == LM_VOCAB_WPM) {
            int n2;
            int32_t *again = tv_tokenize(v, ds, dl, false, false, &n2);
            CHECKF(same_ids(again, n2, ids, n), "%s: %s do not re-tokenize to their ids", name, kinds[k]);
            free(again);
        } else {
            /* U+2581 decodes as ' '; bytes without a token are dropped */
            bool lossy = memmem(text, N, "\xe2\x96\x81", 3) != NULL || (k == 4 && n_missing > 0);
            CHECKF(lossy || (dl == N && memcmp(ds, text, N) == 0), "%s: %s do not come back", name, kinds[k]);
        }
        free(d);
        free(ids);
    }
    /* milliseconds in a release build; the bound leaves room for sanitizers */
    CHECKF(worst < 1.0, "%s: %s took %.3f s for %d bytes", name, worst_kind, worst, (int)N);
    printf("%-16s stress: slowest %-15s %6.1f ms for %d bytes; ", name, worst_kind, worst * 1e3, (int)N);
    if (type == LM_VOCAB_WPM) {
        printf("normalizing, so checked by re-tokenizing\n");
    } else {
        printf("%d bytes have no plain token\n", n_missing);
    }
    free(text);
    lm_vocab_free(v);
    tv_free_cases(cases, nc);
}

int main(void)
{
    /* {vocab, whose vectors}; gpt-neox is MPT's tokenizer (see the top) */
    static const char *const models[][2] = {
        {"llama-spm", "llama-spm"},
        {"phi-3", "phi-3"},
        {"gpt-2", "gpt-2"},
        {"falcon", "falcon"},
        {"starcoder", "starcoder"},
        {"mpt", "mpt"},
        {"refact", "refact"},
        {"deepseek-coder", "deepseek-coder"},
        {"deepseek-llm", "deepseek-llm"},
        {"dbrx", "dbrx"},
        {"bert-bge", "bert-bge"},
        {"gpt-neox", "mpt"},
    };
    enum { N_MODELS = sizeof(models) / sizeof(models[0]) };
    clock_t t0 = clock();
    for (int i = 0; i < N_MODELS; i++) {
        int n, nd;
        int ok = run_model(models[i][0], models[i][1], &n, &nd);
        printf("%s: %d/%d (detokenize %d/%d)%s%s\n", models[i][0], ok, n, nd, n,
               strcmp(models[i][0], models[i][1]) ? ", the vectors of " : "",
               strcmp(models[i][0], models[i][1]) ? models[i][1] : "");
    }
    /* stress every vocab; baichuan has no vectors, its mixed text is llama-spm's */
    for (int i = 0; i < N_MODELS; i++) {
        test_stress(models[i][0], models[i][1]);
    }
    test_stress("baichuan", "llama-spm");
    printf("time: %.2f s\n", (double)(clock() - t0) / CLOCKS_PER_SEC);
    return lm_test_summary();
}
