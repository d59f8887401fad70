/* lm_test.c - the harness behind lm_test.h. */
#include "lm_test.h"

#include <stdio.h>

int lm_test_pass, lm_test_fail;

int lm_test_summary(void)
{
    printf("%d passed, %d failed\n", lm_test_pass, lm_test_fail);
    return lm_test_fail ? 1 : 0;
}

void *lm_test_read_file(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    void *buf = malloc(n > 0 ? (size_t)n : 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (buf && size)
        *size = (size_t)n;
    return buf;
}

const char *lm_test_shared(const char *rel)
{
    static char buf[4096];
    snprintf(buf, sizeof buf, "%s/%s", LM_SHARED_DIR, rel);
    return buf;
}
