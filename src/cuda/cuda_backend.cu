/* cuda_backend.cu - the CUDA backend's vtables: device and pinned host buffer
 * types, buffers, the backend (op support, graph_compute dispatching to the
 * ops_*.cu files), scratch memory and the registry entries "cuda<i>".
 *
 * Invariants: a backend owns one stream and one cuBLAS handle on its device;
 * graph_compute launches every node of the graph on that stream in order and
 * returns after the stream has finished (the scheduler reads results and
 * copies between backends right after). Buffer set/get are synchronous
 * copies; the backend's async copies run on its stream. Every CUDA call that
 * fails is logged with its error string and turned into LM_ERR_DEVICE or
 * LM_ERR_NOMEM; nothing aborts. Thread-safety: one graph at a time per
 * backend; buffers may be read concurrently.
 *
 * Decode graphs (one token: a few hundred small kernels, where launch gaps
 * cost more than the kernels) run as CUDA graphs: graph_compute records the
 * node launches (stream capture), updates the executable graph kept from the
 * previous token with them (same kernels, new arguments) or instantiates a
 * new one, and launches that. Any failure on the way launches the nodes
 * directly instead, with the same results. The backend option no_cuda_graphs
 * (a context's: LAMINA_CUDA_GRAPHS=0 when it is created) turns this off for
 * that backend.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <atomic>

#include "core/log.h"
#include "core/op_rules.h"
#include "cuda/cuda.h"
#include "cuda/cuda_internal.cuh"

#define LM_CU_ALIGN 256
#define LM_CU_PAD 256

/* True on a thread while graph_run records a capture (thread-local capture mode). */
static thread_local bool capturing_thread;

bool lm_cu_capturing(void)
{
    return capturing_thread;
}

/* Log a failed CUDA runtime call and clear the error (so that the next
 * launch check does not blame its node for it); true when it failed. During
 * a capture only at debug level: graph_run falls back to direct launches. */
static bool failed(cudaError_t e, const char *what)
{
    if (e == cudaSuccess)
        return false;
    if (capturing_thread) /* graph_run falls back to direct launches, which log what still fails */
        LM_LOG_DBG("cuda: %s (during a capture): %s\n", what, cudaGetErrorString(e));
    else
        LM_LOG_ERR("cuda: %s: %s\n", what, cudaGetErrorString(e));
    (void)cudaGetLastError();
    return true;
}

lm_status lm_cu_launch_status(const char *what)
{
    cudaError_t e = cudaGetLastError();
    return failed(e, what) ? LM_ERR_DEVICE : LM_OK;
}

lm_status lm_cu_cublas_status(cublasStatus_t st, const char *what)
{
    if (st == CUBLAS_STATUS_SUCCESS)
        return LM_OK;
    if (capturing_thread)
        LM_LOG_DBG("cuda: %s (during a capture): cuBLAS status %d\n", what, (int)st);
    else
        LM_LOG_ERR("cuda: %s: cuBLAS status %d\n", what, (int)st);
    return st == CUBLAS_STATUS_ALLOC_FAILED ? LM_ERR_NOMEM : LM_ERR_DEVICE;
}

/* ---- devices ---- */

static int n_devices = -1;

extern "C" int lm_cuda_device_count(void)
{
    if (n_devices < 0) {
        int n = 0;
        if (cudaGetDeviceCount(&n) != cudaSuccess)
            n = 0;
        (void)cudaGetLastError(); /* a missing driver leaves a sticky-free error: clear it */
        n_devices = n < LM_CUDA_MAX_DEVICES ? n : LM_CUDA_MAX_DEVICES;
    }
    return n_devices;
}

extern "C" void lm_cuda_device_desc(int device, char *buf, size_t size)
{
    struct cudaDeviceProp p;
    if (device < 0 || device >= lm_cuda_device_count() || cudaGetDeviceProperties(&p, device) != cudaSuccess) {
        snprintf(buf, size, "cuda%d: not available", device);
        return;
    }
    snprintf(buf, size, "%s, %.0f GiB, sm_%d%d, %d SMs", p.name, (double)p.totalGlobalMem / (1024.0 * 1024 * 1024),
             p.major, p.minor, p.multiProcessorCount);
}

/* ---- device buffers ---- */

struct dev_buf {
    int device;
    void *base;
};

static void dbuf_free(struct lm_buffer *buf)
{
    struct dev_buf *b = (struct dev_buf *)buf->context;
    if (b->base) {
        cudaSetDevice(b->device);
        failed(cudaFree(b->base), "cudaFree");
    }
    free(b);
}

static void *dbuf_base(struct lm_buffer *buf) { return ((struct dev_buf *)buf->context)->base; }

static void dbuf_set(struct lm_buffer *buf, struct lm_tensor *t, const void *data, size_t offset, size_t size)
{
    cudaSetDevice(((struct dev_buf *)buf->context)->device);
    failed(cudaMemcpy((char *)t->data + offset, data, size, cudaMemcpyHostToDevice), "upload");
}

static void dbuf_get(struct lm_buffer *buf, const struct lm_tensor *t, void *data, size_t offset, size_t size)
{
    cudaSetDevice(((struct dev_buf *)buf->context)->device);
    failed(cudaMemcpy(data, (const char *)t->data + offset, size, cudaMemcpyDeviceToHost), "download");
}

static bool is_dev_buft(lm_buft buft);

/* Device to device (same or another GPU); anything else goes through the host. */
static bool dbuf_cpy(struct lm_buffer *buf, const struct lm_tensor *src, struct lm_tensor *dst)
{
    if (!src->buffer || !is_dev_buft(src->buffer->buft))
        return false;
    const int sdev = ((struct dev_buf *)src->buffer->context)->device;
    const int ddev = ((struct dev_buf *)buf->context)->device;
    cudaSetDevice(ddev);
    cudaError_t e = sdev == ddev ? cudaMemcpy(dst->data, src->data, lm_nbytes(src), cudaMemcpyDeviceToDevice)
                                 : cudaMemcpyPeer(dst->data, ddev, src->data, sdev, lm_nbytes(src));
    return !failed(e, "device copy");
}

static void dbuf_clear(struct lm_buffer *buf, uint8_t value)
{
    struct dev_buf *b = (struct dev_buf *)buf->context;
    cudaSetDevice(b->device);
    failed(cudaMemset(b->base, value, buf->size), "cudaMemset");
}

static const struct lm_buffer_i dev_buffer_i = {
    /* .free_buffer = */ dbuf_free,
    /* .get_base = */ dbuf_base,
    /* .init_tensor = */ NULL,
    /* .set_tensor = */ dbuf_set,
    /* .get_tensor = */ dbuf_get,
    /* .cpy_tensor = */ dbuf_cpy,
    /* .clear = */ dbuf_clear,
};

struct dev_buft {
    int device;
    char name[16];
};

static struct dev_buft dev_bufts_ctx[LM_CUDA_MAX_DEVICES];
static struct lm_buffer_type dev_bufts[LM_CUDA_MAX_DEVICES];

static const char *dbuft_name(lm_buft buft) { return ((struct dev_buft *)buft->context)->name; }
static size_t dbuft_alignment(lm_buft buft) { return LM_CU_ALIGN; }

static lm_status dbuft_alloc(lm_buft buft, size_t size, struct lm_buffer **out)
{
    if (!out)
        return LM_ERR_INVALID_ARG;
    const int device = ((struct dev_buft *)buft->context)->device;
    struct dev_buf *b = (struct dev_buf *)calloc(1, sizeof *b);
    if (!b)
        return LM_ERR_NOMEM;
    b->device = device;
    if (size > SIZE_MAX - LM_CU_PAD) {
        free(b);
        return LM_ERR_NOMEM;
    }
    if (size) {
        if (failed(cudaSetDevice(device), "cudaSetDevice")) {
            free(b);
            return LM_ERR_DEVICE;
        }
        /* LM_CU_PAD spare bytes: kernels load whole aligned 16-byte chunks,
         * which may reach past a tensor at the buffer's end */
        cudaError_t e = cudaMalloc(&b->base, size + LM_CU_PAD);
        if (e != cudaSuccess) {
            (void)cudaGetLastError();
            size_t free_b = 0, total_b = 0;
            cudaMemGetInfo(&free_b, &total_b);
            LM_LOG_ERR("cuda%d: cannot allocate %.1f MiB of device memory (%.1f MiB free): %s\n", device,
                       (double)size / 1048576.0, (double)free_b / 1048576.0, cudaGetErrorString(e));
            free(b);
            return LM_ERR_NOMEM;
        }
    }
    struct lm_buffer *lb = lm_buffer_init(buft, dev_buffer_i, b, size);
    if (!lb) {
        if (b->base)
            cudaFree(b->base);
        free(b);
        return LM_ERR_NOMEM;
    }
    *out = lb;
    return LM_OK;
}

static bool is_dev_buft(lm_buft buft)
{
    return buft >= dev_bufts && buft < dev_bufts + LM_CUDA_MAX_DEVICES;
}

extern "C" lm_buft lm_cuda_buft(int device)
{
    if (device < 0 || device >= lm_cuda_device_count())
        return NULL;
    struct lm_buffer_type *t = &dev_bufts[device];
    if (!t->context) {
        dev_bufts_ctx[device].device = device;
        snprintf(dev_bufts_ctx[device].name, sizeof dev_bufts_ctx[device].name, "cuda%d", device);
        t->iface.get_name = dbuft_name;
        t->iface.alloc_buffer = dbuft_alloc;
        t->iface.get_alignment = dbuft_alignment;
        t->context = &dev_bufts_ctx[device];
    }
    return t;
}

/* ---- pinned host buffers ---- */

static void hbuf_free(struct lm_buffer *buf)
{
    if (buf->context)
        failed(cudaFreeHost(buf->context), "cudaFreeHost");
}
static void *hbuf_base(struct lm_buffer *buf) { return buf->context; }
static void hbuf_set(struct lm_buffer *buf, struct lm_tensor *t, const void *data, size_t offset, size_t size)
{
    memcpy((char *)t->data + offset, data, size);
}
static void hbuf_get(struct lm_buffer *buf, const struct lm_tensor *t, void *data, size_t offset, size_t size)
{
    memcpy(data, (const char *)t->data + offset, size);
}
static void hbuf_clear(struct lm_buffer *buf, uint8_t value) { memset(buf->context, value, buf->size); }

static const struct lm_buffer_i host_buffer_i = {
    /* .free_buffer = */ hbuf_free,
    /* .get_base = */ hbuf_base,
    /* .init_tensor = */ NULL,
    /* .set_tensor = */ hbuf_set,
    /* .get_tensor = */ hbuf_get,
    /* .cpy_tensor = */ NULL,
    /* .clear = */ hbuf_clear,
};

static const char *hbuft_name(lm_buft buft) { return "cuda_host"; }
static size_t hbuft_alignment(lm_buft buft) { return 64; }
static bool hbuft_is_host(lm_buft buft) { return true; }

static lm_status hbuft_alloc(lm_buft buft, size_t size, struct lm_buffer **out)
{
    if (!out)
        return LM_ERR_INVALID_ARG;
    void *mem = NULL;
    if (size && failed(cudaMallocHost(&mem, size), "cudaMallocHost")) {
        (void)cudaGetLastError();
        return LM_ERR_NOMEM;
    }
    struct lm_buffer *b = lm_buffer_init(buft, host_buffer_i, mem, size);
    if (!b) {
        if (mem)
            cudaFreeHost(mem);
        return LM_ERR_NOMEM;
    }
    *out = b;
    return LM_OK;
}

static struct lm_buffer_type host_buft = {
    {
        /* .get_name = */ hbuft_name,
        /* .alloc_buffer = */ hbuft_alloc,
        /* .get_alignment = */ hbuft_alignment,
        /* .get_max_size = */ NULL,
        /* .get_alloc_size = */ NULL,
        /* .is_host = */ hbuft_is_host,
    },
    NULL,
};

extern "C" lm_buft lm_cuda_host_buft(void) { return lm_cuda_device_count() > 0 ? &host_buft : NULL; }

/* ---- scratch ---- */

void *lm_cu_scratch(struct lm_cu_ctx *c, int slot, size_t bytes)
{
    if (slot < 0 || slot >= LM_CU_N_SCRATCH)
        return NULL;
    if (bytes <= c->scratch_size[slot] && c->scratch[slot])
        return c->scratch[slot];
    /* growing synchronizes and calls cudaFree/cudaMalloc, all illegal in a capture (and the graph would keep
     * the old block's address): fail the capture instead, the direct launch that follows grows the slot */
    if (capturing_thread)
        return NULL;
    size_t want = bytes + bytes / 4; /* grow with headroom: shapes grow a little at a time */
    want = (want + LM_CU_ALIGN - 1) & ~(size_t)(LM_CU_ALIGN - 1);
    if (c->scratch[slot]) {
        failed(cudaStreamSynchronize(c->stream), "scratch: synchronize");
        failed(cudaFree(c->scratch[slot]), "scratch: cudaFree");
        c->scratch[slot] = NULL;
        c->scratch_size[slot] = 0;
        c->scratch_gen++; /* kept graphs point at the freed block, even if the cudaMalloc below fails */
    }
    if (failed(cudaMalloc(&c->scratch[slot], want ? want : LM_CU_ALIGN), "scratch: cudaMalloc")) {
        (void)cudaGetLastError();
        c->scratch[slot] = NULL;
        return NULL;
    }
    c->scratch_size[slot] = want;
    c->scratch_gen++;
    return c->scratch[slot];
}

/* ---- op support ---- */

typedef bool (*supports_fn)(const struct lm_cu_limits *lim, const struct lm_tensor *t);
typedef lm_status (*op_fn)(struct lm_cu_ctx *c, struct lm_tensor *dst);

/* One row per op, in enum lm_op order: {op, supports, run}; NULLs: not
 * computed here (views and leaves compute nothing; the training ops run on
 * the CPU). C++ has no array designators, so the order is checked at compile
 * time instead. */
struct op_row {
    enum lm_op op;
    supports_fn supports;
    op_fn run;
};

#define ELEM lm_cu_supports_elementwise, lm_cu_op_elementwise
#define COPY lm_cu_supports_copy, lm_cu_op_copy
#define MATMUL lm_cu_supports_matmul, lm_cu_op_matmul
#define NO_ROW nullptr, nullptr

static constexpr struct op_row rows[] = {
    {LM_OP_NONE, NO_ROW},
    {LM_OP_ADD, ELEM},
    {LM_OP_MUL, ELEM},
    {LM_OP_DIV, ELEM},
    {LM_OP_SCALE, ELEM},
    {LM_OP_SQR, ELEM},
    {LM_OP_SQRT, ELEM},
    {LM_OP_CLAMP, ELEM},
    {LM_OP_UNARY, ELEM},
    {LM_OP_SUM_ROWS, ELEM},
    {LM_OP_NORM, ELEM},
    {LM_OP_RMS_NORM, ELEM},
    {LM_OP_MUL_MAT, MATMUL},
    {LM_OP_MUL_MAT_ID, MATMUL},
    {LM_OP_GET_ROWS, MATMUL},
    {LM_OP_CPY, COPY},
    {LM_OP_CONT, COPY},
    {LM_OP_REPEAT, ELEM},
    {LM_OP_CONCAT, ELEM},
    {LM_OP_RESHAPE, NO_ROW},
    {LM_OP_VIEW, NO_ROW},
    {LM_OP_PERMUTE, NO_ROW},
    {LM_OP_TRANSPOSE, NO_ROW},
    {LM_OP_DIAG_MASK_INF, ELEM},
    {LM_OP_SOFT_MAX, ELEM},
    {LM_OP_ROPE, ELEM},
    {LM_OP_ARGSORT, ELEM},
    {LM_OP_ATTN, lm_cu_supports_attn, lm_cu_op_attn},
    {LM_OP_SET_ROWS, lm_cu_supports_set_rows, lm_cu_op_set_rows},
    {LM_OP_GET_ROWS_BACK, NO_ROW},
    {LM_OP_REPEAT_BACK, NO_ROW},
    {LM_OP_RMS_NORM_BACK, NO_ROW},
    {LM_OP_ROPE_BACK, NO_ROW},
    {LM_OP_SOFT_MAX_BACK, NO_ROW},
    {LM_OP_UNARY_BACK, NO_ROW},
    {LM_OP_CROSS_ENTROPY_LOSS, NO_ROW},
    {LM_OP_CROSS_ENTROPY_LOSS_BACK, NO_ROW},
};

#undef ELEM
#undef COPY
#undef MATMUL
#undef NO_ROW

static constexpr bool rows_in_op_order()
{
    for (int i = 0; i < (int)(sizeof rows / sizeof rows[0]); i++)
        if ((int)rows[i].op != i)
            return false;
    return true;
}
static_assert(sizeof rows / sizeof rows[0] == LM_OP_COUNT, "every enum lm_op needs its row in the CUDA table");
static_assert(rows_in_op_order(), "the CUDA table lists the ops in enum lm_op order");

/* The row computing op, or NULL when this backend does not compute it. */
static const struct op_row *family(enum lm_op op)
{
    return (unsigned)op < LM_OP_COUNT && rows[op].run ? &rows[op] : nullptr;
}

static bool supports(const struct lm_cu_ctx *c, const struct lm_tensor *t)
{
    if (!lm_op_computes(t->op))
        return lm_op_rule(t->op) != NULL; /* a leaf or a view: nothing to compute; an unknown op: no */
    const struct op_row *f = family(t->op);
    return f && lm_op_check(t, NULL, 0) && f->supports(&c->lim, t);
}

bool lm_cu_graph_capturable(const struct lm_graph *g, bool mmq)
{
    /* a graph without a matrix product (a K shift, a copy) is rare and short: capturing it would only add
     * an instantiation; one with a large batch's product calls cuBLAS and changes shape every time */
    bool any = false;
    for (int i = 0; i < g->n_nodes; i++) {
        const struct lm_tensor *t = g->nodes[i];
        if (t->op != LM_OP_MUL_MAT && t->op != LM_OP_MUL_MAT_ID)
            continue;
        if (!lm_cu_matmul_capturable(t, mmq))
            return false;
        any = true;
    }
    return any;
}

/* ---- the backend ---- */

#define LM_CU_N_GRAPHS 4        /* executable graphs kept per backend (one per kind of graph it computes) */
#define LM_CU_GRAPH_MAX_FAILS 8 /* failed captures in a row after which a backend stops trying */

/* A byte record of what a graph's launches are made of (snap_graph). */
struct cu_snap {
    unsigned char *p;
    size_t n, cap;
};

/* An executable graph, the kind of lamina graph it was made for, and the record of the graph it last
 * recorded: a graph with the same record replays it without a capture (graph_run). */
struct cu_graph_slot {
    uint64_t key; /* graph_key */
    cudaGraphExec_t exec;
    struct cu_snap snap;
    bool snap_ok;         /* snap describes what exec runs */
    uint64_t scratch_gen; /* lm_cu_ctx.scratch_gen when it was recorded */
};

struct lm_cu_backend {
    struct lm_backend be;
    struct lm_cu_ctx c;
    char name[16];
    /* decode graphs (graph_run) */
    bool graphs;          /* on unless created with lm_backend_opts.no_cuda_graphs */
    cudaStream_t capture; /* the non-blocking stream captures record on (see graph_run) */
    struct cu_graph_slot slots[LM_CU_N_GRAPHS];
    int next_slot; /* the slot a new kind of graph takes when all are used (round robin) */
    int n_failed;  /* failed captures in a row */
    bool logged;   /* a fallback has been logged (debug, once per backend) */
    struct cu_snap snap_now; /* the record of the graph being computed */
};

/* Every backend's graph counts (lm_cuda_graph_stats). */
static std::atomic<uint64_t> n_graph_launched, n_graph_replayed, n_graph_instantiated, n_graph_fallbacks, n_fused;

extern "C" void lm_cuda_graph_stats(struct lm_cuda_graph_stats *out)
{
    if (!out)
        return;
    out->launched = n_graph_launched.load();
    out->replayed = n_graph_replayed.load();
    out->instantiated = n_graph_instantiated.load();
    out->fallbacks = n_graph_fallbacks.load();
    out->fused = n_fused.load();
}

static struct lm_cu_ctx *ctx_of(lm_backend_t be) { return &((struct lm_cu_backend *)be)->c; }

static const char *be_name(lm_backend_t be) { return ((struct lm_cu_backend *)be)->name; }

static void be_free(lm_backend_t be)
{
    struct lm_cu_backend *b = (struct lm_cu_backend *)be;
    cudaSetDevice(b->c.device);
    if (b->c.stream)
        cudaStreamSynchronize(b->c.stream);
    for (int i = 0; i < LM_CU_N_GRAPHS; i++) {
        if (b->slots[i].exec)
            cudaGraphExecDestroy(b->slots[i].exec);
        free(b->slots[i].snap.p);
    }
    free(b->snap_now.p);
    if (b->capture)
        cudaStreamDestroy(b->capture);
    for (int i = 0; i < LM_CU_N_SCRATCH; i++)
        if (b->c.scratch[i])
            cudaFree(b->c.scratch[i]);
    if (b->c.cublas)
        cublasDestroy(b->c.cublas);
    if (b->c.stream)
        cudaStreamDestroy(b->c.stream);
    free(b);
}

static lm_buft be_default_buft(lm_backend_t be) { return lm_cuda_buft(ctx_of(be)->device); }

static void be_set_async(lm_backend_t be, struct lm_tensor *t, const void *data, size_t offset, size_t size)
{
    struct lm_cu_ctx *c = ctx_of(be);
    if (failed(cudaSetDevice(c->device), "cudaSetDevice") ||
        failed(cudaMemcpyAsync((char *)t->data + offset, data, size, cudaMemcpyHostToDevice, c->stream),
               "async upload"))
        c->upload_failed = true;
}

static void be_get_async(lm_backend_t be, const struct lm_tensor *t, void *data, size_t offset, size_t size)
{
    struct lm_cu_ctx *c = ctx_of(be);
    cudaSetDevice(c->device);
    failed(cudaMemcpyAsync(data, (const char *)t->data + offset, size, cudaMemcpyDeviceToHost, c->stream),
           "async download");
}

static void be_synchronize(lm_backend_t be)
{
    struct lm_cu_ctx *c = ctx_of(be);
    cudaSetDevice(c->device);
    failed(cudaStreamSynchronize(c->stream), "synchronize");
}

static bool be_supports_op(lm_backend_t be, const struct lm_tensor *op) { return supports(ctx_of(be), op); }

static bool be_supports_buft(lm_backend_t be, lm_buft buft) { return buft == lm_cuda_buft(ctx_of(be)->device); }

/* True for a node that launches work (not a view, not empty). */
static bool launches(const struct lm_tensor *t)
{
    return lm_op_computes(t->op) && lm_nelements(t) > 0;
}

/* The pair t and the node after it make when they run as one launch
 * (core/fuse.h; off with lm_backend_opts.no_fuse), or LM_FUSE_NONE. */
static enum lm_fuse fused_pair(const struct lm_cu_ctx *c, const struct lm_tensor *t, const struct lm_tensor *next)
{
    if (!c->fuse || !next || !launches(next) || !supports(c, next) || !next->data || !lm_sources_have_data(next))
        return LM_FUSE_NONE;
    const enum lm_fuse kind = lm_fuse_match(t, next);
    if ((kind == LM_FUSE_MUL_MAT_ADD && !lm_cu_mul_mat_add_ok(t)) ||
        (kind == LM_FUSE_MUL_MAT_PAIR && !lm_cu_mul_mat_pair_ok(t, next)))
        return LM_FUSE_NONE;
    return kind;
}

/* Launches every node of g on c->stream in order, without synchronizing. quiet (a capture): a failing node is
 * not logged; the caller launches the nodes again without capture, which logs what still fails. */
static lm_status launch_nodes(struct lm_cu_backend *b, struct lm_graph *g, bool quiet)
{
    struct lm_cu_ctx *c = &b->c;
    lm_status st = LM_OK;
    for (int i = 0; i < g->n_nodes && !st; i++) {
        struct lm_tensor *t = g->nodes[i];
        if (!launches(t))
            continue;
        const struct op_row *f = family(t->op);
        if (!f || !supports(c, t)) {
            if (!quiet)
                LM_LOG_ERR("%s: node '%s' (%s) is not supported\n", b->name, t->name, lm_op_name(t->op));
            st = LM_ERR_UNSUPPORTED;
            break;
        }
        if (!t->data || !lm_sources_have_data(t)) {
            if (!quiet)
                LM_LOG_ERR("%s: node '%s' (%s) or one of its sources has no data\n", b->name, t->name,
                           lm_op_name(t->op));
            st = LM_ERR_INVALID_ARG;
            break;
        }
        struct lm_tensor *next = i + 1 < g->n_nodes ? g->nodes[i + 1] : NULL;
        const enum lm_fuse kind = fused_pair(c, t, next);
        if (kind == LM_FUSE_NONE) {
            st = f->run(c, t);
        } else {
            st = kind == LM_FUSE_MUL_MAT_ADD    ? lm_cu_op_mul_mat_add(c, t, next)
                 : kind == LM_FUSE_MUL_MAT_PAIR ? lm_cu_op_mul_mat_pair(c, t, next)
                                                : lm_cu_op_fused_elementwise(c, kind, t, next);
            n_fused++;
            i++;
        }
        if (st && !quiet)
            LM_LOG_ERR("%s: node '%s' (%s%s) failed: %s\n", b->name, t->name, lm_op_name(t->op),
                       kind == LM_FUSE_NONE ? "" : " fused with the next", lm_status_str(st));
    }
    return st;
}

/* The kind of a graph: its op sequence (FNV-1a). Decode graphs of one model keep their kind token after token
 * while their shapes (the cache length) change, which cudaGraphExecUpdate takes. */
static uint64_t graph_key(const struct lm_graph *g)
{
    uint64_t h = 0xcbf29ce484222325ull ^ (uint64_t)g->n_nodes;
    for (int i = 0; i < g->n_nodes; i++)
        h = (h ^ (uint64_t)g->nodes[i]->op) * 0x100000001b3ull;
    return h;
}

/* True when exec now runs graph's kernels with graph's arguments (same topology). */
static bool exec_update(cudaGraphExec_t exec, cudaGraph_t graph)
{
#if CUDART_VERSION >= 12000
    cudaGraphExecUpdateResultInfo info;
    const cudaError_t e = cudaGraphExecUpdate(exec, graph, &info);
#else
    cudaGraphNode_t node = NULL;
    cudaGraphExecUpdateResult res;
    const cudaError_t e = cudaGraphExecUpdate(exec, graph, &node, &res);
#endif
    if (e != cudaSuccess)
        (void)cudaGetLastError(); /* cudaErrorGraphExecUpdateFailure: a new topology, instantiate instead */
    return e == cudaSuccess;
}

/* The slot of kind `key` with an executable graph, or NULL. */
static struct cu_graph_slot *slot_of(struct lm_cu_backend *b, uint64_t key)
{
    for (int i = 0; i < LM_CU_N_GRAPHS; i++)
        if (b->slots[i].exec && b->slots[i].key == key)
            return &b->slots[i];
    return NULL;
}

/* The slot whose executable graph now runs a capture of kind `key`: the slot of that kind updated, else a new
 * instantiation in that slot, a free one or the next in turn. Its record is no longer valid (the caller sets
 * it). NULL (error cleared) when instantiation fails. */
static struct cu_graph_slot *exec_for(struct lm_cu_backend *b, uint64_t key, cudaGraph_t graph)
{
    struct cu_graph_slot *s = slot_of(b, key);
    if (s)
        s->snap_ok = false;
    if (s && exec_update(s->exec, graph))
        return s;
    for (int i = 0; i < LM_CU_N_GRAPHS && !s; i++)
        if (!b->slots[i].exec)
            s = &b->slots[i];
    if (!s)
        s = &b->slots[b->next_slot++ % LM_CU_N_GRAPHS];
    if (s->exec)
        cudaGraphExecDestroy(s->exec);
    s->exec = NULL;
    s->snap_ok = false;
    /* cudaGraphInstantiateWithFlags: the same signature in CUDA 11.4+ and 12 (cudaGraphInstantiate's changed) */
    if (cudaGraphInstantiateWithFlags(&s->exec, graph, 0) != cudaSuccess) {
        (void)cudaGetLastError();
        s->exec = NULL;
        return NULL;
    }
    s->key = key;
    n_graph_instantiated++;
    return s;
}

/* Append n bytes to s (grown as needed). False on OOM. */
static bool snap_put(struct cu_snap *s, const void *x, size_t n)
{
    if (s->n + n > s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 16384;
        while (cap < s->n + n)
            cap *= 2;
        unsigned char *p = (unsigned char *)realloc(s->p, cap);
        if (!p)
            return false;
        s->p = p;
        s->cap = cap;
    }
    memcpy(s->p + s->n, x, n);
    s->n += n;
    return true;
}

/* The tensor fields a kernel launch reads (an op reads no device data on the host: cuda_internal.cuh), or a
 * zero record for an absent source. */
static bool snap_tensor(struct cu_snap *s, const struct lm_tensor *t)
{
    struct {
        const void *data;
        int64_t ne[4];
        size_t nb[4];
        int32_t type, present;
    } r;
    memset(&r, 0, sizeof r);
    if (t) {
        r.data = t->data;
        memcpy(r.ne, t->ne, sizeof r.ne);
        memcpy(r.nb, t->nb, sizeof r.nb);
        r.type = (int32_t)t->type;
        r.present = 1;
    }
    return snap_put(s, &r, sizeof r);
}

/* s = what g's launches are made of: per launching node its op, parameters, and the data pointer, type, shape
 * and strides of it and of each source. Two graphs with equal records (and the same scratch blocks) record the
 * same kernels with the same arguments. False on OOM. */
static bool snap_graph(struct cu_snap *s, const struct lm_graph *g)
{
    s->n = 0;
    bool ok = snap_put(s, &g->n_nodes, sizeof g->n_nodes);
    for (int i = 0; i < g->n_nodes && ok; i++) {
        const struct lm_tensor *t = g->nodes[i];
        if (!launches(t))
            continue;
        const int32_t op = (int32_t)t->op;
        ok = snap_put(s, &op, sizeof op) && snap_put(s, t->op_params, sizeof t->op_params) && snap_tensor(s, t);
        for (int j = 0; j < LM_MAX_SRC && ok; j++)
            ok = snap_tensor(s, t->src[j]);
    }
    return ok;
}

/* A graph whose record matches its kind's last capture: that executable graph launched again as it is (the
 * inputs' new values are in the same memory). False when there is none or the launch fails. */
static bool replay(struct lm_cu_backend *b, uint64_t key, bool have_snap)
{
    struct cu_graph_slot *s = have_snap ? slot_of(b, key) : NULL;
    if (!s || !s->snap_ok || s->scratch_gen != b->c.scratch_gen || s->snap.n != b->snap_now.n ||
        memcmp(s->snap.p, b->snap_now.p, s->snap.n) != 0)
        return false;
    if (cudaGraphLaunch(s->exec, b->c.stream) != cudaSuccess) {
        (void)cudaGetLastError();
        s->snap_ok = false;
        return false;
    }
    return true;
}

/* g as a CUDA graph. When g's record (snap_graph) equals the one its kind's executable graph was recorded from,
 * and the scratch blocks are the same, that graph is launched again without a capture: a kept decode graph
 * (model/context.c) token after token, whose cache writes take their cells as an input (SET_ROWS), until its
 * shape changes (every 32 cells). Else its launches are recorded on b->capture, an executable graph updated or
 * made from them and launched on c->stream. False when a step failed: then nothing of g has been launched, no stream is capturing and the
 * CUDA error is cleared; the caller launches the nodes directly (which also grows a scratch slot that was too
 * small for the capture).
 *
 * The capture records on a second stream, created non-blocking, rather than on c->stream: while a blocking
 * stream captures, any use of the legacy default stream in the device's context is illegal, from any thread,
 * and the buffers' cudaMemcpy (another context's uploads and downloads, on another thread) use it. Recording
 * executes nothing, so the capture stream needs no ordering; the launch on c->stream waits for earlier legacy
 * stream work as the nodes' own launches would. The mode is cudaStreamCaptureModeThreadLocal: this thread may
 * make no potentially unsafe call (cudaMalloc, a synchronous copy) while it captures, so such a call in an op
 * fails the capture (and the fallback runs) instead of executing out of order behind the recorded kernels as
 * Relaxed would let it, and other threads' own captures do not restrict this one (Global would). */
static bool graph_run(struct lm_cu_backend *b, struct lm_graph *g)
{
    struct lm_cu_ctx *c = &b->c;
    const uint64_t key = graph_key(g);
    const bool have_snap = snap_graph(&b->snap_now, g);
    if (replay(b, key, have_snap)) {
        b->n_failed = 0;
        n_graph_launched++;
        n_graph_replayed++;
        return true;
    }
    const char *why = NULL;
    cudaGraph_t graph = NULL;
    struct cu_graph_slot *slot = NULL;
    if (cudaStreamBeginCapture(b->capture, cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
        why = "cudaStreamBeginCapture";
    } else {
        cudaStream_t stream = c->stream;
        c->stream = b->capture;
        capturing_thread = true;
        const lm_status st = launch_nodes(b, g, true);
        c->stream = stream;
        capturing_thread = false;
        /* ended whatever happened: an invalidated capture ends with an error and no graph */
        const cudaError_t e = cudaStreamEndCapture(b->capture, &graph);
        if (st) /* NOMEM here: a scratch slot has to grow (lm_cu_scratch) */
            why = st == LM_ERR_NOMEM ? "scratch memory has to grow first" : lm_status_str(st);
        else if (e != cudaSuccess || !graph)
            why = e != cudaSuccess ? cudaGetErrorString(e) : "no graph";
    }
    if (!why && !(slot = exec_for(b, key, graph)))
        why = "cudaGraphInstantiate";
    if (!why && cudaGraphLaunch(slot->exec, c->stream) != cudaSuccess)
        why = "cudaGraphLaunch";
    if (graph)
        cudaGraphDestroy(graph); /* the executable graph keeps what it needs */
    if (!why && have_snap) { /* the slot's record: this graph's (swapped in, the old buffer reused next time) */
        const struct cu_snap t = slot->snap;
        slot->snap = b->snap_now;
        b->snap_now = t;
        slot->snap_ok = true;
        slot->scratch_gen = c->scratch_gen;
    }
    if (!why) {
        b->n_failed = 0;
        n_graph_launched++;
        return true;
    }
    (void)cudaGetLastError();
    n_graph_fallbacks++;
    if (!b->logged)
        LM_LOG_DBG("%s: decode graph launched node by node instead of as a CUDA graph (%s)\n", b->name, why);
    b->logged = true;
    if (++b->n_failed >= LM_CU_GRAPH_MAX_FAILS) {
        LM_LOG_DBG("%s: %d CUDA graph captures failed in a row: graphs off for this backend\n", b->name, b->n_failed);
        b->graphs = false;
    }
    return false;
}

static lm_status be_graph_compute(lm_backend_t be, struct lm_graph *g)
{
    if (!g)
        return LM_ERR_INVALID_ARG;
    struct lm_cu_backend *b = (struct lm_cu_backend *)be;
    struct lm_cu_ctx *c = &b->c;
    if (failed(cudaSetDevice(c->device), "cudaSetDevice"))
        return LM_ERR_DEVICE;
    if (c->upload_failed) { /* an input is missing: computing would give wrong results */
        c->upload_failed = false;
        (void)cudaStreamSynchronize(c->stream);
        return LM_ERR_DEVICE;
    }
    lm_status st = LM_OK;
    if (!(b->graphs && lm_cu_graph_capturable(g, c->mmq) && graph_run(b, g)))
        st = launch_nodes(b, g, false);
    /* kernels run asynchronously: an error of one shows here at the latest */
    if (failed(cudaStreamSynchronize(c->stream), "graph_compute") && !st)
        st = LM_ERR_DEVICE;
    return st;
}

static const struct lm_backend_i cuda_backend_i = {
    /* .get_name = */ be_name,
    /* .free = */ be_free,
    /* .get_default_buffer_type = */ be_default_buft,
    /* .set_tensor_async = */ be_set_async,
    /* .get_tensor_async = */ be_get_async,
    /* .synchronize = */ be_synchronize,
    /* .graph_compute = */ be_graph_compute,
    /* .supports_op = */ be_supports_op,
    /* .supports_buft = */ be_supports_buft,
    /* .set_n_threads = */ NULL,
};

/* A new backend on device `device`: its stream and cuBLAS handle, the device's limits, the capture stream of
 * its decode graphs unless opts->no_cuda_graphs, the MMQ kernel unless opts->no_cuda_mmq, fused pairs unless
 * opts->no_fuse (opts NULL: the defaults). */
static lm_status backend_new(int device, const struct lm_backend_opts *opts, lm_backend_t *out)
{
    if (!out)
        return LM_ERR_INVALID_ARG;
    if (device < 0 || device >= lm_cuda_device_count())
        return LM_ERR_NOT_FOUND;
    struct lm_cu_backend *b = (struct lm_cu_backend *)calloc(1, sizeof *b);
    if (!b)
        return LM_ERR_NOMEM;
    b->c.device = device;
    snprintf(b->name, sizeof b->name, "cuda%d", device);
    b->be.iface = cuda_backend_i;
    b->be.context = &b->c;
    const struct lm_backend_opts def = {};
    if (!opts)
        opts = &def;
    b->graphs = !opts->no_cuda_graphs;
    b->c.mmq = !opts->no_cuda_mmq;
    b->c.fuse = !opts->no_fuse;
    lm_status st = LM_OK;
    int n_sm = 0, optin = 0;
    if (failed(cudaSetDevice(device), "cudaSetDevice") ||
        /* a blocking stream: its kernels wait for the buffers' plain
         * cudaMemcpy / cudaMemset (legacy default stream), which may still
         * be in flight when they return (pageable uploads, device copies) */
        failed(cudaStreamCreate(&b->c.stream), "cudaStreamCreate") ||
        (b->graphs && failed(cudaStreamCreateWithFlags(&b->capture, cudaStreamNonBlocking), "capture stream")) ||
        failed(cudaDeviceGetAttribute(&n_sm, cudaDevAttrMultiProcessorCount, device), "SM count") ||
        failed(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device), "shared memory"))
        st = LM_ERR_DEVICE;
    b->c.lim.n_sm = n_sm;
    b->c.lim.smem_optin = optin > 0 ? (size_t)optin : 0;
    if (!st)
        st = lm_cu_attn_init(&b->c);
    if (!st)
        st = lm_cu_cublas_status(cublasCreate(&b->c.cublas), "cublasCreate");
    if (!st)
        st = lm_cu_cublas_status(cublasSetStream(b->c.cublas, b->c.stream), "cublasSetStream");
    if (st) {
        be_free(&b->be);
        return st;
    }
    *out = &b->be;
    return LM_OK;
}

extern "C" bool lm_backend_is_cuda(lm_backend_t be) { return be && be->iface.get_name == be_name; }

/* ---- registry: one entry per device ---- */

/* Device i's free and total memory (placement's default shares). */
static bool device_memory(int i, size_t *free_b, size_t *total_b)
{
    if (failed(cudaSetDevice(i), "cudaSetDevice") || failed(cudaMemGetInfo(free_b, total_b), "cudaMemGetInfo")) {
        (void)cudaGetLastError();
        return false;
    }
    return true;
}

#define LM_CU_DEVICE_FNS(i)                                                                                             \
    static lm_status init_##i(lm_backend_t *out) { return backend_new(i, NULL, out); }                              \
    static lm_status init_threads_##i(int n_threads, const struct lm_backend_opts *opts, lm_backend_t *out)         \
    {                                                                                                               \
        (void)n_threads; /* no host threads */                                                                      \
        return backend_new(i, opts, out);                                                                           \
    }                                                                                                               \
    static lm_buft buft_##i(void) { return lm_cuda_buft(i); }                                                       \
    static bool mem_##i(size_t *free_b, size_t *total_b) { return device_memory(i, free_b, total_b); }
LM_CU_DEVICE_FNS(0)
LM_CU_DEVICE_FNS(1)
LM_CU_DEVICE_FNS(2)
LM_CU_DEVICE_FNS(3)
LM_CU_DEVICE_FNS(4)
LM_CU_DEVICE_FNS(5)
LM_CU_DEVICE_FNS(6)
LM_CU_DEVICE_FNS(7)

#define LM_CU_REG(i) {"cuda" #i, init_##i, LM_DEV_GPU, init_threads_##i, buft_##i, NULL, mem_##i}
static const struct lm_backend_reg regs[LM_CUDA_MAX_DEVICES] = {
    LM_CU_REG(0), LM_CU_REG(1), LM_CU_REG(2), LM_CU_REG(3), LM_CU_REG(4), LM_CU_REG(5), LM_CU_REG(6), LM_CU_REG(7),
};

extern "C" const struct lm_backend_reg *lm_cuda_backend_reg(int device)
{
    return device >= 0 && device < lm_cuda_device_count() ? &regs[device] : NULL;
}
