/* test_decoder.c - which tensors each architecture requires (the shared
 * decoder's variants of model/decoder.c and the families with their own
 * tensor lists), against the fixtures of shared/fixtures/arch (the list of
 * test_arch, util_api.c).
 *
 * For every fixture and every tensor in it, a copy of the file without that
 * tensor is loaded: it must load when the tensor is one llama.cpp b1892 may
 * do without (an output matrix, which then is the token embedding again;
 * LLaMA's biases of Q, K, V and the attention output; StableLM-2's biases
 * of Q, K and V) and fail otherwise: a missing required weight or bias, or
 * a tensor left unclaimed because the one it belongs to is gone (falcon's
 * attn_norm_2.bias without its weight, phi2's and phi3's fused QKV without
 * the separate projections). The full files load (test_arch checks their
 * logits). A variant marked optional where b1892 requires the tensor, or
 * the reverse, fails here. And each fixture with its first norm stored as
 * F16 is refused at load, naming that tensor (norms and biases are applied
 * by F32-only ops; the file would load and fail at its first decode).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fp16.h"
#include "gguf/gguf.h"
#include "model/model.h"
#include "util_api.h"

static bool ends_with(const char *s, const char *tail)
{
    size_t n = strlen(s), t = strlen(tail);
    return n >= t && strcmp(s + n - t, tail) == 0;
}

/* Whether b1892 loads the fixture's architecture without this tensor. */
static bool optional(const char *arch, const char *name)
{
    if (strcmp(name, "output.weight") == 0)
        return true; /* tied to the token embedding */
    bool qkv_bias =
        ends_with(name, ".attn_q.bias") || ends_with(name, ".attn_k.bias") || ends_with(name, ".attn_v.bias");
    if (strcmp(arch, "llama") == 0)
        return qkv_bias || ends_with(name, ".attn_output.bias");
    if (strcmp(arch, "stablelm") == 0)
        return qkv_bias;
    return false;
}

/* Write the file image's metadata and every tensor but `drop` to path;
 * tensor `half` (an F32 one) stored as F16. */
static bool write_variant(const struct lm_gguf *g, const uint8_t *image, int64_t drop, int64_t half, const char *path)
{
    struct lm_gguf_writer *w = NULL;
    lm_fp16 *h = NULL;
    bool ok = lm_gguf_writer_new(&w) == LM_OK;
    for (int64_t i = 0; ok && i < lm_gguf_n_kv(g); i++)
        ok = lm_gguf_copy_kv(w, g, i) == LM_OK;
    for (int64_t i = 0; ok && i < lm_gguf_n_tensors(g); i++) {
        const struct lm_gguf_tensor_info *ti = lm_gguf_tensor_info(g, i);
        if (i == drop)
            continue;
        if (i != half) {
            ok = lm_gguf_add_tensor(w, ti->name, ti->type, ti->n_dims, ti->ne, image + ti->offset) == LM_OK;
            continue;
        }
        const size_t n = (size_t)(ti->size / sizeof(float));
        ok = ti->type == LM_TYPE_F32 && (h = malloc(n * sizeof *h)) != NULL;
        for (size_t j = 0; ok && j < n; j++) {
            float f;
            memcpy(&f, image + ti->offset + j * sizeof f, sizeof f);
            h[j] = lm_fp32_to_fp16(f);
        }
        ok = ok && lm_gguf_add_tensor(w, ti->name, LM_TYPE_F16, ti->n_dims, ti->ne, h) == LM_OK;
    }
    ok = ok && lm_gguf_write_file(w, path) == LM_OK;
    lm_gguf_writer_free(w);
    free(h);
    return ok;
}

static bool write_without(const struct lm_gguf *g, const uint8_t *image, int64_t drop, const char *path)
{
    return write_variant(g, image, drop, -1, path);
}

static bool loads(const char *path, char *err, size_t err_size)
{
    struct lm_model_params mp = {.use_mmap = true};
    struct lm_model *m = NULL;
    err[0] = '\0';
    if (lm_model_load(path, &mp, &m, err, err_size) != LM_OK)
        return false;
    lm_model_free(m);
    return true;
}

static void check_fixture(const char *fixture, const char *tmp)
{
    char rel[128], err[512];
    snprintf(rel, sizeof rel, "fixtures/arch/%s.gguf", fixture);
    size_t size = 0;
    uint8_t *image = lm_test_read_file(lm_test_shared(rel), &size);
    struct lm_gguf *g = NULL;
    CHECKF(image && lm_gguf_open_memory(image, size, &g, err, sizeof err) == LM_OK, "%s: %s", fixture, err);
    if (!g) {
        free(image);
        return;
    }
    const char *arch = "";
    int64_t k = lm_gguf_find_key(g, "general.architecture");
    CHECK(k >= 0 && lm_gguf_get_str(g, k, &arch, NULL) == LM_OK);
    CHECKF(write_without(g, image, -1, tmp) && loads(tmp, err, sizeof err), "%s whole: %s", fixture, err);
    int n_optional = 0, n = (int)lm_gguf_n_tensors(g);
    for (int64_t i = 0; i < n; i++) {
        const char *name = lm_gguf_tensor_info(g, i)->name;
        const bool want = optional(arch, name);
        CHECKF(write_without(g, image, i, tmp), "%s: writing without %s", fixture, name);
        const bool got = loads(tmp, err, sizeof err);
        CHECKF(got == want, "%s without %s: %s (%s)", fixture, name, got ? "loads" : "fails", got ? "" : err);
        n_optional += want;
    }
    /* a norm stored as F16 (every op applying norms and biases takes F32):
     * refused at load, naming the tensor */
    for (int64_t i = 0; i < n; i++) {
        const struct lm_gguf_tensor_info *ti = lm_gguf_tensor_info(g, i);
        if (ti->n_dims != 1)
            continue;
        CHECKF(write_variant(g, image, -1, i, tmp), "%s: writing %s as F16", fixture, ti->name);
        CHECKF(!loads(tmp, err, sizeof err) && strstr(err, ti->name) && strstr(err, "must be F32"),
               "%s with %s in F16: '%s'", fixture, ti->name, err);
        break;
    }
    printf("  %-13s %-9s %2d tensors, %d optional\n", fixture, arch, n, n_optional);
    lm_gguf_close(g);
    free(image);
}

int main(void)
{
    api_test_init(); /* the CPU backend; quiet logs (the qwen2 fixture warns at each load) */
    const char *tmp = api_tmp_path("decoder.gguf");
    for (int i = 0; i < api_n_arch_fixtures; i++)
        check_fixture(api_arch_fixtures[i], tmp);
    remove(tmp);
    return lm_test_summary();
}
