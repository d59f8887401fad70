/* iq2_cols.h - the driver of the IQ2 multi-column dot kernels (the
 * lm_vec_dot_cols_fn slot of kernels.h), shared by the ISA files.
 *
 * LM_IQ2_COLS_KERNEL(name, block_type, decode) defines
 *   void name(int64_t n, int nc, float *const *s, const void *vx, const void *const *vy)
 * which decodes each super-block of the weight row once (decode(block, &sb))
 * and takes its exact integer dot with every column's Q8_K block
 * (sb_dot(&sb, qs)); the float steps are the single dot's, in its order, so
 * each column's result is bit-identical to vec_dot_iq2_*_q8_K_generic. The
 * including file defines `struct sb` and `sb_dot` for its ISA.
 */
#ifndef LM_CPU_KERNELS_IQ2_COLS_H
#define LM_CPU_KERNELS_IQ2_COLS_H

#include "core/fp16.h"
#include "cpu/kernels/kernels.h"
#include "quant/blocks.h"

#define LM_IQ2_COLS_KERNEL(name, block_type, decode)                                                                   \
    void name(int64_t n, int nc, float *const *s, const void *vx, const void *const *vy)                               \
    {                                                                                                                  \
        const block_type *x = vx;                                                                                      \
        float sumf[LM_VEC_DOT_COLS_MAX] = {0};                                                                         \
        for (int64_t b = 0; b < n / LM_QK_K; b++) {                                                                    \
            struct sb w;                                                                                               \
            decode(x + b, &w);                                                                                         \
            const float dx = lm_fp16_to_fp32(x[b].d);                                                                  \
            for (int c = 0; c < nc; c++) {                                                                             \
                const struct lm_block_q8_K *y = (const struct lm_block_q8_K *)vy[c] + b;                               \
                const float d = dx * y->d;                                                                             \
                sumf[c] += d * (float)sb_dot(&w, y->qs);                                                               \
            }                                                                                                          \
        }                                                                                                              \
        for (int c = 0; c < nc; c++)                                                                                   \
            *s[c] = 0.125f * sumf[c];                                                                                  \
    }

#endif
