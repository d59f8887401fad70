/* test_api_state.c - context state and session files through llama.h.
 *
 *  - llama_copy_state_data (at most llama_get_state_size bytes) restored
 *    with llama_set_state_data into a NEW context (another seed, so the RNG
 *    really comes from the state) gives bit-identical logits at once and after
 *    decoding the same next token, and the same sampled tokens (the RNG state
 *    travels); restoring also works with a pending K shift (seq_rm + seq_shift
 *    that removed cells, not yet applied) and an F32 cache;
 *  - session files: save, load into a new context: the token list, the
 *    logits and the next decode are equal;
 *  - refused without a crash, leaving the context usable and its cache as it
 *    was: truncated session files (every cut point class: header, tokens,
 *    state header, KV data, last byte), foreign files (a GGUF model, another
 *    session version, random bytes), states of a context of another size or
 *    model, a token capacity one too small (and 0), random bytes to
 *    llama_set_state_data. */
#include <stdlib.h>
#include <string.h>

#include "util_api.h"

static struct llama_model *M;
static int NV;
static const llama_token P[] = {1, 403, 407, 261, 378, 432, 383, 286, 261};
#define NP 9

static struct llama_context *make_ctx(uint32_t n_ctx, uint32_t seed, enum ggml_type kv)
{
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = n_ctx;
    cp.n_batch = 32;
    cp.n_threads = cp.n_threads_batch = 2;
    cp.seed = seed;
    cp.type_k = cp.type_v = kv;
    return llama_new_context_with_model(M, cp);
}

static void sample_n(struct llama_context *ctx, llama_token *out, int n)
{
    for (int i = 0; i < n; i++) {
        llama_token_data_array c = api_candidates(llama_get_logits(ctx), NV);
        llama_sample_temp(ctx, &c, 1.5f);
        out[i] = llama_sample_token(ctx, &c);
        free(c.data);
    }
}

static bool same_logits(struct llama_context *a, struct llama_context *b)
{
    return memcmp(llama_get_logits(a), llama_get_logits(b), (size_t)NV * sizeof(float)) == 0;
}

/* A context with history: prompt, sampled tokens, more decodes; optionally a
 * pending shift that removed the first two cells. */
static struct llama_context *busy_ctx(enum ggml_type kv, bool shifted)
{
    struct llama_context *ctx = make_ctx(64, 1234, kv);
    CHECK(llama_decode(ctx, llama_batch_get_one((llama_token *)P, NP, 0, 0)) == 0);
    llama_token t[3];
    sample_n(ctx, t, 3);
    for (int i = 0; i < 3; i++)
        CHECK(llama_decode(ctx, llama_batch_get_one(&t[i], 1, NP + i, 0)) == 0);
    if (shifted) {
        llama_kv_cache_seq_rm(ctx, 0, 0, 2);
        llama_kv_cache_seq_shift(ctx, 0, 2, -1, -2);
        llama_kv_cache_seq_shift(ctx, 0, 0, 1, -1); /* removes the cell now at position 0 */
    }
    return ctx;
}

static void test_state_copy(enum ggml_type kv, bool shifted)
{
    struct llama_context *a = busy_ctx(kv, shifted);
    size_t cap = llama_get_state_size(a);
    uint8_t *buf = malloc(cap);
    size_t n = llama_copy_state_data(a, buf);
    CHECK(n > 0 && n <= cap);
    struct llama_context *b = make_ctx(64, 999, kv);
    CHECK(llama_set_state_data(b, buf) == n);
    CHECK(same_logits(a, b));
    CHECK(llama_get_kv_cache_used_cells(a) == llama_get_kv_cache_used_cells(b));
    CHECK(llama_get_kv_cache_token_count(a) == llama_get_kv_cache_token_count(b));
    llama_token ta[8], tb[8];
    sample_n(a, ta, 8);
    sample_n(b, tb, 8);
    CHECK(memcmp(ta, tb, sizeof ta) == 0);
    llama_token next = 300;
    llama_pos pos = shifted ? NP + 1 : NP + 3; /* after the shifts the last position is NP (+3 - 2 - 1) */
    CHECK(llama_decode(a, llama_batch_get_one(&next, 1, pos, 0)) == 0);
    CHECK(llama_decode(b, llama_batch_get_one(&next, 1, pos, 0)) == 0);
    CHECKF(same_logits(a, b), "next logits differ after restore (kv %d, shifted %d): %g", kv, shifted,
           api_max_diff(llama_get_logits(a), llama_get_logits(b), (size_t)NV));
    printf("state (%s cache%s): %zu of at most %zu bytes; restored context: same logits, RNG, next decode\n",
           kv == GGML_TYPE_F16 ? "F16" : kv == GGML_TYPE_F32 ? "F32" : "Q8_0", shifted ? ", pending shift" : "", n, cap);
    free(buf);
    llama_free(a);
    llama_free(b);
}

static long file_size(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fclose(f);
    return n;
}

/* A load that must fail and leave ctx as it was (empty cache, still decodes). */
static void expect_refused(const char *what, const char *path, size_t cap)
{
    struct llama_context *c = make_ctx(64, 5, GGML_TYPE_F16);
    llama_token toks[64];
    size_t n = 12345;
    bool ok = llama_load_session_file(c, path, toks, cap, &n);
    CHECKF(!ok, "%s: loaded", what);
    CHECK(n == 12345 && llama_get_kv_cache_used_cells(c) == 0);
    CHECK(llama_decode(c, llama_batch_get_one((llama_token *)P, 3, 0, 0)) == 0);
    llama_free(c);
}

static void test_session(void)
{
    struct llama_context *a = busy_ctx(GGML_TYPE_F16, false);
    const char *path = api_tmp_path("s.session");
    llama_token hist[NP + 3];
    memcpy(hist, P, sizeof P);
    hist[NP] = 7, hist[NP + 1] = 8, hist[NP + 2] = 9;
    CHECK(llama_save_session_file(a, path, hist, NP + 3));
    struct llama_context *b = make_ctx(64, 42, GGML_TYPE_F16);
    llama_token got[64];
    size_t n = 0;
    CHECK(llama_load_session_file(b, path, got, 64, &n));
    CHECK(n == NP + 3 && memcmp(got, hist, sizeof hist) == 0);
    CHECK(same_logits(a, b));
    llama_token next = 301;
    CHECK(llama_decode(a, llama_batch_get_one(&next, 1, NP + 3, 0)) == 0);
    CHECK(llama_decode(b, llama_batch_get_one(&next, 1, NP + 3, 0)) == 0);
    CHECK(same_logits(a, b));
    /* exactly enough capacity works; one less does not */
    n = 0;
    CHECK(llama_load_session_file(b, path, got, NP + 3, &n) && n == NP + 3);
    expect_refused("capacity one too small", path, NP + 2);
    expect_refused("capacity 0", path, 0);
    CHECK(!llama_load_session_file(b, "/nonexistent/s.session", got, 64, &n));

    /* truncations */
    size_t size;
    uint8_t *file = lm_test_read_file(path, &size);
    CHECK(file && (long)size == file_size(path));
    const char *cut = api_tmp_path("cut.session");
    const size_t cuts[] = {0, 2, 11, 12, 12 + 4 * NP, 12 + 4 * (NP + 3), 12 + 4 * (NP + 3) + 6, 100, size / 2,
                           size - 100, size - 1};
    for (size_t i = 0; file && i < sizeof cuts / sizeof cuts[0]; i++) {
        CHECK(api_write_file(cut, file, cuts[i]));
        char what[64];
        snprintf(what, sizeof what, "truncated to %zu of %zu bytes", cuts[i], size);
        expect_refused(what, cut, 64);
    }
    /* foreign files */
    uint8_t *f2 = malloc(size);
    memcpy(f2, file, size);
    f2[4] = 3; /* session version 3 */
    CHECK(api_write_file(cut, f2, size));
    expect_refused("version 3", cut, 64);
    memcpy(f2, file, size);
    f2[12 + 4 * (NP + 3)] ^= 0xff; /* the state's own magic */
    CHECK(api_write_file(cut, f2, size));
    expect_refused("bad state magic", cut, 64);
    uint32_t s = 7;
    for (size_t i = 0; i < size; i++) {
        s = s * 1664525u + 1013904223u;
        f2[i] = (uint8_t)(s >> 24);
    }
    CHECK(api_write_file(cut, f2, size));
    expect_refused("random bytes", cut, 64);
    char model[4096];
    snprintf(model, sizeof model, "%s", lm_test_shared("models/stories260K.gguf"));
    expect_refused("a GGUF model", model, 64);
    /* a session of another context size */
    struct llama_context *small = make_ctx(32, 1, GGML_TYPE_F16);
    CHECK(llama_decode(small, llama_batch_get_one((llama_token *)P, 3, 0, 0)) == 0);
    CHECK(llama_save_session_file(small, cut, P, 3));
    expect_refused("another n_ctx", cut, 64);
    llama_free(small);
    /* a session of an F32-cache context */
    struct llama_context *f32 = make_ctx(64, 1, GGML_TYPE_F32);
    CHECK(llama_decode(f32, llama_batch_get_one((llama_token *)P, 3, 0, 0)) == 0);
    CHECK(llama_save_session_file(f32, cut, P, 3));
    expect_refused("another cache type", cut, 64);
    llama_free(f32);
    free(f2);
    free(file);
    remove(cut);
    remove(path);
    llama_free(a);
    llama_free(b);
}

static void test_set_state_garbage(void)
{
    struct llama_context *c = make_ctx(64, 5, GGML_TYPE_F16);
    size_t cap = llama_get_state_size(c);
    uint8_t *buf = calloc(cap, 1);
    CHECK(llama_set_state_data(c, buf) == 0); /* zeros */
    uint32_t s = 3;
    for (int rep = 0; rep < 4; rep++) {
        for (size_t i = 0; i < cap; i++) {
            s = s * 1103515245u + 12345u;
            buf[i] = (uint8_t)(s >> 16);
        }
        CHECK(llama_set_state_data(c, buf) == 0);
    }
    /* a valid state with its KV header damaged */
    struct llama_context *a = busy_ctx(GGML_TYPE_F16, false);
    size_t n = llama_copy_state_data(a, buf);
    for (size_t off = 8; off < n && off < 200000; off += 997) {
        uint8_t keep = buf[off];
        buf[off] ^= 0x80;
        size_t r = llama_set_state_data(c, buf); /* may or may not load: must not crash */
        CHECK(r == 0 || r == n);
        buf[off] = keep;
    }
    CHECK(llama_set_state_data(c, buf) == n && same_logits(a, c));
    /* a state of another model */
    struct llama_model *other = api_load("models/llama-2-tiny-random.gguf");
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 64;
    struct llama_context *oc = other ? llama_new_context_with_model(other, cp) : NULL;
    CHECK(oc && llama_set_state_data(oc, buf) == 0);
    llama_free(oc);
    llama_free_model(other);
    free(buf);
    llama_free(a);
    llama_free(c);
}

int main(void)
{
    M = api_start("models/stories260K.gguf");
    if (!M)
        return lm_test_summary();
    NV = llama_n_vocab(M);
    test_state_copy(GGML_TYPE_F16, false);
    test_state_copy(GGML_TYPE_F32, false);
    test_state_copy(GGML_TYPE_F16, true);
    test_session();
    test_set_state_garbage();
    llama_free_model(M);
    /* a Q8_0 V cache is stored in rows per cell (whole blocks per head: the
     * persimmon fixture's 64-wide heads) and saved as K is */
    M = api_load("fixtures/arch/persimmon.gguf");
    CHECK(M != NULL);
    if (M) {
        NV = llama_n_vocab(M);
        test_state_copy(GGML_TYPE_Q8_0, false);
        test_state_copy(GGML_TYPE_Q8_0, true);
        llama_free_model(M);
    }
    return lm_test_summary();
}
