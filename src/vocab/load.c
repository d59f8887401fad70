/* load.c - lm_vocab_load: read the tokenizer.* keys of a GGUF reader into a
 * struct lm_vocab_desc and hand it to lm_vocab_build().
 *
 * Every key is checked for its type and every array for its length here;
 * lm_vocab_build checks the values (ids in range, merges that parse). Keys
 * and defaults follow llama.cpp b1892's llm_load_vocab; where b1892 warned
 * and went on with a default (a special id out of range), we refuse the file.
 * "bert" (WordPiece) came after b1892; its keys are those later files carry.
 */
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "vocab/vocab_internal.h"

#define KEY_MODEL "tokenizer.ggml.model"
#define KEY_TOKENS "tokenizer.ggml.tokens"
#define KEY_SCORES "tokenizer.ggml.scores"
#define KEY_TYPES "tokenizer.ggml.token_type"
#define KEY_MERGES "tokenizer.ggml.merges"
#define KEY_PRE "tokenizer.ggml.pre"

/* Arrays copied out of the reader, freed together. */
struct loaded {
    const char **tokens;
    size_t *token_lens;
    float *scores;
    int32_t *types;
    const char **merges;
    size_t *merge_lens;
};

static void loaded_free(struct loaded *l)
{
    free(l->tokens);
    free(l->token_lens);
    free(l->scores);
    free(l->types);
    free(l->merges);
    free(l->merge_lens);
}

/* Index of an array key with elements of type et; -1 if absent. When
 * expect_n is not 0 the length must equal it. */
static lm_status find_array(const struct lm_gguf *g, const char *key, enum lm_gguf_type et, uint64_t expect_n,
                            int64_t *idx, uint64_t *n, char *err, size_t err_size)
{
    *idx = lm_gguf_find_key(g, key);
    if (*idx < 0) {
        return LM_OK;
    }
    enum lm_gguf_type at;
    if (lm_gguf_kv_type(g, *idx) != LM_GGUF_ARRAY || lm_gguf_get_arr_type(g, *idx, &at) || at != et ||
        lm_gguf_get_arr_n(g, *idx, n)) {
        lm_vocab_seterr(err, err_size, "vocab: %s is not an array of the expected type", key);
        return LM_ERR_CORRUPT;
    }
    if (expect_n && *n != expect_n) {
        lm_vocab_seterr(err, err_size, "vocab: %s has %llu elements, but there are %llu tokens", key,
                        (unsigned long long)*n, (unsigned long long)expect_n);
        return LM_ERR_CORRUPT;
    }
    return LM_OK;
}

static lm_status read_strings(const struct lm_gguf *g, int64_t idx, uint64_t n, const char ***strs, size_t **lens,
                              const char *key, char *err, size_t err_size)
{
    *strs = malloc((n ? n : 1) * sizeof(**strs));
    *lens = malloc((n ? n : 1) * sizeof(**lens));
    if (!*strs || !*lens) {
        return LM_ERR_NOMEM;
    }
    for (uint64_t j = 0; j < n; j++) {
        if (lm_gguf_get_arr_str(g, idx, j, &(*strs)[j], &(*lens)[j])) {
            lm_vocab_seterr(err, err_size, "vocab: cannot read %s[%llu]", key, (unsigned long long)j);
            return LM_ERR_CORRUPT;
        }
    }
    return LM_OK;
}

/* The optional array key of n 4-byte elements of type et, copied into *out
 * (the reader's block need not be aligned for float/int32 loads); *out stays
 * NULL when the key is absent. */
static lm_status read_opt_u32s(const struct lm_gguf *g, const char *key, enum lm_gguf_type et, uint64_t n, void **out,
                               char *err, size_t err_size)
{
    int64_t idx;
    uint64_t m;
    lm_status st = find_array(g, key, et, n, &idx, &m, err, err_size);
    const void *data;
    if (st || idx < 0) {
        return st;
    }
    if (lm_gguf_get_arr_data(g, idx, &data)) {
        return LM_ERR_CORRUPT;
    }
    *out = malloc((n ? n : 1) * 4);
    if (!*out) {
        return LM_ERR_NOMEM;
    }
    memcpy(*out, data, n * 4);
    return LM_OK;
}

/* An optional token id: absent -> keep *id; 0xFFFFFFFF or -1 -> -1; values
 * beyond int32 are passed on as out of range for lm_vocab_build to refuse. */
static lm_status read_id(const struct lm_gguf *g, const char *key, int32_t *id, char *err, size_t err_size)
{
    int64_t i = lm_gguf_find_key(g, key);
    if (i < 0) {
        return LM_OK;
    }
    uint32_t u;
    int32_t s;
    if (lm_gguf_get_u32(g, i, &u) == LM_OK) {
        *id = u == UINT32_MAX ? -1 : u > (uint32_t)INT32_MAX ? INT32_MAX : (int32_t)u;
    } else if (lm_gguf_get_i32(g, i, &s) == LM_OK && s == -1) {
        *id = -1;
    } else {
        lm_vocab_seterr(err, err_size, "vocab: %s is not a token id", key);
        return LM_ERR_CORRUPT;
    }
    return LM_OK;
}

static lm_status read_flag(const struct lm_gguf *g, const char *key, int *flag, char *err, size_t err_size)
{
    int64_t i = lm_gguf_find_key(g, key);
    bool b;
    if (i < 0) {
        return LM_OK;
    }
    if (lm_gguf_get_bool(g, i, &b)) {
        lm_vocab_seterr(err, err_size, "vocab: %s is not a bool", key);
        return LM_ERR_CORRUPT;
    }
    *flag = b;
    return LM_OK;
}

static lm_status read_model(const struct lm_gguf *g, struct lm_vocab_desc *d, char *err, size_t err_size)
{
    int64_t i = lm_gguf_find_key(g, KEY_MODEL);
    const char *model;
    size_t len;
    if (i < 0) {
        lm_vocab_seterr(err, err_size, "vocab: the file has no %s", KEY_MODEL);
        return LM_ERR_NOT_FOUND;
    }
    if (lm_gguf_get_str(g, i, &model, &len)) {
        lm_vocab_seterr(err, err_size, "vocab: %s is not a string", KEY_MODEL);
        return LM_ERR_CORRUPT;
    }
    if (strcmp(model, "llama") == 0) {
        d->type = LM_VOCAB_SPM;
    } else if (strcmp(model, "gpt2") == 0) {
        d->type = LM_VOCAB_BPE;
    } else if (strcmp(model, "bert") == 0) {
        d->type = LM_VOCAB_WPM;
    } else {
        lm_vocab_seterr(err, err_size,
                        "vocab: tokenizer model '%.64s' is not supported (only 'llama', 'gpt2' and 'bert')", model);
        return LM_ERR_UNSUPPORTED;
    }
    i = lm_gguf_find_key(g, KEY_PRE);
    if (i >= 0 && lm_gguf_get_str(g, i, &d->pre, &len)) {
        lm_vocab_seterr(err, err_size, "vocab: %s is not a string", KEY_PRE);
        return LM_ERR_CORRUPT;
    }
    return LM_OK;
}

static lm_status read_arrays(const struct lm_gguf *g, struct lm_vocab_desc *d, struct loaded *l, char *err,
                             size_t err_size)
{
    int64_t idx;
    uint64_t n = 0, m = 0;
    lm_status st = find_array(g, KEY_TOKENS, LM_GGUF_STRING, 0, &idx, &n, err, err_size);
    if (st) {
        return st;
    }
    if (idx < 0 || n == 0 || n > (uint64_t)INT32_MAX - 1) {
        lm_vocab_seterr(err, err_size, "vocab: %s is missing, empty or too long", KEY_TOKENS);
        return idx < 0 ? LM_ERR_NOT_FOUND : LM_ERR_CORRUPT;
    }
    d->n_tokens = (int32_t)n;
    if ((st = read_strings(g, idx, n, &l->tokens, &l->token_lens, KEY_TOKENS, err, err_size))) {
        return st;
    }
    d->tokens = l->tokens;
    d->token_lens = l->token_lens;
    if ((st = read_opt_u32s(g, KEY_SCORES, LM_GGUF_FLOAT32, n, (void **)&l->scores, err, err_size))) {
        return st;
    }
    d->scores = l->scores;
    if ((st = read_opt_u32s(g, KEY_TYPES, LM_GGUF_INT32, n, (void **)&l->types, err, err_size))) {
        return st;
    }
    d->types = l->types;
    if (d->type != LM_VOCAB_BPE) {
        return LM_OK;
    }
    if ((st = find_array(g, KEY_MERGES, LM_GGUF_STRING, 0, &idx, &m, err, err_size))) {
        return st;
    }
    if (idx < 0 || m > (uint64_t)INT32_MAX - 1) {
        lm_vocab_seterr(err, err_size, "vocab: a gpt2 tokenizer needs %s", KEY_MERGES);
        return idx < 0 ? LM_ERR_NOT_FOUND : LM_ERR_CORRUPT;
    }
    d->n_merges = (int32_t)m;
    if ((st = read_strings(g, idx, m, &l->merges, &l->merge_lens, KEY_MERGES, err, err_size))) {
        return st;
    }
    d->merges = l->merges;
    d->merge_lens = l->merge_lens;
    return LM_OK;
}

static lm_status read_ids(const struct lm_gguf *g, struct lm_vocab_desc *d, char *err, size_t err_size)
{
    static const char *const keys[] = {
        "tokenizer.ggml.bos_token_id",       "tokenizer.ggml.eos_token_id",     "tokenizer.ggml.unknown_token_id",
        "tokenizer.ggml.seperator_token_id", "tokenizer.ggml.padding_token_id", "tokenizer.ggml.prefix_token_id",
        "tokenizer.ggml.suffix_token_id",    "tokenizer.ggml.middle_token_id",  "tokenizer.ggml.eot_token_id",
    };
    int32_t *ids[] = {&d->bos, &d->eos, &d->unk, &d->sep, &d->pad, &d->prefix, &d->suffix, &d->middle, &d->eot};
    lm_status st = LM_OK;
    if (d->type == LM_VOCAB_WPM) { /* BERT files name [CLS], not a bos; a bos key still wins */
        st = read_id(g, "tokenizer.ggml.cls_token_id", &d->bos, err, err_size);
    }
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]) && !st; i++) {
        st = read_id(g, keys[i], ids[i], err, err_size);
    }
    if (d->type == LM_VOCAB_WPM && d->eos == LM_VOCAB_ID_DEFAULT) {
        d->eos = d->sep; /* [SEP] ends a BERT input */
    }
    if (!st) {
        st = read_flag(g, "tokenizer.ggml.add_bos_token", &d->add_bos, err, err_size);
    }
    if (!st) {
        st = read_flag(g, "tokenizer.ggml.add_eos_token", &d->add_eos, err, err_size);
    }
    return st;
}

lm_status lm_vocab_load(const struct lm_gguf *g, struct lm_vocab **out, char *err, size_t err_size)
{
    if (!g || !out) {
        lm_vocab_seterr(err, err_size, "vocab: no reader");
        return LM_ERR_INVALID_ARG;
    }
    struct lm_vocab_desc d = lm_vocab_desc_default();
    struct loaded l = {0};
    lm_status st = read_model(g, &d, err, err_size);
    if (!st) {
        st = read_arrays(g, &d, &l, err, err_size);
    }
    if (!st) {
        st = read_ids(g, &d, err, err_size);
    }
    if (!st) {
        st = lm_vocab_build(&d, out, err, err_size);
    } else if (st == LM_ERR_NOMEM) {
        lm_vocab_seterr(err, err_size, "vocab: out of memory");
    }
    loaded_free(&l);
    return st;
}
