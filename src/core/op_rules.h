/* op_rules.h - the one table of op rules: for every op, what makes a node
 * (a result tensor with its src[] and op_params) well-formed.
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

struct lm_op_rule {
    enum lm_op op;
    const char *name;   /* lm_op_name(op) */
    int n_src;          /* sources src[0..n_src) that must be present */
    int n_src_max;      /* sources past n_src that may be present (a mask): src[n_src..n_src_max) */
    lm_op_rule_fn check;
};

/* The rule of op, or NULL for an op outside the table. */
const struct lm_op_rule *lm_op_rule(enum lm_op op);

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
