/* ref.h - the reference backend: deliberately simple, single-threaded scalar
 * code for every op, written for clarity rather than speed. It is the oracle
 * that the CPU backend is tested against, and a second backend so that the
 * scheduler's split/copy logic is exercised without a GPU. Its buffers are
 * host memory of its own buffer type ("ref"), distinct from the CPU's, so the
 * scheduler treats its tensors as living elsewhere.
 */
#ifndef LM_REF_H
#define LM_REF_H

#include "backend/backend.h"

#ifdef __cplusplus
extern "C" { /* the CUDA backend (C++) calls these */
#endif

/* A new ref backend in *out (free with lm_backend_free). LM_ERR_INVALID_ARG
 * for a NULL out, LM_ERR_NOMEM. Backends share nothing: one per thread is safe.
 * It computes every op of enum lm_op on every type with a float conversion
 * (docs/ops.md), on tensors whose data is host memory (ref buffers, host
 * buffers, arenas with data). graph_compute returns LM_ERR_UNSUPPORTED for a
 * node it cannot compute and LM_ERR_INVALID_ARG for a node without data. */
lm_status lm_ref_backend_new(lm_backend_t *out);
/* Registry entry "ref" (init = lm_ref_backend_new). Static; never NULL. */
const struct lm_backend_reg *lm_ref_backend_reg(void);
/* True when the ref backend has a compute function for op (its row in
 * ref_backend.c); false for views, LM_OP_NONE and values outside enum lm_op.
 * Pure. */
bool lm_ref_op_computed(enum lm_op op);
/* True if be was made by lm_ref_backend_new (false for NULL). */
bool lm_backend_is_ref(lm_backend_t be);
/* The ref buffer type "ref": 64-byte aligned host memory (is_host true), a
 * buffer type object distinct from lm_host_buft(). Static; never NULL. */
lm_buft lm_ref_buft(void);

#ifdef __cplusplus
}
#endif

#endif
