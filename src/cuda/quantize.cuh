/* quantize.cuh - F32 -> legacy quant block encoders (Q4_0, Q4_1, Q5_0, Q5_1,
 * Q8_0, Q8_1) for CUDA's CPY kernels (ops_copy.cu), callable on the host and
 * the device.
 *
 * Each encoder produces the same bytes as quant/legacy.c's reference encoder
 * (lm_quant_*_from_float, ggml's quantize_row_*_ref): the same operations in
 * the same order, with the same truncating float->int conversions (x86's
 * cvttss2si: INT32_MIN for NaN and out-of-range values) and the same fp16
 * rounding (core/fp16.h). Every product, sum and quotient is rounded on its
 * own: device code spells them with __fmul_rn / __fadd_rn / __fdiv_rn, which
 * nvcc never contracts into an FMA and which are correctly rounded whatever
 * -prec-div says (the kernels must not be built with -ftz=true or
 * --use_fast_math, which would flush subnormal inputs). Host code is plain C
 * arithmetic (no FMA contraction on the host compilers' default x86-64
 * target). tests/cuda/test_cuda_host_copy.cu checks the bytes on the host
 * against quant/ over random and adversarial blocks, and the gather of a
 * block's source (lm_cu_gather32) against ref's CPY over strided layouts.
 */
#ifndef LM_CUDA_QUANTIZE_CUH
#define LM_CUDA_QUANTIZE_CUH

#include <math.h>
#include <stdint.h>

#include "cuda/elem.cuh"
#include "core/fp16.h"
#include "quant/blocks.h"
#include "quant/internal.h"

/* a * b, a + b, a / b, each rounded once (never fused). */
static __host__ __device__ __forceinline__ float q_mul(float a, float b)
{
#ifdef __CUDA_ARCH__
    return __fmul_rn(a, b);
#else
    return a * b;
#endif
}

static __host__ __device__ __forceinline__ float q_add(float a, float b)
{
#ifdef __CUDA_ARCH__
    return __fadd_rn(a, b);
#else
    return a + b;
#endif
}

static __host__ __device__ __forceinline__ float q_sub(float a, float b)
{
#ifdef __CUDA_ARCH__
    return __fsub_rn(a, b);
#else
    return a - b;
#endif
}

static __host__ __device__ __forceinline__ float q_div(float a, float b)
{
#ifdef __CUDA_ARCH__
    return __fdiv_rn(a, b);
#else
    return a / b;
#endif
}

/* min(top, (int8_t)trunc(v)) as a byte (legacy.c's clamp_i8; the truncation
 * and wrap are quant/internal.h's, x86's cvttss2si and a narrowing cast). */
static __host__ __device__ __forceinline__ uint8_t q_clamp_i8(float v, int top)
{
    const int w = lm_quant_wrap_i8(lm_quant_trunc_i32(v));
    return (uint8_t)(top < w ? top : w);
}

/* min and max of x[0..32) (legacy.c's min_max: NaN never replaces them). */
static __host__ __device__ __forceinline__ void q_min_max(const float *x, float *min_out, float *max_out)
{
    float min = 3.40282347e+38f, max = -3.40282347e+38f;
    for (int j = 0; j < LM_QK; j++) {
        if (x[j] < min)
            min = x[j];
        if (x[j] > max)
            max = x[j];
    }
    *min_out = min;
    *max_out = max;
}

/* 32 five-bit codes into nibbles qs[16] and fifth bits qh (little-endian). */
static __host__ __device__ __forceinline__ void q_pack_5bit(const uint8_t *L, uint8_t *qs, uint8_t *qh_out)
{
    uint32_t qh = 0;
    for (int j = 0; j < LM_QK / 2; j++) {
        qs[j] = (uint8_t)((L[j] & 0x0F) | ((L[j + 16] & 0x0F) << 4));
        qh |= ((L[j] & 0x10u) >> 4) << j;
        qh |= ((L[j + 16] & 0x10u) >> 4) << (j + LM_QK / 2);
    }
    for (int b = 0; b < 4; b++)
        qh_out[b] = (uint8_t)(qh >> (8 * b));
}

/* Q8_0 / Q8_1 codes: d = max|x| / 127 (a NaN kept only as ggml's MAX keeps
 * it), qs = round(x / d) half away from zero. Returns d. */
static __host__ __device__ __forceinline__ float q8_codes(const float *x, int8_t *qs)
{
    float amax = 0.0f;
    for (int j = 0; j < LM_QK; j++) {
        const float ax = fabsf(x[j]);
        amax = amax > ax ? amax : ax;
    }
    const float d = q_div(amax, 127.0f);
    const float id = d != 0.0f ? q_div(1.0f, d) : 0.0f;
    for (int j = 0; j < LM_QK; j++)
        qs[j] = lm_quant_wrap_i8(lm_quant_trunc_i32(roundf(q_mul(x[j], id))));
    return d;
}

/* ---- one block of 32 floats each (overloaded on the block type) ---- */

static __host__ __device__ __forceinline__ void quantize_block(const float *x, struct lm_block_q8_0 *y)
{
    y->d = lm_fp32_to_fp16(q8_codes(x, y->qs));
}

static __host__ __device__ __forceinline__ void quantize_block(const float *x, struct lm_block_q8_1 *y)
{
    const float d = q8_codes(x, y->qs);
    int sum = 0;
    for (int j = 0; j < LM_QK; j++)
        sum += y->qs[j];
    y->d = lm_fp32_to_fp16(d);
    y->s = lm_fp32_to_fp16(q_mul((float)sum, d));
}

static __host__ __device__ __forceinline__ void quantize_block(const float *x, struct lm_block_q4_0 *y)
{
    const float d = q_div(lm_quant_signed_absmax(LM_QK, x, NULL), -8.0f);
    const float id = d != 0.0f ? q_div(1.0f, d) : 0.0f;
    y->d = lm_fp32_to_fp16(d);
    for (int j = 0; j < LM_QK / 2; j++) {
        const uint8_t lo = q_clamp_i8(q_add(q_mul(x[j], id), 8.5f), 15);
        const uint8_t hi = q_clamp_i8(q_add(q_mul(x[j + LM_QK / 2], id), 8.5f), 15);
        y->qs[j] = (uint8_t)(lo | hi << 4);
    }
}

static __host__ __device__ __forceinline__ void quantize_block(const float *x, struct lm_block_q4_1 *y)
{
    float min, max;
    q_min_max(x, &min, &max);
    const float d = q_div(q_sub(max, min), 15.0f);
    const float id = d != 0.0f ? q_div(1.0f, d) : 0.0f;
    y->d = lm_fp32_to_fp16(d);
    y->m = lm_fp32_to_fp16(min);
    for (int j = 0; j < LM_QK / 2; j++) {
        const uint8_t lo = q_clamp_i8(q_add(q_mul(q_sub(x[j], min), id), 0.5f), 15);
        const uint8_t hi = q_clamp_i8(q_add(q_mul(q_sub(x[j + LM_QK / 2], min), id), 0.5f), 15);
        y->qs[j] = (uint8_t)(lo | hi << 4);
    }
}

static __host__ __device__ __forceinline__ void quantize_block(const float *x, struct lm_block_q5_0 *y)
{
    uint8_t L[LM_QK];
    const float d = q_div(lm_quant_signed_absmax(LM_QK, x, NULL), -16.0f);
    const float id = d != 0.0f ? q_div(1.0f, d) : 0.0f;
    y->d = lm_fp32_to_fp16(d);
    for (int j = 0; j < LM_QK; j++)
        L[j] = q_clamp_i8(q_add(q_mul(x[j], id), 16.5f), 31);
    q_pack_5bit(L, y->qs, y->qh);
}

static __host__ __device__ __forceinline__ void quantize_block(const float *x, struct lm_block_q5_1 *y)
{
    uint8_t L[LM_QK];
    float min, max;
    q_min_max(x, &min, &max);
    const float d = q_div(q_sub(max, min), 31.0f);
    const float id = d != 0.0f ? q_div(1.0f, d) : 0.0f;
    y->d = lm_fp32_to_fp16(d);
    y->m = lm_fp32_to_fp16(min);
    for (int j = 0; j < LM_QK; j++) /* (uint8_t)(v + 0.5f): no clamp, as the reference */
        L[j] = (uint8_t)(lm_quant_trunc_i32(q_add(q_mul(q_sub(x[j], min), id), 0.5f)) & 0xff);
    q_pack_5bit(L, y->qs, y->qh);
}

/* ---- gathering a block's source ---- */

/* The 32 F32 elements with flat indices k0 .. k0+31 of a source of shape ss
 * at src into x: straight from memory when the source is packed (s_flat),
 * else index by index through its strides. */
static __host__ __device__ __forceinline__ void lm_cu_gather32(const char *src, const struct lm_cu_shape &ss, bool s_flat,
                                                             int64_t k0, bool narrow, float *x)
{
    if (s_flat) {
        const float *p = (const float *)src + k0;
        if (((uintptr_t)p & 15) == 0) {
            for (int j = 0; j < LM_QK; j += 4) {
                const float4 v = *(const float4 *)(p + j);
                x[j] = v.x;
                x[j + 1] = v.y;
                x[j + 2] = v.z;
                x[j + 3] = v.w;
            }
        } else {
            for (int j = 0; j < LM_QK; j++)
                x[j] = p[j];
        }
        return;
    }
    int64_t i[4];
    lm_cu_unflatten(k0, ss.ne, narrow, i);
    int64_t off = lm_cu_offset(ss, i);
    for (int j = 0; j < LM_QK; j++) {
        x[j] = *(const float *)(src + off);
        if (++i[0] < ss.ne[0]) {
            off += ss.nb[0];
            continue;
        }
        i[0] = 0; /* carry into the outer dims */
        if (++i[1] == ss.ne[1]) {
            i[1] = 0;
            if (++i[2] == ss.ne[2]) {
                i[2] = 0;
                i[3]++;
            }
        }
        off = lm_cu_offset(ss, i);
    }
}

/* ---- element conversions between the float types ---- */

/* Storage traits of F32, F16 and BF16 elements: the stored type and its
 * conversions to and from float (core/fp16.h: round to nearest even, NaN
 * kept quiet), the same bits as quant/'s from_float / to_float. */
struct lm_cu_f32 {
    typedef float raw;
    static __host__ __device__ __forceinline__ float to_f(float v) { return v; }
    static __host__ __device__ __forceinline__ float from_f(float f) { return f; }
};

struct lm_cu_f16 {
    typedef lm_fp16 raw;
    static __host__ __device__ __forceinline__ float to_f(lm_fp16 v) { return lm_fp16_to_fp32(v); }
    static __host__ __device__ __forceinline__ lm_fp16 from_f(float f) { return lm_fp32_to_fp16(f); }
};

struct lm_cu_bf16 {
    typedef lm_bf16 raw;
    static __host__ __device__ __forceinline__ float to_f(lm_bf16 v) { return lm_bf16_to_fp32(v); }
    static __host__ __device__ __forceinline__ lm_bf16 from_f(float f) { return lm_fp32_to_bf16(f); }
};

#endif
