/* gemm_float_avx512.c - AVX-512 GEMM over the f16x8, bf16x8 and f32x8 layouts
 * (kernels.h lm_gemm_fn, cpu/repack.h). */
#include "cpu/kernels/gemm.h"

/* Fill the float GEMM slots of an AVX-512-level table. */
void lm_cpu_gemm_init_avx512_float(struct lm_cpu_kernels *k) { (void)k; }
