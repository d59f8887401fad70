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

lm_status lm_ref_backend_new(lm_backend_t *out);
const struct lm_backend_reg *lm_ref_backend_reg(void);
bool lm_backend_is_ref(lm_backend_t be);
/* The ref buffer type (host memory, but not the CPU's buffer type). */
lm_buft lm_ref_buft(void);

#endif
