/* kernels.h - the CPU kernel contracts and the kernel function table.
 *
 * A kernel is a leaf routine with a contract (below): the ops of cpu/ops/ call
 * kernels only through a `struct lm_cpu_kernels` table, never by name, so an
 * ISA can replace any slot. kernels/generic/ has a portable C version of every
 * slot (always built; the reference in tests). kernels/x86-avx2/ (compiled with
 * -mavx2 -mfma -mf16c) overrides some slots at init when cpuid reports AVX2,
 * FMA, F16C and OS support for YMM state; kernels/x86-avx512/
 * (-mavx512f/bw/vl/dq/vnni/bf16/vbmi) overrides slots of the AVX2 table when
 * cpuid reports AVX-512 F/BW/VL/DQ + VNNI and OS support for ZMM state
 * (BF16 kernels only with AVX512_BF16).
 *
 * Tables are built once (thread-safe, on first use) per ISA level: level L is
 * the generic table with the overrides of every level <= L applied in order.
 * The active table is the one of min(lm_cpu_isa_limit, lm_cpu_isa_best); the
 * graph executor reads it once per graph, so every node of a graph uses one table.
 *
 * Common contract of every slot:
 *   - pointers need only the natural alignment of their element (float 4,
 *     half 2, a block struct its _Alignof: 2, or 4 for Q8_K); never SIMD
 *     alignment (SIMD kernels use unaligned loads);
 *   - n counts elements; for a block type it is a multiple of that type's
 *     block size (32 or 256); for F32/F16/BF16 it is any n >= 0 (the tail
 *     after the last full vector is handled inside the kernel);
 *   - kernels are pure: thread-safe, no allocation, no global state, and they
 *     write only their output range; a thread calls them on its own rows.
 *
 * vec_dot (weight row x, activation row y, both n elements):
 *     *s = sum_i x[i] * y[i], x in the weight type, y in that type's vec_dot_type.
 *     Quantized dots follow ggml's integer-then-scale order per block, so the
 *     integer part is exact and only float accumulation order differs between
 *     ISAs (tests/cpu bound it per type; docs/kernels.md lists the bounds).
 * from_float (n floats -> n elements of the type): the encoder used for
 *     activations (dot types) and for CPY into the type. Generic = quant/'s
 *     reference encoder. Rounding differs per ISA for Q8_0 (see docs/kernels.md):
 *     generic rounds half away from zero with id = 1/d (the reference);
 *     avx2 rounds half to even with id = 127/amax (ggml's AVX2 quantize_row_q8_0,
 *     what llama.cpp runs on x86).
 * to_float (n elements -> n floats): bit-exact decode (all ISAs give the same bits).
 *
 * Adding a slot kind (a GEMM micro-kernel, a repacked-weight dot, a fused
 * element-wise op): add the field here with its contract, a generic version,
 * fill it in kernels.c, override it in an ISA's init; see docs/kernels.md.
 */
#ifndef LM_CPU_KERNELS_H
#define LM_CPU_KERNELS_H

#include <stdint.h>

#include "core/type.h"
#include "cpu/cpu.h"
#include "quant/quant.h"

/* *s = dot(x[0..n), y[0..n)); x of the weight type, y of its vec_dot_type. */
typedef void (*lm_vec_dot_fn)(int64_t n, float *s, const void *x, const void *y);

/* s[r] = dot(row r of x, y) for r < nr, rows bx bytes apart: each result
 * bit-identical to the type's vec_dot of that row (so callers may use either);
 * y is converted once for all rows. */
typedef void (*lm_vec_dot_rows_fn)(int64_t n, int64_t nr, float *s, const void *x, size_t bx, const void *y);

/* GEMM over one group of 8 repacked weight rows (cpu/repack.h): for r < 8 and
 * c < nc, s[c * ldc + r] = dot(row r of the group x, activation row c), where
 * activation row c (k elements of the weight type's vec_dot_type) is at
 * y + c * by. ysum: int16 sums of each 32-element activation block
 * (k/32 per row, row c at ysum + c * (k/32)); only kernels that set
 * gemm_sums read it. Numerics are those of vec_dot (integer part exact, per
 * block (float)isum * d_w * d_a accumulated in block order in the generic
 * version). nc is 1..LM_GEMM_MAX_NC. */
typedef void (*lm_gemm_fn)(int64_t k, float *s, size_t ldc, const void *x, const void *y, size_t by,
                           const int16_t *ysum, int nc);
#define LM_GEMM_MAX_NC 16

/* The kernels of one tensor type. */
struct lm_cpu_type_kernels {
    /* The type activations are converted into before vec_dot (F32 -> F32,
     * F16 -> F16, BF16 -> BF16, Q4_0/Q5_0/Q8_0 -> Q8_0, Q4_1/Q5_1 -> Q8_1,
     * Q2_K..Q6_K -> Q8_K, IQ2_* -> Q8_K). For types without a vec_dot (IQ2_*,
     * and Q8_1 / Q8_K used as weights) the matmul dequantizes weight rows to
     * F32 and dots them with activations rounded through vec_dot_type. */
    enum lm_type vec_dot_type;
    lm_vec_dot_fn vec_dot;      /* NULL: no direct kernel (see above) */
    lm_vec_dot_rows_fn vec_dot_rows; /* several rows against one y, or NULL (call vec_dot per row) */
    lm_from_float_fn from_float; /* NULL: the type cannot be encoded here */
    lm_to_float_fn to_float;     /* NULL only for integer types */
    lm_gemm_fn gemm_x8;          /* repacked-weight GEMM, or NULL (no repacked layout) */
    enum lm_type gemm_vt;        /* the activation rows gemm_x8 reads */
    lm_from_float_fn gemm_from_float; /* their encoder; NULL: type[gemm_vt].from_float */
    bool gemm_sums;              /* gemm_x8 reads Q8_0 activation block sums */
};

/* Softmax's exponentials: y[i] = exp(x[i] - max) for i < n (y may be x;
 * exp(-inf) = 0, NaN stays NaN), returns the sum of the y[i] in double.
 * Generic: libm expf and a sequential double sum; SIMD versions: a vector
 * exp within 2 ulp of expf (subnormal results within 2^-149 absolute)
 * and the sum in double lanes. SOFT_MAX and ATTN both call it, so fused and
 * unfused attention stay bit-identical with one table. */
typedef double (*lm_exp_sum_fn)(int64_t n, float *y, const float *x, float max);

struct lm_cpu_kernels {
    enum lm_cpu_isa isa;                              /* level this table was built for */
    lm_exp_sum_fn exp_sum;
    enum lm_cpu_isa exp_sum_isa;
    struct lm_cpu_type_kernels type[LM_TYPE_COUNT];
    /* Which ISA filled each slot (for tests and benches). */
    enum lm_cpu_isa vec_dot_isa[LM_TYPE_COUNT];
    enum lm_cpu_isa from_float_isa[LM_TYPE_COUNT];
    enum lm_cpu_isa to_float_isa[LM_TYPE_COUNT];
};

/* The table of the active ISA level (never NULL). Thread-safe. */
const struct lm_cpu_kernels *lm_cpu_kernels(void);
/* The table of level `isa`, or NULL when this build or this CPU lacks it.
 * Thread-safe; the table lives for the whole process. */
const struct lm_cpu_kernels *lm_cpu_kernels_for(enum lm_cpu_isa isa);

/* ---- generic kernels (kernels/generic/) ---- */

void vec_dot_f32_generic(int64_t n, float *s, const void *x, const void *y);
void vec_dot_f16_generic(int64_t n, float *s, const void *x, const void *y);
void vec_dot_bf16_generic(int64_t n, float *s, const void *x, const void *y);

void vec_dot_q4_0_q8_0_generic(int64_t n, float *s, const void *x, const void *y);
void vec_dot_q4_1_q8_1_generic(int64_t n, float *s, const void *x, const void *y);
void vec_dot_q5_0_q8_0_generic(int64_t n, float *s, const void *x, const void *y);
void vec_dot_q5_1_q8_1_generic(int64_t n, float *s, const void *x, const void *y);
void vec_dot_q8_0_q8_0_generic(int64_t n, float *s, const void *x, const void *y);

void vec_dot_q2_K_q8_K_generic(int64_t n, float *s, const void *x, const void *y);
void vec_dot_q3_K_q8_K_generic(int64_t n, float *s, const void *x, const void *y);
void vec_dot_q4_K_q8_K_generic(int64_t n, float *s, const void *x, const void *y);
void vec_dot_q5_K_q8_K_generic(int64_t n, float *s, const void *x, const void *y);
void vec_dot_q6_K_q8_K_generic(int64_t n, float *s, const void *x, const void *y);

void gemm_q4_0x8_q8_0_generic(int64_t k, float *s, size_t ldc, const void *x, const void *y, size_t by,
                               const int16_t *ysum, int nc);
void gemm_q8_0x8_q8_0_generic(int64_t k, float *s, size_t ldc, const void *x, const void *y, size_t by,
                               const int16_t *ysum, int nc);

/* Row conversions (any n). */
void fp16_to_fp32_row_generic(const void *x, float *y, int64_t n);
void fp32_to_fp16_row_generic(const float *x, void *y, int64_t n);
void bf16_to_fp32_row_generic(const void *x, float *y, int64_t n);
void fp32_to_bf16_row_generic(const float *x, void *y, int64_t n);
void f32_copy_row_generic(const void *x, float *y, int64_t n);
void f32_from_float_row_generic(const float *x, void *y, int64_t n);
double exp_sum_generic(int64_t n, float *y, const float *x, float max);

/* ---- ISA overrides: each fills its slots of k (and the *_isa fields) ---- */

void lm_cpu_kernels_init_avx2(struct lm_cpu_kernels *k);   /* kernels/x86-avx2/ */
void lm_cpu_kernels_init_avx512(struct lm_cpu_kernels *k); /* kernels/x86-avx512/ */

/* The AVX2 kernels, declared here so tests and benches can call them by name
 * (only present in builds with LM_HAVE_X86_AVX2; call only when
 * lm_cpu_kernels_for(LM_ISA_AVX2) is non-NULL). */
void vec_dot_f32_avx2(int64_t n, float *s, const void *x, const void *y);
void vec_dot_f16_avx2(int64_t n, float *s, const void *x, const void *y);
void vec_dot_rows_f16_avx2(int64_t n, int64_t nr, float *s, const void *x, size_t bx, const void *y);
void vec_dot_bf16_avx2(int64_t n, float *s, const void *x, const void *y);
void vec_dot_q4_0_q8_0_avx2(int64_t n, float *s, const void *x, const void *y);
void vec_dot_q4_1_q8_1_avx2(int64_t n, float *s, const void *x, const void *y);
void vec_dot_q5_0_q8_0_avx2(int64_t n, float *s, const void *x, const void *y);
void vec_dot_q5_1_q8_1_avx2(int64_t n, float *s, const void *x, const void *y);
void vec_dot_q8_0_q8_0_avx2(int64_t n, float *s, const void *x, const void *y);
void vec_dot_q2_K_q8_K_avx2(int64_t n, float *s, const void *x, const void *y);
void vec_dot_q3_K_q8_K_avx2(int64_t n, float *s, const void *x, const void *y);
void vec_dot_q4_K_q8_K_avx2(int64_t n, float *s, const void *x, const void *y);
void vec_dot_q5_K_q8_K_avx2(int64_t n, float *s, const void *x, const void *y);
void vec_dot_q6_K_q8_K_avx2(int64_t n, float *s, const void *x, const void *y);
/* Activation encoders: Q8_0 / Q8_1 round half to even with 127/amax (ggml's
 * AVX2 arithmetic; docs/kernels.md); Q8_K equals quant/'s reference bytes. */
void quantize_row_q8_0_avx2(const float *x, void *y, int64_t n);
void quantize_row_q8_1_avx2(const float *x, void *y, int64_t n);
void quantize_row_q8_K_avx2(const float *x, void *y, int64_t n);
/* Row conversions, the bits of the generic ones (any n for F16/BF16). */
void dequantize_row_q4_0_avx2(const void *x, float *y, int64_t n);
void dequantize_row_q8_0_avx2(const void *x, float *y, int64_t n);
void fp16_to_fp32_row_avx2(const void *x, float *y, int64_t n);
void fp32_to_fp16_row_avx2(const float *x, void *y, int64_t n);
void bf16_to_fp32_row_avx2(const void *x, float *y, int64_t n);
void fp32_to_bf16_row_avx2(const float *x, void *y, int64_t n);
double exp_sum_avx2(int64_t n, float *y, const float *x, float max);

/* The AVX-512 kernels (kernels/x86-avx512/; present in builds with
 * LM_HAVE_X86_AVX512; call only when lm_cpu_kernels_for(LM_ISA_AVX512) is
 * non-NULL, and the *_bf16 dot kernels only when lm_cpu_features()->avx512bf16). */
double exp_sum_avx512(int64_t n, float *y, const float *x, float max);

#endif
