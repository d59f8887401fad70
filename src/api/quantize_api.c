/* quantize_api.c - llama.h's llama_model_quantize over model/quantize.c.
 *
 * b1892's params.imatrix points at llama.cpp's internal C++ map, which a C
 * engine cannot read. In lamina it is NULL or a struct lamina_imatrix_params
 * (include/lamina_imatrix.h) naming an imatrix file or giving the weights in
 * memory, which are read, filtered and checked against the input model here,
 * then handed to lm_quantize_model as its look-up callback.
 */
#include <stdio.h>

#include "api/api.h"
#include "core/log.h"
#include "lamina_imatrix.h"
#include "model/imatrix.h"
#include "model/quantize.h"

/* ip->entries as a set (ncall 0: the weights are used as they are). */
static lm_status from_entries(const struct lamina_imatrix_entry *e, struct lm_imatrix **out, char *err,
                              size_t err_size)
{
    struct lm_imatrix *im = lm_imatrix_new();
    lm_status st = im ? LM_OK : LM_ERR_NOMEM;
    for (int64_t i = 0; !st && e[i].name; i++) {
        if (!e[i].data || e[i].size < 1 || e[i].size > INT32_MAX ||
            (st = lm_imatrix_add(im, e[i].name, 0, e[i].data, (int32_t)e[i].size)) == LM_ERR_INVALID_ARG) {
            st = LM_ERR_INVALID_ARG;
            snprintf(err, err_size, "entry %lld ('%.64s'): a repeated or bad name, no values, or a value that is "
                     "not finite and >= 0", (long long)i, e[i].name);
        }
    }
    if (!st && lm_imatrix_n_entries(im) == 0) {
        st = LM_ERR_INVALID_ARG;
        snprintf(err, err_size, "the entries array is empty");
    }
    if (st == LM_ERR_NOMEM)
        snprintf(err, err_size, "out of memory");
    if (st)
        lm_imatrix_free(im);
    else
        *out = im;
    return st;
}

/* The importance matrix params->imatrix gives, checked against the model
 * file in, into *out (NULL when no entry is left after the filters). 0 on
 * success; 1 with the reason logged. */
static int load_imatrix(const char *in, const void *param, struct lm_imatrix **out)
{
    const struct lamina_imatrix_params *ip = param;
    struct lm_imatrix *im = NULL;
    struct lm_gguf *g = NULL;
    char err[320];
    *out = NULL;
    if (ip->magic != LAMINA_IMATRIX_MAGIC) {
        LM_LOG_ERR("llama_model_quantize: params->imatrix must be NULL or point to a struct lamina_imatrix_params "
                   "(lamina_imatrix.h); llama.cpp's internal map is not supported\n");
        return 1;
    }
    if (!ip->path == !ip->entries) {
        LM_LOG_ERR("llama_model_quantize: the imatrix params need exactly one of a path and entries\n");
        return 1;
    }
    const char *what = ip->path ? ip->path : "(entries)";
    lm_status st = ip->path ? lm_imatrix_read(ip->path, &im, err, sizeof err) /* err names the file */
                            : from_entries(ip->entries, &im, err, sizeof err);
    if (st)
        LM_LOG_ERR("llama_model_quantize: importance matrix %s\n", err);
    if (!st && (st = lm_gguf_open(in, &g, err, sizeof err)))
        LM_LOG_ERR("llama_model_quantize: %s: %s\n", in, err);
    if (!st && (st = lm_imatrix_check(im, g, err, sizeof err)))
        LM_LOG_ERR("llama_model_quantize: importance matrix %s: %s\n", what, err);
    lm_gguf_close(g);
    if (st) {
        lm_imatrix_free(im);
        return 1;
    }
    int64_t n_read = lm_imatrix_n_entries(im);
    lm_imatrix_filter(im, ip->include_weights, ip->exclude_weights);
    if (lm_imatrix_n_entries(im) == 0) {
        LM_LOG_WRN("llama_model_quantize: no entry of %s is left after the include/exclude lists: quantizing "
                   "without an importance matrix\n", what);
        lm_imatrix_free(im);
        return 0;
    }
    LM_LOG_INF("llama_model_quantize: importance matrix %s: using %lld of %lld entries\n", what,
               (long long)lm_imatrix_n_entries(im), (long long)n_read);
    *out = im;
    return 0;
}

/* See llama.h: 0 on success; on failure 1, with the reason logged at error
 * level. Thread-safe (uses params->nthread threads). */
uint32_t llama_model_quantize(const char *fname_inp, const char *fname_out, const llama_model_quantize_params *params)
{
    if (!fname_inp || !fname_out || !params) {
        LM_LOG_ERR("llama_model_quantize: missing file name or parameters\n");
        return 1;
    }
    struct lm_imatrix *im = NULL;
    if (params->imatrix && load_imatrix(fname_inp, params->imatrix, &im))
        return 1;
    struct lm_quantize_params p = lm_quantize_default_params();
    p.ftype = (uint32_t)params->ftype;
    p.nthread = params->nthread;
    p.allow_requantize = params->allow_requantize;
    p.quantize_output_tensor = params->quantize_output_tensor;
    p.only_copy = params->only_copy;
    p.pure = params->pure;
    if (im) {
        p.imatrix = lm_imatrix_lookup;
        p.imatrix_user = im;
    }
    char err[320];
    lm_status st = lm_quantize_model(fname_inp, fname_out, &p, err, sizeof err);
    lm_imatrix_free(im);
    if (st) {
        LM_LOG_ERR("llama_model_quantize: failed to quantize: %s\n", err);
        return 1;
    }
    return 0;
}
