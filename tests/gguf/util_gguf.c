/* util_gguf.c - see util_gguf.h. */
#include "util_gguf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char *gt_tmp_path(const char *tag)
{
    static char buf[1024];
    snprintf(buf, sizeof buf, "%s/gguf_test_%ld_%s.gguf", LM_BINARY_DIR, (long)getpid(), tag);
    return buf;
}

int gt_write_file(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    size_t w = n ? fwrite(p, 1, n, f) : 0;
    return (fclose(f) == 0 && w == n) ? 0 : -1;
}

void gt_bytes(struct gt_buf *b, const void *p, size_t n)
{
    if (b->n + n > b->cap) {
        size_t nc = b->cap ? b->cap : 256;
        while (nc < b->n + n)
            nc *= 2;
        b->p = realloc(b->p, nc);
        if (!b->p) {
            fprintf(stderr, "gt_bytes: out of memory\n");
            abort();
        }
        b->cap = nc;
    }
    if (n)
        memcpy(b->p + b->n, p, n);
    b->n += n;
}

void gt_u8(struct gt_buf *b, uint8_t v) { gt_bytes(b, &v, 1); }

void gt_u32(struct gt_buf *b, uint32_t v)
{
    uint8_t t[4];
    gt_put_u32(t, 0, v);
    gt_bytes(b, t, 4);
}

void gt_u64(struct gt_buf *b, uint64_t v)
{
    uint8_t t[8];
    gt_put_u64(t, 0, v);
    gt_bytes(b, t, 8);
}

void gt_str(struct gt_buf *b, const char *s)
{
    gt_u64(b, strlen(s));
    gt_bytes(b, s, strlen(s));
}

void gt_pad(struct gt_buf *b, size_t align)
{
    while (b->n % align)
        gt_u8(b, 0);
}

void gt_put_u32(uint8_t *p, size_t off, uint32_t v)
{
    for (int k = 0; k < 4; k++)
        p[off + k] = (uint8_t)(v >> (8 * k));
}

void gt_put_u64(uint8_t *p, size_t off, uint64_t v)
{
    for (int k = 0; k < 8; k++)
        p[off + k] = (uint8_t)(v >> (8 * k));
}
