/* refact.c - Refact (Refact-1.6B): the LLaMA layout (RMSNorm, separate Q/K/V,
 * SwiGLU FFN, no biases) with multi-query attention and no RoPE: positions
 * enter only through ALiBi biases (max bias 8).
 *
 *   x = embed(tokens)
 *   for each layer:
 *       h = x + Wo · attn_alibi(Wq · rms(x), Wk · rms(x), Wv · rms(x))
 *       x = h + W2 · (silu(W1 · rms(h)) * W3 · rms(h))
 *   logits = Wout · rms(x)
 *
 * llama.cpp b1892 cannot load refact files (its tensor table lacks a name
 * the shared LLaMA loading asks for); this follows later llama.cpp, whose
 * graph is the one above.
 */
#include <math.h>

#include "model/build.h"
#include "model/loader.h"

static lm_status hparams(struct lm_loader *ld, struct lm_hparams *hp)
{
    /* the files carry no max_alibi_bias; llama.cpp hard-codes 8 */
    if (hp->f_max_alibi_bias == 0.0f)
        hp->f_max_alibi_bias = 8.0f;
    return lm_ld_status(ld);
}

static enum lm_model_size size(const struct lm_hparams *hp)
{
    return hp->n_layer == 32 ? LM_SIZE_1B : LM_SIZE_UNKNOWN;
}

static struct lm_tensor *build(struct lm_build *b)
{
    struct lm_ctx *ctx = b->ctx;
    const struct lm_hparams *hp = b->hp;
    const float kq_scale = 1.0f / sqrtf((float)hp->n_embd_head_k);

    struct lm_tensor *x = lm_b_inp_embd(b); /* [n_embd, T] */
    for (uint32_t il = 0; il < hp->n_layer; il++) {
        const struct lm_layer *l = &b->m->layers[il];
        struct lm_tensor *q, *k, *v;
        struct lm_tensor *h = lm_b_norm(b, x, l->attn_norm, NULL, LM_NORM_RMS);
        lm_b_qkv(b, l, h, 0.0f, &q, &k, &v);
        h = lm_b_attn(b, (int)il, q, k, v, l->wo, NULL, kq_scale); /* ALiBi: hp->f_max_alibi_bias */
        h = lm_add(ctx, h, x);                                      /* residual */

        struct lm_tensor *f = lm_b_norm(b, h, l->ffn_norm, NULL, LM_NORM_RMS);
        f = lm_b_ffn(b, f, l, LM_ACT_SILU);
        x = lm_add(ctx, f, h); /* residual */
    }
    return lm_b_output(b, x, LM_NORM_RMS);
}

const struct lm_arch_def lm_arch_refact = {
    .name = "refact",
    .rope_mode = -1,
    .hparams = hparams,
    .size = size,
    .tensors = lm_baichuan_tensors, /* the same layout */
    .build = build,
};
