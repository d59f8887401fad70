/* replay_main.c - runs the fuzz function over a corpus without libFuzzer.
 *
 * Usage: fuzz_gguf_replay [DIR-or-FILE ...]; with no argument the seed corpus
 * fuzz/corpus/gguf (LM_FUZZ_CORPUS). Every regular file is fed to
 * LLVMFuzzerTestOneInput() once; a broken promise aborts. Seed names carry
 * the expected outcome: "bad-*" must be refused by the reader, "v*" and "ok-*"
 * must open; other names (fuzzer finds) only must not crash. Exit status 0
 * when at least one file ran and every expectation held.
 */
#include <dirent.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "gguf/gguf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int n_wrong;

/* Check the outcome the file's name promises. */
static void check_expectation(const char *path, const uint8_t *data, size_t n)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    bool want_ok = base[0] == 'v' || !strncmp(base, "ok-", 3), want_bad = !strncmp(base, "bad-", 4);
    if (!want_ok && !want_bad)
        return;
    struct lm_gguf *g = NULL;
    char err[256] = "";
    lm_status st = lm_gguf_open_memory(data, n, &g, err, sizeof err);
    lm_gguf_close(g);
    if ((st == LM_OK) != want_ok) {
        fprintf(stderr, "fuzz_gguf_replay: %s: %s %s\n", base, lm_status_str(st), err);
        n_wrong++;
    }
}

static int run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return 0;
    uint8_t *buf = NULL;
    size_t n = 0, cap = 0, got;
    do {
        if (n == cap) {
            cap = cap ? cap * 2 : 4096;
            uint8_t *q = realloc(buf, cap);
            if (!q) {
                free(buf);
                fclose(f);
                return 0;
            }
            buf = q;
        }
        got = fread(buf + n, 1, cap - n, f);
        n += got;
    } while (got > 0);
    fclose(f);
    /* an exact-size copy, so ASan sees reads past the end of the input */
    uint8_t *exact = malloc(n ? n : 1);
    if (exact) {
        if (n)
            memcpy(exact, buf, n);
        LLVMFuzzerTestOneInput(exact, n);
        check_expectation(path, exact, n);
    }
    free(exact);
    free(buf);
    return exact != NULL;
}

static int run_path(const char *path)
{
    struct stat sb;
    if (stat(path, &sb) != 0)
        return 0;
    if (!S_ISDIR(sb.st_mode))
        return S_ISREG(sb.st_mode) ? run_file(path) : 0;
    DIR *d = opendir(path);
    int count = 0;
    if (!d)
        return 0;
    for (struct dirent *e; (e = readdir(d));) {
        char full[4096];
        if (e->d_name[0] == '.')
            continue;
        snprintf(full, sizeof full, "%s/%s", path, e->d_name);
        if (stat(full, &sb) == 0 && S_ISREG(sb.st_mode))
            count += run_file(full);
    }
    closedir(d);
    return count;
}

int main(int argc, char **argv)
{
    int count = 0;
    if (argc < 2)
        count = run_path(LM_FUZZ_CORPUS);
    for (int i = 1; i < argc; i++)
        count += run_path(argv[i]);
    printf("fuzz_gguf_replay: %d inputs, %d unexpected outcomes\n", count, n_wrong);
    return count > 0 && n_wrong == 0 ? 0 : 1;
}
