/* gguf.h - GGUF files: a bounds-checked reader and a writer.
 *
 * Reader: lm_gguf_open() parses the header, the key/value table and the tensor
 * info table of a file (or of a memory image) and checks every count, length,
 * type, dimension and offset before use: a crafted file gets a status and a
 * message, never a crash, a hang or a huge allocation. Tensor data is not read;
 * lm_gguf_tensor_info() gives each tensor's absolute file offset and size,
 * already checked to lie inside the file. Versions 2 and 3 are read; version 1
 * (32-bit counts and lengths) is read too. Big-endian files are refused.
 *
 * Writer: collect key/values and tensors, then write a file in one pass.
 *
 * Thread-safety: a reader is immutable after open (concurrent reads are fine).
 */
#ifndef LM_GGUF_H
#define LM_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "core/type.h"

enum lm_gguf_type {
    LM_GGUF_UINT8 = 0,
    LM_GGUF_INT8 = 1,
    LM_GGUF_UINT16 = 2,
    LM_GGUF_INT16 = 3,
    LM_GGUF_UINT32 = 4,
    LM_GGUF_INT32 = 5,
    LM_GGUF_FLOAT32 = 6,
    LM_GGUF_BOOL = 7,
    LM_GGUF_STRING = 8,
    LM_GGUF_ARRAY = 9,
    LM_GGUF_UINT64 = 10,
    LM_GGUF_INT64 = 11,
    LM_GGUF_FLOAT64 = 12,
    LM_GGUF_TYPE_COUNT
};

#define LM_GGUF_DEFAULT_ALIGNMENT 32

struct lm_gguf;

struct lm_gguf_tensor_info {
    const char *name;      /* NUL-terminated, owned by the reader */
    int n_dims;            /* 1..4 */
    int64_t ne[4];         /* unused dims are 1 */
    enum lm_type type;
    uint64_t offset;       /* absolute file offset of the data (aligned) */
    uint64_t size;         /* bytes: lm_row_size(type, ne0) * ne1 * ne2 * ne3 */
};

/* Open and parse a file. On failure *out is untouched and, when err is not
 * NULL, a message (naming the field and the offset) is written to err. */
lm_status lm_gguf_open(const char *path, struct lm_gguf **out, char *err, size_t err_size);
/* The same over a memory image of a whole file (not copied: it must outlive
 * the reader only for lm_gguf_data(); metadata is copied). */
lm_status lm_gguf_open_memory(const void *data, size_t size, struct lm_gguf **out, char *err, size_t err_size);
void lm_gguf_close(struct lm_gguf *g); /* NULL: nothing */

uint32_t lm_gguf_version(const struct lm_gguf *g);
size_t lm_gguf_alignment(const struct lm_gguf *g);
uint64_t lm_gguf_file_size(const struct lm_gguf *g);
uint64_t lm_gguf_data_offset(const struct lm_gguf *g); /* start of the data section */
/* For lm_gguf_open_memory readers: the image; NULL for file readers. */
const void *lm_gguf_data(const struct lm_gguf *g);

/* ---- key/values ---- */
int64_t lm_gguf_n_kv(const struct lm_gguf *g);
int64_t lm_gguf_find_key(const struct lm_gguf *g, const char *key); /* -1 if absent */
const char *lm_gguf_key(const struct lm_gguf *g, int64_t i);
enum lm_gguf_type lm_gguf_kv_type(const struct lm_gguf *g, int64_t i);

/* Scalar getters: LM_ERR_INVALID_ARG if i is out of range, LM_ERR_CORRUPT if
 * the value has another type (no silent conversions, except that get_u32
 * and get_i32 accept any integer type whose value fits, and get_f32 accepts
 * FLOAT64 unless the value is finite and beyond float's range). Output written
 * only on success. */
lm_status lm_gguf_get_u8(const struct lm_gguf *g, int64_t i, uint8_t *out);
lm_status lm_gguf_get_i32(const struct lm_gguf *g, int64_t i, int32_t *out);
lm_status lm_gguf_get_u32(const struct lm_gguf *g, int64_t i, uint32_t *out);
lm_status lm_gguf_get_u64(const struct lm_gguf *g, int64_t i, uint64_t *out);
lm_status lm_gguf_get_f32(const struct lm_gguf *g, int64_t i, float *out);
lm_status lm_gguf_get_bool(const struct lm_gguf *g, int64_t i, bool *out);
/* String value: pointer (NUL-terminated, owned by the reader) and length. */
lm_status lm_gguf_get_str(const struct lm_gguf *g, int64_t i, const char **out, size_t *len);

/* Arrays. */
lm_status lm_gguf_get_arr_type(const struct lm_gguf *g, int64_t i, enum lm_gguf_type *out);
lm_status lm_gguf_get_arr_n(const struct lm_gguf *g, int64_t i, uint64_t *out);
/* Raw element data of a numeric/bool array (little-endian, packed). */
lm_status lm_gguf_get_arr_data(const struct lm_gguf *g, int64_t i, const void **out);
/* Element j of a string array. */
lm_status lm_gguf_get_arr_str(const struct lm_gguf *g, int64_t i, uint64_t j, const char **out, size_t *len);

/* Any value as text for display ("llama", "32000", "[1, 2, 3, ...]"); writes
 * at most buf_size bytes including the NUL; returns the full length (-1, and
 * an empty string, when i is out of range). Strings show with control bytes
 * escaped (\n, \xNN); array elements that are strings are also quoted; an
 * array shows its first 8 elements then ", ... N more". */
int lm_gguf_value_to_string(const struct lm_gguf *g, int64_t i, char *buf, size_t buf_size);

/* ---- tensors ---- */
int64_t lm_gguf_n_tensors(const struct lm_gguf *g);
int64_t lm_gguf_find_tensor(const struct lm_gguf *g, const char *name); /* -1 if absent */
const struct lm_gguf_tensor_info *lm_gguf_tensor_info(const struct lm_gguf *g, int64_t i);

/* ---- writer ---- */
struct lm_gguf_writer;

lm_status lm_gguf_writer_new(struct lm_gguf_writer **out);
void lm_gguf_writer_free(struct lm_gguf_writer *w);
/* Setting a key that exists replaces its value (keeping its position). */
lm_status lm_gguf_set_u32(struct lm_gguf_writer *w, const char *key, uint32_t v);
lm_status lm_gguf_set_i32(struct lm_gguf_writer *w, const char *key, int32_t v);
lm_status lm_gguf_set_u64(struct lm_gguf_writer *w, const char *key, uint64_t v);
lm_status lm_gguf_set_f32(struct lm_gguf_writer *w, const char *key, float v);
lm_status lm_gguf_set_bool(struct lm_gguf_writer *w, const char *key, bool v);
lm_status lm_gguf_set_str(struct lm_gguf_writer *w, const char *key, const char *v);
/* Numeric array of n elements of `type` (not STRING/ARRAY), copied. */
lm_status lm_gguf_set_arr_data(struct lm_gguf_writer *w, const char *key, enum lm_gguf_type type, const void *data,
                               uint64_t n);
lm_status lm_gguf_set_arr_str(struct lm_gguf_writer *w, const char *key, const char *const *strs, uint64_t n);
/* Copy key/value i of a reader (any type, arrays included). */
lm_status lm_gguf_copy_kv(struct lm_gguf_writer *w, const struct lm_gguf *g, int64_t i);
lm_status lm_gguf_remove_key(struct lm_gguf_writer *w, const char *key);
/* Add a tensor; its bytes are taken from `data` when the file is written (the
 * pointer must stay valid until then), or from `fill` when data is NULL. */
typedef lm_status (*lm_gguf_fill_fn)(void *user, int64_t tensor_index, void *dst, size_t size);
lm_status lm_gguf_add_tensor(struct lm_gguf_writer *w, const char *name, enum lm_type type, int n_dims,
                             const int64_t *ne, const void *data);
void lm_gguf_writer_set_fill(struct lm_gguf_writer *w, lm_gguf_fill_fn fill, void *user);
/* Write version 3, with general.alignment if set (else 32). */
lm_status lm_gguf_write_file(const struct lm_gguf_writer *w, const char *path);

#endif
