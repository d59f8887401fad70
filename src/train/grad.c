/* grad.c - reverse-mode differentiation of core graphs (see grad.h).
 *
 * Each differentiable op has one rule below, written with the shapes of
 * docs/ops.md. The rules only build nodes: MUL_MAT's gradients are two more
 * MUL_MATs over transposed copies, broadcasts are undone by REPEAT_BACK, and
 * the row ops use their *_BACK op. Gradients flowing into one tensor from
 * several users are summed with ADD in the order the users are visited
 * (reverse graph order), so the graph, and with it the result, is the same on
 * every build.
 */
#include "train/grad.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/op_rules.h"

/* ---- pointer maps (open addressing, linear probing) ---- */

struct pmap {
    size_t cap; /* a power of two, or 0 */
    size_t n;
    const struct lm_tensor **key;
    struct lm_tensor **val;
};

static size_t phash(const void *p, size_t cap)
{
    uint64_t x = (uint64_t)(uintptr_t)p;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return (size_t)x & (cap - 1);
}

static size_t pmap_find(const struct pmap *m, const void *k)
{
    size_t i = phash(k, m->cap);
    while (m->key[i] && m->key[i] != k)
        i = (i + 1) & (m->cap - 1);
    return i;
}

static struct lm_tensor *pmap_get(const struct pmap *m, const void *k)
{
    if (!m->cap)
        return NULL;
    size_t i = pmap_find(m, k);
    return m->key[i] ? m->val[i] : NULL;
}

static bool pmap_has(const struct pmap *m, const void *k)
{
    return m->cap && m->key[pmap_find(m, k)] != NULL;
}

static lm_status pmap_put(struct pmap *m, const struct lm_tensor *k, struct lm_tensor *v)
{
    if ((m->n + 1) * 2 > m->cap) {
        struct pmap g = {.cap = m->cap ? m->cap * 2 : 64};
        g.key = calloc(g.cap, sizeof(*g.key));
        g.val = calloc(g.cap, sizeof(*g.val));
        if (!g.key || !g.val) {
            free(g.key);
            free(g.val);
            return LM_ERR_NOMEM;
        }
        for (size_t i = 0; i < m->cap; i++) {
            if (m->key[i]) {
                size_t j = pmap_find(&g, m->key[i]);
                g.key[j] = m->key[i];
                g.val[j] = m->val[i];
                g.n++;
            }
        }
        free(m->key);
        free(m->val);
        *m = g;
    }
    size_t i = pmap_find(m, k);
    if (!m->key[i])
        m->n++;
    m->key[i] = k;
    m->val[i] = v;
    return LM_OK;
}

static void pmap_free(struct pmap *m)
{
    free(m->key);
    free(m->val);
    memset(m, 0, sizeof(*m));
}

/* ---- the gradient map ---- */

struct lm_grad {
    struct lm_ctx *ctx;
    struct pmap grads;
};

lm_status lm_grad_new(struct lm_ctx *ctx, struct lm_grad **out)
{
    *out = NULL;
    if (!ctx)
        return LM_ERR_INVALID_ARG;
    struct lm_grad *gr = calloc(1, sizeof(*gr));
    if (!gr)
        return LM_ERR_NOMEM;
    gr->ctx = ctx;
    *out = gr;
    return LM_OK;
}

void lm_grad_free(struct lm_grad *gr)
{
    if (!gr)
        return;
    pmap_free(&gr->grads);
    free(gr);
}

struct lm_tensor *lm_grad_get(const struct lm_grad *gr, const struct lm_tensor *t)
{
    return gr ? pmap_get(&gr->grads, t) : NULL;
}

/* Sum g into t's gradient. A NULL g (a failed constructor) leaves the arena's
 * error to be reported at the end. */
static lm_status accumulate(struct lm_grad *gr, const struct lm_tensor *t, struct lm_tensor *g)
{
    if (!g)
        return lm_ctx_status(gr->ctx) ? lm_ctx_status(gr->ctx) : LM_ERR_SHAPE;
    struct lm_tensor *old = pmap_get(&gr->grads, t);
    return pmap_put(&gr->grads, t, old ? lm_add(gr->ctx, old, g) : g);
}

/* ---- rules ---- */

static struct lm_tensor *contig(struct lm_ctx *ctx, struct lm_tensor *t)
{
    return !t || lm_is_contiguous(t) ? t : lm_cont(ctx, t);
}

/* g (contiguous) seen with like's shape, flat order kept. */
static struct lm_tensor *reshape_as(struct lm_ctx *ctx, struct lm_tensor *g, const struct lm_tensor *like)
{
    if (!g || lm_same_shape(g, like))
        return g;
    return lm_reshape_4d(ctx, contig(ctx, g), like->ne[0], like->ne[1], like->ne[2], like->ne[3]);
}

/* g summed down to like's shape where like was broadcast. */
static struct lm_tensor *sum_to(struct lm_ctx *ctx, struct lm_tensor *g, struct lm_tensor *like)
{
    if (!g || lm_same_shape(g, like))
        return g;
    return lm_repeat_back(ctx, g, like);
}

static struct lm_rope_params rope_params_of(const struct lm_tensor *t)
{
    return (struct lm_rope_params){
        .n_dims = lm_get_op_i32(t, 0),
        .mode = lm_get_op_i32(t, 1),
        .n_ctx_orig = lm_get_op_i32(t, 2),
        .freq_base = lm_get_op_f32(t, 3),
        .freq_scale = lm_get_op_f32(t, 4),
        .ext_factor = lm_get_op_f32(t, 5),
        .attn_factor = lm_get_op_f32(t, 6),
        .beta_fast = lm_get_op_f32(t, 7),
        .beta_slow = lm_get_op_f32(t, 8),
    };
}

/* MUL_MAT t = a x b (docs/ops.md): out[m, n] = sum_k a[k, m] b[k, n] per
 * slice, a broadcast over b's dims 2 (B2 = r A2, slice i of b reads slice
 * i / r of a). Gradients: db = a^T-product, da = b x G^T, summed over the
 * r slices that shared an a slice. */
static lm_status rule_mul_mat(struct lm_grad *gr, const struct lm_tensor *t, struct lm_tensor *G, bool need_a,
                              bool need_b)
{
    struct lm_ctx *ctx = gr->ctx;
    struct lm_tensor *a = t->src[0], *b = t->src[1];
    if ((need_b || need_a) && (a->type != LM_TYPE_F32 || a->ne[3] != b->ne[3])) {
        lm_ctx_fail(ctx, LM_ERR_UNSUPPORTED, "grad: MUL_MAT needs an F32 first operand without dim-3 broadcast");
        return LM_ERR_UNSUPPORTED;
    }
    lm_status st = LM_OK;
    if (need_b) /* [M, K, A2, A3] x G[M, N, B2, B3] -> [K, N, B2, B3] */
        st = accumulate(gr, b, lm_mul_mat(ctx, lm_cont(ctx, lm_transpose(ctx, a)), G));
    if (!st && need_a) {
        /* b^T [N, K, B2, B3] x G^T [N, M, B2, B3] -> [K, M, B2, B3] */
        struct lm_tensor *da = lm_mul_mat(ctx, lm_cont(ctx, lm_transpose(ctx, b)), lm_cont(ctx, lm_transpose(ctx, G)));
        int64_t r = a->ne[2] ? b->ne[2] / a->ne[2] : 1;
        if (da && r > 1) {
            /* slices i2 = j r + s (s < r) all belong to a's slice j */
            struct lm_tensor *d4 = lm_reshape_4d(ctx, da, a->ne[0] * a->ne[1], r, a->ne[2], a->ne[3]);
            struct lm_tensor *like = lm_reshape_4d(ctx, contig(ctx, a), a->ne[0] * a->ne[1], 1, a->ne[2], a->ne[3]);
            da = lm_repeat_back(ctx, d4, like);
        }
        st = accumulate(gr, a, reshape_as(ctx, da, a));
    }
    return st;
}

static lm_status backprop_node(struct lm_grad *gr, const struct pmap *needs, const struct lm_tensor *t,
                               struct lm_tensor *G)
{
    struct lm_ctx *ctx = gr->ctx;
    struct lm_tensor *a = t->src[0], *b = t->src[1];
    bool na = a && pmap_has(needs, a), nb = b && pmap_has(needs, b);
    lm_status st = LM_OK;
    switch (t->op) {
    case LM_OP_ADD:
        if (na)
            st = accumulate(gr, a, sum_to(ctx, G, a));
        if (!st && nb)
            st = accumulate(gr, b, sum_to(ctx, G, b));
        return st;
    case LM_OP_MUL:
        if (na)
            st = accumulate(gr, a, lm_mul(ctx, G, b));
        if (!st && nb)
            st = accumulate(gr, b, sum_to(ctx, lm_mul(ctx, G, a), b));
        return st;
    case LM_OP_SCALE:
        return na ? accumulate(gr, a, lm_scale(ctx, G, lm_get_op_f32(t, 0))) : LM_OK;
    case LM_OP_SQR:
        return na ? accumulate(gr, a, lm_mul(ctx, G, lm_scale(ctx, a, 2.0f))) : LM_OK;
    case LM_OP_UNARY:
        return na ? accumulate(gr, a, lm_unary_back(ctx, contig(ctx, a), contig(ctx, G),
                                                    (enum lm_unary_op)lm_get_op_i32(t, 0)))
                  : LM_OK;
    case LM_OP_SUM_ROWS:
        return na ? accumulate(gr, a, lm_repeat(ctx, G, a)) : LM_OK;
    case LM_OP_RMS_NORM:
        return na ? accumulate(gr, a, lm_rms_norm_back(ctx, contig(ctx, a), contig(ctx, G), lm_get_op_f32(t, 0)))
                  : LM_OK;
    case LM_OP_MUL_MAT:
        return rule_mul_mat(gr, t, G, na, nb);
    case LM_OP_GET_ROWS:
        if (nb)
            break; /* indices have no gradient */
        return na ? accumulate(gr, a, lm_get_rows_back(ctx, G, b, a)) : LM_OK;
    case LM_OP_CONT:
        return na ? accumulate(gr, a, reshape_as(ctx, G, a)) : LM_OK;
    case LM_OP_REPEAT:
        return na ? accumulate(gr, a, lm_repeat_back(ctx, G, a)) : LM_OK;
    case LM_OP_RESHAPE:
        return na ? accumulate(gr, a, reshape_as(ctx, G, a)) : LM_OK;
    case LM_OP_TRANSPOSE:
        return na ? accumulate(gr, a, lm_transpose(ctx, G)) : LM_OK;
    case LM_OP_PERMUTE: {
        if (!na)
            return LM_OK;
        int inv[4];
        for (int k = 0; k < 4; k++)
            inv[lm_get_op_i32(t, k)] = k; /* out.ne[ax_k] = a.ne[k] */
        return accumulate(gr, a, lm_permute(ctx, G, inv[0], inv[1], inv[2], inv[3]));
    }
    case LM_OP_SOFT_MAX:
        if (t->src[1] && pmap_has(needs, t->src[1]))
            break; /* no gradient for the mask */
        return na ? accumulate(gr, a, lm_soft_max_back(ctx, contig(ctx, G), (struct lm_tensor *)t,
                                                       lm_get_op_f32(t, 0)))
                  : LM_OK;
    case LM_OP_ROPE: {
        if (!na)
            return LM_OK;
        struct lm_rope_params p = rope_params_of(t);
        return accumulate(gr, a, lm_rope_back(ctx, contig(ctx, G), b, &p));
    }
    case LM_OP_CROSS_ENTROPY_LOSS:
        if (nb)
            break;
        return na ? accumulate(gr, a, lm_cross_entropy_loss_back(ctx, a, b, G)) : LM_OK;
    default:
        break;
    }
    lm_ctx_fail(ctx, LM_ERR_UNSUPPORTED, "grad: no gradient for op %s", lm_op_name(t->op));
    return LM_ERR_UNSUPPORTED;
}

/* The op descriptor says which ops have a rule in backprop_node (LM_OPF_GRAD);
 * tests/train checks each such op's gradient numerically. */
bool lm_grad_supports(enum lm_op op) { return lm_op_has(op, LM_OPF_GRAD); }

lm_status lm_grad_backward(struct lm_grad *gr, struct lm_graph *fwd, struct lm_tensor *y, struct lm_tensor *dy,
                           struct lm_tensor *const *wrt, int n_wrt)
{
    if (!gr || !fwd || !y || (n_wrt && !wrt) || (!dy && !pmap_get(&gr->grads, y)))
        return LM_ERR_INVALID_ARG;
    if (dy && !lm_same_shape(y, dy)) {
        lm_ctx_fail(gr->ctx, LM_ERR_SHAPE, "grad: dy's shape differs from y's");
        return LM_ERR_SHAPE;
    }
    int iy = -1;
    for (int i = 0; i < fwd->n_nodes; i++)
        if (fwd->nodes[i] == y)
            iy = i;
    if (iy < 0)
        return LM_ERR_INVALID_ARG;

    /* which tensors depend on a wrt tensor (wrt included), and which stop */
    struct pmap needs = {0}, stop = {0};
    lm_status st = LM_OK;
    for (int i = 0; i < n_wrt && !st; i++) {
        st = pmap_put(&needs, wrt[i], wrt[i]);
        if (!st)
            st = pmap_put(&stop, wrt[i], wrt[i]);
    }
    for (int i = 0; i <= iy && !st; i++) {
        const struct lm_tensor *t = fwd->nodes[i];
        for (int s = 0; s < LM_MAX_SRC && t->src[s]; s++)
            if (pmap_has(&needs, t->src[s])) {
                st = pmap_put(&needs, t, (struct lm_tensor *)t);
                break;
            }
    }
    if (!st && dy)
        st = accumulate(gr, y, dy);
    for (int i = iy; i >= 0 && !st; i--) {
        const struct lm_tensor *t = fwd->nodes[i];
        if (pmap_has(&stop, t) || !pmap_has(&needs, t))
            continue;
        struct lm_tensor *G = pmap_get(&gr->grads, t);
        if (G)
            st = backprop_node(gr, &needs, t, G);
    }
    pmap_free(&needs);
    pmap_free(&stop);
    if (!st)
        st = lm_ctx_status(gr->ctx);
    return st;
}
