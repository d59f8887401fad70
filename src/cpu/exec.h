/* exec.h - the CPU graph executor (internal to cpu/).
 *
 * One executor per backend: it owns the thread pool (made on first use, remade
 * when the thread count changes, and in a child process after fork(): the
 * parent's pool is then freed without joining, threadpool.h) and the work
 * buffer (grown when a graph needs more, never shrunk, so repeated graphs
 * allocate nothing). Not thread-safe: one graph at a time, from one calling
 * thread (which becomes thread 0).
 */
#ifndef LM_CPU_EXEC_H
#define LM_CPU_EXEC_H

#include <stdbool.h>

#include "core/tensor.h"

struct lm_cpu_exec;

/* A new executor for n_threads (>= 1) threads. NULL on OOM. */
struct lm_cpu_exec *lm_cpu_exec_new(int n_threads);
void lm_cpu_exec_free(struct lm_cpu_exec *ex); /* NULL: nothing */
void lm_cpu_exec_set_threads(struct lm_cpu_exec *ex, int n_threads);
int lm_cpu_exec_threads(const struct lm_cpu_exec *ex);
/* Compute the node pairs fuse.c fuses as one node (on, the default) or as two
 * (same bits). Not during a compute. */
void lm_cpu_exec_set_fuse(struct lm_cpu_exec *ex, bool on);
bool lm_cpu_exec_fuses(const struct lm_cpu_exec *ex);

/* Compute g's nodes in order. LM_ERR_INVALID_ARG when a node or source has
 * no data or lives in non-host memory, LM_ERR_UNSUPPORTED for a node
 * lm_cpu_supports_op rejects (checked before anything runs), LM_ERR_NOMEM
 * when the work buffer or threads cannot be made. */
lm_status lm_cpu_exec_graph(struct lm_cpu_exec *ex, struct lm_graph *g);

/* Whether the CPU ops can compute node t: a well-formed node (the core's op
 * rules) whose types the kernel table has kernels for. */
bool lm_cpu_supports_op(const struct lm_tensor *t);

#endif
