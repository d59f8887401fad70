/* qwen2.c - Qwen1.5 / Qwen2: the LLaMA block with biases on the Q, K and V
 * projections and RoPE on NEOX pairs; RMSNorm, grouped-query attention,
 * SwiGLU FFN; the output head may be tied to the embedding (small models).
 *
 *   x = embed(tokens)
 *   for each layer:
 *       n = rms(x)
 *       h = x + Wo · attn(rope(Wq n + bq), rope(Wk n + bk), Wv n + bv)
 *       x = h + W2 · (silu(W1 · rms(h)) * W3 · rms(h))
 *   logits = Wout · rms(x)
 */
#include "model/build.h"

static enum lm_model_size size(const struct lm_hparams *hp)
{
    switch (hp->n_layer) {
    case 24: return hp->n_embd == 1024 ? LM_SIZE_0_5B : LM_SIZE_1B;
    case 28: return hp->n_embd == 1536 ? LM_SIZE_1_5B : LM_SIZE_7B;
    case 32: return LM_SIZE_7B;
    case 36: return LM_SIZE_3B;
    case 40: return hp->n_head == 20 ? LM_SIZE_4B : LM_SIZE_13B;
    case 48: return LM_SIZE_14B;
    case 80: return LM_SIZE_70B;
    default: return LM_SIZE_UNKNOWN;
    }
}

static const struct lm_decoder decoder = {
    .norm = LM_NORM_RMS,
    .qkv_bias = LM_DEC_YES,
    .act = LM_ACT_SILU,
};

const struct lm_arch_def lm_arch_qwen2 = {
    .name = "qwen2",
    .rope_mode = LM_ROPE_NEOX,
    .size = size,
    .tensors = lm_decoder_tensors,
    .build = lm_decoder_build,
    .decoder = &decoder,
};
