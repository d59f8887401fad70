/* fuzz_lora.c - fuzz target for LoRA adapters (llama_model_apply_lora_from_file).
 *
 * Once per process: stories260K (F32 weights). An input is:
 *   byte 0: options: bits 0-1 the scale (1, -1, 0.5, 0), bit 2 use
 *           stories260K.gguf itself as path_base_model, bits 3-4 n_threads - 1;
 *   the rest: the adapter file, written to a scratch file (the function
 *           reads only from a path).
 * Promises checked (abort() when broken): the result is 0 or 1; on 1 every
 * weight of the model is as it was (checksummed through lm_tensor_get, so the
 * CPU's repacked layouts are read as plain rows). Weights changed by accepted
 * adapters stay changed for later inputs (reloading per input would cost more
 * than the apply).
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/api.h"
#include "backend/backend.h"
#include "core/tensor.h"

#define REQUIRE(c)                                                                                                \
    do {                                                                                                          \
        if (!(c)) {                                                                                               \
            fprintf(stderr, "fuzz_lora: %s:%d: broken promise: %s\n", __FILE__, __LINE__, #c);                     \
            abort();                                                                                              \
        }                                                                                                         \
    } while (0)

#define STORIES LM_SHARED_DIR "/models/stories260K.gguf"

static struct llama_model *model;
static char lora_path[256];
static uint8_t *scratch;
static size_t scratch_cap;

static void quiet(enum ggml_log_level level, const char *text, void *user) { (void)level, (void)text, (void)user; }

static void remove_lora(void) { remove(lora_path); }

/* A hash of every weight's bytes (word by word: weights are whole floats). */
static uint64_t weights_sum(void)
{
    uint64_t h = 0xcbf29ce484222325u;
    const struct lm_ctx *wctx = model->m->ctx;
    for (struct lm_tensor *t = lm_ctx_first_tensor(wctx); t; t = lm_ctx_next_tensor(wctx, t)) {
        size_t n = lm_nbytes(t);
        if (n > scratch_cap) {
            free(scratch);
            scratch = malloc(n);
            REQUIRE(scratch != NULL);
            scratch_cap = n;
        }
        REQUIRE(lm_tensor_get(t, scratch, 0, n) == LM_OK);
        for (size_t i = 0; i < n; i += 8) {
            uint64_t w = 0;
            memcpy(&w, scratch + i, n - i < 8 ? n - i : 8);
            h = (h ^ w) * 0x100000001b3u;
        }
    }
    return h;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static uint64_t sum;
    if (!model) {
        llama_backend_init(false);
        llama_log_set(getenv("LM_FUZZ_VERBOSE") ? NULL : quiet, NULL); /* logs to stderr when set */
        model = llama_load_model_from_file(STORIES, llama_model_default_params());
        REQUIRE(model != NULL);
        snprintf(lora_path, sizeof lora_path, "/tmp/lamina-fuzz-lora-%ld.ggla", (long)getpid());
        atexit(remove_lora);
        sum = weights_sum();
    }
    if (size < 1)
        return 0;
    static const float scales[4] = {1.0f, -1.0f, 0.5f, 0.0f};
    uint8_t opt = data[0];
    FILE *f = fopen(lora_path, "wb");
    REQUIRE(f != NULL);
    REQUIRE(size == 1 || fwrite(data + 1, 1, size - 1, f) == size - 1);
    REQUIRE(fclose(f) == 0);
    int32_t r = llama_model_apply_lora_from_file(model, lora_path, scales[opt & 3], (opt & 4) ? STORIES : NULL,
                                                 1 + ((opt >> 3) & 3));
    REQUIRE(r == 0 || r == 1);
    if (r == 1)
        REQUIRE(weights_sum() == sum); /* a refused adapter changes nothing */
    else
        sum = weights_sum();
    return 0;
}
