/* util_runner.c - the harness of test_ops.c (ops_runner.h): building a case
 * afresh per backend with outputs poisoned, computing it (as a device for
 * ref and non-host backends), comparing against ref, recording coverage, and
 * the shape draws the generators share.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu.h"
#include "lm_test.h"
#include "ops_bounds.h"
#include "ops_runner.h"
#include "ref/ref.h"

/* The weight types of MUL_MAT / MUL_MAT_ID / GET_ROWS and the quantized CPY
 * destinations tested. */
const enum lm_type ops_weight_types[OPS_N_WEIGHT_TYPES] = {
    LM_TYPE_F32,  LM_TYPE_F16,  LM_TYPE_BF16, LM_TYPE_Q4_0, LM_TYPE_Q4_1, LM_TYPE_Q5_0, LM_TYPE_Q5_1,
    LM_TYPE_Q8_0, LM_TYPE_Q2_K, LM_TYPE_Q3_K, LM_TYPE_Q4_K, LM_TYPE_Q5_K, LM_TYPE_Q6_K,
};

const enum lm_type ops_float_types[3] = {LM_TYPE_F32, LM_TYPE_F16, LM_TYPE_BF16};

void ops_fail(struct runner *R, const char *fmt, ...)
{
    lm_test_fail++;
    if (R->n_msgs++ >= OPS_MAX_MSGS)
        return;
    va_list ap;
    va_start(ap, fmt);
    fputs("FAIL: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

/* Build the case in the (reset) arena and a graph of it; poison the outputs
 * of the nodes that own memory. NULL on failure (message printed). */
struct lm_graph *ops_build(struct runner *R, const struct ut_spec *sp, uint64_t seed, struct lm_tensor **out,
                              const char *desc)
{
    lm_ctx_reset(R->ctx);
    struct ut_rng r;
    ut_rng_seed(&r, seed);
    struct lm_tensor *t = ut_build(R->ctx, &r, sp);
    struct lm_graph *g = t ? lm_graph_new(R->ctx, 64) : NULL;
    if (!g || lm_graph_expand(g, t) != LM_OK) {
        ops_fail(R, "%s: cannot build: %s", desc, lm_ctx_error(R->ctx));
        return NULL;
    }
    for (int i = 0; i < g->n_nodes; i++) {
        struct lm_tensor *n = g->nodes[i];
        if (!n->view_src && n->data)
            memset(n->data, 0xff, lm_nbytes(n));
    }
    *out = t;
    return g;
}

/* Compute g on be (checking supports_op for every node) and read the output.
 * False on failure (reported), and for a case the CUDA backend leaves to the
 * CPU by design (counted in n_left, not a failure). */
bool ops_compute(struct runner *R, lm_backend_t be, struct lm_graph *g, const struct lm_tensor *out, float *vals,
                    const char *desc)
{
    for (int i = 0; i < g->n_nodes; i++) {
        if (!lm_backend_supports_op(be, g->nodes[i])) {
#ifdef LM_OPS_CUDA
            if (!lm_backend_is_ref(be) && cuda_may_refuse(g->nodes[i])) {
                R->n_left++;
                return false;
            }
#endif
            ops_fail(R, "%s: %s does not support node %s (%s)", desc, lm_backend_name(be),
                     lm_op_name(g->nodes[i]->op), lm_type_name(g->nodes[i]->type));
            return false;
        }
    }
    /* ref holds its tensors in a buffer type of its own: computing it as a
     * device (copies in, results back) checks that path on every machine */
    lm_status st = lm_backend_is_ref(be) || !lm_buft_is_host(lm_backend_default_buft(be)) ? ut_compute_device(be, g)
                                                                                          : lm_backend_graph_compute(be, g);
    if (st) {
        ops_fail(R, "%s: %s graph_compute: %s", desc, lm_backend_name(be), lm_status_str(st));
        return false;
    }
    ut_read(out, vals);
    return true;
}

/* Run one case on ref and on every other backend; compare; record coverage. */
void ops_run_case(struct runner *R, const struct ut_spec *sp, double bound)
{
    char desc[400];
    ut_describe(sp, desc, sizeof desc);
    const uint64_t seed = ut_rng_u64(&R->master);
    struct lm_tensor *out;
    struct lm_graph *g = ops_build(R, sp, seed, &out, desc);
    if (!g)
        return;
    const int64_t n = lm_nelements(out);
    float *want = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    float *got = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    double worst = 0.0;
    bool ok = want && got && ops_compute(R, R->ref, g, out, want, desc);
    for (int64_t i = 0; ok && i < n; i++) {
        if (isnan(want[i])) {
            ops_fail(R, "%s: ref output %lld is NaN", desc, (long long)i);
            ok = false;
        }
    }
    for (int k = 0; ok && k < R->n_other; k++) {
        g = ops_build(R, sp, seed, &out, desc);
#ifndef LM_OPS_REF_ONLY
        lm_cpu_isa_limit((enum lm_cpu_isa)R->isa[k]);
#endif
        if (!g || !ops_compute(R, R->other[k], g, out, got, desc)) {
            ok = false;
            break;
        }
        double e = ut_nmse(got, want, n, matmul_floor(sp, n));
        worst = e > worst ? e : worst;
        if (!(e <= bound)) {
            ops_fail(R, "%s: %s (%d threads, isa %d) nmse %.3g > %.3g", desc, lm_backend_name(R->other[k]), k + 1,
                     R->isa[k], e, bound);
            ok = false;
        }
    }
    if (ok && R->verbose)
        printf("%-10.3g %s\n", worst, desc);
    if (ok) {
        lm_test_pass++;
        R->n_cases++;
        for (int i = 0; i < g->n_nodes; i++)
            ut_cov_add(R->cov, g->nodes[i], worst);
    }
    free(want);
    free(got);
}

/* ATTN case sp (n[1] = 0) against its unfused graph (n[1] = unfused) on
 * backend be with kernel set isa, same inputs; nmse must stay <= bound. */
void ops_run_pair(struct runner *R, const struct ut_spec *sp, int unfused, lm_backend_t be, int isa, double bound)
{
    char desc[400];
    ut_describe(sp, desc, sizeof desc);
    const uint64_t seed = ut_rng_u64(&R->master);
    struct ut_spec su = *sp;
    su.n[1] = unfused;
    struct lm_tensor *out;
    struct lm_graph *g = ops_build(R, sp, seed, &out, desc);
    const int64_t n = g ? lm_nelements(out) : 0;
    float *fused = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    float *plain = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
#ifndef LM_OPS_REF_ONLY
    if (!lm_backend_is_ref(be))
        lm_cpu_isa_limit((enum lm_cpu_isa)isa);
#else
    (void)isa;
#endif
    bool ok = g && fused && plain && ops_compute(R, be, g, out, fused, desc);
    if (ok) {
        g = ops_build(R, &su, seed, &out, desc);
        ok = g && lm_nelements(out) == n && ops_compute(R, be, g, out, plain, desc);
    }
    if (ok) {
        const double e = ut_nmse(fused, plain, n, 0.0);
        const int k = lm_backend_is_ref(be) ? 1 : 0;
        R->pair_worst[k] = e > R->pair_worst[k] ? e : R->pair_worst[k];
        R->n_pairs++;
        R->n_pairs_identical += memcmp(fused, plain, (size_t)n * sizeof(float)) == 0;
        if (!(e <= bound))
            ops_fail(R, "%s: fused vs unfused on %s (isa %d): nmse %.3g > %.3g", desc, lm_backend_name(be), isa, e,
                     bound);
        else
            lm_test_pass++;
    }
    free(fused);
    free(plain);
}

/* ---- shape helpers ---- */

const int64_t ops_dim0_list[11] = {1, 2, 3, 7, 13, 16, 31, 32, 33, 64, 67};
const int64_t ops_dim_list[5] = {1, 2, 3, 5, 7};

int64_t ops_pick(struct runner *R, const int64_t *list, int n) { return ut_rng_pick(&R->master, list, n); }
int64_t ops_rint(struct runner *R, int64_t n) { return ut_rng_int(&R->master, n); }

/* A random shape with ne[0] from ops_dim0_list and small outer dims. */
void ops_random_shape(struct runner *R, int64_t ne[4])
{
    ne[0] = PICK(ops_dim0_list);
    ne[1] = PICK(ops_dim_list);
    ne[2] = ops_rint(R, 3) + 1;
    ne[3] = ops_rint(R, 2) + 1;
}

/* A random ops_divisor of n (1 and n are the likely picks). */
int64_t ops_divisor(struct runner *R, int64_t n)
{
    int64_t d = ops_rint(R, n) + 1;
    while (n % d)
        d--;
    return ops_rint(R, 2) ? n : (ops_rint(R, 2) ? 1 : d);
}

/* Row length for weight type t: multiples of the block, primes and block +- 1 for f32/f16/bf16. */
int64_t ops_weight_k(struct runner *R, enum lm_type t)
{
    static const int64_t kf[] = {1, 2, 7, 13, 16, 31, 32, 33, 64, 65, 127, 256, 1024};
    static const int64_t kq[] = {32, 64, 96, 160, 256, 1024};
    static const int64_t kk[] = {256, 512, 768};
    const int64_t blck = lm_type_blck(t);
    if (blck == 1)
        return PICK(kf);
    return blck == 32 ? PICK(kq) : PICK(kk);
}

struct ut_spec ops_spec(enum ut_kind kind, int sub)
{
    struct ut_spec s;
    memset(&s, 0, sizeof s);
    s.kind = kind;
    s.sub = sub;
    s.type = s.type2 = LM_TYPE_F32;
    for (int i = 0; i < 4; i++)
        s.ne[i] = s.ne2[i] = 1;
    return s;
}
