/* fuzz_state.c - fuzz target for context states and session files.
 *
 * Once per process: stories260K, one context (n_ctx 32, n_batch 8), and a
 * base state (three tokens decoded) that every input starts from, so that an
 * input's outcome does not depend on the inputs before it. An input is:
 *   byte 0 mode 0: the rest is a state for llama_set_state_data (copied into
 *          a buffer of exactly llama_get_state_size bytes, zero-padded: the
 *          function takes no length);
 *   mode 1: the rest is a session file for llama_load_session_file (written
 *          to a scratch file; byte 1 is the token capacity);
 *   mode 2: the rest is a list of (u16 offset, u8 xor) patches to the base
 *          state, which is then restored (reaches the KV cells and data fast).
 * Promises checked (abort() when broken): a refused state leaves the context
 * as it was (its state copies to the same bytes); an accepted one keeps
 * llama_get_state_size unchanged, copies to at most that many bytes, and
 * restores again to the same bytes; the restored context then decodes (0 or
 * 1, never -1 or -2 for a valid batch) and shifts without a sanitizer report.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "llama.h"

#define REQUIRE(c)                                                                                                \
    do {                                                                                                          \
        if (!(c)) {                                                                                               \
            fprintf(stderr, "fuzz_state: %s:%d: broken promise: %s\n", __FILE__, __LINE__, #c);                    \
            abort();                                                                                              \
        }                                                                                                         \
    } while (0)

static struct llama_model *model;
static struct llama_context *ctx;
static uint8_t *base, *buf, *buf2; /* the base state; two scratch states */
static size_t state_size, base_n;
static char session_path[256];

static void quiet(enum ggml_log_level level, const char *text, void *user) { (void)level, (void)text, (void)user; }

static void remove_session(void) { remove(session_path); }

static void init(void)
{
    llama_backend_init(false);
    llama_log_set(getenv("LM_FUZZ_VERBOSE") ? NULL : quiet, NULL); /* logs to stderr when set */
    struct llama_model_params mp = llama_model_default_params();
    model = llama_load_model_from_file(LM_SHARED_DIR "/models/stories260K.gguf", mp);
    REQUIRE(model != NULL);
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 32;
    cp.n_batch = 8;
    cp.n_threads = cp.n_threads_batch = 1;
    cp.seed = 1;
    ctx = llama_new_context_with_model(model, cp);
    REQUIRE(ctx != NULL);
    llama_token t[3] = {1, 403, 407};
    REQUIRE(llama_decode(ctx, llama_batch_get_one(t, 3, 0, 0)) == 0);
    state_size = llama_get_state_size(ctx);
    base = malloc(state_size);
    buf = malloc(state_size);
    buf2 = malloc(state_size);
    REQUIRE(base && buf && buf2);
    base_n = llama_copy_state_data(ctx, base);
    REQUIRE(base_n > 0 && base_n <= state_size);
    snprintf(session_path, sizeof session_path, "/tmp/lamina-fuzz-state-%ld.session", (long)getpid());
    atexit(remove_session);
}

/* After an accepted state: the size promise, a round trip, then use it. */
static void exercise(void)
{
    REQUIRE(llama_get_state_size(ctx) == state_size);
    size_t n = llama_copy_state_data(ctx, buf);
    REQUIRE(n > 0 && n <= state_size);
    REQUIRE(llama_set_state_data(ctx, buf) == n);
    REQUIRE(llama_copy_state_data(ctx, buf2) == n && !memcmp(buf, buf2, n));
    for (int32_t i = -1; i <= 8; i++) {
        const float *row = llama_get_logits_ith(ctx, i);
        if (row) {
            volatile float x = row[0] + row[llama_n_vocab(model) - 1];
            (void)x;
        }
    }
    /* the highest position in sequence 0, through the view */
    struct llama_kv_cache_view v = llama_kv_cache_view_init(ctx, 4);
    llama_kv_cache_view_update(ctx, &v);
    llama_pos top = -1;
    for (int32_t i = 0; i < v.n_cells; i++)
        if (v.cells[i].pos > top)
            top = v.cells[i].pos;
    REQUIRE(v.used_cells == llama_get_kv_cache_used_cells(ctx));
    llama_kv_cache_view_free(&v);
    llama_token t = 403;
    if (top < INT32_MAX) {
        int32_t r = llama_decode(ctx, llama_batch_get_one(&t, 1, top + 1, 0)); /* applies restored deltas */
        REQUIRE(r == 0 || r == 1);
    }
    llama_kv_cache_seq_shift(ctx, 0, 0, -1, -3);
    llama_kv_cache_seq_shift(ctx, 0, -1, -1, INT32_MAX / 2);
    llama_kv_cache_seq_div(ctx, 0, 0, -1, 3);
    int32_t r = llama_decode(ctx, llama_batch_get_one(&t, 1, 0, 1));
    REQUIRE(r == 0 || r == 1);
    REQUIRE(llama_get_state_size(ctx) == state_size);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!model)
        init();
    REQUIRE(llama_set_state_data(ctx, base) == base_n);
    if (size < 1)
        return 0;
    uint8_t mode = data[0] % 3;
    data++;
    size--;
    bool ok = false;
    if (mode == 0 || mode == 2) {
        uint8_t *st = calloc(1, state_size);
        REQUIRE(st != NULL);
        if (mode == 0) {
            memcpy(st, data, size < state_size ? size : state_size);
        } else {
            memcpy(st, base, base_n);
            for (size_t i = 0; i + 3 <= size; i += 3)
                st[(data[i] | (size_t)data[i + 1] << 8) % base_n] ^= data[i + 2];
        }
        ok = llama_set_state_data(ctx, st) != 0;
        free(st);
    } else {
        FILE *f = fopen(session_path, "wb");
        REQUIRE(f != NULL);
        size_t cap = size ? data[0] : 0;
        if (size > 1)
            REQUIRE(fwrite(data + 1, 1, size - 1, f) == size - 1);
        REQUIRE(fclose(f) == 0);
        llama_token *tokens = malloc((cap ? cap : 1) * sizeof *tokens);
        size_t n_tokens = 0;
        REQUIRE(tokens != NULL);
        ok = llama_load_session_file(ctx, session_path, tokens, cap, &n_tokens);
        REQUIRE(!ok || n_tokens <= cap);
        free(tokens);
    }
    if (ok) {
        exercise();
    } else { /* refused: nothing changed */
        REQUIRE(llama_copy_state_data(ctx, buf) == base_n && !memcmp(buf, base, base_n));
        REQUIRE(llama_get_state_size(ctx) == state_size);
    }
    return 0;
}
