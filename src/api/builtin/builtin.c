/* builtin.c - the flavour of a lamina build (api/modules.h), compiled once
 * per flavour (CMakeLists.txt):
 *  - lm_builtin (liblamina.a, the `lamina` tool, the tests): the CUDA backend
 *    linked in when it is built (LM_BUILTIN_CUDA), no modules loaded (a
 *    module needs liblamina.so's exports, which a static host lacks);
 *  - lm_builtin_shared (liblamina.so, LM_LOAD_MODULES): nothing linked in,
 *    liblamina-cuda.so loaded when it is there, so a process without a GPU
 *    maps no CUDA library. LM_MODULE_LIBDIR is the install libdir.
 */
#include <stddef.h>

#include "api/modules.h"
#ifdef LM_BUILTIN_CUDA
#include "cuda/cuda.h"
#endif

#ifndef LM_MODULE_LIBDIR
#define LM_MODULE_LIBDIR NULL
#endif

static const struct lm_linked_module linked[] = {
#ifdef LM_BUILTIN_CUDA
    {"cuda", lm_cuda_module_init},
#endif
    {NULL, NULL}, /* keeps the array non-empty */
};

static const struct lm_api_flavour flavour = {
    .linked = linked,
    .n_linked = (int)(sizeof linked / sizeof linked[0]) - 1,
#ifdef LM_LOAD_MODULES
    .load_modules = true,
#endif
    .libdir = LM_MODULE_LIBDIR,
};

const struct lm_api_flavour *lm_api_flavour(void) { return &flavour; }
