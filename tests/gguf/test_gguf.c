/* test_gguf.c - the reader on real files made by other tools.
 *
 * References: shared/models/SOURCES.md (stories260K facts, the v1 file's
 * byte-identical tensors and vocab, the vocab-only files' counts) and
 * shared/fixtures/arch/TENSORS.txt (gguf-py files: keys, tensor shapes).
 */
#include "gguf/gguf.h"
#include "lm_test.h"

#include <glob.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct lm_gguf *open_shared(const char *rel)
{
    struct lm_gguf *g = NULL;
    char err[256];
    lm_status st = lm_gguf_open(lm_test_shared(rel), &g, err, sizeof err);
    CHECKF(st == LM_OK, "%s: %s: %s", rel, lm_status_str(st), err);
    return g;
}

static uint32_t key_u32(const struct lm_gguf *g, const char *key)
{
    uint32_t v = 0xdeadbeef;
    CHECKF(lm_gguf_get_u32(g, lm_gguf_find_key(g, key), &v) == LM_OK, "%s", key);
    return v;
}

static const char *key_str(const struct lm_gguf *g, const char *key)
{
    const char *s = "";
    size_t len = 0;
    CHECKF(lm_gguf_get_str(g, lm_gguf_find_key(g, key), &s, &len) == LM_OK, "%s", key);
    CHECK(strlen(s) == len);
    return s;
}

static uint64_t arr_n(const struct lm_gguf *g, const char *key, enum lm_gguf_type want)
{
    int64_t i = lm_gguf_find_key(g, key);
    enum lm_gguf_type t = LM_GGUF_TYPE_COUNT;
    uint64_t n = 0;
    CHECKF(lm_gguf_get_arr_type(g, i, &t) == LM_OK && t == want, "%s type %d", key, (int)t);
    CHECKF(lm_gguf_get_arr_n(g, i, &n) == LM_OK, "%s", key);
    return n;
}

/* Tensor `name` exists with shape ne (n_dims dims) and type. */
/* How many of strings [0, n) of array key ia of a and key ib of b differ. */
static int arr_str_diffs(const struct lm_gguf *a, int64_t ia, const struct lm_gguf *b, int64_t ib, uint64_t n)
{
    int bad = 0;
    for (uint64_t j = 0; j < n; j++) {
        const char *sa = NULL, *sb = NULL;
        size_t la = 0, lb = 0;
        lm_gguf_get_arr_str(a, ia, j, &sa, &la);
        lm_gguf_get_arr_str(b, ib, j, &sb, &lb);
        bad += !sa || !sb || la != lb || memcmp(sa, sb, la);
    }
    return bad;
}

static void check_tensor(const struct lm_gguf *g, const char *name, int n_dims, int64_t ne0, int64_t ne1,
                         enum lm_type type)
{
    const struct lm_gguf_tensor_info *t = lm_gguf_tensor_info(g, lm_gguf_find_tensor(g, name));
    CHECKF(t != NULL, "tensor %s missing", name);
    if (!t)
        return;
    CHECKF(t->n_dims == n_dims && t->ne[0] == ne0 && t->ne[1] == (n_dims > 1 ? ne1 : 1) && t->ne[2] == 1 &&
               t->ne[3] == 1,
           "%s: [%" PRId64 ", %" PRId64 "] n_dims %d", name, t->ne[0], t->ne[1], t->n_dims);
    CHECKF(t->type == type, "%s type %d", name, (int)t->type);
    CHECK(t->size == lm_row_size(type, ne0) * (uint64_t)t->ne[1]);
    CHECK(t->offset % lm_gguf_alignment(g) == 0 && t->offset >= lm_gguf_data_offset(g));
    CHECK(!strcmp(t->name, name));
}

/* The stories260K tensors (SOURCES.md), in either file version. */
static void check_stories_tensors(const struct lm_gguf *g)
{
    static const struct {
        const char *name;
        int n_dims;
        int64_t ne0, ne1;
    } blk[] = {
        {"attn_q", 2, 64, 64},      {"attn_k", 2, 64, 32},      {"attn_v", 2, 64, 32},
        {"attn_output", 2, 64, 64}, {"attn_norm", 1, 64, 1},    {"ffn_gate", 2, 64, 172},
        {"ffn_down", 2, 172, 64},   {"ffn_up", 2, 64, 172},     {"ffn_norm", 1, 64, 1},
    };
    CHECK(lm_gguf_n_tensors(g) == 48);
    check_tensor(g, "token_embd.weight", 2, 64, 512, LM_TYPE_F32);
    check_tensor(g, "output_norm.weight", 1, 64, 1, LM_TYPE_F32);
    check_tensor(g, "output.weight", 2, 64, 512, LM_TYPE_F32);
    for (int l = 0; l < 5; l++) {
        for (size_t k = 0; k < sizeof blk / sizeof blk[0]; k++) {
            char name[64];
            snprintf(name, sizeof name, "blk.%d.%s.weight", l, blk[k].name);
            check_tensor(g, name, blk[k].n_dims, blk[k].ne0, blk[k].ne1, LM_TYPE_F32);
        }
    }
    CHECK(lm_gguf_find_tensor(g, "blk.5.attn_q.weight") == -1);
    CHECK(lm_gguf_find_tensor(g, "token_embd") == -1);
    CHECK(lm_gguf_tensor_info(g, 48) == NULL && lm_gguf_tensor_info(g, -1) == NULL);
}

static void test_stories_v3(void)
{
    struct lm_gguf *g = open_shared("models/stories260K.gguf");
    if (!g)
        return;
    CHECK(lm_gguf_version(g) == 3);
    CHECK(lm_gguf_n_kv(g) == 19);
    CHECK(lm_gguf_alignment(g) == 32);
    CHECK(lm_gguf_file_size(g) == 1185376);
    CHECK(lm_gguf_data_offset(g) == 14176);
    CHECK(lm_gguf_data(g) == NULL);
    CHECK(!strcmp(key_str(g, "general.architecture"), "llama"));
    CHECK(!strcmp(key_str(g, "tokenizer.ggml.model"), "llama"));
    CHECK(key_u32(g, "llama.embedding_length") == 64);
    CHECK(key_u32(g, "llama.block_count") == 5);
    CHECK(key_u32(g, "llama.feed_forward_length") == 172);
    CHECK(key_u32(g, "llama.context_length") == 2048);
    CHECK(key_u32(g, "llama.attention.head_count_kv") == 4);
    CHECK(key_u32(g, "tokenizer.ggml.bos_token_id") == 1);
    CHECK(key_u32(g, "tokenizer.ggml.padding_token_id") == 0xFFFFFFFFu);
    /* 0xFFFFFFFF does not fit an int32: refused, output untouched. */
    int32_t i32 = 7;
    CHECK(lm_gguf_get_i32(g, lm_gguf_find_key(g, "tokenizer.ggml.padding_token_id"), &i32) == LM_ERR_CORRUPT);
    CHECK(i32 == 7);
    CHECK(lm_gguf_get_i32(g, lm_gguf_find_key(g, "tokenizer.ggml.eos_token_id"), &i32) == LM_OK && i32 == 2);
    float eps = 0;
    CHECK(lm_gguf_get_f32(g, lm_gguf_find_key(g, "llama.attention.layer_norm_rms_epsilon"), &eps) == LM_OK);
    CHECK(fabsf(eps - 1e-5f) < 1e-10f);
    /* type mismatches and bad indices */
    uint64_t u64;
    const char *s;
    CHECK(lm_gguf_get_u64(g, lm_gguf_find_key(g, "llama.block_count"), &u64) == LM_ERR_CORRUPT);
    CHECK(lm_gguf_get_str(g, lm_gguf_find_key(g, "llama.block_count"), &s, NULL) == LM_ERR_CORRUPT);
    uint32_t u32 = 9;
    CHECK(lm_gguf_get_u32(g, -1, &u32) == LM_ERR_INVALID_ARG && u32 == 9);
    CHECK(lm_gguf_get_u32(g, 19, &u32) == LM_ERR_INVALID_ARG && u32 == 9);
    CHECK(lm_gguf_get_u32(g, 0, NULL) == LM_ERR_INVALID_ARG);
    CHECK(lm_gguf_find_key(g, "llama") == -1 && lm_gguf_find_key(g, "") == -1);
    CHECK(lm_gguf_key(g, 19) == NULL && lm_gguf_kv_type(g, 19) == LM_GGUF_TYPE_COUNT);
    CHECK(!strcmp(lm_gguf_key(g, 0), "tokenizer.ggml.tokens")); /* file order kept */
    CHECK(lm_gguf_find_key(g, "tokenizer.ggml.tokens") == 0);
    /* the vocab */
    CHECK(arr_n(g, "tokenizer.ggml.tokens", LM_GGUF_STRING) == 512);
    CHECK(arr_n(g, "tokenizer.ggml.scores", LM_GGUF_FLOAT32) == 512);
    CHECK(arr_n(g, "tokenizer.ggml.token_type", LM_GGUF_INT32) == 512);
    int64_t tk = lm_gguf_find_key(g, "tokenizer.ggml.tokens");
    static const char *const first[] = {"<unk>", "<s>", "</s>", "<0x00>"};
    for (int j = 0; j < 4; j++) {
        size_t len = 0;
        CHECK(lm_gguf_get_arr_str(g, tk, (uint64_t)j, &s, &len) == LM_OK && !strcmp(s, first[j]) &&
              len == strlen(first[j]));
    }
    CHECK(lm_gguf_get_arr_str(g, tk, 512, &s, NULL) == LM_ERR_INVALID_ARG);
    const void *data = NULL;
    CHECK(lm_gguf_get_arr_data(g, tk, &data) == LM_ERR_CORRUPT && data == NULL);
    int64_t tt = lm_gguf_find_key(g, "tokenizer.ggml.token_type");
    CHECK(lm_gguf_get_arr_data(g, tt, &data) == LM_OK);
    if (data) /* <unk> is UNKNOWN (2), <s> and </s> CONTROL (3), bytes BYTE (6) */
        CHECK(((const int32_t *)data)[0] == 2 && ((const int32_t *)data)[1] == 3 && ((const int32_t *)data)[3] == 6);
    check_stories_tensors(g);
    /* data offset, and the last tensor ends where the file ends */
    const struct lm_gguf_tensor_info *t0 = lm_gguf_tensor_info(g, 0), *tl = lm_gguf_tensor_info(g, 47);
    CHECK(t0 && t0->offset == 14176 && !strcmp(t0->name, "token_embd.weight"));
    CHECK(tl && tl->offset + tl->size == lm_gguf_file_size(g) && !strcmp(tl->name, "blk.4.ffn_norm.weight"));
    lm_gguf_close(g);
}

/* The v1 file: same tensors (names, shapes, bytes) and vocab as the v3 file. */
static void test_stories_v1(void)
{
    struct lm_gguf *g1 = open_shared("models/tinyllamas-stories-260k-f32.gguf");
    struct lm_gguf *g3 = open_shared("models/stories260K.gguf");
    size_t n1 = 0, n3 = 0;
    unsigned char *b1 = lm_test_read_file(lm_test_shared("models/tinyllamas-stories-260k-f32.gguf"), &n1);
    unsigned char *b3 = lm_test_read_file(lm_test_shared("models/stories260K.gguf"), &n3);
    CHECK(b1 && b3);
    if (!g1 || !g3 || !b1 || !b3)
        goto out;
    CHECK(lm_gguf_version(g1) == 1 && lm_gguf_n_kv(g1) == 18 && lm_gguf_alignment(g1) == 32);
    CHECK(key_u32(g1, "llama.context_length") == 512);
    CHECK(!strcmp(key_str(g1, "general.name"), "tinyllamas-stories-260k"));
    check_stories_tensors(g1);
    CHECK(lm_gguf_data_offset(g1) == 11456); /* aligned end of the v1 tensor table */
    const struct lm_gguf_tensor_info *tl = lm_gguf_tensor_info(g1, 47);
    CHECK(tl && tl->offset + tl->size == n1);
    for (int64_t i = 0; i < 48; i++) {
        const struct lm_gguf_tensor_info *a = lm_gguf_tensor_info(g1, i);
        const struct lm_gguf_tensor_info *b = lm_gguf_tensor_info(g3, lm_gguf_find_tensor(g3, a->name));
        CHECKF(b && a->size == b->size && !memcmp(b1 + a->offset, b3 + b->offset, a->size), "%s bytes", a->name);
    }
    static const char *const vocab_keys[] = {"tokenizer.ggml.tokens", "tokenizer.ggml.scores",
                                             "tokenizer.ggml.token_type"};
    for (int k = 0; k < 3; k++) {
        int64_t i1 = lm_gguf_find_key(g1, vocab_keys[k]), i3 = lm_gguf_find_key(g3, vocab_keys[k]);
        uint64_t m1 = 0, m3 = 0;
        CHECK(lm_gguf_get_arr_n(g1, i1, &m1) == LM_OK && lm_gguf_get_arr_n(g3, i3, &m3) == LM_OK && m1 == 512 &&
              m3 == 512);
        if (k == 0) {
            CHECK(arr_str_diffs(g1, i1, g3, i3, m1) == 0);
        } else {
            const void *d1 = NULL, *d3 = NULL;
            CHECK(lm_gguf_get_arr_data(g1, i1, &d1) == LM_OK && lm_gguf_get_arr_data(g3, i3, &d3) == LM_OK);
            CHECK(d1 && d3 && !memcmp(d1, d3, 512 * 4));
        }
    }
out:
    free(b1);
    free(b3);
    lm_gguf_close(g1);
    lm_gguf_close(g3);
}

/* open_memory over the same bytes gives the same answers. */
static void test_memory_reader(void)
{
    size_t n = 0;
    void *buf = lm_test_read_file(lm_test_shared("models/stories260K.gguf"), &n);
    struct lm_gguf *g = NULL;
    char err[256];
    CHECK(buf != NULL);
    if (!buf)
        return;
    CHECK(lm_gguf_open_memory(buf, n, &g, err, sizeof err) == LM_OK);
    if (g) {
        CHECK(lm_gguf_data(g) == buf && lm_gguf_file_size(g) == n && lm_gguf_n_kv(g) == 19);
        check_stories_tensors(g);
        /* output.weight is a copy of token_embd.weight (SOURCES.md) */
        const struct lm_gguf_tensor_info *a = lm_gguf_tensor_info(g, lm_gguf_find_tensor(g, "token_embd.weight"));
        const struct lm_gguf_tensor_info *b = lm_gguf_tensor_info(g, lm_gguf_find_tensor(g, "output.weight"));
        CHECK(a && b && !memcmp((char *)buf + a->offset, (char *)buf + b->offset, a->size));
    }
    lm_gguf_close(g);
    lm_gguf_close(NULL);
    free(buf);
}

/* The vocab-only files of llama.cpp (SOURCES.md table 2). */
static void test_vocab_files(void)
{
    static const struct {
        const char *name, *arch, *model;
        int64_t n_kv;
        uint64_t n_vocab, n_merges;
    } v[] = {
        {"baichuan", "baichuan", "llama", 18, 64000, 0},
        {"bert-bge", "bert", "bert", 20, 30522, 0},
        {"dbrx", "dbrx", "gpt2", 25, 100352, 100000},
        {"deepseek-coder", "llama", "gpt2", 25, 32256, 31757},
        {"deepseek-llm", "llama", "gpt2", 23, 102400, 99757},
        {"falcon", "falcon", "gpt2", 18, 65024, 64784},
        {"gpt-2", "gpt2", "gpt2", 16, 50257, 50000},
        {"gpt-neox", "gptneox", "gpt2", 17, 50432, 50009},
        {"llama-spm", "llama", "llama", 22, 32000, 0},
        {"mpt", "mpt", "gpt2", 17, 50432, 50009},
        {"phi-3", "phi3", "llama", 26, 32064, 0},
        {"refact", "refact", "gpt2", 18, 49216, 48891},
        {"starcoder", "starcoder2", "gpt2", 19, 49152, 48872},
    };
    for (size_t k = 0; k < sizeof v / sizeof v[0]; k++) {
        char rel[128];
        snprintf(rel, sizeof rel, "models/ggml-vocab/ggml-vocab-%s.gguf", v[k].name);
        struct lm_gguf *g = open_shared(rel);
        if (!g)
            continue;
        CHECKF(lm_gguf_version(g) == 3 && lm_gguf_n_tensors(g) == 0 && lm_gguf_n_kv(g) == v[k].n_kv, "%s", rel);
        CHECKF(!strcmp(key_str(g, "general.architecture"), v[k].arch), "%s", rel);
        CHECKF(!strcmp(key_str(g, "tokenizer.ggml.model"), v[k].model), "%s", rel);
        CHECKF(arr_n(g, "tokenizer.ggml.tokens", LM_GGUF_STRING) == v[k].n_vocab, "%s", rel);
        if (v[k].n_merges)
            CHECKF(arr_n(g, "tokenizer.ggml.merges", LM_GGUF_STRING) == v[k].n_merges, "%s", rel);
        else
            CHECKF(lm_gguf_find_key(g, "tokenizer.ggml.merges") == -1, "%s", rel);
        if (!strcmp(v[k].name, "dbrx")) /* repeats general.file_type (same value): first one indexed */
            CHECK(lm_gguf_find_key(g, "general.file_type") == 10 && !strcmp(lm_gguf_key(g, 14), "general.file_type"));
        lm_gguf_close(g);
    }
}

/* Every GGUF file in a shared folder opens; returns how many did. */
static int open_all(const char *dir_rel)
{
    glob_t gl;
    char pat[1024];
    int n = 0;
    snprintf(pat, sizeof pat, "%s/*.gguf", lm_test_shared(dir_rel));
    if (glob(pat, 0, NULL, &gl) != 0)
        return 0;
    for (size_t k = 0; k < gl.gl_pathc; k++) {
        struct lm_gguf *g = NULL;
        char err[256];
        lm_status st = lm_gguf_open(gl.gl_pathv[k], &g, err, sizeof err);
        CHECKF(st == LM_OK, "%s: %s", gl.gl_pathv[k], err);
        n += st == LM_OK;
        lm_gguf_close(g);
    }
    globfree(&gl);
    return n;
}

static void test_open_all(void)
{
    CHECK(open_all("models/ggml-vocab") == 13);
    CHECK(open_all("fixtures/arch") >= 20);
    CHECK(open_all("models") >= 3);
}

/* llama-2-tiny-random: F16 tensors, the full Llama 2 vocab, equal to llama-spm's. */
static void test_tiny_random(void)
{
    struct lm_gguf *g = open_shared("models/llama-2-tiny-random.gguf");
    struct lm_gguf *v = open_shared("models/ggml-vocab/ggml-vocab-llama-spm.gguf");
    if (!g || !v)
        goto out;
    CHECK(lm_gguf_version(g) == 3 && lm_gguf_n_kv(g) == 18 && lm_gguf_n_tensors(g) == 12);
    CHECK(key_u32(g, "general.file_type") == 1 && key_u32(g, "llama.embedding_length") == 8);
    int n_f16 = 0, n_f32 = 0;
    for (int64_t i = 0; i < lm_gguf_n_tensors(g); i++) {
        const struct lm_gguf_tensor_info *t = lm_gguf_tensor_info(g, i);
        n_f16 += t->type == LM_TYPE_F16;
        n_f32 += t->type == LM_TYPE_F32;
    }
    CHECK(n_f16 == 9 && n_f32 == 3);
    int64_t a = lm_gguf_find_key(g, "tokenizer.ggml.tokens"), b = lm_gguf_find_key(v, "tokenizer.ggml.tokens");
    uint64_t na = 0, nb = 0;
    CHECK(lm_gguf_get_arr_n(g, a, &na) == LM_OK && lm_gguf_get_arr_n(v, b, &nb) == LM_OK && na == 32000 && nb == na);
    CHECK(arr_str_diffs(g, a, v, b, na < nb ? na : nb) == 0);
out:
    lm_gguf_close(g);
    lm_gguf_close(v);
}

/* Parse "name[a, b] name[c] ..." after `prefix` and check each tensor. */
static void check_tensor_list(const struct lm_gguf *g, const char *fix, const char *list, const char *prefix,
                              enum lm_type type2d)
{
    const char *p = list;
    while (*p) {
        while (*p == ' ')
            p++;
        const char *lb = strchr(p, '[');
        if (!lb)
            break;
        char name[128];
        int64_t ne[2] = {1, 1};
        int nd = 0;
        snprintf(name, sizeof name, "%s%.*s", prefix, (int)(lb - p), p);
        p = lb + 1;
        while (*p && *p != ']' && nd < 2) {
            ne[nd++] = strtoll(p, (char **)&p, 10);
            if (*p == ',')
                p++;
        }
        if (*p == ']')
            p++;
        CHECKF(nd >= 1, "%s: cannot parse %s", fix, name);
        check_tensor(g, name, nd, ne[0], ne[1], nd == 2 ? type2d : LM_TYPE_F32);
    }
}

/* Every fixture of shared/fixtures/arch against its TENSORS.txt entry:
 * architecture, tensor count, metadata values (as text) and shapes. */
static void test_arch_fixtures(void)
{
    size_t n = 0;
    char *txt = lm_test_read_file(lm_test_shared("fixtures/arch/TENSORS.txt"), &n);
    CHECK(txt != NULL);
    if (!txt)
        return;
    char *save = NULL, fix[64] = "", arch[64] = "";
    struct lm_gguf *g = NULL;
    int n_fix = 0;
    txt = realloc(txt, n + 1);
    txt[n] = '\0';
    for (char *line = strtok_r(txt, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        int nt = 0;
        if (sscanf(line, "## %63s (general.architecture=%63[^,], %d tensors)", fix, arch, &nt) == 3) {
            char rel[128];
            lm_gguf_close(g);
            snprintf(rel, sizeof rel, "fixtures/arch/%s.gguf", fix);
            g = open_shared(rel);
            n_fix++;
            if (g) {
                CHECKF(lm_gguf_version(g) == 3 && lm_gguf_n_tensors(g) == nt, "%s", fix);
                CHECKF(!strcmp(key_str(g, "general.architecture"), arch), "%s", fix);
            }
        } else if (g && !strncmp(line, "kv: ", 4)) {
            char *s2 = NULL;
            for (char *kv = strtok_r(line + 4, " ", &s2); kv; kv = strtok_r(NULL, " ", &s2)) {
                char key[160], got[256];
                char *eq = strchr(kv, '=');
                if (!eq)
                    continue;
                *eq = '\0';
                snprintf(key, sizeof key, "%s%s%s", strncmp(kv, "general.", 8) ? arch : "",
                         strncmp(kv, "general.", 8) ? "." : "", kv);
                lm_gguf_value_to_string(g, lm_gguf_find_key(g, key), got, sizeof got);
                CHECKF(!strcmp(got, eq + 1), "%s: %s = '%s', expected '%s'", fix, key, got, eq + 1);
            }
        } else if (g && !strncmp(line, "tokenizer keys: ", 16)) {
            char *s2 = NULL;
            for (char *k = strtok_r(line + 16, " ", &s2); k; k = strtok_r(NULL, " ", &s2))
                CHECKF(lm_gguf_find_key(g, k) >= 0, "%s: %s missing", fix, k);
        } else if (g && !strncmp(line, "global: ", 8)) {
            check_tensor_list(g, fix, line + 8, "", strcmp(fix, "llama-f16") ? LM_TYPE_F32 : LM_TYPE_F16);
        } else if (g && !strncmp(line, "blk.0: ", 7)) {
            check_tensor_list(g, fix, line + 7, "blk.0.", strcmp(fix, "llama-f16") ? LM_TYPE_F32 : LM_TYPE_F16);
        }
    }
    lm_gguf_close(g);
    CHECKF(n_fix >= 20, "%d fixtures", n_fix);
    free(txt);
}

/* Values as text: scalars, strings, abbreviated arrays, truncation. */
static void test_value_to_string(void)
{
    struct lm_gguf *g = open_shared("models/stories260K.gguf");
    char buf[512];
    if (!g)
        return;
    int n = lm_gguf_value_to_string(g, lm_gguf_find_key(g, "general.architecture"), buf, sizeof buf);
    CHECK(n == 5 && !strcmp(buf, "llama"));
    n = lm_gguf_value_to_string(g, lm_gguf_find_key(g, "llama.block_count"), buf, sizeof buf);
    CHECK(n == 1 && !strcmp(buf, "5"));
    lm_gguf_value_to_string(g, lm_gguf_find_key(g, "llama.attention.layer_norm_rms_epsilon"), buf, sizeof buf);
    CHECK(!strcmp(buf, "1e-05"));
    const char *want = "[\"<unk>\", \"<s>\", \"</s>\", \"<0x00>\", \"<0x01>\", \"<0x02>\", \"<0x03>\", "
                       "\"<0x04>\", ... 504 more]";
    n = lm_gguf_value_to_string(g, lm_gguf_find_key(g, "tokenizer.ggml.tokens"), buf, sizeof buf);
    CHECKF(n == (int)strlen(want) && !strcmp(buf, want), "%s", buf);
    lm_gguf_value_to_string(g, lm_gguf_find_key(g, "tokenizer.ggml.token_type"), buf, sizeof buf);
    CHECKF(!strcmp(buf, "[2, 3, 3, 6, 6, 6, 6, 6, ... 504 more]"), "%s", buf);
    /* truncation: snprintf-like */
    char small[4] = "xyz";
    n = lm_gguf_value_to_string(g, lm_gguf_find_key(g, "general.architecture"), small, sizeof small);
    CHECK(n == 5 && !strcmp(small, "lla"));
    CHECK(lm_gguf_value_to_string(g, lm_gguf_find_key(g, "tokenizer.ggml.tokens"), NULL, 0) == (int)strlen(want));
    CHECK(lm_gguf_value_to_string(g, 99, buf, sizeof buf) == -1 && buf[0] == '\0');
    lm_gguf_close(g);
}

int main(void)
{
    test_stories_v3();
    test_stories_v1();
    test_memory_reader();
    test_vocab_files();
    test_open_all();
    test_tiny_random();
    test_arch_fixtures();
    test_value_to_string();
    return lm_test_summary();
}
