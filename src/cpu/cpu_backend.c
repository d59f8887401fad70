/* cpu_backend.c - the "cpu" backend: vtable, constructor, registry entry.
 *
 * Tensors are read and written in place through tensor->data: any host buffer
 * type works for compute (and arena tensors with buffer == NULL), but the
 * scheduler is told (supports_buft) that only lm_host_buft() is this
 * backend's own memory. Threads: default one per online core, never more
 * (set_n_threads clamps). The executor (exec.c) owns the pool and work buffer.
 */
#include <stdlib.h>

#include "core/log.h"
#include "cpu/cpu.h"
#include "cpu/cpu_internal.h"
#include "cpu/exec.h"
#include "cpu/kernels/kernels.h"
#include "cpu/threadpool.h"

struct cpu_ctx {
    struct lm_cpu_exec *exec;
    bool clamp; /* clamp thread counts to the online cores */
};

static int clamp_threads(const struct cpu_ctx *c, int n)
{
    int cores = lm_cpu_n_cores();
    if (n <= 0)
        return cores;
    return c->clamp && n > cores ? cores : n;
}

static const char *cpu_get_name(lm_backend_t be)
{
    (void)be;
    return "cpu";
}

static void cpu_free(lm_backend_t be)
{
    struct cpu_ctx *c = be->context;
    lm_cpu_exec_free(c->exec);
    free(c);
    free(be);
}

static lm_buft cpu_default_buft(lm_backend_t be)
{
    (void)be;
    return lm_host_buft();
}

static lm_status cpu_graph_compute(lm_backend_t be, struct lm_graph *g)
{
    struct cpu_ctx *c = be->context;
    return lm_cpu_exec_graph(c->exec, g);
}

static bool cpu_supports_op(lm_backend_t be, const struct lm_tensor *op)
{
    (void)be;
    return op && lm_cpu_supports_op(op);
}

static bool cpu_supports_buft(lm_backend_t be, lm_buft buft)
{
    (void)be;
    return buft == lm_host_buft() || buft == lm_cpu_repack_buft();
}

static void cpu_set_n_threads(lm_backend_t be, int n_threads)
{
    struct cpu_ctx *c = be->context;
    lm_cpu_exec_set_threads(c->exec, clamp_threads(c, n_threads));
}

static const struct lm_backend_i cpu_iface = {
    .get_name = cpu_get_name,
    .free = cpu_free,
    .get_default_buffer_type = cpu_default_buft,
    .set_tensor_async = NULL,
    .get_tensor_async = NULL,
    .synchronize = NULL,
    .graph_compute = cpu_graph_compute,
    .supports_op = cpu_supports_op,
    .supports_buft = cpu_supports_buft,
    .set_n_threads = cpu_set_n_threads,
};

static lm_status backend_new(int n_threads, bool clamp, lm_backend_t *out)
{
    if (!out)
        return LM_ERR_INVALID_ARG;
    struct lm_backend *be = calloc(1, sizeof *be);
    struct cpu_ctx *c = calloc(1, sizeof *c);
    if (!be || !c)
        goto out_nomem;
    c->clamp = clamp;
    c->exec = lm_cpu_exec_new(clamp_threads(c, n_threads));
    if (!c->exec)
        goto out_nomem;
    be->iface = cpu_iface;
    be->context = c;
    LM_LOG_DBG("cpu backend: %d threads, kernels %s\n", lm_cpu_exec_threads(c->exec),
               lm_cpu_isa_name(lm_cpu_kernels()->isa));
    *out = be;
    return LM_OK;

out_nomem:
    free(c);
    free(be);
    return LM_ERR_NOMEM;
}

/* A CPU backend with n_threads threads (<= 0: one per online core; clamped to
 * the online cores). The caller frees it with lm_backend_free. */
lm_status lm_cpu_backend_new(int n_threads, lm_backend_t *out) { return backend_new(n_threads, true, out); }

/* Tests only: no clamp to the online cores (cpu_internal.h). */
lm_status lm_cpu_backend_new_unclamped(int n_threads, lm_backend_t *out) { return backend_new(n_threads, false, out); }

/* Threads of a CPU backend (0 for another backend). */
int lm_cpu_backend_n_threads(lm_backend_t be)
{
    return lm_backend_is_cpu(be) ? lm_cpu_exec_threads(((struct cpu_ctx *)be->context)->exec) : 0;
}

static lm_status reg_init(lm_backend_t *out) { return lm_cpu_backend_new(0, out); }

/* Fusion on or off for a CPU backend (cpu_internal.h); nothing for another backend. */
void lm_cpu_backend_set_fuse(lm_backend_t be, bool on)
{
    if (lm_backend_is_cpu(be))
        lm_cpu_exec_set_fuse(((struct cpu_ctx *)be->context)->exec, on);
}

/* Whether a CPU backend fuses (cpu_internal.h); false for another backend. */
bool lm_cpu_backend_fuses(lm_backend_t be)
{
    return lm_backend_is_cpu(be) && lm_cpu_exec_fuses(((struct cpu_ctx *)be->context)->exec);
}

/* The registry's init_threads: lm_cpu_backend_new, then the options that apply (fusion). */
static lm_status reg_init_threads(int n_threads, const struct lm_backend_opts *opts, lm_backend_t *out)
{
    lm_status st = lm_cpu_backend_new(n_threads, out);
    if (!st && opts && opts->no_fuse)
        lm_cpu_backend_set_fuse(*out, false);
    return st;
}

/* The placement hook: matrices only matmuls read, and tied embeddings (GET_ROWS
 * reads the repacked layout: ops/get_rows.c), go to the repacking buffer type
 * when they have a repacked layout (2-D only: MUL_MAT_ID reads 3-D expert
 * tensors plain); everything else is plain host memory. */
static lm_buft reg_weight_buft(const struct lm_tensor *w, unsigned flags)
{
    if ((flags & (LM_WEIGHT_MATMUL_ONLY | LM_WEIGHT_MATMUL_ROWS)) && w && lm_cpu_can_repack(w) && w->ne[2] == 1)
        return lm_cpu_repack_buft();
    return lm_host_buft();
}

static const struct lm_backend_reg cpu_reg = {
    .name = "cpu",
    .init = reg_init,
    .kind = LM_DEV_HOST,
    .init_threads = reg_init_threads,
    .default_buft = lm_host_buft,
    .weight_buft = reg_weight_buft,
};

/* The registry entry "cpu" (static; never freed). */
const struct lm_backend_reg *lm_cpu_backend_reg(void) { return &cpu_reg; }

/* True when be is a CPU backend (NULL: false). */
bool lm_backend_is_cpu(lm_backend_t be) { return be && be->iface.get_name == cpu_get_name; }
