/* heap.c - the binary min-heap the merge tokenizers (spm.c, bpe.c) pop their
 * best pair from: elements of any fixed size, ordered by a `before` function.
 *
 * Invariant: for every i > 0, before(a[i], a[(i - 1) / 2]) is false. Push and
 * pop move a hole instead of swapping, so each element is copied once per
 * level. Cost O(log n) each; the array doubles when full (64 elements first).
 * A heap belongs to one caller at a time (no locking); contracts in
 * vocab_internal.h.
 */
#include <stdlib.h>
#include <string.h>

#include "vocab/vocab_internal.h"

/* An empty heap (nothing allocated until the first push). */
struct heap lm_vocab_heap_init(size_t size, bool (*before)(const void *x, const void *y))
{
    return (struct heap){.size = size, .before = before};
}

/* Sift the new element up from the end; drops it (oom) if the array cannot grow. */
void lm_vocab_heap_push(struct heap *h, const void *elem)
{
    if (h->n == h->cap) {
        size_t nc = h->cap ? h->cap * 2 : 64;
        void *na = realloc(h->a, nc * h->size);
        if (!na) {
            h->oom = true;
            return;
        }
        h->a = na;
        h->cap = nc;
    }
    char *a = h->a;
    const size_t sz = h->size;
    size_t i = h->n++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!h->before(elem, a + p * sz)) {
            break;
        }
        memcpy(a + i * sz, a + p * sz, sz);
        i = p;
    }
    memcpy(a + i * sz, elem, sz);
}

/* Take the root, then sift the last element down from the root. */
void lm_vocab_heap_pop(struct heap *h, void *out)
{
    char *a = h->a;
    const size_t sz = h->size;
    memcpy(out, a, sz);
    /* the last element stays where it is (outside the heap now) until its slot is found */
    const char *last = a + --h->n * sz;
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->n) {
            break;
        }
        if (c + 1 < h->n && h->before(a + (c + 1) * sz, a + c * sz)) {
            c++;
        }
        if (!h->before(a + c * sz, last)) {
            break;
        }
        memcpy(a + i * sz, a + c * sz, sz);
        i = c;
    }
    if (h->n > 0) {
        memcpy(a + i * sz, last, sz);
    }
}

/* Free the array; the heap is empty afterwards. NULL array: nothing to do. */
void lm_vocab_heap_free(struct heap *h)
{
    free(h->a);
    h->a = NULL;
    h->n = h->cap = 0;
}
