/* exec.c - the CPU graph executor: per-op dispatch table, work-buffer sizing,
 * and the node loop every thread runs.
 *
 * All threads walk the node list together: each computes its share of a node,
 * then all meet at one barrier before the next computing node (view ops and
 * leaves are skipped without a barrier). The kernel table is read once per
 * graph and passed to every op, so an ISA switch never lands mid-graph.
 * With the op profiler on (core/profile.h, read once per graph) the threads
 * run a second copy of the node loop that times every node; the results are
 * the same bytes, and with it off the check costs one branch per graph.
 *
 * Each op's compute and work functions are its row in cpu/op_table.c. A node
 * pair that fuses (cpu/fuse.c: RMS_NORM then MUL, SILU then MUL) runs as one
 * node, chosen while the threads walk the list; a node whose op has no
 * compute is refused before anything runs, unless it is a view or a leaf.
 */
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "core/log.h"
#include "core/op_rules.h"
#include "core/profile.h"
#include "core/time.h"
#include "cpu/exec.h"
#include "cpu/ops/ops.h"
#include "cpu/repack.h"

struct lm_cpu_exec {
    int n_threads;
    bool fuse;        /* compute fusable node pairs as one (fuse.c); on unless lm_cpu_exec_set_fuse */
    struct lm_tp *tp; /* NULL until a multi-thread graph runs */
    void *work;
    size_t work_cap;
};

/* A new executor (no threads yet: the pool is made by the first multi-thread graph). NULL on OOM. */
struct lm_cpu_exec *lm_cpu_exec_new(int n_threads)
{
    struct lm_cpu_exec *ex = calloc(1, sizeof *ex);
    if (ex) {
        ex->n_threads = n_threads < 1 ? 1 : n_threads;
        ex->fuse = true;
    }
    return ex;
}

/* Joins the pool (after a fork, the parent's pool: only freed) and frees the work buffer; NULL: nothing. */
void lm_cpu_exec_free(struct lm_cpu_exec *ex)
{
    if (!ex)
        return;
    lm_tp_free(ex->tp);
    free(ex->work);
    free(ex);
}

/* Thread count for the next graphs (>= 1); drops a pool of another size. Not during a compute. */
void lm_cpu_exec_set_threads(struct lm_cpu_exec *ex, int n_threads)
{
    n_threads = n_threads < 1 ? 1 : n_threads;
    if (ex->tp && lm_tp_size(ex->tp) != n_threads) {
        lm_tp_free(ex->tp);
        ex->tp = NULL;
    }
    ex->n_threads = n_threads;
}

/* Threads the next graph uses. */
int lm_cpu_exec_threads(const struct lm_cpu_exec *ex) { return ex->n_threads; }

/* Node fusion for the next graphs. Not during a compute. */
void lm_cpu_exec_set_fuse(struct lm_cpu_exec *ex, bool on) { ex->fuse = on; }

/* The fusion setting for the next graphs. */
bool lm_cpu_exec_fuses(const struct lm_cpu_exec *ex) { return ex->fuse; }

static bool readable(const struct lm_tensor *t)
{
    return t->data != NULL && (t->buffer == NULL || lm_buffer_is_host(t->buffer) || lm_tensor_is_repacked(t));
}

/* Check every computing node and size the work buffer for nth threads. */
static lm_status plan(const struct lm_graph *g, int nth, const struct lm_cpu_kernels *kern, size_t *work)
{
    size_t need = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const struct lm_tensor *t = g->nodes[i];
        const struct lm_cpu_op_row *e = lm_cpu_op_row(t->op);
        if (!e) {
            LM_LOG_ERR("cpu: node '%s' has unknown op %d\n", t->name, (int)t->op);
            return LM_ERR_UNSUPPORTED;
        }
        if (!lm_op_computes(t->op))
            continue;
        if (!lm_cpu_supports_op(t)) { /* false too for an op without a compute function */
            LM_LOG_ERR("cpu: op %s of '%s' not supported\n", lm_op_name(t->op), t->name);
            return LM_ERR_UNSUPPORTED;
        }
        bool ok = readable(t);
        for (int s = 0; s < LM_MAX_SRC && ok; s++)
            ok = !t->src[s] || readable(t->src[s]);
        if (!ok) {
            LM_LOG_ERR("cpu: node '%s' (%s) or a source has no host data\n", t->name, lm_op_name(t->op));
            return LM_ERR_INVALID_ARG;
        }
        if (e->work) {
            size_t w = e->work(t, nth, kern);
            need = w > need ? w : need;
        }
    }
    *work = need;
    return LM_OK;
}

struct exec_job {
    const struct lm_graph *g;
    void *wdata;
    size_t wsize;
    struct lm_tp *tp;
    const struct lm_cpu_kernels *kern;
    bool profile; /* lm_profile_on() when the graph started: the same for every thread */
    bool fuse;    /* the executor's fusion setting: the same for every thread */
};

/* Compute node i, or nodes i and i+1 as one when they fuse (fuse.c); returns
 * the index of the last node computed. */
static inline int compute_node(const struct lm_cpu_params *p, const struct lm_graph *g, int i, bool fuse)
{
    struct lm_tensor *t = g->nodes[i];
    enum lm_fuse kind = fuse && i + 1 < g->n_nodes ? lm_cpu_fuse_match(t, g->nodes[i + 1]) : LM_FUSE_NONE;
    if (kind != LM_FUSE_NONE) {
        lm_cpu_op_fused(p, kind, t, g->nodes[i + 1]);
        return i + 1;
    }
    lm_cpu_op_rows[t->op].compute(p, t);
    return i;
}

/* The node loop with per-op timing (core/profile.h): the same computes and
 * barriers between them, plus one barrier after the last node, so every
 * node's wall time on thread 0 ends when all threads are done with it. */
static void exec_nodes_profiled(const struct lm_cpu_params *p, const struct lm_graph *g, bool fuse)
{
    int64_t t0 = lm_time_ns();
    for (int i = 0; i < g->n_nodes; i++) {
        const struct lm_tensor *t = g->nodes[i];
        if (!lm_cpu_op_rows[t->op].compute)
            continue;
        int last = compute_node(p, g, i, fuse);
        int64_t t1 = lm_time_ns();
        lm_cpu_sync(p);
        int64_t t2 = lm_time_ns();
        lm_profile_add(p->ith, p->nth, t->op, last > i ? g->nodes[last]->op : LM_OP_NONE, t1 - t0, t2 - t0);
        t0 = t2;
        i = last;
    }
}

/* Every thread: the nodes in order, one barrier between computing nodes;
 * a fusable pair (fuse.c) runs as one node. Every thread sees the same graph
 * and makes the same fusion decisions, so the barriers stay in step. */
static void exec_worker(void *arg, int ith, int nth)
{
    const struct exec_job *job = arg;
    const struct lm_cpu_params p = {ith, nth, job->wdata, job->wsize, job->tp, job->kern};
    const struct lm_graph *g = job->g;
    const bool fuse = job->fuse;
    if (job->profile) {
        exec_nodes_profiled(&p, g, fuse);
        return;
    }
    bool first = true;
    for (int i = 0; i < g->n_nodes; i++) {
        if (!lm_cpu_op_rows[g->nodes[i]->op].compute)
            continue;
        if (!first)
            lm_cpu_sync(&p);
        first = false;
        i = compute_node(&p, g, i, fuse);
    }
}

static lm_status ensure_work(struct lm_cpu_exec *ex, size_t need)
{
    if (need <= ex->work_cap)
        return LM_OK;
    size_t cap = lm_cpu_pad(need + need / 4);
    void *w = aligned_alloc(LM_CPU_CACHE_LINE, cap);
    if (!w)
        return LM_ERR_NOMEM;
    free(ex->work);
    ex->work = w;
    ex->work_cap = cap;
    return LM_OK;
}

/* Plan (checks + work size), grow the work buffer if needed, run every node on the pool. See exec.h. */
lm_status lm_cpu_exec_graph(struct lm_cpu_exec *ex, struct lm_graph *g)
{
    if (!ex || !g)
        return LM_ERR_INVALID_ARG;
    const struct lm_cpu_kernels *kern = lm_cpu_kernels();
    const int nth = ex->n_threads;
    size_t need;
    lm_status st = plan(g, nth, kern, &need);
    if (st)
        return st;
    if ((st = ensure_work(ex, need)))
        return st;
    if (ex->tp && lm_tp_orphaned(ex->tp)) { /* made before a fork: its threads are the parent's */
        lm_tp_free(ex->tp);
        ex->tp = NULL;
    }
    if (nth > 1 && !ex->tp && (st = lm_tp_new(nth, &ex->tp)))
        return st;
    struct exec_job job = {g, ex->work, ex->work_cap, ex->tp, kern, lm_profile_on(), ex->fuse};
    if (nth > 1)
        lm_tp_run(ex->tp, exec_worker, &job);
    else
        exec_worker(&job, 0, 1);
    return LM_OK;
}
