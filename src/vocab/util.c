/* util.c - the string hash map, growable buffers and error text of vocab/.
 *
 * The map is open addressing with linear probing, FNV-1a hashes, capacity a
 * power of two kept at most half full; it never grows after init (the
 * vocab knows its key count up front). Buffers record an allocation failure
 * in `oom` instead of failing each push, so callers check once at the end.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/hash.h"
#include "vocab/vocab_internal.h"


bool lm_vocab_strmap_init(struct strmap *m, size_t n)
{
    size_t cap = 16;
    while (cap < 2 * n + 1) {
        cap *= 2;
        if (cap > ((size_t)1 << 31)) {
            return false;
        }
    }
    m->slots = calloc(cap, sizeof(*m->slots));
    m->mask = (uint32_t)(cap - 1);
    return m->slots != NULL;
}

void lm_vocab_strmap_free(struct strmap *m)
{
    free(m->slots);
    m->slots = NULL;
    m->mask = 0;
}

void lm_vocab_strmap_put(struct strmap *m, const char *key, uint32_t len, int32_t value)
{
    uint32_t i = lm_fnv1a32(key, len) & m->mask;
    for (;;) {
        struct strmap_slot *s = &m->slots[i];
        if (!s->key) {
            s->key = key;
            s->len = len;
            s->value = value;
            return;
        }
        if (s->len == len && memcmp(s->key, key, len) == 0) {
            s->value = value;
            return;
        }
        i = (i + 1) & m->mask;
    }
}

int32_t lm_vocab_strmap_get(const struct strmap *m, const char *key, size_t len)
{
    if (!m->slots) {
        return -1;
    }
    uint32_t i = lm_fnv1a32(key, len) & m->mask;
    for (;;) {
        const struct strmap_slot *s = &m->slots[i];
        if (!s->key) {
            return -1;
        }
        if (s->len == len && memcmp(s->key, key, len) == 0) {
            return s->value;
        }
        i = (i + 1) & m->mask;
    }
}

void lm_vocab_ivec_push(struct ivec *v, int32_t x)
{
    if (v->n == v->cap) {
        size_t nc = v->cap ? v->cap * 2 : 64;
        int32_t *nd = realloc(v->data, nc * sizeof(*nd));
        if (!nd) {
            v->oom = true;
            return;
        }
        v->data = nd;
        v->cap = nc;
    }
    v->data[v->n++] = x;
}

void lm_vocab_cbuf_append(struct cbuf *b, const char *s, size_t n)
{
    if (n == 0) {
        return;
    }
    if (b->n + n > b->cap) {
        size_t nc = b->cap ? b->cap * 2 : 256;
        while (nc < b->n + n) {
            nc *= 2;
        }
        char *nd = realloc(b->data, nc);
        if (!nd) {
            b->oom = true;
            return;
        }
        b->data = nd;
        b->cap = nc;
    }
    memcpy(b->data + b->n, s, n);
    b->n += n;
}

/* Thread-safe (writes only err). */
void lm_vocab_seterr(char *err, size_t err_size, const char *fmt, ...)
{
    if (err && err_size) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, err_size, fmt, ap);
        va_end(ap);
    }
}
