/* binary.c - ADD, MUL, DIV: dst = a op b, b broadcast over a (a.ne[i] % b.ne[i] == 0).
 *
 * Threads split dst rows. dst may be a fresh tensor or an in-place view of a
 * (same strides); element i is read before it is written, so aliasing a is
 * safe. Any strides; rows with unit stride take the contiguous path.
 */
#include "cpu/ops/ops.h"

/* d[i] = x[i] op y[i % ny], contiguous rows of n. */
static void row_contig(enum lm_op op, int64_t n, float *d, const float *x, const float *y, int64_t ny)
{
    for (int64_t j0 = 0; j0 < n; j0 += ny) {
        float *dd = d + j0;
        const float *xx = x + j0;
        switch (op) {
        case LM_OP_ADD:
            for (int64_t i = 0; i < ny; i++)
                dd[i] = xx[i] + y[i];
            break;
        case LM_OP_MUL:
            for (int64_t i = 0; i < ny; i++)
                dd[i] = xx[i] * y[i];
            break;
        default:
            for (int64_t i = 0; i < ny; i++)
                dd[i] = xx[i] / y[i];
            break;
        }
    }
}

static float apply(enum lm_op op, float x, float y)
{
    switch (op) {
    case LM_OP_ADD:
        return x + y;
    case LM_OP_MUL:
        return x * y;
    default:
        return x / y;
    }
}

/* ADD, MUL, DIV on this thread's dst rows. */
void lm_cpu_op_binary(const struct lm_cpu_params *p, struct lm_tensor *dst)
{
    const struct lm_tensor *a = dst->src[0], *b = dst->src[1];
    const int64_t n = dst->ne[0], nb0 = b->ne[0];
    const bool contig = dst->nb[0] == sizeof(float) && a->nb[0] == sizeof(float) && b->nb[0] == sizeof(float);
    for (struct lm_cpu_rows it = lm_cpu_rows(p, dst); lm_cpu_rows_next(&it);) {
        char *d = lm_cpu_row(dst, &it);
        const char *x = lm_cpu_row(a, &it);
        const char *y = lm_cpu_elem(b, 0, it.i1 % b->ne[1], it.i2 % b->ne[2], it.i3 % b->ne[3]);
        if (contig) {
            row_contig(dst->op, n, (float *)d, (const float *)x, (const float *)y, nb0);
            continue;
        }
        for (int64_t i = 0; i < n; i++) {
            float xv = *(const float *)(x + i * (int64_t)a->nb[0]);
            float yv = *(const float *)(y + (i % nb0) * (int64_t)b->nb[0]);
            *(float *)(d + i * (int64_t)dst->nb[0]) = apply(dst->op, xv, yv);
        }
    }
}
