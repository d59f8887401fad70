/* mapping.c - mmap/mlock wrappers (POSIX). */
#include "model/mapping.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/log.h"

lm_status lm_mapping_open(const char *path, struct lm_mapping **out)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return LM_ERR_IO;
    struct stat st;
    lm_status status = LM_OK;
    void *addr = MAP_FAILED;
    if (fstat(fd, &st) != 0 || st.st_size <= 0) {
        status = LM_ERR_IO;
        goto out_close;
    }
    addr = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
    if (addr == MAP_FAILED) {
        LM_LOG_ERR("mmap of %s failed: %s\n", path, strerror(errno));
        status = LM_ERR_IO;
        goto out_close;
    }
    struct lm_mapping *m = calloc(1, sizeof *m);
    if (!m) {
        munmap(addr, (size_t)st.st_size);
        status = LM_ERR_NOMEM;
        goto out_close;
    }
    m->addr = addr;
    m->size = (size_t)st.st_size;
    *out = m;
out_close:
    close(fd);
    return status;
}

void lm_mapping_free(struct lm_mapping *m)
{
    if (!m)
        return;
    if (m->locked)
        munlock(m->addr, m->size);
    munmap(m->addr, m->size);
    free(m);
}

lm_status lm_mem_lock(void *addr, size_t size)
{
    if (mlock(addr, size) != 0) {
        LM_LOG_WRN("mlock of %zu bytes failed: %s (raise RLIMIT_MEMLOCK, e.g. ulimit -l)\n", size, strerror(errno));
        return LM_ERR_IO;
    }
    return LM_OK;
}

void lm_mem_unlock(void *addr, size_t size)
{
    if (addr && size)
        munlock(addr, size);
}

lm_status lm_mapping_lock(struct lm_mapping *m)
{
    lm_status st = lm_mem_lock(m->addr, m->size);
    if (!st)
        m->locked = 1;
    return st;
}
