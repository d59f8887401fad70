/* test_isa_logits.c - on a model with TinyLlama-1.1B's shapes (1 layer,
 * written by `lamina mkmodel`), the logits of a 64-token prompt and of 4
 * tokens decoded one at a time after it (the one-column matmuls) agree between
 * the generic kernels and every faster kernel level this CPU runs (avx2,
 * avx512, amx), for Q4_0 (repacked integer GEMM), F16 and BF16 weights (every
 * matrix of the file in that type). The levels differ in float accumulation
 * order and, for quantized weights, in how activations are quantized: generic
 * uses the reference encoder (id = 1/d, ties away from zero), the x86 levels
 * ggml's x86 encoder (id = 127/amax, ties to even), so a few activation quants
 * differ by one step; BF16 dots by vdpbf16ps / AMX flush denormals; F16 on AMX
 * runs as a 3-term BF16 split (docs/kernels.md).
 * Measured (AVX2): F16 5e-4, Q4_0/Q8_0 1.1-1.5e-2 of max |logit|; bound 3e-2.
 * Greedy argmax must agree where the top two logits are clearly apart. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cpu/cpu.h"
#include "util_api.h"

#define N_PROMPT 64
#define N_GEN 4
#define N_ROWS (N_PROMPT + N_GEN)

static float *prompt_logits(struct llama_model *m, enum lm_cpu_isa isa)
{
    lm_cpu_isa_limit(isa);
    struct llama_context *ctx = api_ctx(m, 128, 64, true);
    int nv = llama_n_vocab(m);
    float *out = ctx ? malloc(sizeof(float) * (size_t)nv * N_ROWS) : NULL;
    llama_token toks[N_ROWS];
    for (int i = 0; i < N_ROWS; i++)
        toks[i] = i == 0 ? 1 : (llama_token)((i * 7919) % 31000 + 100);
    bool ok = out && llama_decode(ctx, llama_batch_get_one(toks, N_PROMPT, 0, 0)) == 0;
    if (ok)
        memcpy(out, llama_get_logits(ctx), sizeof(float) * (size_t)nv * N_PROMPT);
    for (int i = N_PROMPT; ok && i < N_ROWS; i++) {
        ok = llama_decode(ctx, llama_batch_get_one(&toks[i], 1, i, 0)) == 0;
        if (ok)
            memcpy(out + (size_t)nv * i, llama_get_logits(ctx), sizeof(float) * (size_t)nv);
    }
    if (out && !ok) {
        free(out);
        out = NULL;
    }
    llama_free(ctx);
    return out;
}

/* The logits of level isa against the generic ones (gen). */
static void compare(struct llama_model *m, const char *type, const float *gen, enum lm_cpu_isa isa)
{
    float *best = prompt_logits(m, isa);
    CHECKF(best != NULL, "%s: no logits at level %s", type, lm_cpu_isa_name(isa));
    if (!best)
        return;
    int nv = llama_n_vocab(m);
    double max_ref = 0, max_diff = api_max_diff(gen, best, (size_t)nv * N_ROWS);
    int agree = 0, decided = 0;
    for (int i = 0; i < nv * N_ROWS; i++)
        max_ref = fabs(gen[i]) > max_ref ? fabs(gen[i]) : max_ref;
    for (int p = 0; p < N_ROWS; p++) {
        const float *g = gen + (size_t)p * nv, *b = best + (size_t)p * nv;
        int a1 = api_argmax(g, nv);
        float second = -INFINITY;
        for (int t = 0; t < nv; t++)
            if (t != a1 && g[t] > second)
                second = g[t];
        if (g[a1] - second > 4 * max_diff) {
            decided++;
            agree += api_argmax(b, nv) == a1;
        }
    }
    double rel = max_diff / (max_ref > 1 ? max_ref : 1);
    printf("%-6s generic vs %s: max |diff| %.3g (%.2g of max |logit| %.3g); argmax agrees at %d of %d decided "
           "positions\n",
           type, lm_cpu_isa_name(isa), max_diff, rel, max_ref, agree, decided);
    CHECKF(rel < 3e-2, "%s: relative difference %g", type, rel);
    CHECK(agree == decided);
    free(best);
}

static void check_type(const char *type)
{
    char path[256], cmd[1024];
    snprintf(path, sizeof path, "/tmp/lamina-isa-%d-%s.gguf", (int)getpid(), type);
    snprintf(cmd, sizeof cmd,
             "%s/tools/lamina mkmodel tinyllama-1.1b %s --type %s --pure --layers 1 --seed 7 "
             "--vocab %s/models/ggml-vocab/ggml-vocab-llama-spm.gguf >/dev/null 2>&1",
             LM_BINARY_DIR, path, type, LM_SHARED_DIR);
    CHECKF(system(cmd) == 0, "mkmodel %s failed", type);
    struct llama_model *m = llama_load_model_from_file(path, llama_model_default_params());
    CHECKF(m != NULL, "cannot load %s", path);
    if (!m)
        return;
    float *gen = prompt_logits(m, LM_ISA_GENERIC);
    CHECK(gen != NULL);
    for (int isa = LM_ISA_GENERIC + 1; gen && isa <= (int)lm_cpu_isa_best(); isa++)
        compare(m, type, gen, (enum lm_cpu_isa)isa);
    lm_cpu_isa_limit(lm_cpu_isa_best());
    free(gen);
    llama_free_model(m);
    unlink(path);
}

int main(void)
{
    api_test_init();
    const char *types[] = {"Q4_0", "F16", "BF16"}; /* Q8_0, K-quants: tests/cpu (this test is heavy) */
    for (int i = 0; i < 3; i++)
        check_type(types[i]);
    return lm_test_summary();
}
