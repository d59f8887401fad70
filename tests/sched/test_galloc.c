/* test_galloc.c - the graph allocator on a transformer-like graph:
 * peak memory is well below the sum of all tensors, and no tensor is
 * overwritten while it is still needed (checked by simulating the graph:
 * every node writes its own byte pattern, and checks the patterns of its
 * sources before it does). Also the tensor allocator and re-allocation. */
#include <string.h>

#include "sched/alloc.h"
#include "lm_test.h"

#define N_EMBD 64
#define N_TOK 7
#define N_LAYER 4

struct model {
    struct lm_tensor *wq[N_LAYER], *wk[N_LAYER], *wo[N_LAYER], *w1[N_LAYER], *w2[N_LAYER], *norm[N_LAYER];
};

static struct lm_tensor *build(struct lm_ctx *ctx, struct model *m, struct lm_tensor *x)
{
    struct lm_tensor *cur = x;
    for (int l = 0; l < N_LAYER; l++) {
        struct lm_tensor *h = lm_rms_norm(ctx, cur, 1e-5f);
        h = lm_mul(ctx, h, m->norm[l]);
        struct lm_tensor *q = lm_mul_mat(ctx, m->wq[l], h);
        struct lm_tensor *k = lm_mul_mat(ctx, m->wk[l], h);
        struct lm_tensor *kq = lm_mul_mat(ctx, k, q);
        kq = lm_soft_max_ext(ctx, kq, NULL, 0.125f, 0.0f);
        struct lm_tensor *v = lm_cont(ctx, lm_transpose(ctx, q));
        struct lm_tensor *att = lm_mul_mat(ctx, v, kq);
        att = lm_mul_mat(ctx, m->wo[l], att);
        cur = lm_add(ctx, att, cur);
        struct lm_tensor *f = lm_mul_mat(ctx, m->w1[l], cur);
        f = lm_silu(ctx, f);
        f = lm_scale(ctx, f, 0.5f);
        f = lm_mul_mat(ctx, m->w2[l], f);
        cur = lm_add(ctx, f, cur);
    }
    return cur;
}

static uint8_t pattern(int i) { return (uint8_t)(i % 251 + 1); }

/* Simulate execution; returns the number of clobbered sources found. */
static int simulate(struct lm_graph *g)
{
    int bad = 0;
    for (int i = 0; i < g->n_leafs; i++)
        if (g->leafs[i]->buffer)
            memset(g->leafs[i]->data, pattern(1000 + i), lm_nbytes(g->leafs[i]));
    /* expected pattern of each root, found by searching leafs/nodes */
    for (int i = 0; i < g->n_nodes; i++) {
        struct lm_tensor *n = g->nodes[i];
        for (int j = 0; j < LM_MAX_SRC; j++) {
            const struct lm_tensor *s = n->src[j];
            if (!s)
                continue;
            const struct lm_tensor *root = lm_view_root(s);
            int want = -1;
            for (int k = 0; k < g->n_leafs; k++)
                if (g->leafs[k] == root)
                    want = pattern(1000 + k);
            for (int k = i - 1; k >= 0 && want < 0; k--)
                if (lm_view_root(g->nodes[k]) == root && !lm_is_view_op(g->nodes[k]->op))
                    want = pattern(k);
            if (want < 0 || !root->buffer)
                continue; /* weights (no buffer): not ours */
            const uint8_t *p = s->data;
            for (size_t b = 0; b < lm_nbytes(s); b++) {
                if (p[b] != want) {
                    bad++;
                    fprintf(stderr, "node %d (%s) reads clobbered source %d\n", i, lm_op_name(n->op), j);
                    break;
                }
            }
        }
        /* the output may overlap a source only as an in-place elementwise op
         * over its whole first source */
        for (int j = 0; j < LM_MAX_SRC && !lm_is_view_op(n->op); j++) {
            const struct lm_tensor *s = n->src[j];
            if (!s || !s->buffer || !n->buffer)
                continue;
            const char *a0 = n->data, *a1 = a0 + lm_nbytes(n);
            const char *b0 = s->data, *b1 = b0 + lm_nbytes(s);
            bool overlap = a0 < b1 && b0 < a1;
            bool inplace_ok = j == 0 && a0 == b0 && a1 == b1;
            if (overlap && !inplace_ok) {
                bad++;
                fprintf(stderr, "node %d (%s) output overlaps source %d\n", i, lm_op_name(n->op), j);
            }
        }
        if (!lm_is_view_op(n->op))
            memset(n->data, pattern(i), lm_nbytes(n));
    }
    return bad;
}

static void test_transformer(void)
{
    struct lm_ctx *wctx = NULL, *ctx = NULL;
    struct lm_ctx_params wp = {.mem_size = 4 << 20, .no_alloc = false};
    struct lm_ctx_params gp = {.mem_size = 1 << 20, .no_alloc = true};
    CHECK(lm_ctx_new(&wp, &wctx) == LM_OK && lm_ctx_new(&gp, &ctx) == LM_OK);
    struct model m;
    for (int l = 0; l < N_LAYER; l++) {
        m.wq[l] = lm_new_tensor_2d(wctx, LM_TYPE_F32, N_EMBD, N_EMBD);
        m.wk[l] = lm_new_tensor_2d(wctx, LM_TYPE_F32, N_EMBD, N_EMBD);
        m.wo[l] = lm_new_tensor_2d(wctx, LM_TYPE_F32, N_EMBD, N_EMBD);
        m.w1[l] = lm_new_tensor_2d(wctx, LM_TYPE_F32, N_EMBD, 3 * N_EMBD);
        m.w2[l] = lm_new_tensor_2d(wctx, LM_TYPE_F32, 3 * N_EMBD, N_EMBD);
        m.norm[l] = lm_new_tensor_1d(wctx, LM_TYPE_F32, N_EMBD);
    }
    struct lm_tensor *x = lm_new_tensor_2d(ctx, LM_TYPE_F32, N_EMBD, N_TOK);
    x->flags |= LM_FLAG_INPUT;
    struct lm_tensor *out = build(ctx, &m, x);
    out->flags |= LM_FLAG_OUTPUT;
    struct lm_graph *g = lm_graph_new(ctx, 512);
    CHECK(out && g && lm_graph_expand(g, out) == LM_OK);
    CHECKF(lm_ctx_status(ctx) == LM_OK, "%s", lm_ctx_error(ctx));

    size_t sum = 0;
    for (int i = 0; i < g->n_nodes; i++)
        if (!g->nodes[i]->view_src)
            sum += lm_nbytes(g->nodes[i]);
    size_t *offs = malloc(sizeof(size_t) * (size_t)(g->n_nodes + g->n_leafs));
    size_t peak = 0;
    CHECK(lm_galloc_plan(g, lm_host_buft(), NULL, 0, offs, &peak) == LM_OK);
    printf("galloc: %d nodes, sum of tensors %zu bytes, peak %zu bytes (%.0f%%)\n", g->n_nodes, sum, peak,
           100.0 * (double)peak / (double)sum);
    CHECK(peak > 0 && peak < sum / 2);
    free(offs);

    struct lm_gallocr *ga = NULL;
    CHECK(lm_gallocr_new(lm_host_buft(), &ga) == LM_OK);
    CHECK(lm_gallocr_alloc_graph(ga, g) == LM_OK);
    CHECK(lm_gallocr_buffer_size(ga) >= peak);
    for (int i = 0; i < g->n_nodes; i++)
        CHECK(g->nodes[i]->data != NULL);
    CHECK(simulate(g) == 0);
    /* allocating the same graph again gives a valid placement again */
    CHECK(lm_gallocr_alloc_graph(ga, g) == LM_OK);
    CHECK(simulate(g) == 0);
    lm_gallocr_free(ga);
    lm_ctx_free(ctx);
    lm_ctx_free(wctx);
}

static void test_ctx_tensors(void)
{
    struct lm_ctx *ctx = NULL;
    struct lm_ctx_params p = {.mem_size = 1 << 16, .no_alloc = true};
    CHECK(lm_ctx_new(&p, &ctx) == LM_OK);
    struct lm_tensor *a = lm_new_tensor_2d(ctx, LM_TYPE_F32, 10, 3);
    struct lm_tensor *b = lm_new_tensor_2d(ctx, LM_TYPE_Q8_0, 64, 5);
    struct lm_tensor *v = lm_view_1d(ctx, a, 5, 8);
    struct lm_buffer *buf = NULL;
    CHECK(lm_alloc_ctx_tensors(ctx, lm_host_buft(), &buf) == LM_OK && buf);
    CHECK(a->data && b->data && v->data == (char *)a->data + 8);
    CHECK((uintptr_t)a->data % 64 == 0 && (uintptr_t)b->data % 64 == 0);
    CHECK((char *)b->data >= (char *)a->data + lm_nbytes(a) || (char *)a->data >= (char *)b->data + lm_nbytes(b));
    float vals[30];
    for (int i = 0; i < 30; i++)
        vals[i] = (float)i;
    CHECK(lm_tensor_set(a, vals, 0, sizeof vals) == LM_OK);
    float got[5];
    CHECK(lm_tensor_get(v, got, 0, sizeof got) == LM_OK && got[0] == 2.0f && got[4] == 6.0f);
    CHECK(lm_tensor_set(a, vals, 8, sizeof vals) == LM_ERR_INVALID_ARG);
    lm_buffer_free(buf);
    lm_ctx_free(ctx);
}

int main(void)
{
    test_transformer();
    test_ctx_tensors();
    return lm_test_summary();
}
