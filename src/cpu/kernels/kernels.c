/* kernels.c - builds the kernel table of each ISA level and selects the active one.
 *
 * Level tables are built once (pthread_once) and never change afterwards, so
 * readers need no lock; the active level is an atomic index. A level is
 * available when this build contains its kernel folder (LM_HAVE_X86_*, set by
 * CMake) and cpuid reports its features. A process starts at the best level;
 * lm_cpu_isa_limit lowers it (llama_backend_init does, once, for LAMINA_ISA=<name>:
 * e.g. to compare "avx512" with "amx" in whole-model runs).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/kernels/gemm.h"
#include "cpu/kernels/kernels.h"

static struct lm_cpu_kernels g_tables[LM_ISA_COUNT];
static bool g_available[LM_ISA_COUNT];
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static atomic_int g_active = LM_ISA_GENERIC;

static const char *const isa_names[LM_ISA_COUNT] = {"generic", "avx2", "avx512", "amx"};

/* Dot types and generic kernels of every type, with quant/'s reference
 * encoders and decoders. */
static void fill_generic(struct lm_cpu_kernels *k)
{
    memset(k, 0, sizeof *k);
    k->isa = LM_ISA_GENERIC;
    k->exp_sum = lm_exp_sum_generic;
    k->scale_max = lm_scale_max_generic;
    k->gelu = lm_gelu_generic;
    k->silu = lm_silu_generic;
    for (int t = 0; t < LM_TYPE_COUNT; t++) {
        const struct lm_quant_traits *q = lm_quant_traits((enum lm_type)t);
        k->type[t].vec_dot_type = LM_TYPE_F32;
        k->type[t].from_float = q->from_float;
        k->type[t].to_float = q->to_float;
    }
    struct lm_cpu_type_kernels *ty = k->type;
    ty[LM_TYPE_F32] = (struct lm_cpu_type_kernels){.vec_dot_type = LM_TYPE_F32, .vec_dot = lm_vec_dot_f32_generic,
                                                    .from_float = lm_f32_from_float_row_generic,
                                                    .to_float = lm_f32_copy_row_generic};
    ty[LM_TYPE_F16] = (struct lm_cpu_type_kernels){.vec_dot_type = LM_TYPE_F16, .vec_dot = lm_vec_dot_f16_generic,
                                                    .from_float = lm_fp32_to_fp16_row_generic,
                                                    .to_float = lm_fp16_to_fp32_row_generic};
    ty[LM_TYPE_BF16] = (struct lm_cpu_type_kernels){.vec_dot_type = LM_TYPE_BF16, .vec_dot = lm_vec_dot_bf16_generic,
                                                     .from_float = lm_fp32_to_bf16_row_generic,
                                                     .to_float = lm_bf16_to_fp32_row_generic};

    ty[LM_TYPE_Q4_0].vec_dot_type = LM_TYPE_Q8_0;
    ty[LM_TYPE_Q4_0].vec_dot = lm_vec_dot_q4_0_q8_0_generic;
    ty[LM_TYPE_Q5_0].vec_dot_type = LM_TYPE_Q8_0;
    ty[LM_TYPE_Q5_0].vec_dot = lm_vec_dot_q5_0_q8_0_generic;
    ty[LM_TYPE_Q8_0].vec_dot_type = LM_TYPE_Q8_0;
    ty[LM_TYPE_Q8_0].vec_dot = lm_vec_dot_q8_0_q8_0_generic;
    ty[LM_TYPE_Q8_0].vec_mad_rows = lm_vec_mad_rows_q8_0_generic;
    ty[LM_TYPE_Q4_0].gemm_x8 = lm_gemm_q4_0x8_q8_0_generic;
    ty[LM_TYPE_Q4_0].gemm_vt = LM_TYPE_Q8_0;
    ty[LM_TYPE_Q4_0].gemm_sums = true;
    ty[LM_TYPE_Q8_0].gemm_x8 = lm_gemm_q8_0x8_q8_0_generic;
    ty[LM_TYPE_Q8_0].gemm_vt = LM_TYPE_Q8_0;
    ty[LM_TYPE_F16].gemm_x8 = lm_gemm_f16x8_f16_generic;
    ty[LM_TYPE_F16].gemm_vt = LM_TYPE_F16;
    ty[LM_TYPE_BF16].gemm_x8 = lm_gemm_bf16x8_f32_generic;
    ty[LM_TYPE_BF16].gemm_vt = LM_TYPE_F32;
    ty[LM_TYPE_BF16].gemm_from_float = lm_fp32_round_bf16_row_generic;
    ty[LM_TYPE_F32].gemm_x8 = lm_gemm_f32x8_f32_generic;
    ty[LM_TYPE_F32].gemm_vt = LM_TYPE_F32;
    ty[LM_TYPE_Q2_K].gemm_x8 = lm_gemm_q2_Kx8_q8_K_generic;
    ty[LM_TYPE_Q2_K].gemm_vt = LM_TYPE_Q8_K;
    ty[LM_TYPE_Q3_K].gemm_x8 = lm_gemm_q3_Kx8_q8_K_generic;
    ty[LM_TYPE_Q3_K].gemm_vt = LM_TYPE_Q8_K;
    ty[LM_TYPE_Q4_K].gemm_x8 = lm_gemm_q4_Kx8_q8_K_generic;
    ty[LM_TYPE_Q4_K].gemm_vt = LM_TYPE_Q8_K;
    ty[LM_TYPE_Q5_K].gemm_x8 = lm_gemm_q5_Kx8_q8_K_generic;
    ty[LM_TYPE_Q5_K].gemm_vt = LM_TYPE_Q8_K;
    ty[LM_TYPE_Q6_K].gemm_x8 = lm_gemm_q6_Kx8_q8_K_generic;
    ty[LM_TYPE_Q6_K].gemm_vt = LM_TYPE_Q8_K;
    ty[LM_TYPE_Q4_1].vec_dot_type = LM_TYPE_Q8_1;
    ty[LM_TYPE_Q4_1].vec_dot = lm_vec_dot_q4_1_q8_1_generic;
    ty[LM_TYPE_Q5_1].vec_dot_type = LM_TYPE_Q8_1;
    ty[LM_TYPE_Q5_1].vec_dot = lm_vec_dot_q5_1_q8_1_generic;

    ty[LM_TYPE_Q2_K].vec_dot_type = LM_TYPE_Q8_K;
    ty[LM_TYPE_Q2_K].vec_dot = lm_vec_dot_q2_K_q8_K_generic;
    ty[LM_TYPE_Q3_K].vec_dot_type = LM_TYPE_Q8_K;
    ty[LM_TYPE_Q3_K].vec_dot = lm_vec_dot_q3_K_q8_K_generic;
    ty[LM_TYPE_Q4_K].vec_dot_type = LM_TYPE_Q8_K;
    ty[LM_TYPE_Q4_K].vec_dot = lm_vec_dot_q4_K_q8_K_generic;
    ty[LM_TYPE_Q5_K].vec_dot_type = LM_TYPE_Q8_K;
    ty[LM_TYPE_Q5_K].vec_dot = lm_vec_dot_q5_K_q8_K_generic;
    ty[LM_TYPE_Q6_K].vec_dot_type = LM_TYPE_Q8_K;
    ty[LM_TYPE_Q6_K].vec_dot = lm_vec_dot_q6_K_q8_K_generic;

    ty[LM_TYPE_IQ2_XXS].vec_dot_type = LM_TYPE_Q8_K;
    ty[LM_TYPE_IQ2_XXS].vec_dot = lm_vec_dot_iq2_xxs_q8_K_generic;
    ty[LM_TYPE_IQ2_XS].vec_dot_type = LM_TYPE_Q8_K;
    ty[LM_TYPE_IQ2_XS].vec_dot = lm_vec_dot_iq2_xs_q8_K_generic;
}

/* The vec_dot family and the encoders of one type (lm_cpu_kernels_apply). */
static void apply_dot(struct lm_cpu_kernels *k, enum lm_type t, const struct lm_cpu_type_kernels *o)
{
    struct lm_cpu_type_kernels *d = &k->type[t];
    if (o->vec_dot)
        lm_cpu_set_dot(k, t, o->vec_dot);
    if (o->vec_dot_rows)
        d->vec_dot_rows = o->vec_dot_rows;
    if (o->vec_dot_cols)
        d->vec_dot_cols = o->vec_dot_cols;
    if (o->vec_dot_tile)
        d->vec_dot_tile = o->vec_dot_tile;
    if (o->vec_dot_kt)
        d->vec_dot_kt = o->vec_dot_kt;
    if (o->vec_dot_kt_pack)
        d->vec_dot_kt_pack = o->vec_dot_kt_pack;
    if (o->vec_mad_rows)
        d->vec_mad_rows = o->vec_mad_rows;
    if (o->from_float)
        lm_cpu_set_from(k, t, o->from_float);
    if (o->to_float)
        lm_cpu_set_to(k, t, o->to_float);
}

/* Contract: kernels.h. */
void lm_cpu_kernels_apply(struct lm_cpu_kernels *k, const struct lm_cpu_kernels *over)
{
    if (over->exp_sum) {
        k->exp_sum = over->exp_sum;
        k->exp_sum_isa = k->isa;
    }
    if (over->scale_max)
        k->scale_max = over->scale_max;
    if (over->gelu) {
        k->gelu = over->gelu;
        k->gelu_isa = k->isa;
    }
    if (over->silu)
        k->silu = over->silu;
    for (int t = 0; t < LM_TYPE_COUNT; t++) {
        const struct lm_cpu_type_kernels *o = &over->type[t];
        struct lm_cpu_type_kernels *d = &k->type[t];
        apply_dot(k, (enum lm_type)t, o);
        if (o->gemm_x8) {
            d->gemm_x8 = o->gemm_x8;
            d->gemm_vt = o->gemm_vt;
            d->gemm_from_float = o->gemm_from_float;
            d->gemm_sums = o->gemm_sums;
            d->gemv_x8 = o->gemv_x8;
        }
        if (o->gemm_panel) {
            d->gemm_panel = o->gemm_panel;
            d->panel_row_size = o->panel_row_size;
            d->panel_exact = o->panel_exact;
            d->panel_from_float = o->panel_from_float;
            d->panel_scratch = o->panel_scratch;
            d->panel_min_n = o->panel_min_n;
        }
    }
}

static void build_tables(void)
{
    const struct lm_cpu_features *f = lm_cpu_features();
    fill_generic(&g_tables[LM_ISA_GENERIC]);
    g_available[LM_ISA_GENERIC] = true;
    enum lm_cpu_isa best = LM_ISA_GENERIC;
#ifdef LM_HAVE_X86_AVX2
    if (f->avx2 && f->fma && f->f16c) {
        g_tables[LM_ISA_AVX2] = g_tables[LM_ISA_GENERIC];
        g_tables[LM_ISA_AVX2].isa = LM_ISA_AVX2;
        lm_cpu_kernels_init_avx2(&g_tables[LM_ISA_AVX2]);
        g_available[LM_ISA_AVX2] = true;
        best = LM_ISA_AVX2;
    }
#endif
#ifdef LM_HAVE_X86_AVX512
    if (best == LM_ISA_AVX2 && f->avx512f && f->avx512bw && f->avx512vl && f->avx512dq && f->avx512vnni) {
        g_tables[LM_ISA_AVX512] = g_tables[LM_ISA_AVX2];
        g_tables[LM_ISA_AVX512].isa = LM_ISA_AVX512;
        lm_cpu_kernels_init_avx512(&g_tables[LM_ISA_AVX512]);
        g_available[LM_ISA_AVX512] = true;
        best = LM_ISA_AVX512;
    }
#endif
#ifdef LM_HAVE_X86_AMX
    if (best == LM_ISA_AVX512 && f->amx_tile && f->amx_bf16 && f->avx512bf16) {
        g_tables[LM_ISA_AMX] = g_tables[LM_ISA_AVX512];
        g_tables[LM_ISA_AMX].isa = LM_ISA_AMX;
        lm_cpu_kernels_init_amx(&g_tables[LM_ISA_AMX]);
        g_available[LM_ISA_AMX] = true;
        best = LM_ISA_AMX;
    }
#endif
    (void)f;
    atomic_store(&g_active, (int)best);
}

/* The name of a kernel set ("generic", "avx2", "avx512", "amx"; "?" if out of range). */
const char *lm_cpu_isa_name(enum lm_cpu_isa isa)
{
    return (unsigned)isa < LM_ISA_COUNT ? isa_names[isa] : "?";
}

/* The best level this build and CPU provide. Thread-safe. */
enum lm_cpu_isa lm_cpu_isa_best(void)
{
    pthread_once(&g_once, build_tables);
    enum lm_cpu_isa best = LM_ISA_GENERIC;
    for (int i = 0; i < LM_ISA_COUNT; i++)
        if (g_available[i])
            best = (enum lm_cpu_isa)i;
    return best;
}

/* Select min(isa, best) as the active level; returns it. Process-wide; call
 * between graph computations. */
enum lm_cpu_isa lm_cpu_isa_limit(enum lm_cpu_isa isa)
{
    enum lm_cpu_isa best = lm_cpu_isa_best();
    int lvl = (int)isa < 0 ? 0 : (isa > best ? (int)best : (int)isa);
    atomic_store(&g_active, lvl);
    return (enum lm_cpu_isa)lvl;
}

/* Software prefetch in the AVX-512 kernels: mode 0 off, 1 on, anything else
 * the CPU's choice (the default). Builds the tables first (the AVX-512 init
 * makes the CPU's choice), so a later call always wins. Process-wide; call
 * between graph computations. */
void lm_cpu_prefetch_set(int mode)
{
    pthread_once(&g_once, build_tables);
#ifdef LM_HAVE_X86_AVX512
    if (g_available[LM_ISA_AVX512])
        lm_cpu_prefetch_avx512(mode);
#else
    (void)mode;
#endif
}

/* The active table (level min(limit, best)); builds the tables on first use. */
const struct lm_cpu_kernels *lm_cpu_kernels(void)
{
    pthread_once(&g_once, build_tables);
    return &g_tables[atomic_load(&g_active)];
}

/* The table of one level, or NULL when unavailable. */
const struct lm_cpu_kernels *lm_cpu_kernels_for(enum lm_cpu_isa isa)
{
    pthread_once(&g_once, build_tables);
    if ((unsigned)isa >= LM_ISA_COUNT || !g_available[isa])
        return NULL;
    return &g_tables[isa];
}
