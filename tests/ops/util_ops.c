/* util_ops.c - PRNG, random inputs in several layouts, reading results,
 * nmse and the coverage table for the op tests (see util_ops.h). */
#include "util_ops.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "quant/quant.h"

/* ---- computing on a device ---- */

#define DEV_MAX 512

struct dev_map {
    struct lm_tensor *t[DEV_MAX];
    void *host[DEV_MAX];
    size_t offs[DEV_MAX];
    int n;
};

static void dev_add(struct dev_map *m, struct lm_tensor *t)
{
    for (int i = 0; i < m->n; i++)
        if (m->t[i] == t)
            return;
    if (m->n < DEV_MAX) {
        m->t[m->n] = t;
        m->host[m->n] = t->data;
        m->n++;
    }
}

lm_status ut_compute_device(lm_backend_t be, struct lm_graph *g)
{
    struct dev_map *m = calloc(1, sizeof *m);
    if (!m)
        return LM_ERR_NOMEM;
    for (int i = 0; i < g->n_leafs + g->n_nodes; i++) {
        struct lm_tensor *t = i < g->n_leafs ? g->leafs[i] : g->nodes[i - g->n_leafs];
        dev_add(m, (struct lm_tensor *)lm_view_root(t));
        dev_add(m, t);
        for (int k = 0; k < LM_MAX_SRC; k++)
            if (t->src[k]) {
                dev_add(m, (struct lm_tensor *)lm_view_root(t->src[k]));
                dev_add(m, t->src[k]);
            }
    }
    lm_status st = m->n < DEV_MAX ? LM_OK : LM_ERR_FULL;
    lm_buft buft = lm_backend_default_buft(be);
    const size_t align = lm_buft_alignment(buft);
    size_t total = 0;
    for (int i = 0; i < m->n; i++)
        if (!m->t[i]->view_src && m->host[i]) {
            m->offs[i] = total;
            total += (lm_nbytes(m->t[i]) + align - 1) / align * align;
        }
    struct lm_buffer *buf = NULL;
    if (!st)
        st = lm_buft_alloc_buffer(buft, total, &buf);
    /* roots first (their copies), then views relative to their root */
    for (int pass = 0; pass < 2 && !st; pass++)
        for (int i = 0; i < m->n; i++) {
            struct lm_tensor *t = m->t[i];
            if (!m->host[i] || (pass == 0) != (t->view_src == NULL))
                continue;
            if (pass == 0) {
                t->data = (char *)lm_buffer_base(buf) + m->offs[i];
                t->buffer = buf;
                if (!st)
                    st = lm_tensor_set(t, m->host[i], 0, lm_nbytes(t));
                continue;
            }
            const struct lm_tensor *root = lm_view_root(t);
            for (int j = 0; j < m->n; j++)
                if (m->t[j] == root) {
                    t->data = (char *)root->data + ((char *)m->host[i] - (char *)m->host[j]);
                    t->buffer = buf;
                }
        }
    if (!st)
        st = lm_backend_graph_compute(be, g);
    for (int i = 0; i < m->n; i++) {
        struct lm_tensor *t = m->t[i];
        if (!m->host[i] || t->buffer != buf)
            continue;
        if (!st && !t->view_src)
            st = lm_tensor_get(t, m->host[i], 0, lm_nbytes(t));
    }
    for (int i = 0; i < m->n; i++)
        if (m->host[i] && m->t[i]->buffer == buf) {
            m->t[i]->data = m->host[i];
            m->t[i]->buffer = NULL;
        }
    lm_buffer_free(buf);
    free(m);
    return st;
}

/* ---- PRNG ---- */

void ut_rng_seed(struct ut_rng *r, uint64_t seed) { r->s = seed; }

uint64_t ut_rng_u64(struct ut_rng *r)
{
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

int64_t ut_rng_int(struct ut_rng *r, int64_t n) { return (int64_t)(ut_rng_u64(r) % (uint64_t)n); }

float ut_rng_float(struct ut_rng *r, float lo, float hi)
{
    double u = (double)(ut_rng_u64(r) >> 11) * (1.0 / 9007199254740992.0);
    return (float)(lo + (hi - lo) * u);
}

int64_t ut_rng_pick(struct ut_rng *r, const int64_t *list, int n) { return list[ut_rng_int(r, n)]; }

/* ---- random inputs ---- */

static const char *const layout_names[UT_LAYOUT_COUNT] = {"cont", "transpose", "permute", "pad", "reshape",
                                                                  "permute_rows"};

const char *ut_layout_name(enum ut_layout lay) { return (unsigned)lay < UT_LAYOUT_COUNT ? layout_names[lay] : "?"; }

enum ut_layout ut_rng_layout(struct ut_rng *r) { return (enum ut_layout)ut_rng_int(r, UT_LAYOUT_COUNT); }

enum ut_layout ut_rng_layout_rows(struct ut_rng *r)
{
    static const enum ut_layout rows[4] = {UT_CONT, UT_PAD, UT_RESHAPE, UT_PERMUTE_ROWS};
    return rows[ut_rng_int(r, 4)];
}

/* Fill the contiguous tensor t with values uniform in [lo, hi). */
static void fill(struct lm_tensor *t, struct ut_rng *r, float lo, float hi)
{
    const int64_t n0 = t->ne[0], rows = lm_nrows(t);
    if (lm_type_traits(t->type)->is_quantized) {
        float *row = malloc((size_t)n0 * sizeof *row);
        lm_from_float_fn enc = lm_quant_traits(t->type)->from_float;
        if (!row || !enc) {
            free(row);
            return;
        }
        for (int64_t i = 0; i < rows; i++) {
            for (int64_t k = 0; k < n0; k++)
                row[k] = ut_rng_float(r, lo, hi);
            enc(row, (char *)t->data + (size_t)i * t->nb[1], n0);
        }
        free(row);
        return;
    }
    for (int64_t i = 0; i < rows; i++)
        for (int64_t k = 0; k < n0; k++)
            lm_set_f32_nd(t, k, i % t->ne[1], i / t->ne[1] % t->ne[2], i / t->ne[1] / t->ne[2],
                          ut_rng_float(r, lo, hi));
}

static struct lm_tensor *new_filled(struct lm_ctx *ctx, struct ut_rng *r, enum lm_type type, const int64_t ne[4],
                                    float lo, float hi)
{
    struct lm_tensor *t = lm_new_tensor_4d(ctx, type, ne[0], ne[1], ne[2], ne[3]);
    if (t)
        fill(t, r, lo, hi);
    return t;
}

/* A random permutation of 0..3 (keeping 0 first when keep0). */
static void random_perm(struct ut_rng *r, int ax[4], bool keep0)
{
    for (int i = 0; i < 4; i++)
        ax[i] = i;
    for (int i = 3; i > (keep0 ? 1 : 0); i--) {
        int lo = keep0 ? 1 : 0;
        int j = lo + (int)ut_rng_int(r, i - lo + 1);
        int t = ax[i];
        ax[i] = ax[j];
        ax[j] = t;
    }
}

static struct lm_tensor *padded(struct lm_ctx *ctx, struct ut_rng *r, enum lm_type type, const int64_t ne[4],
                                float lo, float hi)
{
    const int64_t blck = lm_type_blck(type);
    int64_t big[4], off[4];
    for (int i = 0; i < 4; i++) {
        int64_t unit = i == 0 ? blck : 1;
        int64_t pad = unit * ut_rng_int(r, 3);
        big[i] = ne[i] + pad;
        off[i] = unit * ut_rng_int(r, pad / unit + 1);
    }
    struct lm_tensor *base = new_filled(ctx, r, type, big, lo, hi);
    if (!base)
        return NULL;
    size_t offset = (size_t)(off[0] / blck) * base->nb[0] + (size_t)off[1] * base->nb[1] +
                    (size_t)off[2] * base->nb[2] + (size_t)off[3] * base->nb[3];
    return lm_view_4d(ctx, base, ne[0], ne[1], ne[2], ne[3], base->nb[1], base->nb[2], base->nb[3], offset);
}

struct lm_tensor *ut_input(struct lm_ctx *ctx, struct ut_rng *r, enum lm_type type, const int64_t ne[4],
                           enum ut_layout lay, float lo, float hi)
{
    const bool block = lm_type_blck(type) != 1;
    if (block && (lay == UT_TRANSPOSE || lay == UT_PERMUTE))
        lay = UT_PERMUTE_ROWS;
    switch (lay) {
    case UT_TRANSPOSE: {
        const int64_t st[4] = {ne[1], ne[0], ne[2], ne[3]};
        return lm_transpose(ctx, new_filled(ctx, r, type, st, lo, hi));
    }
    case UT_PERMUTE:
    case UT_PERMUTE_ROWS: {
        int ax[4];
        random_perm(r, ax, lay == UT_PERMUTE_ROWS);
        int64_t st[4];
        for (int i = 0; i < 4; i++)
            st[i] = ne[ax[i]]; /* permute puts stored dim i at position ax[i] */
        return lm_permute(ctx, new_filled(ctx, r, type, st, lo, hi), ax[0], ax[1], ax[2], ax[3]);
    }
    case UT_PAD: return padded(ctx, r, type, ne, lo, hi);
    case UT_RESHAPE: {
        const int64_t flat[4] = {ne[0] * ne[1] * ne[2] * ne[3], 1, 1, 1};
        return lm_reshape_4d(ctx, new_filled(ctx, r, type, flat, lo, hi), ne[0], ne[1], ne[2], ne[3]);
    }
    default: return new_filled(ctx, r, type, ne, lo, hi);
    }
}

/* ---- reading results ---- */

void ut_read(const struct lm_tensor *t, float *out)
{
    const int64_t n0 = t->ne[0];
    const bool quant = lm_type_traits(t->type)->is_quantized;
    int64_t k = 0;
    for (int64_t i3 = 0; i3 < t->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < t->ne[2]; i2++)
            for (int64_t i1 = 0; i1 < t->ne[1]; i1++) {
                if (quant) {
                    const char *row = (const char *)t->data + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3];
                    lm_quant_traits(t->type)->to_float(row, out + k, n0);
                    k += n0;
                    continue;
                }
                for (int64_t i0 = 0; i0 < n0; i0++)
                    out[k++] = lm_get_f32_nd(t, i0, i1, i2, i3);
            }
}

double ut_nmse(const float *x, const float *y, int64_t n, double floor)
{
    double num = 0.0, den = 0.0;
    for (int64_t i = 0; i < n; i++) {
        if (isnan(x[i]) || isnan(y[i]))
            return INFINITY;
        if (isinf(y[i]) || isinf(x[i])) {
            if (x[i] != y[i])
                return INFINITY;
            continue;
        }
        double d = (double)x[i] - (double)y[i];
        num += d * d;
        den += (double)y[i] * (double)y[i];
    }
    den = den > floor ? den : floor;
    return den > 0.0 ? num / den : num;
}

/* ---- coverage ---- */

static void label_of(const struct lm_tensor *t, char *buf, size_t size)
{
    const struct lm_tensor *s = t->src[0];
    switch (t->op) {
    case LM_OP_UNARY:
    case LM_OP_UNARY_BACK: snprintf(buf, size, "%s", lm_unary_name((enum lm_unary_op)lm_get_op_i32(t, 0))); break;
    case LM_OP_CPY: snprintf(buf, size, "%s>%s", lm_type_name(s->type), lm_type_name(t->type)); break;
    case LM_OP_SET_ROWS:
        snprintf(buf, size, "%s %s", lm_type_name(t->type), lm_get_op_i32(t, 0) ? "cols" : "rows");
        break;
    case LM_OP_ROPE:
    case LM_OP_ROPE_BACK: snprintf(buf, size, "%s", lm_get_op_i32(t, 1) == LM_ROPE_NEOX ? "neox" : "normal"); break;
    case LM_OP_GET_ROWS_BACK: snprintf(buf, size, "like %s", lm_type_name(t->src[2]->type)); break;
    case LM_OP_ARGSORT: snprintf(buf, size, "%s", lm_get_op_i32(t, 0) == LM_SORT_DESC ? "desc" : "asc"); break;
    case LM_OP_SOFT_MAX:
        snprintf(buf, size, "%s%s", t->src[1] ? "mask" : "nomask", lm_get_op_f32(t, 1) > 0.0f ? "+alibi" : "");
        break;
    case LM_OP_ATTN:
        snprintf(buf, size, "%s/%s%s%s", lm_type_name(t->src[1]->type), lm_type_name(t->src[2]->type),
                 t->src[3] ? "+mask" : "", lm_get_op_f32(t, 1) > 0.0f ? "+ali" : "");
        break;
    default: snprintf(buf, size, "%s", lm_type_name(s && !lm_is_view_op(t->op) ? s->type : t->type)); break;
    }
}

void ut_cov_add(struct ut_cov cov[LM_OP_COUNT], const struct lm_tensor *t, double nmse)
{
    if ((unsigned)t->op >= LM_OP_COUNT)
        return;
    struct ut_cov *c = &cov[t->op];
    c->cases++;
    if (nmse > c->max_nmse)
        c->max_nmse = nmse;
    char label[20];
    label_of(t, label, sizeof label);
    for (int i = 0; i < c->n_labels; i++)
        if (!strcmp(c->labels[i], label))
            return;
    if (c->n_labels < UT_MAX_LABELS)
        snprintf(c->labels[c->n_labels++], sizeof c->labels[0], "%s", label);
}

int ut_cov_print(const struct ut_cov cov[LM_OP_COUNT])
{
    int missing = 0;
    printf("coverage (cases = compared graphs containing the op):\n");
    for (int op = LM_OP_NONE + 1; op < LM_OP_COUNT; op++) {
        const struct ut_cov *c = &cov[op];
        printf("op %-14s %5d cases (", lm_op_name((enum lm_op)op), c->cases);
        for (int i = 0; i < c->n_labels; i++)
            printf("%s%s", i ? " " : "", c->labels[i]);
        printf(") max nmse %.2g%s\n", c->max_nmse, c->cases ? "" : "  <-- NEVER TESTED");
        if (!c->cases)
            missing++;
    }
    return missing;
}
