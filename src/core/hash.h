/* hash.h - FNV-1a over bytes, for the string hash tables of vocab/ and train/. */
#ifndef LM_HASH_H
#define LM_HASH_H

#include <stddef.h>
#include <stdint.h>

static inline uint32_t lm_fnv1a32(const char *s, size_t n)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 16777619u;
    }
    return h;
}

#endif
