/* status.h - the status codes every fallible lamina function returns.
 *
 * A function that can fail for reasons outside the program (files, text,
 * requests, memory) returns lm_status and writes its results through trailing
 * OUT pointers only on success. LM_OK is 0 so `if (st) goto out;` reads well.
 */
#ifndef LM_STATUS_H
#define LM_STATUS_H

#ifdef __cplusplus
extern "C" { /* the CUDA backend (C++) calls these */
#endif

typedef enum lm_status {
    LM_OK = 0,
    LM_ERR_INVALID_ARG,   /* a caller passed an argument outside the contract */
    LM_ERR_CORRUPT,       /* untrusted input (file, text, request) is malformed */
    LM_ERR_IO,            /* open/read/write/mmap failed */
    LM_ERR_NOMEM,         /* an allocation failed or a size would overflow */
    LM_ERR_UNSUPPORTED,   /* well-formed but not supported (type, arch, op) */
    LM_ERR_SHAPE,         /* tensor shapes or types do not fit the op */
    LM_ERR_NOT_FOUND,     /* a named key, tensor or token does not exist */
    LM_ERR_FULL,          /* a fixed-capacity container (KV cache, arena) is full */
    LM_ERR_ABORTED,       /* a callback asked to stop */
    LM_ERR_DEVICE,        /* a device (GPU) call failed: a kernel launch, a copy */
    LM_STATUS_COUNT
} lm_status;

/* A static, human-readable name for a status code ("ok", "corrupt input", ...).
 * Never NULL; thread-safe. */
const char *lm_status_str(lm_status st);

#ifdef __cplusplus
}
#endif

#endif
