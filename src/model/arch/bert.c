/* bert.c - BERT, an encoder (general.architecture = "bert"; bge, MiniLM, ...):
 * learned position and token-type embeddings, post-LayerNorm blocks with
 * biases everywhere, attention over the whole sequence, GELU MLP, no LM
 * head. A decode gives embeddings only, pooled per %s.pooling_type.
 *
 *   x = ln_e(embed(tokens) + type_embed[0] + pos_embed(positions))
 *   for each layer:
 *       h = ln_a(x + Wo · attn(Wq · x + bq, Wk · x + bk, Wv · x + bv) + bo)
 *       x = ln_o(h + W2 · gelu(W1 · h + b1) + b2)
 *   embedding = pool(x): mean over the tokens, the first ([CLS]), the last,
 *               or every token's row (none)
 *
 * Attention is non-causal unless the file says %s.attention.causal = true;
 * the context builds the mask from hp->non_causal. Every token has type 0
 * ("sentence A"), as in llama.cpp. Shapes follow llama.cpp's converter
 * (later than b1892, which had no BERT).
 */
#include <math.h>

#include "model/build.h"
#include "model/loader.h"

static lm_status hparams(struct lm_loader *ld, struct lm_hparams *hp)
{
    bool causal = false; /* an encoder unless the file says otherwise */
    uint32_t pooling = LM_POOLING_NONE, n_types = 0;
    lm_ld_bool(ld, "%s.attention.causal", &causal, false);
    lm_ld_u32(ld, "%s.pooling_type", &pooling, false);
    lm_ld_u32(ld, "tokenizer.ggml.token_type_count", &n_types, false);
    if (lm_ld_status(ld))
        return lm_ld_status(ld);
    if (pooling > LM_POOLING_LAST)
        return lm_ld_fail(ld, LM_ERR_UNSUPPORTED, "bert: pooling type %u is not none (0), mean (1), cls (2) or last (3)",
                          pooling);
    if (n_types > (1u << 16))
        return lm_ld_fail(ld, LM_ERR_CORRUPT, "bert: implausible token type count %u", n_types);
    hp->non_causal = !causal;
    hp->pooling = (enum lm_pooling)pooling;
    hp->n_token_types = n_types;
    return LM_OK;
}

static lm_status tensors(struct lm_loader *ld, struct lm_model *m)
{
    const struct lm_hparams *hp = &m->hp;
    int64_t E = hp->n_embd, V = hp->n_vocab, F = hp->n_ff;
    int64_t Eq = (int64_t)hp->n_embd_head_k * hp->n_head, Ekv = lm_hp_n_embd_k_gqa(hp), Ev = lm_hp_n_embd_v_gqa(hp);
    m->tok_embd = lm_ld_weight(ld, 0, LM_TN_TOKEN_EMBD, 0, LM_NE2(E, V));
    /* optional as in llama.cpp; a file that has it must say how many types */
    m->type_embd = lm_ld_weight(ld, LM_LD_OPTIONAL, LM_TN_TOKEN_TYPES, 0, LM_NE2(E, hp->n_token_types));
    m->pos_embd = lm_ld_weight(ld, 0, LM_TN_POS_EMBD, 0, LM_NE2(E, hp->n_ctx_train));
    m->tok_norm = lm_ld_weight(ld, 0, LM_TN_TOKEN_EMBD_NORM, 0, LM_NE1(E));
    m->tok_norm_b = lm_ld_bias(ld, 0, LM_TN_TOKEN_EMBD_NORM, 0, LM_NE1(E));
    for (int il = 0; il < (int)hp->n_layer; il++) {
        struct lm_layer *l = &m->layers[il];
        l->wq = lm_ld_weight(ld, 0, LM_TN_ATTN_Q, il, LM_NE2(E, Eq));
        l->bq = lm_ld_bias(ld, 0, LM_TN_ATTN_Q, il, LM_NE1(Eq));
        l->wk = lm_ld_weight(ld, 0, LM_TN_ATTN_K, il, LM_NE2(E, Ekv));
        l->bk = lm_ld_bias(ld, 0, LM_TN_ATTN_K, il, LM_NE1(Ekv));
        l->wv = lm_ld_weight(ld, 0, LM_TN_ATTN_V, il, LM_NE2(E, Ev));
        l->bv = lm_ld_bias(ld, 0, LM_TN_ATTN_V, il, LM_NE1(Ev));
        l->wo = lm_ld_weight(ld, 0, LM_TN_ATTN_OUT, il, LM_NE2(Eq, E));
        l->bo = lm_ld_bias(ld, LM_LD_OPTIONAL, LM_TN_ATTN_OUT, il, LM_NE1(E));
        l->attn_out_norm = lm_ld_weight(ld, 0, LM_TN_ATTN_OUT_NORM, il, LM_NE1(E));
        l->attn_out_norm_b = lm_ld_bias(ld, 0, LM_TN_ATTN_OUT_NORM, il, LM_NE1(E));
        l->ffn_up = lm_ld_weight(ld, 0, LM_TN_FFN_UP, il, LM_NE2(E, F));
        l->ffn_up_b = lm_ld_bias(ld, LM_LD_OPTIONAL, LM_TN_FFN_UP, il, LM_NE1(F));
        l->ffn_down = lm_ld_weight(ld, 0, LM_TN_FFN_DOWN, il, LM_NE2(F, E));
        l->ffn_down_b = lm_ld_bias(ld, LM_LD_OPTIONAL, LM_TN_FFN_DOWN, il, LM_NE1(E));
        l->layer_out_norm = lm_ld_weight(ld, 0, LM_TN_FFN_OUT_NORM, il, LM_NE1(E));
        l->layer_out_norm_b = lm_ld_bias(ld, 0, LM_TN_FFN_OUT_NORM, il, LM_NE1(E));
    }
    return lm_ld_status(ld);
}

/* The embeddings of the batch x [n_embd, T] pooled per hp->pooling:
 * [n_embd, 1], or x itself for none. The batch is one sequence (context.c
 * checks that for encoders), so pooling over the batch pools the sequence. */
static struct lm_tensor *pool(struct lm_build *b, struct lm_tensor *x)
{
    struct lm_ctx *ctx = b->ctx;
    const int64_t E = b->hp->n_embd, T = b->n_tokens;
    const size_t row = x ? x->nb[1] : 0;
    switch (b->hp->pooling) {
    case LM_POOLING_NONE: return x;
    case LM_POOLING_MEAN: {
        struct lm_tensor *sum = lm_sum_rows(ctx, lm_cont(ctx, lm_transpose(ctx, x))); /* [1, n_embd] */
        return lm_scale(ctx, lm_reshape_2d(ctx, sum, E, 1), 1.0f / (float)T);
    }
    case LM_POOLING_CLS: return lm_cont(ctx, lm_view_2d(ctx, x, E, 1, row, 0));
    case LM_POOLING_LAST: return lm_cont(ctx, lm_view_2d(ctx, x, E, 1, row, (size_t)(T - 1) * row));
    }
    return NULL;
}

static struct lm_tensor *build(struct lm_build *b)
{
    struct lm_ctx *ctx = b->ctx;
    const struct lm_hparams *hp = b->hp;
    const struct lm_model *m = b->m;
    const float kq_scale = 1.0f / sqrtf((float)hp->n_embd_head_k);

    struct lm_tensor *x = lm_b_inp_embd(b); /* [n_embd, T] */
    if (m->type_embd)                       /* every token is of type 0 */
        x = lm_add(ctx, x, lm_view_1d(ctx, m->type_embd, hp->n_embd, 0));
    x = lm_b_pos_embd(b, x);
    x = lm_b_norm(b, x, m->tok_norm, m->tok_norm_b, LM_NORM_LAYER);
    for (uint32_t il = 0; il < hp->n_layer; il++) {
        const struct lm_layer *l = &m->layers[il];
        struct lm_tensor *q, *k, *v;
        lm_b_qkv(b, l, x, 0.0f, &q, &k, &v);
        struct lm_tensor *h = lm_b_attn(b, (int)il, q, k, v, l->wo, l->bo, kq_scale);
        h = lm_b_norm(b, lm_add(ctx, h, x), l->attn_out_norm, l->attn_out_norm_b, LM_NORM_LAYER);

        struct lm_tensor *f = lm_b_ffn(b, h, l, LM_ACT_GELU);
        x = lm_b_norm(b, lm_add(ctx, f, h), l->layer_out_norm, l->layer_out_norm_b, LM_NORM_LAYER);
    }
    b->out_embd = pool(b, x);
    b->out_logits = NULL; /* no LM head */
    return b->out_embd;
}

const struct lm_arch_def lm_arch_bert = {
    .name = "bert",
    .rope_mode = LM_ROPE_NONE,
    .encoder = true,
    .hparams = hparams,
    .tensors = tensors,
    .build = build,
};
