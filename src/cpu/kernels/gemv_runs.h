/* gemv_runs.h - the plumbing every ISA's gemv_x8 kernels share (kernels.h
 * lm_gemv_fn): a call's groups split into runs of a compile-time group
 * count, and the macro that defines a gemv_x8 from a kernel body for R
 * groups. Plain C (no intrinsics), included by the ISA folders' files.
 */
#ifndef LM_CPU_GEMV_RUNS_H
#define LM_CPU_GEMV_RUNS_H

#include <stddef.h>
#include <stdint.h>

/* The gemv_x8 kernels' split of n groups into runs streamed together: runs
 * of `most` groups (4 or 8), then halving (most / 2, ..., 1) for the rest,
 * so every run has a compile-time group count in the kernel: step(ctx, g,
 * r) computes groups g .. g + r - 1. */
typedef void (*lm_gemv_step)(const void *ctx, int64_t g, int r);
static inline void lm_gemv_runs(int64_t n, int most, lm_gemv_step step, const void *ctx)
{
    int64_t g = 0;
    for (; g + most <= n; g += most)
        step(ctx, g, most);
    for (int r = most / 2; r >= 1; r /= 2)
        if (g + r <= n) {
            step(ctx, g, r);
            g += r;
        }
}

/* A gemv_x8 call's arguments for its steps; n is the length along k in the
 * unit the kernel body counts (blocks, chunks or elements). */
struct lm_gemv_args {
    int64_t n;
    size_t group_bytes;
    const char *x;
    const void *y;
    const int16_t *ysum;
    float *s;
};

/* Defines NAME, a kernels.h lm_gemv_fn, streaming runs of MOST (8 or 4)
 * groups: BODY(ARG, R) is the kernel body for R (a constant) groups, reading
 * `c` (the arguments), `x` (the run's first group) and writing `s` (its
 * first result); N is c->n in terms of k. */
#define LM_GEMV_DEFINE(NAME, MOST, N, BODY, ARG)                                                                  \
    static void NAME##_step(const void *ctx, int64_t g, int r)                                                    \
    {                                                                                                             \
        const struct lm_gemv_args *c = ctx;                                                                       \
        const char *x = c->x + (size_t)g * c->group_bytes;                                                        \
        float *s = c->s + 8 * g;                                                                                  \
        switch (r) {                                                                                              \
        case 8: BODY(ARG, (MOST) >= 8 ? 8 : 1); break;                                                            \
        case 4: BODY(ARG, (MOST) >= 4 ? 4 : 1); break;                                                            \
        case 2: BODY(ARG, 2); break;                                                                              \
        default: BODY(ARG, 1); break;                                                                             \
        }                                                                                                         \
    }                                                                                                             \
    void NAME(int64_t k, int64_t n_groups, size_t group_bytes, float *s, const void *x, const void *y,            \
              const int16_t *ysum)                                                                                \
    {                                                                                                             \
        const struct lm_gemv_args c = {(N), group_bytes, x, y, ysum, s};                                          \
        lm_gemv_runs(n_groups, MOST, NAME##_step, &c);                                                            \
    }

#endif
