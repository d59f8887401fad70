/* test_api_embd.c - embeddings and the deprecated eval functions.
 *
 *  - embedding = true: llama_get_embeddings gives n_embd floats, the same bits
 *    in a second context and a second run, for the LAST token of the batch
 *    (a prompt decoded in one batch or as 8 + 1 gives the same vector within
 *    1e-5). That the vector is the final normed hidden state is checked
 *    through the only thing that consumes it: the logits must equal
 *    output.weight x embedding (output.weight read straight from the GGUF
 *    file with the container reader, products in double) within 1e-4;
 *  - llama_eval(ctx, tokens, n, n_past) behaves as seq_rm(-1, n_past, -1) +
 *    decode at n_past: rewriting the tail of a sequence gives the logits of a
 *    context that decoded only the kept prefix and the new tokens, and the
 *    cache holds exactly n_past + n cells;
 *  - llama_eval_embd with the tokens' embedding rows (token_embd.weight from
 *    the file) gives the logits of llama_eval with the tokens (within 1e-5),
 *    with the same cache semantics. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "util_api.h"

#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

static struct llama_model *M;
static int NV, NE;
static const llama_token P[] = {1, 403, 407, 261, 378, 432, 383, 286, 261};
#define NP 9

/* An F32 tensor of stories260K read from the file (malloc'd). */
static float *file_tensor(const char *name, int64_t n_expected)
{
    char path[4096];
    snprintf(path, sizeof path, "%s", lm_test_shared("models/stories260K.gguf"));
    struct lm_gguf *g = NULL;
    float *out = NULL;
    if (lm_gguf_open(path, &g, NULL, 0) == LM_OK) {
        int64_t i = lm_gguf_find_tensor(g, name);
        const struct lm_gguf_tensor_info *ti = i >= 0 ? lm_gguf_tensor_info(g, i) : NULL;
        size_t size;
        uint8_t *file = ti ? lm_test_read_file(path, &size) : NULL;
        if (file && ti->type == LM_TYPE_F32 && ti->ne[0] * ti->ne[1] == n_expected) {
            out = malloc((size_t)ti->size);
            memcpy(out, file + ti->offset, (size_t)ti->size);
        }
        free(file);
    }
    lm_gguf_close(g);
    CHECKF(out != NULL, "cannot read %s from the model file", name);
    return out;
}

static struct llama_context *make_ctx(bool embedding)
{
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 64;
    cp.n_batch = 32;
    cp.n_threads = cp.n_threads_batch = 2;
    cp.embedding = embedding;
    return llama_new_context_with_model(M, cp);
}

static void test_embeddings(void)
{
    struct llama_context *a = make_ctx(true), *b = make_ctx(true), *c = make_ctx(true);
    CHECK(llama_decode(a, llama_batch_get_one((llama_token *)P, NP, 0, 0)) == 0);
    CHECK(llama_decode(b, llama_batch_get_one((llama_token *)P, NP, 0, 0)) == 0);
    CHECK(llama_decode(c, llama_batch_get_one((llama_token *)P, NP - 1, 0, 0)) == 0);
    CHECK(llama_decode(c, llama_batch_get_one((llama_token *)P + NP - 1, 1, NP - 1, 0)) == 0);
    const float *ea = llama_get_embeddings(a), *eb = llama_get_embeddings(b), *ec = llama_get_embeddings(c);
    CHECK(ea && eb && ec);
    if (!ea || !eb || !ec)
        return;
    CHECK(memcmp(ea, eb, (size_t)NE * sizeof(float)) == 0);
    double d_split = api_max_diff(ea, ec, (size_t)NE);
    CHECKF(d_split < 1e-5, "embedding of 9 vs 8 + 1 tokens differs by %g", d_split);
    double norm = 0;
    for (int i = 0; i < NE; i++)
        norm += (double)ea[i] * ea[i];
    CHECK(norm > 1.0 && isfinite(norm));
    /* the same again in the same context after a clear */
    float *first = malloc((size_t)NE * sizeof(float));
    memcpy(first, ea, (size_t)NE * sizeof(float));
    llama_kv_cache_clear(a);
    CHECK(llama_decode(a, llama_batch_get_one((llama_token *)P, NP, 0, 0)) == 0);
    CHECK(memcmp(first, llama_get_embeddings(a), (size_t)NE * sizeof(float)) == 0);
    /* logits = output.weight x embedding */
    float *w = file_tensor("output.weight", (int64_t)NE * NV);
    double worst = 0, lmax = 0;
    const float *l = llama_get_logits(a), *e = llama_get_embeddings(a);
    for (int v = 0; w && v < NV; v++) {
        double s = 0;
        for (int i = 0; i < NE; i++)
            s += (double)w[(size_t)v * NE + i] * e[i];
        worst = fmax(worst, fabs(s - l[v]));
        lmax = fmax(lmax, fabs(l[v]));
    }
    CHECKF(w && worst < 1e-4, "logits vs output.weight x embedding: %g", worst);
    printf("embedding: %d floats, |e| = %.3f, logits = output.weight x e to %.2g (max |logit| %.1f), "
           "9 vs 8+1 tokens %.2g\n", NE, sqrt(norm), worst, lmax, d_split);
    free(w);
    free(first);
    llama_free(a);
    llama_free(b);
    llama_free(c);
}

static void test_eval(void)
{
    /* eval 9 tokens, then rewrite from position 5 with 3 other tokens */
    llama_token tail[3] = {376, 298, 346};
    struct llama_context *a = make_ctx(false), *b = make_ctx(false);
    CHECK(llama_eval(a, (llama_token *)P, NP, 0) == 0);
    CHECK(llama_get_kv_cache_used_cells(a) == NP);
    CHECK(llama_eval(a, tail, 3, 5) == 0);
    CHECK(llama_get_kv_cache_used_cells(a) == 8 && llama_get_kv_cache_token_count(a) == 8);
    CHECK(llama_decode(b, llama_batch_get_one((llama_token *)P, 5, 0, 0)) == 0);
    CHECK(llama_decode(b, llama_batch_get_one(tail, 3, 5, 0)) == 0);
    double d = api_max_diff(llama_get_logits(a), llama_get_logits(b), (size_t)NV);
    CHECKF(d < 1e-5, "llama_eval rewrite vs decode: %g", d);
    /* n_past 0 starts over */
    CHECK(llama_eval(a, (llama_token *)P, 2, 0) == 0 && llama_get_kv_cache_used_cells(a) == 2);

    /* eval_embd with the token embedding rows */
    float *emb = file_tensor("token_embd.weight", (int64_t)NE * NV);
    float *rows = malloc((size_t)NP * NE * sizeof(float));
    for (int i = 0; emb && i < NP; i++)
        memcpy(rows + (size_t)i * NE, emb + (size_t)P[i] * NE, (size_t)NE * sizeof(float));
    struct llama_context *c = make_ctx(false);
    CHECK(llama_eval(c, (llama_token *)P, NP, 0) == 0);
    float *want = malloc((size_t)NV * sizeof(float));
    memcpy(want, llama_get_logits(c), (size_t)NV * sizeof(float));
    CHECK(llama_eval(a, (llama_token *)P, 3, 0) == 0); /* something to replace */
    CHECK(emb && llama_eval_embd(a, rows, NP, 0) == 0);
    double de = api_max_diff(llama_get_logits(a), want, (size_t)NV);
    CHECKF(de < 1e-5, "llama_eval_embd vs llama_eval: %g", de);
    CHECK(llama_get_kv_cache_used_cells(a) == NP);
    /* embeddings continuing a token prefix, and tokens continuing embeddings */
    CHECK(llama_eval(a, (llama_token *)P, 4, 0) == 0);
    CHECK(llama_eval_embd(a, rows + (size_t)4 * NE, NP - 4, 4) == 0);
    de = fmax(de, api_max_diff(llama_get_logits(a), want, (size_t)NV));
    CHECK(llama_eval_embd(a, rows, 6, 0) == 0);
    CHECK(llama_eval(a, (llama_token *)P + 6, NP - 6, 6) == 0);
    de = fmax(de, api_max_diff(llama_get_logits(a), want, (size_t)NV));
    CHECKF(de < 1e-5, "mixed eval / eval_embd: %g", de);
    printf("eval: rewrite from n_past matches seq_rm + decode (%.2g); eval_embd matches eval (%.2g)\n", d, de);
    free(want);
    free(rows);
    free(emb);
    llama_free(a);
    llama_free(b);
    llama_free(c);
}

int main(void)
{
    M = api_start("models/stories260K.gguf");
    if (!M)
        return lm_test_summary();
    NV = llama_n_vocab(M);
    NE = llama_n_embd(M);
    test_embeddings();
    test_eval();
    llama_free_model(M);
    return lm_test_summary();
}
