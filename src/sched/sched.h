/* sched.h - the multi-backend scheduler.
 *
 * Given backends in priority order (most preferred first) and a graph whose
 * weights may live in buffers of different backends, the scheduler
 *   1. assigns each node to a backend: a node reading a preallocated tensor
 *      (weights, KV cache) runs on the most preferred backend that can read
 *      that tensor's buffer type and supports the op; other nodes follow their
 *      sources (so chains stay on one backend); anything left goes to the most
 *      preferred backend supporting the op;
 *   2. splits the node list into runs of the same backend ("splits");
 *   3. for each split, every source living where that backend cannot read it
 *      (computed by another backend, or preallocated in a foreign buffer type)
 *      gets a copy in the split's backend ("input copy"); the node's source
 *      pointer is redirected to the copy;
 *   4. allocates each backend's part with its own graph allocator;
 *   5. computes the splits in order, copying inputs at the start of each.
 *
 * The graph's node sources are rewritten (step 3); compute a graph through
 * one scheduler only. Not thread-safe; one graph at a time.
 */
#ifndef LM_SCHED_H
#define LM_SCHED_H

#include "backend/backend.h"

struct lm_sched;

/* A scheduler over n_backends backends (1..LM_MAX_DEVICES), for
 * graphs of up to graph_size nodes. The backends are borrowed (not freed). */
lm_status lm_sched_new(lm_backend_t *backends, int n_backends, int graph_size, struct lm_sched **out);
void lm_sched_free(struct lm_sched *s);

/* Steps 1-4 for g. After this every tensor of g has data: callers fill
 * inputs (tensors flagged LM_FLAG_INPUT) now. */
lm_status lm_sched_alloc_graph(struct lm_sched *s, struct lm_graph *g);
/* Step 5 (running lm_sched_alloc_graph first if g is not the allocated graph). */
lm_status lm_sched_graph_compute(struct lm_sched *s, struct lm_graph *g);
/* Measure g and reserve each backend's compute buffer for it (sizes kept). */
lm_status lm_sched_reserve(struct lm_sched *s, struct lm_graph *g);

/* ---- observing computed nodes ----
 *
 * An observer sees chosen nodes as they are computed (lamina's imatrix
 * collection reads the activations entering each weight's matrix product;
 * llama.cpp's later eval callback is the same idea). want(node) is asked for
 * every node of a split as the split runs (NULL: every node); for each node
 * it accepts, the split is computed up to and including that node,
 * and observe(node) runs before any later node: the node and its sources
 * hold their values then (except a source an elementwise op overwrote in
 * place). Tensors may live in any backend's memory: read them with
 * lm_tensor_get unless their buffer is a host buffer. Splitting a run of
 * nodes keeps every result the same (the CPU executor's fused pairs never
 * start with a node an observer of matrix products accepts, and a fused pair
 * computed apart gives the same numbers). A status other than LM_OK from
 * observe stops the compute and is returned. Without an observer a split is
 * one backend call, as before. Both run on the computing thread. */
typedef bool (*lm_sched_want_fn)(const struct lm_tensor *node, void *user);
typedef lm_status (*lm_sched_observe_fn)(const struct lm_tensor *node, void *user);
/* Set (observe != NULL) or remove (observe == NULL) the observer. */
void lm_sched_set_observer(struct lm_sched *s, lm_sched_want_fn want, lm_sched_observe_fn observe, void *user);

/* Force node t onto backend be (before alloc_graph). */
void lm_sched_set_tensor_backend(struct lm_sched *s, struct lm_tensor *t, lm_backend_t be);
/* The backend node t was assigned to by the last alloc_graph, or NULL. */
lm_backend_t lm_sched_get_tensor_backend(struct lm_sched *s, const struct lm_tensor *t);

int lm_sched_n_splits(const struct lm_sched *s);
int lm_sched_n_copies(const struct lm_sched *s);
/* Bytes of the compute buffer of backend i. */
size_t lm_sched_buffer_size(const struct lm_sched *s, int i);
/* Forget the last allocation (e.g. before building a new graph). */
void lm_sched_reset(struct lm_sched *s);

#endif
