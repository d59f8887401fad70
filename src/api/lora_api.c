/* lora_api.c - llama.h: LoRA adapters (llama_model_apply_lora_from_file and
 * the deprecated per-context form), over model/lora.c. */
#include "api/api.h"
#include "core/log.h"
#include "model/lora.h"

/* 0 on success, 1 on any failure (the reason is logged), as b1892. The model's
 * weights change for every context using it. */
int32_t llama_model_apply_lora_from_file(const struct llama_model *model, const char *path_lora, float scale,
                                         const char *path_base_model, int32_t n_threads)
{
    char err[320] = "";
    if (!model || !path_lora) {
        LM_LOG_ERR("llama_model_apply_lora_from_file: no model or no adapter path\n");
        return 1;
    }
    LM_LOG_INF("llama_model_apply_lora_from_file: applying lora adapter from '%s' - please wait ...\n", path_lora);
    lm_status st = lm_lora_apply(model->m, path_lora, scale, path_base_model, n_threads, err, sizeof err);
    if (st) {
        LM_LOG_ERR("llama_model_apply_lora_from_file: %s (%s)\n", err, lm_status_str(st));
        return 1;
    }
    return 0;
}

/* Deprecated: the same on the context's model. */
int32_t llama_apply_lora_from_file(struct llama_context *ctx, const char *path_lora, float scale,
                                   const char *path_base_model, int32_t n_threads)
{
    if (!ctx) {
        LM_LOG_ERR("llama_apply_lora_from_file: no context\n");
        return 1;
    }
    return llama_model_apply_lora_from_file(ctx->model, path_lora, scale, path_base_model, n_threads);
}
