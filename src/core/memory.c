/* memory.c - large buffers on huge pages where the system offers them. */
#include "core/memory.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif

#define HUGE_PAGE ((size_t)2 << 20)

static atomic_bool huge_pages = true; /* lm_alloc_set_huge_pages */

void lm_alloc_set_huge_pages(bool on) { atomic_store_explicit(&huge_pages, on, memory_order_relaxed); }

bool lm_alloc_huge_pages(void) { return atomic_load_explicit(&huge_pages, memory_order_relaxed); }

void *lm_alloc_large(size_t size, size_t align)
{
    if (size == 0)
        return NULL;
    if (size < HUGE_PAGE || !lm_alloc_huge_pages()) {
        const size_t rounded = (size + align - 1) & ~(align - 1);
        return rounded < size ? NULL : aligned_alloc(align, rounded);
    }
    const size_t rounded = (size + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1);
    if (rounded < size)
        return NULL;
    void *p = aligned_alloc(HUGE_PAGE, rounded);
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (p)
        (void)madvise(p, rounded, MADV_HUGEPAGE); /* advice only: failure leaves 4 KiB pages */
#endif
    return p;
}
