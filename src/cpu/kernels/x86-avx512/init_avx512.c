/* init_avx512.c - fills the AVX-512 slots of a kernel table (called by
 * kernels.c only when cpuid reports AVX-512 F/BW/VL/DQ and VNNI with OS
 * support for the ZMM and opmask state). The table starts as a copy of the
 * AVX2 table: slots not set here keep their AVX2 kernels (the activation
 * encoders among them: ggml's x86 Q8_0/Q8_1 arithmetic). Kernels that need
 * AVX512_BF16 (vdpbf16ps) are installed only when cpuid reports it. */
#include "cpu/kernels/gemm.h"
#include "cpu/kernels/kernels.h"

/* A new vec_dot drops any vec_dot_rows of a lower level (it must match the
 * vec_dot bit for bit); set one after this where this level has it. */
static void set_dot(struct lm_cpu_kernels *k, enum lm_type t, lm_vec_dot_fn fn)
{
    k->type[t].vec_dot = fn;
    k->type[t].vec_dot_rows = NULL;
    k->vec_dot_isa[t] = LM_ISA_AVX512;
}

/* Overrides the AVX-512 slots of k (a copy of the AVX2 table). */
void lm_cpu_kernels_init_avx512(struct lm_cpu_kernels *k)
{
    (void)set_dot;
    k->exp_sum = exp_sum_avx512;
    k->exp_sum_isa = LM_ISA_AVX512;
    lm_cpu_gemm_init_avx512_int8(k);
    lm_cpu_gemm_init_avx512_float(k);
}
