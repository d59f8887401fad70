/* test_memory.c - lm_alloc_large (core/memory.h): NULL for 0 bytes and for
 * sizes that overflow the rounding, the requested alignment for small
 * buffers, 2 MiB alignment for buffers of 2 MiB and more (the huge-page
 * advice needs whole aligned pages), every byte writable (ASan checks the
 * bounds), and the same contract with lm_alloc_set_huge_pages(false) (what
 * LAMINA_HUGEPAGES=0 sets through llama_backend_init). Whether the kernel
 * really backs the buffer with huge pages depends on its settings, so that
 * is printed (AnonHugePages), not asserted. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/memory.h"
#include "lm_test.h"

#define MIB ((size_t)1 << 20)

static long anon_huge_kib(void)
{
    FILE *f = fopen("/proc/self/smaps_rollup", "r");
    char line[256];
    long kib = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "AnonHugePages: %ld kB", &kib) == 1)
            break;
    if (f)
        fclose(f);
    return kib;
}

static void check_contract(bool huge)
{
    CHECK(lm_alloc_large(0, 64) == NULL);
    CHECK(lm_alloc_large(SIZE_MAX - 10, 64) == NULL);
    if (huge) /* rounding up to 2 MiB overflows (plain mode would ask the allocator, which ASan aborts) */
        CHECK(lm_alloc_large(SIZE_MAX - MIB, 64) == NULL);
    static const size_t small[] = {1, 63, 64, 100, 4096, 2 * MIB - 1};
    for (size_t i = 0; i < sizeof small / sizeof small[0]; i++) {
        for (size_t align = 16; align <= 4096; align *= 4) {
            unsigned char *p = lm_alloc_large(small[i], align);
            CHECKF(p && (uintptr_t)p % align == 0, "size %zu align %zu: %p", small[i], align, (void *)p);
            if (p) {
                memset(p, 0xa5, small[i]);
                CHECK(p[small[i] - 1] == 0xa5);
            }
            free(p);
        }
    }
    static const size_t large[] = {2 * MIB, 2 * MIB + 1, 9 * MIB + 12345};
    for (size_t i = 0; i < sizeof large / sizeof large[0]; i++) {
        const long before = anon_huge_kib();
        unsigned char *p = lm_alloc_large(large[i], 64);
        CHECKF(p != NULL, "size %zu", large[i]);
        if (!p)
            continue;
        if (huge)
            CHECKF((uintptr_t)p % (2 * MIB) == 0, "size %zu: %p not 2 MiB aligned", large[i], (void *)p);
        else
            CHECK((uintptr_t)p % 64 == 0);
        memset(p, 0x5a, large[i]);
        CHECK(p[0] == 0x5a && p[large[i] - 1] == 0x5a);
        printf("%s %zu bytes: AnonHugePages %+ld kB\n", huge ? "advised" : "plain", large[i],
               anon_huge_kib() - before);
        free(p);
    }
}

int main(void)
{
    CHECK(lm_alloc_huge_pages());
    check_contract(true);
    setenv("LAMINA_HUGEPAGES", "0", 1); /* read by llama_backend_init only: no effect here */
    check_contract(true);
    unsetenv("LAMINA_HUGEPAGES");
    lm_alloc_set_huge_pages(false);
    CHECK(!lm_alloc_huge_pages());
    check_contract(false);
    lm_alloc_set_huge_pages(true);
    CHECK(lm_alloc_huge_pages());
    return lm_test_summary();
}
