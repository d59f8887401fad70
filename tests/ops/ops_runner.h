/* ops_runner.h - the harness of test_ops.c (tests/ops/util_runner.c): a
 * runner holds the reference backend, the backends under test (the CPU with
 * 1, 2 and 3 threads and three kernel sets, or cuda0), the case PRNG and the
 * coverage table; ops_run_case builds one ut_spec on every backend and
 * compares with ref against a bound (ops_bounds.h). The case generators live
 * in test_ops.c and util_gen_*.c by op family.
 */
#ifndef LM_TEST_OPS_RUNNER_H
#define LM_TEST_OPS_RUNNER_H

#include <stdbool.h>
#include <stdint.h>

#include "util_ops.h"

#define OPS_MAX_MSGS 40
#define N_CPU 3

struct runner {
    lm_backend_t ref;
    lm_backend_t other[N_CPU]; /* cpu with 1, 2, 3 threads (or ref again) */
    int isa[N_CPU];            /* the CPU kernel set each one runs with */
    int n_other;
    struct lm_ctx *ctx;
    struct ut_rng master;
    struct ut_cov cov[LM_OP_COUNT];
    int n_cases, n_msgs;
    int n_pairs, n_pairs_identical;  /* ATTN fused vs unfused comparisons */
    int n_left;                      /* CUDA: cases with a node it leaves to the CPU (cuda_may_refuse) */
    double pair_worst[2];            /* worst nmse: [0] cpu vs today's graph, [1] ref vs rounded graph */
    bool verbose; /* LM_OPS_VERBOSE set: print every case with its nmse */
};

/* The weight types of MUL_MAT / MUL_MAT_ID / GET_ROWS and the quantized CPY
 * destinations tested; the float types. */
#define OPS_N_WEIGHT_TYPES 13
#define N_WEIGHT_TYPES OPS_N_WEIGHT_TYPES
extern const enum lm_type ops_weight_types[OPS_N_WEIGHT_TYPES];
extern const enum lm_type ops_float_types[3];
/* ne[0] and outer-dimension picks of random shapes */
extern const int64_t ops_dim0_list[11];
extern const int64_t ops_dim_list[5];

/* Count a failure and print it (the first OPS_MAX_MSGS). */
void ops_fail(struct runner *R, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* Build the case in the (reset) arena and a graph of it, outputs poisoned;
 * NULL on failure (reported). */
struct lm_graph *ops_build(struct runner *R, const struct ut_spec *sp, uint64_t seed, struct lm_tensor **out,
                           const char *desc);
/* Compute g on be and read out into vals; false on failure (reported) and
 * for a node the CUDA backend leaves to the CPU by design. */
bool ops_compute(struct runner *R, lm_backend_t be, struct lm_graph *g, const struct lm_tensor *out, float *vals,
                 const char *desc);
/* One case on ref and every backend under test, nmse <= bound. */
void ops_run_case(struct runner *R, const struct ut_spec *sp, double bound);
/* An ATTN case against its unfused graph on be (kernel set isa). */
void ops_run_pair(struct runner *R, const struct ut_spec *sp, int unfused, lm_backend_t be, int isa, double bound);

/* Draws from the runner's PRNG. */
int64_t ops_pick(struct runner *R, const int64_t *list, int n);
int64_t ops_rint(struct runner *R, int64_t n); /* [0, n) */
#define PICK(list) ops_pick(R, list, (int)(sizeof(list) / sizeof(list[0])))
void ops_random_shape(struct runner *R, int64_t ne[4]);
int64_t ops_divisor(struct runner *R, int64_t n);
int64_t ops_weight_k(struct runner *R, enum lm_type t);
/* A spec of kind and sub with F32 types and unit shapes. */
struct ut_spec ops_spec(enum ut_kind kind, int sub);

/* The generators of util_gen_*.c */
void gen_attention(struct runner *R);
void gen_attn(struct runner *R);
void gen_train(struct runner *R);

#endif
