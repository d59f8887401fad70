/* legacy_generic.c - portable dot products of the 32-element quant types with
 * their activation types: Q4_0/Q5_0/Q8_0 x Q8_0 and Q4_1/Q5_1 x Q8_1.
 *
 * Per block the integer sum of products is exact (int32); it is then scaled as
 * ggml's reference does: sumf += sumi * d_x * d_y (plus m_x * s_y for the
 * _1 types, where s_y = d_y * sum(q_y) is stored in the Q8_1 block). n is a
 * multiple of 32; blocks need their natural (2-byte) alignment.
 */
#include "cpu/kernels/kernels.h"
#include "quant/blocks.h"

/* sum_j (q_j - offset) * y_j over one block, where q_j (j < 16) is the low
 * nibble of qs[j] and q_{j+16} the high nibble (4-bit types). Decoding into
 * int8 first, then a plain int8 dot, lets compilers vectorise both loops. */
static inline int block_dot(const uint8_t *qs, int offset, const int8_t *y)
{
    int8_t q[LM_QK];
    for (int j = 0; j < LM_QK / 2; j++) {
        q[j] = (int8_t)((qs[j] & 0x0F) - offset);
        q[j + LM_QK / 2] = (int8_t)((qs[j] >> 4) - offset);
    }
    int sum = 0;
    for (int j = 0; j < LM_QK; j++)
        sum += q[j] * y[j];
    return sum;
}

/* 16 * sum of y_j over the set 5th bits (bit j of the little-endian qh8):
 * the 5-bit types' codes are nibble + 16 * bit, so their block dot is
 * block_dot(...) + high_dot(...). Kept scalar: building the 0/16 bytes as a
 * vector costs more than this loop on plain x86-64. */
static inline int high_dot(const uint8_t qh8[4], const int8_t *y)
{
    const uint32_t qh = (uint32_t)qh8[0] | (uint32_t)qh8[1] << 8 | (uint32_t)qh8[2] << 16 | (uint32_t)qh8[3] << 24;
    int sum = 0;
    for (int j = 0; j < LM_QK; j++)
        sum += (int)((qh >> j) & 1u) * y[j];
    return 16 * sum;
}

/* Contract: kernels.h. */
void lm_vec_dot_q4_0_q8_0_generic(int64_t n, float *s, const void *vx, const void *vy)
{
    const struct lm_block_q4_0 *x = vx;
    const struct lm_block_q8_0 *y = vy;
    float sumf = 0.0f;
    for (int64_t b = 0; b < n / LM_QK; b++) {
        int sumi = block_dot(x[b].qs, 8, y[b].qs);
        sumf += (float)sumi * lm_fp16_to_fp32(x[b].d) * lm_fp16_to_fp32(y[b].d);
    }
    *s = sumf;
}

/* Contract: kernels.h. */
void lm_vec_dot_q5_0_q8_0_generic(int64_t n, float *s, const void *vx, const void *vy)
{
    const struct lm_block_q5_0 *x = vx;
    const struct lm_block_q8_0 *y = vy;
    float sumf = 0.0f;
    for (int64_t b = 0; b < n / LM_QK; b++) {
        int sumi = block_dot(x[b].qs, 16, y[b].qs) + high_dot(x[b].qh, y[b].qs);
        sumf += (float)sumi * lm_fp16_to_fp32(x[b].d) * lm_fp16_to_fp32(y[b].d);
    }
    *s = sumf;
}

/* Contract: kernels.h. */
void lm_vec_dot_q8_0_q8_0_generic(int64_t n, float *s, const void *vx, const void *vy)
{
    const struct lm_block_q8_0 *x = vx;
    const struct lm_block_q8_0 *y = vy;
    float sumf = 0.0f;
    for (int64_t b = 0; b < n / LM_QK; b++) {
        int sumi = 0;
        for (int j = 0; j < LM_QK; j++)
            sumi += x[b].qs[j] * y[b].qs[j];
        sumf += (float)sumi * lm_fp16_to_fp32(x[b].d) * lm_fp16_to_fp32(y[b].d);
    }
    *s = sumf;
}

/* Contract: kernels.h. */
void lm_vec_dot_q4_1_q8_1_generic(int64_t n, float *s, const void *vx, const void *vy)
{
    const struct lm_block_q4_1 *x = vx;
    const struct lm_block_q8_1 *y = vy;
    float sumf = 0.0f;
    for (int64_t b = 0; b < n / LM_QK; b++) {
        int sumi = block_dot(x[b].qs, 0, y[b].qs);
        float dd = lm_fp16_to_fp32(x[b].d) * lm_fp16_to_fp32(y[b].d);
        sumf += dd * (float)sumi + lm_fp16_to_fp32(x[b].m) * lm_fp16_to_fp32(y[b].s);
    }
    *s = sumf;
}

/* Contract: kernels.h. */
void lm_vec_dot_q5_1_q8_1_generic(int64_t n, float *s, const void *vx, const void *vy)
{
    const struct lm_block_q5_1 *x = vx;
    const struct lm_block_q8_1 *y = vy;
    float sumf = 0.0f;
    for (int64_t b = 0; b < n / LM_QK; b++) {
        int sumi = block_dot(x[b].qs, 0, y[b].qs) + high_dot(x[b].qh, y[b].qs);
        float dd = lm_fp16_to_fp32(x[b].d) * lm_fp16_to_fp32(y[b].d);
        sumf += dd * (float)sumi + lm_fp16_to_fp32(x[b].m) * lm_fp16_to_fp32(y[b].s);
    }
    *s = sumf;
}

/* Contract: kernels.h. */
void lm_vec_mad_rows_q8_0_generic(int64_t d, int nq, const int64_t *len, float *const *out, const void *x, size_t bx,
                                  const int32_t *idx, const float *const *p)
{
    for (int q = 0; q < nq; q++) {
        float *o = out[q];
        for (int64_t e = 0; e < d; e++)
            o[e] = 0.0f;
        for (int64_t k = 0; k < len[q]; k++) {
            const struct lm_block_q8_0 *row = (const void *)((const char *)x + (size_t)(idx ? idx[k] : k) * bx);
            for (int64_t b = 0; b < d / LM_QK; b++) {
                const float s = lm_fp16_to_fp32(row[b].d);
                for (int j = 0; j < LM_QK; j++)
                    o[b * LM_QK + j] += p[q][k] * (s * (float)row[b].qs[j]);
            }
        }
    }
}
