/* memory.h - allocation of large buffers (weights, KV cache, compute buffers).
 *
 * Token generation streams every weight once per token, so translation misses
 * matter: with 4 KiB pages a 600 MiB matrix set spans 150k pages and the page
 * walks (costly under a hypervisor) cost a quarter of the read bandwidth on
 * the machines in docs/performance.md. Buffers of 2 MiB or more are therefore
 * aligned to 2 MiB and advised as transparent huge pages (Linux
 * MADV_HUGEPAGE; a no-op where the kernel does not offer them).
 * lm_alloc_set_huge_pages(false) turns that off (A/B runs); llama_backend_init
 * calls it once with LAMINA_HUGEPAGES (core/env.c).
 */
#ifndef LM_CORE_MEMORY_H
#define LM_CORE_MEMORY_H

#include <stdbool.h>
#include <stddef.h>

/* size bytes aligned to at least align (a power of two, <= 4096), or NULL;
 * release with free(). */
void *lm_alloc_large(size_t size, size_t align);

/* Whether lm_alloc_large aligns buffers of 2 MiB and more to 2 MiB and advises
 * huge pages (on until set); affects later calls. Thread-safe, but meant for
 * start-up. */
void lm_alloc_set_huge_pages(bool on);
/* The policy lm_alloc_set_huge_pages set (true by default). Thread-safe. */
bool lm_alloc_huge_pages(void);

#endif
