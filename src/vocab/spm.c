/* spm.c - the SentencePiece (BPE-by-score) tokenizer of llama.cpp b1892.
 *
 * One raw-text fragment at a time:
 *   1. escape: optionally prefix a space, then every ' ' becomes U+2581;
 *   2. split into symbols, one per UTF-8 character; a byte that is not part
 *      of a valid sequence is a symbol of its own (b1892 took the length
 *      from the lead byte alone, which could swallow the first byte of an
 *      escaped space after a broken sequence and corrupt the text);
 *   3. a max-heap holds every adjacent pair whose concatenation is a token,
 *      by the token's score (ties: the leftmost pair); pop the best pair,
 *      skip it if either side has changed since it was pushed, merge, and
 *      push the new pairs on both sides;
 *   4. each final symbol is its token, or else its bytes as <0xXX> tokens
 *      (byte fallback), or else one unknown token.
 * Cost: O(n log n) in the fragment's length; no quadratic step.
 */
#include <stdlib.h>
#include <string.h>

#include "vocab/unicode.h"
#include "vocab/vocab_internal.h"

struct bigram {
    float score;
    int32_t left, right;
    uint32_t size;
};

/* higher score first; ties: the leftmost pair */
static bool before(const void *vx, const void *vy)
{
    const struct bigram *x = vx, *y = vy;
    return x->score > y->score || (x->score == y->score && x->left < y->left);
}

struct spm_state {
    const struct lm_vocab *v;
    const char *text; /* escaped */
    struct sym *syms;
    struct heap heap;
};

static void try_add_bigram(struct spm_state *st, int32_t left, int32_t right)
{
    if (left < 0 || right < 0) {
        return;
    }
    const struct sym *l = &st->syms[left], *r = &st->syms[right];
    uint32_t size = l->n + r->n;
    int32_t id = lm_vocab_strmap_get(&st->v->tok_map, st->text + l->off, size);
    if (id < 0) {
        return;
    }
    struct bigram b = {.score = st->v->tokens[id].score, .left = left, .right = right, .size = size};
    lm_vocab_heap_push(&st->heap, &b);
}

static void emit_symbol(const struct lm_vocab *v, const char *s, uint32_t n, struct ivec *out)
{
    int32_t id = lm_vocab_strmap_get(&v->tok_map, s, n);
    if (id >= 0) {
        lm_vocab_ivec_push(out, id);
        return;
    }
    bool all_bytes = true;
    for (uint32_t i = 0; i < n; i++) {
        all_bytes = all_bytes && v->byte_to_id[(unsigned char)s[i]] >= 0;
    }
    if (all_bytes) {
        for (uint32_t i = 0; i < n; i++) {
            lm_vocab_ivec_push(out, v->byte_to_id[(unsigned char)s[i]]);
        }
    } else if (v->unk >= 0) {
        lm_vocab_ivec_push(out, v->unk);
    }
}

static void escape_text(const char *text, size_t len, bool add_prefix, struct cbuf *b)
{
    static const char space[] = "\xe2\x96\x81"; /* U+2581 */
    if (add_prefix) {
        lm_vocab_cbuf_append(b, space, 3);
    }
    size_t run = 0; /* copy runs of non-spaces at once */
    for (size_t i = 0; i < len; i++) {
        if (text[i] == ' ') {
            lm_vocab_cbuf_append(b, text + run, i - run);
            lm_vocab_cbuf_append(b, space, 3);
            run = i + 1;
        }
    }
    lm_vocab_cbuf_append(b, text + run, len - run);
}

void lm_vocab_spm_tokenize(const struct lm_vocab *v, const char *text, size_t len, bool add_prefix, struct ivec *out)
{
    struct cbuf esc = {0};
    escape_text(text, len, add_prefix, &esc);
    struct spm_state st = {.v = v, .text = esc.data, .heap = lm_vocab_heap_init(sizeof(struct bigram), before)};
    if (esc.oom || esc.n > (size_t)INT32_MAX) { /* symbol offsets are 32-bit */
        out->oom = true;
        goto out_free;
    }
    if (esc.n == 0) {
        goto out_free;
    }
    st.syms = malloc(esc.n * sizeof(*st.syms));
    if (!st.syms) {
        out->oom = true;
        goto out_free;
    }
    int32_t n_syms = 0;
    for (uint32_t off = 0; off < esc.n;) {
        uint32_t n = (uint32_t)lm_vocab_utf8_len(esc.data + off, esc.n - off);
        st.syms[n_syms] = (struct sym){.prev = n_syms - 1, .next = n_syms + 1, .off = off, .n = n};
        n_syms++;
        off += n;
    }
    st.syms[n_syms - 1].next = -1;

    for (int32_t i = 1; i < n_syms; i++) {
        try_add_bigram(&st, i - 1, i);
    }
    while (st.heap.n > 0) {
        struct bigram b;
        lm_vocab_heap_pop(&st.heap, &b);
        const struct sym *l = &st.syms[b.left], *r = &st.syms[b.right];
        if (l->n == 0 || r->n == 0 || l->n + r->n != b.size) {
            continue; /* stale: a side was merged since */
        }
        lm_vocab_sym_merge(st.syms, b.left, b.right);
        try_add_bigram(&st, l->prev, b.left);
        try_add_bigram(&st, b.left, l->next);
    }
    out->oom |= st.heap.oom;
    for (int32_t i = 0; i != -1; i = st.syms[i].next) {
        emit_symbol(v, esc.data + st.syms[i].off, st.syms[i].n, out);
    }

out_free:
    lm_vocab_heap_free(&st.heap);
    free(st.syms);
    free(esc.data);
}
