/* bloom.c - BLOOM (BigScience): a LayerNorm on the token embeddings, no
 * position embeddings but ALiBi attention biases, LayerNorm with bias, fused
 * QKV with bias, GELU MLP, biases everywhere.
 *
 *   x = ln_e(embed(tokens))                       token_embd_norm
 *   for each layer:
 *       q, k, v = split(Wqkv · ln1(x) + bqkv)     rows [Q; K; V]
 *       h = x + Wo · attn_alibi(q, k, v) + bo     max bias 8
 *       x = h + W2 · gelu(W1 · ln2(h) + b1) + b2
 *   logits = Wout · ln_f(x)
 */
#include <math.h>

#include "model/build.h"
#include "model/loader.h"

static lm_status hparams(struct lm_loader *ld, struct lm_hparams *hp)
{
    /* BLOOM files carry no max_alibi_bias; llama.cpp b1892 hard-codes 8 */
    if (hp->f_max_alibi_bias == 0.0f)
        hp->f_max_alibi_bias = 8.0f;
    return lm_ld_status(ld);
}

static enum lm_model_size size(const struct lm_hparams *hp)
{
    switch (hp->n_layer) {
    case 24: return LM_SIZE_1B;
    case 30: return hp->n_embd == 2560 ? LM_SIZE_3B : hp->n_embd == 4096 ? LM_SIZE_7B : LM_SIZE_UNKNOWN;
    default: return LM_SIZE_UNKNOWN;
    }
}

static lm_status tensors(struct lm_loader *ld, struct lm_model *m)
{
    const struct lm_hparams *hp = &m->hp;
    int64_t E = hp->n_embd, V = hp->n_vocab, F = hp->n_ff;
    int64_t Eq = (int64_t)hp->n_embd_head_k * hp->n_head, Eqkv = Eq + lm_hp_n_embd_k_gqa(hp) + lm_hp_n_embd_v_gqa(hp);
    m->tok_embd = lm_ld_weight(ld, 0, LM_TN_TOKEN_EMBD, 0, LM_NE2(E, V));
    m->tok_norm = lm_ld_weight(ld, 0, LM_TN_TOKEN_EMBD_NORM, 0, LM_NE1(E));
    m->tok_norm_b = lm_ld_bias(ld, 0, LM_TN_TOKEN_EMBD_NORM, 0, LM_NE1(E));
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

static struct lm_tensor *build(struct lm_build *b)
{
    struct lm_ctx *ctx = b->ctx;
    const struct lm_hparams *hp = b->hp;
    const float kq_scale = 1.0f / sqrtf((float)hp->n_embd_head_k);

    struct lm_tensor *x = lm_b_inp_embd(b); /* [n_embd, T] */
    x = lm_b_norm(b, x, b->m->tok_norm, b->m->tok_norm_b, LM_NORM_LAYER);
    for (uint32_t il = 0; il < hp->n_layer; il++) {
        const struct lm_layer *l = &b->m->layers[il];
        struct lm_tensor *q, *k, *v;
        struct lm_tensor *h = lm_b_norm(b, x, l->attn_norm, l->attn_norm_b, LM_NORM_LAYER);
        lm_b_qkv(b, l, h, 0.0f, &q, &k, &v);
        h = lm_b_attn(b, (int)il, q, k, v, l->wo, l->bo, kq_scale); /* ALiBi: hp->f_max_alibi_bias */
        h = lm_add(ctx, h, x);                                       /* residual */

        struct lm_tensor *f = lm_b_norm(b, h, l->ffn_norm, l->ffn_norm_b, LM_NORM_LAYER);
        f = lm_b_ffn(b, f, l, LM_ACT_GELU);
        x = lm_add(ctx, f, h); /* residual */
    }
    return lm_b_output(b, x, LM_NORM_LAYER);
}

const struct lm_arch_def lm_arch_bloom = {
    .name = "bloom",
    .rope_mode = -1,
    .hparams = hparams,
    .size = size,
    .tensors = tensors,
    .build = build,
};
