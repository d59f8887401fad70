/* gpt2.c - GPT-2: learned position embeddings, pre-LayerNorm blocks with
 * biases everywhere, fused QKV, multi-head attention, GELU MLP.
 *
 *   x = embed(tokens) + pos_embed(positions)
 *   for each layer:
 *       h = x + Wo · attn(split(Wqkv · ln1(x) + bqkv)) + bo
 *       x = h + W2 · gelu(W1 · ln2(h) + b1) + b2
 *   logits = Wout · ln_f(x)
 */
#include "model/build.h"

static enum lm_model_size size(const struct lm_hparams *hp)
{
    switch (hp->n_layer) {
    case 12: return LM_SIZE_0_1B;
    case 24: return LM_SIZE_0_4B;
    case 36: return LM_SIZE_0_8B;
    case 48: return LM_SIZE_1_5B;
    default: return LM_SIZE_UNKNOWN;
    }
}

const struct lm_decoder lm_decoder_gpt2 = {
    .norm = LM_NORM_LAYER,
    .norm_bias = LM_DEC_YES,
    .qkv = LM_DEC_QKV_FUSED,
    .qkv_bias = LM_DEC_YES,
    .out_bias = LM_DEC_YES,
    .ffn = LM_DEC_FFN_PLAIN,
    .ffn_bias = LM_DEC_YES,
    .act = LM_ACT_GELU,
    .pos_embd = true,
};

const struct lm_arch_def lm_arch_gpt2 = {
    .name = "gpt2",
    .rope_mode = LM_ROPE_NONE,
    .size = size,
    .tensors = lm_decoder_tensors,
    .build = lm_decoder_build,
    .decoder = &lm_decoder_gpt2,
};
