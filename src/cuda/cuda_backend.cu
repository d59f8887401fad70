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
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/op_rules.h"
#include "cuda/cuda.h"
#include "cuda/cuda_internal.cuh"

#define LM_CU_ALIGN 256
#define LM_CU_PAD 256

/* Log a failed CUDA runtime call and clear the error (so that the next
 * launch check does not blame its node for it); true when it failed. */
static bool failed(cudaError_t e, const char *what)
{
    if (e == cudaSuccess)
        return false;
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
    if (size) {
        cudaSetDevice(device);
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
    size_t want = bytes + bytes / 4; /* grow with headroom: shapes grow a little at a time */
    want = (want + LM_CU_ALIGN - 1) & ~(size_t)(LM_CU_ALIGN - 1);
    if (c->scratch[slot]) {
        failed(cudaStreamSynchronize(c->stream), "scratch: synchronize");
        cudaFree(c->scratch[slot]);
        c->scratch[slot] = NULL;
        c->scratch_size[slot] = 0;
    }
    if (failed(cudaMalloc(&c->scratch[slot], want ? want : LM_CU_ALIGN), "scratch: cudaMalloc")) {
        (void)cudaGetLastError();
        c->scratch[slot] = NULL;
        return NULL;
    }
    c->scratch_size[slot] = want;
    return c->scratch[slot];
}

/* ---- op support ---- */

typedef bool (*supports_fn)(const struct lm_tensor *t);
typedef lm_status (*op_fn)(struct lm_cu_ctx *c, struct lm_tensor *dst);

struct op_family {
    supports_fn supports;
    op_fn run;
};

static const struct op_family fam_elementwise = {lm_cu_supports_elementwise, lm_cu_op_elementwise};
static const struct op_family fam_copy = {lm_cu_supports_copy, lm_cu_op_copy};
static const struct op_family fam_matmul = {lm_cu_supports_matmul, lm_cu_op_matmul};
static const struct op_family fam_attn = {lm_cu_supports_attn, lm_cu_op_attn};

/* The family computing op, or NULL (training ops: the CPU computes them). */
static const struct op_family *family(enum lm_op op)
{
    switch (op) {
    case LM_OP_ADD:
    case LM_OP_MUL:
    case LM_OP_DIV:
    case LM_OP_SCALE:
    case LM_OP_SQR:
    case LM_OP_SQRT:
    case LM_OP_CLAMP:
    case LM_OP_UNARY:
    case LM_OP_SUM_ROWS:
    case LM_OP_NORM:
    case LM_OP_RMS_NORM:
    case LM_OP_REPEAT:
    case LM_OP_CONCAT:
    case LM_OP_DIAG_MASK_INF:
    case LM_OP_SOFT_MAX:
    case LM_OP_ROPE:
    case LM_OP_ARGSORT:
        return &fam_elementwise;
    case LM_OP_CPY:
    case LM_OP_CONT:
        return &fam_copy;
    case LM_OP_MUL_MAT:
    case LM_OP_MUL_MAT_ID:
    case LM_OP_GET_ROWS:
        return &fam_matmul;
    case LM_OP_ATTN:
        return &fam_attn;
    default:
        return NULL;
    }
}

static bool supports(const struct lm_tensor *t)
{
    if (lm_is_view_op(t->op) || t->op == LM_OP_NONE)
        return true;
    const struct op_family *f = family(t->op);
    return f && lm_op_check(t, NULL, 0) && f->supports(t);
}

/* ---- the backend ---- */

struct lm_cu_backend {
    struct lm_backend be;
    struct lm_cu_ctx c;
    char name[16];
};

static struct lm_cu_ctx *ctx_of(lm_backend_t be) { return &((struct lm_cu_backend *)be)->c; }

static const char *be_name(lm_backend_t be) { return ((struct lm_cu_backend *)be)->name; }

static void be_free(lm_backend_t be)
{
    struct lm_cu_backend *b = (struct lm_cu_backend *)be;
    cudaSetDevice(b->c.device);
    if (b->c.stream)
        cudaStreamSynchronize(b->c.stream);
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
    cudaSetDevice(c->device);
    failed(cudaMemcpyAsync((char *)t->data + offset, data, size, cudaMemcpyHostToDevice, c->stream),
           "async upload");
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

static bool be_supports_op(lm_backend_t be, const struct lm_tensor *op) { return supports(op); }

static bool be_supports_buft(lm_backend_t be, lm_buft buft) { return buft == lm_cuda_buft(ctx_of(be)->device); }

static lm_status be_graph_compute(lm_backend_t be, struct lm_graph *g)
{
    if (!g)
        return LM_ERR_INVALID_ARG;
    struct lm_cu_ctx *c = ctx_of(be);
    if (failed(cudaSetDevice(c->device), "cudaSetDevice"))
        return LM_ERR_DEVICE;
    lm_status st = LM_OK;
    for (int i = 0; i < g->n_nodes && !st; i++) {
        struct lm_tensor *t = g->nodes[i];
        if (t->op == LM_OP_NONE || lm_is_view_op(t->op) || lm_nelements(t) == 0)
            continue;
        const struct op_family *f = family(t->op);
        if (!f || !supports(t)) {
            LM_LOG_ERR("%s: node '%s' (%s) is not supported\n", be_name(be), t->name, lm_op_name(t->op));
            st = LM_ERR_UNSUPPORTED;
            break;
        }
        if (!t->data || !lm_sources_have_data(t)) {
            LM_LOG_ERR("%s: node '%s' (%s) or one of its sources has no data\n", be_name(be), t->name,
                       lm_op_name(t->op));
            st = LM_ERR_INVALID_ARG;
            break;
        }
        st = f->run(c, t);
        if (st)
            LM_LOG_ERR("%s: node '%s' (%s) failed: %s\n", be_name(be), t->name, lm_op_name(t->op),
                       lm_status_str(st));
    }
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

/* A new backend on device `device`: its stream and cuBLAS handle. */
static lm_status backend_new(int device, lm_backend_t *out)
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
    lm_status st = LM_OK;
    if (failed(cudaSetDevice(device), "cudaSetDevice") ||
        /* a blocking stream: its kernels wait for the buffers' plain
         * cudaMemcpy / cudaMemset (legacy default stream), which may still
         * be in flight when they return (pageable uploads, device copies) */
        failed(cudaStreamCreate(&b->c.stream), "cudaStreamCreate"))
        st = LM_ERR_DEVICE;
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

#define LM_CU_DEVICE_FNS(i)                                                                                             \
    static lm_status init_##i(lm_backend_t *out) { return backend_new(i, out); }                                    \
    static lm_buft buft_##i(void) { return lm_cuda_buft(i); }
LM_CU_DEVICE_FNS(0)
LM_CU_DEVICE_FNS(1)
LM_CU_DEVICE_FNS(2)
LM_CU_DEVICE_FNS(3)
LM_CU_DEVICE_FNS(4)
LM_CU_DEVICE_FNS(5)
LM_CU_DEVICE_FNS(6)
LM_CU_DEVICE_FNS(7)

#define LM_CU_REG(i) {"cuda" #i, init_##i, LM_DEV_GPU, NULL, buft_##i, NULL}
static const struct lm_backend_reg regs[LM_CUDA_MAX_DEVICES] = {
    LM_CU_REG(0), LM_CU_REG(1), LM_CU_REG(2), LM_CU_REG(3), LM_CU_REG(4), LM_CU_REG(5), LM_CU_REG(6), LM_CU_REG(7),
};

extern "C" const struct lm_backend_reg *lm_cuda_backend_reg(int device)
{
    return device >= 0 && device < lm_cuda_device_count() ? &regs[device] : NULL;
}
