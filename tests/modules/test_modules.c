/* test_modules.c - backend modules as liblamina.so loads them (api/modules.c,
 * docs/architecture.md "Backend modules"). Linked against liblamina.so (not
 * the static libraries the other tests use); each case runs in a child
 * process of its own, since modules load once per process:
 *   - default search (beside liblamina.so: liblamina-cuda.so in a CUDA build):
 *     after a model load and a decode, no CUDA library (libcud*) is mapped
 *     unless a CUDA backend was registered: a machine without a GPU pays
 *     nothing for the CUDA build;
 *   - LAMINA_MODULE_PATH set but empty: no module looked for;
 *   - a module whose driver library (libcuda.so.1) does not open is not
 *     opened itself: a log line says so (where the driver opens, it loads).
 * With the argument "fakes" (ctest puts a stand-in libcuda.so.1 on
 * LD_LIBRARY_PATH, so the driver check passes):
 *   - LAMINA_MODULE_PATH at a folder whose liblamina-cuda.so is garbage bytes,
 *     a module of another build (ABI), one without the entry points, one
 *     finding no device: each is one log line naming it, nothing registered,
 *     and the CPU still decodes;
 *   - a module that registers a backend ("fake0", through liblamina.so's lm_*
 *     exports): it is in the registry after the CPU;
 *   - in a CUDA build, its liblamina-cuda.so without a GPU: its init's "no
 *     CUDA device" line, and no libcud* mapped after it is closed.
 * LAMINA_TEST_EXPECT_CUDA set (scripts/gpu-check.sh): the default search must
 * find a GPU through liblamina-cuda.so.
 * FAKE_DIR (compile-time) holds the fake modules' folders fake1..fake4
 * (fake_module.c).
 */
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend/backend.h"
#include "llama.h"
#include "lm_test.h"

static char log_text[1 << 16];
static size_t log_len;

static void capture(enum ggml_log_level level, const char *text, void *user)
{
    (void)level;
    (void)user;
    const size_t n = strlen(text);
    if (log_len + n < sizeof log_text) {
        memcpy(log_text + log_len, text, n);
        log_len += n;
        log_text[log_len] = 0;
    }
    if (getenv("LAMINA_TEST_VERBOSE"))
        fputs(text, stderr);
}

/* The line of the log containing needle, or NULL. */
static const char *log_line(const char *needle) { return strstr(log_text, needle); }

/* True when a mapped file's name contains "libcud" (libcudart, libcublas, libcuda). */
static bool cuda_mapped(void)
{
    FILE *f = fopen("/proc/self/maps", "r");
    char line[4096];
    bool found = false;
    while (f && fgets(line, sizeof line, f))
        found |= strstr(line, "/libcud") != NULL;
    if (f)
        fclose(f);
    return found;
}

static int reg_index(const char *prefix)
{
    for (int i = 0; i < lm_backend_reg_count(); i++)
        if (strncmp(lm_backend_reg_get(i)->name, prefix, strlen(prefix)) == 0)
            return i;
    return -1;
}

/* llama_backend_init, stories260K, one decode on the CPU with finite logits. */
static void init_and_decode(void)
{
    llama_log_set(capture, NULL);
    llama_backend_init(false);
    struct llama_model *m =
        llama_load_model_from_file(lm_test_shared("models/stories260K.gguf"), llama_model_default_params());
    CHECK(m != NULL);
    if (!m)
        return;
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 64;
    cp.n_threads = cp.n_threads_batch = 2;
    struct llama_context *ctx = llama_new_context_with_model(m, cp);
    CHECK(ctx != NULL);
    llama_token tok = 1;
    if (ctx) {
        CHECK(llama_decode(ctx, llama_batch_get_one(&tok, 1, 0, 0)) == 0);
        const float *lg = llama_get_logits(ctx);
        bool finite = true;
        for (int i = 0; i < llama_n_vocab(m); i++)
            finite &= isfinite(lg[i]) != 0;
        CHECK(finite);
        llama_free(ctx);
    }
    llama_free_model(m);
    CHECK(lm_backend_reg_count() >= 2 && strcmp(lm_backend_reg_get(0)->name, "cpu") == 0);
}

static void case_default(void)
{
    unsetenv("LAMINA_MODULE_PATH");
    init_and_decode();
    const bool mapped = cuda_mapped();
    const bool gpu = reg_index("cuda") >= 0;
    CHECKF(!mapped || gpu, "a CUDA library is mapped but no CUDA backend is registered:\n%s", log_text);
    if (getenv("LAMINA_TEST_EXPECT_CUDA")) /* scripts/gpu-check.sh: a GPU is there, found through the module */
        CHECKF(gpu && mapped, "no CUDA backend from liblamina-cuda.so:\n%s", log_text);
    printf("default search: %s, CUDA libraries %smapped\n", gpu ? "a CUDA backend" : "no CUDA backend",
           mapped ? "" : "not ");
}

/* LAMINA_MODULE_PATH=dir: the log names dir's module and says `want`; no
 * device backend is registered, no CUDA library mapped, the CPU decodes. */
static void case_broken(const char *dir, const char *want)
{
    setenv("LAMINA_MODULE_PATH", dir, 1);
    init_and_decode();
    const char *line = log_line(want);
    CHECKF(line != NULL, "%s: no \"%s\" in the log:\n%s", dir, want, log_text);
    CHECKF(log_line("liblamina-cuda.so") != NULL, "%s: the log does not name the module:\n%s", dir, log_text);
    CHECK(reg_index("cuda") < 0 && reg_index("fake") < 0);
    CHECK(!cuda_mapped());
}

static void case_garbage(void)
{
    char dir[] = "/tmp/lamina-modules-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char path[128];
    snprintf(path, sizeof path, "%s/liblamina-cuda.so", dir);
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (f) {
        fputs("not an ELF file, not a module\n", f);
        fclose(f);
    }
    case_broken(dir, "not loaded");
    unlink(path);
    rmdir(dir);
}

static void case_fake_ok(void)
{
    setenv("LAMINA_MODULE_PATH", "/nonexistent-folder:" FAKE_DIR "/fake4", 1);
    init_and_decode();
    const int i = reg_index("fake0");
    CHECKF(i >= 2, "fake0 at %d:\n%s", i, log_text); /* after cpu and ref */
    CHECK(log_line("1 fake device") != NULL);
    lm_backend_t be = NULL;
    CHECK(i >= 0 && lm_backend_init_by_name("fake0", &be) == LM_OK && be);
    lm_backend_free(be);
}

/* fake4 registers fake0 when libcuda.so.1 opens here, else the log says it does not. */
static void case_driver(void)
{
    void *driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
    setenv("LAMINA_MODULE_PATH", FAKE_DIR "/fake4", 1);
    init_and_decode();
    if (driver) {
        CHECKF(reg_index("fake0") >= 2, "libcuda.so.1 opens, yet no fake0:\n%s", log_text);
        dlclose(driver);
    } else {
        CHECKF(reg_index("fake0") < 0, "fake0 without libcuda.so.1");
        CHECKF(log_line("no libcuda.so.1") != NULL, "no log line about the driver:\n%s", log_text);
    }
}

static void case_empty_path(void)
{
    setenv("LAMINA_MODULE_PATH", "", 1);
    init_and_decode();
    CHECK(lm_backend_reg_count() == 2);
    CHECK(log_line("backend module") == NULL);
    CHECK(!cuda_mapped());
}

/* Run fn in a child process; a failed check there fails this case. */
static void in_child(const char *name, void (*fn)(void))
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        lm_test_fail = 0; /* this case's own failures only */
        fn();
        fflush(NULL);
        _exit(lm_test_fail ? 1 : 0);
    }
    int status = 0;
    CHECKF(pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0,
           "case %s failed (status %d)", name, status);
}

/* A CUDA build's own liblamina-cuda.so past the driver check (the stand-in
 * libcuda.so.1 has no driver in it): its init finds no device, says so, and
 * is closed with the CUDA libraries it mapped. */
static void case_real_module(void)
{
    if (access(LM_BINARY_DIR "/liblamina-cuda.so", F_OK) != 0) {
        printf("real module: not built (no CUDA in this build)\n");
        return;
    }
    setenv("LAMINA_MODULE_PATH", LM_BINARY_DIR, 1);
    init_and_decode();
    if (reg_index("cuda") >= 0) /* a driver after all */
        return;
    CHECKF(log_line("no CUDA device") != NULL, "the CUDA module's init failure is not logged:\n%s", log_text);
    CHECKF(!cuda_mapped(), "CUDA libraries mapped after the module found no device");
    printf("real module: no CUDA device, closed again\n");
}

static void case_abi(void) { case_broken(FAKE_DIR "/fake1", "another lamina build"); }
static void case_no_device(void) { case_broken(FAKE_DIR "/fake2", "fake: no device here"); }
static void case_no_entry(void) { case_broken(FAKE_DIR "/fake3", "not a lamina backend module"); }

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "fakes") == 0) {
        in_child("garbage", case_garbage);
        in_child("abi", case_abi);
        in_child("no_device", case_no_device);
        in_child("no_entry", case_no_entry);
        in_child("fake_ok", case_fake_ok);
        in_child("real_module", case_real_module);
    } else {
        in_child("default", case_default);
        in_child("empty_path", case_empty_path);
        in_child("driver", case_driver);
    }
    return lm_test_summary();
}
