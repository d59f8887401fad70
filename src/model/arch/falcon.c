/* falcon.c - Falcon (7B, 40B, 180B): LayerNorm with bias, fused QKV with
 * multi-query (7B) or grouped-query (40B) attention, RoPE on rotated halves
 * (NEOX), attention and FFN computed in parallel from the same block input,
 * GELU MLP without gate, no linear biases.
 *
 *   x = embed(tokens)
 *   for each layer:
 *       n  = ln(x)                     attn_norm
 *       na = ln2(x) if the layer has attn_norm_2 (40B), else n
 *       q, k, v = split(Wqkv · na)    rows [Q; K; V]
 *       a  = Wo · attn(rope(q), rope(k), v)
 *       x  = x + a + W2 · gelu(W1 · n)
 *   logits = Wout · ln_f(x)
 *
 * (In the 40B layout the FFN reads attn_norm and attention reads
 * attn_norm_2, as llama.cpp b1892 wires it.)
 */
#include "model/build.h"

static enum lm_model_size size(const struct lm_hparams *hp)
{
    switch (hp->n_layer) {
    case 32: return LM_SIZE_7B;
    case 60: return LM_SIZE_40B;
    default: return LM_SIZE_UNKNOWN;
    }
}

static const struct lm_decoder decoder = {
    .norm = LM_NORM_LAYER,
    .norm_bias = LM_DEC_YES,
    .attn_norm_2 = LM_DEC_MAYBE,
    .qkv = LM_DEC_QKV_FUSED,
    .ffn = LM_DEC_FFN_PLAIN,
    .act = LM_ACT_GELU,
    .parallel = true,
};

const struct lm_arch_def lm_arch_falcon = {
    .name = "falcon",
    .rope_mode = LM_ROPE_NEOX,
    .size = size,
    .tensors = lm_decoder_tensors,
    .build = lm_decoder_build,
    .decoder = &decoder,
};
