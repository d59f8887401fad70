/* test_cuda_host_graph.cu - which graphs the CUDA backend records as CUDA
 * graphs (src/cuda/cuda_backend.cu, lm_cu_graph_capturable), on the host:
 * no GPU needed, nothing is computed.
 *
 * A graph is captured when it has a matrix product and every MUL_MAT has at
 * most 8 columns (the matvec kernels: matmul.cuh's MV_MAX_N) or quantized
 * weights and at most 64 (MMQ_MAX_N: ops_mmq.cu, unless the backend was made
 * with LAMINA_CUDA_MMQ=0), and every MUL_MAT_ID at most 8 tokens, or 64
 * with quantized weights (ops_moe.cu's MMQ path; lm_cu_matmul_capturable), so that no cuBLAS call (bound to
 * the backend's real stream) is ever part of a capture. Checked on small
 * layer-like graphs (RMS_NORM, a Q4_0 and an F16 product, ADD) at 1, 8, 9,
 * 64, 65 and 512 columns, MUL_MAT_ID (Q8_0) at 1, 8, 9, 64, 65 and 100
 * tokens, each with and without MMQ, one without
 * a product, and lm_cu_matmul_capturable on other ops. Prints "FAIL: ..." per failure; exits 1 if any.
 */
#include <stdio.h>

#include "core/tensor.h"
#include "cuda/cuda_internal.cuh"

#include "host_check.h"

#define K 64 /* a row of the weights (Q4_0: two blocks) */
#define M 32

/* A layer-like graph in ctx: rms_norm(x) x w1, then w2 x that + x, with x
 * [K, n] (n columns: tokens). NULL when the arena is too small. */
static struct lm_graph *dense_graph(struct lm_ctx *ctx, int64_t n1, int64_t n2)
{
    struct lm_tensor *w1 = lm_new_tensor_2d(ctx, LM_TYPE_Q4_0, K, M);
    struct lm_tensor *w2 = lm_new_tensor_2d(ctx, LM_TYPE_F16, M, K);
    struct lm_tensor *x = lm_new_tensor_2d(ctx, LM_TYPE_F32, K, n1);
    struct lm_tensor *h = lm_mul_mat(ctx, w1, lm_rms_norm(ctx, x, 1e-5f)); /* [M, n1] */
    struct lm_tensor *y = lm_new_tensor_2d(ctx, LM_TYPE_F32, M, n2);
    struct lm_tensor *o = lm_add(ctx, lm_mul_mat(ctx, w2, y), lm_new_tensor_2d(ctx, LM_TYPE_F32, K, n2));
    struct lm_graph *g = lm_graph_new(ctx, 64);
    if (!h || !o || !g || lm_graph_expand(g, h) != LM_OK || lm_graph_expand(g, o) != LM_OK)
        return NULL;
    return g;
}

/* A mixture-of-experts product: 4 experts, 2 used per token, n tokens. */
static struct lm_graph *moe_graph(struct lm_ctx *ctx, int64_t n)
{
    struct lm_tensor *as = lm_new_tensor_3d(ctx, LM_TYPE_Q8_0, K, M, 4);
    struct lm_tensor *b = lm_new_tensor_3d(ctx, LM_TYPE_F32, K, 1, n);
    struct lm_tensor *ids = lm_new_tensor_2d(ctx, LM_TYPE_I32, 2, n);
    struct lm_tensor *o = lm_mul_mat_id(ctx, as, b, ids);
    struct lm_graph *g = lm_graph_new(ctx, 16);
    if (!o || !g || lm_graph_expand(g, o) != LM_OK)
        return NULL;
    return g;
}

/* The graph's first node with op `op`. */
static const struct lm_tensor *node_of(const struct lm_graph *g, enum lm_op op)
{
    for (int i = 0; i < g->n_nodes; i++)
        if (g->nodes[i]->op == op)
            return g->nodes[i];
    return NULL;
}

int main(void)
{
    struct lm_ctx_params p = {(size_t)1 << 20, NULL, true};
    struct lm_ctx *ctx = NULL;
    if (lm_ctx_new(&p, &ctx) != LM_OK) {
        printf("FAIL: arena\n");
        return 1;
    }
    static const struct {
        int64_t n1, n2;
        bool want, want_no_mmq; /* with the MMQ kernel, without (LAMINA_CUDA_MMQ=0) */
    } dense[] = {{1, 1, true, true},    {8, 8, true, true},    {1, 8, true, true},
                 {9, 1, true, false},   {64, 8, true, false},  {65, 1, false, false},
                 {9, 9, false, false},  {1, 9, false, false},  {512, 1, false, false}};
    for (size_t i = 0; i < sizeof dense / sizeof dense[0]; i++) {
        lm_ctx_reset(ctx);
        const struct lm_graph *g = dense_graph(ctx, dense[i].n1, dense[i].n2);
        CHECK(g != NULL, "dense graph %lld/%lld", (long long)dense[i].n1, (long long)dense[i].n2);
        if (g) {
            CHECK(lm_cu_graph_capturable(g, true) == dense[i].want,
                  "products of %lld and %lld columns: capturable %d", (long long)dense[i].n1, (long long)dense[i].n2,
                  (int)!dense[i].want);
            CHECK(lm_cu_graph_capturable(g, false) == dense[i].want_no_mmq,
                  "products of %lld and %lld columns without MMQ: capturable %d", (long long)dense[i].n1,
                  (long long)dense[i].n2, (int)!dense[i].want_no_mmq);
        }
    }
    static const struct {
        int64_t n;
        bool want, want_no_mmq;
    } moe[] = {{1, true, true}, {8, true, true}, {9, true, false}, {64, true, false}, {65, false, false},
               {100, false, false}};
    for (size_t i = 0; i < sizeof moe / sizeof moe[0]; i++) {
        lm_ctx_reset(ctx);
        const struct lm_graph *g = moe_graph(ctx, moe[i].n);
        CHECK(g != NULL, "moe graph %lld", (long long)moe[i].n);
        if (!g)
            continue;
        CHECK(lm_cu_graph_capturable(g, false) == moe[i].want_no_mmq,
              "MUL_MAT_ID of %lld tokens without MMQ: capturable %d", (long long)moe[i].n, (int)!moe[i].want_no_mmq);
        CHECK(lm_cu_graph_capturable(g, true) == moe[i].want, "MUL_MAT_ID of %lld tokens: capturable %d", (long long)moe[i].n,
              (int)!moe[i].want);
        const struct lm_tensor *t = node_of(g, LM_OP_MUL_MAT_ID);
        CHECK(t && lm_cu_matmul_capturable(t, true) == moe[i].want, "lm_cu_matmul_capturable(MUL_MAT_ID, %lld tokens)",
              (long long)moe[i].n);
    }

    /* no product: nothing worth a CUDA graph (a K shift, a copy) */
    lm_ctx_reset(ctx);
    struct lm_tensor *a = lm_new_tensor_2d(ctx, LM_TYPE_F32, K, 1);
    struct lm_tensor *s = lm_add(ctx, lm_rms_norm(ctx, a, 1e-5f), a);
    struct lm_graph *g = lm_graph_new(ctx, 16);
    CHECK(s && g && lm_graph_expand(g, s) == LM_OK, "%s", "graph without a product");
    if (s && g) {
        CHECK(!lm_cu_graph_capturable(g, true), "%s", "a graph without a product must not be captured");
        CHECK(!lm_cu_matmul_capturable(node_of(g, LM_OP_RMS_NORM), true), "%s", "lm_cu_matmul_capturable(RMS_NORM)");
    }
    lm_ctx_free(ctx);
    if (n_fail) {
        printf("test_cuda_host_graph: %d failures\n", n_fail);
        return 1;
    }
    printf("test_cuda_host_graph: ok\n");
    return 0;
}
