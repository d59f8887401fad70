/* gemv_runs.h - the plumbing every ISA's gemv_x8 kernels share (kernels.h
 * lm_gemv_fn): a call's groups split into runs of a compile-time group
 * count, and the call that runs a file's step function over them. Plain C
 * (no intrinsics), included by the ISA folders' files.
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

/* The first group and the first result of the run starting at group g. */
static inline const char *lm_gemv_group(const struct lm_gemv_args *c, int64_t g)
{
    return c->x + (size_t)g * c->group_bytes;
}
static inline float *lm_gemv_out(const struct lm_gemv_args *c, int64_t g) { return c->s + 8 * g; }

/* The body of a kernels.h lm_gemv_fn streaming runs of `most` (8 or 4)
 * groups: step(ctx, g, r) is the file's step for runs of r groups (a switch
 * over r calling the kernel body with a constant group count, reading its
 * arguments from ctx, a struct lm_gemv_args); n is the length along k in the
 * unit the body counts. */
static inline __attribute__((always_inline)) void lm_gemv_call(lm_gemv_step step, int most, int64_t n, int64_t n_groups,
                                                               size_t group_bytes, float *s, const void *x,
                                                               const void *y, const int16_t *ysum)
{
    const struct lm_gemv_args c = {n, group_bytes, x, y, ysum, s};
    lm_gemv_runs(n_groups, most, step, &c);
}

#endif
