/* local_host.c - a host that opens liblamina.so RTLD_LOCAL, as Ruby's and
 * Python's FFI do (ctest modules/local_host, with the stand-in libcuda.so.1
 * on LD_LIBRARY_PATH): a module (fake4, FAKE_DIR) still finds liblamina.so's
 * lm_* functions through its NEEDED entry, though none of them is in the
 * global scope, and registers its backend. Not linked against lamina. */
#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"

int main(void)
{
    setenv("LAMINA_MODULE_PATH", FAKE_DIR "/fake4", 1);
    void *h = dlopen(LM_BINARY_DIR "/liblamina.so", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "local_host: dlopen: %s\n", dlerror());
        return 1;
    }
    void (*backend_init)(bool) = (void (*)(bool))dlsym(h, "llama_backend_init");
    int (*reg_count)(void) = (int (*)(void))dlsym(h, "lm_backend_reg_count");
    const struct lm_backend_reg *(*reg_get)(int) =
        (const struct lm_backend_reg *(*)(int))dlsym(h, "lm_backend_reg_get");
    int fails = 0;
    fails += !backend_init || !reg_count || !reg_get;
    fails += dlsym(RTLD_DEFAULT, "lm_backend_reg_count") != NULL; /* really local */
    if (!fails) {
        backend_init(false);
        const int n = reg_count();
        fails += !(n == 3 && strcmp(reg_get(2)->name, "fake0") == 0);
        printf("local_host: %d backends, the last %s\n", n, n > 0 ? reg_get(n - 1)->name : "-");
    }
    printf("local_host: %s\n", fails ? "FAILED" : "passed");
    return fails != 0;
}
