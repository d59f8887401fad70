/* memory.h - allocation of large buffers (weights, KV cache, compute buffers).
 *
 * Token generation streams every weight once per token, so translation misses
 * matter: with 4 KiB pages a 600 MiB matrix set spans 150k pages and the page
 * walks (costly under a hypervisor) cost a quarter of the read bandwidth on
 * the machines in docs/performance.md. Buffers of 2 MiB or more are therefore
 * aligned to 2 MiB and advised as transparent huge pages (Linux
 * MADV_HUGEPAGE; a no-op where the kernel does not offer them).
 * LAMINA_HUGEPAGES=0 in the environment turns the advice off (A/B runs).
 */
#ifndef LM_CORE_MEMORY_H
#define LM_CORE_MEMORY_H

#include <stddef.h>

/* size bytes aligned to at least align (a power of two, <= 4096), or NULL;
 * release with free(). */
void *lm_alloc_large(size_t size, size_t align);

#endif
