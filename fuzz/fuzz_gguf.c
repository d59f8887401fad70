/* fuzz_gguf.c - fuzz target for the GGUF reader.
 *
 * LLVMFuzzerTestOneInput() opens the input with lm_gguf_open_memory() and,
 * when it parses, walks every getter over every key/value and tensor and
 * checks the reader's promises (indexes agree, strings are terminated,
 * tensor ranges lie inside the image, getters refuse bad indices). A broken
 * promise calls abort(), so libFuzzer (and the replay test) report it.
 * Built two ways by fuzz/CMakeLists.txt: with libFuzzer (clang) and with
 * replay_main.c, which runs the fixed corpus as a ctest case; there
 * lm_fuzz_expect() checks the outcome a seed's name promises.
 */
#include "core/log.h"
#include "gguf/gguf.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REQUIRE(c)                                                                                                \
    do {                                                                                                          \
        if (!(c)) {                                                                                               \
            fprintf(stderr, "fuzz_gguf: %s:%d: broken promise: %s\n", __FILE__, __LINE__, #c);                     \
            abort();                                                                                              \
        }                                                                                                         \
    } while (0)

static volatile unsigned sink; /* keeps the reads of values alive */

static void quiet(enum lm_log_level level, const char *text, void *user) { (void)level, (void)text, (void)user; }

static void walk_array(const struct lm_gguf *g, int64_t i)
{
    enum lm_gguf_type t;
    uint64_t n;
    const void *d = NULL;
    REQUIRE(lm_gguf_get_arr_type(g, i, &t) == LM_OK && t < LM_GGUF_TYPE_COUNT && t != LM_GGUF_ARRAY);
    REQUIRE(lm_gguf_get_arr_n(g, i, &n) == LM_OK);
    if (t == LM_GGUF_STRING) {
        REQUIRE(lm_gguf_get_arr_data(g, i, &d) == LM_ERR_CORRUPT);
        for (uint64_t j = 0; j < n; j++) {
            const char *s = NULL;
            size_t len = 0;
            REQUIRE(lm_gguf_get_arr_str(g, i, j, &s, &len) == LM_OK && s && s[len] == '\0' && strlen(s) <= len);
            sink += len ? (unsigned char)s[0] + (unsigned char)s[len - 1] : 0;
        }
        const char *s = NULL;
        REQUIRE(lm_gguf_get_arr_str(g, i, n, &s, NULL) == LM_ERR_INVALID_ARG && s == NULL);
    } else {
        REQUIRE(lm_gguf_get_arr_data(g, i, &d) == LM_OK && d != NULL);
        static const size_t es[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
        const unsigned char *b = d;
        if (n)
            sink += b[0] + b[n * es[t] - 1];
        REQUIRE(lm_gguf_get_arr_str(g, i, 0, &(const char *){NULL}, NULL) == LM_ERR_CORRUPT);
    }
}

static void walk_kv(const struct lm_gguf *g, int64_t i)
{
    const char *key = lm_gguf_key(g, i);
    REQUIRE(key && key[0]);
    int64_t f = lm_gguf_find_key(g, key);
    REQUIRE(f >= 0 && f <= i && !strcmp(lm_gguf_key(g, f), key));
    enum lm_gguf_type t = lm_gguf_kv_type(g, i);
    REQUIRE(t < LM_GGUF_TYPE_COUNT);
    uint8_t u8;
    int32_t i32;
    uint32_t u32;
    uint64_t u64;
    float f32;
    bool b;
    const char *s = NULL;
    size_t len = 0;
    REQUIRE((lm_gguf_get_u8(g, i, &u8) == LM_OK) == (t == LM_GGUF_UINT8));
    REQUIRE((lm_gguf_get_u64(g, i, &u64) == LM_OK) == (t == LM_GGUF_UINT64));
    REQUIRE((lm_gguf_get_bool(g, i, &b) == LM_OK) == (t == LM_GGUF_BOOL));
    lm_status sf = lm_gguf_get_f32(g, i, &f32); /* a FLOAT64 beyond float's range is refused */
    REQUIRE(t == LM_GGUF_FLOAT64 ? (sf == LM_OK || sf == LM_ERR_CORRUPT) : (sf == LM_OK) == (t == LM_GGUF_FLOAT32));
    lm_status si = lm_gguf_get_i32(g, i, &i32), su = lm_gguf_get_u32(g, i, &u32);
    REQUIRE((si == LM_OK || si == LM_ERR_CORRUPT) && (su == LM_OK || su == LM_ERR_CORRUPT));
    if (lm_gguf_get_str(g, i, &s, &len) == LM_OK) {
        REQUIRE(t == LM_GGUF_STRING && s && s[len] == '\0' && strlen(s) <= len);
    } else {
        REQUIRE(t != LM_GGUF_STRING);
    }
    if (t == LM_GGUF_ARRAY)
        walk_array(g, i);
    else
        REQUIRE(lm_gguf_get_arr_n(g, i, &u64) == LM_ERR_CORRUPT);
    /* text form: the same length whatever the buffer, always terminated */
    char big[512], small[7];
    int n0 = lm_gguf_value_to_string(g, i, NULL, 0);
    int n1 = lm_gguf_value_to_string(g, i, small, sizeof small);
    int n2 = lm_gguf_value_to_string(g, i, big, sizeof big);
    REQUIRE(n0 >= 0 && n0 == n1 && n1 == n2 && strlen(small) == (size_t)(n1 < 6 ? n1 : 6));
    REQUIRE(strlen(big) == (size_t)(n2 < 511 ? n2 : 511));
}

static void walk_tensor(const struct lm_gguf *g, int64_t i, const uint8_t *data, size_t size)
{
    const struct lm_gguf_tensor_info *t = lm_gguf_tensor_info(g, i);
    REQUIRE(t && t->name && t->name[0] && lm_gguf_find_tensor(g, t->name) == i);
    REQUIRE(t->n_dims >= 1 && t->n_dims <= 4 && lm_type_valid(t->type));
    uint64_t bytes = lm_row_size(t->type, t->ne[0]);
    for (int d = 0; d < 4; d++) {
        REQUIRE(t->ne[d] >= 0 && (d < t->n_dims || t->ne[d] == 1));
        if (d > 0)
            bytes *= (uint64_t)t->ne[d];
    }
    REQUIRE(t->ne[0] % lm_type_blck(t->type) == 0 && t->size == bytes);
    REQUIRE(t->offset % lm_gguf_alignment(g) == 0 && t->offset >= lm_gguf_data_offset(g));
    REQUIRE(t->offset <= size && t->size <= size - t->offset);
    if (t->size)
        sink += data[t->offset] + data[t->offset + t->size - 1];
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int once;
    if (!once) {
        lm_log_set(quiet, NULL);
        once = 1;
    }
    struct lm_gguf *g = NULL;
    char err[256] = "";
    lm_status st = lm_gguf_open_memory(data, size, &g, err, sizeof err);
    if (st != LM_OK) {
        REQUIRE(g == NULL && !strncmp(err, "gguf: ", 6));
        REQUIRE(st == LM_ERR_CORRUPT || st == LM_ERR_UNSUPPORTED);
        return 0;
    }
    size_t a = lm_gguf_alignment(g);
    REQUIRE(lm_gguf_version(g) >= 1 && lm_gguf_version(g) <= 3);
    REQUIRE(a && !(a & (a - 1)) && lm_gguf_data_offset(g) % a == 0);
    REQUIRE(lm_gguf_file_size(g) == size && lm_gguf_data(g) == data);
    int64_t n_kv = lm_gguf_n_kv(g), n_t = lm_gguf_n_tensors(g);
    REQUIRE(n_kv >= 0 && n_t >= 0 && (uint64_t)n_kv <= size && (uint64_t)n_t <= size);
    for (int64_t i = 0; i < n_kv; i++)
        walk_kv(g, i);
    for (int64_t i = 0; i < n_t; i++)
        walk_tensor(g, i, data, size);
    uint32_t u32;
    REQUIRE(lm_gguf_key(g, n_kv) == NULL && lm_gguf_key(g, -1) == NULL);
    REQUIRE(lm_gguf_get_u32(g, n_kv, &u32) == LM_ERR_INVALID_ARG);
    REQUIRE(lm_gguf_tensor_info(g, n_t) == NULL && lm_gguf_tensor_info(g, -1) == NULL);
    REQUIRE(lm_gguf_value_to_string(g, -1, NULL, 0) == -1);
    lm_gguf_close(g);
    return 0;
}

/* For replay_main.c: seeds named "bad-*" must be refused by the reader, "v*"
 * and "ok-*" must open; other names (fuzzer finds) only must not crash. */
bool lm_fuzz_expect(const char *base, const uint8_t *data, size_t size);
bool lm_fuzz_expect(const char *base, const uint8_t *data, size_t size)
{
    bool want_ok = base[0] == 'v' || !strncmp(base, "ok-", 3), want_bad = !strncmp(base, "bad-", 4);
    if (!want_ok && !want_bad)
        return true;
    struct lm_gguf *g = NULL;
    char err[256] = "";
    lm_status st = lm_gguf_open_memory(data, size, &g, err, sizeof err);
    lm_gguf_close(g);
    if ((st == LM_OK) != want_ok)
        fprintf(stderr, "fuzz_gguf: %s: %s %s\n", base, lm_status_str(st), err);
    return (st == LM_OK) == want_ok;
}
