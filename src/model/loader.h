/* loader.h - what an architecture file uses to read its hyperparameters and
 * declare its weights while a model loads (model/loader.c).
 *
 * Keys are written with "%s" for the architecture prefix ("%s.block_count").
 * Every getter applies the caller's KV overrides first, and checks types.
 * lm_ld_tensor finds a tensor by name, checks its shape and records it; after
 * the architecture has declared every weight, the loader checks that no file
 * tensor was left unused, then places the data (mmap or read).
 */
#ifndef LM_LOADER_H
#define LM_LOADER_H

#include "model/model.h"
#include "model/tensor_names.h"

struct lm_loader;

/* Optional keys leave *out untouched when absent. A required key that is
 * absent, or any key of the wrong type, is an error (message in the loader). */
lm_status lm_ld_u32(struct lm_loader *ld, const char *key_fmt, uint32_t *out, bool required);
lm_status lm_ld_f32(struct lm_loader *ld, const char *key_fmt, float *out, bool required);
lm_status lm_ld_bool(struct lm_loader *ld, const char *key_fmt, bool *out, bool required);
/* String into buf (truncated to size-1). */
lm_status lm_ld_str(struct lm_loader *ld, const char *key_fmt, char *buf, size_t size, bool required);

enum lm_ld_flags {
    LM_LD_REQUIRED = 0,
    LM_LD_OPTIONAL = 1, /* absent: NULL without an error */
    LM_LD_DUPLICATE = 2 /* the tensor is also used under another field (tied output) */
};

/* The weight named by fmt (printf-style) with exactly the dims ne[0..n_dims).
 * Returns NULL on error (recorded) or when optional and absent. */
struct lm_tensor *lm_ld_tensor(struct lm_loader *ld, int flags, int n_dims, const int64_t *ne, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 5, 6)))
#endif
    ;

/* The weight / bias of kind tn (tensor_names.h) in layer il (ignored for
 * global kinds): lm_ld_tensor with the table's name. */
struct lm_tensor *lm_ld_weight(struct lm_loader *ld, int flags, enum lm_tn tn, int il, int n_dims, const int64_t *ne);
struct lm_tensor *lm_ld_bias(struct lm_loader *ld, int flags, enum lm_tn tn, int il, int n_dims, const int64_t *ne);

/* The output matrix [n_embd, n_vocab]: "output.weight", or when the file has
 * none, the token embedding again (tied embeddings: the same tensor, marked
 * LM_LD_DUPLICATE, so it is placed and counted once). */
struct lm_tensor *lm_ld_output(struct lm_loader *ld, const struct lm_hparams *hp);

/* Expert weights of layer il: the merged 3-D tensor "<base>_exps.weight"
 * ([ne0, ne1, n_expert]) if the file has it, else n_expert split tensors
 * "<base>.<x>.weight" ([ne0, ne1] each) gathered into one 3-D tensor. */
struct lm_tensor *lm_ld_experts(struct lm_loader *ld, int64_t ne0, int64_t ne1, int64_t n_expert, enum lm_tn tn,
                                int il);

/* Record an error (first one wins) and return st. */
lm_status lm_ld_fail(struct lm_loader *ld, lm_status st, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
lm_status lm_ld_status(const struct lm_loader *ld);

/* Shorthands for the shapes used everywhere. */
#define LM_NE1(a) 1, (const int64_t[]){(a)}
#define LM_NE2(a, b) 2, (const int64_t[]){(a), (b)}
#define LM_NE3(a, b, c) 3, (const int64_t[]){(a), (b), (c)}

/* ---- declaring a model without a file (lamina mkmodel) ---- */

/* One tensor an architecture declares for the given hyperparameters. */
struct lm_decl_tensor {
    char name[LM_MAX_NAME];
    int n_dims;
    int64_t ne[4];
};

/* Run the architecture's tensor declaration (lm_arch_def.tensors) for the
 * metadata of g, which needs no tensors (lamina mkmodel writes its keys, then
 * asks which tensors they imply): the hyperparameters are read and checked as
 * a load reads them (into *hp), n_vocab is the length of
 * tokenizer.ggml.tokens, and the list holds every required tensor and each
 * optional one for which want(name, user) says yes (want NULL: none), in
 * declaration order. The tied output (lm_ld_output) is "output.weight" when
 * want says yes to it, else nothing. *out is malloc'd (the caller frees it).
 * LM_OK, or the error (message in err). */
lm_status lm_model_declare(struct lm_gguf *g, bool (*want)(const char *name, void *user), void *user,
                           struct lm_hparams *hp, struct lm_decl_tensor **out, int *n_out, char *err,
                           size_t err_size);

#endif
