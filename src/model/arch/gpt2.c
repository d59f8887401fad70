/* gpt2.c - GPT-2: learned position embeddings, pre-LayerNorm blocks with
 * biases everywhere, fused QKV, multi-head attention, GELU MLP.
 *
 *   x = embed(tokens) + pos_embed(positions)
 *   for each layer:
 *       h = x + Wo · attn(split(Wqkv · ln1(x) + bqkv)) + bo
 *       x = h + W2 · gelu(W1 · ln2(h) + b1) + b2
 *   logits = Wout · ln_f(x)
 */
#include <math.h>

#include "model/build.h"
#include "model/loader.h"

static enum lm_model_size size(const struct lm_hparams *hp)
{
    switch (hp->n_layer) {
    case 12: return LM_SIZE_0_1B;
    case 24: return LM_SIZE_0_4B;
    case 36: return LM_SIZE_0_8B;
    case 48: return LM_SIZE_1_5B;
    default: return LM_SIZE_UNKNOWN;
    }
}

/* Shared with starcoder (the same layout, with MQA). */
lm_status lm_gpt2_tensors(struct lm_loader *ld, struct lm_model *m)
{
    const struct lm_hparams *hp = &m->hp;
    int64_t E = hp->n_embd, V = hp->n_vocab, F = hp->n_ff;
    int64_t Eq = (int64_t)hp->n_embd_head_k * hp->n_head, Eqkv = Eq + lm_hp_n_embd_k_gqa(hp) + lm_hp_n_embd_v_gqa(hp);
    m->tok_embd = lm_ld_weight(ld, 0, LM_TN_TOKEN_EMBD, 0, LM_NE2(E, V));
    m->pos_embd = lm_ld_weight(ld, 0, LM_TN_POS_EMBD, 0, LM_NE2(E, hp->n_ctx_train));
    m->output_norm = lm_ld_weight(ld, 0, LM_TN_OUTPUT_NORM, 0, LM_NE1(E));
    m->output_norm_b = lm_ld_bias(ld, 0, LM_TN_OUTPUT_NORM, 0, LM_NE1(E));
    m->output = lm_ld_output(ld, hp);
    for (int il = 0; il < (int)hp->n_layer; il++) {
        struct lm_layer *l = &m->layers[il];
        l->attn_norm = lm_ld_weight(ld, 0, LM_TN_ATTN_NORM, il, LM_NE1(E));
        l->attn_norm_b = lm_ld_bias(ld, 0, LM_TN_ATTN_NORM, il, LM_NE1(E));
        l->wqkv = lm_ld_weight(ld, 0, LM_TN_ATTN_QKV, il, LM_NE2(E, Eqkv));
        l->bqkv = lm_ld_bias(ld, 0, LM_TN_ATTN_QKV, il, LM_NE1(Eqkv));
        l->wo = lm_ld_weight(ld, 0, LM_TN_ATTN_OUT, il, LM_NE2(Eq, E));
        l->bo = lm_ld_bias(ld, 0, LM_TN_ATTN_OUT, il, LM_NE1(E));
        l->ffn_norm = lm_ld_weight(ld, 0, LM_TN_FFN_NORM, il, LM_NE1(E));
        l->ffn_norm_b = lm_ld_bias(ld, 0, LM_TN_FFN_NORM, il, LM_NE1(E));
        l->ffn_up = lm_ld_weight(ld, 0, LM_TN_FFN_UP, il, LM_NE2(E, F));
        l->ffn_up_b = lm_ld_bias(ld, 0, LM_TN_FFN_UP, il, LM_NE1(F));
        l->ffn_down = lm_ld_weight(ld, 0, LM_TN_FFN_DOWN, il, LM_NE2(F, E));
        l->ffn_down_b = lm_ld_bias(ld, 0, LM_TN_FFN_DOWN, il, LM_NE1(E));
    }
    return lm_ld_status(ld);
}

/* Shared with starcoder. */
struct lm_tensor *lm_gpt2_build(struct lm_build *b)
{
    struct lm_ctx *ctx = b->ctx;
    const struct lm_hparams *hp = b->hp;
    const float kq_scale = 1.0f / sqrtf((float)hp->n_embd_head_k);

    struct lm_tensor *x = lm_b_pos_embd(b, lm_b_inp_embd(b)); /* [n_embd, T] */
    for (uint32_t il = 0; il < hp->n_layer; il++) {
        const struct lm_layer *l = &b->m->layers[il];
        struct lm_tensor *q, *k, *v;
        struct lm_tensor *h = lm_b_norm(b, x, l->attn_norm, l->attn_norm_b, LM_NORM_LAYER);
        lm_b_qkv(b, l, h, 0.0f, &q, &k, &v);
        h = lm_b_attn(b, (int)il, q, k, v, l->wo, l->bo, kq_scale);
        h = lm_add(ctx, h, x); /* residual */

        struct lm_tensor *f = lm_b_norm(b, h, l->ffn_norm, l->ffn_norm_b, LM_NORM_LAYER);
        f = lm_b_ffn(b, f, l, LM_ACT_GELU);
        x = lm_add(ctx, f, h); /* residual */
    }
    return lm_b_output(b, x, LM_NORM_LAYER);
}

const struct lm_arch_def lm_arch_gpt2 = {
    .name = "gpt2",
    .rope_mode = -1,
    .size = size,
    .tensors = lm_gpt2_tensors,
    .build = lm_gpt2_build,
};
