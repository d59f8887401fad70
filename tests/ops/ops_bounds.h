/* ops_bounds.h - test_ops.c's tolerances: the nmse bound of every op and
 * type against ref (with the reasons), and the nodes the CUDA backend leaves
 * to the CPU by design. Included by test_ops.c only. */
#ifndef LM_OPS_BOUNDS_H
#define LM_OPS_BOUNDS_H

#include "core/op_rules.h"
#include "util_ops.h"

/* ---- bounds on nmse (cpu vs ref; ref computes in double) ----
 *
 * EXACT 1e-10: each output is one correctly rounded f32 operation of its
 *   inputs, a conversion or a copy (ADD MUL DIV SCALE SQR SQRT CLAMP RELU NEG
 *   REPEAT CONCAT CPY CONT GET_ROWS DIAG_MASK_INF). Expected 0; a CPU that
 *   divides as x * (1/y) errs by an ulp (nmse ~1e-14). Seen: 0.
 * FUNC 1e-8 (SILU GELU TANH): f32 exp/tanh (libm or vector polynomials) are
 *   good to a few ulp, ~1e-7 relative (nmse ~1e-13); the bound rejects both a
 *   wrong formula and ggml's fp16 GELU table (~1e-3 relative, nmse ~1e-7).
 *   Seen: 3e-15.
 * REDUCE 1e-9: f32 sums over n <= 4096 terms in any order (SUM_ROWS NORM
 *   RMS_NORM SOFT_MAX): relative error ~sqrt(n) * 2^-24 ~ 4e-6 at worst-case
 *   alignment, nmse ~1e-11. Seen: 1e-14.
 * ROPE 1e-7: an f32 implementation builds the angles pos * base^(-2i/n) by
 *   repeated multiplication (up to n/2 roundings) for pos < 1024, an absolute
 *   error up to ~1e-4 rad on the middle pairs (nmse ~1e-9); headroom x100.
 *   Seen: 2e-10.
 * MUL_MAT by weight type (the CPU may convert activations to the weight's dot
 *   type first). Inputs are uniform in [-1, 1], so an output (a dot product
 *   of K terms) has E[y^2] = K/9; the nmse denominator is floored at
 *   n_out * K / 9 (matmul_floor) so that a case with one or two outputs that
 *   happen to be near 0 does not read as a large relative error (without the
 *   floor such cases reach nmse 1e-2 on correct code). Expected values:
 *   f32 1e-9 (f32 accumulation, K <= 1024: relative ~sqrt(K) 2^-24; seen
 *     1e-12 over 30 seeds);
 *   f16 1e-6 (activations rounded to f16: relative error <= 2^-11, variance
 *     (2^-11)^2/3, nmse ~8e-8; seen 1.3e-7);
 *   bf16 5e-5 (activations rounded to bf16: 2^-8, nmse ~5e-6; seen 9e-6);
 *   quantized 1e-3 (activations to Q8_0/Q8_1/Q8_K, 8 bits per block of 32 or
 *     256 with scale amax/127 ~ 1/127: error variance d^2/12 ~ 5e-6 against
 *     E[b^2] = 1/3, nmse ~1.6e-5; seen 1.2e-4 on one-output cases; a wrong
 *     block, scale, offset or nibble order gives nmse > 1e-2).
 * CPY into a quantized type 1e-10: both backends must use the reference
 *   encoder (quant/), so the blocks are identical.
 * Integer outputs: 0 (exact).
 * ATTN by the coarser of K's and V's types, 1e-9 (f32), 1e-8 (f16), 1e-6
 *   (bf16) (cpu vs ref): both round q and the probabilities to the k / v
 *   type at the same points; the rest is f32 (cpu) against double (ref):
 *   dots of <= 128 terms and a softmax (REDUCE), and now and then a
 *   probability that lands on the other side of an f16 (bf16) rounding
 *   boundary, which moves one term of one output by 2^-11 (2^-8) of itself:
 *   in a small case (a few hundred outputs) that alone is nmse ~1e-9 (~1e-7).
 *   Seen: 5.7e-11 with the default seed; 2.7e-9 and 1e-8 on bf16 with
 *   LM_OPS_SEED=5, 1.2e-8 with bf16 k and f16 v with LM_OPS_SEED=60, 2.4e-7
 *   on bf16 with LM_OPS_SEED=86 (a 1e-9 bound for every type failed there).
 *   A wrong mask, scale or head gives > 1e-3.
 *   Fused vs unfused: B_ATTN_CPU 1e-12 on the cpu, where both run the same
 *   kernels on the same rounded values and may differ only by float
 *   summation order (expected 0: attention.c keeps the dot lanes of a
 *   full-row product; seen 0, and 8e-15 with that alignment removed);
 *   B_ATTN_REF 1e-8 on ref, whose unfused graph rounds
 *   the scores to f32 before the softmax, which can flip an f16/bf16
 *   rounding of a probability as above (seen 6e-12).
 */
#define B_EXACT 1e-10
#define B_FUNC 1e-8
#define B_REDUCE 1e-9
#define B_ROPE 1e-7
#define B_ATTN_CPU 1e-12
/* ... except over V rows (a Q8_0 V cache): the fused P.V is vec_mad_rows'
 * FMA chains over the decoded rows, the unfused one the F32 dot of the
 * decoded, transposed rows: the same products summed in another order and
 * rounding, ~n eps^2 of nmse over n cells (seen 1.6e-12 at 4096 cells). */
#define B_ATTN_CPU_VROWS 1e-10
#define B_ATTN_REF 1e-8
/* CUDA fused vs unfused: the unfused graph's scores come from cuBLAS in f32,
 * ATTN's in double (ops_attn.cu), so now and then a probability rounds to
 * the other f16/bf16 neighbour: ~1e-7 of nmse per flip (seen in a host
 * emulation of the case mix); a wrong kernel is far above. */
#define B_ATTN_CUDA 1e-6

/* ATTN against ref, by the coarser rounding of K's and V's types (ref
 * rounds q through a Q8_0 K's blocks too: the rest is summation order). */
static inline double bound_attn(enum lm_type k, enum lm_type v)
{
    if (k == LM_TYPE_BF16 || v == LM_TYPE_BF16 || k == LM_TYPE_Q8_0)
        return 1e-6;
    return k == LM_TYPE_F16 || v == LM_TYPE_F16 ? 1e-8 : 1e-9;
}

static inline double bound_mul_mat(enum lm_type t)
{
    switch (t) {
    case LM_TYPE_F32: return 1e-9;
    case LM_TYPE_F16: return 1e-6;
    case LM_TYPE_BF16: return 5e-5;
    default: return 1e-3;
    }
}

/* The expected output energy of a matmul case (inputs uniform in [-1, 1]:
 * E[(sum of K products)^2] = K/9 per output); 0 for other ops. */
static inline double matmul_floor(const struct ut_spec *sp, int64_t n_out)
{
    if (sp->kind != UT_K_MUL_MAT && sp->kind != UT_K_MUL_MAT_ID)
        return 0.0;
    return (double)n_out * (double)sp->ne[0] / 9.0;
}

#ifdef LM_OPS_CUDA
/* Nodes the CUDA backend leaves to the CPU by design (the scheduler computes
 * them there): CPY from a quantized type into another block type, or into a
 * K-quant (cuda/ops_copy.cu encodes the legacy quants only; it decodes every
 * block type into floats), SET_ROWS into a K-quant. ATTN over a Q8_0 K or
 * Q8_0 V rows is CUDA's (cuda/ops_attn.cu): no refusal tolerated. */
static inline bool cuda_may_refuse(const struct lm_tensor *t)
{
    if (t->op == LM_OP_CPY || t->op == LM_OP_CONT) {
        const enum lm_type s = t->src[0]->type, d = t->type;
        return s != d && ((lm_type_blck(s) > 1 && !lm_op_float_type(d)) || lm_type_blck(d) > 32);
    }
    if (t->op == LM_OP_SET_ROWS)
        return lm_type_blck(t->type) > 32;
    return false;
}
#endif

#endif
