/* alloc.h - placing tensors in backend buffers.
 *
 * Two allocators:
 *  - lm_alloc_ctx_tensors: every tensor of an arena (weights, KV cache) in one
 *    new buffer, packed in creation order.
 *  - the graph allocator (lm_gallocr): places the intermediate tensors of a
 *    graph so that memory of tensors no longer needed is reused, and runs ops
 *    in place (result over a dying source) where that is safe. A measure pass
 *    (lm_gallocr_reserve) finds the peak; allocation then never grows the
 *    buffer while graphs have the same shape.
 *
 * Tensors that already have data (weights, inputs placed by the caller) are
 * left alone. Views get their data from their view_src.
 */
#ifndef LM_ALLOC_H
#define LM_ALLOC_H

#include "backend/backend.h"

/* Allocate one buffer of `buft` for all tensors of ctx that have no data yet
 * (views excluded) and place them. *out is NULL (and LM_OK) when there was
 * nothing to place. The caller frees the buffer (after the tensors' last use). */
lm_status lm_alloc_ctx_tensors(struct lm_ctx *ctx, lm_buft buft, struct lm_buffer **out);

struct lm_gallocr;

/* A graph allocator for buffers of type buft. */
lm_status lm_gallocr_new(lm_buft buft, struct lm_gallocr **out);
void lm_gallocr_free(struct lm_gallocr *ga);

/* Measure g and (re)allocate the buffer to its peak size. Call once per graph
 * shape; alloc_graph calls it itself when g does not fit. */
lm_status lm_gallocr_reserve(struct lm_gallocr *ga, struct lm_graph *g);
/* Place every node and leaf of g that has no data (inputs included, so
 * callers set inputs after this). Leafs/nodes flagged LM_FLAG_OUTPUT or
 * LM_FLAG_INPUT are never overwritten by other tensors. */
lm_status lm_gallocr_alloc_graph(struct lm_gallocr *ga, struct lm_graph *g);
/* The same, where the tensors in keep[0..n_keep) are never released (they are
 * read after the graph by someone else, e.g. copied to another backend). */
lm_status lm_gallocr_alloc_graph_keep(struct lm_gallocr *ga, struct lm_graph *g, struct lm_tensor *const *keep,
                                      int n_keep);
lm_status lm_gallocr_reserve_keep(struct lm_gallocr *ga, struct lm_graph *g, struct lm_tensor *const *keep, int n_keep);
/* The allocator's current buffer, or NULL. */
struct lm_buffer *lm_gallocr_buffer(const struct lm_gallocr *ga);
/* Size of the current buffer (0 before the first reserve). */
size_t lm_gallocr_buffer_size(const struct lm_gallocr *ga);
/* Peak bytes the last reserve/alloc computed for its graph. */
size_t lm_gallocr_peak(const struct lm_gallocr *ga);

/* Pure planning for one graph (no buffer): peak bytes and each tensor's offset.
 * `offsets` has g->n_nodes + g->n_leafs slots (nodes first) and gets SIZE_MAX
 * for tensors that need no placement. Used by lm_gallocr and by tests. */
lm_status lm_galloc_plan(struct lm_graph *g, lm_buft buft, struct lm_tensor *const *keep, int n_keep, size_t *offsets,
                         size_t *peak);

#endif
