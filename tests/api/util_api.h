/* util_api.h - helpers for the API tests (tests/api/). */
#ifndef LM_UTIL_API_H
#define LM_UTIL_API_H

#include <stddef.h>

#include "llama.h"
#include "lm_test.h"

/* llama_backend_init and a log sink that stays quiet unless LAMINA_TEST_VERBOSE is set. */
void api_test_init(void);
/* api_test_init, then the model under ../shared at rel: a test's first step.
 * A model that does not load is a failed check (and NULL). */
struct llama_model *api_start(const char *rel);
/* A model under ../shared (relative path); NULL on failure. */
struct llama_model *api_load(const char *rel);
/* Context parameters with the given sizes, 2 threads, seed 1234 (the rest default). */
struct llama_context_params api_ctx_params(uint32_t n_ctx, uint32_t n_batch);
/* A context of api_ctx_params(n_ctx, n_batch) and logits_all. */
struct llama_context *api_ctx(struct llama_model *m, uint32_t n_ctx, uint32_t n_batch, bool logits_all);
llama_token api_argmax(const float *logits, int n);
/* max |a - b| (NaN counts as infinite). */
double api_max_diff(const float *a, const float *b, size_t n);
/* A scratch file path unique to this process: /tmp/lamina-api-<pid>-<name>
 * (static buffer per call slot: up to 8 live results). */
const char *api_tmp_path(const char *name);
/* Write n bytes to path; false on failure. */
bool api_write_file(const char *path, const void *data, size_t n);
/* A model loaded with explicit mmap / mlock choices (NULL on failure). */
struct llama_model *api_load_opts(const char *rel, bool use_mmap, bool use_mlock);
/* A malloc'd candidates array over n logits (ids 0..n-1, p 0, unsorted). */
llama_token_data_array api_candidates(const float *logits, int n);

/* ids[0..n) of sequence 0 at positions pos0.. in one batch, every token
 * with logits, copied into out [n * n_vocab]; false when the decode fails. */
bool api_decode_ids(struct llama_context *ctx, const llama_token *ids, int n, int pos0, float *out);
/* Every fixture of shared/fixtures/arch (README there), by name. */
extern const char *const api_arch_fixtures[];
extern const int api_n_arch_fixtures;
/* Up to cap token ids of fixture `name` (fixtures/arch/<name>.ids.txt) into
 * ids; the number read (0 when the file is missing). */
int api_fixture_ids(const char *name, llama_token *ids, int cap);

#endif
