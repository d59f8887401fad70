/* sched.c - assign nodes to backends, split, copy inputs, allocate, compute.
 *
 * Invariants after lm_sched_alloc_graph:
 *   - every node that computes (not a view op) belongs to exactly one split;
 *   - a node's sources are all readable by its split's backend (sources that
 *     were not are replaced by input copies, and the originals recorded so
 *     lm_sched_reset can restore them);
 *   - every tensor that is copied to another backend is kept alive in its own
 *     backend's buffer until the end of the graph.
 */
#include <stdlib.h>
#include <string.h>

#include "sched/alloc.h"
#include "sched/sched.h"
#include "core/log.h"

struct input_copy {
    struct lm_tensor *src;  /* the tensor as the graph had it */
    struct lm_tensor *copy; /* contiguous copy in the split's backend */
};

struct split {
    int backend;
    int first, n;             /* range in the backend's node list */
    int first_copy, n_copies; /* range in sched->copies */
};

struct rewrite {
    struct lm_tensor *node;
    int j;
    struct lm_tensor *orig;
};

struct assignment {
    const struct lm_tensor *t;
    int backend;
    uint32_t gen; /* the entry holds t only while gen is the map's generation */
};

struct lm_sched {
    lm_backend_t backends[LM_MAX_DEVICES];
    struct lm_gallocr *galloc[LM_MAX_DEVICES];
    struct lm_graph *bgraph[LM_MAX_DEVICES]; /* each backend's nodes, leafs and copies */
    int n_backends;
    int graph_size;

    struct lm_ctx *ctx;  /* copies; reset per allocation */
    struct lm_ctx *gctx; /* bgraph, made once, cleared per allocation */

    /* pointer hash: tensor -> backend index (per allocation); a reset starts
     * a new generation instead of clearing the whole table */
    struct assignment *assign;
    size_t assign_cap;
    uint32_t assign_gen;
    struct assignment forced[64]; /* lm_sched_set_tensor_backend, kept across allocations */
    int n_forced;

    struct split *splits;
    int n_splits;
    struct input_copy *copies;
    int n_copies, cap_copies;
    struct rewrite *rewrites;
    int n_rewrites, cap_rewrites;
    struct lm_tensor **keep[LM_MAX_DEVICES];
    int n_keep[LM_MAX_DEVICES];

    struct lm_graph *allocated;

    lm_sched_want_fn want; /* the observer (lm_sched_set_observer); observe NULL: none */
    lm_sched_observe_fn observe;
    void *observe_user;
};

/* ---- the tensor -> backend map ---- */

static struct assignment *slot(struct lm_sched *s, const struct lm_tensor *t)
{
    size_t h = ((uintptr_t)t >> 4) % s->assign_cap;
    while (s->assign[h].gen == s->assign_gen && s->assign[h].t != t)
        h = h + 1 == s->assign_cap ? 0 : h + 1;
    return &s->assign[h];
}

static int get_be(struct lm_sched *s, const struct lm_tensor *t)
{
    struct assignment *a = slot(s, t);
    return a->gen == s->assign_gen ? a->backend : -1;
}

static void set_be(struct lm_sched *s, const struct lm_tensor *t, int be)
{
    struct assignment *a = slot(s, t);
    *a = (struct assignment){t, be, s->assign_gen};
}

/* ---- lifecycle ---- */

lm_status lm_sched_new(lm_backend_t *backends, int n_backends, int graph_size, struct lm_sched **out)
{
    if (!backends || n_backends < 1 || n_backends > LM_MAX_DEVICES || graph_size < 1 || !out)
        return LM_ERR_INVALID_ARG;
    struct lm_sched *s = calloc(1, sizeof *s);
    if (!s)
        return LM_ERR_NOMEM;
    lm_status st = LM_OK;
    s->n_backends = n_backends;
    s->graph_size = graph_size;
    s->assign_cap = 4 * (size_t)graph_size + 1;
    s->assign = calloc(s->assign_cap, sizeof *s->assign);
    s->assign_gen = 1;
    s->splits = calloc((size_t)graph_size, sizeof *s->splits);
    for (int i = 0; i < LM_MAX_DEVICES; i++)
        s->keep[i] = i < n_backends ? calloc((size_t)graph_size, sizeof(struct lm_tensor *)) : NULL;
    if (!s->assign || !s->splits)
        st = LM_ERR_NOMEM;
    for (int i = 0; i < n_backends && !st; i++) {
        s->backends[i] = backends[i];
        if (!s->keep[i])
            st = LM_ERR_NOMEM;
        else
            st = lm_gallocr_new(lm_backend_default_buft(backends[i]), &s->galloc[i]);
    }
    if (!st) {
        struct lm_ctx_params p = {.mem_size = (size_t)graph_size * lm_tensor_overhead(), .no_alloc = true};
        st = lm_ctx_new(&p, &s->ctx);
    }
    if (!st) {
        struct lm_ctx_params p = {
            .mem_size = (size_t)n_backends * lm_graph_overhead((size_t)graph_size * 2),
            .no_alloc = true,
        };
        st = lm_ctx_new(&p, &s->gctx);
    }
    for (int b = 0; b < n_backends && !st; b++) {
        s->bgraph[b] = lm_graph_new(s->gctx, graph_size * 2);
        if (!s->bgraph[b])
            st = lm_ctx_status(s->gctx);
    }
    if (st) {
        lm_sched_free(s);
        return st;
    }
    *out = s;
    return LM_OK;
}

void lm_sched_free(struct lm_sched *s)
{
    if (!s)
        return;
    lm_sched_reset(s);
    for (int i = 0; i < LM_MAX_DEVICES; i++) {
        lm_gallocr_free(s->galloc[i]);
        free(s->keep[i]);
    }
    lm_ctx_free(s->ctx);
    lm_ctx_free(s->gctx);
    free(s->assign);
    free(s->splits);
    free(s->copies);
    free(s->rewrites);
    free(s);
}

void lm_sched_reset(struct lm_sched *s)
{
    for (int i = s->n_rewrites - 1; i >= 0; i--)
        s->rewrites[i].node->src[s->rewrites[i].j] = s->rewrites[i].orig;
    s->n_rewrites = 0;
    s->n_copies = 0;
    s->n_splits = 0;
    s->allocated = NULL;
    for (int i = 0; i < s->n_backends; i++)
        s->n_keep[i] = 0;
    if (s->ctx)
        lm_ctx_reset(s->ctx);
    if (s->assign && ++s->assign_gen == 0) { /* wrapped: entries of generation 1 may linger */
        memset(s->assign, 0, s->assign_cap * sizeof *s->assign);
        s->assign_gen = 1;
    }
    for (int k = 0; k < s->n_forced; k++)
        set_be(s, s->forced[k].t, s->forced[k].backend);
}

void lm_sched_set_tensor_backend(struct lm_sched *s, struct lm_tensor *t, lm_backend_t be)
{
    for (int i = 0; i < s->n_backends; i++) {
        if (s->backends[i] != be)
            continue;
        for (int k = 0; k < s->n_forced; k++) {
            if (s->forced[k].t == t) {
                s->forced[k].backend = i;
                return;
            }
        }
        if (s->n_forced < (int)(sizeof s->forced / sizeof s->forced[0]))
            s->forced[s->n_forced++] = (struct assignment){.t = t, .backend = i};
    }
}

lm_backend_t lm_sched_get_tensor_backend(struct lm_sched *s, const struct lm_tensor *t)
{
    int b = get_be(s, t);
    return b >= 0 ? s->backends[b] : NULL;
}

void lm_sched_set_observer(struct lm_sched *s, lm_sched_want_fn want, lm_sched_observe_fn observe, void *user)
{
    s->want = observe ? want : NULL;
    s->observe = observe;
    s->observe_user = observe ? user : NULL;
}

int lm_sched_n_splits(const struct lm_sched *s) { return s->n_splits; }
int lm_sched_n_copies(const struct lm_sched *s) { return s->n_copies; }

size_t lm_sched_buffer_size(const struct lm_sched *s, int i)
{
    return i >= 0 && i < s->n_backends ? lm_gallocr_buffer_size(s->galloc[i]) : 0;
}

/* ---- step 1: assignment ---- */

static lm_buft buft_of(const struct lm_tensor *root) { return root->buffer ? root->buffer->buft : lm_host_buft(); }

/* First backend (priority order) that supports op and, if buft is set, reads buft. */
static int first_capable(struct lm_sched *s, const struct lm_tensor *op, lm_buft buft)
{
    for (int b = 0; b < s->n_backends; b++)
        if ((!buft || lm_backend_supports_buft(s->backends[b], buft)) && lm_backend_supports_op(s->backends[b], op))
            return b;
    return -1;
}

static bool capable(struct lm_sched *s, int b, const struct lm_tensor *op)
{
    return b >= 0 && lm_backend_supports_op(s->backends[b], op);
}

static int choose_backend(struct lm_sched *s, const struct lm_tensor *n, int prev)
{
    int b = get_be(s, n); /* forced */
    if (b >= 0)
        return b;
    const struct lm_tensor *root = lm_view_root(n);
    if (root != n && root->data) /* writes into preallocated memory (KV cache) */
        return first_capable(s, n, buft_of(root));
    for (int j = 0; j < LM_MAX_SRC; j++) { /* reads weights */
        const struct lm_tensor *sr = n->src[j] ? lm_view_root(n->src[j]) : NULL;
        if (sr && sr->data && (sr->buffer == NULL || sr->buffer->usage == LM_BUFFER_USAGE_WEIGHTS)) {
            b = first_capable(s, n, buft_of(sr));
            if (b >= 0)
                return b;
        }
    }
    for (int j = 0; j < LM_MAX_SRC; j++) { /* follows a computed source */
        const struct lm_tensor *sr = n->src[j] ? lm_view_root(n->src[j]) : NULL;
        if (sr && !sr->data && capable(s, get_be(s, sr), n))
            return get_be(s, sr);
    }
    if (capable(s, prev, n))
        return prev;
    return first_capable(s, n, NULL);
}

static lm_status assign_nodes(struct lm_sched *s, struct lm_graph *g)
{
    int prev = -1;
    for (int i = 0; i < g->n_nodes; i++) {
        struct lm_tensor *n = g->nodes[i];
        int b;
        if (lm_is_view_op(n->op)) {
            /* a view lives where its root lives */
            const struct lm_tensor *root = lm_view_root(n);
            b = get_be(s, root);
            if (b < 0 && root->data)
                b = first_capable(s, n, buft_of(root));
            if (b < 0)
                b = prev >= 0 ? prev : 0;
        } else {
            b = choose_backend(s, n, prev);
            if (b < 0) {
                LM_LOG_ERR("sched: no backend can compute %s '%s'\n", lm_op_name(n->op), n->name);
                return LM_ERR_UNSUPPORTED;
            }
            prev = b;
        }
        set_be(s, n, b);
        /* unplaced inputs go where they are first read */
        for (int j = 0; j < LM_MAX_SRC; j++) {
            const struct lm_tensor *sr = n->src[j] ? lm_view_root(n->src[j]) : NULL;
            if (sr && !sr->data && sr->op == LM_OP_NONE && get_be(s, sr) < 0)
                set_be(s, sr, b);
        }
    }
    for (int i = 0; i < g->n_leafs; i++)
        if (!g->leafs[i]->data && get_be(s, g->leafs[i]) < 0)
            set_be(s, g->leafs[i], 0);
    return LM_OK;
}

/* ---- steps 2-3: splits and input copies ---- */

static bool readable(struct lm_sched *s, int b, const struct lm_tensor *t)
{
    const struct lm_tensor *root = lm_view_root(t);
    if (root->data)
        return lm_backend_supports_buft(s->backends[b], buft_of(root));
    return get_be(s, root) == b;
}

static lm_status grow(void **arr, int *cap, int need, size_t elem)
{
    if (need <= *cap)
        return LM_OK;
    int nc = *cap ? *cap * 2 : 64;
    while (nc < need)
        nc *= 2;
    void *p = realloc(*arr, (size_t)nc * elem);
    if (!p)
        return LM_ERR_NOMEM;
    *arr = p;
    *cap = nc;
    return LM_OK;
}

static void keep_tensor(struct lm_sched *s, struct lm_tensor *t)
{
    const struct lm_tensor *root = lm_view_root(t);
    int b = get_be(s, root);
    if (b < 0 || root->data || s->n_keep[b] >= s->graph_size)
        return;
    s->keep[b][s->n_keep[b]++] = (struct lm_tensor *)root;
}

/* Give node n's unreadable sources copies on backend b (shared within the split). */
static lm_status add_copies(struct lm_sched *s, struct split *sp, struct lm_tensor *n)
{
    for (int j = 0; j < LM_MAX_SRC; j++) {
        struct lm_tensor *src = n->src[j];
        if (!src || readable(s, sp->backend, src))
            continue;
        struct lm_tensor *copy = NULL;
        for (int k = sp->first_copy; k < s->n_copies; k++)
            if (s->copies[k].src == src)
                copy = s->copies[k].copy;
        if (!copy) {
            copy = lm_new_tensor_4d(s->ctx, src->type, src->ne[0], src->ne[1], src->ne[2], src->ne[3]);
            if (!copy)
                return lm_ctx_status(s->ctx);
            lm_format_name(copy, "%.40s#copy%d", src->name, sp->backend);
            copy->flags |= LM_FLAG_INPUT;
            set_be(s, copy, sp->backend);
            if (grow((void **)&s->copies, &s->cap_copies, s->n_copies + 1, sizeof *s->copies))
                return LM_ERR_NOMEM;
            s->copies[s->n_copies++] = (struct input_copy){src, copy};
            sp->n_copies++;
            keep_tensor(s, src);
            struct lm_graph *bg = s->bgraph[sp->backend];
            if (bg->n_leafs >= bg->size)
                return LM_ERR_FULL;
            bg->leafs[bg->n_leafs++] = copy;
        }
        if (grow((void **)&s->rewrites, &s->cap_rewrites, s->n_rewrites + 1, sizeof *s->rewrites))
            return LM_ERR_NOMEM;
        s->rewrites[s->n_rewrites++] = (struct rewrite){n, j, src};
        n->src[j] = copy;
    }
    return LM_OK;
}

static lm_status build_splits(struct lm_sched *s, struct lm_graph *g)
{
    for (int b = 0; b < s->n_backends; b++)
        lm_graph_clear(s->bgraph[b]);
    for (int i = 0; i < g->n_leafs; i++) { /* unplaced leafs join their backend's graph */
        struct lm_tensor *l = g->leafs[i];
        if (!l->data && !l->view_src) {
            struct lm_graph *bg = s->bgraph[get_be(s, l)];
            bg->leafs[bg->n_leafs++] = l;
        }
    }
    struct split *cur = NULL;
    for (int i = 0; i < g->n_nodes; i++) {
        struct lm_tensor *n = g->nodes[i];
        if (lm_is_view_op(n->op))
            continue;
        int b = get_be(s, n);
        struct lm_graph *bg = s->bgraph[b];
        if (!cur || cur->backend != b) {
            if (s->n_splits >= s->graph_size)
                return LM_ERR_FULL;
            cur = &s->splits[s->n_splits++];
            *cur = (struct split){.backend = b, .first = bg->n_nodes, .first_copy = s->n_copies};
        }
        lm_status st = add_copies(s, cur, n);
        if (st)
            return st;
        if (bg->n_nodes >= bg->size)
            return LM_ERR_FULL;
        bg->nodes[bg->n_nodes++] = n;
        cur->n++;
    }
    return LM_OK;
}

/* ---- step 4: allocation ---- */

static bool in_sched_buffer(struct lm_sched *s, const struct lm_tensor *t)
{
    for (int b = 0; b < s->n_backends; b++)
        if (t->buffer && t->buffer == lm_gallocr_buffer(s->galloc[b]))
            return true;
    return false;
}

/* Forget placements from an earlier allocation of the same graph, so that
 * assignment does not mistake them for preallocated memory. */
static void forget_placements(struct lm_sched *s, struct lm_graph *g)
{
    for (int i = 0; i < g->n_nodes + g->n_leafs; i++) {
        struct lm_tensor *t = i < g->n_nodes ? g->nodes[i] : g->leafs[i - g->n_nodes];
        if (in_sched_buffer(s, t)) {
            t->data = NULL;
            t->buffer = NULL;
        }
    }
}

static lm_status allocate(struct lm_sched *s, struct lm_graph *g, bool reserve_only)
{
    lm_status st = LM_OK;
    for (int b = 0; b < s->n_backends && !st; b++) {
        if (reserve_only)
            st = lm_gallocr_reserve_keep(s->galloc[b], s->bgraph[b], s->keep[b], s->n_keep[b]);
        else
            st = lm_gallocr_alloc_graph_keep(s->galloc[b], s->bgraph[b], s->keep[b], s->n_keep[b]);
    }
    for (int i = 0; i < g->n_nodes + g->n_leafs && !st && !reserve_only; i++) {
        struct lm_tensor *t = i < g->n_nodes ? g->nodes[i] : g->leafs[i - g->n_nodes];
        if (t->view_src && !t->data)
            st = lm_view_init(t);
    }
    return st;
}

static lm_status plan(struct lm_sched *s, struct lm_graph *g, bool reserve_only)
{
    if (!s || !g)
        return LM_ERR_INVALID_ARG;
    if (g->n_nodes > s->graph_size || g->n_leafs > s->graph_size)
        return LM_ERR_FULL;
    lm_sched_reset(s); /* keeps forced assignments */
    forget_placements(s, g);
    lm_status st = assign_nodes(s, g);
    if (!st)
        st = build_splits(s, g);
    if (!st)
        st = allocate(s, g, reserve_only);
    if (st) {
        LM_LOG_ERR("sched: cannot allocate the graph: %s\n", lm_status_str(st));
        lm_sched_reset(s);
        return st;
    }
    s->allocated = reserve_only ? NULL : g;
    return LM_OK;
}

lm_status lm_sched_alloc_graph(struct lm_sched *s, struct lm_graph *g) { return plan(s, g, false); }

lm_status lm_sched_reserve(struct lm_sched *s, struct lm_graph *g)
{
    lm_status st = plan(s, g, true);
    lm_sched_reset(s);
    return st;
}

/* ---- step 5: compute ---- */

/* Copy src (any strides, any buffer) into the contiguous tensor dst, an
 * input copy of backend be. A contiguous source in host memory goes through
 * be's asynchronous upload when it has one: queued on its stream ahead of the
 * split's graph (the per-token inputs of a GPU decode, each a synchronous
 * copy otherwise); compute_range synchronizes be before anything else runs,
 * so the source is not rewritten while the copy is pending. */
static lm_status copy_input(lm_backend_t be, const struct lm_tensor *src, struct lm_tensor *dst)
{
    if (lm_is_contiguous(src) && be->iface.set_tensor_async && src->buffer && lm_buffer_is_host(src->buffer) &&
        src->type == dst->type && lm_nbytes(src) == lm_nbytes(dst)) {
        if (lm_nbytes(src))
            be->iface.set_tensor_async(be, dst, src->data, 0, lm_nbytes(src));
        return LM_OK;
    }
    if (lm_is_contiguous(src))
        return lm_tensor_copy(src, dst);
    size_t span = lm_nbytes(src);
    uint8_t *tmp = malloc(span ? span : 1);
    uint8_t *out = malloc(lm_nbytes(dst) ? lm_nbytes(dst) : 1);
    lm_status st = (!tmp || !out) ? LM_ERR_NOMEM : lm_tensor_get(src, tmp, 0, span);
    if (!st) {
        size_t row = lm_row_size(src->type, src->ne[0]);
        size_t esz = lm_type_size(src->type);
        bool rows_packed = src->nb[0] == esz || lm_type_blck(src->type) > 1;
        uint8_t *o = out;
        for (int64_t i3 = 0; i3 < src->ne[3]; i3++)
            for (int64_t i2 = 0; i2 < src->ne[2]; i2++)
                for (int64_t i1 = 0; i1 < src->ne[1]; i1++) {
                    const uint8_t *r = tmp + i1 * src->nb[1] + i2 * src->nb[2] + i3 * src->nb[3];
                    if (rows_packed) {
                        memcpy(o, r, row);
                        o += row;
                    } else {
                        for (int64_t i0 = 0; i0 < src->ne[0]; i0++, o += esz)
                            memcpy(o, r + i0 * src->nb[0], esz);
                    }
                }
        st = lm_tensor_set(dst, out, 0, lm_nbytes(dst));
    }
    free(tmp);
    free(out);
    return st;
}

/* Compute nodes [first, first + n) of backend b's node list as one graph. */
static lm_status compute_range(struct lm_sched *s, int b, int first, int n)
{
    struct lm_graph *bg = s->bgraph[b];
    struct lm_graph sub = {
        .size = n,
        .n_nodes = n,
        .nodes = bg->nodes + first,
        .leafs = bg->leafs,
        .n_leafs = 0,
    };
    lm_status st = lm_backend_graph_compute(s->backends[b], &sub);
    lm_backend_synchronize(s->backends[b]);
    return st;
}

/* A split under an observer: computed in pieces, each ending at a node the
 * observer wants, which it then sees before the next piece runs. */
static lm_status compute_observed(struct lm_sched *s, const struct split *sp)
{
    struct lm_graph *bg = s->bgraph[sp->backend];
    int start = sp->first, end = sp->first + sp->n;
    lm_status st = LM_OK;
    for (int i = start; i < end && !st; i++) {
        struct lm_tensor *n = bg->nodes[i];
        if (s->want && !s->want(n, s->observe_user))
            continue;
        st = compute_range(s, sp->backend, start, i + 1 - start);
        if (!st)
            st = s->observe(n, s->observe_user);
        start = i + 1;
    }
    if (!st && start < end)
        st = compute_range(s, sp->backend, start, end - start);
    return st;
}

lm_status lm_sched_graph_compute(struct lm_sched *s, struct lm_graph *g)
{
    lm_status st = LM_OK;
    if (s->allocated != g)
        st = lm_sched_alloc_graph(s, g);
    for (int i = 0; i < s->n_splits && !st; i++) {
        struct split *sp = &s->splits[i];
        for (int k = sp->first_copy; k < sp->first_copy + sp->n_copies && !st; k++)
            st = copy_input(s->backends[sp->backend], s->copies[k].src, s->copies[k].copy);
        if (st)
            break;
        st = s->observe ? compute_observed(s, sp) : compute_range(s, sp->backend, sp->first, sp->n);
    }
    return st;
}
