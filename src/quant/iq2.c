/* iq2.c - IQ2_XXS and IQ2_XS: the lattice tables (quant/iq2.h) and the
 * decoders.
 *
 * The tables are expanded at compile time from the 2-bit codes of
 * quant/iq2_codes.h, so decoding needs no initialisation. Decoders compute
 * ggml's expressions in its order (db = d * (0.5 + s) * 0.25, then db * grid
 * byte, negated for a minus sign), so the floats are bit-identical. The
 * quantizer is in iq2_quant.c.
 */
#include "quant/iq2.h"
#include "quant/internal.h"
#include "quant/iq2_codes.h"

/* ---- grids: each 2-bit digit -> one magnitude byte ---- */

#define IQ2_DIGIT(c, i) (((c) >> (2 * (i))) & 3)
#define IQ2_MAG(c, i) ((uint64_t)(IQ2_DIGIT(c, i) == 0 ? 8 : IQ2_DIGIT(c, i) == 1 ? 25 : 43) << (8 * (i)))
#define IQ2_POINT(c)                                                                                             \
    (IQ2_MAG(c, 0) | IQ2_MAG(c, 1) | IQ2_MAG(c, 2) | IQ2_MAG(c, 3) | IQ2_MAG(c, 4) | IQ2_MAG(c, 5) |         \
     IQ2_MAG(c, 6) | IQ2_MAG(c, 7)),

const uint64_t lm_iq2xxs_grid[256] = {LM_IQ2XXS_CODES(IQ2_POINT)};
const uint64_t lm_iq2xs_grid[512] = {LM_IQ2XS_CODES(IQ2_POINT)};

/* ---- signs: index k -> 8 bytes of +1 / -1 ---- */

#define IQ2_PAR(k) (((k) ^ ((k) >> 1) ^ ((k) >> 2) ^ ((k) >> 3) ^ ((k) >> 4) ^ ((k) >> 5) ^ ((k) >> 6)) & 1)
#define IQ2_SBITS(k) ((k) | (IQ2_PAR(k) << 7))
#define IQ2_SBYTE(k, j) ((uint64_t)(((IQ2_SBITS(k) >> (j)) & 1) ? 0xff : 0x01) << (8 * (j)))
#define IQ2_S1(k)                                                                                                \
    (IQ2_SBYTE(k, 0) | IQ2_SBYTE(k, 1) | IQ2_SBYTE(k, 2) | IQ2_SBYTE(k, 3) | IQ2_SBYTE(k, 4) |               \
     IQ2_SBYTE(k, 5) | IQ2_SBYTE(k, 6) | IQ2_SBYTE(k, 7)),
#define IQ2_S2(k) IQ2_S1(k) IQ2_S1((k) + 1)
#define IQ2_S4(k) IQ2_S2(k) IQ2_S2((k) + 2)
#define IQ2_S8(k) IQ2_S4(k) IQ2_S4((k) + 4)
#define IQ2_S16(k) IQ2_S8(k) IQ2_S8((k) + 8)
#define IQ2_S32(k) IQ2_S16(k) IQ2_S16((k) + 16)
#define IQ2_S64(k) IQ2_S32(k) IQ2_S32((k) + 32)

const uint64_t lm_iq2_sign_bytes[128] = {IQ2_S64(0) IQ2_S64(64)};

/* ---- decoders ---- */

/* y[0..8) = db * (magnitudes of grid point g), negated where sign bit j is set. */
static void decode_octet(uint64_t g, unsigned signs, float db, float *y)
{
    for (int j = 0; j < 8; j++) {
        const float v = db * (float)((g >> (8 * j)) & 0xff);
        y[j] = (signs >> j) & 1 ? -v : v;
    }
}

void lm_quant_iq2_xxs_to_float(const void *vx, float *y, int64_t n)
{
    const struct lm_block_iq2_xxs *x = vx;
    for (int64_t i = 0; i < n / LM_QK_K; i++) {
        const float d = lm_fp16_to_fp32(x[i].d);
        for (int g = 0; g < LM_QK_K / 32; g++) {
            const uint16_t *q = x[i].qs + 4 * g;
            const uint32_t grids = (uint32_t)q[0] | (uint32_t)q[1] << 16;
            const uint32_t aux = (uint32_t)q[2] | (uint32_t)q[3] << 16;
            const float db = d * (0.5f + (float)(aux >> 28)) * 0.25f;
            for (int k = 0; k < 4; k++, y += 8)
                decode_octet(lm_iq2xxs_grid[(grids >> (8 * k)) & 0xff], lm_iq2_sign_bits((aux >> (7 * k)) & 127),
                             db, y);
        }
    }
}

void lm_quant_iq2_xs_to_float(const void *vx, float *y, int64_t n)
{
    const struct lm_block_iq2_xs *x = vx;
    for (int64_t i = 0; i < n / LM_QK_K; i++) {
        const float d = lm_fp16_to_fp32(x[i].d);
        for (int g = 0; g < LM_QK_K / 32; g++) {
            const float db[2] = {d * (0.5f + (float)(x[i].scales[g] & 0xf)) * 0.25f,
                                 d * (0.5f + (float)(x[i].scales[g] >> 4)) * 0.25f};
            for (int k = 0; k < 4; k++, y += 8) {
                const uint16_t q = x[i].qs[4 * g + k];
                decode_octet(lm_iq2xs_grid[q & 511], lm_iq2_sign_bits(q >> 9), db[k / 2], y);
            }
        }
    }
}
