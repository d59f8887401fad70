/* attention.c - ATTN: softmax(q·K * scale + slope * mask) · V per (query, head),
 * with no [n_kv, n_q] matrix in memory (core/tensor.h's lm_attn).
 *
 * Numerics are those of the unfused graph (MUL_MAT, SOFT_MAX, MUL_MAT):
 *   - q is rounded once to k's vec_dot_type and every score is the kernel
 *     table's vec_dot of a K row with it (or its vec_dot_rows over the
 *     query's range: the same bits, q widened once), times scale, plus
 *     slope * mask in float (softmax.c's order);
 *   - softmax as softmax.c: max subtracted, the table's exp_sum (the same
 *     exponentials and double sum), one float multiply by 1/sum;
 *   - the probabilities are rounded to v's vec_dot_type and each output
 *     channel is vec_dot(V row c, p) (or vec_dot_rows over the channels).
 * Cells whose mask is -inf are skipped: phase 1 finds, per query, the range
 * [lo, hi) from the first to the last visible cell (causal masks end early,
 * padding cells vanish), and hidden cells inside it are skipped one by one.
 * The P·V dots run over [lo, hi) widened to multiples of ATTN_BLOCK cells
 * from the row start (p = 0 in the widened part): a kernel that walks a row in
 * blocks of up to ATTN_BLOCK elements from its start then adds exactly the
 * same products in the same lanes as the unfused full-row dot (whose extra
 * terms are exact zeros), so with the same kernel table fused and unfused
 * attention agree bit for bit (tests/ops checks it within a tight bound).
 *
 * Threads: phase 1 splits the queries' mask scans; after one barrier, phase 2
 * orders the (query, head) items kv head outermost, then query, then the
 * heads sharing that kv head (so a thread's K and V rows stay in cache), and
 * gives each thread a contiguous run of items of equal total cost (visible
 * cells), so causal prompts do not leave one thread with the long rows.
 * Per-thread scratch: the gathered q row, its rounded copy, a score row of
 * n_kv floats and its rounded copy; the shared part holds the ranges.
 */
#include <math.h>
#include <string.h>

#include "cpu/ops/ops.h"

#define ATTN_BLOCK 32 /* elements a vec_dot walks per step (avx2 32, generic 8); a wider one agrees to rounding */

/* What one ATTN node needs, from its sources and the kernel table. */
struct attn_ctx {
    const struct lm_tensor *q, *k, *v, *mask;
    int64_t d, d_v, n_q, n_head, n_kv, n_head_kv, ratio;
    float scale, max_bias;
    enum lm_type kt, vt;              /* dot types of k and v */
    lm_vec_dot_fn kdot, vdot;
    lm_vec_dot_rows_fn kdot_rows, vdot_rows; /* NULL: kdot per cell, vdot per channel */
    lm_from_float_fn kenc, venc;
    lm_exp_sum_fn exp_sum;
    size_t ranges_off;                /* shared: int32 lo, hi per query */
    size_t thread_off;                /* per-thread slices start here; each holds: */
    size_t qc_off, s_off, pc_off, per_thread; /* [gathered q][rounded q][scores][rounded p] */
};

static void attn_init(struct attn_ctx *c, const struct lm_tensor *dst, const struct lm_cpu_kernels *kern)
{
    memset(c, 0, sizeof *c);
    c->q = dst->src[0];
    c->k = dst->src[1];
    c->v = dst->src[2];
    c->mask = dst->src[3];
    c->d = c->q->ne[0];
    c->n_q = c->q->ne[1];
    c->n_head = c->q->ne[2];
    c->n_kv = c->k->ne[1];
    c->n_head_kv = c->k->ne[2];
    c->ratio = c->n_head / c->n_head_kv;
    c->d_v = c->v->ne[1];
    c->scale = lm_get_op_f32(dst, 0);
    c->max_bias = lm_get_op_f32(dst, 1);
    const struct lm_cpu_type_kernels *kk = &kern->type[c->k->type], *vk = &kern->type[c->v->type];
    c->kt = kk->vec_dot_type;
    c->vt = vk->vec_dot_type;
    c->kdot = kk->vec_dot;
    c->kdot_rows = kk->vec_dot_rows;
    c->vdot_rows = vk->vec_dot_rows;
    c->vdot = vk->vec_dot;
    c->kenc = kern->type[c->kt].from_float;
    c->venc = kern->type[c->vt].from_float;
    c->exp_sum = kern->exp_sum;
    c->ranges_off = 0;
    c->thread_off = lm_cpu_pad((size_t)c->n_q * 2 * sizeof(int32_t));
    c->qc_off = lm_cpu_pad((size_t)c->d * sizeof(float));
    c->s_off = c->qc_off + lm_cpu_pad(lm_row_size(c->kt, c->d));
    c->pc_off = c->s_off + lm_cpu_pad((size_t)c->n_kv * sizeof(float));
    c->per_thread = c->pc_off + lm_cpu_pad(lm_row_size(c->vt, c->n_kv));
}

/* Scratch: the ranges, then per thread q, rounded q, scores, rounded p. */
size_t lm_cpu_work_attn(const struct lm_tensor *dst, int nth, const struct lm_cpu_kernels *kern)
{
    struct attn_ctx c;
    attn_init(&c, dst, kern);
    return c.thread_off + (size_t)nth * lm_cpu_pad(c.per_thread);
}

static float mask_at(const struct attn_ctx *c, int64_t j, int64_t i)
{
    return *(const float *)((const char *)c->mask->data + j * (int64_t)c->mask->nb[0] + i * (int64_t)c->mask->nb[1]);
}

/* Phase 1: [lo, hi) of the visible cells of this thread's queries (lo == hi: none). */
static void attn_ranges(const struct attn_ctx *c, const struct lm_cpu_params *p, int32_t *ranges)
{
    int64_t i0, i1;
    lm_cpu_split(c->n_q, p->ith, p->nth, &i0, &i1);
    for (int64_t i = i0; i < i1; i++) {
        int64_t lo = 0, hi = c->n_kv;
        if (c->mask) {
            while (lo < hi && mask_at(c, lo, i) == -INFINITY)
                lo++;
            while (hi > lo && mask_at(c, hi - 1, i) == -INFINITY)
                hi--;
        }
        ranges[2 * i] = (int32_t)lo;
        ranges[2 * i + 1] = (int32_t)hi;
    }
}

/* q[:, i, h] rounded to k's dot type, as the kernel reads it. */
static const void *attn_q(const struct attn_ctx *c, char *scratch, int64_t i, int64_t h)
{
    const char *src = (const char *)c->q->data + i * (int64_t)c->q->nb[1] + h * (int64_t)c->q->nb[2];
    const float *f = (const float *)src;
    if (c->q->nb[0] != sizeof(float)) {
        float *g = (float *)scratch;
        for (int64_t e = 0; e < c->d; e++)
            g[e] = *(const float *)(src + e * (int64_t)c->q->nb[0]);
        f = g;
    }
    if (c->kt == LM_TYPE_F32)
        return f;
    c->kenc(f, scratch + c->qc_off, c->d);
    return scratch + c->qc_off;
}

/* Scores of the visible cells in [lo, hi) into s, softmax in place (hidden
 * cells get 0). */
static void attn_softmax(const struct attn_ctx *c, const void *qc, float *s, int64_t i, int64_t h, int64_t lo,
                         int64_t hi)
{
    const int64_t g = h / c->ratio;
    const float slope = lm_cpu_alibi_slope(c->max_bias, c->n_head, h);
    const char *krow = (const char *)c->k->data + g * (int64_t)c->k->nb[2];
    /* all dots of [lo, hi) at once where the table can (the same bits as kdot;
     * hidden cells inside the range are computed and dropped) */
    if (c->kdot_rows)
        c->kdot_rows(c->d, hi - lo, s + lo, krow + lo * (int64_t)c->k->nb[1], c->k->nb[1], qc);
    float max = -INFINITY;
    for (int64_t j = lo; j < hi; j++) {
        const float m = c->mask ? mask_at(c, j, i) : 0.0f;
        if (m == -INFINITY) {
            s[j] = -INFINITY;
            continue;
        }
        float dot;
        if (c->kdot_rows)
            dot = s[j];
        else
            c->kdot(c->d, &dot, krow + j * (int64_t)c->k->nb[1], qc);
        float w = dot * c->scale;
        if (c->mask)
            w += slope * m;
        s[j] = w;
        max = w > max ? w : max;
    }
    const double sum = c->exp_sum(hi - lo, s + lo, s + lo, max); /* hidden cells: exp(-inf) = 0 */
    const float inv = (float)(1.0 / sum);
    for (int64_t j = lo; j < hi; j++)
        s[j] *= inv;
}

/* out[:, h, i] for one item. */
static void attn_item(const struct attn_ctx *c, char *scratch, struct lm_tensor *dst, int64_t i, int64_t h,
                      const int32_t *ranges)
{
    const int64_t lo = ranges[2 * i], hi = ranges[2 * i + 1];
    char *out = (char *)dst->data + h * (int64_t)dst->nb[1] + i * (int64_t)dst->nb[2];
    if (lo >= hi) { /* no visible cell: an empty sum */
        for (int64_t e = 0; e < c->d_v; e++)
            *(float *)(out + e * (int64_t)dst->nb[0]) = 0.0f;
        return;
    }
    float *s = (float *)(scratch + c->s_off);
    attn_softmax(c, attn_q(c, scratch, i, h), s, i, h, lo, hi);
    /* widen to whole blocks from the row start (see the file comment) */
    const int64_t a0 = lo / ATTN_BLOCK * ATTN_BLOCK;
    int64_t a1 = (hi + ATTN_BLOCK - 1) / ATTN_BLOCK * ATTN_BLOCK;
    a1 = a1 < c->n_kv ? a1 : c->n_kv;
    for (int64_t j = a0; j < lo; j++)
        s[j] = 0.0f;
    for (int64_t j = hi; j < a1; j++)
        s[j] = 0.0f;
    const char *pc = (const char *)(s + a0);
    if (c->vt != LM_TYPE_F32) {
        c->venc(s + a0, scratch + c->pc_off, a1 - a0);
        pc = scratch + c->pc_off;
    }
    const int64_t g = h / c->ratio;
    const char *vbase = (const char *)c->v->data + a0 * (int64_t)c->v->nb[0] + g * (int64_t)c->v->nb[2];
    if (c->vdot_rows && dst->nb[0] == sizeof(float)) {
        c->vdot_rows(a1 - a0, c->d_v, (float *)out, vbase, c->v->nb[1], pc);
        return;
    }
    for (int64_t e = 0; e < c->d_v; e++)
        c->vdot(a1 - a0, (float *)(out + e * (int64_t)dst->nb[0]), vbase + e * (int64_t)c->v->nb[1], pc);
}

/* Cost of one item of query i: its visible range plus a fixed overhead. */
static int64_t item_cost(const int32_t *ranges, int64_t i) { return ranges[2 * i + 1] - ranges[2 * i] + 8; }

/* ATTN on this thread's items (two phases, one barrier). */
void lm_cpu_op_attn(const struct lm_cpu_params *p, struct lm_tensor *dst)
{
    struct attn_ctx c;
    attn_init(&c, dst, p->kern);
    int32_t *ranges = (int32_t *)((char *)p->wdata + c.ranges_off);
    attn_ranges(&c, p, ranges);
    lm_cpu_sync(p);
    int64_t total = 0;
    for (int64_t i = 0; i < c.n_q; i++)
        total += item_cost(ranges, i) * c.n_head;
    char *scratch = lm_cpu_wslice(p, c.thread_off, c.per_thread);
    int64_t done = 0; /* cost of the items before the current one */
    for (int64_t g = 0; g < c.n_head_kv; g++)
        for (int64_t i = 0; i < c.n_q; i++) {
            const int64_t cost = item_cost(ranges, i);
            for (int64_t r = 0; r < c.ratio; r++, done += cost) {
                /* an item belongs to the thread whose share holds its midpoint */
                const int64_t owner = (2 * done + cost) * p->nth / (2 * total);
                if (owner > p->ith)
                    return; /* owners only grow along the order */
                if (owner == p->ith)
                    attn_item(&c, scratch, dst, i, g * c.ratio + r, ranges);
            }
        }
}
