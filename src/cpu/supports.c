/* supports.c - which nodes the CPU ops compute: every op, with the types and
 * shapes the core constructors (core/ops.c) allow, re-checked here so that a
 * node built by hand can never send an op out of bounds. Pure; thread-safe.
 */
#include "cpu/exec.h"
#include "cpu/kernels/kernels.h"
#include "cpu/repack.h"

static bool f32(const struct lm_tensor *t) { return t && t->type == LM_TYPE_F32; }
static bool i32(const struct lm_tensor *t) { return t && t->type == LM_TYPE_I32; }

static bool shape_is(const struct lm_tensor *t, int64_t n0, int64_t n1, int64_t n2, int64_t n3)
{
    return t->ne[0] == n0 && t->ne[1] == n1 && t->ne[2] == n2 && t->ne[3] == n3;
}

static bool weight_type_ok(enum lm_type t)
{
    return lm_type_valid(t) && t != LM_TYPE_I8 && t != LM_TYPE_I16 && t != LM_TYPE_I32;
}

static bool is_float_type(enum lm_type t) { return t == LM_TYPE_F32 || t == LM_TYPE_F16 || t == LM_TYPE_BF16; }

/* The matmul can run weights of type t: a direct kernel, or the dequantizing path. */
static bool matmul_type_ok(enum lm_type t)
{
    const struct lm_cpu_kernels *k = lm_cpu_kernels();
    if (!weight_type_ok(t))
        return false;
    const struct lm_cpu_type_kernels *tk = &k->type[t];
    if (!k->type[tk->vec_dot_type].from_float)
        return false;
    return tk->vec_dot || (tk->to_float && (tk->vec_dot_type == LM_TYPE_F32 || k->type[tk->vec_dot_type].to_float));
}

static bool mul_mat_ok(const struct lm_tensor *t, const struct lm_tensor *a, const struct lm_tensor *b)
{
    return a && f32(b) && matmul_type_ok(a->type) && lm_is_contiguous_rows(a) && a->ne[0] == b->ne[0] &&
           a->ne[2] > 0 && a->ne[3] > 0 && b->ne[2] % a->ne[2] == 0 && b->ne[3] % a->ne[3] == 0 &&
           shape_is(t, a->ne[1], b->ne[1], b->ne[2], b->ne[3]);
}

static bool mul_mat_id_ok(const struct lm_tensor *t, const struct lm_tensor *as, const struct lm_tensor *b,
                          const struct lm_tensor *ids)
{
    return as && f32(b) && i32(ids) && matmul_type_ok(as->type) && lm_is_contiguous_rows(as) && as->ne[3] == 1 &&
           b->ne[3] == 1 && ids->ne[2] == 1 && ids->ne[3] == 1 && as->ne[0] == b->ne[0] &&
           ids->ne[1] == b->ne[2] && (b->ne[1] == 1 || b->ne[1] == ids->ne[0]) &&
           shape_is(t, as->ne[1], ids->ne[0], ids->ne[1], 1);
}

static bool get_rows_ok(const struct lm_tensor *t, const struct lm_tensor *a, const struct lm_tensor *ids)
{
    return a && i32(ids) && weight_type_ok(a->type) && lm_cpu_kernels()->type[a->type].to_float &&
           (lm_type_blck(a->type) == 1 || lm_is_contiguous_rows(a)) && ids->ne[3] == 1 &&
           (a->ne[2] == ids->ne[1] || a->ne[2] == 1) && (a->ne[3] == ids->ne[2] || a->ne[3] == 1) &&
           shape_is(t, a->ne[0], ids->ne[0], ids->ne[1], ids->ne[2]);
}

static bool copy_ok(const struct lm_tensor *t, const struct lm_tensor *a)
{
    if (!a || lm_nelements(a) != lm_nelements(t) || !lm_type_valid(a->type) || !lm_type_valid(t->type))
        return false;
    if (lm_type_blck(a->type) != 1 && !(t->op == LM_OP_CONT ? lm_is_contiguous_rows(a) : lm_is_contiguous(a)))
        return false;
    if (lm_type_blck(t->type) != 1 && !lm_is_contiguous_rows(t))
        return false;
    if (a->type == t->type)
        return t->op == LM_OP_CPY || lm_type_blck(a->type) == 1 || lm_same_shape(a, t);
    if (t->op != LM_OP_CPY || !is_float_type(a->type))
        return false;
    if (is_float_type(t->type))
        return true;
    return a->type == LM_TYPE_F32 && weight_type_ok(t->type) && lm_quant_traits(t->type)->from_float;
}

static bool concat_ok(const struct lm_tensor *t, const struct lm_tensor *a, const struct lm_tensor *b)
{
    const int dim = t->op_params[0];
    if (!f32(a) || !f32(b) || dim < 0 || dim > 3)
        return false;
    for (int i = 0; i < 4; i++)
        if (t->ne[i] != (i == dim ? a->ne[i] + b->ne[i] : a->ne[i]) || (i != dim && a->ne[i] != b->ne[i]))
            return false;
    return true;
}

static bool rope_ok(const struct lm_tensor *t, const struct lm_tensor *a, const struct lm_tensor *pos)
{
    const int n_dims = t->op_params[0], mode = t->op_params[1];
    return f32(a) && i32(pos) && lm_same_shape(t, a) && pos->ne[0] == a->ne[2] && n_dims > 0 && n_dims % 2 == 0 &&
           n_dims <= a->ne[0] && (mode == LM_ROPE_NORMAL || mode == LM_ROPE_NEOX);
}

/* A float type whose rows the kernel table can dot with a rounded activation row. */
static bool attn_type_ok(const struct lm_tensor *t)
{
    const struct lm_cpu_kernels *k = lm_cpu_kernels();
    if (!t || !is_float_type(t->type) || !lm_is_contiguous_rows(t))
        return false;
    const struct lm_cpu_type_kernels *tk = &k->type[t->type];
    return tk->vec_dot && (tk->vec_dot_type == LM_TYPE_F32 || k->type[tk->vec_dot_type].from_float);
}

static bool attn_ok(const struct lm_tensor *t)
{
    const struct lm_tensor *q = t->src[0], *k = t->src[1], *v = t->src[2], *m = t->src[3];
    if (!f32(t) || !f32(q) || !attn_type_ok(k) || !attn_type_ok(v) || (m && !f32(m)))
        return false;
    return q->ne[0] == k->ne[0] && k->ne[1] == v->ne[0] && k->ne[1] > 0 && k->ne[1] <= INT32_MAX &&
           k->ne[2] == v->ne[2] && k->ne[2] > 0 && q->ne[2] % k->ne[2] == 0 && q->ne[3] == 1 && k->ne[3] == 1 &&
           v->ne[3] == 1 && shape_is(t, v->ne[1], q->ne[2], q->ne[1], 1) &&
           (!m || (m->ne[0] == k->ne[1] && m->ne[1] >= q->ne[1]));
}

/* True when the CPU ops compute node t as tensor.h defines it. Pure; thread-safe. */
bool lm_cpu_supports_op(const struct lm_tensor *t)
{
    const struct lm_tensor *a = t->src[0], *b = t->src[1];
    /* repacked weights are only readable as a matmul's weight operand */
    for (int s = 0; s < LM_MAX_SRC; s++)
        if (t->src[s] && lm_tensor_is_repacked(t->src[s]) && !(t->op == LM_OP_MUL_MAT && s == 0))
            return false;
    const bool out_f32 = f32(t);
    switch (t->op) {
    case LM_OP_NONE:
    case LM_OP_RESHAPE:
    case LM_OP_VIEW:
    case LM_OP_PERMUTE:
    case LM_OP_TRANSPOSE:
        return true;
    case LM_OP_ADD:
    case LM_OP_MUL:
    case LM_OP_DIV:
        return out_f32 && f32(a) && f32(b) && lm_same_shape(t, a) && lm_can_repeat(b, a);
    case LM_OP_UNARY:
        if ((unsigned)t->op_params[0] >= LM_UNARY_COUNT)
            return false;
        /* fall through */
    case LM_OP_SCALE:
    case LM_OP_SQR:
    case LM_OP_SQRT:
    case LM_OP_CLAMP:
    case LM_OP_NORM:
    case LM_OP_RMS_NORM:
    case LM_OP_DIAG_MASK_INF:
        return out_f32 && f32(a) && lm_same_shape(t, a);
    case LM_OP_SUM_ROWS:
        return out_f32 && f32(a) && shape_is(t, 1, a->ne[1], a->ne[2], a->ne[3]);
    case LM_OP_MUL_MAT:
        return out_f32 && mul_mat_ok(t, a, b);
    case LM_OP_MUL_MAT_ID:
        return out_f32 && mul_mat_id_ok(t, a, b, t->src[2]);
    case LM_OP_GET_ROWS:
        return out_f32 && get_rows_ok(t, a, b);
    case LM_OP_CPY:
    case LM_OP_CONT:
        return copy_ok(t, a);
    case LM_OP_REPEAT:
        return out_f32 && f32(a) && lm_can_repeat(a, t);
    case LM_OP_CONCAT:
        return out_f32 && concat_ok(t, a, b);
    case LM_OP_SOFT_MAX:
        return out_f32 && f32(a) && lm_same_shape(t, a) &&
               (!b || (f32(b) && b->ne[0] == a->ne[0] && b->ne[1] >= a->ne[1]));
    case LM_OP_ROPE:
        return out_f32 && rope_ok(t, a, b);
    case LM_OP_ARGSORT:
        return i32(t) && f32(a) && lm_same_shape(t, a);
    case LM_OP_ATTN:
        return attn_ok(t);
    default:
        return false;
    }
}
