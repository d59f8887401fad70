/* model_api.c - llama.h: default parameters, backend init, model loading,
 * model queries and metadata, vocabulary and tokenization. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "api/modules.h"
#include "core/env.h"
#include "core/log.h"
#include "core/memory.h"
#include "cpu/cpu.h"
#include "ref/ref.h"
#include "vocab/vocab.h"

_Static_assert(sizeof(struct llama_model_kv_override) == sizeof(struct lm_kv_override), "kv override layout");
_Static_assert(sizeof(llama_batch) == sizeof(struct lm_batch), "batch layout");

struct llama_model_params llama_model_default_params(void)
{
    struct llama_model_params p;
    memset(&p, 0, sizeof p);
    p.n_gpu_layers = 0;
    p.split_mode = LLAMA_SPLIT_LAYER;
    p.main_gpu = 0;
    p.tensor_split = NULL;
    p.vocab_only = false;
    p.use_mmap = true;
    p.use_mlock = false;
    return p;
}

struct llama_context_params llama_context_default_params(void)
{
    struct llama_context_params p;
    memset(&p, 0, sizeof p);
    p.seed = LLAMA_DEFAULT_SEED;
    p.n_ctx = 512;
    p.n_batch = 512;
    p.n_threads = 4;
    p.n_threads_batch = 4;
    p.rope_scaling_type = LLAMA_ROPE_SCALING_UNSPECIFIED;
    p.rope_freq_base = 0.0f;
    p.rope_freq_scale = 0.0f;
    p.yarn_ext_factor = -1.0f;
    p.yarn_attn_factor = 1.0f;
    p.yarn_beta_fast = 32.0f;
    p.yarn_beta_slow = 1.0f;
    p.yarn_orig_ctx = 0;
    p.type_k = GGML_TYPE_F16;
    p.type_v = GGML_TYPE_F16;
    p.mul_mat_q = true;
    p.logits_all = false;
    p.embedding = false;
    p.offload_kqv = true;
    return p;
}

struct llama_model_quantize_params llama_model_quantize_default_params(void)
{
    struct llama_model_quantize_params p;
    memset(&p, 0, sizeof p);
    p.nthread = 0;
    p.ftype = LLAMA_FTYPE_MOSTLY_Q5_1;
    p.allow_requantize = false;
    p.quantize_output_tensor = true;
    p.only_copy = false;
    p.pure = false;
    p.imatrix = NULL;
    return p;
}

/* The process-wide switches (core/env.c), read at the first llama_backend_init
 * only, and handed to their setters: a program's own later calls of them
 * (lm_log_set_level, lm_cpu_isa_limit, ...) are not undone by another
 * llama_backend_init. */
static void apply_process_switches(void)
{
    static bool done;
    if (done)
        return;
    done = true;
    lm_log_set_default_level((enum lm_log_level)lm_env_level(LM_ENV_LOG));
    const char *isa = lm_env_word_name(LM_ENV_ISA); /* NULL: unset or not a level's name */
    for (int i = 0; isa && i < LM_ISA_COUNT; i++)
        if (strcmp(isa, lm_cpu_isa_name((enum lm_cpu_isa)i)) == 0)
            lm_cpu_isa_limit((enum lm_cpu_isa)i); /* min(i, best): a level not below the best leaves the best */
    const int prefetch = lm_env_flag(LM_ENV_PREFETCH);
    if (prefetch != LM_ENV_AUTO)
        lm_cpu_prefetch_set(prefetch);
    lm_alloc_set_huge_pages(lm_env_flag(LM_ENV_HUGEPAGES) != 0);
}

void llama_backend_init(bool numa)
{
    (void)numa;
    apply_process_switches();
    lm_backend_register(lm_cpu_backend_reg());
    lm_backend_register(lm_ref_backend_reg());
    /* device backends after the CPU (placement.c: device 0 is the host, GPUs
     * follow in registry order), linked in or loaded as modules (modules.h);
     * none without a driver or GPU */
    lm_api_modules_init();
    (void)lm_cpu_features();
}

void llama_backend_free(void) {}

struct llama_model *llama_load_model_from_file(const char *path_model, struct llama_model_params params)
{
    if (!path_model)
        return NULL;
    if (lm_backend_reg_count() == 0) /* llama_backend_init not called: the built-in backends */
        llama_backend_init(false);
    struct lm_model_params mp = {
        .vocab_only = params.vocab_only,
        .use_mmap = params.use_mmap,
        .use_mlock = params.use_mlock,
        .repack = lm_env_flag(LM_ENV_NO_REPACK) != 1, /* read per model load (core/env.c) */
        .progress = params.progress_callback,
        .progress_user = params.progress_callback_user_data,
        .kv_overrides = (const struct lm_kv_override *)params.kv_overrides,
        /* device placement (model/placement.c): with no GPU backend
         * registered every layer stays on the host, as in a CPU build of
         * llama.cpp */
        .n_gpu_layers = params.n_gpu_layers,
        .split_mode = (int)params.split_mode,
        .main_gpu = params.main_gpu,
        .tensor_split = params.tensor_split,
    };
    struct llama_model *model = calloc(1, sizeof *model);
    char err[320] = "";
    if (!model)
        return NULL;
    lm_status st = lm_model_load(path_model, &mp, &model->m, err, sizeof err);
    if (st) {
        LM_LOG_ERR("llama_load_model_from_file: failed to load %s: %s (%s)\n", path_model, err, lm_status_str(st));
        free(model);
        return NULL;
    }
    return model;
}

void llama_free_model(struct llama_model *model)
{
    if (!model)
        return;
    if (model->pieces) {
        for (int32_t i = 0; i < lm_vocab_n_tokens(model->m->vocab); i++)
            free(model->pieces[i]);
        free(model->pieces);
        free(model->piece_len);
    }
    lm_model_free(model->m);
    free(model);
}

int32_t llama_max_devices(void) { return LLAMA_MAX_DEVICES; }
bool llama_mmap_supported(void) { return true; }
bool llama_mlock_supported(void) { return true; }

enum llama_vocab_type llama_vocab_type(const struct llama_model *model)
{
    switch (lm_vocab_type(model->m->vocab)) {
    case LM_VOCAB_BPE: return LLAMA_VOCAB_TYPE_BPE;
    case LM_VOCAB_WPM: return LLAMA_VOCAB_TYPE_WPM;
    default: return LLAMA_VOCAB_TYPE_SPM;
    }
}

int32_t llama_n_vocab(const struct llama_model *model) { return lm_vocab_n_tokens(model->m->vocab); }
int32_t llama_n_ctx_train(const struct llama_model *model) { return (int32_t)model->m->hp.n_ctx_train; }
int32_t llama_n_embd(const struct llama_model *model) { return (int32_t)model->m->hp.n_embd; }
float llama_rope_freq_scale_train(const struct llama_model *model) { return model->m->hp.rope_freq_scale_train; }

/* snprintf-style result: the full length, or -1 (buf gets "" then). */
static int32_t put_str(char *buf, size_t size, const char *s)
{
    if (!s) {
        if (buf && size)
            buf[0] = 0;
        return -1;
    }
    return (int32_t)snprintf(buf, buf ? size : 0, "%s", s);
}

static int32_t meta_value(const struct llama_model *model, int64_t i, char *buf, size_t size)
{
    const struct lm_gguf *g = model->m->gguf;
    if (i < 0 || i >= lm_gguf_n_kv(g))
        return put_str(buf, size, NULL);
    if (lm_gguf_kv_type(g, i) == LM_GGUF_STRING) {
        const char *s;
        size_t len;
        if (lm_gguf_get_str(g, i, &s, &len) == LM_OK)
            return put_str(buf, size, s);
    }
    return lm_gguf_value_to_string(g, i, buf, buf ? size : 0);
}

int32_t llama_model_meta_val_str(const struct llama_model *model, const char *key, char *buf, size_t buf_size)
{
    return meta_value(model, key ? lm_gguf_find_key(model->m->gguf, key) : -1, buf, buf_size);
}

int32_t llama_model_meta_count(const struct llama_model *model) { return (int32_t)lm_gguf_n_kv(model->m->gguf); }

int32_t llama_model_meta_key_by_index(const struct llama_model *model, int32_t i, char *buf, size_t buf_size)
{
    const struct lm_gguf *g = model->m->gguf;
    return put_str(buf, buf_size, i >= 0 && i < lm_gguf_n_kv(g) ? lm_gguf_key(g, i) : NULL);
}

int32_t llama_model_meta_val_str_by_index(const struct llama_model *model, int32_t i, char *buf, size_t buf_size)
{
    return meta_value(model, i, buf, buf_size);
}

int32_t llama_model_desc(const struct llama_model *model, char *buf, size_t buf_size)
{
    return lm_model_desc(model->m, buf, buf_size);
}

uint64_t llama_model_size(const struct llama_model *model) { return model->m->n_bytes; }
uint64_t llama_model_n_params(const struct llama_model *model) { return model->m->n_elements; }

struct ggml_tensor *llama_get_model_tensor(struct llama_model *model, const char *name)
{
    if (!model || !name || !model->m->ctx)
        return NULL;
    return (struct ggml_tensor *)lm_ctx_get_tensor(model->m->ctx, name);
}

/* ---- vocabulary ---- */

const char *llama_token_get_text(const struct llama_model *model, llama_token token)
{
    const char *s = lm_vocab_token_text(model->m->vocab, token);
    return s ? s : "";
}

float llama_token_get_score(const struct llama_model *model, llama_token token)
{
    return lm_vocab_token_score(model->m->vocab, token);
}

enum llama_token_type llama_token_get_type(const struct llama_model *model, llama_token token)
{
    return (enum llama_token_type)lm_vocab_token_type(model->m->vocab, token);
}

llama_token llama_token_bos(const struct llama_model *model) { return lm_vocab_bos(model->m->vocab); }
llama_token llama_token_eos(const struct llama_model *model) { return lm_vocab_eos(model->m->vocab); }
llama_token llama_token_nl(const struct llama_model *model) { return lm_vocab_nl(model->m->vocab); }
int32_t llama_add_bos_token(const struct llama_model *model) { return lm_vocab_add_bos(model->m->vocab); }
int32_t llama_add_eos_token(const struct llama_model *model) { return lm_vocab_add_eos(model->m->vocab); }
llama_token llama_token_prefix(const struct llama_model *model) { return lm_vocab_prefix(model->m->vocab); }
llama_token llama_token_middle(const struct llama_model *model) { return lm_vocab_middle(model->m->vocab); }
llama_token llama_token_suffix(const struct llama_model *model) { return lm_vocab_suffix(model->m->vocab); }
llama_token llama_token_eot(const struct llama_model *model) { return lm_vocab_eot(model->m->vocab); }

int32_t llama_tokenize(const struct llama_model *model, const char *text, int32_t text_len, llama_token *tokens,
                       int32_t n_max_tokens, bool add_bos, bool special)
{
    if (!model || (!text && text_len > 0) || text_len < 0)
        return 0;
    return lm_vocab_tokenize(model->m->vocab, text ? text : "", text_len, tokens, n_max_tokens, add_bos, special);
}

int32_t llama_token_to_piece(const struct llama_model *model, llama_token token, char *buf, int32_t length)
{
    if (!model)
        return 0;
    return lm_vocab_token_to_piece(model->m->vocab, token, buf, length);
}
