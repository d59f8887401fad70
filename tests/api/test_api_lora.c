/* test_api_lora.c - llama_model_apply_lora_from_file / llama_apply_lora_from_file.
 *
 * The adapters are written here by a small writer of the 'ggla' v1 format
 * (the layout of llama.cpp b1892's convert-lora-to-ggml.py: header, then per
 * tensor n_dims, name length, type, ne, name, 32-byte alignment, data). The
 * expected change of each weight, scale * alpha / r * (B x A), is computed here
 * in double from the values written, and compared with the model's weights:
 *   (a) F32 weights (mmapped and read into memory): every element equals
 *       W + delta to float rounding; F16 and F32 adapter data; the deprecated
 *       per-context call with scale -1 undoes the change; the file on disk is
 *       not changed (a second load sees the original weights);
 *   (b) the logits change accordingly: an adapter on output.weight only moves
 *       the logits by delta x h, h = the final normed hidden state
 *       (llama_get_embeddings), which does not change; a context created
 *       before the adapter was applied sees the new weights;
 *   (c) quantized weights (Q8_0 and Q4_0 copies of stories260K tensors, written
 *       here with lamina's GGUF writer): dequantized W' equals W + delta within
 *       one quantization step; with path_base_model = the F32 file, W' equals
 *       W_base + delta within one step; the model then computes bit for bit
 *       like a model loaded from a file holding W' (so a weight the CPU keeps
 *       in its repacked layout is written back in that layout);
 *   (d) bad adapters (truncated, wrong magic/version, bad counts, huge dims,
 *       mismatched shapes, unknown names, unpaired tensors, a bad base model,
 *       random byte flips) return 1 without crashing and leave every weight
 *       as it was.
 * Weights are read through llama_get_model_tensor cast to lamina's tensor and
 * lm_tensor_get (plain rows whatever layout a backend keeps them in). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "core/fp16.h"
#include "core/tensor.h"
#include "gguf/gguf.h"
#include "quant/quant.h"
#include "util_api.h"

/* the deprecated per-context call is part of what is tested */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

#define STORIES "models/stories260K.gguf"

/* ---- the adapter writer ---- */

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

struct ltensor {
    const char *name;
    int type;    /* 0 F32, 1 F16 */
    int32_t ne0, ne1;
    float *data; /* ne0 * ne1 values (exact in F16 when type 1) */
};

static void write_header(struct buf *b, int32_t r, int32_t alpha)
{
    put_i32(b, (int32_t)LLAMA_FILE_MAGIC_GGLA);
    put_i32(b, 1);
    put_i32(b, r);
    put_i32(b, alpha);
}

static void write_tensor(struct buf *b, const struct ltensor *t)
{
    put_i32(b, 2);
    put_i32(b, (int32_t)strlen(t->name));
    put_i32(b, t->type);
    put_i32(b, t->ne0);
    put_i32(b, t->ne1);
    put(b, t->name, strlen(t->name));
    put(b, NULL, ((b->n + 31) & ~(size_t)31) - b->n);
    for (size_t i = 0; i < (size_t)t->ne0 * (size_t)t->ne1; i++) {
        if (t->type == 0) {
            put(b, &t->data[i], 4);
        } else {
            lm_fp16 h = lm_fp32_to_fp16(t->data[i]);
            put(b, &h, 2);
        }
    }
}

/* A and B for weight `wname` of [n_in, n_out], rank r, values in small
 * multiples of 1/256 (exact in F16), from a simple LCG. */
struct lpair {
    char a_name[64], b_name[64];
    struct ltensor a, b;
};

static uint32_t lcg = 12345;
static float small_value(void)
{
    lcg = lcg * 1664525u + 1013904223u;
    return (float)((int)(lcg >> 24) - 128) / 256.0f; /* [-0.5, 0.5) */
}

static void make_pair(struct lpair *p, const char *wname, int32_t r, int32_t n_in, int32_t n_out, int type)
{
    snprintf(p->a_name, sizeof p->a_name, "%s.loraA", wname);
    snprintf(p->b_name, sizeof p->b_name, "%s.loraB", wname);
    p->a = (struct ltensor){p->a_name, type, r, n_in, malloc((size_t)r * (size_t)n_in * sizeof(float))};
    p->b = (struct ltensor){p->b_name, type, r, n_out, malloc((size_t)r * (size_t)n_out * sizeof(float))};
    for (int32_t i = 0; i < r * n_in; i++)
        p->a.data[i] = small_value();
    for (int32_t i = 0; i < r * n_out; i++)
        p->b.data[i] = small_value();
}

static void free_pair(struct lpair *p)
{
    free(p->a.data);
    free(p->b.data);
}

/* delta[j * n_in + i] = scaling * sum_k A[i][k] B[j][k], in double */
static double *expected_delta(const struct lpair *p, double scaling)
{
    int32_t r = p->a.ne0, n_in = p->a.ne1, n_out = p->b.ne1;
    double *d = malloc((size_t)n_in * (size_t)n_out * sizeof *d);
    for (int32_t j = 0; j < n_out; j++)
        for (int32_t i = 0; i < n_in; i++) {
            double s = 0;
            for (int32_t k = 0; k < r; k++)
                s += (double)p->a.data[(size_t)i * r + k] * (double)p->b.data[(size_t)j * r + k];
            d[(size_t)j * n_in + i] = scaling * s;
        }
    return d;
}

static bool write_adapter(const char *path, int32_t r, int32_t alpha, struct lpair *pairs, int n)
{
    struct buf b = {0};
    write_header(&b, r, alpha);
    for (int i = 0; i < n; i++) {
        write_tensor(&b, &pairs[i].a);
        write_tensor(&b, &pairs[i].b);
    }
    bool ok = api_write_file(path, b.p, b.n);
    free(b.p);
    return ok;
}

/* ---- weights ---- */

static struct lm_tensor *weight(struct llama_model *m, const char *name)
{
    return (struct lm_tensor *)llama_get_model_tensor(m, name);
}

/* The weight as floats (dequantized), malloc'd. */
static float *weight_floats(struct llama_model *m, const char *name, int64_t *n_out)
{
    struct lm_tensor *t = weight(m, name);
    if (!t)
        return NULL;
    int64_t n = t->ne[0] * t->ne[1];
    float *f = malloc((size_t)n * sizeof *f);
    void *plain = malloc(lm_nbytes(t)); /* through the buffer: plain rows whatever the layout */
    CHECK(lm_tensor_get(t, plain, 0, lm_nbytes(t)) == LM_OK);
    lm_quant_traits(t->type)->to_float(plain, f, n);
    free(plain);
    if (n_out)
        *n_out = n;
    return f;
}

/* max over elements of |got - (old + delta)| / (4e-7 * (|old| + |delta|) + 1e-30):
 * <= 1 means equal to float rounding. */
static double rel_err_f32(const float *got, const float *old, const double *delta, int64_t n)
{
    double worst = 0;
    for (int64_t i = 0; i < n; i++) {
        double want = (double)old[i] + delta[i];
        double e = fabs((double)got[i] - want) / (4e-7 * (fabs((double)old[i]) + fabs(delta[i])) + 1e-30);
        worst = e > worst || e != e ? e : worst;
    }
    return worst;
}

static const llama_token PROMPT[] = {1, 403, 407, 261, 378, 432, 383, 286, 261};

/* Logits of the last token of PROMPT and the embedding, in a fresh context. */
static void run_prompt(struct llama_model *m, float *logits, float *embd)
{
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 64;
    cp.n_threads = cp.n_threads_batch = 2;
    cp.embedding = true;
    struct llama_context *ctx = llama_new_context_with_model(m, cp);
    CHECK(ctx != NULL);
    if (!ctx)
        return;
    CHECK(llama_decode(ctx, llama_batch_get_one((llama_token *)PROMPT, 9, 0, 0)) == 0);
    memcpy(logits, llama_get_logits(ctx), (size_t)llama_n_vocab(m) * sizeof(float));
    memcpy(embd, llama_get_embeddings(ctx), (size_t)llama_n_embd(m) * sizeof(float));
    llama_free(ctx);
}

/* (a) + (b) on an F32 model, mmapped or not. */
static void test_f32(bool use_mmap)
{
    struct llama_model *m = api_load_opts(STORIES, use_mmap, false);
    CHECK(m != NULL);
    if (!m)
        return;
    int nv = llama_n_vocab(m), ne = llama_n_embd(m);
    float *l0 = malloc((size_t)nv * 4), *l1 = malloc((size_t)nv * 4), *h0 = malloc((size_t)ne * 4),
          *h1 = malloc((size_t)ne * 4);
    run_prompt(m, l0, h0);

    /* (b) output.weight only: logits move by delta x h */
    struct lpair out;
    make_pair(&out, "output.weight", 2, ne, nv, 0);
    const char *path = api_tmp_path("out.ggla");
    CHECK(write_adapter(path, 2, 8, &out, 1));
    int64_t n = 0;
    float *w_old = weight_floats(m, "output.weight", &n);
    const float scale = 0.75f;
    struct llama_context *pre = api_ctx(m, 32, 32, false); /* made before: must see the new weights too */
    CHECK(llama_model_apply_lora_from_file(m, path, scale, NULL, 2) == 0);
    double *d = expected_delta(&out, 0.75 * 8 / 2);
    float *w_new = weight_floats(m, "output.weight", NULL);
    double e = rel_err_f32(w_new, w_old, d, n);
    CHECKF(e <= 1.0, "output.weight differs from W + delta by %g rounding units", e);
    run_prompt(m, l1, h1);
    CHECK(api_max_diff(h0, h1, (size_t)ne) == 0.0);
    CHECK(pre && llama_decode(pre, llama_batch_get_one((llama_token *)PROMPT, 9, 0, 0)) == 0);
    CHECK(pre && api_max_diff(llama_get_logits(pre), l1, (size_t)nv) == 0.0);
    llama_free(pre);
    double worst = 0, moved = 0;
    for (int v = 0; v < nv; v++) {
        double dl = 0;
        for (int i = 0; i < ne; i++)
            dl += d[(size_t)v * ne + i] * h0[i];
        double err = fabs((double)l1[v] - ((double)l0[v] + dl)) / (1.0 + fabs(l0[v]));
        worst = err > worst ? err : worst;
        moved = fabs(dl) > moved ? fabs(dl) : moved;
    }
    CHECKF(worst < 1e-5 && moved > 0.1, "logits: error %g (relative), largest change %g", worst, moved);
    printf("lora (mmap %d): output.weight delta to %.2f rounding units, logits follow delta x h to %.2g (change up to %.3g)\n",
           use_mmap, e, worst, moved);
    free(d);
    free(w_old);
    free(w_new);
    free_pair(&out);

    /* (a) two weights in one file, F32 and F16 data, r 3, alpha 5 */
    struct lpair pr[2];
    make_pair(&pr[0], "blk.0.attn_q.weight", 3, 64, 64, 0);
    make_pair(&pr[1], "blk.1.ffn_down.weight", 3, 172, 64, 1);
    path = api_tmp_path("two.ggla");
    CHECK(write_adapter(path, 3, 5, pr, 2));
    float *q_old = weight_floats(m, "blk.0.attn_q.weight", NULL), *f_old = weight_floats(m, "blk.1.ffn_down.weight", NULL);
    CHECK(llama_model_apply_lora_from_file(m, path, 2.0f, NULL, 1) == 0);
    double *dq = expected_delta(&pr[0], 2.0 * 5 / 3), *df = expected_delta(&pr[1], 2.0 * 5 / 3);
    float *q_new = weight_floats(m, "blk.0.attn_q.weight", NULL), *f_new = weight_floats(m, "blk.1.ffn_down.weight", NULL);
    double eq = rel_err_f32(q_new, q_old, dq, 64 * 64), ef = rel_err_f32(f_new, f_old, df, 172 * 64);
    CHECKF(eq <= 1.0 && ef <= 1.0, "attn_q %g, ffn_down %g rounding units", eq, ef);
    run_prompt(m, l0, h0);
    CHECK(api_max_diff(l0, l1, (size_t)nv) > 1e-3); /* inner layers changed: the logits move */

    /* the deprecated per-context call with -scale takes the change back out */
    struct llama_context *ctx = api_ctx(m, 32, 32, false);
    CHECK(llama_apply_lora_from_file(ctx, path, -2.0f, NULL, 3) == 0);
    llama_free(ctx);
    float *q_back = weight_floats(m, "blk.0.attn_q.weight", NULL);
    CHECK(api_max_diff(q_back, q_old, 64 * 64) < 1e-5);

    /* the model file is untouched: a fresh load sees the original weights */
    struct llama_model *m2 = api_load_opts(STORIES, true, false);
    float *q_file = m2 ? weight_floats(m2, "blk.0.attn_q.weight", NULL) : NULL;
    CHECK(q_file && api_max_diff(q_file, q_old, 64 * 64) == 0.0);
    llama_free_model(m2);
    free(q_file);
    free(q_back);
    free(dq);
    free(df);
    free(q_old);
    free(f_old);
    free(q_new);
    free(f_new);
    free_pair(&pr[0]);
    free_pair(&pr[1]);
    free(l0);
    free(l1);
    free(h0);
    free(h1);
    llama_free_model(m);
}

/* ---- (c) quantized weights ---- */

/* stories260K with blk.0.attn_q.weight as Q8_0 and blk.0.ffn_up.weight as Q4_0
 * (quantized from the file, or the given bytes when over[k] is not NULL). */
static bool write_quantized_copy(const char *path, void *const over[2])
{
    size_t size;
    char src_path[4096];
    snprintf(src_path, sizeof src_path, "%s", lm_test_shared(STORIES));
    uint8_t *file = lm_test_read_file(src_path, &size);
    struct lm_gguf *g = NULL;
    struct lm_gguf_writer *w = NULL;
    bool ok = file && lm_gguf_open(src_path, &g, NULL, 0) == LM_OK && lm_gguf_writer_new(&w) == LM_OK;
    void *qdata[2] = {NULL, NULL};
    for (int64_t i = 0; ok && i < lm_gguf_n_kv(g); i++)
        ok = lm_gguf_copy_kv(w, g, i) == LM_OK;
    for (int64_t i = 0; ok && i < lm_gguf_n_tensors(g); i++) {
        const struct lm_gguf_tensor_info *ti = lm_gguf_tensor_info(g, i);
        int q = !strcmp(ti->name, "blk.0.attn_q.weight") ? 0 : !strcmp(ti->name, "blk.0.ffn_up.weight") ? 1 : -1;
        if (q < 0) {
            ok = lm_gguf_add_tensor(w, ti->name, ti->type, ti->n_dims, ti->ne, file + ti->offset) == LM_OK;
            continue;
        }
        enum lm_type type = q == 0 ? LM_TYPE_Q8_0 : LM_TYPE_Q4_0;
        qdata[q] = malloc(lm_row_size(type, ti->ne[0]) * (size_t)ti->ne[1]);
        if (over && over[q])
            memcpy(qdata[q], over[q], lm_row_size(type, ti->ne[0]) * (size_t)ti->ne[1]);
        else
            ok = lm_quantize_chunk(type, (const float *)(file + ti->offset), qdata[q], 0, ti->ne[1], ti->ne[0],
                                   NULL) > 0;
        ok = ok && lm_gguf_add_tensor(w, ti->name, type, ti->n_dims, ti->ne, qdata[q]) == LM_OK;
    }
    ok = ok && lm_gguf_write_file(w, path) == LM_OK;
    lm_gguf_writer_free(w);
    lm_gguf_close(g);
    free(qdata[0]);
    free(qdata[1]);
    free(file);
    return ok;
}

/* max over blocks of 32 of max|got - want| / step, step = one quantization step
 * of the block's wanted values (Q8_0: amax/127 rounding to half a step; Q4_0:
 * amax/8, up to a step at the clamped end). <= 1 passes. */
static double quant_err(const float *got, const double *want, int64_t n, enum lm_type type)
{
    double worst = 0;
    for (int64_t b0 = 0; b0 < n; b0 += 32) {
        double amax = 0, e = 0;
        for (int64_t i = b0; i < b0 + 32; i++) {
            amax = fabs(want[i]) > amax ? fabs(want[i]) : amax;
            e = fabs(got[i] - want[i]) > e ? fabs(got[i] - want[i]) : e;
        }
        /* plus the fp16 rounding of the block scale: up to 2^-11 of amax */
        double step = (type == LM_TYPE_Q8_0 ? 0.5 * amax / 127 : amax / 8) + amax / 1024 + 1e-6;
        double r = e / step;
        worst = r > worst ? r : worst;
    }
    return worst;
}

/* The changed weights are used by the forward pass exactly as if they had
 * been loaded: a model loaded from a file holding them (read back through the
 * buffer) gives bit-identical logits. This catches a weight written in the
 * wrong layout (weights a backend keeps repacked) or not written at all. */
static void check_same_as_fresh(struct llama_model *m, const char *const names[2])
{
    void *bytes[2];
    for (int k = 0; k < 2; k++) {
        struct lm_tensor *t = weight(m, names[k]);
        bytes[k] = malloc(lm_nbytes(t));
        CHECK(lm_tensor_get(t, bytes[k], 0, lm_nbytes(t)) == LM_OK);
    }
    const char *path = api_tmp_path("q2.gguf");
    CHECK(write_quantized_copy(path, bytes));
    struct llama_model *fresh = llama_load_model_from_file(path, llama_model_default_params());
    CHECK(fresh != NULL);
    int nv = llama_n_vocab(m), ne = llama_n_embd(m);
    float *la = malloc((size_t)nv * 4), *lb = malloc((size_t)nv * 4), *e = malloc((size_t)ne * 4);
    run_prompt(m, la, e);
    if (fresh)
        run_prompt(fresh, lb, e);
    CHECKF(fresh && memcmp(la, lb, (size_t)nv * 4) == 0, "logits after LoRA differ from a fresh load: %g",
           api_max_diff(la, lb, (size_t)nv));
    llama_free_model(fresh);
    remove(path);
    free(la);
    free(lb);
    free(e);
    free(bytes[0]);
    free(bytes[1]);
}

static void test_quantized(void)
{
    const char *qpath = api_tmp_path("q.gguf");
    CHECK(write_quantized_copy(qpath, NULL));
    struct llama_model_params mp = llama_model_default_params();
    const char *names[2] = {"blk.0.attn_q.weight", "blk.0.ffn_up.weight"};
    enum lm_type types[2] = {LM_TYPE_Q8_0, LM_TYPE_Q4_0};
    for (int with_base = 0; with_base < 2; with_base++) {
        struct llama_model *m = llama_load_model_from_file(qpath, mp);
        CHECK(m != NULL);
        if (!m)
            return;
        CHECK(weight(m, names[0])->type == LM_TYPE_Q8_0 && weight(m, names[1])->type == LM_TYPE_Q4_0);
        struct lpair pr[2];
        make_pair(&pr[0], names[0], 4, 64, 64, 1);
        make_pair(&pr[1], names[1], 4, 64, 172, 0);
        const char *path = api_tmp_path("q.ggla");
        CHECK(write_adapter(path, 4, 4, pr, 2));
        float *old[2];
        struct llama_model *base = NULL;
        if (with_base) { /* the F32 weights of the original file */
            base = api_load(STORIES);
            old[0] = weight_floats(base, names[0], NULL);
            old[1] = weight_floats(base, names[1], NULL);
        } else {
            old[0] = weight_floats(m, names[0], NULL);
            old[1] = weight_floats(m, names[1], NULL);
        }
        char base_path[4096];
        snprintf(base_path, sizeof base_path, "%s", lm_test_shared(STORIES));
        /* with a base model the model's own (here: already changed) weights are ignored */
        if (with_base)
            CHECK(llama_model_apply_lora_from_file(m, path, 3.0f, NULL, 2) == 0);
        CHECK(llama_model_apply_lora_from_file(m, path, 1.0f, with_base ? base_path : NULL, 2) == 0);
        for (int k = 0; k < 2; k++) {
            int64_t n = 0;
            float *got = weight_floats(m, names[k], &n);
            double *d = expected_delta(&pr[k], 1.0);
            double change = 0;
            for (int64_t i = 0; i < n; i++) {
                change = fabs(d[i]) > change ? fabs(d[i]) : change;
                d[i] += old[k][i];
            }
            double e = quant_err(got, d, n, types[k]);
            CHECKF(e <= 1.0 && change > 0.1, "%s (base %d): %g quantization steps off, delta up to %g", names[k],
                   with_base, e, change);
            printf("lora on %s %s (base model %d): within %.4f quantization steps of W + delta\n",
                   lm_type_name(types[k]), names[k], with_base, e);
            free(got);
            free(d);
            free(old[k]);
            free_pair(&pr[k]);
        }
        if (!with_base)
            check_same_as_fresh(m, names);
        llama_free_model(base);
        llama_free_model(m);
    }
    remove(qpath);
}

/* ---- (d) bad adapters ---- */

static uint64_t weights_hash(struct llama_model *m)
{
    const char *names[] = {"blk.0.attn_q.weight", "blk.0.attn_k.weight", "blk.1.ffn_down.weight", "output.weight"};
    uint64_t h = 1469598103934665603ull;
    for (int k = 0; k < 4; k++) {
        struct lm_tensor *t = weight(m, names[k]);
        size_t n = lm_nbytes(t);
        uint8_t *p = malloc(n);
        CHECK(lm_tensor_get(t, p, 0, n) == LM_OK);
        for (size_t i = 0; i < n; i++)
            h = (h ^ p[i]) * 1099511628211ull;
        free(p);
    }
    return h;
}

static int apply_bytes(struct llama_model *m, const void *data, size_t n, const char *base)
{
    const char *path = api_tmp_path("bad.ggla");
    CHECK(api_write_file(path, data, n));
    return llama_model_apply_lora_from_file(m, path, 1.0f, base, 1);
}

/* A one-pair adapter (zeros) with the given header fields for A; name_len < 0:
 * the name's strlen (else name_len bytes of a_name are written, NULs included);
 * B is [4, b_ne1] named b_name (none when NULL). */
static struct buf adapter_with(int32_t name_len, int32_t ne0, int32_t ne1, const char *a_name, const char *b_name,
                               int32_t b_ne1)
{
    struct buf b = {0};
    static const float zero[4 * 512];
    if (name_len < 0)
        name_len = (int32_t)strlen(a_name);
    write_header(&b, 4, 4);
    put_i32(&b, 2);
    put_i32(&b, name_len);
    put_i32(&b, 0);
    put_i32(&b, ne0);
    put_i32(&b, ne1);
    put(&b, a_name, (size_t)name_len);
    put(&b, NULL, ((b.n + 31) & ~(size_t)31) - b.n);
    put(&b, zero, (size_t)ne0 * (size_t)ne1 * 4);
    if (b_name) {
        struct ltensor bt = {b_name, 0, 4, b_ne1, (float *)zero};
        write_tensor(&b, &bt);
    }
    return b;
}

static void test_bad_files(void)
{
    struct llama_model *m = api_load(STORIES);
    CHECK(m != NULL);
    if (!m)
        return;
    uint64_t h0 = weights_hash(m);
    const char *A = "blk.0.attn_k.weight.loraA", *B = "blk.0.attn_k.weight.loraB";
    int32_t L = (int32_t)strlen(A);
    /* the well-formed one applies (zeros: weights unchanged) */
    struct buf good = adapter_with(-1, 4, 64, A, B, 32);
    CHECK(apply_bytes(m, good.p, good.n, NULL) == 0);
    CHECK(weights_hash(m) == h0);

    CHECK(llama_model_apply_lora_from_file(m, "/nonexistent/x.ggla", 1.0f, NULL, 1) == 1);
    CHECK(llama_model_apply_lora_from_file(m, NULL, 1.0f, NULL, 1) == 1);
    CHECK(llama_model_apply_lora_from_file(NULL, "x", 1.0f, NULL, 1) == 1);
    CHECK(llama_apply_lora_from_file(NULL, "x", 1.0f, NULL, 1) == 1);
    CHECK(apply_bytes(m, good.p, 0, NULL) == 1);             /* empty file */
    CHECK(apply_bytes(m, good.p, 6, NULL) == 1);             /* truncated header */
    CHECK(apply_bytes(m, good.p, 20, NULL) == 1);            /* truncated tensor header */
    CHECK(apply_bytes(m, good.p, good.n - 10, NULL) == 1);   /* truncated data */
    CHECK(apply_bytes(m, good.p, 60, NULL) == 1);            /* cut inside the first tensor's data */
    uint8_t *c = malloc(good.n);
    const struct {
        size_t off;
        int32_t v;
        const char *what;
    } pokes[] = {
        {0, 0x67676c62, "magic"},   {4, 2, "version"},        {8, 0, "rank 0"},      {8, -3, "negative rank"},
        {16, 3, "3 dims"},          {16, 0, "0 dims"},        {20, 1000, "name length"}, {20, -1, "negative name length"},
        {20, 3, "short name"},      {24, 2, "type Q4_0"},     {24, -1, "type -1"},   {28, 0, "ne0 0"},
        {28, -4, "ne0 < 0"},        {32, 0x7fffffff, "huge ne1"}, {28, 0x7fffffff, "huge ne0"}, {32, 63, "A shape"},
        {28, 5, "rank mismatch"},
    };
    for (size_t i = 0; i < sizeof pokes / sizeof pokes[0]; i++) {
        memcpy(c, good.p, good.n);
        memcpy(c + pokes[i].off, &pokes[i].v, 4);
        int r = apply_bytes(m, c, good.n, NULL);
        CHECKF(r == 1, "%s: returned %d", pokes[i].what, r);
    }
    /* both dims huge: the data size would overflow 32 bits many times over */
    memcpy(c, good.p, good.n);
    int32_t huge = 0x7fffffff;
    memcpy(c + 28, &huge, 4);
    memcpy(c + 32, &huge, 4);
    CHECK(apply_bytes(m, c, good.n, NULL) == 1);
    free(c);
    /* name and pairing errors */
    struct buf bad[] = {
        adapter_with(-1, 4, 64, "blk.0.attn_k.weight.loraX", B, 32),             /* not a lora tensor */
        adapter_with(-1, 4, 64, A, NULL, 0),                                     /* A without B */
        adapter_with(-1, 4, 64, A, "blk.0.attn_v.weight.loraB", 32),             /* B of another weight */
        adapter_with(-1, 4, 64, A, A, 32),                                       /* duplicate name */
        adapter_with(-1, 4, 64, A, B, 31),                                       /* B shape */
        adapter_with(-1, 3, 64, A, B, 32),                                       /* rank of A != rank of B */
        adapter_with(-1, 4, 64, "blk.99.attn_k.weight.loraA", "blk.99.attn_k.weight.loraB", 32), /* unknown */
        adapter_with(-1, 4, 64, "blk.0.ffn_down.weight.loraA", "blk.0.ffn_down.weight.loraB", 64), /* A shape */
        adapter_with(L, 4, 64, "blk.0.attn_k.weigh\0.loraA", B, 32),            /* NUL in the name */
        adapter_with(-1, 4, 64, "blk.0.attn_k.weight.loraA", "blk.0.attn_k.weight.loraB.loraB", 32), /* stray B */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int r = apply_bytes(m, bad[i].p, bad[i].n, NULL);
        CHECKF(r == 1, "bad adapter %zu: returned %d", i, r);
        free(bad[i].p);
    }
    /* a good first pair and a bad second pair: nothing is applied */
    struct lpair pr[2];
    make_pair(&pr[0], "blk.0.attn_q.weight", 2, 64, 64, 0);
    make_pair(&pr[1], "blk.0.attn_k.weight", 2, 64, 33, 0);
    CHECK(write_adapter(api_tmp_path("half.ggla"), 2, 2, pr, 2));
    CHECK(llama_model_apply_lora_from_file(m, api_tmp_path("half.ggla"), 1.0f, NULL, 1) == 1);
    free_pair(&pr[0]);
    free_pair(&pr[1]);
    /* base models that do not fit */
    char base[4096];
    snprintf(base, sizeof base, "%s", lm_test_shared("models/llama-2-tiny-random.gguf"));
    CHECK(apply_bytes(m, good.p, good.n, base) == 1);                /* no such tensor / other shape */
    CHECK(apply_bytes(m, good.p, good.n, "/nonexistent.gguf") == 1);
    CHECK(apply_bytes(m, good.p, good.n, api_tmp_path("bad.ggla")) == 1); /* not a GGUF */
    CHECK(weights_hash(m) == h0);

    /* random byte flips in the headers: 0 or 1, never a crash */
    uint32_t s = 99;
    int n_ok = 0, n_fail = 0;
    c = malloc(good.n);
    for (int it = 0; it < 300; it++) {
        memcpy(c, good.p, good.n);
        for (int k = 0; k < 3; k++) {
            s = s * 1103515245u + 12345u;
            size_t off = (s >> 8) % 80; /* header, tensor headers and names */
            c[off] ^= (uint8_t)(1u << ((s >> 4) & 7));
        }
        int r = apply_bytes(m, c, good.n, NULL);
        CHECK(r == 0 || r == 1);
        n_ok += r == 0;
        n_fail += r == 1;
    }
    printf("lora: bad adapters refused; 300 random header corruptions: %d applied, %d refused\n", n_ok, n_fail);
    free(c);
    free(good.p);
    remove(api_tmp_path("bad.ggla"));
    llama_free_model(m);
}

int main(void)
{
    api_test_init();
    test_f32(true);
    test_f32(false);
    test_quantized();
    test_bad_files();
    remove(api_tmp_path("out.ggla"));
    remove(api_tmp_path("two.ggla"));
    remove(api_tmp_path("q.ggla"));
    remove(api_tmp_path("half.ggla"));
    return lm_test_summary();
}
