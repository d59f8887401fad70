/* test_vocab_unit.c - the parts of vocab/ that need no file: Unicode
 * classes and UTF-8, GPT-2's byte map, the regex engine and each
 * pre-tokenizer's splits (expected pieces worked out by hand from the
 * Hugging Face patterns), and small SPM/BPE vocabs built in memory whose
 * merge order, byte fallback, pieces and validation are checked. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lm_test.h"
#include "vocab/regex.h"
#include "vocab/unicode.h"
#include "vocab/vocab.h"
#include "vocab/vocab_internal.h"

static void test_unicode(void)
{
    CHECK(lm_vocab_uni_cat('A') == LM_UNI_LETTER && lm_vocab_uni_cat('z') == LM_UNI_LETTER);
    CHECK(lm_vocab_uni_cat('5') == LM_UNI_NUMBER && lm_vocab_uni_cat(0xBD) == LM_UNI_NUMBER); /* ½ */
    CHECK(lm_vocab_uni_flags(' ') == (LM_UNI_SEPARATOR | LM_UNI_WHITESPACE));
    CHECK(lm_vocab_uni_flags('\n') == (LM_UNI_OTHER | LM_UNI_WHITESPACE));
    CHECK(lm_vocab_uni_flags(0x85) == (LM_UNI_OTHER | LM_UNI_WHITESPACE));
    CHECK(lm_vocab_uni_flags(0x1C) == LM_UNI_OTHER); /* not White_Space, unlike Python's isspace */
    CHECK(lm_vocab_uni_flags(0xA0) == (LM_UNI_SEPARATOR | LM_UNI_WHITESPACE));
    CHECK(lm_vocab_uni_flags(0x3000) == (LM_UNI_SEPARATOR | LM_UNI_WHITESPACE));
    CHECK(lm_vocab_uni_flags(0x200B) == LM_UNI_OTHER); /* ZERO WIDTH SPACE is Cf */
    CHECK(lm_vocab_uni_cat(0x4E00) == LM_UNI_LETTER && lm_vocab_uni_cat(0xAC00) == LM_UNI_LETTER);
    CHECK(lm_vocab_uni_cat(0x0301) == LM_UNI_MARK && lm_vocab_uni_cat(0x20AC) == LM_UNI_SYMBOL);
    CHECK(lm_vocab_uni_cat('!') == LM_UNI_PUNCT && lm_vocab_uni_cat('$') == LM_UNI_SYMBOL);
    CHECK(lm_vocab_uni_cat(0x1F600) == LM_UNI_SYMBOL && lm_vocab_uni_cat(0x1D7CE) == LM_UNI_NUMBER);
    CHECK(lm_vocab_uni_cat(0xE000) == LM_UNI_OTHER && lm_vocab_uni_cat(0x10FFFF) == LM_UNI_OTHER);
    CHECK(lm_vocab_uni_flags(LM_UNI_INVALID) == LM_UNI_OTHER && lm_vocab_uni_flags(0x110000) == LM_UNI_OTHER);
    /* the run table is sorted and agrees with the Latin-1 table */
    bool sorted = (lm_vocab_uni_runs[0] >> 8) == 0;
    for (uint32_t i = 1; i < lm_vocab_uni_n_runs; i++) {
        sorted = sorted && (lm_vocab_uni_runs[i] >> 8) > (lm_vocab_uni_runs[i - 1] >> 8);
    }
    CHECK(sorted);
    uint32_t r = 0;
    bool agree = true;
    for (uint32_t cp = 0; cp < 256; cp++) {
        while (r + 1 < lm_vocab_uni_n_runs && (lm_vocab_uni_runs[r + 1] >> 8) <= cp) {
            r++;
        }
        agree = agree && (lm_vocab_uni_runs[r] & 0xFF) == lm_vocab_uni_latin1[cp];
    }
    CHECK(agree);
}

static void test_utf8(void)
{
    uint32_t cp;
    CHECK(lm_vocab_utf8_decode("\xF0\x9F\xA6\x99", 4, &cp) == 4 && cp == 0x1F999);
    CHECK(lm_vocab_utf8_decode("\xC3\xA9", 2, &cp) == 2 && cp == 0xE9);
    CHECK(lm_vocab_utf8_decode("\xC0\x80", 2, &cp) == 1 && cp == LM_UNI_INVALID);         /* overlong */
    CHECK(lm_vocab_utf8_decode("\xED\xA0\x80", 3, &cp) == 1 && cp == LM_UNI_INVALID);     /* surrogate */
    CHECK(lm_vocab_utf8_decode("\xF4\x90\x80\x80", 4, &cp) == 1 && cp == LM_UNI_INVALID); /* > 10FFFF */
    CHECK(lm_vocab_utf8_decode("\xE2\x82", 2, &cp) == 1 && cp == LM_UNI_INVALID);         /* truncated */
    CHECK(lm_vocab_utf8_decode("\xE2\x82\x41", 3, &cp) == 1 && cp == LM_UNI_INVALID);     /* bad continuation */
    CHECK(lm_vocab_utf8_decode("\x80", 1, &cp) == 1 && cp == LM_UNI_INVALID);
    char b[4];
    CHECK(lm_vocab_utf8_encode(0x10FFFF, b) == 4 && memcmp(b, "\xF4\x8F\xBF\xBF", 4) == 0);
    CHECK(lm_vocab_utf8_encode(0xD800, b) == 0 && lm_vocab_utf8_encode(0x110000, b) == 0);
    bool all = true;
    for (uint32_t c = 0; c <= 0x10FFFF; c += 7) {
        int l = lm_vocab_utf8_encode(c, b);
        uint32_t d;
        all = all && (l == 0 ? (c >= 0xD800 && c <= 0xDFFF) : (lm_vocab_utf8_decode(b, (size_t)l, &d) == l && d == c));
    }
    CHECK(all);
}

static void test_byte_map(void)
{
    bool seen[512] = {false};
    bool ok = true;
    for (int b = 0; b < 256; b++) {
        uint32_t cp = lm_vocab_byte_to_cp((uint8_t)b);
        ok = ok && cp < 512 && !seen[cp] && lm_vocab_cp_to_byte(cp) == b;
        if (cp < 512) {
            seen[cp] = true;
        }
    }
    CHECK(ok);
    CHECK(lm_vocab_byte_to_cp(' ') == 0x120 && lm_vocab_byte_to_cp('\n') == 0x10A && lm_vocab_byte_to_cp('a') == 'a');
    CHECK(lm_vocab_byte_to_cp(0) == 0x100 && lm_vocab_byte_to_cp(0x7F) == 0x121 && lm_vocab_byte_to_cp(0xAD) == 0x143);
    CHECK(lm_vocab_cp_to_byte(0x144) == -1 && lm_vocab_cp_to_byte(0x20) == -1 && lm_vocab_cp_to_byte(0x4E00) == -1);
}

/* Match pattern at 0 of the UTF-8 subject; returns the matched byte count or -1. */
static int rx_match(const char *pattern, const char *subject)
{
    struct lm_vocab_regex *re;
    char err[128];
    if (lm_vocab_regex_compile(pattern, &re, err, sizeof(err))) {
        fprintf(stderr, "%s\n", err);
        return -2;
    }
    uint32_t cps[256];
    size_t offs[257], n = 0, len = strlen(subject);
    for (size_t i = 0; i < len && n < 256; n++) {
        offs[n] = i;
        i += (size_t)lm_vocab_utf8_decode(subject + i, len - i, &cps[n]);
    }
    offs[n] = len;
    int64_t e = lm_vocab_regex_match_at(re, cps, n, 0);
    lm_vocab_regex_free(re);
    return e < 0 ? -1 : (int)offs[e];
}

static void test_regex(void)
{
    static const char *bad[] = {"(a)",     "a**",    "[abc",        "\\q",   "a{3,2}", "(?i:a)", ".", "a+?",
                                "(?:ab)+", "\\p{Q}", "\\x{110000}", "[z-a]", "a)",     "(?:a",   "\\"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct lm_vocab_regex *re = NULL;
        char err[128] = "";
        CHECKF(lm_vocab_regex_compile(bad[i], &re, err, sizeof(err)) == LM_ERR_CORRUPT && !re && err[0],
               "pattern %s must be refused", bad[i]);
    }
    CHECK(rx_match("abc|ab", "abd") == 2);
    CHECK(rx_match("ab|abc", "abc") == 2); /* leftmost-first, not longest */
    CHECK(rx_match(" ?\\p{L}+", " héllo!") == 7);
    CHECK(rx_match("\\s+(?!\\S)", "   x") == 2);
    CHECK(rx_match("\\s+(?!\\S)", "   ") == 3);
    CHECK(rx_match("\\s+(?=x)", "  x") == 2);
    CHECK(rx_match("\\p{N}{1,3}", "12345") == 3);
    CHECK(rx_match("a{2}", "aaa") == 2 && rx_match("a{2,}", "aaaa") == 4 && rx_match("a{2}", "a") == -1);
    CHECK(rx_match("[^\\s\\p{L}\\p{N}]+", "!?\xff x") == 3); /* an invalid byte is in a negated class */
    CHECK(rx_match("[\\x{4E00}-\\x{9FA5}]+", "\xe4\xbd\xa0\xe5\xa5\xbd!") == 6);
    CHECK(rx_match("\\s+$", "  ") == 2 && rx_match("\\s+$", "  a") == -1);
    CHECK(rx_match("^a", "a") == 1);
    CHECK(rx_match("(?:'[sS]|'[tT])|x", "'T") == 2);
    CHECK(rx_match("[!-/:-~]+", "!/:~a") == 5);
    CHECK(rx_match("\\P{L}+", "12a") == 2);
    CHECK(rx_match("\\$\\+\\x41", "$+A") == 3);
}

/* Split text with a BPE vocab's pre-tokenizer and compare with the pieces
 * given as one string joined by '|'. */
static bool split_is(const struct lm_vocab *v, const char *text, const char *want)
{
    struct ivec w = {0};
    lm_vocab_pretok_split(v, text, strlen(text), &w);
    char got[512];
    size_t gl = 0;
    for (size_t k = 0; k + 1 < w.n && gl + 64 < sizeof(got); k += 2) {
        if (k) {
            got[gl++] = '|';
        }
        memcpy(got + gl, text + w.data[k], (size_t)(w.data[k + 1] - w.data[k]));
        gl += (size_t)(w.data[k + 1] - w.data[k]);
    }
    got[gl] = '\0';
    free(w.data);
    if (strcmp(got, want) != 0) {
        fprintf(stderr, "split \"%s\" with %s: got \"%s\", want \"%s\"\n", text, lm_vocab_pre(v), got, want);
        return false;
    }
    return true;
}

/* A BPE vocab: the 256 byte-alphabet characters, then "Ġt", "he", "Ġthe",
 * "ab", "bc", "xy"; merges as given. */
static struct lm_vocab *tiny_bpe(const char *pre, const char *const *merges, int n_merges, char *err)
{
    static char store[256][4];
    const char *toks[270];
    int32_t types[270];
    int n = 0;
    for (int b = 0; b < 256; b++) {
        int l = lm_vocab_utf8_encode(lm_vocab_byte_to_cp((uint8_t)b), store[b]);
        store[b][l] = '\0';
        types[n] = LM_TOKEN_NORMAL;
        toks[n++] = store[b];
    }
    static const char *extra[] = {"\xc4\xa0t", "he", "\xc4\xa0the", "ab", "bc", "xy", "<|end|>", "<tool>"};
    for (int i = 0; i < 8; i++) {
        types[n] = i == 6 ? LM_TOKEN_CONTROL : i == 7 ? LM_TOKEN_USER_DEFINED : LM_TOKEN_NORMAL;
        toks[n++] = extra[i];
    }
    struct lm_vocab_desc d = lm_vocab_desc_default();
    d.type = LM_VOCAB_BPE;
    d.n_tokens = n;
    d.tokens = toks;
    d.types = types;
    d.merges = merges;
    d.n_merges = n_merges;
    d.pre = pre;
    struct lm_vocab *v = NULL;
    lm_vocab_build(&d, &v, err, 256);
    return v;
}

static void test_pretokenizers(void)
{
    static const char *m[] = {"a b"};
    char err[256];
    struct lm_vocab *gpt2 = tiny_bpe(NULL, m, 1, err), *sc = tiny_bpe("starcoder", m, 1, err);
    struct lm_vocab *fal = tiny_bpe("falcon", m, 1, err), *dsc = tiny_bpe("deepseek-coder", m, 1, err);
    struct lm_vocab *dsl = tiny_bpe("deepseek-llm", m, 1, err), *dbrx = tiny_bpe("dbrx", m, 1, err);
    struct lm_vocab *unk = tiny_bpe("no-such-pre", m, 1, err);
    CHECK(gpt2 && sc && fal && dsc && dsl && dbrx && unk);
    if (gpt2 && sc && fal && dsc && dsl && dbrx && unk) {
        CHECK(strcmp(lm_vocab_pre(gpt2), "default") == 0 && strcmp(lm_vocab_pre(unk), "default") == 0);
        CHECK(split_is(gpt2, "Hello world's  test 123\n\n", "Hello| world|'s| | test| 123|\n\n"));
        CHECK(split_is(gpt2, "x\t\tb  ", "x|\t|\t|b|  ")); /* ' ?' takes a space, not a tab */
        CHECK(split_is(gpt2, "don't!!", "don|'t|!!"));
        CHECK(split_is(sc, "abc 123", "abc| |1|2|3"));
        CHECK(split_is(fal, "a+b=12345!", "a|+|b|=|123|45|!"));
        CHECK(split_is(dsc, "Hi \xe4\xbd\xa0\xe5\xa5\xbd\n123", "Hi| |\xe4\xbd\xa0\xe5\xa5\xbd|\n|1|2|3"));
        CHECK(split_is(dsl, "Hi, \xe4\xbd\xa0\xe5\xa5\xbd 12  ", "Hi|,| |\xe4\xbd\xa0\xe5\xa5\xbd| |12|  "));
        CHECK(split_is(dbrx, "I'm 12345 ok!!\n\n", "I|'m| |123|45| ok|!!\n\n"));
        CHECK(split_is(gpt2, "", ""));
    }
    lm_vocab_free(gpt2);
    lm_vocab_free(sc);
    lm_vocab_free(fal);
    lm_vocab_free(dsc);
    lm_vocab_free(dsl);
    lm_vocab_free(dbrx);
    lm_vocab_free(unk);
}

static bool ids_are(const struct lm_vocab *v, const char *text, bool special, const int32_t *want, int n_want)
{
    int32_t got[64];
    int32_t n = lm_vocab_tokenize(v, text, (int32_t)strlen(text), got, 64, false, special);
    bool same = n == n_want && memcmp(got, want, (size_t)n * sizeof(int32_t)) == 0;
    if (!same) {
        fprintf(stderr, "\"%s\": got", text);
        for (int i = 0; i < n; i++) {
            fprintf(stderr, " %d", (int)got[i]);
        }
        fprintf(stderr, "\n");
    }
    return same;
}

static void test_bpe_merges(void)
{
    char err[256] = "";
    /* ids: bytes 0..255, Ġt 256, he 257, Ġthe 258, ab 259, bc 260, xy 261, <|end|> 262, <tool> 263 */
    static const char *m1[] = {"\xc4\xa0 t", "h e", "\xc4\xa0t he", "a b", "b c"};
    struct lm_vocab *v = tiny_bpe(NULL, m1, 5, err);
    CHECKF(v != NULL, "%s", err);
    if (!v) {
        return;
    }
    CHECK(ids_are(v, " the", false, (int32_t[]){258}, 1));
    CHECK(ids_are(v, "abc", false, (int32_t[]){259, 'c'}, 2)); /* "a b" ranks before "b c" */
    CHECK(ids_are(v, "abab", false, (int32_t[]){259, 259}, 2));
    CHECK(ids_are(v, "a\n", false, (int32_t[]){'a', '\n'}, 2)); /* byte 10 is U+010A, token 10 */
    CHECK(lm_vocab_nl(v) == '\n');
    /* special tokens: control only with special=true, user-defined always */
    CHECK(ids_are(v, "x<|end|>", true, (int32_t[]){'x', 262}, 2));
    CHECK(ids_are(v, "<tool>x", false, (int32_t[]){263, 'x'}, 2));
    char buf[16];
    CHECK(lm_vocab_token_to_piece(v, 258, buf, 16) == 4 && memcmp(buf, " the", 4) == 0);
    CHECK(lm_vocab_token_to_piece(v, 258, buf, 3) == -4 && lm_vocab_token_to_piece(v, 258, NULL, 0) == -4);
    CHECK(lm_vocab_tokenize(v, "abab the", 8, NULL, 0, true, false) == -4); /* BOS ab ab Ġthe */
    CHECK(lm_vocab_token_to_piece(v, 262, buf, 16) == 0);
    CHECK(lm_vocab_token_to_piece(v, 263, buf, 16) == 6 && memcmp(buf, "<tool>", 6) == 0);
    CHECK(lm_vocab_token_to_piece(v, 256 + 8, buf, 16) == 0);                       /* out of range */
    CHECK(lm_vocab_bos(v) == 11 && lm_vocab_eos(v) == 11 && lm_vocab_unk(v) == -1); /* b1892's BPE defaults */
    lm_vocab_free(v);
    /* reversed ranks */
    static const char *m2[] = {"b c", "a b"};
    v = tiny_bpe(NULL, m2, 2, err);
    CHECK(v && ids_are(v, "abc", false, (int32_t[]){'a', 260}, 2));
    lm_vocab_free(v);
    /* a merge whose result is no token falls back to its characters */
    static const char *m3[] = {"x y", "xy x"};
    v = tiny_bpe(NULL, m3, 2, err);
    CHECK(v && ids_are(v, "xyx", false, (int32_t[]){'x', 'y', 'x'}, 3));
    lm_vocab_free(v);
}

/* SPM vocab: <unk> <s> </s>, optional byte tokens, then pieces with scores. */
static struct lm_vocab *tiny_spm(bool with_bytes, char *err)
{
    const char *toks[300];
    float scores[300];
    int32_t types[300];
    static char bytes[256][8];
    int n = 0;
    static const char *head[] = {"<unk>", "<s>", "</s>"};
    for (int i = 0; i < 3; i++) {
        types[n] = i == 0 ? LM_TOKEN_UNKNOWN : LM_TOKEN_CONTROL;
        scores[n] = 0;
        toks[n++] = head[i];
    }
    for (int b = 0; with_bytes && b < 256; b++) {
        snprintf(bytes[b], sizeof(bytes[b]), "<0x%02X>", b);
        types[n] = LM_TOKEN_BYTE;
        scores[n] = 0;
        toks[n++] = bytes[b];
    }
    /* kept off clang-format, which would give each part of "\xe2\x96\x81" "a" a line */
    /* clang-format off */
    static const char *pieces[] = {"\xe2\x96\x81", "a", "b", "c", "ab", "bc", ("\xe2\x96\x81" "a"), "abc", "x", "y",
                                   "xy", "yx", "\n"};
    /* clang-format on */
    static const float sc[] = {-1, -5, -5, -5, -2, -1, -3, -0.5f, -5, -5, -1, -1, -5};
    for (int i = 0; i < 13; i++) {
        types[n] = LM_TOKEN_NORMAL;
        scores[n] = sc[i];
        toks[n++] = pieces[i];
    }
    struct lm_vocab_desc d = lm_vocab_desc_default();
    d.type = LM_VOCAB_SPM;
    d.n_tokens = n;
    d.tokens = toks;
    d.scores = scores;
    d.types = types;
    struct lm_vocab *v = NULL;
    lm_vocab_build(&d, &v, err, 256);
    return v;
}

static void test_spm_merges(void)
{
    char err[256] = "";
    struct lm_vocab *v = tiny_spm(true, err);
    CHECKF(v != NULL, "%s", err);
    if (!v) {
        return;
    }
    int32_t B = 3 + 256; /* first piece id */
    /* "▁abc": bc (-1) before ab (-2) and ▁a (-3), then abc (-0.5) */
    CHECK(ids_are(v, "abc", false, (int32_t[]){B + 0, B + 7}, 2));
    /* equal scores: the leftmost pair wins: "xyx" -> xy x */
    CHECK(ids_are(v, "xyx", false, (int32_t[]){B + 0, B + 10, B + 8}, 3));
    /* byte fallback for an unknown character */
    CHECK(ids_are(v, "a\xc3\xa9", false, (int32_t[]){B + 6, 3 + 0xC3, 3 + 0xA9}, 3));
    /* special=true splits <s>; the first fragment is special so no prefix */
    CHECK(ids_are(v, "<s>ab", true, (int32_t[]){1, B + 4}, 2));
    CHECK(lm_vocab_nl(v) == 3 + '\n');
    char buf[8];
    CHECK(lm_vocab_token_to_piece(v, 3 + 0xC3, buf, 8) == 1 && (unsigned char)buf[0] == 0xC3);
    CHECK(lm_vocab_token_to_piece(v, B + 6, buf, 8) == 2 && memcmp(buf, " a", 2) == 0);
    lm_vocab_free(v);
    /* without byte tokens an unknown character is <unk>, and nl is absent */
    v = tiny_spm(false, err);
    CHECK(v && ids_are(v, "a\xc3\xa9", false, (int32_t[]){3 + 6, 0}, 2));
    CHECK(v && lm_vocab_nl(v) == -1);
    lm_vocab_free(v);
}

static lm_status build_with(struct lm_vocab_desc d, struct lm_vocab **v)
{
    char err[256] = "";
    lm_status st = lm_vocab_build(&d, v, err, sizeof(err));
    if (st) {
        CHECKF(err[0] != '\0', "status %d without a message", (int)st);
    }
    return st;
}

static void test_build_errors(void)
{
    static const char *toks[] = {"a", "b", "ab", "c"};
    struct lm_vocab_desc d = lm_vocab_desc_default();
    d.type = LM_VOCAB_BPE;
    d.n_tokens = 4;
    d.tokens = toks;
    struct lm_vocab *v = NULL;
    static const char *ok_m[] = {"a b"};
    static const char *bad_m[][1] = {{"ab"}, {" a"}, {"a "}, {""}};
    d.merges = ok_m;
    d.n_merges = 1;
    CHECK(build_with(d, &v) == LM_OK && v);
    lm_vocab_free(v);
    v = NULL;
    for (int i = 0; i < 4; i++) {
        d.merges = bad_m[i];
        CHECKF(build_with(d, &v) == LM_ERR_CORRUPT && !v, "merge \"%s\" must be refused", bad_m[i][0]);
    }
    d.merges = ok_m;
    struct lm_vocab_desc e = d;
    e.bos = 4;
    CHECK(build_with(e, &v) == LM_ERR_CORRUPT && !v);
    e = d, e.eos = -2;
    CHECK(build_with(e, &v) == LM_ERR_CORRUPT && !v);
    e = d, e.pad = INT32_MAX;
    CHECK(build_with(e, &v) == LM_ERR_CORRUPT && !v);
    e = d, e.prefix = 7;
    CHECK(build_with(e, &v) == LM_ERR_CORRUPT && !v);
    e = d, e.add_bos = 2;
    CHECK(build_with(e, &v) == LM_ERR_INVALID_ARG && !v);
    e = d, e.n_tokens = 0;
    CHECK(build_with(e, &v) == LM_ERR_INVALID_ARG && !v);
    e = d, e.type = (enum lm_vocab_type)7;
    CHECK(build_with(e, &v) == LM_ERR_INVALID_ARG && !v);
    e = d, e.n_merges = -1;
    CHECK(build_with(e, &v) == LM_ERR_INVALID_ARG && !v);
    /* defaults that do not fit a tiny vocab become -1; -1 is kept */
    e = d, e.bos = -1;
    CHECK(build_with(e, &v) == LM_OK && lm_vocab_bos(v) == -1 && lm_vocab_eos(v) == -1);
    int32_t t[4];
    CHECK(lm_vocab_tokenize(v, "ab", 2, t, 4, true, false) == 1 && t[0] == 2); /* no BOS to add */
    lm_vocab_free(v);
    lm_vocab_free(NULL);
    /* NULL vocab getters */
    CHECK(lm_vocab_n_tokens(NULL) == 0 && lm_vocab_bos(NULL) == -1 && lm_vocab_token_to_piece(NULL, 0, NULL, 0) == 0);
}

int main(void)
{
    test_unicode();
    test_utf8();
    test_byte_map();
    test_regex();
    test_pretokenizers();
    test_bpe_merges();
    test_spm_merges();
    test_build_errors();
    return lm_test_summary();
}
