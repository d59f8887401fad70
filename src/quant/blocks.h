/* blocks.h - the on-disk block of every quantized type, byte for byte.
 *
 * Each struct is the exact GGUF/ggml layout (spec/quant-formats.md): fields in
 * file order, no padding (all members are bytes or 2-byte halves laid out on
 * their natural alignment; Q8_K's float comes first). Half-precision fields are
 * lm_fp16 bit patterns. A static assertion ties every struct to the byte count
 * in the core type table (core/type.c), so the two cannot drift apart.
 *
 * Element order inside a block is documented beside each struct and in
 * docs/formats.md ("Tensor types and block layouts").
 */
#ifndef LM_QUANT_BLOCKS_H
#define LM_QUANT_BLOCKS_H

#include <stdint.h>

#include "core/fp16.h"
#include "core/type.h"

/* Q4_0: x = d * (q - 8). qs[j] low nibble = element j, high nibble = element j+16. */
struct lm_block_q4_0 {
    lm_fp16 d;
    uint8_t qs[LM_QK / 2];
};

/* Q4_1: x = d * q + m. Nibble order as Q4_0. */
struct lm_block_q4_1 {
    lm_fp16 d;
    lm_fp16 m;
    uint8_t qs[LM_QK / 2];
};

/* Q5_0: x = d * (q - 16). qh (little-endian 32 bits): bit j = 5th bit of element j;
 * qs as Q4_0 (low 4 bits). */
struct lm_block_q5_0 {
    lm_fp16 d;
    uint8_t qh[4];
    uint8_t qs[LM_QK / 2];
};

/* Q5_1: x = d * q + m; qh and qs as Q5_0. */
struct lm_block_q5_1 {
    lm_fp16 d;
    lm_fp16 m;
    uint8_t qh[4];
    uint8_t qs[LM_QK / 2];
};

/* Q8_0: x = d * q. */
struct lm_block_q8_0 {
    lm_fp16 d;
    int8_t qs[LM_QK];
};

/* Q8_1 (activation type only, never in files): x = d * q; s = d * sum(q), both fp16. */
struct lm_block_q8_1 {
    lm_fp16 d;
    lm_fp16 s;
    int8_t qs[LM_QK];
};

/* Q2_K: 16 sub-blocks of 16. scales[j]: low nibble scale, high nibble min of
 * sub-block j; x = d*sc*q - dmin*m. qs: 2-bit codes, byte l of each 32-byte
 * group g holds elements 128g + l + 32s at bit 2s (s = 0..3). */
struct lm_block_q2_K {
    uint8_t scales[LM_QK_K / 16];
    uint8_t qs[LM_QK_K / 4];
    lm_fp16 d;
    lm_fp16 dmin;
};

/* Q3_K: 16 sub-blocks of 16, 6-bit signed scales (stored +32) packed in 12 bytes:
 * low nibbles in scales[0..7] (j<8: low half, j>=8: high half of byte j-8), top
 * 2 bits in scales[8 + j%4] at bit 2*(j/4). x = d*(sc-32)*(q - 4*!hbit). qs as
 * Q2_K; hmask[l] bit b = high bit of element 32b + l. */
struct lm_block_q3_K {
    uint8_t hmask[LM_QK_K / 8];
    uint8_t qs[LM_QK_K / 4];
    uint8_t scales[12];
    lm_fp16 d;
};

/* Q4_K: 8 sub-blocks of 32 with 6-bit scale and min (see lm_quant_scale_min_k4);
 * x = d*sc*q - dmin*m. qs: 64-element groups, byte l low nibble = element
 * 64g + l, high nibble = element 64g + 32 + l. */
struct lm_block_q4_K {
    lm_fp16 d;
    lm_fp16 dmin;
    uint8_t scales[12];
    uint8_t qs[LM_QK_K / 2];
};

/* Q5_K: as Q4_K plus qh[l] bit 2g = 5th bit of element 64g + l, bit 2g+1 of
 * element 64g + 32 + l. */
struct lm_block_q5_K {
    lm_fp16 d;
    lm_fp16 dmin;
    uint8_t scales[12];
    uint8_t qh[LM_QK_K / 8];
    uint8_t qs[LM_QK_K / 2];
};

/* Q6_K: 16 sub-blocks of 16, int8 scales; x = d*sc*(q - 32). For each half
 * (128 elements) h: ql[64h + l] low/high nibble = elements 128h + l / +64,
 * ql[64h + 32 + l] = elements +32 / +96; qh[32h + l] bits 2s..2s+1 = top two
 * bits of element 128h + l + 32s. */
struct lm_block_q6_K {
    uint8_t ql[LM_QK_K / 2];
    uint8_t qh[LM_QK_K / 4];
    int8_t scales[LM_QK_K / 16];
    lm_fp16 d;
};

/* Q8_K (activation type for K-quant dots): x = d * q; bsums[j] = sum of qs[16j..16j+15]. */
struct lm_block_q8_K {
    float d;
    int8_t qs[LM_QK_K];
    int16_t bsums[LM_QK_K / 16];
};

/* IQ2_XXS: 8 groups of 32 elements, each two little-endian 32-bit words in
 * qs (words 2g, 2g+1 = qs[4g..4g+3]): word 0 holds four 8-bit grid indices
 * (byte k: elements 32g + 8k .. +7, lm_iq2xxs_grid), word 1 four 7-bit sign
 * indices (bits 7k..7k+6, lm_iq2_sign_bytes) and the 4-bit group scale s
 * (bits 28..31). x = d * (0.5 + s) * 0.25 * grid byte * sign. */
struct lm_block_iq2_xxs {
    lm_fp16 d;
    uint16_t qs[LM_QK_K / 8];
};

/* IQ2_XS: qs[l] = one group of 8 elements (32 per 4 entries): bits 0..8 grid
 * index (lm_iq2xs_grid), bits 9..15 sign index. scales[g]: low nibble = scale
 * of elements 32g..32g+15, high nibble of 32g+16..32g+31; x as IQ2_XXS. */
struct lm_block_iq2_xs {
    lm_fp16 d;
    uint16_t qs[LM_QK_K / 8];
    uint8_t scales[LM_QK_K / 32];
};

/* C11's _Static_assert; C++'s static_assert when the CUDA kernels (src/cuda/,
 * compiled as C++) include this header. */
#ifdef __cplusplus
#define LM_BLOCK_ASSERT(cond, msg) static_assert(cond, msg)
#else
#define LM_BLOCK_ASSERT(cond, msg) _Static_assert(cond, msg)
#endif

/* Sizes must equal the core type table (lm_type_size). The literal numbers are
 * the GGUF facts; core/type.c computes the same values from its formulas. */
LM_BLOCK_ASSERT(sizeof(struct lm_block_q4_0) == 18, "q4_0 block size");
LM_BLOCK_ASSERT(sizeof(struct lm_block_q4_1) == 20, "q4_1 block size");
LM_BLOCK_ASSERT(sizeof(struct lm_block_q5_0) == 22, "q5_0 block size");
LM_BLOCK_ASSERT(sizeof(struct lm_block_q5_1) == 24, "q5_1 block size");
LM_BLOCK_ASSERT(sizeof(struct lm_block_q8_0) == 34, "q8_0 block size");
LM_BLOCK_ASSERT(sizeof(struct lm_block_q8_1) == 36, "q8_1 block size");
LM_BLOCK_ASSERT(sizeof(struct lm_block_q2_K) == 84, "q2_K block size");
LM_BLOCK_ASSERT(sizeof(struct lm_block_q3_K) == 110, "q3_K block size");
LM_BLOCK_ASSERT(sizeof(struct lm_block_q4_K) == 144, "q4_K block size");
LM_BLOCK_ASSERT(sizeof(struct lm_block_q5_K) == 176, "q5_K block size");
LM_BLOCK_ASSERT(sizeof(struct lm_block_q6_K) == 210, "q6_K block size");
LM_BLOCK_ASSERT(sizeof(struct lm_block_q8_K) == 292, "q8_K block size");
LM_BLOCK_ASSERT(sizeof(struct lm_block_iq2_xxs) == 66, "iq2_xxs block size");
LM_BLOCK_ASSERT(sizeof(struct lm_block_iq2_xs) == 74, "iq2_xs block size");

/* The same facts expressed with the type-table formulas of core/type.c, so a
 * change to either side fails the build. */
LM_BLOCK_ASSERT(sizeof(struct lm_block_q4_0) == 2 + LM_QK / 2, "q4_0 vs type table");
LM_BLOCK_ASSERT(sizeof(struct lm_block_q4_1) == 4 + LM_QK / 2, "q4_1 vs type table");
LM_BLOCK_ASSERT(sizeof(struct lm_block_q5_0) == 2 + 4 + LM_QK / 2, "q5_0 vs type table");
LM_BLOCK_ASSERT(sizeof(struct lm_block_q5_1) == 4 + 4 + LM_QK / 2, "q5_1 vs type table");
LM_BLOCK_ASSERT(sizeof(struct lm_block_q8_0) == 2 + LM_QK, "q8_0 vs type table");
LM_BLOCK_ASSERT(sizeof(struct lm_block_q8_1) == 4 + LM_QK, "q8_1 vs type table");
LM_BLOCK_ASSERT(sizeof(struct lm_block_q2_K) == LM_QK_K / 16 + LM_QK_K / 4 + 4, "q2_K vs type table");
LM_BLOCK_ASSERT(sizeof(struct lm_block_q3_K) == LM_QK_K / 8 + LM_QK_K / 4 + 12 + 2, "q3_K vs type table");
LM_BLOCK_ASSERT(sizeof(struct lm_block_q4_K) == 4 + 12 + LM_QK_K / 2, "q4_K vs type table");
LM_BLOCK_ASSERT(sizeof(struct lm_block_q5_K) == 4 + 12 + LM_QK_K / 8 + LM_QK_K / 2, "q5_K vs type table");
LM_BLOCK_ASSERT(sizeof(struct lm_block_q6_K) == LM_QK_K / 2 + LM_QK_K / 4 + LM_QK_K / 16 + 2, "q6_K vs type table");
LM_BLOCK_ASSERT(sizeof(struct lm_block_q8_K) == 4 + LM_QK_K + LM_QK_K / 16 * 2, "q8_K vs type table");
LM_BLOCK_ASSERT(sizeof(struct lm_block_iq2_xxs) == 2 + LM_QK_K / 8 * 2, "iq2_xxs vs type table");
LM_BLOCK_ASSERT(sizeof(struct lm_block_iq2_xs) == 2 + LM_QK_K / 8 * 2 + LM_QK_K / 32, "iq2_xs vs type table");

/* The 6-bit scale and min of sub-block j (0..7) of a Q4_K / Q5_K block:
 * j < 4: low 6 bits of bytes j and j+4; j >= 4: a nibble of byte j+4 plus the
 * top two bits of bytes j-4 (scale) and j (min). */
static inline LM_HOSTDEV void lm_quant_scale_min_k4(int j, const uint8_t *q, uint8_t *sc, uint8_t *m)
{
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

#endif
