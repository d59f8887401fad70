/* test_profile.c - the per-op profiler (core/profile.h) in the CPU executor.
 *
 * A small llama-like block (RMS_NORM x w, three MUL_MATs, SiLU x up, ADD)
 * computed with 1 and 2 threads, node fusion on and off:
 *  - profiling changes no output byte (and every variant gives the same bytes);
 *  - with it on, each op's row counts its nodes times the computes (a fused
 *    pair as one row "RMS_NORM+MUL" / "UNARY+MUL"), with positive wall and
 *    busy time and thread_ns = wall x threads; with it off nothing is recorded;
 *  - thread indices past LM_PROFILE_MAX_THREADS are ignored.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/profile.h"
#include "cpu/cpu.h"
#include "cpu/cpu_internal.h"
#include "lm_test.h"
#include "util_cpu.h"

#define K 64
#define M 48
#define N 5
#define COMPUTES 3

struct block {
    struct lm_ctx *ctx;
    struct lm_graph *g;
    struct lm_tensor *out;
};

/* out = W3 (silu(W1 h) * (W2 h)) + x, h = rms_norm(x) * w; the up matmul is
 * expanded first so that SiLU and its MUL are adjacent (as in the models). */
static bool build(struct block *b)
{
    struct uc_rng r;
    uc_seed(&r, 7);
    if (!(b->ctx = uc_ctx(4u << 20)))
        return false;
    struct lm_ctx *c = b->ctx;
    struct lm_tensor *x = lm_new_tensor_2d(c, LM_TYPE_F32, K, N), *w = lm_new_tensor_1d(c, LM_TYPE_F32, K);
    struct lm_tensor *w1 = lm_new_tensor_2d(c, LM_TYPE_F32, K, M), *w2 = lm_new_tensor_2d(c, LM_TYPE_F32, K, M);
    struct lm_tensor *w3 = lm_new_tensor_2d(c, LM_TYPE_F32, M, K);
    if (!x || !w || !w1 || !w2 || !w3)
        return false;
    uc_fill(x, &r, -1, 1);
    uc_fill(w, &r, 0.5f, 1.5f);
    uc_fill(w1, &r, -0.2f, 0.2f);
    uc_fill(w2, &r, -0.2f, 0.2f);
    uc_fill(w3, &r, -0.2f, 0.2f);
    struct lm_tensor *h = lm_mul(c, lm_rms_norm(c, x, 1e-5f), w);
    struct lm_tensor *up = lm_mul_mat(c, w2, h);
    struct lm_tensor *y = lm_mul(c, lm_silu(c, lm_mul_mat(c, w1, h)), up);
    b->out = lm_add(c, lm_mul_mat(c, w3, y), x);
    b->g = lm_graph_new(c, 64);
    return b->out && b->g && lm_graph_expand(b->g, up) == LM_OK && lm_graph_expand(b->g, b->out) == LM_OK;
}

static int count_op(const struct lm_graph *g, enum lm_op op)
{
    int n = 0;
    for (int i = 0; i < g->n_nodes; i++)
        n += g->nodes[i]->op == op;
    return n;
}

static const struct lm_profile_row *find(const struct lm_profile_row *rows, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(rows[i].name, name))
            return &rows[i];
    return NULL;
}

/* COMPUTES computes of b on be with the profiler on or off; the output's bytes into out. */
static bool run(lm_backend_t be, struct block *b, bool profile, float *out)
{
    lm_profile_enable(profile);
    lm_profile_reset();
    bool ok = true;
    for (int i = 0; i < COMPUTES && ok; i++)
        ok = lm_backend_graph_compute(be, b->g) == LM_OK;
    lm_profile_enable(false);
    memcpy(out, b->out->data, sizeof(float) * K * N);
    return ok;
}

static void check_rows(const struct block *b, int nth, bool fuse)
{
    struct lm_profile_row rows[LM_PROFILE_MAX_ROWS];
    int n = lm_profile_snapshot(rows);
    const struct lm_profile_row *mm = find(rows, n, "MUL_MAT");
    CHECKF(mm && mm->calls == (int64_t)count_op(b->g, LM_OP_MUL_MAT) * COMPUTES, "nth %d: MUL_MAT calls %lld", nth,
           mm ? (long long)mm->calls : -1ll);
    CHECK(count_op(b->g, LM_OP_MUL_MAT) == 3);
    for (int i = 0; i < n; i++) {
        CHECKF(rows[i].wall_ns > 0 && rows[i].busy_ns > 0, "%s: wall %lld busy %lld", rows[i].name,
               (long long)rows[i].wall_ns, (long long)rows[i].busy_ns);
        CHECK(rows[i].thread_ns == rows[i].wall_ns * nth);
        /* one node of every other op (MUL: two when not fused) */
        CHECK(rows[i].op == LM_OP_MUL_MAT || rows[i].op == LM_OP_MUL || rows[i].calls == COMPUTES);
    }
    const struct lm_profile_row *rn = find(rows, n, "RMS_NORM+MUL"), *sm = find(rows, n, "UNARY+MUL");
    const struct lm_profile_row *mul = find(rows, n, "MUL"), *add = find(rows, n, "ADD");
    CHECK(add && add->calls == COMPUTES);
    if (fuse) {
        CHECK(n == 4 && rn && sm && !mul && rn->fused == LM_OP_MUL && sm->op == LM_OP_UNARY);
    } else {
        CHECK(n == 5 && !rn && !sm && mul && mul->calls == 2 * COMPUTES && find(rows, n, "RMS_NORM") &&
              find(rows, n, "UNARY"));
    }
}

static void test_profile(void)
{
    struct block b = {0};
    CHECK(build(&b));
    if (!b.g)
        return;
    float *want = malloc(sizeof(float) * K * N), *got = malloc(sizeof(float) * K * N);
    bool have_want = false;
    for (int fuse = 0; fuse <= 1; fuse++) {
        for (int nth = 1; nth <= 2; nth++) {
            lm_backend_t be = NULL;
            CHECK(lm_cpu_backend_new_unclamped(nth, &be) == LM_OK);
            if (!be)
                continue;
            lm_cpu_backend_set_fuse(be, fuse != 0);
            CHECK(run(be, &b, false, got));
            if (!have_want)
                memcpy(want, got, sizeof(float) * K * N);
            have_want = true;
            CHECKF(!memcmp(want, got, sizeof(float) * K * N), "fuse %d nth %d: output differs", fuse, nth);
            struct lm_profile_row rows[LM_PROFILE_MAX_ROWS];
            CHECK(lm_profile_snapshot(rows) == 0); /* off: nothing recorded */
            CHECK(run(be, &b, true, got));
            CHECKF(!memcmp(want, got, sizeof(float) * K * N), "fuse %d nth %d: profiled output differs", fuse, nth);
            check_rows(&b, nth, fuse != 0);
            lm_backend_free(be);
        }
    }
    free(want);
    free(got);
    lm_ctx_free(b.ctx);
}

static void test_bounds(void)
{
    struct lm_profile_row rows[LM_PROFILE_MAX_ROWS];
    lm_profile_reset();
    lm_profile_add(LM_PROFILE_MAX_THREADS, 300, LM_OP_ADD, LM_OP_NONE, 5, 5);
    lm_profile_add(-1, 2, LM_OP_ADD, LM_OP_NONE, 5, 5);
    lm_profile_add(0, 1, LM_OP_COUNT, LM_OP_NONE, 5, 5);
    CHECK(lm_profile_snapshot(rows) == 0);
    lm_profile_add(1, 2, LM_OP_ADD, LM_OP_NONE, 3, 100); /* not thread 0: busy only */
    lm_profile_add(0, 2, LM_OP_ADD, LM_OP_NONE, 4, 10);
    CHECK(lm_profile_snapshot(rows) == 1);
    CHECK(rows[0].op == LM_OP_ADD && rows[0].calls == 1 && rows[0].wall_ns == 10 && rows[0].busy_ns == 7 &&
          rows[0].thread_ns == 20 && !strcmp(rows[0].name, "ADD"));
    lm_profile_reset();
    CHECK(lm_profile_snapshot(rows) == 0);
}

int main(void)
{
    test_profile();
    test_bounds();
    return lm_test_summary();
}
