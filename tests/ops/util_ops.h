/* util_ops.h - helpers for the op tests: a fixed-seed PRNG, random input
 * tensors in contiguous and non-contiguous layouts, reading any tensor back as
 * floats, the normalised MSE, and per-op coverage bookkeeping.
 *
 * Test tensors live in arenas with data (no_alloc = false): tensor->data
 * points into the arena and tensor->buffer is NULL. A case is a builder
 * function run once per backend on a fresh arena with the same seed, so every
 * backend sees identical inputs and no backend's writes reach another's data.
 */
#ifndef LM_TEST_UTIL_OPS_H
#define LM_TEST_UTIL_OPS_H

#include <stdbool.h>
#include <stdint.h>

#include "backend/backend.h"
#include "core/tensor.h"

/* ---- PRNG (splitmix64: fixed seed, same sequence everywhere) ---- */

struct ut_rng {
    uint64_t s;
};

void ut_rng_seed(struct ut_rng *r, uint64_t seed);
uint64_t ut_rng_u64(struct ut_rng *r);
/* Uniform in [0, n) (n > 0). */
int64_t ut_rng_int(struct ut_rng *r, int64_t n);
/* Uniform in [lo, hi). */
float ut_rng_float(struct ut_rng *r, float lo, float hi);
/* One of the n values of list. */
int64_t ut_rng_pick(struct ut_rng *r, const int64_t *list, int n);

/* ---- random inputs ---- */

enum ut_layout {
    UT_CONT = 0,  /* a plain contiguous tensor */
    UT_TRANSPOSE, /* lm_transpose of a tensor stored with dims 0 and 1 swapped */
    UT_PERMUTE,   /* lm_permute of a tensor stored in a random dim order */
    UT_PAD,       /* lm_view_4d into a larger tensor (padded strides, offset) */
    UT_RESHAPE,   /* lm_reshape_4d of a 1-d tensor (contiguous, but a RESHAPE node) */
    UT_PERMUTE_ROWS, /* lm_permute of dims 1..3 only (rows stay contiguous) */
    UT_LAYOUT_COUNT
};

/* A tensor of the given type and shape in layout lay, filled with values
 * uniform in [lo, hi) (quantized types: such values encoded with the type's
 * from_float, row by row). Block types keep dim 0 in place: TRANSPOSE and
 * PERMUTE become PERMUTE_ROWS, PAD pads in whole blocks. NULL (arena error
 * set) on failure. */
struct lm_tensor *ut_input(struct lm_ctx *ctx, struct ut_rng *r, enum lm_type type, const int64_t ne[4],
                           enum ut_layout lay, float lo, float hi);
/* A random layout of any kind. */
enum ut_layout ut_rng_layout(struct ut_rng *r);
/* A random layout whose rows are contiguous (CONT, PAD, RESHAPE, PERMUTE_ROWS). */
enum ut_layout ut_rng_layout_rows(struct ut_rng *r);
const char *ut_layout_name(enum ut_layout lay);

/* ---- cases ---- */

/* What a case builds: one op (family) on random inputs. */
enum ut_kind {
    UT_K_BINARY,     /* sub: LM_OP_ADD/MUL/DIV; n[0]: in place; a ne, b ne2 */
    UT_K_UNARY,      /* sub: LM_OP_SCALE/SQR/SQRT/CLAMP, or LM_OP_COUNT + lm_unary_op; f[0..1] params */
    UT_K_ROWS,       /* sub: LM_OP_SUM_ROWS/NORM/RMS_NORM; f[0] eps */
    UT_K_MUL_MAT,    /* a [K,M,A2,A3] of type in ne, b [K,N,B2,B3] in ne2 */
    UT_K_MUL_MAT_ID, /* as ne [K,M,E] (type), b ne2 [K,B1,T]; n[0] n_used, n[1]: out-of-range ids */
    UT_K_GET_ROWS,   /* a ne (type), ids ne2 [N,I2,I3]; n[0]: out-of-range ids */
    UT_K_CPY,        /* src type/ne/lay[0] -> dst type2/ne2/lay[1] */
    UT_K_SET_ROWS,   /* F32 a [ne[0], ne[1]] lay[0] into b of type2, lay[1], at ne[1] distinct ids: rows of b
                        [ne[0], ne2[0]] (sub 0) or its columns [ne2[0], ne[0]] (sub 1); n[0]: ids out of range */
    UT_K_CONT,       /* src type/ne/lay[0]; n[0]: 2-d result [n[1], n[2]] */
    UT_K_REPEAT,     /* a ne -> ne2 */
    UT_K_CONCAT,     /* a ne, b ne2, sub: dim */
    UT_K_DIAG_MASK,  /* a ne, n[0]: n_past */
    UT_K_SOFT_MAX,   /* a ne; sub: 0 no mask, 1 causal, 2 alibi-style, 3 random; n[0]: mask rows; f[0] scale, f[1] max_bias */
    UT_K_ROPE,       /* a ne; n[0] n_dims, n[1] mode, n[2] n_ctx_orig, n[3] max pos; f[0..5] base, scale, ext, attn, fast, slow */
    UT_K_ARGSORT,    /* a ne; sub: order; n[0]: top-k k (0 = argsort); n[1]: tie-heavy values */
    UT_K_ATTN,       /* q ne [d, n_q, n_head]; k type, v type2, ne2 [n_kv, d_v, n_head_kv]; sub: mask (0 none,
                        1 causal, 2 alibi-style, 3 random, 4 windows with holes, 5 as 4 with some rows all
                        hidden); n[0] mask rows; n[1] graph (0 ATTN, 1 the unfused graph of today's model,
                        2 unfused with q and p rounded by explicit CPYs); f[0] scale, f[1] max_bias;
                        lay[0] q layout (PERMUTE: the model's permute(Q, 0, 2, 1, 3)); lay[1] k and v:
                        CONT, or PAD for views into larger cache tensors laid out as the KV cache's;
                        n[2] 1: V of rows per cell (lm_attn_vrows, v [d_v, n_kv, n_head_kv]) */
    UT_K_TRAIN,      /* sub: a training op (LM_OP_GET_ROWS_BACK...); per op (util_build.c, build_train):
                        GET_ROWS_BACK dy ne [K, N] lay[0], like type/ne2 [K, R], n[0]: out-of-range ids;
                        REPEAT_BACK a ne lay[0], like type/ne2; RMS_NORM_BACK, SOFT_MAX_BACK, UNARY_BACK
                        two sources ne, lay[0..1], f[0] eps / scale, n[0] the unary op; ROPE_BACK as ROPE;
                        CROSS_ENTROPY_LOSS(_BACK) logits ne [V, N] lay[0], f[0] logit range, n[0]:
                        invalid targets (-1 and V), n[1]: all invalid, f[1] dloss */
};

struct ut_spec {
    enum ut_kind kind;
    int sub;
    enum lm_type type, type2;
    int64_t ne[4], ne2[4];
    int64_t n[4];
    enum ut_layout lay[3];
    float f[6];
};

/* Build the case's graph output in ctx, drawing input values (and layout
 * details) from r. NULL (arena error set) on failure. */
struct lm_tensor *ut_build(struct lm_ctx *ctx, struct ut_rng *r, const struct ut_spec *sp);
/* A one-line description of the case (for failure messages). */
void ut_describe(const struct ut_spec *sp, char *buf, size_t size);

/* ---- reading results ---- */

/* The elements of t in flat order (ne[0] fastest) as floats, into out
 * (lm_nelements(t) values): quantized rows decoded, I32 converted. */
void ut_read(const struct lm_tensor *t, float *out);

/* Compute g (built in an arena with data) on a backend whose memory is not
 * host memory (a GPU): every tensor of g that owns memory gets a copy in one
 * buffer of be's default type, views are pointed into those copies, the
 * graph runs, and every copy comes back into the tensor's host memory (so
 * ut_read works as after a host compute). The tensors' host pointers are
 * restored. LM_OK or the first failure. */
lm_status ut_compute_device(lm_backend_t be, struct lm_graph *g);

/* sum((x - y)^2) / max(sum(y^2), floor) over the finite y (y is the
 * reference). An infinite y must be matched exactly; a NaN in either gives
 * +inf. When the denominator is 0, the plain sum of squared differences.
 * floor (0 for a plain nmse) is the output energy the inputs' statistics
 * lead one to expect, so that outputs near 0 by chance do not inflate it. */
double ut_nmse(const float *x, const float *y, int64_t n, double floor);

/* ---- coverage ---- */

#define UT_MAX_LABELS 40

struct ut_cov {
    int cases;
    double max_nmse;
    int n_labels;
    char labels[UT_MAX_LABELS][20]; /* types (or unary ops, or src>dst) seen */
};

/* Record that a graph containing node t was compared with the given nmse. */
void ut_cov_add(struct ut_cov cov[LM_OP_COUNT], const struct lm_tensor *t, double nmse);
/* Print the table; returns the number of ops (NONE excluded) never run. */
int ut_cov_print(const struct ut_cov cov[LM_OP_COUNT]);

#endif
