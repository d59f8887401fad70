/* llama.h - lamina's public C API: the llama.h of llama.cpp build b1892
 * (January 2024), source-compatible, so programs and language bindings written
 * against that header compile and run on lamina unchanged.
 *
 * The header is valid C11 and C++11 (inside extern "C"). Facts about each
 * function (arguments, return values, behaviour clients rely on) are in
 * docs/api.md; the functions are implemented in src/api/.
 *
 * Threading: a model may be shared by several contexts; each context is used
 * by one thread at a time.
 */
#ifndef LLAMA_H
#define LLAMA_H

#include "ggml.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#if defined(__GNUC__)
#define LLAMA_API __attribute__((visibility("default")))
#else
#define LLAMA_API
#endif

#ifdef __GNUC__
#define DEPRECATED(func, hint) func __attribute__((deprecated(hint)))
#elif defined(_MSC_VER)
#define DEPRECATED(func, hint) __declspec(deprecated(hint)) func
#else
#define DEPRECATED(func, hint) func
#endif

/* b1892: 16 (GGML_CUDA_MAX_DEVICES) when built with CUDA, else 1. This one
 * header serves lamina's CPU and CUDA builds alike, so it is 16: the length
 * of a tensor_split array; GPUs beyond what the scheduler takes are unused. */
#define LLAMA_MAX_DEVICES 16

#define LLAMA_DEFAULT_SEED 0xFFFFFFFF

#define LLAMA_MAX_RNG_STATE (64 * 1024)

#define LLAMA_FILE_MAGIC_GGLA 0x67676c61u /* 'ggla': LoRA adapters */
#define LLAMA_FILE_MAGIC_GGSN 0x6767736eu /* 'ggsn': session files */

#define LLAMA_SESSION_MAGIC LLAMA_FILE_MAGIC_GGSN
#define LLAMA_SESSION_VERSION 4

#ifdef __cplusplus
extern "C" {
#endif

/* ---- opaque objects and scalar types ---- */

struct llama_model;
struct llama_context;

typedef int32_t llama_pos;
typedef int32_t llama_token;
typedef int32_t llama_seq_id;

enum llama_vocab_type {
    LLAMA_VOCAB_TYPE_SPM = 0, /* SentencePiece-style, byte fallback */
    LLAMA_VOCAB_TYPE_BPE = 1, /* byte-level BPE (GPT-2 style) */
    LLAMA_VOCAB_TYPE_WPM = 2, /* WordPiece (BERT); an addition to b1892's enum, as llama.cpp later numbered it */
};

enum llama_token_type {
    LLAMA_TOKEN_TYPE_UNDEFINED = 0,
    LLAMA_TOKEN_TYPE_NORMAL = 1,
    LLAMA_TOKEN_TYPE_UNKNOWN = 2,
    LLAMA_TOKEN_TYPE_CONTROL = 3,
    LLAMA_TOKEN_TYPE_USER_DEFINED = 4,
    LLAMA_TOKEN_TYPE_UNUSED = 5,
    LLAMA_TOKEN_TYPE_BYTE = 6,
};

/* Model file types: what most 2-D weights are stored as. */
enum llama_ftype {
    LLAMA_FTYPE_ALL_F32 = 0,
    LLAMA_FTYPE_MOSTLY_F16 = 1,
    LLAMA_FTYPE_MOSTLY_Q4_0 = 2,
    LLAMA_FTYPE_MOSTLY_Q4_1 = 3,
    LLAMA_FTYPE_MOSTLY_Q4_1_SOME_F16 = 4,
    /* 5 and 6 were Q4_2 and Q4_3, no longer supported */
    LLAMA_FTYPE_MOSTLY_Q8_0 = 7,
    LLAMA_FTYPE_MOSTLY_Q5_0 = 8,
    LLAMA_FTYPE_MOSTLY_Q5_1 = 9,
    LLAMA_FTYPE_MOSTLY_Q2_K = 10,
    LLAMA_FTYPE_MOSTLY_Q3_K_S = 11,
    LLAMA_FTYPE_MOSTLY_Q3_K_M = 12,
    LLAMA_FTYPE_MOSTLY_Q3_K_L = 13,
    LLAMA_FTYPE_MOSTLY_Q4_K_S = 14,
    LLAMA_FTYPE_MOSTLY_Q4_K_M = 15,
    LLAMA_FTYPE_MOSTLY_Q5_K_S = 16,
    LLAMA_FTYPE_MOSTLY_Q5_K_M = 17,
    LLAMA_FTYPE_MOSTLY_Q6_K = 18,
    LLAMA_FTYPE_MOSTLY_IQ2_XXS = 19,
    LLAMA_FTYPE_MOSTLY_IQ2_XS = 20,
    LLAMA_FTYPE_MOSTLY_Q2_K_S = 21,
    LLAMA_FTYPE_MOSTLY_Q3_K_XS = 22, /* b1971 */

    LLAMA_FTYPE_GUESSED = 1024, /* the file did not say */
};

enum llama_rope_scaling_type {
    LLAMA_ROPE_SCALING_UNSPECIFIED = -1,
    LLAMA_ROPE_SCALING_NONE = 0,
    LLAMA_ROPE_SCALING_LINEAR = 1,
    LLAMA_ROPE_SCALING_YARN = 2,
    LLAMA_ROPE_SCALING_MAX_VALUE = LLAMA_ROPE_SCALING_YARN,
};

enum llama_split_mode {
    LLAMA_SPLIT_NONE = 0,  /* one device */
    LLAMA_SPLIT_LAYER = 1, /* layers (and their KV) spread over devices */
    LLAMA_SPLIT_ROW = 2,   /* rows of each matrix spread over devices */
};

typedef struct llama_token_data {
    llama_token id; /* token id */
    float logit;    /* raw score */
    float p;        /* probability, once a sampler has computed it */
} llama_token_data;

typedef struct llama_token_data_array {
    llama_token_data *data; /* owned by the caller; samplers reorder and shrink it in place */
    size_t size;
    bool sorted;            /* true when data is sorted by logit, descending */
} llama_token_data_array;

/* Load progress in [0, 1]; return false to abort loading. */
typedef bool (*llama_progress_callback)(float progress, void *ctx);

/* Input of llama_decode: n_tokens entries, each a token id (token) or an
 * embedding of n_embd floats (embd), its position, the sequences it belongs to
 * and whether its logits are wanted. When pos / seq_id / n_seq_id / logits
 * are NULL: pos[i] = all_pos_0 + i * all_pos_1, every token is in sequence
 * all_seq_id, and only the last token's logits are computed. */
typedef struct llama_batch {
    int32_t n_tokens;

    llama_token *token;
    float *embd;
    llama_pos *pos;
    int32_t *n_seq_id;
    llama_seq_id **seq_id;
    int8_t *logits;

    llama_pos all_pos_0;
    llama_pos all_pos_1;
    llama_seq_id all_seq_id;
} llama_batch;

enum llama_model_kv_override_type {
    LLAMA_KV_OVERRIDE_INT = 0,
    LLAMA_KV_OVERRIDE_FLOAT = 1,
    LLAMA_KV_OVERRIDE_BOOL = 2,
};

/* Replace a metadata value of the model file at load time. An array of
 * these ends with an entry whose key is empty. */
struct llama_model_kv_override {
    char key[128];
    enum llama_model_kv_override_type tag;
    union {
        int64_t int_value;
        double float_value;
        bool bool_value;
    };
};

struct llama_model_params {
    int32_t n_gpu_layers;            /* layers to place on GPUs (none registered: all stay on the CPU) */
    enum llama_split_mode split_mode;
    int32_t main_gpu;
    const float *tensor_split;       /* NULL, or LLAMA_MAX_DEVICES proportions */

    llama_progress_callback progress_callback; /* NULL: a dot-printing default */
    void *progress_callback_user_data;

    const struct llama_model_kv_override *kv_overrides; /* NULL or terminated by an empty key */

    bool vocab_only; /* read only the tokenizer, no weights */
    bool use_mmap;   /* map the file instead of reading it */
    bool use_mlock;  /* lock the weights in RAM */
};

struct llama_context_params {
    uint32_t seed;            /* RNG seed; LLAMA_DEFAULT_SEED: from the clock */
    uint32_t n_ctx;           /* KV cache size in tokens; 0: the model's training context */
    uint32_t n_batch;         /* most tokens one llama_decode call may take */
    uint32_t n_threads;       /* threads for single-token decoding */
    uint32_t n_threads_batch; /* threads for batches of several tokens */
    int8_t rope_scaling_type; /* enum llama_rope_scaling_type (an integer field on purpose) */

    float rope_freq_base;     /* 0: from the model */
    float rope_freq_scale;    /* 0: from the model */
    float yarn_ext_factor;    /* < 0: from the model (1 with YaRN scaling, else 0) */
    float yarn_attn_factor;
    float yarn_beta_fast;
    float yarn_beta_slow;
    uint32_t yarn_orig_ctx;   /* 0: the model's */

    enum ggml_type type_k;    /* KV cache element types */
    enum ggml_type type_v;

    bool mul_mat_q;           /* deprecated: always true */
    bool logits_all;          /* compute logits for every token of a batch */
    bool embedding;           /* keep the last token's embedding */
    bool offload_kqv;         /* each layer's KV cache on its layer's device (no GPU: the CPU) */
};

typedef struct llama_model_quantize_params {
    int32_t nthread;             /* <= 0: one per core */
    enum llama_ftype ftype;      /* the target file type */
    bool allow_requantize;       /* allow quantizing tensors that are already quantized */
    bool quantize_output_tensor; /* quantize output.weight too */
    bool only_copy;              /* copy tensors as they are (rewrites the file) */
    bool pure;                   /* every tensor to the ftype's main type, no mixed recipe */
    void *imatrix;               /* importance matrix (internal form), or NULL */
} llama_model_quantize_params;

/* ---- grammars ---- */

struct llama_grammar;

enum llama_gretype {
    LLAMA_GRETYPE_END = 0,            /* end of a rule */
    LLAMA_GRETYPE_ALT = 1,            /* start of an alternative */
    LLAMA_GRETYPE_RULE_REF = 2,       /* reference to rule `value` */
    LLAMA_GRETYPE_CHAR = 3,           /* code point `value` */
    LLAMA_GRETYPE_CHAR_NOT = 4,       /* any code point but `value` (and what follows) */
    LLAMA_GRETYPE_CHAR_RNG_UPPER = 5, /* the preceding CHAR is the start of a range up to `value` */
    LLAMA_GRETYPE_CHAR_ALT = 6,       /* another code point of the same class */
};

typedef struct llama_grammar_element {
    enum llama_gretype type;
    uint32_t value; /* code point or rule index */
} llama_grammar_element;

/* ---- timings ---- */

struct llama_timings {
    double t_start_ms;
    double t_end_ms;
    double t_load_ms;
    double t_sample_ms;
    double t_p_eval_ms;
    double t_eval_ms;

    int32_t n_sample;
    int32_t n_p_eval;
    int32_t n_eval;
};

/* ---- defaults and lifecycle ---- */

LLAMA_API struct llama_model_params llama_model_default_params(void);
LLAMA_API struct llama_context_params llama_context_default_params(void);
LLAMA_API struct llama_model_quantize_params llama_model_quantize_default_params(void);

/* Once per process before anything else; numa is accepted and ignored. */
LLAMA_API void llama_backend_init(bool numa);
/* Once at the end; models and contexts may still be freed afterwards. */
LLAMA_API void llama_backend_free(void);

/* NULL on failure (the reason is logged). */
LLAMA_API struct llama_model *llama_load_model_from_file(const char *path_model, struct llama_model_params params);
LLAMA_API void llama_free_model(struct llama_model *model);

/* NULL on failure. The model must outlive the context's use (freeing the
 * context after the model is tolerated). */
LLAMA_API struct llama_context *llama_new_context_with_model(struct llama_model *model,
                                                             struct llama_context_params params);
LLAMA_API void llama_free(struct llama_context *ctx);

LLAMA_API int64_t llama_time_us(void);

LLAMA_API int32_t llama_max_devices(void);
LLAMA_API bool llama_mmap_supported(void);
LLAMA_API bool llama_mlock_supported(void);

LLAMA_API const struct llama_model *llama_get_model(const struct llama_context *ctx);

LLAMA_API uint32_t llama_n_ctx(const struct llama_context *ctx);
LLAMA_API uint32_t llama_n_batch(const struct llama_context *ctx);

LLAMA_API enum llama_vocab_type llama_vocab_type(const struct llama_model *model);

LLAMA_API int32_t llama_n_vocab(const struct llama_model *model);
LLAMA_API int32_t llama_n_ctx_train(const struct llama_model *model);
LLAMA_API int32_t llama_n_embd(const struct llama_model *model);

LLAMA_API float llama_rope_freq_scale_train(const struct llama_model *model);

/* Metadata as text. Each writes a NUL-terminated string into buf (truncated to
 * buf_size) and returns the full length, or -1 when the key/index does not exist. */
LLAMA_API int32_t llama_model_meta_val_str(const struct llama_model *model, const char *key, char *buf,
                                           size_t buf_size);
LLAMA_API int32_t llama_model_meta_count(const struct llama_model *model);
LLAMA_API int32_t llama_model_meta_key_by_index(const struct llama_model *model, int32_t i, char *buf,
                                                size_t buf_size);
LLAMA_API int32_t llama_model_meta_val_str_by_index(const struct llama_model *model, int32_t i, char *buf,
                                                    size_t buf_size);

/* "llama 7B Q4_0" etc.; same return convention as the meta functions. */
LLAMA_API int32_t llama_model_desc(const struct llama_model *model, char *buf, size_t buf_size);
LLAMA_API uint64_t llama_model_size(const struct llama_model *model);
LLAMA_API uint64_t llama_model_n_params(const struct llama_model *model);
/* A weight by GGUF name, or NULL. */
LLAMA_API struct ggml_tensor *llama_get_model_tensor(struct llama_model *model, const char *name);

/* Quantize a GGUF file into another; 0 on success. */
LLAMA_API uint32_t llama_model_quantize(const char *fname_inp, const char *fname_out,
                                        const llama_model_quantize_params *params);

/* Add scale * (B x A) of a LoRA adapter file to the model's weights; 0 on success. */
LLAMA_API DEPRECATED(int32_t llama_apply_lora_from_file(struct llama_context *ctx, const char *path_lora,
                                                        float scale, const char *path_base_model,
                                                        int32_t n_threads),
                     "use llama_model_apply_lora_from_file instead");
LLAMA_API int32_t llama_model_apply_lora_from_file(const struct llama_model *model, const char *path_lora,
                                                   float scale, const char *path_base_model, int32_t n_threads);

/* ---- KV cache ---- */

struct llama_kv_cache_view_cell {
    llama_pos pos; /* -1: empty cell */
};

/* A snapshot of the cache cells for debugging. */
struct llama_kv_cache_view {
    int32_t n_cells;
    int32_t n_max_seq;          /* sequence slots per cell in cells_sequences */
    int32_t token_count;
    int32_t used_cells;
    int32_t max_contiguous;     /* longest run of empty cells */
    int32_t max_contiguous_idx; /* its start, or -1 */
    struct llama_kv_cache_view_cell *cells;
    llama_seq_id *cells_sequences; /* n_cells * n_max_seq, -1 where unused */
};

LLAMA_API struct llama_kv_cache_view llama_kv_cache_view_init(const struct llama_context *ctx, int32_t n_max_seq);
LLAMA_API void llama_kv_cache_view_free(struct llama_kv_cache_view *view);
LLAMA_API void llama_kv_cache_view_update(const struct llama_context *ctx, struct llama_kv_cache_view *view);

/* Tokens in the cache: a cell counts once per sequence it belongs to. */
LLAMA_API int32_t llama_get_kv_cache_token_count(const struct llama_context *ctx);
LLAMA_API int32_t llama_get_kv_cache_used_cells(const struct llama_context *ctx);
LLAMA_API void llama_kv_cache_clear(struct llama_context *ctx);

/* The sequence functions take positions [p0, p1) with p0 < 0 meaning 0 and
 * p1 < 0 meaning infinity; seq_id < 0 in seq_rm means every sequence. */
LLAMA_API void llama_kv_cache_seq_rm(struct llama_context *ctx, llama_seq_id seq_id, llama_pos p0, llama_pos p1);
LLAMA_API void llama_kv_cache_seq_cp(struct llama_context *ctx, llama_seq_id seq_id_src, llama_seq_id seq_id_dst,
                                     llama_pos p0, llama_pos p1);
LLAMA_API void llama_kv_cache_seq_keep(struct llama_context *ctx, llama_seq_id seq_id);
/* Positions += delta (cells whose position becomes negative are removed);
 * cached keys are rotated to the new positions. */
LLAMA_API void llama_kv_cache_seq_shift(struct llama_context *ctx, llama_seq_id seq_id, llama_pos p0, llama_pos p1,
                                        llama_pos delta);
/* Positions /= d (integer division), for self-extend. */
LLAMA_API void llama_kv_cache_seq_div(struct llama_context *ctx, llama_seq_id seq_id, llama_pos p0, llama_pos p1,
                                      int d);

/* ---- state ---- */

/* Upper bound of the bytes llama_copy_state_data writes. */
LLAMA_API size_t llama_get_state_size(const struct llama_context *ctx);
/* Serialize RNG, logits, embedding and KV cache into dst; returns the bytes written. */
LLAMA_API size_t llama_copy_state_data(struct llama_context *ctx, uint8_t *dst);
/* Restore from src; returns the bytes read (0 if src is not valid state). */
LLAMA_API size_t llama_set_state_data(struct llama_context *ctx, uint8_t *src);

LLAMA_API bool llama_load_session_file(struct llama_context *ctx, const char *path_session, llama_token *tokens_out,
                                       size_t n_token_capacity, size_t *n_token_count_out);
LLAMA_API bool llama_save_session_file(struct llama_context *ctx, const char *path_session,
                                       const llama_token *tokens, size_t n_token_count);

/* ---- decoding ---- */

/* Old API: remove cache entries at positions >= n_past, then decode the tokens
 * at positions n_past.. in sequence 0. 0 on success. */
LLAMA_API DEPRECATED(int llama_eval(struct llama_context *ctx, llama_token *tokens, int32_t n_tokens,
                                    int32_t n_past),
                     "use llama_decode() instead");
LLAMA_API DEPRECATED(int llama_eval_embd(struct llama_context *ctx, float *embd, int32_t n_tokens, int32_t n_past),
                     "use llama_decode() instead");

/* A batch over the caller's tokens (not copied, not dereferenced here): one
 * sequence, consecutive positions from pos_0, logits of the last token only. */
LLAMA_API struct llama_batch llama_batch_get_one(llama_token *tokens, int32_t n_tokens, llama_pos pos_0,
                                                 llama_seq_id seq_id);
/* A heap batch with room for n_tokens tokens (or embeddings of embd floats
 * when embd > 0), each in up to n_seq_max sequences. n_tokens starts at 0. */
LLAMA_API struct llama_batch llama_batch_init(int32_t n_tokens, int32_t embd, int32_t n_seq_max);
/* free() every non-NULL array of the batch. */
LLAMA_API void llama_batch_free(struct llama_batch batch);

/* 0: success; 1: no room in the KV cache for the batch (try a smaller batch
 * or a larger context); < 0: error (-1: invalid batch). */
LLAMA_API int32_t llama_decode(struct llama_context *ctx, struct llama_batch batch);

LLAMA_API void llama_set_n_threads(struct llama_context *ctx, uint32_t n_threads, uint32_t n_threads_batch);

/* Logits of the last decode: rows of n_vocab floats indexed by batch position
 * (only the last token's row when neither logits_all nor batch.logits). */
LLAMA_API float *llama_get_logits(struct llama_context *ctx);
LLAMA_API float *llama_get_logits_ith(struct llama_context *ctx, int32_t i);
/* The last token's n_embd final hidden state (embedding = true contexts). */
LLAMA_API float *llama_get_embeddings(struct llama_context *ctx);

/* ---- vocabulary ---- */

LLAMA_API const char *llama_token_get_text(const struct llama_model *model, llama_token token);
LLAMA_API float llama_token_get_score(const struct llama_model *model, llama_token token);
LLAMA_API enum llama_token_type llama_token_get_type(const struct llama_model *model, llama_token token);

LLAMA_API llama_token llama_token_bos(const struct llama_model *model);
LLAMA_API llama_token llama_token_eos(const struct llama_model *model);
LLAMA_API llama_token llama_token_nl(const struct llama_model *model);

/* -1: the file does not say; 0 or 1 otherwise. */
LLAMA_API int32_t llama_add_bos_token(const struct llama_model *model);
LLAMA_API int32_t llama_add_eos_token(const struct llama_model *model);

/* Code infill tokens (CodeLlama). */
LLAMA_API llama_token llama_token_prefix(const struct llama_model *model);
LLAMA_API llama_token llama_token_middle(const struct llama_model *model);
LLAMA_API llama_token llama_token_suffix(const struct llama_model *model);
LLAMA_API llama_token llama_token_eot(const struct llama_model *model);

/* Text to tokens. Returns the number of tokens, or -(tokens needed) when
 * n_max_tokens is too small. special: control tokens written in the text
 * are recognised as such. */
LLAMA_API int32_t llama_tokenize(const struct llama_model *model, const char *text, int32_t text_len,
                                 llama_token *tokens, int32_t n_max_tokens, bool add_bos, bool special);

/* A token's bytes (no NUL added). Returns the length, or -(length needed). */
LLAMA_API int32_t llama_token_to_piece(const struct llama_model *model, llama_token token, char *buf,
                                       int32_t length);

/* ---- grammars ---- */

/* Rules are arrays of elements, each ending with LLAMA_GRETYPE_END; they are
 * copied. NULL on invalid rules. */
LLAMA_API struct llama_grammar *llama_grammar_init(const llama_grammar_element **rules, size_t n_rules,
                                                   size_t start_rule_index);
LLAMA_API void llama_grammar_free(struct llama_grammar *grammar);
LLAMA_API struct llama_grammar *llama_grammar_copy(const struct llama_grammar *grammar);

/* ---- sampling (each works in place on the caller's array) ---- */

LLAMA_API void llama_set_rng_seed(struct llama_context *ctx, uint32_t seed);

/* Repetition penalty (CTRL) plus OpenAI-style frequency and presence
 * penalties over the last penalty_last_n tokens. */
LLAMA_API void llama_sample_repetition_penalties(struct llama_context *ctx, llama_token_data_array *candidates,
                                                 const llama_token *last_tokens, size_t penalty_last_n,
                                                 float penalty_repeat, float penalty_freq, float penalty_present);

/* Classifier-free guidance on raw logits of n_vocab floats:
 * logits = guidance + scale * (logits - guidance), both log-softmaxed first. */
LLAMA_API void llama_sample_apply_guidance(struct llama_context *ctx, float *logits, float *logits_guidance,
                                           float scale);
LLAMA_API DEPRECATED(void llama_sample_classifier_free_guidance(struct llama_context *ctx,
                                                                llama_token_data_array *candidates,
                                                                struct llama_context *guidance_ctx, float scale),
                     "use llama_sample_apply_guidance() instead");

/* Sort by logit (descending) and fill p. */
LLAMA_API void llama_sample_softmax(struct llama_context *ctx, llama_token_data_array *candidates);
LLAMA_API void llama_sample_top_k(struct llama_context *ctx, llama_token_data_array *candidates, int32_t k,
                                  size_t min_keep);
LLAMA_API void llama_sample_top_p(struct llama_context *ctx, llama_token_data_array *candidates, float p,
                                  size_t min_keep);
LLAMA_API void llama_sample_min_p(struct llama_context *ctx, llama_token_data_array *candidates, float p,
                                  size_t min_keep);
LLAMA_API void llama_sample_tail_free(struct llama_context *ctx, llama_token_data_array *candidates, float z,
                                      size_t min_keep);
LLAMA_API void llama_sample_typical(struct llama_context *ctx, llama_token_data_array *candidates, float p,
                                    size_t min_keep);
/* Entropy-based dynamic temperature (b1971). */
LLAMA_API void llama_sample_entropy(struct llama_context *ctx, llama_token_data_array *candidates_p, float min_temp,
                                    float max_temp, float exponent_val);
LLAMA_API void llama_sample_temp(struct llama_context *ctx, llama_token_data_array *candidates, float temp);
LLAMA_API DEPRECATED(void llama_sample_temperature(struct llama_context *ctx, llama_token_data_array *candidates,
                                                   float temp),
                     "use llama_sample_temp instead");

/* Give -inf logits to candidates the grammar cannot accept next. */
LLAMA_API void llama_sample_grammar(struct llama_context *ctx, llama_token_data_array *candidates,
                                    const struct llama_grammar *grammar);

/* Mirostat 1.0 and 2.0: sample a token and update *mu. */
LLAMA_API llama_token llama_sample_token_mirostat(struct llama_context *ctx, llama_token_data_array *candidates,
                                                  float tau, float eta, int32_t m, float *mu);
LLAMA_API llama_token llama_sample_token_mirostat_v2(struct llama_context *ctx, llama_token_data_array *candidates,
                                                     float tau, float eta, float *mu);

LLAMA_API llama_token llama_sample_token_greedy(struct llama_context *ctx, llama_token_data_array *candidates);
/* Draw from p with the context's RNG. */
LLAMA_API llama_token llama_sample_token(struct llama_context *ctx, llama_token_data_array *candidates);

/* Advance the grammar over the token's text. */
LLAMA_API void llama_grammar_accept_token(struct llama_context *ctx, struct llama_grammar *grammar,
                                          llama_token token);

/* ---- beam search ---- */

struct llama_beam_view {
    const llama_token *tokens;
    size_t n_tokens;
    float p;  /* cumulative probability of the beam */
    bool eob; /* set by the callback to end this beam */
};

struct llama_beams_state {
    struct llama_beam_view *beam_views;
    size_t n_beams;
    size_t common_prefix_length; /* tokens shared by all beams, reported once */
    bool last_call;
};

typedef void (*llama_beam_search_callback_fn_t)(void *callback_data, struct llama_beams_state);

/* Deterministic beam search of n_beams beams from position n_past, at most
 * n_predict tokens; callback is called after each step. */
LLAMA_API void llama_beam_search(struct llama_context *ctx, llama_beam_search_callback_fn_t callback,
                                 void *callback_data, size_t n_beams, int32_t n_past, int32_t n_predict);

/* ---- performance and logging ---- */

LLAMA_API struct llama_timings llama_get_timings(struct llama_context *ctx);
LLAMA_API void llama_print_timings(struct llama_context *ctx);
LLAMA_API void llama_reset_timings(struct llama_context *ctx);

/* "AVX = 1 | AVX_VNNI = 0 | AVX2 = 1 | AVX512 = 0 | ..." (static string). */
LLAMA_API const char *llama_print_system_info(void);

/* Send the library's log output to log_callback (NULL: stderr). */
LLAMA_API void llama_log_set(ggml_log_callback log_callback, void *user_data);

LLAMA_API void llama_dump_timing_info_yaml(FILE *stream, const struct llama_context *ctx);

#ifdef __cplusplus
}
#endif

#endif
