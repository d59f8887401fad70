/* vocab_internal.h - the vocab object and helpers shared by the files of
 * vocab/ only.
 *
 * Invariants of a built struct lm_vocab:
 *   - n_tokens > 0; tokens[i].text points into text_pool, NUL-terminated,
 *     tokens[i].len bytes (it may contain NULs);
 *   - tok_map maps every non-empty text to its id (the last id for texts
 *     that repeat); merge_map maps each merge string to its rank, and
 *     merge_split[rank] is the byte offset of its separating space;
 *   - every special id is -1 or in [0, n_tokens) (the infill ids excepted);
 *   - specials[] lists the ids that special=true partitioning matches,
 *     longest text first;
 *   - max_token_len is the longest tokens[i].len (WPM's match window).
 */
#ifndef LM_VOCAB_INTERNAL_H
#define LM_VOCAB_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vocab/regex.h"
#include "vocab/vocab.h"

/* ---- string -> int32 hash map (open addressing, keys not owned) ---- */
struct strmap_slot {
    const char *key; /* NULL: empty slot */
    uint32_t len;
    int32_t value;
};

struct strmap {
    struct strmap_slot *slots;
    uint32_t mask; /* capacity - 1 (capacity a power of two) */
};

/* Room for n keys at most 50% full. Returns false when out of memory. */
bool lm_vocab_strmap_init(struct strmap *m, size_t n);
void lm_vocab_strmap_free(struct strmap *m);
/* Insert or replace. The key must stay alive as long as the map. */
void lm_vocab_strmap_put(struct strmap *m, const char *key, uint32_t len, int32_t value);
/* The value, or -1. */
int32_t lm_vocab_strmap_get(const struct strmap *m, const char *key, size_t len);

/* ---- growable buffers ---- */
struct ivec {
    int32_t *data;
    size_t n, cap;
    bool oom; /* a push failed; the contents are incomplete */
};

void lm_vocab_ivec_push(struct ivec *v, int32_t x);

struct cbuf {
    char *data;
    size_t n, cap;
    bool oom;
};

void lm_vocab_cbuf_append(struct cbuf *b, const char *s, size_t n);

/* ---- error text ---- */

/* printf into err[err_size] (truncated); nothing when err is NULL or err_size 0. */
#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
void lm_vocab_seterr(char *err, size_t err_size, const char *fmt, ...);

/* ---- binary heap of fixed-size elements (heap.c) ---- */
struct heap {
    void *a; /* n elements of `size` bytes; room for cap */
    size_t n, cap, size;
    bool (*before)(const void *x, const void *y); /* x pops first; a strict order */
    bool oom;                                     /* a push failed (that element was dropped) */
};

/* An empty heap of elements of `size` bytes ordered by before. */
struct heap lm_vocab_heap_init(size_t size, bool (*before)(const void *x, const void *y));
/* Add a copy of *elem; on allocation failure set oom and drop it. */
void lm_vocab_heap_push(struct heap *h, const void *elem);
/* Remove the element that pops first into *out (h->n must be > 0). */
void lm_vocab_heap_pop(struct heap *h, void *out);
/* Free the array; the heap is empty (and reusable) afterwards. */
void lm_vocab_heap_free(struct heap *h);

/* ---- symbols of a word being merged (spm.c, bpe.c) ---- */
struct sym {
    int32_t prev, next; /* neighbours in the list; -1 at the ends */
    uint32_t off, n;    /* bytes of the text; n == 0: merged away */
};

/* Append symbol right (the next one of left) to symbol left and unlink it. */
static inline void lm_vocab_sym_merge(struct sym *syms, int32_t left, int32_t right)
{
    struct sym *l = &syms[left], *r = &syms[right];
    l->n += r->n;
    r->n = 0;
    l->next = r->next;
    if (r->next >= 0) {
        syms[r->next].prev = left;
    }
}

/* ---- the vocab ---- */
struct vocab_token {
    const char *text;
    uint32_t len;
    float score;
    int32_t type;
};

#define LM_VOCAB_MAX_PRE_REGEX 8

struct lm_vocab {
    enum lm_vocab_type type;
    int32_t n_tokens;
    struct vocab_token *tokens;
    char *text_pool;
    struct strmap tok_map;

    /* BPE merges */
    int32_t n_merges;
    char *merge_pool;
    struct strmap merge_map;
    uint32_t *merge_split;

    /* BPE pre-tokenizer: regexes applied one after another */
    const char *pre;
    struct lm_vocab_regex *pre_rx[LM_VOCAB_MAX_PRE_REGEX];
    int n_pre_rx;

    /* special-token partitioning */
    int32_t *specials;
    int32_t n_specials;

    int32_t byte_to_id[256]; /* SPM "<0xXX>" tokens, -1 when missing */

    uint32_t max_token_len; /* WPM: the longest token text in bytes (the match window) */

    int32_t bos, eos, unk, sep, pad, nl;
    int add_bos, add_eos;
    int32_t prefix, suffix, middle, eot;
};

/* "<0xXX>" (hex digits in either case) -> the byte, else -1. */
int lm_vocab_parse_byte_token(const char *s, size_t n);

/* Tokenize one raw-text fragment and append the ids. */
void lm_vocab_spm_tokenize(const struct lm_vocab *v, const char *text, size_t len, bool add_prefix, struct ivec *out);
void lm_vocab_bpe_tokenize(const struct lm_vocab *v, const char *text, size_t len, struct ivec *out);
void lm_vocab_wpm_tokenize(const struct lm_vocab *v, const char *text, size_t len, struct ivec *out);

/* Compile the regexes of a pre-tokenizer by name (NULL or "default": GPT-2).
 * An unknown name falls back to GPT-2 with a warning, as b1892 ignored the
 * key. Sets v->pre and v->pre_rx. */
lm_status lm_vocab_pretok_init(struct lm_vocab *v, const char *name, char *err, size_t err_size);

/* Split text[0..len) into pre-tokenized words: appends (start, end) byte
 * offsets pairs to out. */
void lm_vocab_pretok_split(const struct lm_vocab *v, const char *text, size_t len, struct ivec *out);

#endif
