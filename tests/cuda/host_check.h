/* host_check.h - the failure counter and CHECK of the CUDA host tests
 * (tests/cuda/test_cuda_host_*.cu): CHECK(cond, printf-format, ...) counts
 * and prints a failure and goes on; main returns n_fail != 0. */
#ifndef LM_TEST_HOST_CHECK_H
#define LM_TEST_HOST_CHECK_H

#include <stdio.h>

static int n_fail;

#define CHECK(cond, ...)                                                                                              \
    do {                                                                                                              \
        if (!(cond)) {                                                                                                \
            n_fail++;                                                                                                 \
            printf("FAIL: ");                                                                                         \
            printf(__VA_ARGS__);                                                                                      \
            printf("\n");                                                                                             \
        }                                                                                                             \
    } while (0)

#endif
