/* mkmodel.c - `lamina mkmodel NAME OUT.gguf`: a GGUF model with the exact
 * shapes of a named real model (of any architecture lamina runs) and
 * synthetic weights, for benchmarks and tests without downloading weights.
 *
 * The tensor list is not written here: the metadata (architecture and
 * hyperparameters) is written first, and the architecture's own tensor
 * declaration (model/arch/<name>.c through lm_model_declare) says which
 * tensors, with which names and shapes, it implies; each preset names the
 * optional tensors its real model has (biases, an untied output).
 *
 * Weights: seeded, approximately normal (sum of four 16-bit uniforms, an
 * Irwin-Hall approximation of N(0,1) bounded at +-3.46), N(0, 0.02^2) for
 * matrices, 1 + N(0, 0.02^2) for norms. Every row is generated from
 * (seed, tensor name, row index) alone, so the file is the same for any
 * thread count. Types follow `lamina quantize`'s recipes (model/quantize.h):
 * F32/F16/BF16 keep every 2-D weight in that type (as a converter writes),
 * quantized ftypes (Q4_K_M, ...) choose per tensor as quantize does. Tensors
 * are generated and encoded chunk by chunk into the writer's per-tensor
 * buffer, so memory stays at one tensor.
 * The tokenizer keys (a real 32000-token SPM vocabulary) are copied from
 * shared/models/ggml-vocab/ggml-vocab-llama-spm.gguf so llama.cpp loads the
 * file too; a model with a larger vocabulary gets it padded with unused
 * tokens "<mk_pad_N>" to its real size (the embedding and output shapes are
 * what benchmarks need).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "core/time.h"
#include "gguf/gguf.h"
#include "model/loader.h"
#include "model/quantize.h"
#include "quant/quant.h"

struct mk_model {
    const char *name, *desc, *arch;
    uint32_t n_vocab, n_embd, n_layer, n_head, n_head_kv, n_ff, n_ctx;
    uint32_t head_dim; /* 0: n_embd / n_head */
    uint32_t n_rot;    /* 0: the head size */
    float rope_theta, norm_eps, max_alibi_bias;
    /* The optional tensors the real model has: each declared optional tensor
     * whose name ends with one of these space-separated suffixes. */
    const char *optional;
};

#define LLAMA_OPT "output.weight"
static const struct mk_model models[] = {
    {"stories15m", "llama2.c TinyStories 15M", "llama", 32000, 288, 6, 6, 6, 768, 256, 0, 0, 10000.0f, 1e-5f, 0,
     LLAMA_OPT},
    {"stories42m", "llama2.c TinyStories 42M", "llama", 32000, 512, 8, 8, 8, 1376, 1024, 0, 0, 10000.0f, 1e-5f, 0,
     LLAMA_OPT},
    {"stories110m", "llama2.c TinyStories 110M", "llama", 32000, 768, 12, 12, 12, 2048, 1024, 0, 0, 10000.0f, 1e-5f,
     0, LLAMA_OPT},
    {"tinyllama-1.1b", "TinyLlama 1.1B", "llama", 32000, 2048, 22, 32, 4, 5632, 2048, 0, 0, 10000.0f, 1e-5f, 0,
     LLAMA_OPT},
    {"llama-7b", "Llama 2 7B", "llama", 32000, 4096, 32, 32, 32, 11008, 4096, 0, 0, 10000.0f, 1e-5f, 0, LLAMA_OPT},
    {"llama-13b", "Llama 2 13B", "llama", 32000, 5120, 40, 40, 40, 13824, 4096, 0, 0, 10000.0f, 1e-5f, 0, LLAMA_OPT},
    {"mistral-7b", "Mistral 7B v0.1", "llama", 32000, 4096, 32, 32, 8, 14336, 32768, 0, 0, 10000.0f, 1e-5f, 0,
     LLAMA_OPT},
    {"gpt2-124m", "GPT-2 124M", "gpt2", 50257, 768, 12, 12, 12, 3072, 1024, 0, 0, 10000.0f, 1e-5f, 0,
     "output.weight"},
    {"falcon-7b", "Falcon 7B", "falcon", 65024, 4544, 32, 71, 1, 18176, 2048, 0, 0, 10000.0f, 1e-5f, 0,
     "output.weight"},
    {"mpt-7b", "MPT 7B", "mpt", 50432, 4096, 32, 32, 32, 16384, 2048, 0, 0, 10000.0f, 1e-5f, 8.0f, "output.weight"},
    {"stablelm-3b", "StableLM 3B 4E1T", "stablelm", 50304, 2560, 32, 32, 32, 6912, 4096, 0, 20, 10000.0f, 1e-5f, 0,
     "output.weight"},
    {"phi2", "Phi-2 2.7B", "phi2", 51200, 2560, 32, 32, 32, 10240, 2048, 0, 32, 10000.0f, 1e-5f, 0,
     "attn_qkv.weight attn_qkv.bias output.weight output.bias"},
    {"qwen2-0.5b", "Qwen2 0.5B", "qwen2", 151936, 896, 24, 14, 2, 4864, 32768, 0, 0, 1000000.0f, 1e-6f, 0,
     "attn_q.bias attn_k.bias attn_v.bias"},
    {"gemma-2b", "Gemma 2B", "gemma", 256000, 2048, 18, 8, 1, 16384, 8192, 256, 0, 10000.0f, 1e-6f, 0, ""},
};
#define N_MODELS ((int)(sizeof models / sizeof models[0]))

#define VOCAB_REL "models/ggml-vocab/ggml-vocab-llama-spm.gguf"

struct mk_tensor {
    char name[64];
    int n_dims;
    int64_t ne[2];
    enum lm_type type;
    float mean, std;
    uint64_t key; /* hash of the name: the tensor's stream of random numbers */
};

struct mk {
    struct mk_model m;
    struct lm_hparams hp; /* as the architecture reads them */
    struct mk_tensor *t;
    int n_t;
    uint64_t seed;
    int nthread;
    bool tty;
    int64_t t0;
};

/* ---- random numbers ---- */

static uint64_t mix64(uint64_t z)
{
    z ^= z >> 30;
    z *= 0xbf58476d1ce4e5b9ull;
    z ^= z >> 27;
    z *= 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t hash_name(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 0x100000001b3ull;
    return h;
}

struct gen {
    const struct mk *mk;
    const struct mk_tensor *t;
};

/* lm_rows_fn: rows of approximately N(mean, std^2) values. */
static lm_status gen_rows(void *user, int64_t first, int64_t n, float *dst)
{
    const struct gen *g = user;
    const int64_t n_per_row = g->t->ne[0];
    const float scale = g->t->std / 37837.23f; /* sd of a sum of four 16-bit uniforms: 65536/sqrt(3) */
    const float mean = g->t->mean;
    for (int64_t r = 0; r < n; r++) {
        uint64_t s = mix64(g->mk->seed ^ mix64(g->t->key + (uint64_t)(first + r) * 0x9e3779b97f4a7c15ull));
        float *y = dst + r * n_per_row;
        for (int64_t j = 0; j < n_per_row; j++) {
            s += 0x9e3779b97f4a7c15ull;
            uint64_t z = mix64(s);
            int32_t sum = (int32_t)(z & 0xffff) + (int32_t)((z >> 16) & 0xffff) + (int32_t)((z >> 32) & 0xffff) +
                          (int32_t)(z >> 48);
            y[j] = mean + scale * (float)(sum - 131070);
        }
    }
    return LM_OK;
}

/* The writer's fill callback: generate and encode tensor i. */
static lm_status fill(void *user, int64_t i, void *dst, size_t size)
{
    const struct mk *mk = user;
    const struct mk_tensor *t = &mk->t[i];
    struct gen g = {mk, t};
    (void)size;
    if (mk->tty)
        fprintf(stderr, "\r[%4lld/%4d] %-28s %-5s %5.1f s", (long long)i + 1, mk->n_t, t->name,
                lm_type_name(t->type), (lm_time_us() - mk->t0) / 1e6);
    return lm_quantize_rows(t->type, t->ne[1], t->ne[0], gen_rows, &g, NULL, dst, mk->nthread);
}

/* ---- the tensor list ---- */

static bool ends_with(const char *s, const char *suffix, size_t k)
{
    size_t n = strlen(s);
    return n >= k && !memcmp(s + n - k, suffix, k);
}

/* lm_model_declare's question: does the real model have this optional tensor? */
static bool want_optional(const char *name, void *user)
{
    const struct mk_model *m = user;
    for (const char *p = m->optional; p && *p;) {
        size_t k = strcspn(p, " ");
        if (k && ends_with(name, p, k))
            return true;
        p += k + (p[k] == ' ');
    }
    return false;
}

/* The tensors the architecture declares for the metadata in meta, in its
 * order; norms ~ 1 + N(0, 0.02^2), everything else N(0, 0.02^2). */
static bool make_tensors(struct mk *mk, struct lm_gguf *meta)
{
    struct lm_decl_tensor *d = NULL;
    int n = 0;
    char err[256] = "";
    if (lm_model_declare(meta, want_optional, &mk->m, &mk->hp, &d, &n, err, sizeof err)) {
        fprintf(stderr, "error: %s: %s\n", mk->m.name, err);
        return false;
    }
    mk->t = calloc((size_t)n, sizeof *mk->t);
    for (int i = 0; i < n && mk->t; i++) {
        struct mk_tensor *t = &mk->t[mk->n_t++];
        if (d[i].n_dims > 2) { /* experts */
            fprintf(stderr, "error: %s: 3-D tensor %s: mkmodel writes no mixture-of-experts models\n", mk->m.name,
                    d[i].name);
            free(d);
            return false;
        }
        snprintf(t->name, sizeof t->name, "%s", d[i].name);
        t->n_dims = d[i].n_dims;
        t->ne[0] = d[i].ne[0];
        t->ne[1] = d[i].ne[1];
        t->mean = d[i].n_dims == 1 && ends_with(t->name, "norm.weight", 11) ? 1.0f : 0.0f;
        t->std = 0.02f;
        t->key = hash_name(t->name);
    }
    free(d);
    return mk->t != NULL;
}

/* Each tensor's type: F32/F16/BF16 for every 2-D weight (norms F32), or
 * quantize's recipe for ftype (as if quantizing an F32 file). */
static bool choose_types(struct mk *mk, uint32_t ftype, bool pure)
{
    const struct lm_ftype_info *fi = lm_ftype_info(ftype);
    bool is_float = fi->base == LM_TYPE_F32 || fi->base == LM_TYPE_F16 || fi->base == LM_TYPE_BF16;
    struct lm_qmodel qm = {.n_layer = mk->hp.n_layer, .n_head = mk->hp.n_head, .n_head_kv = mk->hp.n_head_kv};
    snprintf(qm.arch, sizeof qm.arch, "%s", mk->m.arch);
    struct lm_qrecipe r;
    if (lm_qrecipe_init(&r, ftype, &qm) != LM_OK)
        return false;
    r.pure = pure;
    for (int i = 0; i < mk->n_t; i++)
        lm_qrecipe_count(&r, mk->t[i].name);
    for (int i = 0; i < mk->n_t; i++) {
        struct mk_tensor *t = &mk->t[i];
        char msg[200];
        bool q;
        if (is_float) {
            t->type = t->n_dims == 2 ? fi->base : LM_TYPE_F32;
            continue;
        }
        if (lm_qrecipe_type(&r, t->name, t->n_dims, t->ne[0], LM_TYPE_F32, &t->type, &q, msg, sizeof msg)) {
            fprintf(stderr, "error: %s\n", msg);
            return false;
        }
        if (!lm_quant_traits(t->type)->from_float || lm_quantize_requires_imatrix(t->type)) {
            fprintf(stderr, "error: %s: lamina cannot generate %s weights (needs an importance matrix)\n", t->name,
                    lm_type_name(t->type));
            return false;
        }
    }
    if (r.n_fallback > 0)
        fprintf(stderr, "note: %d of %d tensors have rows that are not a multiple of %d: fallback types used\n",
                r.n_fallback, r.n_fallback + r.n_k_quantized, LM_QK_K);
    return true;
}

/* ---- vocabulary ---- */

static bool is_file(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* Look for shared/VOCAB_REL in every ancestor of dir. */
static bool find_up(const char *dir, char *out, size_t size)
{
    char d[4096];
    snprintf(d, sizeof d, "%s", dir);
    for (;;) {
        int n = snprintf(out, size, "%s/shared/" VOCAB_REL, d);
        if (n > 0 && (size_t)n < size && is_file(out))
            return true;
        char *slash = strrchr(d, '/');
        if (!slash || slash == d)
            return false;
        *slash = 0;
    }
}

/* The vocabulary file: --vocab, $LM_SHARED_DIR or $LAMINA_SHARED_DIR, then
 * shared/ beside the working folder or any ancestor (../shared from a
 * checkout), then the same from the lamina binary's folder. */
static bool find_vocab(const char *opt, char *out, size_t size)
{
    static const char *const envs[] = {"LM_SHARED_DIR", "LAMINA_SHARED_DIR"};
    char dir[4096];
    if (opt) {
        snprintf(out, size, "%s", opt);
        return is_file(out);
    }
    for (size_t i = 0; i < sizeof envs / sizeof envs[0]; i++) {
        const char *e = getenv(envs[i]);
        if (e && e[0]) {
            int n = snprintf(out, size, "%s/" VOCAB_REL, e);
            if (n > 0 && (size_t)n < size && is_file(out))
                return true;
        }
    }
    if (getcwd(dir, sizeof dir) && find_up(dir, out, size))
        return true;
    ssize_t n = readlink("/proc/self/exe", dir, sizeof dir - 1);
    if (n > 0) {
        dir[n] = 0;
        char *slash = strrchr(dir, '/');
        if (slash)
            *slash = 0;
        if (find_up(dir, out, size))
            return true;
    }
    snprintf(out, size, "../shared/" VOCAB_REL);
    return false;
}

/* ---- the file ---- */

/* The architecture's keys ("<arch>.block_count", ...), as a converter writes them. */
static lm_status set_hparams(struct lm_gguf_writer *w, const struct mk *mk, uint32_t ftype)
{
    const struct mk_model *m = &mk->m;
    const uint32_t head = m->head_dim ? m->head_dim : m->n_embd / m->n_head;
    char name[160], key[96];
    snprintf(name, sizeof name, "%s (lamina mkmodel, synthetic weights, seed %llu)", m->name,
             (unsigned long long)mk->seed);
#define KEY(suffix) (snprintf(key, sizeof key, "%s." suffix, m->arch), key)
    lm_status st = lm_gguf_set_str(w, "general.architecture", m->arch);
    if (!st) st = lm_gguf_set_str(w, "general.name", name);
    if (!st) st = lm_gguf_set_u32(w, KEY("context_length"), m->n_ctx);
    if (!st) st = lm_gguf_set_u32(w, KEY("embedding_length"), m->n_embd);
    if (!st) st = lm_gguf_set_u32(w, KEY("block_count"), m->n_layer);
    if (!st) st = lm_gguf_set_u32(w, KEY("feed_forward_length"), m->n_ff);
    if (!st) st = lm_gguf_set_u32(w, KEY("rope.dimension_count"), m->n_rot ? m->n_rot : head);
    if (!st) st = lm_gguf_set_u32(w, KEY("attention.head_count"), m->n_head);
    if (!st) st = lm_gguf_set_u32(w, KEY("attention.head_count_kv"), m->n_head_kv);
    if (!st && m->head_dim) st = lm_gguf_set_u32(w, KEY("attention.key_length"), head);
    if (!st && m->head_dim) st = lm_gguf_set_u32(w, KEY("attention.value_length"), head);
    if (!st) st = lm_gguf_set_f32(w, KEY("attention.layer_norm_rms_epsilon"), m->norm_eps);
    if (!st && strcmp(m->arch, "llama")) st = lm_gguf_set_f32(w, KEY("attention.layer_norm_epsilon"), m->norm_eps);
    if (!st && m->max_alibi_bias > 0) st = lm_gguf_set_f32(w, KEY("attention.max_alibi_bias"), m->max_alibi_bias);
    if (!st) st = lm_gguf_set_f32(w, KEY("rope.freq_base"), m->rope_theta);
    if (!st) st = lm_gguf_set_u32(w, "general.file_type", ftype);
    if (!st) st = lm_gguf_set_u32(w, KEY("vocab_size"), m->n_vocab);
#undef KEY
    return st;
}

/* Open the vocabulary; a model with more tokens than it has gets padding. */
static int open_vocab(const char *path, struct mk_model *m, struct lm_gguf **out)
{
    struct lm_gguf *g = NULL;
    char err[256];
    uint64_t n = 0;
    if (lm_gguf_open(path, &g, err, sizeof err)) {
        fprintf(stderr, "error: vocabulary %s: %s\n", path, err);
        return 1;
    }
    int64_t k = lm_gguf_find_key(g, "tokenizer.ggml.tokens");
    if (k < 0 || lm_gguf_get_arr_n(g, k, &n) || n == 0 || n > 1u << 24) {
        fprintf(stderr, "error: %s has no tokenizer.ggml.tokens\n", path);
        lm_gguf_close(g);
        return 1;
    }
    if (n > m->n_vocab) {
        fprintf(stderr, "note: the vocabulary has %llu tokens, %s has %u: using %llu\n", (unsigned long long)n,
                m->name, m->n_vocab, (unsigned long long)n);
        m->n_vocab = (uint32_t)n;
    }
    *out = g;
    return 0;
}

/* tokens, scores and types padded to n with unused "<mk_pad_N>" tokens */
static lm_status pad_vocab(struct lm_gguf_writer *w, const struct lm_gguf *g, uint64_t n)
{
    int64_t kt = lm_gguf_find_key(g, "tokenizer.ggml.tokens"), ks = lm_gguf_find_key(g, "tokenizer.ggml.scores");
    int64_t ky = lm_gguf_find_key(g, "tokenizer.ggml.token_type");
    uint64_t n0 = 0;
    const void *scores = NULL, *types = NULL;
    if (kt < 0 || lm_gguf_get_arr_n(g, kt, &n0) || (ks >= 0 && lm_gguf_get_arr_data(g, ks, &scores)) ||
        (ky >= 0 && lm_gguf_get_arr_data(g, ky, &types)))
        return LM_ERR_CORRUPT;
    char **tok = calloc(n, sizeof *tok);
    float *sc = malloc(n * sizeof *sc);
    int32_t *ty = malloc(n * sizeof *ty);
    lm_status st = tok && sc && ty ? LM_OK : LM_ERR_NOMEM;
    for (uint64_t i = 0; i < n && !st; i++) {
        const char *s = NULL;
        size_t len = 0;
        char pad[32];
        if (i < n0 && lm_gguf_get_arr_str(g, kt, i, &s, &len))
            st = LM_ERR_CORRUPT;
        if (i >= n0) {
            len = (size_t)snprintf(pad, sizeof pad, "<mk_pad_%llu>", (unsigned long long)(i - n0));
            s = pad;
        }
        if (!st && (tok[i] = malloc(len + 1))) {
            memcpy(tok[i], s, len);
            tok[i][len] = 0;
        } else if (!st) {
            st = LM_ERR_NOMEM;
        }
        if (!st) {
            sc[i] = i < n0 && scores ? ((const float *)scores)[i] : -1e9f;
            ty[i] = i < n0 && types ? ((const int32_t *)types)[i] : 1; /* normal */
        }
    }
    if (!st) st = lm_gguf_set_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)tok, n);
    if (!st && ks >= 0) st = lm_gguf_set_arr_data(w, "tokenizer.ggml.scores", LM_GGUF_FLOAT32, sc, n);
    if (!st && ky >= 0) st = lm_gguf_set_arr_data(w, "tokenizer.ggml.token_type", LM_GGUF_INT32, ty, n);
    for (uint64_t i = 0; tok && i < n; i++)
        free(tok[i]);
    free(tok);
    free(sc);
    free(ty);
    return st;
}

/* Copy the tokenizer.* keys of the vocabulary, in its order; padded to n_vocab tokens. */
static lm_status copy_vocab(struct lm_gguf_writer *w, const struct lm_gguf *g, uint32_t n_vocab)
{
    uint64_t n0 = 0;
    lm_gguf_get_arr_n(g, lm_gguf_find_key(g, "tokenizer.ggml.tokens"), &n0);
    bool pad = n0 < n_vocab;
    lm_status st = LM_OK;
    for (int64_t i = 0; i < lm_gguf_n_kv(g) && !st; i++) {
        const char *key = lm_gguf_key(g, i);
        if (pad && (!strcmp(key, "tokenizer.ggml.tokens") || !strcmp(key, "tokenizer.ggml.scores") ||
                    !strcmp(key, "tokenizer.ggml.token_type")))
            continue;
        if (!strncmp(key, "tokenizer.", 10))
            st = lm_gguf_copy_kv(w, g, i);
    }
    if (!st && pad)
        st = pad_vocab(w, g, n_vocab);
    return st;
}

static void mkmodel_usage(FILE *f)
{
    fprintf(f, "usage: lamina mkmodel NAME OUT.gguf [options]\n\n"
               "Writes a GGUF with the architecture and exact shapes of model NAME, synthetic\n"
               "weights (seeded N(0, 0.02^2), norms ~1) and a real 32000-token SPM vocabulary\n"
               "(padded with unused tokens to the model's vocabulary size).\n\n"
               "  --type TYPE     F32, F16 (default), BF16, or a quantize type (Q4_0, Q8_0, Q4_K_M, ...;\n"
               "                  per-tensor types as `lamina quantize` chooses them)\n"
               "  --pure          every 2-D weight in TYPE's base type (no k-quant mixture)\n"
               "  --seed N        random seed (default 42)\n"
               "  --layers N      use N layers instead of the model's\n"
               "  --threads N     threads (default: one per core; the file does not depend on it)\n"
               "  --vocab FILE    vocabulary GGUF (default: ../shared/" VOCAB_REL ",\n"
               "                  also $LM_SHARED_DIR/" VOCAB_REL ")\n\nNAME:\n");
    for (int i = 0; i < N_MODELS; i++) {
        const struct mk_model *m = &models[i];
        fprintf(f, "  %-15s %-9s %-26s n_embd %4u, %2u layers, %2u heads (%2u KV), n_ff %5u, vocab %6u, ctx %u\n",
                m->name, m->arch, m->desc, m->n_embd, m->n_layer, m->n_head, m->n_head_kv, m->n_ff, m->n_vocab,
                m->n_ctx);
    }
}

struct mk_opts {
    const char *name, *out, *type, *vocab;
    long long seed, layers, threads;
    bool pure;
};

/* Returns 0 ok, 1 help shown, 2 usage error. */
static int parse_mkmodel(int argc, char **argv, struct mk_opts *o)
{
    *o = (struct mk_opts){.type = "F16", .seed = 42, .layers = -1, .threads = 0};
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *v;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            mkmodel_usage(stdout);
            return 1;
        } else if (!strcmp(a, "--pure")) {
            o->pure = true;
        } else if (!strcmp(a, "--type") || !strcmp(a, "--seed") || !strcmp(a, "--layers") ||
                   !strcmp(a, "--threads") || !strcmp(a, "-t") || !strcmp(a, "--vocab")) {
            if (!(v = cli_value(argc, argv, &i)))
                return 2;
            if (!strcmp(a, "--type"))
                o->type = v;
            else if (!strcmp(a, "--vocab"))
                o->vocab = v;
            else if (!strcmp(a, "--seed") ? !cli_int(a, v, 0, (1LL << 62), &o->seed)
                     : !strcmp(a, "--layers") ? !cli_int(a, v, 1, 512, &o->layers)
                                              : !cli_int(a, v, 1, 1024, &o->threads))
                return 2;
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "error: unknown option '%s' (see lamina mkmodel --help)\n", a);
            return 2;
        } else if (!o->name) {
            o->name = a;
        } else if (!o->out) {
            o->out = a;
        } else {
            fprintf(stderr, "error: unexpected argument '%s'\n", a);
            return 2;
        }
    }
    if (!o->name || !o->out) {
        fprintf(stderr, "error: lamina mkmodel needs NAME and OUT.gguf (see lamina mkmodel --help)\n");
        return 2;
    }
    return 0;
}

/* Resolve NAME and TYPE into mk; 0 ok, 2 usage error. */
static int setup(const struct mk_opts *o, struct mk *mk, uint32_t *ftype)
{
    int i = 0;
    while (i < N_MODELS && strcmp(models[i].name, o->name))
        i++;
    if (i == N_MODELS) {
        fprintf(stderr, "error: unknown model '%s' (see lamina mkmodel --help)\n", o->name);
        return 2;
    }
    if (!lm_ftype_parse(o->type, ftype)) {
        fprintf(stderr, "error: unknown type '%s' (see lamina quantize --help for the names)\n", o->type);
        return 2;
    }
    mk->m = models[i];
    if (o->layers > 0)
        mk->m.n_layer = (uint32_t)o->layers;
    mk->seed = (uint64_t)o->seed;
    mk->nthread = o->threads > 0 ? (int)o->threads : lm_quantize_n_cpus();
    mk->tty = isatty(2);
    return 0;
}

/* Build the writer and write the file; 0 ok, 1 error. */
static int write_model(struct mk *mk, uint32_t ftype, bool pure, struct lm_gguf *vocab, const char *out)
{
    struct lm_gguf_writer *w = NULL;
    lm_status st = lm_gguf_writer_new(&w);
    if (!st)
        st = set_hparams(w, mk, ftype);
    if (!st)
        st = copy_vocab(w, vocab, mk->m.n_vocab);
    if (!st && lm_ftype_info(ftype)->base != LM_TYPE_F32 && lm_ftype_info(ftype)->base != LM_TYPE_F16 &&
        lm_ftype_info(ftype)->base != LM_TYPE_BF16)
        st = lm_gguf_set_u32(w, "general.quantization_version", LM_QNT_VERSION);
    if (st) {
        fprintf(stderr, "error: building the metadata: %s\n", lm_status_str(st));
        lm_gguf_writer_free(w);
        return 1;
    }
    /* the metadata alone, read back: the architecture says which tensors it implies */
    char meta_path[4200];
    snprintf(meta_path, sizeof meta_path, "%s.meta.tmp", out);
    struct lm_gguf *meta = NULL;
    char err[256] = "";
    st = lm_gguf_write_file(w, meta_path);
    if (!st)
        st = lm_gguf_open(meta_path, &meta, err, sizeof err);
    remove(meta_path);
    if (st) {
        fprintf(stderr, "error: writing %s: %s %s\n", meta_path, lm_status_str(st), err);
        lm_gguf_writer_free(w);
        return 1;
    }
    bool made = make_tensors(mk, meta);
    lm_gguf_close(meta);
    if (!made || !choose_types(mk, ftype, pure)) {
        lm_gguf_writer_free(w);
        return 1;
    }
    uint64_t bytes = 0, params = 0;
    for (int i = 0; i < mk->n_t && !st; i++) {
        const struct mk_tensor *t = &mk->t[i];
        st = lm_gguf_add_tensor(w, t->name, t->type, t->n_dims, t->ne, NULL);
        bytes += lm_row_size(t->type, t->ne[0]) * (uint64_t)t->ne[1];
        params += (uint64_t)(t->ne[0] * t->ne[1]);
    }
    lm_gguf_writer_set_fill(w, fill, mk);
    mk->t0 = lm_time_us();
    if (!st)
        st = lm_gguf_write_file(w, out);
    if (mk->tty)
        fputc('\n', stderr);
    lm_gguf_writer_free(w);
    if (st) {
        fprintf(stderr, "error: writing %s failed: %s\n", out, lm_status_str(st));
        return 1;
    }
    fprintf(stderr, "wrote %s: %s, %u layers, %.1fM parameters, %s, %.1f MiB in %.1f s\n", out, mk->m.name,
            mk->m.n_layer, params / 1e6, lm_ftype_info(ftype)->name, bytes / 1048576.0,
            (lm_time_us() - mk->t0) / 1e6);
    return 0;
}

/* See cli.h: 0 success, 1 error, 2 usage error. */
int cmd_mkmodel(int argc, char **argv)
{
    struct mk_opts o;
    struct mk mk = {0};
    uint32_t ftype = 1;
    int r = parse_mkmodel(argc, argv, &o);
    if (r)
        return r == 1 ? 0 : r;
    if ((r = setup(&o, &mk, &ftype)))
        return r;
    char vpath[4096];
    if (!find_vocab(o.vocab, vpath, sizeof vpath)) {
        fprintf(stderr, "error: vocabulary file not found: %s (use --vocab FILE or set LM_SHARED_DIR)\n", vpath);
        return 1;
    }
    struct lm_gguf *vocab = NULL;
    if (open_vocab(vpath, &mk.m, &vocab))
        return 1;
    r = write_model(&mk, ftype, o.pure, vocab, o.out);
    lm_gguf_close(vocab);
    free(mk.t);
    return r;
}
