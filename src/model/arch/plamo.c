/* plamo.c - PLaMo (Preferred Networks): one RMSNorm per block feeding
 * attention and the SwiGLU MLP in parallel (there is no second norm), RoPE on
 * NEOX pairs, grouped-query attention, no biases.
 *
 *   x = embed(tokens)
 *   for each layer:
 *       n = rms(x)
 *       x = x + Wo · attn(rope(Wq n), rope(Wk n), Wv n) + W2 · (silu(W1 n) * W3 n)
 *   logits = Wout · rms(x)
 */
#include <math.h>

#include "model/build.h"
#include "model/loader.h"

static enum lm_model_size size(const struct lm_hparams *hp)
{
    return hp->n_layer == 40 ? LM_SIZE_13B : LM_SIZE_UNKNOWN;
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
        l->wo = lm_ld_weight(ld, 0, LM_TN_ATTN_OUT, il, LM_NE2(Eq, E));
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
        struct lm_tensor *n = lm_b_norm(b, x, l->attn_norm, NULL, LM_NORM_RMS);
        lm_b_qkv(b, l, n, 0.0f, &q, &k, &v);
        q = lm_b_rope(b, q, (int)hp->n_rot, LM_ROPE_NEOX);
        k = lm_b_rope(b, k, (int)hp->n_rot, LM_ROPE_NEOX);
        struct lm_tensor *a = lm_b_attn(b, (int)il, q, k, v, l->wo, NULL, kq_scale);

        struct lm_tensor *f = lm_b_ffn(b, n, l, LM_ACT_SILU); /* from the same norm: parallel */
        x = lm_add(ctx, lm_add(ctx, f, a), x);                /* residual */
    }
    return lm_b_output(b, x, LM_NORM_RMS);
}

const struct lm_arch_def lm_arch_plamo = {
    .name = "plamo",
    .rope_mode = LM_ROPE_NEOX,
    .size = size,
    .tensors = tensors,
    .build = build,
};
