/* gemm_float_generic.c - reference GEMM over the f16x8, bf16x8 and f32x8
 * layouts (kernels.h lm_gemm_fn, layouts in cpu/repack.h), and the BF16
 * rounding encoder of its activation rows.
 *
 * Activation rows: F16 weights read F16 rows (the plain path's dot type and
 * encoder); BF16 weights read F32 rows already rounded through BF16 (the
 * encoder below; the values of the plain path's BF16 rows); F32 weights read
 * F32 rows. So each product w * a equals the plain path's.
 * Sums follow vec_dot_*_generic exactly: element i of a row goes to float
 * lane i % 8 (a separate multiply and add: the build passes
 * -ffp-contract=off), in element order, then the lanes are added pairwise
 * (l += l + 4, l += l + 2, l += l + 1). Row lengths are multiples of the
 * chunk, so there is no tail, and the results are bit-identical to the plain
 * generic matmul.
 */
#include <string.h>

#include "core/fp16.h"
#include "cpu/kernels/gemm.h"
#include "cpu/repack.h"

#define LANES 8
#define MAX_CE LM_REPACK_BFK /* the longest chunk */

/* One chunk of a group's 8 rows (ce elements each) -> w[r * ce + i], floats
 * in element order. */
typedef void (*chunk_decoder)(const void *x, float *w);

static void dec_f16(const void *x, float *w)
{
    const lm_fp16 *h = x;
    for (int i = 0; i < LM_REPACK_ROWS * LM_REPACK_FK; i++)
        w[i] = lm_fp16_to_fp32(h[i]);
}

static void dec_bf16(const void *x, float *w)
{
    const lm_bf16 *h = x;
    for (int r = 0; r < LM_REPACK_ROWS; r++, h += LM_REPACK_BFK, w += LM_REPACK_BFK) {
        for (int t = 0; t < LM_REPACK_BFK / 2; t++) {
            w[t] = lm_bf16_to_fp32(h[2 * t]);
            w[LM_REPACK_BFK / 2 + t] = lm_bf16_to_fp32(h[2 * t + 1]);
        }
    }
}

static void dec_f32(const void *x, float *w) { memcpy(w, x, LM_REPACK_ROWS * LM_REPACK_FK * sizeof(float)); }

/* One activation row segment -> floats. */
typedef void (*act_decoder)(const void *y, int64_t i0, int n, float *a);

static void act_f16(const void *y, int64_t i0, int n, float *a)
{
    for (int i = 0; i < n; i++)
        a[i] = lm_fp16_to_fp32(((const lm_fp16 *)y)[i0 + i]);
}

static void act_f32(const void *y, int64_t i0, int n, float *a) { memcpy(a, (const float *)y + i0, (size_t)n * sizeof(float)); }

static float reduce_lanes(float acc[LANES])
{
    for (int w = LANES / 2; w > 0; w /= 2)
        for (int l = 0; l < w; l++)
            acc[l] += acc[l + w];
    return acc[0];
}

struct layout {
    int ce;      /* elements per row and chunk */
    size_t es;   /* bytes per weight */
    chunk_decoder dec;
    act_decoder act;
};

/* The group at x against nc activation rows. */
static void gemm_float(const struct layout *L, int64_t k, float *s, size_t ldc, const char *x, const char *y,
                       size_t by, int nc)
{
    float acc[LM_GEMM_MAX_NC][LM_REPACK_ROWS][LANES];
    float w[LM_REPACK_ROWS * MAX_CE], a[MAX_CE];
    const size_t chunk = LM_REPACK_ROWS * (size_t)L->ce * L->es;
    memset(acc, 0, sizeof acc);
    for (int64_t j = 0; j < k / L->ce; j++) {
        L->dec(x + (size_t)j * chunk, w);
        for (int c = 0; c < nc; c++) {
            L->act(y + (size_t)c * by, j * L->ce, L->ce, a);
            for (int r = 0; r < LM_REPACK_ROWS; r++)
                for (int i = 0; i < L->ce; i++)
                    acc[c][r][i % LANES] += w[r * L->ce + i] * a[i];
        }
    }
    for (int c = 0; c < nc; c++)
        for (int r = 0; r < LM_REPACK_ROWS; r++)
            s[(size_t)c * ldc + (size_t)r] = reduce_lanes(acc[c][r]);
}

static const struct layout f16_layout = {LM_REPACK_FK, sizeof(lm_fp16), dec_f16, act_f16};
static const struct layout bf16_layout = {LM_REPACK_BFK, sizeof(lm_bf16), dec_bf16, act_f32};
static const struct layout f32_layout = {LM_REPACK_FK, sizeof(float), dec_f32, act_f32};

/* Contract: kernels.h (y: F16 rows; ysum unused). */
void lm_gemm_f16x8_f16_generic(int64_t k, float *s, size_t ldc, const void *x, const void *y, size_t by,
                            const int16_t *ysum, int nc)
{
    (void)ysum;
    gemm_float(&f16_layout, k, s, ldc, x, y, by, nc);
}

/* Contract: kernels.h (y: F32 rows rounded through BF16; ysum unused). */
void lm_gemm_bf16x8_f32_generic(int64_t k, float *s, size_t ldc, const void *x, const void *y, size_t by,
                             const int16_t *ysum, int nc)
{
    (void)ysum;
    gemm_float(&bf16_layout, k, s, ldc, x, y, by, nc);
}

/* Contract: kernels.h (y: F32 rows; ysum unused). */
void lm_gemm_f32x8_f32_generic(int64_t k, float *s, size_t ldc, const void *x, const void *y, size_t by,
                            const int16_t *ysum, int nc)
{
    (void)ysum;
    gemm_float(&f32_layout, k, s, ldc, x, y, by, nc);
}

/* Contract: gemm.h. */
void lm_fp32_round_bf16_row_generic(const float *x, void *vy, int64_t n)
{
    float *y = vy;
    for (int64_t i = 0; i < n; i++)
        y[i] = lm_bf16_to_fp32(lm_fp32_to_bf16(x[i]));
}
