/* test_sched.c - the scheduler over two backends (cpu and ref): a graph whose
 * weights sit partly in a cpu buffer and partly in a ref buffer computes the
 * same result as the same graph on the cpu backend alone, with the expected
 * splits and input copies; forced assignments and re-allocation also work.
 * A backend with set_tensor_async (ref with a queue standing in for a GPU
 * stream: uploads run when its next graph starts) gets its host inputs
 * through it, with the same result. */
#include <math.h>
#include <string.h>

#include "sched/alloc.h"
#include "sched/sched.h"
#include "cpu/cpu.h"
#include "lm_test.h"
#include "ref/ref.h"

#define K 48
#define M 40
#define T 5

struct weights {
    struct lm_ctx *ctx_host, *ctx_ref;
    struct lm_buffer *buf_host, *buf_ref;
    struct lm_tensor *w1, *w2, *b, *w3;
};

static uint32_t rng = 12345;
static float frand(void)
{
    rng = rng * 1664525u + 1013904223u;
    return ((float)(rng >> 8) / 16777216.0f - 0.5f) * 0.5f;
}

/* w2 in a ref buffer when split, else everything in host memory. */
static void make_weights(struct weights *w, bool split, const float *data[4])
{
    struct lm_ctx_params p = {.mem_size = 16 * lm_tensor_overhead(), .no_alloc = true};
    lm_ctx_new(&p, &w->ctx_host);
    lm_ctx_new(&p, &w->ctx_ref);
    w->w1 = lm_new_tensor_2d(w->ctx_host, LM_TYPE_F32, K, M);
    w->w2 = lm_new_tensor_2d(split ? w->ctx_ref : w->ctx_host, LM_TYPE_F16, M, M);
    w->b = lm_new_tensor_1d(w->ctx_host, LM_TYPE_F32, M);
    w->w3 = lm_new_tensor_2d(w->ctx_host, LM_TYPE_F32, M, K);
    CHECK(lm_alloc_ctx_tensors(w->ctx_host, lm_host_buft(), &w->buf_host) == LM_OK);
    w->buf_ref = NULL;
    if (split)
        CHECK(lm_alloc_ctx_tensors(w->ctx_ref, lm_ref_buft(), &w->buf_ref) == LM_OK);
    lm_buffer_set_usage(w->buf_host, LM_BUFFER_USAGE_WEIGHTS);
    if (w->buf_ref)
        lm_buffer_set_usage(w->buf_ref, LM_BUFFER_USAGE_WEIGHTS);
    lm_tensor_set(w->w1, data[0], 0, lm_nbytes(w->w1));
    lm_tensor_set(w->w2, data[1], 0, lm_nbytes(w->w2));
    lm_tensor_set(w->b, data[2], 0, lm_nbytes(w->b));
    lm_tensor_set(w->w3, data[3], 0, lm_nbytes(w->w3));
}

static void free_weights(struct weights *w)
{
    lm_buffer_free(w->buf_host);
    lm_buffer_free(w->buf_ref);
    lm_ctx_free(w->ctx_host);
    lm_ctx_free(w->ctx_ref);
}

/* out = w3 x (w2 x silu(w1 x in) + b) */
static struct lm_tensor *build(struct lm_ctx *ctx, const struct weights *w, struct lm_tensor **in)
{
    *in = lm_new_tensor_2d(ctx, LM_TYPE_F32, K, T);
    (*in)->flags |= LM_FLAG_INPUT;
    struct lm_tensor *y = lm_silu(ctx, lm_mul_mat(ctx, w->w1, *in));
    y = lm_add(ctx, lm_mul_mat(ctx, w->w2, y), w->b);
    y = lm_mul_mat(ctx, w->w3, y);
    y->flags |= LM_FLAG_OUTPUT;
    return y;
}

static void compute(lm_backend_t *bes, int n_be, const struct weights *w, const float *input, float *out, int *n_splits,
                    int *n_copies)
{
    struct lm_ctx *ctx;
    struct lm_ctx_params p = {.mem_size = 64 * lm_tensor_overhead() + lm_graph_overhead(64), .no_alloc = true};
    lm_ctx_new(&p, &ctx);
    struct lm_tensor *in;
    struct lm_tensor *y = build(ctx, w, &in);
    struct lm_graph *g = lm_graph_new(ctx, 64);
    CHECK(lm_graph_expand(g, y) == LM_OK);
    struct lm_sched *s;
    CHECK(lm_sched_new(bes, n_be, 64, &s) == LM_OK);
    for (int round = 0; round < 2; round++) { /* allocate twice: the second reuses buffers */
        CHECK(lm_sched_alloc_graph(s, g) == LM_OK);
        CHECKF(lm_tensor_set(in, input, 0, sizeof(float) * K * T) == LM_OK, "round %d in->data %p buf %p", round,
               in->data, (void *)in->buffer);
        CHECK(lm_sched_graph_compute(s, g) == LM_OK);
        CHECK(lm_tensor_get(y, out, 0, sizeof(float) * K * T) == LM_OK);
        *n_splits = lm_sched_n_splits(s);
        *n_copies = lm_sched_n_copies(s);
        lm_sched_reset(s);
    }
    lm_sched_free(s);
    lm_ctx_free(ctx);
}

/* ref with an asynchronous upload: queued, done when the next graph starts
 * (in stream order) or at synchronize. */
struct upload {
    struct lm_tensor *t;
    const void *data;
    size_t size;
};
static struct upload queued[4];
static int n_queued, n_async;
static lm_status (*ref_compute)(lm_backend_t be, struct lm_graph *g);

static void flush_queue(void)
{
    for (int i = 0; i < n_queued; i++)
        CHECK(lm_tensor_set(queued[i].t, queued[i].data, 0, queued[i].size) == LM_OK);
    n_queued = 0;
}

static void async_set(lm_backend_t be, struct lm_tensor *t, const void *data, size_t offset, size_t size)
{
    (void)be;
    CHECK(offset == 0 && n_queued < 4);
    if (offset == 0 && n_queued < 4)
        queued[n_queued++] = (struct upload){t, data, size};
    n_async++;
}

static lm_status async_compute(lm_backend_t be, struct lm_graph *g)
{
    flush_queue();
    return ref_compute(be, g);
}

static void async_sync(lm_backend_t be)
{
    (void)be;
    flush_queue();
}

int main(void)
{
    static float w1[K * M], w2[M * M], b[M], w3[M * K], input[K * T];
    uint16_t w2h[M * M];
    for (int i = 0; i < K * M; i++)
        w1[i] = frand();
    for (int i = 0; i < M * M; i++) {
        w2[i] = frand();
        w2h[i] = 0;
    }
    extern void lm_fp32_to_fp16_row_generic(const float *x, void *y, int64_t n);
    lm_fp32_to_fp16_row_generic(w2, w2h, M * M);
    for (int i = 0; i < M; i++)
        b[i] = frand();
    for (int i = 0; i < M * K; i++)
        w3[i] = frand();
    for (int i = 0; i < K * T; i++)
        input[i] = frand() * 4;
    const float *data[4] = {w1, (const float *)w2h, b, w3};

    lm_backend_t cpu = NULL, ref = NULL;
    CHECK(lm_cpu_backend_new(2, &cpu) == LM_OK && lm_ref_backend_new(&ref) == LM_OK);

    struct weights single, split;
    make_weights(&single, false, data);
    make_weights(&split, true, data);
    float out_single[K * T], out_split[K * T];
    int ns, nc;
    compute(&cpu, 1, &single, input, out_single, &ns, &nc);
    CHECKF(ns == 1 && nc == 0, "single backend: %d splits, %d copies", ns, nc);

    lm_backend_t both[2] = {cpu, ref};
    compute(both, 2, &split, input, out_split, &ns, &nc);
    /* cpu: w1, silu | ref: w2 (its weight lives there; silu's output copied in)
     * | cpu: add b (host weight; the ref result copied back), w3 */
    CHECKF(ns == 3 && nc == 2, "split weights: %d splits, %d copies (want 3, 2)", ns, nc);
    double err = 0, ref_norm = 0;
    for (int i = 0; i < K * T; i++) {
        err += (out_split[i] - out_single[i]) * (out_split[i] - out_single[i]);
        ref_norm += out_single[i] * out_single[i];
    }
    /* ref and cpu differ only in the w2 product: cpu rounds the activations
     * to F16 for an F16 weight (ggml's dot type), ref does not: nmse ~1e-7 */
    CHECKF(ref_norm > 0 && err / ref_norm < 1e-5, "split result differs: nmse %g", err / ref_norm);
    printf("sched: 3 splits, 2 copies; cpu+ref vs cpu alone nmse %.3g\n", err / ref_norm);

    /* everything on ref when ref is preferred and the cpu holds nothing ref can't read */
    lm_backend_t ref_first[2] = {ref, cpu};
    compute(ref_first, 2, &split, input, out_split, &ns, &nc);
    CHECKF(ns == 3 && nc == 2, "ref first: %d splits, %d copies", ns, nc);

    /* the same split with ref uploading asynchronously: its one host input
     * (silu's output) goes through the queue, once per round */
    struct lm_backend aref = *ref;
    ref_compute = ref->iface.graph_compute;
    aref.iface.set_tensor_async = async_set;
    aref.iface.graph_compute = async_compute;
    aref.iface.synchronize = async_sync;
    float out_async[K * T];
    lm_backend_t both_async[2] = {cpu, &aref};
    compute(both_async, 2, &split, input, out_async, &ns, &nc);
    CHECKF(ns == 3 && nc == 2 && n_async == 2, "async uploads: %d splits, %d copies, %d async (want 3, 2, 2)", ns, nc,
           n_async);
    CHECK(memcmp(out_async, out_split, sizeof out_split) == 0);

    free_weights(&single);
    free_weights(&split);
    lm_backend_free(cpu);
    lm_backend_free(ref);
    return lm_test_summary();
}
