/* qwen.c - Qwen (v1): RMSNorm, one fused QKV projection with a bias (rows
 * [Q; K; V], each n_embd wide), RoPE on NEOX pairs, multi-head attention,
 * SwiGLU FFN.
 *
 *   x = embed(tokens)
 *   for each layer:
 *       q, k, v = split(Wqkv · rms(x) + bqkv)
 *       h = x + Wo · attn(rope(q), rope(k), v)
 *       x = h + W2 · (silu(W1 · rms(h)) * W3 · rms(h))
 *   logits = Wout · rms(x)
 *
 * The file's feed_forward_length is twice the FFN width of the tensors (the
 * converter writes Qwen's intermediate_size, which counts gate and up), so
 * n_ff is half of it, as llama.cpp b1892 reads it.
 */
#include <math.h>

#include "model/build.h"
#include "model/loader.h"

static lm_status hparams(struct lm_loader *ld, struct lm_hparams *hp)
{
    if (hp->n_ff % 2)
        return lm_ld_fail(ld, LM_ERR_CORRUPT, "qwen: feed_forward_length %u is odd", hp->n_ff);
    hp->n_ff /= 2;
    return LM_OK;
}

static enum lm_model_size size(const struct lm_hparams *hp)
{
    switch (hp->n_layer) {
    case 32: return LM_SIZE_7B;
    case 40: return LM_SIZE_13B; /* b1892's name for Qwen-14B */
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
        l->bqkv = lm_ld_bias(ld, 0, LM_TN_ATTN_QKV, il, LM_NE1(Eqkv));
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

const struct lm_arch_def lm_arch_qwen = {
    .name = "qwen",
    .rope_mode = LM_ROPE_NEOX,
    .hparams = hparams,
    .size = size,
    .tensors = tensors,
    .build = build,
};
