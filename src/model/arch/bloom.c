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

static const struct lm_decoder decoder = {
    .norm = LM_NORM_LAYER,
    .norm_bias = LM_DEC_YES,
    .qkv = LM_DEC_QKV_FUSED,
    .qkv_bias = LM_DEC_YES,
    .out_bias = LM_DEC_YES,
    .ffn = LM_DEC_FFN_PLAIN,
    .ffn_bias = LM_DEC_YES,
    .act = LM_ACT_GELU,
    .tok_norm = true,
};

const struct lm_arch_def lm_arch_bloom = {
    .name = "bloom",
    .rope_mode = LM_ROPE_NONE,
    .hparams = hparams,
    .size = size,
    .tensors = lm_decoder_tensors,
    .build = lm_decoder_build,
    .decoder = &decoder,
};
