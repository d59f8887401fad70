/* util_gguf.h - helpers shared by the gguf tests: temp paths and a byte
 * builder for hand-made (and deliberately broken) GGUF images. */
#ifndef LM_TEST_UTIL_GGUF_H
#define LM_TEST_UTIL_GGUF_H

#include <stddef.h>
#include <stdint.h>

/* A path in the build folder unique to this process and tag (static buffer). */
const char *gt_tmp_path(const char *tag);

/* Write n bytes to path; 0 on success. */
int gt_write_file(const char *path, const void *p, size_t n);

/* A growing little-endian byte image. Allocation failure aborts the test. */
struct gt_buf {
    uint8_t *p;
    size_t n, cap;
};
void gt_bytes(struct gt_buf *b, const void *p, size_t n);
void gt_u8(struct gt_buf *b, uint8_t v);
void gt_u32(struct gt_buf *b, uint32_t v);
void gt_u64(struct gt_buf *b, uint64_t v);
void gt_str(struct gt_buf *b, const char *s); /* u64 length + bytes */
void gt_pad(struct gt_buf *b, size_t align);  /* zeros up to a multiple of align */
/* Overwrite 4 or 8 bytes at offset off. */
void gt_put_u32(uint8_t *p, size_t off, uint32_t v);
void gt_put_u64(uint8_t *p, size_t off, uint64_t v);

#endif
