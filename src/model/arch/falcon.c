/* falcon.c - Falcon (7B, 40B, 180B): LayerNorm with bias, fused QKV with
 * multi-query (7B) or grouped-query (40B) attention, RoPE on rotated halves
 * (NEOX), attention and FFN computed in parallel from the same block input,
 * GELU MLP without gate, no linear biases.
 *
 *   x = embed(tokens)
 *   for each layer:
 *       n  = ln(x)                     attn_norm
 *       na = ln2(x) if the layer has attn_norm_2 (40B), else n
 *       q, k, v = split(Wqkv · na)    rows [Q; K; V]
 *       a  = Wo · attn(rope(q), rope(k), v)
 *       x  = x + a + W2 · gelu(W1 · n)
 *   logits = Wout · ln_f(x)
 *
 * (In the 40B layout the FFN reads attn_norm and attention reads
 * attn_norm_2, as llama.cpp b1892 wires it.)
 */
#include <math.h>

#include "model/build.h"
#include "model/loader.h"

static enum lm_model_size size(const struct lm_hparams *hp)
{
    switch (hp->n_layer) {
    case 32: return LM_SIZE_7B;
    case 60: return LM_SIZE_40B;
    default: return LM_SIZE_UNKNOWN;
    }
}

static lm_status tensors(struct lm_loader *ld, struct lm_model *m)
{
    const struct lm_hparams *hp = &m->hp;
    int64_t E = hp->n_embd, V = hp->n_vocab, F = hp->n_ff;
    int64_t Eq = (int64_t)hp->n_embd_head_k * hp->n_head, Eqkv = Eq + lm_hp_n_embd_k_gqa(hp) + lm_hp_n_embd_v_gqa(hp);
    m->tok_embd = lm_ld_weight(ld, 0, LM_TN_TOKEN_EMBD, 0, LM_NE2(E, V));
    m->output_norm = lm_ld_weight(ld, 0, LM_TN_OUTPUT_NORM, 0, LM_NE1(E));
    m->output_norm_b = lm_ld_bias(ld, 0, LM_TN_OUTPUT_NORM, 0, LM_NE1(E));
    m->output = lm_ld_output(ld, hp);
    for (int il = 0; il < (int)hp->n_layer; il++) {
        struct lm_layer *l = &m->layers[il];
        l->attn_norm = lm_ld_weight(ld, 0, LM_TN_ATTN_NORM, il, LM_NE1(E));
        l->attn_norm_b = lm_ld_bias(ld, 0, LM_TN_ATTN_NORM, il, LM_NE1(E));
        l->attn_norm_2 = lm_ld_weight(ld, LM_LD_OPTIONAL, LM_TN_ATTN_NORM_2, il, LM_NE1(E));
        if (l->attn_norm_2) /* 40B: both or neither */
            l->attn_norm_2_b = lm_ld_bias(ld, 0, LM_TN_ATTN_NORM_2, il, LM_NE1(E));
        l->wqkv = lm_ld_weight(ld, 0, LM_TN_ATTN_QKV, il, LM_NE2(E, Eqkv));
        l->wo = lm_ld_weight(ld, 0, LM_TN_ATTN_OUT, il, LM_NE2(Eq, E));
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
        struct lm_tensor *n = lm_b_norm(b, x, l->attn_norm, l->attn_norm_b, LM_NORM_LAYER);
        struct lm_tensor *na = l->attn_norm_2 ? lm_b_norm(b, x, l->attn_norm_2, l->attn_norm_2_b, LM_NORM_LAYER) : n;
        lm_b_qkv(b, l, na, 0.0f, &q, &k, &v);
        q = lm_b_rope(b, q, (int)hp->n_rot, LM_ROPE_NEOX);
        k = lm_b_rope(b, k, (int)hp->n_rot, LM_ROPE_NEOX);
        struct lm_tensor *a = lm_b_attn(b, (int)il, q, k, v, l->wo, NULL, kq_scale);

        struct lm_tensor *f = lm_b_ffn(b, n, l, LM_ACT_GELU); /* parallel: from the same norm */
        x = lm_add(ctx, lm_add(ctx, f, a), x);                /* residual */
    }
    return lm_b_output(b, x, LM_NORM_LAYER);
}

const struct lm_arch_def lm_arch_falcon = {
    .name = "falcon",
    .rope_mode = LM_ROPE_NEOX,
    .size = size,
    .tensors = tensors,
    .build = build,
};
