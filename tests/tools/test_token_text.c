/* test_token_text.c - lm_token_append (common/sampler.h), the one way the
 * tools and the server turn a token into text: for every token of several
 * real vocabularies it gives exactly llama_token_to_piece's bytes, also for
 * the pieces longer than its 64-byte first try (which earlier fixed-size
 * buffers of the server dropped), appended after earlier text. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/sampler.h"
#include "lm_test.h"

static size_t check_vocab(const char *name, size_t *n_long)
{
    char path[512];
    snprintf(path, sizeof path, "%s/models/ggml-vocab/%s", LM_SHARED_DIR, name);
    struct llama_model_params mp = llama_model_default_params();
    mp.vocab_only = true;
    struct llama_model *m = llama_load_model_from_file(path, mp);
    CHECKF(m != NULL, "load %s", name);
    if (!m)
        return 0;
    size_t longest = 0;
    struct lm_strbuf all = {0};
    static char want[1 << 16];
    for (llama_token t = 0; t < llama_n_vocab(m); t++) {
        const int32_t n = llama_token_to_piece(m, t, want, (int32_t)sizeof want);
        CHECK(n >= 0);
        const size_t before = all.n;
        CHECK(lm_token_append(m, t, &all) == LM_OK);
        CHECKF(all.n - before == (size_t)n && !memcmp(all.p + before, want, (size_t)n) && all.p[all.n] == 0,
               "%s token %d", name, t);
        if ((size_t)n > longest)
            longest = (size_t)n;
        *n_long += n > 64;
        if (all.n > (1u << 20))
            all.n = 0; /* keep the buffer small; the bytes before are checked */
    }
    lm_strbuf_free(&all);
    llama_free_model(m);
    return longest;
}

int main(void)
{
    llama_backend_init(false);
    const char *vocabs[] = {"ggml-vocab-llama-spm.gguf", "ggml-vocab-gpt-2.gguf", "ggml-vocab-deepseek-coder.gguf",
                            "ggml-vocab-falcon.gguf", "ggml-vocab-mpt.gguf"};
    size_t n_long = 0;
    for (size_t i = 0; i < sizeof vocabs / sizeof vocabs[0]; i++) {
        size_t longest = check_vocab(vocabs[i], &n_long);
        printf("%s: longest piece %zu bytes\n", vocabs[i], longest);
    }
    CHECKF(n_long > 0, "no piece longer than 64 bytes: the long path was not exercised");
    llama_backend_free();
    return lm_test_summary();
}
