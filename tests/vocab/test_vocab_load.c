/* test_vocab_load.c - lm_vocab_load on crafted GGUF files: a valid SPM, BPE
 * and WordPiece vocab, then one defect at a time (missing or mistyped keys, arrays of
 * different lengths, merges that do not parse, ids out of range), each of
 * which must give its status and a message; then random byte mutations of
 * the valid files, which must never crash (run under the sanitizers). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "gguf/gguf.h"
#include "lm_test.h"
#include "vocab/vocab.h"

#define TMP_PATH LM_BINARY_DIR "/test_vocab_load.tmp.gguf"

/* The tables below are kept off clang-format, which would put each part of
 * a split literal like "\xe2\x96\x81" "a" on a line of its own. */
/* clang-format off */
static const char *spm_tokens[] = {"<unk>", "<s>", "</s>", "<0x0A>", "\xe2\x96\x81", "a", "b", ("\xe2\x96\x81" "a"), ""};
/* clang-format on */
static const float spm_scores[] = {0, 0, 0, 0, -1, -2, -2, -0.5f, -9};
static const int32_t spm_types[] = {2, 3, 3, 6, 1, 1, 1, 1, 1};
#define SPM_N 9

/* clang-format off */
static const char *bpe_tokens[] = {"a", "b", "ab", "\xc4\xa0", ("\xc4\xa0" "ab"), "\xc4\x8a", "<|eot|>"};
/* clang-format on */
static const char *bpe_merges[] = {"a b", "\xc4\xa0 ab"};
#define BPE_N 7

/* clang-format off */
static const char *wpm_tokens[] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", ("\xe2\x96\x81" "a"), "b"};
/* clang-format on */
#define WPM_N 6

enum { SPM_FILE, BPE_FILE, WPM_FILE };

static struct lm_gguf_writer *base(int kind)
{
    struct lm_gguf_writer *w = NULL;
    CHECK(lm_gguf_writer_new(&w) == LM_OK);
    lm_gguf_set_str(w, "general.architecture", "llama");
    if (kind == WPM_FILE) { /* the keys of a converted BERT: cls, no bos/eos */
        static const int32_t types[WPM_N] = {3, 3, 3, 3, 1, 1};
        lm_gguf_set_str(w, "tokenizer.ggml.model", "bert");
        lm_gguf_set_arr_str(w, "tokenizer.ggml.tokens", wpm_tokens, WPM_N);
        lm_gguf_set_arr_data(w, "tokenizer.ggml.token_type", LM_GGUF_INT32, types, WPM_N);
        lm_gguf_set_u32(w, "tokenizer.ggml.unknown_token_id", 1);
        lm_gguf_set_u32(w, "tokenizer.ggml.seperator_token_id", 3);
        lm_gguf_set_u32(w, "tokenizer.ggml.padding_token_id", 0);
        lm_gguf_set_u32(w, "tokenizer.ggml.cls_token_id", 2);
    } else if (kind == BPE_FILE) {
        static const int32_t types[BPE_N] = {1, 1, 1, 1, 1, 1, 3};
        lm_gguf_set_str(w, "tokenizer.ggml.model", "gpt2");
        lm_gguf_set_str(w, "tokenizer.ggml.pre", "gpt-2");
        lm_gguf_set_arr_str(w, "tokenizer.ggml.tokens", bpe_tokens, BPE_N);
        lm_gguf_set_arr_data(w, "tokenizer.ggml.token_type", LM_GGUF_INT32, types, BPE_N);
        lm_gguf_set_arr_str(w, "tokenizer.ggml.merges", bpe_merges, 2);
        lm_gguf_set_u32(w, "tokenizer.ggml.bos_token_id", 6);
        lm_gguf_set_u32(w, "tokenizer.ggml.eos_token_id", 6);
    } else {
        lm_gguf_set_str(w, "tokenizer.ggml.model", "llama");
        lm_gguf_set_arr_str(w, "tokenizer.ggml.tokens", spm_tokens, SPM_N);
        lm_gguf_set_arr_data(w, "tokenizer.ggml.scores", LM_GGUF_FLOAT32, spm_scores, SPM_N);
        lm_gguf_set_arr_data(w, "tokenizer.ggml.token_type", LM_GGUF_INT32, spm_types, SPM_N);
        lm_gguf_set_u32(w, "tokenizer.ggml.bos_token_id", 1);
        lm_gguf_set_u32(w, "tokenizer.ggml.eos_token_id", 2);
        lm_gguf_set_u32(w, "tokenizer.ggml.unknown_token_id", 0);
        lm_gguf_set_u32(w, "tokenizer.ggml.padding_token_id", 0xFFFFFFFFu);
    }
    return w;
}

/* Write w, open it, load the vocab; frees w. Returns the load status. */
static lm_status load_from(struct lm_gguf_writer *w, struct lm_vocab **out, char *err, size_t err_size)
{
    struct lm_gguf *g = NULL;
    *out = NULL;
    err[0] = '\0';
    lm_status st = lm_gguf_write_file(w, TMP_PATH);
    lm_gguf_writer_free(w);
    if (st == LM_OK) {
        st = lm_gguf_open(TMP_PATH, &g, err, err_size);
        CHECKF(st == LM_OK, "writing/reading the crafted file: %s", err);
    }
    if (st == LM_OK) {
        st = lm_vocab_load(g, out, err, err_size);
    }
    lm_gguf_close(g);
    remove(TMP_PATH);
    return st;
}

/* Expect status want and a non-empty message (and no vocab). */
static void expect(struct lm_gguf_writer *w, lm_status want, const char *what)
{
    struct lm_vocab *v;
    char err[256];
    lm_status st = load_from(w, &v, err, sizeof(err));
    CHECKF(st == want && (st == LM_OK) == (v != NULL), "%s: got %s (%s), want %s", what, lm_status_str(st), err,
           lm_status_str(want));
    CHECKF(st == LM_OK || err[0], "%s: no message", what);
    lm_vocab_free(v);
}

static void test_valid(void)
{
    struct lm_vocab *v;
    char err[256];
    CHECKF(load_from(base(false), &v, err, sizeof(err)) == LM_OK, "spm: %s", err);
    if (v) {
        int32_t t[8];
        CHECK(lm_vocab_type(v) == LM_VOCAB_SPM && lm_vocab_n_tokens(v) == SPM_N);
        CHECK(lm_vocab_tokenize(v, "a", 1, t, 8, true, false) == 2 && t[0] == 1 && t[1] == 7);
        CHECK(lm_vocab_pad(v) == -1 && lm_vocab_sep(v) == -1 && lm_vocab_nl(v) == 3 && lm_vocab_add_bos(v) == -1);
        CHECK(lm_vocab_find(v, "", 0) == -1 && lm_vocab_token_score(v, 7) == -0.5f);
        CHECK(strcmp(lm_vocab_pre(v), "") == 0);
    }
    lm_vocab_free(v);
    CHECKF(load_from(base(true), &v, err, sizeof(err)) == LM_OK, "bpe: %s", err);
    if (v) {
        int32_t t[8];
        CHECK(lm_vocab_type(v) == LM_VOCAB_BPE && strcmp(lm_vocab_pre(v), "default") == 0);
        CHECK(lm_vocab_tokenize(v, " ab", 3, t, 8, true, false) == 2 && t[0] == 6 && t[1] == 4);
        CHECK(lm_vocab_nl(v) == 5 && lm_vocab_unk(v) == -1);
    }
    lm_vocab_free(v);
    CHECKF(load_from(base(WPM_FILE), &v, err, sizeof(err)) == LM_OK, "wpm: %s", err);
    if (v) {
        int32_t t[8];
        CHECK(lm_vocab_type(v) == LM_VOCAB_WPM && strcmp(lm_vocab_pre(v), "") == 0);
        CHECK(lm_vocab_bos(v) == 2 && lm_vocab_eos(v) == 3 && lm_vocab_unk(v) == 1 && lm_vocab_nl(v) == 0);
        CHECK(lm_vocab_tokenize(v, "AB c", 4, t, 8, true, false) == 5 && t[0] == 2 && t[1] == 4 && t[2] == 5 &&
              t[3] == 1 && t[4] == 3);
    }
    lm_vocab_free(v);
    /* a bos key wins over cls; without any, "[CLS]" is looked up */
    struct lm_gguf_writer *w = base(WPM_FILE);
    lm_gguf_set_u32(w, "tokenizer.ggml.bos_token_id", 4);
    CHECK(load_from(w, &v, err, sizeof(err)) == LM_OK && lm_vocab_bos(v) == 4 && lm_vocab_eos(v) == 3);
    lm_vocab_free(v);
    w = base(WPM_FILE);
    lm_gguf_remove_key(w, "tokenizer.ggml.cls_token_id");
    lm_gguf_remove_key(w, "tokenizer.ggml.seperator_token_id");
    CHECK(load_from(w, &v, err, sizeof(err)) == LM_OK && lm_vocab_bos(v) == 2 && lm_vocab_sep(v) == 3);
    lm_vocab_free(v);
}

static void test_defects(void)
{
    struct lm_gguf_writer *w;
    w = base(false), lm_gguf_remove_key(w, "tokenizer.ggml.model");
    expect(w, LM_ERR_NOT_FOUND, "no model");
    w = base(false), lm_gguf_set_str(w, "tokenizer.ggml.model", "t5");
    expect(w, LM_ERR_UNSUPPORTED, "t5");
    w = base(WPM_FILE), lm_gguf_set_u32(w, "tokenizer.ggml.cls_token_id", WPM_N);
    expect(w, LM_ERR_CORRUPT, "cls out of range");
    w = base(WPM_FILE), lm_gguf_set_str(w, "tokenizer.ggml.cls_token_id", "2");
    expect(w, LM_ERR_CORRUPT, "cls a string");
    w = base(false), lm_gguf_set_u32(w, "tokenizer.ggml.model", 1);
    expect(w, LM_ERR_CORRUPT, "model not a string");
    w = base(false), lm_gguf_remove_key(w, "tokenizer.ggml.tokens");
    expect(w, LM_ERR_NOT_FOUND, "no tokens");
    w = base(false), lm_gguf_set_arr_data(w, "tokenizer.ggml.tokens", LM_GGUF_INT32, spm_types, SPM_N);
    expect(w, LM_ERR_CORRUPT, "tokens not strings");
    w = base(false), lm_gguf_set_arr_str(w, "tokenizer.ggml.tokens", spm_tokens, 0);
    expect(w, LM_ERR_CORRUPT, "no tokens in the array");
    w = base(false), lm_gguf_set_arr_data(w, "tokenizer.ggml.scores", LM_GGUF_FLOAT32, spm_scores, SPM_N - 1);
    expect(w, LM_ERR_CORRUPT, "scores shorter");
    w = base(false), lm_gguf_set_arr_data(w, "tokenizer.ggml.scores", LM_GGUF_INT32, spm_types, SPM_N);
    expect(w, LM_ERR_CORRUPT, "scores not float");
    w = base(false), lm_gguf_set_f32(w, "tokenizer.ggml.scores", 1.0f);
    expect(w, LM_ERR_CORRUPT, "scores not an array");
    static const int32_t types_long[SPM_N + 1] = {2, 3, 3, 6, 1, 1, 1, 1, 1, 1};
    w = base(false), lm_gguf_set_arr_data(w, "tokenizer.ggml.token_type", LM_GGUF_INT32, types_long, SPM_N + 1);
    expect(w, LM_ERR_CORRUPT, "token_type longer");
    w = base(false), lm_gguf_set_arr_data(w, "tokenizer.ggml.token_type", LM_GGUF_FLOAT32, spm_scores, SPM_N);
    expect(w, LM_ERR_CORRUPT, "token_type not int32");
    w = base(false), lm_gguf_set_u32(w, "tokenizer.ggml.bos_token_id", SPM_N);
    expect(w, LM_ERR_CORRUPT, "bos out of range");
    w = base(false), lm_gguf_set_u32(w, "tokenizer.ggml.eos_token_id", 0x80000000u);
    expect(w, LM_ERR_CORRUPT, "eos out of range");
    w = base(false), lm_gguf_set_i32(w, "tokenizer.ggml.unknown_token_id", -5);
    expect(w, LM_ERR_CORRUPT, "unk negative");
    w = base(false), lm_gguf_set_str(w, "tokenizer.ggml.seperator_token_id", "3");
    expect(w, LM_ERR_CORRUPT, "sep a string");
    w = base(false), lm_gguf_set_u32(w, "tokenizer.ggml.prefix_token_id", 99);
    expect(w, LM_ERR_CORRUPT, "prefix out of range");
    w = base(false), lm_gguf_set_u32(w, "tokenizer.ggml.add_bos_token", 1);
    expect(w, LM_ERR_CORRUPT, "add_bos not a bool");
    w = base(false), lm_gguf_set_u32(w, "tokenizer.ggml.pre", 1);
    expect(w, LM_ERR_CORRUPT, "pre not a string");
    w = base(true), lm_gguf_remove_key(w, "tokenizer.ggml.merges");
    expect(w, LM_ERR_NOT_FOUND, "gpt2 without merges");
    static const char *bad_merges[] = {"a b", "ab"};
    w = base(true), lm_gguf_set_arr_str(w, "tokenizer.ggml.merges", bad_merges, 2);
    expect(w, LM_ERR_CORRUPT, "merge without a space");
    w = base(true), lm_gguf_set_arr_data(w, "tokenizer.ggml.merges", LM_GGUF_INT32, spm_types, 2);
    expect(w, LM_ERR_CORRUPT, "merges not strings");

    /* accepted: none-ids, -1 as int32, bools, optional ids, unknown pre, duplicate and empty tokens */
    struct lm_vocab *v;
    char err[256];
    w = base(false);
    lm_gguf_set_i32(w, "tokenizer.ggml.bos_token_id", -1);
    lm_gguf_set_u32(w, "tokenizer.ggml.eos_token_id", 0xFFFFFFFFu);
    lm_gguf_set_bool(w, "tokenizer.ggml.add_bos_token", true);
    lm_gguf_set_bool(w, "tokenizer.ggml.add_eos_token", false);
    lm_gguf_set_u32(w, "tokenizer.ggml.eot_token_id", 2);
    CHECKF(load_from(w, &v, err, sizeof(err)) == LM_OK, "%s", err);
    CHECK(v && lm_vocab_bos(v) == -1 && lm_vocab_eos(v) == -1 && lm_vocab_add_bos(v) == 1 && lm_vocab_add_eos(v) == 0);
    CHECK(v && lm_vocab_eot(v) == 2 && lm_vocab_prefix(v) == 32007);
    lm_vocab_free(v);
    /* clang-format off */
    static const char *dup[] = {"a", "b", "ab", "\xc4\xa0", ("\xc4\xa0" "ab"), "\xc4\x8a", "a"};
    /* clang-format on */
    w = base(true);
    lm_gguf_set_str(w, "tokenizer.ggml.pre", "some-future-model");
    lm_gguf_set_arr_str(w, "tokenizer.ggml.tokens", dup, BPE_N);
    CHECKF(load_from(w, &v, err, sizeof(err)) == LM_OK, "%s", err);
    CHECK(v && lm_vocab_find(v, "a", 1) == 6 && strcmp(lm_vocab_pre(v), "default") == 0);
    lm_vocab_free(v);
}

static void quiet(enum lm_log_level level, const char *text, void *user) {}

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 11);
}

/* Random byte edits of a valid file: whatever opens must load or fail
 * cleanly, and a loaded vocab must tokenize and detokenize safely. */
static void test_mutations(int kind)
{
    struct lm_gguf_writer *w = base(kind);
    CHECK(lm_gguf_write_file(w, TMP_PATH) == LM_OK);
    lm_gguf_writer_free(w);
    size_t n = 0;
    unsigned char *orig = lm_test_read_file(TMP_PATH, &n);
    remove(TMP_PATH);
    CHECK(orig && n > 64);
    if (!orig) {
        return;
    }
    unsigned char *buf = malloc(n);
    int n_open = 0, n_load = 0;
    lm_log_set(quiet, NULL); /* mutated names make warnings */
    for (int it = 0; it < 3000; it++) {
        memcpy(buf, orig, n);
        size_t len = n;
        int edits = 1 + (int)(rnd() % 4);
        for (int e = 0; e < edits; e++) {
            size_t at = rnd() % n;
            buf[at] = (rnd() % 3 == 0) ? (unsigned char)(buf[at] ^ (1u << (rnd() % 8))) : (unsigned char)rnd();
        }
        if (rnd() % 8 == 0) {
            len = rnd() % n;
        }
        struct lm_gguf *g = NULL;
        struct lm_vocab *v = NULL;
        char err[256];
        if (lm_gguf_open_memory(buf, len, &g, err, sizeof(err)) == LM_OK) {
            n_open++;
            if (lm_vocab_load(g, &v, err, sizeof(err)) == LM_OK) {
                n_load++;
                int32_t toks[64];
                char piece[64];
                lm_vocab_tokenize(v, "<s>a b\n\xff ab<|eot|>", 17, toks, 64, true, true);
                for (int32_t id = -1; id <= lm_vocab_n_tokens(v); id++) {
                    lm_vocab_token_to_piece(v, id, piece, sizeof(piece));
                }
            }
            lm_vocab_free(v);
            lm_gguf_close(g);
        }
    }
    lm_log_set(NULL, NULL);
    static const char *const kind_names[] = {[SPM_FILE] = "spm", [BPE_FILE] = "bpe", [WPM_FILE] = "wpm"};
    printf("%s mutations: %d opened, %d loaded, no crash\n", kind_names[kind], n_open, n_load);
    CHECK(n_open > 0);
    free(buf);
    free(orig);
}

int main(void)
{
    test_valid();
    test_defects();
    test_mutations(SPM_FILE);
    test_mutations(BPE_FILE);
    test_mutations(WPM_FILE);
    return lm_test_summary();
}
