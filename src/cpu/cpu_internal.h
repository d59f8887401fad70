/* cpu_internal.h - CPU backend hooks for tests and benches (not for the engine). */
#ifndef LM_CPU_INTERNAL_H
#define LM_CPU_INTERNAL_H

#include "cpu/cpu.h"

/* As lm_cpu_backend_new, but n_threads is NOT clamped to the online cores:
 * tests use it to run uneven thread splits (3, 4 threads) on small machines.
 * Oversubscribed pools are correct, only slower. */
lm_status lm_cpu_backend_new_unclamped(int n_threads, lm_backend_t *out);

/* The threads graph_compute uses now. */
int lm_cpu_backend_n_threads(lm_backend_t be);

/* Turn a CPU backend's node fusion (cpu/fuse.c) on or off (tests compare
 * both; on by default, off for a context's backend made with
 * lm_backend_opts.no_fuse). Nothing for another backend. Call between graphs. */
void lm_cpu_backend_set_fuse(lm_backend_t be, bool on);
/* Whether a CPU backend fuses node pairs now (false for another backend). */
bool lm_cpu_backend_fuses(lm_backend_t be);

/* Chunks of one-token MUL_MAT groups that a thread took from another
 * thread's share (ops/matmul.c), process-wide since start-up: tests check that
 * the stealing path ran. */
long lm_cpu_mm_steals(void);

#endif
