/* test_op_rules.c - the op rules table (core/op_rules.c) and the backends
 * that use it: for every op a node built by its constructor is accepted by
 * the table, the cpu and the ref backend; copies of it made malformed by hand
 * (a wrong shape, a wrong type, bad op_params, a missing source) are refused
 * by all three, the table with a message. A few constructors are also called
 * with the malformed inputs and must refuse them with LM_ERR_SHAPE. */
#include <math.h>
#include <string.h>

#include "core/op_rules.h"
#include "cpu/cpu.h"
#include "lm_test.h"
#include "ref/ref.h"

static lm_backend_t cpu, ref;
static int n_good[LM_OP_COUNT], n_bad[LM_OP_COUNT];

static void accept(const char *what, const struct lm_tensor *t)
{
    char why[256] = "";
    CHECKF(t != NULL, "%s: constructor refused", what);
    if (!t)
        return;
    bool ok = lm_op_check(t, why, sizeof why);
    CHECKF(ok, "%s: table refuses: %s", what, why);
    CHECKF(lm_backend_supports_op(cpu, t), "%s: cpu refuses", what);
    CHECKF(lm_backend_supports_op(ref, t), "%s: ref refuses", what);
    if (ok)
        n_good[t->op]++;
}

static void refuse(const char *what, const struct lm_tensor *t)
{
    char why[256] = "";
    bool ok = lm_op_check(t, why, sizeof why);
    CHECKF(!ok && why[0] != '\0', "%s: table accepts", what);
    CHECKF(!lm_backend_supports_op(cpu, t), "%s: cpu accepts", what);
    CHECKF(!lm_backend_supports_op(ref, t), "%s: ref accepts", what);
    if (!ok && (unsigned)t->op < LM_OP_COUNT)
        n_bad[t->op]++;
}

/* BAD(what, node, edit): refuse a copy of node after the statements `edit` (on x). */
#define BAD(what, node, edit)                                                                                     \
    do {                                                                                                          \
        if (node) {                                                                                               \
            struct lm_tensor x_ = *(node);                                                                        \
            struct lm_tensor *x = &x_;                                                                            \
            edit;                                                                                                 \
            refuse(what, x);                                                                                      \
        }                                                                                                         \
    } while (0)

/* x takes d's type, shape and strides (a CPY result over another destination). */
#define LIKE(x, d)                                                                                                \
    do {                                                                                                          \
        (x)->type = (d)->type;                                                                                    \
        memcpy((x)->ne, (d)->ne, sizeof (x)->ne);                                                                 \
        memcpy((x)->nb, (d)->nb, sizeof (x)->nb);                                                                 \
    } while (0)

static struct lm_ctx *scratch; /* constructors that must refuse build here */

/* The constructor call `expr` on scratch returns NULL with LM_ERR_SHAPE. */
#define CTOR_REFUSES(expr)                                                                                        \
    do {                                                                                                          \
        lm_ctx_reset(scratch);                                                                                    \
        struct lm_ctx *c = scratch;                                                                               \
        CHECK((expr) == NULL && lm_ctx_status(c) == LM_ERR_SHAPE);                                                \
    } while (0)

static struct lm_tensor *t4(struct lm_ctx *ctx, enum lm_type type, int64_t n0, int64_t n1, int64_t n2, int64_t n3)
{
    return lm_new_tensor_4d(ctx, type, n0, n1, n2, n3);
}

static void test_table(void)
{
    for (int op = 0; op < LM_OP_COUNT; op++) {
        const struct lm_op_rule *r = lm_op_rule((enum lm_op)op);
        CHECKF(r && (int)r->op == op && r->check && strcmp(r->name, lm_op_name((enum lm_op)op)) == 0,
               "no rule or a wrong name for op %d", op);
        CHECK(r && r->n_src >= 0 && r->n_src <= r->n_src_max && r->n_src_max <= LM_MAX_SRC);
    }
    CHECK(lm_op_rule(LM_OP_COUNT) == NULL && lm_op_rule((enum lm_op)-1) == NULL);
    char why[64] = "";
    CHECK(!lm_op_check(NULL, why, sizeof why) && why[0]);
    struct lm_tensor t;
    memset(&t, 0, sizeof t);
    t.op = LM_OP_COUNT;
    CHECK(!lm_op_check(&t, NULL, 0)); /* no message buffer: still refused, no crash */
}

static void test_ops(struct lm_ctx *ctx)
{
    struct lm_tensor *x = t4(ctx, LM_TYPE_F32, 8, 4, 3, 1), *row = t4(ctx, LM_TYPE_F32, 8, 1, 1, 1);
    struct lm_tensor *h = t4(ctx, LM_TYPE_F16, 8, 4, 3, 1), *odd = t4(ctx, LM_TYPE_F32, 3, 4, 3, 1);
    struct lm_tensor *leaf = t4(ctx, LM_TYPE_F32, 8, 1, 1, 1);
    accept("NONE", leaf);

    /* element-wise */
    const enum lm_op bin[3] = {LM_OP_ADD, LM_OP_MUL, LM_OP_DIV};
    for (int i = 0; i < 3; i++) {
        struct lm_tensor *n = i == 0 ? lm_add(ctx, x, row) : i == 1 ? lm_mul(ctx, x, row) : lm_div(ctx, x, row);
        accept(lm_op_name(bin[i]), n);
        BAD("binary: f16 operand", n, x->src[1] = h);
        BAD("binary: no broadcast", n, x->src[1] = odd);
        BAD("binary: NULL src1", n, x->src[1] = NULL);
        BAD("binary: result shape", n, x->ne[1] = 2);
        BAD("binary: result type", n, x->type = LM_TYPE_F16);
    }
    accept("ADD inplace", lm_add_inplace(ctx, x, row));
    CTOR_REFUSES(lm_add(c, x, h));
    CTOR_REFUSES(lm_mul(c, x, odd));

    struct lm_tensor *un[6] = {lm_scale(ctx, x, 0.5f), lm_sqr(ctx, x), lm_sqrt(ctx, x), lm_clamp(ctx, x, -1, 1),
                               lm_diag_mask_inf(ctx, x, 1), lm_silu(ctx, x)};
    for (int i = 0; i < 6; i++) {
        accept("unary", un[i]);
        BAD("unary: f16 operand", un[i], x->src[0] = h);
        BAD("unary: NULL src0", un[i], x->src[0] = NULL);
        BAD("unary: result shape", un[i], x->ne[0] = 4);
        BAD("unary: result type", un[i], x->type = LM_TYPE_I32);
    }
    BAD("UNARY: op out of range", un[5], lm_set_op_i32(x, 0, LM_UNARY_COUNT));
    BAD("UNARY: negative op", un[5], lm_set_op_i32(x, 0, -1));
    CTOR_REFUSES(lm_unary(c, x, LM_UNARY_COUNT));
    CTOR_REFUSES(lm_sqrt(c, h));

    struct lm_tensor *sr = lm_sum_rows(ctx, x);
    accept("SUM_ROWS", sr);
    BAD("SUM_ROWS: result shape", sr, x->ne[0] = 8);
    BAD("SUM_ROWS: f16 operand", sr, x->src[0] = h);

    struct lm_tensor *nm[2] = {lm_norm(ctx, x, 1e-5f), lm_rms_norm(ctx, x, 1e-6f)};
    for (int i = 0; i < 2; i++) {
        accept("norm", nm[i]);
        BAD("norm: eps < 0", nm[i], lm_set_op_f32(x, 0, -1.0f));
        BAD("norm: eps nan", nm[i], lm_set_op_f32(x, 0, NAN));
        BAD("norm: f16 operand", nm[i], x->src[0] = h);
    }
    CTOR_REFUSES(lm_rms_norm(c, x, INFINITY));

    /* matrix products and gathers */
    struct lm_tensor *wq = t4(ctx, LM_TYPE_Q8_0, 32, 6, 1, 1), *wf = t4(ctx, LM_TYPE_F32, 32, 6, 1, 1);
    struct lm_tensor *act = t4(ctx, LM_TYPE_F32, 32, 5, 1, 1), *act16 = t4(ctx, LM_TYPE_F16, 32, 5, 1, 1);
    struct lm_tensor *wi = t4(ctx, LM_TYPE_I32, 32, 6, 1, 1), *act_short = t4(ctx, LM_TYPE_F32, 16, 5, 1, 1);
    struct lm_tensor *wt = lm_transpose(ctx, t4(ctx, LM_TYPE_F32, 6, 32, 1, 1)); /* rows not contiguous */
    struct lm_tensor *mm = lm_mul_mat(ctx, wq, act);
    accept("MUL_MAT q8_0", mm);
    accept("MUL_MAT f32", lm_mul_mat(ctx, wf, act));
    BAD("MUL_MAT: f16 activations", mm, x->src[1] = act16);
    BAD("MUL_MAT: i32 weights", mm, x->src[0] = wi);
    BAD("MUL_MAT: k differs", mm, x->src[1] = act_short);
    BAD("MUL_MAT: weight rows not contiguous", mm, x->src[0] = wt);
    BAD("MUL_MAT: result shape", mm, x->ne[0] = 5);
    BAD("MUL_MAT: NULL src1", mm, x->src[1] = NULL);
    CTOR_REFUSES(lm_mul_mat(c, wq, act_short));
    CTOR_REFUSES(lm_mul_mat(c, wi, act));

    struct lm_tensor *experts = t4(ctx, LM_TYPE_Q8_0, 32, 6, 4, 1), *bm = t4(ctx, LM_TYPE_F32, 32, 1, 5, 1);
    struct lm_tensor *ids = t4(ctx, LM_TYPE_I32, 2, 5, 1, 1), *idsf = t4(ctx, LM_TYPE_F32, 2, 5, 1, 1);
    struct lm_tensor *ids_short = t4(ctx, LM_TYPE_I32, 2, 4, 1, 1);
    struct lm_tensor *mmid = lm_mul_mat_id(ctx, experts, bm, ids);
    accept("MUL_MAT_ID", mmid);
    BAD("MUL_MAT_ID: f32 ids", mmid, x->src[2] = idsf);
    BAD("MUL_MAT_ID: ids for other tokens", mmid, x->src[2] = ids_short);
    BAD("MUL_MAT_ID: NULL ids", mmid, x->src[2] = NULL);
    BAD("MUL_MAT_ID: result shape", mmid, x->ne[2] = 1);
    CTOR_REFUSES(lm_mul_mat_id(c, experts, bm, idsf));

    struct lm_tensor *emb = t4(ctx, LM_TYPE_Q8_0, 32, 10, 1, 1), *tok = t4(ctx, LM_TYPE_I32, 3, 1, 1, 1);
    struct lm_tensor *tok2 = t4(ctx, LM_TYPE_I32, 3, 2, 2, 2), *tokf = t4(ctx, LM_TYPE_F32, 3, 1, 1, 1);
    struct lm_tensor *gr = lm_get_rows(ctx, emb, tok);
    accept("GET_ROWS", gr);
    BAD("GET_ROWS: f32 ids", gr, x->src[1] = tokf);
    BAD("GET_ROWS: 4-d ids", gr, x->src[1] = tok2);
    BAD("GET_ROWS: i32 table", gr, x->src[0] = wi);
    BAD("GET_ROWS: result type", gr, x->type = LM_TYPE_Q8_0);
    BAD("GET_ROWS: NULL ids", gr, x->src[1] = NULL);
    CTOR_REFUSES(lm_get_rows(c, emb, tokf));

    /* copies and layout */
    struct lm_tensor *x16 = t4(ctx, LM_TYPE_F16, 8, 4, 3, 1), *small16 = t4(ctx, LM_TYPE_F16, 8, 4, 1, 1);
    struct lm_tensor *src_q = t4(ctx, LM_TYPE_F32, 32, 3, 1, 1), *dst_q = t4(ctx, LM_TYPE_Q8_0, 32, 3, 1, 1);
    struct lm_tensor *cp = lm_cpy(ctx, x, x16);
    accept("CPY f32->f16", cp);
    struct lm_tensor *cq = lm_cpy(ctx, src_q, dst_q);
    accept("CPY f32->q8_0", cq);
    BAD("CPY: element counts differ", cp, x->src[1] = small16);
    BAD("CPY: f16 source to q8_0", cq, x->src[0] = t4(ctx, LM_TYPE_F16, 32, 3, 1, 1));
    struct lm_tensor *dq = lm_cpy(ctx, dst_q, src_q);
    accept("CPY q8_0->f32 (decoded)", dq);
    /* each with a result shaped like its new destination, so only the type rule can refuse */
    struct lm_tensor *f16x6 = t4(ctx, LM_TYPE_F32, 16, 6, 1, 1), *q4 = t4(ctx, LM_TYPE_Q4_0, 32, 3, 1, 1);
    struct lm_tensor *f32sq = t4(ctx, LM_TYPE_F32, 32, 32, 1, 1);
    BAD("CPY: q8_0 source into rows of 16", dq, x->src[1] = f16x6; LIKE(x, f16x6));
    BAD("CPY: q8_0 source to q4_0", dq, x->src[1] = q4; LIKE(x, q4));
    /* every other row of a q8_0 matrix */
    struct lm_tensor *q8gap = lm_view_2d(ctx, t4(ctx, LM_TYPE_Q8_0, 32, 64, 1, 1), 32, 32, 2 * 34, 0);
    BAD("CPY: q8_0 source not contiguous", dq, x->src[0] = q8gap; x->src[1] = f32sq; LIKE(x, f32sq));
    BAD("CPY: result type is not the destination's", cp, x->type = LM_TYPE_F32);
    BAD("CPY: NULL destination", cp, x->src[1] = NULL);
    CTOR_REFUSES(lm_cpy(c, x, small16));
    CTOR_REFUSES(lm_cpy(c, dst_q, t4(ctx, LM_TYPE_F32, 16, 6, 1, 1)));

    /* the KV cache writes: K rows (f16, q8_0), V columns */
    struct lm_tensor *kv_a = t4(ctx, LM_TYPE_F32, 32, 3, 1, 1), *kc16 = t4(ctx, LM_TYPE_F16, 32, 10, 1, 1);
    struct lm_tensor *kc8 = t4(ctx, LM_TYPE_Q8_0, 32, 10, 1, 1), *vc16 = t4(ctx, LM_TYPE_F16, 10, 32, 1, 1);
    struct lm_tensor *cells = t4(ctx, LM_TYPE_I32, 3, 1, 1, 1), *cellsf = t4(ctx, LM_TYPE_F32, 3, 1, 1, 1);
    struct lm_tensor *vc8 = t4(ctx, LM_TYPE_Q8_0, 32, 32, 1, 1), *kc3d = t4(ctx, LM_TYPE_F16, 32, 5, 2, 1);
    struct lm_tensor *srow = lm_set_rows(ctx, kc16, kv_a, cells), *sq = lm_set_rows(ctx, kc8, kv_a, cells);
    struct lm_tensor *sc = lm_set_cols(ctx, vc16, kv_a, cells);
    accept("SET_ROWS f16 rows", srow);
    accept("SET_ROWS q8_0 rows", sq);
    accept("SET_ROWS f16 columns", sc);
    BAD("SET_ROWS: f32 ids", srow, x->src[2] = cellsf);
    BAD("SET_ROWS: ids for 4 rows of a", srow, x->src[2] = t4(ctx, LM_TYPE_I32, 4, 1, 1, 1));
    BAD("SET_ROWS: f16 source", srow, x->src[0] = t4(ctx, LM_TYPE_F16, 32, 3, 1, 1));
    BAD("SET_ROWS: source rows of 16 into rows of 32", srow, x->src[0] = t4(ctx, LM_TYPE_F32, 16, 3, 1, 1));
    BAD("SET_ROWS: q8_0 columns", sc, x->src[1] = vc8; LIKE(x, vc8));
    BAD("SET_ROWS: 3-d destination", srow, x->src[1] = kc3d; LIKE(x, kc3d));
    BAD("SET_ROWS: mode 2", srow, x->op_params[0] = 2);
    BAD("SET_ROWS: result type is not the destination's", sq, x->type = LM_TYPE_F32);
    BAD("SET_ROWS: NULL ids", srow, x->src[2] = NULL);
    CTOR_REFUSES(lm_set_rows(c, kc16, kv_a, cellsf));
    CTOR_REFUSES(lm_set_cols(c, kc8, kv_a, cells));

    struct lm_tensor *ct = lm_cont(ctx, lm_transpose(ctx, x));
    accept("CONT", ct);
    accept("CONT_2D", lm_cont_2d(ctx, x, 32, 3));
    accept("CONT q8_0", lm_cont(ctx, dst_q));
    BAD("CONT: result type", ct, x->type = LM_TYPE_F16);
    BAD("CONT: element counts differ", ct, x->ne[2] = 1);
    BAD("CONT: q8_0 reshaped", lm_cont(ctx, dst_q), x->ne[0] = 96; x->ne[1] = 1);
    CTOR_REFUSES(lm_cont_2d(c, x, 32, 4));
    CTOR_REFUSES(lm_cont_2d(c, dst_q, 96, 1));

    struct lm_tensor *rp = lm_repeat(ctx, row, x);
    accept("REPEAT", rp);
    BAD("REPEAT: does not tile", rp, x->ne[0] = 12);
    BAD("REPEAT: f16 operand", rp, x->src[0] = h);
    CTOR_REFUSES(lm_repeat(c, odd, x));

    struct lm_tensor *cc = lm_concat(ctx, x, x, 2);
    accept("CONCAT", cc);
    BAD("CONCAT: dim 4", cc, lm_set_op_i32(x, 0, 4));
    BAD("CONCAT: dim -1", cc, lm_set_op_i32(x, 0, -1));
    BAD("CONCAT: dims differ", cc, x->src[1] = odd);
    BAD("CONCAT: result shape", cc, x->ne[2] = 3);
    BAD("CONCAT: NULL src1", cc, x->src[1] = NULL);
    CTOR_REFUSES(lm_concat(c, x, x, 4));
    CTOR_REFUSES(lm_concat(c, x, odd, 2));

    /* views */
    struct lm_tensor *rs = lm_reshape_2d(ctx, x, 32, 3), *vw = lm_view_2d(ctx, x, 8, 2, x->nb[1], x->nb[1]);
    struct lm_tensor *pm = lm_permute(ctx, x, 0, 2, 1, 3), *tr = lm_transpose(ctx, x);
    accept("RESHAPE", rs);
    accept("VIEW", vw);
    accept("PERMUTE", pm);
    accept("TRANSPOSE", tr);
    struct lm_tensor *views[4] = {rs, vw, pm, tr};
    for (int i = 0; i < 4; i++) {
        BAD("view: type differs", views[i], x->type = LM_TYPE_F16);
        BAD("view: NULL source", views[i], x->src[0] = NULL);
        BAD("view: past the end", views[i], x->view_offs = lm_nbytes(views[i]->view_src));
    }
    BAD("RESHAPE: non-contiguous source", rs, x->src[0] = tr);
    BAD("RESHAPE: element count", rs, x->ne[1] = 2);
    BAD("PERMUTE: axis out of range", pm, lm_set_op_i32(x, 1, 7));
    BAD("PERMUTE: not a permutation", pm, lm_set_op_i32(x, 1, 0));
    struct lm_tensor *pq = lm_permute(ctx, dst_q, 0, 2, 1, 3);
    accept("PERMUTE q8_0", pq);
    BAD("PERMUTE: q8_0 moves dim 0", pq, lm_set_op_i32(x, 0, 1); lm_set_op_i32(x, 1, 0));
    BAD("VIEW: q8_0 ne0 not whole blocks", pq, x->op = LM_OP_VIEW; x->ne[0] = 16);
    BAD("ADD: result of an unknown type", lm_add(ctx, x, row), x->type = (enum lm_type)4);
    CTOR_REFUSES(lm_view_2d(c, x, 8, 4, x->nb[1], lm_nbytes(x)));
    CTOR_REFUSES(lm_reshape_2d(c, tr, 32, 3));

    /* attention pieces */
    struct lm_tensor *mask = t4(ctx, LM_TYPE_F32, 8, 4, 1, 1), *mask_short = t4(ctx, LM_TYPE_F32, 8, 2, 1, 1);
    struct lm_tensor *sm = lm_soft_max_ext(ctx, x, mask, 0.125f, 0.0f);
    accept("SOFT_MAX", sm);
    accept("SOFT_MAX no mask", lm_soft_max(ctx, x));
    BAD("SOFT_MAX: mask rows", sm, x->src[1] = mask_short);
    BAD("SOFT_MAX: f16 mask", sm, x->src[1] = small16);
    BAD("SOFT_MAX: max_bias < 0", sm, lm_set_op_f32(x, 1, -1.0f));
    BAD("SOFT_MAX: scale inf", sm, lm_set_op_f32(x, 0, INFINITY));
    BAD("SOFT_MAX: NULL src0", sm, x->src[0] = NULL);
    CTOR_REFUSES(lm_soft_max_ext(c, x, mask_short, 1.0f, 0.0f));

    struct lm_tensor *ra = t4(ctx, LM_TYPE_F32, 8, 2, 3, 1), *pos = t4(ctx, LM_TYPE_I32, 3, 1, 1, 1);
    struct lm_tensor *pos4 = t4(ctx, LM_TYPE_I32, 4, 1, 1, 1), *posf = t4(ctx, LM_TYPE_F32, 3, 1, 1, 1);
    struct lm_rope_params rp_ok = {.n_dims = 8, .mode = LM_ROPE_NEOX, .freq_base = 10000.0f, .freq_scale = 1.0f,
                                   .attn_factor = 1.0f};
    struct lm_tensor *ro = lm_rope(ctx, ra, pos, &rp_ok);
    accept("ROPE", ro);
    BAD("ROPE: f32 positions", ro, x->src[1] = posf);
    BAD("ROPE: positions for other tokens", ro, x->src[1] = pos4);
    BAD("ROPE: odd n_dims", ro, lm_set_op_i32(x, 0, 7));
    BAD("ROPE: n_dims past the row", ro, lm_set_op_i32(x, 0, 10));
    BAD("ROPE: unknown mode", ro, lm_set_op_i32(x, 1, 1));
    BAD("ROPE: freq_base 0", ro, lm_set_op_f32(x, 3, 0.0f));
    BAD("ROPE: NULL positions", ro, x->src[1] = NULL);
    struct lm_rope_params rp_bad = rp_ok;
    rp_bad.mode = 1;
    CTOR_REFUSES(lm_rope(c, ra, pos, &rp_bad));
    CTOR_REFUSES(lm_rope(c, ra, pos, NULL));

    struct lm_tensor *as = lm_argsort(ctx, x, LM_SORT_DESC);
    accept("ARGSORT", as);
    BAD("ARGSORT: bad order", as, lm_set_op_i32(x, 0, 5));
    BAD("ARGSORT: result type", as, x->type = LM_TYPE_F32);
    CTOR_REFUSES(lm_argsort(c, x, (enum lm_sort_order)5));

    struct lm_tensor *q = t4(ctx, LM_TYPE_F32, 16, 3, 4, 1), *k = t4(ctx, LM_TYPE_F16, 16, 10, 2, 1);
    struct lm_tensor *v = t4(ctx, LM_TYPE_F16, 10, 16, 2, 1), *am = t4(ctx, LM_TYPE_F32, 10, 3, 1, 1);
    struct lm_tensor *ki = t4(ctx, LM_TYPE_I32, 16, 10, 2, 1), *k3 = t4(ctx, LM_TYPE_F16, 16, 10, 3, 1);
    struct lm_tensor *am_short = t4(ctx, LM_TYPE_F32, 10, 2, 1, 1);
    struct lm_tensor *at = lm_attn(ctx, q, k, v, am, 0.25f, 0.0f);
    accept("ATTN", at);
    accept("ATTN f32 kv, no mask", lm_attn(ctx, q, t4(ctx, LM_TYPE_F32, 16, 10, 2, 1),
                                           t4(ctx, LM_TYPE_F32, 10, 16, 2, 1), NULL, 1.0f, 0.0f));
    BAD("ATTN: i32 keys", at, x->src[1] = ki);
    BAD("ATTN: 3 kv heads for 4 q heads", at, x->src[1] = k3);
    BAD("ATTN: mask rows", at, x->src[3] = am_short);
    BAD("ATTN: max_bias < 0", at, lm_set_op_f32(x, 1, -0.5f));
    BAD("ATTN: NULL v", at, x->src[2] = NULL);
    BAD("ATTN: result shape", at, x->ne[0] = 10);
    CTOR_REFUSES(lm_attn(c, q, k3, v, NULL, 1.0f, 0.0f));
    CTOR_REFUSES(lm_attn(c, q, k, v, am, NAN, 0.0f));

    /* training ops */
    struct lm_tensor *dy2 = t4(ctx, LM_TYPE_F32, 8, 5, 1, 1), *gids = t4(ctx, LM_TYPE_I32, 5, 1, 1, 1);
    struct lm_tensor *table = t4(ctx, LM_TYPE_Q8_0, 32, 10, 1, 1), *table8 = t4(ctx, LM_TYPE_F16, 8, 10, 1, 1);
    /* ids [5] with a stride of 2 elements: a column of [2, 5], transposed */
    struct lm_tensor *gids_nc = lm_transpose(ctx, lm_view_2d(ctx, t4(ctx, LM_TYPE_I32, 2, 5, 1, 1), 1, 5, 8, 0));
    struct lm_tensor *grb = lm_get_rows_back(ctx, dy2, gids, table8);
    accept("GET_ROWS_BACK", grb);
    accept("GET_ROWS_BACK transposed dy", lm_get_rows_back(ctx, lm_transpose(ctx, t4(ctx, LM_TYPE_F32, 5, 8, 1, 1)),
                                                            gids, table8));
    BAD("GET_ROWS_BACK: f32 ids", grb, x->src[1] = tokf);
    BAD("GET_ROWS_BACK: ids for other rows", grb, x->src[1] = tok);
    BAD("GET_ROWS_BACK: 2-d ids", grb, x->src[1] = ids);
    BAD("GET_ROWS_BACK: like of another row length", grb, x->src[2] = table);
    BAD("GET_ROWS_BACK: f16 dy", grb, x->src[0] = t4(ctx, LM_TYPE_F16, 8, 5, 1, 1));
    BAD("GET_ROWS_BACK: 3-d dy", grb, x->src[0] = t4(ctx, LM_TYPE_F32, 8, 5, 2, 1));
    BAD("GET_ROWS_BACK: result shape", grb, x->ne[1] = 5);
    BAD("GET_ROWS_BACK: NULL like", grb, x->src[2] = NULL);
    CTOR_REFUSES(lm_get_rows_back(c, dy2, gids, table));
    CTOR_REFUSES(lm_get_rows_back(c, dy2, tokf, table8));
    CTOR_REFUSES(lm_get_rows_back(c, dy2, gids_nc, table8));

    struct lm_tensor *rb = lm_repeat_back(ctx, x, row);
    accept("REPEAT_BACK", rb);
    struct lm_tensor *xp = lm_permute(ctx, x, 0, 2, 1, 3); /* [8, 3, 4] */
    accept("REPEAT_BACK permuted", lm_repeat_back(ctx, xp, t4(ctx, LM_TYPE_F16, 8, 1, 4, 1)));
    BAD("REPEAT_BACK: does not tile", rb, x->ne[0] = 3);
    BAD("REPEAT_BACK: f16 operand", rb, x->src[0] = h);
    BAD("REPEAT_BACK: result type", rb, x->type = LM_TYPE_F16);
    BAD("REPEAT_BACK: NULL src0", rb, x->src[0] = NULL);
    CTOR_REFUSES(lm_repeat_back(c, x, odd));
    CTOR_REFUSES(lm_repeat_back(c, h, row));

    struct lm_tensor *xt = lm_transpose(ctx, t4(ctx, LM_TYPE_F32, 4, 8, 3, 1)); /* [8, 4, 3], rows strided */
    struct lm_tensor *pairs[3] = {lm_rms_norm_back(ctx, x, x, 1e-6f), lm_soft_max_back(ctx, x, x, 0.5f),
                                  lm_unary_back(ctx, x, x, LM_UNARY_GELU)};
    for (int i = 0; i < 3; i++) {
        accept(lm_op_name(pairs[i] ? pairs[i]->op : LM_OP_NONE), pairs[i]);
        BAD("pair: shapes differ", pairs[i], x->src[1] = odd);
        BAD("pair: f16 operand", pairs[i], x->src[0] = h);
        BAD("pair: rows not contiguous", pairs[i], x->src[1] = xt);
        BAD("pair: NULL src1", pairs[i], x->src[1] = NULL);
        BAD("pair: result shape", pairs[i], x->ne[2] = 1);
    }
    BAD("RMS_NORM_BACK: eps < 0", pairs[0], lm_set_op_f32(x, 0, -1.0f));
    BAD("SOFT_MAX_BACK: scale nan", pairs[1], lm_set_op_f32(x, 0, NAN));
    BAD("UNARY_BACK: op out of range", pairs[2], lm_set_op_i32(x, 0, LM_UNARY_COUNT));
    CTOR_REFUSES(lm_rms_norm_back(c, x, xt, 1e-6f));
    CTOR_REFUSES(lm_soft_max_back(c, x, odd, 1.0f));
    CTOR_REFUSES(lm_unary_back(c, x, x, (enum lm_unary_op)-1));
    CTOR_REFUSES(lm_rms_norm_back(c, x, x, NAN));

    struct lm_tensor *rob = lm_rope_back(ctx, ra, pos, &rp_ok);
    accept("ROPE_BACK", rob);
    BAD("ROPE_BACK: f32 positions", rob, x->src[1] = posf);
    BAD("ROPE_BACK: odd n_dims", rob, lm_set_op_i32(x, 0, 5));
    BAD("ROPE_BACK: unknown mode", rob, lm_set_op_i32(x, 1, 3));
    BAD("ROPE_BACK: NULL positions", rob, x->src[1] = NULL);
    CTOR_REFUSES(lm_rope_back(c, ra, pos4, &rp_ok));
    CTOR_REFUSES(lm_rope_back(c, ra, pos, NULL));

    struct lm_tensor *lg = t4(ctx, LM_TYPE_F32, 8, 5, 1, 1), *dl = t4(ctx, LM_TYPE_F32, 1, 1, 1, 1);
    struct lm_tensor *lgt = lm_transpose(ctx, t4(ctx, LM_TYPE_F32, 5, 8, 1, 1)); /* [8, 5], rows strided */
    struct lm_tensor *ce = lm_cross_entropy_loss(ctx, lg, gids), *ceb = lm_cross_entropy_loss_back(ctx, lg, gids, dl);
    accept("CROSS_ENTROPY_LOSS", ce);
    accept("CROSS_ENTROPY_LOSS_BACK", ceb);
    struct lm_tensor *ces[2] = {ce, ceb};
    for (int i = 0; i < 2; i++) {
        BAD("cross entropy: f32 targets", ces[i], x->src[1] = tokf);
        BAD("cross entropy: targets for other rows", ces[i], x->src[1] = tok);
        BAD("cross entropy: strided targets", ces[i], x->src[1] = gids_nc);
        BAD("cross entropy: logits rows strided", ces[i], x->src[0] = lgt);
        BAD("cross entropy: 3-d logits", ces[i], x->src[0] = t4(ctx, LM_TYPE_F32, 8, 5, 2, 1));
        BAD("cross entropy: NULL targets", ces[i], x->src[1] = NULL);
    }
    BAD("CROSS_ENTROPY_LOSS: result shape", ce, x->ne[0] = 8);
    BAD("CROSS_ENTROPY_LOSS_BACK: result shape", ceb, x->ne[0] = 1);
    BAD("CROSS_ENTROPY_LOSS_BACK: dloss of 2", ceb, x->src[2] = t4(ctx, LM_TYPE_F32, 2, 1, 1, 1));
    BAD("CROSS_ENTROPY_LOSS_BACK: NULL dloss", ceb, x->src[2] = NULL);
    CTOR_REFUSES(lm_cross_entropy_loss(c, lg, tok));
    CTOR_REFUSES(lm_cross_entropy_loss_back(c, lg, gids, t4(c, LM_TYPE_F16, 1, 1, 1, 1)));

    CHECK(lm_ctx_status(ctx) == LM_OK);
    for (int op = 0; op < LM_OP_COUNT; op++) {
        CHECKF(n_good[op] > 0, "no valid node tested for %s", lm_op_name((enum lm_op)op));
        CHECKF(op == LM_OP_NONE || n_bad[op] > 0, "no malformed node tested for %s", lm_op_name((enum lm_op)op));
    }
}

int main(void)
{
    CHECK(lm_cpu_backend_new(1, &cpu) == LM_OK && lm_ref_backend_new(&ref) == LM_OK);
    struct lm_ctx_params p = {.mem_size = 1024 * lm_tensor_overhead(), .no_alloc = true};
    struct lm_ctx *ctx = NULL;
    CHECK(lm_ctx_new(&p, &ctx) == LM_OK && lm_ctx_new(&p, &scratch) == LM_OK);
    test_table();
    if (ctx && scratch && cpu && ref)
        test_ops(ctx);
    lm_ctx_free(scratch);
    lm_ctx_free(ctx);
    lm_backend_free(cpu);
    lm_backend_free(ref);
    return lm_test_summary();
}
