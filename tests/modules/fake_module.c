/* fake_module.c - stand-ins for a backend module (backend/module.h) that
 * test_modules loads: built as liblamina-cuda.so, one folder per kind
 * (FAKE_KIND, tests/CMakeLists.txt):
 *   1 a module of another lamina build (its ABI value differs);
 *   2 a module whose init finds no device;
 *   3 a shared library without the entry points;
 *   4 a module that registers one backend, "fake0": the CPU backend under
 *     another name (its init calls liblamina.so's exported lm_* functions).
 */
#include "backend/module.h"
#include "cpu/cpu.h"

#include <stdio.h>

#if FAKE_KIND == 1
__attribute__((visibility("default"))) uint64_t lamina_module_abi(void) { return lm_module_abi() ^ 1u; }
__attribute__((visibility("default"))) lm_status lamina_module_init(struct lm_module_info *out)
{
    out->name = "fake";
    return LM_OK; /* never called: the ABI check refuses the module first */
}
#elif FAKE_KIND == 2
static lm_status init_no_device(struct lm_module_info *out)
{
    out->name = "fake";
    snprintf(out->note, sizeof out->note, "fake: no device here");
    return LM_ERR_UNSUPPORTED;
}
LM_MODULE_ENTRY(init_no_device)
#elif FAKE_KIND == 3
__attribute__((visibility("default"))) int fake_not_a_module(void) { return 3; }
#else
static lm_status fake_backend_init(lm_backend_t *out) { return lm_cpu_backend_reg()->init(out); }
static const struct lm_backend_reg fake_reg = {.name = "fake0", .init = fake_backend_init, .kind = LM_DEV_HOST};
static lm_status init_fake(struct lm_module_info *out)
{
    out->name = "fake";
    out->regs[0] = &fake_reg;
    out->n_regs = 1;
    snprintf(out->note, sizeof out->note, "1 fake device");
    return LM_OK;
}
LM_MODULE_ENTRY(init_fake)
#endif
