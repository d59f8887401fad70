/* mapping.h - read-only file mappings for weights (mmap), and locking them in RAM. */
#ifndef LM_MAPPING_H
#define LM_MAPPING_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

struct lm_mapping {
    uint8_t *addr;
    size_t size;
    int locked;
};

/* Map the whole file copy-on-write (pages start shared with the page cache;
 * a write, e.g. a LoRA merge, copies the page). */
lm_status lm_mapping_open(const char *path, struct lm_mapping **out);
void lm_mapping_free(struct lm_mapping *m);
/* Lock [addr, addr+size) in RAM (mlock). LM_ERR_IO with errno logged on failure. */
lm_status lm_mapping_lock(struct lm_mapping *m);
/* Lock any memory range (a weights buffer read into RAM), and unlock it. */
lm_status lm_mem_lock(void *addr, size_t size);
void lm_mem_unlock(void *addr, size_t size);

#endif
