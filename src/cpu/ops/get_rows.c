/* get_rows.c - GET_ROWS: out[:, n, i2, i3] = decode(a[:, ids[n, i2, i3], i2', i3'])
 * with i2' = i2 (or 0 when a.ne[2] == 1), likewise i3'.
 *
 * Rows are decoded to F32 with the kernel table's to_float (bit-exact for every
 * type); F32/F16/BF16 sources with non-unit element stride are read element by
 * element. A repacked source (cpu/repack.h: an embedding tied to the output
 * matrix) has no addressable rows: the row's group of LM_REPACK_ROWS is
 * unpacked into scratch (kept while the next id falls in the same group) and
 * the row decoded from there, the same bytes as the plain row. Ids out of
 * [0, a.ne[1]) give a zero row. Threads split output rows.
 */
#include <string.h>

#include "cpu/ops/ops.h"
#include "cpu/repack.h"

/* Per-thread scratch: the plain bytes of one group of a repacked source, then
 * one F32 row when dst rows are strided (never for fresh dsts). */
static size_t group_bytes(const struct lm_tensor *a)
{
    return lm_tensor_is_repacked(a) ? lm_cpu_pad(LM_REPACK_ROWS * lm_row_size(a->type, a->ne[0])) : 0;
}

size_t lm_cpu_work_get_rows(const struct lm_tensor *dst, int nth, const struct lm_cpu_kernels *kern)
{
    (void)kern;
    const size_t row = dst->nb[0] == sizeof(float) ? 0 : lm_cpu_pad((size_t)dst->ne[0] * sizeof(float));
    return (size_t)nth * (group_bytes(dst->src[0]) + row);
}

/* GET_ROWS on this thread's output rows. */
void lm_cpu_op_get_rows(const struct lm_cpu_params *p, struct lm_tensor *dst)
{
    const struct lm_tensor *a = dst->src[0], *ids = dst->src[1];
    const int64_t K = a->ne[0];
    const bool a_unit = a->nb[0] == lm_type_size(a->type);
    const bool d_unit = dst->nb[0] == sizeof(float);
    const lm_to_float_fn decode = p->kern->type[a->type].to_float;
    const size_t gb = group_bytes(a), per_thread = gb + (d_unit ? 0 : lm_cpu_pad((size_t)K * sizeof(float)));
    char *scratch = per_thread ? lm_cpu_wslice(p, 0, per_thread) : NULL;
    float *tmp = d_unit ? NULL : (float *)(scratch + gb);
    int64_t group = -1; /* the group of a repacked source unpacked in scratch */
    for (struct lm_cpu_rows it = lm_cpu_rows(p, dst); lm_cpu_rows_next(&it);) {
        const int64_t i2 = it.i2, i3 = it.i3;
        const int32_t row = *(const int32_t *)lm_cpu_elem(ids, it.i1, i2, i3, 0);
        char *out = lm_cpu_row(dst, &it);
        float *y = d_unit ? (float *)out : tmp;
        if (row < 0 || row >= a->ne[1]) {
            memset(y, 0, (size_t)K * sizeof(float));
        } else if (gb) { /* repacked: 2-D, contiguous */
            const int64_t g = row / LM_REPACK_ROWS;
            const size_t rs = lm_row_size(a->type, K);
            if (g != group) {
                lm_unpack_rows(a->type, (const char *)a->data + (size_t)g * LM_REPACK_ROWS * rs, scratch,
                               LM_REPACK_ROWS, K);
                group = g;
            }
            decode(scratch + (size_t)(row % LM_REPACK_ROWS) * rs, y, K);
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
