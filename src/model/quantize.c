/* quantize.c - model quantization as llama.cpp b1892 does it: the ftype
 * table, the per-tensor type recipe (get_k_quant_type), a threaded row
 * quantizer, and lm_quantize_model (GGUF in, GGUF out).
 *
 * Invariants: every tensor's output type is decided in file order before the
 * output file is created (the attn_v / ffn_down counters depend on that
 * order), so a refused tensor never leaves a half-written file. Input tensor
 * data is read from an mmap of the input; each quantized tensor is converted
 * and encoded chunk by chunk straight into the writer's per-tensor buffer,
 * so memory is one output tensor plus a few rows per thread.
 * Workload: a 7B F16 model is ~6.7e9 values; rows are independent, so any
 * number of threads gives the same bytes.
 */
#include "model/quantize.h"
#include "core/tensor.h"
#include "model/tensor_names.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/log.h"
#include "core/time.h"
#include "gguf/gguf.h"
#include "model/mapping.h"
#include "quant/quant.h"

/* ---- file types ---- */

/* In `lamina quantize --help` order. plain: one row per type at most (the
 * guess, as b1892's llama_model_loader; the K types guess their _M variant).
 * Display names are b1892's llama_model_ftype_name. */
static const struct lm_ftype_info ftypes[] = {
    /* ftype, name, display, base, note (NULL: not writable), plain, needs_imatrix */
    {LM_FTYPE_Q4_0, "Q4_0", "Q4_0", LM_TYPE_Q4_0, " 3.56G, +0.2166 ppl @ LLaMA-v1-7B", true, false},
    {LM_FTYPE_Q4_1, "Q4_1", "Q4_1", LM_TYPE_Q4_1, " 3.90G, +0.1585 ppl @ LLaMA-v1-7B", true, false},
    {LM_FTYPE_Q4_1_SOME_F16, "Q4_1_SOME_F16", "Q4_1, some F16", LM_TYPE_Q4_1, NULL, false, false},
    {LM_FTYPE_Q5_0, "Q5_0", "Q5_0", LM_TYPE_Q5_0, " 4.33G, +0.0683 ppl @ LLaMA-v1-7B", true, false},
    {LM_FTYPE_Q5_1, "Q5_1", "Q5_1", LM_TYPE_Q5_1, " 4.70G, +0.0349 ppl @ LLaMA-v1-7B", true, false},
    {LM_FTYPE_IQ2_XXS, "IQ2_XXS", "IQ2_XXS - 2.0625 bpw", LM_TYPE_IQ2_XXS, " 2.06 bpw quantization", true, true},
    {LM_FTYPE_IQ2_XS, "IQ2_XS", "IQ2_XS - 2.3125 bpw", LM_TYPE_IQ2_XS, " 2.31 bpw quantization", true, true},
    {LM_FTYPE_Q2_K, "Q2_K", "Q2_K", LM_TYPE_Q2_K, " 2.63G, +0.6717 ppl @ LLaMA-v1-7B", true, false},
    {LM_FTYPE_Q2_K_S, "Q2_K_S", "Q2_K - Small", LM_TYPE_Q2_K, " 2.16G, +9.0634 ppl @ LLaMA-v1-7B", false, true},
    {LM_FTYPE_Q3_K_XS, "Q3_K_XS", "Q3_K - Extra small", LM_TYPE_Q3_K, NULL, false, false},
    {LM_FTYPE_Q3_K_S, "Q3_K_S", "Q3_K - Small", LM_TYPE_Q3_K, " 2.75G, +0.5551 ppl @ LLaMA-v1-7B", false, false},
    {LM_FTYPE_Q3_K_M, "Q3_K_M", "Q3_K - Medium", LM_TYPE_Q3_K, " 3.07G, +0.2496 ppl @ LLaMA-v1-7B", true, false},
    {LM_FTYPE_Q3_K_L, "Q3_K_L", "Q3_K - Large", LM_TYPE_Q3_K, " 3.35G, +0.1764 ppl @ LLaMA-v1-7B", false, false},
    {LM_FTYPE_Q4_K_S, "Q4_K_S", "Q4_K - Small", LM_TYPE_Q4_K, " 3.59G, +0.0992 ppl @ LLaMA-v1-7B", false, false},
    {LM_FTYPE_Q4_K_M, "Q4_K_M", "Q4_K - Medium", LM_TYPE_Q4_K, " 3.80G, +0.0532 ppl @ LLaMA-v1-7B", true, false},
    {LM_FTYPE_Q5_K_S, "Q5_K_S", "Q5_K - Small", LM_TYPE_Q5_K, " 4.33G, +0.0400 ppl @ LLaMA-v1-7B", false, false},
    {LM_FTYPE_Q5_K_M, "Q5_K_M", "Q5_K - Medium", LM_TYPE_Q5_K, " 4.45G, +0.0122 ppl @ LLaMA-v1-7B", true, false},
    {LM_FTYPE_Q6_K, "Q6_K", "Q6_K", LM_TYPE_Q6_K, " 5.15G, -0.0008 ppl @ LLaMA-v1-7B", true, false},
    {LM_FTYPE_Q8_0, "Q8_0", "Q8_0", LM_TYPE_Q8_0, " 6.70G, +0.0004 ppl @ LLaMA-v1-7B", true, false},
    {LM_FTYPE_F16, "F16", "F16", LM_TYPE_F16, "13.00G              @ 7B", true, false},
    {LM_FTYPE_BF16, "BF16", "BF16", LM_TYPE_BF16, "13.00G              @ 7B (lamina extension; b1892 has no BF16)",
     true, false},
    {LM_FTYPE_ALL_F32, "F32", "all F32", LM_TYPE_F32, "26.00G              @ 7B", true, false},
};

#define N_FTYPES ((int)(sizeof ftypes / sizeof ftypes[0]))

/* See quantize.h; thread-safe. */
const struct lm_ftype_info *lm_ftype_info_at(int i) { return i >= 0 && i < N_FTYPES ? &ftypes[i] : NULL; }

/* See quantize.h; thread-safe. */
const struct lm_ftype_info *lm_ftype_info(uint32_t ftype)
{
    for (int i = 0; i < N_FTYPES; i++)
        if (ftypes[i].ftype == ftype)
            return &ftypes[i];
    return NULL;
}

/* Can quantize write it? (The rows without a note are only named.) */
static bool writable(const struct lm_ftype_info *fi) { return fi && fi->note; }

/* The plain row of type t, or NULL. */
static const struct lm_ftype_info *plain_row(enum lm_type t)
{
    for (int i = 0; i < N_FTYPES; i++)
        if (ftypes[i].plain && ftypes[i].base == t)
            return &ftypes[i];
    return NULL;
}

/* See quantize.h; thread-safe. */
uint32_t lm_ftype_guess(enum lm_type t)
{
    const struct lm_ftype_info *fi = plain_row(t);
    return fi ? fi->ftype : LM_FTYPE_ALL_F32;
}

/* See quantize.h; thread-safe. */
bool lm_ftype_parse(const char *s, uint32_t *out)
{
    if (!s || !s[0] || !out)
        return false;
    const struct lm_ftype_info *fi = NULL;
    enum lm_type t;
    for (int i = 0; i < N_FTYPES && !fi; i++)
        if (!strcasecmp(s, ftypes[i].name))
            fi = &ftypes[i];
    if (!fi && lm_type_from_name(s, &t))
        fi = plain_row(t);
    if (!fi) {
        char *end;
        long long v = strtoll(s, &end, 10);
        if (*end || end == s || v < 0 || v > (long long)UINT32_MAX)
            return false;
        fi = lm_ftype_info((uint32_t)v);
    }
    if (!writable(fi))
        return false;
    *out = fi->ftype;
    return true;
}

/* ---- the recipe ---- */

/* See quantize.h. */
lm_status lm_qrecipe_init(struct lm_qrecipe *r, uint32_t ftype, const struct lm_qmodel *model)
{
    const struct lm_ftype_info *fi = lm_ftype_info(ftype);
    if (!r || !model)
        return LM_ERR_INVALID_ARG;
    memset(r, 0, sizeof *r);
    r->ftype = ftype;
    r->model = *model;
    r->quantize_output_tensor = true;
    if (!writable(fi))
        return LM_ERR_UNSUPPORTED;
    r->base = fi->base;
    return LM_OK;
}

/* b1892 recognises tensors by substrings of their names ("attn_v.weight"
 * anywhere, "ffn_down" anywhere: experts too); the parts come from the
 * tensor-name table. suffix NULL: the base name alone. */
static bool has(const char *name, enum lm_tn tn, const char *suffix)
{
    char part[LM_MAX_NAME];
    snprintf(part, sizeof part, "%s%s%s", lm_tn_base(tn), suffix ? "." : "", suffix ? suffix : "");
    return strstr(name, part) != NULL;
}

/* The whole name of a global weight ("output.weight"). */
static bool is(const char *name, enum lm_tn tn)
{
    char full[LM_MAX_NAME];
    return !strcmp(name, lm_tn_format(full, sizeof full, tn, 0, "weight"));
}

/* See quantize.h. */
void lm_qrecipe_count(struct lm_qrecipe *r, const char *name)
{
    if (has(name, LM_TN_ATTN_V, "weight") || has(name, LM_TN_ATTN_QKV, "weight"))
        r->n_attention_wv++;
    else if (has(name, LM_TN_FFN_DOWN, NULL))
        r->n_ffn_down++;
}

static bool use_more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

static bool is_ftype(const struct lm_qrecipe *r, uint32_t f) { return r->ftype == f; }
static bool is_iq2(const struct lm_qrecipe *r) { return r->ftype == LM_FTYPE_IQ2_XXS || r->ftype == LM_FTYPE_IQ2_XS; }
static bool is_falcon(const struct lm_qrecipe *r) { return !strcmp(r->model.arch, "falcon"); }

static enum lm_type type_attn_v(struct lm_qrecipe *r, enum lm_type t)
{
    const struct lm_qmodel *m = &r->model;
    int i = r->i_attention_wv, n = r->n_attention_wv;
    if (is_ftype(r, LM_FTYPE_Q2_K))
        t = LM_TYPE_Q3_K;
    else if (is_ftype(r, LM_FTYPE_Q3_K_M))
        t = i < 2 ? LM_TYPE_Q5_K : LM_TYPE_Q4_K;
    else if (is_ftype(r, LM_FTYPE_Q3_K_L))
        t = LM_TYPE_Q5_K;
    else if ((is_ftype(r, LM_FTYPE_Q4_K_M) || is_ftype(r, LM_FTYPE_Q5_K_M)) && use_more_bits(i, n))
        t = LM_TYPE_Q6_K;
    else if (is_ftype(r, LM_FTYPE_Q4_K_S) && i < 4)
        t = LM_TYPE_Q5_K;
    /* b1892's model type 70B: llama with 80 layers and grouped KV heads */
    bool is_70b = !strcmp(m->arch, "llama") && m->n_layer == 80 && m->n_head != m->n_head_kv;
    if (is_70b && (t == LM_TYPE_Q3_K || t == LM_TYPE_Q4_K))
        t = LM_TYPE_Q5_K;
    if (m->n_expert == 8)
        t = LM_TYPE_Q8_0;
    r->i_attention_wv++;
    return t;
}

static lm_status type_ffn_down(struct lm_qrecipe *r, const char *name, enum lm_type *t, char *msg, size_t msg_size)
{
    int n_expert = r->model.n_expert > 1 ? (int)r->model.n_expert : 1;
    int il = r->i_ffn_down, nl = r->n_ffn_down;
    if (n_expert > 1) { /* experts are not in layer order: read the layer from the name */
        nl = r->n_ffn_down / n_expert;
        if (sscanf(name, "blk.%d.ffn_down", &il) != 1 || il < 0 || il >= nl) {
            snprintf(msg, msg_size, "cannot tell the layer of tensor %s (expected blk.N.ffn_down with N < %d)", name,
                     nl);
            return LM_ERR_CORRUPT;
        }
    }
    bool more = use_more_bits(il, nl), falcon = is_falcon(r);
    if (is_ftype(r, LM_FTYPE_Q2_K))
        *t = LM_TYPE_Q3_K;
    else if (is_ftype(r, LM_FTYPE_Q2_K_S)) {
        if (il < nl / 8)
            *t = LM_TYPE_Q4_K;
    } else if (is_ftype(r, LM_FTYPE_Q3_K_M))
        *t = il < nl / 16 ? LM_TYPE_Q5_K : !falcon || more ? LM_TYPE_Q4_K : LM_TYPE_Q3_K;
    else if (is_ftype(r, LM_FTYPE_Q3_K_L))
        *t = falcon ? LM_TYPE_Q4_K : LM_TYPE_Q5_K;
    else if (is_ftype(r, LM_FTYPE_Q4_K_M)) {
        if (falcon)
            *t = il < nl / 16 ? LM_TYPE_Q6_K : more ? LM_TYPE_Q5_K : LM_TYPE_Q4_K;
        else if (more)
            *t = LM_TYPE_Q6_K;
    } else if (is_ftype(r, LM_FTYPE_Q5_K_M) && more)
        *t = LM_TYPE_Q6_K;
    else if (is_ftype(r, LM_FTYPE_Q4_K_S) && !falcon && il < nl / 8)
        *t = LM_TYPE_Q5_K;
    else if ((is_ftype(r, LM_FTYPE_Q4_0) || is_ftype(r, LM_FTYPE_Q5_0)) && r->has_imatrix && il < nl / 8)
        *t = is_ftype(r, LM_FTYPE_Q4_0) ? LM_TYPE_Q4_1 : LM_TYPE_Q5_1;
    r->i_ffn_down++;
    return LM_OK;
}

static enum lm_type type_attn_output(const struct lm_qrecipe *r, enum lm_type t)
{
    if (is_falcon(r))
        return is_ftype(r, LM_FTYPE_Q3_K_L) ? LM_TYPE_Q4_K : t;
    if (r->model.n_expert == 8) {
        if (is_ftype(r, LM_FTYPE_Q2_K) || is_ftype(r, LM_FTYPE_Q3_K_S) || is_ftype(r, LM_FTYPE_Q3_K_M) ||
            is_ftype(r, LM_FTYPE_Q4_K_S) || is_ftype(r, LM_FTYPE_Q4_K_M))
            t = LM_TYPE_Q5_K;
        return t;
    }
    if (is_ftype(r, LM_FTYPE_Q2_K))
        t = LM_TYPE_Q3_K;
    else if (is_ftype(r, LM_FTYPE_Q3_K_M))
        t = LM_TYPE_Q4_K;
    else if (is_ftype(r, LM_FTYPE_Q3_K_L))
        t = LM_TYPE_Q5_K;
    return t;
}

/* The mixture rules (get_k_quant_type without the fallback). */
static lm_status mixture_type(struct lm_qrecipe *r, const char *name, int64_t ne0, enum lm_type *t, char *msg,
                              size_t msg_size)
{
    const struct lm_qmodel *m = &r->model;
    if (is(name, LM_TN_OUTPUT)) {
        if (is_falcon(r) || ne0 % LM_QK_K != 0)
            *t = LM_TYPE_Q8_0;
        else if (is_iq2(r))
            *t = LM_TYPE_Q5_K;
        else if (*t != LM_TYPE_Q8_0)
            *t = LM_TYPE_Q6_K;
    } else if (is_iq2(r)) {
        if (has(name, LM_TN_ATTN_V, "weight")) {
            uint32_t n_gqa = m->n_head_kv ? m->n_head / m->n_head_kv : 1;
            *t = n_gqa >= 4 || m->n_expert >= 4 ? LM_TYPE_Q4_K : LM_TYPE_Q2_K;
            r->i_attention_wv++;
        } else if (has(name, LM_TN_FFN_DOWN, NULL)) {
            if (r->i_ffn_down < r->n_ffn_down / 8)
                *t = LM_TYPE_Q2_K;
            r->i_ffn_down++;
        } else if (is(name, LM_TN_TOKEN_EMBD)) {
            *t = LM_TYPE_Q2_K;
        }
    } else if (has(name, LM_TN_ATTN_V, "weight")) {
        *t = type_attn_v(r, *t);
    } else if (has(name, LM_TN_ATTN_K, "weight")) {
        if (m->n_expert == 8)
            *t = LM_TYPE_Q8_0;
    } else if (has(name, LM_TN_FFN_DOWN, NULL)) {
        return type_ffn_down(r, name, t, msg, msg_size);
    } else if (has(name, LM_TN_ATTN_OUT, "weight")) {
        *t = type_attn_output(r, *t);
    } else if (has(name, LM_TN_ATTN_QKV, "weight")) {
        if (is_ftype(r, LM_FTYPE_Q3_K_M) || is_ftype(r, LM_FTYPE_Q3_K_L))
            *t = LM_TYPE_Q4_K;
        else if (is_ftype(r, LM_FTYPE_Q4_K_M))
            *t = LM_TYPE_Q5_K;
        else if (is_ftype(r, LM_FTYPE_Q5_K_M))
            *t = LM_TYPE_Q6_K;
    }
    return LM_OK;
}

/* b1892's fallback for super-block types when a row is not a multiple of 256. */
static enum lm_type fallback_type(struct lm_qrecipe *r, const char *name, int64_t ne0, enum lm_type t)
{
    enum lm_type fb;
    switch (t) {
    case LM_TYPE_IQ2_XXS:
    case LM_TYPE_IQ2_XS:
    case LM_TYPE_Q2_K: fb = LM_TYPE_Q4_0; break;
    case LM_TYPE_Q3_K: fb = LM_TYPE_Q4_1; break;
    case LM_TYPE_Q4_K: fb = LM_TYPE_Q5_0; break;
    case LM_TYPE_Q5_K: fb = LM_TYPE_Q5_1; break;
    case LM_TYPE_Q6_K: fb = LM_TYPE_Q8_0; break;
    default: return t;
    }
    if (ne0 % LM_QK_K == 0) {
        r->n_k_quantized++;
        return t;
    }
    LM_LOG_DBG("quantize: %s: rows of %lld are not a multiple of %d, required for %s - using fallback %s\n", name,
               (long long)ne0, LM_QK_K, lm_type_name(t), lm_type_name(fb));
    r->n_fallback++;
    return fb;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && !memcmp(s + n - k, suffix, k);
}

/* See quantize.h. */
lm_status lm_qrecipe_type(struct lm_qrecipe *r, const char *name, int n_dims, int64_t ne0, enum lm_type src_type,
                          enum lm_type *out, bool *quantize, char *msg, size_t msg_size)
{
    /* token_types stays as it is: bert adds its row 0 to every token (as later llama.cpp) */
    bool q = ends_with(name, "weight") && n_dims == 2 && !r->only_copy &&
             (r->quantize_output_tensor || !is(name, LM_TN_OUTPUT)) && !has(name, LM_TN_FFN_GATE_INP, "weight") &&
             !is(name, LM_TN_TOKEN_TYPES);
    enum lm_type t = src_type;
    if (q) {
        t = r->base;
        if (!r->pure) {
            lm_status st = mixture_type(r, name, ne0, &t, msg, msg_size);
            if (st)
                return st;
        }
        /* b1892 applies the fallback only without pure (and then crashes on such rows); lamina applies it always */
        t = fallback_type(r, name, ne0, t);
        q = t != src_type;
    }
    if (q && (ne0 % lm_type_blck(t) != 0 || lm_type_blck(t) <= 0)) {
        snprintf(msg, msg_size, "tensor %s: rows of %lld values do not fit %s (blocks of %lld)", name, (long long)ne0,
                 lm_type_name(t), (long long)lm_type_blck(t));
        return LM_ERR_SHAPE;
    }
    *out = t;
    *quantize = q;
    return LM_OK;
}

/* ---- the row quantizer ---- */

struct rows_job {
    enum lm_type type;
    int64_t n_rows, n_per_row, rows_per_chunk;
    size_t row_size;
    lm_rows_fn rows;
    void *user;
    const float *imatrix;
    uint8_t *dst;
    atomic_llong next;
    atomic_int status;
};

static void *rows_worker(void *arg)
{
    struct rows_job *j = arg;
    float *buf = malloc((size_t)(j->rows_per_chunk * j->n_per_row) * sizeof(float));
    if (!buf) {
        int expected = LM_OK;
        atomic_compare_exchange_strong(&j->status, &expected, LM_ERR_NOMEM);
        return NULL;
    }
    for (;;) {
        int64_t first = atomic_fetch_add(&j->next, j->rows_per_chunk);
        if (first >= j->n_rows || atomic_load(&j->status) != LM_OK)
            break;
        int64_t n = j->n_rows - first < j->rows_per_chunk ? j->n_rows - first : j->rows_per_chunk;
        lm_status st = j->rows(j->user, first, n, buf);
        if (!st && !lm_quantize_chunk(j->type, buf, j->dst + (size_t)first * j->row_size, 0, n, j->n_per_row,
                                      j->imatrix))
            st = LM_ERR_UNSUPPORTED;
        if (st) {
            int expected = LM_OK;
            atomic_compare_exchange_strong(&j->status, &expected, (int)st);
            break;
        }
    }
    free(buf);
    return NULL;
}

/* See quantize.h; thread-safe. */
int lm_quantize_n_cpus(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)(n < 1024 ? n : 1024) : 1;
}

/* See quantize.h. Spawns up to nthread-1 threads and works in the caller too. */
lm_status lm_quantize_rows(enum lm_type type, int64_t n_rows, int64_t n_per_row, lm_rows_fn rows, void *user,
                           const float *imatrix, void *dst, int nthread)
{
    enum { MIN_CHUNK = 32 * 512 }; /* values per chunk claimed by a thread (b1892's) */
    if (!rows || !dst || n_rows < 0 || n_per_row <= 0)
        return LM_ERR_INVALID_ARG;
    const struct lm_quant_traits *qt = lm_quant_traits(type);
    if (!lm_quantize_supported(type) || (qt->needs_imatrix && !imatrix))
        return LM_ERR_UNSUPPORTED;
    if (n_per_row % lm_type_blck(type) != 0)
        return LM_ERR_SHAPE;
    struct rows_job j = {
        .type = type, .n_rows = n_rows, .n_per_row = n_per_row,
        .rows_per_chunk = n_per_row >= MIN_CHUNK ? 1 : (MIN_CHUNK + n_per_row - 1) / n_per_row,
        .row_size = lm_row_size(type, n_per_row), .rows = rows, .user = user, .imatrix = imatrix, .dst = dst,
    };
    atomic_init(&j.next, 0);
    atomic_init(&j.status, LM_OK);
    if (nthread <= 0)
        nthread = lm_quantize_n_cpus();
    int64_t n_chunks = (n_rows + j.rows_per_chunk - 1) / j.rows_per_chunk;
    if (nthread > n_chunks)
        nthread = n_chunks > 0 ? (int)n_chunks : 1;
    if (nthread > 256)
        nthread = 256;
    pthread_t tid[256];
    int started = 0;
    for (int i = 1; i < nthread; i++) {
        if (pthread_create(&tid[started], NULL, rows_worker, &j) != 0)
            break; /* fewer threads: same bytes, just slower */
        started++;
    }
    rows_worker(&j);
    for (int i = 0; i < started; i++)
        pthread_join(tid[i], NULL);
    return (lm_status)atomic_load(&j.status);
}

/* ---- whole files ---- */

/* See quantize.h. */
struct lm_quantize_params lm_quantize_default_params(void)
{
    struct lm_quantize_params p;
    memset(&p, 0, sizeof p);
    p.ftype = LM_FTYPE_Q5_1; /* as b1892 */
    p.quantize_output_tensor = true;
    return p;
}

struct qtensor {
    const struct lm_gguf_tensor_info *ti;
    int n_dims;           /* ggml_n_dims: trailing 1s dropped */
    enum lm_type type;    /* output type */
    bool quantize;
    const float *imatrix;
    size_t new_size;
};

struct qfile {
    const struct lm_quantize_params *p;
    struct lm_gguf *g;
    struct lm_mapping *map;
    struct qtensor *t;
    int64_t n_t;
    struct lm_qrecipe r;
    uint32_t ftype_out;
    int nthread;
    uint64_t size_in, size_out;
    char *err;
    size_t err_size;
};

static lm_status qfail(struct qfile *q, lm_status st, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

static lm_status qfail(struct qfile *q, lm_status st, const char *fmt, ...)
{
    if (q->err && q->err_size) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(q->err, q->err_size, fmt, ap);
        va_end(ap);
    }
    return st;
}

/* A u32 key of the arch prefix ("%s.block_count"); absent keys keep *out. */
static lm_status arch_u32(struct qfile *q, const char *fmt, uint32_t *out, bool required)
{
    char key[128];
    snprintf(key, sizeof key, fmt, q->r.model.arch);
    int64_t i = lm_gguf_find_key(q->g, key);
    if (i < 0)
        return required ? qfail(q, LM_ERR_CORRUPT, "required key %s is missing", key) : LM_OK;
    if (lm_gguf_get_u32(q->g, i, out))
        return qfail(q, LM_ERR_CORRUPT, "key %s: expected an unsigned 32-bit integer", key);
    return LM_OK;
}

/* The model facts the recipe reads (b1892 reads them through llm_load_hparams). */
static lm_status read_model(struct qfile *q, struct lm_qmodel *m)
{
    const char *arch;
    size_t len;
    int64_t i = lm_gguf_find_key(q->g, "general.architecture");
    memset(m, 0, sizeof *m);
    if (i < 0 || lm_gguf_get_str(q->g, i, &arch, &len) || len == 0 || len >= sizeof m->arch)
        return qfail(q, LM_ERR_CORRUPT, "general.architecture is missing or not a short string");
    memcpy(q->r.model.arch, arch, len + 1);
    memcpy(m->arch, arch, len + 1);
    lm_status st = arch_u32(q, "%s.block_count", &m->n_layer, true);
    if (!st)
        st = arch_u32(q, "%s.attention.head_count", &m->n_head, false);
    m->n_head_kv = m->n_head;
    if (!st)
        st = arch_u32(q, "%s.attention.head_count_kv", &m->n_head_kv, false);
    if (!st)
        st = arch_u32(q, "%s.expert_count", &m->n_expert, false);
    return st;
}

/* The file type of an input without general.file_type: b1892's guess from the
 * most common tensor type (first to reach the count wins), marked GUESSED. */
static uint32_t input_ftype(const struct lm_gguf *g)
{
    int64_t k = lm_gguf_find_key(g, "general.file_type");
    uint32_t ft;
    if (k >= 0 && lm_gguf_get_u32(g, k, &ft) == LM_OK)
        return ft;
    int64_t count[LM_TYPE_COUNT] = {0}, best = 0;
    enum lm_type tmax = LM_TYPE_F32;
    for (int64_t i = 0; i < lm_gguf_n_tensors(g); i++) {
        enum lm_type t = lm_gguf_tensor_info(g, i)->type;
        if (++count[t] > best) {
            best = count[t];
            tmax = t;
        }
    }
    return lm_ftype_guess(tmax) | LM_FTYPE_GUESSED;
}

static int ggml_n_dims(const struct lm_gguf_tensor_info *ti)
{
    int n = 4;
    while (n > 1 && ti->ne[n - 1] == 1)
        n--;
    return n;
}

/* Can the input type be converted to floats for re-encoding? */
static lm_status check_source(struct qfile *q, const struct qtensor *qt)
{
    enum lm_type st = qt->ti->type;
    const struct lm_type_traits *tt = lm_type_traits(st);
    if (tt->is_quantized && !q->p->allow_requantize)
        return qfail(q, LM_ERR_UNSUPPORTED, "tensor %s: requantizing from type %s is disabled (allow_requantize)",
                     qt->ti->name, lm_type_name(st));
    if (!lm_quant_traits(st)->to_float)
        return qfail(q, LM_ERR_UNSUPPORTED, "tensor %s: cannot convert type %s to floats", qt->ti->name,
                     lm_type_name(st));
    return LM_OK;
}

/* b1892's "very low-bit quantization" test: IQ2 tensors, and the tensors that
 * get the base type of a file type that needs an importance matrix (Q2_K_S),
 * token_embd excepted. */
static bool needs_imatrix(uint32_t ftype, const struct qtensor *qt)
{
    const struct lm_ftype_info *fi = lm_ftype_info(ftype);
    if (lm_quantize_requires_imatrix(qt->type))
        return true;
    return fi && fi->needs_imatrix && qt->type == fi->base && !is(qt->ti->name, LM_TN_TOKEN_EMBD);
}

/* Decide every tensor's output type, in file order, and find every error. */
static lm_status plan(struct qfile *q)
{
    const struct lm_quantize_params *p = q->p;
    char msg[256] = "";
    for (int64_t i = 0; i < q->n_t; i++)
        lm_qrecipe_count(&q->r, lm_gguf_tensor_info(q->g, i)->name);
    if (q->r.n_attention_wv != q->r.n_ffn_down || (uint32_t)q->r.n_attention_wv != q->r.model.n_layer)
        LM_LOG_WRN("quantize: strange model: n_attention_wv = %d, n_ffn_down = %d, n_layer = %u\n",
                   q->r.n_attention_wv, q->r.n_ffn_down, q->r.model.n_layer);
    for (int64_t i = 0; i < q->n_t; i++) {
        struct qtensor *qt = &q->t[i];
        qt->ti = lm_gguf_tensor_info(q->g, i);
        qt->n_dims = ggml_n_dims(qt->ti);
        lm_status st = lm_qrecipe_type(&q->r, qt->ti->name, qt->n_dims, qt->ti->ne[0], qt->ti->type, &qt->type,
                                       &qt->quantize, msg, sizeof msg);
        if (st)
            return qfail(q, st, "%s", msg);
        qt->new_size = qt->quantize ? lm_row_size(qt->type, qt->ti->ne[0]) * (size_t)(qt->ti->ne[1] * qt->ti->ne[2] *
                                                                                    qt->ti->ne[3])
                                    : (size_t)qt->ti->size;
        if (!qt->quantize)
            continue;
        if (p->imatrix)
            qt->imatrix = p->imatrix(p->imatrix_user, qt->ti->name, qt->ti->ne[0]);
        if (needs_imatrix(p->ftype, qt) && !qt->imatrix)
            return qfail(q, LM_ERR_INVALID_ARG,
                         "Missing importance matrix for tensor %s in a very low-bit quantization", qt->ti->name);
        if (!lm_quantize_supported(qt->type))
            return qfail(q, LM_ERR_UNSUPPORTED, "tensor %s: lamina cannot encode %s yet", qt->ti->name,
                         lm_type_name(qt->type));
        if (qt->ti->type != LM_TYPE_F32 && (st = check_source(q, qt)))
            return st;
    }
    return LM_OK;
}

struct src_rows {
    const uint8_t *data;
    lm_to_float_fn to_float;
    int64_t n_per_row;
    size_t row_size;
};

static lm_status src_rows(void *user, int64_t first, int64_t n, float *dst)
{
    const struct src_rows *s = user;
    s->to_float(s->data + (size_t)first * s->row_size, dst, n * s->n_per_row);
    return LM_OK;
}

/* The writer's fill callback: encode tensor i into dst. */
static lm_status fill_tensor(void *user, int64_t i, void *dst, size_t size)
{
    struct qfile *q = user;
    const struct qtensor *qt = &q->t[i];
    const struct lm_gguf_tensor_info *ti = qt->ti;
    struct src_rows s = {
        .data = q->map->addr + ti->offset, .to_float = lm_quant_traits(ti->type)->to_float,
        .n_per_row = ti->ne[0], .row_size = lm_row_size(ti->type, ti->ne[0]),
    };
    int64_t n_rows = ti->ne[1] * ti->ne[2] * ti->ne[3];
    if (size != qt->new_size)
        return LM_ERR_INVALID_ARG;
    lm_status st = lm_quantize_rows(qt->type, n_rows, ti->ne[0], src_rows, &s, qt->imatrix, dst, q->nthread);
    LM_LOG_INF("[%4lld/%4lld] %36s - [%5lld, %5lld], %6s -> %6s, %8.2f MiB -> %8.2f MiB\n", (long long)i + 1,
               (long long)q->n_t, ti->name, (long long)ti->ne[0], (long long)ti->ne[1], lm_type_name(ti->type),
               lm_type_name(qt->type), ti->size / 1048576.0, size / 1048576.0);
    if (st)
        qfail(q, st, "tensor %s: encoding as %s failed (%s)", ti->name, lm_type_name(qt->type), lm_status_str(st));
    return st;
}

/* Build the writer: key/values, then every tensor (copies point into the map). */
static lm_status build_writer(struct qfile *q, struct lm_gguf_writer *w)
{
    lm_status st = LM_OK;
    for (int64_t i = 0; i < lm_gguf_n_kv(q->g) && !st; i++)
        st = lm_gguf_copy_kv(w, q->g, i);
    if (!st)
        st = lm_gguf_set_u32(w, "general.quantization_version", LM_QNT_VERSION);
    if (!st)
        st = lm_gguf_set_u32(w, "general.file_type", q->ftype_out);
    for (int64_t i = 0; i < q->n_t && !st; i++) {
        const struct qtensor *qt = &q->t[i];
        const void *data = qt->quantize ? NULL : q->map->addr + qt->ti->offset;
        st = lm_gguf_add_tensor(w, qt->ti->name, qt->type, qt->n_dims, qt->ti->ne, data);
        q->size_in += qt->ti->size;
        q->size_out += qt->new_size;
        if (!qt->quantize)
            LM_LOG_DBG("[%4lld/%4lld] %36s - %6s, copied\n", (long long)i + 1, (long long)q->n_t, qt->ti->name,
                       lm_type_name(qt->type));
    }
    if (st)
        return qfail(q, st, "cannot build the output metadata (%s)", lm_status_str(st));
    lm_gguf_writer_set_fill(w, fill_tensor, q);
    return LM_OK;
}

static bool same_file(const char *a, const char *b)
{
    struct stat sa, sb;
    return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

/* Open the input, read the model facts, start the recipe. */
static lm_status open_input(struct qfile *q, const char *in)
{
    char msg[200];
    lm_status st = lm_gguf_open(in, &q->g, msg, sizeof msg);
    if (st)
        return qfail(q, st, "%s: %s", in, msg);
    if ((st = lm_mapping_open(in, &q->map)))
        return qfail(q, st, "%s: cannot map the file", in);
    struct lm_qmodel m;
    if ((st = read_model(q, &m)))
        return st;
    q->n_t = lm_gguf_n_tensors(q->g);
    q->t = calloc(q->n_t > 0 ? (size_t)q->n_t : 1, sizeof *q->t);
    if (!q->t)
        return qfail(q, LM_ERR_NOMEM, "out of memory");
    const struct lm_quantize_params *p = q->p;
    q->ftype_out = p->only_copy ? input_ftype(q->g) : p->ftype;
    st = lm_qrecipe_init(&q->r, p->ftype, &m);
    if (st && !p->only_copy)
        return qfail(q, st, "invalid output file type %u", p->ftype);
    q->r.pure = p->pure;
    q->r.quantize_output_tensor = p->quantize_output_tensor;
    q->r.only_copy = p->only_copy;
    q->r.has_imatrix = p->imatrix != NULL;
    return LM_OK;
}

/* See quantize.h. */
lm_status lm_quantize_model(const char *in, const char *out, const struct lm_quantize_params *p, char *err,
                            size_t err_size)
{
    struct qfile q = {.p = p, .err = err, .err_size = err_size};
    struct lm_gguf_writer *w = NULL;
    int64_t t0 = lm_time_us();
    if (err && err_size)
        err[0] = 0;
    if (!in || !out || !p)
        return qfail(&q, LM_ERR_INVALID_ARG, "missing input path, output path or parameters");
    if (same_file(in, out))
        return qfail(&q, LM_ERR_INVALID_ARG, "the output file %s is the input file", out);
    q.nthread = p->nthread > 0 ? p->nthread : lm_quantize_n_cpus();
    lm_status st = open_input(&q, in);
    if (!st)
        st = plan(&q);
    if (!st && (st = lm_gguf_writer_new(&w)))
        qfail(&q, st, "out of memory");
    if (!st)
        st = build_writer(&q, w);
    if (!st) {
        LM_LOG_INF("quantize: %s -> %s, file type %u, %lld tensors, %d threads\n", in, out, q.ftype_out,
                   (long long)q.n_t, q.nthread);
        st = lm_gguf_write_file(w, out);
        if (st && err && !err[0])
            qfail(&q, st, "cannot write %s (%s)", out, lm_status_str(st));
    }
    if (!st) {
        LM_LOG_INF("quantize: model size %.2f MiB -> %.2f MiB in %.2f s\n", q.size_in / 1048576.0,
                   q.size_out / 1048576.0, (lm_time_us() - t0) / 1e6);
        if (q.r.n_fallback > 0)
            LM_LOG_WRN("quantize: %d of %d tensor(s) needed fallback quantization (rows not a multiple of %d)\n",
                       q.r.n_fallback, q.r.n_k_quantized + q.r.n_fallback, LM_QK_K);
    }
    lm_gguf_writer_free(w);
    free(q.t);
    lm_mapping_free(q.map);
    lm_gguf_close(q.g);
    return st;
}
