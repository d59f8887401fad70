/* imatrix_api.h - lamina-only entry points behind `lamina imatrix`: collect
 * an importance matrix (model/imatrix.h) while a llama_context decodes.
 *
 * Not part of llama.h and not exported by the shared library (exports.map
 * keeps only llama_*); the lamina tool links the static libraries and calls
 * these directly. Quantizing with an imatrix goes through llama.h itself
 * (include/lamina_imatrix.h).
 */
#ifndef LM_IMATRIX_API_H
#define LM_IMATRIX_API_H

#include <stdbool.h>

#include "llama.h"
#include "model/imatrix.h"

/* From now on every decode on ctx adds the activations of its matrix
 * products to a new collector for ctx's model (process_output: count
 * output.weight too), returned in *out. Stop with lm_api_imatrix_stop before
 * freeing it (lm_imatrix_collector_free) or ctx. LM_ERR_NOMEM. A decode
 * whose collection fails returns -2 (llama_decode's compute error);
 * lm_imatrix_collector_error says why. */
lm_status lm_api_imatrix_start(struct llama_context *ctx, bool process_output, struct lm_imatrix_collector **out);
/* Detach the collector from ctx (decodes cost nothing extra again). */
void lm_api_imatrix_stop(struct llama_context *ctx);

#endif
