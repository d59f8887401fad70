/* rowmath.cuh - the per-element math of CUDA's ROPE and ARGSORT kernels
 * (ops_elementwise.cu), callable on the host and the device so that
 * tests/cuda/test_cuda_host_elementwise.cu can hold it to the ref backend
 * without a GPU.
 *
 * RoPE: the op's parameters (op_params as in docs/ops.md), YaRN's correction
 * dims (in float, as ref and ggml compute them: their floor / ceil must land
 * on the same integers), and each pair's cos / sin times the magnitude scale
 * in double, the formulas of ref's rope_angle (ggml's rope_yarn).
 * ARGSORT: 64-bit keys whose unsigned order is ref's stable sort order.
 */
#ifndef LM_CUDA_ROWMATH_CUH
#define LM_CUDA_ROWMATH_CUH

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/tensor.h"
#include "core/fp16.h"

/* ---- RoPE ---- */

struct lm_cu_rope_args {
    int n_dims; /* rotated dims per row (even) */
    bool neox;  /* pairs (i, i + n_dims/2), else (2i, 2i+1) */
    double freq_base, freq_scale, ext_factor, attn_factor;
    float corr[2]; /* YaRN correction dims: the pair range where the ramp runs */
};

/* ggml_rope_yarn_corr_dim: the pair index whose wavelength fits n_rot times
 * into n_ctx_orig, in float. */
static inline float lm_cu_rope_corr_dim(int n_dims, int n_ctx_orig, float n_rot, float base)
{
    return (float)n_dims * logf((float)n_ctx_orig / (n_rot * 2.0f * (float)M_PI)) / (2.0f * logf(base));
}

/* The parameters of ROPE node dst (host: reads op_params). */
static inline struct lm_cu_rope_args lm_cu_rope_setup(const struct lm_tensor *dst)
{
    struct lm_cu_rope_args r;
    r.n_dims = lm_get_op_i32(dst, 0);
    r.neox = lm_get_op_i32(dst, 1) == LM_ROPE_NEOX;
    const int n_ctx_orig = lm_get_op_i32(dst, 2);
    const float base = lm_get_op_f32(dst, 3);
    r.freq_base = base;
    r.freq_scale = lm_get_op_f32(dst, 4);
    r.ext_factor = lm_get_op_f32(dst, 5);
    r.attn_factor = lm_get_op_f32(dst, 6);
    const float beta_fast = lm_get_op_f32(dst, 7), beta_slow = lm_get_op_f32(dst, 8);
    const float start = floorf(lm_cu_rope_corr_dim(r.n_dims, n_ctx_orig, beta_fast, base));
    const float end = ceilf(lm_cu_rope_corr_dim(r.n_dims, n_ctx_orig, beta_slow, base));
    r.corr[0] = start > 0.0f ? start : 0.0f;
    r.corr[1] = end < (float)(r.n_dims - 1) ? end : (float)(r.n_dims - 1);
    return r;
}

/* The elements (j0, j1) of a row that pair i (0 <= i < n_dims/2) rotates. */
static __host__ __device__ inline void lm_cu_rope_pair(const struct lm_cu_rope_args &r, int i, int *j0, int *j1)
{
    *j0 = r.neox ? i : 2 * i;
    *j1 = r.neox ? i + r.n_dims / 2 : 2 * i + 1;
}

/* cos and sin of pair i's angle at position p, both times the magnitude
 * scale: x0' = x0 c - x1 s, x1' = x0 s + x1 c. */
static __host__ __device__ inline void lm_cu_rope_cos_sin(const struct lm_cu_rope_args &r, double p, int i, double *c,
                                                        double *s)
{
    const double theta_extrap = p * pow(r.freq_base, -2.0 * i / r.n_dims);
    const double theta_interp = r.freq_scale * theta_extrap;
    double theta = theta_interp, mscale = r.attn_factor;
    if (r.ext_factor != 0.0) {
        const double denom = (double)r.corr[1] - r.corr[0];
        const double y = (i - (double)r.corr[0]) / (denom > 0.001 ? denom : 0.001);
        const double ramp = 1.0 - (y < 0.0 ? 0.0 : y > 1.0 ? 1.0 : y);
        const double mix = ramp * r.ext_factor;
        theta = theta_interp * (1.0 - mix) + theta_extrap * mix;
        mscale *= 1.0 + 0.1 * log(1.0 / r.freq_scale);
    }
    *c = cos(theta) * mscale;
    *s = sin(theta) * mscale;
}

/* ---- ARGSORT ---- */

/* The sort key of value v at index idx: the unsigned order of the high word
 * is the value order (ascending; desc inverts it), NaN after every number
 * ascending and before them descending, -0 equal to +0; the index in the low
 * word breaks ties in index order. A row's keys are unique, so any correct
 * sort of them gives ref's stable sort. */
static __host__ __device__ inline uint64_t lm_cu_sort_key(float v, uint32_t idx, bool desc)
{
    uint32_t u = lm_f32_bits(v);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        u = 0xffffffffu; /* NaN: last ascending (~ makes it first descending) */
    else if ((u & 0x7fffffffu) == 0)
        u = 0x80000000u; /* +-0 */
    else
        u = (u & 0x80000000u) ? ~u : u | 0x80000000u;
    if (desc)
        u = ~u;
    return (uint64_t)u << 32 | idx;
}

/* Compare-exchange q (0 <= q < npad/2) of the step (size, stride) of a
 * bitonic sort of npad keys (powers of two: size 2, 4, .. npad; stride
 * size/2 .. 1): elements lo and lo + stride, ascending where lo & size is 0.
 * The npad/2 exchanges of a step are independent; after the last step the
 * keys ascend. */
static __host__ __device__ inline void lm_cu_bitonic_exchange(uint64_t *keys, int size, int stride, int q)
{
    const int lo = ((q & ~(stride - 1)) << 1) | (q & (stride - 1)), hi = lo + stride;
    const uint64_t ka = keys[lo], kb = keys[hi];
    if ((ka > kb) == ((lo & size) == 0)) {
        keys[lo] = kb;
        keys[hi] = ka;
    }
}

#endif
