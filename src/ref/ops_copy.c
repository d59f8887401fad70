/* ops_copy.c - ref CPY, CONT, REPEAT and CONCAT.
 *
 * CPY and CONT copy elements in flat order: element j of the source (row-major
 * over its ne[], ne[0] fastest) becomes element j of the destination, whatever
 * the two shapes and strides. Equal types copy the bytes of each element (or
 * quantized block) unchanged; different types go through F32 (a quantized
 * source decoded row by row), and a quantized destination gets each of its
 * rows encoded with the type's from_float. The
 * source is gathered into a scratch buffer first, so overlapping source and
 * destination memory gives the same result as disjoint memory.
 */
#include <stdlib.h>
#include <string.h>

#include "quant/quant.h"
#include "ref/ref_internal.h"

/* The shape of t counted in blocks along dim 0. */
static void block_shape(const struct lm_tensor *t, int64_t ne[4])
{
    ne[0] = t->ne[0] / lm_type_blck(t->type);
    ne[1] = t->ne[1];
    ne[2] = t->ne[2];
    ne[3] = t->ne[3];
}

/* Same type: move every block (element, for non-block types) in flat order. */
static lm_status copy_blocks(const struct lm_tensor *src, struct lm_tensor *dst)
{
    const size_t bs = lm_type_size(src->type);
    int64_t ns[4], nd[4], idx[4];
    block_shape(src, ns);
    block_shape(dst, nd);
    const int64_t n = ns[0] * ns[1] * ns[2] * ns[3];
    char *tmp = ref_scratch(n, bs);
    if (!tmp)
        return LM_ERR_NOMEM;
    for (int64_t k = 0; k < n; k++) {
        lm_ref_unflatten(ns, k, idx);
        memcpy(tmp + (size_t)k * bs, ref_ptr(src, idx[0], idx[1], idx[2], idx[3]), bs);
    }
    for (int64_t k = 0; k < n; k++) {
        lm_ref_unflatten(nd, k, idx);
        memcpy(ref_ptr(dst, idx[0], idx[1], idx[2], idx[3]), tmp + (size_t)k * bs, bs);
    }
    free(tmp);
    return LM_OK;
}

/* Different types: the source (float, or quantized and decoded row by row)
 * through F32 into dst's type. */
static lm_status convert(const struct lm_tensor *src, struct lm_tensor *dst)
{
    const int64_t n = lm_nelements(src);
    int64_t idx[4];
    float *tmp = ref_scratch(n, sizeof *tmp);
    if (!tmp)
        return LM_ERR_NOMEM;
    lm_status st = LM_OK;
    if (lm_type_blck(src->type) > 1) {
        for (int64_t r = 0; r < lm_nrows(src) && !st; r++) {
            lm_ref_unflatten(src->ne, r * src->ne[0], idx);
            st = lm_ref_get_row(src, idx[1], idx[2], idx[3], tmp + r * src->ne[0]);
        }
        if (st) {
            free(tmp);
            return st;
        }
    } else {
        for (int64_t k = 0; k < n; k++) {
            lm_ref_unflatten(src->ne, k, idx);
            tmp[k] = (float)lm_ref_get(src, idx[0], idx[1], idx[2], idx[3]);
        }
    }
    if (lm_type_blck(dst->type) == 1) {
        for (int64_t k = 0; k < n; k++) {
            lm_ref_unflatten(dst->ne, k, idx);
            lm_ref_set(dst, idx[0], idx[1], idx[2], idx[3], tmp[k]);
        }
    } else if (!lm_ref_type_writable(dst->type)) {
        st = LM_ERR_UNSUPPORTED;
    } else {
        const lm_from_float_fn enc = lm_quant_traits(dst->type)->from_float;
        const int64_t rows = lm_nrows(dst);
        for (int64_t r = 0; r < rows; r++) {
            const int64_t i1 = r % dst->ne[1], i2 = r / dst->ne[1] % dst->ne[2], i3 = r / dst->ne[1] / dst->ne[2];
            enc(tmp + r * dst->ne[0], ref_ptr(dst, 0, i1, i2, i3), dst->ne[0]);
        }
    }
    free(tmp);
    return st;
}

/* CPY and CONT: src[0] into dst in flat order (see the file comment). */
lm_status lm_ref_op_cpy(struct lm_tensor *dst)
{
    const struct lm_tensor *src = dst->src[0];
    if (src->type == dst->type)
        return copy_blocks(src, dst);
    return convert(src, dst);
}

/* SET_ROWS: row i of src[0], through F32 as CPY converts, becomes row (or,
 * op_params[0] == 1, column) ids[i] of dst; out-of-range ids write nothing. */
lm_status lm_ref_op_set_rows(struct lm_tensor *dst)
{
    const struct lm_tensor *a = dst->src[0], *ids = dst->src[2];
    const bool cols = lm_get_op_i32(dst, 0) != 0;
    const int64_t n = a->ne[0], n_dst = dst->ne[cols ? 0 : 1];
    if (lm_type_blck(dst->type) > 1 && !lm_ref_type_writable(dst->type))
        return LM_ERR_UNSUPPORTED;
    float *row = ref_scratch(n, sizeof *row);
    if (!row)
        return LM_ERR_NOMEM;
    for (int64_t i = 0; i < a->ne[1]; i++) {
        const int64_t r = ((const int32_t *)ids->data)[i];
        if (r < 0 || r >= n_dst)
            continue;
        for (int64_t j = 0; j < n; j++)
            row[j] = (float)lm_ref_get(a, j, i, 0, 0);
        if (lm_type_blck(dst->type) > 1)
            lm_quant_traits(dst->type)->from_float(row, ref_ptr(dst, 0, r, 0, 0), n);
        else
            for (int64_t j = 0; j < n; j++)
                lm_ref_set(dst, cols ? r : j, cols ? j : r, 0, 0, row[j]);
    }
    free(row);
    return LM_OK;
}

/* REPEAT: dst[i] = a[i mod a.ne], per dim. */
lm_status lm_ref_op_repeat(struct lm_tensor *dst)
{
    const struct lm_tensor *a = dst->src[0];
    for (int64_t i3 = 0; i3 < dst->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < dst->ne[2]; i2++)
            for (int64_t i1 = 0; i1 < dst->ne[1]; i1++)
                for (int64_t i0 = 0; i0 < dst->ne[0]; i0++)
                    lm_ref_set(dst, i0, i1, i2, i3,
                            lm_ref_get(a, i0 % a->ne[0], i1 % a->ne[1], i2 % a->ne[2], i3 % a->ne[3]));
    return LM_OK;
}

/* dst = a followed by b along dim: dst[i] = a[i] if i[dim] < a.ne[dim], else
 * b[i with i[dim] - a.ne[dim]]. */
lm_status lm_ref_op_concat(struct lm_tensor *dst)
{
    const struct lm_tensor *a = dst->src[0], *b = dst->src[1];
    const int dim = lm_get_op_i32(dst, 0);
    int64_t i[4];
    for (i[3] = 0; i[3] < dst->ne[3]; i[3]++)
        for (i[2] = 0; i[2] < dst->ne[2]; i[2]++)
            for (i[1] = 0; i[1] < dst->ne[1]; i[1]++)
                for (i[0] = 0; i[0] < dst->ne[0]; i[0]++) {
                    int64_t j[4] = {i[0], i[1], i[2], i[3]};
                    const struct lm_tensor *s = a;
                    if (j[dim] >= a->ne[dim]) {
                        j[dim] -= a->ne[dim];
                        s = b;
                    }
                    lm_ref_set(dst, i[0], i[1], i[2], i[3], lm_ref_get(s, j[0], j[1], j[2], j[3]));
                }
    return LM_OK;
}
