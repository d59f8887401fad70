/* ggml.h - lamina's ggml compatibility subset.
 *
 * llama.h of January 2024 (b1892) includes ggml.h for three things: the
 * tensor type enum (clients assign type_k/type_v), the opaque tensor struct
 * returned by llama_get_model_tensor, and the log callback type. This header
 * provides exactly those, so clients of llama.h compile unchanged. It is not
 * the ggml library: no other ggml function exists in lamina.
 */
#ifndef LAMINA_GGML_COMPAT_H
#define LAMINA_GGML_COMPAT_H

#ifdef __cplusplus
extern "C" {
#endif

/* Tensor element types. The values are the GGUF on-disk type ids. */
enum ggml_type {
    GGML_TYPE_F32 = 0,
    GGML_TYPE_F16 = 1,
    GGML_TYPE_Q4_0 = 2,
    GGML_TYPE_Q4_1 = 3,
    GGML_TYPE_Q5_0 = 6,
    GGML_TYPE_Q5_1 = 7,
    GGML_TYPE_Q8_0 = 8,
    GGML_TYPE_Q8_1 = 9,
    GGML_TYPE_Q2_K = 10,
    GGML_TYPE_Q3_K = 11,
    GGML_TYPE_Q4_K = 12,
    GGML_TYPE_Q5_K = 13,
    GGML_TYPE_Q6_K = 14,
    GGML_TYPE_Q8_K = 15,
    GGML_TYPE_IQ2_XXS = 16,
    GGML_TYPE_IQ2_XS = 17,
    GGML_TYPE_I8 = 24,
    GGML_TYPE_I16 = 25,
    GGML_TYPE_I32 = 26,
    GGML_TYPE_BF16 = 30,
    GGML_TYPE_COUNT = 31
};

/* Opaque: lamina's tensor. */
struct ggml_tensor;

enum ggml_log_level {
    GGML_LOG_LEVEL_ERROR = 2,
    GGML_LOG_LEVEL_WARN = 3,
    GGML_LOG_LEVEL_INFO = 4,
    GGML_LOG_LEVEL_DEBUG = 5
};

typedef void (*ggml_log_callback)(enum ggml_log_level level, const char *text, void *user_data);

#ifdef __cplusplus
}
#endif

#endif
