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
 * padding cells vanish), and hidden cells inside it are dropped.
 *
 * Batch invariance: a sequence's result must not depend on what else shares
 * the cache (a server's parallel slots interleave their cells; greedy
 * decoding of N requests together must equal each alone). So everything
 * after the scores runs over the query's visible cells only, compacted in
 * cell order: the softmax's exp_sum over them, and the P·V dots over them
 * from the first one. When [lo, hi) has no hidden cell the V rows are read
 * in place; otherwise the visible columns of V are gathered (channel chunks
 * of GATHER_CH rows) into scratch first - the same n products in the same
 * lanes either way, so the bits agree (tests/server/test_batch_invariance.c).
 * Against the unfused graph (full rows from cell 0, exact zeros elsewhere)
 * the sums group differently: they agree to rounding (tests/ops).
 *
 * Threads: phase 1 splits the queries' mask scans; after one barrier, phase 2
 * orders the (query, head) items kv head outermost, then query, then the
 * heads sharing that kv head (so a thread's K and V rows stay in cache), and
 * gives each thread a contiguous run of items of equal total cost (visible
 * cells), so causal prompts do not leave one thread with the long rows.
 * Per-thread scratch: the gathered q row, its rounded copy, a score row of
 * n_kv floats and its rounded copy, the visible cells' indices and the
 * gathered V chunk; the shared part holds the ranges.
 *
 * K rows: a cache of several kv heads holds each cell's heads side by side
 * (one kv head's rows 512 bytes apart for 4 heads of 64), and the dot
 * kernels read such rows at a fraction of their speed (Zen 4, one thread,
 * 22 layers' caches at depth 2048, the decode step's F16 tiles on AVX-512:
 * 19.5 ms per token in place, 6.4 copied out first, 4.6 from a cache of one
 * head). So under grouped-query attention the scores of an item or a tile
 * read the kv head's rows of the range from a contiguous copy in the
 * thread's scratch (attn_krows, kg_off), made once for the items and tiles
 * that follow with the same kv head and range (the heads of the group).
 * Same bytes, same bits. Not with one query head per kv head (no second
 * reader of the copy): llama-7b's rows (256 bytes, 8 KiB apart) decoded 11 %
 * slower through it (bench_ab -d 2048, 2 threads, Zen 4).
 *
 * Tiles (when the table has vec_dot_tile for k's and v's dot type: F16 or
 * Q8_0 K with F16 V, on AVX-512): up to LM_VEC_DOT_TILE_MAX consecutive
 * items of a thread that share a kv head (the heads of one query under
 * grouped-query attention, or consecutive queries) run together: their q
 * rows widened once (a Q8_0 K's tile reads q's blocks as they are), the
 * scores of every K row of the union of their ranges against all of them
 * (each K row converted once for the tile), then each item's softmax, then
 * the P.V dots of the items whose visible cells start at the same cell and
 * have no hole, each with its own length (V read once for the tile). The
 * tile kernel gives each dot vec_dot's bits, so the outputs are those of
 * the per-item path whatever the tiling (tests/ops, tests/server). A tile of
 * one query's heads whose range has hidden cells (other sequences' cells)
 * gathers the visible cells' K rows and V columns once instead
 * (attn_gathered): no dot on a hidden cell. With many query heads per kv
 * head (prompt batches) and a vec_dot_kt slot, a thread lays each kv head's
 * K out once in blocks of 16 cells (build_ktr: F16 widened, Q8_0 codes
 * grouped by 4 with their sums) and the tiles' scores come from there, 16
 * cells per register, with vec_dot's bits.
 *
 * A V of rows per cell (lm_attn_vrows: a Q8_0 V cache) keeps the
 * probabilities in float and each item's P.V is the table's vec_mad_rows
 * over its visible cells in cell order (in place when they have no hole,
 * through their indices otherwise), in every path: per item, tiles (their K
 * side as above) and gathered tiles, so those agree bit for bit as well.
 */
#include <math.h>
#include <string.h>

#include "cpu/ops/ops.h"

#define GATHER_CH 8 /* V channels gathered per step when the visible cells have holes */
#define KT_MIN_ITEMS 16               /* queries x heads per kv head for a transposed K */
#define KT_MAX_BYTES ((size_t)4 << 20) /* per thread (scratch grows by it per thread) */

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
    lm_scale_max_fn scale_max;
    size_t ranges_off;                /* shared: int32 lo, hi per query */
    size_t holes_off;                 /* shared: per query 1 if [lo, hi) has a hidden cell */
    const uint8_t *holes;             /* that array once phase 1 wrote it (lm_cpu_op_attn) */
    size_t thread_off;                /* per-thread slices start here; each holds: */
    size_t qc_off, s_off, pc_off, idx_off, vg_off, per_thread; /* [gathered q][rounded q][scores][rounded p]
                                                                  [visible cells][gathered V] */
    lm_vec_dot_tile_fn ktile, vtile;  /* both set or both NULL: items one at a time */
    lm_to_float_fn widen;             /* F16 -> F32 for the tiles' q and p */
    size_t tq_off, ts_off, tp_off, ti_off; /* per thread, per tile slot: widened q, scores, widened p, cells */
    size_t ts_stride, tp_stride, ti_stride;
    size_t kg_off;                    /* per thread: K rows copied out (attn_krows, attn_gathered) */
    bool kcopy;                       /* strided K rows read through a copy (attn_krows) */
    size_t vt_off;                    /* per thread: gathered V columns (one query's cells) */
    lm_vec_dot_kt_fn kscore;          /* scores from a transposed K (prompt batches), or NULL */
    bool v_rows;                      /* v [d_v, n_kv, n_head_kv], one row per cell (a quantized V cache) */
    lm_vec_mad_rows_fn vmad;          /* its P.V (float p, no rounding) */
    size_t vo_off;                    /* per thread: an output row when dst's rows are strided */
    lm_kt_pack_fn kpack;              /* its layout */
    size_t ktr_off;                   /* per thread: one kv head's transposed K */
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
    c->v_rows = lm_get_op_i32(dst, 2) != 0;
    c->d_v = c->v_rows ? c->v->ne[0] : c->v->ne[1];
    c->scale = lm_get_op_f32(dst, 0);
    c->max_bias = lm_get_op_f32(dst, 1);
    const struct lm_cpu_type_kernels *kk = &kern->type[c->k->type], *vk = &kern->type[c->v->type];
    c->kt = kk->vec_dot_type;
    c->vt = c->v_rows ? LM_TYPE_F32 : vk->vec_dot_type; /* rows: p stays float (vec_mad_rows) */
    c->kdot = kk->vec_dot;
    c->kdot_rows = kk->vec_dot_rows;
    if (c->v_rows) {
        c->vmad = vk->vec_mad_rows;
    } else {
        c->vdot_rows = vk->vec_dot_rows;
        c->vdot = vk->vec_dot;
    }
    c->kenc = kern->type[c->kt].from_float;
    c->venc = kern->type[c->vt].from_float;
    c->exp_sum = kern->exp_sum;
    c->scale_max = kern->scale_max;
    c->ranges_off = 0;
    c->holes_off = lm_cpu_pad((size_t)c->n_q * 2 * sizeof(int32_t));
    c->thread_off = c->holes_off + lm_cpu_pad((size_t)c->n_q);
    c->qc_off = lm_cpu_pad((size_t)c->d * sizeof(float));
    c->s_off = c->qc_off + lm_cpu_pad(lm_row_size(c->kt, c->d));
    c->pc_off = c->s_off + lm_cpu_pad((size_t)c->n_kv * sizeof(float));
    c->idx_off = c->pc_off + lm_cpu_pad(lm_row_size(c->vt, c->n_kv));
    c->vg_off = c->idx_off + lm_cpu_pad((size_t)c->n_kv * sizeof(int32_t));
    /* a transposed V is F32, F16 or BF16 (a transposed cache cannot hold blocks): one element per cell */
    const size_t ves = c->v_rows ? 0 : lm_type_traits(c->v->type)->type_size;
    c->vo_off = c->vg_off + lm_cpu_pad((size_t)GATHER_CH * (size_t)c->n_kv * ves);
    c->per_thread = c->vo_off + (c->v_rows ? lm_cpu_pad((size_t)c->d_v * sizeof(float)) : 0);
    const bool v_tiles = c->v_rows ? c->vmad != NULL
                                   : c->vt == LM_TYPE_F16 && vk->vec_dot_tile && c->v->nb[0] == 2;
    if ((c->kt == LM_TYPE_F16 || c->kt == LM_TYPE_Q8_0) && kk->vec_dot_tile && v_tiles &&
        c->k->nb[0] == lm_type_size(c->k->type) && dst->nb[0] == sizeof(float)) {
        c->ktile = kk->vec_dot_tile;
        c->vtile = c->v_rows ? NULL : vk->vec_dot_tile; /* rows: each item's vec_mad_rows */
        c->widen = kern->type[LM_TYPE_F16].to_float;
        /* room for whole blocks of cells past n_kv (the transposed-K scores) */
        c->ts_stride = lm_cpu_pad((size_t)(c->n_kv + LM_KT_CELLS) * sizeof(float));
        c->tp_stride = lm_cpu_pad((size_t)(c->n_kv + 16) * sizeof(float));
        c->ti_stride = lm_cpu_pad((size_t)c->n_kv * sizeof(int32_t));
        c->tq_off = c->per_thread;
        c->ts_off = c->tq_off + LM_VEC_DOT_TILE_MAX * lm_cpu_pad((size_t)c->d * sizeof(float));
        c->tp_off = c->ts_off + LM_VEC_DOT_TILE_MAX * c->ts_stride;
        c->ti_off = c->tp_off + LM_VEC_DOT_TILE_MAX * c->tp_stride;
        c->vt_off = c->ti_off + LM_VEC_DOT_TILE_MAX * c->ti_stride;
        c->per_thread = c->vt_off + lm_cpu_pad((size_t)c->n_kv * (size_t)c->d_v * 2);
        /* transposed K: worth its build (n_kv x d per kv head and thread)
         * when each kv head has many queries; capped at KT_MAX_BYTES */
        const int64_t nb = (c->n_kv + LM_KT_CELLS - 1) / LM_KT_CELLS;
        const size_t ktr_bytes = (size_t)nb * lm_kt_block_bytes(c->kt, c->d);
        const bool d_ok = c->kt == LM_TYPE_Q8_0 ? c->d <= LM_KT_Q8_MAX_D : c->d % 16 == 0;
        if (kk->vec_dot_kt && kk->vec_dot_kt_pack && d_ok && c->n_q * c->ratio >= KT_MIN_ITEMS &&
            ktr_bytes <= KT_MAX_BYTES) {
            c->kscore = kk->vec_dot_kt;
            c->kpack = kk->vec_dot_kt_pack;
            c->ktr_off = c->per_thread;
            c->per_thread = c->ktr_off + lm_cpu_pad(ktr_bytes);
        }
    }
    /* K rows copied out (attn_krows when they are strided and a GQA group's
     * heads read them, attn_gathered's tiles) */
    const size_t krb = lm_row_size(c->k->type, c->d);
    c->kcopy = c->ratio > 1 && c->k->nb[1] != krb && c->k->nb[0] == lm_type_size(c->k->type);
    if (c->ktile || c->kcopy) {
        c->kg_off = c->per_thread;
        c->per_thread = c->kg_off + lm_cpu_pad((size_t)c->n_kv * krb);
    }
}

/* What a thread's scratch holds between tiles: the kv head whose transposed
 * K is at ktr_off, and the kv head and cells [kg_lo, kg_hi) whose K rows
 * are at kg_off, contiguous (-1: nothing; the tiles of one query's heads
 * under GQA share them). */
struct attn_held {
    int64_t ktr_g;
    int64_t kg_g, kg_lo, kg_hi;
};

/* Kv head g's K in the kt layout of its type (kernels.h lm_vec_dot_kt_fn),
 * LM_KT_CELLS-cell blocks; the cells past n_kv in the last block are zeros. */
static void build_ktr(const struct attn_ctx *c, char *scratch, int64_t g)
{
    c->kpack(c->d, c->n_kv, (const char *)c->k->data + g * (int64_t)c->k->nb[2], c->k->nb[1], scratch + c->ktr_off);
}

/* n rows of `row` bytes, `stride` apart at src, to dst back to back. The
 * usual row sizes (F16 and Q8_0 heads of 64 and 128) are fixed-size copies
 * the compiler inlines: a call of memcpy per 128-byte row cost 2 % of
 * decoding at depth 4096 (bench_ab, Zen 4). Software prefetch of the rows
 * ahead did not help (16 rows: +0.0 %, 64 rows: -2 %). */
static void copy_rows(char *dst, const char *src, int64_t n, size_t row, size_t stride)
{
#define COPY_ROWS(bytes)                                                                                          \
    for (int64_t j = 0; j < n; j++)                                                                               \
        memcpy(dst + (size_t)j * (bytes), src + (size_t)j * stride, (bytes));                                     \
    return
    switch (row) {
    case 68: COPY_ROWS(68);   /* Q8_0, head 64 */
    case 128: COPY_ROWS(128); /* F16, head 64 */
    case 136: COPY_ROWS(136); /* Q8_0, head 128 */
    case 256: COPY_ROWS(256); /* F16, head 128 */
    default: COPY_ROWS(row);
    }
#undef COPY_ROWS
}

/* Kv head g's K rows of the cells [lo, hi): in place, or (kcopy) copied out
 * together to kg_off first, once for the items that follow with the same g,
 * lo and hi (see the file comment). Returns cell lo's row; *stride gets the
 * row stride. */
static const char *attn_krows(const struct attn_ctx *c, char *scratch, struct attn_held *held, int64_t g, int64_t lo,
                              int64_t hi, size_t *stride)
{
    const char *krow = (const char *)c->k->data + g * (int64_t)c->k->nb[2] + lo * (int64_t)c->k->nb[1];
    const size_t krb = lm_row_size(c->k->type, c->d);
    *stride = c->k->nb[1];
    if (!c->kcopy)
        return krow;
    if (held->kg_g != g || lo != held->kg_lo || hi != held->kg_hi) {
        copy_rows(scratch + c->kg_off, krow, hi - lo, krb, *stride);
        held->kg_g = g;
        held->kg_lo = lo;
        held->kg_hi = hi;
    }
    *stride = krb;
    return scratch + c->kg_off;
}

/* Scratch: the ranges, then per thread q, rounded q, scores, rounded p,
 * visible cells, gathered V. */
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

/* Query i's mask row (its cells contiguous: no_hole checked nb[0]). */
static const float *mask_row(const struct attn_ctx *c, int64_t i)
{
    return (const float *)((const char *)c->mask->data + i * (int64_t)c->mask->nb[1]);
}

/* Whether every cell of [lo, hi) is visible to query i (and the mask row is
 * contiguous), so the softmax needs no compaction. */
static bool no_hole(const struct attn_ctx *c, int64_t i, int64_t lo, int64_t hi)
{
    if (!c->mask)
        return true;
    if (c->mask->nb[0] != sizeof(float))
        return false;
    const float *m = mask_row(c, i);
    int hidden = 0;
    for (int64_t j = lo; j < hi; j++)
        hidden |= m[j] == -INFINITY;
    return !hidden;
}

/* Phase 1: [lo, hi) of the visible cells of this thread's queries (lo == hi:
 * none), and whether a hidden cell lies inside. */
static void attn_ranges(const struct attn_ctx *c, const struct lm_cpu_params *p, int32_t *ranges, uint8_t *holes)
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
        holes[i] = !no_hole(c, i, lo, hi);
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

/* The softmax's end on n compacted values w: exp(w - max) (the table's
 * exp_sum, double sum), then one float multiply by 1 / sum. */
static void normalize(const struct attn_ctx *c, float *s, int64_t n, float max)
{
    const double sum = c->exp_sum(n, s, s, max);
    const float inv = (float)(1.0 / sum);
    for (int64_t j = 0; j < n; j++)
        s[j] *= inv;
}

/* Softmax of the visible cells of [lo, hi): their probabilities compacted in
 * cell order into s[lo], s[lo + 1], ..., their cell indices into idx.
 * Returns how many there are. The dots of q (as kdot reads it) with the K
 * rows of the cells, cell lo's at krow, kstride apart; qc NULL: they are
 * already in s[lo, hi). */
static int64_t attn_softmax(const struct attn_ctx *c, const void *qc, const char *krow, size_t kstride, float *s,
                            int32_t *idx, int64_t i, int64_t h, int64_t lo, int64_t hi)
{
    const float slope = lm_cpu_alibi_slope(c->max_bias, c->n_head, h);
    const bool have = qc == NULL || c->kdot_rows;
    /* all dots of [lo, hi) at once where the table can (the same bits as kdot;
     * hidden cells inside the range are computed and dropped) */
    if (qc && c->kdot_rows)
        c->kdot_rows(c->d, hi - lo, s + lo, krow, kstride, qc);
    float max = -INFINITY;
    int64_t n = 0;
    if (have && !c->holes[i]) { /* the loop below without its branches (the table's scale_max) */
        n = hi - lo;
        idx[0] = (int32_t)lo; /* the P.V path reads only the first cell when there is no hole */
        max = c->scale_max(n, s + lo, c->mask ? mask_row(c, i) + lo : NULL, c->scale, slope);
    }
    for (int64_t j = lo + n; j < hi; j++) {
        const float m = c->mask ? mask_at(c, j, i) : 0.0f;
        if (m == -INFINITY)
            continue;
        float dot;
        if (have)
            dot = s[j];
        else
            c->kdot(c->d, &dot, krow + (j - lo) * (int64_t)kstride, qc);
        float w = dot * c->scale;
        if (c->mask)
            w += slope * m;
        s[lo + n] = w; /* lo + n <= j: compaction in place */
        idx[n++] = (int32_t)j;
        max = w > max ? w : max;
    }
    normalize(c, s + lo, n, max);
    return n;
}

/* The visible columns idx[0..n) of V rows e0..e0+ne of kv head g, gathered
 * into out (row r at out + r * n elements). */
static void gather_v(const struct attn_ctx *c, char *out, const int32_t *idx, int64_t n, int64_t g, int64_t e0,
                     int64_t ne)
{
    const size_t es = lm_type_traits(c->v->type)->type_size;
    for (int64_t r = 0; r < ne; r++) {
        const char *row = (const char *)c->v->data + (e0 + r) * (int64_t)c->v->nb[1] + g * (int64_t)c->v->nb[2];
        char *o = out + (size_t)(r * n) * es;
        if (es == 2)
            for (int64_t k = 0; k < n; k++)
                memcpy(o + 2 * k, row + (int64_t)idx[k] * (int64_t)c->v->nb[0], 2);
        else
            for (int64_t k = 0; k < n; k++)
                memcpy(o + 4 * k, row + (int64_t)idx[k] * (int64_t)c->v->nb[0], 4);
    }
}

/* out[e] = dot(V row e restricted to the visible cells, p) for e < d_v. */
static void attn_pv(const struct attn_ctx *c, char *scratch, char *out, size_t out_stride, const void *pc,
                    const int32_t *idx, int64_t n, int64_t g, bool holes)
{
    if (c->v_rows) { /* V rows per cell: pc is the float p of the cells */
        const char *vbase = (const char *)c->v->data + g * (int64_t)c->v->nb[2];
        float *o = out_stride == sizeof(float) ? (float *)out : (float *)(scratch + c->vo_off);
        const float *p = pc;
        if (holes)
            c->vmad(c->d_v, 1, &n, &o, vbase, c->v->nb[1], idx, &p);
        else
            c->vmad(c->d_v, 1, &n, &o, vbase + (int64_t)idx[0] * (int64_t)c->v->nb[1], c->v->nb[1], NULL, &p);
        if (o != (float *)out)
            for (int64_t e = 0; e < c->d_v; e++)
                *(float *)(out + e * (int64_t)out_stride) = o[e];
        return;
    }
    if (!holes) { /* visible cells contiguous from idx[0]: V read in place */
        const char *vbase = (const char *)c->v->data + (int64_t)idx[0] * (int64_t)c->v->nb[0] +
                            g * (int64_t)c->v->nb[2];
        if (c->vdot_rows && out_stride == sizeof(float)) {
            c->vdot_rows(n, c->d_v, (float *)out, vbase, c->v->nb[1], pc);
            return;
        }
        for (int64_t e = 0; e < c->d_v; e++)
            c->vdot(n, (float *)(out + e * (int64_t)out_stride), vbase + e * (int64_t)c->v->nb[1], pc);
        return;
    }
    char *vg = scratch + c->vg_off;
    const size_t row = (size_t)n * lm_type_traits(c->v->type)->type_size;
    for (int64_t e0 = 0; e0 < c->d_v; e0 += GATHER_CH) {
        const int64_t ne = c->d_v - e0 < GATHER_CH ? c->d_v - e0 : GATHER_CH;
        gather_v(c, vg, idx, n, g, e0, ne);
        if (c->vdot_rows && out_stride == sizeof(float)) {
            c->vdot_rows(n, ne, (float *)out + e0, vg, row, pc);
            continue;
        }
        for (int64_t r = 0; r < ne; r++)
            c->vdot(n, (float *)(out + (e0 + r) * (int64_t)out_stride), vg + (size_t)r * row, pc);
    }
}

/* out[:, h, i] for one item. */
static void attn_item(const struct attn_ctx *c, char *scratch, struct attn_held *held, struct lm_tensor *dst,
                      int64_t i, int64_t h, const int32_t *ranges)
{
    const int64_t lo = ranges[2 * i], hi = ranges[2 * i + 1];
    char *out = (char *)dst->data + h * (int64_t)dst->nb[1] + i * (int64_t)dst->nb[2];
    if (lo >= hi) { /* no visible cell: an empty sum */
        for (int64_t e = 0; e < c->d_v; e++)
            *(float *)(out + e * (int64_t)dst->nb[0]) = 0.0f;
        return;
    }
    float *s = (float *)(scratch + c->s_off);
    int32_t *idx = (int32_t *)(scratch + c->idx_off);
    size_t kstride;
    const char *krow = attn_krows(c, scratch, held, h / c->ratio, lo, hi, &kstride);
    const int64_t n = attn_softmax(c, attn_q(c, scratch, i, h), krow, kstride, s, idx, i, h, lo, hi);
    const char *pc = (const char *)(s + lo);
    if (c->vt != LM_TYPE_F32) {
        c->venc(s + lo, scratch + c->pc_off, n);
        pc = scratch + c->pc_off;
    }
    attn_pv(c, scratch, out, dst->nb[0], pc, idx, n, h / c->ratio, n != hi - lo);
}

/* Items of one query i (heads ht[0..m), queries widened in qf, score rows sq)
 * whose visible cells of [lo, hi) have holes (other sequences' cells, a
 * server's interleaved slots): the visible cells' K rows and V columns are
 * gathered once for the m heads, so no dot is spent on hidden cells, and
 * each head's scores, softmax and P.V run on the compacted cells: the dots
 * and sums of the per-item path in the same order (vec_dot's bits; softmax
 * as attn_softmax over the compacted row), the same bits as the sequence
 * alone in the cache. */
static void attn_gathered(const struct attn_ctx *c, char *scratch, struct lm_tensor *dst, int64_t i,
                          const int64_t *ht, int m, int64_t g, const void *const *qf, float *const *sq, int64_t lo,
                          int64_t hi)
{
    int32_t *idx = (int32_t *)(scratch + c->ti_off);
    int64_t n = 0;
    for (int64_t j = lo; j < hi; j++)
        if (mask_at(c, j, i) != -INFINITY)
            idx[n++] = (int32_t)j;
    const size_t krb = lm_row_size(c->k->type, c->d), vrb = (size_t)n * 2;
    char *kg = scratch + c->kg_off, *vg = scratch + c->vt_off;
    const char *kbase = (const char *)c->k->data + g * (int64_t)c->k->nb[2];
    for (int64_t k = 0; k < n; k++)
        memcpy(kg + (size_t)k * krb, kbase + (int64_t)idx[k] * (int64_t)c->k->nb[1], krb);
    int64_t len[LM_VEC_DOT_TILE_MAX];
    for (int q = 0; q < m; q++)
        len[q] = c->d;
    c->ktile(n, m, len, sq, kg, krb, qf);
    /* V columns: runs of consecutive cells copied whole (V rows: read in place) */
    const char *vbase = (const char *)c->v->data + g * (int64_t)c->v->nb[2];
    for (int64_t k0 = 0; k0 < n && !c->v_rows;) {
        int64_t k1 = k0 + 1;
        while (k1 < n && idx[k1] == idx[k1 - 1] + 1)
            k1++;
        for (int64_t e = 0; e < c->d_v; e++)
            memcpy(vg + (size_t)e * vrb + (size_t)k0 * 2,
                   vbase + e * (int64_t)c->v->nb[1] + (int64_t)idx[k0] * (int64_t)c->v->nb[0], (size_t)(k1 - k0) * 2);
        k0 = k1;
    }
    float *out[LM_VEC_DOT_TILE_MAX];
    const void *pf[LM_VEC_DOT_TILE_MAX];
    const float *pr[LM_VEC_DOT_TILE_MAX]; /* V rows: each head's float p */
    for (int q = 0; q < m; q++) {
        const float slope = lm_cpu_alibi_slope(c->max_bias, c->n_head, ht[q]);
        float *s = sq[q], max = -INFINITY;
        for (int64_t k = 0; k < n; k++) { /* attn_softmax's steps on the compacted row */
            const float w = s[k] * c->scale + slope * mask_at(c, idx[k], i);
            s[k] = w;
            max = w > max ? w : max;
        }
        normalize(c, s, n, max);
        out[q] = (float *)((char *)dst->data + ht[q] * (int64_t)dst->nb[1] + i * (int64_t)dst->nb[2]);
        len[q] = n;
        if (c->v_rows) { /* V rows read in place through the cells' indices, all m heads at once below */
            pr[q] = s;
            continue;
        }
        float *p = (float *)(scratch + c->tp_off + (size_t)q * c->tp_stride);
        c->venc(s, scratch + c->pc_off, n);
        c->widen(scratch + c->pc_off, p, n);
        pf[q] = p;
    }
    if (c->v_rows)
        c->vmad(c->d_v, m, len, out, vbase, c->v->nb[1], idx, pr);
    else
        c->vtile(c->d_v, m, len, out, vg, vrb, pf);
}

/* Items (query it[t], head ht[t]) of kv head g, nt <= LM_VEC_DOT_TILE_MAX,
 * as a tile (see the file comment). */
static void attn_tile(const struct attn_ctx *c, char *scratch, struct lm_tensor *dst, const int64_t *it,
                      const int64_t *ht, int nt, int64_t g, const int32_t *ranges, struct attn_held *held)
{
    float *sq[LM_VEC_DOT_TILE_MAX], *out[LM_VEC_DOT_TILE_MAX];
    const void *qf[LM_VEC_DOT_TILE_MAX], *pf[LM_VEC_DOT_TILE_MAX];
    const float *pr[LM_VEC_DOT_TILE_MAX]; /* V rows: the items' float p */
    int64_t len[LM_VEC_DOT_TILE_MAX], n[LM_VEC_DOT_TILE_MAX], lo = INT64_MAX, hi = 0;
    int m = 0, slot[LM_VEC_DOT_TILE_MAX];
    for (int t = 0; t < nt; t++) {
        const int64_t l = ranges[2 * it[t]], h = ranges[2 * it[t] + 1];
        if (l >= h) { /* no visible cell: the item's own path writes its zeros */
            attn_item(c, scratch, held, dst, it[t], ht[t], ranges);
            continue;
        }
        float *q = (float *)(scratch + c->tq_off + (size_t)m * lm_cpu_pad((size_t)c->d * sizeof(float)));
        if (c->kt == LM_TYPE_Q8_0) /* the Q8_0 tile reads q's blocks (a row is smaller than d floats) */
            memcpy(q, attn_q(c, scratch, it[t], ht[t]), lm_row_size(LM_TYPE_Q8_0, c->d));
        else
            c->widen(attn_q(c, scratch, it[t], ht[t]), q, c->d);
        qf[m] = q;
        sq[m] = (float *)(scratch + c->ts_off + (size_t)m * c->ts_stride);
        len[m] = c->d;
        slot[m++] = t;
        lo = l < lo ? l : lo;
        hi = h > hi ? h : hi;
    }
    if (m == 0)
        return;
    bool one_query = c->mask != NULL;
    for (int q = 1; q < m; q++)
        one_query = one_query && it[slot[q]] == it[slot[0]];
    if (one_query && c->holes[it[slot[0]]]) {
        int64_t hq[LM_VEC_DOT_TILE_MAX];
        for (int q = 0; q < m; q++)
            hq[q] = ht[slot[q]];
        attn_gathered(c, scratch, dst, it[slot[0]], hq, m, g, qf, sq, lo, hi);
        held->kg_g = -1; /* it used kg_off */
        return;
    }
    /* scores of every K row of [lo, hi) against the m queries */
    float *srow[LM_VEC_DOT_TILE_MAX];
    if (c->kscore) { /* whole blocks of cells from the transposed K (kv head g's, built on first use) */
        if (held->ktr_g != g)
            build_ktr(c, scratch, g);
        held->ktr_g = g;
        const char *ktr = scratch + c->ktr_off;
        const int64_t b0 = lo / LM_KT_CELLS, b1 = (hi + LM_KT_CELLS - 1) / LM_KT_CELLS;
        for (int q = 0; q < m; q++)
            srow[q] = sq[q] + b0 * LM_KT_CELLS;
        c->kscore(c->d, b1 - b0, m, srow, ktr + (size_t)b0 * lm_kt_block_bytes(c->kt, c->d), qf);
    } else {
        for (int q = 0; q < m; q++)
            srow[q] = sq[q] + lo;
        size_t kstride;
        const char *krow = attn_krows(c, scratch, held, g, lo, hi, &kstride);
        c->ktile(hi - lo, m, len, srow, krow, kstride, qf);
    }
    /* softmax per item; P.V tiled for those without holes starting at the first one's cell */
    int pv = 0;
    int64_t pvlo = -1;
    for (int q = 0; q < m; q++) {
        const int t = slot[q];
        const int64_t l = ranges[2 * it[t]], h = ranges[2 * it[t] + 1];
        int32_t *idx = (int32_t *)(scratch + c->ti_off + (size_t)q * c->ti_stride);
        n[q] = attn_softmax(c, NULL, NULL, 0, sq[q], idx, it[t], ht[t], l, h);
        char *o = (char *)dst->data + ht[t] * (int64_t)dst->nb[1] + it[t] * (int64_t)dst->nb[2];
        float *p = sq[q] + l; /* V rows: the float p in place; else rounded to v's dot type, widened */
        const void *pc = p;
        if (!c->v_rows) {
            c->venc(p, scratch + c->pc_off, n[q]);
            pc = scratch + c->pc_off;
        }
        if (n[q] != h - l || (pvlo >= 0 && l != pvlo)) { /* holes or another start: alone */
            attn_pv(c, scratch, o, dst->nb[0], pc, idx, n[q], g, n[q] != h - l);
            continue;
        }
        if (!c->v_rows) {
            p = (float *)(scratch + c->tp_off + (size_t)pv * c->tp_stride);
            c->widen(pc, p, n[q]);
        }
        pvlo = l;
        pf[pv] = p;
        pr[pv] = p;
        out[pv] = (float *)o;
        len[pv] = n[q];
        pv++;
    }
    if (pv && c->v_rows) {
        const char *vbase = (const char *)c->v->data + pvlo * (int64_t)c->v->nb[1] + g * (int64_t)c->v->nb[2];
        c->vmad(c->d_v, pv, len, out, vbase, c->v->nb[1], NULL, pr);
    } else if (pv) {
        const char *vbase = (const char *)c->v->data + pvlo * (int64_t)c->v->nb[0] + g * (int64_t)c->v->nb[2];
        c->vtile(c->d_v, pv, len, out, vbase, c->v->nb[1], pf);
    }
}

/* Cost of one item of query i: its visible range plus a fixed overhead. */
static int64_t item_cost(const int32_t *ranges, int64_t i) { return ranges[2 * i + 1] - ranges[2 * i] + 8; }

/* ATTN on this thread's items (two phases, one barrier). */
void lm_cpu_op_attn(const struct lm_cpu_params *p, struct lm_tensor *dst)
{
    struct attn_ctx c;
    attn_init(&c, dst, p->kern);
    int32_t *ranges = (int32_t *)((char *)p->wdata + c.ranges_off);
    uint8_t *holes = (uint8_t *)p->wdata + c.holes_off;
    attn_ranges(&c, p, ranges, holes);
    lm_cpu_sync(p);
    c.holes = holes;
    int64_t total = 0;
    for (int64_t i = 0; i < c.n_q; i++)
        total += item_cost(ranges, i) * c.n_head;
    char *scratch = lm_cpu_wslice(p, c.thread_off, c.per_thread);
    int64_t done = 0; /* cost of the items before the current one */
    int64_t ti[LM_VEC_DOT_TILE_MAX], th[LM_VEC_DOT_TILE_MAX], tg = 0;
    int nt = 0; /* pending tile items (kv head tg) */
    struct attn_held held = {-1, -1, 0, 0};
    for (int64_t g = 0; g < c.n_head_kv; g++)
        for (int64_t i = 0; i < c.n_q; i++) {
            const int64_t cost = item_cost(ranges, i);
            for (int64_t r = 0; r < c.ratio; r++, done += cost) {
                /* an item belongs to the thread whose share holds its midpoint */
                const int64_t owner = (2 * done + cost) * p->nth / (2 * total);
                if (owner > p->ith)
                    goto out; /* owners only grow along the order */
                if (owner != p->ith)
                    continue;
                if (!c.ktile) {
                    attn_item(&c, scratch, &held, dst, i, g * c.ratio + r, ranges);
                    continue;
                }
                /* a query whose cells have holes (interleaved sequences) gets
                 * tiles of its own heads: attn_gathered dots only its cells */
                const bool split = nt && ti[nt - 1] != i && (holes[i] || holes[ti[nt - 1]]);
                if (nt == LM_VEC_DOT_TILE_MAX || (nt && tg != g) || split) {
                    attn_tile(&c, scratch, dst, ti, th, nt, tg, ranges, &held);
                    nt = 0;
                }
                ti[nt] = i;
                th[nt++] = g * c.ratio + r;
                tg = g;
            }
        }
out:
    if (nt)
        attn_tile(&c, scratch, dst, ti, th, nt, tg, ranges, &held);
}
