/* test_vocab_type.c - llama_vocab_type of each tokenizer family (SPM, BPE,
 * WordPiece), on vocab-only loads of the shared vocabularies. */
#include "util_api.h"

int main(void)
{
    static const struct {
        const char *file;
        enum llama_vocab_type type;
    } v[] = {
        {"models/ggml-vocab/ggml-vocab-llama-spm.gguf", LLAMA_VOCAB_TYPE_SPM},
        {"models/ggml-vocab/ggml-vocab-baichuan.gguf", LLAMA_VOCAB_TYPE_SPM},
        {"models/ggml-vocab/ggml-vocab-gpt-2.gguf", LLAMA_VOCAB_TYPE_BPE},
        {"models/ggml-vocab/ggml-vocab-gpt-neox.gguf", LLAMA_VOCAB_TYPE_BPE},
        {"models/ggml-vocab/ggml-vocab-bert-bge.gguf", LLAMA_VOCAB_TYPE_WPM},
    };
    api_test_init();
    struct llama_model_params mp = llama_model_default_params();
    mp.vocab_only = true;
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        struct llama_model *m = llama_load_model_from_file(lm_test_shared(v[i].file), mp);
        CHECKF(m && llama_vocab_type(m) == v[i].type, "%s: vocab type %d", v[i].file, m ? (int)llama_vocab_type(m) : -1);
        llama_free_model(m);
    }
    return lm_test_summary();
}
