/* plamo.c - PLaMo (Preferred Networks): one RMSNorm per block feeding
 * attention and the SwiGLU MLP in parallel (there is no second norm), RoPE on
 * NEOX pairs, grouped-query attention, no biases.
 *
 *   x = embed(tokens)
 *   for each layer:
 *       n = rms(x)
 *       x = x + Wo · attn(rope(Wq n), rope(Wk n), Wv n) + W2 · (silu(W1 n) * W3 n)
 *   logits = Wout · rms(x)
 */
#include "model/build.h"

static enum lm_model_size size(const struct lm_hparams *hp)
{
    return hp->n_layer == 40 ? LM_SIZE_13B : LM_SIZE_UNKNOWN;
}

static const struct lm_decoder decoder = {
    .norm = LM_NORM_RMS,
    .act = LM_ACT_SILU,
    .parallel = true,
};

const struct lm_arch_def lm_arch_plamo = {
    .name = "plamo",
    .rope_mode = LM_ROPE_NEOX,
    .size = size,
    .tensors = lm_decoder_tensors,
    .build = lm_decoder_build,
    .decoder = &decoder,
};
