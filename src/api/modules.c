/* modules.c - llama_backend_init's device backends beyond cpu and ref: the
 * ones linked into this flavour (builtin/builtin.c) and, in liblamina.so, the
 * modules liblamina-<name>.so (backend/module.h).
 *
 * Where a module is looked for: the folders of LAMINA_MODULE_PATH (':'
 * between them; set but empty: nowhere) when it is set, else the folder of
 * the library holding this code (dladdr), then the install libdir. The first
 * file found is the one tried; nothing else is tried after it. A module is
 * dlopened RTLD_NOW | RTLD_LOCAL when its driver library opens, its ABI
 * checked, its init called; one that registers nothing is closed again
 * (unmapping the GPU libraries it pulled in), one that registers stays
 * loaded for the life of the process.
 * Workload: once per process, at start-up.
 */
#include "api/modules.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "core/env.h"
#include "core/log.h"

/* The modules liblamina.so knows: liblamina-<name>.so, tried only when the
 * driver library its runtime needs opens (on a machine without the driver
 * that costs a look-up in the ld.so cache instead of mapping and relocating
 * the module's runtime libraries: ~0.3 s and 150 MB for CUDA's). */
static const struct known_module {
    const char *name;
    const char *driver; /* NULL: none needed */
} known[] = {
    {"cuda", "libcuda.so.1"}, /* the name libcudart opens */
};

/* Register what init reports. handle: the module's (closed when nothing is
 * registered), NULL for a linked backend. what: the module's path or name.
 * Linked backends without a device are a debug line (a CPU machine running a
 * CUDA build of the tool), modules an info line. */
static void adopt(const char *what, lm_module_init_fn init, void *handle)
{
    struct lm_module_info info;
    memset(&info, 0, sizeof info);
    lm_status st = init(&info);
    info.note[sizeof info.note - 1] = 0;
    if (!st && (info.n_regs <= 0 || info.n_regs > LM_MODULE_MAX_REGS))
        st = LM_ERR_UNSUPPORTED;
    int n = 0;
    for (int i = 0; !st && i < info.n_regs; i++)
        n += lm_backend_register(info.regs[i]) == LM_OK;
    if (st || n == 0) {
        lm_log(handle ? LM_LOG_INFO : LM_LOG_DEBUG, "lamina: backend module %s not used: %s\n", what,
               info.note[0] ? info.note : lm_status_str(st ? st : LM_ERR_FULL));
        if (handle)
            dlclose(handle);
        return;
    }
    lm_log(handle ? LM_LOG_INFO : LM_LOG_DEBUG, "lamina: backend module %s: %s\n", what, info.note);
}

/* dlopen path (when km's driver opens), check it is a lamina module of this
 * build, adopt it. */
static void load_module(const char *path, const struct known_module *km)
{
    void *driver = km->driver ? dlopen(km->driver, RTLD_LAZY | RTLD_LOCAL) : NULL;
    if (km->driver && !driver) {
        LM_LOG_INF("lamina: backend module %s not loaded: no %s (no driver)\n", path, km->driver);
        return;
    }
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        LM_LOG_INF("lamina: backend module %s not loaded: %s\n", path, e ? e : "dlopen failed");
        goto out_driver;
    }
    /* POSIX: a dlsym result converts to a function pointer */
    lm_module_abi_fn abi = (lm_module_abi_fn)dlsym(h, LM_MODULE_ABI_SYMBOL);
    lm_module_init_fn init = (lm_module_init_fn)dlsym(h, LM_MODULE_INIT_SYMBOL);
    if (!abi || !init) {
        LM_LOG_WRN("lamina: %s is not a lamina backend module (no %s or %s): not used\n", path, LM_MODULE_ABI_SYMBOL,
                   LM_MODULE_INIT_SYMBOL);
        dlclose(h);
        goto out_driver;
    }
    const unsigned long long want = lm_module_abi(), got = abi();
    if (got != want) {
        LM_LOG_WRN("lamina: backend module %s is of another lamina build (module ABI %016llx, this library %016llx): "
                   "not used\n",
                   path, got, want);
        dlclose(h);
        goto out_driver;
    }
    adopt(path, init, h);
out_driver: /* a module in use holds the driver itself */
    if (driver)
        dlclose(driver);
}

/* The folder of the file holding this code into dir ("" when unknown). */
static void own_folder(char *dir, size_t size)
{
    Dl_info di;
    dir[0] = 0;
    if (!dladdr((const void *)&own_folder, &di) || !di.dli_fname || !di.dli_fname[0])
        return;
    const char *slash = strrchr(di.dli_fname, '/');
    if (!slash)
        snprintf(dir, size, ".");
    else if ((size_t)(slash - di.dli_fname) < size)
        snprintf(dir, size, "%.*s", (int)(slash - di.dli_fname), di.dli_fname);
}

/* Look for liblamina-<name>.so in the folders of list (':' between them)
 * and load the first one found. True when one was found. */
static bool find_in(const struct known_module *km, const char *list)
{
    const char *name = km->name;
    char path[PATH_MAX];
    for (const char *p = list; p && *p;) {
        const char *end = strchr(p, ':');
        const size_t len = end ? (size_t)(end - p) : strlen(p);
        struct stat sb;
        if (len > 0 && len < sizeof path - 32 &&
            snprintf(path, sizeof path, "%.*s/liblamina-%s.so", (int)len, p, name) < (int)sizeof path &&
            stat(path, &sb) == 0 && S_ISREG(sb.st_mode)) {
            load_module(path, km);
            return true;
        }
        p = end ? end + 1 : NULL;
    }
    return false;
}

static void load_known(const struct known_module *km, const struct lm_api_flavour *fl)
{
    const char *env = lm_env_path(LM_ENV_MODULE_PATH);
    if (env) {
        if (!find_in(km, env))
            LM_LOG_DBG("lamina: no liblamina-%s.so in LAMINA_MODULE_PATH \"%s\"\n", km->name, env);
        return;
    }
    char own[PATH_MAX];
    own_folder(own, sizeof own);
    if (find_in(km, own) || find_in(km, fl->libdir))
        return;
    LM_LOG_DBG("lamina: no liblamina-%s.so beside this library (%s) or in %s\n", km->name, own[0] ? own : "?",
               fl->libdir ? fl->libdir : "(no libdir)");
}

void lm_api_modules_init(void)
{
    static bool done;
    if (done)
        return;
    done = true;
    const struct lm_api_flavour *fl = lm_api_flavour();
    for (int i = 0; i < fl->n_linked; i++)
        adopt(fl->linked[i].name, fl->linked[i].init, NULL);
    if (!fl->load_modules)
        return;
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
        bool linked = false;
        for (int j = 0; j < fl->n_linked; j++)
            linked |= strcmp(fl->linked[j].name, known[i].name) == 0;
        if (!linked)
            load_known(&known[i], fl);
    }
}
