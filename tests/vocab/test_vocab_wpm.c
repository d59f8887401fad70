/* test_vocab_wpm.c - WordPiece (BERT): the per-character normalizer
 * (lm_vocab_uni_bert_fold), a small vocab built in memory whose every rule
 * is checked by a case worked out by hand (greedy longest match, "##"
 * pieces, whole-word unk, the 100-character limit, punctuation, CJK,
 * accents, Hangul, dropped controls, [CLS]/[SEP], pieces), and the shared
 * bert-bge vocab's ids, special tokens and pieces. The HF test vectors are
 * in test_vocab_vectors. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lm_test.h"
#include "util_vocab.h"
#include "vocab/unicode.h"
#include "vocab/vocab.h"

static bool fold_is(uint32_t cp, int n_want, uint32_t a, uint32_t b, uint32_t c)
{
    uint32_t f[3] = {0, 0, 0};
    int n = lm_vocab_uni_bert_fold(cp, f);
    const uint32_t want[3] = {a, b, c};
    bool ok = n == n_want;
    for (int i = 0; ok && i < n; i++) {
        ok = f[i] == want[i];
    }
    if (!ok) {
        fprintf(stderr, "  fold U+%04X: %d code points %04X %04X %04X\n", (unsigned)cp, n, (unsigned)f[0],
                (unsigned)f[1], (unsigned)f[2]);
    }
    return ok;
}

static void test_fold(void)
{
    CHECK(fold_is('A', 1, 'a', 0, 0) && fold_is('z', 1, 'z', 0, 0) && fold_is('!', 1, '!', 0, 0));
    CHECK(fold_is(0xC4, 1, 'a', 0, 0));           /* Ä: A + U+0308, the mark dropped */
    CHECK(fold_is(0x1EED, 1, 'u', 0, 0));         /* ử: u + horn + hook above */
    CHECK(fold_is(0x130, 1, 'i', 0, 0));          /* İ: I + dot above, then lowercase */
    CHECK(fold_is(0x3A3, 1, 0x3C3, 0, 0));        /* Σ -> σ, per character (no final ς) */
    CHECK(fold_is(0x301, 0, 0, 0, 0));            /* a combining acute alone: nothing */
    CHECK(fold_is(0xFE0F, 0, 0, 0, 0));           /* variation selector (Mn) */
    CHECK(fold_is(0xAC00, 2, 0x1100, 0x1161, 0)); /* 가: the jamo */
    CHECK(fold_is(0xAC01, 3, 0x1100, 0x1161, 0x11A8));
    CHECK(fold_is(0xD7A3, 3, 0x1112, 0x1175, 0x11C2)); /* the last syllable */
    CHECK(fold_is(0x212A, 1, 'k', 0, 0));              /* KELVIN SIGN -> K -> k */
    CHECK(fold_is(0x1FEF, 1, '`', 0, 0));              /* GREEK VARIA -> ` (punctuation after folding) */
    CHECK(fold_is(0x09CB, 2, 0x09C7, 0x09BE, 0));      /* Bengali o: two spacing code points */
    CHECK(fold_is(0x1D160, 3, 0x1D158, 0x1D165, 0x1D16E));
    CHECK(fold_is(0x4E2D, 1, 0x4E2D, 0, 0) && fold_is(0xBD, 1, 0xBD, 0, 0)); /* 中, ½ (no NFKD) */
    CHECK(fold_is(0xF900, 1, 0x8C48, 0, 0));                                 /* a CJK compatibility ideograph */
    /* the tables are sorted, and a fold is already folded */
    bool ok = true;
    for (uint32_t i = 1; i < lm_vocab_wpm_n_mn; i++) {
        ok = ok && lm_vocab_wpm_mn[i][0] > lm_vocab_wpm_mn[i - 1][1];
    }
    for (uint32_t i = 1; i < lm_vocab_wpm_n_fold1; i++) {
        ok = ok && lm_vocab_wpm_fold1[i][0] > lm_vocab_wpm_fold1[i - 1][0];
    }
    for (uint32_t i = 1; i < lm_vocab_wpm_n_foldn; i++) {
        ok = ok && lm_vocab_wpm_foldn[i][0] > lm_vocab_wpm_foldn[i - 1][0];
    }
    CHECK(ok);
    for (uint32_t i = 0; i < lm_vocab_wpm_n_fold1; i++) {
        uint32_t f[3];
        ok = ok && lm_vocab_uni_bert_fold(lm_vocab_wpm_fold1[i][1], f) == 1 && f[0] == lm_vocab_wpm_fold1[i][1];
    }
    CHECK(ok);
}

/* A small BERT vocab: "▁" marks word starts, plain texts are "##" pieces. */
#define M "\xe2\x96\x81"
/* kept off clang-format, which would give each enumerator a line and the table columns */
/* clang-format off */
enum {
    T_PAD, T_UNK, T_CLS, T_SEP, T_UN, T_UNA, T_AFF, T_ABLE, T_FFABLE, T_COMMA, T_BANG, T_WA, T_A, T_CAFE,
    T_ZHONG, T_G, T_JA, T_X, T_N
};
static const char *const tiny_tokens[T_N] = {
    "[PAD]", "[UNK]", "[CLS]", "[SEP]", M "un", M "una", "aff", "able", "ffable", M ",",
    M "!", M "a", "a", M "cafe", M "\xe4\xb8\xad", M "\xe1\x84\x80", "\xe1\x85\xa1", M "x",
};
/* clang-format on */

static struct lm_vocab *tiny_wpm(bool with_unk)
{
    int32_t types[T_N];
    for (int i = 0; i < T_N; i++) {
        types[i] = i <= T_SEP ? LM_TOKEN_CONTROL : LM_TOKEN_NORMAL;
    }
    struct lm_vocab_desc d = lm_vocab_desc_default();
    d.type = LM_VOCAB_WPM;
    d.n_tokens = T_N;
    d.tokens = tiny_tokens;
    d.types = types;
    if (!with_unk) {
        d.unk = -1;
    }
    struct lm_vocab *v = NULL;
    char err[256] = "";
    lm_status st = lm_vocab_build(&d, &v, err, sizeof(err));
    CHECKF(st == LM_OK, "%s", err);
    return v;
}

static bool ids_are(const struct lm_vocab *v, const char *text, size_t len, bool add_bos, bool special,
                    const int32_t *want, int n_want)
{
    int n;
    int32_t *got = tv_tokenize(v, text, len, add_bos, special, &n);
    bool ok = n == n_want && (n == 0 || memcmp(got, want, (size_t)n * sizeof(*got)) == 0);
    if (!ok) {
        fprintf(stderr, "  \"%.*s\" gave %d ids:", (int)len, text, n);
        for (int i = 0; i < n && i < 16; i++) {
            fprintf(stderr, " %d", (int)got[i]);
        }
        fprintf(stderr, "\n");
    }
    free(got);
    return ok;
}

#define IDS(...) (const int32_t[]){__VA_ARGS__}, (int)(sizeof((const int32_t[]){__VA_ARGS__}) / sizeof(int32_t))
#define TOK(v, s, ...) ids_are(v, s, sizeof(s) - 1, false, false, IDS(__VA_ARGS__))

static void test_tiny(void)
{
    struct lm_vocab *v = tiny_wpm(true);
    if (!v) {
        return;
    }
    CHECK(lm_vocab_type(v) == LM_VOCAB_WPM);
    CHECK(lm_vocab_bos(v) == T_CLS && lm_vocab_eos(v) == T_SEP && lm_vocab_sep(v) == T_SEP);
    CHECK(lm_vocab_unk(v) == T_UNK && lm_vocab_pad(v) == T_PAD && lm_vocab_nl(v) == T_PAD);
    /* longest first from the left: "▁una" beats "▁un", then "ffable" */
    CHECK(TOK(v, "unaffable", T_UNA, T_FFABLE));
    /* "unaab": "▁una", then "a", then "b" has no piece: the whole word is unk */
    CHECK(TOK(v, "unaab", T_UNK));
    CHECK(TOK(v, "x unaab x", T_X, T_UNK, T_X));
    /* lowercase, accents, punctuation */
    CHECK(TOK(v, "Caf\xc3\xa9!", T_CAFE, T_BANG));
    CHECK(TOK(v, "CAFE\xcc\x81", T_CAFE)); /* E + combining acute */
    CHECK(TOK(v, "a,a", T_WA, T_COMMA, T_WA));
    CHECK(TOK(v, "  a \t\n a\r\n", T_WA, T_WA));
    CHECK(TOK(v, "a\302\240a", T_WA, T_WA)); /* U+00A0 NO-BREAK SPACE breaks (octal: \x would eat the "a") */
    /* CJK ideographs are words of their own: 中中 */
    CHECK(TOK(v, "\xe4\xb8\xad\xe4\xb8\xad", T_ZHONG, T_ZHONG));
    CHECK(TOK(v, "x\xe4\xb8\xadx", T_X, T_ZHONG, T_X));
    /* a Hangul syllable is its jamo: 가 = ᄀ ᅡ */
    CHECK(TOK(v, "\xea\xb0\x80", T_G, T_JA));
    /* dropped, so the word goes on: a control, \v (Cc before White_Space),
     * a zero-width joiner (Cf), U+FFFD, a byte that is not UTF-8, NUL */
    CHECK(TOK(v, "a\001a", T_WA, T_A));
    CHECK(TOK(v, "a\va", T_WA, T_A));
    CHECK(TOK(v, "a\342\200\215a", T_WA, T_A)); /* U+200D */
    CHECK(TOK(v, "a\357\277\275a", T_WA, T_A)); /* U+FFFD */
    CHECK(TOK(v, "a\377a", T_WA, T_A));
    CHECK(ids_are(v, "a\0a", 3, false, false, IDS(T_WA, T_A)));
    CHECK(TOK(v, "   "));
    CHECK(TOK(v, "\xcc\x81")); /* only a mark: no word */
    /* 100 characters is the most a word may have */
    char w[102];
    int32_t want[100];
    memset(w, 'a', sizeof(w));
    want[0] = T_WA;
    for (int i = 1; i < 100; i++) {
        want[i] = T_A;
    }
    CHECK(ids_are(v, w, 100, false, false, want, 100));
    CHECK(ids_are(v, w, 101, false, false, IDS(T_UNK)));
    CHECK(ids_are(v, w, 102, false, false, IDS(T_UNK)));
    /* add_bos: [CLS] ... [SEP]; special texts only with special */
    CHECK(ids_are(v, "a", 1, true, false, IDS(T_CLS, T_WA, T_SEP)));
    CHECK(ids_are(v, "", 0, true, false, IDS(T_CLS, T_SEP)));
    CHECK(ids_are(v, "[CLS]a[SEP]", 11, false, true, IDS(T_CLS, T_WA, T_SEP)));
    CHECK(TOK(v, "[CLS]", T_UNK, T_UNK, T_UNK)); /* "[", "cls", "]" */
    /* pieces: word starts with a space, "##" pieces without, unk " ▅", control "" */
    char *d;
    size_t dl;
    d = tv_detokenize(v, IDS(T_CLS, T_UNA, T_FFABLE, T_COMMA, T_UNK, T_SEP), &dl);
    CHECKF(strcmp(d, " unaffable , \xe2\x96\x85") == 0, "got \"%s\"", d);
    free(d);
    lm_vocab_free(v);

    /* without an unk a word that does not split gives nothing */
    v = tiny_wpm(false);
    if (v) {
        CHECK(lm_vocab_unk(v) == -1);
        CHECK(TOK(v, "x unaab x", T_X, T_X));
    }
    lm_vocab_free(v);
}

static void test_bert_bge(void)
{
    struct lm_vocab *v = tv_load("bert-bge");
    CHECK(v != NULL);
    if (!v) {
        return;
    }
    CHECK(lm_vocab_type(v) == LM_VOCAB_WPM && lm_vocab_n_tokens(v) == 30522);
    /* the file: cls 101 (our bos), seperator 102 (our eos too), unknown 100, padding 0 */
    CHECK(lm_vocab_bos(v) == 101 && lm_vocab_eos(v) == 102 && lm_vocab_sep(v) == 102);
    CHECK(lm_vocab_unk(v) == 100 && lm_vocab_pad(v) == 0);
    /* "▁hello" 7592, "▁world" 2088 */
    CHECK(ids_are(v, "Hello world", 11, true, false, IDS(101, 7592, 2088, 102)));
    CHECK(ids_are(v, "[CLS] hello [SEP]", 17, false, true, IDS(101, 7592, 102)));
    /* "한국": the jamo ᄒ ᅡ ᆫ ᄀ ᅮ ᆨ, as "▁ᄒ" 1469 and five pieces */
    CHECK(ids_are(v, "\xed\x95\x9c\xea\xb5\xad", 6, false, false, IDS(1469, 30006, 30021, 29991, 30014, 30020)));
    /* "unaffable": "▁una" 14477, "ffa" 20961, "ble" 3468 */
    CHECK(ids_are(v, "unaffable", 9, false, false, IDS(14477, 20961, 3468)));
    /* the longest token, "▁telecommunications" (21 bytes), is still found */
    CHECK(ids_are(v, "Telecommunications", 18, false, false, IDS(12108)));
    size_t dl;
    char *d = tv_detokenize(v, IDS(101, 7592, 1010, 2088, 100, 102), &dl);
    CHECKF(strcmp(d, " hello , world \xe2\x96\x85") == 0, "got \"%s\"", d);
    free(d);
    lm_vocab_free(v);
}

int main(void)
{
    test_fold();
    test_tiny();
    test_bert_bge();
    return lm_test_summary();
}
