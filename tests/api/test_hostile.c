/* test_hostile.c - hostile inputs at the API's doors (issue 21), on stories260K.
 *
 * Each case is a regression test for one overflow or complexity bug; all run
 * under ASan/UBSan in the sanitizer builds, where signed overflow aborts.
 *  (1) positions: llama_decode of llama_batch_get_one(toks, 2, INT32_MAX, 0)
 *      (second position 2^31) and of a batch whose all_pos_1 makes
 *      pos_0 + i*pos_1 pass INT32_MAX returns -1 and changes nothing; the
 *      message names the 64-bit position (the old int32 sum wrapped to a
 *      negative one). Position INT32_MAX itself is valid. llama_eval with
 *      n_past near INT32_MAX returns -1 before touching the cache; beam search
 *      near INT32_MAX stops instead of overflowing its n_past.
 *  (2) KV shift: after decoding positions 0..3, seq_shift by INT32_MAX is
 *      refused as a whole (positions unchanged, message logged); a shift up
 *      to exactly INT32_MAX is done, a decode at INT32_MAX works, and large
 *      negative shifts remove cells. State restore refuses cells whose
 *      pos - delta (the rotated position) is outside [0, INT32_MAX] and free
 *      cells with a delta or sequences, so a later shift cannot overflow the
 *      delta; a consistent state with a pending shift is accepted.
 *  (5) LoRA: an adapter of 80,000 one-element tensors (40,000 pairs) is read
 *      in well under a second (the duplicate check was a linear scan per
 *      tensor: 70 s) and gives the documented result 1: "appears twice" for
 *      a duplicate at the very end, "no tensor" when all names are distinct.
 *  (6) state size: a state with more logit rows than the context's n_batch
 *      is refused, and llama_get_state_size stays the same after every
 *      restore, so a buffer sized once always fits llama_copy_state_data.
 * Fuzz findings: a session file with trailing bytes is refused without
 * restoring its state (it was restored, then reported as refused); logit rows
 * of tokens that asked for none are zeros (they were stale memory, saved in
 * states). */
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util_api.h"

/* llama_eval (deprecated) is one of the doors tested */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

#define STORIES "models/stories260K.gguf"

static struct llama_model *M;
static char last_err[1024];

/* Keeps the latest error message (tests look for what it names). */
static void capture(enum ggml_log_level level, const char *text, void *user)
{
    (void)user;
    if (level == GGML_LOG_LEVEL_ERROR) {
        snprintf(last_err, sizeof last_err, "%s", text);
        if (getenv("LAMINA_TEST_VERBOSE"))
            fputs(text, stderr);
    }
}

static bool err_has(const char *s) { return strstr(last_err, s) != NULL; }

static struct llama_context *make_ctx(uint32_t n_ctx, uint32_t n_batch, bool logits_all)
{
    struct llama_context *ctx = api_ctx(M, n_ctx, n_batch, logits_all);
    CHECK(ctx != NULL);
    return ctx;
}

/* Positions of the first n cells (-1 when free), through the view. */
static void cell_positions(struct llama_context *ctx, int32_t *pos, int n)
{
    struct llama_kv_cache_view v = llama_kv_cache_view_init(ctx, 1);
    llama_kv_cache_view_update(ctx, &v);
    for (int i = 0; i < n; i++)
        pos[i] = i < v.n_cells ? v.cells[i].pos : -2;
    llama_kv_cache_view_free(&v);
}

static bool logits_finite(struct llama_context *ctx)
{
    const float *l = llama_get_logits(ctx);
    for (int i = 0; i < llama_n_vocab(M); i++)
        if (!isfinite(l[i]))
            return false;
    return true;
}

static double seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- (1) positions ---- */

static void test_positions(void)
{
    struct llama_context *ctx = make_ctx(32, 8, false);
    if (!ctx)
        return;
    llama_token t[4] = {1, 403, 407, 261};
    last_err[0] = 0;
    CHECK(llama_decode(ctx, llama_batch_get_one(t, 2, INT32_MAX, 0)) == -1);
    CHECKF(err_has("2147483648"), "message: %s", last_err);
    CHECK(llama_get_kv_cache_used_cells(ctx) == 0);

    struct llama_batch b = llama_batch_get_one(t, 3, 5, 0);
    b.all_pos_1 = INT32_MAX; /* 5, 5 + 2^31 - 1, ... */
    CHECK(llama_decode(ctx, b) == -1);
    b.all_pos_0 = INT32_MAX;
    b.all_pos_1 = -INT32_MAX; /* INT32_MAX, 0, -INT32_MAX */
    CHECK(llama_decode(ctx, b) == -1);
    b.all_pos_1 = INT32_MIN; /* INT32_MAX, -1, ... */
    CHECK(llama_decode(ctx, b) == -1);
    CHECK(llama_get_kv_cache_used_cells(ctx) == 0);

    /* the largest position is valid, also through a descending batch */
    CHECK(llama_decode(ctx, llama_batch_get_one(t, 1, INT32_MAX, 0)) == 0);
    CHECK(logits_finite(ctx));
    b = llama_batch_get_one(t + 1, 2, INT32_MAX, 1);
    b.all_pos_1 = -1;
    CHECK(llama_decode(ctx, b) == 0);
    CHECK(llama_get_kv_cache_used_cells(ctx) == 3);

    /* llama_eval: refused before the cache changes */
    last_err[0] = 0;
    CHECK(llama_eval(ctx, t, 2, INT32_MAX) == -1);
    CHECKF(err_has("[0, 2147483647]"), "message: %s", last_err);
    CHECK(llama_eval(ctx, t, 1, -1) == -1);
    CHECK(llama_get_kv_cache_used_cells(ctx) == 3);
    /* removes both cells at INT32_MAX (every sequence), adds one */
    CHECK(llama_eval(ctx, t, 1, INT32_MAX) == 0);
    CHECK(llama_get_kv_cache_used_cells(ctx) == 2);
    llama_free(ctx);
}

static void count_calls(void *data, struct llama_beams_state st)
{
    int *calls = data;
    calls[0]++;
    calls[1] += st.last_call;
}

/* Beam search near the last position: it stops instead of overflowing n_past. */
static void test_beam_positions(void)
{
    struct llama_context *ctx = make_ctx(32, 8, false);
    if (!ctx)
        return;
    llama_token t = 1;
    CHECK(llama_decode(ctx, llama_batch_get_one(&t, 1, INT32_MAX - 2, 0)) == 0);
    int calls[2] = {0, 0};
    last_err[0] = 0;
    llama_beam_search(ctx, count_calls, calls, 1, INT32_MAX - 1, 8);
    CHECKF(calls[1] == 1 && calls[0] >= 2 && calls[0] < 9, "%d calls, %d last", calls[0], calls[1]);
    CHECKF(err_has("stopping the search"), "message: %s", last_err);
    llama_free(ctx);
}

/* ---- (2) KV shift and restored deltas ---- */

static void test_shift(void)
{
    struct llama_context *ctx = make_ctx(32, 8, false);
    if (!ctx)
        return;
    llama_token t[4] = {1, 403, 407, 261};
    int32_t pos[5];
    CHECK(llama_decode(ctx, llama_batch_get_one(t, 4, 0, 0)) == 0);
    last_err[0] = 0;
    llama_kv_cache_seq_shift(ctx, 0, 0, -1, INT32_MAX); /* 1 + INT32_MAX passes the limit: refused */
    CHECKF(err_has("nothing shifted"), "message: %s", last_err);
    cell_positions(ctx, pos, 5);
    CHECKF(pos[0] == 0 && pos[1] == 1 && pos[2] == 2 && pos[3] == 3 && pos[4] == -1, "positions %d %d %d %d %d",
           pos[0], pos[1], pos[2], pos[3], pos[4]);
    /* p1 < 0 has no upper bound: a shift up to exactly INT32_MAX - 1 */
    llama_kv_cache_seq_shift(ctx, 0, 0, -1, INT32_MAX - 4);
    cell_positions(ctx, pos, 4);
    CHECK(pos[0] == INT32_MAX - 4 && pos[3] == INT32_MAX - 1);
    CHECK(llama_decode(ctx, llama_batch_get_one(t, 1, INT32_MAX, 0)) == 0); /* applies the K shift */
    CHECK(logits_finite(ctx));
    llama_kv_cache_seq_shift(ctx, 0, INT32_MAX, -1, 1); /* the cell at INT32_MAX cannot move up */
    cell_positions(ctx, pos, 5);
    CHECK(pos[4] == INT32_MAX);
    llama_kv_cache_seq_shift(ctx, 0, -1, -1, INT32_MIN); /* every cell goes below 0: removed */
    CHECK(llama_get_kv_cache_used_cells(ctx) == 0);

    /* restored deltas: decode 0..3, shift seq 0 by +10 (pending: delta 10) */
    llama_kv_cache_clear(ctx);
    CHECK(llama_decode(ctx, llama_batch_get_one(t, 4, 0, 0)) == 0);
    llama_kv_cache_seq_shift(ctx, 0, 0, -1, 10);
    size_t cap = llama_get_state_size(ctx);
    uint8_t *st = malloc(cap), *bad = malloc(cap);
    size_t n = llama_copy_state_data(ctx, st);
    CHECK(n > 0 && n <= cap);
    /* find cell 0: after magic, version, rng, logits, embedding and the KV header */
    size_t off = 8, rl, rows, nv, ne;
    memcpy(&rl, st + off, 8);
    off += 8 + rl;
    memcpy(&rows, st + off, 8);
    memcpy(&nv, st + off + 8, 8);
    off += 16 + rows * nv * 4;
    memcpy(&ne, st + off, 8);
    off += 8 + ne * 4 + 9 * 4;
    int32_t pd[2];
    memcpy(pd, st + off, 8);
    CHECKF(pd[0] == 10 && pd[1] == 10, "cell 0: pos %d delta %d (layout changed?)", pd[0], pd[1]);

    struct llama_context *ctx2 = make_ctx(32, 8, false);
    if (ctx2) {
        CHECK(llama_set_state_data(ctx2, st) == n); /* consistent, with a pending shift */
        static const int32_t bad_cells[][2] = {
            {2, -INT32_MAX},    /* rotated position 2 + INT32_MAX */
            {10, 11},           /* rotated position -1 */
            {10, INT32_MIN},    /* rotated position 10 + 2^31 */
            {INT32_MAX, -1},    /* rotated position 2^31 */
            {-1, 10},           /* a free cell with a delta (its sequence mask also set) */
            {-5, 0},
        };
        for (size_t k = 0; k < sizeof bad_cells / sizeof bad_cells[0]; k++) {
            memcpy(bad, st, n);
            memcpy(bad + off, bad_cells[k], 8);
            llama_kv_cache_clear(ctx2);
            CHECKF(llama_set_state_data(ctx2, bad) == 0, "cell pos %d delta %d accepted", bad_cells[k][0],
                   bad_cells[k][1]);
            CHECK(llama_get_kv_cache_used_cells(ctx2) == 0);
            /* a later shift must not overflow anything */
            llama_kv_cache_seq_shift(ctx2, 0, -1, -1, -10);
            llama_kv_cache_seq_shift(ctx2, 0, -1, -1, INT32_MAX - 20);
        }
        /* a free cell with a delta but no sequence */
        memcpy(bad, st, n);
        int32_t free_delta[2] = {-1, 3};
        uint64_t no_seq = 0;
        memcpy(bad + off, free_delta, 8);
        memcpy(bad + off + 8, &no_seq, 8);
        CHECK(llama_set_state_data(ctx2, bad) == 0);
        /* the good state again, shifted to the limits and back, then decoded */
        CHECK(llama_set_state_data(ctx2, st) == n);
        llama_kv_cache_seq_shift(ctx2, 0, -1, -1, INT32_MAX - 13);
        llama_kv_cache_seq_shift(ctx2, 0, -1, -1, -(INT32_MAX - 13));
        cell_positions(ctx2, pos, 4);
        CHECK(pos[0] == 10 && pos[3] == 13);
        CHECK(llama_decode(ctx2, llama_batch_get_one(t, 1, 14, 0)) == 0);
        CHECK(logits_finite(ctx2));
        llama_free(ctx2);
    }
    free(st);
    free(bad);
    llama_free(ctx);
}

/* ---- (5) LoRA tensor table ---- */

struct buf {
    uint8_t *p;
    size_t n, cap;
};

static void put(struct buf *b, const void *src, size_t n)
{
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
    }
    if (src)
        memcpy(b->p + b->n, src, n);
    else
        memset(b->p + b->n, 0, n);
    b->n += n;
}

static void put_i32(struct buf *b, int32_t v) { put(b, &v, 4); }

/* One 1-D F32 tensor of one element. */
static void put_tensor(struct buf *b, const char *name)
{
    put_i32(b, 1);
    put_i32(b, (int32_t)strlen(name));
    put_i32(b, 0);
    put_i32(b, 1);
    put(b, name, strlen(name));
    put(b, NULL, (32 - b->n % 32) % 32);
    float v = 0.5f;
    put(b, &v, 4);
}

#define PREFIX "blk.attention_feed_forward_norm.weight"

static void lora_case(int n_pairs, bool dup_at_end, const char *want)
{
    struct buf b = {0};
    put_i32(&b, (int32_t)LLAMA_FILE_MAGIC_GGLA);
    put_i32(&b, 1);
    put_i32(&b, 1);
    put_i32(&b, 1);
    /* names that differ only near the end, so that every string comparison of
     * a linear scan runs long (as real tensor names do) */
    char name[64];
    for (int i = 0; i < n_pairs; i++) {
        snprintf(name, sizeof name, "%s%06d.loraA", PREFIX, i);
        put_tensor(&b, name);
        snprintf(name, sizeof name, "%s%06d.loraB", PREFIX, i);
        put_tensor(&b, name);
    }
    snprintf(name, sizeof name, "%s%06d.loraA", PREFIX, 0);
    if (dup_at_end)
        put_tensor(&b, name);
    const char *path = api_tmp_path("hostile.ggla");
    CHECK(api_write_file(path, b.p, b.n));
    free(b.p);
    last_err[0] = 0;
    double t0 = seconds();
    int32_t r = llama_model_apply_lora_from_file(M, path, 1.0f, NULL, 1);
    double dt = seconds() - t0;
    remove(path);
    CHECK(r == 1);
    CHECKF(err_has(want), "want '%s', got: %s", want, last_err);
    /* linear: ~0.2 s for 80k tensors (release); the quadratic scan took 25 s and more */
    CHECKF(dt < 5.0, "%d tensors took %.2f s", 2 * n_pairs + dup_at_end, dt);
    if (getenv("LAMINA_TEST_VERBOSE"))
        fprintf(stderr, "lora: %d tensors in %.3f s\n", 2 * n_pairs + dup_at_end, dt);
}

static void test_lora_table(void)
{
    lora_case(40000, true, "appears twice");
    lora_case(40000, false, "no tensor '" PREFIX "000000'");
}

/* ---- (6) state size ---- */

static void test_state_size(void)
{
    struct llama_context *big = make_ctx(64, 32, true), *ctx = make_ctx(64, 8, true);
    if (!big || !ctx) {
        llama_free(big);
        llama_free(ctx);
        return;
    }
    llama_token t[20];
    for (int i = 0; i < 20; i++)
        t[i] = 260 + i;
    CHECK(llama_decode(big, llama_batch_get_one(t, 20, 0, 0)) == 0); /* 20 logit rows */
    size_t big_cap = llama_get_state_size(big);
    uint8_t *big_state = malloc(big_cap);
    size_t big_n = llama_copy_state_data(big, big_state);

    size_t size0 = llama_get_state_size(ctx);
    uint8_t *buf = malloc(size0);
    last_err[0] = 0;
    CHECK(llama_set_state_data(ctx, big_state) == 0); /* 20 rows > n_batch 8 */
    CHECKF(err_has("logit rows"), "message: %s", last_err);
    CHECK(llama_get_state_size(ctx) == size0);
    CHECK(llama_copy_state_data(ctx, buf) <= size0);

    /* a session file with the same state: refused too */
    const char *path = api_tmp_path("hostile.session");
    CHECK(llama_save_session_file(big, path, t, 20));
    llama_token toks[32];
    size_t nt = 0;
    CHECK(!llama_load_session_file(ctx, path, toks, 32, &nt));
    remove(path);
    CHECK(llama_get_state_size(ctx) == size0);

    /* a state with rows <= n_batch round-trips, and the size stays */
    CHECK(llama_decode(ctx, llama_batch_get_one(t, 8, 0, 0)) == 0);
    size_t n = llama_copy_state_data(ctx, buf);
    CHECK(n > 0 && n <= size0);
    CHECK(llama_set_state_data(ctx, buf) == n);
    CHECK(llama_get_state_size(ctx) == size0);
    /* the big context still takes its own state */
    CHECK(llama_set_state_data(big, big_state) == big_n);
    free(buf);
    free(big_state);
    llama_free(big);
    llama_free(ctx);
}

/* ---- fuzz findings ---- */

/* fuzz_state: a session file with bytes after its state was reported as
 * refused (false) after the state had been restored. */
static void test_session_trailing_bytes(void)
{
    struct llama_context *a = make_ctx(32, 8, false), *b = make_ctx(32, 8, false);
    if (!a || !b) {
        llama_free(a);
        llama_free(b);
        return;
    }
    llama_token t[5] = {1, 403, 407, 261, 378};
    CHECK(llama_decode(a, llama_batch_get_one(t, 3, 0, 0)) == 0);
    CHECK(llama_decode(b, llama_batch_get_one(t, 5, 0, 0)) == 0);
    size_t cap = llama_get_state_size(a);
    uint8_t *s0 = malloc(cap), *s1 = malloc(cap);
    size_t n0 = llama_copy_state_data(a, s0);
    const char *path = api_tmp_path("trailing.session");
    CHECK(llama_save_session_file(b, path, t, 5));
    FILE *f = fopen(path, "ab");
    CHECK(f && fputc(0, f) == 0 && fclose(f) == 0);
    llama_token toks[8];
    size_t nt = 0;
    CHECK(!llama_load_session_file(a, path, toks, 8, &nt));
    CHECK(llama_copy_state_data(a, s1) == n0 && !memcmp(s0, s1, n0)); /* nothing changed */
    CHECK(llama_get_kv_cache_used_cells(a) == 3);
    remove(path);
    free(s0);
    free(s1);
    llama_free(a);
    llama_free(b);
}

/* make_corpus (two runs gave different states): rows of tokens without
 * logits held stale or uninitialised memory, which llama_copy_state_data
 * then saved. They are zeros. */
static void test_unrequested_rows(void)
{
    struct llama_context *ctx = make_ctx(32, 8, false);
    if (!ctx)
        return;
    struct llama_batch b = llama_batch_init(4, 0, 1);
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < 4; i++) {
            b.token[i] = 300 + i;
            b.pos[i] = 4 * pass + i;
            b.n_seq_id[i] = 1;
            b.seq_id[i][0] = 0;
            b.logits[i] = (int8_t)(pass == 0 || i % 2); /* first all rows, then rows 1 and 3 */
        }
        b.n_tokens = 4;
        CHECK(llama_decode(ctx, b) == 0);
    }
    const float *l = llama_get_logits(ctx);
    int n_vocab = llama_n_vocab(M), nonzero = 0;
    for (int r = 0; r < 4; r += 2)
        for (int j = 0; j < n_vocab; j++)
            nonzero += l[(size_t)r * (size_t)n_vocab + (size_t)j] != 0.0f;
    CHECKF(nonzero == 0, "%d values in rows 0 and 2, which asked for no logits", nonzero);
    CHECK(logits_finite(ctx) && llama_get_logits_ith(ctx, 1)[0] != 0.0f);
    llama_batch_free(b);
    llama_free(ctx);
}

int main(void)
{
    M = api_start(STORIES);
    if (!M)
        return lm_test_summary();
    llama_log_set(capture, NULL);
    test_positions();
    test_beam_positions();
    test_shift();
    test_lora_table();
    test_state_size();
    test_session_trailing_bytes();
    test_unrequested_rows();
    llama_free_model(M);
    return lm_test_summary();
}
