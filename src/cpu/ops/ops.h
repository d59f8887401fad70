/* ops.h - the CPU backend's op functions and the parameters they run with (internal).
 *
 * The graph executor (exec.c) calls an op function on every thread of the
 * pool with the same dst and that thread's params; each thread computes its
 * share (usually a range of rows from lm_cpu_split) and returns. An op that
 * needs phases (e.g. MUL_MAT: convert activations, then dot) calls
 * lm_cpu_sync between them; every thread must make the same lm_cpu_sync calls.
 * The executor puts one barrier after each computing node.
 *
 * Work buffer: before a graph runs, the executor asks each node's work-size
 * function for the scratch bytes it needs with nth threads and allocates the
 * maximum once (kept across graphs). params.wdata is that buffer, shared by
 * all threads, 64-byte aligned; an op divides it itself (per-thread slices
 * start at lm_cpu_wslice). It is not preserved between nodes.
 *
 * Ops read sources through their strides (nb[]): any view works; contiguous
 * rows take fast paths. Semantics are those of core/tensor.h's comments.
 */
#ifndef LM_CPU_OPS_H
#define LM_CPU_OPS_H

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/fp16.h"
#include "core/fuse.h"
#include "core/tensor.h"
#include "cpu/kernels/kernels.h"
#include "cpu/threadpool.h"

#define LM_CPU_CACHE_LINE 64

struct lm_cpu_params {
    int ith, nth;                      /* this thread, thread count */
    void *wdata;                       /* shared scratch (see above) */
    size_t wsize;
    struct lm_tp *tp;                  /* for lm_cpu_sync */
    const struct lm_cpu_kernels *kern; /* the kernel table of this graph */
};

typedef void (*lm_cpu_op_fn)(const struct lm_cpu_params *p, struct lm_tensor *dst);
/* Scratch bytes an op needs for dst with nth threads (0: none). */
typedef size_t (*lm_cpu_work_fn)(const struct lm_tensor *dst, int nth, const struct lm_cpu_kernels *kern);

/* The CPU's row for one op (cpu/op_table.c): one per enum lm_op. */
struct lm_cpu_op_row {
    bool (*supports)(const struct lm_tensor *t); /* NULL: every well-formed node; else the kernels' limits */
    lm_cpu_work_fn work;                         /* NULL: needs no scratch */
    lm_cpu_op_fn compute;                        /* NULL: not computed on the CPU (views and leaves compute nothing) */
};

/* The rows, indexed by op (cpu/op_table.c); the executor indexes them
 * directly once plan() has checked every node's op. */
extern const struct lm_cpu_op_row lm_cpu_op_rows[LM_OP_COUNT];
/* The row of op, or NULL for a value outside enum lm_op. Pure. */
const struct lm_cpu_op_row *lm_cpu_op_row(enum lm_op op);

/* Barrier among the threads of the current node. */
static inline void lm_cpu_sync(const struct lm_cpu_params *p)
{
    if (p->nth > 1)
        lm_tp_barrier(p->tp);
}

/* Rows [*r0, *r1) of n for thread ith of nth: contiguous, sizes differ by at most one. */
static inline void lm_cpu_split(int64_t n, int ith, int nth, int64_t *r0, int64_t *r1)
{
    *r0 = n * ith / nth;
    *r1 = n * (ith + 1) / nth;
}

/* Round bytes up to a cache line (per-thread slices never share a line). */
static inline size_t lm_cpu_pad(size_t bytes)
{
    return (bytes + LM_CPU_CACHE_LINE - 1) / LM_CPU_CACHE_LINE * LM_CPU_CACHE_LINE;
}

/* Thread ith's slice of `per_thread` bytes (padded) starting `offset` bytes into wdata. */
static inline void *lm_cpu_wslice(const struct lm_cpu_params *p, size_t offset, size_t per_thread)
{
    return (char *)p->wdata + offset + (size_t)p->ith * lm_cpu_pad(per_thread);
}

/* Address of element (i0, i1, i2, i3) of t. */
static inline void *lm_cpu_elem(const struct lm_tensor *t, int64_t i0, int64_t i1, int64_t i2, int64_t i3)
{
    return (char *)t->data + i0 * (int64_t)t->nb[0] + i1 * (int64_t)t->nb[1] + i2 * (int64_t)t->nb[2] +
           i3 * (int64_t)t->nb[3];
}

/* Split a flat row index r over dims 1..3 of t into (i1, i2, i3). */
static inline void lm_cpu_row_index(const struct lm_tensor *t, int64_t r, int64_t *i1, int64_t *i2, int64_t *i3)
{
    *i1 = r % t->ne[1];
    *i2 = r / t->ne[1] % t->ne[2];
    *i3 = r / (t->ne[1] * t->ne[2]);
}

/* This thread's share of the rows of t (flat row r over dims 1..3), walked as
 *     for (struct lm_cpu_rows it = lm_cpu_rows(p, t); lm_cpu_rows_next(&it);)
 * with it.r the current flat row and (it.i1, it.i2, it.i3) its indices. */
struct lm_cpu_rows {
    const struct lm_tensor *t;
    int64_t r, r1;      /* current row (r0 - 1 before the first next), end */
    int64_t i1, i2, i3; /* indices of row r */
};

static inline struct lm_cpu_rows lm_cpu_rows(const struct lm_cpu_params *p, const struct lm_tensor *t)
{
    struct lm_cpu_rows it = {t, 0, 0, 0, 0, 0};
    lm_cpu_split(lm_nrows(t), p->ith, p->nth, &it.r, &it.r1);
    it.r--;
    return it;
}

/* Advance to the next row; false when this thread's rows are done. */
static inline bool lm_cpu_rows_next(struct lm_cpu_rows *it)
{
    if (++it->r >= it->r1)
        return false;
    lm_cpu_row_index(it->t, it->r, &it->i1, &it->i2, &it->i3);
    return true;
}

/* Address of the first element of the current row of it in t (a tensor of
 * the same dims 1..3 as the one walked, or one it is a view of). */
static inline void *lm_cpu_row(const struct lm_tensor *t, const struct lm_cpu_rows *it)
{
    return lm_cpu_elem(t, 0, it->i1, it->i2, it->i3);
}

/* ---- ops (one family per file) ---- */

/* binary.c */
void lm_cpu_op_binary(const struct lm_cpu_params *p, struct lm_tensor *dst); /* ADD, MUL, DIV */
/* unary.c */
void lm_cpu_op_unary(const struct lm_cpu_params *p, struct lm_tensor *dst); /* SCALE SQR SQRT CLAMP UNARY */
/* reduce.c */
void lm_cpu_op_sum_rows(const struct lm_cpu_params *p, struct lm_tensor *dst);
/* norm.c */
void lm_cpu_op_norm(const struct lm_cpu_params *p, struct lm_tensor *dst); /* NORM, RMS_NORM */
/* matmul.c */
void lm_cpu_op_mul_mat(const struct lm_cpu_params *p, struct lm_tensor *dst);
size_t lm_cpu_work_mul_mat(const struct lm_tensor *dst, int nth, const struct lm_cpu_kernels *kern);
void lm_cpu_op_mul_mat_id(const struct lm_cpu_params *p, struct lm_tensor *dst);
size_t lm_cpu_work_mul_mat_id(const struct lm_tensor *dst, int nth, const struct lm_cpu_kernels *kern);
/* get_rows.c */
void lm_cpu_op_get_rows(const struct lm_cpu_params *p, struct lm_tensor *dst);
size_t lm_cpu_work_get_rows(const struct lm_tensor *dst, int nth, const struct lm_cpu_kernels *kern);
/* copy.c */
void lm_cpu_op_cpy(const struct lm_cpu_params *p, struct lm_tensor *dst); /* CPY, CONT */
size_t lm_cpu_work_cpy(const struct lm_tensor *dst, int nth, const struct lm_cpu_kernels *kern);
void lm_cpu_op_set_rows(const struct lm_cpu_params *p, struct lm_tensor *dst);
size_t lm_cpu_work_set_rows(const struct lm_tensor *dst, int nth, const struct lm_cpu_kernels *kern);
void lm_cpu_op_repeat(const struct lm_cpu_params *p, struct lm_tensor *dst);
void lm_cpu_op_concat(const struct lm_cpu_params *p, struct lm_tensor *dst);
/* softmax.c */
void lm_cpu_op_soft_max(const struct lm_cpu_params *p, struct lm_tensor *dst);
size_t lm_cpu_work_soft_max(const struct lm_tensor *dst, int nth, const struct lm_cpu_kernels *kern);
void lm_cpu_op_diag_mask_inf(const struct lm_cpu_params *p, struct lm_tensor *dst);
/* attention.c */
void lm_cpu_op_attn(const struct lm_cpu_params *p, struct lm_tensor *dst);
size_t lm_cpu_work_attn(const struct lm_tensor *dst, int nth, const struct lm_cpu_kernels *kern);
/* rope.c */
void lm_cpu_op_rope(const struct lm_cpu_params *p, struct lm_tensor *dst); /* ROPE, ROPE_BACK */
size_t lm_cpu_work_rope(const struct lm_tensor *dst, int nth, const struct lm_cpu_kernels *kern);
/* argsort.c */
void lm_cpu_op_argsort(const struct lm_cpu_params *p, struct lm_tensor *dst);
size_t lm_cpu_work_argsort(const struct lm_tensor *dst, int nth, const struct lm_cpu_kernels *kern);

/* train.c (training ops) */
void lm_cpu_op_get_rows_back(const struct lm_cpu_params *p, struct lm_tensor *dst);
void lm_cpu_op_repeat_back(const struct lm_cpu_params *p, struct lm_tensor *dst);
size_t lm_cpu_work_repeat_back(const struct lm_tensor *dst, int nth, const struct lm_cpu_kernels *kern);
void lm_cpu_op_rms_norm_back(const struct lm_cpu_params *p, struct lm_tensor *dst);
void lm_cpu_op_soft_max_back(const struct lm_cpu_params *p, struct lm_tensor *dst);
void lm_cpu_op_unary_back(const struct lm_cpu_params *p, struct lm_tensor *dst);
void lm_cpu_op_cross_entropy_loss(const struct lm_cpu_params *p, struct lm_tensor *dst);
void lm_cpu_op_cross_entropy_loss_back(const struct lm_cpu_params *p, struct lm_tensor *dst);
/* CROSS_ENTROPY_LOSS and _BACK */
size_t lm_cpu_work_cross_entropy(const struct lm_tensor *dst, int nth, const struct lm_cpu_kernels *kern);

/* ---- shared row formulas (the fused ops must compute exactly what the
 * separate ops compute) ---- */

/* 1 / sqrt(mean(x^2) + eps) over a contiguous row: sum in double, mean
 * rounded to float (ggml's order). */
static inline float lm_cpu_rms_scale(int64_t n, float eps, const float *x)
{
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++)
        sum += (double)(x[i] * x[i]);
    const float mean = (float)(sum / (double)n);
    return 1.0f / sqrtf(mean + eps);
}

/* ALiBi slope of head h of n_head (tensor.h's formula, in float; 1 when
 * max_bias <= 0): SOFT_MAX and ATTN must agree on it. */
static inline float lm_cpu_alibi_slope(float max_bias, int64_t n_head, int64_t h)
{
    if (max_bias <= 0.0f)
        return 1.0f;
    const uint32_t n = 1u << (uint32_t)floorf(log2f((float)n_head));
    const float m0 = powf(2.0f, -max_bias / (float)n);
    const float m1 = powf(2.0f, -(max_bias / 2.0f) / (float)n);
    return h < (int64_t)n ? powf(m0, (float)(h + 1)) : powf(m1, (float)(2 * (h - (int64_t)n) + 1));
}

/* One F16, BF16 or (any other type) F32 element at p as a float. */
static inline float lm_cpu_load_f32(enum lm_type t, const void *p)
{
    switch (t) {
    case LM_TYPE_F16:
        return lm_fp16_to_fp32(*(const lm_fp16 *)p);
    case LM_TYPE_BF16:
        return lm_bf16_to_fp32(*(const lm_bf16 *)p);
    default:
        return *(const float *)p;
    }
}

/* ---- fused node pairs (fuse.c) ---- */

/* The pair node a then node b make when the CPU computes it fused (core/fuse.h's
 * RMS_NORM_MUL and SILU_MUL), else LM_FUSE_NONE. */
enum lm_fuse lm_cpu_fuse_match(const struct lm_tensor *a, const struct lm_tensor *b);
/* Compute a and b (a matched pair) on this thread's rows. */
void lm_cpu_op_fused(const struct lm_cpu_params *p, enum lm_fuse kind, struct lm_tensor *a, struct lm_tensor *b);

#endif
