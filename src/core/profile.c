/* profile.c - the per-op profiler's counters (see profile.h).
 *
 * Storage: one block of slots per thread index, each block aligned to a
 * cache line, so recording is plain adds to memory no other thread writes.
 * Slot k < LM_OP_COUNT counts op k alone; slot LM_OP_COUNT + k counts fused
 * pairs whose first op is k. The blocks (~3 KiB per thread) are zero pages
 * until a thread records.
 */
#include <stdio.h>
#include <string.h>

#include "core/profile.h"

struct slot {
    int64_t calls, wall_ns, busy_ns, thread_ns;
    int32_t second; /* fused slots: the pair's second op */
};

struct thread_slots {
    _Alignas(64) struct slot s[LM_PROFILE_MAX_ROWS];
};

static bool profile_on;
static struct thread_slots slots[LM_PROFILE_MAX_THREADS];

void lm_profile_enable(bool on) { profile_on = on; }

bool lm_profile_on(void) { return profile_on; }

void lm_profile_reset(void) { memset(slots, 0, sizeof slots); }

void lm_profile_add(int ith, int nth, enum lm_op op, enum lm_op second, int64_t busy_ns, int64_t wall_ns)
{
    if (ith < 0 || ith >= LM_PROFILE_MAX_THREADS || (unsigned)op >= LM_OP_COUNT)
        return;
    bool fused = second != LM_OP_NONE;
    struct slot *s = &slots[ith].s[(fused ? LM_OP_COUNT : 0) + op];
    s->busy_ns += busy_ns;
    if (fused)
        s->second = (int32_t)second;
    if (ith == 0) {
        s->calls++;
        s->wall_ns += wall_ns;
        s->thread_ns += wall_ns * nth;
    }
}

int lm_profile_snapshot(struct lm_profile_row rows[LM_PROFILE_MAX_ROWS])
{
    int n = 0;
    for (int k = 0; k < LM_PROFILE_MAX_ROWS; k++) {
        struct lm_profile_row r = {.op = (enum lm_op)(k % LM_OP_COUNT), .fused = LM_OP_NONE};
        for (int t = 0; t < LM_PROFILE_MAX_THREADS; t++) {
            const struct slot *s = &slots[t].s[k];
            r.calls += s->calls;
            r.wall_ns += s->wall_ns;
            r.busy_ns += s->busy_ns;
            r.thread_ns += s->thread_ns;
            if (k >= LM_OP_COUNT && s->second)
                r.fused = (enum lm_op)s->second;
        }
        if (r.calls == 0)
            continue;
        if (r.fused != LM_OP_NONE)
            snprintf(r.name, sizeof r.name, "%s+%s", lm_op_name(r.op), lm_op_name(r.fused));
        else
            snprintf(r.name, sizeof r.name, "%s", lm_op_name(r.op));
        rows[n++] = r;
    }
    return n;
}
