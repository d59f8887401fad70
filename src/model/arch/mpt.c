/* mpt.c - MPT (MosaicML): no position embeddings but ALiBi attention biases,
 * LayerNorm without bias, fused QKV (optionally clamped to ±clamp_kqv), GELU
 * MLP without gate, no linear biases.
 *
 *   x = embed(tokens)
 *   for each layer:
 *       q, k, v = split(clamp(Wqkv · ln1(x)))      rows [Q; K; V]
 *       h = x + Wo · attn_alibi(q, k, v)          slopes from max_alibi_bias
 *       x = h + W2 · gelu(W1 · ln2(h))
 *   logits = Wout · ln_f(x)
 */
#include <math.h>

#include "model/build.h"
#include "model/loader.h"

static lm_status hparams(struct lm_loader *ld, struct lm_hparams *hp)
{
    /* the common reader took clamp_kqv (optional); MPT files must say their
     * ALiBi bias (llama.cpp requires the key) */
    return lm_ld_f32(ld, "%s.attention.max_alibi_bias", &hp->f_max_alibi_bias, true);
}

static enum lm_model_size size(const struct lm_hparams *hp)
{
    switch (hp->n_layer) {
    case 32: return LM_SIZE_7B;
    case 48: return LM_SIZE_30B;
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
    m->output = lm_ld_output(ld, hp);
    for (int il = 0; il < (int)hp->n_layer; il++) {
        struct lm_layer *l = &m->layers[il];
        l->attn_norm = lm_ld_weight(ld, 0, LM_TN_ATTN_NORM, il, LM_NE1(E));
        l->wqkv = lm_ld_weight(ld, 0, LM_TN_ATTN_QKV, il, LM_NE2(E, Eqkv));
        l->wo = lm_ld_weight(ld, 0, LM_TN_ATTN_OUT, il, LM_NE2(Eq, E));
        l->ffn_norm = lm_ld_weight(ld, 0, LM_TN_FFN_NORM, il, LM_NE1(E));
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
        struct lm_tensor *h = lm_b_norm(b, x, l->attn_norm, NULL, LM_NORM_LAYER);
        lm_b_qkv(b, l, h, hp->f_clamp_kqv, &q, &k, &v);
        h = lm_b_attn(b, (int)il, q, k, v, l->wo, NULL, kq_scale); /* ALiBi: hp->f_max_alibi_bias */
        h = lm_add(ctx, h, x);                                      /* residual */

        struct lm_tensor *f = lm_b_norm(b, h, l->ffn_norm, NULL, LM_NORM_LAYER);
        f = lm_b_ffn(b, f, l, LM_ACT_GELU);
        x = lm_add(ctx, f, h); /* residual */
    }
    return lm_b_output(b, x, LM_NORM_LAYER);
}

const struct lm_arch_def lm_arch_mpt = {
    .name = "mpt",
    .rope_mode = -1,
    .hparams = hparams,
    .size = size,
    .tensors = tensors,
    .build = build,
};
