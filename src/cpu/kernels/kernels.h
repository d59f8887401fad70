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
 * (BF16 kernels only with AVX512_BF16); kernels/x86-amx/ (AVX-512 flags plus
 * -mamx-tile/-mamx-bf16/-mamx-int8) adds the panel GEMM slots on top of the
 * AVX-512 table when cpuid reports AMX-TILE + AMX-BF16 and Linux grants the
 * tile state.
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

/* One weight row x against nc activation rows (row c at y[c], n elements of
 * the weight type's vec_dot_type): *s[c] = dot(x, y[c]) for c < nc, each
 * bit-identical to the type's vec_dot (so callers may use either); the weight
 * row is decoded once for all columns (types whose decode is costly: IQ2).
 * nc is 1..LM_VEC_DOT_COLS_MAX. */
typedef void (*lm_vec_dot_cols_fn)(int64_t n, int nc, float *const *s, const void *x, const void *const *y);
#define LM_VEC_DOT_COLS_MAX 16

/* Several rows against several y of their own lengths (optional slot;
 * attention over an F16 or Q8_0 K cache): for q < nq and r < nr,
 * s[q][r] = vec_dot(len[q], row r, y_q) with row r at x + r * bx (elements
 * of the type) and y_q = y[q] in the tile's input form: F16, the floats of
 * the vec_dot_type's values (each value widened exactly); Q8_0, Q8_0 rows
 * (len[q] a multiple of 32). So each result has vec_dot's bits whatever nq,
 * nr and the other lengths. Row elements up to max len[q] are read (they
 * must be readable; those past a query's own length never reach its sum).
 * 1 <= nq <= LM_VEC_DOT_TILE_MAX. */
typedef void (*lm_vec_dot_tile_fn)(int64_t nr, int nq, const int64_t *len, float *const *s, const void *x, size_t bx,
                                   const void *const *y);
#define LM_VEC_DOT_TILE_MAX 4

/* Scores from a transposed K (optional slot, with vec_dot_kt_pack;
 * attention over prompt batches): kt holds nb blocks of 16 cells in the
 * type's layout (lm_kt_block_bytes each), written by vec_dot_kt_pack:
 *   F16: the values widened, element e of cell 16b + l at float
 *     [(b d + e) 16 + l];
 *   Q8_0: per 32-element block of the rows, for each group of 4 elements
 *     64 code bytes (cell l's 4 codes at 4l) and 16 int32 (-128 times each
 *     cell's 4-code sum), then the 16 cells' block scales as floats.
 * For q < nq and every cell of the blocks, s[q][16b + l] = vec_dot(d, the
 * cell's K row, y_q) with the bits of the type's vec_dot (y_q in the tile's
 * input form: widened F16 values, Q8_0 rows). The lanes are cells, so no dot
 * needs a horizontal sum: each lane replays vec_dot's chains and reduction
 * tree. d > 0 a multiple of 16 (Q8_0: of 32, at most LM_KT_Q8_MAX_D);
 * 1 <= nq <= LM_VEC_DOT_TILE_MAX. */
typedef void (*lm_vec_dot_kt_fn)(int64_t d, int64_t nb, int nq, float *const *s, const void *kt,
                                 const void *const *y);
/* n K rows (bk bytes apart, d elements each) in the kt layout, ceil(n / 16)
 * blocks; the cells past n in the last block are zeros. */
typedef void (*lm_kt_pack_fn)(int64_t d, int64_t n, const void *k, size_t bk, void *kt);
#define LM_KT_CELLS 16
#define LM_KT_Q8_GROUP 128                                 /* bytes: 64 codes, 16 int32 */
#define LM_KT_Q8_BLOCK (8 * LM_KT_Q8_GROUP + 16 * 4)      /* bytes per 32 elements of 16 cells */
#define LM_KT_Q8_MAX_D 512

/* Bytes of one 16-cell block of type t's kt layout for rows of d elements. */
static inline size_t lm_kt_block_bytes(enum lm_type t, int64_t d)
{
    return t == LM_TYPE_Q8_0 ? (size_t)(d / 32) * LM_KT_Q8_BLOCK : (size_t)d * LM_KT_CELLS * sizeof(float);
}

/* P.V over a V cache of rows per cell (optional slot, Q8_0: attention over
 * a quantized V cache), nq items sharing one list of cells: for q < nq and
 * e < d, out[q][e] = sum over k < len[q] of p[q][k] * x_k[e], where x_k is
 * the row at x + (idx ? idx[k] : k) * bx (d elements of the type, whole
 * blocks) decoded as to_float decodes it. Each out[q][e] is one sum in k
 * order from 0: a multiply and an add (generic) or an FMA (SIMD levels), so
 * an item's bits depend only on its own p, its cells and the level, not on
 * nq or the other items. 1 <= nq <= LM_VEC_DOT_TILE_MAX. */
typedef void (*lm_vec_mad_rows_fn)(int64_t d, int nq, const int64_t *len, float *const *out, const void *x,
                                   size_t bx, const int32_t *idx, const float *const *p);

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
/* Kernels written once with a constant column count stamp one instance per
 * count (a switch over nc). LM_FEW_INSTANCES (defined in sanitizer builds by
 * CMakeLists.txt) makes such a kernel one instance taking nc at run time:
 * the same operations in the same order, so the same bits, without the
 * copies that cost the instrumented build most of its compile time
 * (gemm_kquant_avx512.c: over 15 minutes of clang's ASan+UBSan, 1 without). */

/* One activation column over a range of repacked groups (token generation;
 * optional slot): for g < n_groups (group g at x + g * group_bytes) and
 * r < 8, s[8 g + r] = dot(row r of group g, y); y and ysum as gemm_x8 with
 * nc == 1. Each result is bit-identical to gemm_x8 of the same table with
 * nc == 1 on that group, so a level that sets gemm_x8 sets or clears this
 * slot too. It exists for memory-level parallelism: the kernels stream up
 * to 8 groups at once (one 8-row group streamed at a time leaves bandwidth
 * unused: kernels.md "One column"). n_groups >= 1. */
typedef void (*lm_gemv_fn)(int64_t k, int64_t n_groups, size_t group_bytes, float *s, const void *x, const void *y,
                           const int16_t *ysum);

/* Panel GEMM over a whole range of repacked groups (AMX level; AVX-512 VNNI for
 * Q4_0/Q8_0; optional slot):
 * for the 8-row groups [0, n_groups) of a repacked matrix at x (group g at
 * x + g * group_bytes, layouts of cpu/repack.h) and n activation rows (row c
 * at y + c * by, written by the type's panel_from_float: panel_row_size(k)
 * bytes for k elements), s[c * ldc + r] = dot(row r of the range, activation row c)
 * for r < 8 n_groups, c < n (nothing else is written). k is a multiple of
 * LM_GEMM_PANEL_K; n >= 1; n_groups >= 1; ldc >= 8 n_groups. scratch: this
 * thread's panel_scratch(k) bytes, 64-byte aligned (contents not kept).
 * Each output element gets the same operations whatever n_groups, n and the
 * position of its row and column in the range, so a matmul's results do not
 * depend on how rows are split over threads. Numerics: see the kernel. */
typedef void (*lm_gemm_panel_fn)(int64_t k, int64_t n_groups, size_t group_bytes, float *s, size_t ldc,
                                 const void *x, const void *y, size_t by, int64_t n, void *scratch);
/* Scratch bytes per thread of a panel GEMM for rows of k elements. */
typedef size_t (*lm_gemm_panel_scratch_fn)(int64_t k);
/* Bytes of one panel activation row of k elements. */
typedef size_t (*lm_panel_row_size_fn)(int64_t k);
#define LM_GEMM_PANEL_K 32

/* The kernels of one tensor type. */
struct lm_cpu_type_kernels {
    /* The type activations are converted into before vec_dot (F32 -> F32,
     * F16 -> F16, BF16 -> BF16, Q4_0/Q5_0/Q8_0 -> Q8_0, Q4_1/Q5_1 -> Q8_1,
     * Q2_K..Q6_K -> Q8_K, IQ2_* -> Q8_K). For types without a vec_dot (Q8_1 /
     * Q8_K used as weights) the matmul dequantizes weight rows to F32 and
     * dots them with activations rounded through vec_dot_type. */
    enum lm_type vec_dot_type;
    lm_vec_dot_fn vec_dot;      /* NULL: no direct kernel (see above) */
    lm_vec_dot_rows_fn vec_dot_rows; /* several rows against one y, or NULL (call vec_dot per row) */
    lm_vec_dot_cols_fn vec_dot_cols; /* one row against several y, or NULL (call vec_dot per column) */
    lm_vec_dot_tile_fn vec_dot_tile; /* several rows against several y, or NULL */
    lm_vec_dot_kt_fn vec_dot_kt;     /* scores from a transposed K (vec_dot's bits), or NULL */
    lm_vec_mad_rows_fn vec_mad_rows; /* P.V over V rows per cell (a quantized V cache), or NULL */
    lm_kt_pack_fn vec_dot_kt_pack;   /* its layout (set with vec_dot_kt) */
    lm_from_float_fn from_float; /* NULL: the type cannot be encoded here */
    lm_to_float_fn to_float;     /* NULL only for integer types */
    lm_gemm_fn gemm_x8;          /* repacked-weight GEMM, or NULL (no repacked layout) */
    enum lm_type gemm_vt;        /* the activation rows gemm_x8 reads */
    lm_from_float_fn gemm_from_float; /* their encoder; NULL: type[gemm_vt].from_float */
    bool gemm_sums;              /* gemm_x8 reads Q8_0 activation block sums */
    lm_gemv_fn gemv_x8;          /* gemm_x8 for one column over many groups, or NULL */
    /* Panel GEMM of repacked weights for many activation rows (prompt
     * processing), or NULL. The matmul uses it instead of gemm_x8 when the
     * activation count N >= panel_min_n and k % LM_GEMM_PANEL_K == 0; its
     * activation rows are panel_row_size(k)-byte rows written by panel_from_float
     * (a private layout: see the kernel). Numerics: BF16 weights as the
     * gemm_x8 path; F16 and quantized weights (AMX) split weights and
     * activations into BF16 hi + lo, within 2^-15 |w a| per product plus fp32
     * accumulation of the unquantized F32 activations (F16: F16-rounded). */
    lm_gemm_panel_fn gemm_panel;
    lm_panel_row_size_fn panel_row_size;
    bool panel_exact;            /* gemm_panel gives gemm_x8's bits (VNNI level); else AMX numerics */
    lm_from_float_fn panel_from_float;
    lm_gemm_panel_scratch_fn panel_scratch;
    int64_t panel_min_n;
};

/* Softmax's exponentials: y[i] = exp(x[i] - max) for i < n (y may be x;
 * exp(-inf) = 0, NaN stays NaN), returns the sum of the y[i] in double.
 * Generic: libm expf and a sequential double sum; SIMD versions: a vector
 * exp within 2 ulp of expf (subnormal results within 2^-149 absolute)
 * and the sum in double lanes. SOFT_MAX and ATTN both call it, so fused and
 * unfused attention stay bit-identical with one table. */
typedef double (*lm_exp_sum_fn)(int64_t n, float *y, const float *x, float max);

/* Softmax's scaling before its exponentials: s[j] = s[j] * scale, then
 * (m non-NULL) + slope * m[j] for j < n, in place, with SOFT_MAX's scalar
 * steps (a multiply; a multiply and an add: no FMA, so every level writes
 * the same bits); returns the largest s[j] (NaN ignored; -inf when there is
 * none). The levels' maxima are the same value (only a zero's sign may
 * differ, which exp(w - max) does not see). ATTN's softmax calls it. */
typedef float (*lm_scale_max_fn)(int64_t n, float *s, const float *m, float scale, float slope);

/* GELU, tanh approximation: y[i] = 0.5 x (1 + tanh(sqrt(2/pi)(x + 0.044715 x^3)))
 * for i < n (y may be x; NaN stays NaN, gelu(-inf) = -0). Generic: that
 * formula with libm tanhf. SIMD versions: the same function written
 * x / (1 + exp(-2u)), u = sqrt(2/pi)(x + 0.044715 x^3), with the vector exp
 * of exp_sum: within 4 + 3|2u| ulp of the exact value (tests/cpu/test_exp.c;
 * the float argument's rounding, magnified by exp), and more accurate than
 * the generic one where 1 + tanh cancels (x < -3). */
typedef void (*lm_gelu_fn)(int64_t n, float *y, const float *x);

/* SiLU: y[i] = x[i] / (1 + exp(-x[i])) for i < n (y may be x; NaN stays NaN,
 * silu(-inf) = -0, and -0 wherever exp(-x) overflows a float, x < -88.7, as
 * with libm). Generic: libm expf. SIMD versions: the vector exp of exp_sum,
 * within 4 ulp of the exact value (tests/cpu/test_exp.c). Each element's bits
 * depend on that element only (tails and n = 1 give the same bits), so UNARY
 * SILU on any strides and the fused SwiGLU (fuse.c) agree. */
typedef void (*lm_silu_fn)(int64_t n, float *y, const float *x);

struct lm_cpu_kernels {
    enum lm_cpu_isa isa;                              /* level this table was built for */
    lm_exp_sum_fn exp_sum;
    enum lm_cpu_isa exp_sum_isa;
    lm_scale_max_fn scale_max;
    lm_gelu_fn gelu;
    enum lm_cpu_isa gelu_isa;
    lm_silu_fn silu;
    struct lm_cpu_type_kernels type[LM_TYPE_COUNT];
    /* Which ISA filled each slot (for tests and benches). */
    enum lm_cpu_isa vec_dot_isa[LM_TYPE_COUNT];
    enum lm_cpu_isa from_float_isa[LM_TYPE_COUNT];
    enum lm_cpu_isa to_float_isa[LM_TYPE_COUNT];
};

/* Slot setters for the ISA inits: they record the table's own level (k->isa,
 * set before its init runs) as the filler. A new vec_dot drops any
 * vec_dot_rows / vec_dot_cols of a lower level (they must match the vec_dot
 * bit for bit); set them after it where the level has them. */
static inline void lm_cpu_set_dot(struct lm_cpu_kernels *k, enum lm_type t, lm_vec_dot_fn fn)
{
    k->type[t].vec_dot = fn;
    k->type[t].vec_dot_rows = NULL;
    k->type[t].vec_dot_cols = NULL;
    k->type[t].vec_dot_tile = NULL;
    k->type[t].vec_dot_kt = NULL;
    k->type[t].vec_dot_kt_pack = NULL;
    k->vec_dot_isa[t] = k->isa;
}

static inline void lm_cpu_set_from(struct lm_cpu_kernels *k, enum lm_type t, lm_from_float_fn fn)
{
    k->type[t].from_float = fn;
    k->from_float_isa[t] = k->isa;
}

static inline void lm_cpu_set_to(struct lm_cpu_kernels *k, enum lm_type t, lm_to_float_fn fn)
{
    k->type[t].to_float = fn;
    k->to_float_isa[t] = k->isa;
}

/* Applies the overrides of one ISA level to k (a copy of the level below,
 * k->isa already set to this level): each ISA's init passes const tables of
 * this type, filled with designated initializers, where a NULL slot keeps the
 * lower level's kernel. Per type t of `over`:
 *   - vec_dot: lm_cpu_set_dot (drops the lower level's rows/cols/tile/kt
 *     kernels), then vec_dot_rows, _cols, _tile, _kt, _kt_pack and
 *     vec_mad_rows where set (vec_dot_type is never changed);
 *   - from_float / to_float: lm_cpu_set_from / lm_cpu_set_to;
 *   - gemm_x8: the whole GEMM entry: gemm_x8, gemm_vt, gemm_from_float,
 *     gemm_sums and gemv_x8 (a NULL gemv_x8 clears the lower level's);
 *   - gemm_panel: the whole panel entry (gemm_panel, panel_row_size,
 *     panel_exact, panel_from_float, panel_scratch, panel_min_n);
 * and exp_sum, scale_max, gelu, silu where set (exp_sum_isa and gelu_isa
 * record the level). The other fields of `over` are ignored. Not
 * thread-safe on k (kernels.c builds the tables once). */
void lm_cpu_kernels_apply(struct lm_cpu_kernels *k, const struct lm_cpu_kernels *over);

/* The table of the active ISA level (never NULL). Thread-safe. */
const struct lm_cpu_kernels *lm_cpu_kernels(void);
/* The table of level `isa`, or NULL when this build or this CPU lacks it.
 * Thread-safe; the table lives for the whole process. */
const struct lm_cpu_kernels *lm_cpu_kernels_for(enum lm_cpu_isa isa);

/* ---- generic kernels (kernels/generic/) ---- */

void lm_vec_dot_f32_generic(int64_t n, float *s, const void *x, const void *y);
void lm_vec_dot_f16_generic(int64_t n, float *s, const void *x, const void *y);
void lm_vec_dot_bf16_generic(int64_t n, float *s, const void *x, const void *y);

void lm_vec_dot_q4_0_q8_0_generic(int64_t n, float *s, const void *x, const void *y);
void lm_vec_dot_q4_1_q8_1_generic(int64_t n, float *s, const void *x, const void *y);
void lm_vec_dot_q5_0_q8_0_generic(int64_t n, float *s, const void *x, const void *y);
void lm_vec_dot_q5_1_q8_1_generic(int64_t n, float *s, const void *x, const void *y);
void lm_vec_dot_q8_0_q8_0_generic(int64_t n, float *s, const void *x, const void *y);
void lm_vec_mad_rows_q8_0_generic(int64_t d, int nq, const int64_t *len, float *const *out, const void *x, size_t bx,
                                  const int32_t *idx, const float *const *p);

void lm_vec_dot_q2_K_q8_K_generic(int64_t n, float *s, const void *x, const void *y);
void lm_vec_dot_q3_K_q8_K_generic(int64_t n, float *s, const void *x, const void *y);
void lm_vec_dot_q4_K_q8_K_generic(int64_t n, float *s, const void *x, const void *y);
void lm_vec_dot_q5_K_q8_K_generic(int64_t n, float *s, const void *x, const void *y);
void lm_vec_dot_q6_K_q8_K_generic(int64_t n, float *s, const void *x, const void *y);
void lm_vec_dot_iq2_xxs_q8_K_generic(int64_t n, float *s, const void *x, const void *y);
void lm_vec_dot_iq2_xs_q8_K_generic(int64_t n, float *s, const void *x, const void *y);

void lm_gemm_q4_0x8_q8_0_generic(int64_t k, float *s, size_t ldc, const void *x, const void *y, size_t by,
                               const int16_t *ysum, int nc);
void lm_gemm_q8_0x8_q8_0_generic(int64_t k, float *s, size_t ldc, const void *x, const void *y, size_t by,
                               const int16_t *ysum, int nc);

/* Row conversions (any n). */
void lm_fp16_to_fp32_row_generic(const void *x, float *y, int64_t n);
void lm_fp32_to_fp16_row_generic(const float *x, void *y, int64_t n);
void lm_bf16_to_fp32_row_generic(const void *x, float *y, int64_t n);
void lm_fp32_to_bf16_row_generic(const float *x, void *y, int64_t n);
void lm_f32_copy_row_generic(const void *x, float *y, int64_t n);
void lm_f32_from_float_row_generic(const float *x, void *y, int64_t n);
double lm_exp_sum_generic(int64_t n, float *y, const float *x, float max);
float lm_scale_max_generic(int64_t n, float *s, const float *m, float scale, float slope);
void lm_gelu_generic(int64_t n, float *y, const float *x);
void lm_silu_generic(int64_t n, float *y, const float *x);

/* ---- ISA overrides: each fills its slots of k (and the *_isa fields) ---- */

void lm_cpu_kernels_init_avx2(struct lm_cpu_kernels *k);   /* kernels/x86-avx2/ */
void lm_cpu_kernels_init_avx512(struct lm_cpu_kernels *k); /* kernels/x86-avx512/ */
/* kernels/x86-avx512/: software prefetch of its kernels on (mode 1), off (0),
 * or the CPU's choice (anything else); lm_cpu_prefetch_set calls it. */
void lm_cpu_prefetch_avx512(int mode);
void lm_cpu_kernels_init_amx(struct lm_cpu_kernels *k);    /* kernels/x86-amx/ */

/* ---- AMX (kernels/x86-amx/, builds with LM_HAVE_X86_AMX; call only when
 * lm_cpu_kernels_for(LM_ISA_AMX) is non-NULL) ---- */

/* Panel GEMMs (lm_gemm_panel_fn) with TDPBF16PS, fp32 accumulation.
 * BF16 weights (bf16x8): activation rows = BF16 rounded to nearest even (the
 * values of lm_fp32_to_bf16), elements stored in bf16x8 row order (word t of
 * each 16-element chunk = elements t, t + 8); 2 bytes per element.
 * F16 weights (f16x8): activations rounded to F16 (as the F16 dot path), then
 * split exactly into BF16 hi + lo; a row = k hi values then k lo values
 * (4 bytes per element); weights split the same way at run time;
 * w a = wh ah + wh al + wl ah, the dropped wl al is < 2^-16 |w a|. */
void lm_gemm_panel_bf16x8_amx(int64_t k, int64_t n_groups, size_t group_bytes, float *s, size_t ldc, const void *x,
                           const void *y, size_t by, int64_t n, void *scratch);
void lm_gemm_panel_f16x8_amx(int64_t k, int64_t n_groups, size_t group_bytes, float *s, size_t ldc, const void *x,
                          const void *y, size_t by, int64_t n, void *scratch);
size_t lm_gemm_panel_bf16x8_scratch_amx(int64_t k);
size_t lm_gemm_panel_f16x8_scratch_amx(int64_t k);
void lm_panel_from_float_f16_amx(const float *x, void *y, int64_t n);  /* any n */
/* Quantized weights (q4_0x8, q8_0x8, q4_Kx8, q5_Kx8, q6_Kx8): each group's
 * k-range unpacked and decoded to F32 (the AVX-512 decoders) in the scratch,
 * then rounded to BF16 (RNE) B tiles; activations are BF16 rows (RNE, natural
 * order: the level's BF16 from_float; 2 bytes per element); one TDP per k-block.
 * Per product the error is below 2^-8 |w a| (each factor within 2^-9) plus
 * fp32 accumulation: more precise than the gemm_x8 path, whose Q8
 * activations carry up to 2^-8 of their block's largest value. */
void lm_gemm_panel_q4_0x8_amx(int64_t k, int64_t n_groups, size_t group_bytes, float *s, size_t ldc, const void *x,
                              const void *y, size_t by, int64_t n, void *scratch);
size_t lm_gemm_panel_q4_0x8_scratch_amx(int64_t k);
void lm_gemm_panel_q8_0x8_amx(int64_t k, int64_t n_groups, size_t group_bytes, float *s, size_t ldc, const void *x,
                              const void *y, size_t by, int64_t n, void *scratch);
size_t lm_gemm_panel_q8_0x8_scratch_amx(int64_t k);
void lm_gemm_panel_q4_Kx8_amx(int64_t k, int64_t n_groups, size_t group_bytes, float *s, size_t ldc, const void *x,
                              const void *y, size_t by, int64_t n, void *scratch);
size_t lm_gemm_panel_q4_Kx8_scratch_amx(int64_t k);
void lm_gemm_panel_q5_Kx8_amx(int64_t k, int64_t n_groups, size_t group_bytes, float *s, size_t ldc, const void *x,
                              const void *y, size_t by, int64_t n, void *scratch);
size_t lm_gemm_panel_q5_Kx8_scratch_amx(int64_t k);
void lm_gemm_panel_q6_Kx8_amx(int64_t k, int64_t n_groups, size_t group_bytes, float *s, size_t ldc, const void *x,
                              const void *y, size_t by, int64_t n, void *scratch);
size_t lm_gemm_panel_q6_Kx8_scratch_amx(int64_t k);

/* The AVX2 kernels, declared here so tests and benches can call them by name
 * (only present in builds with LM_HAVE_X86_AVX2; call only when
 * lm_cpu_kernels_for(LM_ISA_AVX2) is non-NULL). */
void lm_vec_dot_f32_avx2(int64_t n, float *s, const void *x, const void *y);
void lm_vec_dot_cols_f32_avx2(int64_t n, int nc, float *const *s, const void *x, const void *const *y);
void lm_vec_dot_f16_avx2(int64_t n, float *s, const void *x, const void *y);
void lm_vec_dot_rows_f16_avx2(int64_t n, int64_t nr, float *s, const void *x, size_t bx, const void *y);
void lm_vec_dot_bf16_avx2(int64_t n, float *s, const void *x, const void *y);
void lm_vec_dot_q4_0_q8_0_avx2(int64_t n, float *s, const void *x, const void *y);
void lm_vec_dot_q4_1_q8_1_avx2(int64_t n, float *s, const void *x, const void *y);
void lm_vec_dot_q5_0_q8_0_avx2(int64_t n, float *s, const void *x, const void *y);
void lm_vec_dot_q5_1_q8_1_avx2(int64_t n, float *s, const void *x, const void *y);
void lm_vec_dot_q8_0_q8_0_avx2(int64_t n, float *s, const void *x, const void *y);
void lm_vec_mad_rows_q8_0_avx2(int64_t d, int nq, const int64_t *len, float *const *out, const void *x, size_t bx,
                               const int32_t *idx, const float *const *p);
void lm_vec_dot_q2_K_q8_K_avx2(int64_t n, float *s, const void *x, const void *y);
void lm_vec_dot_q3_K_q8_K_avx2(int64_t n, float *s, const void *x, const void *y);
void lm_vec_dot_q4_K_q8_K_avx2(int64_t n, float *s, const void *x, const void *y);
void lm_vec_dot_q5_K_q8_K_avx2(int64_t n, float *s, const void *x, const void *y);
void lm_vec_dot_q6_K_q8_K_avx2(int64_t n, float *s, const void *x, const void *y);
/* IQ2 dots (iq2_avx2.c): bit-identical to the generic ones for every input;
 * the _cols versions (lm_vec_dot_cols_fn) decode a weight row once per call. */
void lm_vec_dot_iq2_xxs_q8_K_avx2(int64_t n, float *s, const void *x, const void *y);
void lm_vec_dot_iq2_xs_q8_K_avx2(int64_t n, float *s, const void *x, const void *y);
void lm_vec_dot_cols_iq2_xxs_q8_K_avx2(int64_t n, int nc, float *const *s, const void *x, const void *const *y);
void lm_vec_dot_cols_iq2_xs_q8_K_avx2(int64_t n, int nc, float *const *s, const void *x, const void *const *y);
/* Activation encoders: Q8_0 / Q8_1 round half to even with 127/amax (ggml's
 * AVX2 arithmetic; docs/kernels.md); Q8_K equals quant/'s reference bytes. */
void lm_quantize_row_q8_0_avx2(const float *x, void *y, int64_t n);
void lm_quantize_row_q8_1_avx2(const float *x, void *y, int64_t n);
void lm_quantize_row_q8_K_avx2(const float *x, void *y, int64_t n);
/* Row conversions, the bits of the generic ones (any n for F16/BF16). */
void lm_dequantize_row_q4_0_avx2(const void *x, float *y, int64_t n);
void lm_dequantize_row_q8_0_avx2(const void *x, float *y, int64_t n);
void lm_fp16_to_fp32_row_avx2(const void *x, float *y, int64_t n);
void lm_fp32_to_fp16_row_avx2(const float *x, void *y, int64_t n);
void lm_bf16_to_fp32_row_avx2(const void *x, float *y, int64_t n);
void lm_fp32_to_bf16_row_avx2(const float *x, void *y, int64_t n);
double lm_exp_sum_avx2(int64_t n, float *y, const float *x, float max);
float lm_scale_max_avx2(int64_t n, float *s, const float *m, float scale, float slope);
void lm_gelu_avx2(int64_t n, float *y, const float *x);
void lm_silu_avx2(int64_t n, float *y, const float *x);

/* The AVX-512 kernels (kernels/x86-avx512/; present in builds with
 * LM_HAVE_X86_AVX512; call only when lm_cpu_kernels_for(LM_ISA_AVX512) is
 * non-NULL, and the *_bf16 dot kernels only when lm_cpu_features()->avx512bf16). */
double lm_exp_sum_avx512(int64_t n, float *y, const float *x, float max);
float lm_scale_max_avx512(int64_t n, float *s, const float *m, float scale, float slope);
void lm_gelu_avx512(int64_t n, float *y, const float *x);
void lm_silu_avx512(int64_t n, float *y, const float *x);
/* vec_dot of every weight type (x86-avx512/float_avx512.c, legacy_avx512.c,
 * kquant_avx512.c; VNNI integer parts, exact) and vec_dot_rows of the float
 * types and Q8_0 (each row bit-identical to that type's AVX-512 vec_dot). */
void lm_vec_dot_f32_avx512(int64_t n, float *s, const void *x, const void *y);
void lm_vec_dot_rows_f32_avx512(int64_t n, int64_t nr, float *s, const void *x, size_t bx, const void *y);
void lm_vec_dot_f16_avx512(int64_t n, float *s, const void *x, const void *y);
void lm_vec_dot_rows_f16_avx512(int64_t n, int64_t nr, float *s, const void *x, size_t bx, const void *y);
void lm_vec_dot_bf16_avx512(int64_t n, float *s, const void *x, const void *y); /* needs avx512bf16 */
void lm_vec_dot_rows_bf16_avx512(int64_t n, int64_t nr, float *s, const void *x, size_t bx, const void *y); /* same */
void lm_vec_dot_q4_0_q8_0_avx512(int64_t n, float *s, const void *x, const void *y);
void lm_vec_dot_rows_q8_0_avx512(int64_t n, int64_t nr, float *s, const void *x, size_t bx, const void *y);
void lm_vec_dot_q4_1_q8_1_avx512(int64_t n, float *s, const void *x, const void *y);
void lm_vec_dot_q5_0_q8_0_avx512(int64_t n, float *s, const void *x, const void *y);
void lm_vec_dot_q5_1_q8_1_avx512(int64_t n, float *s, const void *x, const void *y);
void lm_vec_dot_q8_0_q8_0_avx512(int64_t n, float *s, const void *x, const void *y);
void lm_vec_mad_rows_q8_0_avx512(int64_t d, int nq, const int64_t *len, float *const *out, const void *x, size_t bx,
                                 const int32_t *idx, const float *const *p);
void lm_vec_dot_q2_K_q8_K_avx512(int64_t n, float *s, const void *x, const void *y);
void lm_vec_dot_q3_K_q8_K_avx512(int64_t n, float *s, const void *x, const void *y);
void lm_vec_dot_q4_K_q8_K_avx512(int64_t n, float *s, const void *x, const void *y);
void lm_vec_dot_q5_K_q8_K_avx512(int64_t n, float *s, const void *x, const void *y);
void lm_vec_dot_q6_K_q8_K_avx512(int64_t n, float *s, const void *x, const void *y);
/* IQ2 dots (iq2_avx512.c): bit-identical to the generic ones for every input. */
void lm_vec_dot_iq2_xxs_q8_K_avx512(int64_t n, float *s, const void *x, const void *y);
void lm_vec_dot_iq2_xs_q8_K_avx512(int64_t n, float *s, const void *x, const void *y);
void lm_vec_dot_cols_iq2_xxs_q8_K_avx512(int64_t n, int nc, float *const *s, const void *x, const void *const *y);
void lm_vec_dot_cols_iq2_xs_q8_K_avx512(int64_t n, int nc, float *const *s, const void *x, const void *const *y);
/* Row decoders of the quantized weight types (x86-avx512/dequant_avx512.c):
 * the bits of quant/'s reference decoders for every input (NaN scales too). */
void lm_dequantize_row_q4_0_avx512(const void *x, float *y, int64_t n);
void lm_dequantize_row_q4_1_avx512(const void *x, float *y, int64_t n);
void lm_dequantize_row_q5_0_avx512(const void *x, float *y, int64_t n);
void lm_dequantize_row_q5_1_avx512(const void *x, float *y, int64_t n);
void lm_dequantize_row_q8_0_avx512(const void *x, float *y, int64_t n);
void lm_vec_dot_tile_f16_avx512(int64_t nr, int nq, const int64_t *len, float *const *s, const void *x, size_t bx,
                                const void *const *y);
void lm_vec_dot_tile_q8_0_avx512(int64_t nr, int nq, const int64_t *len, float *const *s, const void *x, size_t bx,
                                 const void *const *y);
void lm_vec_dot_kt_f16_avx512(int64_t d, int64_t nb, int nq, float *const *s, const void *kt, const void *const *y);
void lm_vec_dot_kt_q8_0_avx512(int64_t d, int64_t nb, int nq, float *const *s, const void *kt, const void *const *y);
/* kt layouts (kernels.h lm_kt_pack_fn; generic/float_generic.c) */
void lm_kt_pack_f16(int64_t d, int64_t n, const void *k, size_t bk, void *kt);
void lm_kt_pack_q8_0(int64_t d, int64_t n, const void *k, size_t bk, void *kt);
/* VNNI panel GEMMs of q4_0x8 / q8_0x8 (x86-avx512/gemm_panel_avx512.c): the
 * gemm_x8 kernels' bits; activation rows in their own layout. */
void lm_gemm_panel_q4_0x8_avx512(int64_t k, int64_t n_groups, size_t group_bytes, float *s, size_t ldc,
                                 const void *x, const void *y, size_t by, int64_t n, void *scratch);
void lm_gemm_panel_q8_0x8_avx512(int64_t k, int64_t n_groups, size_t group_bytes, float *s, size_t ldc,
                                 const void *x, const void *y, size_t by, int64_t n, void *scratch);
void lm_panel_from_float_q4_0_avx512(const float *x, void *y, int64_t n); /* n % 32 == 0 */
void lm_panel_from_float_q8_0_avx512(const float *x, void *y, int64_t n);
size_t lm_panel_row_size_q8_avx512(int64_t k);
size_t lm_gemm_panel_scratch_q8_avx512(int64_t k);
/* The VNNI panel GEMM of q4_Kx8 (gemm_panel_avx512.c): gemm_x8's bits; its
 * activation rows are the gemm path's Q8_K rows. */
void lm_gemm_panel_q4_Kx8_avx512(int64_t k, int64_t n_groups, size_t group_bytes, float *s, size_t ldc,
                                 const void *x, const void *y, size_t by, int64_t n, void *scratch);
size_t lm_panel_row_size_q8_K_avx512(int64_t k);
void lm_dequantize_row_q2_K_avx512(const void *x, float *y, int64_t n);
void lm_dequantize_row_q3_K_avx512(const void *x, float *y, int64_t n);
void lm_dequantize_row_q4_K_avx512(const void *x, float *y, int64_t n);
void lm_dequantize_row_q5_K_avx512(const void *x, float *y, int64_t n);
void lm_dequantize_row_q6_K_avx512(const void *x, float *y, int64_t n);

#endif
