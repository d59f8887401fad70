/* test_grad.c - every gradient rule of train/grad.c against finite
 * differences.
 *
 * Each case builds y = f(x1, x2, ...) from small random F32 inputs and takes
 * the scalar s = sum(c * y) for a random c of y's shape. lm_grad_backward with
 * dy = c gives ds/dx (the analytic gradient, computed on the CPU backend with
 * 2 threads: the real kernels); the numeric one is the central difference
 * (s(x + h e_j) - s(x - h e_j)) / 2h at h = 1e-2, with s summed in double over
 * the F32 outputs. For smooth f the truncation error is O(h^2) ~ 1e-4 of the
 * third derivative and the rounding noise ~ 1e-7 |s| / h ~ 1e-5; the bound is
 * |num - ana| <= 2e-3 + 1e-2 |ana| per element (a wrong rule is off by O(1)).
 * RELU's inputs stay away from its kink (|x| > 0.1 > h). Up to 40 elements of
 * each input are checked.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sched/sched.h"
#include "cpu/cpu.h"
#include "lm_test.h"
#include "train/grad.h"

#define MAX_IN 4

struct gcase {
    const char *name;
    struct lm_ctx *ctx;
    struct lm_tensor *x[MAX_IN]; /* differentiable inputs */
    int n_x;
    struct lm_tensor *aux[MAX_IN]; /* other inputs, filled by the case */
    void *aux_data[MAX_IN];
    int n_aux;
    uint64_t rng;
};

static float frand(struct gcase *c)
{
    c->rng = c->rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return (float)((c->rng >> 40) & 0xffffff) / (float)0x1000000 * 2.0f - 1.0f; /* [-1, 1) */
}

static struct lm_tensor *in4(struct gcase *c, int64_t n0, int64_t n1, int64_t n2, int64_t n3)
{
    struct lm_tensor *t = lm_new_tensor_4d(c->ctx, LM_TYPE_F32, n0, n1, n2, n3);
    t->flags |= LM_FLAG_INPUT | LM_FLAG_PARAM;
    c->x[c->n_x++] = t;
    return t;
}

static struct lm_tensor *aux(struct gcase *c, struct lm_tensor *t, void *data)
{
    t->flags |= LM_FLAG_INPUT;
    c->aux[c->n_aux] = t;
    c->aux_data[c->n_aux++] = data;
    return t;
}

static int32_t ids_data[8] = {2, 0, 2, 3, 1, 2, 0, 3};
static int32_t tgt_data[6] = {1, 4, -1, 0, 3, 3};
static int32_t pos_data[5] = {0, 3, 7, 1, 12};
static float mask_data[6 * 4];

static struct lm_tensor *rope_case(struct gcase *c, int mode, int n_dims)
{
    struct lm_tensor *a = in4(c, 8, 3, 5, 1);
    struct lm_tensor *pos = aux(c, lm_new_tensor_1d(c->ctx, LM_TYPE_I32, 5), pos_data);
    struct lm_rope_params p = {.n_dims = n_dims, .mode = mode, .n_ctx_orig = 64, .freq_base = 100.0f,
                               .freq_scale = 1.0f, .ext_factor = 0.0f, .attn_factor = 1.0f,
                               .beta_fast = 32.0f, .beta_slow = 1.0f};
    return lm_rope(c->ctx, a, pos, &p);
}

/* Builds case k into c; returns y, or NULL past the last case. */
static struct lm_tensor *build_case(struct gcase *c, int k)
{
    struct lm_ctx *ctx = c->ctx;
    switch (k) {
    case 0: c->name = "ADD"; return lm_add(ctx, in4(c, 5, 3, 2, 1), in4(c, 5, 3, 2, 1));
    case 1: c->name = "ADD broadcast"; return lm_add(ctx, in4(c, 6, 4, 1, 1), in4(c, 6, 1, 1, 1));
    case 2: c->name = "MUL broadcast"; return lm_mul(ctx, in4(c, 6, 4, 2, 1), in4(c, 6, 1, 2, 1));
    case 3: c->name = "SCALE"; return lm_scale(ctx, in4(c, 7, 3, 1, 1), -1.75f);
    case 4: c->name = "SQR"; return lm_sqr(ctx, in4(c, 7, 3, 1, 1));
    case 5: c->name = "SILU"; return lm_silu(ctx, lm_scale(ctx, in4(c, 9, 4, 1, 1), 3.0f));
    case 6: c->name = "GELU"; return lm_gelu(ctx, lm_scale(ctx, in4(c, 9, 4, 1, 1), 3.0f));
    case 7: c->name = "RELU"; return lm_relu(ctx, in4(c, 9, 4, 1, 1));
    case 8: c->name = "TANH"; return lm_unary(ctx, in4(c, 9, 4, 1, 1), LM_UNARY_TANH);
    case 9: c->name = "NEG"; return lm_unary(ctx, in4(c, 9, 4, 1, 1), LM_UNARY_NEG);
    case 10: c->name = "SUM_ROWS"; return lm_sum_rows(ctx, in4(c, 9, 4, 2, 1));
    case 11: c->name = "RMS_NORM"; return lm_rms_norm(ctx, in4(c, 16, 5, 1, 1), 1e-5f);
    case 12: c->name = "MUL_MAT"; return lm_mul_mat(ctx, in4(c, 8, 5, 1, 1), in4(c, 8, 3, 1, 1));
    case 13: c->name = "MUL_MAT broadcast (GQA)"; return lm_mul_mat(ctx, in4(c, 6, 5, 2, 3), in4(c, 6, 4, 4, 3));
    case 14: {
        c->name = "MUL_MAT permuted b";
        struct lm_tensor *b = lm_permute(ctx, in4(c, 6, 3, 4, 1), 0, 2, 1, 3); /* [6, 4, 3] */
        return lm_mul_mat(ctx, in4(c, 6, 5, 3, 1), b);
    }
    case 15: {
        c->name = "GET_ROWS repeated ids";
        struct lm_tensor *ids = aux(c, lm_new_tensor_1d(ctx, LM_TYPE_I32, 8), ids_data);
        return lm_get_rows(ctx, in4(c, 5, 4, 1, 1), ids);
    }
    case 16: c->name = "CONT of PERMUTE"; return lm_cont(ctx, lm_permute(ctx, in4(c, 3, 4, 5, 2), 2, 0, 3, 1));
    case 17: c->name = "CONT_2D of TRANSPOSE"; return lm_cont_2d(ctx, lm_transpose(ctx, in4(c, 4, 6, 1, 1)), 3, 8);
    case 18: {
        c->name = "RESHAPE";
        struct lm_tensor *r = lm_reshape_3d(ctx, in4(c, 12, 2, 1, 1), 4, 3, 2);
        return lm_mul(ctx, r, r); /* something non-linear after the view */
    }
    case 19: {
        c->name = "SOFT_MAX masked scaled";
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 6; j++)
                mask_data[i * 6 + j] = j <= i + 2 ? 0.0f : -INFINITY;
        struct lm_tensor *mask = aux(c, lm_new_tensor_2d(ctx, LM_TYPE_F32, 6, 4), mask_data);
        return lm_soft_max_ext(ctx, in4(c, 6, 4, 3, 1), mask, 0.7f, 0.0f);
    }
    case 20: c->name = "ROPE normal"; return rope_case(c, 0, 8);
    case 21: c->name = "ROPE neox partial"; return rope_case(c, 2, 4);
    case 22: {
        c->name = "CROSS_ENTROPY_LOSS";
        struct lm_tensor *t = aux(c, lm_new_tensor_1d(ctx, LM_TYPE_I32, 6), tgt_data);
        return lm_cross_entropy_loss(ctx, lm_scale(ctx, in4(c, 5, 6, 1, 1), 2.0f), t);
    }
    case 23: {
        c->name = "REPEAT";
        struct lm_tensor *big = lm_new_tensor_3d(ctx, LM_TYPE_F32, 6, 4, 2);
        big = aux(c, big, NULL);
        return lm_repeat(ctx, in4(c, 3, 2, 1, 1), big);
    }
    default: return NULL;
    }
}

static double dot_c(const float *y, const float *cv, int64_t n)
{
    double s = 0.0;
    for (int64_t i = 0; i < n; i++)
        s += (double)y[i] * cv[i];
    return s;
}

int main(void)
{
    lm_backend_t be = NULL;
    CHECK(lm_cpu_backend_new(2, &be) == LM_OK);
    int n_cases = 0;
    for (int k = 0;; k++) {
        struct lm_ctx *ctx = NULL;
        struct lm_ctx_params cp = {.mem_size = (size_t)8 << 20, .no_alloc = true};
        CHECK(lm_ctx_new(&cp, &ctx) == LM_OK);
        struct gcase c = {.ctx = ctx, .rng = 0x1234567u + (uint64_t)k * 977};
        struct lm_tensor *y = build_case(&c, k);
        if (!y) {
            lm_ctx_free(ctx);
            break;
        }
        n_cases++;
        CHECK(lm_ctx_status(ctx) == LM_OK);
        y->flags |= LM_FLAG_OUTPUT;
        struct lm_tensor *cy = lm_new_tensor_4d(ctx, LM_TYPE_F32, y->ne[0], y->ne[1], y->ne[2], y->ne[3]);
        cy->flags |= LM_FLAG_INPUT;
        struct lm_graph *g = lm_graph_new(ctx, 1024);
        CHECK(lm_graph_expand(g, y) == LM_OK);
        struct lm_grad *gr = NULL;
        CHECK(lm_grad_new(ctx, &gr) == LM_OK);
        lm_status st = lm_grad_backward(gr, g, y, cy, c.x, c.n_x);
        if (st)
            fprintf(stderr, "%s: %s\n", c.name, lm_ctx_error(ctx));
        CHECK(st == LM_OK);
        struct lm_tensor *gx[MAX_IN] = {0};
        for (int i = 0; i < c.n_x; i++) {
            gx[i] = lm_grad_get(gr, c.x[i]);
            CHECK(gx[i] != NULL);
            if (gx[i]->op == LM_OP_NONE || lm_is_view_op(gx[i]->op) || !lm_is_contiguous(gx[i]))
                gx[i] = lm_cont(ctx, gx[i]);
            gx[i]->flags |= LM_FLAG_OUTPUT;
            CHECK(lm_graph_expand(g, gx[i]) == LM_OK);
        }
        struct lm_sched *sched = NULL;
        CHECK(lm_sched_new(&be, 1, 2048, &sched) == LM_OK);
        CHECK(lm_sched_alloc_graph(sched, g) == LM_OK);

        /* data */
        float *xv[MAX_IN];
        for (int i = 0; i < c.n_x; i++) {
            int64_t n = lm_nelements(c.x[i]);
            xv[i] = malloc((size_t)n * sizeof(float));
            for (int64_t j = 0; j < n; j++) {
                float v = frand(&c);
                if (strcmp(c.name, "RELU") == 0 && fabsf(v) < 0.1f)
                    v = v < 0 ? -0.1f - 0.5f * v : 0.1f + 0.5f * v;
                xv[i][j] = v;
            }
        }
        int64_t ny = lm_nelements(y);
        float *cv = malloc((size_t)ny * sizeof(float)), *yv = malloc((size_t)ny * sizeof(float));
        for (int64_t j = 0; j < ny; j++)
            cv[j] = frand(&c);
        CHECK(lm_tensor_set(cy, cv, 0, (size_t)ny * sizeof(float)) == LM_OK);
        for (int i = 0; i < c.n_aux; i++)
            if (c.aux_data[i])
                CHECK(lm_tensor_set(c.aux[i], c.aux_data[i], 0, lm_nbytes(c.aux[i])) == LM_OK);

#define EVAL()                                                                                                 \
    do {                                                                                                       \
        for (int i_ = 0; i_ < c.n_x; i_++)                                                                     \
            lm_tensor_set(c.x[i_], xv[i_], 0, (size_t)lm_nelements(c.x[i_]) * sizeof(float));                  \
        CHECK(lm_sched_graph_compute(sched, g) == LM_OK);                                                   \
        lm_tensor_get(y, yv, 0, (size_t)ny * sizeof(float));                                                   \
    } while (0)

        EVAL();
        float *ana[MAX_IN];
        for (int i = 0; i < c.n_x; i++) {
            int64_t n = lm_nelements(c.x[i]);
            ana[i] = malloc((size_t)n * sizeof(float));
            lm_tensor_get(gx[i], ana[i], 0, (size_t)n * sizeof(float));
        }
        double worst = 0.0;
        int bad = 0;
        const float h = 1e-2f;
        for (int i = 0; i < c.n_x; i++) {
            int64_t n = lm_nelements(c.x[i]);
            int64_t stride = n > 40 ? n / 40 + 1 : 1;
            for (int64_t j = 0; j < n; j += stride) {
                float keep = xv[i][j];
                xv[i][j] = keep + h;
                EVAL();
                double sp = dot_c(yv, cv, ny);
                xv[i][j] = keep - h;
                EVAL();
                double sm = dot_c(yv, cv, ny);
                xv[i][j] = keep;
                double num = (sp - sm) / (2.0 * h), an = ana[i][j];
                double err = fabs(num - an), lim = 2e-3 + 1e-2 * fabs(an);
                if (err / lim > worst)
                    worst = err / lim;
                if (err > lim && bad++ < 3)
                    fprintf(stderr, "%s: input %d element %lld: analytic %.6g numeric %.6g\n", c.name, i,
                            (long long)j, an, num);
            }
        }
        printf("%-26s worst |num-ana| / bound = %.3f %s\n", c.name, worst, bad ? "FAIL" : "ok");
        CHECK(bad == 0);
        for (int i = 0; i < c.n_x; i++) {
            free(xv[i]);
            free(ana[i]);
        }
        free(cv);
        free(yv);
        lm_sched_free(sched);
        lm_grad_free(gr);
        lm_ctx_free(ctx);
    }
    CHECK(n_cases == 24);

    /* an op without a rule is refused with a message */
    {
        struct lm_ctx *ctx = NULL;
        struct lm_ctx_params cp = {.mem_size = (size_t)1 << 20, .no_alloc = true};
        CHECK(lm_ctx_new(&cp, &ctx) == LM_OK);
        struct lm_tensor *x = lm_new_tensor_2d(ctx, LM_TYPE_F32, 4, 3);
        x->flags |= LM_FLAG_PARAM;
        struct lm_tensor *y = lm_norm(ctx, x, 1e-5f);
        struct lm_tensor *dy = lm_new_tensor_2d(ctx, LM_TYPE_F32, 4, 3);
        struct lm_graph *g = lm_graph_new(ctx, 16);
        lm_graph_expand(g, y);
        struct lm_grad *gr = NULL;
        lm_grad_new(ctx, &gr);
        CHECK(lm_grad_backward(gr, g, y, dy, &x, 1) == LM_ERR_UNSUPPORTED);
        CHECK(strstr(lm_ctx_error(ctx), "NORM") != NULL);
        CHECK(!lm_grad_supports(LM_OP_ATTN) && lm_grad_supports(LM_OP_MUL_MAT));
        lm_grad_free(gr);
        lm_ctx_free(ctx);
    }
    lm_backend_free(be);
    return lm_test_summary();
}
