/* test_api_progress.c - llama_model_params.progress_callback:
 *  - with and without mmap (and with the CPU's repacking on or off), the
 *    callback is called with non-decreasing values in [0, 1], more than once
 *    for a multi-tensor model loaded into memory, the last call being 1.0,
 *    and it gets its user pointer;
 *  - returning false aborts the load cleanly: NULL model, no leak (the
 *    sanitizer build checks), and a later load still works. */
#include <stdlib.h>

#include "util_api.h"

struct rec {
    int n_calls;
    float last;
    bool monotonic, in_range;
    int abort_at; /* return false on this call (1-based); 0: never */
};

static bool on_progress(float p, void *user)
{
    struct rec *r = user;
    r->n_calls++;
    if (p < r->last)
        r->monotonic = false;
    if (!(p >= 0.0f && p <= 1.0f))
        r->in_range = false;
    r->last = p;
    return r->abort_at == 0 || r->n_calls < r->abort_at;
}

static struct llama_model *load(bool use_mmap, struct rec *r)
{
    struct llama_model_params mp = llama_model_default_params();
    mp.use_mmap = use_mmap;
    mp.progress_callback = on_progress;
    mp.progress_callback_user_data = r;
    return llama_load_model_from_file(lm_test_shared("models/stories260K.gguf"), mp);
}

static void check_full_load(bool use_mmap)
{
    struct rec r = {.monotonic = true, .in_range = true};
    struct llama_model *m = load(use_mmap, &r);
    CHECK(m != NULL);
    CHECK(r.monotonic);
    CHECK(r.in_range);
    CHECK(r.last == 1.0f);
    /* without mmap every tensor is read (or repacked): one call per tensor */
    CHECK(use_mmap ? r.n_calls >= 1 : r.n_calls > 2);
    llama_free_model(m);
}

static void check_abort(bool use_mmap, int at)
{
    struct rec r = {.monotonic = true, .in_range = true, .abort_at = at};
    struct llama_model *m = load(use_mmap, &r);
    CHECK(m == NULL);
    CHECK(r.n_calls == at); /* no call after the one that said stop */
    llama_free_model(m);
}

int main(void)
{
    api_test_init();
    for (int repack = 0; repack < 2; repack++) {
        if (repack)
            unsetenv("LAMINA_NO_REPACK");
        else
            setenv("LAMINA_NO_REPACK", "1", 1);
        check_full_load(true);
        check_full_load(false);
        check_abort(false, 1);
        check_abort(false, 2);
        check_abort(true, 1); /* the final 1.0 call (or the first) aborts too */
    }
    /* a load after aborted ones works */
    struct llama_model *m = api_load("models/stories260K.gguf");
    CHECK(m != NULL);
    llama_free_model(m);
    llama_backend_free();
    return lm_test_summary();
}
