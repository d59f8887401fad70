/* test_batching.c - llama_batch semantics:
 *  (a) prompts decoded one sequence per context and (b) the same prompts as
 *      several sequences in one batch give the same logits;
 *  (c) a prompt decoded in n_batch-sized pieces gives the same logits as one
 *      batch, and llama_get_logits_ith follows batch.logits flags;
 *  (d) a batch larger than n_batch, unknown tokens, bad positions and sequence
 *      ids are refused with the documented error value.
 * Runs on a real model (stories260K, F32 weights) and on a 32000-token model
 * with F16 weights (llama-2-tiny-random). */
#include <stdlib.h>
#include <string.h>

#include "util_api.h"

#define TOL 1e-4 /* logits are O(10); different accumulation orders differ by ~1e-6 */

static const llama_token P0[] = {1, 403, 407, 261, 378, 432, 383, 286, 261};
static const llama_token P1[] = {1, 346, 306, 414, 263, 304};
static const llama_token P2[] = {1, 320, 272, 279, 289, 310, 309, 311, 312, 313, 314, 319};

struct prompt {
    const llama_token *t;
    int n;
};

/* logits of every position of p decoded alone (n_batch as given) */
static float *solo(struct llama_model *m, struct prompt p, uint32_t n_batch)
{
    struct llama_context *ctx = api_ctx(m, 128, n_batch, true);
    int nv = llama_n_vocab(m);
    float *out = calloc((size_t)p.n * (size_t)nv, sizeof(float));
    for (int done = 0; ctx && done < p.n;) {
        int n = p.n - done < (int)n_batch ? p.n - done : (int)n_batch;
        struct llama_batch b = llama_batch_get_one((llama_token *)p.t + done, n, done, 0);
        CHECK(llama_decode(ctx, b) == 0);
        for (int i = 0; i < n; i++)
            memcpy(out + (size_t)(done + i) * nv, llama_get_logits_ith(ctx, i), (size_t)nv * sizeof(float));
        done += n;
    }
    llama_free(ctx);
    return out;
}

static void test_multi_sequence(struct llama_model *m, const char *name)
{
    struct prompt ps[3] = {{P0, 9}, {P1, 6}, {P2, 12}};
    int nv = llama_n_vocab(m), total = 0;
    float *ref[3];
    for (int s = 0; s < 3; s++) {
        ref[s] = solo(m, ps[s], 64);
        total += ps[s].n;
    }
    struct llama_context *ctx = api_ctx(m, 128, 64, false);
    struct llama_batch b = llama_batch_init(total, 0, 1);
    /* interleave the sequences token by token */
    int k = 0, idx[3] = {0, 0, 0};
    while (k < total) {
        for (int s = 0; s < 3; s++) {
            if (idx[s] >= ps[s].n)
                continue;
            b.token[k] = ps[s].t[idx[s]];
            b.pos[k] = idx[s];
            b.n_seq_id[k] = 1;
            b.seq_id[k][0] = s;
            b.logits[k] = 1;
            idx[s]++;
            k++;
        }
    }
    b.n_tokens = total;
    CHECK(llama_decode(ctx, b) == 0);
    double worst = 0;
    int rows = 0;
    for (int i = 0, s, p; i < total; i++) {
        s = b.seq_id[i][0];
        p = b.pos[i];
        double d = api_max_diff(llama_get_logits_ith(ctx, i), ref[s] + (size_t)p * nv, (size_t)nv);
        worst = d > worst ? d : worst;
        rows++;
    }
    CHECKF(worst < TOL, "%s: multi-sequence batch differs by %g", name, worst);
    printf("%s: %d tokens of 3 sequences in one batch vs one at a time: max |diff| %.3g\n", name, rows, worst);
    /* continue one sequence by a token: same as continuing alone */
    llama_token next = 500 % nv;
    CHECK(llama_decode(ctx, llama_batch_get_one(&next, 1, ps[1].n, 1)) == 0);
    struct llama_context *alone = api_ctx(m, 128, 64, false);
    CHECK(llama_decode(alone, llama_batch_get_one((llama_token *)P1, 6, 0, 0)) == 0);
    CHECK(llama_decode(alone, llama_batch_get_one(&next, 1, 6, 0)) == 0);
    double d = api_max_diff(llama_get_logits(ctx), llama_get_logits(alone), (size_t)nv);
    CHECKF(d < TOL, "%s: continuation differs by %g", name, d);
    llama_free(alone);
    llama_batch_free(b);
    llama_free(ctx);
    for (int s = 0; s < 3; s++)
        free(ref[s]);
}

static void test_n_batch(struct llama_model *m, const char *name)
{
    struct prompt p = {P2, 12};
    int nv = llama_n_vocab(m);
    float *big = solo(m, p, 64);
    uint32_t sizes[] = {1, 5, 7};
    for (size_t i = 0; i < 3; i++) {
        float *small = solo(m, p, sizes[i]);
        double d = api_max_diff(big, small, (size_t)p.n * nv);
        CHECKF(d < TOL, "%s: n_batch %u differs by %g", name, sizes[i], d);
        printf("%s: n_batch %u vs one batch of %d: max |diff| %.3g\n", name, sizes[i], p.n, d);
        free(small);
    }
    /* without logits_all and batch.logits only the last row exists */
    struct llama_context *ctx = api_ctx(m, 64, 64, false);
    CHECK(llama_decode(ctx, llama_batch_get_one((llama_token *)P2, 12, 0, 0)) == 0);
    CHECK(api_max_diff(llama_get_logits(ctx), big + (size_t)11 * nv, (size_t)nv) < TOL);
    CHECK(llama_get_logits_ith(ctx, 1) == NULL);
    llama_free(ctx);
    free(big);
}

static void test_bad_batches(struct llama_model *m)
{
    struct llama_context *ctx = api_ctx(m, 32, 8, false);
    llama_token toks[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
    CHECK(llama_decode(ctx, llama_batch_get_one(toks, 9, 0, 0)) == -1);   /* > n_batch */
    CHECK(llama_decode(ctx, llama_batch_get_one(toks, 0, 0, 0)) == -1);   /* empty */
    llama_token bad = llama_n_vocab(m);
    CHECK(llama_decode(ctx, llama_batch_get_one(&bad, 1, 0, 0)) == -1);   /* unknown token */
    bad = -5;
    CHECK(llama_decode(ctx, llama_batch_get_one(&bad, 1, 0, 0)) == -1);
    CHECK(llama_decode(ctx, llama_batch_get_one(toks, 2, -3, 0)) == -1);  /* negative position */
    CHECK(llama_decode(ctx, llama_batch_get_one(toks, 2, 0, -1)) == -1);  /* bad sequence id */
    CHECK(llama_decode(ctx, llama_batch_get_one(toks, 2, 0, 1000)) == -1);
    CHECK(llama_get_kv_cache_used_cells(ctx) == 0);
    /* filling the cache: 1 (no slot) once it is full */
    for (int i = 0; i < 4; i++)
        CHECK(llama_decode(ctx, llama_batch_get_one(toks, 8, 8 * i, 0)) == 0);
    CHECK(llama_decode(ctx, llama_batch_get_one(toks, 1, 32, 0)) == 1);
    CHECK(llama_get_kv_cache_used_cells(ctx) == 32);
    llama_free(ctx);
}

int main(void)
{
    api_test_init();
    const char *models[] = {"models/stories260K.gguf", "models/llama-2-tiny-random.gguf"};
    for (int i = 0; i < 2; i++) {
        struct llama_model *m = api_load(models[i]);
        CHECKF(m != NULL, "cannot load %s", models[i]);
        if (!m)
            continue;
        test_multi_sequence(m, models[i]);
        test_n_batch(m, models[i]);
        if (i == 0)
            test_bad_batches(m);
        llama_free_model(m);
    }
    return lm_test_summary();
}
