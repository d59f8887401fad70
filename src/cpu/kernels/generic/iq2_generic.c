/* iq2_generic.c - portable dot products of IQ2_XXS and IQ2_XS with Q8_K.
 *
 * Per 256-element super-block the integer sum is exact:
 *     bsum = sum over groups g of (2 s_g + 1) * sum_j grid_j * sign_j * q8_j
 * (grid bytes 8/25/43, group scale s_g 0..15; |bsum| < 2^26), then the float
 * steps are ggml's: sumf += (d_x * d_y) * bsum in block order, *s = sumf / 8.
 * The AVX2 and AVX-512 kernels compute the same bsum and the same float steps,
 * so all levels give the same bits. n is a multiple of 256.
 */
#include "cpu/kernels/kernels.h"
#include "quant/blocks.h"
#include "quant/iq2.h"

/* sum_j grid byte j * (+/-1 by sign bit j) * y[j] over one octet. */
static int32_t octet_dot(uint64_t grid, unsigned signs, const int8_t *y)
{
    int32_t s = 0;
    for (int j = 0; j < 8; j++) {
        const int32_t p = (int32_t)((grid >> (8 * j)) & 0xff) * y[j];
        s += (signs >> j) & 1 ? -p : p;
    }
    return s;
}

/* Contract: kernels.h. */
void lm_vec_dot_iq2_xxs_q8_K_generic(int64_t n, float *s, const void *vx, const void *vy)
{
    const struct lm_block_iq2_xxs *x = vx;
    const struct lm_block_q8_K *y = vy;
    float sumf = 0.0f;
    for (int64_t b = 0; b < n / LM_QK_K; b++) {
        const float d = lm_fp16_to_fp32(x[b].d) * y[b].d;
        const int8_t *q8 = y[b].qs;
        int32_t bsum = 0;
        for (int g = 0; g < LM_QK_K / 32; g++) {
            const uint16_t *q = x[b].qs + 4 * g;
            const uint32_t grids = (uint32_t)q[0] | (uint32_t)q[1] << 16;
            const uint32_t aux = (uint32_t)q[2] | (uint32_t)q[3] << 16;
            int32_t sumi = 0;
            for (int k = 0; k < 4; k++, q8 += 8)
                sumi += octet_dot(lm_iq2xxs_grid[(grids >> (8 * k)) & 0xff],
                                  lm_iq2_sign_bits((aux >> (7 * k)) & 127), q8);
            bsum += sumi * (int32_t)(2 * (aux >> 28) + 1);
        }
        sumf += d * (float)bsum;
    }
    *s = 0.125f * sumf;
}

/* Contract: kernels.h. */
void lm_vec_dot_iq2_xs_q8_K_generic(int64_t n, float *s, const void *vx, const void *vy)
{
    const struct lm_block_iq2_xs *x = vx;
    const struct lm_block_q8_K *y = vy;
    float sumf = 0.0f;
    for (int64_t b = 0; b < n / LM_QK_K; b++) {
        const float d = lm_fp16_to_fp32(x[b].d) * y[b].d;
        const int8_t *q8 = y[b].qs;
        int32_t bsum = 0;
        for (int h = 0; h < LM_QK_K / 16; h++) { /* halves of 16: scale nibble h % 2 of byte h / 2 */
            const int32_t ls = 2 * ((x[b].scales[h / 2] >> (4 * (h % 2))) & 0xf) + 1;
            int32_t sumi = 0;
            for (int k = 0; k < 2; k++, q8 += 8) {
                const uint16_t q = x[b].qs[2 * h + k];
                sumi += octet_dot(lm_iq2xs_grid[q & 511], lm_iq2_sign_bits(q >> 9), q8);
            }
            bsum += sumi * ls;
        }
        sumf += d * (float)bsum;
    }
    *s = 0.125f * sumf;
}
