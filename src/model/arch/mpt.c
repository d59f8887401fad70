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

static const struct lm_decoder decoder = {
    .norm = LM_NORM_LAYER,
    .qkv = LM_DEC_QKV_FUSED,
    .ffn = LM_DEC_FFN_PLAIN,
    .act = LM_ACT_GELU,
    .clamp_kqv = true,
};

const struct lm_arch_def lm_arch_mpt = {
    .name = "mpt",
    .rope_mode = LM_ROPE_NONE,
    .hparams = hparams,
    .size = size,
    .tensors = lm_decoder_tensors,
    .build = lm_decoder_build,
    .decoder = &decoder,
};
