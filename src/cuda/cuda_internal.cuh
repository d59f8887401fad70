/* cuda_internal.cuh - shared by the files of src/cuda/ only: the backend's
 * per-device state, device scratch memory, launch checks, shapes passed to
 * kernels by value, and the op functions graph_compute dispatches to.
 *
 * Every op function computes one node `dst` from dst->src[] on the backend's
 * stream, as the ref backend's op of the same name does (docs/ops.md; the
 * semantics are those of ref/ops_*.c), and returns without synchronizing.
 * tensor->data of the node and of its sources are device pointers of the
 * backend's device (views already point into their root's memory); strides
 * nb[] are bytes and may describe any layout the op rules allow. An op reads
 * nothing from device memory on the host. It returns LM_OK, LM_ERR_NOMEM when
 * scratch memory cannot be had, or LM_ERR_DEVICE when a launch failed (the
 * CUDA error is logged). The caller (graph_compute) has checked the node with
 * lm_op_check and the op's lm_cu_supports_* function.
 *
 * Thread-safety: one graph at a time per backend (its stream and scratch).
 */
#ifndef LM_CUDA_INTERNAL_CUH
#define LM_CUDA_INTERNAL_CUH

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "core/fuse.h"
#include "core/status.h"
#include "core/tensor.h"

#define LM_CU_N_SCRATCH 4

extern "C" { /* C names: liblamina's symbols carry the lm_ prefix unmangled */

/* What one device allows, read once when a backend is created (the op
 * functions and the supports checks must not ask the runtime per node). */
struct lm_cu_limits {
    int n_sm;          /* multiprocessors (cudaDevAttrMultiProcessorCount) */
    size_t smem_optin; /* dynamic shared memory a block may opt into (cudaDevAttrMaxSharedMemoryPerBlockOptin) */
};

/* One backend: a device, its stream, a cuBLAS handle on that stream and
 * grow-only scratch blocks (slot i is one block; an op may use several
 * slots at once, and nothing in a slot survives the op). While
 * lm_cu_capturing() (graph_compute records a decode graph on this thread,
 * cuda_backend.cu), `stream` is the
 * capture stream: ops must then make no call that is illegal in a stream
 * capture (no synchronization, cudaMalloc/cudaFree, cudaMemcpy on the legacy
 * stream, cuBLAS: its handle stays on the real stream); lm_cu_scratch does
 * not grow then. */
struct lm_cu_ctx {
    int device;
    cudaStream_t stream;
    cublasHandle_t cublas;
    struct lm_cu_limits lim;
    void *scratch[LM_CU_N_SCRATCH];
    size_t scratch_size[LM_CU_N_SCRATCH];
    uint64_t scratch_gen; /* counts scratch reallocations: a recorded graph holds the blocks of its generation */
    bool upload_failed;   /* an async upload failed (logged): the next graph_compute returns LM_ERR_DEVICE */
    bool mmq;             /* quantized MUL_MAT with 9..MMQ_MAX_N columns by MMQ (LAMINA_CUDA_MMQ, read at creation) */
    bool fuse;            /* adjacent node pairs of core/fuse.h as one launch (not LAMINA_NO_FUSE, read at creation) */
};

/* Device memory of at least `bytes` in scratch slot `slot` (0..LM_CU_N_SCRATCH-1),
 * valid until the op returns. Growing synchronizes the stream before freeing
 * the old block. NULL (logged) when the device is out of memory, and NULL
 * (not logged) when the slot would have to grow during a capture: the op
 * then fails with LM_ERR_NOMEM, graph_compute drops the capture and launches
 * the nodes directly, which grows the slot for the next capture. */
void *lm_cu_scratch(struct lm_cu_ctx *c, int slot, size_t bytes);

/* LM_OK when the last launch succeeded, else LM_ERR_DEVICE with the CUDA
 * error logged under `what`. Call after each op's launches. */
lm_status lm_cu_launch_status(const char *what);
/* True while this thread records a stream capture (graph_compute's decode
 * graphs, thread-local capture mode): ops must not grow scratch, synchronize
 * or call cuBLAS then (see struct lm_cu_ctx). */
bool lm_cu_capturing(void);
/* The same for a cuBLAS call's result. */
lm_status lm_cu_cublas_status(cublasStatus_t st, const char *what);

/* A tensor's shape and byte strides, passed to kernels by value. */
struct lm_cu_shape {
    int64_t ne[4];
    int64_t nb[4];
};

static inline struct lm_cu_shape lm_cu_shape_of(const struct lm_tensor *t)
{
    struct lm_cu_shape s;
    for (int i = 0; i < 4; i++) {
        s.ne[i] = t->ne[i];
        s.nb[i] = (int64_t)t->nb[i];
    }
    return s;
}

/* Blocks of `threads` for n work items (at least one block). */
static inline unsigned lm_cu_blocks(int64_t n, int threads)
{
    int64_t b = (n + threads - 1) / threads;
    return (unsigned)(b > 0 ? b : 1);
}

/* ---- op functions (one file each family) ----
 * lm_cu_supports_*: the kernel limits of that family on a device with limits
 * `lim` for a node that passed lm_op_check (types the kernels have, layouts
 * they read, shared memory the device allows). */

/* ops_elementwise.cu: ADD MUL DIV SCALE SQR SQRT CLAMP UNARY SUM_ROWS NORM
 * RMS_NORM REPEAT CONCAT DIAG_MASK_INF SOFT_MAX ROPE ARGSORT */
bool lm_cu_supports_elementwise(const struct lm_cu_limits *lim, const struct lm_tensor *t);
lm_status lm_cu_op_elementwise(struct lm_cu_ctx *c, struct lm_tensor *dst);
/* A fused RMS_NORM + MUL or SILU + MUL pair (core/fuse.h): a's and b's
 * results, the bits of the two nodes launched apart. */
lm_status lm_cu_op_fused_elementwise(struct lm_cu_ctx *c, enum lm_fuse kind, struct lm_tensor *a, struct lm_tensor *b);

/* ops_copy.cu: CPY CONT (conversions between F32 F16 BF16 and into the
 * legacy quant types, same-type copies of any type) */
bool lm_cu_supports_copy(const struct lm_cu_limits *lim, const struct lm_tensor *t);
lm_status lm_cu_op_copy(struct lm_cu_ctx *c, struct lm_tensor *dst);
/* ops_copy.cu: SET_ROWS (the KV cache writes: float destinations, and rows
 * of the legacy quant types) */
bool lm_cu_supports_set_rows(const struct lm_cu_limits *lim, const struct lm_tensor *t);
lm_status lm_cu_op_set_rows(struct lm_cu_ctx *c, struct lm_tensor *dst);

/* ops_matmul.cu: MUL_MAT MUL_MAT_ID GET_ROWS (MUL_MAT_ID batches: ops_moe.cu,
 * through matmul.cuh) */
bool lm_cu_supports_matmul(const struct lm_cu_limits *lim, const struct lm_tensor *t);
lm_status lm_cu_op_matmul(struct lm_cu_ctx *c, struct lm_tensor *dst);
/* True when a MUL_MAT or MUL_MAT_ID node can be recorded in a CUDA graph:
 * it runs the matvec kernels (at most MV_MAX_N columns; MUL_MAT_ID: at most
 * MV_MAX_N tokens) or, with quantized weights and `mmq` (the backend's
 * lm_cu_ctx.mmq), the MMQ kernels (up to MMQ_MAX_N columns or tokens:
 * ops_mmq.cu, ops_moe.cu), never cuBLAS or a synchronization. False for any
 * other op. */
bool lm_cu_matmul_capturable(const struct lm_tensor *t, bool mmq);
/* A fused MUL_MAT + ADD pair (core/fuse.h) the matvec kernels compute: mm
 * has one column (token generation). lm_cu_op_mul_mat_add
 * writes mm's product and add's sum (the product plus the other operand,
 * the bits of the ADD launched apart). */
bool lm_cu_mul_mat_add_ok(const struct lm_tensor *mm);
lm_status lm_cu_op_mul_mat_add(struct lm_cu_ctx *c, struct lm_tensor *mm, struct lm_tensor *add);
/* A fused pair of products of one activation column (core/fuse.h's
 * MUL_MAT_PAIR) in one matvec launch: a one-column product whose weights
 * both lie where the kernels read them in place. */
bool lm_cu_mul_mat_pair_ok(const struct lm_tensor *a, const struct lm_tensor *b);
lm_status lm_cu_op_mul_mat_pair(struct lm_cu_ctx *c, struct lm_tensor *a, struct lm_tensor *b);

/* ops_attn.cu: ATTN */
bool lm_cu_supports_attn(const struct lm_cu_limits *lim, const struct lm_tensor *t);
lm_status lm_cu_op_attn(struct lm_cu_ctx *c, struct lm_tensor *dst);
/* Once per backend, on its device (current): lets the prefill kernels use
 * the dynamic shared memory they may need, up to c->lim.smem_optin, so that
 * no launch (nor a stream capture) has to set it. LM_ERR_DEVICE (logged). */
lm_status lm_cu_attn_init(struct lm_cu_ctx *c);

/* cuda_backend.cu: true when graph_compute records g as a CUDA graph (a
 * decode graph, or a small batch's): g has a MUL_MAT or MUL_MAT_ID node and
 * every one of them is capturable (lm_cu_matmul_capturable with `mmq`). Host only;
 * thread-safe. */
bool lm_cu_graph_capturable(const struct lm_graph *g, bool mmq);

} /* extern "C" */

#endif
