/* gemm.h - the GEMM kernels over repacked weights (slot gemm_x8 of the kernel
 * table; contract in kernels.h, layouts in cpu/repack.h), per ISA. */
#ifndef LM_CPU_GEMM_H
#define LM_CPU_GEMM_H

#include "cpu/kernels/kernels.h"

void gemm_q4_0x8_q8_0_avx2(int64_t k, float *s, size_t ldc, const void *x, const void *y, size_t by,
                           const int16_t *ysum, int nc);
void gemm_q8_0x8_q8_0_avx2(int64_t k, float *s, size_t ldc, const void *x, const void *y, size_t by,
                           const int16_t *ysum, int nc);

/* Fill the gemm_x8 slots of an AVX2-level table (kernels/x86-avx2/gemm_avx2.c). */
void lm_cpu_gemm_init_avx2(struct lm_cpu_kernels *k);

#endif
