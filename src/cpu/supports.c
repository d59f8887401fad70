/* supports.c - which nodes the CPU ops compute. The op rules of the core
 * (core/op_rules.c) say whether a node is well-formed (shapes, types the op
 * allows, op_params); this file only adds what the CPU has kernels for: the
 * kernel table's types, repacked weights, and the kernels' own limits, each
 * marked as such. Pure; thread-safe.
 */
#include "core/op_rules.h"
#include "cpu/exec.h"
#include "cpu/kernels/kernels.h"
#include "cpu/repack.h"

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

/* True when the CPU ops compute node t as tensor.h defines it. Pure; thread-safe. */
bool lm_cpu_supports_op(const struct lm_tensor *t)
{
    if (!lm_op_check(t, NULL, 0))
        return false;
    const struct lm_tensor *a = t->src[0];
    /* repacked weights are only readable as a matmul's weight operand, as
     * GET_ROWS's table (a tied embedding) and as GET_ROWS_BACK's like (read
     * for its shape only) */
    for (int s = 0; s < LM_MAX_SRC; s++)
        if (t->src[s] && lm_tensor_is_repacked(t->src[s]) &&
            !((t->op == LM_OP_MUL_MAT || t->op == LM_OP_GET_ROWS) && s == 0) &&
            !(t->op == LM_OP_GET_ROWS_BACK && s == 2))
            return false;
    switch (t->op) {
    case LM_OP_MUL_MAT:
    case LM_OP_MUL_MAT_ID:
        return matmul_type_ok(a->type);
    case LM_OP_GET_ROWS:
        /* kernel limit: a block-type row is converted whole, so its blocks must be packed */
        return lm_cpu_kernels()->type[a->type].to_float && (lm_type_blck(a->type) == 1 || lm_is_contiguous_rows(a));
    case LM_OP_CPY:
        /* a quantized destination needs the type's encoder, a quantized source its decoder */
        if (a->type == t->type)
            return true;
        if (lm_type_blck(a->type) > 1 && !lm_cpu_kernels()->type[a->type].to_float)
            return false;
        return lm_type_blck(t->type) == 1 || lm_quant_traits(t->type)->from_float;
    case LM_OP_SET_ROWS:
        /* a block-type destination needs the type's encoder */
        return lm_type_blck(t->type) == 1 || lm_quant_traits(t->type)->from_float;
    case LM_OP_ATTN:
        /* kernel limit: cell indices are int32 */
        return attn_type_ok(t->src[1]->type) &&
               (lm_get_op_i32(t, 2) ? lm_cpu_kernels()->type[t->src[2]->type].vec_mad_rows != NULL
                                    : attn_type_ok(t->src[2]->type)) &&
               t->src[1]->ne[1] <= INT32_MAX;
    default:
        return true;
    }
}
