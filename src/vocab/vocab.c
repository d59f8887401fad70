/* vocab.c - building a vocab from arrays (lm_vocab_build), freeing it, and
 * the getters. lm_vocab_load (load.c) reads a GGUF into a desc and calls
 * lm_vocab_build, so every check on untrusted values lives here once.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vocab/vocab_internal.h"

/* b1892's llama_vocab member defaults (CodeLlama's infill ids). */
enum { B1892_PREFIX = 32007, B1892_SUFFIX = 32008, B1892_MIDDLE = 32009, B1892_EOT = 32010 };

struct lm_vocab_desc lm_vocab_desc_default(void)
{
    struct lm_vocab_desc d;
    memset(&d, 0, sizeof(d));
    d.bos = d.eos = d.unk = d.sep = d.pad = LM_VOCAB_ID_DEFAULT;
    d.prefix = d.suffix = d.middle = d.eot = LM_VOCAB_ID_DEFAULT;
    d.add_bos = d.add_eos = -1;
    return d;
}

int lm_vocab_parse_byte_token(const char *s, size_t n)
{
    if (n != 6 || s[0] != '<' || s[1] != '0' || s[2] != 'x' || s[5] != '>') {
        return -1;
    }
    int v = 0;
    for (int i = 3; i < 5; i++) {
        char c = s[i];
        int d = -1;
        if (c >= '0' && c <= '9') {
            d = c - '0';
        } else if (c >= 'A' && c <= 'F') {
            d = c - 'A' + 10;
        } else if (c >= 'a' && c <= 'f') {
            d = c - 'a' + 10;
        }
        if (d < 0) {
            return -1;
        }
        v = v * 16 + d;
    }
    return v;
}

void lm_vocab_free(struct lm_vocab *v)
{
    if (!v) {
        return;
    }
    free(v->tokens);
    free(v->text_pool);
    lm_vocab_strmap_free(&v->tok_map);
    free(v->merge_pool);
    free(v->merge_split);
    lm_vocab_strmap_free(&v->merge_map);
    for (int i = 0; i < v->n_pre_rx; i++) {
        lm_vocab_regex_free(v->pre_rx[i]);
    }
    free(v->specials);
    free(v);
}

static lm_status copy_tokens(struct lm_vocab *v, const struct lm_vocab_desc *d, char *err, size_t err_size)
{
    size_t total = 0;
    for (int32_t i = 0; i < d->n_tokens; i++) {
        if (!d->tokens[i]) {
            lm_vocab_seterr(err, err_size, "vocab: token %d has no text", (int)i);
            return LM_ERR_INVALID_ARG;
        }
        size_t len = d->token_lens ? d->token_lens[i] : strlen(d->tokens[i]);
        if (len > UINT32_MAX - 1 || total > SIZE_MAX - len - 1) {
            lm_vocab_seterr(err, err_size, "vocab: token %d is too long", (int)i);
            return LM_ERR_CORRUPT;
        }
        total += len + 1;
    }
    v->tokens = calloc((size_t)d->n_tokens, sizeof(*v->tokens));
    v->text_pool = malloc(total);
    if (!v->tokens || !v->text_pool || !lm_vocab_strmap_init(&v->tok_map, (size_t)d->n_tokens)) {
        return LM_ERR_NOMEM;
    }
    char *p = v->text_pool;
    for (int32_t i = 0; i < d->n_tokens; i++) {
        size_t len = d->token_lens ? d->token_lens[i] : strlen(d->tokens[i]);
        memcpy(p, d->tokens[i], len);
        p[len] = '\0';
        struct vocab_token *t = &v->tokens[i];
        t->text = p;
        t->len = (uint32_t)len;
        t->score = d->scores ? d->scores[i] : 0.0f;
        t->type = d->types ? d->types[i] : LM_TOKEN_NORMAL;
        if (len > 0) {
            lm_vocab_strmap_put(&v->tok_map, p, (uint32_t)len, i);
        }
        p += len + 1;
    }
    return LM_OK;
}

/* Merges "left right": the split is the first space after the first byte;
 * both sides must be non-empty. The first of duplicate merges keeps its rank. */
static lm_status copy_merges(struct lm_vocab *v, const struct lm_vocab_desc *d, char *err, size_t err_size)
{
    if (d->n_merges < 0 || (d->n_merges > 0 && !d->merges)) {
        lm_vocab_seterr(err, err_size, "vocab: bad merge count %d", (int)d->n_merges);
        return LM_ERR_INVALID_ARG;
    }
    size_t total = 0;
    for (int32_t i = 0; i < d->n_merges; i++) {
        size_t len = d->merges[i] ? (d->merge_lens ? d->merge_lens[i] : strlen(d->merges[i])) : 0;
        if (len > UINT32_MAX - 1 || total > SIZE_MAX - len - 1) {
            lm_vocab_seterr(err, err_size, "vocab: merge %d is too long", (int)i);
            return LM_ERR_CORRUPT;
        }
        total += len + 1;
    }
    v->n_merges = d->n_merges;
    v->merge_pool = malloc(total ? total : 1);
    v->merge_split = malloc(((size_t)d->n_merges + 1) * sizeof(*v->merge_split));
    if (!v->merge_pool || !v->merge_split || !lm_vocab_strmap_init(&v->merge_map, (size_t)d->n_merges)) {
        return LM_ERR_NOMEM;
    }
    char *p = v->merge_pool;
    for (int32_t i = 0; i < d->n_merges; i++) {
        const char *m = d->merges[i];
        size_t len = m ? (d->merge_lens ? d->merge_lens[i] : strlen(m)) : 0;
        const char *sp = len > 1 ? memchr(m + 1, ' ', len - 1) : NULL;
        if (!sp || (size_t)(sp - m) + 1 >= len) {
            lm_vocab_seterr(err, err_size, "vocab: merge %d (\"%.*s\") is not \"left right\"", (int)i,
                            (int)(len > 64 ? 64 : len), m ? m : "");
            return LM_ERR_CORRUPT;
        }
        memcpy(p, m, len);
        p[len] = '\0';
        v->merge_split[i] = (uint32_t)(sp - m);
        if (lm_vocab_strmap_get(&v->merge_map, p, len) < 0) {
            lm_vocab_strmap_put(&v->merge_map, p, (uint32_t)len, i);
        }
        p += len + 1;
    }
    return LM_OK;
}

/* One special id: LM_VOCAB_ID_DEFAULT -> def (or -1 if def does not fit),
 * -1 stays, others must be in range. */
static lm_status resolve_id(int32_t in, int32_t def, int32_t n, const char *name, int32_t *out, char *err,
                            size_t err_size)
{
    if (in == LM_VOCAB_ID_DEFAULT) {
        *out = def < n ? def : -1;
        return LM_OK;
    }
    if (in < -1 || in >= n) {
        lm_vocab_seterr(err, err_size, "vocab: %s token id %d is out of range [0, %d)", name, (int)in, (int)n);
        return LM_ERR_CORRUPT;
    }
    *out = in;
    return LM_OK;
}

/* The defaults of bos, eos, unk, sep and pad for the vocab type: b1892's
 * numbers for SPM and BPE; for WPM, which b1892 did not have, BERT's token
 * texts (later llama.cpp used bert-base's ids 101, 102, 100, 102, 0, which
 * those texts have there). */
static void default_ids(const struct lm_vocab *v, int32_t def[5])
{
    static const char *const bert[5] = {"[CLS]", "[SEP]", "[UNK]", "[SEP]", "[PAD]"};
    static const int32_t spm[5] = {1, 2, 0, -1, -1}, bpe[5] = {11, 11, -1, -1, -1};
    for (int i = 0; i < 5; i++) {
        if (v->type == LM_VOCAB_WPM) {
            def[i] = lm_vocab_strmap_get(&v->tok_map, bert[i], strlen(bert[i]));
        } else {
            def[i] = v->type == LM_VOCAB_SPM ? spm[i] : bpe[i];
        }
    }
}

static lm_status set_ids(struct lm_vocab *v, const struct lm_vocab_desc *d, char *err, size_t err_size)
{
    static const char *const special_names[5] = {"bos", "eos", "unknown", "separator", "padding"};
    const int32_t special_in[5] = {d->bos, d->eos, d->unk, d->sep, d->pad};
    int32_t *special_out[5] = {&v->bos, &v->eos, &v->unk, &v->sep, &v->pad};
    int32_t n = d->n_tokens, dflt[5];
    lm_status st = LM_OK;
    default_ids(v, dflt);
    for (int i = 0; i < 5 && !st; i++) {
        st = resolve_id(special_in[i], dflt[i], n, special_names[i], special_out[i], err, err_size);
    }
    /* infill ids: the b1892 constants are kept whatever the vocab size */
    const int32_t in[4] = {d->prefix, d->suffix, d->middle, d->eot};
    const int32_t def[4] = {B1892_PREFIX, B1892_SUFFIX, B1892_MIDDLE, B1892_EOT};
    const char *names[4] = {"prefix", "suffix", "middle", "eot"};
    int32_t *outs[4] = {&v->prefix, &v->suffix, &v->middle, &v->eot};
    for (int i = 0; i < 4 && !st; i++) {
        if (in[i] == LM_VOCAB_ID_DEFAULT) {
            *outs[i] = def[i];
        } else {
            st = resolve_id(in[i], -1, n, names[i], outs[i], err, err_size);
        }
    }
    if (!st && (d->add_bos < -1 || d->add_bos > 1 || d->add_eos < -1 || d->add_eos > 1)) {
        lm_vocab_seterr(err, err_size, "vocab: add_bos/add_eos must be -1, 0 or 1");
        st = LM_ERR_INVALID_ARG;
    }
    v->add_bos = d->add_bos;
    v->add_eos = d->add_eos;
    return st;
}

struct special_key {
    uint32_t len;
    int32_t id;
};

static int cmp_special(const void *a, const void *b)
{
    const struct special_key *x = a, *y = b;
    if (x->len != y->len) {
        return x->len > y->len ? -1 : 1;
    }
    return x->id < y->id ? -1 : x->id > y->id;
}

static bool is_special_type(int32_t t)
{
    return t == LM_TOKEN_CONTROL || t == LM_TOKEN_USER_DEFINED || t == LM_TOKEN_UNKNOWN;
}

/* The tokens partitioning matches (control, user-defined and unknown ones
 * with a text), longest text first, then by id. */
static lm_status collect_specials(struct lm_vocab *v)
{
    int32_t n = 0;
    for (int32_t i = 0; i < v->n_tokens; i++) {
        n += v->tokens[i].len > 0 && is_special_type(v->tokens[i].type);
    }
    struct special_key *keys = malloc(((size_t)n + 1) * sizeof(*keys));
    v->specials = malloc(((size_t)n + 1) * sizeof(*v->specials));
    if (!keys || !v->specials) {
        free(keys);
        return LM_ERR_NOMEM;
    }
    n = 0;
    for (int32_t i = 0; i < v->n_tokens; i++) {
        if (v->tokens[i].len > 0 && is_special_type(v->tokens[i].type)) {
            keys[n++] = (struct special_key){v->tokens[i].len, i};
        }
    }
    qsort(keys, (size_t)n, sizeof(*keys), cmp_special);
    for (int32_t i = 0; i < n; i++) {
        v->specials[i] = keys[i].id;
    }
    v->n_specials = n;
    free(keys);
    return LM_OK;
}

static void set_byte_tokens_and_nl(struct lm_vocab *v)
{
    for (int b = 0; b < 256; b++) {
        char text[8];
        snprintf(text, sizeof(text), "<0x%02X>", b);
        v->byte_to_id[b] = lm_vocab_strmap_get(&v->tok_map, text, 6);
    }
    if (v->type == LM_VOCAB_SPM) {
        v->nl = v->byte_to_id['\n'];
    } else if (v->type == LM_VOCAB_WPM) {
        v->nl = v->pad; /* "\n" has no token; later llama.cpp's choice */
    } else {
        int32_t ids[8];
        int32_t n = lm_vocab_tokenize(v, "\n", 1, ids, 8, false, false);
        v->nl = n > 0 ? ids[0] : -1;
    }
}

lm_status lm_vocab_build(const struct lm_vocab_desc *d, struct lm_vocab **out, char *err, size_t err_size)
{
    if (!d || !out || !d->tokens || d->n_tokens <= 0 ||
        (d->type != LM_VOCAB_SPM && d->type != LM_VOCAB_BPE && d->type != LM_VOCAB_WPM)) {
        lm_vocab_seterr(err, err_size, "vocab: invalid description (type, token count or token array)");
        return LM_ERR_INVALID_ARG;
    }
    struct lm_vocab *v = calloc(1, sizeof(*v));
    if (!v) {
        return LM_ERR_NOMEM;
    }
    v->type = d->type;
    v->n_tokens = d->n_tokens;
    v->pre = "";
    lm_status st = copy_tokens(v, d, err, err_size);
    if (!st && d->type == LM_VOCAB_BPE) {
        st = copy_merges(v, d, err, err_size);
    }
    if (!st && d->type == LM_VOCAB_BPE) {
        st = lm_vocab_pretok_init(v, d->pre, err, err_size);
    }
    if (!st) {
        st = set_ids(v, d, err, err_size);
    }
    for (int32_t i = 0; !st && i < v->n_tokens; i++) {
        v->max_token_len = v->tokens[i].len > v->max_token_len ? v->tokens[i].len : v->max_token_len;
    }
    if (!st) {
        st = collect_specials(v);
    }
    if (st) {
        if (st == LM_ERR_NOMEM) {
            lm_vocab_seterr(err, err_size, "vocab: out of memory");
        }
        lm_vocab_free(v);
        return st;
    }
    set_byte_tokens_and_nl(v);
    *out = v;
    return LM_OK;
}

/* ---- getters ---- */

static bool valid(const struct lm_vocab *v, int32_t id) { return v && id >= 0 && id < v->n_tokens; }

int32_t lm_vocab_n_tokens(const struct lm_vocab *v) { return v ? v->n_tokens : 0; }
enum lm_vocab_type lm_vocab_type(const struct lm_vocab *v) { return v ? v->type : LM_VOCAB_SPM; }
const char *lm_vocab_pre(const struct lm_vocab *v) { return v ? v->pre : ""; }
const char *lm_vocab_token_text(const struct lm_vocab *v, int32_t id) { return valid(v, id) ? v->tokens[id].text : ""; }
size_t lm_vocab_token_len(const struct lm_vocab *v, int32_t id) { return valid(v, id) ? v->tokens[id].len : 0; }
float lm_vocab_token_score(const struct lm_vocab *v, int32_t id) { return valid(v, id) ? v->tokens[id].score : 0.0f; }

enum lm_token_type lm_vocab_token_type(const struct lm_vocab *v, int32_t id)
{
    return valid(v, id) ? (enum lm_token_type)v->tokens[id].type : LM_TOKEN_UNDEFINED;
}

int32_t lm_vocab_find(const struct lm_vocab *v, const char *text, size_t len)
{
    if (!v || (!text && len > 0) || len == 0) {
        return -1;
    }
    return lm_vocab_strmap_get(&v->tok_map, text, len);
}

int32_t lm_vocab_bos(const struct lm_vocab *v) { return v ? v->bos : -1; }
int32_t lm_vocab_eos(const struct lm_vocab *v) { return v ? v->eos : -1; }
int32_t lm_vocab_unk(const struct lm_vocab *v) { return v ? v->unk : -1; }
int32_t lm_vocab_sep(const struct lm_vocab *v) { return v ? v->sep : -1; }
int32_t lm_vocab_pad(const struct lm_vocab *v) { return v ? v->pad : -1; }
int32_t lm_vocab_nl(const struct lm_vocab *v) { return v ? v->nl : -1; }
int lm_vocab_add_bos(const struct lm_vocab *v) { return v ? v->add_bos : -1; }
int lm_vocab_add_eos(const struct lm_vocab *v) { return v ? v->add_eos : -1; }
int32_t lm_vocab_prefix(const struct lm_vocab *v) { return v ? v->prefix : -1; }
int32_t lm_vocab_middle(const struct lm_vocab *v) { return v ? v->middle : -1; }
int32_t lm_vocab_suffix(const struct lm_vocab *v) { return v ? v->suffix : -1; }
int32_t lm_vocab_eot(const struct lm_vocab *v) { return v ? v->eot : -1; }
