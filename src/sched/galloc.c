/* galloc.c - the graph allocator: liveness, memory reuse, in-place ops.
 *
 * Planning walks the nodes in order. Every tensor that owns memory and has no
 * data yet (a "root": not a view) gets an offset in one buffer:
 *   - leafs (and tensors flagged INPUT) are placed first and INPUT ones are
 *     never released, so callers can fill them after allocation;
 *   - a node is placed when it is computed; an elementwise node may take over
 *     the memory of its first source when that source dies at this node;
 *   - after node i, every root whose last reader is node i is released,
 *     unless flagged OUTPUT.
 * Free space is a sorted list of blocks, merged on release; placement is
 * best fit. The peak end offset is the buffer size the graph needs.
 */
#include <stdlib.h>
#include <string.h>

#include "sched/alloc.h"
#include "core/op_rules.h"

#define MAX_FREE_BLOCKS 1024

struct free_list {
    size_t off[MAX_FREE_BLOCKS];
    size_t size[MAX_FREE_BLOCKS];
    int n;
    size_t peak; /* highest end offset handed out */
};

static size_t align_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

/* Best-fit from the free list, else grow at the end. */
static size_t fl_alloc(struct free_list *fl, size_t size)
{
    int best = -1;
    for (int i = 0; i < fl->n; i++)
        if (fl->size[i] >= size && (best < 0 || fl->size[i] < fl->size[best]))
            best = i;
    if (best >= 0) {
        size_t off = fl->off[best];
        fl->off[best] += size;
        fl->size[best] -= size;
        if (fl->size[best] == 0) {
            memmove(&fl->off[best], &fl->off[best + 1], (size_t)(fl->n - best - 1) * sizeof(size_t));
            memmove(&fl->size[best], &fl->size[best + 1], (size_t)(fl->n - best - 1) * sizeof(size_t));
            fl->n--;
        }
        return off;
    }
    /* grow: extend a trailing free block if it touches the end */
    if (fl->n && fl->off[fl->n - 1] + fl->size[fl->n - 1] == fl->peak) {
        size_t off = fl->off[fl->n - 1];
        fl->n--;
        fl->peak = off + size;
        return off;
    }
    size_t off = fl->peak;
    fl->peak += size;
    return off;
}

/* Return [off, off+size) to the list, merging neighbours. False if the list is full. */
static bool fl_free(struct free_list *fl, size_t off, size_t size)
{
    int i = 0;
    while (i < fl->n && fl->off[i] < off)
        i++;
    bool merge_prev = i > 0 && fl->off[i - 1] + fl->size[i - 1] == off;
    bool merge_next = i < fl->n && off + size == fl->off[i];
    if (merge_prev && merge_next) {
        fl->size[i - 1] += size + fl->size[i];
        memmove(&fl->off[i], &fl->off[i + 1], (size_t)(fl->n - i - 1) * sizeof(size_t));
        memmove(&fl->size[i], &fl->size[i + 1], (size_t)(fl->n - i - 1) * sizeof(size_t));
        fl->n--;
    } else if (merge_prev) {
        fl->size[i - 1] += size;
    } else if (merge_next) {
        fl->off[i] = off;
        fl->size[i] += size;
    } else {
        if (fl->n == MAX_FREE_BLOCKS)
            return false;
        memmove(&fl->off[i + 1], &fl->off[i], (size_t)(fl->n - i) * sizeof(size_t));
        memmove(&fl->size[i + 1], &fl->size[i], (size_t)(fl->n - i) * sizeof(size_t));
        fl->off[i] = off;
        fl->size[i] = size;
        fl->n++;
    }
    return true;
}

/* Per-tensor planning record, found by a pointer hash. */
struct rec {
    const struct lm_tensor *t;
    int last_use; /* index of the last node that reads it (-1: none) */
    size_t off;   /* SIZE_MAX: not placed (yet) */
    size_t size;
    bool placed, released;
};

struct plan {
    struct rec *recs;
    size_t cap;
    size_t align;
    lm_buft buft;
    struct free_list fl;
};

static struct rec *rec_of(struct plan *p, const struct lm_tensor *t)
{
    size_t h = ((uintptr_t)t >> 4) % p->cap;
    while (p->recs[h].t && p->recs[h].t != t)
        h = h + 1 == p->cap ? 0 : h + 1;
    if (!p->recs[h].t) {
        p->recs[h].t = t;
        p->recs[h].last_use = -1;
        p->recs[h].off = SIZE_MAX;
    }
    return &p->recs[h];
}

/* The root owning t's memory, if the allocator manages it (no data yet). */
static const struct lm_tensor *managed_root(const struct lm_tensor *t)
{
    const struct lm_tensor *r = lm_view_root(t);
    return r->data ? NULL : r;
}

static lm_status place(struct plan *p, struct rec *r)
{
    r->size = align_up(lm_buft_alloc_size(p->buft, r->t), p->align);
    if (r->size == 0)
        r->size = p->align;
    r->off = fl_alloc(&p->fl, r->size);
    r->placed = true;
    return LM_OK;
}

static lm_status release(struct plan *p, struct rec *r)
{
    if (!r->placed || r->released || (r->t->flags & (LM_FLAG_OUTPUT | LM_FLAG_INPUT)))
        return LM_OK;
    r->released = true;
    return fl_free(&p->fl, r->off, r->size) ? LM_OK : LM_ERR_FULL;
}

/* Can node i write its result over its first source's memory? */
static struct rec *inplace_donor(struct plan *p, const struct lm_tensor *node, int i)
{
    const struct lm_tensor *s = node->src[0];
    if (!lm_op_has(node->op, LM_OPF_INPLACE) || node->view_src || !s || s->view_src || s->data || s->type != node->type)
        return NULL;
    if (!lm_same_shape(s, node) || !lm_is_contiguous(s) || !lm_is_contiguous(node))
        return NULL;
    if (s->flags & (LM_FLAG_INPUT | LM_FLAG_OUTPUT))
        return NULL;
    struct rec *r = rec_of(p, s);
    if (!r->placed || r->released || r->last_use != i)
        return NULL;
    return r;
}

static void compute_last_use(struct plan *p, struct lm_graph *g)
{
    for (int i = 0; i < g->n_nodes; i++) {
        struct lm_tensor *n = g->nodes[i];
        const struct lm_tensor *root = managed_root(n);
        if (root && root != n)
            rec_of(p, root)->last_use = i;
        rec_of(p, n)->last_use = i > rec_of(p, n)->last_use ? i : rec_of(p, n)->last_use;
        for (int j = 0; j < LM_MAX_SRC; j++) {
            if (!n->src[j])
                continue;
            const struct lm_tensor *sr = managed_root(n->src[j]);
            if (sr)
                rec_of(p, sr)->last_use = i;
        }
    }
}

lm_status lm_galloc_plan(struct lm_graph *g, lm_buft buft, struct lm_tensor *const *keep, int n_keep, size_t *offsets,
                         size_t *peak)
{
    struct plan p = {.buft = buft, .align = lm_buft_alignment(buft)};
    p.cap = 2 * (size_t)(g->n_nodes + g->n_leafs + n_keep) + 1;
    p.recs = calloc(p.cap, sizeof *p.recs);
    if (!p.recs)
        return LM_ERR_NOMEM;
    lm_status st = LM_OK;
    compute_last_use(&p, g);
    for (int i = 0; i < n_keep; i++) {
        const struct lm_tensor *root = managed_root(keep[i]);
        if (root)
            rec_of(&p, root)->last_use = g->n_nodes; /* past the last node: never released */
    }

    /* leafs first: they are read by nodes and (inputs) filled by the caller */
    for (int i = 0; i < g->n_leafs; i++) {
        struct lm_tensor *l = g->leafs[i];
        if (l->data || l->view_src)
            continue;
        struct rec *r = rec_of(&p, l);
        if (!r->placed)
            place(&p, r);
    }
    for (int i = 0; i < g->n_nodes && !st; i++) {
        struct lm_tensor *n = g->nodes[i];
        /* unplaced sources that are roots (e.g. input nodes flagged INPUT) */
        for (int j = 0; j < LM_MAX_SRC; j++) {
            const struct lm_tensor *sr = n->src[j] ? managed_root(n->src[j]) : NULL;
            if (sr && !rec_of(&p, sr)->placed)
                place(&p, rec_of(&p, sr));
        }
        if (!n->data && !n->view_src) {
            struct rec *r = rec_of(&p, n);
            struct rec *donor = inplace_donor(&p, n, i);
            if (donor && lm_buft_alloc_size(buft, n) <= donor->size) {
                /* the node takes over the dying source's block; the block is
                 * released when the node itself dies */
                r->off = donor->off;
                r->size = donor->size;
                r->placed = true;
                donor->released = true;
            } else if (!r->placed) {
                place(&p, r);
            }
        }
        /* release every managed root whose last reader was this node */
        for (int j = -1; j < LM_MAX_SRC && !st; j++) {
            const struct lm_tensor *t = j < 0 ? n : n->src[j];
            const struct lm_tensor *root = t ? managed_root(t) : NULL;
            if (!root)
                continue;
            struct rec *r = rec_of(&p, root);
            if (r->last_use == i)
                st = release(&p, r);
        }
    }
    if (!st) {
        for (int i = 0; i < g->n_nodes + g->n_leafs; i++) {
            const struct lm_tensor *t = i < g->n_nodes ? g->nodes[i] : g->leafs[i - g->n_nodes];
            offsets[i] = SIZE_MAX;
            if (!t->data && !t->view_src)
                offsets[i] = rec_of(&p, t)->off;
        }
        *peak = p.fl.peak;
    }
    free(p.recs);
    return st;
}

/* ---- the allocator object ---- */

struct lm_gallocr {
    lm_buft buft;
    struct lm_buffer *buf;
    size_t peak;
    size_t *offsets;
    int offsets_cap;
};

lm_status lm_gallocr_new(lm_buft buft, struct lm_gallocr **out)
{
    if (!buft || !out)
        return LM_ERR_INVALID_ARG;
    struct lm_gallocr *ga = calloc(1, sizeof *ga);
    if (!ga)
        return LM_ERR_NOMEM;
    ga->buft = buft;
    *out = ga;
    return LM_OK;
}

void lm_gallocr_free(struct lm_gallocr *ga)
{
    if (!ga)
        return;
    lm_buffer_free(ga->buf);
    free(ga->offsets);
    free(ga);
}

size_t lm_gallocr_buffer_size(const struct lm_gallocr *ga) { return ga->buf ? lm_buffer_size(ga->buf) : 0; }
size_t lm_gallocr_peak(const struct lm_gallocr *ga) { return ga->peak; }

static lm_status plan_graph(struct lm_gallocr *ga, struct lm_graph *g, struct lm_tensor *const *keep, int n_keep)
{
    int n = g->n_nodes + g->n_leafs;
    /* tensors placed in our buffer by an earlier allocation of this graph are
     * planned again, not treated as preallocated */
    for (int i = 0; ga->buf && i < n; i++) {
        struct lm_tensor *t = i < g->n_nodes ? g->nodes[i] : g->leafs[i - g->n_nodes];
        if (t->buffer == ga->buf) {
            t->data = NULL;
            t->buffer = NULL;
        }
    }
    if (n > ga->offsets_cap) {
        size_t *o = realloc(ga->offsets, (size_t)n * sizeof *o);
        if (!o)
            return LM_ERR_NOMEM;
        ga->offsets = o;
        ga->offsets_cap = n;
    }
    return lm_galloc_plan(g, ga->buft, keep, n_keep, ga->offsets, &ga->peak);
}

static lm_status ensure_buffer(struct lm_gallocr *ga, size_t size)
{
    if (ga->buf && lm_buffer_size(ga->buf) >= size)
        return LM_OK;
    lm_buffer_free(ga->buf);
    ga->buf = NULL;
    lm_status st = lm_buft_alloc_buffer(ga->buft, size, &ga->buf);
    if (!st)
        lm_buffer_set_usage(ga->buf, LM_BUFFER_USAGE_COMPUTE);
    return st;
}

lm_status lm_gallocr_reserve_keep(struct lm_gallocr *ga, struct lm_graph *g, struct lm_tensor *const *keep, int n_keep)
{
    lm_status st = plan_graph(ga, g, keep, n_keep);
    if (!st)
        st = ensure_buffer(ga, ga->peak);
    return st;
}

lm_status lm_gallocr_reserve(struct lm_gallocr *ga, struct lm_graph *g)
{
    return lm_gallocr_reserve_keep(ga, g, NULL, 0);
}

struct lm_buffer *lm_gallocr_buffer(const struct lm_gallocr *ga) { return ga->buf; }

lm_status lm_gallocr_alloc_graph_keep(struct lm_gallocr *ga, struct lm_graph *g, struct lm_tensor *const *keep,
                                      int n_keep)
{
    lm_status st = lm_gallocr_reserve_keep(ga, g, keep, n_keep);
    if (st)
        return st;
    int n = g->n_nodes + g->n_leafs;
    /* roots first, then views (whose roots then have data) */
    for (int i = 0; i < n && !st; i++) {
        struct lm_tensor *t = i < g->n_nodes ? g->nodes[i] : g->leafs[i - g->n_nodes];
        if (ga->offsets[i] != SIZE_MAX && !t->data)
            st = lm_buffer_place_tensor(ga->buf, t, ga->offsets[i]);
    }
    for (int i = 0; i < n && !st; i++) {
        struct lm_tensor *t = i < g->n_nodes ? g->nodes[i] : g->leafs[i - g->n_nodes];
        if (t->view_src && !t->data)
            st = lm_view_init(t);
    }
    return st;
}

lm_status lm_gallocr_alloc_graph(struct lm_gallocr *ga, struct lm_graph *g)
{
    return lm_gallocr_alloc_graph_keep(ga, g, NULL, 0);
}
