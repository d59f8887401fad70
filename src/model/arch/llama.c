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
#include "model/build.h"

static enum lm_model_size size(const struct lm_hparams *hp)
{
    switch (hp->n_layer) {
    case 22: return LM_SIZE_1B;
    case 26: return LM_SIZE_3B;
    case 32: return hp->n_expert == 8 ? LM_SIZE_8x7B : LM_SIZE_7B;
    case 40: return LM_SIZE_13B;
    case 48: return LM_SIZE_34B;
    case 60: return LM_SIZE_30B;
    case 80: return hp->n_head == hp->n_head_kv ? LM_SIZE_65B : LM_SIZE_70B;
    default: return LM_SIZE_UNKNOWN;
    }
}

static const struct lm_decoder decoder = {
    .norm = LM_NORM_RMS,
    .qkv_bias = LM_DEC_MAYBE,
    .out_bias = LM_DEC_MAYBE,
    .act = LM_ACT_SILU,
    .experts = true,
};

const struct lm_arch_def lm_arch_llama = {
    .name = "llama",
    .rope_mode = LM_ROPE_NORMAL,
    .size = size,
    .tensors = lm_decoder_tensors,
    .build = lm_decoder_build,
    .decoder = &decoder,
};
