/* model.h - a loaded model: hyperparameters, weights, vocabulary.
 *
 * Lifetimes (llama2.c's split): lm_hparams never change after load; the
 * weights (struct lm_model tensors) are read-only and may be shared by many
 * inference contexts; per-step scratch (activations, KV cache) belongs to a
 * context (context.h).
 *
 * Shapes are written in GGUF/ggml ne order: [ne0, ne1] is ne1 rows of ne0.
 */
#ifndef LM_MODEL_H
#define LM_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "backend/backend.h"
#include "core/tensor.h"
#include "gguf/gguf.h"

struct lm_vocab;

enum lm_arch {
    LM_ARCH_LLAMA = 0,
    LM_ARCH_FALCON,
    LM_ARCH_BAICHUAN,
    LM_ARCH_GPT2,
    LM_ARCH_STARCODER,
    LM_ARCH_MPT,
    LM_ARCH_BLOOM,
    LM_ARCH_STABLELM,
    LM_ARCH_QWEN,
    LM_ARCH_QWEN2,
    LM_ARCH_PHI2,
    LM_ARCH_PHI3,
    LM_ARCH_PERSIMMON,
    LM_ARCH_REFACT,
    LM_ARCH_PLAMO,
    LM_ARCH_GEMMA,
    LM_ARCH_GPTNEOX,
    LM_ARCH_BERT,
    LM_ARCH_UNKNOWN,
    LM_ARCH_COUNT
};

/* Rough size class, for llama_model_desc ("7B"). */
enum lm_model_size {
    LM_SIZE_UNKNOWN = 0,
    LM_SIZE_SMALL, /* < 1B: printed as the parameter count */
    LM_SIZE_0_1B,  /* "0.1B" (gpt2 small, ...) */
    LM_SIZE_0_4B,
    LM_SIZE_0_5B,
    LM_SIZE_0_8B,
    LM_SIZE_1B,
    LM_SIZE_1_5B,
    LM_SIZE_2B,
    LM_SIZE_3B,
    LM_SIZE_4B,
    LM_SIZE_7B,
    LM_SIZE_8B,    /* persimmon */
    LM_SIZE_8x7B,
    LM_SIZE_13B,
    LM_SIZE_14B,
    LM_SIZE_15B,
    LM_SIZE_30B,
    LM_SIZE_34B,
    LM_SIZE_40B,
    LM_SIZE_65B,
    LM_SIZE_70B,
    LM_SIZE_180B,
};

/* How an encoder (lm_arch_def.encoder) turns its tokens' final states into
 * the embeddings of a decode: %s.pooling_type, llama.cpp's values. */
enum lm_pooling {
    LM_POOLING_NONE = 0, /* one row per token of the batch */
    LM_POOLING_MEAN = 1, /* the mean over the batch's tokens */
    LM_POOLING_CLS = 2,  /* the first token ([CLS]) */
    LM_POOLING_LAST = 3, /* the last token */
};

enum lm_rope_scaling {
    LM_ROPE_SCALING_NONE = 0,
    LM_ROPE_SCALING_LINEAR = 1,
    LM_ROPE_SCALING_YARN = 2,
};

#define LM_MAX_LAYERS 512
#define LM_MAX_EXPERTS 64

struct lm_hparams {
    enum lm_arch arch;
    uint32_t n_vocab;
    uint32_t n_ctx_train;     /* context length of training */
    uint32_t n_embd;
    uint32_t n_layer;
    uint32_t n_head;
    uint32_t n_head_kv;
    uint32_t n_ff;
    uint32_t n_rot;           /* rotated dims per head */
    uint32_t n_embd_head_k;   /* head size of K (and Q) */
    uint32_t n_embd_head_v;   /* head size of V */
    uint32_t n_expert;
    uint32_t n_expert_used;

    float f_norm_eps;         /* LayerNorm epsilon */
    float f_norm_rms_eps;     /* RMSNorm epsilon */
    float f_clamp_kqv;        /* 0: no clamp */
    float f_max_alibi_bias;   /* 0: no ALiBi */
    bool non_causal;          /* attention sees the whole sequence (%s.attention.causal = false) */
    enum lm_pooling pooling;  /* encoders: %s.pooling_type */
    uint32_t n_token_types;   /* bert: tokenizer.ggml.token_type_count */

    float rope_freq_base_train;
    float rope_freq_scale_train;
    uint32_t n_yarn_orig_ctx;
    enum lm_rope_scaling rope_scaling_type_train;
    bool rope_finetuned;

    uint32_t ftype;           /* general.file_type, or guessed from the weights */
    bool ftype_guessed;       /* the file did not say (llama.cpp's LLAMA_FTYPE_GUESSED) */
    enum lm_model_size size;
};

static inline uint32_t lm_hp_n_embd_k_gqa(const struct lm_hparams *hp) { return hp->n_embd_head_k * hp->n_head_kv; }
static inline uint32_t lm_hp_n_embd_v_gqa(const struct lm_hparams *hp) { return hp->n_embd_head_v * hp->n_head_kv; }

/* One transformer block's weights. NULL where the architecture has none. */
struct lm_layer {
    struct lm_tensor *attn_norm, *attn_norm_b;     /* [n_embd] */
    struct lm_tensor *attn_norm_2, *attn_norm_2_b; /* [n_embd] (falcon-40B) */
    struct lm_tensor *attn_q_norm, *attn_q_norm_b; /* [head] (persimmon) */
    struct lm_tensor *attn_k_norm, *attn_k_norm_b;
    struct lm_tensor *attn_out_norm, *attn_out_norm_b;   /* [n_embd] (bert: after the attention residual) */
    struct lm_tensor *layer_out_norm, *layer_out_norm_b; /* [n_embd] (bert: after the FFN residual) */

    struct lm_tensor *wq;   /* [n_embd, n_embd_head_k * n_head] */
    struct lm_tensor *wk;   /* [n_embd, n_embd_k_gqa] */
    struct lm_tensor *wv;   /* [n_embd, n_embd_v_gqa] */
    struct lm_tensor *wqkv; /* [n_embd, n_embd + 2 * n_embd_gqa] fused */
    struct lm_tensor *wo;   /* [n_embd_head_v * n_head, n_embd] */
    struct lm_tensor *bq, *bk, *bv, *bqkv, *bo;

    struct lm_tensor *ffn_norm, *ffn_norm_b; /* [n_embd] */
    struct lm_tensor *ffn_gate;  /* [n_embd, n_ff] */
    struct lm_tensor *ffn_up;    /* [n_embd, n_ff] */
    struct lm_tensor *ffn_down;  /* [n_ff, n_embd] */
    struct lm_tensor *ffn_gate_b, *ffn_up_b, *ffn_down_b;

    struct lm_tensor *ffn_gate_inp;  /* [n_embd, n_expert] router */
    struct lm_tensor *ffn_gate_exps; /* [n_embd, n_ff, n_expert] */
    struct lm_tensor *ffn_up_exps;   /* [n_embd, n_ff, n_expert] */
    struct lm_tensor *ffn_down_exps; /* [n_ff, n_embd, n_expert] */
};

struct lm_mapping;   /* an mmapped file */
struct lm_placement; /* model/placement.h */

struct lm_model {
    struct lm_hparams hp;
    struct lm_vocab *vocab;
    char name[128];       /* general.name */
    char arch_name[32];   /* general.architecture */

    struct lm_tensor *tok_embd;      /* [n_embd, n_vocab] */
    struct lm_tensor *pos_embd;      /* [n_embd, n_ctx_train] (gpt2, starcoder, bert) */
    struct lm_tensor *type_embd;     /* [n_embd, n_token_types] (bert) */
    struct lm_tensor *tok_norm, *tok_norm_b; /* [n_embd] (bloom) */
    struct lm_tensor *output_norm, *output_norm_b; /* [n_embd] */
    struct lm_tensor *output;        /* [n_embd, n_vocab] (may be tok_embd when tied) */
    struct lm_tensor *output_b;      /* [n_vocab] */
    struct lm_layer *layers;         /* [n_layer] */

    struct lm_ctx *ctx;              /* metadata of every weight */
    struct lm_buffer *bufs[16];      /* weight buffers (mmap view, one per buffer type) */
    int n_bufs;
    struct lm_mapping *mapping;      /* NULL without mmap */
    struct lm_placement *place;      /* the device plan (model/placement.h); NULL: vocab only */
    struct lm_row_split *splits;     /* weights cut into row slices (model/row_split.h), by weight */
    int n_splits;
    struct lm_ctx *split_ctx;        /* metadata of their slices */
    bool mlocked;
    uint32_t bufs_locked;            /* bit i: bufs[i] (heap memory) was mlock'ed */

    struct lm_gguf *gguf;            /* the file's metadata (kept for meta_* queries) */
    uint64_t n_elements;             /* parameters */
    uint64_t n_bytes;                /* bytes of all weights */
    int64_t t_load_us;
    int64_t t_start_us;
};

/* KV overrides of llama_model_params (same layout as llama_model_kv_override). */
enum lm_kv_override_type { LM_KV_OVERRIDE_INT = 0, LM_KV_OVERRIDE_FLOAT = 1, LM_KV_OVERRIDE_BOOL = 2 };
struct lm_kv_override {
    char key[128];
    enum lm_kv_override_type tag;
    union {
        int64_t int_value;
        double float_value;
        bool bool_value;
    };
};

struct lm_model_params {
    bool vocab_only;
    bool use_mmap;
    bool use_mlock;
    bool repack;      /* let devices keep matmul-only matrices in their own layout (the CPU's GEMM layout) */
    /* device placement (model/placement.h; llama_model_params); zero: all on the CPU */
    int32_t n_gpu_layers;
    int split_mode;   /* enum lm_split_mode */
    int32_t main_gpu;
    const float *tensor_split;
    bool (*progress)(float progress, void *user); /* NULL: none; return false to abort */
    void *progress_user;
    const struct lm_kv_override *kv_overrides;     /* NULL or ended by an empty key */
};

/* Load a GGUF model. On failure *out is untouched, err holds a message. */
lm_status lm_model_load(const char *path, const struct lm_model_params *params, struct lm_model **out, char *err,
                        size_t err_size);
void lm_model_free(struct lm_model *m);

/* "llama 7B Q4_0"-style description into buf (NUL-terminated); returns the full length. */
int lm_model_desc(const struct lm_model *m, char *buf, size_t size);
/* Name of an ftype ("Q4_0", "F16", "Q4_K - Medium", ...). */
const char *lm_ftype_name(uint32_t ftype);

/* ---- architectures (model/arch.c, model/arch/<name>.c) ---- */

struct lm_loader;
struct lm_build;
struct lm_decoder; /* model/build.h */

struct lm_arch_def {
    const char *name;                    /* general.architecture value */
    int rope_mode;                       /* enum lm_rope_mode: LM_ROPE_NORMAL, LM_ROPE_NEOX, or LM_ROPE_NONE */
    /* An encoder has no LM head: its builder sets out_embd to the pooled
     * embeddings and out_logits to NULL, a context for it needs embedding =
     * true, and each decode encodes its batch alone (context.c). */
    bool encoder;
    /* Read arch-specific hparams beyond the common ones (NULL: none). */
    lm_status (*hparams)(struct lm_loader *ld, struct lm_hparams *hp);
    /* The model's size class from its hyperparameters (NULL: unknown, and
     * llama_model_desc prints the parameter count). */
    enum lm_model_size (*size)(const struct lm_hparams *hp);
    /* Create the weight tensors of m through the loader. */
    lm_status (*tensors)(struct lm_loader *ld, struct lm_model *m);
    /* Build the forward graph of one batch; returns the logits tensor (an
     * encoder's: the embeddings tensor). */
    struct lm_tensor *(*build)(struct lm_build *b);
    /* The architecture's variant of the shared decoder (build.h), read by
     * lm_decoder_tensors and lm_decoder_build when they are its tensors and
     * build; NULL for an architecture with its own. */
    const struct lm_decoder *decoder;
};

/* The definition of an architecture, or NULL when lamina cannot run it. */
const struct lm_arch_def *lm_arch_get(enum lm_arch arch);
enum lm_arch lm_arch_from_name(const char *name);
const char *lm_arch_name(enum lm_arch arch);

#endif
