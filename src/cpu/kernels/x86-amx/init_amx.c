/* init_amx.c - the AMX slots of a kernel table (applied by kernels.c only
 * when the AVX-512 level is available, cpuid reports AMX-TILE, AMX-BF16 and
 * AVX512_BF16, XCR0 has the tile state and Linux granted it to the process).
 * One const override table over a copy of the AVX-512 table
 * (lm_cpu_kernels_apply, kernels.h); this level only adds the panel GEMM of
 * F16, BF16 and quantized weights (prompt processing); token generation and
 * small batches keep the AVX-512 gemm_x8 kernels.
 */
#include "cpu/kernels/gemm.h"
#include "cpu/kernels/kernels.h"

/* Activation counts below these use gemm_x8. bench_gemm K=2048, 256 rows, one
 * thread, GMAC/s gemm_x8 (avx512) / panel: BF16 N=16 70 / 124, N=32 77 / 216;
 * F16 (3 TDPs and a costlier weight split per call) N=16 75 / 49, N=24 70 /
 * 60, N=32 77 / 81, N=48 72 / 103, N=64 77 / 127. */
#define PANEL_MIN_N_BF16 16
#define PANEL_MIN_N_F16 32
/* Quantized weights: the AVX-512 gemm_x8 is VNNI int8 (150-220 GMAC/s) and
 * the panel pays a per-call unpack + decode + BF16 rounding of its weights,
 * so it wins only from a few dozen columns on. Same bench, gemm_x8 / panel,
 * K=2048 (K=5632): Q4_0 N=48 164 / 175 (162 / 166), N=64 169 / 230 (169 /
 * 206), N=512 161 / 503; Q8_0 N=48 157 / 158 (156 / 145), N=64 161 / 208 (160
 * / 178); Q4_K N=64 218 / 187 (217 / 181), N=96 218 / 252 (223 / 225), N=128
 * 219 / 299; Q5_K N=64 190 / 192 (193 / 174), N=96 189 / 252 (148 / 181);
 * Q6_K (its unpack is slow) N=128 148 / 131, N=160 148 / 151, N=192 152 /
 * 183. Q2_K and Q3_K (slower unpacks) are not installed. */
#define PANEL_MIN_N_Q4_0 64
#define PANEL_MIN_N_Q8_0 64
#define PANEL_MIN_N_Q4_K 128
#define PANEL_MIN_N_Q5_K 96
#define PANEL_MIN_N_Q6_K 160

static size_t row_bf16(int64_t k) { return lm_row_size(LM_TYPE_BF16, k); }
static size_t row_f32(int64_t k) { return lm_row_size(LM_TYPE_F32, k); }

/* The quantized types' panel_from_float is the level's BF16 encoder, set at
 * init (left NULL here). */
static const struct lm_cpu_kernels amx_over = {
    .type = {
        [LM_TYPE_BF16] = {.gemm_panel = lm_gemm_panel_bf16x8_amx,
                          .panel_row_size = row_bf16,
                          .panel_from_float = lm_fp32_to_bf16_pairs_row_avx512,
                          .panel_scratch = lm_gemm_panel_bf16x8_scratch_amx,
                          .panel_min_n = PANEL_MIN_N_BF16},
        [LM_TYPE_F16] = {.gemm_panel = lm_gemm_panel_f16x8_amx,
                         .panel_row_size = row_f32,
                         .panel_from_float = lm_panel_from_float_f16_amx,
                         .panel_scratch = lm_gemm_panel_f16x8_scratch_amx,
                         .panel_min_n = PANEL_MIN_N_F16},
        [LM_TYPE_Q4_0] = {.gemm_panel = lm_gemm_panel_q4_0x8_amx,
                          .panel_row_size = row_bf16,
                          .panel_scratch = lm_gemm_panel_q4_0x8_scratch_amx,
                          .panel_min_n = PANEL_MIN_N_Q4_0},
        [LM_TYPE_Q8_0] = {.gemm_panel = lm_gemm_panel_q8_0x8_amx,
                          .panel_row_size = row_bf16,
                          .panel_scratch = lm_gemm_panel_q8_0x8_scratch_amx,
                          .panel_min_n = PANEL_MIN_N_Q8_0},
        [LM_TYPE_Q4_K] = {.gemm_panel = lm_gemm_panel_q4_Kx8_amx,
                          .panel_row_size = row_bf16,
                          .panel_scratch = lm_gemm_panel_q4_Kx8_scratch_amx,
                          .panel_min_n = PANEL_MIN_N_Q4_K},
        [LM_TYPE_Q5_K] = {.gemm_panel = lm_gemm_panel_q5_Kx8_amx,
                          .panel_row_size = row_bf16,
                          .panel_scratch = lm_gemm_panel_q5_Kx8_scratch_amx,
                          .panel_min_n = PANEL_MIN_N_Q5_K},
        [LM_TYPE_Q6_K] = {.gemm_panel = lm_gemm_panel_q6_Kx8_amx,
                          .panel_row_size = row_bf16,
                          .panel_scratch = lm_gemm_panel_q6_Kx8_scratch_amx,
                          .panel_min_n = PANEL_MIN_N_Q6_K},
    }};

/* Overrides the AMX slots of k (a copy of the AVX-512 table, k->isa set). */
void lm_cpu_kernels_init_amx(struct lm_cpu_kernels *k)
{
    static const enum lm_type quant[] = {LM_TYPE_Q4_0, LM_TYPE_Q8_0, LM_TYPE_Q4_K, LM_TYPE_Q5_K, LM_TYPE_Q6_K};
    lm_cpu_kernels_apply(k, &amx_over);
    for (size_t i = 0; i < sizeof quant / sizeof quant[0]; i++)
        k->type[quant[i]].panel_from_float = k->type[LM_TYPE_BF16].from_float;
}
