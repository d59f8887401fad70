/* decoder.c - the decoder most architectures share (build.h): its tensors and
 * its graph, for the variant an architecture describes in an lm_decoder.
 *
 * The tensors are declared in one order for every variant: the global ones
 * (token embedding, position embedding, token norm, output norm, output),
 * then per layer the attention norm(s), the Q, K and V projections and their
 * biases, wo, the FFN norm and the FFN (gate, down, up; biases after each). A
 * norm's or a projection's bias is looked up only when the weight is there.
 */
#include <math.h>

#include "model/build.h"
#include "model/loader.h"

static const struct lm_decoder *variant(enum lm_arch arch) { return lm_arch_get(arch)->decoder; }

static int flags_of(enum lm_dec_has has) { return has == LM_DEC_MAYBE ? LM_LD_OPTIONAL : LM_LD_REQUIRED; }

/* The weight of kind tn [in, out] (a norm: in = 0, [out]) and, as bias says,
 * its bias [out]. NULL when the weight is optional and absent. */
static struct lm_tensor *weight(struct lm_loader *ld, enum lm_dec_has has, enum lm_dec_has bias, enum lm_tn tn, int il,
                                int64_t in, int64_t out, struct lm_tensor **b)
{
    struct lm_tensor *w = in ? lm_ld_weight(ld, flags_of(has), tn, il, LM_NE2(in, out))
                             : lm_ld_weight(ld, flags_of(has), tn, il, LM_NE1(out));
    if (w && bias != LM_DEC_NO)
        *b = lm_ld_bias(ld, flags_of(bias), tn, il, LM_NE1(out));
    return w;
}

static void layer_qkv(struct lm_loader *ld, const struct lm_decoder *d, const struct lm_hparams *hp, int il,
                      struct lm_layer *l)
{
    const int64_t E = hp->n_embd, Eq = (int64_t)hp->n_embd_head_k * hp->n_head;
    const int64_t Ek = lm_hp_n_embd_k_gqa(hp), Ev = lm_hp_n_embd_v_gqa(hp);
    if (d->qkv != LM_DEC_QKV_SPLIT) {
        const enum lm_dec_has has = d->qkv == LM_DEC_QKV_EITHER ? LM_DEC_MAYBE : LM_DEC_YES;
        l->wqkv = weight(ld, has, d->qkv_bias, LM_TN_ATTN_QKV, il, E, Eq + Ek + Ev, &l->bqkv);
        if (l->wqkv || d->qkv == LM_DEC_QKV_FUSED)
            return;
    }
    l->wq = weight(ld, LM_DEC_YES, d->qkv_bias, LM_TN_ATTN_Q, il, E, Eq, &l->bq);
    l->wk = weight(ld, LM_DEC_YES, d->qkv_bias, LM_TN_ATTN_K, il, E, Ek, &l->bk);
    l->wv = weight(ld, LM_DEC_YES, d->qkv_bias, LM_TN_ATTN_V, il, E, Ev, &l->bv);
}

static void layer_ffn(struct lm_loader *ld, const struct lm_decoder *d, const struct lm_hparams *hp, int il,
                      struct lm_layer *l)
{
    const int64_t E = hp->n_embd, F = hp->n_ff;
    if (d->experts && hp->n_expert > 0) {
        l->ffn_gate_inp = lm_ld_weight(ld, 0, LM_TN_FFN_GATE_INP, il, LM_NE2(E, hp->n_expert));
        l->ffn_gate_exps = lm_ld_experts(ld, E, F, hp->n_expert, LM_TN_FFN_GATE_EXP, il);
        l->ffn_down_exps = lm_ld_experts(ld, F, E, hp->n_expert, LM_TN_FFN_DOWN_EXP, il);
        l->ffn_up_exps = lm_ld_experts(ld, E, F, hp->n_expert, LM_TN_FFN_UP_EXP, il);
        return;
    }
    if (d->ffn == LM_DEC_FFN_GATED)
        l->ffn_gate = weight(ld, LM_DEC_YES, LM_DEC_NO, LM_TN_FFN_GATE, il, E, F, NULL);
    l->ffn_down = weight(ld, LM_DEC_YES, d->ffn_bias, LM_TN_FFN_DOWN, il, F, E, &l->ffn_down_b);
    l->ffn_up =
        weight(ld, LM_DEC_YES, d->ffn_bias, LM_TN_FFN_UP, il, E, d->ffn == LM_DEC_FFN_FUSED ? 2 * F : F, &l->ffn_up_b);
}

/* Contract: lm_arch_def.tensors, for an architecture with a decoder. */
lm_status lm_decoder_tensors(struct lm_loader *ld, struct lm_model *m)
{
    const struct lm_hparams *hp = &m->hp;
    const struct lm_decoder *d = variant(hp->arch);
    const int64_t E = hp->n_embd, V = hp->n_vocab, Eo = (int64_t)hp->n_embd_head_v * hp->n_head;
    m->tok_embd = lm_ld_weight(ld, 0, LM_TN_TOKEN_EMBD, 0, LM_NE2(E, V));
    if (d->pos_embd)
        m->pos_embd = lm_ld_weight(ld, 0, LM_TN_POS_EMBD, 0, LM_NE2(E, hp->n_ctx_train));
    if (d->tok_norm)
        m->tok_norm = weight(ld, LM_DEC_YES, d->norm_bias, LM_TN_TOKEN_EMBD_NORM, 0, 0, E, &m->tok_norm_b);
    m->output_norm = weight(ld, LM_DEC_YES, d->norm_bias, LM_TN_OUTPUT_NORM, 0, 0, E, &m->output_norm_b);
    m->output = lm_ld_output(ld, hp);
    if (d->head_bias != LM_DEC_NO)
        m->output_b = lm_ld_bias(ld, flags_of(d->head_bias), LM_TN_OUTPUT, 0, LM_NE1(V));
    for (int il = 0; il < (int)hp->n_layer; il++) {
        struct lm_layer *l = &m->layers[il];
        l->attn_norm = weight(ld, LM_DEC_YES, d->norm_bias, LM_TN_ATTN_NORM, il, 0, E, &l->attn_norm_b);
        if (d->attn_norm_2 != LM_DEC_NO)
            l->attn_norm_2 = weight(ld, d->attn_norm_2, d->norm_bias, LM_TN_ATTN_NORM_2, il, 0, E, &l->attn_norm_2_b);
        layer_qkv(ld, d, hp, il, l);
        l->wo = weight(ld, LM_DEC_YES, d->out_bias, LM_TN_ATTN_OUT, il, Eo, E, &l->bo);
        if (!d->parallel)
            l->ffn_norm = weight(ld, LM_DEC_YES, d->norm_bias, LM_TN_FFN_NORM, il, 0, E, &l->ffn_norm_b);
        layer_ffn(ld, d, hp, il, l);
    }
    return lm_ld_status(ld);
}

/* The FFN of layer l (or its experts) on x. */
static struct lm_tensor *ffn(struct lm_build *b, const struct lm_decoder *d, const struct lm_layer *l,
                             struct lm_tensor *x)
{
    if (l->ffn_gate_inp)
        return lm_b_moe(b, x, l);
    if (d->ffn == LM_DEC_FFN_FUSED)
        return lm_b_ffn_fused(b, x, l, d->act);
    return lm_b_ffn(b, x, l, d->act);
}

/* Contract: lm_arch_def.build, for an architecture with a decoder. */
struct lm_tensor *lm_decoder_build(struct lm_build *b)
{
    struct lm_ctx *ctx = b->ctx;
    const struct lm_hparams *hp = b->hp;
    const struct lm_decoder *d = variant(hp->arch);
    const float head_scale = 1.0f / sqrtf((float)hp->n_embd_head_k);
    const float clamp = d->clamp_kqv ? hp->f_clamp_kqv : 0.0f;
    const bool rope = lm_build_keys_rotated(hp); /* else ALiBi (hp->f_max_alibi_bias) or learned positions */
    const int mode = lm_arch_get(hp->arch)->rope_mode;

    struct lm_tensor *x = lm_b_inp_embd(b); /* [n_embd, T] */
    if (d->pos_embd)
        x = lm_b_pos_embd(b, x);
    if (d->tok_norm)
        x = lm_b_norm(b, x, b->m->tok_norm, b->m->tok_norm_b, d->norm);
    if (d->scale_embd)
        x = lm_scale(ctx, x, sqrtf((float)hp->n_embd));
    for (uint32_t il = 0; il < hp->n_layer; il++) {
        const struct lm_layer *l = &b->m->layers[il];
        struct lm_tensor *q, *k, *v;
        struct lm_tensor *n = lm_b_norm(b, x, l->attn_norm, l->attn_norm_b, d->norm);
        struct lm_tensor *na = l->attn_norm_2 ? lm_b_norm(b, x, l->attn_norm_2, l->attn_norm_2_b, d->norm) : n;
        lm_b_qkv(b, l, na, clamp, &q, &k, &v);
        if (rope)
            q = lm_b_rope(b, q, (int)hp->n_rot, mode); /* partial when n_rot < head */
        if (d->scale_q)
            q = lm_scale(ctx, q, head_scale);
        if (rope)
            k = lm_b_rope(b, k, (int)hp->n_rot, mode);
        struct lm_tensor *a = lm_b_attn(b, (int)il, q, k, v, l->wo, l->bo, d->scale_q ? 1.0f : head_scale);
        if (d->parallel) {
            x = lm_add(ctx, lm_add(ctx, ffn(b, d, l, n), a), x); /* residual */
            continue;
        }
        struct lm_tensor *h = lm_add(ctx, a, x);                                                /* residual */
        x = lm_add(ctx, ffn(b, d, l, lm_b_norm(b, h, l->ffn_norm, l->ffn_norm_b, d->norm)), h); /* residual */
    }
    return lm_b_output(b, x, d->norm);
}
