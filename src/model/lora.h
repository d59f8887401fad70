/* lora.h - merge a LoRA adapter (llama.cpp's 'ggla' file, version 1) into a
 * loaded model's weights: W += scale * (alpha / r) * (B x A).
 *
 * File format (little-endian, as convert-lora-to-ggml.py of llama.cpp b1892
 * writes it):
 *   u32 magic 0x67676c61 ('ggla'), u32 version 1, i32 r, i32 alpha,
 *   then tensors to the end of the file, each:
 *     i32 n_dims (1 or 2), i32 name_len, i32 type (0 F32, 1 F16),
 *     i32 ne[n_dims], name (name_len bytes, no NUL),
 *     padding to a multiple of 32 bytes from the start of the file,
 *     data: ne0 * ne1 elements, rows of ne0.
 *   Names are "<weight name>.loraA" with ne [r, W.ne0] and "<weight name>.loraB"
 *   with ne [r, W.ne1], so (B x A)[j][i] = sum_k A[i][k] * B[j][k] for row j
 *   (of W.ne0 elements) of W.
 */
#ifndef LM_LORA_H
#define LM_LORA_H

#include <stddef.h>

#include "model/model.h"

/* Apply the adapter at path_lora to m's weights. Every field of the file is
 * checked, and every pair is matched with a weight of the right shape and a
 * supported type, before any weight changes; a file that fails a check leaves
 * the model untouched. With path_base (may be NULL) the weights to which the
 * delta is added are read from that GGUF file (same names and shapes; any type
 * with a decoder) and the sum is stored in the model's type. Quantized weights
 * are decoded, added to and re-encoded row by row. n_threads <= 0 means 1.
 * Returns LM_OK, LM_ERR_IO (unreadable file), LM_ERR_CORRUPT (malformed
 * file), LM_ERR_NOT_FOUND (a tensor the model or base has not),
 * LM_ERR_SHAPE (shapes do not fit), LM_ERR_UNSUPPORTED (a weight type that
 * cannot be re-encoded) or LM_ERR_NOMEM, with a message in err. Not
 * thread-safe with contexts of m computing at the same time. */
lm_status lm_lora_apply(struct lm_model *m, const char *path_lora, float scale, const char *path_base, int n_threads,
                        char *err, size_t err_size);

#endif
