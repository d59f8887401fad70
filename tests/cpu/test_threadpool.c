/* test_threadpool.c - the CPU backend's thread pool and backend contract:
 * every thread runs every job exactly once, barriers separate phases (each
 * thread sees every other thread's writes of the previous phase), claim
 * counters start every phase at zero, idle workers go to sleep, many tiny
 * graphs in a row compute correctly, thread counts clamp to the online cores,
 * graph_compute rejects bad graphs with a status instead of crashing, and a
 * child process after fork() sees the parent's pools as orphans, frees them
 * without waiting for their (absent) workers and runs pools of its own, also
 * when the fork came while another thread was running a job.
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cpu/cpu.h"
#include "cpu/cpu_internal.h"
#include "cpu/kernels/kernels.h"
#include "cpu/threadpool.h"
#include "lm_test.h"
#include "ref/ref.h"
#include "util_cpu.h"

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* ---- jobs ---- */

struct count_job {
    atomic_int calls;
    atomic_int mask; /* bit ith set by thread ith */
    int nth_seen;
};

static void count_fn(void *arg, int ith, int nth)
{
    struct count_job *j = arg;
    atomic_fetch_add(&j->calls, 1);
    atomic_fetch_or(&j->mask, 1 << ith);
    if (ith == 0)
        j->nth_seen = nth;
}

static void test_jobs(int n)
{
    struct lm_tp *tp = NULL;
    CHECK(lm_tp_new(n, &tp) == LM_OK);
    if (!tp)
        return;
    CHECK(lm_tp_size(tp) == n);
    int bad = 0;
    for (int rep = 0; rep < 2000; rep++) {
        struct count_job j = {0};
        lm_tp_run(tp, count_fn, &j);
        /* lm_tp_run returned: every thread has finished */
        bad += atomic_load(&j.calls) != n || atomic_load(&j.mask) != (1 << n) - 1 || j.nth_seen != n;
    }
    CHECKF(bad == 0, "%d-thread pool: %d of 2000 jobs not run exactly once per thread", n, bad);
    lm_tp_free(tp);
}

/* ---- barriers ---- */

#define PHASES 500

struct barrier_job {
    struct lm_tp *tp;
    int slot[8];      /* written by thread i in each phase (plain stores) */
    atomic_int errors;
};

static void barrier_fn(void *arg, int ith, int nth)
{
    struct barrier_job *j = arg;
    for (int ph = 1; ph <= PHASES; ph++) {
        j->slot[ith] = ph;
        lm_tp_barrier(j->tp);
        for (int i = 0; i < nth; i++) /* everyone's phase-ph write is visible */
            if (j->slot[i] != ph)
                atomic_fetch_add(&j->errors, 1);
        lm_tp_barrier(j->tp); /* nobody overwrites before all have read */
    }
}

static void test_barrier(int n)
{
    struct lm_tp *tp = NULL;
    CHECK(lm_tp_new(n, &tp) == LM_OK);
    if (!tp)
        return;
    struct barrier_job j = {.tp = tp};
    lm_tp_run(tp, barrier_fn, &j);
    CHECKF(atomic_load(&j.errors) == 0, "%d threads: %d stale reads after a barrier", n, atomic_load(&j.errors));
    lm_tp_free(tp);
}

/* ---- claim counters ---- */

#define CLAIM_ITEMS 97

struct claim_job {
    struct lm_tp *tp;
    atomic_int taken[CLAIM_ITEMS]; /* times item i was claimed in this phase */
    atomic_int errors;
};

/* Every phase: all threads take the items of one counter (a different one
 * each phase, some phases none) with fetch_add; after a barrier thread 0
 * checks each was taken exactly once, i.e. the counter started at zero. */
static void claim_fn(void *arg, int ith, int nth)
{
    struct claim_job *j = arg;
    for (int ph = 0; ph < PHASES; ph++) {
        if (ph % 3 != 2) {
            struct lm_tp_claim *c = lm_tp_claims(j->tp);
            uint64_t i;
            while ((i = atomic_fetch_add(&c[ph % nth].v, 1)) < CLAIM_ITEMS)
                atomic_fetch_add(&j->taken[i], 1);
        }
        lm_tp_barrier(j->tp);
        if (ith == 0)
            for (int i = 0; i < CLAIM_ITEMS; i++)
                if (atomic_exchange(&j->taken[i], 0) != (ph % 3 != 2))
                    atomic_fetch_add(&j->errors, 1);
        lm_tp_barrier(j->tp);
    }
}

static void test_claims(int n)
{
    struct lm_tp *tp = NULL;
    CHECK(lm_tp_new(n, &tp) == LM_OK);
    if (!tp)
        return;
    for (int job = 0; job < 3; job++) { /* and zero again in the next job */
        struct claim_job j = {.tp = tp};
        lm_tp_run(tp, claim_fn, &j);
        CHECKF(atomic_load(&j.errors) == 0, "%d threads, job %d: %d items not claimed exactly once", n, job,
               atomic_load(&j.errors));
    }
    lm_tp_free(tp);
}

static double cpu_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Idle workers must sleep, not spin: the process burns (almost) no CPU
 * while the pool waits 300 ms between two jobs. */
static void test_idle_sleep(int n)
{
    struct lm_tp *tp = NULL;
    CHECK(lm_tp_new(n, &tp) == LM_OK);
    if (!tp)
        return;
    struct count_job j = {0};
    lm_tp_run(tp, count_fn, &j);
    double c0 = cpu_seconds();
    sleep_ms(300);
    double used = cpu_seconds() - c0;
    CHECKF(used < 0.05, "%d-thread pool used %.3f s of CPU while idle for 0.3 s", n, used);
    CHECK(lm_tp_sleeps(tp) >= n - 1);
    j = (struct count_job){0};
    lm_tp_run(tp, count_fn, &j); /* and wakes up for the next job */
    CHECK(atomic_load(&j.calls) == n);
    lm_tp_free(tp);
}

static void test_pool_args(void)
{
    struct lm_tp *tp = (struct lm_tp *)&tp;
    CHECK(lm_tp_new(0, &tp) == LM_ERR_INVALID_ARG);
    CHECK(lm_tp_new(-3, &tp) == LM_ERR_INVALID_ARG);
    lm_tp_free(NULL);
    CHECK(lm_cpu_n_cores() >= 1);
}

/* ---- the backend ---- */

static void test_clamp(void)
{
    const int cores = lm_cpu_n_cores();
    lm_backend_t be = NULL;
    CHECK(lm_cpu_backend_new(cores + 1000, &be) == LM_OK);
    CHECK(lm_cpu_backend_n_threads(be) == cores);
    lm_backend_set_n_threads(be, 1);
    CHECK(lm_cpu_backend_n_threads(be) == 1);
    lm_backend_set_n_threads(be, 100000);
    CHECK(lm_cpu_backend_n_threads(be) == cores);
    lm_backend_set_n_threads(be, 0);
    CHECK(lm_cpu_backend_n_threads(be) == cores);
    lm_backend_free(be);
    CHECK(lm_cpu_backend_new(0, &be) == LM_OK);
    CHECK(lm_cpu_backend_n_threads(be) == cores);
    lm_backend_free(be);
    CHECK(lm_cpu_backend_new_unclamped(cores + 2, &be) == LM_OK);
    CHECK(lm_cpu_backend_n_threads(be) == cores + 2);
    lm_backend_free(be);
    CHECK(lm_cpu_backend_new(1, NULL) == LM_ERR_INVALID_ARG);
}

static void test_identity(void)
{
    lm_backend_t be = NULL;
    CHECK(lm_cpu_backend_reg() && strcmp(lm_cpu_backend_reg()->name, "cpu") == 0);
    CHECK(lm_cpu_backend_reg()->init(&be) == LM_OK);
    CHECK(lm_backend_is_cpu(be) && !lm_backend_is_cpu(NULL));
    CHECK(strcmp(lm_backend_name(be), "cpu") == 0);
    CHECK(lm_backend_default_buft(be) == lm_host_buft());
    CHECK(lm_backend_supports_buft(be, lm_host_buft()));
    CHECK(!lm_backend_supports_buft(be, lm_ref_buft())); /* host memory, but another backend's */
    lm_backend_t ref = NULL;
    if (lm_ref_backend_new(&ref) == LM_OK) {
        CHECK(!lm_backend_is_cpu(ref));
        lm_backend_free(ref);
    }
    CHECK(strcmp(lm_cpu_isa_name(LM_ISA_GENERIC), "generic") == 0 && strcmp(lm_cpu_isa_name(LM_ISA_AVX2), "avx2") == 0);
    CHECK(lm_cpu_isa_limit(LM_ISA_GENERIC) == LM_ISA_GENERIC);
    CHECK(lm_cpu_isa_limit((enum lm_cpu_isa)(LM_ISA_COUNT - 1)) == lm_cpu_isa_best());
    for (int isa = 0; isa <= (int)lm_cpu_isa_best(); isa++)
        CHECK(lm_cpu_isa_limit((enum lm_cpu_isa)isa) == (enum lm_cpu_isa)isa && lm_cpu_kernels_for((enum lm_cpu_isa)isa));
    CHECK(strcmp(lm_cpu_isa_name(LM_ISA_AMX), "amx") == 0 && strcmp(lm_cpu_isa_name(LM_ISA_COUNT), "?") == 0);
    lm_cpu_isa_limit(lm_cpu_isa_best());
    lm_backend_free(be);
}

/* Thousands of one-node graphs on a multi-thread backend (decode-like). */
static void test_tiny_graphs(void)
{
    lm_backend_t be = NULL;
    CHECK(lm_cpu_backend_new_unclamped(3, &be) == LM_OK);
    struct lm_ctx *ctx = uc_ctx(1 << 20);
    if (!be || !ctx)
        return;
    struct lm_tensor *a = lm_new_tensor_1d(ctx, LM_TYPE_F32, 5);
    struct lm_tensor *b = lm_new_tensor_1d(ctx, LM_TYPE_F32, 5);
    struct lm_tensor *c = lm_add(ctx, lm_mul(ctx, a, b), b);
    struct lm_graph *g = lm_graph_new(ctx, 16);
    CHECK(g && lm_graph_expand(g, c) == LM_OK);
    int bad = 0;
    for (int it = 0; it < 3000; it++) {
        for (int i = 0; i < 5; i++) {
            ((float *)a->data)[i] = (float)(it + i);
            ((float *)b->data)[i] = 2.0f;
        }
        if (lm_backend_graph_compute(be, g) != LM_OK) {
            bad++;
            continue;
        }
        for (int i = 0; i < 5; i++)
            bad += ((float *)c->data)[i] != 2.0f * (float)(it + i) + 2.0f;
        if (it % 1000 == 999)
            sleep_ms(20); /* let the workers fall asleep in between */
    }
    CHECKF(bad == 0, "tiny graphs: %d wrong", bad);
    lm_ctx_free(ctx);
    lm_backend_free(be);
}

/* graph_compute checks before computing: status codes, no crash. */
static void test_bad_graphs(void)
{
    lm_backend_t be = NULL;
    CHECK(lm_cpu_backend_new(2, &be) == LM_OK);
    if (!be)
        return;
    /* a node without data (metadata-only arena) */
    struct lm_ctx_params cp = {1 << 20, NULL, true};
    struct lm_ctx *meta = NULL;
    CHECK(lm_ctx_new(&cp, &meta) == LM_OK);
    struct lm_tensor *x = lm_new_tensor_1d(meta, LM_TYPE_F32, 4);
    struct lm_tensor *y = lm_scale(meta, x, 2.0f);
    struct lm_graph *g = lm_graph_new(meta, 8);
    CHECK(g && lm_graph_expand(g, y) == LM_OK);
    CHECK(lm_backend_graph_compute(be, g) == LM_ERR_INVALID_ARG);
    lm_ctx_free(meta);

    /* a node no constructor would make: ADD of F16 tensors */
    struct lm_ctx *ctx = uc_ctx(1 << 20);
    struct lm_tensor *h = lm_new_tensor_1d(ctx, LM_TYPE_F16, 4);
    struct lm_tensor *bad = lm_new_tensor_1d(ctx, LM_TYPE_F32, 4);
    bad->op = LM_OP_ADD;
    bad->src[0] = h;
    bad->src[1] = h;
    CHECK(!lm_backend_supports_op(be, bad));
    g = lm_graph_new(ctx, 8);
    CHECK(g && lm_graph_expand(g, bad) == LM_OK);
    CHECK(lm_backend_graph_compute(be, g) == LM_ERR_UNSUPPORTED);
    /* a MUL_MAT whose result shape does not fit its sources */
    struct lm_tensor *w = lm_new_tensor_2d(ctx, LM_TYPE_F32, 8, 3);
    struct lm_tensor *v = lm_new_tensor_2d(ctx, LM_TYPE_F32, 8, 2);
    struct lm_tensor *mm = lm_mul_mat(ctx, w, v);
    CHECK(mm && lm_backend_supports_op(be, mm));
    mm->ne[0] = 4;
    CHECK(!lm_backend_supports_op(be, mm));
    lm_ctx_free(ctx);
    lm_backend_free(be);
}

/* ---- fork ---- */

/* In the child: the parent's pool is an orphan, freed without a join; a new
 * pool runs jobs. The exit status says what failed (0: nothing). */
static int fork_child(struct lm_tp *old, int n)
{
    if (!lm_tp_orphaned(old))
        return 2;
    lm_tp_free(old); /* would wait forever for the parent's workers */
    struct lm_tp *tp = NULL;
    if (lm_tp_new(n, &tp) != LM_OK)
        return 3;
    int bad = lm_tp_orphaned(tp);
    for (int rep = 0; rep < 100; rep++) {
        struct count_job j = {0};
        lm_tp_run(tp, count_fn, &j);
        bad += atomic_load(&j.calls) != n;
    }
    lm_tp_free(tp);
    return bad ? 4 : 0;
}

/* Fork; the child runs fork_child(old, n) and _exits. The child's exit
 * status, or -1 when it did not end normally within 30 s (then killed). */
static int fork_and_wait(struct lm_tp *old, int n)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0)
        _exit(fork_child(old, n));
    for (int i = 0; i < 1500; i++) {
        int status;
        if (waitpid(pid, &status, WNOHANG) == pid)
            return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        sleep_ms(20);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    return -1;
}

struct busy {
    struct lm_tp *tp;
    atomic_bool stop;
    atomic_int jobs;
};

static void *busy_main(void *arg)
{
    struct busy *b = arg;
    while (!atomic_load(&b->stop)) {
        struct count_job j = {0};
        lm_tp_run(b->tp, count_fn, &j);
        atomic_fetch_add(&b->jobs, 1);
    }
    return NULL;
}

static void test_fork(int n)
{
    struct lm_tp *tp = NULL;
    CHECK(lm_tp_new(n, &tp) == LM_OK);
    if (!tp)
        return;
    struct count_job j = {0};
    lm_tp_run(tp, count_fn, &j);
    sleep_ms(50); /* the workers asleep on the condition variable */
    int st = fork_and_wait(tp, n);
    CHECKF(st == 0, "%d-thread pool, fork while idle: child status %d (-1: hung or killed)", n, st);
    CHECK(!lm_tp_orphaned(tp)); /* in the parent */
    j = (struct count_job){0};
    lm_tp_run(tp, count_fn, &j);
    CHECK(atomic_load(&j.calls) == n);

    /* another thread drives the pool, jobs in flight at the fork */
    struct busy b = {.tp = tp};
    pthread_t th;
    CHECK(pthread_create(&th, NULL, busy_main, &b) == 0);
    while (atomic_load(&b.jobs) < 10)
        sleep_ms(1);
    st = fork_and_wait(tp, n);
    CHECKF(st == 0, "%d-thread pool, fork during jobs: child status %d (-1: hung or killed)", n, st);
    atomic_store(&b.stop, true);
    pthread_join(th, NULL);
    lm_tp_free(tp);
}

int main(void)
{
    test_pool_args();
    for (int n = 1; n <= 4; n++) {
        test_jobs(n);
        test_barrier(n);
        test_claims(n);
    }
    test_idle_sleep(2);
    test_idle_sleep(4);
    test_clamp();
    test_identity();
    test_tiny_graphs();
    test_bad_graphs();
    test_fork(1);
    test_fork(3);
    return lm_test_summary();
}
