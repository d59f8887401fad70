/* gemm_kquant_generic.c - reference GEMM over repacked K-quant groups
 * (kernels.h lm_gemm_fn, layouts q2_Kx8 .. q6_Kx8 in cpu/repack.h; the
 * activations are Q8_K rows).
 *
 * Per super-block the integer sums are exact and the float update is the one
 * of the generic vec_dot kernels (kquant_generic.c), in super-block order:
 *     Q2_K, Q4_K, Q5_K: sumf += (d_a d_r) * isum - (d_a dmin_r) * msum
 *     Q3_K, Q6_K: sumf += (d_r d_a) * isum
 * so a repacked matmul gives bit-identical results to the plain one with the
 * generic kernels (tests/cpu/test_gemm.c). The codes are read as unsigned
 * (Q3_K's -4 and Q6_K's -32 offsets go through the Q8_K bsums, as the AVX2
 * kernels do; the integer result is the same).
 */
#include "cpu/kernels/kernels.h"
#include "cpu/repack.h"
#include "quant/blocks.h"

#define R LM_REPACK_ROWS

static const struct lm_block_q8_K *act_row(const void *y, size_t by, int c)
{
    return (const struct lm_block_q8_K *)((const char *)y + (size_t)c * by);
}

/* Row r of a q4_Kx8 / q5_Kx8 group (scale tables sc, mn; codes qs, and qh
 * for Q5_K or NULL) against one Q8_K super-block: the integer sums. */
static void k4_sums(const uint8_t *sc, const uint8_t *mn, const uint8_t *qs, const uint8_t *qh,
                    const struct lm_block_q8_K *a, int r, int32_t *isum, int32_t *msum)
{
    int32_t is = 0, ms = 0;
    for (int j = 0; j < 8; j++) {
        const int i = 16 * (j / 2) + 2 * r + j % 2;
        const int scale = sc[i] & 63;
        const int m = ((mn[i % 32] >> (i >= 32 ? 4 : 0)) & 15) | (sc[i] >> 6) << 4;
        int32_t dot = 0;
        for (int k = 0; k < 8; k++) { /* qs chunk 8 (j/2) + k, nibble j%2; qh chunk k, bit j */
            const uint8_t *q = qs + 32 * (8 * (j / 2) + k) + 4 * r;
            for (int t = 0; t < 4; t++) {
                int code = (q[t] >> (4 * (j % 2))) & 15;
                if (qh)
                    code |= ((qh[32 * k + 4 * r + t] >> j) & 1) << 4;
                dot += code * a->qs[32 * j + 4 * k + t];
            }
        }
        is += scale * dot;
        ms += m * (a->bsums[2 * j] + a->bsums[2 * j + 1]);
    }
    *isum = is;
    *msum = ms;
}

/* The fields of super-block b of a q4_Kx8 (q5 false; qh NULL) or q5_Kx8 group. */
struct k4_view {
    const lm_fp16 *d, *dmin;
    const uint8_t *sc, *mn, *qs, *qh;
};
static inline struct k4_view k4_view(const bool q5, const void *x, int64_t b)
{
    if (q5) {
        const struct lm_block_q5_Kx8 *w = (const struct lm_block_q5_Kx8 *)x + b;
        return (struct k4_view){w->d, w->dmin, w->sc, w->mn, w->qs, w->qh};
    }
    const struct lm_block_q4_Kx8 *w = (const struct lm_block_q4_Kx8 *)x + b;
    return (struct k4_view){w->d, w->dmin, w->sc, w->mn, w->qs, NULL};
}

/* One group of either layout: the float update of dot_k4 (kquant_generic.c). */
static inline __attribute__((always_inline)) void k4_gemm(const bool q5, int64_t k, float *s, size_t ldc, const void *x,
                                                          const void *y, size_t by, int nc)
{
    const int64_t nb = k / LM_QK_K;
    for (int c = 0; c < nc; c++) {
        const struct lm_block_q8_K *a = act_row(y, by, c);
        for (int r = 0; r < R; r++) {
            float sumf = 0.0f;
            for (int64_t b = 0; b < nb; b++) {
                const struct k4_view w = k4_view(q5, x, b);
                int32_t isum, msum;
                k4_sums(w.sc, w.mn, w.qs, w.qh, &a[b], r, &isum, &msum);
                const float dd = a[b].d * lm_fp16_to_fp32(w.d[r]);
                const float dm = a[b].d * lm_fp16_to_fp32(w.dmin[r]);
                sumf += dd * (float)isum - dm * (float)msum;
            }
            s[(size_t)c * ldc + (size_t)r] = sumf;
        }
    }
}

/* Contract: kernels.h. */
void lm_gemm_q4_Kx8_q8_K_generic(int64_t k, float *s, size_t ldc, const void *x, const void *y, size_t by,
                                 const int16_t *ysum, int nc)
{
    (void)ysum;
    k4_gemm(false, k, s, ldc, x, y, by, nc);
}
/* Contract: kernels.h. */
void lm_gemm_q5_Kx8_q8_K_generic(int64_t k, float *s, size_t ldc, const void *x, const void *y, size_t by,
                                 const int16_t *ysum, int nc)
{
    (void)ysum;
    k4_gemm(true, k, s, ldc, x, y, by, nc);
}

/* The unsigned 6-bit code of element e of row r in a q6_Kx8 group. */
static int q6_code(const struct lm_block_q6_Kx8 *w, int r, int e)
{
    const int t = e / 4, i = e % 4, j = t / 4, u = t % 4;
    const int lo = (w->sub[j].ql[32 * (u / 2) + 4 * r + i] >> (4 * (u & 1))) & 15;
    const int hi = (w->sub[j].qh[4 * r + i] >> (2 * u)) & 3;
    return lo | hi << 4;
}

/* Contract: kernels.h. */
void lm_gemm_q6_Kx8_q8_K_generic(int64_t k, float *s, size_t ldc, const void *x, const void *y, size_t by,
                               const int16_t *ysum, int nc)
{
    (void)ysum;
    const int64_t nb = k / LM_QK_K;
    const struct lm_block_q6_Kx8 *w = x;
    for (int c = 0; c < nc; c++) {
        const struct lm_block_q8_K *a = act_row(y, by, c);
        for (int r = 0; r < R; r++) {
            float sumf = 0.0f;
            for (int64_t b = 0; b < nb; b++) {
                int32_t isum = 0;
                for (int j = 0; j < 16; j++) {
                    int32_t dot = 0;
                    for (int t = 0; t < 16; t++)
                        dot += q6_code(&w[b], r, 16 * j + t) * a[b].qs[16 * j + t];
                    isum += w[b].scales[16 * (j / 2) + 2 * r + j % 2] * (dot - 32 * a[b].bsums[j]);
                }
                sumf += lm_fp16_to_fp32(w[b].d[r]) * a[b].d * (float)isum;
            }
            s[(size_t)c * ldc + (size_t)r] = sumf;
        }
    }
}

/* The 2-bit code of element e of row r in a q2_Kx8 / q3_Kx8 group. */
static int low2_code(const uint8_t *qs, int r, int e)
{
    const int t = e / 4;
    return (qs[32 * (t / 4) + 4 * r + e % 4] >> (2 * (t % 4))) & 3;
}

/* Contract: kernels.h. The float update of lm_vec_dot_q2_K_q8_K_generic. */
void lm_gemm_q2_Kx8_q8_K_generic(int64_t k, float *s, size_t ldc, const void *x, const void *y, size_t by,
                               const int16_t *ysum, int nc)
{
    (void)ysum;
    const int64_t nb = k / LM_QK_K;
    const struct lm_block_q2_Kx8 *w = x;
    for (int c = 0; c < nc; c++) {
        const struct lm_block_q8_K *a = act_row(y, by, c);
        for (int r = 0; r < R; r++) {
            float sumf = 0.0f;
            for (int64_t b = 0; b < nb; b++) {
                int32_t isum = 0, summs = 0;
                for (int j = 0; j < 16; j++) {
                    const uint8_t sc = w[b].scales[16 * (j / 2) + 2 * r + j % 2];
                    int32_t dot = 0;
                    for (int t = 0; t < 16; t++)
                        dot += low2_code(w[b].qs, r, 16 * j + t) * a[b].qs[16 * j + t];
                    isum += (sc & 0xF) * dot;
                    summs += (sc >> 4) * a[b].bsums[j];
                }
                const float dall = a[b].d * lm_fp16_to_fp32(w[b].d[r]);
                const float dmin = a[b].d * lm_fp16_to_fp32(w[b].dmin[r]);
                sumf += dall * (float)isum - dmin * (float)summs;
            }
            s[(size_t)c * ldc + (size_t)r] = sumf;
        }
    }
}

/* Contract: kernels.h. Codes read as unsigned (low 2 bits + 4 * hmask bit);
 * the -4 goes through the bsums. The float update of lm_vec_dot_q3_K_q8_K_generic. */
void lm_gemm_q3_Kx8_q8_K_generic(int64_t k, float *s, size_t ldc, const void *x, const void *y, size_t by,
                               const int16_t *ysum, int nc)
{
    (void)ysum;
    const int64_t nb = k / LM_QK_K;
    const struct lm_block_q3_Kx8 *w = x;
    for (int c = 0; c < nc; c++) {
        const struct lm_block_q8_K *a = act_row(y, by, c);
        for (int r = 0; r < R; r++) {
            float sumf = 0.0f;
            for (int64_t b = 0; b < nb; b++) {
                int32_t isum = 0;
                for (int j = 0; j < 16; j++) {
                    const int i = 16 * (j / 2) + 2 * r + j % 2;
                    const int lo = (w[b].s4[i % 64] >> (4 * (i / 64))) & 15;
                    const int scale = (lo | ((w[b].s2[i % 32] >> (2 * (i / 32))) & 3) << 4) - 32;
                    int32_t dot = 0;
                    for (int t = 0; t < 16; t++) {
                        const int e = 16 * j + t, reg = e / 4;
                        const int hi = (w[b].hm[32 * (reg / 8) + 4 * r + e % 4] >> (reg % 8)) & 1;
                        dot += (low2_code(w[b].qs, r, e) + 4 * hi) * a[b].qs[e];
                    }
                    isum += scale * (dot - 4 * a[b].bsums[j]);
                }
                sumf += lm_fp16_to_fp32(w[b].d[r]) * a[b].d * (float)isum;
            }
            s[(size_t)c * ldc + (size_t)r] = sumf;
        }
    }
}
