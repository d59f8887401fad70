/* fuzz_vocab.c - fuzz target for tokenize / detokenize on every vocabulary.
 *
 * Once per process every ggml-vocab-*.gguf under LM_SHARED_DIR/models/ggml-vocab
 * is loaded vocab_only (sorted by name; the ones lamina does not support, such
 * as WordPiece, are skipped). An input is:
 *   byte 0: the vocabulary (modulo the number loaded);
 *   byte 1: flags: bit 0 add_bos, bit 1 special, bit 2 the rest is token ids
 *           (little-endian int32, any value) instead of text;
 *   the rest: text, or ids.
 * Text is tokenized through llama_tokenize's size protocol (a count query, a
 * too-small buffer, the exact buffer) and every token is detokenized through
 * llama_token_to_piece's protocol; ids go to the piece and getter functions.
 * The promises checked (abort() when broken): the count query, the retry and
 * the exact call agree; every id is in [0, n_vocab); a piece needs what
 * it says and fits exactly; an unknown id gives 0 and "". A crash, a sanitizer
 * report or a timeout (quadratic time) is a finding.
 */
#include <dirent.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llama.h"

#define REQUIRE(c)                                                                                                \
    do {                                                                                                          \
        if (!(c)) {                                                                                               \
            fprintf(stderr, "fuzz_vocab: %s:%d: broken promise: %s\n", __FILE__, __LINE__, #c);                    \
            abort();                                                                                              \
        }                                                                                                         \
    } while (0)

#define MAX_VOCABS 32

static struct llama_model *vocabs[MAX_VOCABS];
static int n_vocabs;
static volatile unsigned sink;

static void quiet(enum ggml_log_level level, const char *text, void *user) { (void)level, (void)text, (void)user; }

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static void load_all(void)
{
    char dir[1024], path[2048];
    snprintf(dir, sizeof dir, "%s/models/ggml-vocab", LM_SHARED_DIR);
    char *names[64];
    int n = 0;
    DIR *d = opendir(dir);
    for (struct dirent *e; d && n < 64 && (e = readdir(d));) {
        size_t len = strlen(e->d_name);
        if (len > 5 && !strcmp(e->d_name + len - 5, ".gguf"))
            names[n++] = strdup(e->d_name);
    }
    if (d)
        closedir(d);
    qsort(names, (size_t)n, sizeof *names, by_name);
    struct llama_model_params mp = llama_model_default_params();
    mp.vocab_only = true;
    for (int i = 0; i < n; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        struct llama_model *m = n_vocabs < MAX_VOCABS ? llama_load_model_from_file(path, mp) : NULL;
        if (m)
            vocabs[n_vocabs++] = m;
        free(names[i]);
    }
    if (n_vocabs == 0) {
        fprintf(stderr, "fuzz_vocab: no vocabulary loads from %s\n", dir);
        abort();
    }
    if (getenv("LM_FUZZ_VERBOSE"))
        fprintf(stderr, "fuzz_vocab: %d of %d vocabularies loaded\n", n_vocabs, n);
}

/* llama_token_to_piece's protocol for one id; returns the length. */
static int32_t piece(const struct llama_model *m, llama_token id, char *buf, int32_t cap)
{
    int32_t n0 = llama_token_to_piece(m, id, NULL, 0);
    REQUIRE(n0 <= 0);
    int32_t need = -n0;
    REQUIRE(need <= cap);
    if (need > 0) {
        REQUIRE(llama_token_to_piece(m, id, buf, need - 1) == -need);
        REQUIRE(llama_token_to_piece(m, id, buf, need) == need);
    }
    return need;
}

static void fuzz_text(const struct llama_model *m, const char *text, int32_t len, bool add_bos, bool special)
{
    int32_t nv = llama_n_vocab(m);
    int32_t n0 = llama_tokenize(m, text, len, NULL, 0, add_bos, special);
    REQUIRE(n0 <= 0);
    int32_t need = -n0;
    llama_token *tok = malloc((size_t)(need ? need : 1) * sizeof *tok);
    REQUIRE(tok != NULL);
    if (need > 1)
        REQUIRE(llama_tokenize(m, text, len, tok, need - 1, add_bos, special) == -need);
    REQUIRE(llama_tokenize(m, text, len, tok, need, add_bos, special) == need);
    char buf[4096];
    for (int32_t i = 0; i < need; i++) {
        REQUIRE(tok[i] >= 0 && tok[i] < nv);
        int32_t n = piece(m, tok[i], buf, (int32_t)sizeof buf);
        sink += n ? (unsigned char)buf[0] : 0;
    }
    free(tok);
}

static void fuzz_ids(const struct llama_model *m, const uint8_t *data, size_t size)
{
    int32_t nv = llama_n_vocab(m);
    char buf[4096];
    for (size_t i = 0; i + 4 <= size; i += 4) {
        llama_token id;
        memcpy(&id, data + i, 4);
        if (i % 8 == 0 && nv > 0 && id >= 0)
            id %= nv; /* half the ids are valid */
        const char *text = llama_token_get_text(m, id);
        REQUIRE(text != NULL);
        sink += (unsigned)strlen(text) + (unsigned)llama_token_get_type(m, id);
        sink += llama_token_get_score(m, id) > 0.0f;
        int32_t n = piece(m, id, buf, (int32_t)sizeof buf);
        if (id < 0 || id >= nv)
            REQUIRE(n == 0 && text[0] == '\0');
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static bool ready;
    if (!ready) {
        llama_backend_init(false);
        llama_log_set(getenv("LM_FUZZ_VERBOSE") ? NULL : quiet, NULL); /* logs to stderr when set */
        load_all();
        ready = true;
    }
    if (size < 2)
        return 0;
    const struct llama_model *m = vocabs[data[0] % n_vocabs];
    uint8_t flags = data[1];
    data += 2;
    size -= 2;
    if (flags & 4) {
        fuzz_ids(m, data, size);
        return 0;
    }
    char *text = malloc(size ? size : 1); /* exact size and no NUL: reads past the end are found */
    REQUIRE(text != NULL);
    if (size)
        memcpy(text, data, size);
    fuzz_text(m, text, (int32_t)size, flags & 1, flags & 2);
    free(text);
    return 0;
}
