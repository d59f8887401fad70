/* test_vocab_train.c - tokenizer training (src/train/vocab_train.c): train
 * on the head of the TinyStories sample, write a vocab-only GGUF, load it
 * through llama.h and check that text round-trips, that characters outside
 * the vocab fall back to bytes, the size, determinism, compression on
 * held-out text, that the tokenizer's score-driven merging replays the
 * learned merge order, and that bad parameters give errors.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "llama.h"
#include "lm_test.h"
#include "train/vocab_train.h"
#include "vocab/unicode.h"
#include "vocab/vocab.h"

#define TRAIN_BYTES 300000
#define HELDOUT_BYTES 100000

static const char SPACE[] = "\xe2\x96\x81"; /* U+2581 */

static void quiet(enum ggml_log_level level, const char *text, void *user)
{
    (void)level;
    (void)text;
    (void)user;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* The documents of text[0..n): the stories between "<|endoftext|>" lines,
 * without the newline before the separator. Pointers into text. */
struct docs {
    const char *d[4096];
    size_t len[4096];
    size_t n;
};

static void split_docs(const char *text, size_t n, struct docs *out)
{
    static const char sep[] = "\n<|endoftext|>\n";
    const size_t sl = sizeof(sep) - 1;
    size_t start = 0;
    out->n = 0;
    for (size_t i = 0; i + sl <= n && out->n < 4095; i++) {
        if (memcmp(text + i, sep, sl) == 0) {
            out->d[out->n] = text + start;
            out->len[out->n++] = i - start;
            start = i + sl;
            i += sl - 1;
        }
    }
    out->d[out->n] = text + start;
    out->len[out->n++] = n - start;
}

static struct lm_trained_vocab *train(const struct docs *d, int32_t n_vocab, double *secs)
{
    struct lm_vocab_train_params p = lm_vocab_train_default_params();
    struct lm_trained_vocab *v = NULL;
    char err[256] = "";
    p.n_vocab = n_vocab;
    double t0 = now_s();
    lm_status st = lm_vocab_train(d->d, d->len, d->n, &p, &v, err, sizeof(err));
    if (secs) {
        *secs = now_s() - t0;
    }
    CHECKF(st == LM_OK && v, "train n_vocab %d: %s", n_vocab, err);
    return v;
}

/* llama_tokenize without BOS, then the pieces joined; 1 when that gives " " + text
 * (the tokenizer's space prefix comes back as the first piece's space). */
static int round_trips(struct llama_model *m, const char *text, size_t n, llama_token *ids, int32_t max_ids)
{
    static char out[1 << 16];
    int32_t k = llama_tokenize(m, text, (int32_t)n, ids, max_ids, false, false);
    size_t o = 0;
    if (k < 0) {
        return 0;
    }
    for (int32_t i = 0; i < k; i++) {
        int32_t l = llama_token_to_piece(m, ids[i], out + o, (int32_t)(sizeof(out) - o));
        if (l < 0) {
            return 0;
        }
        o += (size_t)l;
    }
    return o == n + 1 && out[0] == ' ' && memcmp(out + 1, text, n) == 0;
}

static void test_lines(struct llama_model *m, const char *text, size_t n)
{
    static llama_token ids[1 << 14];
    int bad = 0, lines = 0;
    for (size_t i = 0; i < n;) {
        const char *nl = memchr(text + i, '\n', n - i);
        size_t e = nl ? (size_t)(nl - text) : n;
        if (e > i && !round_trips(m, text + i, e - i, ids, 1 << 14) && bad++ < 3) {
            fprintf(stderr, "line does not round-trip: %.*s\n", (int)(e - i), text + i);
        }
        lines++;
        i = e + 1;
    }
    CHECKF(bad == 0, "%d of %d lines do not round-trip", bad, lines);
}

/* Characters the vocab lacks come back through <0xNN> tokens. */
static void test_byte_fallback(struct llama_model *m, const struct lm_trained_vocab *v)
{
    static const char *const texts[] = {"caf\xc3\xa9 au lait", "I \xf0\x9f\x98\x80 it", "a\tb", "\xff\xfe broken"};
    llama_token ids[64];
    for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
        CHECKF(round_trips(m, texts[i], strlen(texts[i]), ids, 64), "'%s' does not round-trip", texts[i]);
    }
    /* the emoji is not in this text: its four bytes are four byte tokens */
    int32_t k = llama_tokenize(m, "\xf0\x9f\x98\x80", 4, ids, 64, false, false);
    int bytes = 0;
    for (int32_t i = 0; i < k; i++) {
        bytes += lm_trained_vocab_type(v, ids[i]) == LM_TOKEN_BYTE;
    }
    CHECKF(bytes == 4 && ids[k - 1] == LM_VOCAB_TRAIN_BYTE0 + 0x80, "emoji: %d byte tokens of %d", bytes, k);
    k = llama_tokenize(m, "\t", 1, ids, 64, false, false);
    CHECK(k >= 1 && ids[k - 1] == LM_VOCAB_TRAIN_BYTE0 + '\t');
}

/* Layout: specials, bytes, pieces with falling scores, exactly n tokens. */
static void test_layout(struct llama_model *m, const struct lm_trained_vocab *v, int32_t n_vocab)
{
    CHECK(lm_trained_vocab_n_vocab(v) == n_vocab);
    CHECK(llama_n_vocab(m) == n_vocab);
    CHECK(llama_token_bos(m) == 1 && llama_token_eos(m) == 2);
    CHECK(llama_vocab_type(m) == LLAMA_VOCAB_TYPE_SPM);
    CHECK(lm_trained_vocab_type(v, 0) == LM_TOKEN_UNKNOWN && lm_trained_vocab_type(v, 1) == LM_TOKEN_CONTROL);
    CHECK(!strcmp(lm_trained_vocab_text(v, 3 + 0x41, NULL), "<0x41>"));
    int ok = 1;
    for (int32_t id = LM_VOCAB_TRAIN_FIRST_PIECE; id < n_vocab; id++) {
        ok &= lm_trained_vocab_type(v, id) == LM_TOKEN_NORMAL && llama_token_get_type(m, id) == LLAMA_TOKEN_TYPE_NORMAL;
        ok &= lm_trained_vocab_score(v, id) == -(float)(id - LM_VOCAB_TRAIN_FIRST_PIECE);
        ok &= llama_token_get_score(m, id) == lm_trained_vocab_score(v, id);
        ok &= !strcmp(llama_token_get_text(m, id), lm_trained_vocab_text(v, id, NULL));
    }
    CHECK(ok);
}

/* The keys llama.cpp's converter writes for a llama2 (SentencePiece) vocab. */
static void test_keys(const char *path)
{
    struct lm_gguf *g = NULL;
    const char *str;
    size_t len;
    bool b;
    uint32_t u;
    CHECK(lm_gguf_open(path, &g, NULL, 0) == LM_OK);
    if (!g) {
        return;
    }
    CHECK(lm_gguf_get_str(g, lm_gguf_find_key(g, "general.architecture"), &str, &len) == LM_OK &&
          !strcmp(str, "llama"));
    CHECK(lm_gguf_get_str(g, lm_gguf_find_key(g, "tokenizer.ggml.model"), &str, &len) == LM_OK &&
          !strcmp(str, "llama"));
    CHECK(lm_gguf_get_bool(g, lm_gguf_find_key(g, "tokenizer.ggml.add_bos_token"), &b) == LM_OK && b);
    CHECK(lm_gguf_get_bool(g, lm_gguf_find_key(g, "tokenizer.ggml.add_eos_token"), &b) == LM_OK && !b);
    CHECK(lm_gguf_get_u32(g, lm_gguf_find_key(g, "tokenizer.ggml.unknown_token_id"), &u) == LM_OK && u == 0);
    CHECK(lm_gguf_kv_type(g, lm_gguf_find_key(g, "tokenizer.ggml.bos_token_id")) == LM_GGUF_UINT32);
    CHECK(lm_gguf_n_tensors(g) == 0);
    lm_gguf_close(g);
}

static double bytes_per_token(struct llama_model *m, const char *text, size_t n)
{
    static llama_token ids[HELDOUT_BYTES + 16];
    int32_t k = llama_tokenize(m, text, (int32_t)n, ids, HELDOUT_BYTES + 16, false, false);
    CHECK(k > 0);
    return k > 0 ? (double)n / k : 0;
}

/* ---- the learned merges applied directly, as plain BPE ---- */
struct rank {
    int32_t left, right, rank, result;
};

static int cmp_rank(const void *x, const void *y)
{
    const struct rank *a = x, *b = y;
    return a->left != b->left ? (a->left < b->left ? -1 : 1) : a->right < b->right ? -1 : a->right > b->right;
}

/* BPE of one word (escaped text): repeatedly merge the adjacent pair of
 * lowest rank, leftmost first. Appends the ids. */
static int32_t bpe_word(const struct lm_vocab *lv, const struct rank *r, size_t n_r, const char *s, size_t n,
                        int32_t *out)
{
    int32_t sym[512], n_sym = 0, n_out = 0;
    for (size_t i = 0; i < n && n_sym < 512;) {
        int len = lm_vocab_utf8_len(s + i, n - i);
        sym[n_sym] = lm_vocab_find(lv, s + i, (size_t)len);
        if (sym[n_sym] < 0) { /* bytes */
            for (int b = 0; b < len; b++) {
                sym[n_sym++] = -1 - (unsigned char)s[i + b];
            }
        } else {
            n_sym++;
        }
        i += (size_t)len;
    }
    for (;;) {
        int32_t best = -1, best_rank = INT32_MAX, result = -1;
        for (int32_t i = 0; i + 1 < n_sym; i++) {
            struct rank key = {.left = sym[i], .right = sym[i + 1]};
            const struct rank *f = bsearch(&key, r, n_r, sizeof(*r), cmp_rank);
            if (f && f->rank < best_rank) {
                best = i, best_rank = f->rank, result = f->result;
            }
        }
        if (best < 0) {
            break;
        }
        sym[best] = result;
        memmove(sym + best + 1, sym + best + 2, (size_t)(n_sym - best - 2) * sizeof(*sym));
        n_sym--;
    }
    for (int32_t i = 0; i < n_sym; i++) {
        out[n_out++] = sym[i] >= 0 ? sym[i] : LM_VOCAB_TRAIN_BYTE0 + (-1 - sym[i]);
    }
    return n_out;
}

/* Each line of text through lamina's SPM tokenizer and through plain BPE of
 * its words: the ids must agree (the scores encode the merge order). */
static void test_merge_order(const struct lm_trained_vocab *v, const char *text, size_t n)
{
    struct lm_vocab *lv = NULL;
    char err[256] = "";
    CHECKF(lm_trained_vocab_to_vocab(v, &lv, err, sizeof(err)) == LM_OK, "%s", err);
    int32_t n_r = lm_trained_vocab_n_merges(v);
    struct rank *r = malloc((size_t)n_r * sizeof(*r));
    int texts_ok = n_r > 0 && lm_trained_vocab_merge(v, n_r, &r[0].left, &r[0].right, &r[0].result) < 0;
    for (int32_t i = 0; i < n_r; i++) { /* each merge's result is its sides' texts joined */
        lm_trained_vocab_merge(v, i, &r[i].left, &r[i].right, &r[i].result);
        r[i].rank = i;
        size_t ll, lr, lm;
        const char *tl = lm_trained_vocab_text(v, r[i].left, &ll), *tr = lm_trained_vocab_text(v, r[i].right, &lr);
        const char *tm = lm_trained_vocab_text(v, r[i].result, &lm);
        texts_ok &= lm == ll + lr && !memcmp(tm, tl, ll) && !memcmp(tm + ll, tr, lr);
    }
    CHECK(texts_ok);
    qsort(r, (size_t)n_r, sizeof(*r), cmp_rank);
    static int32_t a[4096], b[4096];
    static char esc[16384];
    int bad = 0, lines = 0;
    for (size_t i = 0; i < n && lv;) {
        const char *nl = memchr(text + i, '\n', n - i);
        size_t e = nl ? (size_t)(nl - text) : n, m = 0;
        if (e == i || e - i > 2000) { /* empty text has no prefix */
            i = e + 1;
            continue;
        }
        int32_t na = lm_vocab_tokenize(lv, text + i, (int32_t)(e - i), a, 4096, false, false), nb = 0;
        memcpy(esc, SPACE, 3); /* escape as the tokenizer does */
        m = 3;
        for (size_t j = i; j < e; j++) {
            if (text[j] == ' ') {
                memcpy(esc + m, SPACE, 3);
                m += 3;
            } else {
                esc[m++] = text[j];
            }
        }
        for (size_t k = 3, ws = 0; k <= m; k++) { /* a word before each ▁ */
            if (k == m || (k + 3 <= m && memcmp(esc + k, SPACE, 3) == 0)) {
                nb += bpe_word(lv, r, (size_t)n_r, esc + ws, k - ws, b + nb);
                ws = k;
            }
        }
        lines++;
        if ((na != nb || memcmp(a, b, (size_t)na * sizeof(*a))) && bad++ < 3) {
            fprintf(stderr, "SPM and BPE differ (%d vs %d tokens): %.*s\n", na, nb, (int)(e - i), text + i);
        }
        i = e + 1;
    }
    CHECKF(bad == 0, "%d of %d lines tokenize differently", bad, lines);
    free(r);
    lm_vocab_free(lv);
}

static void test_bad_params(const struct docs *d)
{
    struct lm_vocab_train_params p = lm_vocab_train_default_params();
    struct lm_trained_vocab *v = NULL;
    char err[256];
    static const int32_t bad_n[] = {0, -5, 259, 32001, INT32_MAX};
    for (size_t i = 0; i < sizeof(bad_n) / sizeof(bad_n[0]); i++) {
        p.n_vocab = bad_n[i];
        err[0] = '\0';
        CHECKF(lm_vocab_train(d->d, d->len, d->n, &p, &v, err, sizeof(err)) == LM_ERR_INVALID_ARG && !v &&
                   strstr(err, "n_vocab"),
               "n_vocab %d: '%s'", bad_n[i], err);
    }
    p = lm_vocab_train_default_params();
    p.min_char_count = 0;
    CHECK(lm_vocab_train(d->d, d->len, d->n, &p, &v, err, sizeof(err)) == LM_ERR_INVALID_ARG && !v);
    p = lm_vocab_train_default_params();
    p.max_piece_chars = 1;
    CHECK(lm_vocab_train(d->d, d->len, d->n, &p, &v, err, sizeof(err)) == LM_ERR_INVALID_ARG && !v);
    p = lm_vocab_train_default_params();
    CHECK(lm_vocab_train(d->d, d->len, 0, &p, &v, err, sizeof(err)) == LM_ERR_INVALID_ARG && !v);
    CHECK(strstr(err, "no training text") != NULL);
    const char *empty[2] = {"", NULL};
    size_t zero[2] = {0, 0};
    CHECK(lm_vocab_train(empty, zero, 2, &p, &v, err, sizeof(err)) == LM_ERR_INVALID_ARG && !v);
    CHECK(lm_vocab_train(NULL, NULL, 3, &p, &v, err, sizeof(err)) == LM_ERR_INVALID_ARG && !v);
    CHECK(lm_vocab_train(d->d, d->len, d->n, &p, NULL, err, sizeof(err)) == LM_ERR_INVALID_ARG);
    /* too little text for the vocab: a message saying how far it got */
    const char *tiny[1] = {"ab ab abc\nbc"};
    p.n_vocab = 300;
    CHECK(lm_vocab_train(tiny, NULL, 1, &p, &v, err, sizeof(err)) == LM_ERR_INVALID_ARG && !v);
    CHECKF(strstr(err, "gives only") != NULL, "%s", err);
    /* fewer characters than room, no merges: fine; NULL err is fine */
    p.n_vocab = 261;
    CHECK(lm_vocab_train(tiny, NULL, 1, &p, &v, NULL, 0) == LM_OK && lm_trained_vocab_n_vocab(v) == 261);
    lm_trained_vocab_free(v);
    lm_trained_vocab_free(NULL);
    CHECK(lm_trained_vocab_n_vocab(NULL) == 0 && lm_trained_vocab_type(NULL, 5) == 0);
}

/* Another run, on the documents in reverse order (so the words enter the
 * hash tables in another order), gives the same tokens and scores. */
static void test_deterministic(const struct docs *d, const struct lm_trained_vocab *v)
{
    static struct docs r;
    r.n = d->n;
    for (size_t i = 0; i < d->n; i++) {
        r.d[i] = d->d[d->n - 1 - i];
        r.len[i] = d->len[d->n - 1 - i];
    }
    struct lm_trained_vocab *w = train(&r, lm_trained_vocab_n_vocab(v), NULL);
    int same = w != NULL && lm_trained_vocab_n_merges(v) == lm_trained_vocab_n_merges(w);
    for (int32_t id = 0; same && id < lm_trained_vocab_n_vocab(v); id++) {
        size_t la, lb;
        const char *a = lm_trained_vocab_text(v, id, &la), *b = lm_trained_vocab_text(w, id, &lb);
        same = la == lb && !memcmp(a, b, la) && lm_trained_vocab_score(v, id) == lm_trained_vocab_score(w, id);
    }
    CHECK(same);
    lm_trained_vocab_free(w);
}

static void test_size(const struct docs *d, const char *train_text, size_t train_n, const char *held, size_t held_n,
                      int32_t n_vocab, double min_bpt)
{
    double secs;
    struct lm_trained_vocab *v = train(d, n_vocab, &secs);
    char path[128];
    snprintf(path, sizeof(path), "/tmp/lamina-train-%d-vocab-%d.gguf", (int)getpid(), (int)n_vocab);
    CHECK(v && lm_trained_vocab_write_file(v, NULL, path) == LM_OK);
    struct llama_model_params mp = llama_model_default_params();
    mp.vocab_only = true;
    struct llama_model *m = v ? llama_load_model_from_file(path, mp) : NULL;
    CHECKF(m != NULL, "cannot load %s", path);
    test_keys(path);
    if (m) {
        test_layout(m, v, n_vocab);
        test_lines(m, train_text, train_n);
        test_lines(m, held, held_n);
        test_byte_fallback(m, v);
        double bpt = bytes_per_token(m, held, held_n);
        printf("n_vocab %d: trained in %.3f s, %d merges, %.3f bytes/token on held-out text\n", (int)n_vocab, secs,
               (int)lm_trained_vocab_n_merges(v), bpt);
        CHECKF(bpt > min_bpt, "%.3f bytes per token", bpt);
        test_merge_order(v, train_text, train_n);
        if (n_vocab == 512) {
            test_deterministic(d, v);
        }
    }
    llama_free_model(m);
    lm_trained_vocab_free(v);
    remove(path);
}

int main(void)
{
    size_t n = 0, held_n = 0;
    char *text = lm_test_read_file(lm_test_shared("corpus/train/tinystories-v1-train-head-2MiB.txt"), &n);
    char *held = lm_test_read_file(lm_test_shared("corpus/heldout.txt"), &held_n);
    CHECKF(text && held && n > TRAIN_BYTES && held_n > HELDOUT_BYTES, "the corpus under %s", LM_SHARED_DIR);
    if (!text || !held || n <= TRAIN_BYTES || held_n <= HELDOUT_BYTES) {
        return lm_test_summary();
    }
    n = TRAIN_BYTES;
    while (n > 0 && text[n - 1] != '\n') { /* whole lines */
        n--;
    }
    held_n = HELDOUT_BYTES;
    while (held_n > 0 && held[held_n - 1] != '\n') {
        held_n--;
    }
    llama_backend_init(false);
    llama_log_set(quiet, NULL);
    static struct docs d;
    split_docs(text, n, &d);
    test_bad_params(&d);
    test_size(&d, text, n, held, held_n, 512, 2.0);  /* 2.17 measured */
    test_size(&d, text, n, held, held_n, 2048, 3.5); /* 3.78 measured */
    llama_backend_free();
    free(text);
    free(held);
    return lm_test_summary();
}
