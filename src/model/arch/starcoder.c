/* starcoder.c - StarCoder / SantaCoder (BigCode): GPT-2's layout (learned
 * position embeddings, LayerNorm with bias, fused QKV with bias, GELU MLP,
 * biases everywhere) with multi-query attention: one K/V head shared by all
 * query heads, so the fused QKV has n_embd + 2 * head_dim rows.
 *
 *   x = embed(tokens) + pos_embed(positions)
 *   for each layer:
 *       h = x + Wo · attn(split(Wqkv · ln1(x) + bqkv)) + bo
 *       x = h + W2 · gelu(W1 · ln2(h) + b1) + b2
 *   logits = Wout · ln_f(x)
 *
 * The tensors and the graph are gpt2.c's (which handle any n_head_kv).
 */
#include "model/build.h"

static enum lm_model_size size(const struct lm_hparams *hp)
{
    switch (hp->n_layer) {
    case 24: return LM_SIZE_1B;
    case 36: return LM_SIZE_3B;
    case 42: return LM_SIZE_7B;
    case 40: return LM_SIZE_15B;
    default: return LM_SIZE_UNKNOWN;
    }
}

const struct lm_arch_def lm_arch_starcoder = {
    .name = "starcoder",
    .rope_mode = LM_ROPE_NONE,
    .size = size,
    .tensors = lm_decoder_tensors,
    .build = lm_decoder_build,
    .decoder = &lm_decoder_gpt2,
};
