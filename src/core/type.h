/* type.h - tensor element types and their traits.
 *
 * Type ids are the on-disk ggml/GGUF type codes (spec/quant-formats.md), so a
 * GGUF tensor's type field is an lm_type after a range check. The traits table
 * here is pure data (block size, bytes per block, name); the conversion
 * functions live one layer up in quant/ and the dot kernels in cpu/.
 */
#ifndef LM_TYPE_H
#define LM_TYPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" { /* the CUDA backend (C++) calls these */
#endif

enum lm_type {
    LM_TYPE_F32 = 0,
    LM_TYPE_F16 = 1,
    LM_TYPE_Q4_0 = 2,
    LM_TYPE_Q4_1 = 3,
    /* 4, 5: retired Q4_2/Q4_3, rejected */
    LM_TYPE_Q5_0 = 6,
    LM_TYPE_Q5_1 = 7,
    LM_TYPE_Q8_0 = 8,
    LM_TYPE_Q8_1 = 9,
    LM_TYPE_Q2_K = 10,
    LM_TYPE_Q3_K = 11,
    LM_TYPE_Q4_K = 12,
    LM_TYPE_Q5_K = 13,
    LM_TYPE_Q6_K = 14,
    LM_TYPE_Q8_K = 15,
    LM_TYPE_IQ2_XXS = 16,
    LM_TYPE_IQ2_XS = 17,
    /* 18..23: later i-quants, not supported */
    LM_TYPE_I8 = 24,
    LM_TYPE_I16 = 25,
    LM_TYPE_I32 = 26,
    /* 27 I64, 28 F64, 29 IQ1_M: not supported */
    LM_TYPE_BF16 = 30,
    LM_TYPE_COUNT
};

#define LM_QK 32    /* elements per block of the legacy quant types */
#define LM_QK_K 256 /* elements per super-block of the K-quants */

struct lm_type_traits {
    const char *name;    /* "f32", "q4_0", "q4_K", ... (ggml_type_name spelling) */
    int64_t blck_size;   /* elements per block; 0 = id not supported */
    size_t type_size;    /* bytes per block */
    bool is_quantized;
};

/* Traits of a type; for an id outside the table or not supported, a row with
 * blck_size 0 and name "unknown". Never NULL. */
const struct lm_type_traits *lm_type_traits(enum lm_type t);

/* True when t names a type lamina supports (in-range id with blck_size > 0). */
bool lm_type_valid(int64_t t);

const char *lm_type_name(enum lm_type t);
int64_t lm_type_blck(enum lm_type t);
size_t lm_type_size(enum lm_type t);

/* Bytes of a row of n elements: n / blck * type_size. n must be a multiple of
 * the block size (checked by callers that take shapes from files). */
size_t lm_row_size(enum lm_type t, int64_t n);

/* The type with name `name` (case-insensitive, "Q4_K" or "q4_K"); false if none. */
bool lm_type_from_name(const char *name, enum lm_type *out);

#ifdef __cplusplus
}
#endif

#endif
