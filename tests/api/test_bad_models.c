/* test_bad_models.c - damaged or inconsistent model files through
 * llama_load_model_from_file: every one is refused (NULL), none crashes
 * (this suite also runs under ASan/UBSan). The container-level cases
 * (truncation everywhere, corrupt counts) are in tests/gguf; here the file is
 * a valid GGUF whose contents do not make a model: wrong hyperparameters,
 * missing, extra, misshapen or mistyped tensors, vocabulary problems; plus
 * truncation through the loader with and without mmap. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "util_api.h"

static uint8_t *file_data;
static size_t file_size;
static struct lm_gguf *src;
static char path[256];

enum edit { E_NONE, E_SET_U32, E_SET_F32, E_DROP_KEY, E_DROP_TENSOR, E_EXTRA_TENSOR, E_RESHAPE, E_RETYPE };

struct mutation {
    const char *what;
    enum edit edit;
    const char *name; /* key or tensor */
    double value;
};

/* Rewrite stories260K with one edit; returns false if the writer refused. */
static bool write_mutant(const struct mutation *mu)
{
    struct lm_gguf_writer *w;
    if (lm_gguf_writer_new(&w))
        return false;
    for (int64_t i = 0; i < lm_gguf_n_kv(src); i++) {
        const char *key = lm_gguf_key(src, i);
        if (mu->name && !strcmp(key, mu->name) && mu->edit == E_DROP_KEY)
            continue;
        lm_gguf_copy_kv(w, src, i);
    }
    if (mu->edit == E_SET_U32)
        lm_gguf_set_u32(w, mu->name, (uint32_t)mu->value);
    if (mu->edit == E_SET_F32)
        lm_gguf_set_f32(w, mu->name, (float)mu->value);
    static float zeros[64 * 512];
    for (int64_t i = 0; i < lm_gguf_n_tensors(src); i++) {
        const struct lm_gguf_tensor_info *t = lm_gguf_tensor_info(src, i);
        bool hit = mu->name && !strcmp(t->name, mu->name);
        if (hit && mu->edit == E_DROP_TENSOR)
            continue;
        int64_t ne[4] = {t->ne[0], t->ne[1], t->ne[2], t->ne[3]};
        enum lm_type type = t->type;
        const void *data = file_data + t->offset;
        if (hit && mu->edit == E_RESHAPE) {
            ne[0] = t->ne[1];
            ne[1] = t->ne[0];
        }
        if (hit && mu->edit == E_RETYPE) {
            type = LM_TYPE_F16; /* half the bytes: take them from the start */
        }
        lm_gguf_add_tensor(w, t->name, type, t->n_dims, ne, data);
    }
    if (mu->edit == E_EXTRA_TENSOR)
        lm_gguf_add_tensor(w, mu->name, LM_TYPE_F32, 1, (int64_t[]){64}, zeros);
    lm_status st = lm_gguf_write_file(w, path);
    lm_gguf_writer_free(w);
    return st == LM_OK;
}

static void test_mutations(void)
{
    static const struct mutation cases[] = {
        {"control: unchanged file loads", E_NONE, NULL, 0},
        {"block_count larger than the tensors", E_SET_U32, "llama.block_count", 6},
        {"block_count huge", E_SET_U32, "llama.block_count", 100000},
        {"block_count zero", E_SET_U32, "llama.block_count", 0},
        {"head_count zero", E_SET_U32, "llama.attention.head_count", 0},
        {"head_count_kv not dividing head_count", E_SET_U32, "llama.attention.head_count_kv", 3},
        {"embedding_length mismatching the tensors", E_SET_U32, "llama.embedding_length", 32},
        {"feed_forward_length mismatch", E_SET_U32, "llama.feed_forward_length", 173},
        {"rope dimension odd", E_SET_U32, "llama.rope.dimension_count", 7},
        {"rope dimension larger than a head", E_SET_U32, "llama.rope.dimension_count", 64},
        {"negative rms epsilon", E_SET_F32, "llama.attention.layer_norm_rms_epsilon", -1.0},
        {"context_length missing", E_DROP_KEY, "llama.context_length", 0},
        {"architecture missing", E_DROP_KEY, "general.architecture", 0},
        {"tokens missing", E_DROP_KEY, "tokenizer.ggml.tokens", 0},
        {"tokenizer model missing", E_DROP_KEY, "tokenizer.ggml.model", 0},
        {"bos id out of range", E_SET_U32, "tokenizer.ggml.bos_token_id", 100000},
        {"a weight missing", E_DROP_TENSOR, "blk.2.attn_k.weight", 0},
        {"output norm missing", E_DROP_TENSOR, "output_norm.weight", 0},
        {"an unknown extra tensor", E_EXTRA_TENSOR, "blk.0.mystery.weight", 0},
        {"a weight transposed", E_RESHAPE, "blk.1.ffn_down.weight", 0},
        {"a weight with another type", E_RETYPE, "blk.0.attn_q.weight", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const struct mutation *mu = &cases[i];
        CHECKF(write_mutant(mu), "cannot write mutant '%s'", mu->what);
        for (int mmap = 0; mmap < 2; mmap++) {
            struct llama_model_params mp = llama_model_default_params();
            mp.use_mmap = mmap;
            struct llama_model *m = llama_load_model_from_file(path, mp);
            bool want_ok = mu->edit == E_NONE || mu->edit == E_RETYPE;
            if (mu->edit == E_RETYPE) {
                /* an f16 weight is a valid model; it must load and decode */
                want_ok = true;
            }
            CHECKF((m != NULL) == want_ok, "%s (mmap %d): %s", mu->what, mmap, m ? "loaded" : "refused");
            if (m && want_ok) {
                struct llama_context *ctx = api_ctx(m, 32, 8, false);
                llama_token t = 1;
                CHECK(ctx && llama_decode(ctx, llama_batch_get_one(&t, 1, 0, 0)) == 0);
                llama_free(ctx);
            }
            llama_free_model(m);
        }
    }
}

static void test_truncation(void)
{
    /* through the loader, both paths; a step that hits header and data */
    int refused = 0, n = 0;
    for (size_t cut = 0; cut < file_size; cut += cut < 20000 ? 997 : 49999) {
        FILE *f = fopen(path, "wb");
        fwrite(file_data, 1, cut, f);
        fclose(f);
        for (int mmap = 0; mmap < 2; mmap++) {
            struct llama_model_params mp = llama_model_default_params();
            mp.use_mmap = mmap;
            struct llama_model *m = llama_load_model_from_file(path, mp);
            refused += m == NULL;
            n++;
            llama_free_model(m);
        }
    }
    CHECKF(refused == n, "%d of %d truncated files refused", refused, n);
    printf("truncated model files refused: %d of %d\n", refused, n);
}

static void test_vocab_only(void)
{
    /* vocab_only needs only the tokenizer: an unknown architecture is fine */
    struct llama_model_params mp = llama_model_default_params();
    mp.vocab_only = true;
    struct llama_model *m = llama_load_model_from_file(lm_test_shared("models/ggml-vocab/ggml-vocab-mpt.gguf"), mp);
    CHECK(m != NULL && llama_n_vocab(m) == 50432);
    CHECK(m && llama_new_context_with_model(m, llama_context_default_params()) == NULL);
    llama_free_model(m);
    mp.vocab_only = false; /* ...but a full load of a vocab-only file is refused */
    CHECK(llama_load_model_from_file(lm_test_shared("models/ggml-vocab/ggml-vocab-mpt.gguf"), mp) == NULL);
    CHECK(llama_load_model_from_file("/nonexistent/model.gguf", mp) == NULL);
}

int main(void)
{
    api_test_init();
    snprintf(path, sizeof path, "/tmp/lamina-bad-model-%d.gguf", (int)getpid());
    file_data = lm_test_read_file(lm_test_shared("models/stories260K.gguf"), &file_size);
    char err[256];
    CHECK(file_data && lm_gguf_open_memory(file_data, file_size, &src, err, sizeof err) == LM_OK);
    if (src) {
        test_mutations();
        test_truncation();
    }
    test_vocab_only();
    lm_gguf_close(src);
    free(file_data);
    unlink(path);
    return lm_test_summary();
}
