/* iq2_cols_x86.h - the multi-column IQ2 kernel body the x86 IQ2 files
 * share (AVX2, AVX-512): one weight row against nc columns. Each file has its
 * own super-block form, so this body is included where they are defined: a
 * file includes it after its `struct sb`, `sb_xxs`, `sb_xs` and `sb_dot`
 * (the decode of one super-block and its exact integer dot with a Q8_K
 * block), and wraps `iq2_cols` in its exported kernels.
 */
#ifndef LM_CPU_KERNELS_IQ2_COLS_X86_H
#define LM_CPU_KERNELS_IQ2_COLS_X86_H

#include <stdbool.h>
#include <stdint.h>

/* One weight row against nc columns (lm_vec_dot_cols_fn): each super-block
 * of the row (IQ2_XS if xs, else IQ2_XXS; constant after inlining) decoded
 * once, then its exact integer dot with every column's Q8_K block; the float
 * steps are the single dot's, in its order, so each column's result is
 * bit-identical to the generic vec_dot. */
static inline __attribute__((always_inline)) void iq2_cols(const bool xs, int64_t n, int nc, float *const *s,
                                                           const void *vx, const void *const *vy)
{
    const struct lm_block_iq2_xxs *xxs = vx;
    const struct lm_block_iq2_xs *xs2 = vx;
    float sumf[LM_VEC_DOT_COLS_MAX] = {0};
    for (int64_t b = 0; b < n / LM_QK_K; b++) {
        struct sb w;
        if (xs)
            sb_xs(xs2 + b, &w);
        else
            sb_xxs(xxs + b, &w);
        const float dx = lm_fp16_to_fp32(xs ? xs2[b].d : xxs[b].d);
        for (int c = 0; c < nc; c++) {
            const struct lm_block_q8_K *y = (const struct lm_block_q8_K *)vy[c] + b;
            const float d = dx * y->d;
            sumf[c] += d * (float)sb_dot(&w, y->qs);
        }
    }
    for (int c = 0; c < nc; c++)
        *s[c] = 0.125f * sumf[c];
}

#endif
