/* fuzz_batch.c - fuzz target for batches, llama_decode and the KV cache calls.
 *
 * Once per process: stories260K and one context (n_ctx 16, n_batch 8, so the
 * cache fills and wraps quickly). Each input clears the cache and runs as a
 * byte program: an opcode byte, then its operands (missing bytes read as 0):
 *   0 get_one: n, pos_0, seq, tokens        llama_batch_get_one + llama_decode
 *   1 batch:   n, then per token: token, pos, n_seq_id, seq ids, logits flag
 *   2 stride:  n, pos_0, pos_1, seq, tokens  (all_pos_0 + i * all_pos_1)
 *   3 rm seq p0 p1   4 cp src dst p0 p1   5 keep seq   6 shift seq p0 p1 delta
 *   7 div seq p0 p1 d   8 clear   9 eval n n_past, tokens   10 eval_embd n n_past
 *   11 logits row i   12 nothing
 * (the opcode is taken modulo 13; at most 64 operations per input).
 * Integers come from a selector byte: small values, edge values (0, +-1,
 * INT32_MAX, INT32_MIN, n_ctx, ...) or four raw bytes. Tokens may be outside
 * the vocabulary and sequence ids outside [0, 64).
 * Promises checked (abort() when broken): decode returns 0, 1 or -1 (never
 * -2); the logits of a successful decode are finite; the cache view agrees
 * with used_cells / token_count and every used cell has a sequence; the
 * logits row getter gives NULL or a row of a computed token. Sanitizer
 * reports (signed overflow in positions and deltas) are findings.
 */
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llama.h"

#define REQUIRE(c)                                                                                                \
    do {                                                                                                          \
        if (!(c)) {                                                                                               \
            fprintf(stderr, "fuzz_batch: %s:%d: broken promise: %s\n", __FILE__, __LINE__, #c);                    \
            abort();                                                                                              \
        }                                                                                                         \
    } while (0)

#pragma GCC diagnostic ignored "-Wdeprecated-declarations" /* llama_eval(_embd) are doors too */

#define N_CTX 16
#define N_BATCH 8
#define MAX_OPS 64

static struct llama_model *model;
static struct llama_context *ctx;
static int32_t n_vocab, n_embd;

struct prog {
    const uint8_t *p;
    size_t n, off;
};

static uint8_t byte(struct prog *g) { return g->off < g->n ? g->p[g->off++] : 0; }

static int32_t int_val(struct prog *g)
{
    static const int32_t edges[] = {0, 1, -1, 2, INT32_MAX, INT32_MIN, INT32_MAX - 1, INT32_MIN + 1, N_CTX, N_CTX - 1,
                                    N_BATCH, 1 << 30, -(1 << 30), INT32_MAX / 2, 65535, -65536};
    uint8_t s = byte(g);
    if (s < 0xa0)
        return (int32_t)s - 0x40; /* -64 .. 95 */
    if (s < 0xf0)
        return edges[(s - 0xa0) % (sizeof edges / sizeof edges[0])];
    uint32_t v = 0;
    for (int i = 0; i < 4; i++)
        v |= (uint32_t)byte(g) << (8 * i);
    int32_t r;
    memcpy(&r, &v, 4);
    return r;
}

static int32_t seq_val(struct prog *g) { return (int32_t)(byte(g) % 72) - 4; } /* -4 .. 67, mostly valid */

static llama_token token_val(struct prog *g)
{
    uint8_t b = byte(g);
    return b == 0xff ? n_vocab : b == 0xfe ? -1 : (llama_token)(b * 2 % n_vocab);
}

static int32_t count_val(struct prog *g) { return (int32_t)(byte(g) % (N_BATCH + 2)); } /* 0 .. n_batch + 1 */

static void quiet(enum ggml_log_level level, const char *text, void *user) { (void)level, (void)text, (void)user; }

static void check_logits(int32_t r, int32_t n, const int8_t *want)
{
    REQUIRE(r == 0 || r == 1 || r == -1);
    if (r != 0)
        return;
    for (int32_t i = 0; i < n; i++) {
        if (want && !want[i])
            continue;
        const float *row = want ? llama_get_logits_ith(ctx, i) : llama_get_logits(ctx);
        REQUIRE(row != NULL);
        for (int32_t j = 0; j < n_vocab; j++)
            REQUIRE(isfinite(row[j]));
        if (!want)
            break;
    }
}

static void check_cache(void)
{
    struct llama_kv_cache_view v = llama_kv_cache_view_init(ctx, 64);
    llama_kv_cache_view_update(ctx, &v);
    int32_t used = 0, tokens = 0;
    for (int32_t i = 0; i < v.n_cells; i++) {
        int32_t n_seq = 0;
        for (int32_t s = 0; s < v.n_max_seq; s++)
            n_seq += v.cells_sequences[(size_t)i * (size_t)v.n_max_seq + (size_t)s] >= 0;
        REQUIRE(v.cells[i].pos >= -1);
        REQUIRE((v.cells[i].pos >= 0) == (n_seq > 0));
        used += v.cells[i].pos >= 0;
        tokens += n_seq;
    }
    REQUIRE(v.n_cells == N_CTX);
    REQUIRE(used == llama_get_kv_cache_used_cells(ctx) && used == v.used_cells);
    REQUIRE(tokens == llama_get_kv_cache_token_count(ctx) && tokens == v.token_count);
    llama_kv_cache_view_free(&v);
}

static void op_get_one(struct prog *g, bool stride)
{
    int32_t n = count_val(g), pos0 = int_val(g), pos1 = stride ? int_val(g) : 1, seq = seq_val(g);
    llama_token t[N_BATCH + 2];
    for (int32_t i = 0; i < n; i++)
        t[i] = token_val(g);
    struct llama_batch b = llama_batch_get_one(t, n, pos0, seq);
    b.all_pos_1 = pos1;
    check_logits(llama_decode(ctx, b), n, NULL);
}

static void op_batch(struct prog *g)
{
    int32_t n = count_val(g);
    struct llama_batch b = llama_batch_init(N_BATCH + 2, 0, 4);
    REQUIRE(b.token != NULL);
    for (int32_t i = 0; i < n; i++) {
        b.token[i] = token_val(g);
        b.pos[i] = int_val(g);
        uint8_t ns = byte(g);
        /* mostly 1..4, sometimes 0 or negative; never above the 4 ids a row holds
         * (a longer claim is a client bug the library cannot see) */
        b.n_seq_id[i] = ns < 0xf0 ? 1 + ns % 4 : (int32_t)(ns % 7) - 2;
        for (int32_t s = 0; s < 4; s++)
            b.seq_id[i][s] = s < b.n_seq_id[i] ? seq_val(g) : 0;
        b.logits[i] = (int8_t)(byte(g) & 1);
    }
    b.n_tokens = n;
    check_logits(llama_decode(ctx, b), n, b.logits);
    llama_batch_free(b);
}

static void op_eval(struct prog *g, bool embd)
{
    int32_t n = count_val(g), n_past = int_val(g);
    llama_token t[N_BATCH + 2];
    float *e = malloc((size_t)(N_BATCH + 2) * (size_t)n_embd * sizeof *e);
    REQUIRE(e != NULL);
    for (int32_t i = 0; i < n; i++)
        t[i] = token_val(g);
    for (int32_t i = 0; i < (N_BATCH + 2) * n_embd; i++)
        e[i] = (float)(((uint32_t)i * 37u + (uint32_t)n_past) % 17u) / 8.0f - 1.0f;
    int r = embd ? llama_eval_embd(ctx, e, n, n_past) : llama_eval(ctx, t, n, n_past);
    free(e);
    check_logits(r, n, NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!model) {
        llama_backend_init(false);
        llama_log_set(getenv("LM_FUZZ_VERBOSE") ? NULL : quiet, NULL); /* logs to stderr when set */
        model = llama_load_model_from_file(LM_SHARED_DIR "/models/stories260K.gguf", llama_model_default_params());
        REQUIRE(model != NULL);
        struct llama_context_params cp = llama_context_default_params();
        cp.n_ctx = N_CTX;
        cp.n_batch = N_BATCH;
        cp.n_threads = cp.n_threads_batch = 1;
        cp.seed = 1;
        ctx = llama_new_context_with_model(model, cp);
        REQUIRE(ctx != NULL);
        n_vocab = llama_n_vocab(model);
        n_embd = llama_n_embd(model);
    }
    llama_kv_cache_clear(ctx);
    struct prog g = {data, size, 0};
    for (int k = 0; k < MAX_OPS && g.off < g.n; k++) {
        int32_t a, b, c, d;
        switch (byte(&g) % 13) {
        case 0: op_get_one(&g, false); break;
        case 1: op_batch(&g); break;
        case 2: op_get_one(&g, true); break;
        case 3: a = seq_val(&g), b = int_val(&g), c = int_val(&g); llama_kv_cache_seq_rm(ctx, a, b, c); break;
        case 4:
            a = seq_val(&g), b = seq_val(&g), c = int_val(&g), d = int_val(&g);
            llama_kv_cache_seq_cp(ctx, a, b, c, d);
            break;
        case 5: llama_kv_cache_seq_keep(ctx, seq_val(&g)); break;
        case 6:
            a = seq_val(&g), b = int_val(&g), c = int_val(&g), d = int_val(&g);
            llama_kv_cache_seq_shift(ctx, a, b, c, d);
            break;
        case 7:
            a = seq_val(&g), b = int_val(&g), c = int_val(&g), d = int_val(&g);
            llama_kv_cache_seq_div(ctx, a, b, c, d);
            break;
        case 8: llama_kv_cache_clear(ctx); break;
        case 9: op_eval(&g, false); break;
        case 10: op_eval(&g, true); break;
        case 11: {
            const float *row = llama_get_logits_ith(ctx, int_val(&g));
            if (row) { /* a whole row is readable */
                volatile float x = row[0] + row[n_vocab - 1];
                (void)x;
            }
            break;
        }
        default: break;
        }
        check_cache();
    }
    return 0;
}
