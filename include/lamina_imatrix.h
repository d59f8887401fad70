/* lamina_imatrix.h - an importance matrix for llama_model_quantize (a lamina
 * extension of llama.h, which it leaves unchanged).
 *
 * In llama.cpp b1892, llama_model_quantize_params.imatrix points at the
 * quantize tool's internal C++ std::unordered_map, which a C library cannot
 * read. In lamina it is NULL or points at a struct lamina_imatrix_params that
 * names an imatrix file (llama.cpp's imatrix.dat format, as `lamina imatrix`
 * and llama.cpp's imatrix tool write it; docs/formats.md), or gives the
 * importance weights in memory (as later llama.cpp's llama_model_imatrix_data
 * array does). The library reads and checks them against the model being
 * quantized: a file that is malformed, or weights of another model (a name
 * that is not a tensor of the model, a tensor with another row length), make
 * llama_model_quantize fail (return 1, reason logged) before any output is
 * written.
 *
 *     struct lamina_imatrix_params im = LAMINA_IMATRIX_PARAMS_INIT;
 *     im.path = "imatrix.dat";
 *     llama_model_quantize_params qp = llama_model_quantize_default_params();
 *     qp.imatrix = &im;
 *
 * The struct begins with a magic number so that a pointer to anything else
 * (such as llama.cpp's map, from code written for b1892) is refused with a
 * message rather than misread. Valid C11 and C++11.
 */
#ifndef LAMINA_IMATRIX_H
#define LAMINA_IMATRIX_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* "LMIMTX01" read as a little-endian 64-bit integer: version 1 of the struct. */
#define LAMINA_IMATRIX_MAGIC 0x313058544d494d4cull

/* One tensor's importance weights, used as they are (no division by a call
 * count): size = the tensor's row length, every value finite and >= 0. */
struct lamina_imatrix_entry {
    const char *name; /* NULL ends an array of entries */
    const float *data;
    size_t size;
};

struct lamina_imatrix_params {
    uint64_t magic;                              /* LAMINA_IMATRIX_MAGIC */
    const char *path;                            /* an imatrix file ... */
    const struct lamina_imatrix_entry *entries;  /* ... or this array (exactly one of the two) */
    /* b1892 quantize's --include-weights / --exclude-weights: NULL, or a
     * NULL-terminated list of strings. With include, only entries whose names
     * contain one of them are used; then entries whose names contain one of
     * exclude are dropped. Tensors without an entry are quantized without
     * importance weights (IQ2_XXS, IQ2_XS and Q2_K_S then fail: they need
     * one). When no entry is left, quantizing goes on as without an imatrix. */
    const char *const *include_weights;
    const char *const *exclude_weights;
};

#define LAMINA_IMATRIX_PARAMS_INIT {LAMINA_IMATRIX_MAGIC, 0, 0, 0, 0}

#ifdef __cplusplus
}
#endif

#endif
