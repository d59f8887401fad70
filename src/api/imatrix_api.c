/* imatrix_api.c - lamina-only: attach an importance-matrix collector to a
 * llama_context as its scheduler observer (see imatrix_api.h). */
#include "api/imatrix_api.h"

#include "api/api.h"

/* See imatrix_api.h. */
lm_status lm_api_imatrix_start(struct llama_context *ctx, bool process_output, struct lm_imatrix_collector **out)
{
    if (!ctx || !out)
        return LM_ERR_INVALID_ARG;
    struct lm_imatrix_collector *c = lm_imatrix_collector_new(ctx->c->model, process_output);
    if (!c)
        return LM_ERR_NOMEM;
    lm_context_set_observer(ctx->c, lm_imatrix_collector_want, lm_imatrix_collector_observe, c);
    *out = c;
    return LM_OK;
}

/* See imatrix_api.h. */
void lm_api_imatrix_stop(struct llama_context *ctx)
{
    if (ctx)
        lm_context_set_observer(ctx->c, NULL, NULL, NULL);
}
