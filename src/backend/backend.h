/* backend.h - buffer types, buffers, backends and the backend registry.
 *
 * A backend computes graphs; a buffer type says where memory for a backend
 * lives; a buffer is one allocation of a buffer type that tensors are placed
 * in. All three are a vtable plus an opaque context. Optional slots may be NULL
 * and each says what NULL means.
 *
 * Thread-safety: a backend is used by one thread at a time (its graph_compute
 * may use many threads internally). Buffers may be read concurrently.
 */
#ifndef LM_BACKEND_H
#define LM_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "core/tensor.h"

#ifdef __cplusplus
extern "C" { /* the CUDA backend (C++) calls these */
#endif

struct lm_buffer_type;
struct lm_buffer;
struct lm_backend;
typedef struct lm_buffer_type *lm_buft;
typedef struct lm_backend *lm_backend_t;

/* ---- buffer types ---- */

struct lm_buffer_type_i {
    const char *(*get_name)(lm_buft buft);
    /* A new buffer of `size` bytes (size 0 is allowed). */
    lm_status (*alloc_buffer)(lm_buft buft, size_t size, struct lm_buffer **out);
    size_t (*get_alignment)(lm_buft buft);
    /* NULL: no limit. */
    size_t (*get_max_size)(lm_buft buft);
    /* Bytes a tensor takes in this buffer type. NULL: lm_nbytes(t). (A type
     * that repacks weights may need more.) */
    size_t (*get_alloc_size)(lm_buft buft, const struct lm_tensor *t);
    /* NULL: false. True when tensor data is plain host memory the CPU can read
     * and write directly through tensor->data. */
    bool (*is_host)(lm_buft buft);
};

struct lm_buffer_type {
    struct lm_buffer_type_i iface;
    void *context;
};

const char *lm_buft_name(lm_buft buft);
lm_status lm_buft_alloc_buffer(lm_buft buft, size_t size, struct lm_buffer **out);
size_t lm_buft_alignment(lm_buft buft);
size_t lm_buft_max_size(lm_buft buft);
size_t lm_buft_alloc_size(lm_buft buft, const struct lm_tensor *t);
bool lm_buft_is_host(lm_buft buft);

/* ---- buffers ---- */

enum lm_buffer_usage {
    LM_BUFFER_USAGE_ANY = 0,
    LM_BUFFER_USAGE_WEIGHTS = 1, /* the scheduler runs ops on the backend owning the weights */
    LM_BUFFER_USAGE_COMPUTE = 2,
};

struct lm_buffer_i {
    /* NULL: nothing to release beyond the lm_buffer struct. */
    void (*free_buffer)(struct lm_buffer *buf);
    void *(*get_base)(struct lm_buffer *buf);
    /* Called once when a tensor (or view) is placed in the buffer. NULL: nothing to do. */
    lm_status (*init_tensor)(struct lm_buffer *buf, struct lm_tensor *t);
    /* Copy bytes [offset, offset+size) of the tensor's data from/to host memory.
     * The range is within lm_nbytes(t); callers check. */
    void (*set_tensor)(struct lm_buffer *buf, struct lm_tensor *t, const void *data, size_t offset, size_t size);
    void (*get_tensor)(struct lm_buffer *buf, const struct lm_tensor *t, void *data, size_t offset, size_t size);
    /* Copy src (in any buffer) to dst (in this buffer) directly. NULL or false:
     * the caller copies through host memory. */
    bool (*cpy_tensor)(struct lm_buffer *buf, const struct lm_tensor *src, struct lm_tensor *dst);
    void (*clear)(struct lm_buffer *buf, uint8_t value);
};

struct lm_buffer {
    struct lm_buffer_i iface;
    lm_buft buft;
    void *context;
    size_t size;
    enum lm_buffer_usage usage;
};

/* Make a buffer struct (used by buffer-type implementations). NULL on OOM. */
struct lm_buffer *lm_buffer_init(lm_buft buft, struct lm_buffer_i iface, void *context, size_t size);
void lm_buffer_free(struct lm_buffer *buf); /* NULL: nothing */
void *lm_buffer_base(struct lm_buffer *buf);
size_t lm_buffer_size(const struct lm_buffer *buf);
void lm_buffer_clear(struct lm_buffer *buf, uint8_t value);
bool lm_buffer_is_host(const struct lm_buffer *buf);
void lm_buffer_set_usage(struct lm_buffer *buf, enum lm_buffer_usage usage);

/* Place t (no data yet, not a view) at base+offset of buf and run init_tensor.
 * LM_ERR_INVALID_ARG when it does not fit. */
lm_status lm_buffer_place_tensor(struct lm_buffer *buf, struct lm_tensor *t, size_t offset);
/* Give a view its data pointer and buffer from its view_src (which must be placed). */
lm_status lm_view_init(struct lm_tensor *view);

/* Copy bytes to/from a placed tensor through its buffer (checked range). */
lm_status lm_tensor_set(struct lm_tensor *t, const void *data, size_t offset, size_t size);
lm_status lm_tensor_get(const struct lm_tensor *t, void *data, size_t offset, size_t size);
/* Copy src into dst (same bytes count, same type); across buffers via host memory. */
lm_status lm_tensor_copy(const struct lm_tensor *src, struct lm_tensor *dst);

/* True if every source of t that holds elements has data (a backend's
 * graph_compute checks it before computing t). */
bool lm_sources_have_data(const struct lm_tensor *t);

/* ---- host memory ---- */

/* The plain host buffer type (aligned malloc), shared by CPU-side backends. */
lm_buft lm_host_buft(void);
/* A buffer over caller memory [ptr, ptr+size) (e.g. an mmapped file), of
 * buffer type `buft` (must be host). The memory is not freed with the buffer. */
lm_status lm_buffer_from_host_ptr(lm_buft buft, void *ptr, size_t size, struct lm_buffer **out);

/* ---- backends ---- */

struct lm_backend_i {
    const char *(*get_name)(lm_backend_t be);
    void (*free)(lm_backend_t be);
    lm_buft (*get_default_buffer_type)(lm_backend_t be);
    /* NULL: the scheduler uses the buffer's synchronous set/get. Otherwise
     * the scheduler uploads a split's contiguous host inputs with
     * set_tensor_async; a failed upload must fail the next graph_compute. */
    void (*set_tensor_async)(lm_backend_t be, struct lm_tensor *t, const void *data, size_t offset, size_t size);
    void (*get_tensor_async)(lm_backend_t be, const struct lm_tensor *t, void *data, size_t offset, size_t size);
    /* NULL: nothing is ever pending. */
    void (*synchronize)(lm_backend_t be);
    /* Compute every node of g in order. Every tensor of g has data. */
    lm_status (*graph_compute)(lm_backend_t be, struct lm_graph *g);
    /* Can this backend compute node `op` (its type, shapes, source types)? */
    bool (*supports_op)(lm_backend_t be, const struct lm_tensor *op);
    /* Can this backend read tensors stored in buft directly? NULL: only its
     * default buffer type. */
    bool (*supports_buft)(lm_backend_t be, lm_buft buft);
    /* NULL: 1. Threads used by graph_compute. */
    void (*set_n_threads)(lm_backend_t be, int n_threads);
};

struct lm_backend {
    struct lm_backend_i iface;
    void *context;
};

const char *lm_backend_name(lm_backend_t be);
void lm_backend_free(lm_backend_t be); /* NULL: nothing */
lm_buft lm_backend_default_buft(lm_backend_t be);
lm_status lm_backend_alloc_buffer(lm_backend_t be, size_t size, struct lm_buffer **out);
lm_status lm_backend_graph_compute(lm_backend_t be, struct lm_graph *g);
bool lm_backend_supports_op(lm_backend_t be, const struct lm_tensor *op);
bool lm_backend_supports_buft(lm_backend_t be, lm_buft buft);
void lm_backend_synchronize(lm_backend_t be);
void lm_backend_set_n_threads(lm_backend_t be, int n_threads);

/* ---- registry ---- */

/* The most backends one model and its contexts use at once: the host plus
 * GPUs (placement's devices, the scheduler's backends). */
#define LM_MAX_DEVICES 8

/* What a registered backend computes on: host memory (cpu, ref) or a GPU. */
enum lm_dev_kind { LM_DEV_HOST = 0, LM_DEV_GPU = 1 };

/* Flags of a weight for weight_buft. MATMUL_ONLY: only MUL_MAT (and
 * MUL_MAT_ID) reads it, so a backend may keep it in a layout only its matrix
 * products read. MATMUL_ROWS: MUL_MAT and GET_ROWS read it (an embedding
 * tied to the output matrix), so a backend may keep it in its matmul layout
 * only if its GET_ROWS reads that layout too. Neither: any op may read it. */
#define LM_WEIGHT_MATMUL_ONLY 1u
#define LM_WEIGHT_MATMUL_ROWS 2u

/* Options of one backend instance, chosen by whoever creates it: a context
 * (model/context.c) passes its lm_context_params' (the API layer fills them
 * from the environment, core/env.c). Zero is every option's default; a
 * backend ignores the options that do not apply to it. */
struct lm_backend_opts {
    bool no_fuse;        /* compute the node pairs of core/fuse.h as separate nodes (CPU, CUDA) */
    bool no_cuda_graphs; /* CUDA: launch decode graphs node by node, without CUDA graphs */
    bool no_cuda_mmq;    /* CUDA: quantized products of 9 to 64 columns via F16 and cuBLAS, not the MMQ kernels */
};

/* A backend factory: name ("cpu", "ref", ...) and an init function, plus what
 * the model layer's placement (model/placement.h) needs to know about the
 * device before any backend exists. Only name and init are required. */
struct lm_backend_reg {
    const char *name;
    lm_status (*init)(lm_backend_t *out);
    enum lm_dev_kind kind;
    /* A backend using n_threads host threads (<= 0: its default) with the
     * options opts (NULL: the defaults). NULL: init, then set_n_threads (and
     * the options are the defaults). */
    lm_status (*init_threads)(int n_threads, const struct lm_backend_opts *opts, lm_backend_t *out);
    /* The device's own memory (weights, KV cache). NULL: the backend holds no
     * weights (a test or reference backend); placement never picks it. */
    lm_buft (*default_buft)(void);
    /* The buffer type this backend prefers for weight w (its type and shape;
     * no data yet), given LM_WEIGHT_* flags: the hook where a backend keeps
     * weights in its own layout (the CPU: repacked matrices). NULL: default_buft. */
    lm_buft (*weight_buft)(const struct lm_tensor *w, unsigned flags);
    /* The device's free and total memory in bytes now. NULL or false:
     * unknown (placement then gives every GPU an equal share). */
    bool (*memory)(size_t *free, size_t *total);
};

/* Add a factory (idempotent by name; at most 16). Each backend exports its
 * reg (lm_cpu_backend_reg(), lm_ref_backend_reg(); device backends through
 * their module init, backend/module.h); llama_backend_init registers them
 * (cpu first, so it is preferred). Call at start-up, not concurrently with
 * other registry calls. */
lm_status lm_backend_register(const struct lm_backend_reg *reg);
/* Registered factories, in registration (= priority) order. */
int lm_backend_reg_count(void);
const struct lm_backend_reg *lm_backend_reg_get(int i);
/* A new backend by registry name; LM_ERR_NOT_FOUND for an unknown name. */
lm_status lm_backend_init_by_name(const char *name, lm_backend_t *out);
/* The reg's hooks with their NULL defaults (see struct lm_backend_reg). */
lm_status lm_backend_reg_init_threads(const struct lm_backend_reg *reg, int n_threads,
                                      const struct lm_backend_opts *opts, lm_backend_t *out);
lm_buft lm_backend_reg_default_buft(const struct lm_backend_reg *reg);
lm_buft lm_backend_reg_weight_buft(const struct lm_backend_reg *reg, const struct lm_tensor *w, unsigned flags);

#ifdef __cplusplus
}
#endif

#endif
