/* talloc.c - place every tensor of an arena in one new buffer (weights, KV
 * cache): sizes summed with the buffer type's alignment, offsets in creation
 * order. Views get their data from their source afterwards. */
#include "sched/alloc.h"

static size_t align_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

lm_status lm_alloc_ctx_tensors(struct lm_ctx *ctx, lm_buft buft, struct lm_buffer **out)
{
    if (!ctx || !buft || !out)
        return LM_ERR_INVALID_ARG;
    size_t align = lm_buft_alignment(buft);
    size_t total = 0;
    for (struct lm_tensor *t = lm_ctx_first_tensor(ctx); t; t = lm_ctx_next_tensor(ctx, t)) {
        if (t->data || t->view_src)
            continue;
        size_t sz = align_up(lm_buft_alloc_size(buft, t), align);
        if (sz > SIZE_MAX - total)
            return LM_ERR_NOMEM;
        total += sz;
    }
    *out = NULL;
    if (total == 0)
        return LM_OK;
    if (total > lm_buft_max_size(buft))
        return LM_ERR_NOMEM;
    struct lm_buffer *buf = NULL;
    lm_status st = lm_buft_alloc_buffer(buft, total, &buf);
    if (st)
        return st;
    size_t off = 0;
    for (struct lm_tensor *t = lm_ctx_first_tensor(ctx); t && !st; t = lm_ctx_next_tensor(ctx, t)) {
        if (t->data || t->view_src)
            continue;
        st = lm_buffer_place_tensor(buf, t, off);
        off += align_up(lm_buft_alloc_size(buft, t), align);
    }
    for (struct lm_tensor *t = lm_ctx_first_tensor(ctx); t && !st; t = lm_ctx_next_tensor(ctx, t))
        if (t->view_src && !t->data && t->view_src->data)
            st = lm_view_init(t);
    if (st) {
        lm_buffer_free(buf);
        return st;
    }
    *out = buf;
    return LM_OK;
}
