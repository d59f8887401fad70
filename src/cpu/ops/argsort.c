/* argsort.c - ARGSORT: per row of an F32 tensor, the I32 indices that sort it,
 * ascending or descending, STABLE (equal values keep index order in both
 * directions).
 *
 * Bottom-up merge sort of an index array keyed by a copy of the row; a pair
 * is taken from the right run only when strictly before the left one, which
 * makes it stable. NaN compares false both ways, so NaNs keep their relative
 * order and the result stays a permutation. Per-thread scratch: the row copy
 * and two index arrays. Threads split rows; any strides.
 */
#include <string.h>

#include "cpu/ops/ops.h"

/* Scratch: per thread, a copy of the row and two index arrays. */
size_t lm_cpu_work_argsort(const struct lm_tensor *dst, int nth, const struct lm_cpu_kernels *kern)
{
    (void)kern;
    return (size_t)nth * lm_cpu_pad((size_t)dst->ne[0] * 3 * sizeof(int32_t));
}

static inline bool before(const float *v, int32_t i, int32_t j, bool desc)
{
    return desc ? v[i] > v[j] : v[i] < v[j];
}

/* Sort idx[0..n) by v (stable); tmp has room for n. Returns the sorted array
 * (idx or tmp). */
static int32_t *merge_sort(const float *v, int32_t *idx, int32_t *tmp, int64_t n, bool desc)
{
    int32_t *src = idx, *dst = tmp;
    for (int64_t w = 1; w < n; w *= 2) {
        for (int64_t lo = 0; lo < n; lo += 2 * w) {
            int64_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            int64_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi)
                dst[k++] = before(v, src[j], src[i], desc) ? src[j++] : src[i++];
            while (i < mid)
                dst[k++] = src[i++];
            while (j < hi)
                dst[k++] = src[j++];
        }
        int32_t *t = src;
        src = dst;
        dst = t;
    }
    return src;
}

/* ARGSORT on this thread's rows. */
void lm_cpu_op_argsort(const struct lm_cpu_params *p, struct lm_tensor *dst)
{
    const struct lm_tensor *a = dst->src[0];
    const bool desc = lm_get_op_i32(dst, 0) == LM_SORT_DESC;
    const int64_t n = a->ne[0];
    float *v = lm_cpu_wslice(p, 0, (size_t)n * 3 * sizeof(int32_t));
    int32_t *idx = (int32_t *)(v + n), *tmp = idx + n;
    for (struct lm_cpu_rows it = lm_cpu_rows(p, a); lm_cpu_rows_next(&it);) {
        const char *x = lm_cpu_row(a, &it);
        for (int64_t i = 0; i < n; i++) {
            v[i] = *(const float *)(x + i * (int64_t)a->nb[0]);
            idx[i] = (int32_t)i;
        }
        const int32_t *sorted = merge_sort(v, idx, tmp, n, desc);
        char *y = lm_cpu_row(dst, &it);
        for (int64_t i = 0; i < n; i++)
            *(int32_t *)(y + i * (int64_t)dst->nb[0]) = sorted[i];
    }
}
