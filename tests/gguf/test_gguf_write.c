/* test_gguf_write.c - the writer: byte-identical rewrites of files made by
 * llama.cpp and gguf-py, a hand-laid-out image from the spec, and the API's
 * argument checks. */
#include "gguf/gguf.h"
#include "lm_test.h"
#include "util_gguf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Copy every kv and tensor of file `rel` into a writer, write it, and
 * compare with the input; returns 1 when byte-identical, 0 if not, -1 on error. */
static int rewrite(const char *rel, const char *tag)
{
    size_t n = 0, m = 0;
    unsigned char *in = lm_test_read_file(lm_test_shared(rel), &n), *outb = NULL;
    struct lm_gguf *g = NULL;
    struct lm_gguf_writer *w = NULL;
    int same = -1;
    char err[256];
    if (!in || lm_gguf_open_memory(in, n, &g, err, sizeof err) != LM_OK || lm_gguf_writer_new(&w) != LM_OK)
        goto out;
    for (int64_t i = 0; i < lm_gguf_n_kv(g); i++)
        if (lm_gguf_copy_kv(w, g, i) != LM_OK)
            goto out;
    for (int64_t i = 0; i < lm_gguf_n_tensors(g); i++) {
        const struct lm_gguf_tensor_info *t = lm_gguf_tensor_info(g, i);
        if (lm_gguf_add_tensor(w, t->name, t->type, t->n_dims, t->ne, in + t->offset) != LM_OK)
            goto out;
    }
    const char *path = gt_tmp_path(tag);
    if (lm_gguf_write_file(w, path) != LM_OK)
        goto out;
    outb = lm_test_read_file(path, &m);
    remove(path);
    if (outb)
        same = m == n && !memcmp(in, outb, n);
out:
    lm_gguf_writer_free(w);
    lm_gguf_close(g);
    free(in);
    free(outb);
    return same;
}

static void test_rewrite_identical(void)
{
    static const char *const files[] = {
        "models/stories260K.gguf",
        "models/llama-2-tiny-random.gguf",
        "models/ggml-vocab/ggml-vocab-llama-spm.gguf",
        "models/ggml-vocab/ggml-vocab-gpt-2.gguf",
        "models/ggml-vocab/ggml-vocab-bert-bge.gguf",
        "models/ggml-vocab/ggml-vocab-phi-3.gguf",
        "fixtures/arch/llama.gguf",
        "fixtures/arch/llama-f16.gguf",
        "fixtures/arch/gpt2.gguf",
        "fixtures/arch/llama-moe.gguf",
    };
    for (size_t k = 0; k < sizeof files / sizeof files[0]; k++) {
        int r = rewrite(files[k], "rewrite");
        CHECKF(r == 1, "%s: rewrite %s", files[k], r < 0 ? "failed" : "differs");
    }
}

/* v1 in, v3 out: same values and tensor bytes, read back by the reader. */
static void test_v1_to_v3(void)
{
    size_t n = 0;
    unsigned char *in = lm_test_read_file(lm_test_shared("models/tinyllamas-stories-260k-f32.gguf"), &n);
    struct lm_gguf *g = NULL, *h = NULL;
    struct lm_gguf_writer *w = NULL;
    const char *path = gt_tmp_path("v1");
    CHECK(in && lm_gguf_open_memory(in, n, &g, NULL, 0) == LM_OK && lm_gguf_writer_new(&w) == LM_OK);
    if (!g || !w)
        goto out;
    for (int64_t i = 0; i < lm_gguf_n_kv(g); i++)
        CHECK(lm_gguf_copy_kv(w, g, i) == LM_OK);
    for (int64_t i = 0; i < lm_gguf_n_tensors(g); i++) {
        const struct lm_gguf_tensor_info *t = lm_gguf_tensor_info(g, i);
        CHECK(lm_gguf_add_tensor(w, t->name, t->type, t->n_dims, t->ne, in + t->offset) == LM_OK);
    }
    CHECK(lm_gguf_write_file(w, path) == LM_OK);
    CHECK(lm_gguf_open(path, &h, NULL, 0) == LM_OK);
    if (!h)
        goto out;
    size_t m = 0;
    unsigned char *outb = lm_test_read_file(path, &m);
    CHECK(lm_gguf_version(h) == 3 && lm_gguf_n_kv(h) == 18 && lm_gguf_n_tensors(h) == 48);
    for (int64_t i = 0; i < lm_gguf_n_kv(g); i++) {
        char a[256], b[256];
        CHECK(!strcmp(lm_gguf_key(g, i), lm_gguf_key(h, i)) && lm_gguf_kv_type(g, i) == lm_gguf_kv_type(h, i));
        lm_gguf_value_to_string(g, i, a, sizeof a);
        lm_gguf_value_to_string(h, i, b, sizeof b);
        CHECKF(!strcmp(a, b), "%s: %s vs %s", lm_gguf_key(g, i), a, b);
    }
    for (int64_t i = 0; outb && i < lm_gguf_n_tensors(g); i++) {
        const struct lm_gguf_tensor_info *a = lm_gguf_tensor_info(g, i), *b = lm_gguf_tensor_info(h, i);
        CHECK(!strcmp(a->name, b->name) && a->size == b->size && !memcmp(in + a->offset, outb + b->offset, a->size));
    }
    free(outb);
out:
    remove(path);
    lm_gguf_close(h);
    lm_gguf_writer_free(w);
    lm_gguf_close(g);
    free(in);
}

/* The writer's bytes against an image laid out by hand from the spec. */
static void test_layout_by_hand(void)
{
    struct gt_buf e = {0};
    float t0[2] = {1.0f, 2.0f};
    int32_t arr[3] = {1, -2, 3};
    int64_t ne0[1] = {2}, ne1[2] = {32, 1};
    uint8_t q[18] = {0x11, 0x22, 3, 4, 5};
    gt_bytes(&e, "GGUF", 4);
    gt_u32(&e, 3);
    gt_u64(&e, 2); /* tensors */
    gt_u64(&e, 4); /* kvs */
    gt_str(&e, "general.alignment"), gt_u32(&e, LM_GGUF_UINT32), gt_u32(&e, 64);
    gt_str(&e, "b"), gt_u32(&e, LM_GGUF_BOOL), gt_u8(&e, 1);
    gt_str(&e, "s"), gt_u32(&e, LM_GGUF_STRING), gt_str(&e, "hi");
    gt_str(&e, "a"), gt_u32(&e, LM_GGUF_ARRAY), gt_u32(&e, LM_GGUF_INT32), gt_u64(&e, 3), gt_bytes(&e, arr, 12);
    gt_str(&e, "t0"), gt_u32(&e, 1), gt_u64(&e, 2), gt_u32(&e, LM_TYPE_F32), gt_u64(&e, 0);
    gt_str(&e, "t1"), gt_u32(&e, 2), gt_u64(&e, 32), gt_u64(&e, 1), gt_u32(&e, LM_TYPE_Q8_0), gt_u64(&e, 64);
    gt_pad(&e, 64);
    gt_bytes(&e, t0, 8), gt_pad(&e, 64);
    gt_bytes(&e, q, 34 - 16), gt_bytes(&e, (uint8_t[16]){0}, 16), gt_pad(&e, 64);

    struct lm_gguf_writer *w = NULL;
    CHECK(lm_gguf_writer_new(&w) == LM_OK);
    CHECK(lm_gguf_set_u32(w, "general.alignment", 64) == LM_OK);
    CHECK(lm_gguf_set_str(w, "b", "placeholder") == LM_OK);
    CHECK(lm_gguf_set_str(w, "s", "hi") == LM_OK);
    CHECK(lm_gguf_set_arr_data(w, "a", LM_GGUF_INT32, arr, 3) == LM_OK);
    CHECK(lm_gguf_set_bool(w, "b", true) == LM_OK); /* replaces, keeps position 1 */
    CHECK(lm_gguf_add_tensor(w, "t0", LM_TYPE_F32, 1, ne0, t0) == LM_OK);
    uint8_t qb[34] = {0};
    memcpy(qb, q, 18);
    CHECK(lm_gguf_add_tensor(w, "t1", LM_TYPE_Q8_0, 2, ne1, qb) == LM_OK);
    const char *path = gt_tmp_path("hand");
    CHECK(lm_gguf_write_file(w, path) == LM_OK);
    size_t n = 0;
    unsigned char *got = lm_test_read_file(path, &n);
    CHECKF(got && n == e.n && !memcmp(got, e.p, n), "size %zu vs %zu", n, e.n);
    struct lm_gguf *g = NULL;
    CHECK(lm_gguf_open(path, &g, NULL, 0) == LM_OK);
    if (g) {
        CHECK(lm_gguf_alignment(g) == 64 && lm_gguf_data_offset(g) % 64 == 0);
        CHECK(lm_gguf_tensor_info(g, 1)->offset == lm_gguf_data_offset(g) + 64);
        CHECK(lm_gguf_tensor_info(g, 1)->size == 34);
    }
    lm_gguf_close(g);
    remove(path);
    free(got);
    free(e.p);
    lm_gguf_writer_free(w);
}

static lm_status fill_fn(void *user, int64_t i, void *dst, size_t size)
{
    int *calls = user;
    (*calls)++;
    memset(dst, (int)(0x40 + i), size);
    return i == 2 ? LM_ERR_ABORTED : LM_OK;
}

/* Read back the file test_api() wrote. */
static void check_api_file(const char *path, const char *const *strs, const uint8_t *bools)
{
    struct lm_gguf *g = NULL;
    char err[256] = "";
    CHECKF(lm_gguf_open(path, &g, err, sizeof err) == LM_OK, "%s", err);
    if (!g)
        return;
    uint32_t u32 = 0;
    int32_t i32 = 0;
    uint64_t u64 = 0, n = 0;
    float f = 0;
    bool b = true;
    const char *s = NULL;
    size_t len = 0;
    const void *d = NULL;
    enum lm_gguf_type at;
    CHECK(lm_gguf_n_kv(g) == 9 && lm_gguf_find_key(g, "gone") == -1 && !strcmp(lm_gguf_key(g, 8), "empty"));
    CHECK(lm_gguf_get_u32(g, lm_gguf_find_key(g, "u32"), &u32) == LM_OK && u32 == 4000000000u);
    CHECK(lm_gguf_get_i32(g, lm_gguf_find_key(g, "u32"), &i32) == LM_ERR_CORRUPT);
    CHECK(lm_gguf_get_i32(g, lm_gguf_find_key(g, "i32"), &i32) == LM_OK && i32 == -5);
    CHECK(lm_gguf_get_u32(g, lm_gguf_find_key(g, "i32"), &u32) == LM_ERR_CORRUPT);
    CHECK(lm_gguf_get_u64(g, lm_gguf_find_key(g, "u64"), &u64) == LM_OK && u64 == 1ull << 40);
    CHECK(lm_gguf_get_u32(g, lm_gguf_find_key(g, "u64"), &u32) == LM_ERR_CORRUPT);
    CHECK(lm_gguf_get_f32(g, lm_gguf_find_key(g, "f32"), &f) == LM_OK && f == 0.5f);
    CHECK(lm_gguf_get_bool(g, lm_gguf_find_key(g, "bool"), &b) == LM_OK && !b);
    CHECK(lm_gguf_get_str(g, lm_gguf_find_key(g, "str"), &s, &len) == LM_OK && len == 5 && !strcmp(s, "text\n"));
    int64_t k = lm_gguf_find_key(g, "strs");
    CHECK(lm_gguf_get_arr_n(g, k, &n) == LM_OK && n == 3);
    CHECK(lm_gguf_get_arr_str(g, k, 1, &s, &len) == LM_OK && len == 0 && s[0] == '\0');
    CHECK(lm_gguf_get_arr_str(g, k, 2, &s, &len) == LM_OK && len == 3 && !strcmp(s, strs[2]));
    k = lm_gguf_find_key(g, "bools");
    CHECK(lm_gguf_get_arr_type(g, k, &at) == LM_OK && at == LM_GGUF_BOOL);
    CHECK(lm_gguf_get_arr_data(g, k, &d) == LM_OK && d && !memcmp(d, bools, 3));
    k = lm_gguf_find_key(g, "empty");
    CHECK(lm_gguf_get_arr_n(g, k, &n) == LM_OK && n == 0 && lm_gguf_get_arr_data(g, k, &d) == LM_OK);
    char txt[128];
    lm_gguf_value_to_string(g, lm_gguf_find_key(g, "strs"), txt, sizeof txt);
    CHECKF(!strcmp(txt, "[\"x\", \"\", \"z\xc3\xa9\"]"), "%s", txt);
    lm_gguf_value_to_string(g, lm_gguf_find_key(g, "str"), txt, sizeof txt);
    CHECKF(!strcmp(txt, "text\\n"), "%s", txt);
    lm_gguf_value_to_string(g, lm_gguf_find_key(g, "bools"), txt, sizeof txt);
    CHECKF(!strcmp(txt, "[true, false, true]"), "%s", txt);
    lm_gguf_value_to_string(g, lm_gguf_find_key(g, "empty"), txt, sizeof txt);
    CHECKF(!strcmp(txt, "[]"), "%s", txt);
    lm_gguf_value_to_string(g, lm_gguf_find_key(g, "i32"), txt, sizeof txt);
    CHECKF(!strcmp(txt, "-5"), "%s", txt);
    const struct lm_gguf_tensor_info *ta = lm_gguf_tensor_info(g, 0), *tb = lm_gguf_tensor_info(g, 1);
    CHECK(ta->type == LM_TYPE_Q4_0 && ta->n_dims == 2 && ta->size == 36 && tb->n_dims == 4 && tb->size == 128);
    CHECK(tb->offset == ta->offset + 64);
    size_t fn = 0;
    unsigned char *fb = lm_test_read_file(path, &fn);
    CHECK(fb && fb[ta->offset] == 0x40 && fb[ta->offset + 35] == 0x40 && fb[ta->offset + 36] == 0 &&
          fb[tb->offset + 127] == 0x41);
    free(fb);
    lm_gguf_close(g);
}

/* Every value type set, written and read back; argument checks. */
static void test_api(void)
{
    struct lm_gguf_writer *w = NULL;
    CHECK(lm_gguf_writer_new(NULL) == LM_ERR_INVALID_ARG);
    CHECK(lm_gguf_writer_new(&w) == LM_OK);
    lm_gguf_writer_free(NULL);
    if (!w)
        return;
    const char *strs[3] = {"x", "", "z\xc3\xa9"};
    uint8_t bools[3] = {1, 0, 1}, badb[1] = {2};
    CHECK(lm_gguf_set_u32(w, "u32", 4000000000u) == LM_OK);
    CHECK(lm_gguf_set_i32(w, "i32", -5) == LM_OK);
    CHECK(lm_gguf_set_u64(w, "u64", 1ull << 40) == LM_OK);
    CHECK(lm_gguf_set_f32(w, "f32", 0.5f) == LM_OK);
    CHECK(lm_gguf_set_bool(w, "bool", false) == LM_OK);
    CHECK(lm_gguf_set_str(w, "str", "text\n") == LM_OK);
    CHECK(lm_gguf_set_arr_str(w, "strs", strs, 3) == LM_OK);
    CHECK(lm_gguf_set_arr_data(w, "bools", LM_GGUF_BOOL, bools, 3) == LM_OK);
    CHECK(lm_gguf_set_arr_data(w, "empty", LM_GGUF_FLOAT32, NULL, 0) == LM_OK);
    CHECK(lm_gguf_set_u32(w, "gone", 1) == LM_OK);
    CHECK(lm_gguf_remove_key(w, "gone") == LM_OK);
    CHECK(lm_gguf_remove_key(w, "gone") == LM_ERR_NOT_FOUND);
    /* refused arguments */
    CHECK(lm_gguf_set_u32(w, "", 1) == LM_ERR_INVALID_ARG);
    CHECK(lm_gguf_set_u32(w, NULL, 1) == LM_ERR_INVALID_ARG);
    CHECK(lm_gguf_set_str(w, "s2", NULL) == LM_ERR_INVALID_ARG);
    CHECK(lm_gguf_set_arr_data(w, "x", LM_GGUF_STRING, strs, 1) == LM_ERR_INVALID_ARG);
    CHECK(lm_gguf_set_arr_data(w, "x", LM_GGUF_ARRAY, bools, 1) == LM_ERR_INVALID_ARG);
    CHECK(lm_gguf_set_arr_data(w, "x", LM_GGUF_BOOL, badb, 1) == LM_ERR_INVALID_ARG);
    CHECK(lm_gguf_set_arr_data(w, "x", LM_GGUF_UINT8, NULL, 1) == LM_ERR_INVALID_ARG);
    int64_t ne[4] = {32, 2, 1, 1}, bad0[1] = {31}, neg[2] = {32, -1};
    CHECK(lm_gguf_add_tensor(w, "t", (enum lm_type)4, 1, ne, NULL) == LM_ERR_INVALID_ARG);
    CHECK(lm_gguf_add_tensor(w, "t", LM_TYPE_F32, 0, ne, NULL) == LM_ERR_INVALID_ARG);
    CHECK(lm_gguf_add_tensor(w, "t", LM_TYPE_F32, 5, ne, NULL) == LM_ERR_INVALID_ARG);
    CHECK(lm_gguf_add_tensor(w, "t", LM_TYPE_Q4_0, 1, bad0, NULL) == LM_ERR_INVALID_ARG);
    CHECK(lm_gguf_add_tensor(w, "t", LM_TYPE_F32, 2, neg, NULL) == LM_ERR_INVALID_ARG);
    CHECK(lm_gguf_add_tensor(w, "", LM_TYPE_F32, 1, ne, NULL) == LM_ERR_INVALID_ARG);
    /* tensors from the fill callback */
    CHECK(lm_gguf_add_tensor(w, "a", LM_TYPE_Q4_0, 2, ne, NULL) == LM_OK);
    CHECK(lm_gguf_add_tensor(w, "b", LM_TYPE_F16, 4, ne, NULL) == LM_OK);
    CHECK(lm_gguf_add_tensor(w, "a", LM_TYPE_F32, 1, ne, NULL) == LM_ERR_INVALID_ARG); /* duplicate */
    const char *path = gt_tmp_path("api");
    CHECK(lm_gguf_write_file(w, path) == LM_ERR_INVALID_ARG); /* no data, no fill */
    int calls = 0;
    lm_gguf_writer_set_fill(w, fill_fn, &calls);
    CHECK(lm_gguf_write_file(w, path) == LM_OK && calls == 2);
    check_api_file(path, strs, bools);
    /* a failing fill aborts the write and leaves no file */
    int64_t one[1] = {4};
    CHECK(lm_gguf_add_tensor(w, "c", LM_TYPE_F32, 1, one, NULL) == LM_OK);
    CHECK(lm_gguf_write_file(w, path) == LM_ERR_ABORTED);
    FILE *f = fopen(path, "rb");
    CHECK(f == NULL);
    if (f)
        fclose(f);
    /* bad alignments are refused */
    CHECK(lm_gguf_set_u32(w, "general.alignment", 48) == LM_OK);
    CHECK(lm_gguf_write_file(w, path) == LM_ERR_INVALID_ARG);
    CHECK(lm_gguf_set_u64(w, "general.alignment", 64) == LM_OK);
    CHECK(lm_gguf_write_file(w, path) == LM_ERR_INVALID_ARG);
    CHECK(lm_gguf_remove_key(w, "general.alignment") == LM_OK);
    CHECK(lm_gguf_write_file(w, "/nonexistent-dir/x.gguf") == LM_ERR_IO);
    remove(path);
    lm_gguf_writer_free(w);
}

int main(void)
{
    test_rewrite_identical();
    test_v1_to_v3();
    test_layout_by_hand();
    test_api();
    return lm_test_summary();
}
