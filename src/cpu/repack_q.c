/* repack_q.c - the q4_0x8 and q8_0x8 layouts (cpu/repack.h): plain rows to
 * 8-row groups and back. */
#include <string.h>

#include "cpu/repack.h"
#include "quant/blocks.h"

void lm_pack_q4_0x8(const void *src, void *dst, int64_t n_rows, int64_t k)
{
    const int64_t nb = k / LM_QK;
    for (int64_t g = 0; g < n_rows / LM_REPACK_ROWS; g++) {
        const struct lm_block_q4_0 *x = (const struct lm_block_q4_0 *)src + g * LM_REPACK_ROWS * nb;
        for (int64_t b = 0; b < nb; b++) {
            struct lm_block_q4_0x8 *y = (struct lm_block_q4_0x8 *)dst + g * nb + b;
            for (int r = 0; r < LM_REPACK_ROWS; r++) {
                y->d[r] = x[r * nb + b].d;
                for (int c = 0; c < 4; c++)
                    memcpy(&y->qs[32 * c + 4 * r], &x[r * nb + b].qs[4 * c], 4);
            }
        }
    }
}

void lm_unpack_q4_0x8(const void *src, void *dst, int64_t n_rows, int64_t k)
{
    const int64_t nb = k / LM_QK;
    for (int64_t g = 0; g < n_rows / LM_REPACK_ROWS; g++) {
        struct lm_block_q4_0 *y = (struct lm_block_q4_0 *)dst + g * LM_REPACK_ROWS * nb;
        for (int64_t b = 0; b < nb; b++) {
            const struct lm_block_q4_0x8 *x = (const struct lm_block_q4_0x8 *)src + g * nb + b;
            for (int r = 0; r < LM_REPACK_ROWS; r++) {
                y[r * nb + b].d = x->d[r];
                for (int c = 0; c < 4; c++)
                    memcpy(&y[r * nb + b].qs[4 * c], &x->qs[32 * c + 4 * r], 4);
            }
        }
    }
}

void lm_pack_q8_0x8(const void *src, void *dst, int64_t n_rows, int64_t k)
{
    const int64_t nb = k / LM_QK;
    for (int64_t g = 0; g < n_rows / LM_REPACK_ROWS; g++) {
        const struct lm_block_q8_0 *x = (const struct lm_block_q8_0 *)src + g * LM_REPACK_ROWS * nb;
        for (int64_t b = 0; b < nb; b++) {
            struct lm_block_q8_0x8 *y = (struct lm_block_q8_0x8 *)dst + g * nb + b;
            for (int r = 0; r < LM_REPACK_ROWS; r++) {
                y->d[r] = x[r * nb + b].d;
                for (int j = 0; j < 8; j++)
                    memcpy(&y->qs[32 * j + 4 * r], &x[r * nb + b].qs[4 * j], 4);
            }
        }
    }
}

void lm_unpack_q8_0x8(const void *src, void *dst, int64_t n_rows, int64_t k)
{
    const int64_t nb = k / LM_QK;
    for (int64_t g = 0; g < n_rows / LM_REPACK_ROWS; g++) {
        struct lm_block_q8_0 *y = (struct lm_block_q8_0 *)dst + g * LM_REPACK_ROWS * nb;
        for (int64_t b = 0; b < nb; b++) {
            const struct lm_block_q8_0x8 *x = (const struct lm_block_q8_0x8 *)src + g * nb + b;
            for (int r = 0; r < LM_REPACK_ROWS; r++) {
                y[r * nb + b].d = x->d[r];
                for (int j = 0; j < 8; j++)
                    memcpy(&y[r * nb + b].qs[4 * j], &x->qs[32 * j + 4 * r], 4);
            }
        }
    }
}
