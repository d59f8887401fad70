/* imatrix_collect.c - collecting an importance matrix: a scheduler observer
 * (sched/sched.h) that adds the squares of the activations entering each
 * weight's matrix product, per column, per expert for MUL_MAT_ID.
 *
 * The observer runs right after a product is computed, before any later node
 * can reuse its sources' memory; it reads the activations (src[1]) and, for
 * MUL_MAT_ID, the expert ids (src[2]) through their strides, from host memory
 * directly or through lm_tensor_get. Fused and repacked kernels do not
 * matter: the observer sees graph nodes, whatever the backend computes them
 * with. Sums are kept in double and written as float.
 * Workload: per product, one pass over its activations (n_tokens x ne0
 * floats), small next to the product itself.
 */
#include "model/imatrix.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "core/log.h"
#include "model/model.h"
#include "model/row_split.h"

struct acc { /* one weight as the graph names it */
    const struct lm_tensor *w;
    char name[LM_MAX_NAME];
    int64_t ne0, n_mat; /* row length; matrices (experts), 1 for a plain weight */
    bool split;         /* the file has the experts as blk.N.<base>.X.weight */
    double *sum;        /* [n_mat][ne0] */
    int64_t *rows;      /* [n_mat] activation rows summed */
    int32_t *calls;     /* [n_mat] products that gave the matrix rows */
    int32_t n_calls;    /* products of this weight */
};

struct lm_imatrix_collector {
    const struct lm_model *m;
    bool process_output;
    struct acc *a;
    int n, cap;
    int32_t max_calls;
    uint8_t *scratch; /* copies of tensors outside host memory */
    size_t scratch_cap;
    char error[256];
};

/* See imatrix.h. */
struct lm_imatrix_collector *lm_imatrix_collector_new(const struct lm_model *m, bool process_output)
{
    struct lm_imatrix_collector *c = m ? calloc(1, sizeof *c) : NULL;
    if (c) {
        c->m = m;
        c->process_output = process_output;
    }
    return c;
}

/* See imatrix.h. */
void lm_imatrix_collector_free(struct lm_imatrix_collector *c)
{
    if (!c)
        return;
    for (int i = 0; i < c->n; i++) {
        free(c->a[i].sum);
        free(c->a[i].rows);
        free(c->a[i].calls);
    }
    free(c->a);
    free(c->scratch);
    free(c);
}

/* See imatrix.h. */
const char *lm_imatrix_collector_error(const struct lm_imatrix_collector *c) { return c ? c->error : ""; }

/* See imatrix.h. */
int32_t lm_imatrix_collector_calls(const struct lm_imatrix_collector *c) { return c ? c->max_calls : 0; }

/* ---- which products ---- */

/* A weight: a leaf of the model that is not a graph input or a view. */
static bool is_weight(const struct lm_tensor *t)
{
    return t && t->op == LM_OP_NONE && !t->view_src && !(t->flags & LM_FLAG_INPUT);
}

/* See imatrix.h. */
bool lm_imatrix_collector_want(const struct lm_tensor *node, void *user)
{
    const struct lm_imatrix_collector *c = user;
    if (node->op != LM_OP_MUL_MAT && node->op != LM_OP_MUL_MAT_ID)
        return false;
    const struct lm_tensor *w = node->src[0], *x = node->src[1];
    if (!is_weight(w) || !x || x->type != LM_TYPE_F32)
        return false;
    if (strncmp(w->name, "blk.", 4) != 0 && !(c->process_output && !strcmp(w->name, "output.weight")))
        return false;
    if (c->m->n_splits && lm_row_split_part(c->m, w) > 0) /* the first slice's product counts for the weight */
        return false;
    int64_t tokens = node->op == LM_OP_MUL_MAT_ID ? x->ne[2] : lm_nrows(x);
    return tokens >= LM_IMATRIX_MIN_TOKENS;
}

/* ---- accumulating ---- */

static lm_status cfail(struct lm_imatrix_collector *c, lm_status st, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

static lm_status cfail(struct lm_imatrix_collector *c, lm_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->error, sizeof c->error, fmt, ap);
    va_end(ap);
    return st;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && !memcmp(s + n - k, suffix, k);
}

/* The accumulator of weight w (made on first sight); NULL on OOM. */
static struct acc *find_acc(struct lm_imatrix_collector *c, const struct lm_tensor *w)
{
    for (int i = 0; i < c->n; i++)
        if (c->a[i].w == w || !strcmp(c->a[i].name, w->name))
            return &c->a[i];
    if (c->n == c->cap) {
        int nc = c->cap ? 2 * c->cap : 64;
        struct acc *na = realloc(c->a, (size_t)nc * sizeof *na);
        if (!na)
            return NULL;
        c->a = na;
        c->cap = nc;
    }
    struct acc *a = &c->a[c->n];
    memset(a, 0, sizeof *a);
    a->w = w;
    snprintf(a->name, sizeof a->name, "%s", w->name);
    a->ne0 = w->ne[0];
    a->n_mat = w->ne[2] * w->ne[3];
    a->split = a->n_mat > 1 && ends_with(w->name, "_exps.weight") &&
               (!c->m->gguf || lm_gguf_find_tensor(c->m->gguf, w->name) < 0);
    a->sum = calloc((size_t)(a->n_mat * a->ne0), sizeof *a->sum);
    a->rows = calloc((size_t)a->n_mat, sizeof *a->rows);
    a->calls = calloc((size_t)a->n_mat, sizeof *a->calls);
    if (!a->sum || !a->rows || !a->calls) {
        free(a->sum);
        free(a->rows);
        free(a->calls);
        return NULL;
    }
    c->n++;
    return a;
}

/* t's bytes: its own memory when the host can read it, else a copy. */
static const uint8_t *host_bytes(struct lm_imatrix_collector *c, const struct lm_tensor *t, lm_status *st)
{
    if (t->data && (!t->buffer || lm_buffer_is_host(t->buffer)))
        return t->data;
    size_t n = lm_nbytes(t);
    if (n > c->scratch_cap) {
        uint8_t *p = realloc(c->scratch, n);
        if (!p) {
            *st = cfail(c, LM_ERR_NOMEM, "out of memory copying '%s'", t->name);
            return NULL;
        }
        c->scratch = p;
        c->scratch_cap = n;
    }
    if ((*st = lm_tensor_get(t, c->scratch, 0, n)))
        cfail(c, *st, "cannot read '%s' (%s)", t->name, lm_status_str(*st));
    return *st ? NULL : c->scratch;
}

/* sum[j] += row[j]^2 for one activation row (elements nb0 bytes apart). */
static bool add_row(double *sum, const uint8_t *row, int64_t n, size_t nb0)
{
    bool finite = true;
    for (int64_t j = 0; j < n; j++) {
        float v;
        memcpy(&v, row + (size_t)j * nb0, sizeof v);
        finite &= isfinite(v);
        sum[j] += (double)v * (double)v;
    }
    return finite;
}

static lm_status add_mul_mat(struct lm_imatrix_collector *c, struct acc *a, const struct lm_tensor *x)
{
    lm_status st = LM_OK;
    const uint8_t *base = host_bytes(c, x, &st);
    if (!base)
        return st;
    bool finite = true;
    for (int64_t i3 = 0; i3 < x->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < x->ne[2]; i2++)
            for (int64_t i1 = 0; i1 < x->ne[1]; i1++)
                finite &= add_row(a->sum, base + i1 * x->nb[1] + i2 * x->nb[2] + i3 * x->nb[3], a->ne0, x->nb[0]);
    if (!finite)
        return cfail(c, LM_ERR_CORRUPT, "an activation entering '%s' is not finite", a->name);
    a->rows[0] += lm_nrows(x);
    a->calls[0]++;
    return LM_OK;
}

/* MUL_MAT_ID: row (s % B1, t) of x goes to expert ids[s, t] (docs/ops.md). */
static lm_status add_mul_mat_id(struct lm_imatrix_collector *c, struct acc *a, const struct lm_tensor *x,
                                const struct lm_tensor *ids)
{
    enum { MAX_MAT = 4096 };
    lm_status st = LM_OK;
    if (!ids || ids->type != LM_TYPE_I32 || a->n_mat > MAX_MAT)
        return cfail(c, LM_ERR_UNSUPPORTED, "'%s': unexpected expert ids", a->name);
    int32_t *idv = malloc((size_t)(ids->ne[0] * ids->ne[1]) * sizeof *idv);
    if (!idv)
        return cfail(c, LM_ERR_NOMEM, "out of memory");
    const uint8_t *ib = host_bytes(c, ids, &st);
    for (int64_t t = 0; ib && t < ids->ne[1]; t++)
        for (int64_t s = 0; s < ids->ne[0]; s++)
            memcpy(&idv[t * ids->ne[0] + s], ib + t * ids->nb[1] + s * ids->nb[0], sizeof *idv);
    const uint8_t *base = ib ? host_bytes(c, x, &st) : NULL;
    bool used[MAX_MAT] = {false}, finite = true;
    for (int64_t t = 0; base && t < ids->ne[1]; t++)
        for (int64_t s = 0; s < ids->ne[0]; s++) {
            int32_t e = idv[t * ids->ne[0] + s];
            if (e < 0 || e >= a->n_mat)
                continue; /* the product gives zeros there */
            const uint8_t *row = base + (s % x->ne[1]) * x->nb[1] + t * x->nb[2];
            finite &= add_row(a->sum + e * a->ne0, row, a->ne0, x->nb[0]);
            a->rows[e]++;
            used[e] = true;
        }
    free(idv);
    if (!base)
        return st;
    if (!finite)
        return cfail(c, LM_ERR_CORRUPT, "an activation entering '%s' is not finite", a->name);
    for (int64_t e = 0; e < a->n_mat; e++)
        a->calls[e] += used[e];
    return LM_OK;
}

/* See imatrix.h. */
lm_status lm_imatrix_collector_observe(const struct lm_tensor *node, void *user)
{
    struct lm_imatrix_collector *c = user;
    const struct lm_tensor *w = node->src[0], *x = node->src[1];
    struct acc *a = find_acc(c, w);
    if (!a)
        return cfail(c, LM_ERR_NOMEM, "out of memory");
    if (x->ne[0] != a->ne0 || w->ne[2] * w->ne[3] != a->n_mat)
        return cfail(c, LM_ERR_SHAPE, "'%s': activations of %lld values for rows of %lld", a->name,
                     (long long)x->ne[0], (long long)a->ne0);
    lm_status st = node->op == LM_OP_MUL_MAT_ID ? add_mul_mat_id(c, a, x, node->src[2]) : add_mul_mat(c, a, x);
    if (st)
        return st;
    a->n_calls++;
    if (a->n_calls > c->max_calls)
        c->max_calls = a->n_calls;
    return LM_OK;
}

/* ---- the result ---- */

/* Append matrix e of a (all of a when e < 0) as float sums. */
static lm_status put(struct lm_imatrix *im, const struct acc *a, const char *name, int32_t ncall, int64_t e,
                     float *buf)
{
    int64_t first = e < 0 ? 0 : e * a->ne0, n = e < 0 ? a->n_mat * a->ne0 : a->ne0;
    for (int64_t j = 0; j < n; j++)
        buf[j] = (float)a->sum[first + j];
    if (e < 0 && a->n_mat > 1) /* merged experts: later llama.cpp's per-expert mean, times ncall */
        for (int64_t k = 0; k < a->n_mat; k++)
            for (int64_t j = 0; j < a->ne0; j++)
                buf[k * a->ne0 + j] = (float)(a->sum[k * a->ne0 + j] / (double)a->rows[k] * ncall);
    for (int64_t j = 0; j < n; j++)
        if (!isfinite(buf[j])) /* a float overflow of a finite double sum */
            return LM_ERR_CORRUPT;
    return lm_imatrix_add(im, name, ncall, buf, (int32_t)n);
}

static lm_status put_acc(struct lm_imatrix *im, const struct acc *a, float *buf)
{
    char name[LM_MAX_NAME + 32];
    if (a->n_mat == 1)
        return put(im, a, a->name, a->calls[0], -1, buf);
    if (!a->split) {
        for (int64_t e = 0; e < a->n_mat; e++)
            if (!a->rows[e]) {
                LM_LOG_WRN("imatrix: no activations reached expert %lld of %s - not stored\n", (long long)e, a->name);
                return LM_OK;
            }
        return put(im, a, a->name, a->n_calls, -1, buf);
    }
    size_t base = strlen(a->name) - strlen("_exps.weight");
    for (int64_t e = 0; e < a->n_mat; e++) {
        snprintf(name, sizeof name, "%.*s.%lld.weight", (int)base, a->name, (long long)e);
        if (!a->rows[e]) {
            LM_LOG_WRN("imatrix: no activations reached %s - not stored\n", name);
            continue;
        }
        lm_status st = strlen(name) < LM_MAX_NAME ? put(im, a, name, a->calls[e], e, buf) : LM_ERR_UNSUPPORTED;
        if (st)
            return st;
    }
    return LM_OK;
}

/* See imatrix.h. */
lm_status lm_imatrix_collector_result(const struct lm_imatrix_collector *c, struct lm_imatrix **out)
{
    if (!c || !out)
        return LM_ERR_INVALID_ARG;
    int64_t most = 1;
    for (int i = 0; i < c->n; i++)
        most = c->a[i].n_mat * c->a[i].ne0 > most ? c->a[i].n_mat * c->a[i].ne0 : most;
    if (most > INT32_MAX)
        return LM_ERR_UNSUPPORTED;
    struct lm_imatrix *im = lm_imatrix_new();
    float *buf = malloc((size_t)most * sizeof *buf);
    lm_status st = im && buf ? LM_OK : LM_ERR_NOMEM;
    for (int i = 0; i < c->n && !st; i++)
        st = put_acc(im, &c->a[i], buf);
    free(buf);
    if (st) {
        lm_imatrix_free(im);
        return st;
    }
    *out = im;
    return LM_OK;
}
