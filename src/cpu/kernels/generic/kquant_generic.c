/* kquant_generic.c - portable dot products of the K-quants (Q2_K..Q6_K) with Q8_K.
 *
 * Each 256-element super-block is decoded to signed integer codes, dotted
 * with the Q8_K codes per sub-block, weighted by the integer sub-block scales
 * (all exact in int32), then scaled in float as ggml's reference does:
 *     sumf += d_x * d_y * isum  [- dmin_x * d_y * sum_j(min_j * bsum_j)].
 * n is a multiple of 256; blocks need their natural alignment (Q8_K: 4).
 * Code layouts are those documented in quant/blocks.h.
 */
#include "cpu/kernels/kernels.h"
#include "quant/blocks.h"

/* sum_j q[j] * y[j] over n elements. */
static int32_t idot(const int8_t *q, const int8_t *y, int n)
{
    int32_t s = 0;
    for (int j = 0; j < n; j++)
        s += q[j] * y[j];
    return s;
}

/* The 2-bit codes shared by Q2_K and Q3_K: element 128g + 32s + l is bits
 * 2s..2s+1 of qs[32g + l]. */
static void unpack_2bit(const uint8_t *qs, int8_t *q)
{
    for (int g = 0; g < 2; g++)
        for (int s = 0; s < 4; s++)
            for (int l = 0; l < 32; l++)
                q[128 * g + 32 * s + l] = (int8_t)((qs[32 * g + l] >> (2 * s)) & 3);
}

/* Contract: kernels.h. */
void lm_vec_dot_q2_K_q8_K_generic(int64_t n, float *s, const void *vx, const void *vy)
{
    const struct lm_block_q2_K *x = vx;
    const struct lm_block_q8_K *y = vy;
    float sumf = 0.0f;
    int8_t q[LM_QK_K];
    for (int64_t b = 0; b < n / LM_QK_K; b++) {
        unpack_2bit(x[b].qs, q);
        int32_t isum = 0, summs = 0;
        for (int j = 0; j < LM_QK_K / 16; j++) {
            isum += (x[b].scales[j] & 0xF) * idot(q + 16 * j, y[b].qs + 16 * j, 16);
            summs += (x[b].scales[j] >> 4) * y[b].bsums[j];
        }
        float dall = y[b].d * lm_fp16_to_fp32(x[b].d);
        float dmin = y[b].d * lm_fp16_to_fp32(x[b].dmin);
        sumf += dall * (float)isum - dmin * (float)summs;
    }
    *s = sumf;
}

/* The 16 signed 6-bit scales of a Q3_K block (stored + 32). */
static void q3_K_scales(const uint8_t *sc, int scales[16])
{
    for (int j = 0; j < 16; j++) {
        int lo = j < 8 ? (sc[j] & 0xF) : (sc[j - 8] >> 4);
        int hi = (sc[8 + j % 4] >> (2 * (j / 4))) & 3;
        scales[j] = (lo | hi << 4) - 32;
    }
}

/* Contract: kernels.h. */
void lm_vec_dot_q3_K_q8_K_generic(int64_t n, float *s, const void *vx, const void *vy)
{
    const struct lm_block_q3_K *x = vx;
    const struct lm_block_q8_K *y = vy;
    float sumf = 0.0f;
    int8_t q[LM_QK_K];
    int scales[16];
    for (int64_t b = 0; b < n / LM_QK_K; b++) {
        unpack_2bit(x[b].qs, q);
        for (int bit = 0; bit < 8; bit++) /* element 32 bit + l: high bit clear -> subtract 4 */
            for (int l = 0; l < 32; l++)
                q[32 * bit + l] = (int8_t)(q[32 * bit + l] - (((x[b].hmask[l] >> bit) & 1) ? 0 : 4));
        q3_K_scales(x[b].scales, scales);
        int32_t isum = 0;
        for (int j = 0; j < 16; j++)
            isum += scales[j] * idot(q + 16 * j, y[b].qs + 16 * j, 16);
        sumf += lm_fp16_to_fp32(x[b].d) * y[b].d * (float)isum;
    }
    *s = sumf;
}

/* Q4_K / Q5_K low 4 bits: element 64g + l is the low nibble of qs[32g + l],
 * element 64g + 32 + l the high nibble. qh (Q5_K, may be NULL) adds 16 where
 * bit 2g (resp. 2g+1) of qh[l] is set. */
static void unpack_k4(const uint8_t *qs, const uint8_t *qh, int8_t *q)
{
    for (int g = 0; g < 4; g++) {
        for (int l = 0; l < 32; l++) {
            int lo = qs[32 * g + l] & 0xF, hi = qs[32 * g + l] >> 4;
            if (qh) {
                lo += ((qh[l] >> (2 * g)) & 1) << 4;
                hi += ((qh[l] >> (2 * g + 1)) & 1) << 4;
            }
            q[64 * g + l] = (int8_t)lo;
            q[64 * g + 32 + l] = (int8_t)hi;
        }
    }
}

/* Shared body of Q4_K and Q5_K (same scales, different codes). */
static float dot_k4(const uint8_t *scales, lm_fp16 d, lm_fp16 dmin, const int8_t *q,
                    const struct lm_block_q8_K *y)
{
    int32_t isum = 0, summs = 0;
    for (int j = 0; j < 8; j++) {
        uint8_t sc, m;
        lm_quant_scale_min_k4(j, scales, &sc, &m);
        isum += sc * idot(q + 32 * j, y->qs + 32 * j, 32);
        summs += m * (y->bsums[2 * j] + y->bsums[2 * j + 1]);
    }
    float dd = y->d * lm_fp16_to_fp32(d);
    float dm = y->d * lm_fp16_to_fp32(dmin);
    return dd * (float)isum - dm * (float)summs;
}

/* Contract: kernels.h. */
void lm_vec_dot_q4_K_q8_K_generic(int64_t n, float *s, const void *vx, const void *vy)
{
    const struct lm_block_q4_K *x = vx;
    const struct lm_block_q8_K *y = vy;
    float sumf = 0.0f;
    int8_t q[LM_QK_K];
    for (int64_t b = 0; b < n / LM_QK_K; b++) {
        unpack_k4(x[b].qs, NULL, q);
        sumf += dot_k4(x[b].scales, x[b].d, x[b].dmin, q, &y[b]);
    }
    *s = sumf;
}

/* Contract: kernels.h. */
void lm_vec_dot_q5_K_q8_K_generic(int64_t n, float *s, const void *vx, const void *vy)
{
    const struct lm_block_q5_K *x = vx;
    const struct lm_block_q8_K *y = vy;
    float sumf = 0.0f;
    int8_t q[LM_QK_K];
    for (int64_t b = 0; b < n / LM_QK_K; b++) {
        unpack_k4(x[b].qs, x[b].qh, q);
        sumf += dot_k4(x[b].scales, x[b].d, x[b].dmin, q, &y[b]);
    }
    *s = sumf;
}

/* Contract: kernels.h. */
void lm_vec_dot_q6_K_q8_K_generic(int64_t n, float *s, const void *vx, const void *vy)
{
    const struct lm_block_q6_K *x = vx;
    const struct lm_block_q8_K *y = vy;
    float sumf = 0.0f;
    int8_t q[LM_QK_K];
    for (int64_t b = 0; b < n / LM_QK_K; b++) {
        const uint8_t *ql = x[b].ql, *qh = x[b].qh;
        for (int h = 0; h < 2; h++) {
            for (int l = 0; l < 32; l++) {
                const uint8_t a = ql[64 * h + l], c = ql[64 * h + 32 + l], hb = qh[32 * h + l];
                q[128 * h + l] = (int8_t)(((a & 0xF) | ((hb >> 0) & 3) << 4) - 32);
                q[128 * h + 32 + l] = (int8_t)(((c & 0xF) | ((hb >> 2) & 3) << 4) - 32);
                q[128 * h + 64 + l] = (int8_t)(((a >> 4) | ((hb >> 4) & 3) << 4) - 32);
                q[128 * h + 96 + l] = (int8_t)(((c >> 4) | ((hb >> 6) & 3) << 4) - 32);
            }
        }
        int32_t isum = 0;
        for (int j = 0; j < 16; j++)
            isum += x[b].scales[j] * idot(q + 16 * j, y[b].qs + 16 * j, 16);
        sumf += lm_fp16_to_fp32(x[b].d) * y[b].d * (float)isum;
    }
    *s = sumf;
}
