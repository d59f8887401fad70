/* bench_bandwidth.c - the machine's read bandwidth with 1..N threads: each
 * thread streams its share of a buffer far larger than the caches (default
 * 1 GiB) with 256-bit loads (portable 64-bit loads when built without AVX2),
 * best of 5 runs, once on 4 KiB pages and once on the buffer the engine uses
 * for weights (core/memory.h: 2 MiB transparent huge pages where offered).
 * The bound for token generation is bytes of weights per token divided by
 * the larger of the two engine-buffer numbers (docs/performance.md): the
 * plain loop (one stream per thread) and the decode kernels' pattern, where
 * each thread reads STREAMS parts of its share interleaved, 64 bytes of each
 * per step, with software prefetch PREFETCH bytes ahead (gemv_x8 streams 4-8
 * groups so; on Zen 5 and Intel the plain loop read 10-15 % below what
 * decoding streams, docs/performance.md).
 * usage: bench_bandwidth [MiB] [max_threads] */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/memory.h"
#if defined(__AVX2__)
#include <immintrin.h>
#endif

#define STREAMS 8
#define PREFETCH 1024

struct job {
    const uint8_t *p;
    size_t n;
    int streams;  /* parts of [p, p + n) read interleaved, 64 bytes of each per step */
    int prefetch; /* bytes ahead each part is prefetched (0: none) */
    uint64_t sink;
};

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Reads j's range: one plain stream (streams 1, prefetch 0) or the decode
 * pattern. The loads are folded into one xor, which the reads outpace. */
static void *reader(void *arg)
{
    struct job *j = arg;
    const size_t part = j->n / (size_t)j->streams / 64 * 64;
    uint64_t s = 0;
#if defined(__AVX2__)
    __m256i a = _mm256_setzero_si256();
    for (size_t i = 0; i < part; i += 64)
        for (int k = 0; k < j->streams; k++) {
            const uint8_t *q = j->p + (size_t)k * part + i;
            if (j->prefetch)
                __builtin_prefetch(q + j->prefetch, 0, 3);
            a = _mm256_xor_si256(a, _mm256_xor_si256(_mm256_load_si256((const __m256i *)q),
                                                     _mm256_load_si256((const __m256i *)(q + 32))));
        }
    s = (uint64_t)_mm256_extract_epi64(a, 0);
#else
    for (size_t i = 0; i < part; i += 8)
        for (int k = 0; k < j->streams; k++)
            s ^= *(const uint64_t *)(j->p + (size_t)k * part + i);
#endif
    j->sink = s;
    return NULL;
}

/* Best GB/s of 5 passes over buf with nt threads. */
static double measure(const uint8_t *buf, size_t n, int nt, int streams, int prefetch, uint64_t *sink)
{
    double best = 0;
    for (int r = 0; r < 5; r++) {
        pthread_t th[256];
        struct job jobs[256];
        double t0 = now();
        for (int i = 0; i < nt; i++) {
            jobs[i] = (struct job){buf + n / (size_t)nt * (size_t)i, n / (size_t)nt / 64 * 64, streams, prefetch, 0};
            pthread_create(&th[i], NULL, reader, &jobs[i]);
        }
        for (int i = 0; i < nt; i++) {
            pthread_join(th[i], NULL);
            *sink ^= jobs[i].sink;
        }
        double gbs = (double)n / (now() - t0) / 1e9;
        best = gbs > best ? gbs : best;
    }
    return best;
}

int main(int argc, char **argv)
{
    size_t mib = argc > 1 ? (size_t)atol(argv[1]) : 1024;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int max_t = argc > 2 ? atoi(argv[2]) : (int)(cores > 0 ? cores : 1);
    size_t n = mib << 20;
    uint8_t *small = aligned_alloc(64, n), *large = lm_alloc_large(n, 64);
    if (!small || !large || max_t < 1 || max_t > 256) {
        fprintf(stderr, "usage: bench_bandwidth [MiB] [max_threads]\n");
        return 1;
    }
    memset(small, 1, n);
    memset(large, 1, n);
    uint64_t sink = 0;
    for (int nt = 1; nt <= max_t; nt++) {
        const double s4k = measure(small, n, nt, 1, 0, &sink), sl = measure(large, n, nt, 1, 0, &sink);
        const double ss = measure(large, n, nt, STREAMS, PREFETCH, &sink);
        printf("read bandwidth, %d thread%s: %.1f GB/s (4 KiB pages), %.1f GB/s (engine buffers), %.1f GB/s "
               "(engine buffers, %d streams + prefetch)\n",
               nt, nt > 1 ? "s" : "", s4k, sl, ss, STREAMS);
    }
    free(small);
    free(large);
    return sink == 42 ? 2 : 0;
}
