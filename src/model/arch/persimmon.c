/* persimmon.c - Adept Persimmon-8B: LayerNorm with biases everywhere, a fused
 * QKV projection laid out per head ([q_h; k_h; v_h] blocks of the head size,
 * head after head), a LayerNorm over each head of q and k, rotary embeddings
 * on the first n_rot dims of each head (NEOX pairs; the rest pass through),
 * multi-head attention, squared-ReLU MLP.
 *
 *   x = embed(tokens)
 *   for each layer:
 *       [q_h, k_h, v_h]_h = Wqkv · ln1(x) + bqkv
 *       q_h = rope(lnq(q_h)),  k_h = rope(lnk(k_h))
 *       h = x + Wo · attn(q, k, v) + bo
 *       x = h + W2 · relu(W1 · ln2(h) + b1)^2 + b2
 *   logits = Wout · ln_f(x)
 *
 * The per-head layout needs n_head_kv == n_head.
 */
#include <math.h>

#include "model/build.h"
#include "model/loader.h"

static enum lm_model_size size(const struct lm_hparams *hp) { return hp->n_layer == 36 ? LM_SIZE_8B : LM_SIZE_UNKNOWN; }

static lm_status tensors(struct lm_loader *ld, struct lm_model *m)
{
    const struct lm_hparams *hp = &m->hp;
    int64_t E = hp->n_embd, V = hp->n_vocab, F = hp->n_ff, hk = hp->n_embd_head_k;
    int64_t Eq = hk * hp->n_head;
    if (hp->n_head_kv != hp->n_head || hp->n_embd_head_v != hp->n_embd_head_k)
        return lm_ld_fail(ld, LM_ERR_UNSUPPORTED, "persimmon: needs n_head_kv == n_head (%u, %u) and equal K/V heads",
                          hp->n_head_kv, hp->n_head);
    m->tok_embd = lm_ld_weight(ld, 0, LM_TN_TOKEN_EMBD, 0, LM_NE2(E, V));
    m->output_norm = lm_ld_weight(ld, 0, LM_TN_OUTPUT_NORM, 0, LM_NE1(E));
    m->output_norm_b = lm_ld_bias(ld, 0, LM_TN_OUTPUT_NORM, 0, LM_NE1(E));
    m->output = lm_ld_output(ld, hp);
    for (int il = 0; il < (int)hp->n_layer; il++) {
        struct lm_layer *l = &m->layers[il];
        l->attn_norm = lm_ld_weight(ld, 0, LM_TN_ATTN_NORM, il, LM_NE1(E));
        l->attn_norm_b = lm_ld_bias(ld, 0, LM_TN_ATTN_NORM, il, LM_NE1(E));
        l->wqkv = lm_ld_weight(ld, 0, LM_TN_ATTN_QKV, il, LM_NE2(E, 3 * Eq));
        l->bqkv = lm_ld_bias(ld, 0, LM_TN_ATTN_QKV, il, LM_NE1(3 * Eq));
        l->wo = lm_ld_weight(ld, 0, LM_TN_ATTN_OUT, il, LM_NE2(Eq, E));
        l->bo = lm_ld_bias(ld, 0, LM_TN_ATTN_OUT, il, LM_NE1(E));
        l->ffn_up = lm_ld_weight(ld, 0, LM_TN_FFN_UP, il, LM_NE2(E, F));
        l->ffn_up_b = lm_ld_bias(ld, 0, LM_TN_FFN_UP, il, LM_NE1(F));
        l->ffn_down = lm_ld_weight(ld, 0, LM_TN_FFN_DOWN, il, LM_NE2(F, E));
        l->ffn_down_b = lm_ld_bias(ld, 0, LM_TN_FFN_DOWN, il, LM_NE1(E));
        l->ffn_norm = lm_ld_weight(ld, 0, LM_TN_FFN_NORM, il, LM_NE1(E));
        l->ffn_norm_b = lm_ld_bias(ld, 0, LM_TN_FFN_NORM, il, LM_NE1(E));
        l->attn_q_norm = lm_ld_weight(ld, 0, LM_TN_ATTN_Q_NORM, il, LM_NE1(hk));
        l->attn_q_norm_b = lm_ld_bias(ld, 0, LM_TN_ATTN_Q_NORM, il, LM_NE1(hk));
        l->attn_k_norm = lm_ld_weight(ld, 0, LM_TN_ATTN_K_NORM, il, LM_NE1(hk));
        l->attn_k_norm_b = lm_ld_bias(ld, 0, LM_TN_ATTN_K_NORM, il, LM_NE1(hk));
    }
    return lm_ld_status(ld);
}

static struct lm_tensor *build(struct lm_build *b)
{
    struct lm_ctx *ctx = b->ctx;
    const struct lm_hparams *hp = b->hp;
    const int64_t hk = hp->n_embd_head_k, H = hp->n_head, T = b->n_tokens;
    const size_t es = sizeof(float);
    const float kq_scale = 1.0f / sqrtf((float)hk);

    struct lm_tensor *x = lm_b_inp_embd(b); /* [n_embd, T] */
    for (uint32_t il = 0; il < hp->n_layer; il++) {
        const struct lm_layer *l = &b->m->layers[il];
        struct lm_tensor *h = lm_b_norm(b, x, l->attn_norm, l->attn_norm_b, LM_NORM_LAYER);
        struct lm_tensor *qkv = lm_b_lin(b, l->wqkv, h, l->bqkv); /* [hk, 3, H, T] per head */
        const size_t row = qkv ? qkv->nb[1] : 0, head = 3 * (size_t)hk * es;
        struct lm_tensor *q = lm_view_3d(ctx, qkv, hk, H, T, head, row, 0); /* [hk, H, T] */
        struct lm_tensor *k = lm_view_3d(ctx, qkv, hk, H, T, head, row, (size_t)hk * es);
        struct lm_tensor *v = lm_view_3d(ctx, qkv, hk, H, T, head, row, 2 * (size_t)hk * es);
        q = lm_b_norm(b, q, l->attn_q_norm, l->attn_q_norm_b, LM_NORM_LAYER); /* per head */
        k = lm_b_norm(b, k, l->attn_k_norm, l->attn_k_norm_b, LM_NORM_LAYER);
        q = lm_b_rope(b, q, (int)hp->n_rot, LM_ROPE_NEOX); /* partial: n_rot of the head */
        k = lm_b_rope(b, k, (int)hp->n_rot, LM_ROPE_NEOX);
        v = lm_cont_2d(ctx, v, hk * H, T); /* the V cache store needs it packed */
        h = lm_b_attn(b, (int)il, q, k, v, l->wo, l->bo, kq_scale);
        h = lm_add(ctx, h, x); /* residual */

        struct lm_tensor *f = lm_b_norm(b, h, l->ffn_norm, l->ffn_norm_b, LM_NORM_LAYER);
        f = lm_b_ffn(b, f, l, LM_ACT_RELU_SQR);
        x = lm_add(ctx, f, h); /* residual */
    }
    return lm_b_output(b, x, LM_NORM_LAYER);
}

const struct lm_arch_def lm_arch_persimmon = {
    .name = "persimmon",
    .rope_mode = LM_ROPE_NEOX,
    .size = size,
    .tensors = tensors,
    .build = build,
};
