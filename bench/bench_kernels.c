/* bench_kernels.c - throughput of the CPU kernels, per type and per ISA.
 *
 * For every weight type with a vec_dot and every kernel set this machine runs,
 * one thread computes dot products of K = 4096 weight rows with one encoded
 * activation row (a GEMV) over two working sets: "cache" (64 rows, stays in
 * L2) reports GFLOP/s of the kernel itself, "stream" (64 MiB of weights)
 * reports the GB/s of weights read, which bounds token generation. It also
 * times each dot type's activation encoder (GB/s of F32 input).
 *
 * Usage: bench_kernels [seconds per case (default 0.2)] [type name filter]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cpu/cpu.h"
#include "cpu/kernels/kernels.h"
#include "quant/quant.h"

#define K 4096

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void fill(float *x, int64_t n, uint64_t seed)
{
    for (int64_t i = 0; i < n; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = (float)((double)(seed >> 40) / (double)(1ull << 24)) * 2.0f - 1.0f;
    }
}

/* Seconds per pass of `rows` dots, best over repeated passes within `budget`. */
static double time_dots(lm_vec_dot_fn dot, const char *w, size_t row_bytes, int64_t rows, const void *y, double budget,
                        float *sink)
{
    double best = 1e30, t_end = now() + budget;
    do {
        double t0 = now();
        float acc = 0.0f, s;
        for (int64_t r = 0; r < rows; r++) {
            dot(K, &s, w + (size_t)r * row_bytes, y);
            acc += s;
        }
        double dt = now() - t0;
        *sink += acc;
        best = dt < best ? dt : best;
    } while (now() < t_end);
    return best;
}

static void bench_type(const struct lm_cpu_kernels *k, enum lm_type t, double budget, float *sink)
{
    const size_t row = lm_row_size(t, K);
    const int64_t stream_rows = (int64_t)((64u << 20) / row);
    const enum lm_type vt = k->type[t].vec_dot_type;
    float *f = malloc(sizeof(float) * K);
    char *w = malloc(row * (size_t)stream_rows);
    void *y = malloc(lm_row_size(vt, K));
    if (!f || !w || !y) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    for (int64_t r = 0; r < stream_rows; r++) {
        fill(f, K, (uint64_t)r + 1);
        if (t == LM_TYPE_F32)
            memcpy(w + (size_t)r * row, f, row);
        else
            lm_quant_traits(t)->from_float(f, w + (size_t)r * row, K);
    }
    fill(f, K, 12345);
    k->type[vt].from_float(f, y, K);
    double tc = time_dots(k->type[t].vec_dot, w, row, 64, y, budget, sink);
    double ts = time_dots(k->type[t].vec_dot, w, row, stream_rows, y, budget, sink);
    printf("%-8s %-8s %-8s %9.1f %11.2f %12.2f %12.2f\n", lm_type_name(t), lm_cpu_isa_name(k->vec_dot_isa[t]),
           lm_type_name(vt), tc / 64 * 1e9, 2.0 * K * 64 / tc * 1e-9, 2.0 * K * (double)stream_rows / ts * 1e-9,
           (double)row * (double)stream_rows / ts * 1e-9);
    free(f);
    free(w);
    free(y);
}

static void bench_encoder(const struct lm_cpu_kernels *k, enum lm_type vt, double budget)
{
    const int64_t n = (int64_t)1 << 20;
    float *x = malloc(sizeof(float) * (size_t)n);
    void *y = malloc(lm_row_size(vt, n));
    fill(x, n, 7);
    double best = 1e30, t_end = now() + budget;
    do {
        double t0 = now();
        k->type[vt].from_float(x, y, n);
        double dt = now() - t0;
        best = dt < best ? dt : best;
    } while (now() < t_end);
    printf("encode f32 -> %-5s %-8s %8.2f GB/s of input\n", lm_type_name(vt),
           lm_cpu_isa_name(k->from_float_isa[vt]), (double)n * 4.0 / best * 1e-9);
    free(x);
    free(y);
}

int main(int argc, char **argv)
{
    double budget = argc > 1 ? atof(argv[1]) : 0.2;
    const char *filter = argc > 2 ? argv[2] : NULL;
    float sink = 0.0f;
    if (budget <= 0.0)
        budget = 0.2;
    printf("best ISA: %s; K = %d, one thread\n", lm_cpu_isa_name(lm_cpu_isa_best()), K);
    for (int isa = 0; isa < LM_ISA_COUNT; isa++) {
        const struct lm_cpu_kernels *k = lm_cpu_kernels_for((enum lm_cpu_isa)isa);
        if (!k)
            continue;
        printf("\n== kernel set %s ==\n", lm_cpu_isa_name((enum lm_cpu_isa)isa));
        printf("%-8s %-8s %-8s %9s %11s %12s %12s\n", "type", "kernel", "dot-type", "ns/row", "GFLOP/s(L2)",
               "GFLOP/s(mem)", "GB/s(mem)");
        for (int t = 0; t < LM_TYPE_COUNT; t++) {
            if (!k->type[t].vec_dot || (filter && strcmp(filter, lm_type_name((enum lm_type)t)) != 0))
                continue;
            bench_type(k, (enum lm_type)t, budget, &sink);
        }
        const enum lm_type enc[] = {LM_TYPE_F16, LM_TYPE_BF16, LM_TYPE_Q8_0, LM_TYPE_Q8_1, LM_TYPE_Q8_K};
        for (int i = 0; i < 5; i++)
            if (!filter || strcmp(filter, lm_type_name(enc[i])) == 0)
                bench_encoder(k, enc[i], budget);
    }
    if (sink == 12345.678f)
        printf("(sink)\n");
    return 0;
}
