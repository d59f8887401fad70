/* sha256.h - SHA-256 (FIPS 180-4) for tests that check bytes against the
 * hashes in fixture files. Portable C, no dependencies; not constant-time. */
#ifndef LM_TEST_SHA256_H
#define LM_TEST_SHA256_H

#include <stddef.h>
#include <stdint.h>

struct lm_sha256 {
    uint32_t h[8];
    uint64_t n_bytes;   /* bytes hashed so far */
    uint8_t buf[64];    /* pending partial block */
    size_t n_buf;
};

void lm_sha256_init(struct lm_sha256 *s);
void lm_sha256_update(struct lm_sha256 *s, const void *data, size_t n);
/* Finish and write the 32-byte digest; s must be re-initialized before reuse. */
void lm_sha256_final(struct lm_sha256 *s, uint8_t out[32]);
/* One-shot: the digest of data[0..n) as 64 lowercase hex digits plus NUL. */
void lm_sha256_hex(const void *data, size_t n, char hex[65]);
/* Hex of a digest (64 lowercase digits plus NUL). */
void lm_sha256_to_hex(const uint8_t digest[32], char hex[65]);

#endif
