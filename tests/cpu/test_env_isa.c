/* test_env_isa.c - LAMINA_ISA end to end: the level a fresh process starts
 * at. The kernel tables read the switch once per process, so each value runs
 * in a child (this program again, with the variable set): unset, garbage, a
 * wrong case and every level's name. A name below the best level this build
 * and CPU have is the start level; anything else (unknown, or not below the
 * best) leaves the best. The child's exit status is its active level. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cpu/kernels/kernels.h"
#include "lm_test.h"

/* The active level of a child run with LAMINA_ISA=value (NULL: unset), or -1. */
static int child_level(const char *self, const char *value)
{
    pid_t pid = fork();
    if (pid == 0) {
        if (value)
            setenv("LAMINA_ISA", value, 1);
        else
            unsetenv("LAMINA_ISA");
        execl(self, self, "child", (char *)NULL);
        _exit(127);
    }
    int st = 0;
    if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) >= LM_ISA_COUNT)
        return -1;
    return WEXITSTATUS(st);
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "child") == 0)
        return (int)lm_cpu_kernels()->isa;
    const int best = (int)lm_cpu_isa_best();
    printf("best level: %s\n", lm_cpu_isa_name((enum lm_cpu_isa)best));
    static const char *const garbage[] = {NULL, "", "bogus", "AVX2", "avx2 ", "1", "avx-512"};
    for (size_t i = 0; i < sizeof garbage / sizeof garbage[0]; i++) {
        const int got = child_level("/proc/self/exe", garbage[i]);
        CHECKF(got == best, "LAMINA_ISA=%s: level %d, want the best %d", garbage[i] ? garbage[i] : "(unset)", got,
               best);
    }
    for (int lvl = 0; lvl < LM_ISA_COUNT; lvl++) {
        const char *name = lm_cpu_isa_name((enum lm_cpu_isa)lvl);
        const int got = child_level("/proc/self/exe", name);
        const int want = lvl < best ? lvl : best;
        CHECKF(got == want, "LAMINA_ISA=%s: level %d, want %d", name, got, want);
    }
    return lm_test_summary();
}
