/* phi2.c - Microsoft Phi-2 (and Phi-1.5): one LayerNorm per block feeding
 * attention and the MLP in parallel, QKV fused (rows [Q; K; V]) or separate,
 * biases everywhere, rotary embeddings on the first n_rot dims of each head
 * (NEOX pairs), GELU MLP, a biased output head. Q is scaled by 1/sqrt(head)
 * before Q·K (the scores then use scale 1), as llama.cpp does to keep the
 * products small.
 *
 *   x = embed(tokens)
 *   for each layer:
 *       n = ln(x)
 *       q, k, v = Wqkv · n + bqkv            (or Wq n + bq, Wk n + bk, Wv n + bv)
 *       a = Wo · attn(rope(q) / sqrt(d), rope(k), v) + bo
 *       x = x + a + W2 · gelu(W1 · n + b1) + b2
 *   logits = Wout · ln_f(x) + bout
 */
#include "model/build.h"

static enum lm_model_size size(const struct lm_hparams *hp)
{
    switch (hp->n_layer) {
    case 24: return LM_SIZE_1B; /* Phi-1.5 */
    case 32: return LM_SIZE_3B;
    default: return LM_SIZE_UNKNOWN;
    }
}

static const struct lm_decoder decoder = {
    .norm = LM_NORM_LAYER,
    .norm_bias = LM_DEC_YES,
    .qkv = LM_DEC_QKV_EITHER,
    .qkv_bias = LM_DEC_YES,
    .out_bias = LM_DEC_YES,
    .ffn = LM_DEC_FFN_PLAIN,
    .ffn_bias = LM_DEC_YES,
    .act = LM_ACT_GELU,
    .head_bias = LM_DEC_YES,
    .parallel = true,
    .scale_q = true,
};

const struct lm_arch_def lm_arch_phi2 = {
    .name = "phi2",
    .rope_mode = LM_ROPE_NEOX,
    .size = size,
    .tensors = lm_decoder_tensors,
    .build = lm_decoder_build,
    .decoder = &decoder,
};
