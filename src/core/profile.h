/* profile.h - a process-wide per-op profiler of the CPU graph executor
 * (`lamina bench --profile`, docs/performance.md "Where the time goes").
 *
 * While on, every thread of cpu/exec.c's node loop records each computing
 * node into its own slot (per-thread arrays on separate cache lines, so the
 * threads never share a line); a snapshot sums the slots per op. A fused
 * node pair (cpu/fuse.c) is one execution with its own row, keyed by its
 * first op and labelled with both ("RMS_NORM+MUL").
 *
 * Not thread-safe: turn it on/off and reset/snapshot only between graph
 * computes, with one graph computing at a time (the executor reads the flag
 * once per graph; two graphs computing at once would mix their counts).
 * Threads with index >= LM_PROFILE_MAX_THREADS are not recorded.
 */
#ifndef LM_PROFILE_H
#define LM_PROFILE_H

#include <stdbool.h>
#include <stdint.h>

#include "core/tensor.h"

#define LM_PROFILE_MAX_THREADS 256
#define LM_PROFILE_MAX_ROWS (2 * LM_OP_COUNT) /* each op alone, and as the first op of a fused pair */

struct lm_profile_row {
    enum lm_op op;     /* the node's op; of a fused pair, the first node's */
    enum lm_op fused;  /* LM_OP_NONE, or the second op of a fused pair */
    char name[40];     /* lm_op_name(op), "+" and the second op's name when fused */
    int64_t calls;     /* node executions */
    int64_t wall_ns;   /* thread 0's time from the node's start to the end of the barrier after it */
    int64_t busy_ns;   /* every recorded thread's time in the op (not the barrier after it), summed */
    int64_t thread_ns; /* wall_ns times the threads of each execution (the busy time possible) */
};

/* Turn recording on or off (off at start-up). Between computes only. */
void lm_profile_enable(bool on);
/* Whether recording is on: a plain read of a static flag. */
bool lm_profile_on(void);
/* Zero every counter. Between computes only. */
void lm_profile_reset(void);

/* One node execution on thread ith of nth: op (and second, LM_OP_NONE unless
 * a fused pair), the thread's compute time busy_ns and, for thread 0, the
 * node's wall time wall_ns (the other threads' wall_ns is ignored). Called by
 * the executor; each thread writes only its own slot. */
void lm_profile_add(int ith, int nth, enum lm_op op, enum lm_op second, int64_t busy_ns, int64_t wall_ns);

/* The counters summed over threads: the rows with calls > 0, in op order
 * (plain ops first, then fused pairs), written to rows; returns how many. */
int lm_profile_snapshot(struct lm_profile_row rows[LM_PROFILE_MAX_ROWS]);

#endif
