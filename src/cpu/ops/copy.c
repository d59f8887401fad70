/* copy.c - CPY, CONT, SET_ROWS, REPEAT, CONCAT.
 *
 * CPY / CONT copy the source's elements, in logical order (i0 fastest), into
 * dst's logical order; shapes may differ when the element counts agree.
 * Same type: raw element (or block) copies, one memcpy per thread when both
 * are contiguous. Different types: each dst row is gathered as F32 from the
 * source (F32/F16/BF16) and encoded: F16/BF16 with the kernel table (all ISAs
 * give the same bits), block types with quant/'s REFERENCE encoder, so a
 * quantized KV cache holds the same bytes on every ISA. (llama.cpp encodes a
 * Q8_0 destination with its SIMD quantizer, which rounds ties to even; the
 * difference is one code step on rare ties.) Threads split dst rows.
 *
 * Quantized tensors are walked in whole blocks: their rows are contiguous
 * (the constructors require it), so a block index stands for an element index.
 */
#include <string.h>

#include "core/fp16.h"
#include "cpu/ops/ops.h"

/* A cursor over the units (elements, or blocks for block types) of a tensor
 * in logical order. */
struct walker {
    const struct lm_tensor *t;
    int64_t n0;    /* units per row */
    int64_t i[4];
};

static void walker_seek(struct walker *w, const struct lm_tensor *t, int64_t flat)
{
    w->t = t;
    w->n0 = t->ne[0] / lm_type_blck(t->type);
    w->i[0] = flat % w->n0;
    int64_t r = flat / w->n0;
    lm_cpu_row_index(t, r, &w->i[1], &w->i[2], &w->i[3]);
}

static inline char *walker_ptr(const struct walker *w)
{
    return lm_cpu_elem(w->t, w->i[0], w->i[1], w->i[2], w->i[3]);
}

/* Units left in the current row. */
static inline int64_t walker_run(const struct walker *w) { return w->n0 - w->i[0]; }

static inline void walker_advance(struct walker *w, int64_t k)
{
    w->i[0] += k;
    if (w->i[0] < w->n0)
        return;
    w->i[0] = 0;
    for (int d = 1; d < 4; d++) {
        if (++w->i[d] < w->t->ne[d])
            return;
        w->i[d] = 0;
    }
}

static void store_f(enum lm_type t, char *p, float v)
{
    switch (t) {
    case LM_TYPE_F16:
        *(lm_fp16 *)p = lm_fp32_to_fp16(v);
        break;
    case LM_TYPE_BF16:
        *(lm_bf16 *)p = lm_fp32_to_bf16(v);
        break;
    default:
        *(float *)p = v;
        break;
    }
}

/* n F32 values of src from flat element index `flat` on. A quantized src is
 * contiguous and flat, n whole blocks (core/op_rules.c). */
static void gather_f32(const struct lm_cpu_params *p, const struct lm_tensor *src, int64_t flat, int64_t n, float *out)
{
    const int64_t blck = lm_type_blck(src->type);
    if (blck > 1) {
        p->kern->type[src->type].to_float((const char *)src->data + (size_t)(flat / blck) * lm_type_size(src->type),
                                          out, n);
        return;
    }
    struct walker w;
    walker_seek(&w, src, flat);
    const bool unit = src->nb[0] == lm_type_size(src->type);
    const lm_to_float_fn decode = p->kern->type[src->type].to_float;
    for (int64_t k = 0; k < n;) {
        int64_t run = walker_run(&w) < n - k ? walker_run(&w) : n - k;
        if (unit) {
            decode(walker_ptr(&w), out + k, run);
        } else {
            for (int64_t j = 0; j < run; j++)
                out[k + j] = lm_cpu_load_f32(src->type, (const char *)walker_ptr(&w) + j * (int64_t)src->nb[0]);
        }
        walker_advance(&w, run);
        k += run;
    }
}

/* Scratch: one F32 row per thread when the types differ. */
size_t lm_cpu_work_cpy(const struct lm_tensor *dst, int nth, const struct lm_cpu_kernels *kern)
{
    (void)kern;
    if (dst->src[0]->type == dst->type)
        return 0;
    return (size_t)nth * lm_cpu_pad((size_t)dst->ne[0] * sizeof(float));
}

/* Same type: copy units of dst rows [r0, r1) from src's flat order. */
static void copy_same(const struct lm_tensor *src, struct lm_tensor *dst, int64_t r0, int64_t r1)
{
    const size_t unit = lm_type_size(dst->type);
    struct walker ws, wd;
    const int64_t n0 = dst->ne[0] / lm_type_blck(dst->type);
    walker_seek(&ws, src, r0 * n0);
    walker_seek(&wd, dst, r0 * n0);
    const bool s_unit = src->nb[0] == unit, d_unit = dst->nb[0] == unit;
    for (int64_t left = (r1 - r0) * n0; left > 0;) {
        int64_t run = walker_run(&ws) < walker_run(&wd) ? walker_run(&ws) : walker_run(&wd);
        char *d = walker_ptr(&wd);
        const char *s = walker_ptr(&ws);
        if (s_unit && d_unit) {
            memcpy(d, s, (size_t)run * unit);
        } else {
            for (int64_t j = 0; j < run; j++)
                memcpy(d + j * (int64_t)dst->nb[0], s + j * (int64_t)src->nb[0], unit);
        }
        walker_advance(&ws, run);
        walker_advance(&wd, run);
        left -= run;
    }
}

/* Float types (F32/F16/BF16) of the same shape, any strides: element (i0..i3)
 * of src goes to the same index of dst. */
static bool same_shape_float(const struct lm_tensor *src, const struct lm_tensor *dst)
{
    for (int d = 0; d < 4; d++)
        if (src->ne[d] != dst->ne[d])
            return false;
    const enum lm_type ts = src->type, td = dst->type;
    return (ts == LM_TYPE_F32 || ts == LM_TYPE_F16 || ts == LM_TYPE_BF16) &&
           (td == LM_TYPE_F32 || td == LM_TYPE_F16 || td == LM_TYPE_BF16);
}

static void copy_float_strided(const struct lm_tensor *src, struct lm_tensor *dst, int64_t r0, int64_t r1)
{
    for (int64_t r = r0; r < r1; r++) {
        int64_t i1, i2, i3;
        lm_cpu_row_index(dst, r, &i1, &i2, &i3);
        const char *s = lm_cpu_elem(src, 0, i1, i2, i3);
        char *d = lm_cpu_elem(dst, 0, i1, i2, i3);
        for (int64_t i = 0; i < dst->ne[0]; i++)
            store_f(dst->type, d + i * (int64_t)dst->nb[0], lm_cpu_load_f32(src->type, s + i * (int64_t)src->nb[0]));
    }
}

/* The KV cache's transposed V store, cpy(transpose(Vcur), view of V): an
 * F32 source whose dim 1 is its contiguous one, dst rows contiguous. Walking
 * dst rows one element at a time would read one float per cache line of
 * Vcur (~30 cycles per element); instead blocks of up to 16 dst rows go
 * element by element: the 16 source floats of element i0 (adjacent in
 * memory) are encoded at once by the table's from_float (the bits store_f
 * gives) and scattered to the block's rows. */
static bool transposed_store(const struct lm_tensor *src, const struct lm_tensor *dst)
{
    return src->type == LM_TYPE_F32 && src->nb[1] == sizeof(float) && src->nb[0] != sizeof(float) &&
           dst->nb[0] == lm_type_size(dst->type);
}

/* m encoded elements of es bytes (2 or 4) from buf into column col of m
 * rows sd bytes apart (constant copy sizes, so the copies inline). */
static inline void scatter_column(char *col, int64_t sd, const char *buf, int64_t m, int64_t es)
{
    if (es == 2) {
        for (int64_t k = 0; k < m; k++)
            memcpy(col + k * sd, buf + k * 2, 2);
    } else {
        for (int64_t k = 0; k < m; k++)
            memcpy(col + k * sd, buf + k * 4, 4);
    }
}

static void copy_transposed(const struct lm_cpu_params *p, const struct lm_tensor *src, struct lm_tensor *dst,
                            int64_t r0, int64_t r1)
{
    enum { BLOCK = 16 };
    const lm_from_float_fn encode = p->kern->type[dst->type].from_float;
    const int64_t es = (int64_t)lm_type_size(dst->type), n = dst->ne[0];
    for (int64_t r = r0; r < r1;) {
        int64_t i1, i2, i3;
        lm_cpu_row_index(dst, r, &i1, &i2, &i3);
        int64_t m = dst->ne[1] - i1 < r1 - r ? dst->ne[1] - i1 : r1 - r;
        m = m < BLOCK ? m : BLOCK;
        const char *s = lm_cpu_elem(src, 0, i1, i2, i3);
        char *d = lm_cpu_elem(dst, 0, i1, i2, i3);
        const int64_t sd = (int64_t)dst->nb[1], ss = (int64_t)src->nb[0];
        char buf[BLOCK * sizeof(float)];
        for (int64_t i = 0; i < n; i++) {
            encode((const float *)(s + i * ss), buf, m);
            scatter_column(d + i * es, sd, buf, m, es);
        }
        r += m;
    }
}

/* CPY and CONT on this thread's dst rows. */
void lm_cpu_op_cpy(const struct lm_cpu_params *p, struct lm_tensor *dst)
{
    const struct lm_tensor *src = dst->src[0];
    const int64_t nr = lm_nrows(dst), n = dst->ne[0];
    int64_t r0, r1;
    lm_cpu_split(nr, p->ith, p->nth, &r0, &r1);
    if (r0 >= r1 || n == 0)
        return;
    if (same_shape_float(src, dst) && transposed_store(src, dst)) { /* any float types, the same included */
        copy_transposed(p, src, dst, r0, r1);
        return;
    }
    if (src->type == dst->type) {
        if (lm_is_contiguous(src) && lm_is_contiguous(dst)) {
            const size_t row = lm_row_size(dst->type, n);
            memcpy((char *)dst->data + (size_t)r0 * row, (const char *)src->data + (size_t)r0 * row,
                   (size_t)(r1 - r0) * row);
        } else {
            copy_same(src, dst, r0, r1);
        }
        return;
    }
    if (same_shape_float(src, dst)) {
        copy_float_strided(src, dst, r0, r1);
        return;
    }
    float *tmp = lm_cpu_wslice(p, 0, (size_t)n * sizeof(float));
    const lm_from_float_fn encode = lm_type_blck(dst->type) == 1 ? p->kern->type[dst->type].from_float
                                                                  : lm_quant_traits(dst->type)->from_float;
    const bool d_unit = dst->nb[0] == lm_type_size(dst->type);
    for (int64_t r = r0; r < r1; r++) {
        int64_t i1, i2, i3;
        lm_cpu_row_index(dst, r, &i1, &i2, &i3);
        char *out = lm_cpu_elem(dst, 0, i1, i2, i3);
        gather_f32(p, src, r * n, n, tmp);
        if (d_unit) {
            encode(tmp, out, n);
        } else {
            for (int64_t i = 0; i < n; i++)
                store_f(dst->type, out + i * (int64_t)dst->nb[0], tmp[i]);
        }
    }
}

/* SET_ROWS: one F32 row per thread (a strided source row gathered). */
size_t lm_cpu_work_set_rows(const struct lm_tensor *dst, int nth, const struct lm_cpu_kernels *kern)
{
    (void)kern;
    return (size_t)nth * lm_cpu_pad((size_t)dst->src[0]->ne[0] * sizeof(float));
}

/* Row i of a as F32: a pointer into a when its elements are packed, else
 * gathered into tmp. */
static const float *set_rows_src(const struct lm_tensor *a, int64_t i, int64_t j0, int64_t m, float *tmp)
{
    const char *s = (const char *)a->data + i * (int64_t)a->nb[1] + j0 * (int64_t)a->nb[0];
    if (a->nb[0] == sizeof(float))
        return (const float *)s;
    for (int64_t j = 0; j < m; j++)
        memcpy(tmp + j, s + j * (int64_t)a->nb[0], sizeof(float));
    return tmp;
}

/* SET_ROWS, rows: this thread's rows of a, each encoded into row ids[i] of
 * dst (the CPY encoders: the table's for float types, quant/'s reference
 * encoder for block types). */
static void set_rows(const struct lm_cpu_params *p, struct lm_tensor *dst, const int32_t *ids, float *tmp)
{
    const struct lm_tensor *a = dst->src[0];
    const int64_t n = a->ne[0], n_dst = dst->ne[1];
    const lm_from_float_fn encode = lm_type_blck(dst->type) == 1 ? p->kern->type[dst->type].from_float
                                                                  : lm_quant_traits(dst->type)->from_float;
    const bool d_unit = dst->nb[0] == lm_type_size(dst->type);
    int64_t i0, i1;
    lm_cpu_split(a->ne[1], p->ith, p->nth, &i0, &i1);
    for (int64_t i = i0; i < i1; i++) {
        const int64_t r = ids[i];
        if (r < 0 || r >= n_dst)
            continue;
        const float *x = set_rows_src(a, i, 0, n, tmp);
        char *out = (char *)dst->data + r * (int64_t)dst->nb[1];
        if (d_unit) {
            encode(x, out, n);
        } else {
            for (int64_t j = 0; j < n; j++)
                store_f(dst->type, out + j * (int64_t)dst->nb[0], x[j]);
        }
    }
}

/* SET_ROWS, columns (the transposed V cache): dst row j, column ids[i] =
 * a[j, i]. Threads split dst rows; as copy_transposed, blocks of up to 16
 * rows take the 16 adjacent floats of a column of a at once. */
static void set_cols(const struct lm_cpu_params *p, struct lm_tensor *dst, const int32_t *ids, float *tmp)
{
    enum { BLOCK = 16 };
    const struct lm_tensor *a = dst->src[0];
    const lm_from_float_fn encode = p->kern->type[dst->type].from_float;
    const int64_t es = (int64_t)lm_type_size(dst->type), n_dst = dst->ne[0];
    const int64_t sd = (int64_t)dst->nb[1], sc = (int64_t)dst->nb[0];
    int64_t j0, j1;
    lm_cpu_split(dst->ne[1], p->ith, p->nth, &j0, &j1);
    char buf[BLOCK * sizeof(float)];
    for (int64_t j = j0; j < j1; j += BLOCK) {
        const int64_t m = j1 - j < BLOCK ? j1 - j : BLOCK;
        char *d = (char *)dst->data + j * sd;
        for (int64_t i = 0; i < a->ne[1]; i++) {
            const int64_t r = ids[i];
            if (r < 0 || r >= n_dst)
                continue;
            encode(set_rows_src(a, i, j, m, tmp), buf, m);
            scatter_column(d + r * sc, sd, buf, m, es);
        }
    }
}

/* SET_ROWS on this thread's share (see lm_set_rows). */
void lm_cpu_op_set_rows(const struct lm_cpu_params *p, struct lm_tensor *dst)
{
    const int32_t *ids = (const int32_t *)dst->src[2]->data;
    float *tmp = lm_cpu_wslice(p, 0, (size_t)dst->src[0]->ne[0] * sizeof(float));
    if (lm_get_op_i32(dst, 0))
        set_cols(p, dst, ids, tmp);
    else
        set_rows(p, dst, ids, tmp);
}

/* REPEAT on this thread's dst rows. */
void lm_cpu_op_repeat(const struct lm_cpu_params *p, struct lm_tensor *dst)
{
    const struct lm_tensor *a = dst->src[0];
    const int64_t n = dst->ne[0], na = a->ne[0];
    for (struct lm_cpu_rows it = lm_cpu_rows(p, dst); lm_cpu_rows_next(&it);) {
        char *d = lm_cpu_row(dst, &it);
        const char *s = lm_cpu_elem(a, 0, it.i1 % a->ne[1], it.i2 % a->ne[2], it.i3 % a->ne[3]);
        for (int64_t i = 0; i < n; i++)
            *(float *)(d + i * (int64_t)dst->nb[0]) = *(const float *)(s + (i % na) * (int64_t)a->nb[0]);
    }
}

/* CONCAT on this thread's dst rows. */
void lm_cpu_op_concat(const struct lm_cpu_params *p, struct lm_tensor *dst)
{
    const struct lm_tensor *a = dst->src[0], *b = dst->src[1];
    const int dim = lm_get_op_i32(dst, 0);
    const int64_t n = dst->ne[0];
    for (struct lm_cpu_rows it = lm_cpu_rows(p, dst); lm_cpu_rows_next(&it);) {
        int64_t idx[4] = {0, it.i1, it.i2, it.i3};
        char *d = lm_cpu_row(dst, &it);
        for (int64_t i = 0; i < n; i++) {
            idx[0] = i;
            const struct lm_tensor *s = a;
            int64_t j[4] = {idx[0], idx[1], idx[2], idx[3]};
            if (j[dim] >= a->ne[dim]) {
                s = b;
                j[dim] -= a->ne[dim];
            }
            *(float *)(d + i * (int64_t)dst->nb[0]) = *(const float *)lm_cpu_elem(s, j[0], j[1], j[2], j[3]);
        }
    }
}
