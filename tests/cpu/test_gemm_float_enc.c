/* test_gemm_float_enc.c - the float GEMM pieces test_gemm.c does not reach
 * through the kernel tables:
 *  - every table's F16 activation encoder (gemm_from_float, where a level
 *    sets one: AVX-512's F32 rows rounded through F16) gives the bits of
 *    lm_fp16_to_fp32(lm_fp32_to_fp16(x)) for every input (ties, overflow,
 *    F16 subnormals and underflow, infinities, NaNs, random bit patterns),
 *    every length 0..40 and 1031, at two offsets, writing nothing past n;
 *  - the AVX-512 BF16 kernels by name (only one is in the table): the
 *    shift/FMA one and, where the CPU has AVX512_BF16, the vdpbf16ps one,
 *    against the generic kernel for nc 1..16 with an output stride: within
 *    4.8e-7 (K/8 + 8) sum|w a| (the bound of test_gemm.c) on random data,
 *    exact on small integers, and the documented vdpbf16ps flushing of
 *    denormal inputs (denormal weights: result 0); the FMA kernel
 *    bit-identical to generic on all of them (BF16 products are exact and
 *    its lanes sum in the generic order), and so is the AVX-512 table's F16
 *    kernel (F16 products exact too);
 *  - the BF16 gemv kernels by name, each bit-identical per group to its
 *    gemm with one column. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/fp16.h"
#include "cpu/cpu.h"
#include "cpu/kernels/gemm.h"
#include "cpu/repack.h"
#include "lm_test.h"
#include "quant/quant.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint32_t rand32(void)
{
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return (uint32_t)((rng * 2685821657736338717ull) >> 32);
}

static float frand(void) { return (float)(rand32() >> 8) * 0x1p-23f - 1.0f; } /* [-1, 1) */

static float bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static void test_f16_encoders(void)
{
    static const uint32_t special[] = {
        0x00000000u, 0x80000000u, 0x3f800000u, 0xbf800000u, 0x3f801000u /* 1 + 2^-11: tie, to 1 */,
        0x3f803000u /* 1 + 3 2^-11: tie, up */, 0x3f801001u, 0x477fe000u /* 65504 */, 0x477fefffu /* to 65504 */,
        0x477ff000u /* 65520: tie, to inf */, 0x7f7fffffu, 0xff7fffffu, 0x7f800000u, 0xff800000u, 0x7fc00000u,
        0xffc00001u, 0x7f800001u /* signalling */, 0x7fa00000u, 0x7fbfe000u, 0x38800000u /* 2^-14 */,
        0x38000000u /* 2^-15: F16 subnormal */, 0x33800000u /* 2^-24: smallest */, 0x33000000u /* 2^-25: tie, to 0 */,
        0x33000001u /* to 2^-24 */, 0x33c00000u /* 1.5 2^-24: tie, up */, 0x00000001u, 0x807fffffu, 0x387fc000u};
    const size_t ns = sizeof special / sizeof special[0];
    enum { N = 1031 };
    float x[N], want[N + 1], got[N + 1];
    for (int i = 0; i < N; i++)
        x[i] = bits((size_t)i < ns ? special[i] : rand32());
    int tables = 0;
    for (int isa = 0; isa < LM_ISA_COUNT; isa++) {
        const struct lm_cpu_kernels *kt = lm_cpu_kernels_for((enum lm_cpu_isa)isa);
        if (!kt || !kt->type[LM_TYPE_F16].gemm_from_float)
            continue;
        const struct lm_cpu_type_kernels *tk = &kt->type[LM_TYPE_F16];
        CHECK(tk->gemm_vt == LM_TYPE_F32);
        tables++;
        for (int n = 0; n <= N; n += n < 40 ? 1 : N - 40) {
            for (int off = 0; off < 2 && off + n <= N; off++) {
                memset(got, 0x5a, sizeof got);
                memset(want, 0x5a, sizeof want);
                for (int i = 0; i < n; i++)
                    want[i] = lm_fp16_to_fp32(lm_fp32_to_fp16(x[off + i]));
                tk->gemm_from_float(x + off, got, n);
                CHECKF(!memcmp(got, want, sizeof got), "f16 %s encoder, n %d offset %d: not the F16-rounded bits",
                       lm_cpu_isa_name((enum lm_cpu_isa)isa), n, off);
            }
        }
    }
    printf("f16 gemm encoders checked: %d table(s)\n", tables);
}

#if defined(__x86_64__) || defined(_M_X64)
/* 8 BF16 rows of wf (rounded in place) repacked, nc activation rows (F32
 * rounded through BF16, stride by floats + 3), fn vs generic. mode 0: random,
 * 1: small integers (exact), 2: denormal weights (vdpbf16ps: all zero). */
static void bf16_case(lm_gemm_fn fn, bool dp, int64_t K, int nc, int mode, double *worst)
{
    enum { LDC = 11 };
    const size_t by = sizeof(float) * (size_t)K + 12, wbytes = lm_row_size(LM_TYPE_BF16, K) * LM_REPACK_ROWS;
    const size_t byp = sizeof(lm_bf16) * (size_t)K + 6; /* the dpbf16 kernel's pair rows */
    float *wf = malloc(sizeof(float) * (size_t)K * LM_REPACK_ROWS), *xf = malloc(sizeof(float) * (size_t)K);
    char *plain = malloc(wbytes), *packed = malloc(wbytes), *act = malloc(by * (size_t)nc);
    char *pairs = malloc(byp * (size_t)nc);
    float out[LM_GEMM_MAX_NC * LDC], ref[LM_GEMM_MAX_NC * LDC];
    for (int64_t i = 0; i < K * LM_REPACK_ROWS; i++)
        wf[i] = mode == 0 ? frand() : mode == 1 ? (float)(int)(frand() * 5.0f) : frand() * 0x1p-127f;
    lm_quantize_chunk(LM_TYPE_BF16, wf, plain, 0, LM_REPACK_ROWS, K, NULL);
    lm_quant_traits(LM_TYPE_BF16)->to_float(plain, wf, K * LM_REPACK_ROWS);
    lm_repack_rows(LM_TYPE_BF16, plain, packed, LM_REPACK_ROWS, K);
    double mag[LM_GEMM_MAX_NC][LM_REPACK_ROWS] = {{0}};
    for (int c = 0; c < nc; c++) {
        for (int64_t i = 0; i < K; i++)
            xf[i] = mode == 1 ? (float)(int)(frand() * 5.0f) : frand();
        lm_fp32_round_bf16_row_generic(xf, act + (size_t)c * by, K);
        if (dp)
            lm_fp32_to_bf16_pairs_row_avx512(xf, pairs + (size_t)c * byp, K);
        const float *a = (const float *)(act + (size_t)c * by);
        for (int r = 0; r < LM_REPACK_ROWS; r++)
            for (int64_t i = 0; i < K; i++)
                mag[c][r] += fabs((double)wf[r * K + i] * a[i]);
    }
    for (int i = 0; i < LM_GEMM_MAX_NC * LDC; i++)
        out[i] = ref[i] = 1234.5f;
    if (dp)
        fn(K, out, LDC, packed, pairs, byp, NULL, nc);
    else
        fn(K, out, LDC, packed, act, by, NULL, nc);
    lm_gemm_bf16x8_f32_generic(K, ref, LDC, packed, act, by, NULL, nc);
    bool ok = true;
    for (int c = 0; c < nc && ok; c++) {
        for (int r = 0; r < LDC && ok; r++) {
            const float got = out[c * LDC + r], want = ref[c * LDC + r];
            if (r >= LM_REPACK_ROWS) {
                ok = got == 1234.5f;
                CHECKF(ok, "bf16 gemm wrote outside its 8 rows (col %d, row %d)", c, r);
                continue;
            }
            const double err = fabs((double)got - want);
            if (mode == 2 && dp) {
                ok = got == 0.0f && want != 0.0f;
            } else {
                /* the FMA kernel sums each lane in the generic order, products exact: same bits */
                const double bound = mode == 1 || !dp ? 0 : 4.8e-7 * (double)(K / 8 + 8) * mag[c][r];
                ok = err <= bound && (dp || !memcmp(&got, &want, sizeof got));
                *worst = mag[c][r] > 0 && err / mag[c][r] > *worst ? err / mag[c][r] : *worst;
            }
            CHECKF(ok, "bf16 %s K%lld nc %d mode %d col %d row %d: %.9g vs generic %.9g", dp ? "dpbf16" : "fma",
                   (long long)K, nc, mode, c, r, got, want);
        }
    }
    free(wf);
    free(xf);
    free(plain);
    free(packed);
    free(act);
    free(pairs);
}

/* lm_fp32_to_bf16_pairs_row_avx512: word 16b + 2t (+1) is lm_fp32_to_bf16 of
 * element 16b + t (+8) for special values (ties, NaNs, infinities,
 * denormals) and random bit patterns, at two offsets; nothing past n. */
static void test_bf16_pairs(void)
{
    static const uint32_t special[] = {0x00000000u, 0x80000000u, 0x3f808000u /* tie, to even */,
                                       0x3f818000u /* tie, up */, 0x3f808001u, 0x7f7fffffu /* to inf */,
                                       0x7f800000u, 0xff800000u, 0x7fc00000u, 0x7f800001u /* signalling */,
                                       0xffbfffffu, 0x00000001u, 0x807fffffu, 0x00408000u};
    enum { N = 16 * 67 };
    float x[N + 1];
    lm_bf16 got[N + 8], want[N + 8];
    for (int i = 0; i <= N; i++)
        x[i] = bits(i < (int)(sizeof special / sizeof special[0]) ? special[i] : rand32());
    for (int off = 0; off < 2; off++) {
        for (int n = 0; n <= N; n += n < 64 ? 16 : N - 64) {
            memset(got, 0x5a, sizeof got);
            memset(want, 0x5a, sizeof want);
            for (int i = 0; i < n; i++)
                want[lm_bf16_pair_word(i)] = lm_fp32_to_bf16(x[off + i]);
            lm_fp32_to_bf16_pairs_row_avx512(x + off, got, n);
            CHECKF(!memcmp(got, want, sizeof got), "bf16 pair encoder, n %d offset %d: wrong words", n, off);
        }
    }
    printf("bf16 pair encoder checked\n");
}

/* The AVX-512 table's F16 kernel (F32 rows rounded through F16) against the
 * generic one (F16 rows of the same values): bit-identical (products exact,
 * the generic lane order), nc 1..16, output stride. */
static void test_f16_kernel(void)
{
    enum { LDC = 9, K = 1000 };
    const struct lm_cpu_kernels *kt = lm_cpu_kernels_for(LM_ISA_AVX512);
    const struct lm_cpu_kernels *gen = lm_cpu_kernels_for(LM_ISA_GENERIC);
    const struct lm_cpu_type_kernels *tk = &kt->type[LM_TYPE_F16];
    const size_t wbytes = lm_row_size(LM_TYPE_F16, K) * LM_REPACK_ROWS;
    float *wf = malloc(sizeof(float) * K * LM_REPACK_ROWS), *xf = malloc(sizeof(float) * K * LM_GEMM_MAX_NC);
    char *plain = malloc(wbytes), *packed = malloc(wbytes);
    float *act = malloc(sizeof(float) * K * LM_GEMM_MAX_NC);
    lm_fp16 *act16 = malloc(sizeof(lm_fp16) * K * LM_GEMM_MAX_NC);
    float out[LM_GEMM_MAX_NC * LDC], ref[LM_GEMM_MAX_NC * LDC];
    for (int i = 0; i < K * LM_REPACK_ROWS; i++)
        wf[i] = frand() * 4.0f;
    for (int i = 0; i < K * LM_GEMM_MAX_NC; i++)
        xf[i] = frand();
    lm_quantize_chunk(LM_TYPE_F16, wf, plain, 0, LM_REPACK_ROWS, K, NULL);
    lm_repack_rows(LM_TYPE_F16, plain, packed, LM_REPACK_ROWS, K);
    CHECK(tk->gemm_vt == LM_TYPE_F32 && tk->gemm_from_float);
    tk->gemm_from_float(xf, act, K * LM_GEMM_MAX_NC);
    gen->type[LM_TYPE_F16].from_float(xf, act16, K * LM_GEMM_MAX_NC);
    for (int nc = 1; nc <= LM_GEMM_MAX_NC; nc++) {
        memset(out, 0, sizeof out);
        memset(ref, 0, sizeof ref);
        tk->gemm_x8(K, out, LDC, packed, act, sizeof(float) * K, NULL, nc);
        lm_gemm_f16x8_f16_generic(K, ref, LDC, packed, act16, sizeof(lm_fp16) * K, NULL, nc);
        CHECKF(!memcmp(out, ref, sizeof out), "f16 avx512 gemm, nc %d: not the generic bits", nc);
    }
    printf("f16 avx512: 16 direct gemm cases bit-identical to generic\n");
    free(wf);
    free(xf);
    free(plain);
    free(packed);
    free(act);
    free(act16);
}

/* The BF16 gemv kernels by name (only one of the pair is in a table):
 * G groups (1..13, every mix of the 4/2/1-group steps) against one
 * activation row, each group's 8 results bit-identical to the same
 * kernel family's gemm with one column, nothing written past 8 G. */
static void test_bf16_gemv(int dp)
{
    enum { K = LM_REPACK_BFK * 3 };
    const size_t group = lm_row_size(LM_TYPE_BF16, K) * LM_REPACK_ROWS;
    const lm_gemm_fn gemm = dp ? lm_gemm_bf16x8_f32_avx512bf16 : lm_gemm_bf16x8_f32_avx512;
    const lm_gemv_fn gemv = dp ? lm_gemv_bf16x8_f32_avx512bf16 : lm_gemv_bf16x8_f32_avx512;
    float *wf = malloc(sizeof(float) * K * LM_REPACK_ROWS * 13), xf[K], act[K];
    char *plain = malloc(group * 13), *packed = malloc(group * 13);
    lm_bf16 pairs[K];
    float got[8 * 13 + 8], want[LM_REPACK_ROWS];
    for (int i = 0; i < K * LM_REPACK_ROWS * 13; i++)
        wf[i] = frand();
    for (int i = 0; i < K; i++)
        xf[i] = frand();
    lm_fp32_round_bf16_row_generic(xf, act, K);
    lm_fp32_to_bf16_pairs_row_avx512(xf, pairs, K);
    const void *y = dp ? (const void *)pairs : (const void *)act;
    lm_quantize_chunk(LM_TYPE_BF16, wf, plain, 0, LM_REPACK_ROWS * 13, K, NULL);
    lm_repack_rows(LM_TYPE_BF16, plain, packed, LM_REPACK_ROWS * 13, K);
    int runs = 0;
    for (int64_t G = 1; G <= 13; G++, runs++) {
        for (int i = 0; i < 8 * 13 + 8; i++)
            got[i] = 1234.5f;
        gemv(K, G, group, got, packed, y, NULL);
        for (int64_t g = 0; g < G; g++) {
            gemm(K, want, 1, packed + (size_t)g * group, y, 0, NULL, 1);
            CHECKF(!memcmp(want, got + g * LM_REPACK_ROWS, sizeof want), "bf16 %s gemv G%lld group %lld: not the gemm bits",
                   dp ? "avx512bf16" : "avx512", (long long)G, (long long)g);
        }
        for (int64_t i = G * LM_REPACK_ROWS; i < G * LM_REPACK_ROWS + 8; i++)
            CHECKF(got[i] == 1234.5f, "bf16 gemv G%lld wrote past its groups", (long long)G);
    }
    printf("bf16 %s: %d direct gemv cases bit-identical to its gemm per group\n", dp ? "avx512bf16" : "avx512", runs);
    free(wf);
    free(plain);
    free(packed);
}

static void test_bf16_kernels(void)
{
    if (!lm_cpu_kernels_for(LM_ISA_AVX512)) {
        printf("bf16 avx512 kernels: no AVX-512 here, skipped\n");
        return;
    }
    test_f16_kernel();
    test_bf16_pairs();
    for (int dp = 0; dp < 2; dp++) {
        if (dp && !lm_cpu_features()->avx512bf16) {
            printf("bf16 avx512bf16 kernel: no AVX512_BF16 here, skipped\n");
            continue;
        }
        lm_gemm_fn fn = dp ? lm_gemm_bf16x8_f32_avx512bf16 : lm_gemm_bf16x8_f32_avx512;
        double worst = 0;
        int cases = 0;
        for (int nc = 1; nc <= LM_GEMM_MAX_NC; nc++) {
            bf16_case(fn, dp, LM_REPACK_BFK * (1 + nc % 5), nc, 0, &worst);
            bf16_case(fn, dp, nc % 2 ? 2048 : 976, nc, nc % 4 == 1, &worst);
            bf16_case(fn, dp, 64, nc, 2, &worst);
            cases += 3;
        }
        printf("bf16 %s: %d direct gemm cases, worst error / magnitude %.3g\n", dp ? "avx512bf16" : "avx512",
               cases, worst);
        test_bf16_gemv(dp);
    }
}
#else
static void test_bf16_kernels(void) { printf("bf16 avx512 kernels: not an x86-64 build, skipped\n"); }
#endif

int main(void)
{
    test_f16_encoders();
    test_bf16_kernels();
    return lm_test_summary();
}
