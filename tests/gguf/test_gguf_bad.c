/* test_gguf_bad.c - broken files: every one gets an error status and a
 * message, never a crash or a huge allocation.
 *
 * Truncations of real files at every header offset and through the data,
 * and single-field corruptions of stories260K.gguf (fields located by their
 * bytes, not by the reader) and of small hand-made images. Outside the
 * sanitizer build the address space is capped, so an allocation sized by a
 * corrupt count fails the test (it would come back as LM_ERR_NOMEM).
 */
#include "gguf/gguf.h"
#include "lm_test.h"
#include "util_gguf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <math.h>

#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif

static unsigned char *stories;
static size_t stories_n;

/* Open an image; return the status, check that failures have a message. */
static lm_status try_open(const void *p, size_t n, char *err, size_t err_size)
{
    struct lm_gguf *g = NULL;
    lm_status st = lm_gguf_open_memory(p, n, &g, err, err_size);
    if (st == LM_OK) {
        CHECK(g != NULL);
        lm_gguf_close(g);
    } else {
        CHECK(g == NULL);
        CHECKF(!err || (strstr(err, "gguf: ") == err && strstr(err, "offset")), "message '%s'", err);
    }
    return st;
}

static size_t find(const unsigned char *hay, size_t n, const void *needle, size_t m)
{
    for (size_t i = 0; i + m <= n; i++)
        if (!memcmp(hay + i, needle, m))
            return i;
    fprintf(stderr, "find: pattern not found\n");
    abort();
}

/* Offset of a length-prefixed (u64) name in stories260K.gguf, at the length. */
static size_t name_at(const char *name)
{
    unsigned char pat[128];
    size_t len = strlen(name);
    gt_put_u64(pat, 0, len);
    memcpy(pat + 8, name, len);
    return find(stories, stories_n, pat, 8 + len);
}

static void test_truncated(void)
{
    char err[256];
    int bad = 0;
    const size_t data = 14176;
    for (size_t n = 0; n < stories_n; n += n < data + 64 ? 1 : 997) {
        lm_status st = try_open(stories, n, err, sizeof err);
        bad += st != LM_ERR_CORRUPT;
        if (st != LM_ERR_CORRUPT && bad < 5)
            fprintf(stderr, "truncated at %zu: %s\n", n, lm_status_str(st));
    }
    CHECK(bad == 0);
    CHECK(try_open(stories, stories_n - 1, err, sizeof err) == LM_ERR_CORRUPT);
    CHECK(strstr(err, "tensor 47 'blk.4.ffn_norm.weight'") != NULL);
    CHECK(try_open(stories, stories_n, err, sizeof err) == LM_OK);
    /* the v1 file too, over its whole header */
    size_t n1 = 0;
    unsigned char *v1 = lm_test_read_file(lm_test_shared("models/tinyllamas-stories-260k-f32.gguf"), &n1);
    CHECK(v1 != NULL);
    bad = 0;
    for (size_t n = 0; v1 && n < 11456 + 8; n++)
        bad += try_open(v1, n, err, sizeof err) != LM_ERR_CORRUPT;
    CHECK(bad == 0);
    free(v1);
    /* through the file reader: truncated copies on disk */
    const char *path = gt_tmp_path("trunc");
    static const size_t cuts[] = {0, 3, 4, 7, 8, 23, 24, 60, 69, 5000, 14151, 14152, 14175, 14176, 500000};
    for (size_t k = 0; k < sizeof cuts / sizeof cuts[0]; k++) {
        struct lm_gguf *g = NULL;
        CHECK(gt_write_file(path, stories, cuts[k]) == 0);
        lm_status st = lm_gguf_open(path, &g, err, sizeof err);
        CHECKF(st == LM_ERR_CORRUPT && g == NULL, "file cut at %zu: %s", cuts[k], lm_status_str(st));
    }
    remove(path);
}

/* Overwrite `width` bytes (1, 4 or 8) at off with v in a copy of
 * stories260K.gguf; expect status `want` and a message containing must_say. */
static void corrupt(size_t off, int width, uint64_t v, lm_status want, const char *must_say)
{
    unsigned char *img = malloc(stories_n);
    char err[512] = "";
    if (!img)
        abort();
    memcpy(img, stories, stories_n);
    if (width == 4)
        gt_put_u32(img, off, (uint32_t)v);
    else if (width == 8)
        gt_put_u64(img, off, v);
    else
        img[off] = (uint8_t)v;
    lm_status st = try_open(img, stories_n, err, sizeof err);
    CHECKF(st == want, "offset %zu := %llu: %s (%s), expected %s", off, (unsigned long long)v, lm_status_str(st), err,
           lm_status_str(want));
    if (must_say)
        CHECKF(strstr(err, must_say) != NULL, "'%s' does not say '%s'", err, must_say);
    free(img);
}

static void test_corrupt_header(void)
{
    const lm_status C = LM_ERR_CORRUPT, U = LM_ERR_UNSUPPORTED;
    /* header */
    corrupt(3, 1, 'G', C, "magic");
    corrupt(4, 4, 0, C, "version");
    corrupt(4, 4, 4, U, "version");
    corrupt(4, 4, 0x03000000, U, "big-endian");
    corrupt(8, 8, 49, C, NULL);
    corrupt(8, 8, 1000000, C, "n_tensors");
    corrupt(8, 8, UINT64_MAX, C, "n_tensors");
    corrupt(8, 8, 1ull << 63, C, "n_tensors");
    corrupt(16, 8, 20, C, NULL);
    corrupt(16, 8, 1000000000, C, "n_kv");
    corrupt(16, 8, UINT64_MAX, C, "n_kv");
}

static void test_corrupt_kvs(void)
{
    const lm_status C = LM_ERR_CORRUPT, U = LM_ERR_UNSUPPORTED;
    /* key/values: the first is tokenizer.ggml.tokens, an array of 512 strings */
    size_t k0 = name_at("tokenizer.ggml.tokens");
    CHECK(k0 == 24);
    corrupt(k0, 8, UINT64_MAX, C, "kv 0 key");
    corrupt(k0, 8, stories_n, C, "kv 0 key");
    corrupt(k0, 8, 1ull << 40, C, "kv 0 key");
    corrupt(k0, 8, 0, C, "empty");
    corrupt(k0 + 8 + 3, 1, 0, C, "NUL");
    size_t ty = k0 + 8 + 21;
    corrupt(ty, 4, 13, C, "value type 13");
    corrupt(ty, 4, 99, C, "value type");
    corrupt(ty, 4, UINT32_MAX, C, "value type");
    corrupt(ty + 4, 4, 13, C, "element type 13");
    corrupt(ty + 4, 4, LM_GGUF_ARRAY, U, "nested");
    corrupt(ty + 8, 8, UINT64_MAX, C, "strings cannot fit");
    corrupt(ty + 8, 8, 1ull << 40, C, "strings cannot fit");
    corrupt(ty + 16, 8, UINT64_MAX, C, "element 0 length");
    corrupt(ty + 16, 8, stories_n, C, "element 0 length");
    size_t sc = name_at("tokenizer.ggml.scores") + 8 + 21; /* f32 array */
    corrupt(sc + 8, 8, UINT64_MAX, C, "cannot fit");
    corrupt(sc + 8, 8, (1ull << 62) + 1, C, "cannot fit");
    corrupt(sc + 4, 4, LM_GGUF_UINT64, C, NULL); /* 512 u64 read too far: misparse */
    /* the same key twice: with another value refused, with the same value kept */
    size_t eos = name_at("tokenizer.ggml.eos_token_id");
    corrupt(eos + 8 + 15, 1, 'b', C, "duplicate key 'tokenizer.ggml.bos_token_id'");
}

static void test_corrupt_tensors(void)
{
    const lm_status C = LM_ERR_CORRUPT, U = LM_ERR_UNSUPPORTED;
    /* tensor infos: token_embd.weight [64, 512] f32 at 0 */
    size_t t0 = name_at("token_embd.weight"), nd = t0 + 8 + 17;
    corrupt(nd, 4, 0, C, "n_dims 0");
    corrupt(nd, 4, 5, C, "n_dims 5");
    corrupt(nd, 4, UINT32_MAX, C, "n_dims");
    corrupt(nd + 4, 8, UINT64_MAX, C, "ne[0]");
    corrupt(nd + 4, 8, 1ull << 62, C, "overflows");
    corrupt(nd + 12, 8, 1ull << 40, C, "outside the file");
    corrupt(nd + 12, 8, (1ull << 63) - 1, C, "overflows");
    corrupt(nd + 20, 4, 4, C, "tensor type 4");
    corrupt(nd + 20, 4, 5, C, "tensor type 5");
    corrupt(nd + 20, 4, 99, U, "tensor type 99");
    corrupt(nd + 20, 4, UINT32_MAX, U, "tensor type");
    corrupt(nd + 20, 4, LM_TYPE_Q4_K, C, "block size"); /* 64 is not a multiple of 256 */
    corrupt(nd + 24, 8, 1, C, "alignment");
    corrupt(nd + 24, 8, 16, C, "alignment");
    corrupt(nd + 24, 8, stories_n, C, "outside the file");
    corrupt(nd + 24, 8, UINT64_MAX - 31, C, "outside the file");
    size_t tl = name_at("blk.4.ffn_norm.weight") + 8 + 21 + 4 + 8 + 4; /* its offset field */
    corrupt(tl, 8, 1170944 + 32, C, "outside the file");
    /* two tensors with one name */
    size_t tk = name_at("blk.0.attn_k.weight");
    corrupt(tk + 8 + 11, 1, 'q', C, "duplicate name 'blk.0.attn_q.weight'");
    corrupt(tk + 8 + 2, 1, 0, C, "NUL");
}

/* A small image with every value type, general.alignment = align and one
 * tensor; `bool_byte` is the scalar bool's byte. */
static void make_image(struct gt_buf *b, uint32_t version, uint64_t align, enum lm_gguf_type align_type,
                       uint8_t bool_byte)
{
    const bool v1 = version == 1;
#define CNT(x) (v1 ? gt_u32(b, (uint32_t)(x)) : gt_u64(b, (x)))
#define STR(s) (CNT(strlen(s)), gt_bytes(b, s, strlen(s)))
    b->n = 0;
    gt_bytes(b, "GGUF", 4);
    gt_u32(b, version);
    CNT(1);
    CNT(15);
    static const char *const names[] = {"u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "str", "arr", "u64",
                                        "i64", "f64"};
    for (int t = 0; t < LM_GGUF_TYPE_COUNT; t++) {
        STR(names[t]);
        gt_u32(b, (uint32_t)t);
        if (t == LM_GGUF_STRING) {
            STR("value");
        } else if (t == LM_GGUF_ARRAY) {
            gt_u32(b, LM_GGUF_STRING);
            CNT(2);
            STR("a");
            STR("");
        } else if (t == LM_GGUF_BOOL) {
            gt_u8(b, bool_byte);
        } else {
            static const size_t sz[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
            gt_bytes(b, "\x01\x02\x03\x04\x05\x06\x07\x08", sz[t]);
        }
    }
    STR("bools");
    gt_u32(b, LM_GGUF_ARRAY), gt_u32(b, LM_GGUF_BOOL), CNT(3), gt_bytes(b, "\x01\x00\x01", 3);
    STR("general.alignment");
    gt_u32(b, align_type);
    if (align_type == LM_GGUF_UINT64)
        gt_u64(b, align);
    else
        gt_u32(b, (uint32_t)align);
    STR("w");
    gt_u32(b, 2);
    CNT(32), CNT(2);
    gt_u32(b, LM_TYPE_Q8_0);
    gt_u64(b, 0);
    gt_pad(b, align && align <= 4096 && !(align & (align - 1)) ? (size_t)align : 32);
    for (int k = 0; k < 68; k++)
        gt_u8(b, (uint8_t)k);
#undef CNT
#undef STR
}

static void test_hand_made(void)
{
    struct gt_buf b = {0};
    char err[256];
    for (uint32_t ver = 1; ver <= 3; ver++) {
        make_image(&b, ver, 64, LM_GGUF_UINT32, 1);
        CHECKF(try_open(b.p, b.n, err, sizeof err) == LM_OK, "v%u: %s", ver, err);
        struct lm_gguf *g = NULL;
        if (lm_gguf_open_memory(b.p, b.n, &g, NULL, 0) == LM_OK) {
            int32_t i32 = 0;
            float f = 0;
            CHECK(lm_gguf_n_kv(g) == 15 && lm_gguf_alignment(g) == 64 && lm_gguf_data_offset(g) % 64 == 0);
            CHECK(lm_gguf_get_i32(g, lm_gguf_find_key(g, "i16"), &i32) == LM_OK && i32 == 0x0201);
            CHECK(lm_gguf_get_i32(g, lm_gguf_find_key(g, "i64"), &i32) == LM_ERR_CORRUPT);
            CHECK(lm_gguf_get_f32(g, lm_gguf_find_key(g, "f64"), &f) == LM_OK);
            CHECK(lm_gguf_tensor_info(g, 0)->size == 68 && lm_gguf_tensor_info(g, 0)->offset + 68 == b.n);
            lm_gguf_close(g);
        }
        /* every truncation of it fails */
        int bad = 0;
        for (size_t n = 0; n < b.n; n++)
            bad += try_open(b.p, n, err, sizeof err) != LM_ERR_CORRUPT;
        CHECKF(bad == 0, "v%u: %d truncations not refused", ver, bad);
    }
    /* f64 -> f32: infinities convert, finite values beyond float's range do not */
    make_image(&b, 3, 32, LM_GGUF_UINT32, 1);
    size_t f64 = find(b.p, b.n, "f64\x0c\0\0\0", 7) + 7;
    double big = 1e300, inf = (double)INFINITY;
    float f = 0;
    struct lm_gguf *g = NULL;
    memcpy(b.p + f64, &big, 8);
    CHECK(lm_gguf_open_memory(b.p, b.n, &g, NULL, 0) == LM_OK);
    CHECK(lm_gguf_get_f32(g, lm_gguf_find_key(g, "f64"), &f) == LM_ERR_CORRUPT && f == 0);
    lm_gguf_close(g);
    memcpy(b.p + f64, &inf, 8);
    CHECK(lm_gguf_open_memory(b.p, b.n, &g, NULL, 0) == LM_OK);
    CHECK(lm_gguf_get_f32(g, lm_gguf_find_key(g, "f64"), &f) == LM_OK && f > 3e38f);
    lm_gguf_close(g);
    make_image(&b, 3, 0, LM_GGUF_UINT32, 1);
    CHECK(try_open(b.p, b.n, err, sizeof err) == LM_ERR_CORRUPT && strstr(err, "general.alignment"));
    make_image(&b, 3, 3, LM_GGUF_UINT32, 1);
    CHECK(try_open(b.p, b.n, err, sizeof err) == LM_ERR_CORRUPT && strstr(err, "power of two"));
    make_image(&b, 3, 32, LM_GGUF_UINT64, 1);
    CHECK(try_open(b.p, b.n, err, sizeof err) == LM_ERR_CORRUPT && strstr(err, "expected u32"));
    make_image(&b, 3, 1u << 31, LM_GGUF_UINT32, 1); /* valid, but the data section lies past the end */
    CHECK(try_open(b.p, b.n, err, sizeof err) == LM_ERR_CORRUPT && strstr(err, "outside the file"));
    make_image(&b, 3, 32, LM_GGUF_UINT32, 2);
    CHECK(try_open(b.p, b.n, err, sizeof err) == LM_ERR_CORRUPT && strstr(err, "bool"));
    make_image(&b, 3, 32, LM_GGUF_UINT32, 1);
    size_t bools = find(b.p, b.n, "\x01\x00\x01", 3);
    b.p[bools + 1] = 7;
    CHECK(try_open(b.p, b.n, err, sizeof err) == LM_ERR_CORRUPT && strstr(err, "bool byte 7"));
    free(b.p);
}

static void test_misc(void)
{
    struct lm_gguf *g = NULL;
    char err[256], tiny[8];
    CHECK(lm_gguf_open("/nonexistent/x.gguf", &g, err, sizeof err) == LM_ERR_IO && strstr(err, "cannot open"));
    CHECK(lm_gguf_open(LM_BINARY_DIR, &g, err, sizeof err) == LM_ERR_IO && g == NULL);
    CHECK(lm_gguf_open(NULL, &g, err, sizeof err) == LM_ERR_INVALID_ARG);
    CHECK(lm_gguf_open_memory(NULL, 5, &g, err, sizeof err) == LM_ERR_INVALID_ARG);
    CHECK(lm_gguf_open_memory(NULL, 0, &g, err, sizeof err) == LM_ERR_CORRUPT);
    CHECK(lm_gguf_open_memory(stories, stories_n, NULL, err, sizeof err) == LM_ERR_INVALID_ARG);
    CHECK(lm_gguf_open_memory("GGUF", 4, &g, tiny, sizeof tiny) == LM_ERR_CORRUPT && strlen(tiny) == 7);
    CHECK(lm_gguf_open_memory("GGUF", 4, &g, NULL, 0) == LM_ERR_CORRUPT && g == NULL);
    /* every getter on NULL */
    uint32_t u;
    CHECK(lm_gguf_n_kv(NULL) == 0 && lm_gguf_n_tensors(NULL) == 0 && lm_gguf_find_key(NULL, "x") == -1);
    CHECK(lm_gguf_get_u32(NULL, 0, &u) == LM_ERR_INVALID_ARG && lm_gguf_tensor_info(NULL, 0) == NULL);
    CHECK(lm_gguf_value_to_string(NULL, 0, err, sizeof err) == -1);
}

int main(void)
{
#ifndef UNDER_ASAN
    /* No test here may need more than a little memory. */
    struct rlimit rl = {(rlim_t)512 << 20, (rlim_t)512 << 20};
    CHECK(setrlimit(RLIMIT_AS, &rl) == 0);
#endif
    stories = lm_test_read_file(lm_test_shared("models/stories260K.gguf"), &stories_n);
    CHECK(stories != NULL && stories_n == 1185376);
    if (!stories)
        return lm_test_summary();
    test_truncated();
    test_corrupt_header();
    test_corrupt_kvs();
    test_corrupt_tensors();
    test_hand_made();
    test_misc();
    free(stories);
    return lm_test_summary();
}
