/* test_mm_share.c - one-token MUL_MAT over repacked weights split between
 * threads (ops/matmul.c mm_gemm_one): each thread takes its own share from
 * the front, and a thread done early takes chunks from the back of the
 * others' shares. Whoever computes a group, its outputs are the same kernel's:
 *  - for Q4_0, Q8_0, Q4_K, Q6_K and F16 weights (odd group counts, fewer
 *    groups than threads too), 2..8 threads give the bits of 1 thread, in
 *    every one of many repetitions;
 *  - with more threads than cores (threads preempted mid-share), the stealing
 *    path runs (lm_cpu_mm_steals grows), so the check above covers it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sched/alloc.h"
#include "cpu/cpu.h"
#include "cpu/cpu_internal.h"
#include "cpu/repack.h"
#include "cpu/threadpool.h"
#include "lm_test.h"
#include "quant/quant.h"
#include "util_cpu.h"

#define REPS 12

struct mm_case {
    struct lm_ctx *wctx, *ctx;
    struct lm_buffer *buf;
    struct lm_graph *g;
    struct lm_tensor *y;
};

/* y = a x b: a (M x K of type, random) in the repacking buffer type, b one column. */
static bool case_new(struct mm_case *c, enum lm_type type, int64_t M, int64_t K, struct uc_rng *rng)
{
    memset(c, 0, sizeof *c);
    struct lm_ctx_params wp = {.mem_size = 4 * lm_tensor_overhead(), .no_alloc = true};
    struct lm_ctx_params gp = {.mem_size = 8 * lm_tensor_overhead() + lm_graph_overhead(8) +
                                           sizeof(float) * (size_t)(K + M) + (1 << 16),
                               .no_alloc = false};
    if (lm_ctx_new(&wp, &c->wctx) != LM_OK || lm_ctx_new(&gp, &c->ctx) != LM_OK)
        return false;
    struct lm_tensor *a = lm_new_tensor_2d(c->wctx, type, K, M);
    if (lm_alloc_ctx_tensors(c->wctx, lm_cpu_repack_buft(), &c->buf) != LM_OK)
        return false;
    float *af = malloc(sizeof(float) * (size_t)(M * K));
    char *aq = malloc(lm_row_size(type, K) * (size_t)M);
    for (int64_t i = 0; i < M * K; i++)
        af[i] = uc_float(rng, -1, 1);
    lm_quantize_chunk(type, af, aq, 0, M, K, NULL);
    const bool ok = lm_tensor_set(a, aq, 0, lm_nbytes(a)) == LM_OK;
    free(af);
    free(aq);
    struct lm_tensor *b = lm_new_tensor_2d(c->ctx, LM_TYPE_F32, K, 1);
    for (int64_t i = 0; i < K; i++)
        ((float *)b->data)[i] = uc_float(rng, -1, 1);
    c->y = lm_mul_mat(c->ctx, a, b);
    c->g = lm_graph_new(c->ctx, 8);
    return ok && lm_tensor_is_repacked(a) && c->y && lm_graph_expand(c->g, c->y) == LM_OK;
}

static void case_free(struct mm_case *c)
{
    lm_buffer_free(c->buf);
    lm_ctx_free(c->ctx);
    lm_ctx_free(c->wctx);
}

static void test_type(enum lm_type type, int64_t groups, int64_t K)
{
    struct uc_rng rng;
    uc_seed(&rng, 0x5eed + (uint64_t)type * 131 + (uint64_t)groups);
    struct mm_case c;
    const int64_t M = groups * 8;
    if (!case_new(&c, type, M, K, &rng)) {
        CHECKF(false, "%s: setup failed", lm_type_name(type));
        case_free(&c);
        return;
    }
    float *want = malloc(sizeof(float) * (size_t)M);
    lm_backend_t be = NULL;
    CHECK(lm_cpu_backend_new_unclamped(1, &be) == LM_OK);
    CHECK(lm_backend_graph_compute(be, c.g) == LM_OK);
    memcpy(want, c.y->data, sizeof(float) * (size_t)M);
    lm_backend_free(be);
    int bad = 0, runs = 0;
    for (int nth = 2; nth <= 8; nth++) {
        CHECK(lm_cpu_backend_new_unclamped(nth, &be) == LM_OK);
        for (int r = 0; r < REPS && be; r++, runs++) {
            memset(c.y->data, 0xff, sizeof(float) * (size_t)M); /* NaN: a group nobody computed shows */
            bad += lm_backend_graph_compute(be, c.g) != LM_OK || memcmp(c.y->data, want, sizeof(float) * (size_t)M);
        }
        lm_backend_free(be);
    }
    CHECKF(bad == 0, "%s, %lld groups, K %lld: %d of %d multi-thread runs differ from 1 thread", lm_type_name(type),
           (long long)groups, (long long)K, bad, runs);
    free(want);
    case_free(&c);
}

int main(void)
{
    const long steals0 = lm_cpu_mm_steals();
    static const enum lm_type types[] = {LM_TYPE_Q4_0, LM_TYPE_Q8_0, LM_TYPE_Q4_K, LM_TYPE_Q6_K, LM_TYPE_F16};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        test_type(types[i], 301, 1024); /* odd: uneven shares */
        test_type(types[i], 3, 512);    /* fewer groups than threads */
    }
    const long steals = lm_cpu_mm_steals() - steals0;
    printf("%ld chunks taken from another thread's share (%d cores)\n", steals, lm_cpu_n_cores());
    if (lm_cpu_n_cores() < 8) /* up to 8 threads on fewer cores: preempted shares get taken */
        CHECKF(steals > 0, "no chunk was ever taken from another thread's share");
    return lm_test_summary();
}
