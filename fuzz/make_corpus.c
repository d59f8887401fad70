/* make_corpus.c - writes the seed corpora of fuzz_vocab, fuzz_state,
 * fuzz_batch, fuzz_lora and fuzz_model (fuzz/corpus/<name>/), in the input
 * formats their headers describe. States, sessions and adapters are made with
 * lamina itself on stories260K, so the seeds reach deep into the readers at
 * once; the model seeds are the architecture fixtures shrunk to width 8.
 *   cmake --build BUILD --target make_fuzz_corpus
 *   BUILD/fuzz/make_fuzz_corpus fuzz/corpus
 * Seeds are overwritten by name; files found by libFuzzer and added by hand
 * (named fz-*) are not touched. The output is committed; rerun after changing
 * a target's input format. Every seed is small (the largest, the model seeds of
 * baichuan, whose 32 and 40 layers its loader requires, 90-100 KB; the other
 * model seeds about 30 KB).
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/fp16.h"
#include "core/tensor.h"
#include "gguf/gguf.h"
#include "llama.h"
#include "model/loader.h"
#include "quant/quant.h"

static const char *out_dir;
static int n_written;

static void quiet(enum ggml_log_level level, const char *text, void *user) { (void)level, (void)text, (void)user; }

static void write_seed(const char *target, const char *name, const void *a, size_t na, const void *b, size_t nb)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", out_dir, target);
    mkdir(path, 0755);
    snprintf(path, sizeof path, "%s/%s/%s", out_dir, target, name);
    FILE *f = fopen(path, "wb");
    if (!f || (na && fwrite(a, 1, na, f) != na) || (nb && fwrite(b, 1, nb, f) != nb) || fclose(f) != 0) {
        fprintf(stderr, "make_corpus: cannot write %s\n", path);
        exit(1);
    }
    n_written++;
}

/* ---- growable byte buffers ---- */

struct buf {
    uint8_t *p;
    size_t n, cap;
};

static void put(struct buf *b, const void *src, size_t n)
{
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
        if (!b->p)
            exit(1);
    }
    if (src)
        memcpy(b->p + b->n, src, n);
    else
        memset(b->p + b->n, 0, n);
    b->n += n;
}

static void put_u8(struct buf *b, uint8_t v) { put(b, &v, 1); }
static void put_i32(struct buf *b, int32_t v) { put(b, &v, 4); }

/* ---- fuzz_vocab: byte 0 vocab, byte 1 flags, then text or ids ---- */

static void vocab_seeds(void)
{
    static const char *texts[] = {
        "Hello world",
        " Hello World! How are you? 123 4567 89",
        "<s>hello</s> <|endoftext|> <unk> [CLS]",
        "   spaces\t\ttabs\n\nnewlines  \n ",
        ("caf\xc3\xa9 na\xc3\xafve \xe4\xbd\xa0\xe5\xa5\xbd \xec\x95\x88\xeb\x85\x95 "
         "\xf0\x9f\x98\x80 \xd0\xbf\xd1\x80\xd0\xb8"),
        "\xff\xfe\xc3\x28\xe2\x82 broken \xf0\x9f utf8 \x80\x80",
        "I've they'll we'd 3.14159 $100 a+b=c <tag> ~^|",
        "\xef\xb7\xba \xe2\x85\xa8 \xef\xbc\xa1 ligature \xef\xac\x81",
    };
    int nt = (int)(sizeof texts / sizeof texts[0]);
    char name[64];
    for (int v = 0; v < 14; v++) { /* one text per vocab, flags varying */
        const char *t = texts[v % nt];
        uint8_t hdr[2] = {(uint8_t)v, (uint8_t)(v % 4)};
        snprintf(name, sizeof name, "text-%02d", v);
        write_seed("vocab", name, hdr, 2, t, strlen(t));
    }
    for (int i = 0; i < nt; i++) { /* every text on vocab 0 with special on */
        uint8_t hdr[2] = {(uint8_t)(i * 3), 3};
        snprintf(name, sizeof name, "special-%02d", i);
        write_seed("vocab", name, hdr, 2, texts[i], strlen(texts[i]));
    }
    int32_t ids[12] = {0, 1, 2, 3, 259, 260, 500, 1000, 50000, -1, INT32_MAX, INT32_MIN};
    for (int v = 0; v < 3; v++) {
        uint8_t hdr[2] = {(uint8_t)(v * 5), 4};
        snprintf(name, sizeof name, "ids-%02d", v);
        write_seed("vocab", name, hdr, 2, ids, sizeof ids);
    }
    struct buf b = {0};
    put_u8(&b, 7);
    put_u8(&b, 0);
    for (int i = 0; i < 256; i++)
        put_u8(&b, (uint8_t)(i % 3 == 0 ? ' ' : 'a' + i % 26));
    write_seed("vocab", "long-words", b.p, b.n, NULL, 0);
    free(b.p);
}

/* ---- fuzz_state: mode byte, then a state / session / patch list ---- */

static struct llama_context *state_ctx(struct llama_model *m)
{
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 32; /* as fuzz_state.c */
    cp.n_batch = 8;
    cp.n_threads = cp.n_threads_batch = 1;
    cp.seed = 1;
    return llama_new_context_with_model(m, cp);
}

static void save_state(struct llama_context *ctx, const char *name, const llama_token *toks, uint32_t nt)
{
    size_t cap = llama_get_state_size(ctx);
    uint8_t *s = malloc(cap);
    size_t n = llama_copy_state_data(ctx, s);
    uint8_t mode0 = 0;
    char fname[64];
    snprintf(fname, sizeof fname, "state-%s", name);
    write_seed("state", fname, &mode0, 1, s, n);
    /* the same as a session file: mode 1, token capacity, header, tokens, state */
    struct buf b = {0};
    put_u8(&b, 1);
    put_u8(&b, 16);
    put_i32(&b, (int32_t)LLAMA_SESSION_MAGIC);
    put_i32(&b, LLAMA_SESSION_VERSION);
    put_i32(&b, (int32_t)nt);
    put(&b, toks, nt * sizeof *toks);
    put(&b, s, n);
    snprintf(fname, sizeof fname, "session-%s", name);
    write_seed("state", fname, b.p, b.n, NULL, 0);
    free(b.p);
    free(s);
}

static void state_seeds(struct llama_model *m)
{
    struct llama_context *ctx = state_ctx(m);
    llama_token t[8] = {1, 403, 407, 261, 378, 432, 383, 286};
    save_state(ctx, "empty", t, 0);
    llama_decode(ctx, llama_batch_get_one(t, 3, 0, 0));
    save_state(ctx, "three", t, 3);
    llama_decode(ctx, llama_batch_get_one(t + 3, 5, 3, 0));
    llama_kv_cache_seq_cp(ctx, 0, 1, 0, 4);
    llama_kv_cache_seq_rm(ctx, 0, 1, 3);
    llama_kv_cache_seq_shift(ctx, 0, 3, -1, -2); /* a pending shift: deltas in the state */
    save_state(ctx, "shifted", t, 8);
    llama_kv_cache_seq_div(ctx, 1, 0, -1, 2);
    save_state(ctx, "divided", t, 8);
    llama_free(ctx);
    /* several logit rows */
    ctx = state_ctx(m);
    struct llama_batch b = llama_batch_init(8, 0, 1);
    for (int i = 0; i < 8; i++) {
        b.token[i] = t[i];
        b.pos[i] = 100 + 2 * i;
        b.n_seq_id[i] = 1;
        b.seq_id[i][0] = i % 3;
        b.logits[i] = (int8_t)(i % 2);
    }
    b.n_tokens = 8;
    llama_decode(ctx, b);
    llama_batch_free(b);
    save_state(ctx, "rows", t, 8);
    llama_free(ctx);
    /* patch lists (mode 2): a few bytes each at the KV cell table, the header, the end */
    static const uint8_t patches[][7] = {
        {2, 0x00, 0x00, 0x01, 0x10, 0x00, 0x80}, {2, 0x08, 0x00, 0xff, 0x09, 0x00, 0x7f},
        {2, 0x40, 0x4c, 0x80, 0x44, 0x4c, 0x01}, {2, 0x50, 0x4c, 0xff, 0x54, 0x4c, 0x80},
        {2, 0xff, 0xff, 0x01, 0x20, 0x20, 0x20},
    };
    char name[32];
    for (size_t i = 0; i < sizeof patches / sizeof patches[0]; i++) {
        snprintf(name, sizeof name, "patch-%zu", i);
        write_seed("state", name, patches[i], sizeof patches[i], NULL, 0);
    }
    uint8_t junk[] = {0, 'L', 'M', 'S', 'T', 1, 0, 0, 0, 0xff, 0xff};
    write_seed("state", "junk", junk, sizeof junk, NULL, 0);
}

/* ---- fuzz_batch: byte programs ---- */

enum { OP_ONE, OP_BATCH, OP_STRIDE, OP_RM, OP_CP, OP_KEEP, OP_SHIFT, OP_DIV, OP_CLEAR, OP_EVAL, OP_EVAL_EMBD, OP_ROW };
#define I(v) (uint8_t)((v) + 0x40)  /* small integer -64 .. 95 */
#define E_MAX 0xa4                  /* edge values of fuzz_batch.c */
#define E_MIN 0xa5
#define E_MAX_1 0xa6
#define S(v) (uint8_t)((v) + 4)     /* sequence id */

#define BATCH_SEED(name, ...)                                                                                     \
    do {                                                                                                          \
        static const uint8_t prog_[] = {__VA_ARGS__};                                                             \
        write_seed("batch", name, prog_, sizeof prog_, NULL, 0);                                                  \
    } while (0)

static void batch_seeds(void)
{
    BATCH_SEED("prompt", OP_ONE, 5, I(0), S(0), 1, 2, 3, 4, 5, OP_ONE, 1, I(5), S(0), 6);
    BATCH_SEED("shift", OP_ONE, 8, I(0), S(0), 1, 2, 3, 4, 5, 6, 7, 8, OP_RM, S(0), I(1), I(4), OP_SHIFT, S(0), I(4),
               I(-1), I(-3), OP_ONE, 1, I(5), S(0), 9);
    /* tokens: token, pos, n_seq_id byte (0 -> 1, 1 -> 2), ids, logits flag */
    BATCH_SEED("multi", OP_BATCH, 3, 1, I(0), 1, S(0), S(1), 1, 2, I(1), 0, S(1), 0, 3, I(0), 0, S(2), 1, OP_CP, S(1),
               S(3), I(-1), I(-1), OP_KEEP, S(3), OP_ONE, 1, I(2), S(3), 4);
    BATCH_SEED("div", OP_ONE, 6, I(0), S(0), 1, 2, 3, 4, 5, 6, OP_DIV, S(0), I(0), I(-1), I(2), OP_ONE, 1, I(3), S(0),
               7);
    BATCH_SEED("eval", OP_EVAL, 4, I(0), 1, 2, 3, 4, OP_EVAL, 2, I(2), 5, 6, OP_EVAL_EMBD, 2, I(4), OP_ROW, I(0));
    BATCH_SEED("overflow", OP_ONE, 2, E_MAX, S(0), 1, 2, OP_ONE, 1, E_MAX, S(0), 1, OP_SHIFT, S(0), I(-1), I(-1),
               E_MAX, OP_EVAL, 2, E_MAX, 1, 2);
    BATCH_SEED("stride", OP_STRIDE, 3, I(0), E_MAX_1, S(0), 1, 2, 3, OP_STRIDE, 3, E_MAX, E_MIN, S(0), 1, 2, 3,
               OP_STRIDE, 4, I(10), I(-2), S(1), 1, 2, 3, 4);
    BATCH_SEED("fill", OP_ONE, 8, I(0), S(0), 1, 2, 3, 4, 5, 6, 7, 8, OP_ONE, 8, I(8), S(0), 1, 2, 3, 4, 5, 6, 7, 8,
               OP_ONE, 1, I(16), S(0), 1, OP_CLEAR, OP_ONE, 1, I(0), S(1), 1);
    BATCH_SEED("badseq", OP_BATCH, 2, 1, I(0), 0xf0, 0, 2, I(1), 0, S(70), 1, OP_ONE, 1, I(0), S(-3), 1, OP_KEEP,
               S(-1));
    BATCH_SEED("rows", OP_BATCH, 4, 1, I(0), 0, S(0), 1, 2, I(1), 0, S(0), 1, 3, I(2), 0, S(0), 0, 4, I(3), 0, S(0), 1,
               OP_ROW, I(1), OP_ROW, I(2), OP_ROW, I(3), OP_ROW, I(-1));
}

/* ---- fuzz_lora: option byte, then a 'ggla' file ---- */

struct lt {
    const char *weight; /* model tensor */
    int type;           /* 0 F32, 1 F16 */
    int32_t r, rb;      /* ranks of A and of B (rb 0: r) */
};

static void put_lora_tensor(struct buf *b, const char *name, int type, int32_t ne0, int32_t ne1, uint32_t seed)
{
    put_i32(b, 2);
    put_i32(b, (int32_t)strlen(name));
    put_i32(b, type);
    put_i32(b, ne0);
    put_i32(b, ne1);
    put(b, name, strlen(name));
    put(b, NULL, (32 - b->n % 32) % 32);
    for (int32_t i = 0; i < ne0 * ne1; i++) {
        float v = (float)((int32_t)((seed + (uint32_t)i * 2654435761u) >> 24) - 128) / 4096.0f;
        if (type == 0) {
            put(b, &v, 4);
        } else {
            lm_fp16 h = lm_fp32_to_fp16(v);
            put(b, &h, 2);
        }
    }
}

static void lora_file(struct llama_model *m, struct buf *b, const struct lt *ts, int n, int32_t r_hdr)
{
    put_i32(b, (int32_t)LLAMA_FILE_MAGIC_GGLA);
    put_i32(b, 1);
    put_i32(b, r_hdr);
    put_i32(b, 2 * r_hdr);
    char name[96];
    for (int i = 0; i < n; i++) {
        const struct lm_tensor *w = (const struct lm_tensor *)llama_get_model_tensor(m, ts[i].weight);
        if (!w) {
            fprintf(stderr, "make_corpus: stories260K has no %s\n", ts[i].weight);
            exit(1);
        }
        snprintf(name, sizeof name, "%s.loraA", ts[i].weight);
        put_lora_tensor(b, name, ts[i].type, ts[i].r, (int32_t)w->ne[0], 1u + (uint32_t)i);
        snprintf(name, sizeof name, "%s.loraB", ts[i].weight);
        put_lora_tensor(b, name, ts[i].type, ts[i].rb ? ts[i].rb : ts[i].r, (int32_t)w->ne[1], 7u + (uint32_t)i);
    }
}

static void lora_seed(const char *name, uint8_t opt, const struct buf *b, size_t cut)
{
    write_seed("lora", name, &opt, 1, b->p, cut ? cut : b->n);
}

static void lora_seeds(struct llama_model *m)
{
    static const struct lt one[] = {{"blk.0.attn_q.weight", 0, 2, 0}};
    static const struct lt f16[] = {{"blk.1.ffn_down.weight", 1, 1, 0}};
    static const struct lt three[] = {{"blk.0.attn_k.weight", 0, 1, 0}, {"blk.2.ffn_up.weight", 1, 2, 0},
                                      {"output.weight", 0, 1, 0}};
    static const struct lt bad_rank[] = {{"blk.0.attn_v.weight", 0, 3, 2}};
    struct buf b = {0};
    lora_file(m, &b, one, 1, 2);
    lora_seed("one", 3, &b, 0);             /* scale 0: the weights stay as they are */
    lora_seed("one-base", 3 | 4, &b, 0);
    lora_seed("truncated", 3, &b, b.n - 5);
    lora_seed("header-only", 3, &b, 16);
    b.p[0] ^= 1;
    lora_seed("bad-magic", 3, &b, 0);
    b.n = 0;
    lora_file(m, &b, f16, 1, 1);
    lora_seed("f16", 3 | 8, &b, 0);
    b.n = 0;
    lora_file(m, &b, three, 3, 1);
    lora_seed("three", 3 | 16, &b, 0);
    b.n = 0;
    lora_file(m, &b, bad_rank, 1, 3);
    lora_seed("bad-rank", 3, &b, 0); /* A of rank 3, B of rank 2 */
    b.n = 0;
    put_i32(&b, (int32_t)LLAMA_FILE_MAGIC_GGLA);
    put_i32(&b, 1);
    put_i32(&b, 1);
    put_i32(&b, 1);
    put_lora_tensor(&b, "nothing.loraA", 0, 1, 4, 3);
    put_lora_tensor(&b, "nothing.loraA", 0, 1, 4, 3);
    lora_seed("dup", 3, &b, 0);
    free(b.p);
}

/* ---- fuzz_model: GGUF model files ---- */

/* Every fixture of shared/fixtures/arch (test_decoder.c's list). */
static const char *const ARCH_FIXTURES[] = {
    "baichuan", "baichuan-13b", "bloom", "falcon",    "falcon-norm2", "gemma",       "gpt2",
    "llama",    "llama-moe",    "mpt",   "persimmon", "phi2",         "phi2-sepqkv", "phi3",
    "plamo",    "qwen",         "qwen2", "refact",    "stablelm",     "starcoder",
};

static bool has_suffix(const char *s, const char *tail)
{
    size_t n = strlen(s), t = strlen(tail);
    return n >= t && strcmp(s + n - t, tail) == 0;
}

/* lm_model_declare's question: the fixture has the optional tensor. */
static bool fixture_has(const char *name, void *user) { return lm_gguf_find_tensor(user, name) >= 0; }

/* One seed: a fixture's architecture and vocabulary at width `width` (2
 * heads), its matrices in `type`. */
struct model_spec {
    const char *fixture, *name;
    int width;
    enum lm_type type;
};

/* A fixture's hyperparameter in the tiny model: 2 heads over the width, FFN
 * twice the width, context 32, one layer (baichuan keeps its 32 or 40: its
 * loader tells 7B from 13B by them), RoPE on half a head where the fixture
 * rotates part of one; -1: keep the fixture's value. */
static int64_t tiny_value(const struct lm_gguf *g, const char *key, const struct model_spec *ms)
{
    uint32_t v = 0;
    int64_t i = lm_gguf_find_key(g, key);
    if (i < 0 || lm_gguf_get_u32(g, i, &v) != LM_OK)
        return -1;
    if (has_suffix(key, ".embedding_length"))
        return ms->width;
    if (has_suffix(key, ".feed_forward_length"))
        return (strcmp(ms->fixture, "qwen") == 0 ? 4 : 2) * ms->width; /* qwen's counts gate and up */
    if (has_suffix(key, ".context_length"))
        return 32;
    if (has_suffix(key, ".block_count"))
        return strncmp(ms->fixture, "baichuan", 8) == 0 ? v : 1;
    if (has_suffix(key, ".attention.head_count"))
        return 2;
    if (has_suffix(key, ".attention.head_count_kv")) {
        uint32_t h = 0;
        char hk[128];
        snprintf(hk, sizeof hk, "%.*s.attention.head_count", (int)(strlen(key) - strlen(".attention.head_count_kv")),
                 key);
        int64_t j = lm_gguf_find_key(g, hk);
        return j >= 0 && lm_gguf_get_u32(g, j, &h) == LM_OK && h == v ? 2 : 1;
    }
    if (has_suffix(key, ".attention.key_length") || has_suffix(key, ".attention.value_length"))
        return ms->width / 2;
    if (has_suffix(key, ".rope.dimension_count"))
        return v < 16 ? ms->width / 4 : ms->width / 2; /* the fixtures' partial rotations: 4 and 8 of 16 */
    return -1;
}

struct model_fill {
    const struct lm_decl_tensor *d;
    enum lm_type type;
};

/* Deterministic weights: norms near 1, others small; matrices encoded in
 * the seed's type. */
static lm_status fill_tensor(void *user, int64_t index, void *dst, size_t size)
{
    const struct model_fill *mf = user;
    const struct lm_decl_tensor *t = mf->d + index;
    const bool norm = t->n_dims == 1 && has_suffix(t->name, "norm.weight");
    const int64_t rows = t->n_dims == 1 ? 1 : (int64_t)(size / lm_row_size(mf->type, t->ne[0]));
    const size_t n = (size_t)(rows * t->ne[0]);
    float *v = t->n_dims == 1 ? dst : malloc(n * sizeof(float));
    if (!v)
        return LM_ERR_NOMEM;
    uint32_t x = 2463534242u ^ (uint32_t)(index * 2654435761u);
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13, x ^= x >> 17, x ^= x << 5;
        v[i] = (norm ? 1.0f : 0.0f) + ((float)(x >> 8) / 16777216.0f - 0.5f) * 0.5f;
    }
    if (t->n_dims == 1)
        return LM_OK;
    const size_t got = lm_quantize_chunk(mf->type, v, dst, 0, rows, t->ne[0], NULL);
    free(v);
    return got == size ? LM_OK : LM_ERR_INVALID_ARG;
}

static void model_seed(const struct model_spec *ms)
{
    char path[1024], tmp[1100], err[256] = "";
    snprintf(path, sizeof path, "%s/fixtures/arch/%s.gguf", LM_SHARED_DIR, ms->fixture);
    struct lm_gguf *g = NULL, *meta = NULL;
    struct lm_gguf_writer *w = NULL;
    struct lm_decl_tensor *d = NULL;
    struct lm_hparams hp;
    int n = 0;
    bool ok = lm_gguf_open(path, &g, err, sizeof err) == LM_OK && lm_gguf_writer_new(&w) == LM_OK;
    for (int64_t i = 0; ok && i < lm_gguf_n_kv(g); i++) {
        const int64_t v = tiny_value(g, lm_gguf_key(g, i), ms);
        ok = (v < 0 ? lm_gguf_copy_kv(w, g, i) : lm_gguf_set_u32(w, lm_gguf_key(g, i), (uint32_t)v)) == LM_OK;
    }
    snprintf(path, sizeof path, "%s/model", out_dir);
    mkdir(path, 0755);
    snprintf(tmp, sizeof tmp, "%s/.meta.gguf", path);
    ok = ok && lm_gguf_write_file(w, tmp) == LM_OK && lm_gguf_open(tmp, &meta, err, sizeof err) == LM_OK;
    ok = ok && lm_model_declare(meta, fixture_has, g, &hp, &d, &n, err, sizeof err) == LM_OK;
    for (int i = 0; ok && i < n; i++) {
        const enum lm_type t = d[i].n_dims == 1 ? LM_TYPE_F32 : ms->type;
        ok = lm_gguf_add_tensor(w, d[i].name, t, d[i].n_dims, d[i].ne, NULL) == LM_OK;
    }
    struct model_fill mf = {d, ms->type};
    if (ok)
        lm_gguf_writer_set_fill(w, fill_tensor, &mf);
    snprintf(path, sizeof path, "%s/model/ok-%s", out_dir, ms->name ? ms->name : ms->fixture);
    ok = ok && lm_gguf_write_file(w, path) == LM_OK;
    remove(tmp);
    if (!ok) {
        fprintf(stderr, "make_corpus: model seed %s: %s\n", path, err[0] ? err : "cannot write");
        exit(1);
    }
    n_written++;
    free(d);
    lm_gguf_close(meta);
    lm_gguf_close(g);
    lm_gguf_writer_free(w);
}

static void model_seeds(void)
{
    for (size_t i = 0; i < sizeof ARCH_FIXTURES / sizeof ARCH_FIXTURES[0]; i++)
        model_seed(&(struct model_spec){ARCH_FIXTURES[i], NULL, 8, LM_TYPE_F16});
    /* quantized matrices (blocks of 32: width 32): the repacked Q4_0 and
     * Q8_0 layouts, Q5_0's plain one */
    model_seed(&(struct model_spec){"llama", "llama-q4_0", 32, LM_TYPE_Q4_0});
    model_seed(&(struct model_spec){"llama", "llama-q8_0", 32, LM_TYPE_Q8_0});
    model_seed(&(struct model_spec){"qwen2", "qwen2-q5_0", 32, LM_TYPE_Q5_0});
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s CORPUS_DIR (fuzz/corpus)\n", argv[0]);
        return 2;
    }
    out_dir = argv[1];
    llama_backend_init(false);
    llama_log_set(quiet, NULL);
    struct llama_model *m = llama_load_model_from_file(LM_SHARED_DIR "/models/stories260K.gguf",
                                                       llama_model_default_params());
    if (!m) {
        fprintf(stderr, "make_corpus: cannot load stories260K\n");
        return 1;
    }
    vocab_seeds();
    state_seeds(m);
    batch_seeds();
    lora_seeds(m);
    model_seeds();
    llama_free_model(m);
    printf("make_corpus: %d seeds written under %s\n", n_written, out_dir);
    return 0;
}
