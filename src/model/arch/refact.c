/* refact.c - Refact (Refact-1.6B): the LLaMA layout (RMSNorm, separate Q/K/V,
 * SwiGLU FFN, no biases) with multi-query attention and no RoPE: positions
 * enter only through ALiBi biases (max bias 8).
 *
 *   x = embed(tokens)
 *   for each layer:
 *       h = x + Wo · attn_alibi(Wq · rms(x), Wk · rms(x), Wv · rms(x))
 *       x = h + W2 · (silu(W1 · rms(h)) * W3 · rms(h))
 *   logits = Wout · rms(x)
 *
 * llama.cpp b1892 cannot load refact files (its tensor table lacks a name
 * the shared LLaMA loading asks for); this follows later llama.cpp, whose
 * graph is the one above.
 */
#include "model/build.h"
#include "model/loader.h"

static lm_status hparams(struct lm_loader *ld, struct lm_hparams *hp)
{
    /* the files carry no max_alibi_bias; llama.cpp hard-codes 8 */
    if (hp->f_max_alibi_bias == 0.0f)
        hp->f_max_alibi_bias = 8.0f;
    return lm_ld_status(ld);
}

static enum lm_model_size size(const struct lm_hparams *hp)
{
    return hp->n_layer == 32 ? LM_SIZE_1B : LM_SIZE_UNKNOWN;
}

static const struct lm_decoder decoder = {
    .norm = LM_NORM_RMS,
    .act = LM_ACT_SILU,
};

const struct lm_arch_def lm_arch_refact = {
    .name = "refact",
    .rope_mode = LM_ROPE_NONE,
    .hparams = hparams,
    .size = size,
    .tensors = lm_decoder_tensors,
    .build = lm_decoder_build,
    .decoder = &decoder,
};
