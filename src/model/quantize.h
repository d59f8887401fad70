/* quantize.h - model quantization (llama_model_quantize, `lamina quantize`)
 * and the pieces `lamina mkmodel` reuses: the ftype names, the per-tensor
 * type recipe and a threaded row quantizer.
 *
 * The recipe is llama.cpp b1892's (llama_model_quantize_internal and
 * get_k_quant_type): which tensors are quantized, which type each gets for a
 * file type ("ftype", llama.h's enum llama_ftype), the attn_v / ffn_down
 * counters and the fallbacks for rows that are not a multiple of 256. The
 * rules are written out in docs/formats.md ("Quantizing a model").
 *
 * Results never depend on the thread count: every row is quantized on its own.
 */
#ifndef LM_QUANTIZE_H
#define LM_QUANTIZE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "core/type.h"

#define LM_FTYPE_GUESSED 1024u /* or-ed into a file type guessed from the tensor types */
#define LM_QNT_VERSION 2u      /* general.quantization_version written by quantize */

/* ---- file types ---- */

struct lm_ftype_info {
    const char *name;  /* "Q4_K_M": the name `lamina quantize` takes */
    uint32_t ftype;    /* llama_ftype value */
    enum lm_type base; /* the type most 2-D weights get */
    const char *desc;  /* one line for --help */
};

/* Row i of the table of file types quantize can write (NULL past the end).
 * Thread-safe (static data). */
const struct lm_ftype_info *lm_ftype_info_at(int i);
/* The row of a file type, or NULL when quantize cannot write it. */
const struct lm_ftype_info *lm_ftype_info(uint32_t ftype);
/* Parse a file type: a name of the table (any case), an alias (Q3_K, Q4_K,
 * Q5_K = the _M variants) or the number. False when unknown. */
bool lm_ftype_parse(const char *s, uint32_t *out);

/* ---- the per-tensor recipe (b1892's get_k_quant_type) ---- */

/* What the recipe needs to know about the model. */
struct lm_qmodel {
    char arch[32];      /* general.architecture */
    uint32_t n_layer;
    uint32_t n_head;
    uint32_t n_head_kv; /* = n_head when the file does not say */
    uint32_t n_expert;  /* 0 without experts */
};

struct lm_qrecipe {
    uint32_t ftype;
    enum lm_type base;
    bool pure;                   /* every quantized tensor gets `base` (rows not a multiple of 256 still fall back) */
    bool quantize_output_tensor; /* false: output.weight is copied */
    bool only_copy;              /* nothing is quantized */
    bool has_imatrix;            /* an importance matrix was given (changes one Q4_0/Q5_0 rule) */
    struct lm_qmodel model;
    /* counters, as b1892 keeps them */
    int n_attention_wv, n_ffn_down; /* set by lm_qrecipe_count over all tensor names */
    int i_attention_wv, i_ffn_down; /* advanced by lm_qrecipe_type in file order */
    int n_k_quantized, n_fallback;
};

/* Start a recipe for ftype (LM_ERR_UNSUPPORTED when quantize cannot write it;
 * with only_copy any ftype is accepted). */
lm_status lm_qrecipe_init(struct lm_qrecipe *r, uint32_t ftype, const struct lm_qmodel *model);
/* First pass: call once per tensor name of the file, in any order. */
void lm_qrecipe_count(struct lm_qrecipe *r, const char *name);
/* Second pass, in file order: the type tensor `name` (n_dims as ggml counts
 * them, trailing 1s dropped; ne0 = row length; src_type = its type now) gets
 * in the output. *quantize is set when its data must be (re)encoded, false
 * when it is copied. LM_ERR_SHAPE when its row length fits no type of the
 * recipe, LM_ERR_CORRUPT for a bad expert tensor name (msg gets why). */
lm_status lm_qrecipe_type(struct lm_qrecipe *r, const char *name, int n_dims, int64_t ne0, enum lm_type src_type,
                          enum lm_type *out, bool *quantize, char *msg, size_t msg_size);

/* ---- the row quantizer ---- */

/* Produce rows [first_row, first_row + n_rows) as floats into dst (row-major,
 * n_per_row floats each). Called from several threads at once with disjoint
 * row ranges; returns LM_OK or a status that stops the work. */
typedef lm_status (*lm_rows_fn)(void *user, int64_t first_row, int64_t n_rows, float *dst);

/* Encode n_rows rows of n_per_row values, produced by `rows`, as `type` into
 * dst (n_rows * lm_row_size(type, n_per_row) bytes), with nthread threads
 * (<= 0: one per core) claiming chunks of rows. imatrix: NULL or n_per_row
 * importance weights. Returns the first error of `rows`, LM_ERR_UNSUPPORTED
 * when the type cannot be encoded (or needs an imatrix that is missing),
 * LM_ERR_SHAPE when n_per_row is not a multiple of its block size. The bytes
 * are the same for every thread count. */
lm_status lm_quantize_rows(enum lm_type type, int64_t n_rows, int64_t n_per_row, lm_rows_fn rows, void *user,
                           const float *imatrix, void *dst, int nthread);

/* Number of online CPUs (at least 1). */
int lm_quantize_n_cpus(void);

/* ---- whole files ---- */

/* Importance weights of a tensor: NULL, or n_per_row floats that stay valid
 * during lm_quantize_model. Called from one thread. */
typedef const float *(*lm_imatrix_fn)(void *user, const char *tensor_name, int64_t n_per_row);

struct lm_quantize_params {
    uint32_t ftype;              /* target file type (llama_ftype) */
    int nthread;                 /* <= 0: one per core */
    bool allow_requantize;       /* allow re-encoding tensors that are already quantized */
    bool quantize_output_tensor; /* quantize output.weight (default true) */
    bool only_copy;              /* copy every tensor as is; file type = the input's */
    bool pure;                   /* no mixture: every quantized tensor gets the ftype's base type */
    lm_imatrix_fn imatrix;       /* NULL: no importance matrix */
    void *imatrix_user;
};

/* The defaults of llama_model_quantize_default_params (ftype Q5_1). */
struct lm_quantize_params lm_quantize_default_params(void);

/* Quantize the GGUF model at in into a new GGUF file at out, as b1892 does:
 * the input's key/values in input order with general.file_type set to the
 * ftype and general.quantization_version = 2 added, the tensors in input
 * order, alignment 32 (or the input's general.alignment). Every tensor's type
 * is decided (and every error found) before out is created; out is removed
 * if writing fails. On failure a message is written to err (when not NULL)
 * and nothing is logged at error level; progress is logged at info level.
 * Thread-safe (uses nthread threads itself). */
lm_status lm_quantize_model(const char *in, const char *out, const struct lm_quantize_params *p, char *err,
                            size_t err_size);

#endif
