/* internal.h - shared by the files of quant/ only: the per-type converters that
 * fill the traits table and the scale searches of the K-quant family.
 *
 * Every converter works on n elements (a multiple of the block size; callers
 * check). Encoders follow ggml's reference quantizers operation for operation,
 * so the float rounding, and therefore the bytes, are the same; see
 * docs/formats.md. Everything here is pure computation: thread-safe, no
 * allocation, and defined (no UB, no crash) for NaN/Inf input.
 */
#ifndef LM_QUANT_INTERNAL_H
#define LM_QUANT_INTERNAL_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "quant/blocks.h"

/* Bit-exact results need every a*b+c rounded twice, never fused into an FMA.
 * GCC in ISO C mode (the build's -std=c11) already does not contract; clang
 * does by default (-ffp-contract=on) when FMA is available (LM_NATIVE), so
 * turn contraction off with the standard pragma there, and for GCC in GNU
 * mode with its optimize pragma. Every quant/ .c file includes this header.
 * The CUDA encoders (cuda/quantize.cuh) include it for the small helpers
 * below (LM_HOSTDEV, core/fp16.h) and round each operation explicitly; the
 * optimize pragma would apply to every later function of their file, so nvcc
 * does not see it. */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__) && !defined(__CUDACC__)
#pragma GCC optimize("fp-contract=off")
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Round to nearest (ties to even) via the 1.5*2^23 trick, as ggml does; valid
 * for |f| <= 4194303, defined (garbage but no UB) outside. */
static inline LM_HOSTDEV int lm_quant_nearest_int(float f)
{
    float v = f + 12582912.f;
    int32_t i;
    memcpy(&i, &v, sizeof i);
    return (i & 0x007fffff) - 0x00400000;
}

static inline LM_HOSTDEV int lm_quant_imax(int a, int b) { return a > b ? a : b; }
static inline LM_HOSTDEV int lm_quant_imin(int a, int b) { return a < b ? a : b; }

/* (int)v as x86's cvttss2si computes it: truncation, and INT32_MIN for NaN or
 * out-of-range values (where a C cast would be undefined behaviour). */
static inline LM_HOSTDEV int32_t lm_quant_trunc_i32(float v)
{
    if (v > -2147483648.f && v < 2147483648.f)
        return (int32_t)v;
    return INT32_MIN;
}

/* The low 8 bits of v as a two's complement int8 (what a narrowing cast does
 * on every target lamina supports, spelled out to avoid implementation-defined
 * conversions). */
static inline LM_HOSTDEV int8_t lm_quant_wrap_i8(int32_t v)
{
    int32_t b = v & 0xff;
    return (int8_t)(b >= 128 ? b - 256 : b);
}

/* The element of x[0..n) with the largest magnitude (the first one on ties;
 * NaN never wins; 0 when all are 0 or NaN); *amax (if not NULL) gets that
 * magnitude. */
static inline LM_HOSTDEV float lm_quant_signed_absmax(int n, const float *x, float *amax)
{
    float a = 0.0f, max = 0.0f;
    for (int i = 0; i < n; i++) {
        const float ax = fabsf(x[i]);
        if (ax > a) {
            a = ax;
            max = x[i];
        }
    }
    if (amax)
        *amax = a;
    return max;
}

/* ---- scale searches (search.c); names follow the ggml functions they mirror ---- */

/* Symmetric quantization of x[0..n) to L[i] in [0, 2*nmax) (stored + nmax),
 * searching 19 candidate scales; rmse_type selects the error weights (1: x^2,
 * 2: 1, 3: |x|, other: sqrt|x|) unless qw is given; a negative rmse_type returns
 * early with the average of the first fit and the initial scale. Returns d. */
float lm_quant_make_qx(int n, int nmax, const float *x, int8_t *L, int rmse_type, const float *qw);

/* Q3_K sub-block search: symmetric, x^2-weighted coordinate descent (do_rmse)
 * or plain rounding. L[i] in [0, 2*nmax). Returns d. */
float lm_quant_make_q3(int n, int nmax, const float *x, int8_t *L, bool do_rmse);

/* Asymmetric (scale, min) search with weights: L[i] in [0, nmax], *the_min = -min
 * (>= 0). Laux is scratch of n bytes. Returns the scale. */
float lm_quant_make_qkx2(int n, int nmax, const float *x, const float *weights, uint8_t *L, float *the_min,
                         uint8_t *Laux, float rmin, float rdelta, int nstep, bool use_mad);

/* As lm_quant_make_qkx2 but weights may be NULL (then x^2) and a flat block
 * (max <= min) is handled as in ggml's make_qkx3_quants. */
float lm_quant_make_qkx3(int n, int nmax, const float *x, const float *weights, uint8_t *L, float *the_min,
                         uint8_t *Laux, float rmin, float rdelta, int nstep, bool use_mad);

/* Quantize the non-negative values x[0..n) to L[i] in [0, nmax] with one
 * positive scale, weighted by qw. Returns the scale. */
float lm_quant_make_qp(int n, int nmax, const float *x, uint8_t *L, const float *qw);

/* ---- per-type converters (legacy.c, kquants_*.c) ---- */

/* Signatures of the traits table (quant.h) plus the imatrix row encoder:
 * quantize one row of n_per_row floats with importance weights qw[n_per_row]. */
typedef void (*lm_quant_imat_fn)(const float *x, void *y, int64_t n_per_row, const float *qw);

void lm_quant_f32_to_float(const void *x, float *y, int64_t n);
void lm_quant_f32_from_float(const float *x, void *y, int64_t n);
void lm_quant_f16_to_float(const void *x, float *y, int64_t n);
void lm_quant_f16_from_float(const float *x, void *y, int64_t n);
void lm_quant_bf16_to_float(const void *x, float *y, int64_t n);
void lm_quant_bf16_from_float(const float *x, void *y, int64_t n);

void lm_quant_q4_0_to_float(const void *x, float *y, int64_t n);
void lm_quant_q4_0_from_float(const float *x, void *y, int64_t n);
void lm_quant_q4_0_imat(const float *x, void *y, int64_t n_per_row, const float *qw);
void lm_quant_q4_1_to_float(const void *x, float *y, int64_t n);
void lm_quant_q4_1_from_float(const float *x, void *y, int64_t n);
void lm_quant_q4_1_imat(const float *x, void *y, int64_t n_per_row, const float *qw);
void lm_quant_q5_0_to_float(const void *x, float *y, int64_t n);
void lm_quant_q5_0_from_float(const float *x, void *y, int64_t n);
void lm_quant_q5_0_imat(const float *x, void *y, int64_t n_per_row, const float *qw);
void lm_quant_q5_1_to_float(const void *x, float *y, int64_t n);
void lm_quant_q5_1_from_float(const float *x, void *y, int64_t n);
void lm_quant_q5_1_imat(const float *x, void *y, int64_t n_per_row, const float *qw);
void lm_quant_q8_0_to_float(const void *x, float *y, int64_t n);
void lm_quant_q8_0_from_float(const float *x, void *y, int64_t n);
void lm_quant_q8_1_to_float(const void *x, float *y, int64_t n);
void lm_quant_q8_1_from_float(const float *x, void *y, int64_t n);

void lm_quant_q2_K_to_float(const void *x, float *y, int64_t n);
void lm_quant_q2_K_from_float(const float *x, void *y, int64_t n);
void lm_quant_q2_K_imat(const float *x, void *y, int64_t n_per_row, const float *qw);
void lm_quant_q3_K_to_float(const void *x, float *y, int64_t n);
void lm_quant_q3_K_from_float(const float *x, void *y, int64_t n);
void lm_quant_q3_K_imat(const float *x, void *y, int64_t n_per_row, const float *qw);
void lm_quant_q4_K_to_float(const void *x, float *y, int64_t n);
void lm_quant_q4_K_from_float(const float *x, void *y, int64_t n);
void lm_quant_q4_K_imat(const float *x, void *y, int64_t n_per_row, const float *qw);
void lm_quant_q5_K_to_float(const void *x, float *y, int64_t n);
void lm_quant_q5_K_from_float(const float *x, void *y, int64_t n);
void lm_quant_q5_K_imat(const float *x, void *y, int64_t n_per_row, const float *qw);
void lm_quant_q6_K_to_float(const void *x, float *y, int64_t n);
void lm_quant_q6_K_from_float(const float *x, void *y, int64_t n);
void lm_quant_q6_K_imat(const float *x, void *y, int64_t n_per_row, const float *qw);
void lm_quant_q8_K_to_float(const void *x, float *y, int64_t n);
void lm_quant_q8_K_from_float(const float *x, void *y, int64_t n);

/* IQ2 (iq2.c, iq2_quant.c). The encoders need an importance matrix and the
 * type's lattice tables: call lm_quant_iq2_ready first (false: out of memory). */
void lm_quant_iq2_xxs_to_float(const void *x, float *y, int64_t n);
void lm_quant_iq2_xxs_imat(const float *x, void *y, int64_t n_per_row, const float *qw);
void lm_quant_iq2_xs_to_float(const void *x, float *y, int64_t n);
void lm_quant_iq2_xs_imat(const float *x, void *y, int64_t n_per_row, const float *qw);
bool lm_quant_iq2_ready(bool xs);

/* Shared by the K-quant files: pack 256 2-bit codes L[0..256) (values 0..3)
 * into qs[64] (byte l of group g: elements 128g + l + 32s at bit 2s). */
void lm_quant_pack_2bit(const uint8_t *L, uint8_t *qs);

#ifdef __cplusplus
}
#endif

#endif
