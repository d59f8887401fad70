/* grammar_sample.c - masking candidates with a grammar and accepting tokens
 * (llama_sample_grammar / llama_grammar_accept_token of b1892).
 *
 * A candidate survives when some stack can read all of its piece's complete code
 * points and, if the piece ends inside a UTF-8 sequence, some completion of that
 * sequence can match where the stack then stands. That is an "or" over stacks, so
 * the candidates are walked like a trie over the whole stack set rather than per
 * stack as b1892 does: at a node (a stack set and the candidates that reached it,
 * all at code point d), candidates whose code point d matches the same subset of
 * the distinct stack tops form one class; a class moves on to the union of the
 * expansions of the stacks it matched, which is exactly the stack set accepting
 * those d + 1 code points would leave. Each candidate is in one node per depth, and
 * each code point is tested against the tops once per node, so sets with many
 * stacks (ambiguous grammars) cost no more per candidate than they cost to build.
 *
 * Because a node's set is the accept path's set, built with the same work
 * accounting, the mask agrees with lm_grammar_accept_bytes: a token needing more
 * than LM_GRAMMAR_MAX_STACKS stacks is masked. Recursion depth is the number of
 * code points of the longest piece; past MAX_BATCH_DEPTH a piece is checked alone
 * by stepping the stack set.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
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
    uint32_t index;            /* position in the candidate array */
    uint32_t off;              /* first code point in cps */
    uint32_t n;                /* code points up to the first 0 (b1892 stops there) */
    struct lm_partial_utf8 pu; /* partial sequence at the end of the piece */
};

/* A code point's class at a node: valid when stamp is the node's; val is the class
 * + 1, or 0 when the code point matches no top. */
struct ch_entry {
    uint32_t stamp, key, val;
};

/* Per-depth scratch of the trie walk. The walk is depth first, so one node per depth
 * is live at a time and the next node at that depth reuses its buffers; the two maps
 * are valid where their stamp equals the node's, so starting a node clears nothing. */
struct level {
    uint32_t *tops, *tix; /* distinct tops of the node's set; each stack's index among them */
    size_t stacks_cap;
    uint32_t *order; /* candidates going on, grouped by class: class 0 first */
    uint32_t *surv, *cls; /* those of other classes, and their classes, before grouping */
    size_t cands_cap, n_first, n_surv;
    uint32_t *start; /* [n_cls + 1] where each class's group starts in order */
    size_t start_cap;
    uint64_t *bits; /* [n_cls * words] the tops each class matches */
    size_t bits_cap, n_cls, words, n_tops;
    struct ch_entry *ch; /* code point -> class, hashed (ASCII: ascii[ch]) */
    size_t ch_slots, n_ch;
    struct ch_entry ascii[128];
    uint32_t *cls_slot, *cls_stamp; /* class + 1, by hash of its bits */
    size_t cls_slots;
    struct lm_stackset child; /* the set a class moves on to */
};

struct reject_ctx {
    const struct lm_grammar *g;
    const struct cand *cands;
    const uint32_t *cps;
    bool *accepted;
    size_t max_depth;
    struct lm_grammar_scratch sc;
    struct level *lv; /* one per depth below max_depth that a candidate reaches */
    size_t n_lv;
    uint32_t stamp; /* of the current node */
};

#define NONE UINT32_MAX

static void levels_free(struct reject_ctx *x)
{
    for (size_t d = 0; x->lv && d < x->n_lv; d++) {
        struct level *l = &x->lv[d];
        free(l->tops);
        free(l->tix);
        free(l->surv);
        free(l->cls);
        free(l->order);
        free(l->start);
        free(l->bits);
        free(l->ch);
        free(l->cls_slot);
        free(l->cls_stamp);
        lm_stackset_free(&l->child);
    }
    free(x->lv);
}

/* Does the stack set, after `depth` code points of c, take the rest of c? Checked
 * alone by stepping the set, past the batching depth. */
static lm_status check_one(struct reject_ctx *x, const struct lm_stackset *stacks, const struct cand *c, size_t depth,
                           bool *ok)
{
    struct lm_stackset cur = {0}, next = {0};
    *ok = false;
    lm_status st = lm_grammar_charge(&x->sc, stacks->pool_len + 8 * (uint64_t)stacks->n);
    if (st == LM_OK)
        st = lm_stackset_copy(&cur, stacks);
    for (size_t d = depth; st == LM_OK && d < c->n && cur.n > 0; d++) {
        lm_stackset_clear(&next);
        st = lm_grammar_step(x->g, &cur, x->cps[c->off + d], &next, &x->sc);
        const struct lm_stackset t = cur;
        cur = next;
        next = t;
    }
    if (st == LM_OK && cur.n > 0 && c->pu.n_remain == 0)
        *ok = true;
    for (size_t i = 0; st == LM_OK && i < cur.n && !*ok; i++) {
        size_t len;
        const uint32_t *s = lm_stackset_get(&cur, i, &len);
        if (len)
            *ok = lm_grammar_match_partial(x->g, s[len - 1], c->pu);
    }
    if (st == LM_ERR_FULL && !x->sc.exhausted)
        st = LM_OK; /* too many stacks: rejected, as accepting would fail */
    lm_stackset_free(&cur);
    lm_stackset_free(&next);
    return st;
}

/* After all its code points, is candidate c taken by the node's stacks (never an
 * empty set)? With a trailing partial UTF-8 sequence, some top must admit a
 * completion of it. */
static lm_status ends_ok(struct reject_ctx *x, const struct level *l, const struct cand *c, bool *ok)
{
    *ok = c->pu.n_remain == 0;
    if (*ok)
        return LM_OK;
    lm_status st = lm_grammar_charge(&x->sc, l->n_tops);
    for (size_t t = 0; st == LM_OK && t < l->n_tops && !*ok; t++)
        *ok = lm_grammar_match_partial(x->g, l->tops[t], c->pu);
    return st;
}

/* the distinct top positions of S and each stack's index among them (NONE for the
 * empty stack), through the scratch's per-position map */
static void distinct_tops(struct reject_ctx *x, const struct lm_stackset *S, struct level *l)
{
    struct lm_grammar_scratch *sc = &x->sc;
    l->n_tops = 0;
    lm_grammar_match_reset(sc);
    for (size_t s = 0; s < S->n; s++) {
        size_t len;
        const uint32_t *stack = lm_stackset_get(S, s, &len);
        l->tix[s] = NONE;
        if (len == 0)
            continue;
        const uint32_t top = stack[len - 1];
        if (sc->pos_stamp[top] != sc->pos_cur) {
            sc->pos_stamp[top] = sc->pos_cur;
            sc->pos_val[top] = (uint32_t)l->n_tops;
            l->tops[l->n_tops++] = top;
        }
        l->tix[s] = sc->pos_val[top];
    }
}

static uint32_t hash_bits(const uint64_t *b, size_t words)
{
    uint64_t h = 0x2545f4914f6cdd1du;
    for (size_t i = 0; i < words; i++) {
        h = (h ^ b[i]) * 0x9e3779b97f4a7c15u;
        h ^= h >> 29;
    }
    return (uint32_t)(h ^ (h >> 32));
}

static size_t ch_home(uint32_t ch, size_t slots)
{
    return (size_t)((ch * 0x9e3779b1u) >> 7) & (slots - 1);
}

/* double the code point map (or create it), keeping this node's entries */
static lm_status grow_ch_map(struct level *l, uint32_t stamp)
{
    const size_t ns = l->ch_slots ? 2 * l->ch_slots : 64;
    struct ch_entry *m = calloc(ns, sizeof *m);
    if (!m)
        return LM_ERR_NOMEM;
    for (size_t i = 0; i < l->ch_slots; i++) {
        if (l->ch[i].stamp != stamp)
            continue;
        size_t j = ch_home(l->ch[i].key, ns);
        while (m[j].stamp == stamp)
            j = (j + 1) & (ns - 1);
        m[j] = l->ch[i];
    }
    free(l->ch);
    l->ch = m;
    l->ch_slots = ns;
    return LM_OK;
}

/* double the class map (or create it), rehashing this node's classes */
static lm_status grow_cls_map(struct level *l, uint32_t stamp)
{
    const size_t ns = l->cls_slots ? 2 * l->cls_slots : 16;
    uint32_t *slot = malloc(ns * sizeof *slot), *stp = calloc(ns, sizeof *stp);
    if (!slot || !stp) {
        free(slot);
        free(stp);
        return LM_ERR_NOMEM;
    }
    for (size_t k = 0; k < l->n_cls; k++) {
        size_t j = hash_bits(l->bits + k * l->words, l->words) & (ns - 1);
        while (stp[j] == stamp)
            j = (j + 1) & (ns - 1);
        slot[j] = (uint32_t)k + 1;
        stp[j] = stamp;
    }
    free(l->cls_slot);
    free(l->cls_stamp);
    l->cls_slot = slot;
    l->cls_stamp = stp;
    l->cls_slots = ns;
    return LM_OK;
}

/* The class of the matched tops in b (the next class's bits): an existing class with
 * the same bits, else a new one. */
static lm_status intern_class(struct level *l, uint32_t stamp, const uint64_t *b, uint32_t *out)
{
    lm_status st = 2 * (l->n_cls + 1) > l->cls_slots ? grow_cls_map(l, stamp) : LM_OK;
    if (st != LM_OK)
        return st;
    size_t j = hash_bits(b, l->words) & (l->cls_slots - 1);
    for (; l->cls_stamp[j] == stamp; j = (j + 1) & (l->cls_slots - 1)) {
        const uint32_t k = l->cls_slot[j] - 1;
        if (!memcmp(l->bits + (size_t)k * l->words, b, l->words * sizeof *b)) {
            *out = k;
            return LM_OK;
        }
    }
    *out = (uint32_t)l->n_cls++;
    l->cls_slot[j] = *out + 1;
    l->cls_stamp[j] = stamp;
    return LM_OK;
}

/* the class of a code point not met before at this node: test it against every
 * distinct top (NONE when none matches) */
static lm_status new_class(struct reject_ctx *x, struct level *l, uint32_t ch, uint32_t *out)
{
    lm_status st = lm_grammar_grow((void **)&l->bits, &l->bits_cap, (l->n_cls + 1) * l->words, sizeof *l->bits);
    if (st == LM_OK)
        st = lm_grammar_charge(&x->sc, l->words);
    if (st != LM_OK)
        return st;
    uint64_t *b = l->bits + l->n_cls * l->words;
    bool any = false;
    memset(b, 0, l->words * sizeof *b);
    for (size_t t = 0; t < l->n_tops && st == LM_OK; t++) {
        uint32_t next;
        if (lm_grammar_match_char(x->g, l->tops[t], ch, &next)) {
            b[t / 64] |= UINT64_C(1) << (t % 64);
            any = true;
        }
        st = lm_grammar_charge(&x->sc, next - l->tops[t]);
    }
    *out = NONE;
    if (st == LM_OK && any)
        st = intern_class(l, x->stamp, b, out);
    return st;
}

/* class of code point ch at this node (NONE: no top matches it), computed once per
 * code point and node */
static lm_status class_of(struct reject_ctx *x, struct level *l, uint32_t ch, uint32_t *out)
{
    struct ch_entry *e = NULL;
    if (ch < 128) {
        e = &l->ascii[ch];
    } else {
        lm_status st = 2 * (l->n_ch + 1) > l->ch_slots ? grow_ch_map(l, x->stamp) : LM_OK;
        if (st != LM_OK)
            return st;
        size_t i = ch_home(ch, l->ch_slots);
        for (; l->ch[i].stamp == x->stamp && l->ch[i].key != ch; i = (i + 1) & (l->ch_slots - 1))
            ;
        e = &l->ch[i];
    }
    if (e->stamp == x->stamp) {
        *out = e->val ? e->val - 1 : NONE;
        return LM_OK;
    }
    lm_status st = new_class(x, l, ch, out);
    if (st == LM_OK) {
        *e = (struct ch_entry){x->stamp, ch, *out == NONE ? 0 : *out + 1};
        l->n_ch += ch >= 128;
    }
    return st;
}

static lm_status check_node(struct reject_ctx *x, const struct lm_stackset *S, const uint32_t *list, size_t n,
                            size_t depth);

/* The candidates of class k read their code point: the stacks after it are the
 * expansions of every stack whose top the class matched (exactly the stacks that
 * accepting this code point leaves), and the candidates go on from there. A class
 * needing more than LM_GRAMMAR_MAX_STACKS stacks is rejected, as accepting would fail. */
static lm_status descend(struct reject_ctx *x, const struct lm_stackset *S, struct level *l, size_t k, size_t depth)
{
    const uint64_t *bits = l->bits + k * l->words;
    lm_status st = lm_grammar_charge(&x->sc, S->n);
    lm_stackset_clear(&l->child);
    lm_grammar_expand_begin(&x->sc);
    for (size_t s = 0; s < S->n && st == LM_OK; s++) {
        size_t len;
        const uint32_t *stack = lm_stackset_get(S, s, &len);
        const uint32_t t = l->tix[s];
        if (t != NONE && (bits[t / 64] >> (t % 64) & 1))
            st = lm_grammar_advance_popped(x->g, stack, len, &l->child, &x->sc);
    }
    if (st == LM_ERR_FULL && !x->sc.exhausted)
        return LM_OK; /* too many stacks: these candidates stay rejected */
    if (st != LM_OK)
        return st;
    return check_node(x, &l->child, l->order + l->start[k], l->start[k + 1] - l->start[k], depth + 1);
}

/* Group the candidates going on by class. Those of class 0 (usually most of them:
 * inside a string, every ordinary character) went straight to order; the others
 * are counting-sorted after them. */
static lm_status group(struct level *l)
{
    lm_status st = lm_grammar_grow((void **)&l->start, &l->start_cap, l->n_cls + 1, sizeof *l->start);
    if (st != LM_OK)
        return st;
    memset(l->start, 0, (l->n_cls + 1) * sizeof *l->start);
    l->start[1] = (uint32_t)l->n_first;
    for (size_t i = 0; i < l->n_surv; i++)
        l->start[l->cls[i] + 1]++;
    for (size_t k = 1; k < l->n_cls; k++)
        l->start[k + 1] += l->start[k];
    for (size_t i = 0; i < l->n_surv; i++)
        l->order[l->start[l->cls[i]]++] = l->surv[i];
    for (size_t k = l->n_cls; k > 1; k--) /* back to the starts */
        l->start[k] = l->start[k - 1];
    l->start[1] = (uint32_t)l->n_first;
    return LM_OK;
}

/* room in the level for a node of ns stacks and n candidates */
static lm_status level_reserve(struct level *l, size_t ns, size_t n)
{
    if (ns > l->stacks_cap) {
        size_t cap = l->stacks_cap;
        if (lm_grammar_grow((void **)&l->tops, &cap, ns, sizeof *l->tops) ||
            lm_grammar_grow((void **)&l->tix, &l->stacks_cap, ns, sizeof *l->tix))
            return LM_ERR_NOMEM;
    }
    if (n > l->cands_cap) {
        size_t cap = l->cands_cap, cap2 = l->cands_cap;
        if (lm_grammar_grow((void **)&l->surv, &cap, n, sizeof *l->surv) ||
            lm_grammar_grow((void **)&l->cls, &cap2, n, sizeof *l->cls) ||
            lm_grammar_grow((void **)&l->order, &l->cands_cap, n, sizeof *l->order))
            return LM_ERR_NOMEM;
    }
    return LM_OK;
}

/* Mark the candidates of list (each at code point `depth`) that the stack set S
 * takes: each candidate is decided here or passed to exactly one class, so a node's
 * work is linear in its candidates plus one test per distinct code point and top and
 * one expansion per class. */
static lm_status check_node(struct reject_ctx *x, const struct lm_stackset *S, const uint32_t *list, size_t n,
                            size_t depth)
{
    lm_status st = LM_OK;
    if (depth >= x->max_depth) {
        for (size_t i = 0; i < n && st == LM_OK; i++)
            st = check_one(x, S, &x->cands[list[i]], depth, &x->accepted[list[i]]);
        return st;
    }
    struct level *l = &x->lv[depth];
    if ((st = level_reserve(l, S->n, n)) != LM_OK)
        return st;
    if ((st = lm_grammar_charge(&x->sc, S->n)) != LM_OK)
        return st;
    x->stamp++;
    l->n_ch = l->n_cls = l->n_first = l->n_surv = 0;
    distinct_tops(x, S, l);
    l->words = (l->n_tops + 63) / 64;
    /* decide the candidates that end here; classify the others */
    for (size_t i = 0; i < n && st == LM_OK; i++) {
        const uint32_t id = list[i];
        const struct cand *c = &x->cands[id];
        uint32_t k;
        if (depth >= c->n) {
            if (c->pu.n_remain == 0)
                x->accepted[id] = true;
            else
                st = ends_ok(x, l, c, &x->accepted[id]);
            continue;
        }
        if (l->n_tops == 0) /* every stack is complete: nothing can follow */
            continue;
        const uint32_t ch = x->cps[c->off + depth];
        if (ch < 128 && l->ascii[ch].stamp == x->stamp)
            k = l->ascii[ch].val - 1; /* the common case, inline (val 0 gives NONE) */
        else if ((st = class_of(x, l, ch, &k)) != LM_OK)
            break;
        if (k == 0) {
            l->order[l->n_first++] = id;
        } else if (k != NONE) {
            l->surv[l->n_surv] = id;
            l->cls[l->n_surv++] = k;
        }
    }
    if (st == LM_OK && l->n_cls > 0)
        st = group(l);
    for (size_t k = 0; k < l->n_cls && st == LM_OK; k++)
        st = descend(x, S, l, k, depth);
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
        if (len >= UINT32_MAX - used ||
            lm_grammar_grow((void **)cps, &cap, used + len + 1 < 4096 ? 4096 : used + len + 1, sizeof **cps))
            return LM_ERR_NOMEM;
        struct cand *k = &cands[n++];
        k->index = (uint32_t)i;
        k->off = (uint32_t)used;
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
    if (!g || !c || !vocab || !vocab->piece || (!c->data && c->size) || c->size >= UINT32_MAX)
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
        size_t longest = 0;
        for (size_t i = 0; i < n; i++) {
            list[i] = (uint32_t)i;
            longest = cands[i].n > longest ? cands[i].n : longest;
        }
        x.n_lv = (longest < max_depth ? longest : max_depth) + 1;
        x.lv = calloc(x.n_lv, sizeof *x.lv);
        st = x.lv ? lm_grammar_scratch_init(&x.sc, g) : LM_ERR_NOMEM;
        if (st == LM_OK)
            st = check_node(&x, &g->stacks, list, n, 0);
        if (st == LM_ERR_FULL)
            LM_LOG_WRN("grammar: sampling reached the work limit (%llu units); the tokens not yet checked are "
                       "masked\n", (unsigned long long)LM_GRAMMAR_MAX_WORK);
        lm_grammar_scratch_free(&x.sc);
        levels_free(&x);
        /* on LM_ERR_FULL the mask is conservative: undecided candidates are masked */
        for (size_t i = 0; (st == LM_OK || st == LM_ERR_FULL) && i < n; i++)
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
    size_t n = lm_grammar_decode_utf8(text, len, g->partial, cps, &end);
    for (size_t i = 0; i < n; i++) /* a code point 0 (overlong "\xc0\x80") ends the text, as in sampling */
        if (cps[i] == 0)
            n = i;
    struct lm_grammar_scratch sc;
    struct lm_stackset cur = {0}, next = {0};
    lm_status st = lm_grammar_scratch_init(&sc, g);
    if (st == LM_OK)
        st = lm_stackset_copy(&cur, &g->stacks);
    for (size_t i = 0; st == LM_OK && i < n; i++) {
        lm_stackset_clear(&next);
        st = lm_grammar_step(g, &cur, cps[i], &next, &sc);
        const struct lm_stackset t = cur;
        cur = next;
        next = t;
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
