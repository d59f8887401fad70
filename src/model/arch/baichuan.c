/* baichuan.c - Baichuan / Baichuan2: the LLaMA layout (RMSNorm, separate
 * Q/K/V, SwiGLU FFN, no biases). Positions depend on the size, as llama.cpp
 * b1892 decides it from the layer count: 32 layers ("7B") use RoPE on
 * adjacent pairs, 40 layers ("13B") use no RoPE but ALiBi biases (max bias
 * 8); other layer counts are refused (b1892 asserts).
 *
 *   x = embed(tokens)
 *   for each layer:
 *       q, k, v = Wq · rms(x), Wk · rms(x), Wv · rms(x)
 *       7B:  h = x + Wo · attn(rope(q), rope(k), v)
 *       13B: h = x + Wo · attn_alibi(q, k, v)
 *       x = h + W2 · (silu(W1 · rms(h)) * W3 · rms(h))
 *   logits = Wout · rms(x)
 */
#include "model/build.h"
#include "model/loader.h"

static enum lm_model_size size(const struct lm_hparams *hp)
{
    switch (hp->n_layer) {
    case 32: return LM_SIZE_7B;
    case 40: return LM_SIZE_13B;
    default: return LM_SIZE_UNKNOWN;
    }
}

static lm_status hparams(struct lm_loader *ld, struct lm_hparams *hp)
{
    switch (size(hp)) {
    case LM_SIZE_7B: /* RoPE, never ALiBi */
        hp->f_max_alibi_bias = 0.0f;
        break;
    case LM_SIZE_13B: /* ALiBi; the files carry no max bias, b1892 hard-codes 8 */
        if (hp->f_max_alibi_bias == 0.0f)
            hp->f_max_alibi_bias = 8.0f;
        break;
    default:
        return lm_ld_fail(ld, LM_ERR_UNSUPPORTED, "baichuan: %u layers (only 32, \"7B\", or 40, \"13B\")",
                          hp->n_layer);
    }
    return lm_ld_status(ld);
}

static const struct lm_decoder decoder = {
    .norm = LM_NORM_RMS,
    .act = LM_ACT_SILU,
};

/* rope_mode is the 7B's; the 13B (ALiBi) rotates nothing, neither in its
 * graph nor at a K shift (lm_build_keys_rotated). */

const struct lm_arch_def lm_arch_baichuan = {
    .name = "baichuan",
    .rope_mode = LM_ROPE_NORMAL,
    .hparams = hparams,
    .size = size,
    .tensors = lm_decoder_tensors,
    .build = lm_decoder_build,
    .decoder = &decoder,
};
