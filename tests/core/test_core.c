/* test_core.c - arenas, tensor shapes, views, op constructor checks, graphs. */
#include <string.h>

#include "core/fp16.h"
#include "core/tensor.h"
#include "lm_test.h"

static struct lm_ctx *arena(size_t size, bool no_alloc)
{
    struct lm_ctx *ctx = NULL;
    struct lm_ctx_params p = {.mem_size = size, .no_alloc = no_alloc};
    CHECK(lm_ctx_new(&p, &ctx) == LM_OK);
    return ctx;
}

static void test_shapes(void)
{
    struct lm_ctx *ctx = arena(1 << 20, false);
    struct lm_tensor *a = lm_new_tensor_3d(ctx, LM_TYPE_F32, 5, 3, 2);
    CHECK(a && a->nb[0] == 4 && a->nb[1] == 20 && a->nb[2] == 60 && lm_nbytes(a) == 120);
    CHECK(lm_n_dims(a) == 3 && lm_is_contiguous(a));
    struct lm_tensor *q = lm_new_tensor_2d(ctx, LM_TYPE_Q4_0, 64, 3);
    CHECK(q && q->nb[1] == 36 && lm_nbytes(q) == 108);
    struct lm_tensor *t = lm_transpose(ctx, a);
    CHECK(t && t->ne[0] == 3 && t->ne[1] == 5 && !lm_is_contiguous(t) && t->view_src == a);
    struct lm_tensor *p = lm_permute(ctx, a, 2, 0, 1, 3);
    CHECK(p && p->ne[2] == 5 && p->ne[0] == 3 && p->ne[1] == 2);
    struct lm_tensor *v = lm_view_2d(ctx, a, 5, 2, a->nb[1], a->nb[1]);
    CHECK(v && v->data == (char *)a->data + 20);
    struct lm_tensor *vv = lm_view_1d(ctx, v, 3, 4);
    CHECK(vv && vv->view_src == a && vv->view_offs == 24);
    CHECK(lm_ctx_status(ctx) == LM_OK);
    lm_set_name(a, "a");
    CHECK(lm_ctx_get_tensor(ctx, "a") == a);
    int n = 0;
    for (struct lm_tensor *it = lm_ctx_first_tensor(ctx); it; it = lm_ctx_next_tensor(ctx, it))
        n++;
    CHECK(n == 6);
    lm_ctx_free(ctx);
}

static void test_errors(void)
{
    struct lm_ctx *ctx = arena(1 << 20, true);
    struct lm_tensor *a = lm_new_tensor_2d(ctx, LM_TYPE_F32, 8, 4);
    struct lm_tensor *b = lm_new_tensor_2d(ctx, LM_TYPE_F32, 7, 4);
    CHECK(lm_add(ctx, a, b) == NULL);
    CHECK(lm_ctx_status(ctx) == LM_ERR_SHAPE && strstr(lm_ctx_error(ctx), "ADD"));
    /* later ops with NULL inputs stay NULL */
    CHECK(lm_mul(ctx, NULL, a) == NULL);
    lm_ctx_reset(ctx);
    a = lm_new_tensor_2d(ctx, LM_TYPE_F32, 8, 4);
    struct lm_tensor *w = lm_new_tensor_2d(ctx, LM_TYPE_Q4_0, 32, 4);
    CHECK(lm_mul_mat(ctx, w, a) == NULL && lm_ctx_status(ctx) == LM_ERR_SHAPE);
    lm_ctx_reset(ctx);
    CHECK(lm_new_tensor_2d(ctx, LM_TYPE_Q4_0, 33, 1) == NULL && lm_ctx_status(ctx) == LM_ERR_SHAPE);
    lm_ctx_reset(ctx);
    CHECK(lm_new_tensor_1d(ctx, (enum lm_type)4, 32) == NULL && lm_ctx_status(ctx) == LM_ERR_UNSUPPORTED);
    lm_ctx_reset(ctx);
    a = lm_new_tensor_2d(ctx, LM_TYPE_F32, 8, 4);
    CHECK(lm_view_2d(ctx, a, 8, 4, 32, 4) == NULL && lm_ctx_status(ctx) == LM_ERR_SHAPE);
    lm_ctx_reset(ctx);
    a = lm_new_tensor_2d(ctx, LM_TYPE_F32, 8, 4);
    CHECK(lm_reshape_2d(ctx, a, 5, 6) == NULL);
    lm_ctx_reset(ctx);
    a = lm_new_tensor_3d(ctx, LM_TYPE_F32, 8, 4, 3);
    struct lm_tensor *pos = lm_new_tensor_1d(ctx, LM_TYPE_I32, 2);
    struct lm_rope_params rp = {.n_dims = 8, .freq_base = 10000, .freq_scale = 1};
    CHECK(lm_rope(ctx, a, pos, &rp) == NULL);
    lm_ctx_reset(ctx);
    a = lm_new_tensor_2d(ctx, LM_TYPE_F32, 8, 4);
    CHECK(lm_permute(ctx, a, 0, 0, 1, 2) == NULL);
    lm_ctx_free(ctx);
}

static void test_graph(void)
{
    struct lm_ctx *ctx = arena(1 << 20, true);
    struct lm_tensor *x = lm_new_tensor_2d(ctx, LM_TYPE_F32, 8, 4);
    struct lm_tensor *w = lm_new_tensor_2d(ctx, LM_TYPE_F32, 8, 6);
    struct lm_tensor *h = lm_mul_mat(ctx, w, x);
    struct lm_tensor *s = lm_silu(ctx, h);
    struct lm_tensor *o = lm_add(ctx, s, h);
    struct lm_graph *g = lm_graph_new(ctx, 16);
    CHECK(g && lm_graph_expand(g, o) == LM_OK);
    CHECK(g->n_nodes == 3 && g->n_leafs == 2);
    CHECK(g->nodes[0] == h && g->nodes[2] == o);
    CHECK(lm_graph_expand(g, o) == LM_OK && g->n_nodes == 3);
    struct lm_graph *small = lm_graph_new(ctx, 2);
    CHECK(lm_graph_expand(small, o) == LM_ERR_FULL);
    lm_ctx_free(ctx);
}

static void test_fp16(void)
{
    CHECK(lm_fp32_to_fp16(1.0f) == 0x3c00);
    CHECK(lm_fp32_to_fp16(65504.0f) == 0x7bff);
    CHECK(lm_fp32_to_fp16(65520.0f) == 0x7c00);
    CHECK(lm_fp32_to_fp16(5.9604644775390625e-8f) == 0x0001);
    CHECK(lm_fp16_to_fp32(0x0001) == 5.9604644775390625e-8f);
    CHECK(lm_fp32_to_bf16(1.0f) == 0x3f80);
    CHECK(lm_bf16_to_fp32(0x3f80) == 1.0f);
}

int main(void)
{
    test_shapes();
    test_errors();
    test_graph();
    test_fp16();
    return lm_test_summary();
}
