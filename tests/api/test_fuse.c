/* test_fuse.c - the CPU executor's fused node pairs (RMS_NORM x weight,
 * SILU x up; cpu/fuse.c) give bit-identical logits to the separate ops, on
 * stories260K (F32, with prompts in one batch and token by token) and on
 * llama-2-tiny-random (F16 weights, 32000-token vocabulary). */
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu_internal.h"
#include "util_api.h"

static float *run(struct llama_model *m, bool fuse, int *n_out)
{
    lm_cpu_fuse_set(fuse);
    struct llama_context *ctx = api_ctx(m, 64, 32, true);
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
        llama_free_model(m);
    }
    lm_cpu_fuse_set(true);
    return lm_test_summary();
}
