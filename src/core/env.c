/* env.c - the table of LAMINA_* environment switches and their one parser.
 *
 * Invariants: the table has one row per enum lm_env_id, in enum order; this
 * file holds the library's only getenv() of a LAMINA_* name, and only src/api/
 * calls its accessors (tests/core/test_env.c checks both); nothing here is
 * cached, so a reader sees the environment as it is when it asks (tests set
 * variables between contexts). docs/architecture.md ("Environment switches")
 * is this table in prose; tests/core/test_env.c checks both agree on names.
 * Workload: a handful of reads per process start, model load or context.
 */
#include "core/env.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"

static const struct lm_env_switch table[LM_ENV_COUNT] = {
    [LM_ENV_LOG] =
        {
            .name = "LAMINA_LOG",
            .kind = LM_ENV_LEVEL,
            .def = LM_LOG_INFO,
            .words = {"error", "warn", "info", "debug"},
            .levels = {LM_LOG_ERROR, LM_LOG_WARN, LM_LOG_INFO, LM_LOG_DEBUG},
            .meaning = "least important level the default stderr log sink prints",
            .when = "first llama_backend_init (lm_log_set_default_level; lm_log_set_level overrides)",
        },
    [LM_ENV_ISA] =
        {
            .name = "LAMINA_ISA",
            .kind = LM_ENV_WORD,
            .def = LM_ENV_AUTO, /* the best level this build and CPU have */
            .words = {"generic", "avx2", "avx512", "amx"},
            .meaning = "start the CPU kernels at this level if it is below the best available",
            .when = "first llama_backend_init (lm_cpu_isa_limit, which also switches later)",
        },
    [LM_ENV_PREFETCH] =
        {
            .name = "LAMINA_PREFETCH",
            .kind = LM_ENV_FLAG,
            .def = LM_ENV_AUTO, /* on, but off on AMD family 25 (Zen 3/4) */
            .meaning = "software prefetch in the AVX-512 kernels off (0) or on (1), whatever the CPU",
            .when = "first llama_backend_init (lm_cpu_prefetch_set)",
        },
    [LM_ENV_HUGEPAGES] =
        {
            .name = "LAMINA_HUGEPAGES",
            .kind = LM_ENV_FLAG,
            .def = 1,
            .meaning = "2 MiB alignment and MADV_HUGEPAGE for buffers of 2 MiB and more",
            .when = "first llama_backend_init (lm_alloc_set_huge_pages)",
        },
    [LM_ENV_NO_REPACK] =
        {
            .name = "LAMINA_NO_REPACK",
            .kind = LM_ENV_FLAG,
            .def = 0,
            .meaning = "1: load CPU weights plain, without the repacked (interleaved) layouts",
            .when = "every model load (llama_load_model_from_file: lm_model_params.repack)",
        },
    [LM_ENV_NO_FUSE] =
        {
            .name = "LAMINA_NO_FUSE",
            .kind = LM_ENV_FLAG,
            .def = 0,
            .meaning = "1: a context's CPU and CUDA backends compute the node pairs of core/fuse.h (RMS_NORM+MUL, "
                       "SILU+MUL; CUDA also one-column MUL_MAT+ADD and MUL_MAT+MUL_MAT) as separate nodes",
            .when = "every context creation (lm_backend_opts.no_fuse)",
        },
    [LM_ENV_ATTN] =
        {
            .name = "LAMINA_ATTN",
            .kind = LM_ENV_WORD,
            .def = 0,
            .words = {"fused", "unfused"},
            .meaning = "unfused: attention as MUL_MAT, SOFT_MAX, MUL_MAT instead of the ATTN op",
            .when = "every context creation (lm_context_params.attn_unfused)",
        },
    [LM_ENV_CUDA_GRAPHS] =
        {
            .name = "LAMINA_CUDA_GRAPHS",
            .kind = LM_ENV_FLAG,
            .def = 1,
            .meaning = "0: a CUDA backend launches decode graphs node by node, without CUDA graphs",
            .when = "every context creation (lm_backend_opts.no_cuda_graphs)",
        },
    [LM_ENV_CUDA_MMQ] =
        {
            .name = "LAMINA_CUDA_MMQ",
            .kind = LM_ENV_FLAG,
            .def = 1,
            .meaning = "0: a CUDA backend multiplies quantized weights with 9 to 64 columns (or tokens, MUL_MAT_ID) "
                       "by dequantizing them to F16 for cuBLAS instead of the MMQ kernels",
            .when = "every context creation (lm_backend_opts.no_cuda_mmq)",
        },
    [LM_ENV_GRAPH_REUSE] =
        {
            .name = "LAMINA_GRAPH_REUSE",
            .kind = LM_ENV_FLAG,
            .def = 1,
            .meaning = "0: every decode builds and allocates its graph anew, none is kept for the next",
            .when = "every context creation (lm_context_params.no_graph_reuse)",
        },
    [LM_ENV_MODULE_PATH] =
        {
            .name = "LAMINA_MODULE_PATH",
            .kind = LM_ENV_PATH,
            .def = 0,
            .meaning = "folders (':' between them) liblamina.so searches for backend modules (liblamina-cuda.so) "
                       "instead of its own folder and the install libdir; empty: load none",
            .when = "llama_backend_init (once per process: a module loaded stays)",
        },
};

const struct lm_env_switch *lm_env_switch(enum lm_env_id id) { return (unsigned)id < LM_ENV_COUNT ? &table[id] : NULL; }

/* The index of value among s's words, or -1. */
static int word_index(const struct lm_env_switch *s, const char *value)
{
    for (int i = 0; value && i < LM_ENV_MAX_WORDS && s->words[i]; i++)
        if (strcmp(value, s->words[i]) == 0)
            return i;
    return -1;
}

int lm_env_flag(enum lm_env_id id)
{
    const struct lm_env_switch *s = lm_env_switch(id);
    assert(s && s->kind == LM_ENV_FLAG);
    const char *v = getenv(s->name);
    if (v && (strcmp(v, "0") == 0 || strcmp(v, "1") == 0))
        return v[0] == '1';
    return s->def;
}

int lm_env_word(enum lm_env_id id)
{
    const struct lm_env_switch *s = lm_env_switch(id);
    assert(s && s->kind == LM_ENV_WORD);
    const int i = word_index(s, getenv(s->name));
    return i >= 0 ? i : s->def;
}

const char *lm_env_word_name(enum lm_env_id id)
{
    const int i = lm_env_word(id);
    return i >= 0 ? table[id].words[i] : NULL;
}

int lm_env_level(enum lm_env_id id)
{
    const struct lm_env_switch *s = lm_env_switch(id);
    assert(s && s->kind == LM_ENV_LEVEL);
    const int i = word_index(s, getenv(s->name));
    return i >= 0 ? s->levels[i] : s->def;
}

const char *lm_env_path(enum lm_env_id id)
{
    const struct lm_env_switch *s = lm_env_switch(id);
    assert(s && s->kind == LM_ENV_PATH);
    return getenv(s->name);
}
