/* module.h - the contract between lamina and a backend module.
 *
 * A device backend (CUDA now; Vulkan, MPI as they come) is built twice: into
 * the static library and the `lamina` tool, where llama_backend_init calls its
 * init function directly, and as a module liblamina-<name>.so, which
 * liblamina.so loads at llama_backend_init when the file is there (api/
 * modules.c; docs/architecture.md "Backend modules"). A module links against
 * liblamina.so and uses its internal lm_* exports (src/api/exports.map: not a
 * stable interface), so a module only works with the liblamina.so of its own
 * build: lm_module_abi() below tells a mismatch apart before anything else
 * of the module is called.
 *
 * A module exports exactly two functions, by the names below:
 *   uint64_t  lamina_module_abi(void);                      its lm_module_abi()
 *   lm_status lamina_module_init(struct lm_module_info *);  see lm_module_init_fn
 * LM_MODULE_ENTRY(init) in the module's entry file defines both.
 */
#ifndef LM_BACKEND_MODULE_H
#define LM_BACKEND_MODULE_H

#include <stdint.h>

#include "backend/backend.h"
#include "core/type.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bump when the module contract changes in a way the sizes below miss. */
#define LM_MODULE_ABI_VERSION 1u
#define LM_MODULE_MAX_REGS 8
#define LM_MODULE_ABI_SYMBOL "lamina_module_abi"
#define LM_MODULE_INIT_SYMBOL "lamina_module_init"

/* What a module's init reports: its registry entries (one per device) or,
 * on failure, why it is not used. */
struct lm_module_info {
    const char *name; /* "cuda": the module's name (static string) */
    int n_regs;
    const struct lm_backend_reg *regs[LM_MODULE_MAX_REGS]; /* static; valid while the module is loaded */
    char note[160]; /* one line without a newline: the devices found, or why none */
};

/* A module's init: fills *out (zeroed by the caller) and returns LM_OK with
 * at least one reg, or an error (LM_ERR_UNSUPPORTED: no usable device; the
 * note says why). Called once, at start-up, not concurrently with itself. */
typedef lm_status (*lm_module_init_fn)(struct lm_module_info *out);
typedef uint64_t (*lm_module_abi_fn)(void);

/* The contract as both sides compiled it: the version and the sizes and
 * counts a module shares with lamina. Equal on both sides or the module is
 * refused. */
static inline uint64_t lm_module_abi(void)
{
    return ((uint64_t)LM_MODULE_ABI_VERSION << 56) ^ ((uint64_t)sizeof(struct lm_tensor) << 40) ^
           ((uint64_t)sizeof(struct lm_backend_reg) << 32) ^ ((uint64_t)sizeof(struct lm_backend_i) << 24) ^
           ((uint64_t)sizeof(struct lm_buffer_i) << 16) ^ ((uint64_t)LM_OP_COUNT << 8) ^ (uint64_t)LM_TYPE_COUNT;
}

/* The two exported entry points of a module whose init is `init`. */
#define LM_MODULE_ENTRY(init)                                                                                          \
    __attribute__((visibility("default"))) uint64_t lamina_module_abi(void) { return lm_module_abi(); }                \
    __attribute__((visibility("default"))) lm_status lamina_module_init(struct lm_module_info *out)                    \
    {                                                                                                                  \
        return init(out);                                                                                              \
    }

#ifdef __cplusplus
}
#endif

#endif
