/* grad.h - reverse-mode differentiation of core graphs.
 *
 * lm_grad_backward walks a forward graph from an output back to the tensors
 * the caller wants gradients for and builds, for every node on the way, the
 * nodes that compute its sources' gradients (docs/training.md, "Gradients").
 * The gradients are ordinary graph nodes (MUL_MAT, ADD, the training ops of
 * core/tensor.h), so any backend that has the ops runs them and the CPU's
 * threads and kernels do the work. Nothing is computed here.
 *
 * A map from tensor to gradient persists across calls, so one network can be
 * differentiated in pieces: gradient checkpointing differentiates one layer at
 * a time, seeding each call with the gradient of the layer's output and
 * stopping at its input (train/model.c).
 */
#ifndef LM_GRAD_H
#define LM_GRAD_H

#include "core/status.h"
#include "core/tensor.h"

struct lm_grad;

/* A gradient map for graphs built in ctx (which must be no_alloc or have room
 * for the gradient nodes). */
lm_status lm_grad_new(struct lm_ctx *ctx, struct lm_grad **out);
void lm_grad_free(struct lm_grad *gr); /* NULL: nothing */

/* Adds dy to the gradient of y (dy NULL: y's gradient so far is used as is,
 * e.g. to continue from a checkpoint), then propagates it back through the nodes of
 * fwd that lie between y and the tensors of wrt[0..n_wrt): for each such node,
 * in reverse order, the gradient of each source that depends on a wrt tensor
 * is built and summed into the map. A wrt tensor's own sources get nothing
 * (that is where a checkpointed piece stops). fwd must contain y and every
 * node between (lm_graph_expand(fwd, y) gives that).
 *
 * Errors: LM_ERR_UNSUPPORTED with a message in the arena (lm_ctx_error) for a
 * node whose gradient is not implemented (e.g. ATTN: use the unfused graph),
 * an arena error otherwise. */
lm_status lm_grad_backward(struct lm_grad *gr, struct lm_graph *fwd, struct lm_tensor *y, struct lm_tensor *dy,
                           struct lm_tensor *const *wrt, int n_wrt);

/* The gradient of t built so far, or NULL. */
struct lm_tensor *lm_grad_get(const struct lm_grad *gr, const struct lm_tensor *t);

/* The op names lm_grad_backward can differentiate (for docs and tests). */
bool lm_grad_supports(enum lm_op op);

#endif
