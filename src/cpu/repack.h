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
 * K-quants (256-element super-blocks; 4-byte slices of the 8 rows as above):
 *
 *   q4_Kx8: d[8], dmin[8] (fp16); the 8 scales and 8 mins (6-bit) of each row
 *           unpacked from the 12-byte packing: entry i = 16 (j/2) + 2r + j%2 of
 *           row r, sub-block j (0..7) is sc[i] = scale | (min >> 4) << 6 and
 *           the nibble (i >= 32 ? high : low) of mn[i % 32] = min & 15; qs[1024]:
 *           chunk c (0..31) holds, for row r at bytes 4r..4r+3, the Q4_K bytes
 *           qs_r[4c..4c+3] (low nibbles: elements 64(c/8) + 4(c%8).. of
 *           sub-block 2(c/8), high nibbles: the same + 32, sub-block 2(c/8)+1).
 *   q5_Kx8: as q4_Kx8, plus qh[256]: chunk c (0..7) holds, for row r at bytes
 *           4r..4r+3, the Q5_K bytes qh_r[4c..4c+3] (bit j: 5th bit of the
 *           element of sub-block j at that position).
 *   q2_Kx8: d[8], dmin[8] (fp16); scales[128]: entry 16 (j/2) + 2r + j%2 is the
 *           Q2_K scale byte (scale | min << 4) of row r, sub-block j (0..15);
 *           qs[512]: code register t (0..63) = the 2-bit codes of elements
 *           4t..4t+3 of each row: bits 2u..2u+1 of qs[32 j + 4r + i],
 *           j = t/4, u = t%4, i = element % 4.
 *   q3_Kx8: d[8] (fp16); the 16 stored 6-bit scales (scale + 32) of each row,
 *           entry i = 16 (j/2) + 2r + j%2: low 4 bits in s4[i % 64] (nibble
 *           i / 64), high 2 bits in s2[i % 32] (bits 2 (i/32)); qs[512] as
 *           q2_Kx8 (low 2 bits); hm[256]: the high bit (hmask) of register t
 *           is bit t%8 of hm[32 (t/8) + 4r + i].
 *   q6_Kx8: d[8] (fp16); scales[128] (int8): entry 16 (j/2) + 2r + j%2 is the
 *           scale of row r, sub-block j (0..15); code register t (0..63) =
 *           the unsigned 6-bit codes of elements 4t..4t+3 of each row, row r
 *           at bytes 4r..4r+3, sub-block j = t/4, u = t%4: low 4 bits in
 *           ql[32 (2j + u/2) + 4r + i] (nibble u%2), high 2 bits in
 *           qh[32 j + 4r + i] (bits 2u..2u+1), i = element % 4.
 *
 * Floats (no blocks; rows cut into chunks of LM_REPACK_FK = 8 elements for
 * F16/F32, LM_REPACK_BFK = 16 for BF16; the row length a multiple of that):
 *
 *   f16x8, f32x8: chunk j of rows 0..7, row after row: element i of row r of
 *           the group is at ((i / 8) * 8 + r) * 8 + i % 8 (one 16-byte fp16
 *           or 32-byte f32 vector per row and chunk).
 *   bf16x8: chunk j (16 elements) of rows 0..7, row after row, each row's 16
 *           values paired: 32-bit word t (0..7) holds element 16j + t in its
 *           low half and 16j + 8 + t in its high half, so a shift (<< 16) and
 *           a mask (& 0xffff0000) give elements 0..7 and 8..15 as floats:
 *           element i of row r is halfword ((i / 16) * 8 + r) * 16 +
 *           2 (i % 8) + (i % 16) / 8.
 *
 * All take exactly the bytes of the 8 plain rows, so a repacked tensor has
 * the same size as the plain one. Rows are not addressable in this layout:
 * only MUL_MAT reads it (the loader repacks only matrices used by matmuls).
 */
#ifndef LM_CPU_REPACK_H
#define LM_CPU_REPACK_H

#include <stdint.h>

#include "core/fp16.h"
#include "core/tensor.h"

#define LM_REPACK_ROWS 8
#define LM_REPACK_FK 8   /* elements per row and chunk of f16x8 and f32x8 */
#define LM_REPACK_BFK 16 /* elements per row and chunk of bf16x8 */

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

struct lm_block_q2_Kx8 {
    lm_fp16 d[LM_REPACK_ROWS];
    lm_fp16 dmin[LM_REPACK_ROWS];
    uint8_t scales[128];
    uint8_t qs[LM_REPACK_ROWS * 64];
};
_Static_assert(sizeof(struct lm_block_q2_Kx8) == 8 * 84, "q2_Kx8 block size");

struct lm_block_q3_Kx8 {
    lm_fp16 d[LM_REPACK_ROWS];
    uint8_t s4[64];
    uint8_t s2[32];
    uint8_t qs[LM_REPACK_ROWS * 64];
    uint8_t hm[LM_REPACK_ROWS * 32];
};
_Static_assert(sizeof(struct lm_block_q3_Kx8) == 8 * 110, "q3_Kx8 block size");

struct lm_block_q4_Kx8 {
    lm_fp16 d[LM_REPACK_ROWS];
    lm_fp16 dmin[LM_REPACK_ROWS];
    uint8_t sc[64];
    uint8_t mn[32];
    uint8_t qs[LM_REPACK_ROWS * 128];
};
_Static_assert(sizeof(struct lm_block_q4_Kx8) == 8 * 144, "q4_Kx8 block size");

struct lm_block_q5_Kx8 {
    lm_fp16 d[LM_REPACK_ROWS];
    lm_fp16 dmin[LM_REPACK_ROWS];
    uint8_t sc[64];
    uint8_t mn[32];
    uint8_t qh[LM_REPACK_ROWS * 32];
    uint8_t qs[LM_REPACK_ROWS * 128];
};
_Static_assert(sizeof(struct lm_block_q5_Kx8) == 8 * 176, "q5_Kx8 block size");

/* The codes of sub-block j (ql chunks 2j and 2j+1, then qh chunk j) lie
 * together, so a kernel walking the sub-blocks in order reads one forward
 * stream: two streams 1 KiB apart (all ql, then all qh) defeated the
 * hardware prefetchers on AMD Zen 4 (8-12 GB/s against 28-30 for the same
 * loads in address order, one thread; docs/kernels.md). */
struct lm_block_q6_Kx8 {
    lm_fp16 d[LM_REPACK_ROWS];
    int8_t scales[128];
    struct {
        uint8_t ql[64]; /* 4-bit code arrays 2j (bytes 0..31) and 2j+1 (32..63) */
        uint8_t qh[32]; /* 2-bit code array j */
    } sub[16];
};
_Static_assert(sizeof(struct lm_block_q6_Kx8) == 8 * 210, "q6_Kx8 block size");

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
/* The K-quant layouts (repack_k.c); k a multiple of 256. */
void lm_pack_q2_Kx8(const void *src, void *dst, int64_t n_rows, int64_t k);
void lm_unpack_q2_Kx8(const void *src, void *dst, int64_t n_rows, int64_t k);
void lm_pack_q3_Kx8(const void *src, void *dst, int64_t n_rows, int64_t k);
void lm_unpack_q3_Kx8(const void *src, void *dst, int64_t n_rows, int64_t k);
void lm_pack_q4_Kx8(const void *src, void *dst, int64_t n_rows, int64_t k);
void lm_unpack_q4_Kx8(const void *src, void *dst, int64_t n_rows, int64_t k);
void lm_pack_q5_Kx8(const void *src, void *dst, int64_t n_rows, int64_t k);
void lm_unpack_q5_Kx8(const void *src, void *dst, int64_t n_rows, int64_t k);
void lm_pack_q6_Kx8(const void *src, void *dst, int64_t n_rows, int64_t k);
void lm_unpack_q6_Kx8(const void *src, void *dst, int64_t n_rows, int64_t k);

/* The float layouts (repack_float.c); k a multiple of LM_REPACK_FK (BF16:
 * LM_REPACK_BFK). */
void lm_pack_f16x8(const void *src, void *dst, int64_t n_rows, int64_t k);
void lm_unpack_f16x8(const void *src, void *dst, int64_t n_rows, int64_t k);
void lm_pack_bf16x8(const void *src, void *dst, int64_t n_rows, int64_t k);
void lm_unpack_bf16x8(const void *src, void *dst, int64_t n_rows, int64_t k);
void lm_pack_f32x8(const void *src, void *dst, int64_t n_rows, int64_t k);
void lm_unpack_f32x8(const void *src, void *dst, int64_t n_rows, int64_t k);

#endif
