/* test_graph_reuse.c - a context keeps its last decode graph for the next
 * decode of the same shape (model/context.c, docs/architecture.md "Decode").
 * One script of decodes runs with LAMINA_GRAPH_REUSE on and off; every
 * logit must be the same bytes, and with it on the kept graph must have
 * served most single-token decodes (none with it off). The script walks the
 * cases where a kept graph could go stale: the cache window growing past a
 * multiple of 32, cells freed and written again out of order, a K shift (its
 * own graph in the arena), a saved state loaded back, batches of several
 * sequences, and a K cache in Q8_0 (block-sized cells). Token ids are
 * taken modulo the vocabulary. */
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "model/context.h"
#include "util_api.h"

struct rec {
    float *v;
    size_t n, cap;
};

static void keep(struct rec *r, const float *x, size_t n)
{
    if (r->n + n > r->cap) {
        r->cap = (r->n + n) * 2;
        r->v = realloc(r->v, r->cap * sizeof *r->v);
    }
    memcpy(r->v + r->n, x, n * sizeof *x);
    r->n += n;
}

/* Decode one token of sequence seq at pos; its logits go to r. Returns the argmax. */
static llama_token step(struct llama_context *ctx, struct rec *r, llama_token t, llama_pos pos, llama_seq_id seq)
{
    const int nv = llama_n_vocab(llama_get_model(ctx));
    CHECKF(llama_decode(ctx, llama_batch_get_one(&t, 1, pos, seq)) == 0, "decode at %d", pos);
    const float *l = llama_get_logits(ctx);
    keep(r, l, (size_t)nv);
    return api_argmax(l, nv);
}

/* One token for each of n sequences in one batch, at the given positions. */
static void step_multi(struct llama_context *ctx, struct rec *r, const llama_token *t, const llama_pos *pos, int n)
{
    const int nv = llama_n_vocab(llama_get_model(ctx));
    struct llama_batch b = llama_batch_init(n, 0, 1);
    for (int i = 0; i < n; i++) {
        b.token[i] = t[i];
        b.pos[i] = pos[i];
        b.n_seq_id[i] = 1;
        b.seq_id[i][0] = i;
        b.logits[i] = 1;
    }
    b.n_tokens = n;
    const bool ok = llama_decode(ctx, b) == 0;
    CHECK(ok);
    for (int i = 0; i < n && ok; i++)
        keep(r, llama_get_logits_ith(ctx, i), (size_t)nv);
    llama_batch_free(b);
}

static int64_t script(struct llama_model *m, bool reuse, enum ggml_type type_k, struct rec *r)
{
    setenv("LAMINA_GRAPH_REUSE", reuse ? "1" : "0", 1);
    struct llama_context_params cp = api_ctx_params(256, 32);
    cp.type_k = type_k;
    struct llama_context *ctx = llama_new_context_with_model(m, cp);
    unsetenv("LAMINA_GRAPH_REUSE");
    CHECK(ctx != NULL);
    if (!ctx)
        return -1;
    const int nv = llama_n_vocab(m);
    llama_token prompt[12] = {1, 403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315};
    for (int i = 0; i < 12; i++)
        prompt[i] %= nv;
    CHECK(llama_decode(ctx, llama_batch_get_one(prompt, 12, 0, 0)) == 0);
    keep(r, llama_get_logits(ctx), (size_t)nv);

    /* 1. one token after another: the window grows from 32 to 64 cells */
    llama_token t = prompt[11];
    llama_pos pos = 12;
    for (; pos < 45; pos++)
        t = step(ctx, r, t, pos, 0);
    /* 2. free cells 20..44 and write them again: kv_head goes back */
    llama_kv_cache_seq_rm(ctx, 0, 20, -1);
    for (pos = 20; pos < 30; pos++)
        t = step(ctx, r, t, pos, 0);
    /* 3. a K shift: the next decode first runs the shift graph (a quantized
     * K cache is decoded, rotated and encoded again) */
    llama_kv_cache_seq_shift(ctx, 0, 5, 30, -3);
    pos -= 3;
    for (int i = 0; i < 4; i++, pos++)
        t = step(ctx, r, t, pos, 0);
    /* 4. save, decode, load back, decode the same tokens again */
    size_t sz = llama_get_state_size(ctx);
    uint8_t *state = malloc(sz);
    CHECK(state && llama_copy_state_data(ctx, state) <= sz);
    llama_token t0 = t;
    for (int i = 0; i < 3; i++)
        t = step(ctx, r, t, pos + i, 0);
    CHECK(llama_set_state_data(ctx, state) <= sz);
    t = t0;
    for (int i = 0; i < 3; i++)
        t = step(ctx, r, t, pos + i, 0);
    pos += 3;
    free(state);
    /* 5. three sequences decoding together (sequence 0's cells copied) */
    llama_kv_cache_seq_cp(ctx, 0, 1, 0, pos);
    llama_kv_cache_seq_cp(ctx, 0, 2, 0, pos);
    for (int i = 0; i < 6; i++, pos++) {
        llama_token ts[3] = {t, (llama_token)((300 + i) % nv), (llama_token)((400 + i) % nv)};
        llama_pos ps[3] = {pos, pos, pos};
        step_multi(ctx, r, ts, ps, 3);
    }
    /* 6. one sequence again, the others removed */
    llama_kv_cache_seq_rm(ctx, 1, -1, -1);
    llama_kv_cache_seq_rm(ctx, 2, -1, -1);
    for (int i = 0; i < 5; i++, pos++)
        t = step(ctx, r, t, pos, 0);
    int64_t n_reused = ctx->c->n_reused;
    llama_free(ctx);
    return n_reused;
}

int main(void)
{
    api_test_init();
    /* Q8_0 K needs heads of a multiple of 32: the persimmon fixture's are 64 wide */
    const struct {
        const char *model;
        enum ggml_type type_k;
    } cases[] = {
        {"models/stories260K.gguf", GGML_TYPE_F16},
        {"models/llama-2-tiny-random.gguf", GGML_TYPE_F16},
        {"fixtures/arch/persimmon.gguf", GGML_TYPE_Q8_0},
        {"fixtures/arch/persimmon.gguf", GGML_TYPE_F16},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct llama_model *m = api_load(cases[i].model);
        CHECK(m != NULL);
        if (!m)
            continue;
        struct rec on = {0}, off = {0};
        int64_t n_on = script(m, true, cases[i].type_k, &on), n_off = script(m, false, cases[i].type_k, &off);
        size_t n = on.n < off.n ? on.n : off.n;
        CHECKF(on.n == off.n && on.n > 0 && !memcmp(on.v, off.v, on.n * sizeof(float)),
               "%s, K cache type %d: logits with and without graph reuse differ (%zu vs %zu, max %g)", cases[i].model,
               (int)cases[i].type_k, on.n, off.n, api_max_diff(on.v, off.v, n));
        /* 64 decodes after the prompt; about 10 must build (window, rm, shift, batch shape) */
        CHECKF(n_on >= 50 && n_off == 0, "%s: kept graph used %lld times (reuse on), %lld (off)", cases[i].model,
               (long long)n_on, (long long)n_off);
        printf("%s, K cache type %d: %zu logits the same with and without reuse; the kept graph ran %lld of 64 "
               "decodes\n",
               cases[i].model, (int)cases[i].type_k, on.n, (long long)n_on);
        free(on.v);
        free(off.v);
        llama_free_model(m);
    }
    return lm_test_summary();
}
