/* util_api.h - helpers for the API tests (tests/api/). */
#ifndef LM_UTIL_API_H
#define LM_UTIL_API_H

#include <stddef.h>

#include "llama.h"
#include "lm_test.h"

/* llama_backend_init and a log sink that stays quiet unless LAMINA_TEST_VERBOSE is set. */
void api_test_init(void);
/* A model under ../shared (relative path); NULL on failure. */
struct llama_model *api_load(const char *rel);
/* A context with the given sizes, 2 threads, seed 1234. */
struct llama_context *api_ctx(struct llama_model *m, uint32_t n_ctx, uint32_t n_batch, bool logits_all);
llama_token api_argmax(const float *logits, int n);
/* max |a - b| (NaN counts as infinite). */
double api_max_diff(const float *a, const float *b, size_t n);

#endif
