/* util_api.c - helpers for the API tests: load models, greedy decoding. */
#include "util_api.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void quiet(enum ggml_log_level level, const char *text, void *user)
{
    (void)user;
    if (level == GGML_LOG_LEVEL_ERROR && getenv("LAMINA_TEST_VERBOSE"))
        fputs(text, stderr);
}

void api_test_init(void)
{
    llama_backend_init(false);
    llama_log_set(quiet, NULL);
}

struct llama_model *api_load(const char *rel)
{
    struct llama_model_params mp = llama_model_default_params();
    return llama_load_model_from_file(lm_test_shared(rel), mp);
}

struct llama_model *api_start(const char *rel)
{
    api_test_init();
    struct llama_model *m = api_load(rel);
    CHECKF(m != NULL, "cannot load %s", rel);
    return m;
}

struct llama_context_params api_ctx_params(uint32_t n_ctx, uint32_t n_batch)
{
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = n_ctx;
    cp.n_batch = n_batch;
    cp.n_threads = 2;
    cp.n_threads_batch = 2;
    cp.seed = 1234;
    return cp;
}

struct llama_context *api_ctx(struct llama_model *m, uint32_t n_ctx, uint32_t n_batch, bool logits_all)
{
    struct llama_context_params cp = api_ctx_params(n_ctx, n_batch);
    cp.logits_all = logits_all;
    return llama_new_context_with_model(m, cp);
}

llama_token api_argmax(const float *logits, int n)
{
    int best = 0;
    for (int i = 1; i < n; i++)
        if (logits[i] > logits[best])
            best = i;
    return best;
}

double api_max_diff(const float *a, const float *b, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        double d = a[i] > b[i] ? a[i] - b[i] : b[i] - a[i];
        if (!(d <= m))
            m = d;
    }
    return m;
}

const char *api_tmp_path(const char *name)
{
    static char bufs[8][256];
    static int slot;
    char *b = bufs[slot++ % 8];
    snprintf(b, sizeof bufs[0], "/tmp/lamina-api-%ld-%s", (long)getpid(), name);
    return b;
}

bool api_write_file(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return false;
    bool ok = fwrite(data, 1, n, f) == n;
    return fclose(f) == 0 && ok;
}

struct llama_model *api_load_opts(const char *rel, bool use_mmap, bool use_mlock)
{
    struct llama_model_params mp = llama_model_default_params();
    mp.use_mmap = use_mmap;
    mp.use_mlock = use_mlock;
    return llama_load_model_from_file(lm_test_shared(rel), mp);
}

llama_token_data_array api_candidates(const float *logits, int n)
{
    llama_token_data_array a = {malloc((size_t)(n > 0 ? n : 1) * sizeof(llama_token_data)), (size_t)n, false};
    for (int i = 0; a.data && i < n; i++)
        a.data[i] = (llama_token_data){i, logits[i], 0.0f};
    return a;
}

bool api_decode_ids(struct llama_context *ctx, const llama_token *ids, int n, int pos0, float *out)
{
    const int n_vocab = llama_n_vocab(llama_get_model(ctx));
    struct llama_batch b = llama_batch_init(n, 0, 1);
    for (int i = 0; i < n; i++) {
        b.token[i] = ids[i];
        b.pos[i] = pos0 + i;
        b.n_seq_id[i] = 1;
        b.seq_id[i][0] = 0;
        b.logits[i] = 1;
    }
    b.n_tokens = n;
    bool ok = llama_decode(ctx, b) == 0;
    for (int i = 0; i < n && ok; i++)
        memcpy(out + (size_t)i * n_vocab, llama_get_logits_ith(ctx, i), (size_t)n_vocab * sizeof(float));
    llama_batch_free(b);
    return ok;
}

const char *const api_arch_fixtures[] = {
    "llama", "llama-moe", "llama-f16", "falcon", "falcon-norm2", "baichuan", "baichuan-13b", "gpt2", "starcoder",
    "mpt", "bloom", "stablelm", "qwen", "phi2", "phi2-sepqkv", "persimmon", "refact", "plamo", "qwen2", "gemma",
    "phi3",
};
const int api_n_arch_fixtures = (int)(sizeof api_arch_fixtures / sizeof api_arch_fixtures[0]);

int api_fixture_ids(const char *name, llama_token *ids, int cap)
{
    char rel[128];
    snprintf(rel, sizeof rel, "fixtures/arch/%s.ids.txt", name);
    FILE *f = fopen(lm_test_shared(rel), "r");
    int n = 0;
    while (f && n < cap && fscanf(f, "%d", &ids[n]) == 1)
        n++;
    if (f)
        fclose(f);
    return n;
}
