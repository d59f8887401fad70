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

/* The nodes the ref backend computes (docs/ops.md): every well-formed node
 * (core/op_rules.c checks shapes, types and op_params), less what its loops
 * cannot read or write. */
bool lm_ref_supports(const struct lm_tensor *t)
{
    if (!lm_op_check(t, NULL, 0))
        return false;
    const struct lm_tensor *s0 = t->src[0];
    switch (t->op) {
    case LM_OP_MUL_MAT:
    case LM_OP_MUL_MAT_ID:
    case LM_OP_GET_ROWS:
        /* kernel limit: weight rows are converted whole with lm_ref_get_row, so
         * they must be readable and packed (nb[0] the element size) */
        return lm_ref_type_readable(s0->type) && lm_is_contiguous_rows(s0);
    case LM_OP_CPY:
    case LM_OP_CONT:
        /* kernel limit: a converting copy needs an encoder for the destination */
        return s0->type == t->type || lm_ref_type_writable(t->type);
    case LM_OP_SET_ROWS:
        return lm_type_blck(t->type) == 1 || lm_ref_type_writable(t->type);
    default:
        return true;
    }
}

typedef lm_status (*op_fn)(struct lm_tensor *dst);

static const op_fn op_table[LM_OP_COUNT] = {
    [LM_OP_ADD] = lm_ref_op_binary,
    [LM_OP_MUL] = lm_ref_op_binary,
    [LM_OP_DIV] = lm_ref_op_binary,
    [LM_OP_SCALE] = lm_ref_op_unary,
    [LM_OP_SQR] = lm_ref_op_unary,
    [LM_OP_SQRT] = lm_ref_op_unary,
    [LM_OP_CLAMP] = lm_ref_op_unary,
    [LM_OP_UNARY] = lm_ref_op_unary,
    [LM_OP_SUM_ROWS] = lm_ref_op_sum_rows,
    [LM_OP_NORM] = lm_ref_op_norm,
    [LM_OP_RMS_NORM] = lm_ref_op_norm,
    [LM_OP_MUL_MAT] = lm_ref_op_mul_mat,
    [LM_OP_MUL_MAT_ID] = lm_ref_op_mul_mat_id,
    [LM_OP_GET_ROWS] = lm_ref_op_get_rows,
    [LM_OP_CPY] = lm_ref_op_cpy,
    [LM_OP_CONT] = lm_ref_op_cpy,
    [LM_OP_REPEAT] = lm_ref_op_repeat,
    [LM_OP_CONCAT] = lm_ref_op_concat,
    [LM_OP_DIAG_MASK_INF] = lm_ref_op_diag_mask_inf,
    [LM_OP_SOFT_MAX] = lm_ref_op_soft_max,
    [LM_OP_ROPE] = lm_ref_op_rope,
    [LM_OP_ARGSORT] = lm_ref_op_argsort,
    [LM_OP_ATTN] = lm_ref_op_attn,
    [LM_OP_SET_ROWS] = lm_ref_op_set_rows,
    [LM_OP_GET_ROWS_BACK] = lm_ref_op_get_rows_back,
    [LM_OP_REPEAT_BACK] = lm_ref_op_repeat_back,
    [LM_OP_RMS_NORM_BACK] = lm_ref_op_rms_norm_back,
    [LM_OP_ROPE_BACK] = lm_ref_op_rope,
    [LM_OP_SOFT_MAX_BACK] = lm_ref_op_soft_max_back,
    [LM_OP_UNARY_BACK] = lm_ref_op_unary_back,
    [LM_OP_CROSS_ENTROPY_LOSS] = lm_ref_op_cross_entropy_loss,
    [LM_OP_CROSS_ENTROPY_LOSS_BACK] = lm_ref_op_cross_entropy_loss,
};

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
        if (t->op == LM_OP_NONE || lm_is_view_op(t->op) || lm_nelements(t) == 0)
            continue;
        if ((unsigned)t->op >= LM_OP_COUNT || !op_table[t->op] || !lm_ref_supports(t)) {
            LM_LOG_ERR("ref: node '%s' (%s) is not supported\n", t->name, lm_op_name(t->op));
            return LM_ERR_UNSUPPORTED;
        }
        if (!t->data || !lm_sources_have_data(t)) {
            LM_LOG_ERR("ref: node '%s' (%s) or one of its sources has no data\n", t->name, lm_op_name(t->op));
            return LM_ERR_INVALID_ARG;
        }
        lm_status st = op_table[t->op](t);
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
