/* model.h - a LLaMA model with F32 parameters, as training sees it.
 *
 * The parameters live in one host arena, named as in a GGUF file
 * (model/tensor_names.h), in a fixed order (the order they are written in).
 * lm_train_build makes the training graph for a batch of B sequences of T
 * tokens: the same forward computation as the inference graph of
 * model/arch/llama.c (RMSNorm, RoPE on adjacent pairs, causal attention with
 * GQA, SwiGLU, output head), written without a KV cache and with the
 * unfused attention (MUL_MAT, SOFT_MAX, MUL_MAT), then the cross-entropy loss
 * against the next tokens and, for training, the gradient of every parameter
 * (train/grad.h), optionally with gradient checkpointing per layer.
 */
#ifndef LM_TRAIN_MODEL_H
#define LM_TRAIN_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "core/status.h"
#include "core/tensor.h"

struct lm_train_hparams {
    int32_t n_vocab;
    int32_t n_embd;
    int32_t n_layer;
    int32_t n_head;
    int32_t n_head_kv;
    int32_t n_ff;
    int32_t n_ctx;      /* the context the model is trained for (written as context_length) */
    float norm_eps;     /* RMSNorm epsilon */
    float rope_base;    /* RoPE frequency base */
};

/* The matrices of a layer a LoRA adapter can adapt (--lora-targets). */
enum lm_lora_target {
    LM_LORA_Q, LM_LORA_K, LM_LORA_V, LM_LORA_O, LM_LORA_GATE, LM_LORA_DOWN, LM_LORA_UP, LM_LORA_COUNT
};

struct lm_train_layer {
    struct lm_tensor *attn_norm, *wq, *wk, *wv, *wo;
    struct lm_tensor *ffn_norm, *ffn_gate, *ffn_down, *ffn_up;
    /* LoRA (lm_train_model_add_lora), NULL where not adapted: W x becomes
     * W x + (alpha / r) B (A x) with lora_a [n_in, r] and lora_b [r, n_out] */
    struct lm_tensor *lora_a[LM_LORA_COUNT], *lora_b[LM_LORA_COUNT];
};

struct lm_train_model {
    struct lm_train_hparams hp;
    struct lm_ctx *ctx; /* the model's weights (data in the arena) */
    struct lm_tensor *tok_embd, *output_norm, *output;
    struct lm_train_layer *layers;
    struct lm_tensor **params; /* every weight of the model, in file order */
    int n_params;
    int64_t n_elements;        /* total weight count */
    /* what training updates: every weight, or only the LoRA tensors (layer
     * by layer, A then B per target in enum order) */
    struct lm_tensor **train;
    int n_train;
    int64_t n_train_elements;
    struct lm_ctx *lora_ctx;   /* the LoRA tensors, or NULL */
    int lora_rank;
    float lora_alpha;
};

/* Checks hp (sizes > 0 and sane, n_embd % n_head == 0, n_head % n_head_kv == 0,
 * even head size); err gets the reason. */
lm_status lm_train_hparams_check(const struct lm_train_hparams *hp, char *err, size_t err_size);

/* The weights a model of hp has (an untied output included), for a checked hp. */
double lm_train_hparams_n_weights(const struct lm_train_hparams *hp);

/* A model with freshly initialised parameters: matrices drawn from
 * N(0, 0.02^2) (the residual projections wo and ffn_down scaled by
 * 1/sqrt(2 n_layer)), norms 1. The draws come from seed alone, so the same
 * seed gives the same bits on every machine. */
lm_status lm_train_model_new(const struct lm_train_hparams *hp, uint64_t seed, struct lm_train_model **out,
                             char *err, size_t err_size);
void lm_train_model_free(struct lm_train_model *m); /* NULL: nothing */

/* Adds LoRA tensors of rank r to the targets (bit mask of 1 << enum
 * lm_lora_target) of every layer and makes them the only trainable tensors:
 * A drawn from N(0, 1/n_in) by seed, B zero (so the adapted model starts as
 * the base). alpha / r scales the product, as llama.cpp applies adapters. */
lm_status lm_train_model_add_lora(struct lm_train_model *m, int rank, float alpha, unsigned targets, uint64_t seed,
                                  char *err, size_t err_size);

/* The parameter with this GGUF name, or NULL. */
struct lm_tensor *lm_train_model_param(const struct lm_train_model *m, const char *name);

struct lm_train_graph {
    struct lm_graph *graph;
    /* inputs (flag INPUT) the caller fills before each compute */
    struct lm_tensor *tokens;  /* I32 [B T]: sequence b at [b T, (b+1) T) */
    struct lm_tensor *targets; /* I32 [B T]: the next token of each position; -1 = not scored */
    struct lm_tensor *pos;     /* I32 [B T]: 0..T-1 per sequence (lm_train_fill_pos) */
    struct lm_tensor *mask;    /* F32 [T, T]: causal 0 / -inf (lm_train_fill_mask) */
    struct lm_tensor *dloss;   /* F32 [1]: 1 (training graphs only) */
    /* outputs */
    struct lm_tensor *logits;  /* F32 [n_vocab, B T] (only when asked for) */
    struct lm_tensor *loss;    /* F32 [1]: mean cross-entropy over the scored positions */
    struct lm_tensor **grads;  /* per trainable tensor (m->train order); NULL without backward */
};

enum {
    LM_TRAIN_BACKWARD = 1,   /* build the gradients */
    LM_TRAIN_CHECKPOINT = 2, /* recompute each layer's activations in the backward pass */
    LM_TRAIN_LOGITS = 4,     /* keep the logits as an output */
};

/* Builds the graph for B sequences of T tokens (T <= hp.n_ctx) into gctx
 * (no_alloc). flags: LM_TRAIN_*. */
lm_status lm_train_build(const struct lm_train_model *m, struct lm_ctx *gctx, int B, int T, unsigned flags,
                         struct lm_train_graph *out);

/* Frees what lm_train_build allocated outside the arena (the grads array). */
void lm_train_graph_release(struct lm_train_graph *g);

/* Arena bytes lm_train_build needs at most (metadata only). */
size_t lm_train_graph_ctx_size(const struct lm_train_hparams *hp);
/* Graph capacity lm_train_build uses. */
int lm_train_graph_size(const struct lm_train_hparams *hp);

/* Inputs that depend on the shape only. */
void lm_train_fill_pos(int32_t *pos, int B, int T);
void lm_train_fill_mask(float *mask, int T);

#endif
