/* bench_kernels.c - throughput of the CPU kernels, per type and per ISA.
 *
 * For every weight type with a vec_dot and every kernel set this machine runs,
 * one thread computes dot products of K = 4096 weight rows with one encoded
 * activation row (a GEMV), over three working sets:
 *   "hot"    one row, repeated: row + activations stay in L1 (L1/L2 for F32);
 *            GFLOP/s of the kernel itself;
 *   "L2"     ~192 KiB of rows, repeated: stays in L2;
 *   "stream" a weight matrix of 256 MiB (> L3) read once per pass, as one
 *            token's matmuls read the weights: GFLOP/s and GB/s of weight
 *            bytes, and that as a share of the machine's single-thread read
 *            bandwidth (measured first with a plain read loop).
 * Kernels a level inherits unchanged are shown once. Then attention shapes
 * for the float KV-cache types (vec_dot per row vs vec_dot_rows, in L2).
 * Then the activation encoders (GB/s of F32 input) and row decoders (GB/s of
 * F32 output) of each ISA.
 *
 * Timings are the best pass within the budget (the machine may be shared).
 * Usage: bench_kernels [seconds per case (default 0.2)] [type name filter] [stream MiB (default 256)]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cpu/cpu.h"
#include "cpu/kernels/kernels.h"
#include "quant/quant.h"

#define K 4096
#define DISTINCT_ROWS 64

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

static void *xmalloc(size_t n)
{
    void *p = malloc(n);
    if (!p) {
        fprintf(stderr, "out of memory (%zu bytes)\n", n);
        exit(1);
    }
    return p;
}

/* Seconds of one pass over buf (n bytes) with a plain 8-accumulator read
 * loop: the single-thread read bandwidth the dots are compared with. */
static double read_bandwidth(const char *buf, size_t n, double budget, uint64_t *sink)
{
    const uint64_t *p = (const uint64_t *)buf;
    const size_t words = n / 8;
    double best = 1e30, t_end = now() + budget;
    int passes = 0;
    do {
        double t0 = now();
        uint64_t a[8] = {0};
        for (size_t i = 0; i + 8 <= words; i += 8)
            for (int j = 0; j < 8; j++)
                a[j] += p[i + j];
        double dt = now() - t0;
        for (int j = 0; j < 8; j++)
            *sink += a[j];
        best = dt < best ? dt : best;
    } while (++passes < 2 || now() < t_end);
    return best;
}

/* Seconds per pass of `rows` dots over w (row r at w + (r % wrap) * row_bytes),
 * best over passes within `budget` (at least two). */
static double time_dots(lm_vec_dot_fn dot, const char *w, size_t row_bytes, int64_t rows, int64_t wrap,
                        const void *y, double budget, float *sink)
{
    double best = 1e30, t_end = now() + budget;
    int passes = 0;
    do {
        double t0 = now();
        float acc = 0.0f, s;
        for (int64_t r = 0; r < rows; r++) {
            dot(K, &s, w + (size_t)(r % wrap) * row_bytes, y);
            acc += s;
        }
        double dt = now() - t0;
        *sink += acc;
        best = dt < best ? dt : best;
    } while (++passes < 2 || now() < t_end);
    return best;
}

/* One weight row of K floats encoded as t (IQ2: with a unit importance matrix,
 * the only way they encode). */
static void encode_row(enum lm_type t, const float *f, void *dst)
{
    if (!lm_quantize_requires_imatrix(t)) {
        lm_quant_traits(t)->from_float(f, dst, K);
        return;
    }
    float *ones = xmalloc(sizeof(float) * K);
    for (int64_t i = 0; i < K; i++)
        ones[i] = 1.0f;
    lm_quantize_chunk(t, f, dst, 0, 1, K, ones);
    free(ones);
}

/* The stream matrix: DISTINCT_ROWS encoded rows replicated to fill w. */
static int64_t make_matrix(enum lm_type t, char *w, size_t bytes)
{
    const size_t row = lm_row_size(t, K);
    const int64_t rows = (int64_t)(bytes / row);
    float *f = xmalloc(sizeof(float) * K);
    for (int64_t r = 0; r < DISTINCT_ROWS; r++) {
        fill(f, K, (uint64_t)r + 1);
        if (t == LM_TYPE_F32)
            memcpy(w + (size_t)r * row, f, row);
        else
            encode_row(t, f, w + (size_t)r * row);
    }
    for (int64_t r = DISTINCT_ROWS; r < rows; r++)
        memcpy(w + (size_t)r * row, w + (size_t)(r % DISTINCT_ROWS) * row, row);
    free(f);
    return rows;
}

/* True when a lower available level has the same vec_dot and vec_dot_rows
 * for t (a level that inherits them: shown once, under the kernel's name). */
static bool same_as_lower(int isa, enum lm_type t)
{
    const struct lm_cpu_kernels *k = lm_cpu_kernels_for((enum lm_cpu_isa)isa);
    for (int j = 0; j < isa; j++) {
        const struct lm_cpu_kernels *l = lm_cpu_kernels_for((enum lm_cpu_isa)j);
        if (l && l->type[t].vec_dot == k->type[t].vec_dot && l->type[t].vec_dot_rows == k->type[t].vec_dot_rows)
            return true;
    }
    return false;
}

static void bench_type(enum lm_type t, char *w, size_t wbytes, double bw, double budget, float *sink)
{
    const size_t row = lm_row_size(t, K);
    const int64_t rows = make_matrix(t, w, wbytes);
    const int64_t l2_rows = (int64_t)((192u << 10) / row) > 0 ? (int64_t)((192u << 10) / row) : 1;
    float *f = xmalloc(sizeof(float) * K);
    fill(f, K, 12345);
    for (int isa = 0; isa < LM_ISA_COUNT; isa++) {
        const struct lm_cpu_kernels *k = lm_cpu_kernels_for((enum lm_cpu_isa)isa);
        if (!k || !k->type[t].vec_dot || same_as_lower(isa, t))
            continue;
        const enum lm_type vt = k->type[t].vec_dot_type;
        void *y = xmalloc(lm_row_size(vt, K));
        k->type[vt].from_float(f, y, K);
        const lm_vec_dot_fn dot = k->type[t].vec_dot;
        const double th = time_dots(dot, w, row, 256, 1, y, budget / 3, sink) / 256;
        const double t2 = time_dots(dot, w, row, 4 * l2_rows, l2_rows, y, budget / 3, sink) / (4.0 * (double)l2_rows);
        const double ts = time_dots(dot, w, row, rows, rows, y, budget, sink);
        const double gbs = (double)row * (double)rows / ts * 1e-9;
        printf("%-6s %-8s %-6s %8.1f %9.2f %9.2f %10.2f %9.2f %6.0f%%\n", lm_type_name(t),
               lm_cpu_isa_name(k->vec_dot_isa[t]), lm_type_name(vt), th * 1e9, 2.0 * K / th * 1e-9,
               2.0 * K / t2 * 1e-9, 2.0 * K * (double)rows / ts * 1e-9, gbs, 100.0 * gbs / bw);
        free(y);
    }
    free(f);
}

/* Seconds per call of nr dots of n elements (rows bx bytes apart, one y):
 * vec_dot per row, or vec_dot_rows when `rows`; best over passes. */
static double time_rows(const struct lm_cpu_type_kernels *tk, bool rows, int64_t n, int64_t nr, const char *x,
                        size_t bx, const void *y, double budget, float *out)
{
    double best = 1e30, t_end = now() + budget;
    int passes = 0;
    do {
        double t0 = now();
        for (int rep = 0; rep < 16; rep++) {
            if (rows)
                tk->vec_dot_rows(n, nr, out, x, bx, y);
            else
                for (int64_t r = 0; r < nr; r++)
                    tk->vec_dot(n, &out[r], x + (size_t)r * bx, y);
        }
        double dt = (now() - t0) / 16;
        best = dt < best ? dt : best;
    } while (++passes < 2 || now() < t_end);
    return best;
}

/* Attention shapes over an L2-resident KV cache of type t (F32, F16, BF16):
 * "K" = one query against 512 key rows of 128 (head dim), "V" = 128 value
 * channels over 1024 cells; GFLOP/s of vec_dot per row and of vec_dot_rows. */
static void bench_rows(enum lm_type t, double budget)
{
    static const struct { const char *name; int64_t n, nr; } shapes[] = {{"K", 128, 512}, {"V", 1024, 128}};
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        const int64_t n = shapes[si].n, nr = shapes[si].nr;
        const size_t bx = lm_row_size(t, n);
        char *x = xmalloc(bx * (size_t)nr);
        float *f = xmalloc(sizeof(float) * (size_t)n), *out = xmalloc(sizeof(float) * (size_t)nr);
        for (int64_t r = 0; r < nr; r++) {
            fill(f, n, (uint64_t)r + 99);
            if (t == LM_TYPE_F32)
                memcpy(x + (size_t)r * bx, f, bx);
            else
                lm_quant_traits(t)->from_float(f, x + (size_t)r * bx, n);
        }
        fill(f, n, 4321);
        for (int isa = 0; isa < LM_ISA_COUNT; isa++) {
            const struct lm_cpu_kernels *k = lm_cpu_kernels_for((enum lm_cpu_isa)isa);
            if (!k || same_as_lower(isa, t))
                continue;
            const struct lm_cpu_type_kernels *tk = &k->type[t];
            void *y = xmalloc(lm_row_size(tk->vec_dot_type, n));
            tk->from_float(f, y, n);
            const double flop = 2.0 * (double)n * (double)nr;
            const double td = time_rows(tk, false, n, nr, x, bx, y, budget / 2, out);
            printf("%-6s %-8s %s n=%-5lld rows=%-4lld vec_dot %7.2f GF/s", lm_type_name(t),
                   lm_cpu_isa_name(k->vec_dot_isa[t]), shapes[si].name, (long long)n, (long long)nr, flop / td * 1e-9);
            if (tk->vec_dot_rows) {
                const double tr = time_rows(tk, true, n, nr, x, bx, y, budget / 2, out);
                printf("   vec_dot_rows %7.2f GF/s", flop / tr * 1e-9);
            }
            printf("\n");
            free(y);
        }
        free(x);
        free(f);
        free(out);
    }
}

/* GB/s of F32 through a from_float (input) or to_float (output) of n elements. */
static void bench_conv(const struct lm_cpu_kernels *k, enum lm_type t, bool encode, double budget)
{
    const int64_t n = (int64_t)1 << 20;
    float *x = xmalloc(sizeof(float) * (size_t)n);
    void *q = xmalloc(lm_row_size(t, n));
    fill(x, n, 7);
    k->type[t].from_float(x, q, n);
    double best = 1e30, t_end = now() + budget;
    do {
        double t0 = now();
        if (encode)
            k->type[t].from_float(x, q, n);
        else
            k->type[t].to_float(q, x, n);
        double dt = now() - t0;
        best = dt < best ? dt : best;
    } while (now() < t_end);
    printf("%s %-5s %-8s %8.2f GB/s of f32\n", encode ? "encode f32 ->" : "decode f32 <-", lm_type_name(t),
           lm_cpu_isa_name(encode ? k->from_float_isa[t] : k->to_float_isa[t]), (double)n * 4.0 / best * 1e-9);
    free(x);
    free(q);
}

int main(int argc, char **argv)
{
    double budget = argc > 1 ? atof(argv[1]) : 0.2;
    const char *filter = argc > 2 && strcmp(argv[2], "all") != 0 ? argv[2] : NULL;
    const size_t mib = argc > 3 && atoi(argv[3]) > 0 ? (size_t)atoi(argv[3]) : 256;
    float sink = 0.0f;
    uint64_t isink = 0;
    if (budget <= 0.0)
        budget = 0.2;
    const size_t wbytes = mib << 20;
    char *w = xmalloc(wbytes);
    memset(w, 1, wbytes);
    const double bw = (double)wbytes / read_bandwidth(w, wbytes, budget, &isink) * 1e-9;
    printf("best ISA: %s; K = %d, one thread; stream matrix %zu MiB\n", lm_cpu_isa_name(lm_cpu_isa_best()), K, mib);
    printf("single-thread read bandwidth (plain read loop): %.2f GB/s\n\n", bw);
    printf("%-6s %-8s %-6s %8s %9s %9s %10s %9s %7s\n", "type", "kernel", "dot", "ns/row", "GF/s hot", "GF/s L2",
           "GF/s strm", "GB/s strm", "of bw");
    for (int t = 0; t < LM_TYPE_COUNT; t++) {
        const struct lm_cpu_kernels *g = lm_cpu_kernels_for(LM_ISA_GENERIC);
        if (!g->type[t].vec_dot || (filter && strcmp(filter, lm_type_name((enum lm_type)t)) != 0))
            continue;
        bench_type((enum lm_type)t, w, wbytes, bw, budget, &sink);
    }
    printf("\n== attention shapes (L2), one thread ==\n");
    const enum lm_type rows_types[] = {LM_TYPE_F16, LM_TYPE_BF16, LM_TYPE_F32};
    for (int i = 0; i < 3; i++)
        if (!filter || strcmp(filter, lm_type_name(rows_types[i])) == 0)
            bench_rows(rows_types[i], budget);
    const enum lm_type enc[] = {LM_TYPE_F16, LM_TYPE_BF16, LM_TYPE_Q8_0, LM_TYPE_Q8_1, LM_TYPE_Q8_K};
    const enum lm_type dec[] = {LM_TYPE_F16,  LM_TYPE_BF16, LM_TYPE_Q4_0, LM_TYPE_Q4_1, LM_TYPE_Q5_0, LM_TYPE_Q5_1,
                                LM_TYPE_Q8_0, LM_TYPE_Q2_K, LM_TYPE_Q3_K, LM_TYPE_Q4_K, LM_TYPE_Q5_K, LM_TYPE_Q6_K};
    for (int isa = 0; isa < LM_ISA_COUNT; isa++) {
        const struct lm_cpu_kernels *k = lm_cpu_kernels_for((enum lm_cpu_isa)isa);
        if (!k)
            continue;
        printf("\n== conversions, kernel set %s ==\n", lm_cpu_isa_name((enum lm_cpu_isa)isa));
        for (int i = 0; i < 5; i++)
            if (!filter || strcmp(filter, lm_type_name(enc[i])) == 0)
                bench_conv(k, enc[i], true, budget / 2);
        for (size_t i = 0; i < sizeof dec / sizeof dec[0]; i++)
            if (!filter || strcmp(filter, lm_type_name(dec[i])) == 0)
                bench_conv(k, dec[i], false, budget / 2);
    }
    free(w);
    if (sink == 12345.678f || isink == 42)
        printf("(sink)\n");
    return 0;
}
