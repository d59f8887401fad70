/* init_avx2.c - the AVX2 slots of a kernel table (applied by kernels.c only
 * when cpuid reports AVX2+FMA+F16C with OS YMM support): one const override
 * table over the generic table; slots left NULL here keep their generic
 * kernels (lm_cpu_kernels_apply, kernels.h, says how each slot is applied). */
#include "cpu/kernels/gemm.h"
#include "cpu/kernels/kernels.h"

static const struct lm_cpu_kernels avx2_over = {
    .exp_sum = lm_exp_sum_avx2,
    .scale_max = lm_scale_max_avx2,
    .gelu = lm_gelu_avx2,
    .silu = lm_silu_avx2,
    .type = {
        [LM_TYPE_F32] = {.vec_dot = lm_vec_dot_f32_avx2,
                         .vec_dot_cols = lm_vec_dot_cols_f32_avx2,
                         .gemm_x8 = lm_gemm_f32x8_f32_avx2,
                         .gemm_vt = LM_TYPE_F32},
        [LM_TYPE_F16] = {.vec_dot = lm_vec_dot_f16_avx2,
                         .vec_dot_rows = lm_vec_dot_rows_f16_avx2,
                         .from_float = lm_fp32_to_fp16_row_avx2,
                         .to_float = lm_fp16_to_fp32_row_avx2,
                         .gemm_x8 = lm_gemm_f16x8_f16_avx2,
                         .gemm_vt = LM_TYPE_F16},
        [LM_TYPE_BF16] = {.vec_dot = lm_vec_dot_bf16_avx2,
                          .from_float = lm_fp32_to_bf16_row_avx2,
                          .to_float = lm_bf16_to_fp32_row_avx2,
                          .gemm_x8 = lm_gemm_bf16x8_f32_avx2,
                          .gemm_vt = LM_TYPE_F32,
                          .gemm_from_float = lm_fp32_round_bf16_row_avx2},
        [LM_TYPE_Q4_0] = {.vec_dot = lm_vec_dot_q4_0_q8_0_avx2,
                          .to_float = lm_dequantize_row_q4_0_avx2,
                          .gemm_x8 = lm_gemm_q4_0x8_q8_0_avx2,
                          .gemm_vt = LM_TYPE_Q8_0,
                          .gemm_sums = true,
                          .gemv_x8 = lm_gemv_q4_0x8_q8_0_avx2},
        [LM_TYPE_Q4_1] = {.vec_dot = lm_vec_dot_q4_1_q8_1_avx2},
        [LM_TYPE_Q5_0] = {.vec_dot = lm_vec_dot_q5_0_q8_0_avx2},
        [LM_TYPE_Q5_1] = {.vec_dot = lm_vec_dot_q5_1_q8_1_avx2},
        [LM_TYPE_Q8_0] = {.vec_dot = lm_vec_dot_q8_0_q8_0_avx2,
                          .vec_mad_rows = lm_vec_mad_rows_q8_0_avx2, /* a Q8_0 V cache's P.V */
                          .from_float = lm_quantize_row_q8_0_avx2,
                          .to_float = lm_dequantize_row_q8_0_avx2,
                          .gemm_x8 = lm_gemm_q8_0x8_q8_0_avx2,
                          .gemm_vt = LM_TYPE_Q8_0,
                          .gemv_x8 = lm_gemv_q8_0x8_q8_0_avx2},
        [LM_TYPE_Q8_1] = {.from_float = lm_quantize_row_q8_1_avx2},
        [LM_TYPE_Q8_K] = {.from_float = lm_quantize_row_q8_K_avx2},
        [LM_TYPE_Q2_K] = {.vec_dot = lm_vec_dot_q2_K_q8_K_avx2,
                          .gemm_x8 = lm_gemm_q2_Kx8_q8_K_avx2,
                          .gemm_vt = LM_TYPE_Q8_K},
        [LM_TYPE_Q3_K] = {.vec_dot = lm_vec_dot_q3_K_q8_K_avx2,
                          .gemm_x8 = lm_gemm_q3_Kx8_q8_K_avx2,
                          .gemm_vt = LM_TYPE_Q8_K},
        [LM_TYPE_Q4_K] = {.vec_dot = lm_vec_dot_q4_K_q8_K_avx2,
                          .gemm_x8 = lm_gemm_q4_Kx8_q8_K_avx2,
                          .gemm_vt = LM_TYPE_Q8_K},
        [LM_TYPE_Q5_K] = {.vec_dot = lm_vec_dot_q5_K_q8_K_avx2,
                          .gemm_x8 = lm_gemm_q5_Kx8_q8_K_avx2,
                          .gemm_vt = LM_TYPE_Q8_K},
        [LM_TYPE_Q6_K] = {.vec_dot = lm_vec_dot_q6_K_q8_K_avx2,
                          .gemm_x8 = lm_gemm_q6_Kx8_q8_K_avx2,
                          .gemm_vt = LM_TYPE_Q8_K},
        [LM_TYPE_IQ2_XXS] = {.vec_dot = lm_vec_dot_iq2_xxs_q8_K_avx2,
                             .vec_dot_cols = lm_vec_dot_cols_iq2_xxs_q8_K_avx2},
        [LM_TYPE_IQ2_XS] = {.vec_dot = lm_vec_dot_iq2_xs_q8_K_avx2, .vec_dot_cols = lm_vec_dot_cols_iq2_xs_q8_K_avx2},
    }};

/* Overrides the AVX2 slots of k (a copy of the generic table, k->isa set). */
void lm_cpu_kernels_init_avx2(struct lm_cpu_kernels *k) { lm_cpu_kernels_apply(k, &avx2_over); }
