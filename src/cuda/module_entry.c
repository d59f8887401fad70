/* module_entry.c - the two exported entry points of liblamina-cuda.so
 * (backend/module.h). Compiled into the module only: the static library and
 * the tool link the CUDA backend in and call lm_cuda_module_init directly. */
#include "backend/module.h"
#include "cuda/cuda.h"

LM_MODULE_ENTRY(lm_cuda_module_init)
