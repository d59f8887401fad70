/* phi2.c - Microsoft Phi-2 (and Phi-1.5): one LayerNorm per block feeding
 * attention and the MLP in parallel, QKV fused (rows [Q; K; V]) or separate,
 * biases everywhere, rotary embeddings on the first n_rot dims of each head
 * (NEOX pairs), GELU MLP, a biased output head. Q is scaled by 1/sqrt(head)
 * before Q·K (the scores then use scale 1), as llama.cpp does to keep the
 * products small.
 *
 *   x = embed(tokens)
 *   for each layer:
 *       n = ln(x)
 *       q, k, v = Wqkv · n + bqkv            (or Wq n + bq, Wk n + bk, Wv n + bv)
 *       a = Wo · attn(rope(q) / sqrt(d), rope(k), v) + bo
 *       x = x + a + W2 · gelu(W1 · n + b1) + b2
 *   logits = Wout · ln_f(x) + bout
 */
#include <math.h>

#include "model/build.h"
#include "model/loader.h"

static enum lm_model_size size(const struct lm_hparams *hp)
{
    switch (hp->n_layer) {
    case 24: return LM_SIZE_1B; /* Phi-1.5 */
    case 32: return LM_SIZE_3B;
    default: return LM_SIZE_UNKNOWN;
    }
}

static lm_status tensors(struct lm_loader *ld, struct lm_model *m)
{
    const struct lm_hparams *hp = &m->hp;
    int64_t E = hp->n_embd, V = hp->n_vocab, F = hp->n_ff;
    int64_t Eq = (int64_t)hp->n_embd_head_k * hp->n_head, Ekv = lm_hp_n_embd_k_gqa(hp), Ev = lm_hp_n_embd_v_gqa(hp);
    int64_t Eqkv = Eq + Ekv + Ev;
    m->tok_embd = lm_ld_weight(ld, 0, LM_TN_TOKEN_EMBD, 0, LM_NE2(E, V));
    m->output_norm = lm_ld_weight(ld, 0, LM_TN_OUTPUT_NORM, 0, LM_NE1(E));
    m->output_norm_b = lm_ld_bias(ld, 0, LM_TN_OUTPUT_NORM, 0, LM_NE1(E));
    m->output = lm_ld_output(ld, hp);
    m->output_b = lm_ld_bias(ld, 0, LM_TN_OUTPUT, 0, LM_NE1(V));
    for (int il = 0; il < (int)hp->n_layer; il++) {
        struct lm_layer *l = &m->layers[il];
        l->attn_norm = lm_ld_weight(ld, 0, LM_TN_ATTN_NORM, il, LM_NE1(E));
        l->attn_norm_b = lm_ld_bias(ld, 0, LM_TN_ATTN_NORM, il, LM_NE1(E));
        l->wqkv = lm_ld_weight(ld, LM_LD_OPTIONAL, LM_TN_ATTN_QKV, il, LM_NE2(E, Eqkv));
        if (l->wqkv) {
            l->bqkv = lm_ld_bias(ld, 0, LM_TN_ATTN_QKV, il, LM_NE1(Eqkv));
        } else {
            l->wq = lm_ld_weight(ld, 0, LM_TN_ATTN_Q, il, LM_NE2(E, Eq));
            l->bq = lm_ld_bias(ld, 0, LM_TN_ATTN_Q, il, LM_NE1(Eq));
            l->wk = lm_ld_weight(ld, 0, LM_TN_ATTN_K, il, LM_NE2(E, Ekv));
            l->bk = lm_ld_bias(ld, 0, LM_TN_ATTN_K, il, LM_NE1(Ekv));
            l->wv = lm_ld_weight(ld, 0, LM_TN_ATTN_V, il, LM_NE2(E, Ev));
            l->bv = lm_ld_bias(ld, 0, LM_TN_ATTN_V, il, LM_NE1(Ev));
        }
        l->wo = lm_ld_weight(ld, 0, LM_TN_ATTN_OUT, il, LM_NE2(Eq, E));
        l->bo = lm_ld_bias(ld, 0, LM_TN_ATTN_OUT, il, LM_NE1(E));
        l->ffn_down = lm_ld_weight(ld, 0, LM_TN_FFN_DOWN, il, LM_NE2(F, E));
        l->ffn_down_b = lm_ld_bias(ld, 0, LM_TN_FFN_DOWN, il, LM_NE1(E));
        l->ffn_up = lm_ld_weight(ld, 0, LM_TN_FFN_UP, il, LM_NE2(E, F));
        l->ffn_up_b = lm_ld_bias(ld, 0, LM_TN_FFN_UP, il, LM_NE1(F));
    }
    return lm_ld_status(ld);
}

static struct lm_tensor *build(struct lm_build *b)
{
    struct lm_ctx *ctx = b->ctx;
    const struct lm_hparams *hp = b->hp;
    const float q_scale = 1.0f / sqrtf((float)hp->n_embd_head_k);

    struct lm_tensor *x = lm_b_inp_embd(b); /* [n_embd, T] */
    for (uint32_t il = 0; il < hp->n_layer; il++) {
        const struct lm_layer *l = &b->m->layers[il];
        struct lm_tensor *q, *k, *v;
        struct lm_tensor *n = lm_b_norm(b, x, l->attn_norm, l->attn_norm_b, LM_NORM_LAYER);
        lm_b_qkv(b, l, n, 0.0f, &q, &k, &v);
        q = lm_b_rope(b, q, (int)hp->n_rot, LM_ROPE_NEOX); /* partial: n_rot of the head */
        q = lm_scale(ctx, q, q_scale);
        k = lm_b_rope(b, k, (int)hp->n_rot, LM_ROPE_NEOX);
        struct lm_tensor *a = lm_b_attn(b, (int)il, q, k, v, l->wo, l->bo, 1.0f);

        struct lm_tensor *f = lm_b_ffn(b, n, l, LM_ACT_GELU); /* from the same norm: parallel */
        x = lm_add(ctx, lm_add(ctx, a, f), x);                /* residual */
    }
    return lm_b_output(b, x, LM_NORM_LAYER);
}

const struct lm_arch_def lm_arch_phi2 = {
    .name = "phi2",
    .rope_mode = LM_ROPE_NEOX,
    .size = size,
    .tensors = tensors,
    .build = build,
};
