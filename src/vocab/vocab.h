/* vocab.h - tokenizer vocabularies: SentencePiece (SPM), byte-level BPE and
 * WordPiece (WPM, BERT), with the semantics of llama.cpp b1892's
 * llama_tokenize and llama_token_to_piece (b1892 had no WordPiece: that one
 * follows Hugging Face's BertTokenizer; see docs/vocab.md for every rule and
 * where we differ).
 *
 * A vocab is loaded from the tokenizer.* keys of a GGUF file (every value is
 * checked: wrong types, arrays of different lengths, ids out of range and
 * merges that do not parse give a status and a message, never a crash) or
 * built from arrays in memory. It is immutable after that: all functions
 * below are thread-safe on one vocab, and every getter is safe for any id.
 */
#ifndef LM_VOCAB_H
#define LM_VOCAB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

struct lm_gguf;
struct lm_vocab;

/* Values equal llama_vocab_type at b1892. */
enum lm_vocab_type {
    LM_VOCAB_SPM = 0, /* tokenizer.ggml.model = "llama" */
    LM_VOCAB_BPE = 1, /* tokenizer.ggml.model = "gpt2" */
    LM_VOCAB_WPM = 2, /* tokenizer.ggml.model = "bert" (later llama.cpp's value) */
};

/* Values equal llama_token_type (tokenizer.ggml.token_type). */
enum lm_token_type {
    LM_TOKEN_UNDEFINED = 0,
    LM_TOKEN_NORMAL = 1,
    LM_TOKEN_UNKNOWN = 2,
    LM_TOKEN_CONTROL = 3,
    LM_TOKEN_USER_DEFINED = 4,
    LM_TOKEN_UNUSED = 5,
    LM_TOKEN_BYTE = 6,
};

/* In lm_vocab_desc: "use the default of the vocab type". */
#define LM_VOCAB_ID_DEFAULT INT32_MIN

/* A vocab described by arrays, for lm_vocab_build(). Nothing is retained:
 * every string and array is copied. */
struct lm_vocab_desc {
    enum lm_vocab_type type;
    int32_t n_tokens;          /* > 0 */
    const char *const *tokens; /* n_tokens texts */
    const size_t *token_lens;  /* their byte lengths; NULL: strlen() */
    const float *scores;       /* NULL: all 0 */
    const int32_t *types;      /* enum lm_token_type values; NULL: all NORMAL */
    int32_t n_merges;          /* BPE: "left right" strings, by rank */
    const char *const *merges;
    const size_t *merge_lens; /* NULL: strlen() */
    const char *pre;          /* BPE pre-tokenizer name; NULL: "default" */
    /* special ids: -1 none, LM_VOCAB_ID_DEFAULT: b1892's default for the
     * type (SPM: bos 1, eos 2, unk 0; BPE: bos 11, eos 11, unk -1; sep and
     * pad -1), dropped to -1 when the vocab is too small for it; WPM: the id
     * of the text "[CLS]" for bos, "[SEP]" for eos and sep, "[UNK]", "[PAD]"
     * (-1 when there is no such token). Others must be in [0, n_tokens). */
    int32_t bos, eos, unk, sep, pad;
    int add_bos, add_eos; /* -1 unknown, 0, 1 */
    /* infill ids; LM_VOCAB_ID_DEFAULT: b1892's constants (32007 prefix,
     * 32008 suffix, 32009 middle, 32010 eot), kept even past n_tokens. */
    int32_t prefix, suffix, middle, eot;
};

/* A desc with every id LM_VOCAB_ID_DEFAULT, add_bos/add_eos -1, rest zero. */
struct lm_vocab_desc lm_vocab_desc_default(void);

/* Build a vocab from arrays. On failure *out is untouched and a message goes
 * to err (when not NULL). The caller frees with lm_vocab_free(). */
lm_status lm_vocab_build(const struct lm_vocab_desc *d, struct lm_vocab **out, char *err, size_t err_size);

/* Load the vocab of a GGUF reader: tokenizer.ggml.model ("llama" = SPM,
 * "gpt2" = BPE, "bert" = WPM; others LM_ERR_UNSUPPORTED), .tokens, .scores,
 * .token_type, .merges, .bos/eos/unknown/seperator/padding_token_id
 * (0xFFFFFFFF = none; for "bert", .cls_token_id is the bos and the separator
 * the eos unless bos/eos are given), .add_bos_token, .add_eos_token, .pre,
 * and the optional .prefix/suffix/middle/eot_token_id. The reader may be
 * closed afterwards (all is copied).
 * On failure *out is untouched and err holds a message naming the key. */
lm_status lm_vocab_load(const struct lm_gguf *g, struct lm_vocab **out, char *err, size_t err_size);

void lm_vocab_free(struct lm_vocab *v); /* NULL: nothing */

/* Tokenize text[0..text_len) (any bytes; invalid UTF-8 is kept by SPM and
 * BPE and dropped by WPM, see docs). Returns the number of tokens written, or
 * -(number needed) when n_max is too small (tokens[] contents are then
 * undefined). add_bos: prepend BOS when the vocab has one; for WPM also
 * append the separator ([CLS] text [SEP], as BERT expects). special: also
 * split out the texts of CONTROL and UNKNOWN tokens ("<s>", "<unk>", BERT's
 * "[CLS]") before tokenizing the rest; false: they are plain text.
 * USER_DEFINED token texts are always split out (as Hugging Face does; b1892
 * did it only with special). text may be NULL when text_len is 0, tokens
 * when n_max is 0. A negative text_len or n_max, a NULL v, or running out of
 * memory (logged) returns 0. Thread-safe. */
int32_t lm_vocab_tokenize(const struct lm_vocab *v, const char *text, int32_t text_len, int32_t *tokens, int32_t n_max,
                          bool add_bos, bool special);

/* The text of one token as bytes (no NUL): returns the bytes written, or
 * -(bytes needed) when len is too small. SPM: normal tokens with U+2581 as
 * ' ', <0xXX> byte tokens as the byte, unknown tokens as U+2585. BPE: normal
 * tokens decoded from GPT-2's byte alphabet. WPM: normal tokens with U+2581
 * as ' ' (word starts get a space, "##" continuations none), the unk token
 * (whatever its type) as " " U+2585. All: USER_DEFINED tokens as their text
 * (b1892 gave ""), CONTROL and other types as "". An invalid token id (or
 * len < 0) returns 0. Thread-safe. */
int32_t lm_vocab_token_to_piece(const struct lm_vocab *v, int32_t token, char *buf, int32_t len);

/* ---- getters (all safe for a NULL vocab and for any id) ---- */
int32_t lm_vocab_n_tokens(const struct lm_vocab *v);
enum lm_vocab_type lm_vocab_type(const struct lm_vocab *v);
/* The pre-tokenizer in use (BPE), e.g. "gpt-2", "falcon"; "" for SPM. */
const char *lm_vocab_pre(const struct lm_vocab *v);
/* Token text (NUL-terminated; may contain NULs, see the length), "" for a
 * bad id. */
const char *lm_vocab_token_text(const struct lm_vocab *v, int32_t id);
size_t lm_vocab_token_len(const struct lm_vocab *v, int32_t id);
float lm_vocab_token_score(const struct lm_vocab *v, int32_t id);             /* 0 for a bad id */
enum lm_token_type lm_vocab_token_type(const struct lm_vocab *v, int32_t id); /* UNDEFINED for a bad id */
/* Exact text lookup: the id, or -1. */
int32_t lm_vocab_find(const struct lm_vocab *v, const char *text, size_t len);

/* Special ids: -1 when absent. */
int32_t lm_vocab_bos(const struct lm_vocab *v);
int32_t lm_vocab_eos(const struct lm_vocab *v);
int32_t lm_vocab_unk(const struct lm_vocab *v);
int32_t lm_vocab_sep(const struct lm_vocab *v);
int32_t lm_vocab_pad(const struct lm_vocab *v);
/* SPM "<0x0A>", BPE the token of "\n", WPM the padding token (as later
 * llama.cpp: a newline is only a word break there). */
int32_t lm_vocab_nl(const struct lm_vocab *v);
int lm_vocab_add_bos(const struct lm_vocab *v); /* -1 unknown, 0, 1 */
int lm_vocab_add_eos(const struct lm_vocab *v);
/* Infill ids (b1892 defaults unless the file sets them; may be >= n_tokens
 * for vocabs that are not CodeLlama's, exactly as in b1892). */
int32_t lm_vocab_prefix(const struct lm_vocab *v);
int32_t lm_vocab_middle(const struct lm_vocab *v);
int32_t lm_vocab_suffix(const struct lm_vocab *v);
int32_t lm_vocab_eot(const struct lm_vocab *v);

#endif
