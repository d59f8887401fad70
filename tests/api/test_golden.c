/* test_golden.c - stories260K through llama.h: greedy decoding from BOS for
 * 200 tokens gives exactly the reference ids and text (made by an independent
 * float forward pass, identical to llama2.c's output), for the GGUF v3 file and
 * the legacy v1 file, with F16 and F32 KV caches. */
#include <stdlib.h>
#include <string.h>

#include "util_api.h"

#define N_GEN 200

static int read_ids(llama_token *ids, int cap)
{
    size_t len;
    char *txt = lm_test_read_file(lm_test_shared("models/stories260K.greedy200.ids"), &len);
    int n = 0;
    for (char *p = txt, *end; txt && n < cap; p = end) {
        long v = strtol(p, &end, 10);
        if (end == p)
            break;
        ids[n++] = (llama_token)v;
    }
    free(txt);
    return n;
}

static void run(const char *model_path, enum ggml_type kv_type)
{
    llama_token want[N_GEN];
    CHECK(read_ids(want, N_GEN) == N_GEN);
    struct llama_model *m = api_load(model_path);
    CHECKF(m != NULL, "cannot load %s", model_path);
    if (!m)
        return;
    struct llama_context_params cp = llama_context_default_params();
    cp.n_threads = 2;
    cp.type_k = cp.type_v = kv_type;
    struct llama_context *ctx = llama_new_context_with_model(m, cp);
    CHECK(ctx != NULL);
    size_t txt_len;
    char *golden = lm_test_read_file(lm_test_shared("models/stories260K.greedy200.txt"), &txt_len);
    char *text = calloc(1, 16 * N_GEN + 1);
    size_t n_text = 0;
    llama_token tok = llama_token_bos(m);
    int n_match = 0;
    for (int i = 0; i < N_GEN && ctx; i++) {
        CHECK(llama_decode(ctx, llama_batch_get_one(&tok, 1, i, 0)) == 0);
        tok = api_argmax(llama_get_logits(ctx), llama_n_vocab(m));
        n_match += tok == want[i];
        char piece[16];
        int32_t n = llama_token_to_piece(m, tok, piece, sizeof piece);
        int skip = i == 0 && n > 0 && piece[0] == ' '; /* the space SentencePiece puts after BOS */
        memcpy(text + n_text, piece + skip, (size_t)(n - skip));
        n_text += (size_t)(n - skip);
    }
    CHECKF(n_match == N_GEN, "%s (kv %d): %d of %d ids match", model_path, kv_type, n_match, N_GEN);
    CHECKF(golden && n_text == txt_len && !memcmp(text, golden, txt_len), "%s: text differs", model_path);
    printf("%s, KV %s: %d/%d ids, text %s\n", model_path, kv_type == GGML_TYPE_F16 ? "f16" : "f32", n_match, N_GEN,
           golden && n_text == txt_len && !memcmp(text, golden, txt_len) ? "identical" : "DIFFERENT");
    free(text);
    free(golden);
    llama_free(ctx);
    llama_free_model(m);
}

int main(void)
{
    api_test_init();
    run("models/stories260K.gguf", GGML_TYPE_F16);
    run("models/stories260K.gguf", GGML_TYPE_F32);
    run("models/tinyllamas-stories-260k-f32.gguf", GGML_TYPE_F16);
    return lm_test_summary();
}
