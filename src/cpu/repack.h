/* repack.h - row-interleaved weight layouts for the GEMM kernels.
 *
 * A repacked matrix is stored in groups of LM_REPACK_ROWS (8) consecutive
 * rows. For each block of 32 elements a group holds the 8 rows' scales and
 * then their quants interleaved in 4-element slices, so that one 256-bit
 * register holds the same 4 columns of all 8 rows: an integer multiply-add
 * then leaves one partial sum per row in each 32-bit lane, and the 8 output
 * rows are produced together without horizontal sums.
 *
 *   q4_0x8: d[8] (fp16), qs[128]: chunk c (0..3) of 32 bytes holds, for row r
 *           at bytes 4r..4r+3, the Q4_0 bytes qs_r[4c..4c+3] (low nibbles:
 *           elements 4c..4c+3, high nibbles: elements 16+4c..16+4c+3).
 *   q8_0x8: d[8] (fp16), qs[256]: chunk j (0..7) holds, for row r at bytes
 *           4r..4r+3, elements 4j..4j+3 of row r.
 *
 * Both take exactly the bytes of the 8 plain rows, so a repacked tensor has
 * the same size as the plain one. Rows are not addressable in this layout:
 * only MUL_MAT reads it (the loader repacks only matrices used by matmuls).
 */
#ifndef LM_CPU_REPACK_H
#define LM_CPU_REPACK_H

#include <stdint.h>

#include "core/fp16.h"
#include "core/tensor.h"

#define LM_REPACK_ROWS 8

struct lm_block_q4_0x8 {
    lm_fp16 d[LM_REPACK_ROWS];
    uint8_t qs[LM_REPACK_ROWS * 16];
};
_Static_assert(sizeof(struct lm_block_q4_0x8) == 8 * 18, "q4_0x8 block size");

struct lm_block_q8_0x8 {
    lm_fp16 d[LM_REPACK_ROWS];
    int8_t qs[LM_REPACK_ROWS * 32];
};
_Static_assert(sizeof(struct lm_block_q8_0x8) == 8 * 34, "q8_0x8 block size");

/* A repacked layout: how to convert LM_REPACK_ROWS-row groups of a type to
 * and from the plain layout. One row of the table per type (repack.c); the
 * conversion functions live beside their kernels' layouts. */
typedef void (*lm_repack_fn)(const void *src, void *dst, int64_t n_rows, int64_t k);
struct lm_repack_desc {
    enum lm_type type;
    int64_t k_multiple;  /* row length must be a multiple of this */
    lm_repack_fn pack;   /* plain -> repacked (n_rows a multiple of 8) */
    lm_repack_fn unpack; /* repacked -> plain */
};

/* The layout of a type, or NULL when it has none. */
const struct lm_repack_desc *lm_repack_desc(enum lm_type type);
/* Repack n_rows (a multiple of 8) plain rows of k elements at src into dst,
 * and back. Thread-safe; src and dst must not overlap. */
void lm_repack_rows(enum lm_type type, const void *src, void *dst, int64_t n_rows, int64_t k);
void lm_unpack_rows(enum lm_type type, const void *src, void *dst, int64_t n_rows, int64_t k);
/* Whether t lives in the repacking buffer type (and so in the repacked layout). */
bool lm_tensor_is_repacked(const struct lm_tensor *t);

/* The layouts (repack_q.c). */
void lm_pack_q4_0x8(const void *src, void *dst, int64_t n_rows, int64_t k);
void lm_unpack_q4_0x8(const void *src, void *dst, int64_t n_rows, int64_t k);
void lm_pack_q8_0x8(const void *src, void *dst, int64_t n_rows, int64_t k);
void lm_unpack_q8_0x8(const void *src, void *dst, int64_t n_rows, int64_t k);

#endif
