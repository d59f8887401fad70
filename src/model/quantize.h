/* quantize.h - model quantization (llama_model_quantize, `lamina quantize`)
 * and the pieces `lamina mkmodel` reuses: the table of file types (also read
 * by the loader and llama_model_desc), the per-tensor type recipe and a
 * threaded row quantizer.
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

#define LM_QNT_VERSION 2u /* general.quantization_version written by quantize */

/* ---- file types ----
 * One table (quantize.c) has a row for every llama_ftype value lamina knows.
 * Everything about a file type is read from it: the names `lamina quantize`
 * and `lamina mkmodel --type` take (and the --help list, in table order),
 * llama_model_desc's name, the file type guessed for a file without
 * general.file_type (lm_ftype_guess), and which ones quantize can write. */

/* llama.h's enum llama_ftype: LM_FTYPE_X = LLAMA_FTYPE_MOSTLY_X (ALL_F32 and
 * GUESSED as named there; tests/model/test_ftype.c checks every value). */
enum lm_ftype {
    LM_FTYPE_ALL_F32 = 0,
    LM_FTYPE_F16 = 1,
    LM_FTYPE_Q4_0 = 2,
    LM_FTYPE_Q4_1 = 3,
    LM_FTYPE_Q4_1_SOME_F16 = 4,
    /* 5 and 6 were Q4_2 and Q4_3 */
    LM_FTYPE_Q8_0 = 7,
    LM_FTYPE_Q5_0 = 8,
    LM_FTYPE_Q5_1 = 9,
    LM_FTYPE_Q2_K = 10,
    LM_FTYPE_Q3_K_S = 11,
    LM_FTYPE_Q3_K_M = 12,
    LM_FTYPE_Q3_K_L = 13,
    LM_FTYPE_Q4_K_S = 14,
    LM_FTYPE_Q4_K_M = 15,
    LM_FTYPE_Q5_K_S = 16,
    LM_FTYPE_Q5_K_M = 17,
    LM_FTYPE_Q6_K = 18,
    LM_FTYPE_IQ2_XXS = 19,
    LM_FTYPE_IQ2_XS = 20,
    LM_FTYPE_Q2_K_S = 21,
    LM_FTYPE_Q3_K_XS = 22,
    LM_FTYPE_BF16 = 32,      /* a lamina extension: not in llama.h (b1892 has no BF16) */
    LM_FTYPE_GUESSED = 1024, /* or-ed into a file type guessed from the tensor types */
};

struct lm_ftype_info {
    uint32_t ftype;      /* LM_FTYPE_* */
    const char *name;    /* "Q4_K_M": the name `lamina quantize` and mkmodel take (as in LLAMA_FTYPE_MOSTLY_*) */
    const char *display; /* "Q4_K - Medium": llama_model_desc's (b1892's llama_model_ftype_name) */
    enum lm_type base;   /* the type most 2-D weights get */
    const char *note;    /* one line for --help; NULL: quantize cannot write this file type */
    bool plain;          /* the file type guessed from a file whose most common weight type is base; the
                          * name of that type (any case: "Q4_K") also parses as this file type */
    bool needs_imatrix;  /* quantize refuses it without an importance matrix for the tensors that get base,
                          * token_embd excepted (as b1892; IQ2 tensors need one in any file type) */
};

/* Row i of the table of file types (NULL past the end); --help lists the
 * rows with a note in this order. Thread-safe (static data). */
const struct lm_ftype_info *lm_ftype_info_at(int i);
/* The row of a file type, or NULL for a number lamina does not know. */
const struct lm_ftype_info *lm_ftype_info(uint32_t ftype);
/* The file type b1892 guesses for a file without general.file_type whose most
 * common weight type is t: the ftype of t's plain row, LM_FTYPE_ALL_F32 when
 * no row is plain for t. (The caller ors in LM_FTYPE_GUESSED if it wants it.) */
uint32_t lm_ftype_guess(enum lm_type t);
/* Parse a file type quantize can write: a row's name (any case), the name of
 * a type with a plain row (Q3_K, Q4_K, Q5_K: the _M variants) or the number.
 * False when unknown or not writable. */
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
