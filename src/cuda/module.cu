/* module.cu - the CUDA backend's module init (backend/module.h): what
 * llama_backend_init registers, from liblamina-cuda.so or linked in. */
#include <cuda_runtime.h>
#include <stdio.h>

#include "cuda/cuda.h"

extern "C" lm_status lm_cuda_module_init(struct lm_module_info *out)
{
    out->name = "cuda";
    int n_seen = 0;
    cudaError_t e = cudaGetDeviceCount(&n_seen);
    (void)cudaGetLastError();
    const int n = lm_cuda_device_count();
    if (n == 0) {
        snprintf(out->note, sizeof out->note, "no CUDA device (%s)",
                 e != cudaSuccess ? cudaGetErrorString(e) : "the runtime sees none");
        return LM_ERR_UNSUPPORTED;
    }
    out->n_regs = 0;
    for (int i = 0; i < n && i < LM_MODULE_MAX_REGS; i++)
        out->regs[out->n_regs++] = lm_cuda_backend_reg(i);
    char desc[96];
    lm_cuda_device_desc(0, desc, sizeof desc);
    snprintf(out->note, sizeof out->note, "%d CUDA device%s (cuda0: %s)", out->n_regs, out->n_regs > 1 ? "s" : "",
             desc);
    return LM_OK;
}
