/* replay_main.c - runs a fuzz function over a corpus without libFuzzer.
 *
 * Linked with each fuzz/fuzz_<name>.c into fuzz_<name>_replay (ctest case
 * fuzz/<name>_replay). Usage: fuzz_<name>_replay [DIR-or-FILE ...]; with no
 * argument the seed corpus fuzz/corpus/<name> (LM_FUZZ_CORPUS). Every regular
 * file is fed to LLVMFuzzerTestOneInput() once, as an exact-size copy so that
 * ASan sees reads past its end; a broken promise aborts. A target may also
 * define lm_fuzz_expect() (weak here): it is called after each input with the
 * file's base name and returns false when an outcome the name promises did
 * not happen (fuzz_gguf: "bad-*" must be refused, "v*" / "ok-*" must open).
 * Exit status 0 when at least one file ran and every expectation held.
 */
#include <dirent.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
bool lm_fuzz_expect(const char *base, const uint8_t *data, size_t size) __attribute__((weak));

static int n_wrong;

static void check_expectation(const char *path, const uint8_t *data, size_t n)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    if (lm_fuzz_expect && !lm_fuzz_expect(base, data, n))
        n_wrong++;
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
    const char *self = strrchr(argv[0], '/');
    printf("%s: %d inputs, %d unexpected outcomes\n", self ? self + 1 : argv[0], count, n_wrong);
    return count > 0 && n_wrong == 0 ? 0 : 1;
}
