/* test_ops.c - every op on the CPU backend (1, 2 and 3 threads) against the
 * ref backend, over many random shapes, layouts and types. The three CPU runs
 * also use different kernel sets (lm_cpu_isa_limit): the best one, generic C,
 * and the level below the best (generic again on an AVX2-only machine).
 *
 * Each case is a ut_spec (util_ops.h) drawn from a fixed-seed PRNG; its graph
 * is built afresh per backend from the same data seed, node outputs are
 * poisoned with NaN bytes before compute (so an element an op forgets to
 * write is caught), and the CPU's output is compared with ref's by normalised
 * MSE, nmse = sum((cpu - ref)^2) / sum(ref^2), against a bound per op and type
 * (ops_bounds.h has the bounds and their reasons); integer outputs
 * (ARGSORT, TOP_K) must be equal. At the end a coverage table lists every op
 * with the cases and types run and the worst nmse seen; an op of enum lm_op
 * that no case ran fails the test.
 *
 * Training ops (gen_train) must also be bit-reproducible on the CPU: the same
 * case twice on 3 threads gives identical bits, and (all but
 * CROSS_ENTROPY_LOSS, whose partial sums follow the thread split) 1 thread
 * gives those bits too.
 *
 * ATTN (fused attention) is also held to the graph it replaces: on every CPU
 * configuration against today's unfused graph (MUL_MAT, SOFT_MAX, MUL_MAT,
 * PERMUTE, CONT) on the same inputs, and on ref against the unfused graph with
 * the roundings of q and p made explicit by CPYs (see gen_attn).
 *
 * LM_OPS_VERBOSE=1 in the environment prints every case with its nmse;
 * LM_OPS_SEED=n draws other cases (the default seed is fixed).
 * Built with -DLM_OPS_REF_ONLY the harness runs ref against a second ref run
 * (for use before a CPU backend exists). Built with -DLM_OPS_CUDA (ctest
 * cuda/test_cuda_ops) it runs every case on cuda0 instead of the CPU, with
 * the same bounds, but the training ops (which the CPU computes in a CUDA
 * build) and B_ATTN_CUDA for fused vs unfused; it exits 77 (skipped) without
 * a GPU. A backend whose memory is not host memory gets its inputs through
 * ut_compute_device; ref is always computed that way too, so that path is
 * tested on every machine. Runtime: about a second in a release
 * build; the case counts are sized for < 60 s under ASan on 2 cores.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu.h"
#ifdef LM_OPS_CUDA
#include "cuda/cuda.h"
#endif
#include "lm_test.h"
#include "quant/quant.h"
#include "ref/ref.h"
#include "ops_bounds.h"
#include "util_ops.h"

#define ARENA_SIZE ((size_t)64 << 20)
#define MAX_MSGS 40
#define N_CPU 3

/* The weight types of MUL_MAT / MUL_MAT_ID / GET_ROWS and the quantized CPY
 * destinations tested. */
static const enum lm_type weight_types[] = {
    LM_TYPE_F32,  LM_TYPE_F16,  LM_TYPE_BF16, LM_TYPE_Q4_0, LM_TYPE_Q4_1, LM_TYPE_Q5_0, LM_TYPE_Q5_1,
    LM_TYPE_Q8_0, LM_TYPE_Q2_K, LM_TYPE_Q3_K, LM_TYPE_Q4_K, LM_TYPE_Q5_K, LM_TYPE_Q6_K,
};
#define N_WEIGHT_TYPES ((int)(sizeof weight_types / sizeof weight_types[0]))

static const enum lm_type float_types[] = {LM_TYPE_F32, LM_TYPE_F16, LM_TYPE_BF16};

/* ---- the runner ---- */

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

static void fail_msg(struct runner *R, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

static void fail_msg(struct runner *R, const char *fmt, ...)
{
    lm_test_fail++;
    if (R->n_msgs++ >= MAX_MSGS)
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
static struct lm_graph *build(struct runner *R, const struct ut_spec *sp, uint64_t seed, struct lm_tensor **out,
                              const char *desc)
{
    lm_ctx_reset(R->ctx);
    struct ut_rng r;
    ut_rng_seed(&r, seed);
    struct lm_tensor *t = ut_build(R->ctx, &r, sp);
    struct lm_graph *g = t ? lm_graph_new(R->ctx, 64) : NULL;
    if (!g || lm_graph_expand(g, t) != LM_OK) {
        fail_msg(R, "%s: cannot build: %s", desc, lm_ctx_error(R->ctx));
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
static bool compute(struct runner *R, lm_backend_t be, struct lm_graph *g, const struct lm_tensor *out, float *vals,
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
            fail_msg(R, "%s: %s does not support node %s (%s)", desc, lm_backend_name(be),
                     lm_op_name(g->nodes[i]->op), lm_type_name(g->nodes[i]->type));
            return false;
        }
    }
    /* ref holds its tensors in a buffer type of its own: computing it as a
     * device (copies in, results back) checks that path on every machine */
    lm_status st = lm_backend_is_ref(be) || !lm_buft_is_host(lm_backend_default_buft(be)) ? ut_compute_device(be, g)
                                                                                          : lm_backend_graph_compute(be, g);
    if (st) {
        fail_msg(R, "%s: %s graph_compute: %s", desc, lm_backend_name(be), lm_status_str(st));
        return false;
    }
    ut_read(out, vals);
    return true;
}

/* Run one case on ref and on every other backend; compare; record coverage. */
static void run_case(struct runner *R, const struct ut_spec *sp, double bound)
{
    char desc[400];
    ut_describe(sp, desc, sizeof desc);
    const uint64_t seed = ut_rng_u64(&R->master);
    struct lm_tensor *out;
    struct lm_graph *g = build(R, sp, seed, &out, desc);
    if (!g)
        return;
    const int64_t n = lm_nelements(out);
    float *want = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    float *got = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    double worst = 0.0;
    bool ok = want && got && compute(R, R->ref, g, out, want, desc);
    for (int64_t i = 0; ok && i < n; i++) {
        if (isnan(want[i])) {
            fail_msg(R, "%s: ref output %lld is NaN", desc, (long long)i);
            ok = false;
        }
    }
    for (int k = 0; ok && k < R->n_other; k++) {
        g = build(R, sp, seed, &out, desc);
#ifndef LM_OPS_REF_ONLY
        lm_cpu_isa_limit((enum lm_cpu_isa)R->isa[k]);
#endif
        if (!g || !compute(R, R->other[k], g, out, got, desc)) {
            ok = false;
            break;
        }
        double e = ut_nmse(got, want, n, matmul_floor(sp, n));
        worst = e > worst ? e : worst;
        if (!(e <= bound)) {
            fail_msg(R, "%s: %s (%d threads, isa %d) nmse %.3g > %.3g", desc, lm_backend_name(R->other[k]), k + 1,
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
static void run_pair(struct runner *R, const struct ut_spec *sp, int unfused, lm_backend_t be, int isa, double bound)
{
    char desc[400];
    ut_describe(sp, desc, sizeof desc);
    const uint64_t seed = ut_rng_u64(&R->master);
    struct ut_spec su = *sp;
    su.n[1] = unfused;
    struct lm_tensor *out;
    struct lm_graph *g = build(R, sp, seed, &out, desc);
    const int64_t n = g ? lm_nelements(out) : 0;
    float *fused = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    float *plain = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
#ifndef LM_OPS_REF_ONLY
    if (!lm_backend_is_ref(be))
        lm_cpu_isa_limit((enum lm_cpu_isa)isa);
#else
    (void)isa;
#endif
    bool ok = g && fused && plain && compute(R, be, g, out, fused, desc);
    if (ok) {
        g = build(R, &su, seed, &out, desc);
        ok = g && lm_nelements(out) == n && compute(R, be, g, out, plain, desc);
    }
    if (ok) {
        const double e = ut_nmse(fused, plain, n, 0.0);
        const int k = lm_backend_is_ref(be) ? 1 : 0;
        R->pair_worst[k] = e > R->pair_worst[k] ? e : R->pair_worst[k];
        R->n_pairs++;
        R->n_pairs_identical += memcmp(fused, plain, (size_t)n * sizeof(float)) == 0;
        if (!(e <= bound))
            fail_msg(R, "%s: fused vs unfused on %s (isa %d): nmse %.3g > %.3g", desc, lm_backend_name(be), isa, e,
                     bound);
        else
            lm_test_pass++;
    }
    free(fused);
    free(plain);
}

/* ---- shape helpers ---- */

static const int64_t dim0_list[] = {1, 2, 3, 7, 13, 16, 31, 32, 33, 64, 67};
static const int64_t dim_list[] = {1, 2, 3, 5, 7};

static int64_t pick(struct runner *R, const int64_t *list, int n) { return ut_rng_pick(&R->master, list, n); }
static int64_t rint_(struct runner *R, int64_t n) { return ut_rng_int(&R->master, n); }
#define PICK(list) pick(R, list, (int)(sizeof(list) / sizeof(list[0])))

/* A random shape with ne[0] from dim0_list and small outer dims. */
static void random_shape(struct runner *R, int64_t ne[4])
{
    ne[0] = PICK(dim0_list);
    ne[1] = PICK(dim_list);
    ne[2] = rint_(R, 3) + 1;
    ne[3] = rint_(R, 2) + 1;
}

/* A random divisor of n (1 and n are the likely picks). */
static int64_t divisor(struct runner *R, int64_t n)
{
    int64_t d = rint_(R, n) + 1;
    while (n % d)
        d--;
    return rint_(R, 2) ? n : (rint_(R, 2) ? 1 : d);
}

/* Row length for weight type t: multiples of the block, primes and block +- 1 for f32/f16/bf16. */
static int64_t weight_k(struct runner *R, enum lm_type t)
{
    static const int64_t kf[] = {1, 2, 7, 13, 16, 31, 32, 33, 64, 65, 127, 256, 1024};
    static const int64_t kq[] = {32, 64, 96, 160, 256, 1024};
    static const int64_t kk[] = {256, 512, 768};
    const int64_t blck = lm_type_blck(t);
    if (blck == 1)
        return PICK(kf);
    return blck == 32 ? PICK(kq) : PICK(kk);
}

static struct ut_spec spec(enum ut_kind kind, int sub)
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

/* ---- element-wise and row ops ---- */

static void gen_elementwise(struct runner *R)
{
    static const enum lm_op bin[] = {LM_OP_ADD, LM_OP_MUL, LM_OP_DIV};
    for (int o = 0; o < 3; o++)
        for (int c = 0; c < 40; c++) {
            struct ut_spec s = spec(UT_K_BINARY, bin[o]);
            random_shape(R, s.ne);
            for (int i = 0; i < 4; i++)
                s.ne2[i] = divisor(R, s.ne[i]);
            s.lay[0] = ut_rng_layout(&R->master);
            s.lay[1] = ut_rng_layout(&R->master);
            s.n[0] = bin[o] != LM_OP_DIV && c % 4 == 3; /* in place */
            run_case(R, &s, B_EXACT);
        }
    static const enum lm_op un[] = {LM_OP_SCALE, LM_OP_SQR, LM_OP_SQRT, LM_OP_CLAMP};
    for (int o = 0; o < 4 + LM_UNARY_COUNT; o++)
        for (int c = 0; c < 16; c++) {
            struct ut_spec s = spec(UT_K_UNARY, o < 4 ? (int)un[o] : LM_OP_COUNT + (o - 4));
            random_shape(R, s.ne);
            s.lay[0] = ut_rng_layout(&R->master);
            s.f[0] = ut_rng_float(&R->master, -2.0f, 2.0f);
            s.f[1] = s.f[0] + ut_rng_float(&R->master, 0.0f, 3.0f);
            bool func = o >= 4 && (o - 4 == LM_UNARY_SILU || o - 4 == LM_UNARY_GELU || o - 4 == LM_UNARY_TANH);
            run_case(R, &s, func ? B_FUNC : B_EXACT);
        }
    static const enum lm_op rows[] = {LM_OP_SUM_ROWS, LM_OP_NORM, LM_OP_RMS_NORM};
    static const int64_t n0[] = {1, 2, 7, 31, 32, 33, 64, 100, 256, 1000, 4096};
    static const float eps[] = {1e-5f, 1e-6f, 0.0f};
    for (int o = 0; o < 3; o++)
        for (int c = 0; c < 24; c++) {
            struct ut_spec s = spec(UT_K_ROWS, rows[o]);
            random_shape(R, s.ne);
            s.ne[0] = PICK(n0);
            if (s.ne[0] >= 1000)
                s.ne[1] = s.ne[2] = s.ne[3] = 1;
            s.lay[0] = ut_rng_layout(&R->master);
            s.f[0] = eps[rint_(R, rows[o] == LM_OP_NORM ? 2 : 3)]; /* eps 0 with a 1-wide NORM row is 0/0 */
            run_case(R, &s, B_REDUCE);
        }
}

/* ---- matrix products and gathers ---- */

static void gen_mul_mat(struct runner *R)
{
    static const int64_t ms[] = {1, 2, 3, 4, 7, 8, 9, 16, 17, 33};
    static const int64_t ns[] = {1, 2, 3, 4, 5, 8, 13, 16, 17};
    for (int t = 0; t < N_WEIGHT_TYPES; t++)
        for (int c = 0; c < 24; c++) {
            struct ut_spec s = spec(UT_K_MUL_MAT, 0);
            s.type = weight_types[t];
            const int64_t k = weight_k(R, s.type);
            const bool batch = rint_(R, 5) < 2;
            const int64_t a2 = batch ? rint_(R, 3) + 1 : 1, a3 = batch ? rint_(R, 2) + 1 : 1;
            const int64_t r2 = batch ? rint_(R, 2) + 1 : 1, r3 = batch ? rint_(R, 2) + 1 : 1;
            const int64_t m = PICK(ms), n = k >= 1024 ? 3 : PICK(ns);
            const int64_t a[4] = {k, m, a2, a3}, b[4] = {k, n, a2 * r2, a3 * r3};
            memcpy(s.ne, a, sizeof a);
            memcpy(s.ne2, b, sizeof b);
            s.lay[0] = ut_rng_layout_rows(&R->master);
            s.lay[1] = ut_rng_layout(&R->master);
            run_case(R, &s, bound_mul_mat(s.type));
        }
}

/* n MUL_MAT_ID cases per weight type with token counts from ts[0..n_ts);
 * every bad_every-th case has some ids out of range. */
static void mul_mat_id_cases(struct runner *R, int n, const int64_t *ts, int n_ts, int bad_every)
{
    for (int t = 0; t < N_WEIGHT_TYPES; t++)
        for (int c = 0; c < n; c++) {
            struct ut_spec s = spec(UT_K_MUL_MAT_ID, 0);
            s.type = weight_types[t];
            const int64_t k = lm_type_blck(s.type) == 1 ? PICK(dim0_list) : lm_type_blck(s.type) * (rint_(R, 2) + 1);
            static const int64_t ms[] = {1, 3, 8, 17}, es[] = {1, 2, 3, 5, 8};
            const int64_t e = PICK(es), n_used = rint_(R, e < 4 ? e : 4) + 1, nt = pick(R, ts, n_ts);
            const int64_t as[4] = {k, PICK(ms), e, 1}, b[4] = {k, rint_(R, 2) ? n_used : 1, nt, 1};
            memcpy(s.ne, as, sizeof as);
            memcpy(s.ne2, b, sizeof b);
            s.n[0] = n_used;
            s.n[1] = c % bad_every == bad_every - 1; /* some ids out of range */
            s.lay[0] = ut_rng_layout_rows(&R->master);
            s.lay[1] = ut_rng_layout(&R->master);
            s.lay[2] = rint_(R, 2) ? UT_TRANSPOSE : UT_CONT;
            run_case(R, &s, bound_mul_mat(s.type));
        }
}

static void gen_mul_mat_id(struct runner *R)
{
    static const int64_t ts[] = {1, 2, 3, 7};
    mul_mat_id_cases(R, 10, ts, 4, 4);
}

/* MUL_MAT_ID batches of 9 to 64 tokens: more than the CUDA backend's matvec
 * takes, so there the grouped path (pairs sorted by expert, one GEMM per
 * expert), with experts often left without pairs. Run after every other
 * generator, so that the cases drawn before it was added keep their draws. */
static void gen_mul_mat_id_batch(struct runner *R)
{
    static const int64_t ts[] = {9, 12, 16, 33, 64};
    mul_mat_id_cases(R, 4, ts, 5, 2);
}

/* MUL_MAT batches of 9 to 65 columns over more rows than one of CUDA's MMQ
 * blocks (64) and K past one of its tiles (256): the MMQ path there
 * (quantized weights, up to 64 columns), its tiles cut at every edge, and
 * the GEMM path just past it. Run last, like gen_mul_mat_id_batch. */
static void gen_mul_mat_batch(struct runner *R)
{
    static const int64_t ms[] = {63, 64, 65, 130}, ns[] = {9, 16, 17, 32, 33, 64, 65};
    static const int64_t kq[] = {32, 288, 544}, kk[] = {256, 768};
    for (int t = 0; t < N_WEIGHT_TYPES; t++)
        for (int c = 0; c < 3; c++) {
            struct ut_spec s = spec(UT_K_MUL_MAT, 0);
            s.type = weight_types[t];
            const int64_t blck = lm_type_blck(s.type);
            const int64_t k = blck == 1 ? 96 : blck == 32 ? PICK(kq) : PICK(kk);
            const bool batch = c == 2;
            const int64_t a[4] = {k, PICK(ms), batch ? 2 : 1, 1}, b[4] = {k, PICK(ns), batch ? 4 : 1, 1};
            memcpy(s.ne, a, sizeof a);
            memcpy(s.ne2, b, sizeof b);
            s.lay[0] = ut_rng_layout_rows(&R->master);
            s.lay[1] = ut_rng_layout(&R->master);
            run_case(R, &s, bound_mul_mat(s.type));
        }
}

static void gen_get_rows(struct runner *R)
{
    static const int64_t rs[] = {1, 3, 7, 16}, ns[] = {1, 2, 5, 9};
    for (int t = 0; t < N_WEIGHT_TYPES; t++)
        for (int c = 0; c < 10; c++) {
            struct ut_spec s = spec(UT_K_GET_ROWS, 0);
            s.type = weight_types[t];
            const int64_t i2 = rint_(R, 3) + 1, i3 = rint_(R, 2) + 1;
            const int64_t a[4] = {weight_k(R, s.type), PICK(rs), rint_(R, 2) ? i2 : 1, rint_(R, 2) ? i3 : 1};
            const int64_t ids[4] = {PICK(ns), i2, i3, 1};
            memcpy(s.ne, a, sizeof a);
            memcpy(s.ne2, ids, sizeof ids);
            s.n[0] = c % 4 == 3;
            s.lay[0] = ut_rng_layout_rows(&R->master);
            s.lay[2] = rint_(R, 2) ? UT_TRANSPOSE : UT_CONT;
            run_case(R, &s, B_EXACT);
        }
}

/* ---- copies and layout ---- */

/* A destination shape with src's element count: the same, dims 0 and 1
 * merged, or (for non-block types) dims 0 and 1 swapped. */
static void cpy_shape(struct runner *R, const int64_t ne[4], int64_t out[4], bool block)
{
    memcpy(out, ne, 4 * sizeof ne[0]);
    switch (rint_(R, 3)) {
    case 1:
        out[0] = ne[0] * ne[1];
        out[1] = ne[2];
        out[2] = ne[3];
        out[3] = 1;
        break;
    case 2:
        if (!block) {
            out[0] = ne[1];
            out[1] = ne[0];
        }
        break;
    default: break;
    }
}

static void gen_cpy(struct runner *R)
{
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++)
            for (int c = 0; c < 8; c++) {
                struct ut_spec s = spec(UT_K_CPY, 0);
                s.type = float_types[i];
                s.type2 = float_types[j];
                random_shape(R, s.ne);
                cpy_shape(R, s.ne, s.ne2, false);
                s.lay[0] = ut_rng_layout(&R->master);
                s.lay[1] = ut_rng_layout(&R->master);
                run_case(R, &s, B_EXACT);
            }
    for (int t = 3; t < N_WEIGHT_TYPES; t++)
        for (int c = 0; c < 11; c++) {
            struct ut_spec s = spec(UT_K_CPY, 0);
            const bool same = c == 6 || c == 7; /* quantized to the same type: a block copy */
            const bool decode = c >= 8;         /* quantized into F32, F16, BF16 (a quantized K cache shifted) */
            s.type = same || decode ? weight_types[t] : LM_TYPE_F32;
            s.type2 = decode ? float_types[c - 8] : weight_types[t];
            random_shape(R, s.ne);
            s.ne[0] = lm_type_blck(weight_types[t]) * (rint_(R, 3) + 1);
            cpy_shape(R, s.ne, s.ne2, true);
            s.lay[0] = same || decode ? (rint_(R, 2) ? UT_CONT : UT_RESHAPE) : ut_rng_layout(&R->master);
            s.lay[1] = ut_rng_layout_rows(&R->master);
            run_case(R, &s, B_EXACT);
        }
}

/* SET_ROWS: every weight type as rows of whole blocks, float types also as
 * columns (the V cache); any source layout; some ids out of range. */
static void gen_set_rows(struct runner *R)
{
    static const int64_t ns[] = {1, 4, 7, 64}, tokens[] = {1, 2, 5, 13};
    for (int t = 0; t < N_WEIGHT_TYPES; t++)
        for (int c = 0; c < 8; c++) {
            const bool block = lm_type_blck(weight_types[t]) > 1;
            struct ut_spec s = spec(UT_K_SET_ROWS, !block && c % 2);
            s.type = LM_TYPE_F32;
            s.type2 = weight_types[t];
            s.ne[0] = block ? lm_type_blck(weight_types[t]) * (rint_(R, 2) + 1) : PICK(ns);
            s.ne[1] = PICK(tokens);
            s.ne2[0] = s.ne[1] + rint_(R, 20);
            s.n[0] = c % 4 == 3;
            s.lay[0] = ut_rng_layout(&R->master);
            s.lay[1] = block ? ut_rng_layout_rows(&R->master) : ut_rng_layout(&R->master);
            run_case(R, &s, B_EXACT);
        }
}

static void gen_cont(struct runner *R)
{
    for (int t = 0; t < N_WEIGHT_TYPES; t++) {
        const bool block = lm_type_blck(weight_types[t]) != 1;
        for (int c = 0; c < (block ? 3 : 14); c++) {
            struct ut_spec s = spec(UT_K_CONT, 0);
            s.type = weight_types[t];
            random_shape(R, s.ne);
            if (block)
                s.ne[0] = lm_type_blck(s.type) * (rint_(R, 2) + 1);
            s.lay[0] = block ? ut_rng_layout_rows(&R->master) : ut_rng_layout(&R->master);
            if (!block && c % 3 == 2) { /* lm_cont_2d */
                s.n[0] = 1;
                s.n[1] = s.ne[0] * s.ne[1];
                s.n[2] = s.ne[2] * s.ne[3];
            }
            run_case(R, &s, B_EXACT);
        }
    }
}

static void gen_repeat_concat(struct runner *R)
{
    for (int c = 0; c < 24; c++) {
        struct ut_spec s = spec(UT_K_REPEAT, 0);
        random_shape(R, s.ne);
        for (int i = 0; i < 4; i++)
            s.ne2[i] = s.ne[i] * (rint_(R, 3) + 1);
        s.ne2[0] = s.ne[0] * (rint_(R, 2) + 1);
        s.lay[0] = ut_rng_layout(&R->master);
        run_case(R, &s, B_EXACT);
    }
    for (int c = 0; c < 32; c++) {
        struct ut_spec s = spec(UT_K_CONCAT, c % 4);
        random_shape(R, s.ne);
        memcpy(s.ne2, s.ne, sizeof s.ne);
        s.ne2[s.sub] = s.sub == 0 ? PICK(dim0_list) : PICK(dim_list);
        s.lay[0] = ut_rng_layout(&R->master);
        s.lay[1] = ut_rng_layout(&R->master);
        run_case(R, &s, B_EXACT);
    }
}

/* ---- attention pieces ---- */

static void gen_attention(struct runner *R)
{
    for (int c = 0; c < 20; c++) {
        struct ut_spec s = spec(UT_K_DIAG_MASK, 0);
        random_shape(R, s.ne);
        s.n[0] = rint_(R, 4) == 0 ? s.ne[0] : rint_(R, 4);
        s.lay[0] = ut_rng_layout(&R->master);
        run_case(R, &s, B_EXACT);
    }
    static const int64_t kv[] = {1, 2, 7, 16, 31, 32, 33, 100, 256};
    static const int64_t heads[] = {1, 2, 4, 5, 8};
    static const float scales[] = {1.0f, 0.125f, 0.3f};
    static const float biases[] = {8.0f, 2.5f};
    for (int c = 0; c < 96; c++) {
        struct ut_spec s = spec(UT_K_SOFT_MAX, c % 4);
        s.ne[0] = PICK(kv);
        s.ne[1] = PICK(dim_list);
        s.ne[2] = c % 8 >= 6 ? 5 : PICK(heads); /* 5 heads: the ALiBi m1 branch */
        s.ne[3] = rint_(R, 2) + 1;
        s.n[0] = s.ne[1] + rint_(R, 3); /* mask rows >= n_q (padded, as llama.cpp pads them) */
        s.f[0] = scales[rint_(R, 3)];
        s.f[1] = (s.sub && c % 8 >= 4) ? biases[rint_(R, 2)] : 0.0f;
        s.lay[0] = ut_rng_layout(&R->master);
        run_case(R, &s, B_REDUCE);
    }
}

/* ---- fused attention ---- */

/* One ATTN case against ref, then (rows never all hidden) fused vs unfused
 * on ref and on every CPU configuration. */
static void attn_case(struct runner *R, struct ut_spec *s)
{
    run_case(R, s, bound_attn(s->type, s->type2));
    if (s->sub == 5)
        return; /* an all -inf row: the unfused softmax gives NaN, ATTN zeros */
    run_pair(R, s, 2, R->ref, 0, B_ATTN_REF);
#if defined(LM_OPS_CUDA)
    run_pair(R, s, 1, R->other[0], R->isa[0], B_ATTN_CUDA);
#elif !defined(LM_OPS_REF_ONLY)
    for (int k = 0; k < R->n_other; k++)
        run_pair(R, s, 1, R->other[k], R->isa[k], s->n[2] ? B_ATTN_CPU_VROWS : B_ATTN_CPU);
#endif
}

/* ATTN cases' query counts, cell counts and ALiBi max_bias values */
static const int64_t attn_qs[] = {1, 7, 64, 1, 3};
static const int64_t attn_kvs[] = {32, 64, 256, 33, 1, 100};
static const float attn_biases[] = {8.0f, 2.5f};

/* An ATTN case over caches of blocks (spec s with its types and layout
 * flag set): d and d_v, 1-2 kv heads with GQA 1 or 4, random cell counts,
 * query counts kept small, padded caches half the time. */
static void attn_block_case(struct runner *R, struct ut_spec *s, int64_t d, int64_t d_v)
{
    const int64_t hkv = rint_(R, 2) + 1, nh = hkv * (rint_(R, 2) ? 4 : 1), n_kv = PICK(attn_kvs);
    const int64_t nq = (d + d_v) * nh * n_kv > 400000 ? 1 : PICK(attn_qs);
    const int64_t q[4] = {d, nq, nh, 1}, kv[4] = {n_kv, d_v, hkv, 1};
    memcpy(s->ne, q, sizeof q);
    memcpy(s->ne2, kv, sizeof kv);
    s->n[0] = nq + rint_(R, 3);
    s->f[0] = 1.0f / sqrtf((float)d);
    s->f[1] = s->sub == 2 ? attn_biases[rint_(R, 2)] : 0.0f;
    s->lay[0] = rint_(R, 2) ? UT_PERMUTE : ut_rng_layout(&R->master);
    s->lay[1] = rint_(R, 2) ? UT_PAD : UT_CONT;
    attn_case(R, s);
}

static void gen_attn(struct runner *R)
{
    static const int64_t ds[] = {8, 64, 128, 7, 64};
    static const enum lm_type types[] = {LM_TYPE_F16, LM_TYPE_F32, LM_TYPE_BF16};
    for (int c = 0; c < 72; c++) {
        struct ut_spec s = spec(UT_K_ATTN, c % 6);
        s.type = s.type2 = types[c / 6 % 3];
        if (c % 12 == 11)
            s.type2 = types[(c / 6 + 1) % 3]; /* k and v of different types */
        const int64_t d = PICK(ds), ratio = rint_(R, 2) ? 4 : 1;
        int64_t hkv = rint_(R, 2) + 1, nq = PICK(attn_qs);
        const int64_t n_kv = PICK(attn_kvs);
        const bool alibi = s.sub == 2 || (s.sub && c % 8 == 7);
        int64_t nh = ratio * hkv;
        if (alibi) { /* 5 heads: the m1 branch of the slopes */
            hkv = rint_(R, 2) ? 5 : 1;
            nh = 5;
        }
        const int64_t d_v = rint_(R, 4) ? d : PICK(ds);
        /* keep the ref's double loops (and ASan runs) short */
        if (nq * nh * n_kv * (d + d_v) > 1500000)
            nq = 7;
        if (nq * nh * n_kv * (d + d_v) > 1500000)
            nq = 1;
        const int64_t q[4] = {d, nq, nh, 1}, kv[4] = {n_kv, d_v, hkv, 1};
        memcpy(s.ne, q, sizeof q);
        memcpy(s.ne2, kv, sizeof kv);
        s.n[0] = nq + rint_(R, 3); /* padded mask rows */
        s.f[0] = rint_(R, 3) ? 1.0f / sqrtf((float)d) : (rint_(R, 2) ? 1.0f : 0.3f);
        s.f[1] = alibi ? attn_biases[rint_(R, 2)] : 0.0f;
        s.lay[0] = rint_(R, 2) ? UT_PERMUTE : ut_rng_layout(&R->master);
        s.lay[1] = rint_(R, 2) ? UT_PAD : UT_CONT;
        attn_case(R, &s);
    }
    /* a Q8_0 K cache (rows of whole blocks) with each float V type */
    static const int64_t qds[] = {32, 64, 128};
    for (int c = 0; c < 12; c++) {
        struct ut_spec s = spec(UT_K_ATTN, c % 4);
        s.type = LM_TYPE_Q8_0;
        s.type2 = types[c % 3];
        const int64_t d = PICK(qds);
        attn_block_case(R, &s, d, d);
    }
    /* a Q8_0 V cache of rows per cell (lm_attn_vrows) under F16 and Q8_0 K,
     * every mask kind (4 and 5: holes, the gathered tiles), padded caches */
    for (int c = 0; c < 18; c++) {
        struct ut_spec s = spec(UT_K_ATTN, c % 6);
        s.type = c % 3 == 2 ? LM_TYPE_Q8_0 : LM_TYPE_F16;
        s.type2 = LM_TYPE_Q8_0;
        s.n[2] = 1;
        const int64_t d = PICK(qds), d_v = rint_(R, 3) ? d : PICK(qds);
        attn_block_case(R, &s, d, d_v);
    }
    /* model-sized (d, n_q, n_head, n_kv, n_head_kv): a prompt over a padded
     * cache with GQA 4, a short batch with d 128, a decode step with GQA 8;
     * then prompts over a Q8_0 K (the transposed-K scores: d 64 and 128);
     * then (8..11) at depth 4096 (issue 20's depth: a decode step with
     * GQA 8 and a 16-token batch, causal and with the holes of interleaved
     * sequences, F16 and Q8_0 caches) */
    static const int64_t big[][5] = {{64, 64, 4, 256, 1}, {128, 7, 4, 256, 1}, {64, 1, 32, 256, 4},
                                     {64, 40, 4, 200, 1}, {128, 9, 8, 100, 2}, {64, 1, 32, 256, 4},
                                     {64, 40, 4, 200, 1}, {128, 1, 8, 300, 2}, {64, 1, 32, 4096, 4},
                                     {64, 16, 8, 4096, 2}, {64, 1, 32, 4096, 4}, {64, 16, 8, 4096, 2}};
    for (int c = 0; c < 12; c++) {
        struct ut_spec s = spec(UT_K_ATTN, c >= 8 && c % 2 ? 4 : 1);
        s.type = c < 3 || c == 5 || c == 8 || c == 9 ? LM_TYPE_F16 : LM_TYPE_Q8_0;
        s.type2 = c < 5 || c == 8 || c == 9 ? LM_TYPE_F16 : LM_TYPE_Q8_0; /* 5..7, 10, 11: a Q8_0 V of rows per cell */
        s.n[2] = s.type2 == LM_TYPE_Q8_0;
        const int64_t q[4] = {big[c][0], big[c][1], big[c][2], 1}, kv[4] = {big[c][3], big[c][0], big[c][4], 1};
        memcpy(s.ne, q, sizeof q);
        memcpy(s.ne2, kv, sizeof kv);
        s.n[0] = big[c][1];
        s.f[0] = 1.0f / sqrtf((float)big[c][0]);
        s.lay[0] = UT_PERMUTE;
        s.lay[1] = UT_PAD;
        attn_case(R, &s);
    }
}

static void gen_rope(struct runner *R)
{
    static const int64_t hd[] = {2, 4, 8, 32, 64, 128};
    static const int64_t toks[] = {1, 2, 5, 7};
    static const float bases[] = {10000.0f, 500000.0f, 1e6f};
    static const int64_t max_pos[] = {16, 512, 1024};
    for (int c = 0; c < 108; c++) {
        struct ut_spec s = spec(UT_K_ROPE, 0);
        const int64_t d = PICK(hd);
        s.ne[0] = d;
        s.ne[1] = PICK(dim_list);
        s.ne[2] = PICK(toks);
        switch (rint_(R, 3)) { /* all dims, half (as NeoX-partial models), any even count */
        case 0: s.n[0] = d; break;
        case 1: s.n[0] = d >= 4 ? d / 2 / 2 * 2 : d; break;
        default: s.n[0] = 2 * (rint_(R, d / 2) + 1); break;
        }
        s.n[1] = c % 2 ? LM_ROPE_NEOX : LM_ROPE_NORMAL;
        s.n[3] = PICK(max_pos);
        s.f[0] = bases[rint_(R, 3)];
        s.f[1] = 1.0f;
        s.f[3] = 1.0f;
        s.f[4] = 32.0f;
        s.f[5] = 1.0f;
        switch (c / 2 % 3) {
        case 1: s.f[1] = 0.5f; break; /* linear position scaling */
        case 2:                        /* YaRN */
            s.f[1] = rint_(R, 2) ? 0.25f : 0.125f;
            s.f[2] = rint_(R, 2) ? 1.0f : 0.5f;
            s.f[3] = rint_(R, 2) ? 1.0f : 0.8f;
            s.n[2] = rint_(R, 2) ? 512 : 4096;
            break;
        default: break;
        }
        s.lay[0] = ut_rng_layout(&R->master);
        run_case(R, &s, B_ROPE);
    }
}

static void gen_argsort(struct runner *R)
{
    static const int64_t n0[] = {1, 2, 7, 31, 32, 33, 100, 1000};
    for (int c = 0; c < 48; c++) {
        struct ut_spec s = spec(UT_K_ARGSORT, c % 2);
        s.ne[0] = PICK(n0);
        s.ne[1] = PICK(dim_list);
        s.ne[2] = rint_(R, 2) + 1;
        s.n[0] = c % 3 == 2 ? rint_(R, s.ne[0]) + 1 : 0; /* top-k */
        s.n[1] = c % 4 < 2;                               /* ties */
        s.lay[0] = ut_rng_layout(&R->master);
        run_case(R, &s, 0.0);
    }
}

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
        struct lm_graph *g = build(R, sp, seed, &t, desc);
        if (!g)
            return false;
        *n = lm_nelements(t);
        out[k] = malloc((size_t)(*n > 0 ? *n : 1) * sizeof(float));
        if (!out[k] || !compute(R, be, g, t, out[k], desc))
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
            fail_msg(R, "%s: two runs on 3 threads differ", desc);
        else if (sp->sub != LM_OP_CROSS_ENTROPY_LOSS && memcmp(v[0], v[2], bytes) != 0)
            fail_msg(R, "%s: 1 and 3 threads differ", desc);
        else
            lm_test_pass++;
    }
    for (int k = 0; k < 3; k++)
        free(v[k]);
}

/* A training case against ref, then its reproducibility on the CPU. */
static void train_case(struct runner *R, const struct ut_spec *s, double bound)
{
    run_case(R, s, bound);
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
static void gen_train(struct runner *R)
{
    static const int64_t ks[] = {1, 3, 8, 16, 17, 33, 64, 100};
    static const int64_t rs[] = {1, 2, 5, 16};
    static const int64_t ns[] = {1, 4, 9, 40};
    static const enum lm_type likes[] = {LM_TYPE_F32, LM_TYPE_F16, LM_TYPE_Q8_0};
    for (int c = 0; c < 24; c++) {
        struct ut_spec s = spec(UT_K_TRAIN, LM_OP_GET_ROWS_BACK);
        s.type = likes[c % 3];
        const int64_t k = s.type == LM_TYPE_Q8_0 ? 32 * (rint_(R, 3) + 1) : PICK(ks);
        const int64_t a[4] = {k, PICK(ns), 1, 1}, like[4] = {k, PICK(rs), 1, 1};
        memcpy(s.ne, a, sizeof a);
        memcpy(s.ne2, like, sizeof like);
        s.n[0] = c % 2; /* out-of-range ids */
        s.lay[0] = ut_rng_layout(&R->master);
        train_case(R, &s, B_REDUCE);
    }
    for (int c = 0; c < 24; c++) {
        struct ut_spec s = spec(UT_K_TRAIN, LM_OP_REPEAT_BACK);
        s.type = c % 4 == 3 ? LM_TYPE_F16 : LM_TYPE_F32;
        random_shape(R, s.ne2);
        for (int i = 0; i < 4; i++)
            s.ne[i] = s.ne2[i] * (rint_(R, 3) + 1);
        s.lay[0] = ut_rng_layout(&R->master);
        train_case(R, &s, B_EXACT);
    }
    static const int64_t n0[] = {1, 2, 7, 31, 32, 33, 64, 100, 256, 1000};
    static const float eps[] = {1e-5f, 1e-6f, 0.0f};
    static const float scales[] = {1.0f, 0.125f, 0.3f};
    static const enum lm_op pairs[] = {LM_OP_RMS_NORM_BACK, LM_OP_SOFT_MAX_BACK};
    for (int o = 0; o < 2; o++)
        for (int c = 0; c < 20; c++) {
            struct ut_spec s = spec(UT_K_TRAIN, pairs[o]);
            random_shape(R, s.ne);
            s.ne[0] = PICK(n0);
            if (s.ne[0] >= 256)
                s.ne[2] = s.ne[3] = 1;
            s.lay[0] = ut_rng_layout_rows(&R->master);
            s.lay[1] = ut_rng_layout_rows(&R->master);
            /* eps 0 with a 1-wide row: the exact gradient is 0 and both give rounding noise */
            s.f[0] = o == 0 ? eps[rint_(R, s.ne[0] == 1 ? 2 : 3)] : scales[rint_(R, 3)];
            train_case(R, &s, B_REDUCE);
        }
    for (int u = 0; u < LM_UNARY_COUNT; u++)
        for (int c = 0; c < 10; c++) {
            struct ut_spec s = spec(UT_K_TRAIN, LM_OP_UNARY_BACK);
            random_shape(R, s.ne);
            s.n[0] = u;
            s.lay[0] = ut_rng_layout_rows(&R->master);
            s.lay[1] = ut_rng_layout_rows(&R->master);
            const bool func = u == LM_UNARY_SILU || u == LM_UNARY_GELU || u == LM_UNARY_TANH;
            train_case(R, &s, func ? B_FUNC : B_EXACT);
        }
    static const int64_t hd[] = {2, 4, 8, 32, 64, 128};
    static const float bases[] = {10000.0f, 500000.0f};
    for (int c = 0; c < 24; c++) {
        struct ut_spec s = spec(UT_K_TRAIN, LM_OP_ROPE_BACK);
        const int64_t d = PICK(hd);
        const int64_t a[4] = {d, PICK(dim_list), rint_(R, 5) + 1, 1};
        memcpy(s.ne, a, sizeof a);
        s.n[0] = c % 3 == 0 ? d : 2 * (rint_(R, d / 2) + 1); /* partial n_dims */
        s.n[1] = c % 2 ? LM_ROPE_NEOX : LM_ROPE_NORMAL;
        s.n[3] = rint_(R, 2) ? 16 : 1024;
        s.f[0] = bases[rint_(R, 2)];
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
            struct ut_spec s = spec(UT_K_TRAIN, o ? LM_OP_CROSS_ENTROPY_LOSS_BACK : LM_OP_CROSS_ENTROPY_LOSS);
            const int64_t a[4] = {PICK(vs), PICK(ts), 1, 1};
            memcpy(s.ne, a, sizeof a);
            s.lay[0] = ut_rng_layout_rows(&R->master);
            s.f[0] = rint_(R, 3) ? 4.0f : 60.0f; /* wide logits: the max subtraction matters */
            s.f[1] = rint_(R, 2) ? 1.0f : -2.5f;  /* dloss */
            s.n[0] = c % 3 == 1;                  /* some targets -1 or V */
            s.n[1] = c % 12 == 11;                /* no valid target */
            train_case(R, &s, B_REDUCE);
        }
}

int main(void)
{
    static struct runner R;
    struct lm_ctx_params p = {.mem_size = ARENA_SIZE, .no_alloc = false};
    CHECK(lm_ctx_new(&p, &R.ctx) == LM_OK);
    CHECK(lm_ref_backend_new(&R.ref) == LM_OK);
#ifdef LM_OPS_CUDA
    if (lm_cuda_device_count() == 0) {
        printf("SKIP: no CUDA device (CUDA backend built; the test runs where a GPU is present)\n");
        lm_backend_free(R.ref);
        lm_ctx_free(R.ctx);
        return 77;
    }
    char dev[160];
    lm_cuda_device_desc(0, dev, sizeof dev);
    printf("cuda0: %s\n", dev);
    CHECK(lm_cuda_backend_reg(0)->init(&R.other[0]) == LM_OK);
    R.isa[0] = (int)lm_cpu_isa_best();
    R.n_other = 1;
#else
    R.n_other = N_CPU;
#endif
    for (int i = 0; i < N_CPU && R.n_other == N_CPU; i++) {
#ifdef LM_OPS_REF_ONLY
        CHECK(lm_ref_backend_new(&R.other[i]) == LM_OK);
#else
        CHECK(lm_cpu_backend_new(i + 1, &R.other[i]) == LM_OK);
        /* 1 thread: the best kernels; 2: generic C; 3: the level below best */
        const int best = (int)lm_cpu_isa_best();
        R.isa[i] = i == 0 ? best : i == 1 ? LM_ISA_GENERIC : (best > 0 ? best - 1 : best);
#endif
    }
    R.verbose = getenv("LM_OPS_VERBOSE") != NULL;
    const char *seed = getenv("LM_OPS_SEED");
    ut_rng_seed(&R.master, seed ? strtoull(seed, NULL, 0) : 0x1a31a0f5eedull);
    if (!lm_test_fail) {
        gen_elementwise(&R);
        gen_mul_mat(&R);
        gen_mul_mat_id(&R);
        gen_get_rows(&R);
        gen_cpy(&R);
        gen_set_rows(&R);
        gen_cont(&R);
        gen_repeat_concat(&R);
        gen_attention(&R);
        gen_rope(&R);
        gen_argsort(&R);
        gen_attn(&R);
#ifndef LM_OPS_CUDA
        gen_train(&R);
#else
        (void)gen_train; /* training ops run on the CPU (the CUDA backend refuses them) */
#endif
        gen_mul_mat_id_batch(&R);
        gen_mul_mat_batch(&R);
    }
#if defined(LM_OPS_CUDA)
    printf("%d cases compared: ref vs cuda0; %d left to the CPU by design (quantized CPY sources, K-quant CPY "
           "destinations, K-quant SET_ROWS destinations)\n", R.n_cases, R.n_left);
#elif !defined(LM_OPS_REF_ONLY)
    lm_cpu_isa_limit(lm_cpu_isa_best());
    printf("%d cases compared: ref vs cpu with 1 thread (%s kernels), 2 (%s), 3 (%s)\n", R.n_cases,
           lm_cpu_isa_name((enum lm_cpu_isa)R.isa[0]), lm_cpu_isa_name((enum lm_cpu_isa)R.isa[1]),
           lm_cpu_isa_name((enum lm_cpu_isa)R.isa[2]));
#else
    printf("%d cases compared: ref vs ref\n", R.n_cases);
#endif
    printf("ATTN fused vs unfused: %d comparisons, %d bit-identical; worst nmse cpu vs today's graph %.3g, "
           "ref vs rounded graph %.3g\n", R.n_pairs, R.n_pairs_identical, R.pair_worst[0], R.pair_worst[1]);
    int missing = ut_cov_print(R.cov);
#ifdef LM_OPS_CUDA
    printf("(%d ops not run on CUDA: the training ops, which the CPU computes)\n", missing);
#else
    CHECKF(missing == 0, "%d ops of enum lm_op were never tested", missing);
#endif
    if (R.n_msgs > MAX_MSGS)
        fprintf(stderr, "(%d more failure messages not shown)\n", R.n_msgs - MAX_MSGS);
    for (int i = 0; i < N_CPU; i++)
        lm_backend_free(R.other[i]);
    lm_backend_free(R.ref);
    lm_ctx_free(R.ctx);
    return lm_test_summary();
}
