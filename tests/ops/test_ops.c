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
 *
 * This file holds main and the generators of the element-wise, matrix,
 * copy, RoPE and sort cases; the harness (building, computing, comparing,
 * shape draws) is util_runner.c (ops_runner.h), the attention and training
 * generators are util_gen_attn.c and util_gen_train.c.
 */
#include <math.h>
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
#include "ops_runner.h"

#define ARENA_SIZE ((size_t)64 << 20)

/* ---- element-wise and row ops ---- */

static void gen_elementwise(struct runner *R)
{
    static const enum lm_op bin[] = {LM_OP_ADD, LM_OP_MUL, LM_OP_DIV};
    for (int o = 0; o < 3; o++)
        for (int c = 0; c < 40; c++) {
            struct ut_spec s = ops_spec(UT_K_BINARY, bin[o]);
            ops_random_shape(R, s.ne);
            for (int i = 0; i < 4; i++)
                s.ne2[i] = ops_divisor(R, s.ne[i]);
            s.lay[0] = ut_rng_layout(&R->master);
            s.lay[1] = ut_rng_layout(&R->master);
            s.n[0] = bin[o] != LM_OP_DIV && c % 4 == 3; /* in place */
            ops_run_case(R, &s, B_EXACT);
        }
    static const enum lm_op un[] = {LM_OP_SCALE, LM_OP_SQR, LM_OP_SQRT, LM_OP_CLAMP};
    for (int o = 0; o < 4 + LM_UNARY_COUNT; o++)
        for (int c = 0; c < 16; c++) {
            struct ut_spec s = ops_spec(UT_K_UNARY, o < 4 ? (int)un[o] : LM_OP_COUNT + (o - 4));
            ops_random_shape(R, s.ne);
            s.lay[0] = ut_rng_layout(&R->master);
            s.f[0] = ut_rng_float(&R->master, -2.0f, 2.0f);
            s.f[1] = s.f[0] + ut_rng_float(&R->master, 0.0f, 3.0f);
            bool func = o >= 4 && (o - 4 == LM_UNARY_SILU || o - 4 == LM_UNARY_GELU || o - 4 == LM_UNARY_TANH);
            ops_run_case(R, &s, func ? B_FUNC : B_EXACT);
        }
    static const enum lm_op rows[] = {LM_OP_SUM_ROWS, LM_OP_NORM, LM_OP_RMS_NORM};
    static const int64_t n0[] = {1, 2, 7, 31, 32, 33, 64, 100, 256, 1000, 4096};
    static const float eps[] = {1e-5f, 1e-6f, 0.0f};
    for (int o = 0; o < 3; o++)
        for (int c = 0; c < 24; c++) {
            struct ut_spec s = ops_spec(UT_K_ROWS, rows[o]);
            ops_random_shape(R, s.ne);
            s.ne[0] = PICK(n0);
            if (s.ne[0] >= 1000)
                s.ne[1] = s.ne[2] = s.ne[3] = 1;
            s.lay[0] = ut_rng_layout(&R->master);
            s.f[0] = eps[ops_rint(R, rows[o] == LM_OP_NORM ? 2 : 3)]; /* eps 0 with a 1-wide NORM row is 0/0 */
            ops_run_case(R, &s, B_REDUCE);
        }
}

/* ---- matrix products and gathers ---- */

static void gen_mul_mat(struct runner *R)
{
    static const int64_t ms[] = {1, 2, 3, 4, 7, 8, 9, 16, 17, 33};
    static const int64_t ns[] = {1, 2, 3, 4, 5, 8, 13, 16, 17};
    for (int t = 0; t < N_WEIGHT_TYPES; t++)
        for (int c = 0; c < 24; c++) {
            struct ut_spec s = ops_spec(UT_K_MUL_MAT, 0);
            s.type = ops_weight_types[t];
            const int64_t k = ops_weight_k(R, s.type);
            const bool batch = ops_rint(R, 5) < 2;
            const int64_t a2 = batch ? ops_rint(R, 3) + 1 : 1, a3 = batch ? ops_rint(R, 2) + 1 : 1;
            const int64_t r2 = batch ? ops_rint(R, 2) + 1 : 1, r3 = batch ? ops_rint(R, 2) + 1 : 1;
            const int64_t m = PICK(ms), n = k >= 1024 ? 3 : PICK(ns);
            const int64_t a[4] = {k, m, a2, a3}, b[4] = {k, n, a2 * r2, a3 * r3};
            memcpy(s.ne, a, sizeof a);
            memcpy(s.ne2, b, sizeof b);
            s.lay[0] = ut_rng_layout_rows(&R->master);
            s.lay[1] = ut_rng_layout(&R->master);
            ops_run_case(R, &s, bound_mul_mat(s.type));
        }
}

/* n MUL_MAT_ID cases per weight type with token counts from ts[0..n_ts);
 * every bad_every-th case has some ids out of range. */
static void mul_mat_id_cases(struct runner *R, int n, const int64_t *ts, int n_ts, int bad_every)
{
    for (int t = 0; t < N_WEIGHT_TYPES; t++)
        for (int c = 0; c < n; c++) {
            struct ut_spec s = ops_spec(UT_K_MUL_MAT_ID, 0);
            s.type = ops_weight_types[t];
            const int64_t k = lm_type_blck(s.type) == 1 ? PICK(ops_dim0_list) : lm_type_blck(s.type) * (ops_rint(R, 2) + 1);
            static const int64_t ms[] = {1, 3, 8, 17}, es[] = {1, 2, 3, 5, 8};
            const int64_t e = PICK(es), n_used = ops_rint(R, e < 4 ? e : 4) + 1, nt = ops_pick(R, ts, n_ts);
            const int64_t as[4] = {k, PICK(ms), e, 1}, b[4] = {k, ops_rint(R, 2) ? n_used : 1, nt, 1};
            memcpy(s.ne, as, sizeof as);
            memcpy(s.ne2, b, sizeof b);
            s.n[0] = n_used;
            s.n[1] = c % bad_every == bad_every - 1; /* some ids out of range */
            s.lay[0] = ut_rng_layout_rows(&R->master);
            s.lay[1] = ut_rng_layout(&R->master);
            s.lay[2] = ops_rint(R, 2) ? UT_TRANSPOSE : UT_CONT;
            ops_run_case(R, &s, bound_mul_mat(s.type));
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
            struct ut_spec s = ops_spec(UT_K_MUL_MAT, 0);
            s.type = ops_weight_types[t];
            const int64_t blck = lm_type_blck(s.type);
            const int64_t k = blck == 1 ? 96 : blck == 32 ? PICK(kq) : PICK(kk);
            const bool batch = c == 2;
            const int64_t a[4] = {k, PICK(ms), batch ? 2 : 1, 1}, b[4] = {k, PICK(ns), batch ? 4 : 1, 1};
            memcpy(s.ne, a, sizeof a);
            memcpy(s.ne2, b, sizeof b);
            s.lay[0] = ut_rng_layout_rows(&R->master);
            s.lay[1] = ut_rng_layout(&R->master);
            ops_run_case(R, &s, bound_mul_mat(s.type));
        }
}

static void gen_get_rows(struct runner *R)
{
    static const int64_t rs[] = {1, 3, 7, 16}, ns[] = {1, 2, 5, 9};
    for (int t = 0; t < N_WEIGHT_TYPES; t++)
        for (int c = 0; c < 10; c++) {
            struct ut_spec s = ops_spec(UT_K_GET_ROWS, 0);
            s.type = ops_weight_types[t];
            const int64_t i2 = ops_rint(R, 3) + 1, i3 = ops_rint(R, 2) + 1;
            const int64_t a[4] = {ops_weight_k(R, s.type), PICK(rs), ops_rint(R, 2) ? i2 : 1, ops_rint(R, 2) ? i3 : 1};
            const int64_t ids[4] = {PICK(ns), i2, i3, 1};
            memcpy(s.ne, a, sizeof a);
            memcpy(s.ne2, ids, sizeof ids);
            s.n[0] = c % 4 == 3;
            s.lay[0] = ut_rng_layout_rows(&R->master);
            s.lay[2] = ops_rint(R, 2) ? UT_TRANSPOSE : UT_CONT;
            ops_run_case(R, &s, B_EXACT);
        }
}

/* ---- copies and layout ---- */

/* A destination shape with src's element count: the same, dims 0 and 1
 * merged, or (for non-block types) dims 0 and 1 swapped. */
static void cpy_shape(struct runner *R, const int64_t ne[4], int64_t out[4], bool block)
{
    memcpy(out, ne, 4 * sizeof ne[0]);
    switch (ops_rint(R, 3)) {
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
                struct ut_spec s = ops_spec(UT_K_CPY, 0);
                s.type = ops_float_types[i];
                s.type2 = ops_float_types[j];
                ops_random_shape(R, s.ne);
                cpy_shape(R, s.ne, s.ne2, false);
                s.lay[0] = ut_rng_layout(&R->master);
                s.lay[1] = ut_rng_layout(&R->master);
                ops_run_case(R, &s, B_EXACT);
            }
    for (int t = 3; t < N_WEIGHT_TYPES; t++)
        for (int c = 0; c < 11; c++) {
            struct ut_spec s = ops_spec(UT_K_CPY, 0);
            const bool same = c == 6 || c == 7; /* quantized to the same type: a block copy */
            const bool decode = c >= 8;         /* quantized into F32, F16, BF16 (a quantized K cache shifted) */
            s.type = same || decode ? ops_weight_types[t] : LM_TYPE_F32;
            s.type2 = decode ? ops_float_types[c - 8] : ops_weight_types[t];
            ops_random_shape(R, s.ne);
            s.ne[0] = lm_type_blck(ops_weight_types[t]) * (ops_rint(R, 3) + 1);
            cpy_shape(R, s.ne, s.ne2, true);
            s.lay[0] = same || decode ? (ops_rint(R, 2) ? UT_CONT : UT_RESHAPE) : ut_rng_layout(&R->master);
            s.lay[1] = ut_rng_layout_rows(&R->master);
            ops_run_case(R, &s, B_EXACT);
        }
}

/* SET_ROWS: every weight type as rows of whole blocks, float types also as
 * columns (the V cache); any source layout; some ids out of range. */
static void gen_set_rows(struct runner *R)
{
    static const int64_t ns[] = {1, 4, 7, 64}, tokens[] = {1, 2, 5, 13};
    for (int t = 0; t < N_WEIGHT_TYPES; t++)
        for (int c = 0; c < 8; c++) {
            const bool block = lm_type_blck(ops_weight_types[t]) > 1;
            struct ut_spec s = ops_spec(UT_K_SET_ROWS, !block && c % 2);
            s.type = LM_TYPE_F32;
            s.type2 = ops_weight_types[t];
            s.ne[0] = block ? lm_type_blck(ops_weight_types[t]) * (ops_rint(R, 2) + 1) : PICK(ns);
            s.ne[1] = PICK(tokens);
            s.ne2[0] = s.ne[1] + ops_rint(R, 20);
            s.n[0] = c % 4 == 3;
            s.lay[0] = ut_rng_layout(&R->master);
            s.lay[1] = block ? ut_rng_layout_rows(&R->master) : ut_rng_layout(&R->master);
            ops_run_case(R, &s, B_EXACT);
        }
}

static void gen_cont(struct runner *R)
{
    for (int t = 0; t < N_WEIGHT_TYPES; t++) {
        const bool block = lm_type_blck(ops_weight_types[t]) != 1;
        for (int c = 0; c < (block ? 3 : 14); c++) {
            struct ut_spec s = ops_spec(UT_K_CONT, 0);
            s.type = ops_weight_types[t];
            ops_random_shape(R, s.ne);
            if (block)
                s.ne[0] = lm_type_blck(s.type) * (ops_rint(R, 2) + 1);
            s.lay[0] = block ? ut_rng_layout_rows(&R->master) : ut_rng_layout(&R->master);
            if (!block && c % 3 == 2) { /* lm_cont_2d */
                s.n[0] = 1;
                s.n[1] = s.ne[0] * s.ne[1];
                s.n[2] = s.ne[2] * s.ne[3];
            }
            ops_run_case(R, &s, B_EXACT);
        }
    }
}

static void gen_repeat_concat(struct runner *R)
{
    for (int c = 0; c < 24; c++) {
        struct ut_spec s = ops_spec(UT_K_REPEAT, 0);
        ops_random_shape(R, s.ne);
        for (int i = 0; i < 4; i++)
            s.ne2[i] = s.ne[i] * (ops_rint(R, 3) + 1);
        s.ne2[0] = s.ne[0] * (ops_rint(R, 2) + 1);
        s.lay[0] = ut_rng_layout(&R->master);
        ops_run_case(R, &s, B_EXACT);
    }
    for (int c = 0; c < 32; c++) {
        struct ut_spec s = ops_spec(UT_K_CONCAT, c % 4);
        ops_random_shape(R, s.ne);
        memcpy(s.ne2, s.ne, sizeof s.ne);
        s.ne2[s.sub] = s.sub == 0 ? PICK(ops_dim0_list) : PICK(ops_dim_list);
        s.lay[0] = ut_rng_layout(&R->master);
        s.lay[1] = ut_rng_layout(&R->master);
        ops_run_case(R, &s, B_EXACT);
    }
}

static void gen_rope(struct runner *R)
{
    static const int64_t hd[] = {2, 4, 8, 32, 64, 128};
    static const int64_t toks[] = {1, 2, 5, 7};
    static const float bases[] = {10000.0f, 500000.0f, 1e6f};
    static const int64_t max_pos[] = {16, 512, 1024};
    for (int c = 0; c < 108; c++) {
        struct ut_spec s = ops_spec(UT_K_ROPE, 0);
        const int64_t d = PICK(hd);
        s.ne[0] = d;
        s.ne[1] = PICK(ops_dim_list);
        s.ne[2] = PICK(toks);
        switch (ops_rint(R, 3)) { /* all dims, half (as NeoX-partial models), any even count */
        case 0: s.n[0] = d; break;
        case 1: s.n[0] = d >= 4 ? d / 2 / 2 * 2 : d; break;
        default: s.n[0] = 2 * (ops_rint(R, d / 2) + 1); break;
        }
        s.n[1] = c % 2 ? LM_ROPE_NEOX : LM_ROPE_NORMAL;
        s.n[3] = PICK(max_pos);
        s.f[0] = bases[ops_rint(R, 3)];
        s.f[1] = 1.0f;
        s.f[3] = 1.0f;
        s.f[4] = 32.0f;
        s.f[5] = 1.0f;
        switch (c / 2 % 3) {
        case 1: s.f[1] = 0.5f; break; /* linear position scaling */
        case 2:                        /* YaRN */
            s.f[1] = ops_rint(R, 2) ? 0.25f : 0.125f;
            s.f[2] = ops_rint(R, 2) ? 1.0f : 0.5f;
            s.f[3] = ops_rint(R, 2) ? 1.0f : 0.8f;
            s.n[2] = ops_rint(R, 2) ? 512 : 4096;
            break;
        default: break;
        }
        s.lay[0] = ut_rng_layout(&R->master);
        ops_run_case(R, &s, B_ROPE);
    }
}

static void gen_argsort(struct runner *R)
{
    static const int64_t n0[] = {1, 2, 7, 31, 32, 33, 100, 1000};
    for (int c = 0; c < 48; c++) {
        struct ut_spec s = ops_spec(UT_K_ARGSORT, c % 2);
        s.ne[0] = PICK(n0);
        s.ne[1] = PICK(ops_dim_list);
        s.ne[2] = ops_rint(R, 2) + 1;
        s.n[0] = c % 3 == 2 ? ops_rint(R, s.ne[0]) + 1 : 0; /* top-k */
        s.n[1] = c % 4 < 2;                               /* ties */
        s.lay[0] = ut_rng_layout(&R->master);
        ops_run_case(R, &s, 0.0);
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
    if (R.n_msgs > OPS_MAX_MSGS)
        fprintf(stderr, "(%d more failure messages not shown)\n", R.n_msgs - OPS_MAX_MSGS);
    for (int i = 0; i < N_CPU; i++)
        lm_backend_free(R.other[i]);
    lm_backend_free(R.ref);
    lm_ctx_free(R.ctx);
    return lm_test_summary();
}
