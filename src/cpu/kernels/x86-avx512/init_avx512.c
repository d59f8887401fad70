/* init_avx512.c - fills the AVX-512 slots of a kernel table (called by
 * kernels.c only when cpuid reports AVX-512 F/BW/VL/DQ and VNNI with OS
 * support for the ZMM and opmask state). The table starts as a copy of the
 * AVX2 table: slots not set here keep their AVX2 kernels (the activation
 * encoders among them: ggml's x86 Q8_0/Q8_1 arithmetic). Kernels that need
 * AVX512_BF16 (vdpbf16ps) are installed only when cpuid reports it. */
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

/* Prefetch on (1), off (0), or the CPU's choice (anything else): off on AMD
 * family 25 (Zen 3/4), measured faster without (avx512_util.h). */
void lm_cpu_prefetch_avx512(int mode)
{
    const struct lm_cpu_features *cf = lm_cpu_features();
    const bool zen34 = cf->amd && cf->family == 25;
    lm_avx512_prefetch = mode == 0 || mode == 1 ? mode == 1 : !zen34;
}

/* Overrides the AVX-512 slots of k (a copy of the AVX2 table). */
void lm_cpu_kernels_init_avx512(struct lm_cpu_kernels *k)
{
    lm_cpu_prefetch_avx512(-1); /* the CPU's choice until lm_cpu_prefetch_set */
    const struct lm_cpu_features *cf = lm_cpu_features();
    /* vec_dot of every weight type but F32 (VNNI integer parts); F16/BF16 rows */
    /* F32 keeps the AVX2 dot: with lm_vec_dot_f32_avx512 a multi-sequence batch
     * of stories260K (F32 weights) differs from decoding the tokens one at a
     * time by 6.3e-4 (api/test_batching; the generic table shows the same
     * difference, the AVX2 table none). Not yet explained; see docs/kernels.md. */
    lm_cpu_set_dot(k, LM_TYPE_F16, lm_vec_dot_f16_avx512);
    k->type[LM_TYPE_F16].vec_dot_rows = lm_vec_dot_rows_f16_avx512;
    k->type[LM_TYPE_F16].vec_dot_tile = lm_vec_dot_tile_f16_avx512;
    k->type[LM_TYPE_F16].vec_dot_kt = lm_vec_dot_kt_f16_avx512;
    k->type[LM_TYPE_F16].vec_dot_kt_pack = lm_kt_pack_f16;
    if (lm_cpu_features()->avx512bf16) { /* vdpbf16ps; else the AVX2 shift/FMA kernel stays */
        lm_cpu_set_dot(k, LM_TYPE_BF16, lm_vec_dot_bf16_avx512);
        k->type[LM_TYPE_BF16].vec_dot_rows = lm_vec_dot_rows_bf16_avx512;
    }
    lm_cpu_set_dot(k, LM_TYPE_Q4_0, lm_vec_dot_q4_0_q8_0_avx512);
    lm_cpu_set_dot(k, LM_TYPE_Q4_1, lm_vec_dot_q4_1_q8_1_avx512);
    lm_cpu_set_dot(k, LM_TYPE_Q5_0, lm_vec_dot_q5_0_q8_0_avx512);
    lm_cpu_set_dot(k, LM_TYPE_Q5_1, lm_vec_dot_q5_1_q8_1_avx512);
    lm_cpu_set_dot(k, LM_TYPE_Q8_0, lm_vec_dot_q8_0_q8_0_avx512);
    k->type[LM_TYPE_Q8_0].vec_dot_rows = lm_vec_dot_rows_q8_0_avx512; /* a Q8_0 K cache's scores */
    k->type[LM_TYPE_Q8_0].vec_dot_tile = lm_vec_dot_tile_q8_0_avx512; /* the same, several queries at once */
    k->type[LM_TYPE_Q8_0].vec_dot_kt = lm_vec_dot_kt_q8_0_avx512;     /* and from a transposed K (prompts) */
    k->type[LM_TYPE_Q8_0].vec_dot_kt_pack = lm_kt_pack_q8_0;
    k->type[LM_TYPE_Q8_0].vec_mad_rows = lm_vec_mad_rows_q8_0_avx512; /* a Q8_0 V cache's P.V */
    lm_cpu_set_dot(k, LM_TYPE_Q2_K, lm_vec_dot_q2_K_q8_K_avx512);
    lm_cpu_set_dot(k, LM_TYPE_Q3_K, lm_vec_dot_q3_K_q8_K_avx512);
    lm_cpu_set_dot(k, LM_TYPE_Q4_K, lm_vec_dot_q4_K_q8_K_avx512);
    lm_cpu_set_dot(k, LM_TYPE_Q5_K, lm_vec_dot_q5_K_q8_K_avx512);
    lm_cpu_set_dot(k, LM_TYPE_Q6_K, lm_vec_dot_q6_K_q8_K_avx512);
    /* IQ2: the lattice look-ups bound these kernels; on AMD (Zen 4 runs zmm as
     * two halves, gathers are slow) the AVX2 ones stay: bench_kernels
     * 2026-12-05, GF/s hot, AVX2 / AVX-512: IQ2_XS 17.5 / 14.2, IQ2_XXS 25.6 /
     * 22.6 (same bits either way; tests/cpu/test_kernels_isa.c checks both). */
    if (!lm_cpu_features()->amd) {
        lm_cpu_set_dot(k, LM_TYPE_IQ2_XXS, lm_vec_dot_iq2_xxs_q8_K_avx512);
        k->type[LM_TYPE_IQ2_XXS].vec_dot_cols = lm_vec_dot_cols_iq2_xxs_q8_K_avx512;
        lm_cpu_set_dot(k, LM_TYPE_IQ2_XS, lm_vec_dot_iq2_xs_q8_K_avx512);
        k->type[LM_TYPE_IQ2_XS].vec_dot_cols = lm_vec_dot_cols_iq2_xs_q8_K_avx512;
    }
    k->exp_sum = lm_exp_sum_avx512;
    k->exp_sum_isa = k->isa;
    k->scale_max = lm_scale_max_avx512;
    k->gelu = lm_gelu_avx512;
    k->gelu_isa = k->isa;
    k->silu = lm_silu_avx512;
    /* row decoders (bit-exact; dequantizing matmul paths, GET_ROWS) */
    lm_cpu_set_to(k, LM_TYPE_Q4_0, lm_dequantize_row_q4_0_avx512);
    lm_cpu_set_to(k, LM_TYPE_Q4_1, lm_dequantize_row_q4_1_avx512);
    lm_cpu_set_to(k, LM_TYPE_Q5_0, lm_dequantize_row_q5_0_avx512);
    lm_cpu_set_to(k, LM_TYPE_Q5_1, lm_dequantize_row_q5_1_avx512);
    lm_cpu_set_to(k, LM_TYPE_Q8_0, lm_dequantize_row_q8_0_avx512);
    lm_cpu_set_to(k, LM_TYPE_Q2_K, lm_dequantize_row_q2_K_avx512);
    lm_cpu_set_to(k, LM_TYPE_Q3_K, lm_dequantize_row_q3_K_avx512);
    lm_cpu_set_to(k, LM_TYPE_Q4_K, lm_dequantize_row_q4_K_avx512);
    lm_cpu_set_to(k, LM_TYPE_Q5_K, lm_dequantize_row_q5_K_avx512);
    lm_cpu_set_to(k, LM_TYPE_Q6_K, lm_dequantize_row_q6_K_avx512);
    lm_cpu_gemm_init_avx512_int8(k);
    /* prompt batches of Q4_0/Q8_0: 16-row VNNI tiles, gemm_x8's bits
     * (gemm_panel_avx512.c; the AMX level replaces them for N >= 64) */
    struct lm_cpu_type_kernels *q40 = &k->type[LM_TYPE_Q4_0], *q80 = &k->type[LM_TYPE_Q8_0];
    q40->gemm_panel = lm_gemm_panel_q4_0x8_avx512;
    q40->panel_from_float = lm_panel_from_float_q4_0_avx512;
    q80->gemm_panel = lm_gemm_panel_q8_0x8_avx512;
    q80->panel_from_float = lm_panel_from_float_q8_0_avx512;
    q40->panel_row_size = q80->panel_row_size = lm_panel_row_size_q8_avx512;
    q40->panel_scratch = q80->panel_scratch = lm_gemm_panel_scratch_q8_avx512;
    q40->panel_min_n = q80->panel_min_n = 2;
    q40->panel_exact = q80->panel_exact = true;
    /* Q4_K batches of 16+ columns: the same tiles over the gemm path's Q8_K
     * rows (Zen 5, bench_gemm 2048 256 N, GMAC/s gemm_x8 / panel, same runs:
     * N = 512 223 / 236-251, 16 245 / 256, 8 260 / 250-257, 2 182-202 /
     * 154-159: gemm_x8's 16-column groups unpack once for all columns) */
    struct lm_cpu_type_kernels *q4k = &k->type[LM_TYPE_Q4_K];
    q4k->gemm_panel = lm_gemm_panel_q4_Kx8_avx512;
    q4k->panel_from_float = q4k->gemm_from_float ? q4k->gemm_from_float : k->type[q4k->gemm_vt].from_float;
    q4k->panel_row_size = lm_panel_row_size_q8_K_avx512;
    q4k->panel_scratch = lm_gemm_panel_scratch_q8_avx512;
    q4k->panel_min_n = 16;
    q4k->panel_exact = true;
    lm_cpu_gemm_init_avx512_float(k);
    one_column_choices(k, cf);
}
