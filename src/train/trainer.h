/* trainer.h - training steps: batches, the graph on the CPU backend, AdamW.
 *
 * A trainer owns the scheduler and the training graph of one batch shape
 * (built once, run every micro-batch), the optimizer state (first and second
 * moments per parameter, F32 like the master weights) and the step count.
 * Batches are drawn from a token stream by a counter-based generator: the
 * windows of step s depend on (seed, s) only, so a resumed run sees exactly
 * the batches an uninterrupted one would (docs/training.md).
 */
#ifndef LM_TRAINER_H
#define LM_TRAINER_H

#include <stdbool.h>
#include <stdint.h>

#include "gguf/gguf.h"
#include "train/model.h"

struct lm_trainer_params {
    int n_threads;
    int batch;          /* sequences per micro-batch */
    int ctx;            /* tokens per sequence */
    int accum;          /* micro-batches per optimizer step (gradient accumulation) */
    int steps;          /* total optimizer steps (for the schedule) */
    int warmup;         /* linear warmup steps */
    float lr;           /* peak learning rate */
    float lr_min;       /* cosine floor */
    float beta1, beta2, eps;
    float weight_decay; /* decoupled, on matrices only */
    float clip;         /* max global gradient norm (0: off) */
    uint64_t seed;      /* batch windows */
    int32_t bos;        /* >= 0: the first token of every window is this id (BOS), as `lamina
                           perplexity` scores its chunks; -1: windows as drawn */
    bool checkpoint;    /* gradient checkpointing */
};

struct lm_trainer_params lm_trainer_default_params(void);

struct lm_trainer;

/* A trainer for m (which it updates in place; m must outlive it). */
lm_status lm_trainer_new(struct lm_train_model *m, const struct lm_trainer_params *p, struct lm_trainer **out,
                         char *err, size_t err_size);
void lm_trainer_free(struct lm_trainer *tr); /* NULL: nothing */

/* One optimizer step on accum micro-batches of windows of tokens[0..n)
 * (n > ctx). *loss: the mean training loss of the step; *gnorm: the gradient
 * norm before clipping (either may be NULL). */
lm_status lm_trainer_step(struct lm_trainer *tr, const int32_t *tokens, int64_t n, float *loss, float *gnorm);

/* Mean loss over the consecutive windows of ctx + 1 tokens in tokens[0..n)
 * (at most max_windows of them; 0 = all), as nats per scored token. */
lm_status lm_trainer_eval(struct lm_trainer *tr, const int32_t *tokens, int64_t n, int64_t max_windows,
                          double *loss);

int64_t lm_trainer_step_count(const struct lm_trainer *tr);
/* The learning rate of step s (0-based) under the schedule. */
float lm_trainer_lr(const struct lm_trainer_params *p, int64_t s);

/* Checkpoints: the step count and optimizer moments as keys and tensors of
 * a GGUF writer ("training.*", "optim.m.<name>", "optim.v.<name>"); the
 * model's own tensors are written by lm_train_model_write. The data pointers
 * stay owned by the trainer (valid until its next step or free). */
lm_status lm_trainer_write_state(const struct lm_trainer *tr, struct lm_gguf_writer *w);
/* Restore what lm_trainer_write_state wrote (same model shape). */
lm_status lm_trainer_read_state(struct lm_trainer *tr, const struct lm_gguf *g, char *err, size_t err_size);

/* The model as an ordinary llama GGUF: hyperparameter keys and the parameters
 * (type F32 or F16 for matrices; norms stay F32). Tokenizer keys are the
 * caller's. Converted data is held in *hold (free() it after writing). */
lm_status lm_train_model_write(const struct lm_train_model *m, enum lm_type type, struct lm_gguf_writer *w,
                               void **hold);
/* A model from a GGUF with the llama keys lm_train_model_write writes (a
 * llama model with full RoPE and no biases), its weights decoded to F32
 * whatever their type (F16, BF16, quantized): the base of a finetune. g must
 * be a memory reader (lm_gguf_open_memory). */
lm_status lm_train_model_read(const struct lm_gguf *g, struct lm_train_model **out, char *err, size_t err_size);

/* Write w to path atomically: a temporary file in the same folder, then
 * rename, so a crash leaves either the old file or the new one. */
lm_status lm_train_write_atomic(const struct lm_gguf_writer *w, const char *path);
/* The temporary name such a write uses ("PATH.tmp.PID"; free() it), or NULL. */
char *lm_train_tmp_path(const char *path);

#endif
