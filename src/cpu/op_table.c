/* op_table.c - the CPU backend's row for every op: whether it computes a
 * node (supports), the scratch it needs (work) and the function that computes
 * it (compute). The op rules of the core (core/op_rules.c) say whether a node
 * is well-formed (shapes, types the op allows, op_params); a row's supports
 * adds only what the CPU has kernels for: the kernel table's types, repacked
 * weights, and the kernels' own limits, each marked as such. Pure; thread-safe.
 *
 * A row with no compute is an op the CPU does not compute: lm_cpu_supports_op
 * refuses it and the executor stops on it, except for view ops and leaves,
 * which compute nothing anywhere.
 */
#include "core/op_rules.h"
#include "cpu/exec.h"
#include "cpu/kernels/kernels.h"
#include "cpu/ops/ops.h"
#include "cpu/repack.h"

/* ---- what the kernels can compute (supports) ---- */

/* The matmul can run weights of type t: a direct kernel, or the dequantizing path. */
static bool matmul_type_ok(enum lm_type t)
{
    const struct lm_cpu_kernels *k = lm_cpu_kernels();
    const struct lm_cpu_type_kernels *tk = &k->type[t];
    if (!k->type[tk->vec_dot_type].from_float)
        return false;
    return tk->vec_dot || (tk->to_float && (tk->vec_dot_type == LM_TYPE_F32 || k->type[tk->vec_dot_type].to_float));
}

/* A K or V type whose rows the kernel table can dot with a rounded activation row. */
static bool attn_type_ok(enum lm_type t)
{
    const struct lm_cpu_kernels *k = lm_cpu_kernels();
    const struct lm_cpu_type_kernels *tk = &k->type[t];
    return tk->vec_dot && (tk->vec_dot_type == LM_TYPE_F32 || k->type[tk->vec_dot_type].from_float);
}

static bool supports_mul_mat(const struct lm_tensor *t) { return matmul_type_ok(t->src[0]->type); }

/* kernel limit: a block-type row is converted whole, so its blocks must be packed */
static bool supports_get_rows(const struct lm_tensor *t)
{
    const struct lm_tensor *a = t->src[0];
    return lm_cpu_kernels()->type[a->type].to_float && (lm_type_blck(a->type) == 1 || lm_is_contiguous_rows(a));
}

/* a quantized destination needs the type's encoder, a quantized source its decoder */
static bool supports_cpy(const struct lm_tensor *t)
{
    const struct lm_tensor *a = t->src[0];
    if (a->type == t->type)
        return true;
    if (lm_type_blck(a->type) > 1 && !lm_cpu_kernels()->type[a->type].to_float)
        return false;
    return lm_type_blck(t->type) == 1 || lm_quant_traits(t->type)->from_float;
}

/* a block-type destination needs the type's encoder */
static bool supports_set_rows(const struct lm_tensor *t)
{
    return lm_type_blck(t->type) == 1 || lm_quant_traits(t->type)->from_float;
}

/* kernel limit: cell indices are int32 */
static bool supports_attn(const struct lm_tensor *t)
{
    return attn_type_ok(t->src[1]->type) &&
           (lm_get_op_i32(t, 2) ? lm_cpu_kernels()->type[t->src[2]->type].vec_mad_rows != NULL
                                : attn_type_ok(t->src[2]->type)) &&
           t->src[1]->ne[1] <= INT32_MAX;
}

/* ---- the rows ---- */

/* {supports, work, compute}: supports NULL takes every well-formed node;
 * work NULL needs no scratch; compute NULL: not computed here (views, leaves). */
#define ROW(o, sup, wk, fn) [LM_OP_##o] = {sup, wk, fn}

/* Unsized, so that the count check fails when an op is added without its row
 * (and the size must match ops.h's declaration). */
const struct lm_cpu_op_row lm_cpu_op_rows[] = {
    ROW(NONE, NULL, NULL, NULL),
    ROW(ADD, NULL, NULL, lm_cpu_op_binary),
    ROW(MUL, NULL, NULL, lm_cpu_op_binary),
    ROW(DIV, NULL, NULL, lm_cpu_op_binary),
    ROW(SCALE, NULL, NULL, lm_cpu_op_unary),
    ROW(SQR, NULL, NULL, lm_cpu_op_unary),
    ROW(SQRT, NULL, NULL, lm_cpu_op_unary),
    ROW(CLAMP, NULL, NULL, lm_cpu_op_unary),
    ROW(UNARY, NULL, NULL, lm_cpu_op_unary),
    ROW(SUM_ROWS, NULL, NULL, lm_cpu_op_sum_rows),
    ROW(NORM, NULL, NULL, lm_cpu_op_norm),
    ROW(RMS_NORM, NULL, NULL, lm_cpu_op_norm),
    ROW(MUL_MAT, supports_mul_mat, lm_cpu_work_mul_mat, lm_cpu_op_mul_mat),
    ROW(MUL_MAT_ID, supports_mul_mat, lm_cpu_work_mul_mat_id, lm_cpu_op_mul_mat_id),
    ROW(GET_ROWS, supports_get_rows, lm_cpu_work_get_rows, lm_cpu_op_get_rows),
    ROW(CPY, supports_cpy, lm_cpu_work_cpy, lm_cpu_op_cpy),
    ROW(CONT, supports_cpy, lm_cpu_work_cpy, lm_cpu_op_cpy),
    ROW(REPEAT, NULL, NULL, lm_cpu_op_repeat),
    ROW(CONCAT, NULL, NULL, lm_cpu_op_concat),
    ROW(RESHAPE, NULL, NULL, NULL),
    ROW(VIEW, NULL, NULL, NULL),
    ROW(PERMUTE, NULL, NULL, NULL),
    ROW(TRANSPOSE, NULL, NULL, NULL),
    ROW(DIAG_MASK_INF, NULL, NULL, lm_cpu_op_diag_mask_inf),
    ROW(SOFT_MAX, NULL, lm_cpu_work_soft_max, lm_cpu_op_soft_max),
    ROW(ROPE, NULL, lm_cpu_work_rope, lm_cpu_op_rope),
    ROW(ARGSORT, NULL, lm_cpu_work_argsort, lm_cpu_op_argsort),
    ROW(ATTN, supports_attn, lm_cpu_work_attn, lm_cpu_op_attn),
    ROW(SET_ROWS, supports_set_rows, lm_cpu_work_set_rows, lm_cpu_op_set_rows),
    ROW(GET_ROWS_BACK, NULL, NULL, lm_cpu_op_get_rows_back),
    ROW(REPEAT_BACK, NULL, lm_cpu_work_repeat_back, lm_cpu_op_repeat_back),
    ROW(RMS_NORM_BACK, NULL, NULL, lm_cpu_op_rms_norm_back),
    ROW(ROPE_BACK, NULL, lm_cpu_work_rope, lm_cpu_op_rope),
    ROW(SOFT_MAX_BACK, NULL, NULL, lm_cpu_op_soft_max_back),
    ROW(UNARY_BACK, NULL, NULL, lm_cpu_op_unary_back),
    ROW(CROSS_ENTROPY_LOSS, NULL, lm_cpu_work_cross_entropy, lm_cpu_op_cross_entropy_loss),
    ROW(CROSS_ENTROPY_LOSS_BACK, NULL, lm_cpu_work_cross_entropy, lm_cpu_op_cross_entropy_loss_back),
};
_Static_assert(sizeof lm_cpu_op_rows / sizeof lm_cpu_op_rows[0] == LM_OP_COUNT,
               "every enum lm_op needs its row in the CPU table");

/* The row of op (never NULL for an op of enum lm_op), or NULL outside the enum. Pure. */
const struct lm_cpu_op_row *lm_cpu_op_row(enum lm_op op)
{
    return (unsigned)op < LM_OP_COUNT ? &lm_cpu_op_rows[op] : NULL;
}

/* True when the CPU ops compute node t as tensor.h defines it. Pure; thread-safe. */
bool lm_cpu_supports_op(const struct lm_tensor *t)
{
    if (!lm_op_check(t, NULL, 0))
        return false;
    const struct lm_cpu_op_row *r = &lm_cpu_op_rows[t->op];
    if (!r->compute) /* a view or a leaf computes nothing; any other op without compute is not ours */
        return !lm_op_computes(t->op);
    /* repacked weights are only readable as a matmul's weight operand, as
     * GET_ROWS's table (a tied embedding) and as GET_ROWS_BACK's like (read
     * for its shape only) */
    for (int s = 0; s < LM_MAX_SRC; s++)
        if (t->src[s] && lm_tensor_is_repacked(t->src[s]) &&
            !((t->op == LM_OP_MUL_MAT || t->op == LM_OP_GET_ROWS) && s == 0) &&
            !(t->op == LM_OP_GET_ROWS_BACK && s == 2))
            return false;
    return !r->supports || r->supports(t);
}
