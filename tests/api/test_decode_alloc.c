/* test_decode_alloc.c - a decode of the shape of the last one allocates
 * nothing (model/context.c's promise): the batch's per-token arrays are made
 * with the context, the mask's host copy and the logits only grow, and the
 * kept graph runs again. The test counts the process's malloc, calloc,
 * realloc and aligned_alloc calls (this program defines them over glibc's
 * own entry points) across 16 one-token decodes of stories260K with 1 and 2
 * threads, after a first token that settles every buffer, and across the
 * second of two batches of 8 tokens in two new sequences. (A decode of a new
 * shape builds and plans its graph, which allocates.) Skipped under the
 * sanitizers, which own malloc.
 */
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include "api/api.h"
#include "util_api.h"

#if defined(__SANITIZE_ADDRESS__)
#define LM_NO_MALLOC_COUNT 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define LM_NO_MALLOC_COUNT 1
#endif
#endif

#ifndef LM_NO_MALLOC_COUNT
extern void *__libc_malloc(size_t n);
extern void *__libc_calloc(size_t n, size_t m);
extern void *__libc_realloc(void *p, size_t n);
extern void *__libc_memalign(size_t a, size_t n);

static atomic_long n_alloc;
static atomic_bool counting;

static void count(void)
{
    if (atomic_load_explicit(&counting, memory_order_relaxed))
        atomic_fetch_add_explicit(&n_alloc, 1, memory_order_relaxed);
}

void *malloc(size_t n)
{
    count();
    return __libc_malloc(n);
}

void *calloc(size_t n, size_t m)
{
    count();
    return __libc_calloc(n, m);
}

void *realloc(void *p, size_t n)
{
    count();
    return __libc_realloc(p, n);
}

void *aligned_alloc(size_t a, size_t n)
{
    count();
    return __libc_memalign(a, n);
}

/* allocations made by n_tok one-token decodes of sequence 0 from pos */
static long decode_tokens(struct llama_context *ctx, int pos, int n_tok)
{
    llama_token tok = 1;
    atomic_store(&n_alloc, 0);
    atomic_store(&counting, true);
    for (int i = 0; i < n_tok; i++) {
        if (llama_decode(ctx, llama_batch_get_one(&tok, 1, pos + i, 0)) != 0) {
            atomic_store(&counting, false);
            return -1;
        }
        tok = 1 + (tok * 7 + 3) % 400;
    }
    atomic_store(&counting, false);
    return atomic_load(&n_alloc);
}

static void check_threads(struct llama_model *m, int n_threads)
{
    struct llama_context_params cp = api_ctx_params(256, 64);
    cp.n_threads = cp.n_threads_batch = (uint32_t)n_threads;
    struct llama_context *ctx = llama_new_context_with_model(m, cp);
    CHECK(ctx != NULL);
    if (!ctx)
        return;
    const llama_token prompt[8] = {1, 403, 407, 261, 378, 432, 383, 286};
    CHECK(llama_decode(ctx, llama_batch_get_one((llama_token *)prompt, 8, 0, 0)) == 0);
    CHECK(decode_tokens(ctx, 8, 1) >= 0); /* the first token settles the one-token buffers */
    long n = decode_tokens(ctx, 9, 16);
    CHECKF(n == 0, "%d threads: 16 one-token decodes made %ld allocations", n_threads, n);
    /* two batches of 8 in a row (sequences 1 and 2): the second has the
     * first's shape, runs its kept graph and allocates nothing */
    struct llama_batch b = llama_batch_init(8, 0, 1);
    long nb = -1;
    for (int s = 1; s <= 2; s++) {
        for (int i = 0; i < 8; i++) {
            b.token[i] = prompt[i];
            b.pos[i] = i;
            b.n_seq_id[i] = 1;
            b.seq_id[i][0] = s;
            b.logits[i] = i == 7;
        }
        b.n_tokens = 8;
        atomic_store(&n_alloc, 0);
        atomic_store(&counting, true);
        int rc = llama_decode(ctx, b);
        atomic_store(&counting, false);
        CHECK(rc == 0);
        nb = atomic_load(&n_alloc);
    }
    CHECKF(nb == 0, "%d threads: a batch of the last one's shape made %ld allocations", n_threads, nb);
    llama_batch_free(b);
    llama_free(ctx);
}
#endif

int main(void)
{
#ifdef LM_NO_MALLOC_COUNT
    printf("SKIP: the sanitizers own malloc\n");
    return 0;
#else
    struct llama_model *m = api_start("models/stories260K.gguf");
    CHECK(m != NULL);
    if (!m)
        return lm_test_summary();
    check_threads(m, 1);
    check_threads(m, 2);
    llama_free_model(m);
    return lm_test_summary();
#endif
}
