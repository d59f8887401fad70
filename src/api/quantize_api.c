/* quantize_api.c - llama.h's llama_model_quantize over model/quantize.c.
 *
 * b1892's params.imatrix points at llama.cpp's internal C++ map; lamina cannot
 * read that, so a non-NULL imatrix is refused (an imatrix API for lamina is
 * future work; lm_quantize_model already takes a look-up callback).
 */
#include "api/api.h"
#include "core/log.h"
#include "model/quantize.h"

/* See llama.h: 0 on success; on failure 1, with the reason logged at error
 * level. Thread-safe (uses params->nthread threads). */
uint32_t llama_model_quantize(const char *fname_inp, const char *fname_out, const llama_model_quantize_params *params)
{
    if (!fname_inp || !fname_out || !params) {
        LM_LOG_ERR("llama_model_quantize: missing file name or parameters\n");
        return 1;
    }
    if (params->imatrix) {
        LM_LOG_ERR("llama_model_quantize: params->imatrix is not supported by lamina (pass NULL)\n");
        return 1;
    }
    struct lm_quantize_params p = lm_quantize_default_params();
    p.ftype = (uint32_t)params->ftype;
    p.nthread = params->nthread;
    p.allow_requantize = params->allow_requantize;
    p.quantize_output_tensor = params->quantize_output_tensor;
    p.only_copy = params->only_copy;
    p.pure = params->pure;
    char err[320];
    lm_status st = lm_quantize_model(fname_inp, fname_out, &p, err, sizeof err);
    if (st) {
        LM_LOG_ERR("llama_model_quantize: failed to quantize: %s\n", err);
        return 1;
    }
    return 0;
}
