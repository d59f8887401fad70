/* get_rows.c - GET_ROWS: out[:, n, i2, i3] = decode(a[:, ids[n, i2, i3], i2', i3'])
 * with i2' = i2 (or 0 when a.ne[2] == 1), likewise i3'.
 *
 * Rows are decoded to F32 with the kernel table's to_float (bit-exact for every
 * type); F32/F16/BF16 sources with non-unit element stride are read element by
 * element. Ids out of [0, a.ne[1]) give a zero row. Threads split output rows.
 */
#include <string.h>

#include "cpu/ops/ops.h"

/* Scratch: one F32 row per thread when dst rows are strided. */
size_t lm_cpu_work_get_rows(const struct lm_tensor *dst, int nth, const struct lm_cpu_kernels *kern)
{
    (void)kern;
    /* a decoded row when dst rows are not unit-stride (never for fresh dsts) */
    return dst->nb[0] == sizeof(float) ? 0 : (size_t)nth * lm_cpu_pad((size_t)dst->ne[0] * sizeof(float));
}

/* GET_ROWS on this thread's output rows. */
void lm_cpu_op_get_rows(const struct lm_cpu_params *p, struct lm_tensor *dst)
{
    const struct lm_tensor *a = dst->src[0], *ids = dst->src[1];
    const int64_t K = a->ne[0];
    const bool a_unit = a->nb[0] == lm_type_size(a->type);
    const bool d_unit = dst->nb[0] == sizeof(float);
    const lm_to_float_fn decode = p->kern->type[a->type].to_float;
    float *tmp = d_unit ? NULL : lm_cpu_wslice(p, 0, (size_t)K * sizeof(float));
    for (struct lm_cpu_rows it = lm_cpu_rows(p, dst); lm_cpu_rows_next(&it);) {
        const int64_t i2 = it.i2, i3 = it.i3;
        const int32_t row = *(const int32_t *)lm_cpu_elem(ids, it.i1, i2, i3, 0);
        char *out = lm_cpu_row(dst, &it);
        float *y = d_unit ? (float *)out : tmp;
        if (row < 0 || row >= a->ne[1]) {
            memset(y, 0, (size_t)K * sizeof(float));
        } else {
            const char *src = lm_cpu_elem(a, 0, row, a->ne[2] == 1 ? 0 : i2, a->ne[3] == 1 ? 0 : i3);
            if (a_unit) {
                decode(src, y, K);
            } else {
                for (int64_t i = 0; i < K; i++)
                    y[i] = lm_cpu_load_f32(a->type, src + i * (int64_t)a->nb[0]);
            }
        }
        if (!d_unit)
            for (int64_t i = 0; i < K; i++)
                *(float *)(out + i * (int64_t)dst->nb[0]) = y[i];
    }
}
