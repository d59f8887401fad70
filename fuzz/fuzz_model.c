/* fuzz_model.c - fuzz target for model files: the loader past the GGUF
 * reader (every architecture's hyperparameters, its tensor list and shapes,
 * the vocabulary) and, when a file loads, a context and a decode.
 *
 * An input is a GGUF image, written to a scratch file (the loader reads from
 * a path). Promises checked (abort() when broken): a loaded model reports a
 * positive vocabulary, width and layer count; its context either fails to
 * be made or decodes a batch of 4 tokens (ids below n_vocab, logits for the
 * last) and then one more token, each with llama.h's results (0, 1 for no
 * cache slot, below 0 for an error), and on 0 the
 * last token's n_vocab logits can be read (any value: a file may hold NaN
 * weights). Crashes and sanitizer reports are the fuzzer's to find.
 *
 * Seeds (fuzz/make_corpus.c): "ok-<fixture>", one tiny model per fixture of
 * shared/fixtures/arch (the fixture's metadata and vocabulary, 1 layer of
 * width 8, the tensors its architecture declares, F16 matrices), and three
 * of width 32 with Q4_0, Q8_0 (repacked at load) and Q5_0 matrices;
 * lm_fuzz_expect checks that each of them loads and decodes, so the replay
 * covers every architecture.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "llama.h"

#define REQUIRE(c)                                                                                                     \
    do {                                                                                                               \
        if (!(c)) {                                                                                                    \
            fprintf(stderr, "fuzz_model: %s:%d: broken promise: %s\n", __FILE__, __LINE__, #c);                        \
            abort();                                                                                                   \
        }                                                                                                              \
    } while (0)

static char path[256];
static bool last_decoded; /* the last input loaded and decoded (for lm_fuzz_expect) */

static void quiet(enum ggml_log_level level, const char *text, void *user) { (void)level, (void)text, (void)user; }

static void remove_scratch(void) { remove(path); }

static void init(void)
{
    llama_backend_init(false);
    llama_log_set(quiet, NULL);
    const char *dir = getenv("TMPDIR");
    snprintf(path, sizeof path, "%s/lm_fuzz_model_%ld.gguf", dir && *dir ? dir : "/tmp", (long)getpid());
    atexit(remove_scratch);
}

static volatile float sink;

/* Decode n tokens at pos (logits for the last); true when the decode ran. */
static bool decode(struct llama_context *ctx, int n_vocab, int pos, int n)
{
    llama_token ids[4];
    for (int i = 0; i < n; i++)
        ids[i] = (llama_token)((pos + i + 1) % n_vocab);
    const int r = llama_decode(ctx, llama_batch_get_one(ids, n, pos, 0));
    REQUIRE(r <= 1); /* 0, 1 (no cache slot) or an error below 0 */
    if (r && getenv("LM_FUZZ_VERBOSE"))
        fprintf(stderr, "fuzz_model: llama_decode returned %d\n", r);
    if (r)
        return false;
    const float *logits = llama_get_logits(ctx); /* one row: the last token's */
    REQUIRE(logits != NULL);
    float s = 0.0f;
    for (int i = 0; i < n_vocab; i++)
        s += logits[i];
    sink = s;
    return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static bool ready;
    if (!ready) {
        init();
        ready = true;
    }
    last_decoded = false;
    FILE *f = fopen(path, "wb");
    REQUIRE(f != NULL);
    REQUIRE(fwrite(data, 1, size, f) == size && fclose(f) == 0);

    struct llama_model_params mp = llama_model_default_params();
    mp.use_mmap = (size & 1) != 0; /* both ways of reading the weights */
    struct llama_model *m = llama_load_model_from_file(path, mp);
    if (!m)
        return 0;
    const int n_vocab = llama_n_vocab(m);
    REQUIRE(n_vocab > 0 && llama_n_embd(m) > 0 && llama_n_ctx_train(m) >= 0);

    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 32;
    cp.n_batch = 8;
    cp.n_threads = cp.n_threads_batch = 1 + (int)(size % 2);
    cp.seed = 1;
    struct llama_context *ctx = llama_new_context_with_model(m, cp);
    if (ctx) {
        last_decoded = decode(ctx, n_vocab, 0, 4) && decode(ctx, n_vocab, 4, 1);
        llama_free(ctx);
    }
    llama_free_model(m);
    return 0;
}

/* Replay only: "ok-*" seeds must load and decode. */
bool lm_fuzz_expect(const char *base, const uint8_t *data, size_t size)
{
    (void)data, (void)size;
    if (strncmp(base, "ok-", 3) == 0 && !last_decoded) {
        fprintf(stderr, "fuzz_model: %s did not load and decode\n", base);
        return false;
    }
    return true;
}
