/* util_cpu.h - helpers for the CPU backend tests: a fixed-seed PRNG, buffers
 * at a chosen misalignment, fixture loading, and a graph runner.
 */
#ifndef LM_TEST_UTIL_CPU_H
#define LM_TEST_UTIL_CPU_H

#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"
#include "core/tensor.h"

/* xorshift64* with a fixed seed: the same numbers on every run. */
struct uc_rng {
    uint64_t s;
};
void uc_seed(struct uc_rng *r, uint64_t seed);
uint64_t uc_u64(struct uc_rng *r);
float uc_float(struct uc_rng *r, float lo, float hi); /* uniform [lo, hi) */

/* A buffer of `bytes` whose returned pointer is `misalign` bytes past a
 * 64-byte boundary. Free with uc_free(ptr). */
void *uc_alloc(size_t bytes, size_t misalign);
void uc_free(void *p);

/* The bytes of shared/fixtures/<rel>; *size gets the length. NULL if missing
 * (a message is printed). Caller frees with free(). */
void *uc_fixture(const char *rel, size_t *size);

/* An arena with data (no_alloc = false) of `bytes`. NULL on failure. */
struct lm_ctx *uc_ctx(size_t bytes);

/* Compute the graph of t on be; returns the status. */
lm_status uc_compute(lm_backend_t be, struct lm_ctx *ctx, struct lm_tensor *t);

/* Decode n elements of type t to floats with quant/'s reference decoder
 * (F32: a copy). */
void uc_decode(enum lm_type t, const void *x, float *y, int64_t n);

/* sum_i (|x_i| + max|x| of x_i's block of blk) * |y_i|: the scale of the
 * rounding error of a blocked dot (K-quant mins can cancel inside a block). */
double uc_dot_scale(const float *x, const float *y, int64_t n, int64_t blk);

/* Fill a F32 tensor (any strides) with uniform [lo, hi). */
void uc_fill(struct lm_tensor *t, struct uc_rng *r, float lo, float hi);

#endif
