/* tensor.h - tensors, metadata arenas and compute graphs.
 *
 * A tensor is up to 4 dimensions, ne[0] the fastest (a row), with byte strides
 * nb[]. nb[0] is the element (or block) size for contiguous data; views may
 * have any strides. A tensor made by an op records the op, its parameters and
 * its sources; nothing is computed here. Backends (backend/) compute graphs.
 *
 * Memory: tensor metadata lives in an lm_ctx arena (bump allocator, freed all
 * at once). With no_alloc=false the arena also holds tensor data; with
 * no_alloc=true data is placed later by an allocator (alloc/) into a backend
 * buffer. Graph builders run on no_alloc arenas.
 *
 * Errors: op constructors check shapes and types. On a mismatch they return
 * NULL and record the first error in the arena (lm_ctx_status/lm_ctx_error);
 * given a NULL source they return NULL at once, so a graph builder may check
 * once at the end instead of after every op.
 */
#ifndef LM_TENSOR_H
#define LM_TENSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "core/type.h"

#ifdef __cplusplus
extern "C" { /* the CUDA backend (C++) calls these */
#endif

#define LM_MAX_DIMS 4
#define LM_MAX_SRC 6
#define LM_MAX_OP_PARAMS 64 /* bytes */
#define LM_MAX_NAME 64
#define LM_MEM_ALIGN 64     /* alignment of tensor data inside an arena */

enum lm_op {
    LM_OP_NONE = 0,     /* a leaf: weights, inputs */
    LM_OP_ADD,          /* a + b, b broadcast over a (a.ne[i] % b.ne[i] == 0) */
    LM_OP_MUL,          /* a * b, broadcast as ADD */
    LM_OP_DIV,          /* a / b, broadcast as ADD */
    LM_OP_SCALE,        /* a * s; params: float s */
    LM_OP_SQR,          /* a * a */
    LM_OP_SQRT,         /* sqrt(a) */
    LM_OP_CLAMP,        /* min(max(a, lo), hi); params: float lo, hi */
    LM_OP_UNARY,        /* params: int32 enum lm_unary_op */
    LM_OP_SUM_ROWS,     /* [n0,n1,n2,n3] -> [1,n1,n2,n3] */
    LM_OP_NORM,         /* per row (x - mean) / sqrt(var + eps); params: float eps */
    LM_OP_RMS_NORM,     /* per row x / sqrt(mean(x^2) + eps); params: float eps */
    LM_OP_MUL_MAT,      /* see lm_mul_mat */
    LM_OP_MUL_MAT_ID,   /* see lm_mul_mat_id */
    LM_OP_GET_ROWS,     /* see lm_get_rows */
    LM_OP_CPY,          /* a converted into b's type and layout; the result is b */
    LM_OP_CONT,         /* a copied to a contiguous tensor of the same type */
    LM_OP_REPEAT,       /* a tiled to b's shape */
    LM_OP_CONCAT,       /* a and b joined along dim; params: int32 dim */
    LM_OP_RESHAPE,      /* views: no compute */
    LM_OP_VIEW,
    LM_OP_PERMUTE,
    LM_OP_TRANSPOSE,
    LM_OP_DIAG_MASK_INF, /* a[i0,i1] = -inf where i0 > n_past + i1; params: int32 n_past */
    LM_OP_SOFT_MAX,     /* see lm_soft_max_ext */
    LM_OP_ROPE,         /* see lm_rope */
    LM_OP_ARGSORT,      /* per row indices (I32) that sort it; params: int32 order */
    LM_OP_ATTN,         /* fused attention over the KV cache; see lm_attn */
    LM_OP_SET_ROWS,     /* rows (or columns) of b replaced at I32 ids; see lm_set_rows */
    /* training: gradients (src/train builds them; see "Training ops" below) */
    LM_OP_GET_ROWS_BACK,    /* scatter-add of rows; see lm_get_rows_back */
    LM_OP_REPEAT_BACK,      /* sum of tiles; see lm_repeat_back */
    LM_OP_RMS_NORM_BACK,    /* see lm_rms_norm_back; params: float eps */
    LM_OP_ROPE_BACK,        /* ROPE's transpose; params as ROPE */
    LM_OP_SOFT_MAX_BACK,    /* see lm_soft_max_back; params: float scale */
    LM_OP_UNARY_BACK,       /* dy * f'(x); params: int32 enum lm_unary_op */
    LM_OP_CROSS_ENTROPY_LOSS,      /* see lm_cross_entropy_loss */
    LM_OP_CROSS_ENTROPY_LOSS_BACK, /* see lm_cross_entropy_loss_back */
    LM_OP_COUNT
};

enum lm_unary_op {
    LM_UNARY_SILU = 0, /* x * sigmoid(x) */
    LM_UNARY_GELU,     /* tanh approximation: 0.5x(1 + tanh(sqrt(2/pi)(x + 0.044715x^3))) */
    LM_UNARY_RELU,     /* max(x, 0) */
    LM_UNARY_NEG,      /* -x */
    LM_UNARY_TANH,
    LM_UNARY_COUNT
};

enum lm_sort_order { LM_SORT_ASC = 0, LM_SORT_DESC = 1 };

/* RoPE modes: NORMAL rotates adjacent pairs (x[2i], x[2i+1]); NEOX rotates
 * (x[i], x[i + n_dims/2]). Only the first n_dims of each row rotate. NONE is
 * no op mode: an architecture without RoPE says so with it (its K shift and
 * graph then rotate nothing). */
enum lm_rope_mode { LM_ROPE_NONE = -1, LM_ROPE_NORMAL = 0, LM_ROPE_NEOX = 2 };

enum lm_tensor_flag {
    LM_FLAG_INPUT = 1,  /* filled by the caller before compute */
    LM_FLAG_OUTPUT = 2, /* read after compute: its memory is never reused */
    LM_FLAG_PARAM = 4,  /* a trainable parameter */
};

struct lm_buffer;

struct lm_tensor {
    enum lm_type type;
    int64_t ne[LM_MAX_DIMS]; /* elements per dimension */
    size_t nb[LM_MAX_DIMS];  /* bytes between consecutive elements (blocks) of each dim */

    enum lm_op op;
    int32_t op_params[LM_MAX_OP_PARAMS / sizeof(int32_t)];
    int32_t flags;                    /* enum lm_tensor_flag bits */
    struct lm_tensor *src[LM_MAX_SRC];

    struct lm_tensor *view_src;       /* for views: the tensor whose memory this is */
    size_t view_offs;                 /* byte offset into view_src's data */

    void *data;                       /* NULL until allocated */
    struct lm_buffer *buffer;         /* the backend buffer holding data, or NULL (arena/host) */
    void *extra;                      /* backend-private (e.g. repacked layout info) */

    char name[LM_MAX_NAME];
};

/* ---- arenas ---- */

struct lm_ctx;

struct lm_ctx_params {
    size_t mem_size;   /* bytes of arena (metadata, plus data unless no_alloc) */
    void *mem_buffer;  /* caller's memory, or NULL to allocate */
    bool no_alloc;     /* true: tensors get no data (an allocator places them) */
};

/* A new arena. Free with lm_ctx_free. Not thread-safe (one builder at a time). */
lm_status lm_ctx_new(const struct lm_ctx_params *params, struct lm_ctx **out);
void lm_ctx_free(struct lm_ctx *ctx);
/* Forget every tensor and graph of the arena and clear its error (memory reused). */
void lm_ctx_reset(struct lm_ctx *ctx);

/* Bytes an arena needs per tensor (metadata) and per graph of n nodes. */
size_t lm_tensor_overhead(void);
size_t lm_graph_overhead(size_t n_nodes);

lm_status lm_ctx_status(const struct lm_ctx *ctx);     /* the first error, or LM_OK */
const char *lm_ctx_error(const struct lm_ctx *ctx);    /* its message ("" if none) */
/* Record the first error of the arena (later ones are dropped): for graph
 * builders above core that refuse something (e.g. train/grad.c). */
void lm_ctx_fail(struct lm_ctx *ctx, lm_status st, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
bool lm_ctx_no_alloc(const struct lm_ctx *ctx);
size_t lm_ctx_used(const struct lm_ctx *ctx);

/* Iterate the tensors of an arena in creation order (NULL at the end). */
struct lm_tensor *lm_ctx_first_tensor(const struct lm_ctx *ctx);
struct lm_tensor *lm_ctx_next_tensor(const struct lm_ctx *ctx, const struct lm_tensor *t);
/* The arena's tensor with this name, or NULL. Linear search. */
struct lm_tensor *lm_ctx_get_tensor(const struct lm_ctx *ctx, const char *name);

/* ---- tensors ---- */

/* A new tensor of n_dims (1..4) dimensions ne[0..n_dims). NULL with the arena's
 * error set on a bad type, negative dims, ne[0] not a multiple of the block
 * size, size overflow or a full arena. */
struct lm_tensor *lm_new_tensor(struct lm_ctx *ctx, enum lm_type type, int n_dims, const int64_t *ne);
struct lm_tensor *lm_new_tensor_1d(struct lm_ctx *ctx, enum lm_type type, int64_t ne0);
struct lm_tensor *lm_new_tensor_2d(struct lm_ctx *ctx, enum lm_type type, int64_t ne0, int64_t ne1);
struct lm_tensor *lm_new_tensor_3d(struct lm_ctx *ctx, enum lm_type type, int64_t ne0, int64_t ne1, int64_t ne2);
struct lm_tensor *lm_new_tensor_4d(struct lm_ctx *ctx, enum lm_type type, int64_t ne0, int64_t ne1, int64_t ne2,
                                   int64_t ne3);
/* A tensor with a's type and shape (new memory, op NONE). */
struct lm_tensor *lm_dup_tensor(struct lm_ctx *ctx, const struct lm_tensor *a);

void lm_set_name(struct lm_tensor *t, const char *name);
/* printf-style; truncates at LM_MAX_NAME-1 bytes. Returns t. */
struct lm_tensor *lm_format_name(struct lm_tensor *t, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

int64_t lm_nelements(const struct lm_tensor *t);
int64_t lm_nrows(const struct lm_tensor *t);      /* ne[1]*ne[2]*ne[3] */
size_t lm_nbytes(const struct lm_tensor *t);      /* bytes spanned by the data (views included) */
int lm_n_dims(const struct lm_tensor *t);         /* highest dim with ne > 1, plus one (>= 1) */
bool lm_is_contiguous(const struct lm_tensor *t); /* rows packed, dims in order */
bool lm_is_contiguous_rows(const struct lm_tensor *t); /* nb[0] is the element size */
bool lm_is_view_op(enum lm_op op);                     /* the descriptor's LM_OPF_VIEW: RESHAPE, VIEW, ... */
bool lm_same_shape(const struct lm_tensor *a, const struct lm_tensor *b);
bool lm_can_repeat(const struct lm_tensor *small, const struct lm_tensor *big);
const char *lm_op_name(enum lm_op op);
const char *lm_unary_name(enum lm_unary_op op);
/* The tensor whose memory t uses: t itself or the root of its view chain. */
const struct lm_tensor *lm_view_root(const struct lm_tensor *t);

/* op_params accessors (index in int32 slots) */
static inline int32_t lm_get_op_i32(const struct lm_tensor *t, int i) { return t->op_params[i]; }
float lm_get_op_f32(const struct lm_tensor *t, int i);
void lm_set_op_i32(struct lm_tensor *t, int i, int32_t v);
void lm_set_op_f32(struct lm_tensor *t, int i, float v);

/* Element access for tests and small tools (any supported non-quantized type,
 * honouring strides). Indices must be in range. */
float lm_get_f32_nd(const struct lm_tensor *t, int64_t i0, int64_t i1, int64_t i2, int64_t i3);
void lm_set_f32_nd(struct lm_tensor *t, int64_t i0, int64_t i1, int64_t i2, int64_t i3, float v);
int32_t lm_get_i32_1d(const struct lm_tensor *t, int64_t i);

/* ---- views (share memory with a; no compute) ---- */

struct lm_tensor *lm_reshape_1d(struct lm_ctx *ctx, struct lm_tensor *a, int64_t ne0);
struct lm_tensor *lm_reshape_2d(struct lm_ctx *ctx, struct lm_tensor *a, int64_t ne0, int64_t ne1);
struct lm_tensor *lm_reshape_3d(struct lm_ctx *ctx, struct lm_tensor *a, int64_t ne0, int64_t ne1, int64_t ne2);
struct lm_tensor *lm_reshape_4d(struct lm_ctx *ctx, struct lm_tensor *a, int64_t ne0, int64_t ne1, int64_t ne2,
                                int64_t ne3);
/* View with the given shape, strides nb1.. (nb0 is the type's) and byte offset.
 * Checked: the view must lie inside a's memory. */
struct lm_tensor *lm_view_1d(struct lm_ctx *ctx, struct lm_tensor *a, int64_t ne0, size_t offset);
struct lm_tensor *lm_view_2d(struct lm_ctx *ctx, struct lm_tensor *a, int64_t ne0, int64_t ne1, size_t nb1,
                             size_t offset);
struct lm_tensor *lm_view_3d(struct lm_ctx *ctx, struct lm_tensor *a, int64_t ne0, int64_t ne1, int64_t ne2,
                             size_t nb1, size_t nb2, size_t offset);
struct lm_tensor *lm_view_4d(struct lm_ctx *ctx, struct lm_tensor *a, int64_t ne0, int64_t ne1, int64_t ne2,
                             int64_t ne3, size_t nb1, size_t nb2, size_t nb3, size_t offset);
/* Result dim axisK of the source goes to position axK: out.ne[axK] = a.ne[K]
 * (ggml_permute semantics). The axes must be a permutation of 0..3. */
struct lm_tensor *lm_permute(struct lm_ctx *ctx, struct lm_tensor *a, int ax0, int ax1, int ax2, int ax3);
struct lm_tensor *lm_transpose(struct lm_ctx *ctx, struct lm_tensor *a); /* swap dims 0 and 1 */

/* ---- compute ops (result F32 unless noted) ---- */

struct lm_tensor *lm_add(struct lm_ctx *ctx, struct lm_tensor *a, struct lm_tensor *b);
struct lm_tensor *lm_mul(struct lm_ctx *ctx, struct lm_tensor *a, struct lm_tensor *b);
struct lm_tensor *lm_div(struct lm_ctx *ctx, struct lm_tensor *a, struct lm_tensor *b);
/* In-place variants: the result is a view of a's memory (a must not be a weight). */
struct lm_tensor *lm_add_inplace(struct lm_ctx *ctx, struct lm_tensor *a, struct lm_tensor *b);
struct lm_tensor *lm_mul_inplace(struct lm_ctx *ctx, struct lm_tensor *a, struct lm_tensor *b);
struct lm_tensor *lm_scale(struct lm_ctx *ctx, struct lm_tensor *a, float s);
struct lm_tensor *lm_sqr(struct lm_ctx *ctx, struct lm_tensor *a);
struct lm_tensor *lm_sqrt(struct lm_ctx *ctx, struct lm_tensor *a);
struct lm_tensor *lm_clamp(struct lm_ctx *ctx, struct lm_tensor *a, float lo, float hi);
struct lm_tensor *lm_unary(struct lm_ctx *ctx, struct lm_tensor *a, enum lm_unary_op op);
struct lm_tensor *lm_silu(struct lm_ctx *ctx, struct lm_tensor *a);
struct lm_tensor *lm_gelu(struct lm_ctx *ctx, struct lm_tensor *a);
struct lm_tensor *lm_relu(struct lm_ctx *ctx, struct lm_tensor *a);
struct lm_tensor *lm_sum_rows(struct lm_ctx *ctx, struct lm_tensor *a);
struct lm_tensor *lm_norm(struct lm_ctx *ctx, struct lm_tensor *a, float eps);
struct lm_tensor *lm_rms_norm(struct lm_ctx *ctx, struct lm_tensor *a, float eps);

/* a: [K, M, A2, A3] any type (weights); b: [K, N, B2, B3] F32 with B2 % A2 == 0
 * and B3 % A3 == 0 (a broadcast over b). Result: [M, N, B2, B3] F32,
 * result[m, n] = dot(a row m, b row n). */
struct lm_tensor *lm_mul_mat(struct lm_ctx *ctx, struct lm_tensor *a, struct lm_tensor *b);

/* Mixture-of-experts matmul. as: [K, M, n_expert] (one matrix per expert);
 * b: [K, B1, T] F32 with B1 == 1 (same input for every slot) or B1 == n_used;
 * ids: [n_used, T] I32 expert ids. Result: [M, n_used, T] F32 with
 * result[:, s, t] = as[:, :, ids[s, t]] x b[:, s % B1, t].
 * Ids out of [0, n_expert) make the row zero at compute time. */
struct lm_tensor *lm_mul_mat_id(struct lm_ctx *ctx, struct lm_tensor *as, struct lm_tensor *b,
                                struct lm_tensor *ids);

/* a: [K, R, A2, A3] any type; ids: [N, I2, I3] I32 row indices with A2 == I2
 * (or A2 == 1) and A3 == I3 (or 1). Result: [K, N, I2, I3] F32, rows of a
 * (dequantized). Out-of-range ids give a zero row. */
struct lm_tensor *lm_get_rows(struct lm_ctx *ctx, struct lm_tensor *a, struct lm_tensor *ids);

/* Copy a into b (same element count; b F32, F16, BF16 or quantized, a F32 or
 * any type when equal types). The result is a view of b. */
struct lm_tensor *lm_cpy(struct lm_ctx *ctx, struct lm_tensor *a, struct lm_tensor *b);
/* Scatter into b, the KV cache's writes (the cells as data, so that a graph
 * keeps its shape and pointers while the cells move): a: [n, N] F32, any
 * strides; ids: [N] I32, contiguous.
 *   lm_set_rows: b [n, R], F32/F16/BF16, or a block type with an encoder
 *     (rows of whole blocks, packed): row ids[i] of b = row i of a.
 *   lm_set_cols: b [R, n], F32/F16/BF16 (the transposed V cache): element
 *     ids[i] of row j of b = a[j, i], for every j.
 * Values are converted as CPY converts them. An id outside [0, R) writes
 * nothing; with equal ids, which row lands is unspecified. The result is a
 * view of b (op_params[0]: 0 rows, 1 columns). */
struct lm_tensor *lm_set_rows(struct lm_ctx *ctx, struct lm_tensor *b, struct lm_tensor *a, struct lm_tensor *ids);
struct lm_tensor *lm_set_cols(struct lm_ctx *ctx, struct lm_tensor *b, struct lm_tensor *a, struct lm_tensor *ids);
struct lm_tensor *lm_cont(struct lm_ctx *ctx, struct lm_tensor *a);
struct lm_tensor *lm_cont_2d(struct lm_ctx *ctx, struct lm_tensor *a, int64_t ne0, int64_t ne1);
/* a tiled to b's shape (b is used for its shape only). */
struct lm_tensor *lm_repeat(struct lm_ctx *ctx, struct lm_tensor *a, struct lm_tensor *b);
/* a and b (same type F32, equal in every other dim) joined along dim. */
struct lm_tensor *lm_concat(struct lm_ctx *ctx, struct lm_tensor *a, struct lm_tensor *b, int dim);
struct lm_tensor *lm_diag_mask_inf(struct lm_ctx *ctx, struct lm_tensor *a, int n_past);

/* softmax over rows of (a * scale + slope_h * mask), a: [n_kv, n_q, n_head, B].
 * mask: NULL or F32 [n_kv, >= n_q] broadcast over dims 2,3. slope_h is 1 when
 * max_bias == 0; otherwise the ALiBi slope of head h = index in dim 2:
 * with n = 2^floor(log2(n_head)), m0 = 2^(-max_bias/n), m1 = 2^(-max_bias/2/n),
 * slope_h = m0^(h+1) for h < n, else m1^(2(h-n)+1). (For ALiBi the mask then
 * holds -|pos_q - pos_k| for visible keys and -inf for hidden ones.) */
struct lm_tensor *lm_soft_max_ext(struct lm_ctx *ctx, struct lm_tensor *a, struct lm_tensor *mask, float scale,
                                  float max_bias);
struct lm_tensor *lm_soft_max(struct lm_ctx *ctx, struct lm_tensor *a);

/* Attention as one op (what mul_mat(k, q) -> soft_max_ext -> mul_mat(v, .) ->
 * permute(0, 2, 1, 3) -> cont computes, without the [n_kv, n_q] matrix):
 *   q:    [d, n_q, n_head] F32, any strides (e.g. permute(Q, 0, 2, 1, 3));
 *   k:    [d, n_kv, n_head_kv] F32, F16 or BF16, or Q8_0 with d a multiple
 *         of 32, rows contiguous (the K cache);
 *   v:    [n_kv, d_v, n_head_kv] F32, F16 or BF16, rows contiguous (the
 *         transposed V cache: a row is one channel over the cells);
 *   mask: NULL or F32 [n_kv, >= n_q] (row i for query i of every head), as
 *         in lm_soft_max_ext: 0 / -inf, or -|pos_q - pos_k| for ALiBi.
 * n_head % n_head_kv == 0; head h reads kv head h / (n_head / n_head_kv).
 * Result: [d_v, n_head, n_q] F32 contiguous, for query i and head h:
 *   s_j   = dot(round_k(q[:, i, h]), k[:, j, g]) * scale + slope_h * mask[j, i]
 *   p_j   = softmax_j(s)   (max subtracted; -inf entries give exactly 0)
 *   out[c, h, i] = sum_j v[j, c, g] * round_v(p_j)
 * where round_k / round_v round to the vec_dot type of k's / v's type (F16
 * for F16, BF16 for BF16, nothing for F32, Q8_0 blocks for a Q8_0 k) as
 * MUL_MAT rounds its activations,
 * and slope_h is soft_max_ext's ALiBi slope (1 when max_bias == 0). A query
 * whose mask row is all -inf gets a zero output row. params: f32[0] scale,
 * f32[1] max_bias; sources: q, k, v, mask (src[0..3]). */
struct lm_tensor *lm_attn(struct lm_ctx *ctx, struct lm_tensor *q, struct lm_tensor *k, struct lm_tensor *v,
                          struct lm_tensor *mask, float scale, float max_bias);

/* lm_attn over a V cache stored as K is, one row per cell (a quantized V
 * cache: a batch writes whole rows, so rows can be blocks):
 *   v:    [d_v, n_kv, n_head_kv] F32, F16, BF16, or Q8_0 with d_v a multiple
 *         of 32, rows contiguous;
 *   out[c, h, i] = sum_j p_j * v[c, j, g]   (p_j in float: no rounding).
 * params: as lm_attn plus i32[2] = 1 (the layout). */
struct lm_tensor *lm_attn_vrows(struct lm_ctx *ctx, struct lm_tensor *q, struct lm_tensor *k, struct lm_tensor *v,
                                struct lm_tensor *mask, float scale, float max_bias);

struct lm_rope_params {
    int n_dims;          /* rotated dims per row (<= ne[0], even) */
    int mode;            /* enum lm_rope_mode */
    int n_ctx_orig;      /* training context, for YaRN */
    float freq_base;     /* theta_i = pos * freq_base^(-2i/n_dims) */
    float freq_scale;    /* linear scaling: positions * freq_scale */
    float ext_factor;    /* YaRN extrapolation mix (0 = off) */
    float attn_factor;   /* YaRN magnitude scale (1 = off) */
    float beta_fast;
    float beta_slow;
};
/* a: [head_dim, n_head, n_tokens, 1] F32; pos: [n_tokens] I32. */
struct lm_tensor *lm_rope(struct lm_ctx *ctx, struct lm_tensor *a, struct lm_tensor *pos,
                          const struct lm_rope_params *p);

/* per row of a (F32): I32 indices sorting it */
struct lm_tensor *lm_argsort(struct lm_ctx *ctx, struct lm_tensor *a, enum lm_sort_order order);
/* the indices of the k largest per row, largest first: a view of argsort DESC */
struct lm_tensor *lm_top_k(struct lm_ctx *ctx, struct lm_tensor *a, int k);

/* ---- training ops (gradients; docs/ops.md "Training ops") ----
 * Every result is F32 and contiguous. Sums run in a fixed order for a given
 * thread count, so a training step is bit-reproducible. */

/* dy: F32 [K, N] (any strides); ids: I32 [N] contiguous; like: [K, R] (any
 * type, read for its shape only; src[2]). Result [K, R]:
 *   out[:, r] = sum over n (ascending) with ids[n] == r of dy[:, n]
 * zero rows where no id points; ids outside [0, R) add nothing. The gradient
 * of GET_ROWS with respect to its table. */
struct lm_tensor *lm_get_rows_back(struct lm_ctx *ctx, struct lm_tensor *dy, struct lm_tensor *ids,
                                   struct lm_tensor *like);
/* a: F32 (any strides) with a.ne[d] % like.ne[d] == 0 for every d; like read
 * for its shape only. Result like's shape:
 *   out[j] = sum over i with i_d % like.ne[d] == j_d (i in flat order) of a[i]
 * REPEAT's transpose: the gradient of a broadcast source. */
struct lm_tensor *lm_repeat_back(struct lm_ctx *ctx, struct lm_tensor *a, struct lm_tensor *like);
/* x, dy: F32, same shape, rows contiguous. Per row (n = ne0,
 * r = 1 / sqrt(sum(x^2) / n + eps)):  dx = r * dy - x * r^3 * sum(dy * x) / n.
 * The gradient of RMS_NORM(x, eps). params: f32[0] eps. */
struct lm_tensor *lm_rms_norm_back(struct lm_ctx *ctx, struct lm_tensor *x, struct lm_tensor *dy, float eps);
/* dy, pos, p as lm_rope: the transpose of ROPE's linear map (each pair rotated
 * by -theta, times mscale; dims past n_dims copied): the gradient of ROPE. */
struct lm_tensor *lm_rope_back(struct lm_ctx *ctx, struct lm_tensor *dy, struct lm_tensor *pos,
                               const struct lm_rope_params *p);
/* dy, y: F32, same shape, rows contiguous; y = soft_max_ext(a, mask, scale,
 * max_bias). Per row: da = scale * y * (dy - sum_j dy_j * y_j): the gradient
 * with respect to a (mask and ALiBi get none). params: f32[0] scale. */
struct lm_tensor *lm_soft_max_back(struct lm_ctx *ctx, struct lm_tensor *dy, struct lm_tensor *y, float scale);
/* x, dy: F32, same shape, rows contiguous. dy * f'(x) for unary op f (SILU:
 * s(1 + x(1 - s)), s = sigmoid(x); GELU: the tanh form's derivative; RELU:
 * x > 0 ? 1 : 0; NEG: -1; TANH: 1 - tanh(x)^2). params: i32[0] op. */
struct lm_tensor *lm_unary_back(struct lm_ctx *ctx, struct lm_tensor *x, struct lm_tensor *dy,
                                enum lm_unary_op op);
/* logits: F32 [V, N] rows contiguous; targets: I32 [N] contiguous. Result
 * [1]: the mean over valid n (0 <= targets[n] < V; others, e.g. -1 for
 * padding, are skipped) of logsumexp(logits[:, n]) - logits[targets[n], n];
 * 0 when no target is valid. */
struct lm_tensor *lm_cross_entropy_loss(struct lm_ctx *ctx, struct lm_tensor *logits, struct lm_tensor *targets);
/* logits, targets as above; dloss: F32 [1]. Result [V, N]: column n is
 * (softmax(logits[:, n]) - onehot(targets[n])) * dloss[0] / n_valid for a
 * valid target, zero otherwise. */
struct lm_tensor *lm_cross_entropy_loss_back(struct lm_ctx *ctx, struct lm_tensor *logits,
                                             struct lm_tensor *targets, struct lm_tensor *dloss);

/* ---- graphs ---- */

struct lm_graph {
    int size;                 /* capacity of nodes and leafs */
    int n_nodes;              /* tensors with an op, in topological order */
    int n_leafs;              /* tensors without an op (inputs, weights) */
    struct lm_tensor **nodes;
    struct lm_tensor **leafs;
    /* visited set: open addressing over 2*size slots; n_hashed entries in it
     * (lm_graph_expand puts each in nodes or leafs too, so clearing can visit
     * just those slots) */
    size_t hash_size;
    size_t n_hashed;
    const struct lm_tensor **hash;
};

/* A graph with room for `size` nodes and `size` leafs, in ctx's arena. NULL
 * (arena error set) if it does not fit. */
struct lm_graph *lm_graph_new(struct lm_ctx *ctx, int size);
/* Add t and every tensor it depends on, sources before users. Returns LM_OK,
 * or LM_ERR_FULL if the graph's capacity is exceeded, LM_ERR_INVALID_ARG for NULL. */
lm_status lm_graph_expand(struct lm_graph *g, struct lm_tensor *t);
/* Empty the graph (capacity kept). Costs the previous contents, not the capacity. */
void lm_graph_clear(struct lm_graph *g);
/* True if t is a node or leaf of g. */
bool lm_graph_contains(const struct lm_graph *g, const struct lm_tensor *t);

#ifdef __cplusplus
}
#endif

#endif
