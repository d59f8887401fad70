/* gemm_generic.c - reference GEMM over repacked weight groups (kernels.h
 * lm_gemm_fn, layouts in cpu/repack.h). Per block the integer dot is exact and
 * the float update is (float)isum * d_w * d_a, in block order, exactly as the
 * generic vec_dot kernels do: the results are bit-identical to vec_dot. */
#include "cpu/kernels/kernels.h"
#include "cpu/repack.h"
#include "quant/blocks.h"

/* Contract: kernels.h. The -8 offset of Q4_0 is applied through the
 * activation block sums: sum((q - 8) a) = sum(q a) - 8 sum(a). */
void lm_gemm_q4_0x8_q8_0_generic(int64_t k, float *s, size_t ldc, const void *x, const void *y, size_t by,
                               const int16_t *ysum, int nc)
{
    const int64_t nb = k / LM_QK;
    const struct lm_block_q4_0x8 *w = x;
    for (int c = 0; c < nc; c++) {
        const struct lm_block_q8_0 *a = (const struct lm_block_q8_0 *)((const char *)y + (size_t)c * by);
        const int16_t *as = ysum + (size_t)c * (size_t)nb;
        for (int r = 0; r < LM_REPACK_ROWS; r++) {
            float sumf = 0.0f;
            for (int64_t b = 0; b < nb; b++) {
                int isum = 0;
                for (int ch = 0; ch < 4; ch++) {
                    for (int t = 0; t < 4; t++) {
                        uint8_t q = w[b].qs[32 * ch + 4 * r + t];
                        isum += (q & 15) * a[b].qs[4 * ch + t] + (q >> 4) * a[b].qs[16 + 4 * ch + t];
                    }
                }
                isum -= 8 * as[b];
                sumf += (float)isum * lm_fp16_to_fp32(w[b].d[r]) * lm_fp16_to_fp32(a[b].d);
            }
            s[(size_t)c * ldc + (size_t)r] = sumf;
        }
    }
}

/* Contract: kernels.h. */
void lm_gemm_q8_0x8_q8_0_generic(int64_t k, float *s, size_t ldc, const void *x, const void *y, size_t by,
                               const int16_t *ysum, int nc)
{
    (void)ysum;
    const int64_t nb = k / LM_QK;
    const struct lm_block_q8_0x8 *w = x;
    for (int c = 0; c < nc; c++) {
        const struct lm_block_q8_0 *a = (const struct lm_block_q8_0 *)((const char *)y + (size_t)c * by);
        for (int r = 0; r < LM_REPACK_ROWS; r++) {
            float sumf = 0.0f;
            for (int64_t b = 0; b < nb; b++) {
                int isum = 0;
                for (int j = 0; j < 8; j++)
                    for (int t = 0; t < 4; t++)
                        isum += w[b].qs[32 * j + 4 * r + t] * a[b].qs[4 * j + t];
                sumf += (float)isum * lm_fp16_to_fp32(w[b].d[r]) * lm_fp16_to_fp32(a[b].d);
            }
            s[(size_t)c * ldc + (size_t)r] = sumf;
        }
    }
}
