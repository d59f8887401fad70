/* ops.c - op constructors: shape and type checks, result tensors, parameters.
 *
 * Nothing is computed here. Every constructor returns NULL without touching
 * the arena when a source is NULL (an earlier error is already recorded), and
 * records LM_ERR_SHAPE with a message when shapes or types do not fit.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/internal.h"
#include "core/tensor.h"

static const char *const op_names[LM_OP_COUNT] = {
    [LM_OP_NONE] = "NONE",         [LM_OP_ADD] = "ADD",           [LM_OP_MUL] = "MUL",
    [LM_OP_DIV] = "DIV",           [LM_OP_SCALE] = "SCALE",       [LM_OP_SQR] = "SQR",
    [LM_OP_SQRT] = "SQRT",         [LM_OP_CLAMP] = "CLAMP",       [LM_OP_UNARY] = "UNARY",
    [LM_OP_SUM_ROWS] = "SUM_ROWS", [LM_OP_NORM] = "NORM",         [LM_OP_RMS_NORM] = "RMS_NORM",
    [LM_OP_MUL_MAT] = "MUL_MAT",   [LM_OP_MUL_MAT_ID] = "MUL_MAT_ID", [LM_OP_GET_ROWS] = "GET_ROWS",
    [LM_OP_CPY] = "CPY",           [LM_OP_CONT] = "CONT",         [LM_OP_REPEAT] = "REPEAT",
    [LM_OP_CONCAT] = "CONCAT",     [LM_OP_RESHAPE] = "RESHAPE",   [LM_OP_VIEW] = "VIEW",
    [LM_OP_PERMUTE] = "PERMUTE",   [LM_OP_TRANSPOSE] = "TRANSPOSE", [LM_OP_DIAG_MASK_INF] = "DIAG_MASK_INF",
    [LM_OP_SOFT_MAX] = "SOFT_MAX", [LM_OP_ROPE] = "ROPE",         [LM_OP_ARGSORT] = "ARGSORT",
    [LM_OP_ATTN] = "ATTN",
};

static const char *const unary_names[LM_UNARY_COUNT] = {
    [LM_UNARY_SILU] = "SILU", [LM_UNARY_GELU] = "GELU", [LM_UNARY_RELU] = "RELU",
    [LM_UNARY_NEG] = "NEG",   [LM_UNARY_TANH] = "TANH",
};

const char *lm_op_name(enum lm_op op) { return (unsigned)op < LM_OP_COUNT ? op_names[op] : "?"; }
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

static struct lm_tensor *new_like(struct lm_ctx *ctx, enum lm_type type, const struct lm_tensor *a)
{
    return lm_tensor_make(ctx, type, a->ne, NULL, 0);
}

static struct lm_tensor *new_shape(struct lm_ctx *ctx, enum lm_type type, int64_t n0, int64_t n1, int64_t n2,
                                   int64_t n3)
{
    const int64_t ne[4] = {n0, n1, n2, n3};
    return lm_tensor_make(ctx, type, ne, NULL, 0);
}

static struct lm_tensor *set_op(struct lm_tensor *t, enum lm_op op, struct lm_tensor *s0, struct lm_tensor *s1)
{
    if (!t)
        return NULL;
    t->op = op;
    t->src[0] = s0;
    t->src[1] = s1;
    return t;
}

/* ---- views ---- */

/* A view tensor of a with shape ne, strides nb (nb[0] = type size), at offset. */
static struct lm_tensor *make_view(struct lm_ctx *ctx, struct lm_tensor *a, enum lm_op op, const int64_t ne[4],
                                   const size_t nb[4], size_t offset)
{
    struct lm_tensor *t = lm_tensor_make(ctx, a->type, ne, a, offset);
    if (!t)
        return NULL;
    memcpy(t->nb, nb, sizeof t->nb);
    /* the view must lie inside the root tensor's memory */
    const struct lm_tensor *root = lm_view_root(t);
    size_t need = lm_nbytes(t);
    size_t have = lm_nbytes(root);
    if (lm_nelements(t) > 0 && (t->view_offs > have || need > have - t->view_offs)) {
        lm_ctx_fail(ctx, LM_ERR_SHAPE, "view of %zu bytes at offset %zu exceeds the %zu bytes of '%s'", need,
                    t->view_offs, have, root->name);
        return NULL;
    }
    t->op = op;
    t->src[0] = a;
    return t;
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
    return make_view(ctx, a, LM_OP_RESHAPE, ne, nb, 0);
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
    return make_view(ctx, a, LM_OP_VIEW, ne, nb, offset);
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
    struct lm_tensor *t = make_view(ctx, a, LM_OP_PERMUTE, ne, nb, 0);
    if (t)
        memcpy(t->op_params, ax, sizeof ax);
    return t;
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
    NEED(ctx, a->type == LM_TYPE_F32 && b->type == LM_TYPE_F32, "%s: operands must be f32 (got %s, %s)",
         lm_op_name(op), lm_type_name(a->type), lm_type_name(b->type));
    NEED(ctx, lm_can_repeat(b, a), "%s: " SHAPE_FMT " does not broadcast to " SHAPE_FMT, lm_op_name(op),
         SHAPE_ARGS(b), SHAPE_ARGS(a));
    struct lm_tensor *t;
    if (inplace) {
        t = make_view(ctx, a, LM_OP_VIEW, a->ne, a->nb, 0);
        if (!t)
            return NULL;
    } else {
        t = new_like(ctx, LM_TYPE_F32, a);
    }
    return set_op(t, op, a, b);
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

static struct lm_tensor *unary_f32(struct lm_ctx *ctx, enum lm_op op, struct lm_tensor *a)
{
    if (!a)
        return NULL;
    NEED(ctx, a->type == LM_TYPE_F32, "%s: operand must be f32 (got %s)", lm_op_name(op), lm_type_name(a->type));
    return set_op(new_like(ctx, LM_TYPE_F32, a), op, a, NULL);
}

struct lm_tensor *lm_scale(struct lm_ctx *ctx, struct lm_tensor *a, float s)
{
    struct lm_tensor *t = unary_f32(ctx, LM_OP_SCALE, a);
    if (t)
        lm_set_op_f32(t, 0, s);
    return t;
}

struct lm_tensor *lm_sqr(struct lm_ctx *ctx, struct lm_tensor *a) { return unary_f32(ctx, LM_OP_SQR, a); }
struct lm_tensor *lm_sqrt(struct lm_ctx *ctx, struct lm_tensor *a) { return unary_f32(ctx, LM_OP_SQRT, a); }

struct lm_tensor *lm_clamp(struct lm_ctx *ctx, struct lm_tensor *a, float lo, float hi)
{
    struct lm_tensor *t = unary_f32(ctx, LM_OP_CLAMP, a);
    if (t) {
        lm_set_op_f32(t, 0, lo);
        lm_set_op_f32(t, 1, hi);
    }
    return t;
}

struct lm_tensor *lm_unary(struct lm_ctx *ctx, struct lm_tensor *a, enum lm_unary_op op)
{
    if (!a)
        return NULL;
    NEED(ctx, (unsigned)op < LM_UNARY_COUNT, "unknown unary op %d", (int)op);
    struct lm_tensor *t = unary_f32(ctx, LM_OP_UNARY, a);
    if (t)
        lm_set_op_i32(t, 0, (int32_t)op);
    return t;
}

struct lm_tensor *lm_silu(struct lm_ctx *ctx, struct lm_tensor *a) { return lm_unary(ctx, a, LM_UNARY_SILU); }
struct lm_tensor *lm_gelu(struct lm_ctx *ctx, struct lm_tensor *a) { return lm_unary(ctx, a, LM_UNARY_GELU); }
struct lm_tensor *lm_relu(struct lm_ctx *ctx, struct lm_tensor *a) { return lm_unary(ctx, a, LM_UNARY_RELU); }

struct lm_tensor *lm_sum_rows(struct lm_ctx *ctx, struct lm_tensor *a)
{
    if (!a)
        return NULL;
    NEED(ctx, a->type == LM_TYPE_F32, "SUM_ROWS: operand must be f32");
    return set_op(new_shape(ctx, LM_TYPE_F32, 1, a->ne[1], a->ne[2], a->ne[3]), LM_OP_SUM_ROWS, a, NULL);
}

static struct lm_tensor *norm_op(struct lm_ctx *ctx, enum lm_op op, struct lm_tensor *a, float eps)
{
    if (!a)
        return NULL;
    NEED(ctx, eps >= 0.0f && isfinite(eps), "%s: bad eps %g", lm_op_name(op), (double)eps);
    struct lm_tensor *t = unary_f32(ctx, op, a);
    if (t)
        lm_set_op_f32(t, 0, eps);
    return t;
}

struct lm_tensor *lm_norm(struct lm_ctx *ctx, struct lm_tensor *a, float eps)
{
    return norm_op(ctx, LM_OP_NORM, a, eps);
}
struct lm_tensor *lm_rms_norm(struct lm_ctx *ctx, struct lm_tensor *a, float eps)
{
    return norm_op(ctx, LM_OP_RMS_NORM, a, eps);
}

/* ---- matrix products and gathers ---- */

static bool weight_type_ok(enum lm_type t)
{
    return lm_type_valid(t) && t != LM_TYPE_I8 && t != LM_TYPE_I16 && t != LM_TYPE_I32;
}

struct lm_tensor *lm_mul_mat(struct lm_ctx *ctx, struct lm_tensor *a, struct lm_tensor *b)
{
    if (!a || !b)
        return NULL;
    NEED(ctx, weight_type_ok(a->type), "MUL_MAT: unsupported weight type %s", lm_type_name(a->type));
    NEED(ctx, b->type == LM_TYPE_F32, "MUL_MAT: activations must be f32 (got %s)", lm_type_name(b->type));
    NEED(ctx, lm_is_contiguous_rows(a), "MUL_MAT: rows of '%s' are not contiguous", a->name);
    NEED(ctx, a->ne[0] == b->ne[0] && a->ne[2] > 0 && a->ne[3] > 0 && b->ne[2] % a->ne[2] == 0 &&
                  b->ne[3] % a->ne[3] == 0,
         "MUL_MAT: " SHAPE_FMT " x " SHAPE_FMT " do not fit", SHAPE_ARGS(a), SHAPE_ARGS(b));
    return set_op(new_shape(ctx, LM_TYPE_F32, a->ne[1], b->ne[1], b->ne[2], b->ne[3]), LM_OP_MUL_MAT, a, b);
}

struct lm_tensor *lm_mul_mat_id(struct lm_ctx *ctx, struct lm_tensor *as, struct lm_tensor *b, struct lm_tensor *ids)
{
    if (!as || !b || !ids)
        return NULL;
    NEED(ctx, weight_type_ok(as->type), "MUL_MAT_ID: unsupported weight type %s", lm_type_name(as->type));
    NEED(ctx, b->type == LM_TYPE_F32 && ids->type == LM_TYPE_I32, "MUL_MAT_ID: b must be f32 and ids i32");
    NEED(ctx, lm_is_contiguous_rows(as), "MUL_MAT_ID: expert rows are not contiguous");
    NEED(ctx, as->ne[3] == 1 && b->ne[3] == 1 && ids->ne[2] == 1 && ids->ne[3] == 1,
         "MUL_MAT_ID: experts must be 3-d, b 3-d, ids 2-d");
    NEED(ctx, as->ne[0] == b->ne[0] && ids->ne[1] == b->ne[2] && (b->ne[1] == 1 || b->ne[1] == ids->ne[0]),
         "MUL_MAT_ID: as " SHAPE_FMT ", b " SHAPE_FMT ", ids " SHAPE_FMT " do not fit", SHAPE_ARGS(as),
         SHAPE_ARGS(b), SHAPE_ARGS(ids));
    struct lm_tensor *t = new_shape(ctx, LM_TYPE_F32, as->ne[1], ids->ne[0], ids->ne[1], 1);
    if (!t)
        return NULL;
    set_op(t, LM_OP_MUL_MAT_ID, as, b);
    t->src[2] = ids;
    return t;
}

struct lm_tensor *lm_get_rows(struct lm_ctx *ctx, struct lm_tensor *a, struct lm_tensor *ids)
{
    if (!a || !ids)
        return NULL;
    NEED(ctx, weight_type_ok(a->type), "GET_ROWS: unsupported type %s", lm_type_name(a->type));
    NEED(ctx, ids->type == LM_TYPE_I32, "GET_ROWS: ids must be i32");
    NEED(ctx, ids->ne[3] == 1 && (a->ne[2] == ids->ne[1] || a->ne[2] == 1) && (a->ne[3] == ids->ne[2] || a->ne[3] == 1),
         "GET_ROWS: a " SHAPE_FMT " and ids " SHAPE_FMT " do not fit", SHAPE_ARGS(a), SHAPE_ARGS(ids));
    return set_op(new_shape(ctx, LM_TYPE_F32, a->ne[0], ids->ne[0], ids->ne[1], ids->ne[2]), LM_OP_GET_ROWS, a,
                  ids);
}

/* ---- copies and layout ---- */

static bool cpy_type_ok(enum lm_type src, enum lm_type dst)
{
    if (src == dst)
        return true;
    bool src_float = src == LM_TYPE_F32 || src == LM_TYPE_F16 || src == LM_TYPE_BF16;
    if (!src_float)
        return false;
    if (dst == LM_TYPE_F32 || dst == LM_TYPE_F16 || dst == LM_TYPE_BF16)
        return true;
    return src == LM_TYPE_F32 && weight_type_ok(dst) && lm_type_traits(dst)->is_quantized;
}

struct lm_tensor *lm_cpy(struct lm_ctx *ctx, struct lm_tensor *a, struct lm_tensor *b)
{
    if (!a || !b)
        return NULL;
    NEED(ctx, lm_nelements(a) == lm_nelements(b), "CPY: %lld elements into %lld", (long long)lm_nelements(a),
         (long long)lm_nelements(b));
    NEED(ctx, cpy_type_ok(a->type, b->type), "CPY: %s to %s not supported", lm_type_name(a->type),
         lm_type_name(b->type));
    NEED(ctx, lm_type_blck(b->type) == 1 || lm_is_contiguous_rows(b), "CPY: quantized destination rows must be contiguous");
    NEED(ctx, lm_type_blck(a->type) == 1 || lm_is_contiguous(a), "CPY: quantized source must be contiguous");
    struct lm_tensor *t = make_view(ctx, b, LM_OP_VIEW, b->ne, b->nb, 0);
    if (t)
        lm_format_name(t, "%.24s (copy of %.24s)", b->name, a->name);
    return set_op(t, LM_OP_CPY, a, b);
}

struct lm_tensor *lm_cont(struct lm_ctx *ctx, struct lm_tensor *a)
{
    if (!a)
        return NULL;
    NEED(ctx, lm_type_blck(a->type) == 1 || lm_is_contiguous_rows(a), "CONT: quantized rows must be contiguous");
    return set_op(new_like(ctx, a->type, a), LM_OP_CONT, a, NULL);
}

struct lm_tensor *lm_cont_2d(struct lm_ctx *ctx, struct lm_tensor *a, int64_t n0, int64_t n1)
{
    if (!a)
        return NULL;
    NEED(ctx, n0 * n1 == lm_nelements(a), "CONT_2D: element counts differ");
    NEED(ctx, lm_type_blck(a->type) == 1, "CONT_2D: only for non-block types");
    return set_op(new_shape(ctx, a->type, n0, n1, 1, 1), LM_OP_CONT, a, NULL);
}

struct lm_tensor *lm_repeat(struct lm_ctx *ctx, struct lm_tensor *a, struct lm_tensor *b)
{
    if (!a || !b)
        return NULL;
    NEED(ctx, a->type == LM_TYPE_F32, "REPEAT: operand must be f32");
    NEED(ctx, lm_can_repeat(a, b), "REPEAT: " SHAPE_FMT " does not tile " SHAPE_FMT, SHAPE_ARGS(a), SHAPE_ARGS(b));
    return set_op(new_like(ctx, LM_TYPE_F32, b), LM_OP_REPEAT, a, NULL);
}

struct lm_tensor *lm_concat(struct lm_ctx *ctx, struct lm_tensor *a, struct lm_tensor *b, int dim)
{
    if (!a || !b)
        return NULL;
    NEED(ctx, dim >= 0 && dim < 4, "CONCAT: dim %d out of range", dim);
    NEED(ctx, a->type == LM_TYPE_F32 && b->type == LM_TYPE_F32, "CONCAT: operands must be f32");
    int64_t ne[4];
    for (int i = 0; i < 4; i++) {
        NEED(ctx, i == dim || a->ne[i] == b->ne[i], "CONCAT: " SHAPE_FMT " and " SHAPE_FMT " differ in dim %d",
             SHAPE_ARGS(a), SHAPE_ARGS(b), i);
        ne[i] = i == dim ? a->ne[i] + b->ne[i] : a->ne[i];
    }
    struct lm_tensor *t = set_op(lm_tensor_make(ctx, LM_TYPE_F32, ne, NULL, 0), LM_OP_CONCAT, a, b);
    if (t)
        lm_set_op_i32(t, 0, dim);
    return t;
}

/* ---- attention pieces ---- */

struct lm_tensor *lm_diag_mask_inf(struct lm_ctx *ctx, struct lm_tensor *a, int n_past)
{
    struct lm_tensor *t = unary_f32(ctx, LM_OP_DIAG_MASK_INF, a);
    if (t)
        lm_set_op_i32(t, 0, n_past);
    return t;
}

struct lm_tensor *lm_soft_max_ext(struct lm_ctx *ctx, struct lm_tensor *a, struct lm_tensor *mask, float scale,
                                  float max_bias)
{
    if (!a)
        return NULL;
    NEED(ctx, a->type == LM_TYPE_F32, "SOFT_MAX: operand must be f32");
    if (mask) {
        NEED(ctx, mask->type == LM_TYPE_F32 && mask->ne[0] == a->ne[0] && mask->ne[1] >= a->ne[1] &&
                      mask->ne[2] == 1 && mask->ne[3] == 1,
             "SOFT_MAX: mask " SHAPE_FMT " does not fit " SHAPE_FMT, SHAPE_ARGS(mask), SHAPE_ARGS(a));
    }
    NEED(ctx, max_bias >= 0.0f && isfinite(scale), "SOFT_MAX: bad scale or max_bias");
    struct lm_tensor *t = set_op(new_like(ctx, LM_TYPE_F32, a), LM_OP_SOFT_MAX, a, mask);
    if (t) {
        lm_set_op_f32(t, 0, scale);
        lm_set_op_f32(t, 1, max_bias);
    }
    return t;
}

struct lm_tensor *lm_soft_max(struct lm_ctx *ctx, struct lm_tensor *a)
{
    return lm_soft_max_ext(ctx, a, NULL, 1.0f, 0.0f);
}

static bool kv_type_ok(enum lm_type t) { return t == LM_TYPE_F32 || t == LM_TYPE_F16 || t == LM_TYPE_BF16; }

struct lm_tensor *lm_attn(struct lm_ctx *ctx, struct lm_tensor *q, struct lm_tensor *k, struct lm_tensor *v,
                          struct lm_tensor *mask, float scale, float max_bias)
{
    if (!q || !k || !v)
        return NULL;
    NEED(ctx, q->type == LM_TYPE_F32 && kv_type_ok(k->type) && kv_type_ok(v->type),
         "ATTN: q must be f32, k and v f32/f16/bf16 (got %s, %s, %s)", lm_type_name(q->type), lm_type_name(k->type),
         lm_type_name(v->type));
    NEED(ctx, lm_is_contiguous_rows(k) && lm_is_contiguous_rows(v), "ATTN: rows of k and v must be contiguous");
    NEED(ctx, q->ne[3] == 1 && k->ne[3] == 1 && v->ne[3] == 1 && q->ne[0] == k->ne[0] && k->ne[1] == v->ne[0] &&
                  k->ne[1] > 0 && k->ne[2] == v->ne[2] && k->ne[2] > 0 && q->ne[2] % k->ne[2] == 0,
         "ATTN: q " SHAPE_FMT ", k " SHAPE_FMT ", v " SHAPE_FMT " do not fit", SHAPE_ARGS(q), SHAPE_ARGS(k),
         SHAPE_ARGS(v));
    if (mask) {
        NEED(ctx, mask->type == LM_TYPE_F32 && mask->ne[0] == k->ne[1] && mask->ne[1] >= q->ne[1] &&
                      mask->ne[2] == 1 && mask->ne[3] == 1,
             "ATTN: mask " SHAPE_FMT " does not fit %lld cells x %lld queries", SHAPE_ARGS(mask),
             (long long)k->ne[1], (long long)q->ne[1]);
    }
    NEED(ctx, max_bias >= 0.0f && isfinite(scale), "ATTN: bad scale or max_bias");
    struct lm_tensor *t = set_op(new_shape(ctx, LM_TYPE_F32, v->ne[1], q->ne[2], q->ne[1], 1), LM_OP_ATTN, q, k);
    if (!t)
        return NULL;
    t->src[2] = v;
    t->src[3] = mask;
    lm_set_op_f32(t, 0, scale);
    lm_set_op_f32(t, 1, max_bias);
    return t;
}

struct lm_tensor *lm_rope(struct lm_ctx *ctx, struct lm_tensor *a, struct lm_tensor *pos, const struct lm_rope_params *p)
{
    if (!a || !pos)
        return NULL;
    NEED(ctx, p != NULL, "ROPE: no parameters");
    NEED(ctx, a->type == LM_TYPE_F32 && pos->type == LM_TYPE_I32, "ROPE: a must be f32 and pos i32");
    NEED(ctx, lm_n_dims(pos) == 1 && pos->ne[0] == a->ne[2], "ROPE: %lld positions for %lld tokens",
         (long long)pos->ne[0], (long long)a->ne[2]);
    NEED(ctx, p->n_dims > 0 && p->n_dims % 2 == 0 && p->n_dims <= a->ne[0], "ROPE: n_dims %d with row length %lld",
         p->n_dims, (long long)a->ne[0]);
    NEED(ctx, p->mode == LM_ROPE_NORMAL || p->mode == LM_ROPE_NEOX, "ROPE: unknown mode %d", p->mode);
    NEED(ctx, p->freq_base > 0.0f && p->freq_scale > 0.0f, "ROPE: freq_base and freq_scale must be positive");
    struct lm_tensor *t = set_op(new_like(ctx, LM_TYPE_F32, a), LM_OP_ROPE, a, pos);
    if (!t)
        return NULL;
    lm_set_op_i32(t, 0, p->n_dims);
    lm_set_op_i32(t, 1, p->mode);
    lm_set_op_i32(t, 2, p->n_ctx_orig);
    lm_set_op_f32(t, 3, p->freq_base);
    lm_set_op_f32(t, 4, p->freq_scale);
    lm_set_op_f32(t, 5, p->ext_factor);
    lm_set_op_f32(t, 6, p->attn_factor);
    lm_set_op_f32(t, 7, p->beta_fast);
    lm_set_op_f32(t, 8, p->beta_slow);
    return t;
}

struct lm_tensor *lm_argsort(struct lm_ctx *ctx, struct lm_tensor *a, enum lm_sort_order order)
{
    if (!a)
        return NULL;
    NEED(ctx, a->type == LM_TYPE_F32, "ARGSORT: operand must be f32");
    NEED(ctx, order == LM_SORT_ASC || order == LM_SORT_DESC, "ARGSORT: bad order");
    struct lm_tensor *t = set_op(new_like(ctx, LM_TYPE_I32, a), LM_OP_ARGSORT, a, NULL);
    if (t)
        lm_set_op_i32(t, 0, (int32_t)order);
    return t;
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
