/* phi3.c - Microsoft Phi-3: the LLaMA block with QKV fused in one matrix
 * (rows [Q; K; V], no bias; separate q/k/v also accepted), gate and up fused
 * in one matrix (rows [gate; up]), RoPE on NEOX pairs, grouped-query
 * attention, Q scaled by 1/sqrt(head) before Q·K, SwiGLU FFN.
 *
 *   x = embed(tokens)
 *   for each layer:
 *       q, k, v = Wqkv · rms(x)
 *       h = x + Wo · attn(rope(q) / sqrt(d), rope(k), v)
 *       g, u = Wgu · rms(h)
 *       x = h + W2 · (silu(g) * u)
 *   logits = Wout · rms(x)
 */
#include "model/build.h"

static enum lm_model_size size(const struct lm_hparams *hp)
{
    switch (hp->n_layer) {
    case 24: return LM_SIZE_1B;
    case 32: return LM_SIZE_3B;
    case 40: return LM_SIZE_14B;
    default: return LM_SIZE_UNKNOWN;
    }
}

static const struct lm_decoder decoder = {
    .norm = LM_NORM_RMS,
    .qkv = LM_DEC_QKV_EITHER,
    .ffn = LM_DEC_FFN_FUSED,
    .act = LM_ACT_SILU,
    .scale_q = true,
};

const struct lm_arch_def lm_arch_phi3 = {
    .name = "phi3",
    .rope_mode = LM_ROPE_NEOX,
    .size = size,
    .tensors = lm_decoder_tensors,
    .build = lm_decoder_build,
    .decoder = &decoder,
};
