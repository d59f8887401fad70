/* test_env_process.c - the process-wide LAMINA_* switches end to end: read at
 * the first llama_backend_init (api/model_api.c) and handed to their setters
 * once. Each value runs in a child (this program again, with the variable
 * set), whose exit status is what it saw after llama_backend_init:
 *   isa   the active kernel level. A LAMINA_ISA below the best level this
 *         build and CPU have is the start level; anything else (unknown, a
 *         wrong case, or not below the best) leaves the best.
 *   huge  lm_alloc_huge_pages(): LAMINA_HUGEPAGES=0 turns it off, anything
 *         else leaves it on.
 *   again the level and huge-page policy after the program's own setters and
 *         a second llama_backend_init with other values in the environment:
 *         the switches are not read again, so the program's choice stays.
 * And in this process: no switch is read before llama_backend_init (the
 * defaults hold while LAMINA_* are set). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/memory.h"
#include "cpu/kernels/kernels.h"
#include "llama.h"
#include "lm_test.h"

/* The exit status of a child run as `self mode` with name=value (NULL: unset), or -1. */
static int child(const char *self, const char *mode, const char *name, const char *value)
{
    pid_t pid = fork();
    if (pid == 0) {
        if (value)
            setenv(name, value, 1);
        else
            unsetenv(name);
        execl(self, self, mode, (char *)NULL);
        _exit(127);
    }
    int st = 0;
    if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) >= 100)
        return -1;
    return WEXITSTATUS(st);
}

static int child_main(const char *mode)
{
    llama_backend_init(false);
    if (strcmp(mode, "isa") == 0)
        return (int)lm_cpu_kernels()->isa;
    if (strcmp(mode, "huge") == 0)
        return lm_alloc_huge_pages() ? 1 : 0;
    /* again: the program's own choices, then another init with other values */
    lm_cpu_isa_limit(LM_ISA_GENERIC);
    lm_alloc_set_huge_pages(true);
    setenv("LAMINA_ISA", "amx", 1);
    setenv("LAMINA_HUGEPAGES", "0", 1);
    llama_backend_init(false);
    return (int)lm_cpu_kernels()->isa * 2 + (lm_alloc_huge_pages() ? 1 : 0);
}

int main(int argc, char **argv)
{
    if (argc == 2)
        return child_main(argv[1]);
    const char *self = "/proc/self/exe";
    const int best = (int)lm_cpu_isa_best();
    printf("best level: %s\n", lm_cpu_isa_name((enum lm_cpu_isa)best));
    static const char *const garbage[] = {NULL, "", "bogus", "AVX2", "avx2 ", "1", "avx-512"};
    for (size_t i = 0; i < sizeof garbage / sizeof garbage[0]; i++) {
        const int got = child(self, "isa", "LAMINA_ISA", garbage[i]);
        CHECKF(got == best, "LAMINA_ISA=%s: level %d, want the best %d", garbage[i] ? garbage[i] : "(unset)", got,
               best);
    }
    for (int lvl = 0; lvl < LM_ISA_COUNT; lvl++) {
        const char *name = lm_cpu_isa_name((enum lm_cpu_isa)lvl);
        const int got = child(self, "isa", "LAMINA_ISA", name);
        const int want = lvl < best ? lvl : best;
        CHECKF(got == want, "LAMINA_ISA=%s: level %d, want %d", name, got, want);
    }
    static const struct {
        const char *value;
        int want;
    } huge[] = {{NULL, 1}, {"0", 0}, {"1", 1}, {"00", 1}, {"off", 1}, {"", 1}};
    for (size_t i = 0; i < sizeof huge / sizeof huge[0]; i++) {
        const int got = child(self, "huge", "LAMINA_HUGEPAGES", huge[i].value);
        CHECKF(got == huge[i].want, "LAMINA_HUGEPAGES=%s: huge pages %d, want %d",
               huge[i].value ? huge[i].value : "(unset)", got, huge[i].want);
    }
    const int again = child(self, "again", "LAMINA_ISA", NULL);
    CHECKF(again == LM_ISA_GENERIC * 2 + 1, "second llama_backend_init: level %d, huge pages %d (want %d, 1)",
           again / 2, again % 2, LM_ISA_GENERIC);

    /* nothing reads the environment before llama_backend_init */
    setenv("LAMINA_HUGEPAGES", "0", 1);
    setenv("LAMINA_ISA", "generic", 1);
    CHECK(lm_alloc_huge_pages());
    CHECK(lm_cpu_kernels()->isa == lm_cpu_isa_best());
    unsetenv("LAMINA_HUGEPAGES");
    unsetenv("LAMINA_ISA");
    return lm_test_summary();
}
