/* grammar_sample.c - masking candidates with a grammar and accepting tokens
 * (llama_sample_grammar / llama_grammar_accept_token of b1892).
 *
 * A candidate survives when some stack can read all of its piece's complete code
 * points and, if the piece ends inside a UTF-8 sequence, some completion of that
 * sequence can match where the stack then stands. Candidates are checked in batches
 * as b1892 does: for each stack, the candidates whose next code point matches its
 * top move on together to the stacks after that character, so the stack expansion
 * is shared. Recursion depth is the number of code points of the longest piece; a
 * piece longer than the depth limit is checked alone by stepping the stack set.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sampling/grammar_impl.h"

#define MAX_BATCH_DEPTH 1024

size_t lm_grammar_decode_utf8(const char *s, size_t len, struct lm_partial_utf8 start, uint32_t *cps,
                              struct lm_partial_utf8 *end)
{
    static const int lookup[16] = {1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 2, 2, 3, 4};
    const unsigned char *b = (const unsigned char *)s;
    uint32_t value = start.value;
    int n_remain = start.n_remain;
    size_t i = 0, n = 0;

    /* finish the sequence left open by the previous piece */
    for (; i < len && b[i] != 0 && n_remain > 0; i++, n_remain--) {
        if ((b[i] >> 6) != 2) {
            *end = (struct lm_partial_utf8){0, -1};
            return 0;
        }
        value = (value << 6) + (b[i] & 0x3f);
    }
    if (start.n_remain > 0 && n_remain == 0)
        cps[n++] = value;

    /* the rest, which may itself end inside a sequence */
    while (i < len && b[i] != 0) {
        n_remain = lookup[b[i] >> 4] - 1;
        if (n_remain < 0) {
            *end = (struct lm_partial_utf8){0, n_remain};
            return 0;
        }
        value = b[i] & ((1u << (7 - n_remain)) - 1);
        for (i++; i < len && b[i] != 0 && n_remain > 0; i++, n_remain--)
            value = (value << 6) + (b[i] & 0x3f);
        if (n_remain == 0)
            cps[n++] = value;
    }
    *end = (struct lm_partial_utf8){value, n_remain};
    return n;
}

struct cand {
    size_t index;              /* position in the candidate array */
    size_t off;                /* first code point in cps */
    size_t n;                  /* code points up to the first 0 (b1892 stops there) */
    struct lm_partial_utf8 pu; /* partial sequence at the end of the piece */
};

struct reject_ctx {
    const struct lm_grammar *g;
    const struct cand *cands;
    const uint32_t *cps;
    bool *accepted;
    size_t max_depth;
    struct lm_grammar_scratch sc;
};

/* does a stack set, after `depth` code points of c, take the rest of c? */
static lm_status check_one(struct reject_ctx *x, const struct lm_stackset *stacks, const struct cand *c, size_t depth,
                           bool *ok)
{
    struct lm_stackset cur, next = {0};
    lm_status st = lm_stackset_copy(&cur, stacks);
    for (size_t d = depth; st == LM_OK && d < c->n && cur.n > 0; d++) {
        st = lm_grammar_step(x->g, &cur, x->cps[c->off + d], &next, &x->sc);
        lm_stackset_free(&cur);
        cur = next;
        memset(&next, 0, sizeof next);
    }
    *ok = false;
    for (size_t i = 0; st == LM_OK && i < cur.n && !*ok; i++) {
        const struct lm_stack_span sp = cur.st[i];
        if (sp.len == 0)
            *ok = c->pu.n_remain == 0;
        else
            *ok = c->pu.n_remain == 0 || lm_grammar_match_partial(x->g, cur.pool[sp.off + sp.len - 1], c->pu);
    }
    lm_stackset_free(&cur);
    lm_stackset_free(&next);
    return st;
}

static lm_status accept_set(struct reject_ctx *x, const struct lm_stackset *stacks, const uint32_t *list, size_t n,
                            size_t depth);

/* llama_grammar_reject_candidates_for_stack, marking survivors instead of rejects */
static lm_status accept_stack(struct reject_ctx *x, const uint32_t *stack, size_t len, const uint32_t *list, size_t n,
                              size_t depth)
{
    if (len == 0) { /* complete: only a token that is also complete fits */
        for (size_t i = 0; i < n; i++) {
            const struct cand *c = &x->cands[list[i]];
            if (depth >= c->n && c->pu.n_remain == 0)
                x->accepted[list[i]] = true;
        }
        return LM_OK;
    }
    const uint32_t top = stack[len - 1];
    uint32_t *next = malloc(n * sizeof *next);
    uint32_t *after = malloc((len + 1) * sizeof *after);
    struct lm_stackset next_stacks = {0};
    lm_status st = next && after ? LM_OK : LM_ERR_NOMEM;
    size_t m = 0;
    for (size_t i = 0; st == LM_OK && i < n; i++) {
        const struct cand *c = &x->cands[list[i]];
        uint32_t unused;
        if (x->accepted[list[i]])
            continue;
        if (depth >= c->n) {
            if (c->pu.n_remain == 0 || lm_grammar_match_partial(x->g, top, c->pu))
                x->accepted[list[i]] = true;
        } else if (lm_grammar_match_char(x->g, top, x->cps[c->off + depth], &unused)) {
            next[m++] = list[i];
        }
    }
    if (st == LM_OK && m > 0) {
        uint32_t pos_after;
        lm_grammar_match_char(x->g, top, 0, &pos_after);
        size_t k = len - 1;
        memcpy(after, stack, k * sizeof *after);
        const enum lm_gretype t = x->g->elems[pos_after].type;
        if (t != LM_GRETYPE_END && t != LM_GRETYPE_ALT)
            after[k++] = pos_after;
        st = lm_grammar_advance(x->g, after, k, &next_stacks, &x->sc);
        if (st == LM_OK)
            st = accept_set(x, &next_stacks, next, m, depth + 1);
    }
    lm_stackset_free(&next_stacks);
    free(next);
    free(after);
    return st;
}

/* llama_grammar_reject_candidates: a candidate survives if any stack takes it */
static lm_status accept_set(struct reject_ctx *x, const struct lm_stackset *stacks, const uint32_t *list, size_t n,
                            size_t depth)
{
    lm_status st = LM_OK;
    if (depth >= x->max_depth) {
        for (size_t i = 0; i < n && st == LM_OK; i++)
            if (!x->accepted[list[i]])
                st = check_one(x, stacks, &x->cands[list[i]], depth, &x->accepted[list[i]]);
        return st;
    }
    for (size_t s = 0; s < stacks->n && st == LM_OK; s++) {
        const struct lm_stack_span sp = stacks->st[s];
        st = accept_stack(x, stacks->pool + sp.off, sp.len, list, n, depth);
    }
    return st;
}

/* decode every candidate's piece; masks EOS and empty pieces directly */
static lm_status collect(const struct lm_grammar *g, struct lm_token_data_array *c,
                         const struct lm_grammar_vocab *v, struct cand *cands, size_t *n_cands, uint32_t **cps)
{
    const bool allow_eos = lm_grammar_is_complete(g);
    size_t cap = 0, used = 0, n = 0;
    for (size_t i = 0; i < c->size; i++) {
        const int32_t id = c->data[i].id;
        if (id == v->eos) {
            if (!allow_eos)
                c->data[i].logit = -INFINITY;
            continue;
        }
        size_t len = 0;
        const char *piece = v->piece(v->user, id, &len);
        if (!piece || len == 0 || piece[0] == 0) {
            c->data[i].logit = -INFINITY;
            continue;
        }
        /* at least 4096 code points from the start: most vocabularies need that many */
        if (lm_grammar_grow((void **)cps, &cap, used + len + 1 < 4096 ? 4096 : used + len + 1, sizeof **cps))
            return LM_ERR_NOMEM;
        struct cand *k = &cands[n++];
        k->index = i;
        k->off = used;
        const size_t got = lm_grammar_decode_utf8(piece, len, g->partial, *cps + used, &k->pu);
        k->n = 0;
        while (k->n < got && (*cps)[used + k->n] != 0)
            k->n++;
        used += got;
    }
    *n_cands = n;
    return LM_OK;
}

lm_status lm_grammar_sample_depth(const struct lm_grammar *g, struct lm_token_data_array *c,
                                  const struct lm_grammar_vocab *vocab, size_t max_depth)
{
    if (!g || !c || !vocab || !vocab->piece || (!c->data && c->size))
        return LM_ERR_INVALID_ARG;
    if (c->size == 0)
        return LM_OK;
    struct cand *cands = malloc(c->size * sizeof *cands);
    uint32_t *list = malloc(c->size * sizeof *list);
    bool *accepted = calloc(c->size, sizeof *accepted);
    uint32_t *cps = NULL;
    size_t n = 0;
    lm_status st = cands && list && accepted ? collect(g, c, vocab, cands, &n, &cps) : LM_ERR_NOMEM;
    if (st == LM_OK && n > 0) {
        struct reject_ctx x = {.g = g, .cands = cands, .cps = cps, .accepted = accepted, .max_depth = max_depth};
        for (size_t i = 0; i < n; i++)
            list[i] = (uint32_t)i;
        st = accept_set(&x, &g->stacks, list, n, 0);
        lm_grammar_scratch_free(&x.sc);
        for (size_t i = 0; st == LM_OK && i < n; i++)
            if (!accepted[i])
                c->data[cands[i].index].logit = -INFINITY;
    }
    free(cands);
    free(list);
    free(accepted);
    free(cps);
    return st;
}

lm_status lm_grammar_sample(const struct lm_grammar *g, struct lm_token_data_array *c,
                            const struct lm_grammar_vocab *vocab)
{
    return lm_grammar_sample_depth(g, c, vocab, MAX_BATCH_DEPTH);
}

lm_status lm_grammar_accept_bytes(struct lm_grammar *g, const char *text, size_t len)
{
    if (!g || (!text && len))
        return LM_ERR_INVALID_ARG;
    uint32_t *cps = malloc((len + 1) * sizeof *cps);
    if (!cps)
        return LM_ERR_NOMEM;
    struct lm_partial_utf8 end;
    const size_t n = lm_grammar_decode_utf8(text, len, g->partial, cps, &end);
    struct lm_grammar_scratch sc = {0};
    struct lm_stackset cur, next = {0};
    lm_status st = lm_stackset_copy(&cur, &g->stacks);
    for (size_t i = 0; st == LM_OK && i < n; i++) {
        st = lm_grammar_step(g, &cur, cps[i], &next, &sc);
        lm_stackset_free(&cur);
        cur = next;
        memset(&next, 0, sizeof next);
        if (st == LM_OK && cur.n == 0)
            st = LM_ERR_INVALID_ARG; /* the grammar cannot take this text */
    }
    if (st == LM_OK) {
        lm_stackset_free(&g->stacks);
        g->stacks = cur;
        g->partial = end;
    } else {
        lm_stackset_free(&cur);
    }
    lm_stackset_free(&next);
    lm_grammar_scratch_free(&sc);
    free(cps);
    return st;
}

lm_status lm_grammar_accept_token(struct lm_grammar *g, int32_t token, const struct lm_grammar_vocab *vocab)
{
    if (!g || !vocab || !vocab->piece)
        return LM_ERR_INVALID_ARG;
    if (token == vocab->eos)
        return lm_grammar_is_complete(g) ? LM_OK : LM_ERR_INVALID_ARG;
    size_t len = 0;
    const char *piece = vocab->piece(vocab->user, token, &len);
    return lm_grammar_accept_bytes(g, piece, piece ? len : 0);
}
