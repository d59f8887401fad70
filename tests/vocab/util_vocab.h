/* util_vocab.h - helpers for the vocab tests: load a shared GGUF vocab,
 * read llama.cpp's tokenizer test vectors, tokenize and detokenize into
 * growable buffers. */
#ifndef UTIL_VOCAB_H
#define UTIL_VOCAB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vocab/vocab.h"

/* Load models/ggml-vocab/ggml-vocab-<name>.gguf (or any path under shared/
 * when name contains a '/'); NULL (and a message) on failure. */
struct lm_vocab *tv_load(const char *name);

/* One test vector: the input text and the expected ids. */
struct tv_case {
    char *text;
    size_t len;
    int32_t *ids;
    int n_ids;
};

/* Read X.gguf.inp / X.gguf.out. Returns the number of cases (0 on error);
 * *cases is malloc'd; free with tv_free_cases. */
int tv_read_cases(const char *name, struct tv_case **cases);
/* The same from explicit file paths. */
int tv_read_cases_at(const char *inp_path, const char *out_path, struct tv_case **cases);
void tv_free_cases(struct tv_case *cases, int n);

/* Tokenize with the two-call protocol; returns malloc'd ids, count in *n. */
int32_t *tv_tokenize(const struct lm_vocab *v, const char *text, size_t len, bool add_bos, bool special, int *n);

/* Concatenate the pieces of ids (two-call protocol per piece); malloc'd,
 * NUL-terminated, byte length in *len. */
char *tv_detokenize(const struct lm_vocab *v, const int32_t *ids, int n, size_t *len);

#endif
