/* qwen2.c - Qwen1.5 / Qwen2: the LLaMA block with biases on the Q, K and V
 * projections and RoPE on NEOX pairs; RMSNorm, grouped-query attention,
 * SwiGLU FFN; the output head may be tied to the embedding (small models).
 *
 *   x = embed(tokens)
 *   for each layer:
 *       n = rms(x)
 *       h = x + Wo · attn(rope(Wq n + bq), rope(Wk n + bk), Wv n + bv)
 *       x = h + W2 · (silu(W1 · rms(h)) * W3 · rms(h))
 *   logits = Wout · rms(x)
 */
#include <math.h>

#include "model/build.h"
#include "model/loader.h"

static enum lm_model_size size(const struct lm_hparams *hp)
{
    switch (hp->n_layer) {
    case 24: return hp->n_embd == 1024 ? LM_SIZE_0_5B : LM_SIZE_1B;
    case 28: return hp->n_embd == 1536 ? LM_SIZE_1_5B : LM_SIZE_7B;
    case 32: return LM_SIZE_7B;
    case 36: return LM_SIZE_3B;
    case 40: return hp->n_head == 20 ? LM_SIZE_4B : LM_SIZE_13B;
    case 48: return LM_SIZE_14B;
    case 80: return LM_SIZE_70B;
    default: return LM_SIZE_UNKNOWN;
    }
}

static lm_status tensors(struct lm_loader *ld, struct lm_model *m)
{
    const struct lm_hparams *hp = &m->hp;
    int64_t E = hp->n_embd, V = hp->n_vocab, F = hp->n_ff;
    int64_t Eq = (int64_t)hp->n_embd_head_k * hp->n_head, Ekv = lm_hp_n_embd_k_gqa(hp), Ev = lm_hp_n_embd_v_gqa(hp);
    m->tok_embd = lm_ld_weight(ld, 0, LM_TN_TOKEN_EMBD, 0, LM_NE2(E, V));
    m->output_norm = lm_ld_weight(ld, 0, LM_TN_OUTPUT_NORM, 0, LM_NE1(E));
    m->output = lm_ld_output(ld, hp);
    for (int il = 0; il < (int)hp->n_layer; il++) {
        struct lm_layer *l = &m->layers[il];
        l->attn_norm = lm_ld_weight(ld, 0, LM_TN_ATTN_NORM, il, LM_NE1(E));
        l->wq = lm_ld_weight(ld, 0, LM_TN_ATTN_Q, il, LM_NE2(E, Eq));
        l->wk = lm_ld_weight(ld, 0, LM_TN_ATTN_K, il, LM_NE2(E, Ekv));
        l->wv = lm_ld_weight(ld, 0, LM_TN_ATTN_V, il, LM_NE2(E, Ev));
        l->bq = lm_ld_bias(ld, 0, LM_TN_ATTN_Q, il, LM_NE1(Eq));
        l->bk = lm_ld_bias(ld, 0, LM_TN_ATTN_K, il, LM_NE1(Ekv));
        l->bv = lm_ld_bias(ld, 0, LM_TN_ATTN_V, il, LM_NE1(Ev));
        l->wo = lm_ld_weight(ld, 0, LM_TN_ATTN_OUT, il, LM_NE2(Eq, E));
        l->ffn_norm = lm_ld_weight(ld, 0, LM_TN_FFN_NORM, il, LM_NE1(E));
        l->ffn_gate = lm_ld_weight(ld, 0, LM_TN_FFN_GATE, il, LM_NE2(E, F));
        l->ffn_down = lm_ld_weight(ld, 0, LM_TN_FFN_DOWN, il, LM_NE2(F, E));
        l->ffn_up = lm_ld_weight(ld, 0, LM_TN_FFN_UP, il, LM_NE2(E, F));
    }
    return lm_ld_status(ld);
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
        q = lm_b_rope(b, q, (int)hp->n_rot, LM_ROPE_NEOX);
        k = lm_b_rope(b, k, (int)hp->n_rot, LM_ROPE_NEOX);
        h = lm_b_attn(b, (int)il, q, k, v, l->wo, NULL, kq_scale);
        h = lm_add(ctx, h, x); /* residual */

        struct lm_tensor *f = lm_b_norm(b, h, l->ffn_norm, NULL, LM_NORM_RMS);
        f = lm_b_ffn(b, f, l, LM_ACT_SILU);
        x = lm_add(ctx, f, h); /* residual */
    }
    return lm_b_output(b, x, LM_NORM_RMS);
}

const struct lm_arch_def lm_arch_qwen2 = {
    .name = "qwen2",
    .rope_mode = LM_ROPE_NEOX,
    .size = size,
    .tensors = tensors,
    .build = build,
};
