/* test_fuse.c - the CPU executor's fused node pairs (RMS_NORM x weight,
 * SILU x up; cpu/fuse.c) give bit-identical logits to the separate ops, on
 * stories260K (F32, with prompts in one batch and token by token) and on
 * llama-2-tiny-random (F16 weights, 32000-token vocabulary). And the pairs
 * core/fuse.h finds in a llama decode graph (the CUDA backend fuses all
 * four kinds): per layer its two norms, the SwiGLU, the two residual adds
 * after a one-column product and two pairs of products of the same
 * activations (K with V: lm_b_adjacent; up with gate), plus the output
 * norm. */
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "sched/sched.h"
#include "core/fuse.h"
#include "cpu/cpu_internal.h"
#include "util_api.h"

struct node_list {
    const struct lm_tensor *n[4096];
    int count;
};

/* The scheduler asks for every node of a split as it runs it: record the
 * order, observe nothing. */
static bool record(const struct lm_tensor *node, void *user)
{
    struct node_list *l = user;
    if (l->count < 4096)
        l->n[l->count++] = node;
    return false;
}
static lm_status observe_none(const struct lm_tensor *node, void *user)
{
    (void)node, (void)user;
    return LM_OK;
}

/* The rule on hand-made pairs: what matches and what must not. */
static void test_rule(void)
{
    struct lm_ctx_params cp = {.mem_size = 64 * lm_tensor_overhead(), .no_alloc = true};
    struct lm_ctx *ctx = NULL;
    CHECK(lm_ctx_new(&cp, &ctx) == LM_OK);
    if (!ctx)
        return;
    struct lm_tensor *w = lm_new_tensor_2d(ctx, LM_TYPE_Q4_0, 64, 32), *x = lm_new_tensor_2d(ctx, LM_TYPE_F32, 64, 1);
    struct lm_tensor *r = lm_new_tensor_2d(ctx, LM_TYPE_F32, 32, 1), *bias = lm_new_tensor_1d(ctx, LM_TYPE_F32, 32);
    struct lm_tensor *col = lm_new_tensor_2d(ctx, LM_TYPE_F32, 1, 1), *r2 = lm_new_tensor_2d(ctx, LM_TYPE_F32, 1, 32);
    struct lm_tensor *nw = lm_new_tensor_1d(ctx, LM_TYPE_F32, 64), *u = lm_new_tensor_2d(ctx, LM_TYPE_F32, 64, 1);
    struct lm_tensor *x2 = lm_new_tensor_2d(ctx, LM_TYPE_F32, 64, 2), *rt = lm_new_tensor_2d(ctx, LM_TYPE_F32, 2, 32);
    struct lm_tensor *mm = lm_mul_mat(ctx, w, x), *norm = lm_rms_norm(ctx, x, 1e-5f), *silu = lm_silu(ctx, x);
    struct lm_tensor *mm2 = lm_mul_mat(ctx, w, x2), *norm2 = lm_rms_norm(ctx, x2, 1e-5f), *silu2 = lm_silu(ctx, x2);
    CHECK(lm_ctx_status(ctx) == LM_OK);
    if (lm_ctx_status(ctx)) {
        lm_ctx_free(ctx);
        return;
    }
    CHECK(lm_fuse_match(mm, lm_add(ctx, mm, r)) == LM_FUSE_MUL_MAT_ADD);    /* a residual */
    CHECK(lm_fuse_match(mm, lm_add(ctx, r, mm)) == LM_FUSE_MUL_MAT_ADD);    /* either side */
    CHECK(lm_fuse_match(mm, lm_add(ctx, mm, bias)) == LM_FUSE_MUL_MAT_ADD); /* a bias row */
    CHECK(lm_fuse_match(mm, lm_add(ctx, mm, mm)) == LM_FUSE_NONE);          /* the product twice */
    CHECK(lm_fuse_match(mm, lm_add(ctx, mm, col)) == LM_FUSE_NONE);         /* broadcast of another shape */
    CHECK(lm_fuse_match(mm2, lm_add(ctx, mm2, lm_transpose(ctx, rt))) == LM_FUSE_NONE); /* strided addend */
    CHECK(lm_fuse_match(mm, lm_add(ctx, mm, lm_transpose(ctx, r2))) == LM_FUSE_MUL_MAT_ADD); /* one column: packed */
    CHECK(lm_fuse_match(mm, lm_add(ctx, x, x)) == LM_FUSE_NONE);            /* not its reader */
    CHECK(lm_fuse_match(norm, lm_mul(ctx, norm, nw)) == LM_FUSE_RMS_NORM_MUL);
    CHECK(lm_fuse_match(norm, lm_mul(ctx, nw, norm)) == LM_FUSE_NONE);      /* the norm must be src[0] */
    CHECK(lm_fuse_match(norm2, lm_mul(ctx, norm2, x2)) == LM_FUSE_NONE);    /* not one weight row */
    CHECK(lm_fuse_match(silu, lm_mul(ctx, silu, u)) == LM_FUSE_SILU_MUL);
    CHECK(lm_fuse_match(silu2, lm_mul(ctx, silu2, nw)) == LM_FUSE_NONE);    /* u of another shape */
    CHECK(lm_fuse_match(silu, lm_add(ctx, silu, u)) == LM_FUSE_NONE);
    CHECK(lm_fuse_match(mm, lm_mul(ctx, mm, r)) == LM_FUSE_NONE);
    struct lm_tensor *w2 = lm_new_tensor_2d(ctx, LM_TYPE_Q4_0, 64, 32);
    struct lm_tensor *w8 = lm_new_tensor_2d(ctx, LM_TYPE_Q8_0, 64, 32);
    struct lm_tensor *w3 = lm_new_tensor_2d(ctx, LM_TYPE_Q4_0, 64, 16);
    CHECK(lm_fuse_match(mm, lm_mul_mat(ctx, w2, x)) == LM_FUSE_MUL_MAT_PAIR); /* up and gate */
    CHECK(lm_fuse_match(mm, lm_mul_mat(ctx, w2, u)) == LM_FUSE_NONE);         /* another activation */
    CHECK(lm_fuse_match(mm, lm_mul_mat(ctx, w8, x)) == LM_FUSE_NONE);         /* another weight type */
    CHECK(lm_fuse_match(mm, lm_mul_mat(ctx, w3, x)) == LM_FUSE_NONE);         /* another weight shape */
    lm_ctx_free(ctx);
}

/* Adjacent pairs of each kind in the graph of one token after a prompt. */
static void test_decode_pairs(struct llama_model *m)
{
    struct llama_context *ctx = api_ctx(m, 64, 32, false);
    struct node_list *l = calloc(1, sizeof *l);
    llama_token toks[4] = {1, 403, 407, 261};
    CHECK(ctx && l && llama_decode(ctx, llama_batch_get_one(toks, 4, 0, 0)) == 0);
    if (!ctx || !l) {
        free(l);
        llama_free(ctx);
        return;
    }
    lm_sched_set_observer(ctx->c->sched, record, observe_none, l);
    CHECK(llama_decode(ctx, llama_batch_get_one(toks, 1, 4, 0)) == 0);
    int kinds[5] = {0}, launches = 0;
    for (int i = 0; i < l->count; i++)
        launches += l->n[i]->op != LM_OP_NONE && !lm_is_view_op(l->n[i]->op);
    for (int i = 0; i + 1 < l->count; i++) {
        const enum lm_fuse k = lm_fuse_match(l->n[i], l->n[i + 1]);
        kinds[k]++;
        i += k != LM_FUSE_NONE; /* a fused pair is one launch */
    }
    lm_sched_set_observer(ctx->c->sched, NULL, NULL, NULL);
    const int n_layer = (int)m->m->hp.n_layer;
    CHECKF(kinds[LM_FUSE_RMS_NORM_MUL] == 2 * n_layer + 1 && kinds[LM_FUSE_SILU_MUL] == n_layer &&
               kinds[LM_FUSE_MUL_MAT_ADD] == 2 * n_layer && kinds[LM_FUSE_MUL_MAT_PAIR] == 2 * n_layer,
           "decode graph of %d nodes, %d layers: %d norm, %d swiglu, %d product+add, %d product pairs", l->count,
           n_layer, kinds[LM_FUSE_RMS_NORM_MUL], kinds[LM_FUSE_SILU_MUL], kinds[LM_FUSE_MUL_MAT_ADD],
           kinds[LM_FUSE_MUL_MAT_PAIR]);
    printf("decode graph: %d nodes, %d computed; %d norm + %d swiglu + %d product+add + %d product pairs\n", l->count,
           launches, kinds[LM_FUSE_RMS_NORM_MUL], kinds[LM_FUSE_SILU_MUL], kinds[LM_FUSE_MUL_MAT_ADD],
           kinds[LM_FUSE_MUL_MAT_PAIR]);
    free(l);
    llama_free(ctx);
}

static float *run(struct llama_model *m, bool fuse, int *n_out)
{
    if (fuse) /* read when the context is created (api/context_api.c) */
        unsetenv("LAMINA_NO_FUSE");
    else
        setenv("LAMINA_NO_FUSE", "1", 1);
    struct llama_context *ctx = api_ctx(m, 64, 32, true);
    unsetenv("LAMINA_NO_FUSE");
    CHECKF(ctx && lm_cpu_backend_fuses(ctx->c->cpu) == fuse, "LAMINA_NO_FUSE%s: the context's CPU backend %s",
           fuse ? " unset" : "=1", fuse ? "does not fuse" : "fuses");
    const int nv = llama_n_vocab(m);
    llama_token toks[12] = {1, 403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315};
    float *out = malloc(sizeof(float) * (size_t)nv * 16);
    CHECK(ctx && llama_decode(ctx, llama_batch_get_one(toks, 12, 0, 0)) == 0);
    memcpy(out, llama_get_logits(ctx), sizeof(float) * (size_t)nv * 12);
    for (int i = 0; i < 4; i++) { /* then single tokens (the decode path) */
        llama_token t = toks[i + 3];
        CHECK(llama_decode(ctx, llama_batch_get_one(&t, 1, 12 + i, 0)) == 0);
        memcpy(out + (size_t)nv * (12 + i), llama_get_logits(ctx), sizeof(float) * (size_t)nv);
    }
    *n_out = nv * 16;
    llama_free(ctx);
    return out;
}

int main(void)
{
    api_test_init();
    test_rule();
    const char *models[] = {"models/stories260K.gguf", "models/llama-2-tiny-random.gguf"};
    for (int i = 0; i < 2; i++) {
        struct llama_model *m = api_load(models[i]);
        CHECK(m != NULL);
        if (!m)
            continue;
        int n1, n2;
        float *fused = run(m, true, &n1), *separate = run(m, false, &n2);
        CHECKF(n1 == n2 && !memcmp(fused, separate, sizeof(float) * (size_t)n1),
               "%s: fused and separate ops differ (max %g)", models[i], api_max_diff(fused, separate, (size_t)n1));
        printf("%s: fused vs separate ops, %d logits, max |diff| %g\n", models[i], n1,
               api_max_diff(fused, separate, (size_t)n1));
        free(fused);
        free(separate);
        if (i == 0) {
            test_decode_pairs(m);
            setenv("LAMINA_NO_FUSE", "0", 1); /* a 0/1 flag: 0 is off (it once meant "set": on) */
            struct llama_context *ctx = api_ctx(m, 64, 32, true);
            unsetenv("LAMINA_NO_FUSE");
            CHECKF(ctx && lm_cpu_backend_fuses(ctx->c->cpu), "LAMINA_NO_FUSE=0: no fusion");
            llama_free(ctx);
        }
        llama_free_model(m);
    }
    return lm_test_summary();
}
