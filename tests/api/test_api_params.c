/* test_api_params.c - llama.h defaults, tokenizer buffer protocols, model
 * metadata and queries, timings, system info, logging, device/mmap/mlock.
 *
 *  - the three *_default_params exactly as shared/spec/llama-api.md lists
 *    b1892's values (every field);
 *  - llama_tokenize: too small a buffer returns -needed (tokens NULL and
 *    n_max 0 included), the exact retry returns needed and the same tokens
 *    as a large buffer; bytesize + add_bos always suffices;
 *  - llama_token_to_piece: the binding's protocol over all 32000 tokens of the
 *    Llama 2 vocab: an 8-byte buffer first, then on -needed an exact buffer
 *    that must return exactly needed (and no byte written past the buffer);
 *  - metadata of stories260K (19 keys; values from the file as SOURCES.md
 *    describes it): meta_count, key_by_index, val_str (by key and index;
 *    too small a buffer returns the full length with a NUL-terminated
 *    truncation; unknown key or index -1 and ""), desc, size (1171200 bytes
 *    = 292800 F32 parameters, counted from the tensor shapes), n_params,
 *    get_model_tensor, the token and vocab getters;
 *  - timings: counts after a prompt, token decodes and samples; reset; the
 *    printed lines; the YAML dump has b1892's keys;
 *  - llama_print_system_info matches the binding's regex; llama_log_set
 *    redirects messages, and NULL restores stderr;
 *  - llama_max_devices == LLAMA_MAX_DEVICES, mmap and mlock supported, and
 *    use_mlock really locks the weights (VmLck in /proc/self/status) and
 *    llama_free_model unlocks them, or a printed note when RLIMIT_MEMLOCK
 *    cannot be raised enough or under AddressSanitizer (whose mlock is a
 *    no-op). */
#include <regex.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "util_api.h"

static void test_defaults(void)
{
    struct llama_model_params mp = llama_model_default_params();
    CHECK(mp.n_gpu_layers == 0);
    CHECK(mp.split_mode == LLAMA_SPLIT_LAYER);
    CHECK(mp.main_gpu == 0);
    CHECK(mp.tensor_split == NULL);
    CHECK(mp.progress_callback == NULL);
    CHECK(mp.progress_callback_user_data == NULL);
    CHECK(mp.kv_overrides == NULL);
    CHECK(mp.vocab_only == false);
    CHECK(mp.use_mmap == true);
    CHECK(mp.use_mlock == false);

    struct llama_context_params cp = llama_context_default_params();
    CHECK(cp.seed == 0xFFFFFFFFu && (int32_t)cp.seed == -1);
    CHECK(cp.n_ctx == 512);
    CHECK(cp.n_batch == 512);
    CHECK(cp.n_threads == 4);
    CHECK(cp.n_threads_batch == 4);
    CHECK(cp.rope_scaling_type == LLAMA_ROPE_SCALING_UNSPECIFIED && cp.rope_scaling_type == -1);
    CHECK(cp.rope_freq_base == 0.0f);
    CHECK(cp.rope_freq_scale == 0.0f);
    CHECK(cp.yarn_ext_factor == -1.0f);
    CHECK(cp.yarn_attn_factor == 1.0f);
    CHECK(cp.yarn_beta_fast == 32.0f);
    CHECK(cp.yarn_beta_slow == 1.0f);
    CHECK(cp.yarn_orig_ctx == 0);
    CHECK(cp.type_k == GGML_TYPE_F16 && cp.type_k == 1);
    CHECK(cp.type_v == GGML_TYPE_F16);
    CHECK(cp.mul_mat_q == true);
    CHECK(cp.logits_all == false);
    CHECK(cp.embedding == false);
    CHECK(cp.offload_kqv == true);

    llama_model_quantize_params qp = llama_model_quantize_default_params();
    CHECK(qp.nthread == 0);
    CHECK(qp.ftype == LLAMA_FTYPE_MOSTLY_Q5_1 && qp.ftype == 9);
    CHECK(qp.allow_requantize == false);
    CHECK(qp.quantize_output_tensor == true);
    CHECK(qp.only_copy == false);
    CHECK(qp.pure == false);
    CHECK(qp.imatrix == NULL);
}

static void test_tokenize(struct llama_model *m)
{
    const char *text = "Once upon a time, there was a little girl named Lily. She loved to play outside.";
    int32_t len = (int32_t)strlen(text);
    llama_token big[256], exact[256];
    int32_t n = llama_tokenize(m, text, len, big, 256, true, false);
    CHECK(n > 10 && big[0] == llama_token_bos(m));
    CHECK(n <= len + 1); /* the binding's default capacity: bytesize + add_bos */
    CHECK(llama_tokenize(m, text, len, big, len + 1, true, false) == n);
    CHECK(llama_tokenize(m, text, len, exact, 8, true, false) == -n);
    CHECK(llama_tokenize(m, text, len, NULL, 0, true, false) == -n);
    CHECK(llama_tokenize(m, text, len, exact, n, true, false) == n);
    CHECK(memcmp(big, exact, (size_t)n * sizeof *big) == 0);
    CHECK(llama_tokenize(m, text, len, exact, 256, false, false) == n - 1);
    CHECK(memcmp(big + 1, exact, (size_t)(n - 1) * sizeof *big) == 0);
    CHECK(llama_tokenize(m, "", 0, exact, 4, true, false) == 1);
    CHECK(llama_tokenize(m, "", 0, exact, 4, false, false) == 0);
    /* special: "</s>" is one control token only with special = true */
    llama_token sp[16];
    int32_t ns = llama_tokenize(m, "a</s>", 5, sp, 16, false, true);
    CHECK(ns >= 2 && sp[ns - 1] == llama_token_eos(m));
    ns = llama_tokenize(m, "a</s>", 5, sp, 16, false, false);
    CHECK(ns > 2);
    for (int i = 0; i < ns; i++)
        CHECK(sp[i] != llama_token_eos(m));
}

/* The binding's token_to_piece protocol over every token of a vocab. */
static void test_piece_protocol(struct llama_model *m)
{
    int nv = llama_n_vocab(m), retried = 0, bad = 0, longest = 0;
    for (llama_token t = 0; t < nv; t++) {
        char buf[8 + 4];
        memset(buf, 0x5a, sizeof buf);
        int32_t r = llama_token_to_piece(m, t, buf, 8);
        if (memcmp(buf + 8, "\x5a\x5a\x5a\x5a", 4) != 0)
            bad++;
        if (r >= 0) {
            if (r > 8)
                bad++;
            continue;
        }
        int32_t need = -r;
        char *exact = malloc((size_t)need + 4);
        memset(exact, 0x5a, (size_t)need + 4);
        int32_t r2 = llama_token_to_piece(m, t, exact, need);
        if (r2 != need || memcmp(exact + need, "\x5a\x5a\x5a\x5a", 4) != 0 || need <= 8)
            bad++;
        retried++;
        longest = need > longest ? need : longest;
        free(exact);
    }
    CHECKF(bad == 0 && retried > 100, "%d protocol violations, %d retries", bad, retried);
    printf("token_to_piece: %d tokens, %d needed the retry (longest %d bytes), %d violations\n", nv, retried, longest,
           bad);
    CHECK(llama_token_to_piece(m, 1000, NULL, 0) < 0); /* length 0: -needed, nothing written */
}

static void test_metadata(struct llama_model *m)
{
    CHECK(llama_model_meta_count(m) == 19);
    char buf[256], small[4];
    bool found_arch = false;
    for (int32_t i = 0; i < llama_model_meta_count(m); i++) {
        int32_t kl = llama_model_meta_key_by_index(m, i, buf, sizeof buf);
        CHECK(kl == (int32_t)strlen(buf) && kl > 0);
        char v1[256], v2[256];
        int32_t a = llama_model_meta_val_str_by_index(m, i, v1, sizeof v1);
        int32_t b = llama_model_meta_val_str(m, buf, v2, sizeof v2);
        CHECK(a == b && a >= 0 && strcmp(v1, v2) == 0);
        found_arch |= !strcmp(buf, "general.architecture") && !strcmp(v1, "llama");
    }
    CHECK(found_arch);
    CHECK(llama_model_meta_val_str(m, "llama.context_length", buf, sizeof buf) == 4 && !strcmp(buf, "2048"));
    CHECK(llama_model_meta_val_str(m, "llama.embedding_length", buf, sizeof buf) == 2 && !strcmp(buf, "64"));
    CHECK(llama_model_meta_val_str(m, "tokenizer.ggml.model", buf, sizeof buf) == 5 && !strcmp(buf, "llama"));
    /* too small: full length returned, NUL-terminated truncation */
    memset(small, 'x', sizeof small);
    CHECK(llama_model_meta_val_str(m, "general.architecture", small, 3) == 5);
    CHECK(small[0] == 'l' && small[1] == 'l' && small[2] == 0 && small[3] == 'x');
    CHECK(llama_model_meta_val_str(m, "llama.context_length", small, 1) == 4 && small[0] == 0);
    CHECK(llama_model_meta_key_by_index(m, 0, small, 2) == (int32_t)strlen("tokenizer.ggml.tokens"));
    CHECK(small[0] == 't' && small[1] == 0);
    /* unknown: -1 and "" */
    strcpy(buf, "junk");
    CHECK(llama_model_meta_val_str(m, "no.such.key", buf, sizeof buf) == -1 && buf[0] == 0);
    strcpy(buf, "junk");
    CHECK(llama_model_meta_key_by_index(m, 19, buf, sizeof buf) == -1 && buf[0] == 0);
    CHECK(llama_model_meta_key_by_index(m, -1, buf, sizeof buf) == -1);
    CHECK(llama_model_meta_val_str_by_index(m, 1000, buf, sizeof buf) == -1);

    int32_t dl = llama_model_desc(m, buf, sizeof buf);
    CHECK(dl == (int32_t)strlen(buf) && strncmp(buf, "llama ", 6) == 0);
    CHECK(llama_model_desc(m, small, sizeof small) == dl && strlen(small) == 3);
    printf("desc: \"%s\"\n", buf);
    /* 2 x 64x512 (token_embd, output) + 64 + 5 x (64x64 x2 + 64x32 x2 + 3 x 64x172 + 2 x 64) */
    const uint64_t n_params = 2 * 64 * 512 + 64 + 5 * (2 * 64 * 64 + 2 * 64 * 32 + 3 * 64 * 172 + 2 * 64);
    CHECK(llama_model_n_params(m) == n_params);
    CHECK(llama_model_size(m) == n_params * 4);
    CHECK(llama_get_model_tensor(m, "output.weight") != NULL);
    CHECK(llama_get_model_tensor(m, "blk.4.ffn_up.weight") != NULL);
    CHECK(llama_get_model_tensor(m, "blk.5.ffn_up.weight") == NULL);
    CHECK(llama_get_model_tensor(m, NULL) == NULL);

    CHECK(llama_n_vocab(m) == 512 && llama_n_ctx_train(m) == 2048 && llama_n_embd(m) == 64);
    CHECK(llama_rope_freq_scale_train(m) == 1.0f);
    CHECK(llama_vocab_type(m) == LLAMA_VOCAB_TYPE_SPM);
    CHECK(llama_token_bos(m) == 1 && llama_token_eos(m) == 2 && llama_token_nl(m) == 13);
    CHECK(llama_add_bos_token(m) == -1 && llama_add_eos_token(m) == -1); /* the file does not say */
    /* b1892 keeps CodeLlama's infill ids when the file has none */
    CHECK(llama_token_prefix(m) == 32007 && llama_token_middle(m) == 32009 && llama_token_suffix(m) == 32008 &&
          llama_token_eot(m) == 32010);
    CHECK(!strcmp(llama_token_get_text(m, 1), "<s>") && llama_token_get_type(m, 1) == LLAMA_TOKEN_TYPE_CONTROL);
    CHECK(!strcmp(llama_token_get_text(m, 0), "<unk>") && llama_token_get_type(m, 0) == LLAMA_TOKEN_TYPE_UNKNOWN);
    CHECK(!strcmp(llama_token_get_text(m, 3 + 'A'), "<0x41>") && llama_token_get_type(m, 3 + 'A') == LLAMA_TOKEN_TYPE_BYTE);
    CHECK(llama_token_get_type(m, 300) == LLAMA_TOKEN_TYPE_NORMAL && llama_token_get_score(m, 300) < 0.0f);
    /* a bad id: an empty string, not a crash (b1892 throws) */
    CHECK(llama_token_get_text(m, -1) != NULL && llama_token_get_text(m, 512)[0] == 0);
}

/* ---- logging ---- */

struct capture {
    char text[8192];
    size_t n;
    int calls;
};

static void capture_log(enum ggml_log_level level, const char *text, void *user)
{
    struct capture *c = user;
    (void)level;
    size_t l = strlen(text);
    if (c->n + l < sizeof c->text) {
        memcpy(c->text + c->n, text, l + 1);
        c->n += l;
    }
    c->calls++;
}

static void test_timings(struct llama_model *m)
{
    struct llama_context *ctx = api_ctx(m, 64, 64, false);
    llama_token p[6] = {1, 403, 407, 261, 378, 432};
    CHECK(llama_decode(ctx, llama_batch_get_one(p, 6, 0, 0)) == 0);
    llama_token_data_array c = api_candidates(llama_get_logits(ctx), llama_n_vocab(m));
    for (int i = 0; i < 3; i++) {
        c.size = (size_t)llama_n_vocab(m);
        c.sorted = false;
        llama_token t = llama_sample_token_greedy(ctx, &c);
        CHECK(llama_decode(ctx, llama_batch_get_one(&t, 1, 6 + i, 0)) == 0);
    }
    free(c.data);
    struct llama_timings t = llama_get_timings(ctx);
    CHECK(t.n_p_eval == 6 && t.n_eval == 3 && t.n_sample == 3);
    CHECK(t.t_p_eval_ms > 0 && t.t_eval_ms > 0 && t.t_load_ms > 0 && t.t_end_ms >= t.t_start_ms);
    /* printed through the log */
    struct capture cap = {.n = 0};
    llama_log_set(capture_log, &cap);
    llama_print_timings(ctx);
    const char *lines[] = {"load time", "sample time", "prompt eval time", "eval time", "total time"};
    for (int i = 0; i < 5; i++)
        CHECKF(strstr(cap.text, lines[i]) != NULL, "print_timings lacks '%s'", lines[i]);
    CHECK(strstr(cap.text, "llama_print_timings") != NULL);
    /* YAML */
    const char *path = api_tmp_path("timings.yaml");
    FILE *f = fopen(path, "w");
    llama_dump_timing_info_yaml(f, ctx);
    fclose(f);
    size_t n;
    char *yaml = lm_test_read_file(path, &n);
    const char *keys[] = {"mst_eval:", "mst_p_eval:", "mst_sample:", "n_eval: 3", "n_p_eval: 6", "n_sample: 3",
                          "t_eval_us:", "t_load_us:", "t_p_eval_us:", "t_sample_us:", "ts_eval:", "ts_p_eval:",
                          "ts_sample:"};
    for (size_t i = 0; yaml && i < sizeof keys / sizeof keys[0]; i++)
        CHECKF(strstr(yaml, keys[i]) != NULL, "YAML lacks '%s'", keys[i]);
    free(yaml);
    remove(path);
    /* reset: counts back to b1892's floor of 1 */
    llama_reset_timings(ctx);
    t = llama_get_timings(ctx);
    CHECK(t.n_p_eval == 1 && t.n_eval == 1 && t.n_sample == 1 && t.t_eval_ms == 0 && t.t_p_eval_ms == 0);
    api_test_init(); /* the quiet sink again */
    llama_free(ctx);
}

static void test_system(void)
{
    const char *info = llama_print_system_info();
    CHECK(info != NULL && info == llama_print_system_info());
    regex_t re;
    /* the binding's /AVX = \d{1} | AVX2 = \d{1} | AVX512 = \d{1}/ (alternation) and each part alone */
    CHECK(regcomp(&re, "AVX = [0-9] | AVX2 = [0-9] | AVX512 = [0-9]", REG_EXTENDED | REG_NOSUB) == 0);
    CHECK(regexec(&re, info, 0, NULL, 0) == 0);
    regfree(&re);
    const char *parts[] = {"(^| )AVX = [0-9] \\|", " AVX2 = [0-9] \\|", " AVX512 = [0-9] \\|"};
    for (int i = 0; i < 3; i++) {
        CHECK(regcomp(&re, parts[i], REG_EXTENDED | REG_NOSUB) == 0);
        CHECKF(regexec(&re, info, 0, NULL, 0) == 0, "'%s' not in '%s'", parts[i], info);
        regfree(&re);
    }
    CHECK(llama_max_devices() == LLAMA_MAX_DEVICES && LLAMA_MAX_DEVICES == 16);
    CHECK(llama_mmap_supported() && llama_mlock_supported());
    int64_t t0 = llama_time_us();
    usleep(2000);
    CHECK(llama_time_us() - t0 >= 2000);

    /* llama_log_set: messages reach the callback, and NULL restores stderr */
    struct capture cap = {.n = 0};
    llama_log_set(capture_log, &cap);
    CHECK(llama_load_model_from_file("/nonexistent/model-for-log.gguf", llama_model_default_params()) == NULL);
    CHECK(cap.calls > 0 && strstr(cap.text, "model-for-log") != NULL);
    const char *path = api_tmp_path("stderr.txt");
    fflush(stderr);
    int saved = dup(2);
    FILE *f = fopen(path, "w");
    dup2(fileno(f), 2);
    llama_log_set(NULL, NULL);
    int before = cap.calls;
    CHECK(llama_load_model_from_file("/nonexistent/model-for-stderr.gguf", llama_model_default_params()) == NULL);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    fclose(f);
    char *err = lm_test_read_file(path, NULL);
    CHECK(err && strstr(err, "model-for-stderr") != NULL);
    CHECK(cap.calls == before);
    free(err);
    remove(path);
    api_test_init();
}

static long vm_lck_kb(void)
{
    FILE *f = fopen("/proc/self/status", "r"); /* a proc file: no size, read by lines */
    char line[256];
    long kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "VmLck:", 6))
            kb = strtol(line + 6, NULL, 10);
    if (f)
        fclose(f);
    return kb;
}

/* AddressSanitizer: gcc says so with __SANITIZE_ADDRESS__, clang with __has_feature. */
#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif

static void test_mlock(void)
{
    struct rlimit rl;
    const rlim_t need = 4u << 20;
    if (getrlimit(RLIMIT_MEMLOCK, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < need) {
        rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= need ? need : rl.rlim_max;
        setrlimit(RLIMIT_MEMLOCK, &rl);
        getrlimit(RLIMIT_MEMLOCK, &rl);
    }
    long before = vm_lck_kb();
#if defined(UNDER_ASAN)
    /* AddressSanitizer replaces mlock with a no-op: nothing can be checked */
    printf("note: mlock not checked under AddressSanitizer (its mlock does nothing)\n");
    return;
#endif
    if (before < 0 || (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < need)) {
        printf("note: mlock not checked (VmLck %ld kB, RLIMIT_MEMLOCK %llu bytes < %llu)\n", before,
               (unsigned long long)rl.rlim_cur, (unsigned long long)need);
        return;
    }
    for (int mmap_ = 0; mmap_ < 2; mmap_++) {
        struct llama_model *m = api_load_opts("models/stories260K.gguf", mmap_ == 1, true);
        CHECK(m != NULL);
        long locked = vm_lck_kb();
        CHECKF(locked - before >= 1100, "use_mlock (mmap %d): VmLck %ld kB -> %ld kB", mmap_, before, locked);
        printf("mlock (mmap %d): VmLck %ld kB -> %ld kB\n", mmap_, before, locked);
        llama_free_model(m);
        long after = vm_lck_kb();
        CHECKF(after == before, "after llama_free_model: VmLck %ld kB (was %ld before loading)", after, before);
    }
    struct llama_model *m = api_load_opts("models/stories260K.gguf", true, false);
    CHECK(vm_lck_kb() == before);
    llama_free_model(m);
}

int main(void)
{
    api_test_init();
    test_defaults();
    struct llama_model *m = api_load("models/stories260K.gguf");
    struct llama_model *big = api_load("models/llama-2-tiny-random.gguf");
    CHECK(m && big);
    if (m && big) {
        test_tokenize(m);
        test_piece_protocol(big);
        test_metadata(m);
        test_timings(m);
    }
    llama_free_model(m);
    llama_free_model(big);
    test_system();
    test_mlock();
    return lm_test_summary();
}
