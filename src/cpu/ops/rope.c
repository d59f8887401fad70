/* rope.c - ROPE (rotary position embedding), modes NORMAL and NEOX, with
 * partial rotation (n_dims < head_dim: the rest is copied) and YaRN; and
 * ROPE_BACK, its transpose: the same angles with the sine negated (each
 * pair rotated by -theta, times mscale).
 *
 * Facts of ggml (rope_yarn, ggml_rope_yarn_corr_dims, the rope cache):
 *   theta_scale = freq_base^(-2/n_dims); for pair k (i0 = 2k < n_dims) the
 *   angle is theta_k = pos * theta_scale^k, built by repeated float
 *   multiplication from theta_0 = pos.
 *   rope_yarn: t_interp = freq_scale * theta; with ext_factor != 0,
 *   mix = ramp(i0) * ext_factor, t = t_interp (1 - mix) + theta * mix and
 *   mscale *= 1 + 0.1 ln(1/freq_scale); cos, sin = cos(t) mscale, sin(t) mscale,
 *   mscale starting at attn_factor. ramp(i0) = 1 - clamp((i0/2 - lo) /
 *   max(0.001, hi - lo), 0, 1) with integer i0/2, and
 *   [lo, hi] = [max(0, floor(c(beta_fast))), min(n_dims - 1, ceil(c(beta_slow)))],
 *   c(r) = n_dims ln(n_ctx_orig / (2 pi r)) / (2 ln freq_base).
 *   NORMAL rotates (x[2k], x[2k+1]); NEOX rotates (x[k], x[k + n_dims/2]):
 *   y0 = x0 cos - x1 sin, y1 = x0 sin + x1 cos.
 * Each thread keeps a cache of (cos, sin) per pair for the current token.
 * Threads split the (head, token) rows; any strides.
 */
#include <math.h>

#include "cpu/ops/ops.h"

struct rope_args {
    int n_dims, mode, n_ctx_orig;
    float freq_base, freq_scale, ext_factor, attn_factor, beta_fast, beta_slow;
    float theta_scale;
    float corr[2];
    bool back; /* ROPE_BACK: rotate by -theta */
};

/* Scratch: the (cos, sin) cache, one row per thread. */
size_t lm_cpu_work_rope(const struct lm_tensor *dst, int nth, const struct lm_cpu_kernels *kern)
{
    (void)kern;
    return (size_t)nth * lm_cpu_pad((size_t)dst->ne[0] * sizeof(float));
}

static float corr_dim(int n_dims, int n_ctx_orig, float n_rot, float base)
{
    return (float)n_dims * logf((float)n_ctx_orig / (n_rot * 2.0f * (float)M_PI)) / (2.0f * logf(base));
}

static float ramp(float lo, float hi, int i0)
{
    const float y = ((float)(i0 / 2) - lo) / fmaxf(0.001f, hi - lo);
    return 1.0f - fminf(1.0f, fmaxf(0.0f, y));
}

/* cache[2k], cache[2k+1] = cos, sin of pair k at position pos. */
static void fill_cache(const struct rope_args *r, float pos, float *cache)
{
    float theta = pos;
    for (int i0 = 0; i0 < r->n_dims; i0 += 2) {
        const float t_interp = r->freq_scale * theta;
        float t = t_interp, mscale = r->attn_factor;
        if (r->ext_factor != 0.0f) {
            const float mix = ramp(r->corr[0], r->corr[1], i0) * r->ext_factor;
            t = t_interp * (1.0f - mix) + theta * mix;
            mscale *= 1.0f + 0.1f * logf(1.0f / r->freq_scale);
        }
        cache[i0] = cosf(t) * mscale;
        cache[i0 + 1] = r->back ? -(sinf(t) * mscale) : sinf(t) * mscale;
        theta *= r->theta_scale;
    }
}

static void read_args(const struct lm_tensor *dst, struct rope_args *r)
{
    r->n_dims = lm_get_op_i32(dst, 0);
    r->mode = lm_get_op_i32(dst, 1);
    r->n_ctx_orig = lm_get_op_i32(dst, 2);
    r->freq_base = lm_get_op_f32(dst, 3);
    r->freq_scale = lm_get_op_f32(dst, 4);
    r->ext_factor = lm_get_op_f32(dst, 5);
    r->attn_factor = lm_get_op_f32(dst, 6);
    r->beta_fast = lm_get_op_f32(dst, 7);
    r->beta_slow = lm_get_op_f32(dst, 8);
    r->theta_scale = powf(r->freq_base, -2.0f / (float)r->n_dims);
    const float start = floorf(corr_dim(r->n_dims, r->n_ctx_orig, r->beta_fast, r->freq_base));
    const float end = ceilf(corr_dim(r->n_dims, r->n_ctx_orig, r->beta_slow, r->freq_base));
    r->corr[0] = fmaxf(0.0f, start);
    r->corr[1] = fminf((float)(r->n_dims - 1), end);
    r->back = dst->op == LM_OP_ROPE_BACK;
}

/* Rotate one row (x -> y, element strides sx, sy) with the pair cache. */
static void rope_row(const struct rope_args *r, const float *cache, int64_t n, const char *x, int64_t sx, char *y,
                     int64_t sy)
{
    const int64_t half = r->n_dims / 2;
    for (int64_t k = 0; k < half; k++) {
        const int64_t j0 = r->mode == LM_ROPE_NEOX ? k : 2 * k;
        const int64_t j1 = r->mode == LM_ROPE_NEOX ? k + half : 2 * k + 1;
        const float c = cache[2 * k], s = cache[2 * k + 1];
        const float x0 = *(const float *)(x + j0 * sx), x1 = *(const float *)(x + j1 * sx);
        *(float *)(y + j0 * sy) = x0 * c - x1 * s;
        *(float *)(y + j1 * sy) = x0 * s + x1 * c;
    }
    for (int64_t i = r->n_dims; i < n; i++)
        *(float *)(y + i * sy) = *(const float *)(x + i * sx);
}

/* ROPE and ROPE_BACK on this thread's (head, token) rows. */
void lm_cpu_op_rope(const struct lm_cpu_params *p, struct lm_tensor *dst)
{
    const struct lm_tensor *a = dst->src[0], *pos = dst->src[1];
    struct rope_args r;
    read_args(dst, &r);
    float *cache = lm_cpu_wslice(p, 0, (size_t)dst->ne[0] * sizeof(float));
    int64_t cached_token = -1, cached_batch = -1;
    int64_t r0, r1;
    lm_cpu_split(lm_nrows(a), p->ith, p->nth, &r0, &r1);
    for (int64_t row = r0; row < r1; row++) {
        int64_t i1, i2, i3;
        lm_cpu_row_index(a, row, &i1, &i2, &i3);
        if (i2 != cached_token || i3 != cached_batch) {
            const int32_t ps = *(const int32_t *)lm_cpu_elem(pos, i2, 0, 0, 0);
            fill_cache(&r, (float)ps, cache);
            cached_token = i2;
            cached_batch = i3;
        }
        rope_row(&r, cache, a->ne[0], lm_cpu_elem(a, 0, i1, i2, i3), (int64_t)a->nb[0],
                 lm_cpu_elem(dst, 0, i1, i2, i3), (int64_t)dst->nb[0]);
    }
}
