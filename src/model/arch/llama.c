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

static lm_status tensors(struct lm_loader *ld, struct lm_model *m)
{
    const struct lm_hparams *hp = &m->hp;
    int64_t E = hp->n_embd, V = hp->n_vocab, F = hp->n_ff;
    int64_t Eq = (int64_t)hp->n_embd_head_k * hp->n_head, Ekv = lm_hp_n_embd_k_gqa(hp), Ev = lm_hp_n_embd_v_gqa(hp);
    m->tok_embd = lm_ld_tensor(ld, 0, LM_NE2(E, V), "token_embd.weight");
    m->output_norm = lm_ld_tensor(ld, 0, LM_NE1(E), "output_norm.weight");
    m->output = lm_ld_tensor(ld, LM_LD_OPTIONAL, LM_NE2(E, V), "output.weight");
    if (!m->output) /* tied embeddings */
        m->output = m->tok_embd;
    for (uint32_t il = 0; il < hp->n_layer; il++) {
        struct lm_layer *l = &m->layers[il];
        l->attn_norm = lm_ld_tensor(ld, 0, LM_NE1(E), "blk.%u.attn_norm.weight", il);
        l->wq = lm_ld_tensor(ld, 0, LM_NE2(E, Eq), "blk.%u.attn_q.weight", il);
        l->wk = lm_ld_tensor(ld, 0, LM_NE2(E, Ekv), "blk.%u.attn_k.weight", il);
        l->wv = lm_ld_tensor(ld, 0, LM_NE2(E, Ev), "blk.%u.attn_v.weight", il);
        l->wo = lm_ld_tensor(ld, 0, LM_NE2(Eq, E), "blk.%u.attn_output.weight", il);
        l->bq = lm_ld_tensor(ld, LM_LD_OPTIONAL, LM_NE1(Eq), "blk.%u.attn_q.bias", il);
        l->bk = lm_ld_tensor(ld, LM_LD_OPTIONAL, LM_NE1(Ekv), "blk.%u.attn_k.bias", il);
        l->bv = lm_ld_tensor(ld, LM_LD_OPTIONAL, LM_NE1(Ev), "blk.%u.attn_v.bias", il);
        l->bo = lm_ld_tensor(ld, LM_LD_OPTIONAL, LM_NE1(E), "blk.%u.attn_output.bias", il);
        l->ffn_norm = lm_ld_tensor(ld, 0, LM_NE1(E), "blk.%u.ffn_norm.weight", il);
        if (hp->n_expert == 0) {
            l->ffn_gate = lm_ld_tensor(ld, 0, LM_NE2(E, F), "blk.%u.ffn_gate.weight", il);
            l->ffn_down = lm_ld_tensor(ld, 0, LM_NE2(F, E), "blk.%u.ffn_down.weight", il);
            l->ffn_up = lm_ld_tensor(ld, 0, LM_NE2(E, F), "blk.%u.ffn_up.weight", il);
        } else {
            l->ffn_gate_inp = lm_ld_tensor(ld, 0, LM_NE2(E, hp->n_expert), "blk.%u.ffn_gate_inp.weight", il);
            l->ffn_gate_exps = lm_ld_experts(ld, E, F, hp->n_expert, "blk.%d.ffn_gate", (int)il);
            l->ffn_down_exps = lm_ld_experts(ld, F, E, hp->n_expert, "blk.%d.ffn_down", (int)il);
            l->ffn_up_exps = lm_ld_experts(ld, E, F, hp->n_expert, "blk.%d.ffn_up", (int)il);
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
        struct lm_tensor *q = lm_b_lin(b, l->wq, h, l->bq);
        struct lm_tensor *k = lm_b_lin(b, l->wk, h, l->bk);
        struct lm_tensor *v = lm_b_lin(b, l->wv, h, l->bv);
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
    .tensors = tensors,
    .build = build,
};
