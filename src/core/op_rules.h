/* op_rules.h - the op descriptor table: for every op its name, its sources,
 * what it is (a view, an elementwise op that may run in place, an op with a
 * gradient) and its rule: what makes a node (a result tensor with its src[]
 * and op_params) well-formed. Everything generic code asks about an op
 * (lm_op_name, lm_is_view_op, the graph allocator's in-place choice,
 * lm_grad_supports) reads this one row; each backend keeps one row per op of
 * its own (supports, work, compute) beside it (docs/extending.md, "A new op").
 *
 * A rule checks what the op means, whatever backend computes it: the shapes
 * of the sources and of the result, the types the op allows at all (the
 * union over backends: MUL_MAT takes any weight type), the contiguity its
 * definition needs and the ranges of its op_params. The constructors in
 * core/ops.c check every node they build with it, and a backend's
 * supports_op calls lm_op_check first and then only asks itself whether it
 * has a kernel for these types (docs/ops.md, "Op rules"). Pure; thread-safe.
 */
#ifndef LM_OP_RULES_H
#define LM_OP_RULES_H

#include <stdbool.h>
#include <stddef.h>

#include "core/tensor.h"

#ifdef __cplusplus
extern "C" { /* the CUDA backend (C++) calls these */
#endif

/* True when node t is well-formed for its op. t's required sources are
 * present (the generic part checks that); on false, a message saying why
 * (as the constructors word it) goes into why[0..why_size) when why is
 * non-NULL. */
typedef bool (*lm_op_rule_fn)(const struct lm_tensor *t, char *why, size_t why_size);

/* What an op is, beyond its rule (struct lm_op_rule's flags). */
enum lm_op_flag {
    /* the result is a view of src[0]'s memory: nothing is computed
     * (RESHAPE, VIEW, PERMUTE, TRANSPOSE); lm_is_view_op */
    LM_OPF_VIEW = 1,
    /* elementwise over src[0]: the result may be written over src[0] when
     * both have one type and shape and are contiguous (the graph allocator's
     * in-place reuse, sched/galloc.c) */
    LM_OPF_INPLACE = 2,
    /* train/grad.c has its backward rule (lm_grad_supports) */
    LM_OPF_GRAD = 4,
};

/* The descriptor of one op: one row per enum lm_op, in op order. */
struct lm_op_rule {
    enum lm_op op;
    const char *name;   /* lm_op_name(op) */
    int n_src;          /* sources src[0..n_src) that must be present */
    int n_src_max;      /* sources past n_src that may be present (a mask): src[n_src..n_src_max) */
    unsigned flags;     /* enum lm_op_flag bits */
    lm_op_rule_fn check;
};

/* The descriptor of op, or NULL for a value outside enum lm_op (LM_OP_COUNT
 * and beyond, negative). Every op has one (LM_OP_NONE's rule accepts any leaf). */
const struct lm_op_rule *lm_op_rule(enum lm_op op);

/* True when op's descriptor has every bit of flags; false for an unknown op. */
bool lm_op_has(enum lm_op op, unsigned flags);

/* True when a node of op is computed by a backend: a known op that is
 * neither LM_OP_NONE (a leaf) nor a view. Every backend needs a compute
 * function for exactly these ops; the others compute nothing anywhere. */
bool lm_op_computes(enum lm_op op);

/* True when t is a well-formed node: a known op, its required sources
 * present, and its rule satisfied. On false the reason goes into why (when
 * non-NULL). Backends call it with why = NULL. */
bool lm_op_check(const struct lm_tensor *t, char *why, size_t why_size);

/* Types MUL_MAT, MUL_MAT_ID and GET_ROWS accept for their weight operand:
 * every valid type but the integer ones. */
bool lm_op_weight_type_ok(enum lm_type t);

/* F32, F16 or BF16. */
bool lm_op_float_type(enum lm_type t);

#ifdef __cplusplus
}
#endif

#endif
