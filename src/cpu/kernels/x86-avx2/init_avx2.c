/* init_avx2.c - fills the AVX2 slots of a kernel table (called by kernels.c
 * only when cpuid reports AVX2+FMA+F16C with OS YMM support). Slots not set
 * here keep their generic kernels. */
#include "cpu/kernels/kernels.h"

/* Overrides the AVX2 slots of k (a copy of the generic table). */
void lm_cpu_kernels_init_avx2(struct lm_cpu_kernels *k)
{
    lm_cpu_set_dot(k, LM_TYPE_F32, lm_vec_dot_f32_avx2);
    k->type[LM_TYPE_F32].vec_dot_cols = lm_vec_dot_cols_f32_avx2;
    lm_cpu_set_dot(k, LM_TYPE_F16, lm_vec_dot_f16_avx2);
    k->type[LM_TYPE_F16].vec_dot_rows = lm_vec_dot_rows_f16_avx2;
    lm_cpu_set_dot(k, LM_TYPE_BF16, lm_vec_dot_bf16_avx2);
    lm_cpu_set_dot(k, LM_TYPE_Q4_0, lm_vec_dot_q4_0_q8_0_avx2);
    lm_cpu_set_dot(k, LM_TYPE_Q4_1, lm_vec_dot_q4_1_q8_1_avx2);
    lm_cpu_set_dot(k, LM_TYPE_Q5_0, lm_vec_dot_q5_0_q8_0_avx2);
    lm_cpu_set_dot(k, LM_TYPE_Q5_1, lm_vec_dot_q5_1_q8_1_avx2);
    lm_cpu_set_dot(k, LM_TYPE_Q8_0, lm_vec_dot_q8_0_q8_0_avx2);
    k->type[LM_TYPE_Q8_0].vec_mad_rows = lm_vec_mad_rows_q8_0_avx2; /* a Q8_0 V cache's P.V */
    lm_cpu_set_dot(k, LM_TYPE_Q2_K, lm_vec_dot_q2_K_q8_K_avx2);
    lm_cpu_set_dot(k, LM_TYPE_Q3_K, lm_vec_dot_q3_K_q8_K_avx2);
    lm_cpu_set_dot(k, LM_TYPE_Q4_K, lm_vec_dot_q4_K_q8_K_avx2);
    lm_cpu_set_dot(k, LM_TYPE_Q5_K, lm_vec_dot_q5_K_q8_K_avx2);
    lm_cpu_set_dot(k, LM_TYPE_Q6_K, lm_vec_dot_q6_K_q8_K_avx2);
    lm_cpu_set_dot(k, LM_TYPE_IQ2_XXS, lm_vec_dot_iq2_xxs_q8_K_avx2);
    k->type[LM_TYPE_IQ2_XXS].vec_dot_cols = lm_vec_dot_cols_iq2_xxs_q8_K_avx2;
    lm_cpu_set_dot(k, LM_TYPE_IQ2_XS, lm_vec_dot_iq2_xs_q8_K_avx2);
    k->type[LM_TYPE_IQ2_XS].vec_dot_cols = lm_vec_dot_cols_iq2_xs_q8_K_avx2;

    /* activation encoders (dot types) and row conversions */
    lm_cpu_set_from(k, LM_TYPE_Q8_0, lm_quantize_row_q8_0_avx2);
    lm_cpu_set_from(k, LM_TYPE_Q8_1, lm_quantize_row_q8_1_avx2);
    lm_cpu_set_from(k, LM_TYPE_Q8_K, lm_quantize_row_q8_K_avx2);
    lm_cpu_set_from(k, LM_TYPE_F16, lm_fp32_to_fp16_row_avx2);
    lm_cpu_set_from(k, LM_TYPE_BF16, lm_fp32_to_bf16_row_avx2);
    lm_cpu_set_to(k, LM_TYPE_F16, lm_fp16_to_fp32_row_avx2);
    lm_cpu_set_to(k, LM_TYPE_BF16, lm_bf16_to_fp32_row_avx2);
    lm_cpu_set_to(k, LM_TYPE_Q4_0, lm_dequantize_row_q4_0_avx2);
    lm_cpu_set_to(k, LM_TYPE_Q8_0, lm_dequantize_row_q8_0_avx2);
    k->exp_sum = lm_exp_sum_avx2;
    k->exp_sum_isa = k->isa;
    k->scale_max = lm_scale_max_avx2;
    k->gelu = lm_gelu_avx2;
    k->gelu_isa = k->isa;
    k->silu = lm_silu_avx2;
}
