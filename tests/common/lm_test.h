/* lm_test.h - a tiny test harness: CHECK macros that count, and a summary.
 *
 * Each test program calls its cases, then returns lm_test_summary(), which
 * prints "N passed, N failed" and returns the exit code (0 when all passed).
 */
#ifndef LM_TEST_H
#define LM_TEST_H

#include <stdio.h>
#include <stdlib.h>

extern int lm_test_pass, lm_test_fail;

#define CHECK(cond)                                                                                               \
    do {                                                                                                          \
        if (cond) {                                                                                               \
            lm_test_pass++;                                                                                       \
        } else {                                                                                                  \
            lm_test_fail++;                                                                                       \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);                              \
        }                                                                                                         \
    } while (0)

#define CHECKF(cond, ...)                                                                                         \
    do {                                                                                                          \
        if (cond) {                                                                                               \
            lm_test_pass++;                                                                                       \
        } else {                                                                                                  \
            lm_test_fail++;                                                                                       \
            fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond);                              \
            fprintf(stderr, __VA_ARGS__);                                                                         \
            fputc('\n', stderr);                                                                                  \
        }                                                                                                         \
    } while (0)

/* Print the closing line and return the exit status. */
int lm_test_summary(void);

/* Read a whole file (for fixtures). Returns malloc'd bytes and the size, or
 * NULL. The caller frees. */
void *lm_test_read_file(const char *path, size_t *size);

/* Path of a file under ../shared (static buffer, overwritten by the next call). */
const char *lm_test_shared(const char *rel);

#endif
