/* test_api_lifecycle.c - load / free order as a garbage-collected binding
 * does it (shared/spec/llama-api.md: objects freed in no guaranteed order,
 * some after llama_backend_free):
 *  - the model freed before its context; then the context freed;
 *  - llama_backend_free first, then model and context in either order;
 *  - llama_backend_init twice, and again after llama_backend_free: loading
 *    and decoding still work and give the same logits;
 *  - several contexts on one model freed in mixed order, grammars and
 *    batches outliving the model;
 *  - every free function accepts NULL / empty objects.
 * The value of this program is in the sanitizer build (ASan/UBSan): any use
 * after free or leak fails it. */
#include <stdlib.h>
#include <string.h>

#include "util_api.h"

static const llama_token P[] = {1, 403, 407, 261, 378};

static void decode_logits(struct llama_context *ctx, float *out, int nv)
{
    CHECK(llama_decode(ctx, llama_batch_get_one((llama_token *)P, 5, 0, 0)) == 0);
    memcpy(out, llama_get_logits(ctx), (size_t)nv * sizeof(float));
}

int main(void)
{
    api_test_init();
    llama_backend_init(false); /* twice */
    struct llama_model *m = api_load("models/stories260K.gguf");
    CHECK(m != NULL);
    if (!m)
        return lm_test_summary();
    int nv = llama_n_vocab(m);
    float *ref = malloc((size_t)nv * sizeof(float)), *got = malloc((size_t)nv * sizeof(float));

    /* model before context */
    struct llama_context *ctx = api_ctx(m, 64, 64, false);
    decode_logits(ctx, ref, nv);
    const llama_grammar_element r0[] = {{LLAMA_GRETYPE_CHAR, 'a'}, {LLAMA_GRETYPE_END, 0}};
    const llama_grammar_element *rules[] = {r0};
    struct llama_grammar *g = llama_grammar_init(rules, 1, 0);
    struct llama_batch b = llama_batch_init(8, 0, 2);
    llama_free_model(m);
    llama_free(ctx);
    llama_grammar_free(g); /* grammars and batches outlive both */
    llama_batch_free(b);

    /* several contexts, mixed order */
    m = api_load("models/stories260K.gguf");
    struct llama_context *c1 = api_ctx(m, 64, 64, false), *c2 = api_ctx(m, 32, 8, true), *c3 = api_ctx(m, 16, 16, false);
    decode_logits(c2, got, nv);
    CHECK(api_max_diff(ref, llama_get_logits_ith(c2, 4), (size_t)nv) < 1e-5);
    llama_free(c2);
    decode_logits(c1, got, nv);
    CHECK(api_max_diff(ref, got, (size_t)nv) == 0.0);
    llama_free_model(m);
    llama_free(c3);
    llama_free(c1);

    /* backend_free first, then context and model in both orders */
    for (int order = 0; order < 2; order++) {
        llama_backend_init(false);
        m = api_load("models/stories260K.gguf");
        ctx = api_ctx(m, 64, 64, false);
        decode_logits(ctx, got, nv);
        CHECK(api_max_diff(ref, got, (size_t)nv) == 0.0);
        struct llama_kv_cache_view view = llama_kv_cache_view_init(ctx, 2);
        llama_kv_cache_view_update(ctx, &view);
        llama_backend_free();
        if (order == 0) {
            llama_free(ctx);
            llama_free_model(m);
        } else {
            llama_free_model(m);
            llama_free(ctx);
        }
        llama_kv_cache_view_free(&view);
        llama_kv_cache_view_free(&view); /* twice: the first one cleared it */
    }

    /* init again after free: everything works as before */
    llama_backend_init(false);
    m = api_load("models/stories260K.gguf");
    ctx = api_ctx(m, 64, 64, false);
    decode_logits(ctx, got, nv);
    CHECK(api_max_diff(ref, got, (size_t)nv) == 0.0);
    llama_free(ctx);
    llama_free_model(m);

    /* NULL and empty objects */
    llama_free(NULL);
    llama_free_model(NULL);
    llama_grammar_free(NULL);
    llama_batch_free(llama_batch_get_one(NULL, 0, 0, 0));
    llama_batch_free(llama_batch_init(0, 0, 1)); /* refused: all NULL */
    struct llama_kv_cache_view empty;
    memset(&empty, 0, sizeof empty);
    llama_kv_cache_view_free(&empty);
    CHECK(llama_grammar_copy(NULL) == NULL);

    llama_backend_free();
    free(ref);
    free(got);
    return lm_test_summary();
}
