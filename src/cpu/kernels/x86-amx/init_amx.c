/* init_amx.c - fills the AMX slots of a kernel table (called by kernels.c only
 * when the AVX-512 level is available, cpuid reports AMX-TILE, AMX-BF16 and
 * AVX512_BF16, XCR0 has the tile state and Linux granted it to the process).
 * The table starts as a copy of the AVX-512 table; this level only adds the
 * panel GEMM of F16 and BF16 weights (prompt processing); token generation
 * and small batches keep the AVX-512 gemm_x8 kernels.
 */
#include "cpu/kernels/kernels.h"

/* Activation counts below these use gemm_x8. bench_gemm K=2048, 256 rows, one
 * thread, GMAC/s gemm_x8 (avx512) / panel: BF16 N=16 70 / 124, N=32 77 / 216;
 * F16 (3 TDPs and a costlier weight split per call) N=16 75 / 49, N=24 70 /
 * 60, N=32 77 / 81, N=48 72 / 103, N=64 77 / 127. */
#define PANEL_MIN_N_BF16 16
#define PANEL_MIN_N_F16 32

/* Overrides the AMX slots of k (a copy of the AVX-512 table). */
void lm_cpu_kernels_init_amx(struct lm_cpu_kernels *k)
{
    struct lm_cpu_type_kernels *bf = &k->type[LM_TYPE_BF16], *h = &k->type[LM_TYPE_F16];
    bf->gemm_panel = gemm_panel_bf16x8_amx;
    bf->panel_vt = LM_TYPE_BF16;
    bf->panel_from_float = panel_from_float_bf16_amx;
    bf->panel_scratch = gemm_panel_bf16x8_scratch_amx;
    bf->panel_min_n = PANEL_MIN_N_BF16;
    h->gemm_panel = gemm_panel_f16x8_amx;
    h->panel_vt = LM_TYPE_F32;
    h->panel_from_float = panel_from_float_f16_amx;
    h->panel_scratch = gemm_panel_f16x8_scratch_amx;
    h->panel_min_n = PANEL_MIN_N_F16;
}
