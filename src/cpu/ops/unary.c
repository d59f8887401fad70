/* unary.c - element-wise ops of one F32 source: SCALE, SQR, SQRT, CLAMP and
 * UNARY (SILU, GELU, RELU, NEG, TANH).
 *
 * Formulas are ggml's f32 ones computed in float; silu(x) = x / (1 + e^-x)
 * and gelu(x) = 0.5x(1 + tanh(sqrt(2/pi)(x + 0.044715x^3))) (the tanh
 * approximation, not the F16 lookup table llama.cpp b1892 used) come from the
 * kernel table's silu / gelu slots (vectorized), which give every element the
 * same bits on contiguous and strided rows. Threads split rows; the source
 * may have any strides, dst is written through its own.
 */
#include <math.h>

#include "cpu/ops/ops.h"

struct unary_args {
    enum lm_op op;
    enum lm_unary_op uop;
    float f0, f1;    /* scale; clamp lo, hi */
    lm_gelu_fn gelu; /* the table's slots, also one element at a time on strided rows */
    lm_silu_fn silu;
};

static float apply(const struct unary_args *u, float x)
{
    switch (u->op) {
    case LM_OP_SCALE:
        return x * u->f0;
    case LM_OP_SQR:
        return x * x;
    case LM_OP_SQRT:
        return sqrtf(x);
    case LM_OP_CLAMP: { /* min(max(x, lo), hi), in that order (tensor.h) */
        float t = x > u->f0 ? x : u->f0;
        return t < u->f1 ? t : u->f1;
    }
    default:
        break;
    }
    switch (u->uop) {
    case LM_UNARY_SILU:
        u->silu(1, &x, &x);
        return x;
    case LM_UNARY_GELU:
        u->gelu(1, &x, &x);
        return x;
    case LM_UNARY_RELU:
        return x > 0.0f ? x : 0.0f;
    case LM_UNARY_NEG:
        return -x;
    case LM_UNARY_TANH:
        return tanhf(x);
    default:
        return x;
    }
}

/* Contiguous rows: the op switch is hoisted out of the element loop for the
 * two ops on the decode path (SCALE, SILU); the rest go through apply(). */
static void row_contig(const struct unary_args *u, int64_t n, float *d, const float *x)
{
    if (u->op == LM_OP_SCALE) {
        for (int64_t i = 0; i < n; i++)
            d[i] = x[i] * u->f0;
    } else if (u->op == LM_OP_UNARY && u->uop == LM_UNARY_GELU) {
        u->gelu(n, d, x);
    } else if (u->op == LM_OP_UNARY && u->uop == LM_UNARY_SILU) {
        u->silu(n, d, x);
    } else {
        for (int64_t i = 0; i < n; i++)
            d[i] = apply(u, x[i]);
    }
}

/* SCALE, SQR, SQRT, CLAMP, UNARY on this thread's rows. */
void lm_cpu_op_unary(const struct lm_cpu_params *p, struct lm_tensor *dst)
{
    const struct lm_tensor *a = dst->src[0];
    struct unary_args u = {dst->op, LM_UNARY_COUNT, 0.0f, 0.0f, p->kern->gelu, p->kern->silu};
    if (dst->op == LM_OP_SCALE || dst->op == LM_OP_CLAMP) {
        u.f0 = lm_get_op_f32(dst, 0);
        u.f1 = lm_get_op_f32(dst, 1);
    } else if (dst->op == LM_OP_UNARY) {
        u.uop = (enum lm_unary_op)lm_get_op_i32(dst, 0);
    }
    const int64_t n = dst->ne[0];
    const bool contig = dst->nb[0] == sizeof(float) && a->nb[0] == sizeof(float);
    for (struct lm_cpu_rows it = lm_cpu_rows(p, dst); lm_cpu_rows_next(&it);) {
        char *d = lm_cpu_row(dst, &it);
        const char *x = lm_cpu_row(a, &it);
        if (contig) {
            row_contig(&u, n, (float *)d, (const float *)x);
            continue;
        }
        for (int64_t i = 0; i < n; i++)
            *(float *)(d + i * (int64_t)dst->nb[0]) = apply(&u, *(const float *)(x + i * (int64_t)a->nb[0]));
    }
}
