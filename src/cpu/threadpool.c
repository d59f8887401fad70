/* threadpool.c - the CPU backend's persistent threads, job hand-off and barrier.
 *
 * Both "wait for the next job" and "wait at a barrier" use one primitive, an
 * event: a generation counter that waiters watch. A waiter spins (pause) for
 * a bounded number of checks, then sleeps on a condition variable after
 * registering in `sleepers`; a signaller bumps the generation and takes the
 * mutex to broadcast only when someone sleeps. Correctness of the sleep path
 * (no lost wake-up): the waiter increments sleepers then re-reads gen, the
 * signaller increments gen then reads sleepers, all seq_cst, so at least one
 * of them sees the other's write; the waiter holds the mutex from its check
 * until pthread_cond_wait releases it, and the signaller broadcasts under it.
 *
 * Barrier: a counter of arrivals; the last arrival resets it and signals the
 * barrier event. A job ends with a barrier, so lm_tp_run returns only after
 * every worker has finished fn, and job parameters are never overwritten
 * while a worker may still read them.
 *
 * Claim counters (lm_tp_claims): the last arrival also zeroes them, before
 * signalling, when the phase that ends used them (one flag read otherwise):
 * every thread's claims happen before its arrival (acq_rel), the zeroing
 * before the signal, so the next phase starts from zero on every thread.
 *
 * fork(): the child has only the forking thread, none of the workers. A
 * pthread_atfork child handler (registered with the first pool) bumps a
 * process-wide fork generation; a pool remembers the generation it was made
 * in, and one from an older generation is an orphan: its workers do not
 * exist here and its mutexes and condition variables may have been in any
 * state at the fork (a worker asleep in pthread_cond_wait, one holding a
 * mutex). Nothing touches them again: the orphan is never run, and
 * lm_tp_free only frees its heap memory (no join: glibc reclaims the missing
 * threads' stacks in the child; no destroy: destroying a condition variable
 * with waiters that will never leave blocks forever).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>

#include "cpu/threadpool.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define cpu_relax() _mm_pause()
#elif defined(__aarch64__)
#define cpu_relax() __asm__ volatile("yield")
#else
#define cpu_relax() ((void)0)
#endif

/* Checks before sleeping (one pause each, ~10-30 ns on current x86): at a
 * barrier ~100-200 us (threads of one node finish at slightly different
 * times; a sleep there would cost a wake-up per node), between jobs ~50-100 us
 * (between decodes the main thread samples; workers should then go idle).
 * A pool with more threads than online cores never spins: the thread being
 * waited for may need the very core a spinner holds. */
#define SPIN_BARRIER (1 << 13)
#define SPIN_JOB (1 << 12)

struct event {
    atomic_uint gen;
    atomic_int sleepers;
    pthread_mutex_t mu;
    pthread_cond_t cv;
};

struct worker {
    struct lm_tp *tp;
    int ith;
    pthread_t thread;
};

struct lm_tp {
    int n;
    int spin_barrier, spin_job; /* 0 when oversubscribed */
    struct worker *workers; /* [n-1]: threads 1..n-1 */
    int n_started;
    /* g_fork_gen when made: another value means made before a fork (an orphan) */
    unsigned fork_gen;

    /* the current job: written by thread 0 before signalling `job` */
    lm_tp_fn fn;
    void *arg;
    atomic_bool stop;
    struct event job;

    atomic_int bar_count;
    struct event bar;

    struct lm_tp_claim *claims; /* [n], zero at the start of every phase */
    atomic_bool claims_used;    /* this phase called lm_tp_claims */

    atomic_long sleeps;
};

/* Forks this process descends through since the first pool was made (the
 * child handler runs in the child only, while it has one thread). */
static atomic_uint g_fork_gen;
static pthread_once_t g_atfork_once = PTHREAD_ONCE_INIT;
static bool g_atfork_ok;

static void on_fork_child(void) { atomic_fetch_add_explicit(&g_fork_gen, 1, memory_order_relaxed); }

static void register_atfork(void) { g_atfork_ok = pthread_atfork(NULL, NULL, on_fork_child) == 0; }

static int event_init(struct event *e)
{
    atomic_init(&e->gen, 0);
    atomic_init(&e->sleepers, 0);
    if (pthread_mutex_init(&e->mu, NULL))
        return -1;
    if (pthread_cond_init(&e->cv, NULL)) {
        pthread_mutex_destroy(&e->mu);
        return -1;
    }
    return 0;
}

static void event_destroy(struct event *e)
{
    pthread_cond_destroy(&e->cv);
    pthread_mutex_destroy(&e->mu);
}

/* Return once e->gen != seen. */
static void event_wait(struct lm_tp *tp, struct event *e, unsigned seen, int spin)
{
    for (int i = 0; i < spin; i++) {
        if (atomic_load_explicit(&e->gen, memory_order_acquire) != seen)
            return;
        cpu_relax();
    }
    pthread_mutex_lock(&e->mu);
    atomic_fetch_add(&e->sleepers, 1);
    atomic_fetch_add_explicit(&tp->sleeps, 1, memory_order_relaxed);
    while (atomic_load(&e->gen) == seen)
        pthread_cond_wait(&e->cv, &e->mu);
    atomic_fetch_sub(&e->sleepers, 1);
    pthread_mutex_unlock(&e->mu);
}

static void event_signal(struct event *e)
{
    atomic_fetch_add(&e->gen, 1);
    if (atomic_load(&e->sleepers) > 0) {
        pthread_mutex_lock(&e->mu);
        pthread_cond_broadcast(&e->cv);
        pthread_mutex_unlock(&e->mu);
    }
}

/* The last arrival, before it signals: zero the claim counters if the phase used them. */
static void claims_reset(struct lm_tp *tp)
{
    if (!atomic_load_explicit(&tp->claims_used, memory_order_relaxed))
        return;
    for (int i = 0; i < tp->n; i++)
        atomic_store_explicit(&tp->claims[i].v, 0, memory_order_relaxed);
    atomic_store_explicit(&tp->claims_used, false, memory_order_relaxed);
}

/* Called by every thread of the current job; returns when all have arrived. */
void lm_tp_barrier(struct lm_tp *tp)
{
    if (tp->n <= 1) {
        claims_reset(tp);
        return;
    }
    /* read the generation before arriving, so the last arrival's bump is seen */
    unsigned gen = atomic_load_explicit(&tp->bar.gen, memory_order_acquire);
    if (atomic_fetch_add_explicit(&tp->bar_count, 1, memory_order_acq_rel) == tp->n - 1) {
        claims_reset(tp);
        atomic_store_explicit(&tp->bar_count, 0, memory_order_relaxed);
        event_signal(&tp->bar);
    } else {
        event_wait(tp, &tp->bar, gen, tp->spin_barrier);
    }
}

/* The claim counters of the current phase. See threadpool.h. */
struct lm_tp_claim *lm_tp_claims(struct lm_tp *tp)
{
    if (!atomic_load_explicit(&tp->claims_used, memory_order_relaxed))
        atomic_store_explicit(&tp->claims_used, true, memory_order_relaxed);
    return tp->claims;
}

static void *worker_main(void *p)
{
    struct worker *w = p;
    struct lm_tp *tp = w->tp;
    unsigned seen = 0;
    for (;;) {
        event_wait(tp, &tp->job, seen, tp->spin_job);
        seen = atomic_load_explicit(&tp->job.gen, memory_order_acquire);
        if (atomic_load(&tp->stop))
            break;
        tp->fn(tp->arg, w->ith, tp->n);
        lm_tp_barrier(tp);
    }
    return NULL;
}

static void stop_workers(struct lm_tp *tp)
{
    atomic_store(&tp->stop, true);
    event_signal(&tp->job);
    for (int i = 0; i < tp->n_started; i++)
        pthread_join(tp->workers[i].thread, NULL);
    tp->n_started = 0;
}

/* Starts n-1 workers; on failure stops those already started. See threadpool.h. */
lm_status lm_tp_new(int n, struct lm_tp **out)
{
    if (n < 1 || !out)
        return LM_ERR_INVALID_ARG;
    pthread_once(&g_atfork_once, register_atfork);
    if (!g_atfork_ok) /* pthread_atfork fails only for want of memory */
        return LM_ERR_NOMEM;
    struct lm_tp *tp = calloc(1, sizeof *tp);
    if (!tp)
        return LM_ERR_NOMEM;
    tp->n = n;
    tp->fork_gen = atomic_load_explicit(&g_fork_gen, memory_order_relaxed);
    const bool own_cores = n <= lm_cpu_n_cores();
    tp->spin_barrier = own_cores ? SPIN_BARRIER : 0;
    tp->spin_job = own_cores ? SPIN_JOB : 0;
    atomic_init(&tp->stop, false);
    atomic_init(&tp->bar_count, 0);
    atomic_init(&tp->sleeps, 0);
    atomic_init(&tp->claims_used, false);
    tp->claims = aligned_alloc(sizeof *tp->claims, (size_t)n * sizeof *tp->claims);
    if (!tp->claims)
        goto out_free_tp;
    for (int i = 0; i < n; i++)
        atomic_init(&tp->claims[i].v, 0);
    if (event_init(&tp->job))
        goto out_free_claims;
    if (event_init(&tp->bar))
        goto out_destroy_job;
    tp->workers = calloc((size_t)n, sizeof *tp->workers);
    if (!tp->workers)
        goto out_destroy_bar;
    for (int i = 0; i < n - 1; i++) {
        tp->workers[i].tp = tp;
        tp->workers[i].ith = i + 1;
        if (pthread_create(&tp->workers[i].thread, NULL, worker_main, &tp->workers[i]))
            goto out_stop;
        tp->n_started++;
    }
    *out = tp;
    return LM_OK;

out_stop:
    stop_workers(tp);
    free(tp->workers);
out_destroy_bar:
    event_destroy(&tp->bar);
out_destroy_job:
    event_destroy(&tp->job);
out_free_claims:
    free(tp->claims);
out_free_tp:
    free(tp);
    return LM_ERR_NOMEM;
}

/* Whether tp was made before a fork this process went through. See threadpool.h. */
bool lm_tp_orphaned(const struct lm_tp *tp)
{
    return tp->fork_gen != atomic_load_explicit(&g_fork_gen, memory_order_relaxed);
}

/* Stops and joins the workers, frees the pool; an orphan's memory only
 * (see the top of this file); NULL: nothing. */
void lm_tp_free(struct lm_tp *tp)
{
    if (!tp)
        return;
    if (!lm_tp_orphaned(tp)) {
        stop_workers(tp);
        event_destroy(&tp->bar);
        event_destroy(&tp->job);
    }
    free(tp->workers);
    free(tp->claims);
    free(tp);
}

/* Threads per job (workers + caller). */
int lm_tp_size(const struct lm_tp *tp) { return tp->n; }

/* Times a thread of this pool went to sleep (statistics, tests). */
long lm_tp_sleeps(const struct lm_tp *tp) { return atomic_load(&((struct lm_tp *)tp)->sleeps); }

/* Hands fn to the workers, runs it as thread 0, waits for all (one thread: a plain call). */
void lm_tp_run(struct lm_tp *tp, lm_tp_fn fn, void *arg)
{
    if (tp->n == 1) {
        fn(arg, 0, 1);
        lm_tp_barrier(tp); /* resets the claim counters */
        return;
    }
    tp->fn = fn;
    tp->arg = arg;
    event_signal(&tp->job);
    fn(arg, 0, tp->n);
    lm_tp_barrier(tp);
}

/* Online cores from sysconf, in [1, 4096], read on the first call: glibc
 * answers by reading sysfs (tens of microseconds), and every decode asks.
 * Thread-safe: racing first calls store the same value. */
int lm_cpu_n_cores(void)
{
    static atomic_int cached;
    int c = atomic_load_explicit(&cached, memory_order_relaxed);
    if (c == 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        c = n >= 1 ? (n > 4096 ? 4096 : (int)n) : 1;
        atomic_store_explicit(&cached, c, memory_order_relaxed);
    }
    return c;
}
