/* sort_tmpl.h - std::sort / std::partial_sort with libstdc++'s exact element order.
 *
 * Samplers must order tied logits exactly as llama.cpp does, because the order decides
 * which token a random draw lands on. libstdc++ sorts with introsort (median-of-three
 * pivot moved to the front, unguarded partition, depth limit 2*floor(log2 n), heap
 * sort fallback) and finishes with an insertion sort whose first 16 elements are
 * guarded; partial_sort is heap-select plus sort-heap. This file re-implements that
 * algorithm (not its code) so the permutation is the same for any input.
 *
 * The "unguarded" scans carry bounds checks that never trigger for a strict weak
 * order (so the result is unchanged) but keep NaN keys from running off the array.
 *
 * Instantiate by defining SORT_T (element type), SORT_LESS(a, b) (pointers -> bool)
 * and SORT_FN(name) (prefixes the generated static functions), then including this
 * file. It defines SORT_FN(sort)(T *a, size_t n) and
 * SORT_FN(partial_sort)(T *a, size_t mid, size_t n), and undefines the three macros.
 */
#include <stddef.h>
#include <string.h>

#define SORT_THRESHOLD 16

static void SORT_FN(swap)(SORT_T *a, ptrdiff_t i, ptrdiff_t j)
{
    SORT_T t = a[i];
    a[i] = a[j];
    a[j] = t;
}

/* heap over f[0..len): the largest element under SORT_LESS at the root */
static void SORT_FN(push_heap)(SORT_T *f, ptrdiff_t hole, ptrdiff_t top, SORT_T val)
{
    ptrdiff_t parent = (hole - 1) / 2;
    while (hole > top && SORT_LESS(&f[parent], &val)) {
        f[hole] = f[parent];
        hole = parent;
        parent = (hole - 1) / 2;
    }
    f[hole] = val;
}

static void SORT_FN(adjust_heap)(SORT_T *f, ptrdiff_t hole, ptrdiff_t len, SORT_T val)
{
    const ptrdiff_t top = hole;
    ptrdiff_t child = hole;
    while (child < (len - 1) / 2) {
        child = 2 * (child + 1);
        if (SORT_LESS(&f[child], &f[child - 1]))
            child--;
        f[hole] = f[child];
        hole = child;
    }
    if ((len & 1) == 0 && child == (len - 2) / 2) {
        child = 2 * (child + 1);
        f[hole] = f[child - 1];
        hole = child - 1;
    }
    SORT_FN(push_heap)(f, hole, top, val);
}

/* move f[0] to f[result] and re-heap f[0..len) with the old f[result] */
static void SORT_FN(pop_heap)(SORT_T *f, ptrdiff_t len, ptrdiff_t result)
{
    SORT_T val = f[result];
    f[result] = f[0];
    SORT_FN(adjust_heap)(f, 0, len, val);
}

static void SORT_FN(make_heap)(SORT_T *f, ptrdiff_t len)
{
    if (len < 2)
        return;
    for (ptrdiff_t parent = (len - 2) / 2;; parent--) {
        SORT_FN(adjust_heap)(f, parent, len, f[parent]);
        if (parent == 0)
            return;
    }
}

/* f[0..mid) receives the mid smallest of f[0..n) (under SORT_LESS), in order */
static void SORT_FN(partial_sort)(SORT_T *f, size_t mid_, size_t n_)
{
    ptrdiff_t mid = (ptrdiff_t)mid_, n = (ptrdiff_t)n_;
    if (mid <= 0)
        return;
    SORT_FN(make_heap)(f, mid);
    for (ptrdiff_t i = mid; i < n; i++)
        if (SORT_LESS(&f[i], &f[0]))
            SORT_FN(pop_heap)(f, mid, i);
    for (ptrdiff_t len = mid; len > 1;) {
        len--;
        SORT_FN(pop_heap)(f, len, len);
    }
}

static void SORT_FN(move_median_to_first)(SORT_T *a, ptrdiff_t r, ptrdiff_t x, ptrdiff_t y, ptrdiff_t z)
{
    if (SORT_LESS(&a[x], &a[y])) {
        if (SORT_LESS(&a[y], &a[z]))
            SORT_FN(swap)(a, r, y);
        else if (SORT_LESS(&a[x], &a[z]))
            SORT_FN(swap)(a, r, z);
        else
            SORT_FN(swap)(a, r, x);
    } else if (SORT_LESS(&a[x], &a[z])) {
        SORT_FN(swap)(a, r, x);
    } else if (SORT_LESS(&a[y], &a[z])) {
        SORT_FN(swap)(a, r, z);
    } else {
        SORT_FN(swap)(a, r, y);
    }
}

/* partition a[first..last) around the pivot a[pivot] (pivot == first - 1) */
static ptrdiff_t SORT_FN(partition)(SORT_T *a, ptrdiff_t first, ptrdiff_t last, ptrdiff_t pivot)
{
    const ptrdiff_t end = last;
    for (;;) {
        while (first < end && SORT_LESS(&a[first], &a[pivot]))
            first++;
        last--;
        while (last > pivot && SORT_LESS(&a[pivot], &a[last]))
            last--;
        if (!(first < last))
            return first;
        SORT_FN(swap)(a, first, last);
        first++;
    }
}

static void SORT_FN(introsort_loop)(SORT_T *a, ptrdiff_t first, ptrdiff_t last, int depth)
{
    while (last - first > SORT_THRESHOLD) {
        if (depth == 0) {
            SORT_FN(partial_sort)(a + first, (size_t)(last - first), (size_t)(last - first));
            return;
        }
        depth--;
        ptrdiff_t mid = first + (last - first) / 2;
        SORT_FN(move_median_to_first)(a, first, first + 1, mid, last - 1);
        ptrdiff_t cut = SORT_FN(partition)(a, first + 1, last, first);
        SORT_FN(introsort_loop)(a, cut, last, depth);
        last = cut;
    }
}

/* insert a[i] into the sorted run ending at i-1, scanning no further left than lo */
static void SORT_FN(linear_insert)(SORT_T *a, ptrdiff_t i, ptrdiff_t lo)
{
    SORT_T val = a[i];
    ptrdiff_t next = i - 1;
    while (next >= lo && SORT_LESS(&val, &a[next])) {
        a[i] = a[next];
        i = next;
        next--;
    }
    a[i] = val;
}

static void SORT_FN(insertion_sort)(SORT_T *a, ptrdiff_t first, ptrdiff_t last)
{
    if (first == last)
        return;
    for (ptrdiff_t i = first + 1; i != last; i++) {
        if (SORT_LESS(&a[i], &a[first])) {
            SORT_T val = a[i];
            memmove(&a[first + 1], &a[first], (size_t)(i - first) * sizeof(SORT_T));
            a[first] = val;
        } else {
            SORT_FN(linear_insert)(a, i, first);
        }
    }
}

static void SORT_FN(sort)(SORT_T *a, size_t n_)
{
    ptrdiff_t n = (ptrdiff_t)n_;
    if (n <= 0)
        return;
    int lg = (int)(sizeof(unsigned long long) * 8 - 1) - __builtin_clzll((unsigned long long)n);
    SORT_FN(introsort_loop)(a, 0, n, 2 * lg);
    if (n > SORT_THRESHOLD) {
        SORT_FN(insertion_sort)(a, 0, SORT_THRESHOLD);
        for (ptrdiff_t i = SORT_THRESHOLD; i < n; i++)
            SORT_FN(linear_insert)(a, i, 0);
    } else {
        SORT_FN(insertion_sort)(a, 0, n);
    }
}

#undef SORT_THRESHOLD
#undef SORT_T
#undef SORT_LESS
#undef SORT_FN
