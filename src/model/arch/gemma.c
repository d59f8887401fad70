/* gemma.c - Google Gemma: the embedding scaled by sqrt(n_embd) and tied to
 * the output head, RMSNorm (the stored weights already include Gemma's "+1";
 * the converter adds it), RoPE on NEOX pairs, multi-query attention (2B) or
 * multi-head (7B) with a head size from the file (key_length/value_length,
 * not n_embd / n_head), Q scaled by 1/sqrt(head) before Q·K, GELU-gated FFN.
 *
 *   x = embed(tokens) * sqrt(n_embd)
 *   for each layer:
 *       n = rms(x)
 *       h = x + Wo · attn(rope(Wq n) / sqrt(d), rope(Wk n), Wv n)
 *       x = h + W2 · (gelu(W1 · rms(h)) * W3 · rms(h))
 *   logits = embed^T · rms(x)
 */
#include "model/build.h"

static enum lm_model_size size(const struct lm_hparams *hp)
{
    switch (hp->n_layer) {
    case 18: return LM_SIZE_2B;
    case 28: return LM_SIZE_7B;
    default: return LM_SIZE_UNKNOWN;
    }
}

static const struct lm_decoder decoder = {
    .norm = LM_NORM_RMS,
    .act = LM_ACT_GELU,
    .scale_q = true,
    .scale_embd = true,
};

const struct lm_arch_def lm_arch_gemma = {
    .name = "gemma",
    .rope_mode = LM_ROPE_NEOX,
    .size = size,
    .tensors = lm_decoder_tensors,
    .build = lm_decoder_build,
    .decoder = &decoder,
};
