/* ref_backend.c - the ref backend's vtables: its buffer type "ref" (aligned
 * host memory, a buffer type object of its own), the backend (op support and
 * graph_compute dispatching to the ops_*.c files) and its registry entry.
 *
 * Invariants: the backend keeps no state between calls (graph_compute walks
 * the nodes in order, computes each with scalar C on one thread, and returns
 * the first failure). It reads any tensor whose data is host memory: tensors
 * of arenas with data (buffer NULL) and of host buffers alike. Thread-safety:
 * one graph at a time per backend; separate ref backends are independent.
 */
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/op_rules.h"
#include "ref/ref.h"
#include "ref/ref_internal.h"

#define REF_ALIGN 64

/* ---- buffers and the buffer type ---- */

static void buf_free(struct lm_buffer *buf) { free(buf->context); }
static void *buf_base(struct lm_buffer *buf) { return buf->context; }

static void buf_set(struct lm_buffer *buf, struct lm_tensor *t, const void *data, size_t offset, size_t size)
{
    memcpy((char *)t->data + offset, data, size);
}

static void buf_get(struct lm_buffer *buf, const struct lm_tensor *t, void *data, size_t offset, size_t size)
{
    memcpy(data, (const char *)t->data + offset, size);
}

/* Direct copy from any tensor whose data is host memory. */
static bool buf_cpy(struct lm_buffer *buf, const struct lm_tensor *src, struct lm_tensor *dst)
{
    if (!src->data || (src->buffer && !lm_buffer_is_host(src->buffer)))
        return false;
    memmove(dst->data, src->data, lm_nbytes(src));
    return true;
}

static void buf_clear(struct lm_buffer *buf, uint8_t value) { memset(buf->context, value, buf->size); }

static const struct lm_buffer_i ref_buffer_i = {
    .free_buffer = buf_free,
    .get_base = buf_base,
    .set_tensor = buf_set,
    .get_tensor = buf_get,
    .cpy_tensor = buf_cpy,
    .clear = buf_clear,
};

static const char *buft_name(lm_buft buft) { return "ref"; }
static size_t buft_alignment(lm_buft buft) { return REF_ALIGN; }
static bool buft_is_host(lm_buft buft) { return true; }

static lm_status buft_alloc(lm_buft buft, size_t size, struct lm_buffer **out)
{
    if (!out)
        return LM_ERR_INVALID_ARG;
    size_t rounded = (size + REF_ALIGN - 1) & ~(size_t)(REF_ALIGN - 1);
    if (rounded < size)
        return LM_ERR_NOMEM;
    void *mem = NULL;
    if (rounded) {
        mem = aligned_alloc(REF_ALIGN, rounded);
        if (!mem) {
            LM_LOG_ERR("ref buffer: cannot allocate %zu bytes\n", size);
            return LM_ERR_NOMEM;
        }
    }
    struct lm_buffer *b = lm_buffer_init(buft, ref_buffer_i, mem, size);
    if (!b) {
        free(mem);
        return LM_ERR_NOMEM;
    }
    *out = b;
    return LM_OK;
}

static struct lm_buffer_type ref_buft = {
    .iface = {
        .get_name = buft_name,
        .alloc_buffer = buft_alloc,
        .get_alignment = buft_alignment,
        .is_host = buft_is_host,
    },
};

/* The one ref buffer type (static storage, never NULL). */
lm_buft lm_ref_buft(void) { return &ref_buft; }

/* ---- op support ---- */

/* What its loops cannot read or write (supports); NULL in a row: every
 * well-formed node. */

/* kernel limit: weight rows are converted whole with lm_ref_get_row, so they
 * must be readable and packed (nb[0] the element size) */
static bool supports_weight_rows(const struct lm_tensor *t)
{
    return lm_ref_type_readable(t->src[0]->type) && lm_is_contiguous_rows(t->src[0]);
}

/* kernel limit: a converting copy needs an encoder for the destination */
static bool supports_cpy(const struct lm_tensor *t)
{
    return t->src[0]->type == t->type || lm_ref_type_writable(t->type);
}

static bool supports_set_rows(const struct lm_tensor *t)
{
    return lm_type_blck(t->type) == 1 || lm_ref_type_writable(t->type);
}

/* One row per op: {supports, compute}; compute NULL: not computed here
 * (views and leaves compute nothing). */
struct op_row {
    bool (*supports)(const struct lm_tensor *t);
    lm_status (*compute)(struct lm_tensor *dst);
};

#define ROW(o, sup, fn) [LM_OP_##o] = {sup, fn}

/* Unsized, so that the count check fails when an op is added without its row. */
static const struct op_row rows[] = {
    ROW(NONE, NULL, NULL),
    ROW(ADD, NULL, lm_ref_op_binary),
    ROW(MUL, NULL, lm_ref_op_binary),
    ROW(DIV, NULL, lm_ref_op_binary),
    ROW(SCALE, NULL, lm_ref_op_unary),
    ROW(SQR, NULL, lm_ref_op_unary),
    ROW(SQRT, NULL, lm_ref_op_unary),
    ROW(CLAMP, NULL, lm_ref_op_unary),
    ROW(UNARY, NULL, lm_ref_op_unary),
    ROW(SUM_ROWS, NULL, lm_ref_op_sum_rows),
    ROW(NORM, NULL, lm_ref_op_norm),
    ROW(RMS_NORM, NULL, lm_ref_op_norm),
    ROW(MUL_MAT, supports_weight_rows, lm_ref_op_mul_mat),
    ROW(MUL_MAT_ID, supports_weight_rows, lm_ref_op_mul_mat_id),
    ROW(GET_ROWS, supports_weight_rows, lm_ref_op_get_rows),
    ROW(CPY, supports_cpy, lm_ref_op_cpy),
    ROW(CONT, supports_cpy, lm_ref_op_cpy),
    ROW(REPEAT, NULL, lm_ref_op_repeat),
    ROW(CONCAT, NULL, lm_ref_op_concat),
    ROW(RESHAPE, NULL, NULL),
    ROW(VIEW, NULL, NULL),
    ROW(PERMUTE, NULL, NULL),
    ROW(TRANSPOSE, NULL, NULL),
    ROW(DIAG_MASK_INF, NULL, lm_ref_op_diag_mask_inf),
    ROW(SOFT_MAX, NULL, lm_ref_op_soft_max),
    ROW(ROPE, NULL, lm_ref_op_rope),
    ROW(ARGSORT, NULL, lm_ref_op_argsort),
    ROW(ATTN, NULL, lm_ref_op_attn),
    ROW(SET_ROWS, supports_set_rows, lm_ref_op_set_rows),
    ROW(GET_ROWS_BACK, NULL, lm_ref_op_get_rows_back),
    ROW(REPEAT_BACK, NULL, lm_ref_op_repeat_back),
    ROW(RMS_NORM_BACK, NULL, lm_ref_op_rms_norm_back),
    ROW(ROPE_BACK, NULL, lm_ref_op_rope),
    ROW(SOFT_MAX_BACK, NULL, lm_ref_op_soft_max_back),
    ROW(UNARY_BACK, NULL, lm_ref_op_unary_back),
    ROW(CROSS_ENTROPY_LOSS, NULL, lm_ref_op_cross_entropy_loss),
    ROW(CROSS_ENTROPY_LOSS_BACK, NULL, lm_ref_op_cross_entropy_loss),
};
_Static_assert(sizeof rows / sizeof rows[0] == LM_OP_COUNT, "every enum lm_op needs its row in the ref table");

bool lm_ref_op_computed(enum lm_op op) { return (unsigned)op < LM_OP_COUNT && rows[op].compute; }

/* The nodes the ref backend computes (docs/ops.md): every well-formed node
 * (core/op_rules.c checks shapes, types and op_params) of an op with a row,
 * less what its loops cannot read or write; views and leaves (nothing to
 * compute) too. */
bool lm_ref_supports(const struct lm_tensor *t)
{
    if (!lm_op_check(t, NULL, 0))
        return false;
    const struct op_row *r = &rows[t->op];
    if (!r->compute)
        return !lm_op_computes(t->op);
    return !r->supports || r->supports(t);
}

/* ---- the backend ---- */

static const char *be_name(lm_backend_t be) { return "ref"; }
static void be_free(lm_backend_t be) { free(be); }
static lm_buft be_default_buft(lm_backend_t be) { return lm_ref_buft(); }
static bool be_supports_op(lm_backend_t be, const struct lm_tensor *op) { return lm_ref_supports(op); }
static bool be_supports_buft(lm_backend_t be, lm_buft buft) { return buft == lm_ref_buft(); }

static lm_status be_graph_compute(lm_backend_t be, struct lm_graph *g)
{
    if (!g)
        return LM_ERR_INVALID_ARG;
    for (int i = 0; i < g->n_nodes; i++) {
        struct lm_tensor *t = g->nodes[i];
        if (!lm_op_computes(t->op) || lm_nelements(t) == 0)
            continue;
        if (!lm_ref_supports(t)) { /* false too for an op without a compute function */
            LM_LOG_ERR("ref: node '%s' (%s) is not supported\n", t->name, lm_op_name(t->op));
            return LM_ERR_UNSUPPORTED;
        }
        if (!t->data || !lm_sources_have_data(t)) {
            LM_LOG_ERR("ref: node '%s' (%s) or one of its sources has no data\n", t->name, lm_op_name(t->op));
            return LM_ERR_INVALID_ARG;
        }
        lm_status st = rows[t->op].compute(t);
        if (st) {
            LM_LOG_ERR("ref: node '%s' (%s) failed: %s\n", t->name, lm_op_name(t->op), lm_status_str(st));
            return st;
        }
    }
    return LM_OK;
}

static const struct lm_backend_i ref_backend_i = {
    .get_name = be_name,
    .free = be_free,
    .get_default_buffer_type = be_default_buft,
    .graph_compute = be_graph_compute,
    .supports_op = be_supports_op,
    .supports_buft = be_supports_buft,
};

/* A new ref backend (no state besides the vtable); free with lm_backend_free. */
lm_status lm_ref_backend_new(lm_backend_t *out)
{
    if (!out)
        return LM_ERR_INVALID_ARG;
    struct lm_backend *be = calloc(1, sizeof *be);
    if (!be)
        return LM_ERR_NOMEM;
    be->iface = ref_backend_i;
    *out = be;
    return LM_OK;
}

/* True if be is a ref backend (its vtable's name function is ours). */
bool lm_backend_is_ref(lm_backend_t be) { return be && be->iface.get_name == be_name; }

static const struct lm_backend_reg ref_reg = {.name = "ref", .init = lm_ref_backend_new};

/* The registry entry "ref". */
const struct lm_backend_reg *lm_ref_backend_reg(void) { return &ref_reg; }
