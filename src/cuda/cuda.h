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
#include <stdint.h>

#include "backend/backend.h"
#include "backend/module.h"

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
/* The CUDA backend as a module (backend/module.h): one reg per visible GPU
 * into *out, or LM_ERR_UNSUPPORTED with the reason (no driver, no device) in
 * out->note. liblamina-cuda.so exports it as lamina_module_init; the static
 * library and the tool call it directly. Call once, at start-up. */
lm_status lm_cuda_module_init(struct lm_module_info *out);
/* True if be is a CUDA backend. */
bool lm_backend_is_cuda(lm_backend_t be);

/* Decode graphs run as CUDA graphs (docs/architecture.md, "The CUDA
 * backend"; off for backends created with lm_backend_opts.no_cuda_graphs:
 * a context's, while LAMINA_CUDA_GRAPHS=0), counted
 * over every CUDA backend of the process since it started. */
struct lm_cuda_graph_stats {
    uint64_t launched;     /* graph_compute calls that ran as one CUDA graph */
    uint64_t replayed;     /* of those, launches without a capture: the nodes matched the last capture's */
    uint64_t instantiated; /* executable graphs made; the other captures updated one (cudaGraphExecUpdate) */
    uint64_t fallbacks;    /* decode graphs launched node by node after a failed capture, instantiation or launch */
    uint64_t fused;        /* node pairs launched (or captured) as one kernel (core/fuse.h; none with no_fuse) */
};
/* The counts so far into *out (nothing when out is NULL). Thread-safe. */
void lm_cuda_graph_stats(struct lm_cuda_graph_stats *out);

#ifdef __cplusplus
}
#endif

#endif
