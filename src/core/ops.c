/* ops.c - op constructors: result tensors and parameters, checked with the
 * op rules (core/op_rules.c).
 *
 * Nothing is computed here. Every constructor returns NULL without touching
 * the arena when a source is NULL (an earlier error is already recorded), and
 * records LM_ERR_SHAPE with the rule's message when shapes, types or
 * parameters do not fit. A compute op's node is described on the stack first
 * and checked before any arena memory is taken; a view is checked once made.
 * The checks of a constructor's own arguments (permute axes, reshape sizes,
 * ROPE's parameter block, TOP_K's k) stay here.
 */
#include <stdio.h>
#include <string.h>

#include "core/internal.h"
#include "core/op_rules.h"
#include "core/tensor.h"

static const char *const unary_names[LM_UNARY_COUNT] = {
    [LM_UNARY_SILU] = "SILU", [LM_UNARY_GELU] = "GELU", [LM_UNARY_RELU] = "RELU",
    [LM_UNARY_NEG] = "NEG",   [LM_UNARY_TANH] = "TANH",
};

const char *lm_unary_name(enum lm_unary_op op) { return (unsigned)op < LM_UNARY_COUNT ? unary_names[op] : "?"; }

/* Arena of a tensor is not stored in it; constructors take ctx explicitly. */

#define NEED(ctx, cond, ...)                                                                                      \
    do {                                                                                                          \
        if (!(cond)) {                                                                                            \
            lm_ctx_fail((ctx), LM_ERR_SHAPE, __VA_ARGS__);                                                        \
            return NULL;                                                                                          \
        }                                                                                                         \
    } while (0)

#define SHAPE_FMT "[%lld,%lld,%lld,%lld]"
#define SHAPE_ARGS(t) (long long)(t)->ne[0], (long long)(t)->ne[1], (long long)(t)->ne[2], (long long)(t)->ne[3]

/* Check t with the op rules; on a refusal record LM_ERR_SHAPE with the rule's message. */
static bool rules_ok(struct lm_ctx *ctx, const struct lm_tensor *t)
{
    char why[256];
    if (lm_op_check(t, why, sizeof why))
        return true;
    lm_ctx_fail(ctx, LM_ERR_SHAPE, "%s", why);
    return false;
}

/* A node description on the stack: op with sources s0, s1, a contiguous
 * result of type `type` and shape ne (op_params and more sources are set by
 * the caller). Nothing is allocated. */
static struct lm_tensor node(enum lm_op op, enum lm_type type, const int64_t ne[4], struct lm_tensor *s0,
                             struct lm_tensor *s1)
{
    struct lm_tensor p;
    memset(&p, 0, sizeof p);
    p.type = type;
    memcpy(p.ne, ne, sizeof p.ne);
    if (lm_type_valid(type)) {
        p.nb[0] = lm_type_size(type);
        p.nb[1] = lm_row_size(type, ne[0]);
        p.nb[2] = p.nb[1] * (size_t)ne[1];
        p.nb[3] = p.nb[2] * (size_t)ne[2];
    }
    p.op = op;
    p.src[0] = s0;
    p.src[1] = s1;
    return p;
}

static struct lm_tensor node4(enum lm_op op, enum lm_type type, int64_t n0, int64_t n1, int64_t n2, int64_t n3,
                              struct lm_tensor *s0, struct lm_tensor *s1)
{
    const int64_t ne[4] = {n0, n1, n2, n3};
    return node(op, type, ne, s0, s1);
}

static struct lm_tensor *make_view(struct lm_ctx *ctx, struct lm_tensor *a, enum lm_op op, const int64_t ne[4],
                                   const size_t nb[4], size_t offset, const int32_t *params, size_t params_size);

/* Build the node p describes once the op rules accept it: a new tensor of p's
 * type and shape, or, when over is non-NULL, a view of `over` with its layout
 * (in-place results and CPY, whose p has over's type, shape and strides). */
static struct lm_tensor *build(struct lm_ctx *ctx, const struct lm_tensor *p, struct lm_tensor *over)
{
    if (!rules_ok(ctx, p))
        return NULL;
    struct lm_tensor *t = over ? make_view(ctx, over, LM_OP_VIEW, over->ne, over->nb, 0, NULL, 0)
                               : lm_tensor_make(ctx, p->type, p->ne, NULL, 0);
    if (!t)
        return NULL;
    t->op = p->op;
    memcpy(t->op_params, p->op_params, sizeof t->op_params);
    memcpy(t->src, p->src, sizeof t->src);
    return t;
}

/* p as a node whose result is over itself (type, shape, strides). */
static struct lm_tensor node_over(enum lm_op op, const struct lm_tensor *over, struct lm_tensor *s0,
                                  struct lm_tensor *s1)
{
    struct lm_tensor p = node(op, over->type, over->ne, s0, s1);
    memcpy(p.nb, over->nb, sizeof p.nb);
    return p;
}

/* ---- views ---- */

/* A view tensor of a with shape ne, strides nb (nb[0] = type size), at offset,
 * with op_params from params; checked with the op rules (the view must lie
 * inside the root tensor's memory). */
static struct lm_tensor *make_view(struct lm_ctx *ctx, struct lm_tensor *a, enum lm_op op, const int64_t ne[4],
                                   const size_t nb[4], size_t offset, const int32_t *params, size_t params_size)
{
    struct lm_tensor *t = lm_tensor_make(ctx, a->type, ne, a, offset);
    if (!t)
        return NULL;
    memcpy(t->nb, nb, sizeof t->nb);
    t->op = op;
    t->src[0] = a;
    if (params)
        memcpy(t->op_params, params, params_size);
    return rules_ok(ctx, t) ? t : NULL;
}

static struct lm_tensor *reshape(struct lm_ctx *ctx, struct lm_tensor *a, int64_t n0, int64_t n1, int64_t n2,
                                 int64_t n3)
{
    if (!a)
        return NULL;
    NEED(ctx, lm_is_contiguous(a), "reshape of a non-contiguous tensor '%s'", a->name);
    NEED(ctx, n0 >= 0 && n1 >= 0 && n2 >= 0 && n3 >= 0 && n0 * n1 * n2 * n3 == lm_nelements(a),
         "reshape " SHAPE_FMT " to [%lld,%lld,%lld,%lld]: element counts differ", SHAPE_ARGS(a), (long long)n0,
         (long long)n1, (long long)n2, (long long)n3);
    NEED(ctx, n0 % lm_type_blck(a->type) == 0, "reshape: ne0 not a multiple of the block size");
    const int64_t ne[4] = {n0, n1, n2, n3};
    size_t nb[4];
    nb[0] = lm_type_size(a->type);
    nb[1] = lm_row_size(a->type, n0);
    nb[2] = nb[1] * (size_t)n1;
    nb[3] = nb[2] * (size_t)n2;
    return make_view(ctx, a, LM_OP_RESHAPE, ne, nb, 0, NULL, 0);
}

struct lm_tensor *lm_reshape_1d(struct lm_ctx *ctx, struct lm_tensor *a, int64_t n0)
{
    return reshape(ctx, a, n0, 1, 1, 1);
}
struct lm_tensor *lm_reshape_2d(struct lm_ctx *ctx, struct lm_tensor *a, int64_t n0, int64_t n1)
{
    return reshape(ctx, a, n0, n1, 1, 1);
}
struct lm_tensor *lm_reshape_3d(struct lm_ctx *ctx, struct lm_tensor *a, int64_t n0, int64_t n1, int64_t n2)
{
    return reshape(ctx, a, n0, n1, n2, 1);
}
struct lm_tensor *lm_reshape_4d(struct lm_ctx *ctx, struct lm_tensor *a, int64_t n0, int64_t n1, int64_t n2,
                                int64_t n3)
{
    return reshape(ctx, a, n0, n1, n2, n3);
}

struct lm_tensor *lm_view_4d(struct lm_ctx *ctx, struct lm_tensor *a, int64_t n0, int64_t n1, int64_t n2, int64_t n3,
                             size_t nb1, size_t nb2, size_t nb3, size_t offset)
{
    if (!a)
        return NULL;
    NEED(ctx, n0 >= 0 && n1 >= 0 && n2 >= 0 && n3 >= 0, "view with a negative dimension");
    NEED(ctx, n0 % lm_type_blck(a->type) == 0, "view: ne0 not a multiple of the block size");
    const int64_t ne[4] = {n0, n1, n2, n3};
    const size_t nb[4] = {lm_type_size(a->type), nb1, nb2, nb3};
    return make_view(ctx, a, LM_OP_VIEW, ne, nb, offset, NULL, 0);
}

struct lm_tensor *lm_view_1d(struct lm_ctx *ctx, struct lm_tensor *a, int64_t n0, size_t offset)
{
    size_t rs = a ? lm_row_size(a->type, n0) : 0;
    return lm_view_4d(ctx, a, n0, 1, 1, 1, rs, rs, rs, offset);
}

struct lm_tensor *lm_view_2d(struct lm_ctx *ctx, struct lm_tensor *a, int64_t n0, int64_t n1, size_t nb1,
                             size_t offset)
{
    return lm_view_4d(ctx, a, n0, n1, 1, 1, nb1, nb1 * (size_t)n1, nb1 * (size_t)n1, offset);
}

struct lm_tensor *lm_view_3d(struct lm_ctx *ctx, struct lm_tensor *a, int64_t n0, int64_t n1, int64_t n2, size_t nb1,
                             size_t nb2, size_t offset)
{
    return lm_view_4d(ctx, a, n0, n1, n2, 1, nb1, nb2, nb2 * (size_t)n2, offset);
}

struct lm_tensor *lm_permute(struct lm_ctx *ctx, struct lm_tensor *a, int ax0, int ax1, int ax2, int ax3)
{
    if (!a)
        return NULL;
    const int ax[4] = {ax0, ax1, ax2, ax3};
    int seen = 0;
    for (int i = 0; i < 4; i++) {
        NEED(ctx, ax[i] >= 0 && ax[i] < 4, "permute axis %d out of range", ax[i]);
        seen |= 1 << ax[i];
    }
    NEED(ctx, seen == 15, "permute axes are not a permutation");
    int64_t ne[4];
    size_t nb[4];
    for (int i = 0; i < 4; i++) {
        ne[ax[i]] = a->ne[i];
        nb[ax[i]] = a->nb[i];
    }
    if (lm_type_blck(a->type) != 1 && ax[0] != 0) {
        lm_ctx_fail(ctx, LM_ERR_SHAPE, "permute of a quantized tensor must keep dim 0");
        return NULL;
    }
    return make_view(ctx, a, LM_OP_PERMUTE, ne, nb, 0, ax, sizeof ax);
}

struct lm_tensor *lm_transpose(struct lm_ctx *ctx, struct lm_tensor *a)
{
    struct lm_tensor *t = lm_permute(ctx, a, 1, 0, 2, 3);
    if (t)
        t->op = LM_OP_TRANSPOSE;
    return t;
}

/* ---- element-wise ---- */

static struct lm_tensor *binary(struct lm_ctx *ctx, enum lm_op op, struct lm_tensor *a, struct lm_tensor *b,
                                bool inplace)
{
    if (!a || !b)
        return NULL;
    struct lm_tensor p = inplace ? node_over(op, a, a, b) : node(op, LM_TYPE_F32, a->ne, a, b);
    return build(ctx, &p, inplace ? a : NULL);
}

struct lm_tensor *lm_add(struct lm_ctx *ctx, struct lm_tensor *a, struct lm_tensor *b)
{
    return binary(ctx, LM_OP_ADD, a, b, false);
}
struct lm_tensor *lm_mul(struct lm_ctx *ctx, struct lm_tensor *a, struct lm_tensor *b)
{
    return binary(ctx, LM_OP_MUL, a, b, false);
}
struct lm_tensor *lm_div(struct lm_ctx *ctx, struct lm_tensor *a, struct lm_tensor *b)
{
    return binary(ctx, LM_OP_DIV, a, b, false);
}
struct lm_tensor *lm_add_inplace(struct lm_ctx *ctx, struct lm_tensor *a, struct lm_tensor *b)
{
    return binary(ctx, LM_OP_ADD, a, b, true);
}
struct lm_tensor *lm_mul_inplace(struct lm_ctx *ctx, struct lm_tensor *a, struct lm_tensor *b)
{
    return binary(ctx, LM_OP_MUL, a, b, true);
}

/* A one-source F32 op of a's shape with n_params (0..2) f32 op_params p0, p1. */
static struct lm_tensor *unary_f32(struct lm_ctx *ctx, enum lm_op op, struct lm_tensor *a, int n_params, float p0,
                                   float p1)
{
    if (!a)
        return NULL;
    struct lm_tensor p = node(op, LM_TYPE_F32, a->ne, a, NULL);
    if (n_params > 0)
        lm_set_op_f32(&p, 0, p0);
    if (n_params > 1)
        lm_set_op_f32(&p, 1, p1);
    return build(ctx, &p, NULL);
}

struct lm_tensor *lm_scale(struct lm_ctx *ctx, struct lm_tensor *a, float s)
{
    return unary_f32(ctx, LM_OP_SCALE, a, 1, s, 0.0f);
}

struct lm_tensor *lm_sqr(struct lm_ctx *ctx, struct lm_tensor *a) { return unary_f32(ctx, LM_OP_SQR, a, 0, 0, 0); }
struct lm_tensor *lm_sqrt(struct lm_ctx *ctx, struct lm_tensor *a) { return unary_f32(ctx, LM_OP_SQRT, a, 0, 0, 0); }

struct lm_tensor *lm_clamp(struct lm_ctx *ctx, struct lm_tensor *a, float lo, float hi)
{
    return unary_f32(ctx, LM_OP_CLAMP, a, 2, lo, hi);
}

struct lm_tensor *lm_unary(struct lm_ctx *ctx, struct lm_tensor *a, enum lm_unary_op op)
{
    if (!a)
        return NULL;
    struct lm_tensor p = node(LM_OP_UNARY, LM_TYPE_F32, a->ne, a, NULL);
    lm_set_op_i32(&p, 0, (int32_t)op);
    return build(ctx, &p, NULL);
}

struct lm_tensor *lm_silu(struct lm_ctx *ctx, struct lm_tensor *a) { return lm_unary(ctx, a, LM_UNARY_SILU); }
struct lm_tensor *lm_gelu(struct lm_ctx *ctx, struct lm_tensor *a) { return lm_unary(ctx, a, LM_UNARY_GELU); }
struct lm_tensor *lm_relu(struct lm_ctx *ctx, struct lm_tensor *a) { return lm_unary(ctx, a, LM_UNARY_RELU); }

struct lm_tensor *lm_sum_rows(struct lm_ctx *ctx, struct lm_tensor *a)
{
    if (!a)
        return NULL;
    struct lm_tensor p = node4(LM_OP_SUM_ROWS, LM_TYPE_F32, 1, a->ne[1], a->ne[2], a->ne[3], a, NULL);
    return build(ctx, &p, NULL);
}

struct lm_tensor *lm_norm(struct lm_ctx *ctx, struct lm_tensor *a, float eps)
{
    return unary_f32(ctx, LM_OP_NORM, a, 1, eps, 0.0f);
}
struct lm_tensor *lm_rms_norm(struct lm_ctx *ctx, struct lm_tensor *a, float eps)
{
    return unary_f32(ctx, LM_OP_RMS_NORM, a, 1, eps, 0.0f);
}

/* ---- matrix products and gathers ---- */

struct lm_tensor *lm_mul_mat(struct lm_ctx *ctx, struct lm_tensor *a, struct lm_tensor *b)
{
    if (!a || !b)
        return NULL;
    struct lm_tensor p = node4(LM_OP_MUL_MAT, LM_TYPE_F32, a->ne[1], b->ne[1], b->ne[2], b->ne[3], a, b);
    return build(ctx, &p, NULL);
}

struct lm_tensor *lm_mul_mat_id(struct lm_ctx *ctx, struct lm_tensor *as, struct lm_tensor *b, struct lm_tensor *ids)
{
    if (!as || !b || !ids)
        return NULL;
    struct lm_tensor p = node4(LM_OP_MUL_MAT_ID, LM_TYPE_F32, as->ne[1], ids->ne[0], ids->ne[1], 1, as, b);
    p.src[2] = ids;
    return build(ctx, &p, NULL);
}

struct lm_tensor *lm_get_rows(struct lm_ctx *ctx, struct lm_tensor *a, struct lm_tensor *ids)
{
    if (!a || !ids)
        return NULL;
    struct lm_tensor p = node4(LM_OP_GET_ROWS, LM_TYPE_F32, a->ne[0], ids->ne[0], ids->ne[1], ids->ne[2], a, ids);
    return build(ctx, &p, NULL);
}

/* ---- copies and layout ---- */

struct lm_tensor *lm_cpy(struct lm_ctx *ctx, struct lm_tensor *a, struct lm_tensor *b)
{
    if (!a || !b)
        return NULL;
    struct lm_tensor p = node_over(LM_OP_CPY, b, a, b);
    struct lm_tensor *t = build(ctx, &p, b);
    if (t)
        lm_format_name(t, "%.24s (copy of %.24s)", b->name, a->name);
    return t;
}

static struct lm_tensor *set_rows(struct lm_ctx *ctx, struct lm_tensor *b, struct lm_tensor *a, struct lm_tensor *ids,
                                  int32_t cols)
{
    if (!a || !b || !ids)
        return NULL;
    struct lm_tensor p = node_over(LM_OP_SET_ROWS, b, a, b);
    p.src[2] = ids;
    lm_set_op_i32(&p, 0, cols);
    struct lm_tensor *t = build(ctx, &p, b);
    if (t)
        lm_format_name(t, "%.24s (%s of %.24s)", b->name, cols ? "columns" : "rows", a->name);
    return t;
}

struct lm_tensor *lm_set_rows(struct lm_ctx *ctx, struct lm_tensor *b, struct lm_tensor *a, struct lm_tensor *ids)
{
    return set_rows(ctx, b, a, ids, 0);
}

struct lm_tensor *lm_set_cols(struct lm_ctx *ctx, struct lm_tensor *b, struct lm_tensor *a, struct lm_tensor *ids)
{
    return set_rows(ctx, b, a, ids, 1);
}

struct lm_tensor *lm_cont(struct lm_ctx *ctx, struct lm_tensor *a)
{
    if (!a)
        return NULL;
    struct lm_tensor p = node(LM_OP_CONT, a->type, a->ne, a, NULL);
    return build(ctx, &p, NULL);
}

struct lm_tensor *lm_cont_2d(struct lm_ctx *ctx, struct lm_tensor *a, int64_t n0, int64_t n1)
{
    if (!a)
        return NULL;
    /* this constructor's own limit (the CONT rule lets a block type keep its shape) */
    NEED(ctx, lm_type_blck(a->type) == 1, "CONT_2D: only for non-block types");
    struct lm_tensor p = node4(LM_OP_CONT, a->type, n0, n1, 1, 1, a, NULL);
    return build(ctx, &p, NULL);
}

struct lm_tensor *lm_repeat(struct lm_ctx *ctx, struct lm_tensor *a, struct lm_tensor *b)
{
    if (!a || !b)
        return NULL;
    struct lm_tensor p = node(LM_OP_REPEAT, LM_TYPE_F32, b->ne, a, NULL);
    return build(ctx, &p, NULL);
}

struct lm_tensor *lm_concat(struct lm_ctx *ctx, struct lm_tensor *a, struct lm_tensor *b, int dim)
{
    if (!a || !b)
        return NULL;
    int64_t ne[4];
    for (int i = 0; i < 4; i++)
        ne[i] = a->ne[i] + (i == dim ? b->ne[i] : 0);
    struct lm_tensor p = node(LM_OP_CONCAT, LM_TYPE_F32, ne, a, b);
    lm_set_op_i32(&p, 0, dim);
    return build(ctx, &p, NULL);
}

/* ---- attention pieces ---- */

struct lm_tensor *lm_diag_mask_inf(struct lm_ctx *ctx, struct lm_tensor *a, int n_past)
{
    if (!a)
        return NULL;
    struct lm_tensor p = node(LM_OP_DIAG_MASK_INF, LM_TYPE_F32, a->ne, a, NULL);
    lm_set_op_i32(&p, 0, n_past);
    return build(ctx, &p, NULL);
}

struct lm_tensor *lm_soft_max_ext(struct lm_ctx *ctx, struct lm_tensor *a, struct lm_tensor *mask, float scale,
                                  float max_bias)
{
    if (!a)
        return NULL;
    struct lm_tensor p = node(LM_OP_SOFT_MAX, LM_TYPE_F32, a->ne, a, mask);
    lm_set_op_f32(&p, 0, scale);
    lm_set_op_f32(&p, 1, max_bias);
    return build(ctx, &p, NULL);
}

struct lm_tensor *lm_soft_max(struct lm_ctx *ctx, struct lm_tensor *a)
{
    return lm_soft_max_ext(ctx, a, NULL, 1.0f, 0.0f);
}

static struct lm_tensor *attn(struct lm_ctx *ctx, struct lm_tensor *q, struct lm_tensor *k, struct lm_tensor *v,
                              struct lm_tensor *mask, float scale, float max_bias, bool v_rows)
{
    if (!q || !k || !v)
        return NULL;
    struct lm_tensor p = node4(LM_OP_ATTN, LM_TYPE_F32, v_rows ? v->ne[0] : v->ne[1], q->ne[2], q->ne[1], 1, q, k);
    p.src[2] = v;
    p.src[3] = mask;
    lm_set_op_f32(&p, 0, scale);
    lm_set_op_f32(&p, 1, max_bias);
    lm_set_op_i32(&p, 2, v_rows);
    return build(ctx, &p, NULL);
}

struct lm_tensor *lm_attn(struct lm_ctx *ctx, struct lm_tensor *q, struct lm_tensor *k, struct lm_tensor *v,
                          struct lm_tensor *mask, float scale, float max_bias)
{
    return attn(ctx, q, k, v, mask, scale, max_bias, false);
}

struct lm_tensor *lm_attn_vrows(struct lm_ctx *ctx, struct lm_tensor *q, struct lm_tensor *k, struct lm_tensor *v,
                                struct lm_tensor *mask, float scale, float max_bias)
{
    return attn(ctx, q, k, v, mask, scale, max_bias, true);
}

/* ROPE and ROPE_BACK: a rotated with pos and the parameter block p. */
static struct lm_tensor *rope(struct lm_ctx *ctx, enum lm_op op, struct lm_tensor *a, struct lm_tensor *pos,
                              const struct lm_rope_params *p)
{
    if (!a || !pos)
        return NULL;
    NEED(ctx, p != NULL, "%s: no parameters", lm_op_name(op));
    struct lm_tensor n = node(op, LM_TYPE_F32, a->ne, a, pos);
    lm_set_op_i32(&n, 0, p->n_dims);
    lm_set_op_i32(&n, 1, p->mode);
    lm_set_op_i32(&n, 2, p->n_ctx_orig);
    lm_set_op_f32(&n, 3, p->freq_base);
    lm_set_op_f32(&n, 4, p->freq_scale);
    lm_set_op_f32(&n, 5, p->ext_factor);
    lm_set_op_f32(&n, 6, p->attn_factor);
    lm_set_op_f32(&n, 7, p->beta_fast);
    lm_set_op_f32(&n, 8, p->beta_slow);
    return build(ctx, &n, NULL);
}

struct lm_tensor *lm_rope(struct lm_ctx *ctx, struct lm_tensor *a, struct lm_tensor *pos, const struct lm_rope_params *p)
{
    return rope(ctx, LM_OP_ROPE, a, pos, p);
}

struct lm_tensor *lm_argsort(struct lm_ctx *ctx, struct lm_tensor *a, enum lm_sort_order order)
{
    if (!a)
        return NULL;
    struct lm_tensor p = node(LM_OP_ARGSORT, LM_TYPE_I32, a->ne, a, NULL);
    lm_set_op_i32(&p, 0, (int32_t)order);
    return build(ctx, &p, NULL);
}

struct lm_tensor *lm_top_k(struct lm_ctx *ctx, struct lm_tensor *a, int k)
{
    if (!a)
        return NULL;
    NEED(ctx, k > 0 && k <= a->ne[0], "TOP_K: k %d with row length %lld", k, (long long)a->ne[0]);
    struct lm_tensor *s = lm_argsort(ctx, a, LM_SORT_DESC);
    if (!s)
        return NULL;
    return lm_view_4d(ctx, s, k, s->ne[1], s->ne[2], s->ne[3], s->nb[1], s->nb[2], s->nb[3], 0);
}

/* ---- training ops ---- */

struct lm_tensor *lm_get_rows_back(struct lm_ctx *ctx, struct lm_tensor *dy, struct lm_tensor *ids,
                                   struct lm_tensor *like)
{
    if (!dy || !ids || !like)
        return NULL;
    struct lm_tensor p = node4(LM_OP_GET_ROWS_BACK, LM_TYPE_F32, like->ne[0], like->ne[1], 1, 1, dy, ids);
    p.src[2] = like;
    return build(ctx, &p, NULL);
}

struct lm_tensor *lm_repeat_back(struct lm_ctx *ctx, struct lm_tensor *a, struct lm_tensor *like)
{
    if (!a || !like)
        return NULL;
    /* like gives the shape only and is no source (as REPEAT's b) */
    struct lm_tensor p = node(LM_OP_REPEAT_BACK, LM_TYPE_F32, like->ne, a, NULL);
    return build(ctx, &p, NULL);
}

/* A node of sources a, b (result of a's shape) with one 32-bit parameter. */
static struct lm_tensor *pair_op(struct lm_ctx *ctx, enum lm_op op, struct lm_tensor *a, struct lm_tensor *b,
                                 int32_t i0, float f0, bool is_f32)
{
    if (!a || !b)
        return NULL;
    struct lm_tensor p = node(op, LM_TYPE_F32, a->ne, a, b);
    if (is_f32)
        lm_set_op_f32(&p, 0, f0);
    else
        lm_set_op_i32(&p, 0, i0);
    return build(ctx, &p, NULL);
}

struct lm_tensor *lm_rms_norm_back(struct lm_ctx *ctx, struct lm_tensor *x, struct lm_tensor *dy, float eps)
{
    return pair_op(ctx, LM_OP_RMS_NORM_BACK, x, dy, 0, eps, true);
}

struct lm_tensor *lm_rope_back(struct lm_ctx *ctx, struct lm_tensor *dy, struct lm_tensor *pos,
                               const struct lm_rope_params *p)
{
    return rope(ctx, LM_OP_ROPE_BACK, dy, pos, p);
}

struct lm_tensor *lm_soft_max_back(struct lm_ctx *ctx, struct lm_tensor *dy, struct lm_tensor *y, float scale)
{
    return pair_op(ctx, LM_OP_SOFT_MAX_BACK, dy, y, 0, scale, true);
}

struct lm_tensor *lm_unary_back(struct lm_ctx *ctx, struct lm_tensor *x, struct lm_tensor *dy, enum lm_unary_op op)
{
    return pair_op(ctx, LM_OP_UNARY_BACK, x, dy, (int32_t)op, 0.0f, false);
}

struct lm_tensor *lm_cross_entropy_loss(struct lm_ctx *ctx, struct lm_tensor *logits, struct lm_tensor *targets)
{
    if (!logits || !targets)
        return NULL;
    struct lm_tensor p = node4(LM_OP_CROSS_ENTROPY_LOSS, LM_TYPE_F32, 1, 1, 1, 1, logits, targets);
    return build(ctx, &p, NULL);
}

struct lm_tensor *lm_cross_entropy_loss_back(struct lm_ctx *ctx, struct lm_tensor *logits,
                                             struct lm_tensor *targets, struct lm_tensor *dloss)
{
    if (!logits || !targets || !dloss)
        return NULL;
    struct lm_tensor p = node(LM_OP_CROSS_ENTROPY_LOSS_BACK, LM_TYPE_F32, logits->ne, logits, targets);
    p.src[2] = dloss;
    return build(ctx, &p, NULL);
}
