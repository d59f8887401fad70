/* op_rules.c - the table of op rules (op_rules.h): one check function per op
 * that says whether a node is well-formed. No backend knowledge: which types a
 * backend has kernels for is the backend's question, asked after this one.
 *
 * Each rule checks the sources in the order the constructors in ops.c used to
 * (types, then shapes, then op_params), with their messages, and the result
 * tensor last (its type and shape must be what the constructor makes).
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>

#include "core/op_rules.h"

#define SHAPE_FMT "[%lld,%lld,%lld,%lld]"
#define SHAPE_ARGS(t) (long long)(t)->ne[0], (long long)(t)->ne[1], (long long)(t)->ne[2], (long long)(t)->ne[3]

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static bool fail(char *why, size_t n, const char *fmt, ...)
{
    if (why && n) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, n, fmt, ap);
        va_end(ap);
    }
    return false;
}

/* RULE(cond, fmt, ...): refuse the node with the message unless cond holds.
 * Used inside rule functions, whose parameters are (t, why, n). */
#define RULE(cond, ...)                                                                                           \
    do {                                                                                                          \
        if (!(cond))                                                                                              \
            return fail(why, n, __VA_ARGS__);                                                                     \
    } while (0)

bool lm_op_weight_type_ok(enum lm_type t)
{
    return lm_type_valid(t) && t != LM_TYPE_I8 && t != LM_TYPE_I16 && t != LM_TYPE_I32;
}

bool lm_op_float_type(enum lm_type t) { return t == LM_TYPE_F32 || t == LM_TYPE_F16 || t == LM_TYPE_BF16; }

static bool shape_is(const struct lm_tensor *t, int64_t n0, int64_t n1, int64_t n2, int64_t n3)
{
    return t->ne[0] == n0 && t->ne[1] == n1 && t->ne[2] == n2 && t->ne[3] == n3;
}

/* The result: type `type` and shape [n0,n1,n2,n3]. */
static bool result_is(const struct lm_tensor *t, enum lm_type type, int64_t n0, int64_t n1, int64_t n2, int64_t n3,
                      char *why, size_t n)
{
    RULE(t->type == type, "%s: result must be %s (got %s)", lm_op_name(t->op), lm_type_name(type),
         lm_type_name(t->type));
    RULE(shape_is(t, n0, n1, n2, n3), "%s: result " SHAPE_FMT " should be [%lld,%lld,%lld,%lld]", lm_op_name(t->op),
         SHAPE_ARGS(t), (long long)n0, (long long)n1, (long long)n2, (long long)n3);
    return true;
}

static bool result_like(const struct lm_tensor *t, enum lm_type type, const struct lm_tensor *a, char *why, size_t n)
{
    return result_is(t, type, a->ne[0], a->ne[1], a->ne[2], a->ne[3], why, n);
}

/* ---- leaves and views ---- */

static bool rule_none(const struct lm_tensor *t, char *why, size_t n) { return true; }

/* RESHAPE, VIEW, PERMUTE, TRANSPOSE: a view of src[0] (same type) that lies
 * inside its root's memory; RESHAPE keeps the element count of a contiguous
 * source; PERMUTE and TRANSPOSE hold their axes in op_params[0..4). The
 * constructors check their arguments (axes, sizes) before they build. */
static bool rule_view(const struct lm_tensor *t, char *why, size_t n)
{
    const struct lm_tensor *a = t->src[0];
    RULE(t->type == a->type, "%s: view of type %s over %s", lm_op_name(t->op), lm_type_name(t->type),
         lm_type_name(a->type));
    RULE(t->ne[0] % lm_type_blck(t->type) == 0, "%s: ne0 not a multiple of the block size", lm_op_name(t->op));
    if (t->op == LM_OP_RESHAPE) {
        RULE(lm_is_contiguous(a), "reshape of a non-contiguous tensor '%s'", a->name);
        RULE(lm_nelements(t) == lm_nelements(a), "reshape " SHAPE_FMT " to " SHAPE_FMT ": element counts differ",
             SHAPE_ARGS(a), SHAPE_ARGS(t));
    }
    if (t->op == LM_OP_PERMUTE || t->op == LM_OP_TRANSPOSE) {
        int seen = 0;
        for (int i = 0; i < 4; i++) {
            const int ax = lm_get_op_i32(t, i);
            RULE(ax >= 0 && ax < 4, "permute axis %d out of range", ax);
            seen |= 1 << ax;
        }
        RULE(seen == 15, "permute axes are not a permutation");
        RULE(lm_type_blck(t->type) == 1 || lm_get_op_i32(t, 0) == 0, "permute of a quantized tensor must keep dim 0");
    }
    const struct lm_tensor *root = lm_view_root(t);
    const size_t need = lm_nbytes(t), have = lm_nbytes(root);
    RULE(lm_nelements(t) == 0 || (t->view_offs <= have && need <= have - t->view_offs),
         "view of %zu bytes at offset %zu exceeds the %zu bytes of '%s'", need, t->view_offs, have, root->name);
    return true;
}

/* ---- element-wise ---- */

/* ADD, MUL, DIV: F32 a and b, b broadcast over a; the result has a's shape. */
static bool rule_binary(const struct lm_tensor *t, char *why, size_t n)
{
    const struct lm_tensor *a = t->src[0], *b = t->src[1];
    RULE(a->type == LM_TYPE_F32 && b->type == LM_TYPE_F32, "%s: operands must be f32 (got %s, %s)",
         lm_op_name(t->op), lm_type_name(a->type), lm_type_name(b->type));
    RULE(lm_can_repeat(b, a), "%s: " SHAPE_FMT " does not broadcast to " SHAPE_FMT, lm_op_name(t->op),
         SHAPE_ARGS(b), SHAPE_ARGS(a));
    return result_like(t, LM_TYPE_F32, a, why, n);
}

/* SCALE, SQR, SQRT, CLAMP, DIAG_MASK_INF: F32 a to F32 of its shape. */
static bool rule_unary_f32(const struct lm_tensor *t, char *why, size_t n)
{
    const struct lm_tensor *a = t->src[0];
    RULE(a->type == LM_TYPE_F32, "%s: operand must be f32 (got %s)", lm_op_name(t->op), lm_type_name(a->type));
    return result_like(t, LM_TYPE_F32, a, why, n);
}

/* UNARY: op_params[0] an enum lm_unary_op. */
static bool rule_unary(const struct lm_tensor *t, char *why, size_t n)
{
    RULE((unsigned)lm_get_op_i32(t, 0) < LM_UNARY_COUNT, "unknown unary op %d", (int)lm_get_op_i32(t, 0));
    return rule_unary_f32(t, why, n);
}

static bool rule_sum_rows(const struct lm_tensor *t, char *why, size_t n)
{
    const struct lm_tensor *a = t->src[0];
    RULE(a->type == LM_TYPE_F32, "SUM_ROWS: operand must be f32");
    return result_is(t, LM_TYPE_F32, 1, a->ne[1], a->ne[2], a->ne[3], why, n);
}

/* NORM, RMS_NORM: eps (op_params[0]) finite and >= 0. */
static bool rule_norm(const struct lm_tensor *t, char *why, size_t n)
{
    const float eps = lm_get_op_f32(t, 0);
    RULE(eps >= 0.0f && isfinite(eps), "%s: bad eps %g", lm_op_name(t->op), (double)eps);
    return rule_unary_f32(t, why, n);
}

/* ---- matrix products and gathers ---- */

/* MUL_MAT: weights a (any weight type, rows contiguous) times F32 b; a's
 * dims 2 and 3 broadcast over b's. */
static bool rule_mul_mat(const struct lm_tensor *t, char *why, size_t n)
{
    const struct lm_tensor *a = t->src[0], *b = t->src[1];
    RULE(lm_op_weight_type_ok(a->type), "MUL_MAT: unsupported weight type %s", lm_type_name(a->type));
    RULE(b->type == LM_TYPE_F32, "MUL_MAT: activations must be f32 (got %s)", lm_type_name(b->type));
    RULE(lm_is_contiguous_rows(a), "MUL_MAT: rows of '%s' are not contiguous", a->name);
    RULE(a->ne[0] == b->ne[0] && a->ne[2] > 0 && a->ne[3] > 0 && b->ne[2] % a->ne[2] == 0 &&
             b->ne[3] % a->ne[3] == 0,
         "MUL_MAT: " SHAPE_FMT " x " SHAPE_FMT " do not fit", SHAPE_ARGS(a), SHAPE_ARGS(b));
    return result_is(t, LM_TYPE_F32, a->ne[1], b->ne[1], b->ne[2], b->ne[3], why, n);
}

/* MUL_MAT_ID: experts as [k, m, n_expert], F32 b [k, 1 or n_used, n_tokens],
 * I32 ids [n_used, n_tokens]. */
static bool rule_mul_mat_id(const struct lm_tensor *t, char *why, size_t n)
{
    const struct lm_tensor *as = t->src[0], *b = t->src[1], *ids = t->src[2];
    RULE(lm_op_weight_type_ok(as->type), "MUL_MAT_ID: unsupported weight type %s", lm_type_name(as->type));
    RULE(b->type == LM_TYPE_F32 && ids->type == LM_TYPE_I32, "MUL_MAT_ID: b must be f32 and ids i32");
    RULE(lm_is_contiguous_rows(as), "MUL_MAT_ID: expert rows are not contiguous");
    RULE(as->ne[3] == 1 && b->ne[3] == 1 && ids->ne[2] == 1 && ids->ne[3] == 1,
         "MUL_MAT_ID: experts must be 3-d, b 3-d, ids 2-d");
    RULE(as->ne[0] == b->ne[0] && ids->ne[1] == b->ne[2] && (b->ne[1] == 1 || b->ne[1] == ids->ne[0]),
         "MUL_MAT_ID: as " SHAPE_FMT ", b " SHAPE_FMT ", ids " SHAPE_FMT " do not fit", SHAPE_ARGS(as),
         SHAPE_ARGS(b), SHAPE_ARGS(ids));
    return result_is(t, LM_TYPE_F32, as->ne[1], ids->ne[0], ids->ne[1], 1, why, n);
}

/* GET_ROWS: rows of a (any weight type) picked by I32 ids, as F32. */
static bool rule_get_rows(const struct lm_tensor *t, char *why, size_t n)
{
    const struct lm_tensor *a = t->src[0], *ids = t->src[1];
    RULE(lm_op_weight_type_ok(a->type), "GET_ROWS: unsupported type %s", lm_type_name(a->type));
    RULE(ids->type == LM_TYPE_I32, "GET_ROWS: ids must be i32");
    RULE(ids->ne[3] == 1 && (a->ne[2] == ids->ne[1] || a->ne[2] == 1) && (a->ne[3] == ids->ne[2] || a->ne[3] == 1),
         "GET_ROWS: a " SHAPE_FMT " and ids " SHAPE_FMT " do not fit", SHAPE_ARGS(a), SHAPE_ARGS(ids));
    return result_is(t, LM_TYPE_F32, a->ne[0], ids->ne[0], ids->ne[1], ids->ne[2], why, n);
}

/* ---- copies and layout ---- */

/* A copy from src to dst types: equal types; a float source into a float
 * type; an F32 source into a quantized type. */
static bool cpy_type_ok(enum lm_type src, enum lm_type dst)
{
    if (src == dst)
        return lm_type_valid(src);
    if (lm_op_weight_type_ok(src) && lm_type_traits(src)->is_quantized) /* decoded (a quantized K cache shifted) */
        return lm_op_float_type(dst);
    if (!lm_op_float_type(src))
        return false;
    if (lm_op_float_type(dst))
        return true;
    return src == LM_TYPE_F32 && lm_op_weight_type_ok(dst) && lm_type_traits(dst)->is_quantized;
}

/* CPY: a into b (src[1]); the result is b's memory, b's type and shape. A
 * quantized destination needs contiguous rows, a quantized source contiguity
 * (and, into another type, destination rows of whole blocks). */
static bool rule_cpy(const struct lm_tensor *t, char *why, size_t n)
{
    const struct lm_tensor *a = t->src[0], *b = t->src[1];
    RULE(lm_nelements(a) == lm_nelements(b), "CPY: %lld elements into %lld", (long long)lm_nelements(a),
         (long long)lm_nelements(b));
    RULE(cpy_type_ok(a->type, b->type), "CPY: %s to %s not supported", lm_type_name(a->type), lm_type_name(b->type));
    RULE(lm_type_blck(b->type) == 1 || lm_is_contiguous_rows(b), "CPY: quantized destination rows must be contiguous");
    RULE(lm_type_blck(a->type) == 1 || lm_is_contiguous(a), "CPY: quantized source must be contiguous");
    RULE(lm_type_blck(a->type) == 1 || a->type == b->type || b->ne[0] % lm_type_blck(a->type) == 0,
         "CPY: %s source into rows of %lld, not whole blocks", lm_type_name(a->type), (long long)b->ne[0]);
    RULE(lm_type_blck(t->type) == 1 || lm_is_contiguous_rows(t), "CPY: quantized destination rows must be contiguous");
    return result_like(t, b->type, b, why, n);
}

/* SET_ROWS: F32 a [n, N] (any strides) into b (src[1]) at contiguous I32
 * ids [N]; op_params[0] 0: b [n, R], float or a block type with an encoder
 * (packed rows of whole blocks); 1: b [R, n] float (columns). Everything 2-D;
 * the result is b's memory, type and shape. */
static bool rule_set_rows(const struct lm_tensor *t, char *why, size_t n)
{
    const struct lm_tensor *a = t->src[0], *b = t->src[1], *ids = t->src[2];
    const int32_t cols = lm_get_op_i32(t, 0);
    RULE(cols == 0 || cols == 1, "SET_ROWS: mode %d (0 rows, 1 columns)", (int)cols);
    RULE(a->type == LM_TYPE_F32 && ids->type == LM_TYPE_I32, "SET_ROWS: a must be f32 and ids i32 (got %s, %s)",
         lm_type_name(a->type), lm_type_name(ids->type));
    RULE(lm_is_contiguous(ids), "SET_ROWS: ids must be contiguous");
    RULE(a->ne[2] == 1 && a->ne[3] == 1 && b->ne[2] == 1 && b->ne[3] == 1 && shape_is(ids, a->ne[1], 1, 1, 1) &&
             b->ne[cols] == a->ne[0],
         "SET_ROWS: a " SHAPE_FMT ", b " SHAPE_FMT " and ids " SHAPE_FMT " do not fit", SHAPE_ARGS(a), SHAPE_ARGS(b),
         SHAPE_ARGS(ids));
    const bool block = lm_type_blck(b->type) > 1;
    RULE(lm_op_float_type(b->type) || (!cols && cpy_type_ok(LM_TYPE_F32, b->type)),
         "SET_ROWS: %s destination not supported", lm_type_name(b->type));
    RULE(!block || (lm_is_contiguous_rows(b) && b->ne[0] % lm_type_blck(b->type) == 0),
         "SET_ROWS: %s rows must be packed whole blocks", lm_type_name(b->type));
    RULE(!block || lm_is_contiguous_rows(t), "SET_ROWS: %s result rows must be packed", lm_type_name(b->type));
    return result_like(t, b->type, b, why, n);
}

/* CONT: a copied to the result, same type and element count (a new shape
 * only for non-block types; quantized rows must be contiguous). */
static bool rule_cont(const struct lm_tensor *t, char *why, size_t n)
{
    const struct lm_tensor *a = t->src[0];
    RULE(lm_type_valid(a->type) && t->type == a->type, "CONT: result must be %s (got %s)", lm_type_name(a->type),
         lm_type_name(t->type));
    RULE(lm_nelements(t) == lm_nelements(a), "CONT_2D: element counts differ");
    if (lm_type_blck(a->type) != 1) {
        RULE(lm_is_contiguous_rows(a), "CONT: quantized rows must be contiguous");
        RULE(lm_same_shape(t, a), "CONT_2D: only for non-block types");
        RULE(lm_is_contiguous_rows(t), "CONT: quantized rows must be contiguous");
    }
    return true;
}

/* REPEAT: F32 a tiled to the result's shape. */
static bool rule_repeat(const struct lm_tensor *t, char *why, size_t n)
{
    const struct lm_tensor *a = t->src[0];
    RULE(a->type == LM_TYPE_F32, "REPEAT: operand must be f32");
    RULE(t->type == LM_TYPE_F32, "REPEAT: result must be f32");
    RULE(lm_can_repeat(a, t), "REPEAT: " SHAPE_FMT " does not tile " SHAPE_FMT, SHAPE_ARGS(a), SHAPE_ARGS(t));
    return true;
}

/* CONCAT: F32 a and b joined along dim (op_params[0], 0..3). */
static bool rule_concat(const struct lm_tensor *t, char *why, size_t n)
{
    const struct lm_tensor *a = t->src[0], *b = t->src[1];
    const int dim = lm_get_op_i32(t, 0);
    RULE(dim >= 0 && dim < 4, "CONCAT: dim %d out of range", dim);
    RULE(a->type == LM_TYPE_F32 && b->type == LM_TYPE_F32, "CONCAT: operands must be f32");
    int64_t ne[4];
    for (int i = 0; i < 4; i++) {
        RULE(i == dim || a->ne[i] == b->ne[i], "CONCAT: " SHAPE_FMT " and " SHAPE_FMT " differ in dim %d",
             SHAPE_ARGS(a), SHAPE_ARGS(b), i);
        ne[i] = i == dim ? a->ne[i] + b->ne[i] : a->ne[i];
    }
    return result_is(t, LM_TYPE_F32, ne[0], ne[1], ne[2], ne[3], why, n);
}

/* ---- attention pieces ---- */

/* SOFT_MAX: F32 a, optional F32 mask (src[1]) [a0, >= a1, 1, 1]; scale
 * (op_params[0]) finite, max_bias (op_params[1]) >= 0. */
static bool rule_soft_max(const struct lm_tensor *t, char *why, size_t n)
{
    const struct lm_tensor *a = t->src[0], *mask = t->src[1];
    RULE(a->type == LM_TYPE_F32, "SOFT_MAX: operand must be f32");
    if (mask) {
        RULE(mask->type == LM_TYPE_F32 && mask->ne[0] == a->ne[0] && mask->ne[1] >= a->ne[1] && mask->ne[2] == 1 &&
                 mask->ne[3] == 1,
             "SOFT_MAX: mask " SHAPE_FMT " does not fit " SHAPE_FMT, SHAPE_ARGS(mask), SHAPE_ARGS(a));
    }
    const float scale = lm_get_op_f32(t, 0), max_bias = lm_get_op_f32(t, 1);
    RULE(max_bias >= 0.0f && isfinite(scale), "SOFT_MAX: bad scale or max_bias");
    return result_like(t, LM_TYPE_F32, a, why, n);
}

/* ATTN: F32 q [d, n_q, n_head], k F32/F16/BF16 or Q8_0 (d whole blocks: a
 * quantized K cache), both with contiguous rows, k [d, n_kv, n_head_kv];
 * v F32/F16/BF16 [n_kv, d_v, n_head_kv] (i32[2] 0: the transposed V cache)
 * or F32/F16/BF16/Q8_0 [d_v, n_kv, n_head_kv] (i32[2] 1: rows per cell, a
 * Q8_0 one of whole blocks), rows contiguous (n_head a multiple of
 * n_head_kv), optional F32 mask (src[3]) [n_kv, >= n_q, 1, 1]; scale
 * (op_params[0]) finite, max_bias (op_params[1]) >= 0. */
static bool rule_attn(const struct lm_tensor *t, char *why, size_t n)
{
    const struct lm_tensor *q = t->src[0], *k = t->src[1], *v = t->src[2], *mask = t->src[3];
    const int32_t v_rows = lm_get_op_i32(t, 2);
    RULE(v_rows == 0 || v_rows == 1, "ATTN: V layout %d (0 transposed, 1 rows)", (int)v_rows);
    const int64_t v_cells = v_rows ? v->ne[1] : v->ne[0], d_v = v_rows ? v->ne[0] : v->ne[1];
    const bool k_ok = lm_op_float_type(k->type) || (k->type == LM_TYPE_Q8_0 && k->ne[0] % lm_type_blck(k->type) == 0);
    const bool v_ok =
        lm_op_float_type(v->type) || (v_rows && v->type == LM_TYPE_Q8_0 && v->ne[0] % lm_type_blck(v->type) == 0);
    RULE(q->type == LM_TYPE_F32 && k_ok && v_ok,
         "ATTN: q must be f32, k f32/f16/bf16/q8_0 (rows of whole blocks), v f32/f16/bf16 (q8_0 rows of whole blocks "
         "in the rows layout) (got %s, %s, %s)",
         lm_type_name(q->type), lm_type_name(k->type), lm_type_name(v->type));
    RULE(lm_is_contiguous_rows(k) && lm_is_contiguous_rows(v), "ATTN: rows of k and v must be contiguous");
    RULE(q->ne[3] == 1 && k->ne[3] == 1 && v->ne[3] == 1 && q->ne[0] == k->ne[0] && k->ne[1] == v_cells &&
             k->ne[1] > 0 && k->ne[2] == v->ne[2] && k->ne[2] > 0 && q->ne[2] % k->ne[2] == 0,
         "ATTN: q " SHAPE_FMT ", k " SHAPE_FMT ", v " SHAPE_FMT " do not fit", SHAPE_ARGS(q), SHAPE_ARGS(k),
         SHAPE_ARGS(v));
    if (mask) {
        RULE(mask->type == LM_TYPE_F32 && mask->ne[0] == k->ne[1] && mask->ne[1] >= q->ne[1] && mask->ne[2] == 1 &&
                 mask->ne[3] == 1,
             "ATTN: mask " SHAPE_FMT " does not fit %lld cells x %lld queries", SHAPE_ARGS(mask),
             (long long)k->ne[1], (long long)q->ne[1]);
    }
    const float scale = lm_get_op_f32(t, 0), max_bias = lm_get_op_f32(t, 1);
    RULE(max_bias >= 0.0f && isfinite(scale), "ATTN: bad scale or max_bias");
    return result_is(t, LM_TYPE_F32, d_v, q->ne[2], q->ne[1], 1, why, n);
}

/* ROPE and ROPE_BACK (dy in src[0]): F32 a [d, n_head, n_tokens], 1-d I32
 * positions (one per token);
 * op_params: n_dims (even, 1..d), mode (NORMAL or NEOX), n_ctx_orig,
 * freq_base and freq_scale (> 0), ext_factor, attn_factor, beta_fast,
 * beta_slow. */
static bool rule_rope(const struct lm_tensor *t, char *why, size_t n)
{
    const struct lm_tensor *a = t->src[0], *pos = t->src[1];
    const int n_dims = lm_get_op_i32(t, 0), mode = lm_get_op_i32(t, 1);
    const float freq_base = lm_get_op_f32(t, 3), freq_scale = lm_get_op_f32(t, 4);
    const char *name = lm_op_name(t->op);
    RULE(a->type == LM_TYPE_F32 && pos->type == LM_TYPE_I32, "%s: a must be f32 and pos i32", name);
    RULE(lm_n_dims(pos) == 1 && pos->ne[0] == a->ne[2], "%s: %lld positions for %lld tokens", name,
         (long long)pos->ne[0], (long long)a->ne[2]);
    RULE(n_dims > 0 && n_dims % 2 == 0 && n_dims <= a->ne[0], "%s: n_dims %d with row length %lld", name, n_dims,
         (long long)a->ne[0]);
    RULE(mode == LM_ROPE_NORMAL || mode == LM_ROPE_NEOX, "%s: unknown mode %d", name, mode);
    RULE(freq_base > 0.0f && freq_scale > 0.0f, "%s: freq_base and freq_scale must be positive", name);
    return result_like(t, LM_TYPE_F32, a, why, n);
}

/* ARGSORT: F32 a to I32 indices of its shape; order (op_params[0]) ASC or DESC. */
static bool rule_argsort(const struct lm_tensor *t, char *why, size_t n)
{
    const struct lm_tensor *a = t->src[0];
    const int order = lm_get_op_i32(t, 0);
    RULE(a->type == LM_TYPE_F32, "ARGSORT: operand must be f32");
    RULE(order == LM_SORT_ASC || order == LM_SORT_DESC, "ARGSORT: bad order");
    return result_like(t, LM_TYPE_I32, a, why, n);
}

/* ---- training ops (gradients) ---- */

/* GET_ROWS_BACK: F32 dy [K, N] (any strides), contiguous I32 ids [N], like
 * (src[2], any type, its shape only) [K, R]; the result F32 [K, R]. */
static bool rule_get_rows_back(const struct lm_tensor *t, char *why, size_t n)
{
    const struct lm_tensor *dy = t->src[0], *ids = t->src[1], *like = t->src[2];
    RULE(dy->type == LM_TYPE_F32 && ids->type == LM_TYPE_I32, "GET_ROWS_BACK: dy must be f32 and ids i32");
    RULE(lm_is_contiguous(ids), "GET_ROWS_BACK: ids must be contiguous");
    RULE(dy->ne[2] == 1 && dy->ne[3] == 1 && like->ne[2] == 1 && like->ne[3] == 1 && lm_n_dims(ids) == 1 &&
             ids->ne[0] == dy->ne[1] && like->ne[0] == dy->ne[0],
         "GET_ROWS_BACK: dy " SHAPE_FMT ", ids " SHAPE_FMT ", like " SHAPE_FMT " do not fit", SHAPE_ARGS(dy),
         SHAPE_ARGS(ids), SHAPE_ARGS(like));
    return result_is(t, LM_TYPE_F32, like->ne[0], like->ne[1], 1, 1, why, n);
}

/* REPEAT_BACK: F32 a (any strides) summed into the result's shape, which
 * tiles a (lm_can_repeat(result, a)). */
static bool rule_repeat_back(const struct lm_tensor *t, char *why, size_t n)
{
    const struct lm_tensor *a = t->src[0];
    RULE(a->type == LM_TYPE_F32, "REPEAT_BACK: operand must be f32");
    RULE(t->type == LM_TYPE_F32, "REPEAT_BACK: result must be f32");
    RULE(lm_can_repeat(t, a), "REPEAT_BACK: " SHAPE_FMT " does not tile " SHAPE_FMT, SHAPE_ARGS(t), SHAPE_ARGS(a));
    return true;
}

/* Two F32 sources of one shape with contiguous rows; the result F32 of that shape. */
static bool rule_pair_rows(const struct lm_tensor *t, char *why, size_t n)
{
    const struct lm_tensor *a = t->src[0], *b = t->src[1];
    RULE(a->type == LM_TYPE_F32 && b->type == LM_TYPE_F32, "%s: operands must be f32 (got %s, %s)",
         lm_op_name(t->op), lm_type_name(a->type), lm_type_name(b->type));
    RULE(lm_same_shape(a, b), "%s: " SHAPE_FMT " and " SHAPE_FMT " differ", lm_op_name(t->op), SHAPE_ARGS(a),
         SHAPE_ARGS(b));
    RULE(lm_is_contiguous_rows(a) && lm_is_contiguous_rows(b), "%s: rows must be contiguous", lm_op_name(t->op));
    return result_like(t, LM_TYPE_F32, a, why, n);
}

/* RMS_NORM_BACK: x, dy; eps (op_params[0]) finite and >= 0. */
static bool rule_rms_norm_back(const struct lm_tensor *t, char *why, size_t n)
{
    const float eps = lm_get_op_f32(t, 0);
    RULE(eps >= 0.0f && isfinite(eps), "RMS_NORM_BACK: bad eps %g", (double)eps);
    return rule_pair_rows(t, why, n);
}

/* SOFT_MAX_BACK: dy, y; scale (op_params[0]) finite. */
static bool rule_soft_max_back(const struct lm_tensor *t, char *why, size_t n)
{
    RULE(isfinite(lm_get_op_f32(t, 0)), "SOFT_MAX_BACK: bad scale");
    return rule_pair_rows(t, why, n);
}

/* UNARY_BACK: x, dy; op_params[0] an enum lm_unary_op. */
static bool rule_unary_back(const struct lm_tensor *t, char *why, size_t n)
{
    RULE((unsigned)lm_get_op_i32(t, 0) < LM_UNARY_COUNT, "UNARY_BACK: unknown unary op %d",
         (int)lm_get_op_i32(t, 0));
    return rule_pair_rows(t, why, n);
}

/* CROSS_ENTROPY_LOSS(_BACK): F32 logits [V, N] with contiguous rows,
 * contiguous I32 targets [N]; _BACK also F32 dloss [1] (src[2]). The result
 * is [1] (the loss) or [V, N] (the gradient). */
static bool rule_cross_entropy(const struct lm_tensor *t, char *why, size_t n)
{
    const struct lm_tensor *lg = t->src[0], *tg = t->src[1], *dl = t->src[2];
    const bool back = t->op == LM_OP_CROSS_ENTROPY_LOSS_BACK;
    const char *name = lm_op_name(t->op);
    RULE(lg->type == LM_TYPE_F32 && tg->type == LM_TYPE_I32, "%s: logits must be f32 and targets i32", name);
    RULE(lm_is_contiguous_rows(lg) && lm_is_contiguous(tg), "%s: logits rows and targets must be contiguous", name);
    RULE(lg->ne[2] == 1 && lg->ne[3] == 1 && lm_n_dims(tg) == 1 && tg->ne[0] == lg->ne[1],
         "%s: logits " SHAPE_FMT " and targets " SHAPE_FMT " do not fit", name, SHAPE_ARGS(lg), SHAPE_ARGS(tg));
    if (back) {
        RULE(dl->type == LM_TYPE_F32 && shape_is(dl, 1, 1, 1, 1), "%s: dloss must be one f32", name);
        return result_like(t, LM_TYPE_F32, lg, why, n);
    }
    return result_is(t, LM_TYPE_F32, 1, 1, 1, 1, why, n);
}

/* ---- the table ---- */

/* R(op, required sources, sources in all, flags, rule): one row. */
#define R(o, ns, nmax, fl, fn) [LM_OP_##o] = {LM_OP_##o, #o, ns, nmax, fl, fn}

enum { VIEW = LM_OPF_VIEW, INPL = LM_OPF_INPLACE, GRAD = LM_OPF_GRAD };

/* Unsized, so that the count check below fails when an op is added to
 * enum lm_op without its row (test_op_rules also walks every op). */
static const struct lm_op_rule rules[] = {
    R(NONE, 0, 0, 0, rule_none),
    R(ADD, 2, 2, INPL | GRAD, rule_binary),
    R(MUL, 2, 2, INPL | GRAD, rule_binary),
    R(DIV, 2, 2, INPL, rule_binary),
    R(SCALE, 1, 1, INPL | GRAD, rule_unary_f32),
    R(SQR, 1, 1, INPL | GRAD, rule_unary_f32),
    R(SQRT, 1, 1, INPL, rule_unary_f32),
    R(CLAMP, 1, 1, INPL, rule_unary_f32),
    R(UNARY, 1, 1, INPL | GRAD, rule_unary),
    R(SUM_ROWS, 1, 1, GRAD, rule_sum_rows),
    R(NORM, 1, 1, 0, rule_norm),
    R(RMS_NORM, 1, 1, GRAD, rule_norm),
    R(MUL_MAT, 2, 2, GRAD, rule_mul_mat),
    R(MUL_MAT_ID, 3, 3, 0, rule_mul_mat_id),
    R(GET_ROWS, 2, 2, GRAD, rule_get_rows),
    R(CPY, 2, 2, 0, rule_cpy),
    R(CONT, 1, 1, GRAD, rule_cont),
    R(REPEAT, 1, 1, GRAD, rule_repeat),
    R(CONCAT, 2, 2, 0, rule_concat),
    R(RESHAPE, 1, 1, VIEW | GRAD, rule_view),
    R(VIEW, 1, 1, VIEW, rule_view),
    R(PERMUTE, 1, 1, VIEW | GRAD, rule_view),
    R(TRANSPOSE, 1, 1, VIEW | GRAD, rule_view),
    R(DIAG_MASK_INF, 1, 1, 0, rule_unary_f32),
    R(SOFT_MAX, 1, 2, GRAD, rule_soft_max),
    R(ROPE, 2, 2, GRAD, rule_rope),
    R(ARGSORT, 1, 1, 0, rule_argsort),
    R(ATTN, 3, 4, 0, rule_attn),
    R(SET_ROWS, 3, 3, 0, rule_set_rows),
    R(GET_ROWS_BACK, 3, 3, 0, rule_get_rows_back),
    R(REPEAT_BACK, 1, 1, 0, rule_repeat_back),
    R(RMS_NORM_BACK, 2, 2, 0, rule_rms_norm_back),
    R(ROPE_BACK, 2, 2, 0, rule_rope),
    R(SOFT_MAX_BACK, 2, 2, 0, rule_soft_max_back),
    R(UNARY_BACK, 2, 2, 0, rule_unary_back),
    R(CROSS_ENTROPY_LOSS, 2, 2, GRAD, rule_cross_entropy),
    R(CROSS_ENTROPY_LOSS_BACK, 3, 3, 0, rule_cross_entropy),
};
_Static_assert(sizeof rules / sizeof rules[0] == LM_OP_COUNT, "every enum lm_op needs its row in rules[]");

const struct lm_op_rule *lm_op_rule(enum lm_op op)
{
    return (unsigned)op < LM_OP_COUNT && rules[op].check ? &rules[op] : NULL;
}

bool lm_op_has(enum lm_op op, unsigned flags)
{
    const struct lm_op_rule *r = lm_op_rule(op);
    return r && (r->flags & flags) == flags;
}

const char *lm_op_name(enum lm_op op)
{
    const struct lm_op_rule *r = lm_op_rule(op);
    return r ? r->name : "?";
}

bool lm_is_view_op(enum lm_op op) { return lm_op_has(op, LM_OPF_VIEW); }

bool lm_op_computes(enum lm_op op) { return lm_op_rule(op) && op != LM_OP_NONE && !lm_op_has(op, LM_OPF_VIEW); }

bool lm_op_check(const struct lm_tensor *t, char *why, size_t n)
{
    if (!t)
        return fail(why, n, "no node");
    const struct lm_op_rule *r = lm_op_rule(t->op);
    if (!r)
        return fail(why, n, "unknown op %d", (int)t->op);
    for (int s = 0; s < r->n_src; s++)
        RULE(t->src[s] != NULL, "%s: source %d missing", r->name, s);
    RULE(lm_type_valid(t->type), "%s: result of unknown type %d", r->name, (int)t->type);
    for (int s = 0; s < r->n_src_max; s++)
        RULE(!t->src[s] || lm_type_valid(t->src[s]->type), "%s: source %d of unknown type %d", r->name, s,
             (int)t->src[s]->type);
    return r->check(t, why, n);
}
