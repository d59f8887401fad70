/* init_avx512.c - the AVX-512 slots of a kernel table (applied by kernels.c
 * only when cpuid reports AVX-512 F/BW/VL/DQ and VNNI with OS support for the
 * ZMM and opmask state): const override tables over a copy of the AVX2
 * table (lm_cpu_kernels_apply, kernels.h); slots left NULL keep their AVX2
 * kernels (the activation encoders among them: ggml's x86 Q8_0/Q8_1
 * arithmetic). The choices made at run time are explicit in
 * lm_cpu_kernels_init_avx512: kernels that need AVX512_BF16 (vdpbf16ps) only
 * when cpuid reports it, the IQ2 kernels off AMD, the BF16 GEMM per CPU, the
 * one-column kernels per CPU, and software prefetch. */
#include <stdlib.h>
#include <string.h>

#include "avx512_util.h"
#include "cpu/cpu.h"
#include "cpu/kernels/gemm.h"
#include "cpu/kernels/kernels.h"

bool lm_avx512_prefetch = true;       /* avx512_util.h */
int lm_avx512_kq_prefetch_one = 1024; /* avx512_util.h */

/* One-column products (token generation) per CPU; the other CPUs keep the
 * gemv_x8 of every type (several groups streamed at once, tuned on Sapphire
 * Rapids). Same bits every way: gemv_x8 is gemm_x8 with one column.
 *
 * Zen 5 (AMD family >= 26): the K-quants one group at a time through gemm_x8
 * (one stream, each super-block's lines prefetched in a burst 6 KiB ahead,
 * avx512_util.h): tinyllama Q4_K_M tg, bench_ab in-process A/B, 2 threads,
 * 2026-12-05, gemv_x8 -> gemm_x8 per group: +10.6 %, +11.2 %, +12.3 %,
 * +3.2 %, +24.5 % (Q4_K alone +10.9 %, Q6_K alone +10.6 %); 1 thread +6.9 %.
 *
 * Zen 4 (AMD family 25 at this level): every type one group at a time. The
 * several streams lose there: bench_gemm stream 512 2048 (one thread, GB/s,
 * gemv_x8 / gemm_x8 per group): Q4_0 21 / 27-29, Q8_0 22.5 / 29-30, F16 25 /
 * 26-28, BF16 22-24 / 28, Q4_K 13 / 26-30; tinyllama tg, 2 threads, bench_ab
 * in-process A/B: Q4_0 +14 %, Q8_0 +16 %, F16 +2 %, BF16 +20 %, Q4_K_M +49 %,
 * Q6_K +26 %. Q6_K since its sub-block layout (repack.h), against the AVX2
 * kernel group by group (the choice before it): +0.9 %, +4.4 %, +6.0 %
 * (Q4_K_M +0.7 %); its four streams: -32 %. */
static void one_column_choices(struct lm_cpu_kernels *k, const struct lm_cpu_features *cf)
{
    const bool zen4 = cf->amd && cf->family == 25, zen5 = cf->amd && cf->family >= 26;
    lm_avx512_kq_prefetch_one = zen5 ? 6144 : 1024;
    static const enum lm_type kquants[] = {LM_TYPE_Q2_K, LM_TYPE_Q3_K, LM_TYPE_Q4_K, LM_TYPE_Q5_K, LM_TYPE_Q6_K};
    for (size_t i = 0; zen5 && i < sizeof kquants / sizeof kquants[0]; i++)
        k->type[kquants[i]].gemv_x8 = NULL;
    for (int t = 0; zen4 && t < LM_TYPE_COUNT; t++)
        k->type[t].gemv_x8 = NULL;
}

/* Every AVX-512 CPU. vec_dot of every weight type but F32 (VNNI integer
 * parts); F32 keeps the AVX2 dot: with lm_vec_dot_f32_avx512 a
 * multi-sequence batch of stories260K (F32 weights) differs from decoding the
 * tokens one at a time by 6.3e-4 (api/test_batching; the generic table shows
 * the same difference, the AVX2 table none). Not yet explained; see
 * docs/kernels.md. Row decoders: bit-exact (dequantizing matmul paths,
 * GET_ROWS). GEMM: the integer layouts (gemm_avx512.c,
 * gemm_kquant_avx512.c; the tables of some CPUs leave gemv_x8 out:
 * one_column_choices) and the F16 / F32 float layouts (gemm_float_avx512.c).
 * Prompt batches of Q4_0/Q8_0: 16-row VNNI tiles, gemm_x8's bits
 * (gemm_panel_avx512.c; the AMX level replaces them for N >= 64). Q4_K
 * batches of 16+ columns: the same tiles over the gemm path's Q8_K rows
 * (Zen 5, bench_gemm 2048 256 N, GMAC/s gemm_x8 / panel, same runs: N = 512
 * 223 / 236-251, 16 245 / 256, 8 260 / 250-257, 2 182-202 / 154-159:
 * gemm_x8's 16-column groups unpack once for all columns); its
 * panel_from_float is set at init (the gemm path's encoder). */
static const struct lm_cpu_kernels avx512_over = {
    .exp_sum = lm_exp_sum_avx512,
    .scale_max = lm_scale_max_avx512,
    .gelu = lm_gelu_avx512,
    .silu = lm_silu_avx512,
    .type = {
        [LM_TYPE_F32] = {.gemm_x8 = lm_gemm_f32x8_f32_avx512,
                         .gemm_vt = LM_TYPE_F32,
                         .gemv_x8 = lm_gemv_f32x8_f32_avx512},
        [LM_TYPE_F16] = {.vec_dot = lm_vec_dot_f16_avx512,
                         .vec_dot_rows = lm_vec_dot_rows_f16_avx512,
                         .vec_dot_tile = lm_vec_dot_tile_f16_avx512,
                         .vec_dot_kt = lm_vec_dot_kt_f16_avx512,
                         .vec_dot_kt_pack = lm_kt_pack_f16,
                         .gemm_x8 = lm_gemm_f16x8_f32_avx512,
                         .gemm_vt = LM_TYPE_F32,
                         .gemm_from_float = lm_fp32_round_fp16_row_avx512,
                         .gemv_x8 = lm_gemv_f16x8_f32_avx512},
        [LM_TYPE_Q4_0] = {.vec_dot = lm_vec_dot_q4_0_q8_0_avx512,
                          .to_float = lm_dequantize_row_q4_0_avx512,
                          .gemm_x8 = lm_gemm_q4_0x8_q8_0_avx512,
                          .gemm_vt = LM_TYPE_Q8_0,
                          .gemm_sums = true,
                          .gemv_x8 = lm_gemv_q4_0x8_q8_0_avx512,
                          .gemm_panel = lm_gemm_panel_q4_0x8_avx512,
                          .panel_row_size = lm_panel_row_size_q8_avx512,
                          .panel_exact = true,
                          .panel_from_float = lm_panel_from_float_q4_0_avx512,
                          .panel_scratch = lm_gemm_panel_scratch_q8_avx512,
                          .panel_min_n = 2},
        [LM_TYPE_Q4_1] = {.vec_dot = lm_vec_dot_q4_1_q8_1_avx512, .to_float = lm_dequantize_row_q4_1_avx512},
        [LM_TYPE_Q5_0] = {.vec_dot = lm_vec_dot_q5_0_q8_0_avx512, .to_float = lm_dequantize_row_q5_0_avx512},
        [LM_TYPE_Q5_1] = {.vec_dot = lm_vec_dot_q5_1_q8_1_avx512, .to_float = lm_dequantize_row_q5_1_avx512},
        [LM_TYPE_Q8_0] = {.vec_dot = lm_vec_dot_q8_0_q8_0_avx512,
                          .vec_dot_rows = lm_vec_dot_rows_q8_0_avx512, /* a Q8_0 K cache's scores */
                          .vec_dot_tile = lm_vec_dot_tile_q8_0_avx512, /* the same, several queries at once */
                          .vec_dot_kt = lm_vec_dot_kt_q8_0_avx512,     /* and from a transposed K (prompts) */
                          .vec_dot_kt_pack = lm_kt_pack_q8_0,
                          .vec_mad_rows = lm_vec_mad_rows_q8_0_avx512, /* a Q8_0 V cache's P.V */
                          .to_float = lm_dequantize_row_q8_0_avx512,
                          .gemm_x8 = lm_gemm_q8_0x8_q8_0_avx512,
                          .gemm_vt = LM_TYPE_Q8_0,
                          .gemm_sums = true,
                          .gemv_x8 = lm_gemv_q8_0x8_q8_0_avx512,
                          .gemm_panel = lm_gemm_panel_q8_0x8_avx512,
                          .panel_row_size = lm_panel_row_size_q8_avx512,
                          .panel_exact = true,
                          .panel_from_float = lm_panel_from_float_q8_0_avx512,
                          .panel_scratch = lm_gemm_panel_scratch_q8_avx512,
                          .panel_min_n = 2},
        [LM_TYPE_Q2_K] = {.vec_dot = lm_vec_dot_q2_K_q8_K_avx512,
                          .to_float = lm_dequantize_row_q2_K_avx512,
                          .gemm_x8 = lm_gemm_q2_Kx8_q8_K_avx512,
                          .gemm_vt = LM_TYPE_Q8_K,
                          .gemv_x8 = lm_gemv_q2_Kx8_q8_K_avx512},
        [LM_TYPE_Q3_K] = {.vec_dot = lm_vec_dot_q3_K_q8_K_avx512,
                          .to_float = lm_dequantize_row_q3_K_avx512,
                          .gemm_x8 = lm_gemm_q3_Kx8_q8_K_avx512,
                          .gemm_vt = LM_TYPE_Q8_K,
                          .gemv_x8 = lm_gemv_q3_Kx8_q8_K_avx512},
        [LM_TYPE_Q4_K] = {.vec_dot = lm_vec_dot_q4_K_q8_K_avx512,
                          .to_float = lm_dequantize_row_q4_K_avx512,
                          .gemm_x8 = lm_gemm_q4_Kx8_q8_K_avx512,
                          .gemm_vt = LM_TYPE_Q8_K,
                          .gemv_x8 = lm_gemv_q4_Kx8_q8_K_avx512,
                          .gemm_panel = lm_gemm_panel_q4_Kx8_avx512,
                          .panel_row_size = lm_panel_row_size_q8_K_avx512,
                          .panel_exact = true,
                          .panel_scratch = lm_gemm_panel_scratch_q8_avx512,
                          .panel_min_n = 16},
        [LM_TYPE_Q5_K] = {.vec_dot = lm_vec_dot_q5_K_q8_K_avx512,
                          .to_float = lm_dequantize_row_q5_K_avx512,
                          .gemm_x8 = lm_gemm_q5_Kx8_q8_K_avx512,
                          .gemm_vt = LM_TYPE_Q8_K,
                          .gemv_x8 = lm_gemv_q5_Kx8_q8_K_avx512},
        [LM_TYPE_Q6_K] = {.vec_dot = lm_vec_dot_q6_K_q8_K_avx512,
                          .to_float = lm_dequantize_row_q6_K_avx512,
                          .gemm_x8 = lm_gemm_q6_Kx8_q8_K_avx512,
                          .gemm_vt = LM_TYPE_Q8_K,
                          .gemv_x8 = lm_gemv_q6_Kx8_q8_K_avx512},
    }};

/* CPUs with AVX512_BF16: the vdpbf16ps dots; else the AVX2 shift/FMA kernel stays. */
static const struct lm_cpu_kernels avx512_bf16_dot_over = {
    .type = {[LM_TYPE_BF16] = {.vec_dot = lm_vec_dot_bf16_avx512, .vec_dot_rows = lm_vec_dot_rows_bf16_avx512}},
};

/* IQ2: the lattice look-ups bound these kernels; on AMD (Zen 4 runs zmm as
 * two halves, gathers are slow) the AVX2 ones stay: bench_kernels
 * 2026-12-05, GF/s hot, AVX2 / AVX-512: IQ2_XS 17.5 / 14.2, IQ2_XXS 25.6 /
 * 22.6 (same bits either way; tests/cpu/test_kernels_isa.c checks both). */
static const struct lm_cpu_kernels avx512_iq2_over = {
    .type = {
        [LM_TYPE_IQ2_XXS] = {.vec_dot = lm_vec_dot_iq2_xxs_q8_K_avx512,
                             .vec_dot_cols = lm_vec_dot_cols_iq2_xxs_q8_K_avx512},
        [LM_TYPE_IQ2_XS] = {.vec_dot = lm_vec_dot_iq2_xs_q8_K_avx512,
                            .vec_dot_cols = lm_vec_dot_cols_iq2_xs_q8_K_avx512},
    }};

/* The BF16 GEMM: the dpbf16 kernel on AMD CPUs with AVX512_BF16 (Zen 4:
 * vdpbf16ps zmm issues at the vfmadd231ps rate, 3.5 G/s per thread, with
 * twice the MACs; bench_gemm 2048 128 64: 86-90 vs 56-58 GMAC/s), else the
 * shift/FMA kernel: on Sapphire Rapids vdpbf16ps zmm issues at a quarter of
 * the FMA rate (measured 1.77 vs 7.0 G/s per thread), so the dpbf16 kernel
 * is ~45 % slower there (gemm_float_avx512.c). The dpbf16 kernel reads pair
 * rows (gemm_vt BF16: 2 bytes per element); the FMA one F32 rows rounded
 * through BF16 by the AVX2 encoder. */
static const struct lm_cpu_kernels avx512_bf16_gemm_dp_over = {
    .type = {[LM_TYPE_BF16] = {.gemm_x8 = lm_gemm_bf16x8_f32_avx512bf16,
                               .gemm_vt = LM_TYPE_BF16,
                               .gemm_from_float = lm_fp32_to_bf16_pairs_row_avx512,
                               .gemv_x8 = lm_gemv_bf16x8_f32_avx512bf16}},
};
static const struct lm_cpu_kernels avx512_bf16_gemm_fma_over = {
    .type = {[LM_TYPE_BF16] = {.gemm_x8 = lm_gemm_bf16x8_f32_avx512,
                               .gemm_vt = LM_TYPE_F32,
                               .gemm_from_float = lm_fp32_round_bf16_row_avx2,
                               .gemv_x8 = lm_gemv_bf16x8_f32_avx512}},
};

/* Prefetch on (1), off (0), or the CPU's choice (anything else): off on AMD
 * family 25 (Zen 3/4), measured faster without (avx512_util.h). */
void lm_cpu_prefetch_avx512(int mode)
{
    const struct lm_cpu_features *cf = lm_cpu_features();
    const bool zen34 = cf->amd && cf->family == 25;
    lm_avx512_prefetch = mode == 0 || mode == 1 ? mode == 1 : !zen34;
}

/* Overrides the AVX-512 slots of k (a copy of the AVX2 table, k->isa set). */
void lm_cpu_kernels_init_avx512(struct lm_cpu_kernels *k)
{
    lm_cpu_prefetch_avx512(-1); /* the CPU's choice until lm_cpu_prefetch_set */
    const struct lm_cpu_features *cf = lm_cpu_features();
    lm_cpu_kernels_apply(k, &avx512_over);
    if (cf->avx512bf16)
        lm_cpu_kernels_apply(k, &avx512_bf16_dot_over);
    if (!cf->amd)
        lm_cpu_kernels_apply(k, &avx512_iq2_over);
    lm_cpu_kernels_apply(k, cf->avx512bf16 && cf->amd ? &avx512_bf16_gemm_dp_over : &avx512_bf16_gemm_fma_over);
    struct lm_cpu_type_kernels *q4k = &k->type[LM_TYPE_Q4_K];
    q4k->panel_from_float = q4k->gemm_from_float ? q4k->gemm_from_float : k->type[q4k->gemm_vt].from_float;
    one_column_choices(k, cf);
}
