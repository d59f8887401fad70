/* quant.h - reference (portable C) conversion of every tensor type to and from
 * f32: the decoders are bit-identical to ggml's, the encoders produce the same
 * blocks as ggml's reference quantizers (see docs/formats.md for exceptions).
 *
 * These are the oracles for SIMD kernels and the engine of `lamina quantize`.
 * All functions are thread-safe and allocate nothing unless stated.
 */
#ifndef LM_QUANT_H
#define LM_QUANT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/type.h"

#ifdef __cplusplus
extern "C" { /* the CUDA backend (C++) calls these */
#endif

/* y[0..n) = the values of the n elements (n a multiple of the block size) at x. */
typedef void (*lm_to_float_fn)(const void *x, float *y, int64_t n);
/* Encode n floats (n a multiple of the block size) into blocks at y. */
typedef void (*lm_from_float_fn)(const float *x, void *y, int64_t n);

struct lm_quant_traits {
    lm_to_float_fn to_float;        /* NULL for the integer types (I8, I16, I32) */
    lm_from_float_fn from_float;    /* reference encoder; NULL where none exists (IQ2 needs lm_quantize_chunk) */
    bool needs_imatrix;             /* true for IQ2_XXS / IQ2_XS */
};

/* Conversion functions of a type. For an unsupported type, a row of NULLs. Never NULL.
 * Implemented: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1, Q2_K..Q6_K, Q8_K,
 * IQ2_XXS, IQ2_XS (to_float only: they encode through lm_quantize_chunk with an
 * importance matrix; needs_imatrix set). */
const struct lm_quant_traits *lm_quant_traits(enum lm_type t);

/* Quantize rows [start_row, start_row + nrows) of a matrix of rows of
 * n_per_row floats at src (row r at src + r*n_per_row) into dst (row r at
 * dst + r*lm_row_size(type, n_per_row)). imatrix: NULL or n_per_row
 * importance weights (the quantizers that support it use it; IQ2 requires it).
 * Without imatrix the bytes equal ggml's reference quantizers; with one, the
 * seed's (llama.cpp b1892) imatrix quantizers (Q4_0..Q5_1, Q2_K..Q6_K,
 * IQ2_XXS, IQ2_XS; F16, BF16, F32, Q8_0, Q8_1, Q8_K ignore it). Returns the
 * bytes written, or 0 on a bad argument (unsupported type, NULL src/dst,
 * start_row < 0, n_per_row not a positive multiple of the block size, missing
 * required imatrix) or when IQ2's lattice tables (built on first use, ~0.4 MB)
 * cannot be allocated. Thread-safe. */
size_t lm_quantize_chunk(enum lm_type type, const float *src, void *dst, int64_t start_row, int64_t nrows,
                         int64_t n_per_row, const float *imatrix);

/* True when lm_quantize_chunk can encode this type (given an importance
 * matrix where lm_quantize_requires_imatrix says so). Thread-safe. */
bool lm_quantize_supported(enum lm_type t);

/* True when lm_quantize_chunk needs an importance matrix for this type. */
bool lm_quantize_requires_imatrix(enum lm_type t);

/* Check nbytes of data of type t: every fp16 scale field (d, m, dmin, s) of
 * every block, Q8_K's float d, and every value of F32/F16/BF16 data must be
 * finite. Integer types always pass. Returns true if valid; false (with a
 * warning logged) on NaN/Inf, an unknown type or nbytes not a multiple of the
 * block size. Thread-safe. */
bool lm_validate_row_data(enum lm_type t, const void *data, size_t nbytes);

#ifdef __cplusplus
}
#endif

#endif
