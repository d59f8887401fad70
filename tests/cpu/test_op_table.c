/* test_op_table.c - every op walked through the op descriptor (core) and the
 * rows of the CPU and ref backends:
 *   - every enum lm_op has its descriptor (name, sources, flags) and a row in
 *     each backend table; a view or LM_OP_NONE computes nothing, every other
 *     op has a compute function on both backends (training ops included);
 *   - the descriptor's flags are what generic code reads: lm_is_view_op,
 *     lm_op_name; an in-place op is elementwise over src[0];
 *   - a node whose op the CPU has no compute for is refused by supports_op
 *     and by graph_compute (LM_ERR_UNSUPPORTED), not skipped as a leaf.
 * The CUDA table is checked at compile time (its rows in op order, one per op).
 */
#include <string.h>

#include "core/op_rules.h"
#include "cpu/cpu.h"
#include "cpu/ops/ops.h"
#include "lm_test.h"
#include "ref/ref.h"
#include "util_cpu.h"

static void test_rows(void)
{
    int n_view = 0, n_inplace = 0;
    for (int i = 0; i < LM_OP_COUNT; i++) {
        const enum lm_op op = (enum lm_op)i;
        const struct lm_op_rule *r = lm_op_rule(op);
        const struct lm_cpu_op_row *c = lm_cpu_op_row(op);
        CHECKF(r && c, "op %d: descriptor %p, CPU row %p", i, (const void *)r, (const void *)c);
        if (!r || !c)
            continue;
        CHECKF(strcmp(lm_op_name(op), r->name) == 0 && strcmp(r->name, "?") != 0, "op %d: name %s", i, r->name);
        CHECKF((c->compute == NULL) == !lm_op_computes(op), "%s: CPU compute %s", r->name,
               c->compute ? "present for an op that computes nothing" : "missing");
        CHECKF(!c->compute ? !c->work && !c->supports : true, "%s: a CPU row without compute has other slots", r->name);
        CHECKF(lm_ref_op_computed(op) == lm_op_computes(op), "%s: ref compute %s", r->name,
               lm_ref_op_computed(op) ? "present for an op that computes nothing" : "missing");
        CHECKF(lm_is_view_op(op) == lm_op_has(op, LM_OPF_VIEW), "%s: lm_is_view_op disagrees", r->name);
        if (r->flags & LM_OPF_VIEW) {
            n_view++;
            CHECKF(r->n_src == 1 && !(r->flags & LM_OPF_INPLACE), "%s: a view has one source, no in-place", r->name);
        }
        if (r->flags & LM_OPF_INPLACE) {
            n_inplace++;
            CHECKF(r->n_src >= 1 && c->compute, "%s: in-place needs a source and a compute", r->name);
        }
    }
    CHECK(n_view == 4 && n_inplace == 8); /* RESHAPE VIEW PERMUTE TRANSPOSE; ADD MUL DIV SCALE SQR SQRT CLAMP UNARY */
    const enum lm_op below = (enum lm_op)(LM_OP_NONE - 1);
    CHECK(lm_cpu_op_row(LM_OP_COUNT) == NULL && lm_cpu_op_row(below) == NULL);
    CHECK(!lm_ref_op_computed(LM_OP_COUNT) && !lm_ref_op_computed(below));
    CHECK(!lm_op_has(LM_OP_COUNT, 0) && strcmp(lm_op_name(LM_OP_COUNT), "?") == 0);
    CHECK(!lm_op_computes(LM_OP_COUNT) && !lm_op_computes(below) && !lm_op_computes(LM_OP_NONE));
}

/* A node of an op the CPU does not compute is an error, on both the query
 * and the compute side (before the table, cpu/exec.c skipped it as a leaf). */
static void test_refused(void)
{
    lm_backend_t be = NULL;
    CHECK(lm_cpu_backend_new(1, &be) == LM_OK);
    if (!be)
        return;
    struct lm_ctx *ctx = uc_ctx(1 << 20);
    struct lm_tensor *x = lm_new_tensor_1d(ctx, LM_TYPE_F32, 4);
    struct lm_tensor *y = lm_scale(ctx, x, 2.0f);
    CHECK(y && lm_backend_supports_op(be, y));
    y->op = LM_OP_COUNT; /* no row: what an op added to the enum without a CPU row would be */
    CHECK(!lm_backend_supports_op(be, y));
    struct lm_graph *g = lm_graph_new(ctx, 8);
    CHECK(g && lm_graph_expand(g, y) == LM_OK);
    CHECK(g && g->n_nodes == 1 && lm_backend_graph_compute(be, g) == LM_ERR_UNSUPPORTED);
    /* views still compute nothing and are accepted */
    struct lm_tensor *v = lm_reshape_2d(ctx, x, 2, 2);
    CHECK(v && lm_backend_supports_op(be, v));
    lm_ctx_free(ctx);
    lm_backend_free(be);
}

int main(void)
{
    test_rows();
    test_refused();
    return lm_test_summary();
}
