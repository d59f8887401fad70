/* init_avx2.c - fills the AVX2 slots of a kernel table (called by kernels.c
 * only when cpuid reports AVX2+FMA+F16C with OS YMM support). */
#include "cpu/kernels/kernels.h"

static void set_dot(struct lm_cpu_kernels *k, enum lm_type t, lm_vec_dot_fn fn)
{
    k->type[t].vec_dot = fn;
    k->vec_dot_isa[t] = LM_ISA_AVX2;
}

/* Overrides the AVX2 slots of k (a copy of the generic table). */
void lm_cpu_kernels_init_avx2(struct lm_cpu_kernels *k)
{
    set_dot(k, LM_TYPE_F32, vec_dot_f32_avx2);
    set_dot(k, LM_TYPE_F16, vec_dot_f16_avx2);
    set_dot(k, LM_TYPE_Q8_0, vec_dot_q8_0_q8_0_avx2);
    set_dot(k, LM_TYPE_Q4_0, vec_dot_q4_0_q8_0_avx2);

    k->type[LM_TYPE_Q8_0].from_float = quantize_row_q8_0_avx2;
    k->from_float_isa[LM_TYPE_Q8_0] = LM_ISA_AVX2;
    k->type[LM_TYPE_F16].from_float = fp32_to_fp16_row_avx2;
    k->from_float_isa[LM_TYPE_F16] = LM_ISA_AVX2;
    k->type[LM_TYPE_F16].to_float = fp16_to_fp32_row_avx2;
    k->to_float_isa[LM_TYPE_F16] = LM_ISA_AVX2;
}
