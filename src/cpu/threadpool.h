/* threadpool.h - persistent worker threads for the CPU backend (internal).
 *
 * A pool of n threads has n-1 workers; the thread calling lm_tp_run is thread
 * 0 of every job. A job runs fn(arg, ith, n) once on each of the n threads and
 * lm_tp_run returns when all of them have returned. Inside a job,
 * lm_tp_barrier(tp) blocks until all n threads reach it; writes before a
 * barrier are visible to every thread after it.
 *
 * Waiting (for a job, at a barrier) spins briefly with a pause instruction,
 * then sleeps on a condition variable, so idle workers use no CPU between
 * jobs. One job at a time: a pool is driven by one thread (the backend's
 * user); lm_tp_run is not reentrant. The pool does not clamp n to the cores;
 * the backend does (lm_cpu_n_cores). To change the thread count, make a new pool.
 *
 * fork(): a child process has none of the workers of the pools its parent
 * made. Such a pool is an orphan in the child (lm_tp_orphaned, known from a
 * pthread_atfork child handler): the owner must not run it, and frees it
 * with lm_tp_free, which then neither joins threads nor touches the pool's
 * mutexes and condition variables (they may be in any state: the fork may
 * come while workers sleep, or during a job run by another thread), only
 * frees its memory. The owner then makes a new pool in the child (the CPU
 * executor does this at its next graph). The parent's pools are unaffected.
 */
#ifndef LM_CPU_THREADPOOL_H
#define LM_CPU_THREADPOOL_H

#include <stdbool.h>
#include <stdint.h>

#include "core/status.h"

struct lm_tp;

/* One claim counter, alone on its cache line (C only: CUDA sources include
 * this header through the op headers and use no claims). */
#ifndef __cplusplus
struct lm_tp_claim {
    _Alignas(64) _Atomic uint64_t v;
};
#endif
typedef void (*lm_tp_fn)(void *arg, int ith, int nth);

/* A pool of n threads (n >= 1; n-1 workers are started now). NULL-safe free.
 * LM_ERR_INVALID_ARG for n < 1, LM_ERR_NOMEM when threads cannot be made. */
lm_status lm_tp_new(int n, struct lm_tp **out);
/* Stop and join the workers and free the pool; an orphan (made before a
 * fork, in the child): free its memory only. NULL: nothing. Not while a job
 * runs in this process. */
void lm_tp_free(struct lm_tp *tp);
/* True in a child process for a pool made before the fork (its workers do
 * not exist here): never lm_tp_run it, lm_tp_free it and make a new one.
 * One relaxed atomic load: cheap enough to ask before every job. */
bool lm_tp_orphaned(const struct lm_tp *tp);
/* Threads per job. */
int lm_tp_size(const struct lm_tp *tp);
/* Run fn on all threads of the pool; the caller is thread 0. */
void lm_tp_run(struct lm_tp *tp, lm_tp_fn fn, void *arg);
/* Wait for all threads of the current job (no-op for a 1-thread pool). */
void lm_tp_barrier(struct lm_tp *tp);
/* n claim counters (n = lm_tp_size) for handing out work between two
 * barriers without a barrier of its own: each is 0 when the phase starts
 * (the last arrival at a barrier zeroes them after a phase that called this)
 * and the threads change them with atomic operations of their choice. Call
 * it from every thread that uses them, inside the job. */
#ifndef __cplusplus
struct lm_tp_claim *lm_tp_claims(struct lm_tp *tp);
#endif
/* How many times worker threads went to sleep (tests: idle workers sleep). */
long lm_tp_sleeps(const struct lm_tp *tp);

/* Online cores (sysconf, read once per process), at least 1. */
int lm_cpu_n_cores(void);

#endif
