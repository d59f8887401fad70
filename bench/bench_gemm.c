/* bench_gemm.c - single-thread throughput of the repacked GEMM kernels
 * (kernels.h gemm_x8) on a weight matrix that stays in L2 and a tile of
 * activation columns, per type and ISA, in GMAC/s (multiply-adds per second).
 * Columns beyond LM_GEMM_MAX_NC are run in the matmul op's loop order.
 * Where a level has a panel GEMM (AMX: F16, BF16), its line "panel" follows:
 * one call over all rows and columns, as the matmul runs it per thread.
 * usage: bench_gemm [K] [rows] [cols] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cpu/kernels/kernels.h"
#include "cpu/repack.h"
#include "quant/quant.h"

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
    const size_t arow = lm_row_size(tk->panel_vt, K) + 64; /* as the matmul op: rows not 4 KiB apart */
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

int main(int argc, char **argv)
{
    const int64_t K = argc > 1 ? atoll(argv[1]) : 2048, M = argc > 2 ? atoll(argv[2]) : 128;
    const int N = argc > 3 ? atoi(argv[3]) : 16;
    const enum lm_type types[] = {LM_TYPE_Q4_0, LM_TYPE_Q8_0, LM_TYPE_F16, LM_TYPE_BF16, LM_TYPE_F32,
                                  LM_TYPE_Q4_K, LM_TYPE_Q5_K, LM_TYPE_Q6_K};
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
