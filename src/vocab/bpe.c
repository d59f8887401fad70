/* bpe.c - the byte-level BPE tokenizer (GPT-2 style) with merges by rank.
 *
 * One raw-text fragment at a time:
 *   1. the pre-tokenizer splits it into words (pretok.c);
 *   2. each word's bytes are written in GPT-2's byte alphabet (one code
 *      point per byte, unicode.c), one symbol per byte;
 *   3. a min-heap holds every adjacent pair that is a merge, by the merge's
 *      rank (ties: the leftmost pair); pop the best, skip it if a side has
 *      changed since it was pushed, merge, push the new neighbours' pairs;
 *   4. each final symbol is its token; a symbol that is not a token (only
 *      with inconsistent merges) falls back to one token per character,
 *      then to the unknown token, else it is dropped.
 * Cost: O(w log w) per word of w bytes.
 */
#include <stdlib.h>
#include <string.h>

#include "vocab/unicode.h"
#include "vocab/vocab_internal.h"

struct bigram {
    int32_t rank;
    int32_t left, right;
    uint32_t left_n, right_n; /* symbol sizes when pushed, to spot stale pairs */
};

/* lower rank first; ties: the leftmost pair */
static bool before(const void *vx, const void *vy)
{
    const struct bigram *x = vx, *y = vy;
    return x->rank < y->rank || (x->rank == y->rank && x->left < y->left);
}

/* Scratch reused across the words of one call. */
struct bpe_state {
    const struct lm_vocab *v;
    struct cbuf enc; /* the encoded word */
    struct cbuf key; /* "left right" for merge lookups */
    struct sym *syms;
    size_t cap_syms;
    struct heap heap;
    bool oom;
};

static int32_t merge_rank(struct bpe_state *st, const struct sym *l, const struct sym *r)
{
    st->key.n = 0;
    lm_vocab_cbuf_append(&st->key, st->enc.data + l->off, l->n);
    lm_vocab_cbuf_append(&st->key, " ", 1);
    lm_vocab_cbuf_append(&st->key, st->enc.data + r->off, r->n);
    if (st->key.oom) {
        st->oom = true;
        return -1;
    }
    int32_t rank = lm_vocab_strmap_get(&st->v->merge_map, st->key.data, st->key.n);
    if (rank < 0 || st->v->merge_split[rank] != l->n) {
        return -1;
    }
    return rank;
}

static void add_bigram(struct bpe_state *st, int32_t left, int32_t right)
{
    if (left < 0 || right < 0) {
        return;
    }
    const struct sym *l = &st->syms[left], *r = &st->syms[right];
    int32_t rank = merge_rank(st, l, r);
    if (rank >= 0) {
        struct bigram b = {.rank = rank, .left = left, .right = right, .left_n = l->n, .right_n = r->n};
        lm_vocab_heap_push(&st->heap, &b);
    }
}

static void emit_symbol(const struct lm_vocab *v, const char *s, uint32_t n, struct ivec *out)
{
    int32_t id = lm_vocab_strmap_get(&v->tok_map, s, n);
    if (id >= 0) {
        lm_vocab_ivec_push(out, id);
        return;
    }
    for (uint32_t i = 0; i < n;) {
        uint32_t l = (uint32_t)lm_vocab_utf8_len(s + i, n - i);
        id = lm_vocab_strmap_get(&v->tok_map, s + i, l);
        if (id < 0) {
            id = v->unk;
        }
        if (id >= 0) {
            lm_vocab_ivec_push(out, id);
        }
        i += l;
    }
}

static void bpe_word(struct bpe_state *st, const char *word, size_t len, struct ivec *out)
{
    st->enc.n = 0;
    st->heap.n = 0;
    if (len > (size_t)INT32_MAX / 2) { /* the encoded word needs 32-bit offsets */
        st->oom = true;
        return;
    }
    if (len > st->cap_syms) {
        free(st->syms);
        st->syms = malloc(len * sizeof(*st->syms));
        st->cap_syms = st->syms ? len : 0;
        if (!st->syms) {
            st->oom = true;
            return;
        }
    }
    for (size_t i = 0; i < len; i++) {
        char u[4];
        int ul = lm_vocab_utf8_encode(lm_vocab_byte_to_cp((uint8_t)word[i]), u);
        st->syms[i] =
            (struct sym){.prev = (int32_t)i - 1, .next = (int32_t)i + 1, .off = (uint32_t)st->enc.n, .n = (uint32_t)ul};
        lm_vocab_cbuf_append(&st->enc, u, (size_t)ul);
    }
    st->syms[len - 1].next = -1;
    if (st->enc.oom) {
        st->oom = true;
        return;
    }
    for (size_t i = 1; i < len; i++) {
        add_bigram(st, (int32_t)i - 1, (int32_t)i);
    }
    while (st->heap.n > 0) {
        struct bigram b;
        lm_vocab_heap_pop(&st->heap, &b);
        const struct sym *l = &st->syms[b.left], *r = &st->syms[b.right];
        if (l->n != b.left_n || r->n != b.right_n || l->next != b.right) {
            continue; /* stale */
        }
        lm_vocab_sym_merge(st->syms, b.left, b.right);
        add_bigram(st, l->prev, b.left);
        add_bigram(st, b.left, l->next);
    }
    st->oom |= st->heap.oom;
    for (int32_t i = 0; i != -1; i = st->syms[i].next) {
        emit_symbol(st->v, st->enc.data + st->syms[i].off, st->syms[i].n, out);
    }
}

void lm_vocab_bpe_tokenize(const struct lm_vocab *v, const char *text, size_t len, struct ivec *out)
{
    struct ivec words = {0};
    struct bpe_state st = {.v = v, .heap = lm_vocab_heap_init(sizeof(struct bigram), before)};
    lm_vocab_pretok_split(v, text, len, &words);
    if (words.oom) {
        out->oom = true;
        goto out_free;
    }
    for (size_t k = 0; k + 1 < words.n && !st.oom; k += 2) {
        size_t s = (size_t)words.data[k], e = (size_t)words.data[k + 1];
        if (e > s) {
            bpe_word(&st, text + s, e - s, out);
        }
    }
    out->oom |= st.oom;

out_free:
    free(words.data);
    free(st.enc.data);
    free(st.key.data);
    free(st.syms);
    lm_vocab_heap_free(&st.heap);
}
