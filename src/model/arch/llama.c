/* llama.c - the LLaMA architecture (also Mistral, Mixtral, TinyLlama, ...):
 * RMSNorm, RoPE on adjacent pairs, grouped-query attention, SwiGLU FFN or a
 * mixture of SwiGLU experts.
 *
 *   x = embed(tokens)
 *   for each layer:
 *       h = x + Wo · attn(rope(Wq · rms(x)), rope(Wk · rms(x)), Wv · rms(x))
 *       x = h + ffn(rms(h))        ffn = W2 · (silu(W1 ·) * W3 ·)  or MoE
 *   logits = Wout · rms(x)
 */
#include <math.h>

#include "model/build.h"
#include "model/loader.h"

static enum lm_model_size size(const struct lm_hparams *hp)
{
    switch (hp->n_layer) {
    case 22: return LM_SIZE_1B;
    case 26: return LM_SIZE_3B;
    case 32: return hp->n_expert == 8 ? LM_SIZE_8x7B : LM_SIZE_7B;
    case 40: return LM_SIZE_13B;
    case 48: return LM_SIZE_34B;
    case 60: return LM_SIZE_30B;
    case 80: return hp->n_head == hp->n_head_kv ? LM_SIZE_65B : LM_SIZE_70B;
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
        l->wo = lm_ld_weight(ld, 0, LM_TN_ATTN_OUT, il, LM_NE2(Eq, E));
        l->bq = lm_ld_bias(ld, LM_LD_OPTIONAL, LM_TN_ATTN_Q, il, LM_NE1(Eq));
        l->bk = lm_ld_bias(ld, LM_LD_OPTIONAL, LM_TN_ATTN_K, il, LM_NE1(Ekv));
        l->bv = lm_ld_bias(ld, LM_LD_OPTIONAL, LM_TN_ATTN_V, il, LM_NE1(Ev));
        l->bo = lm_ld_bias(ld, LM_LD_OPTIONAL, LM_TN_ATTN_OUT, il, LM_NE1(E));
        l->ffn_norm = lm_ld_weight(ld, 0, LM_TN_FFN_NORM, il, LM_NE1(E));
        if (hp->n_expert == 0) {
            l->ffn_gate = lm_ld_weight(ld, 0, LM_TN_FFN_GATE, il, LM_NE2(E, F));
            l->ffn_down = lm_ld_weight(ld, 0, LM_TN_FFN_DOWN, il, LM_NE2(F, E));
            l->ffn_up = lm_ld_weight(ld, 0, LM_TN_FFN_UP, il, LM_NE2(E, F));
        } else {
            l->ffn_gate_inp = lm_ld_weight(ld, 0, LM_TN_FFN_GATE_INP, il, LM_NE2(E, hp->n_expert));
            l->ffn_gate_exps = lm_ld_experts(ld, E, F, hp->n_expert, LM_TN_FFN_GATE_EXP, il);
            l->ffn_down_exps = lm_ld_experts(ld, F, E, hp->n_expert, LM_TN_FFN_DOWN_EXP, il);
            l->ffn_up_exps = lm_ld_experts(ld, E, F, hp->n_expert, LM_TN_FFN_UP_EXP, il);
        }
    }
    return lm_ld_status(ld);
}

static struct lm_tensor *build(struct lm_build *b)
{
    struct lm_ctx *ctx = b->ctx;
    const struct lm_hparams *hp = b->hp;
    const int64_t hk = hp->n_embd_head_k, T = b->n_tokens;
    const float kq_scale = 1.0f / sqrtf((float)hk);

    struct lm_tensor *x = lm_b_inp_embd(b); /* [n_embd, T] */
    for (uint32_t il = 0; il < hp->n_layer; il++) {
        const struct lm_layer *l = &b->m->layers[il];
        struct lm_tensor *h = lm_b_norm(b, x, l->attn_norm, NULL, LM_NORM_RMS);
        struct lm_tensor *k = lm_b_lin(b, l->wk, h, l->bk), *v = lm_b_lin(b, l->wv, h, l->bv);
        lm_b_adjacent(b, k, v);
        struct lm_tensor *q = lm_b_lin(b, l->wq, h, l->bq);
        q = lm_b_rope(b, lm_reshape_3d(ctx, q, hk, hp->n_head, T), (int)hp->n_rot, LM_ROPE_NORMAL);
        k = lm_b_rope(b, lm_reshape_3d(ctx, k, hk, hp->n_head_kv, T), (int)hp->n_rot, LM_ROPE_NORMAL);
        h = lm_b_attn(b, (int)il, q, k, v, l->wo, l->bo, kq_scale);
        h = lm_add(ctx, h, x); /* residual */

        struct lm_tensor *f = lm_b_norm(b, h, l->ffn_norm, NULL, LM_NORM_RMS);
        f = hp->n_expert ? lm_b_moe(b, f, l) : lm_b_ffn(b, f, l, LM_ACT_SILU);
        x = lm_add(ctx, f, h); /* residual */
    }
    return lm_b_output(b, x, LM_NORM_RMS);
}

const struct lm_arch_def lm_arch_llama = {
    .name = "llama",
    .rope_mode = LM_ROPE_NORMAL,
    .size = size,
    .tensors = tensors,
    .build = build,
};
