/* imatrix.h - importance matrices: what `lamina imatrix` collects from a
 * model's matrix products and `lamina quantize --imatrix` (through
 * llama_model_quantize) uses, and their file, llama.cpp's imatrix.dat of the
 * b1892 era (docs/formats.md, "Importance matrix files").
 *
 * For every weight W that a matrix product multiplies with activations x
 * (one row of x per token, x's row length = W's row length ne0), the
 * importance of column j is the sum over the rows of x[j]^2. A file entry
 * holds those sums for one tensor of the model file, the number of matrix
 * products ("calls") they were summed over, and the tensor's name; quantize
 * weighs column j of every row of W by sum_j / ncall.
 *
 * Mixture-of-experts weights (MUL_MAT_ID) are counted per expert: an expert's
 * sums only get the rows routed to it. A model file with split experts
 * (blk.N.ffn_up.X.weight, as in the b1892 era) gets one entry per expert;
 * one with merged experts (blk.N.ffn_up_exps.weight) gets one entry of
 * ne0 * n_expert values, as later llama.cpp writes it.
 *
 * Objects here are not thread-safe; use one from one thread at a time.
 */
#ifndef LM_IMATRIX_H
#define LM_IMATRIX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "core/tensor.h"
#include "gguf/gguf.h"

#define LM_IMATRIX_MAX_FILE (1ull << 30) /* bytes: larger files are refused */
#define LM_IMATRIX_MAX_ENTRIES (1 << 18) /* entries of a file: 512 layers x 64 experts x 3 fit */
#define LM_IMATRIX_MIN_TOKENS 16         /* products of fewer activation rows are not counted (b1892) */

/* ---- the entries and their file ---- */

struct lm_imatrix;

struct lm_imatrix_entry {
    const char *name;     /* a tensor name of the model file */
    int32_t ncall;        /* matrix products summed into values (>= 0) */
    int32_t n_values;     /* the tensor's ne0, or ne0 * n_expert for merged experts */
    const float *values;  /* sums of squared activations, finite and >= 0 */
};

/* An empty set (NULL on OOM). lm_imatrix_free(NULL) does nothing. */
struct lm_imatrix *lm_imatrix_new(void);
void lm_imatrix_free(struct lm_imatrix *im);

/* Append an entry (name and values copied). LM_ERR_INVALID_ARG for an empty
 * or too long name (LM_MAX_NAME - 1 bytes at most), a name already present,
 * n_values < 1, ncall < 0 or a value that is not finite and >= 0. */
lm_status lm_imatrix_add(struct lm_imatrix *im, const char *name, int32_t ncall, const float *values,
                         int32_t n_values);

int64_t lm_imatrix_n_entries(const struct lm_imatrix *im);
/* Entry i (file order) into *out; false when i is out of range. The
 * pointers stay valid until im changes or is freed. */
bool lm_imatrix_entry(const struct lm_imatrix *im, int64_t i, struct lm_imatrix_entry *out);
/* The index of the entry named name, or -1. */
int64_t lm_imatrix_find(const struct lm_imatrix *im, const char *name);

/* The fields later llama.cpp appends (chunks processed, dataset file name):
 * kept from a file that has them and written back; a set made here has none.
 * False when absent. *dataset is not NUL-terminated: *dataset_len bytes. */
bool lm_imatrix_trailer(const struct lm_imatrix *im, int32_t *n_chunks, const char **dataset, size_t *dataset_len);

/* Parse a whole file image / read a file. Every count, length and value is
 * checked (truncation, absurd counts, duplicate names, values that are not
 * finite and >= 0, bytes after the last field); on failure *out is untouched
 * and err (when not NULL) says what is wrong and where. LM_ERR_CORRUPT for a
 * malformed file, LM_ERR_IO when it cannot be read, LM_ERR_UNSUPPORTED above
 * LM_IMATRIX_MAX_FILE bytes. The caller frees *out. */
lm_status lm_imatrix_parse(const void *data, size_t size, struct lm_imatrix **out, char *err, size_t err_size);
lm_status lm_imatrix_read(const char *path, struct lm_imatrix **out, char *err, size_t err_size);

/* Write im to path in the b1892 format (plus the trailer when im has one):
 * written to "path.tmp" first and renamed, so a reader never sees half a
 * file. LM_ERR_INVALID_ARG for an empty set, LM_ERR_IO (err says why). */
lm_status lm_imatrix_write(const struct lm_imatrix *im, const char *path, char *err, size_t err_size);

/* Does im fit the model file g? Every entry must name a tensor of g and have
 * as many values as its rows (ne0), or ne0 * ne2 * ne3 for a tensor of
 * several matrices (merged experts). LM_ERR_NOT_FOUND / LM_ERR_SHAPE with a
 * message naming the first entry that does not (an imatrix of another model). */
lm_status lm_imatrix_check(const struct lm_imatrix *im, const struct lm_gguf *g, char *err, size_t err_size);

/* b1892 quantize's --include-weights / --exclude-weights: keep only entries
 * whose names contain one of include's strings (NULL-terminated list; NULL:
 * keep all), then drop those containing one of exclude's. */
void lm_imatrix_filter(struct lm_imatrix *im, const char *const *include, const char *const *exclude);

/* The importance weights quantize uses for tensor name: its values divided by
 * its ncall (as they are when ncall is 0), when the entry has exactly
 * n_per_row values; NULL otherwise (no entry, or merged experts, which
 * quantize copies). Valid until im changes or is freed. */
const float *lm_imatrix_weights(struct lm_imatrix *im, const char *name, int64_t n_per_row);
/* lm_imatrix_weights as quantize.h's lm_imatrix_fn (user: the lm_imatrix). */
const float *lm_imatrix_lookup(void *user, const char *tensor_name, int64_t n_per_row);

/* ---- collecting (imatrix_collect.c) ---- */

struct lm_model;
struct lm_imatrix_collector;

/* A collector for the weights of m (borrowed: it must outlive the
 * collector). Counted are matrix products whose first source is a weight
 * named blk.* (and output.weight with process_output), whose activations are
 * F32 and at least LM_IMATRIX_MIN_TOKENS rows: b1892's choice. Of a weight
 * cut into row slices (model/row_split.h) only the first slice's products
 * count (every slice sees the same activations). NULL on OOM. */
struct lm_imatrix_collector *lm_imatrix_collector_new(const struct lm_model *m, bool process_output);
void lm_imatrix_collector_free(struct lm_imatrix_collector *c);

/* The two halves of a scheduler observer (sched/sched.h; user: the
 * collector): want accepts the MUL_MAT / MUL_MAT_ID nodes described above,
 * observe adds their activations. observe returns LM_ERR_CORRUPT when an
 * activation or a sum is not finite (lm_imatrix_collector_error says where),
 * LM_ERR_NOMEM, or LM_ERR_IO when a tensor cannot be read. */
bool lm_imatrix_collector_want(const struct lm_tensor *node, void *user);
lm_status lm_imatrix_collector_observe(const struct lm_tensor *node, void *user);

/* The message of the last failed observe ("" if none). */
const char *lm_imatrix_collector_error(const struct lm_imatrix_collector *c);
/* The most calls any weight has had (b1892 saves by this count). */
int32_t lm_imatrix_collector_calls(const struct lm_imatrix_collector *c);

/* The entries collected so far, named as the model file names its tensors
 * (see the top of this file), in the order the weights were first seen.
 * Experts that no row reached are left out (a warning is logged), as a
 * merged-expert tensor with any such expert is. The caller frees *out. */
lm_status lm_imatrix_collector_result(const struct lm_imatrix_collector *c, struct lm_imatrix **out);

#endif
