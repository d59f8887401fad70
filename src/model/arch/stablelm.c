/* stablelm.c - StableLM (StableLM-3B-4E1T, StableLM-2): pre-LayerNorm blocks
 * with biased norms, rotary embeddings on only the first n_rot dims of each
 * head (NEOX pairs (i, i + n_rot/2); the rest pass through), grouped-query
 * attention (q/k/v biases optional: StableLM-2 has them), SwiGLU FFN.
 *
 *   x = embed(tokens)
 *   for each layer:
 *       n = ln1(x)
 *       h = x + Wo · attn(rope(Wq n + bq), rope(Wk n + bk), Wv n + bv)
 *       x = h + W2 · (silu(W1 · ln2(h)) * W3 · ln2(h))
 *   logits = Wout · ln_f(x)
 */
#include "model/build.h"

static enum lm_model_size size(const struct lm_hparams *hp)
{
    switch (hp->n_layer) {
    case 24: return LM_SIZE_1B; /* StableLM-2 1.6B */
    case 32: return LM_SIZE_3B;
    default: return LM_SIZE_UNKNOWN;
    }
}

static const struct lm_decoder decoder = {
    .norm = LM_NORM_LAYER,
    .norm_bias = LM_DEC_YES,
    .qkv_bias = LM_DEC_MAYBE,
    .act = LM_ACT_SILU,
};

const struct lm_arch_def lm_arch_stablelm = {
    .name = "stablelm",
    .rope_mode = LM_ROPE_NEOX,
    .size = size,
    .tensors = lm_decoder_tensors,
    .build = lm_decoder_build,
    .decoder = &decoder,
};
