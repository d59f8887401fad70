/* test_vocab_spm.c - the SentencePiece tokenizer on real vocabs:
 *   - extra reference vectors made with Google's sentencepiece and the
 *     Llama 2 tokenizer.model (tests/vocab/data, gen_spm_data.py);
 *   - llama.cpp's test-tokenizer-1-spm: every token of the llama vocab, and
 *     every Unicode scalar value, detokenize -> tokenize -> detokenize;
 *   - special-token partitioning of "<s>hello</s>";
 *   - stories260K: its 200 greedy ids detokenize to llama2.c's output;
 *   - the negative-size protocol and bad ids.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lm_test.h"
#include "util_vocab.h"
#include "vocab/unicode.h"

/* llama_detokenize_spm of llama.cpp's common: drop the space the tokenizer
 * prefixed (on the first piece that is not BOS). */
static char *detok_spm(const struct lm_vocab *v, const int32_t *ids, int n, size_t *len)
{
    int first = (n > 0 && ids[0] == lm_vocab_bos(v)) ? 1 : 0;
    char *s = tv_detokenize(v, ids, first, len);
    size_t rl;
    char *rest = tv_detokenize(v, ids + first, n - first, &rl);
    const char *r = rest;
    if (rl > 0 && r[0] == ' ') {
        r++, rl--;
    }
    s = realloc(s, *len + rl + 1);
    memcpy(s + *len, r, rl);
    *len += rl;
    s[*len] = '\0';
    free(rest);
    return s;
}

static void test_sentencepiece_vectors(const struct lm_vocab *v)
{
    struct tv_case *cases = NULL;
    int n = tv_read_cases_at(LM_SOURCE_DIR "/tests/vocab/data/llama2-spm.inp",
                             LM_SOURCE_DIR "/tests/vocab/data/llama2-spm.out", &cases);
    CHECKF(n >= 200, "sentencepiece vectors: %d cases", n);
    int ok = 0;
    for (int i = 0; i < n; i++) {
        int got_n;
        int32_t *got = tv_tokenize(v, cases[i].text, cases[i].len, false, false, &got_n);
        bool same = got_n == cases[i].n_ids && memcmp(got, cases[i].ids, (size_t)got_n * sizeof(int32_t)) == 0;
        CHECKF(same, "sentencepiece case %d \"%.60s\"", i, cases[i].text);
        ok += same;
        size_t dl;
        char *d = detok_spm(v, cases[i].ids, cases[i].n_ids, &dl);
        /* U+2581 in the input comes back as ' ' (as in SentencePiece) */
        bool has_2581 = strstr(cases[i].text, "\xe2\x96\x81") != NULL;
        CHECKF(has_2581 || (dl == cases[i].len && memcmp(d, cases[i].text, dl) == 0),
               "sentencepiece case %d detokenizes", i);
        free(d);
        free(got);
    }
    printf("sentencepiece vectors: %d/%d\n", ok, n);
    tv_free_cases(cases, n);
}

/* test-tokenizer-1-spm: each token's text survives tokenize+detokenize. */
static void test_token_round_trip(const struct lm_vocab *v)
{
    int n_vocab = lm_vocab_n_tokens(v), n_bad = 0, n_same_id = 0, n_prefixed = 0;
    for (int32_t id = 0; id < n_vocab; id++) {
        size_t sl, cl;
        char *str = detok_spm(v, &id, 1, &sl);
        int nt;
        int32_t *toks = tv_tokenize(v, str, sl, false, false, &nt);
        char *check = detok_spm(v, toks, nt, &cl);
        if (cl != sl || memcmp(check, str, sl) != 0) {
            if (n_bad++ < 5) {
                fprintf(stderr, "token %d: '%s' comes back as '%s'\n", (int)id, str, check);
            }
        }
        /* a normal "▁word" token must come back as itself */
        const char *t = lm_vocab_token_text(v, id);
        if (lm_vocab_token_type(v, id) == LM_TOKEN_NORMAL && strncmp(t, "\xe2\x96\x81", 3) == 0 &&
            !strstr(t + 3, "\xe2\x96\x81") && t[3]) {
            n_prefixed++;
            n_same_id += nt == 1 && toks[0] == id;
        }
        free(str);
        free(check);
        free(toks);
    }
    CHECKF(n_bad == 0, "%d tokens do not round-trip", n_bad);
    CHECKF(n_same_id == n_prefixed, "%d of %d '\\u2581word' tokens tokenize to themselves", n_same_id, n_prefixed);
    printf("token round trip: %d tokens, %d/%d '▁word' tokens give their own id\n", n_vocab, n_same_id, n_prefixed);
}

/* test-tokenizer-1-spm's second half: every scalar value (stride over the
 * astral planes to keep the test short). */
static void test_codepoint_round_trip(const struct lm_vocab *v)
{
    int n_bad = 0, n = 0;
    for (uint32_t cp = 1; cp <= 0x10FFFF; cp += cp < 0x10000 ? 1 : 17) {
        if ((cp >= 0xD800 && cp <= 0xDFFF) || cp == 0x2581) { /* U+2581 decodes as ' ' */
            continue;
        }
        char s[4];
        int l = lm_vocab_utf8_encode(cp, s);
        int nt;
        int32_t *toks = tv_tokenize(v, s, (size_t)l, false, false, &nt);
        size_t cl;
        char *check = detok_spm(v, toks, nt, &cl);
        if (cl != (size_t)l || memcmp(check, s, cl) != 0) {
            if (n_bad++ < 5) {
                fprintf(stderr, "code point U+%04X does not round-trip\n", (unsigned)cp);
            }
        }
        n++;
        free(check);
        free(toks);
    }
    CHECKF(n_bad == 0, "%d code points do not round-trip", n_bad);
    printf("code point round trip: %d code points\n", n);
}

static void test_special_partition(const struct lm_vocab *v)
{
    const char *text = "<s>hello</s>";
    int n;
    int32_t *ids = tv_tokenize(v, text, strlen(text), false, true, &n);
    int32_t hello = lm_vocab_find(v, "hello", 5); /* no prefix space: not the first fragment (b1892) */
    CHECK(hello >= 0);
    CHECKF(n == 3 && ids[0] == 1 && ids[1] == hello && ids[2] == 2, "<s>hello</s> -> %d tokens", n);
    free(ids);
    /* special=false: the same text is plain text */
    ids = tv_tokenize(v, text, strlen(text), false, false, &n);
    bool has_ctrl = false;
    for (int i = 0; i < n; i++) {
        has_ctrl |= ids[i] == 1 || ids[i] == 2;
    }
    CHECK(n > 3 && !has_ctrl);
    free(ids);
    /* a raw first fragment gets the prefix; BOS from add_bos comes first */
    text = "Hello<s> world</s>";
    ids = tv_tokenize(v, text, strlen(text), true, true, &n);
    CHECKF(n == 5 && ids[0] == 1 && ids[1] == 15043 && ids[2] == 1 && ids[3] == 3186 && ids[4] == 2,
           "Hello<s> world</s> -> %d tokens", n);
    free(ids);
    /* <unk> is matched too */
    ids = tv_tokenize(v, "<unk>", 5, false, true, &n);
    CHECK(n == 1 && ids[0] == 0);
    free(ids);
}

static void test_protocol(const struct lm_vocab *v)
{
    const char *text = "Hello world, this is a test";
    int32_t full[64];
    int32_t n = lm_vocab_tokenize(v, text, (int32_t)strlen(text), full, 64, true, false);
    CHECK(n > 2 && full[0] == 1);
    CHECK(lm_vocab_tokenize(v, text, (int32_t)strlen(text), NULL, 0, true, false) == -n);
    int32_t small[64];
    CHECK(lm_vocab_tokenize(v, text, (int32_t)strlen(text), small, n - 1, true, false) == -n);
    CHECK(lm_vocab_tokenize(v, text, (int32_t)strlen(text), small, n, true, false) == n);
    CHECK(memcmp(small, full, (size_t)n * sizeof(int32_t)) == 0);
    /* empty text: [] or [BOS] */
    CHECK(lm_vocab_tokenize(v, "", 0, small, 4, false, false) == 0);
    CHECK(lm_vocab_tokenize(v, NULL, 0, small, 4, true, false) == 1 && small[0] == 1);
    CHECK(lm_vocab_tokenize(v, text, -1, small, 4, true, false) == 0);
    CHECK(lm_vocab_tokenize(NULL, text, 3, small, 4, true, false) == 0);
    /* token_to_piece: "▁world" is " world" (6 bytes) */
    char buf[16];
    int32_t world = 3186;
    CHECK(lm_vocab_token_to_piece(v, world, NULL, 0) == -6);
    CHECK(lm_vocab_token_to_piece(v, world, buf, 5) == -6);
    CHECK(lm_vocab_token_to_piece(v, world, buf, 6) == 6 && memcmp(buf, " world", 6) == 0);
    CHECK(lm_vocab_token_to_piece(v, 13, buf, 1) == 1 && buf[0] == '\n'); /* <0x0A> */
    CHECK(lm_vocab_token_to_piece(v, 13, buf, 0) == -1);
    CHECK(lm_vocab_token_to_piece(v, 0, buf, 2) == -3); /* <unk> -> U+2585 */
    CHECK(lm_vocab_token_to_piece(v, 0, buf, 3) == 3 && memcmp(buf, "\xe2\x96\x85", 3) == 0);
    CHECK(lm_vocab_token_to_piece(v, 1, buf, 16) == 0); /* control */
    /* bad ids */
    CHECK(lm_vocab_token_to_piece(v, -1, buf, 16) == 0);
    CHECK(lm_vocab_token_to_piece(v, 32000, buf, 16) == 0);
    CHECK(lm_vocab_token_to_piece(v, INT32_MAX, buf, 16) == 0);
    CHECK(lm_vocab_token_to_piece(v, INT32_MIN, buf, 16) == 0);
    CHECK(strcmp(lm_vocab_token_text(v, -5), "") == 0 && lm_vocab_token_len(v, 32000) == 0);
    CHECK(lm_vocab_token_score(v, 99999) == 0.0f && lm_vocab_token_type(v, -1) == LM_TOKEN_UNDEFINED);
    /* getters with b1892's facts for the llama vocab */
    CHECK(lm_vocab_n_tokens(v) == 32000 && lm_vocab_type(v) == LM_VOCAB_SPM);
    CHECK(lm_vocab_bos(v) == 1 && lm_vocab_eos(v) == 2 && lm_vocab_unk(v) == 0 && lm_vocab_nl(v) == 13);
    CHECK(lm_vocab_prefix(v) == 32007 && lm_vocab_suffix(v) == 32008 && lm_vocab_middle(v) == 32009 &&
          lm_vocab_eot(v) == 32010);
    CHECK(strcmp(lm_vocab_token_text(v, 3186), "\xe2\x96\x81world") == 0);
}

/* stories260K: llama2.c prints each piece, dropping a leading space after
 * BOS; the 200 greedy ids must give its text exactly. */
static void test_stories260k(void)
{
    struct lm_vocab *v = tv_load("models/stories260K.gguf");
    CHECK(v != NULL);
    size_t ni = 0, nt = 0;
    char *ids_txt = lm_test_read_file(lm_test_shared("models/stories260K.greedy200.ids"), &ni);
    char *want = lm_test_read_file(lm_test_shared("models/stories260K.greedy200.txt"), &nt);
    CHECK(ids_txt && want);
    if (!v || !ids_txt || !want) {
        goto out;
    }
    CHECK(lm_vocab_n_tokens(v) == 512 && lm_vocab_bos(v) == 1 && lm_vocab_eos(v) == 2 && lm_vocab_unk(v) == 0);
    CHECK(lm_vocab_sep(v) == -1 && lm_vocab_pad(v) == -1);
    ids_txt = realloc(ids_txt, ni + 1);
    ids_txt[ni] = '\0';
    char got[4096];
    size_t gl = 0;
    int32_t prev = 1, count = 0;
    for (char *s = ids_txt, *e; gl + 64 < sizeof(got); s = e) {
        long id = strtol(s, &e, 10);
        if (e == s) {
            break;
        }
        char piece[64];
        int32_t pl = lm_vocab_token_to_piece(v, (int32_t)id, piece, sizeof(piece));
        CHECK(pl >= 0);
        const char *p = piece;
        if (prev == 1 && pl > 0 && p[0] == ' ') {
            p++, pl--;
        }
        memcpy(got + gl, p, (size_t)pl);
        gl += (size_t)pl;
        prev = (int32_t)id;
        count++;
    }
    CHECK(count == 200);
    CHECKF(gl == nt && memcmp(got, want, nt) == 0, "stories260K text: got %zu bytes, want %zu", gl, nt);
    /* and the text tokenizes back to the same ids after BOS */
    int n;
    int32_t *back = tv_tokenize(v, want, nt, true, false, &n);
    CHECK(n > 1 && back[0] == 1);
    free(back);
out:
    free(ids_txt);
    free(want);
    lm_vocab_free(v);
}

/* Two files that carry the same vocab must load to the same tokens (the
 * second pair is GGUF v3 and legacy v1). */
static void test_same_vocab(const char *a_path, const char *b_path)
{
    struct lm_vocab *a = tv_load(a_path), *b = tv_load(b_path);
    CHECKF(a && b, "%s, %s", a_path, b_path);
    if (a && b) {
        bool same = lm_vocab_n_tokens(a) == lm_vocab_n_tokens(b);
        for (int32_t i = 0; same && i < lm_vocab_n_tokens(a); i++) {
            same = strcmp(lm_vocab_token_text(a, i), lm_vocab_token_text(b, i)) == 0 &&
                   lm_vocab_token_score(a, i) == lm_vocab_token_score(b, i) &&
                   lm_vocab_token_type(a, i) == lm_vocab_token_type(b, i);
        }
        CHECKF(same, "%s and %s differ", a_path, b_path);
        const char *text = "Once upon a time, there was a little llama.";
        int na, nb;
        int32_t *ta = tv_tokenize(a, text, strlen(text), true, false, &na);
        int32_t *tb = tv_tokenize(b, text, strlen(text), true, false, &nb);
        CHECK(na == nb && na > 2 && memcmp(ta, tb, (size_t)na * sizeof(int32_t)) == 0);
        free(ta);
        free(tb);
    }
    lm_vocab_free(a);
    lm_vocab_free(b);
}

int main(void)
{
    struct lm_vocab *v = tv_load("llama-spm");
    CHECK(v != NULL);
    if (v) {
        clock_t t0 = clock();
        test_sentencepiece_vectors(v);
        test_token_round_trip(v);
        test_codepoint_round_trip(v);
        test_special_partition(v);
        test_protocol(v);
        printf("time: %.2f s\n", (double)(clock() - t0) / CLOCKS_PER_SEC);
    }
    lm_vocab_free(v);
    test_stories260k();
    test_same_vocab("models/ggml-vocab/ggml-vocab-llama-spm.gguf", "models/llama-2-tiny-random.gguf");
    test_same_vocab("models/stories260K.gguf", "models/tinyllamas-stories-260k-f32.gguf");
    return lm_test_summary();
}
