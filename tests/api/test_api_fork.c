/* test_api_fork.c - a process that forks after decoding with 2 threads (as
 * Puma, Unicorn and Resque do after preloading a model): the child has none
 * of the parent's pool threads, so it must make its own pool to decode and
 * must not wait for the old ones when it frees the context or exits.
 *
 * The parent decodes a prompt with 2 threads (the pool exists and is idle),
 * then forks children that each do one thing:
 *  - decode the next token (2 threads), send its logits over a pipe, fork a
 *    grandchild that decodes once more with the child's new pool, free all;
 *  - decode with 1 thread (the old pool dropped), then with 2 (a new one);
 *  - free the context and model without decoding (a binding's GC at exit);
 *  - exit without freeing anything.
 * The parent waits for each with a 60 s limit (a hang fails, the child is
 * killed), wants exit status 0, then decodes the same next token itself and
 * wants the child's logits bit for bit (same state, same thread count).
 * (The CPU backend clamps threads to the online cores: on one core there is
 * no pool and this tests nothing beyond fork itself.) */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "util_api.h"

static const llama_token P[] = {1, 403, 407, 261, 378};
static const llama_token NEXT = 432;
static const llama_token B[] = {383, 286, 261, 376};

enum child_kind { CHILD_DECODE, CHILD_RETHREAD, CHILD_FREE_ONLY, CHILD_EXIT_ONLY };

static struct llama_model *M;
static struct llama_context *C;
static int NV;

/* Wait up to limit_s for pid; its exit status, or -1 when it hung (then it
 * is killed) or did not exit normally. */
static int wait_child(pid_t pid, int limit_s)
{
    struct timespec step = {0, 20 * 1000 * 1000};
    for (int i = 0; i < limit_s * 50; i++) {
        int status;
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid)
            return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        if (r < 0 && errno != EINTR)
            return -1;
        nanosleep(&step, NULL);
    }
    fprintf(stderr, "child %ld still running after %d s: killed\n", (long)pid, limit_s);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    return -1;
}

static bool finite_logits(const float *l, int n)
{
    for (int i = 0; i < n; i++)
        if (!(l[i] == l[i]) || l[i] > 1e30f || l[i] < -1e30f)
            return false;
    return true;
}

/* In the grandchild: one more decode on the child's own pool, then exit. */
static int grandchild(void)
{
    llama_token t = B[0];
    if (llama_decode(C, llama_batch_get_one(&t, 1, (llama_pos)(sizeof P / sizeof P[0]) + 1, 0)) != 0)
        return 20;
    if (!finite_logits(llama_get_logits(C), NV))
        return 21;
    llama_free(C);
    llama_free_model(M);
    return 0;
}

/* The child's work; its exit status (0: all well). */
static int child(enum child_kind kind, int fd)
{
    const llama_pos n_p = (llama_pos)(sizeof P / sizeof P[0]);
    llama_token t = NEXT;
    switch (kind) {
    case CHILD_DECODE: {
        if (llama_decode(C, llama_batch_get_one(&t, 1, n_p, 0)) != 0)
            return 10;
        const float *l = llama_get_logits(C);
        if (write(fd, l, (size_t)NV * sizeof(float)) != (ssize_t)((size_t)NV * sizeof(float)))
            return 11;
        fflush(NULL);
        pid_t g = fork();
        if (g < 0)
            return 12;
        if (g == 0)
            exit(grandchild());
        if (wait_child(g, 60) != 0)
            return 13;
        break;
    }
    case CHILD_RETHREAD: {
        /* 1 thread drops the old pool (never joined), 2 make a new one */
        llama_set_n_threads(C, 1, 1);
        if (llama_decode(C, llama_batch_get_one((llama_token *)B, 4, n_p, 0)) != 0)
            return 30;
        llama_set_n_threads(C, 2, 2);
        t = B[0];
        if (llama_decode(C, llama_batch_get_one(&t, 1, n_p + 4, 0)) != 0)
            return 31;
        if (!finite_logits(llama_get_logits(C), NV))
            return 32;
        break;
    }
    case CHILD_FREE_ONLY: break;
    case CHILD_EXIT_ONLY: return 0;
    }
    llama_free(C);
    llama_free_model(M);
    llama_backend_free();
    return 0;
}

/* Fork a child of this kind; its logits (CHILD_DECODE) into out. */
static void run_child(enum child_kind kind, float *out)
{
    int fds[2];
    CHECK(pipe(fds) == 0);
    fflush(NULL); /* no stdio buffer written twice */
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid < 0)
        return;
    if (pid == 0) {
        close(fds[0]);
        exit(child(kind, fds[1]));
    }
    close(fds[1]);
    int st = wait_child(pid, 60);
    CHECKF(st == 0, "child %d: exit status %d (-1: hung or killed)", (int)kind, st);
    if (out) {
        size_t want = (size_t)NV * sizeof(float), got = 0;
        while (got < want) {
            ssize_t r = read(fds[0], (char *)out + got, want - got);
            if (r <= 0)
                break;
            got += (size_t)r;
        }
        CHECKF(got == want, "child %d sent %zu of %zu logit bytes", (int)kind, got, want);
    }
    close(fds[0]);
}

int main(void)
{
    M = api_start("models/stories260K.gguf");
    if (!M)
        return lm_test_summary();
    NV = llama_n_vocab(M);
    C = api_ctx(M, 64, 64, false); /* 2 threads, 2 batch threads */
    CHECK(C != NULL);
    if (!C)
        return lm_test_summary();
    CHECK(llama_decode(C, llama_batch_get_one((llama_token *)P, 5, 0, 0)) == 0);

    float *from_child = calloc((size_t)NV, sizeof(float));
    run_child(CHILD_DECODE, from_child);
    run_child(CHILD_RETHREAD, NULL);
    run_child(CHILD_FREE_ONLY, NULL);
    run_child(CHILD_EXIT_ONLY, NULL);

    /* the parent's pool is untouched: the same next decode, the same bits */
    llama_token t = NEXT;
    CHECK(llama_decode(C, llama_batch_get_one(&t, 1, 5, 0)) == 0);
    const float *l = llama_get_logits(C);
    CHECK(finite_logits(l, NV));
    CHECKF(api_max_diff(l, from_child, (size_t)NV) == 0.0, "child's next logits differ from the parent's by %g",
           api_max_diff(l, from_child, (size_t)NV));
    free(from_child);
    llama_free(C);
    llama_free_model(M);
    llama_backend_free();
    return lm_test_summary();
}
