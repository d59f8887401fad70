/* gemm.h - the GEMM kernels over repacked weights (slot gemm_x8 of the kernel
 * table; contract in kernels.h, layouts in cpu/repack.h), per ISA. */
#ifndef LM_CPU_GEMM_H
#define LM_CPU_GEMM_H

#include "cpu/kernels/kernels.h"

void lm_gemm_q4_0x8_q8_0_avx2(int64_t k, float *s, size_t ldc, const void *x, const void *y, size_t by,
                           const int16_t *ysum, int nc);
void lm_gemm_q8_0x8_q8_0_avx2(int64_t k, float *s, size_t ldc, const void *x, const void *y, size_t by,
                           const int16_t *ysum, int nc);
/* gemv_x8 (one column, 4 / 8 groups streamed at once): gemm_x8 above with nc == 1, bit for bit. */
void lm_gemv_q4_0x8_q8_0_avx2(int64_t k, int64_t n_groups, size_t group_bytes, float *s, const void *x, const void *y,
                           const int16_t *ysum);
void lm_gemv_q8_0x8_q8_0_avx2(int64_t k, int64_t n_groups, size_t group_bytes, float *s, const void *x, const void *y,
                           const int16_t *ysum);

/* K-quant groups (q2_Kx8 .. q6_Kx8) x Q8_K activations: generic
 * (kernels/generic/gemm_kquant_generic.c, bit-identical to the generic
 * vec_dot) and AVX2 (kernels/x86-avx2/gemm_kquant_avx2.c). */
void lm_gemm_q2_Kx8_q8_K_generic(int64_t k, float *s, size_t ldc, const void *x, const void *y, size_t by,
                               const int16_t *ysum, int nc);
void lm_gemm_q3_Kx8_q8_K_generic(int64_t k, float *s, size_t ldc, const void *x, const void *y, size_t by,
                               const int16_t *ysum, int nc);
void lm_gemm_q4_Kx8_q8_K_generic(int64_t k, float *s, size_t ldc, const void *x, const void *y, size_t by,
                               const int16_t *ysum, int nc);
void lm_gemm_q5_Kx8_q8_K_generic(int64_t k, float *s, size_t ldc, const void *x, const void *y, size_t by,
                               const int16_t *ysum, int nc);
void lm_gemm_q6_Kx8_q8_K_generic(int64_t k, float *s, size_t ldc, const void *x, const void *y, size_t by,
                               const int16_t *ysum, int nc);
void lm_gemm_q2_Kx8_q8_K_avx2(int64_t k, float *s, size_t ldc, const void *x, const void *y, size_t by,
                           const int16_t *ysum, int nc);
void lm_gemm_q3_Kx8_q8_K_avx2(int64_t k, float *s, size_t ldc, const void *x, const void *y, size_t by,
                           const int16_t *ysum, int nc);
void lm_gemm_q4_Kx8_q8_K_avx2(int64_t k, float *s, size_t ldc, const void *x, const void *y, size_t by,
                           const int16_t *ysum, int nc);
void lm_gemm_q5_Kx8_q8_K_avx2(int64_t k, float *s, size_t ldc, const void *x, const void *y, size_t by,
                           const int16_t *ysum, int nc);
void lm_gemm_q6_Kx8_q8_K_avx2(int64_t k, float *s, size_t ldc, const void *x, const void *y, size_t by,
                           const int16_t *ysum, int nc);

/* Float groups (f16x8, bf16x8, f32x8); ysum is unused. Activation rows: F16
 * for F16 weights (the F16 encoder of the table: gemm_vt F16, the plain
 * path's rows); for BF16 weights F32 rows rounded through BF16 by the
 * encoders below (gemm_vt F32); F32 rows for F32 weights. Generic
 * (kernels/generic/gemm_float_generic.c): bit-identical to the generic
 * vec_dot; AVX2 (kernels/x86-avx2/gemm_float_avx2.c): FMA, 8 lanes. */
void lm_gemm_f16x8_f16_generic(int64_t k, float *s, size_t ldc, const void *x, const void *y, size_t by,
                            const int16_t *ysum, int nc);
void lm_gemm_bf16x8_f32_generic(int64_t k, float *s, size_t ldc, const void *x, const void *y, size_t by,
                             const int16_t *ysum, int nc);
void lm_gemm_f32x8_f32_generic(int64_t k, float *s, size_t ldc, const void *x, const void *y, size_t by,
                            const int16_t *ysum, int nc);
void lm_gemm_f16x8_f16_avx2(int64_t k, float *s, size_t ldc, const void *x, const void *y, size_t by,
                         const int16_t *ysum, int nc);
void lm_gemm_bf16x8_f32_avx2(int64_t k, float *s, size_t ldc, const void *x, const void *y, size_t by,
                          const int16_t *ysum, int nc);
void lm_gemm_f32x8_f32_avx2(int64_t k, float *s, size_t ldc, const void *x, const void *y, size_t by,
                         const int16_t *ysum, int nc);
/* The BF16 weights' activation encoder (gemm_from_float): n floats (any
 * n >= 0) to n floats, each rounded to nearest even through BF16 (NaN made
 * quiet, as lm_fp32_to_bf16) and widened back. Both versions give the same
 * bits for every input. */
void lm_fp32_round_bf16_row_generic(const float *x, void *y, int64_t n);
void lm_fp32_round_bf16_row_avx2(const float *x, void *y, int64_t n);

/* ---- AVX-512 (kernels/x86-avx512/; call only when
 * lm_cpu_kernels_for(LM_ISA_AVX512) is non-NULL) ---- */

/* Integer layouts, VNNI (gemm_avx512.c, gemm_kquant_avx512.c): 512-bit
 * vpdpbusd over two interleaved chunks per register, all columns of the call
 * in pairs. Bit-identical to the AVX2 kernels (same integer sums, same float
 * expression and order). Q4_0 and Q8_0 read ysum (the table sets gemm_sums
 * for both); the K-quants ignore it. */
void lm_gemm_q4_0x8_q8_0_avx512(int64_t k, float *s, size_t ldc, const void *x, const void *y, size_t by,
                             const int16_t *ysum, int nc);
void lm_gemm_q8_0x8_q8_0_avx512(int64_t k, float *s, size_t ldc, const void *x, const void *y, size_t by,
                             const int16_t *ysum, int nc);
/* gemv_x8 (one column, 8 groups (Q4_0/Q8_0) or 4 (K-quants) streamed at once): gemm_x8 with nc == 1, bit for bit. */
void lm_gemv_q4_0x8_q8_0_avx512(int64_t k, int64_t n_groups, size_t group_bytes, float *s, const void *x, const void *y,
                             const int16_t *ysum);
void lm_gemv_q8_0x8_q8_0_avx512(int64_t k, int64_t n_groups, size_t group_bytes, float *s, const void *x, const void *y,
                             const int16_t *ysum);
void lm_gemv_q2_Kx8_q8_K_avx512(int64_t k, int64_t n_groups, size_t group_bytes, float *s, const void *x, const void *y,
                             const int16_t *ysum);
void lm_gemv_q3_Kx8_q8_K_avx512(int64_t k, int64_t n_groups, size_t group_bytes, float *s, const void *x, const void *y,
                             const int16_t *ysum);
void lm_gemv_q4_Kx8_q8_K_avx512(int64_t k, int64_t n_groups, size_t group_bytes, float *s, const void *x, const void *y,
                             const int16_t *ysum);
void lm_gemv_q5_Kx8_q8_K_avx512(int64_t k, int64_t n_groups, size_t group_bytes, float *s, const void *x, const void *y,
                             const int16_t *ysum);
void lm_gemv_q6_Kx8_q8_K_avx512(int64_t k, int64_t n_groups, size_t group_bytes, float *s, const void *x, const void *y,
                             const int16_t *ysum);
void lm_gemm_q2_Kx8_q8_K_avx512(int64_t k, float *s, size_t ldc, const void *x, const void *y, size_t by,
                             const int16_t *ysum, int nc);
void lm_gemm_q3_Kx8_q8_K_avx512(int64_t k, float *s, size_t ldc, const void *x, const void *y, size_t by,
                             const int16_t *ysum, int nc);
void lm_gemm_q4_Kx8_q8_K_avx512(int64_t k, float *s, size_t ldc, const void *x, const void *y, size_t by,
                             const int16_t *ysum, int nc);
void lm_gemm_q5_Kx8_q8_K_avx512(int64_t k, float *s, size_t ldc, const void *x, const void *y, size_t by,
                             const int16_t *ysum, int nc);
void lm_gemm_q6_Kx8_q8_K_avx512(int64_t k, float *s, size_t ldc, const void *x, const void *y, size_t by,
                             const int16_t *ysum, int nc);

/* Float layouts (gemm_float_avx512.c): tiles of 4 row pairs x 1..6 columns.
 * All read F32 activation rows (gemm_vt F32): for F16 weights rounded
 * through F16 by lm_fp32_round_fp16_row_avx512 (the values of the F16 rows of
 * the other levels), for BF16 weights rounded through BF16 (the AVX2
 * encoder). The F16 and BF16 (shift/FMA) kernels give the generic kernels'
 * bits; F32 differs by FMA only. lm_gemm_bf16x8_f32_avx512bf16 (vdpbf16ps:
 * call only when lm_cpu_features()->avx512bf16; it rounds to nearest even
 * and flushes denormal inputs and outputs whatever MXCSR says) reads pair
 * rows instead (lm_fp32_to_bf16_pairs_row_avx512, gemm_vt BF16); the table
 * takes it on AMD CPUs (faster on Zen 4), lm_gemm_bf16x8_f32_avx512 elsewhere
 * (Sapphire Rapids: vdpbf16ps is slow). Both are tested by name. */
/* gemv_x8 of the float layouts (up to 4 groups streamed at once): gemm_x8 with nc == 1, bit for bit. */
void lm_gemv_f16x8_f32_avx512(int64_t k, int64_t n_groups, size_t group_bytes, float *s, const void *x, const void *y,
                           const int16_t *ysum);
void lm_gemv_bf16x8_f32_avx512bf16(int64_t k, int64_t n_groups, size_t group_bytes, float *s, const void *x,
                                const void *y, const int16_t *ysum);
void lm_gemv_bf16x8_f32_avx512(int64_t k, int64_t n_groups, size_t group_bytes, float *s, const void *x, const void *y,
                            const int16_t *ysum);
void lm_gemv_f32x8_f32_avx512(int64_t k, int64_t n_groups, size_t group_bytes, float *s, const void *x, const void *y,
                           const int16_t *ysum);
void lm_gemm_f16x8_f32_avx512(int64_t k, float *s, size_t ldc, const void *x, const void *y, size_t by,
                           const int16_t *ysum, int nc);
void lm_gemm_bf16x8_f32_avx512bf16(int64_t k, float *s, size_t ldc, const void *x, const void *y, size_t by,
                                const int16_t *ysum, int nc);
void lm_gemm_bf16x8_f32_avx512(int64_t k, float *s, size_t ldc, const void *x, const void *y, size_t by,
                            const int16_t *ysum, int nc);
void lm_gemm_f32x8_f32_avx512(int64_t k, float *s, size_t ldc, const void *x, const void *y, size_t by,
                           const int16_t *ysum, int nc);
/* The activation encoder of the dpbf16 kernel and of the AMX BF16 panel:
 * n floats (n a multiple of 16) to n BF16 words, each lm_fp32_to_bf16(x), in
 * the pair order of the bf16x8 chunks: within each 16 elements, words 2t and
 * 2t + 1 are elements t and 8 + t (t = 0..7). */
void lm_fp32_to_bf16_pairs_row_avx512(const float *x, void *y, int64_t n);
/* The word of a pair row that holds element i. */
static inline int64_t lm_bf16_pair_word(int64_t i)
{
    const int64_t t = i % 16;
    return i - t + (t < 8 ? 2 * t : 2 * (t - 8) + 1);
}
/* The F16 weights' activation encoder (gemm_from_float): n floats (any
 * n >= 0) to n floats, each lm_fp16_to_fp32(lm_fp32_to_fp16(x)) (RNE, NaN
 * made quiet): the same bits for every input. */
void lm_fp32_round_fp16_row_avx512(const float *x, void *y, int64_t n);

#endif
