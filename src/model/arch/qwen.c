/* qwen.c - Qwen (v1): RMSNorm, one fused QKV projection with a bias (rows
 * [Q; K; V], each n_embd wide), RoPE on NEOX pairs, multi-head attention,
 * SwiGLU FFN.
 *
 *   x = embed(tokens)
 *   for each layer:
 *       q, k, v = split(Wqkv · rms(x) + bqkv)
 *       h = x + Wo · attn(rope(q), rope(k), v)
 *       x = h + W2 · (silu(W1 · rms(h)) * W3 · rms(h))
 *   logits = Wout · rms(x)
 *
 * The file's feed_forward_length is twice the FFN width of the tensors (the
 * converter writes Qwen's intermediate_size, which counts gate and up), so
 * n_ff is half of it, as llama.cpp b1892 reads it.
 */
#include "model/build.h"
#include "model/loader.h"

static lm_status hparams(struct lm_loader *ld, struct lm_hparams *hp)
{
    if (hp->n_ff % 2)
        return lm_ld_fail(ld, LM_ERR_CORRUPT, "qwen: feed_forward_length %u is odd", hp->n_ff);
    hp->n_ff /= 2;
    return LM_OK;
}

static enum lm_model_size size(const struct lm_hparams *hp)
{
    switch (hp->n_layer) {
    case 32: return LM_SIZE_7B;
    case 40: return LM_SIZE_13B; /* b1892's name for Qwen-14B */
    default: return LM_SIZE_UNKNOWN;
    }
}

static const struct lm_decoder decoder = {
    .norm = LM_NORM_RMS,
    .qkv = LM_DEC_QKV_FUSED,
    .qkv_bias = LM_DEC_YES,
    .act = LM_ACT_SILU,
};

const struct lm_arch_def lm_arch_qwen = {
    .name = "qwen",
    .rope_mode = LM_ROPE_NEOX,
    .hparams = hparams,
    .size = size,
    .tensors = lm_decoder_tensors,
    .build = lm_decoder_build,
    .decoder = &decoder,
};
