/* build.h - building blocks for the forward graphs of model/arch/<name>.c.
 *
 * An lm_build holds what a graph builder needs for one batch: the model, the
 * context parameters, the KV cache with the slot of this batch, and the input
 * tensors (filled after allocation by context.c). The helpers below are the
 * pieces every architecture shares: embeddings, norms, RoPE, attention over the
 * KV cache, feed-forward blocks (plain, gated, mixture of experts) and the
 * output head. A builder reads like the model's equations, top to bottom.
 */
#ifndef LM_BUILD_H
#define LM_BUILD_H

#include "model/kv_cache.h"
#include "model/model.h"

/* Context parameters after defaults are resolved (context.c). */
struct lm_cparams {
    uint32_t n_ctx;
    uint32_t n_batch;
    uint32_t n_threads;
    uint32_t n_threads_batch;
    float rope_freq_base;
    float rope_freq_scale;
    uint32_t n_yarn_orig_ctx;
    float yarn_ext_factor;
    float yarn_attn_factor;
    float yarn_beta_fast;
    float yarn_beta_slow;
    enum lm_type type_k, type_v;
    bool logits_all;
    bool embedding;
    bool attn_unfused; /* attention as MUL_MAT, SOFT_MAX, MUL_MAT, never the ATTN op (lm_context_params) */
};

enum lm_norm_kind { LM_NORM_RMS, LM_NORM_LAYER };
enum lm_ffn_act { LM_ACT_SILU, LM_ACT_GELU, LM_ACT_RELU_SQR };

struct lm_build {
    struct lm_ctx *ctx;             /* graph arena (no_alloc) */
    struct lm_graph *graph;
    const struct lm_model *m;
    const struct lm_hparams *hp;
    const struct lm_cparams *cp;
    struct lm_kv_cache *kv;

    int32_t n_tokens;               /* tokens of this batch */
    int32_t n_kv;                   /* cache cells attended to (a multiple of 32, <= size) */
    int32_t n_outputs;              /* rows of logits to produce */
    bool alibi_mask;                /* mask holds -|pos_q - pos_k| (ALiBi archs) */

    /* inputs, flagged LM_FLAG_INPUT, filled by the caller after allocation */
    struct lm_tensor *inp_tokens;   /* I32 [n_tokens], or NULL when inp_embd is used */
    struct lm_tensor *inp_embd;     /* F32 [n_embd, n_tokens] embeddings input, or NULL */
    struct lm_tensor *inp_pos;      /* I32 [n_tokens] */
    struct lm_tensor *inp_mask;     /* F32 [n_kv, n_tokens] 0 / -inf (or -|i-j|) */
    struct lm_tensor *inp_out_ids;  /* I32 [n_outputs] batch rows that produce logits */
    struct lm_tensor *inp_kv_idx;   /* I32 [n_tokens] the cache cell each token is written to: the cells are
                                       data, so a kept graph serves the next cells unchanged */

    /* outputs */
    struct lm_tensor *out_embd;     /* F32 [n_embd, n_outputs] final normed hidden state; an encoder's:
                                       the pooled [n_embd, 1], or [n_embd, n_tokens] without pooling */
    struct lm_tensor *out_logits;   /* F32 [n_vocab, n_outputs]; NULL for an encoder */
};

/* The token (or embedding) input [n_embd, n_tokens]. Creates the inputs. */
struct lm_tensor *lm_b_inp_embd(struct lm_build *b);
/* Creates inp_pos and inp_mask (once per graph). */
void lm_b_inputs_attn(struct lm_build *b);

/* norm(x) * w (+ bias); w and bias may be NULL. */
struct lm_tensor *lm_b_norm(struct lm_build *b, struct lm_tensor *x, struct lm_tensor *w, struct lm_tensor *bias,
                            enum lm_norm_kind kind);
/* w x (+ bias). Every product with a model matrix goes through here: a
 * weight cut into row slices (model/row_split.h) is one product per slice,
 * joined by CONCAT along the rows. */
struct lm_tensor *lm_b_lin(struct lm_build *b, struct lm_tensor *w, struct lm_tensor *x, struct lm_tensor *bias);
/* Put the products k and v (of the same activations) next to each other in
 * the graph's node order, k first: the K and V projections, so that a
 * backend fusing adjacent pairs (core/fuse.h: the CUDA backend) computes
 * them in one launch. Results are the same in any order. */
void lm_b_adjacent(struct lm_build *b, struct lm_tensor *k, struct lm_tensor *v);
/* The token embedding plus the learned position embedding m->pos_embd at
 * inp_pos (gpt2, starcoder). */
struct lm_tensor *lm_b_pos_embd(struct lm_build *b, struct lm_tensor *x);

/* Q, K and V of layer l from x [n_embd, T]: the fused l->wqkv (+ l->bqkv),
 * rows [Q; K; V], when the layer has one, else l->wq/wk/wv (+ biases).
 * Q comes out as [hk, n_head, T], K as [hk, n_head_kv, T] (views of the fused
 * product when fused) and V as [n_embd_v_gqa, T] (contiguous). clamp > 0
 * clamps the projection to [-clamp, clamp] first (mpt's clamp_kqv). */
void lm_b_qkv(struct lm_build *b, const struct lm_layer *l, struct lm_tensor *x, float clamp, struct lm_tensor **q,
              struct lm_tensor **k, struct lm_tensor **v);

/* RoPE of x [head, n_heads, n_tokens] at inp_pos, rotating n_rot dims. */
struct lm_tensor *lm_b_rope(struct lm_build *b, struct lm_tensor *x, int n_rot, int mode);

/* Store k [n_embd_head_k, n_head_kv, T] and v [n_embd_v_gqa, T] of layer il in
 * the cache, attend q [n_embd_head_k, n_head, T] over the cached keys and
 * values, and project with wo (+bo; wo may be NULL). kq_scale multiplies Q·K;
 * ALiBi from hparams.f_max_alibi_bias; kqv clamping when f_clamp_kqv > 0 is the
 * caller's job (it applies to q/k/v before). */
struct lm_tensor *lm_b_attn(struct lm_build *b, int il, struct lm_tensor *q, struct lm_tensor *k, struct lm_tensor *v,
                            struct lm_tensor *wo, struct lm_tensor *bo, float kq_scale);

/* Feed-forward: down(act(gate(x)) * up(x)) for SEQUENTIAL with a gate, or
 * down(act(up(x))) without one; biases optional. */
struct lm_tensor *lm_b_ffn(struct lm_build *b, struct lm_tensor *x, const struct lm_layer *l, enum lm_ffn_act act);
/* Feed-forward with gate and up fused in one matrix l->ffn_up [n_embd, 2 n_ff]
 * (rows: gate, then up; phi3): down(act(gate(x)) * up(x)). */
struct lm_tensor *lm_b_ffn_fused(struct lm_build *b, struct lm_tensor *x, const struct lm_layer *l,
                                 enum lm_ffn_act act);
/* Mixture of experts (Mixtral): softmax router, top n_expert_used, weights
 * renormalised, SiLU-gated experts, weighted sum. */
struct lm_tensor *lm_b_moe(struct lm_build *b, struct lm_tensor *x, const struct lm_layer *l);

/* Select the rows of x [n_embd, n_tokens] that produce outputs, apply the
 * final norm, set out_embd, project with the output matrix (+bias) and set
 * out_logits. */
struct lm_tensor *lm_b_output(struct lm_build *b, struct lm_tensor *x, enum lm_norm_kind kind);

/* Sets up the graph, calls the architecture's builder and expands the graph
 * from the outputs (out_embd, then out_logits unless the architecture is an
 * encoder). LM_OK or the arena's error. */
lm_status lm_build_graph(struct lm_build *b);

/* Whether the cached keys carry RoPE: the architecture has a RoPE mode and
 * the model does not use ALiBi instead (baichuan 13B). Only then does a
 * shift of the cache re-rotate them (lm_build_k_shift). */
bool lm_build_keys_rotated(const struct lm_hparams *hp);

/* A graph that re-rotates every cached key by its cell's pending delta
 * (after seq_shift/seq_div). Its input inp_pos holds the deltas (I32 [size]). */
lm_status lm_build_k_shift(struct lm_build *b);

#define LM_GRAPH_MAX_NODES 8192

/* ---- the decoder most architectures share (model/decoder.c) ----
 *
 *   x = embed(tokens)               (+ learned positions, a norm or a scale)
 *   for each layer:
 *       n = norm(x)                                      attn_norm
 *       q, k, v = lm_b_qkv(n)                            (attn_norm_2(x) when the layer has one)
 *       a = Wo · attn(rope(q), rope(k), v)               RoPE when lm_build_keys_rotated
 *       sequential: h = x + a;  x = h + ffn(norm(h))     ffn_norm
 *       parallel:   x = x + (ffn(n) + a)                 one norm for both
 *   logits = Wout · norm(x)                              output_norm
 *
 * An architecture of this shape names lm_decoder_tensors and lm_decoder_build
 * as its tensors and build and describes its variant in an lm_decoder
 * (lm_arch_def.decoder): which tensors it has and how its layer differs. */
enum lm_dec_has { LM_DEC_NO, LM_DEC_YES, LM_DEC_MAYBE };     /* a tensor: absent, required, optional */
enum lm_dec_qkv { LM_DEC_QKV_SPLIT, LM_DEC_QKV_FUSED, LM_DEC_QKV_EITHER }; /* EITHER: fused when the file has it */
enum lm_dec_ffn { LM_DEC_FFN_GATED, LM_DEC_FFN_PLAIN, LM_DEC_FFN_FUSED }; /* FUSED: ffn_up holds [gate; up] */

struct lm_decoder {
    enum lm_norm_kind norm;      /* every norm of the model */
    enum lm_dec_has norm_bias;   /* every norm's bias (token, attention, FFN, output) */
    enum lm_dec_has attn_norm_2; /* a second norm for attention (falcon 40B) */
    enum lm_dec_qkv qkv;
    enum lm_dec_has qkv_bias;    /* the biases of Q, K and V (or of the fused projection) */
    enum lm_dec_has out_bias;    /* wo's bias */
    enum lm_dec_ffn ffn;
    enum lm_dec_has ffn_bias;    /* ffn_up's and ffn_down's biases */
    enum lm_ffn_act act;
    enum lm_dec_has head_bias;   /* the output matrix's bias */
    bool experts;                /* a mixture of experts instead of the FFN when n_expert > 0 */
    bool parallel;               /* attention and FFN from the same norm (no ffn_norm) */
    bool clamp_kqv;              /* Q, K and V clamped to hparams.f_clamp_kqv (mpt) */
    bool scale_q;                /* Q / sqrt(head) after RoPE, scores unscaled (instead of scaled scores) */
    bool pos_embd;               /* learned position embeddings added to the input */
    bool tok_norm;               /* a norm of the token embeddings */
    bool scale_embd;             /* the input times sqrt(n_embd) */
};

lm_status lm_decoder_tensors(struct lm_loader *ld, struct lm_model *m);
struct lm_tensor *lm_decoder_build(struct lm_build *b);

/* GPT-2's variant (gpt2.c): also starcoder's. */
extern const struct lm_decoder lm_decoder_gpt2;

#endif
