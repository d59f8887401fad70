/* fuse.c - pairs of adjacent nodes the executor computes as one: of the
 * pairs core/fuse.h matches, RMS_NORM + MUL and SILU + MUL.
 *
 * A fused pair makes one pass over memory instead of two and saves the
 * barrier between the nodes. The results are bit-identical to the separate
 * ops: the same float formulas in the same order (the shared row helpers are
 * in ops.h). When the first node's result has its own memory (it is read by
 * something else too), it is still written; when the graph allocator put the
 * second node in place over the first, only the final value is stored.
 * Rows are split over threads exactly as the separate ops split them.
 */
#include <stdlib.h>
#include <string.h>

#include "core/fuse.h"
#include "cpu/ops/ops.h"

/* y = rms_norm(x) * w, and (unless in place) n = rms_norm(x). */
static void rms_norm_mul(const struct lm_cpu_params *p, struct lm_tensor *norm, struct lm_tensor *mul)
{
    const struct lm_tensor *x = norm->src[0], *w = mul->src[1];
    const float eps = lm_get_op_f32(norm, 0);
    const int64_t n = x->ne[0];
    const float *wv = w->data;
    const bool keep = norm->data != mul->data;
    for (struct lm_cpu_rows it = lm_cpu_rows(p, x); lm_cpu_rows_next(&it);) {
        const float *xr = lm_cpu_row(x, &it);
        float *nr = lm_cpu_row(norm, &it), *yr = lm_cpu_row(mul, &it);
        const float scale = lm_cpu_rms_scale(n, eps, xr);
        for (int64_t i = 0; i < n; i++) {
            const float v = xr[i] * scale;
            if (keep)
                nr[i] = v;
            yr[i] = v * wv[i];
        }
    }
}

/* y = silu(g) * u, and (unless in place) s = silu(g), the exponentials by the
 * kernel table's silu slot in chunks that stay in L1 (same bits as UNARY SILU
 * then MUL). With fewer rows than threads (token generation: one row of n_ff)
 * every thread takes a slice of each row instead, so one thread does not do
 * all the work. */
static void silu_mul(const struct lm_cpu_params *p, struct lm_tensor *silu, struct lm_tensor *mul)
{
    enum { CHUNK = 256 };
    const struct lm_tensor *g = silu->src[0], *u = mul->src[1];
    const int64_t n = g->ne[0];
    const bool keep = silu->data != mul->data, slice = lm_nrows(mul) < p->nth;
    int64_t i0 = 0, i1 = n;
    if (slice)
        lm_cpu_split(n, p->ith, p->nth, &i0, &i1);
    const struct lm_cpu_params one = {0, 1, p->wdata, p->wsize, p->tp, p->kern}; /* every row */
    float s[CHUNK];
    for (struct lm_cpu_rows it = lm_cpu_rows(slice ? &one : p, mul); lm_cpu_rows_next(&it);) {
        const float *gr = lm_cpu_row(g, &it), *ur = lm_cpu_row(u, &it);
        float *sr = lm_cpu_row(silu, &it), *yr = lm_cpu_row(mul, &it);
        for (int64_t c = i0; c < i1; c += CHUNK) {
            const int64_t m = i1 - c < CHUNK ? i1 - c : CHUNK;
            p->kern->silu(m, s, gr + c);
            if (keep)
                memcpy(sr + c, s, (size_t)m * sizeof(float));
            for (int64_t i = 0; i < m; i++)
                yr[c + i] = s[i] * ur[c + i];
        }
    }
}

enum lm_fuse lm_cpu_fuse_match(const struct lm_tensor *a, const struct lm_tensor *b)
{
    const enum lm_fuse k = lm_fuse_match(a, b);
    return k == LM_FUSE_RMS_NORM_MUL || k == LM_FUSE_SILU_MUL ? k : LM_FUSE_NONE;
}

void lm_cpu_op_fused(const struct lm_cpu_params *p, enum lm_fuse kind, struct lm_tensor *a, struct lm_tensor *b)
{
    if (kind == LM_FUSE_RMS_NORM_MUL)
        rms_norm_mul(p, a, b);
    else
        silu_mul(p, a, b);
}
