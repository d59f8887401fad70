/* gguf_internal.h - the reader's in-memory form, shared by the files of gguf/.
 *
 * Invariants once lm_gguf_open*() has returned LM_OK: every kv has a valid
 * type; scalar values sit in `sc` (little-endian bytes of the on-disk value);
 * strings are NUL-terminated copies with their byte length; a numeric array's
 * elements are one packed malloc'd block of arr_n * elem_size bytes (non-NULL
 * even when empty); a string array is one blob of NUL-terminated strings with
 * arr_n + 1 offsets (string j = blob + offs[j], length offs[j+1] - offs[j] - 1).
 * The two name indexes are sorted by (length-aware) byte order and hold no
 * duplicates (a key the file repeats with an identical value is indexed once,
 * at its first position).
 */
#ifndef LM_GGUF_INTERNAL_H
#define LM_GGUF_INTERNAL_H

#include "gguf/gguf.h"

/* Limits on what one file may claim (beyond "fits in the file"), so a
 * corrupt count in a large, real file cannot make the reader allocate
 * gigabytes. They are far above anything llama.cpp writes. */
#define GGUF_MAX_NAME ((uint64_t)65535)          /* key or tensor name bytes */
#define GGUF_MAX_STR ((uint64_t)64 << 20)        /* one string value */
#define GGUF_MAX_ARR_BYTES ((uint64_t)1 << 30)   /* one numeric array */
#define GGUF_MAX_ARR_N ((uint64_t)1 << 28)       /* elements of a string array */

struct gguf_kv {
    char *key;
    size_t key_len;
    uint64_t key_off; /* file offset of the key, for messages */
    enum lm_gguf_type type;
    uint8_t sc[8];    /* scalar value bytes (little-endian) */
    char *str;        /* STRING value */
    size_t str_len;
    enum lm_gguf_type arr_type; /* ARRAY: element type */
    uint64_t arr_n;
    void *arr_data;   /* numeric array elements */
    char *arr_blob;   /* string array: the strings, each NUL-terminated */
    uint64_t *arr_offs; /* string array: arr_n + 1 offsets into arr_blob */
};

struct gguf_name_ref {
    const char *name;
    size_t len;
    int64_t idx;
};

struct lm_gguf {
    uint32_t version;
    size_t alignment;
    uint64_t file_size;
    uint64_t data_offset;
    const void *mem; /* memory image, or NULL for a file reader */
    int64_t n_kv;
    struct gguf_kv *kv;
    int64_t n_tensors;
    struct lm_gguf_tensor_info *ti;
    struct gguf_name_ref *kv_index;     /* n_kv_index entries sorted by name */
    int64_t n_kv_index;                 /* n_kv less repeated keys */
    struct gguf_name_ref *tensor_index; /* n_tensors entries sorted by name */
};

/* Bytes of one element of a scalar type; 0 for STRING, ARRAY and bad ids. */
size_t lm_gguf_type_size(enum lm_gguf_type t);

/* A name of a value type ("u32", "string", ...); "?" for bad ids. */
const char *lm_gguf_type_name(enum lm_gguf_type t);

/* Compare (a, alen) with (b, blen) as byte strings, shorter first on a tie
 * of the common prefix. */
int lm_gguf_name_cmp(const char *a, size_t alen, const char *b, size_t blen);

/* Index into a sorted name table, or -1. */
int64_t lm_gguf_index_find(const struct gguf_name_ref *idx, int64_t n, const char *name, size_t len);

#endif
