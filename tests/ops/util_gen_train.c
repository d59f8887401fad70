/* util_gen_train.c - test_ops.c's training ops (the backward ops and the
 * optimizer step) against ref, and bit-reproducible on the CPU: the same
 * case twice on 3 threads gives identical bits, 1 thread too (but
 * CROSS_ENTROPY_LOSS, whose partial sums follow the thread split).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu.h"
#include "lm_test.h"
#include "ops_bounds.h"
#include "ops_runner.h"

/* ---- training ops ---- */

/* Compute case sp n_runs times on cpu backend be (kernel set isa) into
 * out[run] (n floats each); false on failure (message printed). */
static bool cpu_runs(struct runner *R, const struct ut_spec *sp, uint64_t seed, lm_backend_t be, int isa, float **out,
                     int n_runs, int64_t *n, const char *desc)
{
#ifndef LM_OPS_REF_ONLY
    lm_cpu_isa_limit((enum lm_cpu_isa)isa);
#else
    (void)isa;
#endif
    for (int k = 0; k < n_runs; k++) {
        struct lm_tensor *t;
        struct lm_graph *g = ops_build(R, sp, seed, &t, desc);
        if (!g)
            return false;
        *n = lm_nelements(t);
        out[k] = malloc((size_t)(*n > 0 ? *n : 1) * sizeof(float));
        if (!out[k] || !ops_compute(R, be, g, t, out[k], desc))
            return false;
    }
    return true;
}

/* Training ops must be bit-reproducible: the same case twice on 3 threads
 * gives identical bits; all but CROSS_ENTROPY_LOSS (whose per-thread partial
 * sums depend on the split) give the same bits on 1 thread too. */
static void check_repeatable(struct runner *R, const struct ut_spec *sp)
{
    char desc[400];
    ut_describe(sp, desc, sizeof desc);
    const uint64_t seed = ut_rng_u64(&R->master);
    float *v[3] = {NULL, NULL, NULL};
    int64_t n = 0;
    const int isa = R->isa[0];
    bool ok = cpu_runs(R, sp, seed, R->other[2], isa, v, 2, &n, desc) &&
              cpu_runs(R, sp, seed, R->other[0], isa, v + 2, 1, &n, desc);
    if (ok) {
        const size_t bytes = (size_t)n * sizeof(float);
        if (memcmp(v[0], v[1], bytes) != 0)
            ops_fail(R, "%s: two runs on 3 threads differ", desc);
        else if (sp->sub != LM_OP_CROSS_ENTROPY_LOSS && memcmp(v[0], v[2], bytes) != 0)
            ops_fail(R, "%s: 1 and 3 threads differ", desc);
        else
            lm_test_pass++;
    }
    for (int k = 0; k < 3; k++)
        free(v[k]);
}

/* A training case against ref, then its reproducibility on the CPU. */
static void train_case(struct runner *R, const struct ut_spec *s, double bound)
{
    ops_run_case(R, s, bound);
#ifndef LM_OPS_REF_ONLY
    check_repeatable(R, s);
#endif
}

/* Training ops. Bounds: REPEAT_BACK sums in double in flat order on both
 * backends, then rounds once: B_EXACT (expected 0; seen 0). RELU / NEG
 * UNARY_BACK are one f32 product (dy * 0, dy * 1, dy * -1): B_EXACT. SILU /
 * GELU / TANH derivatives are f32 exp/tanh formulas: B_FUNC (the GELU
 * derivative's 1 - t^2 and 1 + t lose a few ulp where t -> -1, still ~1e-6
 * relative at |x| <= 4; seen 2.5e-14). GET_ROWS_BACK (f32 sums of <= 40
 * terms in ascending n; seen 1.5e-14), RMS_NORM_BACK and SOFT_MAX_BACK (in
 * double on the CPU too, as their terms cancel; seen 0),
 * CROSS_ENTROPY_LOSS(_BACK) (exp within 2 ulp, sums in double; seen 0 and
 * 9e-15): REDUCE. ROPE_BACK: as ROPE (seen 1e-9). Row lengths up to 1000,
 * logits up to +-60 (the max subtraction), targets -1 and V, a batch with no
 * valid target (loss 0, zero gradient), ids with repeats and out of range,
 * dy of any layout where the op allows it. */
void gen_train(struct runner *R)
{
    static const int64_t ks[] = {1, 3, 8, 16, 17, 33, 64, 100};
    static const int64_t rs[] = {1, 2, 5, 16};
    static const int64_t ns[] = {1, 4, 9, 40};
    static const enum lm_type likes[] = {LM_TYPE_F32, LM_TYPE_F16, LM_TYPE_Q8_0};
    for (int c = 0; c < 24; c++) {
        struct ut_spec s = ops_spec(UT_K_TRAIN, LM_OP_GET_ROWS_BACK);
        s.type = likes[c % 3];
        const int64_t k = s.type == LM_TYPE_Q8_0 ? 32 * (ops_rint(R, 3) + 1) : PICK(ks);
        const int64_t a[4] = {k, PICK(ns), 1, 1}, like[4] = {k, PICK(rs), 1, 1};
        memcpy(s.ne, a, sizeof a);
        memcpy(s.ne2, like, sizeof like);
        s.n[0] = c % 2; /* out-of-range ids */
        s.lay[0] = ut_rng_layout(&R->master);
        train_case(R, &s, B_REDUCE);
    }
    for (int c = 0; c < 24; c++) {
        struct ut_spec s = ops_spec(UT_K_TRAIN, LM_OP_REPEAT_BACK);
        s.type = c % 4 == 3 ? LM_TYPE_F16 : LM_TYPE_F32;
        ops_random_shape(R, s.ne2);
        for (int i = 0; i < 4; i++)
            s.ne[i] = s.ne2[i] * (ops_rint(R, 3) + 1);
        s.lay[0] = ut_rng_layout(&R->master);
        train_case(R, &s, B_EXACT);
    }
    static const int64_t n0[] = {1, 2, 7, 31, 32, 33, 64, 100, 256, 1000};
    static const float eps[] = {1e-5f, 1e-6f, 0.0f};
    static const float scales[] = {1.0f, 0.125f, 0.3f};
    static const enum lm_op pairs[] = {LM_OP_RMS_NORM_BACK, LM_OP_SOFT_MAX_BACK};
    for (int o = 0; o < 2; o++)
        for (int c = 0; c < 20; c++) {
            struct ut_spec s = ops_spec(UT_K_TRAIN, pairs[o]);
            ops_random_shape(R, s.ne);
            s.ne[0] = PICK(n0);
            if (s.ne[0] >= 256)
                s.ne[2] = s.ne[3] = 1;
            s.lay[0] = ut_rng_layout_rows(&R->master);
            s.lay[1] = ut_rng_layout_rows(&R->master);
            /* eps 0 with a 1-wide row: the exact gradient is 0 and both give rounding noise */
            s.f[0] = o == 0 ? eps[ops_rint(R, s.ne[0] == 1 ? 2 : 3)] : scales[ops_rint(R, 3)];
            train_case(R, &s, B_REDUCE);
        }
    for (int u = 0; u < LM_UNARY_COUNT; u++)
        for (int c = 0; c < 10; c++) {
            struct ut_spec s = ops_spec(UT_K_TRAIN, LM_OP_UNARY_BACK);
            ops_random_shape(R, s.ne);
            s.n[0] = u;
            s.lay[0] = ut_rng_layout_rows(&R->master);
            s.lay[1] = ut_rng_layout_rows(&R->master);
            const bool func = u == LM_UNARY_SILU || u == LM_UNARY_GELU || u == LM_UNARY_TANH;
            train_case(R, &s, func ? B_FUNC : B_EXACT);
        }
    static const int64_t hd[] = {2, 4, 8, 32, 64, 128};
    static const float bases[] = {10000.0f, 500000.0f};
    for (int c = 0; c < 24; c++) {
        struct ut_spec s = ops_spec(UT_K_TRAIN, LM_OP_ROPE_BACK);
        const int64_t d = PICK(hd);
        const int64_t a[4] = {d, PICK(ops_dim_list), ops_rint(R, 5) + 1, 1};
        memcpy(s.ne, a, sizeof a);
        s.n[0] = c % 3 == 0 ? d : 2 * (ops_rint(R, d / 2) + 1); /* partial n_dims */
        s.n[1] = c % 2 ? LM_ROPE_NEOX : LM_ROPE_NORMAL;
        s.n[3] = ops_rint(R, 2) ? 16 : 1024;
        s.f[0] = bases[ops_rint(R, 2)];
        s.f[1] = c % 4 == 2 ? 0.5f : 1.0f;
        s.f[3] = 1.0f;
        s.f[4] = 32.0f;
        s.f[5] = 1.0f;
        if (c % 6 == 5) { /* YaRN */
            s.f[1] = 0.25f;
            s.f[2] = 1.0f;
            s.n[2] = 512;
        }
        s.lay[0] = ut_rng_layout(&R->master);
        train_case(R, &s, B_ROPE);
    }
    static const int64_t vs[] = {1, 2, 7, 32, 33, 100, 1000};
    static const int64_t ts[] = {1, 3, 8, 17};
    for (int o = 0; o < 2; o++)
        for (int c = 0; c < 24; c++) {
            struct ut_spec s = ops_spec(UT_K_TRAIN, o ? LM_OP_CROSS_ENTROPY_LOSS_BACK : LM_OP_CROSS_ENTROPY_LOSS);
            const int64_t a[4] = {PICK(vs), PICK(ts), 1, 1};
            memcpy(s.ne, a, sizeof a);
            s.lay[0] = ut_rng_layout_rows(&R->master);
            s.f[0] = ops_rint(R, 3) ? 4.0f : 60.0f; /* wide logits: the max subtraction matters */
            s.f[1] = ops_rint(R, 2) ? 1.0f : -2.5f;  /* dloss */
            s.n[0] = c % 3 == 1;                  /* some targets -1 or V */
            s.n[1] = c % 12 == 11;                /* no valid target */
            train_case(R, &s, B_REDUCE);
        }
}
