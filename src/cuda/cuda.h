/* cuda.h - the CUDA backend (src/cuda/, built when nvcc is found: see
 * CMakeLists.txt's LAMINA_CUDA), as the rest of lamina sees it.
 *
 * Each visible NVIDIA GPU is one registry entry "cuda<i>" (kind LM_DEV_GPU)
 * with a device buffer type (the GPU's own memory: weights, KV cache,
 * compute buffers) and a backend that runs graphs on one stream of that
 * device. A pinned host buffer type (page-locked memory the GPUs copy from
 * asynchronously) is shared by all devices. With no driver or no GPU the
 * device count is 0 and nothing is registered. Plain C interface; the
 * implementation is C++ (cuda_backend.cu).
 */
#ifndef LM_CUDA_H
#define LM_CUDA_H

#include <stdbool.h>

#include "backend/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

#define LM_CUDA_MAX_DEVICES 8

/* GPUs the CUDA runtime sees (at most LM_CUDA_MAX_DEVICES); 0 when there is
 * no driver or no device. The first call asks the runtime; later calls
 * return the same number. Thread-safe after the first call. */
int lm_cuda_device_count(void);
/* "NVIDIA H200, 139 GiB, sm_90" style description of device i into buf. */
void lm_cuda_device_desc(int device, char *buf, size_t size);
/* The registry entry of device i (< lm_cuda_device_count()), or NULL. */
const struct lm_backend_reg *lm_cuda_backend_reg(int device);
/* Device memory of device i, or NULL for a device that does not exist. */
lm_buft lm_cuda_buft(int device);
/* Page-locked host memory (is_host: the CPU reads it directly). */
lm_buft lm_cuda_host_buft(void);
/* True if be is a CUDA backend. */
bool lm_backend_is_cuda(lm_backend_t be);

#ifdef __cplusplus
}
#endif

#endif
