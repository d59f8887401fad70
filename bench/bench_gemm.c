/* bench_gemm.c - single-thread throughput of the repacked GEMM kernels
 * (kernels.h gemm_x8) on a weight matrix that stays in L2 and a tile of
 * activation columns, per type and ISA, in GMAC/s (multiply-adds per second).
 * Columns beyond LM_GEMM_MAX_NC are run in the matmul op's loop order.
 * Where a level has a panel GEMM (AMX: F16, BF16, quantized), its line "panel" follows:
 * one call over all rows and columns, as the matmul runs it per thread.
 * usage: bench_gemm [K] [rows] [cols] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/memory.h"
#include "cpu/kernels/kernels.h"
#include "cpu/repack.h"
#include "quant/blocks.h"
#include "quant/quant.h"

#define ACT_MAX 65536 /* bytes of one converted activation row (stream mode) */
#define COL_BLOCK 64 /* as GEMM_COL_BLOCK in cpu/ops/matmul.c */

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* The panel GEMM (AMX level) over all rows and columns in one call, as the
 * matmul op calls it for one thread. */
static void bench_panel(const struct lm_cpu_type_kernels *tk, enum lm_type t, int64_t K, int64_t M, int N,
                        const char *packed, const float *a, float *out)
{
    const size_t arow = tk->panel_row_size(K) + 64; /* as the matmul op: rows not 4 KiB apart */
    char *act = malloc(arow * (size_t)N);
    void *scratch = aligned_alloc(64, (tk->panel_scratch(K) + 63) / 64 * 64);
    for (int c = 0; c < N; c++)
        tk->panel_from_float(a + (size_t)c * (size_t)K, act + (size_t)c * arow, K);
    double best = 1e9;
    for (int rep = 0; rep < 7; rep++) {
        double t0 = now();
        tk->gemm_panel(K, M / LM_REPACK_ROWS, lm_row_size(t, K) * LM_REPACK_ROWS, out, (size_t)M, packed, act, arow,
                       N, scratch);
        double dt = now() - t0;
        best = dt < best ? dt : best;
    }
    printf("  %-5s %-7s %8.1f GMAC/s (panel, min N %lld)\n", lm_type_name(t), "panel",
           (double)K * (double)M * N / best / 1e9, (long long)tk->panel_min_n);
    free(act);
    free(scratch);
}

/* "bench_gemm stream [MiB] [K]": token generation, one activation column
 * against a weight matrix of MiB (default 512, > L3) read once per pass;
 * the levels take turns pass by pass (same noise), best of 5, GB/s of
 * weight bytes. The matrix is one quantized block of 512 rows repeated.
 * Each level's gemm_x8 runs group by group (one stream), and where the level
 * has a gemv_x8, that runs over all groups in one call (several streams). */
static int stream_main(int argc, char **argv)
{
    const size_t mib = argc > 2 ? (size_t)atoll(argv[2]) : 512;
    const int64_t K = argc > 3 ? atoll(argv[3]) : 4096, M0 = 512;
    const enum lm_type types[] = {LM_TYPE_Q4_0, LM_TYPE_Q8_0, LM_TYPE_F16,  LM_TYPE_BF16,
                                  LM_TYPE_Q2_K, LM_TYPE_Q3_K, LM_TYPE_Q4_K, LM_TYPE_Q5_K, LM_TYPE_Q6_K};
    float *w = malloc(sizeof(float) * (size_t)(K * M0)), *a = malloc(sizeof(float) * (size_t)K), out[LM_REPACK_ROWS];
    for (int64_t i = 0; i < K * M0; i++)
        w[i] = (float)((i * 7919) % 1000) / 500.0f - 1.0f;
    for (int64_t i = 0; i < K; i++)
        a[i] = (float)((i * 104729) % 1000) / 500.0f - 1.0f;
    printf("stream: K=%lld, %zu MiB of weights, 1 column (1 thread), GB/s of gemm_x8 per group | gemv_x8\n",
           (long long)K, mib);
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        const enum lm_type t = types[ti];
        const size_t blk = lm_row_size(t, K) * (size_t)M0, reps = (mib << 20) / blk, group = lm_row_size(t, K) * 8;
        char *plain = malloc(blk), *packed = lm_alloc_large(blk * reps, 64); /* as the engine: core/memory.h */
        lm_quantize_chunk(t, w, plain, 0, M0, K, NULL);
        lm_repack_rows(t, plain, packed, M0, K);
        for (size_t r = 1; r < reps; r++)
            memcpy(packed + r * blk, packed, blk);
        double best[LM_ISA_COUNT], best_v[LM_ISA_COUNT];
        float *outv = malloc(sizeof(float) * reps * (size_t)M0);
        static char act[LM_ISA_COUNT][ACT_MAX + 64];
        int16_t sums[LM_ISA_COUNT][256] = {{0}};
        for (int isa = 0; isa < LM_ISA_COUNT; isa++) {
            const struct lm_cpu_kernels *kern = lm_cpu_kernels_for((enum lm_cpu_isa)isa);
            best[isa] = best_v[isa] = 1e9;
            if (!kern || !kern->type[t].gemm_x8 || isa == LM_ISA_GENERIC || lm_row_size(kern->type[t].gemm_vt, K) > ACT_MAX)
                continue;
            if (kern->type[t].gemm_from_float)
                kern->type[t].gemm_from_float(a, act[isa], K);
            else
                kern->type[kern->type[t].gemm_vt].from_float(a, act[isa], K);
            for (int64_t b = 0; kern->type[t].gemm_vt == LM_TYPE_Q8_0 && b < K / 32 && b < 256; b++) {
                int sum = 0;
                for (int i = 0; i < 32; i++)
                    sum += ((const struct lm_block_q8_0 *)act[isa])[b].qs[i];
                sums[isa][b] = (int16_t)sum;
            }
        }
        for (int pass = 0; pass < 5; pass++) {
            for (int isa = 1; isa < LM_ISA_COUNT; isa++) {
                const struct lm_cpu_kernels *kern = lm_cpu_kernels_for((enum lm_cpu_isa)isa);
                if (!kern || !kern->type[t].gemm_x8 || lm_row_size(kern->type[t].gemm_vt, K) > ACT_MAX)
                    continue;
                const double t0 = now();
                for (size_t g = 0; g < reps * (size_t)(M0 / 8); g++)
                    kern->type[t].gemm_x8(K, out, 8, packed + g * group, act[isa], 0, sums[isa], 1);
                const double dt = now() - t0;
                best[isa] = dt < best[isa] ? dt : best[isa];
                if (kern->type[t].gemv_x8) {
                    const double t1 = now();
                    kern->type[t].gemv_x8(K, (int64_t)reps * (M0 / 8), group, outv, packed, act[isa], sums[isa]);
                    const double dv = now() - t1;
                    best_v[isa] = dv < best_v[isa] ? dv : best_v[isa];
                }
            }
        }
        for (int isa = 1; isa < LM_ISA_COUNT; isa++)
            if (best[isa] < 1e9) {
                printf("  %-5s %-7s %6.2f", lm_type_name(t), lm_cpu_isa_name((enum lm_cpu_isa)isa),
                       (double)(blk * reps) / best[isa] / 1e9);
                if (best_v[isa] < 1e9)
                    printf(" | %6.2f", (double)(blk * reps) / best_v[isa] / 1e9);
                printf("\n");
            }
        free(outv);
        free(plain);
        free(packed);
    }
    free(w);
    free(a);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "stream"))
        return stream_main(argc, argv);
    const int64_t K = argc > 1 ? atoll(argv[1]) : 2048, M = argc > 2 ? atoll(argv[2]) : 128;
    const int N = argc > 3 ? atoi(argv[3]) : 16;
    const enum lm_type types[] = {LM_TYPE_Q4_0, LM_TYPE_Q8_0, LM_TYPE_F16, LM_TYPE_BF16, LM_TYPE_F32,
                                  LM_TYPE_Q2_K, LM_TYPE_Q3_K, LM_TYPE_Q4_K, LM_TYPE_Q5_K, LM_TYPE_Q6_K};
    float *w = malloc(sizeof(float) * (size_t)(K * M)), *a = malloc(sizeof(float) * (size_t)(K * N));
    float *out = malloc(sizeof(float) * (size_t)(M * N));
    for (int64_t i = 0; i < K * M; i++)
        w[i] = (float)((i * 7919) % 1000) / 500.0f - 1.0f;
    for (int64_t i = 0; i < K * N; i++)
        a[i] = (float)((i * 104729) % 1000) / 500.0f - 1.0f;
    printf("gemm_x8: K=%lld rows=%lld cols=%d (1 thread)\n", (long long)K, (long long)M, N);
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        enum lm_type t = types[ti];
        const struct lm_repack_desc *d = lm_repack_desc(t);
        if (!d || K % d->k_multiple)
            continue;
        size_t wbytes = lm_row_size(t, K) * (size_t)M;
        char *plain = malloc(wbytes), *packed = malloc(wbytes + 4096);
        lm_quantize_chunk(t, w, plain, 0, M, K, NULL);
        lm_repack_rows(t, plain, packed, M, K);
        for (int isa = 0; isa < LM_ISA_COUNT; isa++) {
            const struct lm_cpu_kernels *kern = lm_cpu_kernels_for((enum lm_cpu_isa)isa);
            if (!kern || !kern->type[t].gemm_x8)
                continue;
            const struct lm_cpu_type_kernels *tk = &kern->type[t];
            lm_from_float_fn enc = tk->gemm_from_float ? tk->gemm_from_float : kern->type[tk->gemm_vt].from_float;
            size_t arow = lm_row_size(tk->gemm_vt, K);
            char *act = malloc(arow * (size_t)N);
            int16_t *sums = calloc((size_t)N * (size_t)(K / 32), sizeof(int16_t));
            for (int c = 0; c < N; c++)
                enc(a + (size_t)c * (size_t)K, act + (size_t)c * arow, K);
            const size_t group = lm_row_size(t, K) * LM_REPACK_ROWS;
            double best = 1e9;
            for (int rep = 0; rep < 7; rep++) {
                double t0 = now();
                /* the loop order of the matmul op (cpu/ops/matmul.c mm_gemm): blocks of
                 * COL_BLOCK columns, each group of the block in calls of <= LM_GEMM_MAX_NC */
                for (int n0 = 0; n0 < N; n0 += COL_BLOCK) {
                    const int n1 = n0 + COL_BLOCK < N ? n0 + COL_BLOCK : N;
                    for (int64_t g = 0; g < M / LM_REPACK_ROWS; g++)
                        for (int j = n0; j < n1; j += LM_GEMM_MAX_NC)
                            tk->gemm_x8(K, out + (size_t)j * (size_t)M + (size_t)g * LM_REPACK_ROWS, (size_t)M,
                                        packed + (size_t)g * group, act + (size_t)j * arow, arow,
                                        sums + (size_t)j * (size_t)(K / 32),
                                        n1 - j < LM_GEMM_MAX_NC ? n1 - j : LM_GEMM_MAX_NC);
                }
                double dt = now() - t0;
                best = dt < best ? dt : best;
            }
            printf("  %-5s %-7s %8.1f GMAC/s\n", lm_type_name(t), lm_cpu_isa_name((enum lm_cpu_isa)isa),
                   (double)K * (double)M * N / best / 1e9);
            if (tk->gemm_panel && K % LM_GEMM_PANEL_K == 0)
                bench_panel(tk, t, K, M, N, packed, a, out);
            free(act);
            free(sums);
        }
        free(plain);
        free(packed);
    }
    free(w);
    free(a);
    free(out);
    return 0;
}
