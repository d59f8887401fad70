/* test_iq2_model.c - IQ2_XXS / IQ2_XS end to end: a small llama model whose
 * rows are multiples of 256 (stories260K's vocabulary and keys, n_embd 256,
 * n_ff 512, 2 layers, grouped KV heads, random F32 weights) quantized with
 * lm_quantize_model to LLAMA_FTYPE_MOSTLY_IQ2_XXS / _IQ2_XS with an
 * importance matrix, then loaded through llama.h and decoded.
 *
 * Checks: without an importance matrix the quantizer refuses with the seed's
 * message; with one, every tensor gets b1892's type (attn_q/k/output and the
 * ffn matrices IQ2, attn_v Q4_K (n_gqa 4), token_embd Q2_K, output Q5_K);
 * the model loads, a batch of 8 prompt
 * tokens (the matmul's many-rows path) and one more token decode to finite
 * logits that follow the F32 model's (cosine > 0.5: 2-bit weights of a random
 * network; a broken decoder gives ~0), at every ISA level (cosine with the
 * generic level's logits > 0.9999).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/kernels/kernels.h"
#include "gguf/gguf.h"
#include "llama.h"
#include "model/quantize.h"
#include "util_api.h"

#define N_EMBD 256
#define N_FF 512
#define N_LAYER 2
#define N_HEAD 4
#define N_HEAD_KV 1

static uint64_t rng = 0x9E3779B97F4A7C15ull;

static float gauss(void)
{
    double u[2];
    for (int i = 0; i < 2; i++) {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        u[i] = ((double)(rng >> 11) + 0.5) * 0x1p-53;
    }
    return (float)(sqrt(-2.0 * log(u[0])) * cos(6.283185307179586 * u[1]));
}

static bool add_f32(struct lm_gguf_writer *w, const char *name, int64_t ne0, int64_t ne1, float scale, float **keep,
                    int *nkeep)
{
    const int64_t n = ne0 * ne1;
    float *d = malloc((size_t)n * sizeof(float));
    if (!d)
        return false;
    for (int64_t i = 0; i < n; i++)
        d[i] = scale ? scale * gauss() : 1.0f;
    keep[(*nkeep)++] = d;
    const int64_t ne[2] = {ne0, ne1};
    return lm_gguf_add_tensor(w, name, LM_TYPE_F32, ne1 > 1 ? 2 : 1, ne, d) == LM_OK;
}

/* The F32 model at path; false on failure. */
static bool write_model(const char *path)
{
    static const char *const skip[] = {"llama.embedding_length", "llama.feed_forward_length",
                                       "llama.attention.head_count", "llama.attention.head_count_kv",
                                       "llama.block_count", "llama.rope.dimension_count"};
    struct lm_gguf *g = NULL;
    struct lm_gguf_writer *w = NULL;
    float *keep[64];
    int nkeep = 0;
    bool ok = lm_gguf_open(lm_test_shared("models/stories260K.gguf"), &g, NULL, 0) == LM_OK &&
              lm_gguf_writer_new(&w) == LM_OK;
    for (int64_t i = 0; ok && i < lm_gguf_n_kv(g); i++) {
        bool s = false;
        for (size_t k = 0; k < sizeof skip / sizeof skip[0]; k++)
            s = s || !strcmp(lm_gguf_key(g, i), skip[k]);
        if (!s)
            ok = lm_gguf_copy_kv(w, g, i) == LM_OK;
    }
    ok = ok && lm_gguf_set_u32(w, "llama.embedding_length", N_EMBD) == LM_OK &&
         lm_gguf_set_u32(w, "llama.feed_forward_length", N_FF) == LM_OK &&
         lm_gguf_set_u32(w, "llama.attention.head_count", N_HEAD) == LM_OK &&
         lm_gguf_set_u32(w, "llama.attention.head_count_kv", N_HEAD_KV) == LM_OK &&
         lm_gguf_set_u32(w, "llama.block_count", N_LAYER) == LM_OK &&
         lm_gguf_set_u32(w, "llama.rope.dimension_count", N_EMBD / N_HEAD) == LM_OK;
    const int64_t n_vocab = 512, kv = N_EMBD / N_HEAD * N_HEAD_KV;
    ok = ok && add_f32(w, "token_embd.weight", N_EMBD, n_vocab, 0.5f, keep, &nkeep) &&
         add_f32(w, "output_norm.weight", N_EMBD, 1, 0, keep, &nkeep) &&
         add_f32(w, "output.weight", N_EMBD, n_vocab, 0.1f, keep, &nkeep);
    for (int l = 0; ok && l < N_LAYER; l++) {
        char n[64];
#define T(suffix, a, b, sc) (snprintf(n, sizeof n, "blk.%d." suffix, l), add_f32(w, n, a, b, sc, keep, &nkeep))
        ok = T("attn_norm.weight", N_EMBD, 1, 0) && T("attn_q.weight", N_EMBD, N_EMBD, 0.06f) &&
             T("attn_k.weight", N_EMBD, kv, 0.06f) && T("attn_v.weight", N_EMBD, kv, 0.06f) &&
             T("attn_output.weight", N_EMBD, N_EMBD, 0.06f) && T("ffn_norm.weight", N_EMBD, 1, 0) &&
             T("ffn_gate.weight", N_EMBD, N_FF, 0.06f) && T("ffn_down.weight", N_FF, N_EMBD, 0.04f) &&
             T("ffn_up.weight", N_EMBD, N_FF, 0.06f);
#undef T
    }
    ok = ok && lm_gguf_write_file(w, path) == LM_OK;
    lm_gguf_writer_free(w);
    lm_gguf_close(g);
    for (int i = 0; i < nkeep; i++)
        free(keep[i]);
    return ok;
}

/* Importance weights: 1 + (column mod 5) / 4, for every tensor. */
static const float *imatrix_of(void *user, const char *name, int64_t n_per_row)
{
    (void)name;
    float *w = user;
    return n_per_row <= 4 * N_FF ? w : NULL;
}

static enum lm_type file_type_of(const char *path, const char *tensor)
{
    struct lm_gguf *g = NULL;
    enum lm_type t = LM_TYPE_COUNT;
    if (lm_gguf_open(path, &g, NULL, 0) == LM_OK) {
        const int64_t i = lm_gguf_find_tensor(g, tensor);
        if (i >= 0)
            t = lm_gguf_tensor_info(g, i)->type;
    }
    lm_gguf_close(g);
    return t;
}

/* Logits of the last token after decoding 8 prompt tokens and one more (malloc'd). */
static float *run(const char *path)
{
    struct llama_model *m = llama_load_model_from_file(path, llama_model_default_params());
    CHECK(m != NULL);
    if (!m)
        return NULL;
    struct llama_context *ctx = api_ctx(m, 64, 64, false);
    float *out = NULL;
    llama_token prompt[8] = {1, 45, 300, 7, 99, 260, 3, 511}, next = 77;
    if (ctx && llama_decode(ctx, llama_batch_get_one(prompt, 8, 0, 0)) == 0 &&
        llama_decode(ctx, llama_batch_get_one(&next, 1, 8, 0)) == 0) {
        const int nv = llama_n_vocab(m);
        out = malloc((size_t)nv * sizeof(float));
        memcpy(out, llama_get_logits(ctx), (size_t)nv * sizeof(float));
    }
    CHECK(out != NULL);
    llama_free(ctx);
    llama_free_model(m);
    return out;
}

static double cosine(const float *a, const float *b, int n)
{
    double ab = 0, aa = 0, bb = 0;
    for (int i = 0; i < n; i++) {
        ab += (double)a[i] * b[i];
        aa += (double)a[i] * a[i];
        bb += (double)b[i] * b[i];
    }
    return ab / sqrt(aa * bb + 1e-300);
}

static void test_ftype(const char *f32, const float *ref, uint32_t ftype, enum lm_type iq2, float *imat)
{
    const char *out = api_tmp_path(ftype == 19 ? "iq2xxs.gguf" : "iq2xs.gguf");
    struct lm_quantize_params p = lm_quantize_default_params();
    p.ftype = ftype;
    p.nthread = 2;
    char err[256] = "";
    /* no importance matrix: refused with the seed's message, nothing written */
    CHECK(lm_quantize_model(f32, out, &p, err, sizeof err) != LM_OK);
    CHECKF(strstr(err, "Missing importance matrix for tensor") != NULL, "message: %s", err);
    p.imatrix = imatrix_of;
    p.imatrix_user = imat;
    CHECKF(lm_quantize_model(f32, out, &p, err, sizeof err) == LM_OK, "%s", err);
    /* ffn_down: Q2_K only for layers below n_layer / 8 = 0 here (tests/model covers the rule) */
    CHECK(file_type_of(out, "blk.0.attn_q.weight") == iq2 && file_type_of(out, "blk.1.attn_k.weight") == iq2 &&
          file_type_of(out, "blk.0.attn_output.weight") == iq2 && file_type_of(out, "blk.1.ffn_up.weight") == iq2 &&
          file_type_of(out, "blk.0.ffn_gate.weight") == iq2 && file_type_of(out, "blk.0.ffn_down.weight") == iq2);
    CHECK(file_type_of(out, "blk.0.attn_v.weight") == LM_TYPE_Q4_K); /* n_gqa = 4 */
    CHECK(file_type_of(out, "token_embd.weight") == LM_TYPE_Q2_K);
    CHECK(file_type_of(out, "output.weight") == LM_TYPE_Q5_K);
    const int nv = 512;
    float *first = NULL;
    const enum lm_cpu_isa best = lm_cpu_isa_best();
    for (int isa = 0; isa <= (int)best; isa++) {
        if (!lm_cpu_kernels_for((enum lm_cpu_isa)isa))
            continue;
        lm_cpu_isa_limit((enum lm_cpu_isa)isa);
        float *l = run(out);
        if (!l)
            continue;
        int bad = 0;
        for (int i = 0; i < nv; i++)
            bad += !isfinite(l[i]);
        CHECKF(bad == 0, "%s %s: %d non-finite logits", lm_type_name(iq2), lm_cpu_isa_name((enum lm_cpu_isa)isa),
               bad);
        const double c = cosine(l, ref, nv);
        CHECKF(c > 0.5, "%s: cosine with the F32 logits %.3f", lm_type_name(iq2), c);
        if (!first) {
            printf("%s: logits finite, cosine with F32 %.4f\n", lm_type_name(iq2), c);
            first = l;
        } else {
            /* the other ops (Q8_K rounding of activations, K-quant dots, F32 sums) differ in float order */
            const double cg = cosine(first, l, nv);
            CHECKF(cg > 0.9999, "%s: %s logits vs generic: cosine %.6f", lm_type_name(iq2),
                   lm_cpu_isa_name((enum lm_cpu_isa)isa), cg);
            free(l);
        }
    }
    lm_cpu_isa_limit(best);
    free(first);
    remove(out);
}

int main(void)
{
    api_test_init();
    const char *f32 = api_tmp_path("f32.gguf");
    CHECK(write_model(f32));
    float *ref = run(f32);
    static float imat[4 * N_FF];
    for (int i = 0; i < 4 * N_FF; i++)
        imat[i] = 1.0f + (float)(i % 5) / 4;
    if (ref) {
        test_ftype(f32, ref, LLAMA_FTYPE_MOSTLY_IQ2_XXS, LM_TYPE_IQ2_XXS, imat);
        test_ftype(f32, ref, LLAMA_FTYPE_MOSTLY_IQ2_XS, LM_TYPE_IQ2_XS, imat);
    }
    free(ref);
    remove(f32);
    return lm_test_summary();
}
