/* test_api_bad_input.c - bad input through llama.h gets the documented error
 * value (docs/api.md), never a crash, and leaves the objects usable. This
 * extends tests/api/test_batching.c (which covers: batch > n_batch, empty
 * batch, unknown token ids, negative positions, sequence ids -1 and 1000, a
 * full cache) with:
 *  - llama_decode: NULL context; neither tokens nor embeddings; an embedding
 *    batch larger than n_batch; n_seq_id 0 or 65; a bad second sequence id;
 *    a bad id in the middle of an explicit batch (nothing decoded, the cache
 *    and the last logits unchanged);
 *  - llama_get_logits_ith out of range: NULL; llama_get_logits before any
 *    decode and llama_get_embeddings without embedding = true: zeros;
 *  - tokenizer: negative length, NULL text, bad token ids for
 *    token_to_piece / get_text / get_score / get_type;
 *  - contexts: an unknown KV type, a huge n_ctx, a vocab-only model: NULL;
 *    n_batch 0 and 0 threads are taken as 1;
 *  - KV functions with sequence ids outside [0, 64), d <= 0 for seq_div,
 *    an empty range: nothing changes; seq_keep of a sequence without cells
 *    empties the cache (b1892's semantics);
 *  - batches: llama_batch_init with bad sizes gives an empty batch;
 *  - samplers on empty arrays and penalties with foreign token ids;
 *  - model files: NULL path, a directory, an empty file: NULL.
 * (Session files and state: test_api_state.c; grammars: test_api_grammar.c;
 * LoRA files: test_api_lora.c.) */
#include <stdlib.h>
#include <string.h>

#include "util_api.h"

static struct llama_model *M;
static int NV;

static void test_decode(void)
{
    struct llama_context *ctx = api_ctx(M, 32, 8, false);
    llama_token t[4] = {1, 403, 407, 261};
    /* before any decode: zero rows, not garbage (lamina); no embeddings without embedding = true */
    const float *l0 = llama_get_logits(ctx), *e0 = llama_get_embeddings(ctx);
    int nonzero = 0;
    for (int i = 0; l0 && i < NV; i++)
        nonzero += l0[i] != 0.0f;
    for (int i = 0; e0 && i < llama_n_embd(M); i++)
        nonzero += e0[i] != 0.0f;
    CHECK(l0 && e0 && nonzero == 0);
    CHECK(llama_decode(ctx, llama_batch_get_one(t, 4, 0, 0)) == 0);
    float *before = malloc((size_t)NV * sizeof(float));
    memcpy(before, llama_get_logits(ctx), (size_t)NV * sizeof(float));
    CHECK(llama_decode(NULL, llama_batch_get_one(t, 1, 4, 0)) == -1);
    CHECK(llama_decode(ctx, llama_batch_get_one(NULL, 1, 4, 0)) == -1); /* neither token nor embd */
    struct llama_batch eb = llama_batch_init(9, llama_n_embd(M), 1);
    eb.n_tokens = 9; /* > n_batch 8 */
    for (int i = 0; i < 9; i++) {
        eb.pos[i] = 4 + i;
        eb.n_seq_id[i] = 1;
        eb.seq_id[i][0] = 0;
    }
    memset(eb.embd, 0, (size_t)9 * (size_t)llama_n_embd(M) * sizeof(float));
    CHECK(llama_decode(ctx, eb) == -1);
    llama_batch_free(eb);

    struct llama_batch b = llama_batch_init(4, 0, 2);
    b.n_tokens = 4;
    for (int i = 0; i < 4; i++) {
        b.token[i] = t[i];
        b.pos[i] = 4 + i;
        b.n_seq_id[i] = 1;
        b.seq_id[i][0] = 0;
        b.logits[i] = 1;
    }
    b.n_seq_id[2] = 0;
    CHECK(llama_decode(ctx, b) == -1);
    b.n_seq_id[2] = 65;
    CHECK(llama_decode(ctx, b) == -1);
    b.n_seq_id[2] = 2;
    b.seq_id[2][1] = 64; /* the second id is out of range */
    CHECK(llama_decode(ctx, b) == -1);
    b.seq_id[2][1] = 1;
    b.token[3] = NV; /* the last token is unknown */
    CHECK(llama_decode(ctx, b) == -1);
    CHECK(llama_get_kv_cache_used_cells(ctx) == 4);
    CHECK(memcmp(before, llama_get_logits(ctx), (size_t)NV * sizeof(float)) == 0);
    b.token[3] = t[3];
    CHECK(llama_decode(ctx, b) == 0); /* and now it is fine */
    CHECK(llama_get_kv_cache_used_cells(ctx) == 8 && llama_get_kv_cache_token_count(ctx) == 9);
    CHECK(llama_get_logits_ith(ctx, 3) != NULL);
    CHECK(llama_get_logits_ith(ctx, 4) == NULL && llama_get_logits_ith(ctx, -1) == NULL);
    llama_batch_free(b);
    free(before);
    llama_free(ctx);
}

static void test_tokens(void)
{
    llama_token t[8];
    char buf[16];
    CHECK(llama_tokenize(M, "abc", -1, t, 8, true, false) == 0);
    CHECK(llama_tokenize(M, NULL, 0, t, 8, true, false) == 1 && t[0] == llama_token_bos(M));
    CHECK(llama_tokenize(M, NULL, 3, t, 8, true, false) == 0);
    CHECK(llama_token_to_piece(M, -1, buf, 16) == 0);
    CHECK(llama_token_to_piece(M, NV, buf, 16) == 0);
    CHECK(llama_token_get_text(M, NV)[0] == 0 && llama_token_get_score(M, -7) == 0.0f);
    CHECK(llama_token_get_type(M, 1 << 30) == LLAMA_TOKEN_TYPE_UNDEFINED);
}

static void test_contexts(void)
{
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 32;
    cp.type_k = (enum ggml_type)99;
    CHECK(llama_new_context_with_model(M, cp) == NULL);
    cp.type_k = GGML_TYPE_F16;
    cp.type_v = (enum ggml_type)5; /* a retired type id */
    CHECK(llama_new_context_with_model(M, cp) == NULL);
    cp.type_v = GGML_TYPE_Q8_0; /* V heads of 8 elements, not whole blocks: refused at creation, not at every decode */
    CHECK(llama_new_context_with_model(M, cp) == NULL);
    cp.type_v = GGML_TYPE_F16;
    /* K rows of 4 heads x 8 = 32 elements are one Q8_0 block, but attention
     * reads a head (8 elements) of a row: refused at creation (it was made
     * and then failed at every decode) */
    cp.type_k = GGML_TYPE_Q8_0;
    CHECK(llama_new_context_with_model(M, cp) == NULL);
    cp.type_k = GGML_TYPE_IQ2_XXS; /* no encoder without an importance matrix */
    CHECK(llama_new_context_with_model(M, cp) == NULL);
    cp.type_k = GGML_TYPE_I32; /* no float conversions */
    CHECK(llama_new_context_with_model(M, cp) == NULL);
    cp.type_k = GGML_TYPE_F16;
    cp.n_ctx = 1u << 30;
    CHECK(llama_new_context_with_model(M, cp) == NULL);
    CHECK(llama_new_context_with_model(NULL, llama_context_default_params()) == NULL);
    struct llama_model_params mp = llama_model_default_params();
    mp.vocab_only = true;
    struct llama_model *vm = llama_load_model_from_file(lm_test_shared("models/stories260K.gguf"), mp);
    CHECK(vm != NULL && llama_n_vocab(vm) == NV);
    CHECK(llama_new_context_with_model(vm, llama_context_default_params()) == NULL);
    llama_free_model(vm);
    /* n_batch 0, 0 threads: taken as 1 */
    cp.n_ctx = 32;
    cp.n_batch = 0;
    cp.n_threads = cp.n_threads_batch = 0;
    struct llama_context *ctx = llama_new_context_with_model(M, cp);
    CHECK(ctx != NULL && llama_n_batch(ctx) == 1);
    llama_token t = 1;
    CHECK(ctx && llama_decode(ctx, llama_batch_get_one(&t, 1, 0, 0)) == 0);
    llama_set_n_threads(ctx, 0, 0);
    t = 403;
    CHECK(ctx && llama_decode(ctx, llama_batch_get_one(&t, 1, 1, 0)) == 0);
    llama_free(ctx);
}

static void view_cells(struct llama_context *ctx, int *pos, int *seq, int n)
{
    struct llama_kv_cache_view v = llama_kv_cache_view_init(ctx, 0); /* 0 slots: taken as 1 */
    llama_kv_cache_view_update(ctx, &v);
    CHECK(v.n_max_seq == 1 && v.n_cells >= n);
    for (int i = 0; i < n && i < v.n_cells; i++) {
        pos[i] = v.cells[i].pos;
        seq[i] = v.cells_sequences[i];
    }
    llama_kv_cache_view_free(&v);
}

static void test_kv(void)
{
    struct llama_context *ctx = api_ctx(M, 32, 32, false);
    llama_token t[6] = {1, 403, 407, 261, 378, 432};
    CHECK(llama_decode(ctx, llama_batch_get_one(t, 6, 0, 0)) == 0);
    int p0[32], s0[32], p1[32], s1[32];
    view_cells(ctx, p0, s0, 32);
    llama_kv_cache_seq_cp(ctx, 0, 64, -1, -1);
    llama_kv_cache_seq_cp(ctx, -1, 3, -1, -1);
    llama_kv_cache_seq_cp(ctx, 0, 0, -1, -1);
    llama_kv_cache_seq_rm(ctx, 64, -1, -1);
    llama_kv_cache_seq_rm(ctx, 1000, -1, -1);
    llama_kv_cache_seq_shift(ctx, 64, -1, -1, 5);
    llama_kv_cache_seq_shift(ctx, -2, -1, -1, 5);
    llama_kv_cache_seq_div(ctx, 0, -1, -1, 0);
    llama_kv_cache_seq_div(ctx, 0, -1, -1, -3);
    llama_kv_cache_seq_div(ctx, 99, -1, -1, 2);
    llama_kv_cache_seq_rm(ctx, 0, 5, 2); /* empty range */
    view_cells(ctx, p1, s1, 32);
    CHECK(memcmp(p0, p1, sizeof p0) == 0 && memcmp(s0, s1, sizeof s0) == 0);
    CHECK(llama_get_kv_cache_used_cells(ctx) == 6 && llama_get_kv_cache_token_count(ctx) == 6);
    llama_token n = 383;
    CHECK(llama_decode(ctx, llama_batch_get_one(&n, 1, 6, 0)) == 0);
    /* keeping a sequence no cell belongs to empties the cache, as in b1892 */
    llama_kv_cache_seq_keep(ctx, 70);
    CHECK(llama_get_kv_cache_used_cells(ctx) == 0 && llama_get_kv_cache_token_count(ctx) == 0);
    llama_free(ctx);
}

static void test_batches(void)
{
    const int32_t bad[][3] = {{0, 0, 1}, {-1, 0, 1}, {4, 0, 0}, {4, -1, 1}, {4, 0, -2}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct llama_batch b = llama_batch_init(bad[i][0], bad[i][1], bad[i][2]);
        CHECK(b.token == NULL && b.embd == NULL && b.pos == NULL && b.seq_id == NULL && b.logits == NULL);
        llama_batch_free(b);
    }
    struct llama_batch g = llama_batch_get_one(NULL, 3, 5, 2); /* not dereferenced */
    CHECK(g.token == NULL && g.pos == NULL && g.n_seq_id == NULL && g.seq_id == NULL && g.logits == NULL &&
          g.all_pos_0 == 5 && g.all_pos_1 == 1 && g.all_seq_id == 2 && g.n_tokens == 3);
    /* a binding mallocs token itself and lowers n_tokens: free() still frees all */
    g.token = malloc(3 * sizeof(llama_token));
    llama_batch_free(g);
    struct llama_batch b = llama_batch_init(5, 0, 3);
    b.n_tokens = 1;
    llama_batch_free(b);
}

static void test_samplers(void)
{
    struct llama_context *ctx = api_ctx(M, 16, 16, false);
    llama_token_data one = {5, 1.0f, 0.0f};
    llama_token_data_array e = {&one, 0, false};
    float mu = 10.0f;
    llama_sample_softmax(ctx, &e);
    llama_sample_top_k(ctx, &e, 3, 1);
    llama_sample_top_p(ctx, &e, 0.5f, 1);
    llama_sample_min_p(ctx, &e, 0.5f, 1);
    llama_sample_tail_free(ctx, &e, 0.5f, 1);
    llama_sample_typical(ctx, &e, 0.5f, 1);
    llama_sample_temp(ctx, &e, 0.5f);
    llama_sample_repetition_penalties(ctx, &e, NULL, 0, 1.1f, 0.1f, 0.1f);
    CHECK(e.size == 0);
    CHECK(llama_sample_token_greedy(ctx, &e) == -1);
    CHECK(llama_sample_token(ctx, &e) == -1);
    CHECK(llama_sample_token_mirostat(ctx, &e, 5.0f, 0.1f, 100, &mu) == -1);
    CHECK(llama_sample_token_mirostat_v2(ctx, &e, 5.0f, 0.1f, &mu) == -1);
    /* penalties for ids that are not candidates (or not tokens at all) */
    llama_token_data d[2] = {{0, 1.0f, 0}, {1, 2.0f, 0}};
    llama_token_data_array c = {d, 2, false};
    const llama_token last[4] = {-5, 99999, 1, 7};
    llama_sample_repetition_penalties(ctx, &c, last, 4, 2.0f, 0.0f, 0.0f);
    CHECK(d[0].logit == 1.0f && d[1].logit == 1.0f);
    llama_free(ctx);
}

static void test_model_files(void)
{
    struct llama_model_params mp = llama_model_default_params();
    CHECK(llama_load_model_from_file(NULL, mp) == NULL);
    CHECK(llama_load_model_from_file("/tmp", mp) == NULL);
    const char *empty = api_tmp_path("empty.gguf");
    CHECK(api_write_file(empty, "", 0));
    CHECK(llama_load_model_from_file(empty, mp) == NULL);
    mp.use_mmap = false;
    CHECK(llama_load_model_from_file(empty, mp) == NULL);
    remove(empty);
}

int main(void)
{
    M = api_start("models/stories260K.gguf");
    if (!M)
        return lm_test_summary();
    NV = llama_n_vocab(M);
    test_decode();
    test_tokens();
    test_contexts();
    test_kv();
    test_batches();
    test_samplers();
    test_model_files();
    llama_free_model(M);
    return lm_test_summary();
}
