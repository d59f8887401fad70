/* sampling.h - token samplers and the context RNG, bit-compatible with llama.cpp b1892.
 *
 * Every sampler works IN PLACE on the caller's candidate array: it may reorder the
 * elements, shrink `size`, and set or clear `sorted`; it never frees or reallocates
 * `data`. Probabilities `p` are recomputed from `logit` by every sampler that needs
 * them (as b1892 does), so callers need only fill `id` and `logit`.
 *
 * Compatibility: the arithmetic (float expf/logf sums in the same order), the sort
 * order of equal logits (the algorithm of libstdc++'s std::sort and std::partial_sort),
 * and the random draw (std::mt19937 + std::discrete_distribution<int> of libstdc++) are
 * reproduced, so the same seed and logits give the same tokens as llama.cpp b1892 built
 * with GCC's libstdc++. Deliberate differences are listed in docs/sampling.md.
 *
 * Nothing here keeps global state; all functions are thread-safe on distinct arrays
 * and RNGs. The llama_* API in src/api/ is a thin layer over these functions.
 */
#ifndef LM_SAMPLING_H
#define LM_SAMPLING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

/* Same layout as llama.h's llama_token_data (the API layer casts and static-asserts). */
struct lm_token_data {
    int32_t id;  /* token id */
    float logit; /* log-odds */
    float p;     /* probability, written by softmax */
};

/* Same layout as llama.h's llama_token_data_array. */
struct lm_token_data_array {
    struct lm_token_data *data; /* caller-owned; never freed or reallocated here */
    size_t size;                /* live elements (samplers shrink it) */
    bool sorted;                /* true when data is sorted by logit, descending */
};

/* ---- RNG: std::mt19937 with libstdc++'s state layout ---------------------------- */

#define LM_RNG_N 624
#define LM_RNG_DEFAULT_SEED 0xFFFFFFFFu   /* LLAMA_DEFAULT_SEED: "seed from the clock" */
#define LM_RNG_STATE_MAX (64 * 1024)      /* LLAMA_MAX_RNG_STATE */

struct lm_rng {
    uint32_t x[LM_RNG_N]; /* the twister state words */
    uint32_t p;           /* next word to temper, 0..624 (624: regenerate first) */
};

/* Seed exactly like std::mt19937(seed) / .seed(seed). Never fails. */
void lm_rng_seed(struct lm_rng *rng, uint32_t seed);

/* The seed b1892 uses for `seed`: LM_RNG_DEFAULT_SEED becomes (uint32_t)time(NULL),
 * anything else is returned unchanged. */
uint32_t lm_rng_resolve_seed(uint32_t seed);

/* Next 32-bit output (operator() of std::mt19937). */
uint32_t lm_rng_next(struct lm_rng *rng);

/* std::generate_canonical<double, 53>(rng) of libstdc++: consumes two outputs a, b
 * and returns (a + b * 2^32) / 2^64 rounded to double, clamped below 1. */
double lm_rng_canonical(struct lm_rng *rng);

/* One draw of libstdc++'s std::discrete_distribution<int> built from w[0..n): returns
 * an index in [0, n). Fewer than two weights return 0 without touching the RNG, as
 * libstdc++ does. The weights are converted to double, normalised by their double
 * sum, accumulated, and the first cumulative value >= u is chosen (lower_bound).
 * Returns LM_ERR_NOMEM if the cumulative table cannot be allocated. */
lm_status lm_rng_discrete(struct lm_rng *rng, const float *w, size_t n, size_t *out_index);

/* Serialize the state as the text libstdc++'s `operator<<(ostream&, mt19937)` writes:
 * the 624 words in decimal, each followed by one space, then the index p. Writes at
 * most `cap` bytes (with a terminating NUL when it fits) and returns the text length
 * without the NUL, like snprintf; the text is always shorter than LM_RNG_STATE_MAX. */
size_t lm_rng_state_write(const struct lm_rng *rng, char *buf, size_t cap);

/* Parse text written by lm_rng_state_write or by libstdc++ (`operator>>`): 625
 * whitespace-separated decimal numbers; anything after them is ignored, as the
 * istream does. On error (short text, a word above 2^32-1, p above 624) returns
 * LM_ERR_CORRUPT and leaves *rng unchanged. */
lm_status lm_rng_state_read(struct lm_rng *rng, const char *text, size_t len);

/* ---- samplers (llama_sample_*) --------------------------------------------------- */

/* Sort by logit descending (unless c->sorted) and set p = softmax(logit). An empty
 * array is left alone (b1892 asserts). */
void lm_sample_softmax(struct lm_token_data_array *c);

/* Keep the k highest logits (at least min_keep, at most size), sorted descending.
 * k <= 0 means "no top-k": the array is only sorted (b1892 itself kept min_keep
 * tokens for k <= 0; llama.cpp changed that in b2098). */
void lm_sample_top_k(struct lm_token_data_array *c, int32_t k, size_t min_keep);

/* Nucleus: keep the smallest prefix (after softmax) whose p sum reaches p, and at
 * least min_keep tokens. p >= 1 is a no-op. */
void lm_sample_top_p(struct lm_token_data_array *c, float p, size_t min_keep);

/* Keep tokens whose p is at least p * p_max (and at least min_keep). p <= 0 or an
 * empty array is a no-op. */
void lm_sample_min_p(struct lm_token_data_array *c, float p, size_t min_keep);

/* Tail-free sampling with parameter z. z >= 1 or size <= 2 is a no-op. */
void lm_sample_tail_free(struct lm_token_data_array *c, float z, size_t min_keep);

/* Locally typical sampling with mass p; p >= 1 is a no-op. Leaves the array ordered
 * by |surprise - entropy| (sorted = false). LM_ERR_NOMEM if scratch memory fails
 * (the array is then unchanged). */
lm_status lm_sample_typical(struct lm_token_data_array *c, float p, size_t min_keep);

/* Divide every logit by t. t = 0 divides by zero exactly as b1892 does (logits become
 * +-inf or NaN; callers wanting greedy at t <= 0 must branch themselves). */
void lm_sample_temp(struct lm_token_data_array *c, float t);

/* Entropy-based dynamic temperature (llama_sample_entropy of b1971): softmax, then
 * temperature min_temp + (max_temp - min_temp) * (H / H_max)^exponent, then p is
 * recomputed in double. Arrays of size <= 1 are left alone. */
void lm_sample_entropy(struct lm_token_data_array *c, float min_temp, float max_temp, float exponent);

/* CTRL repetition penalty plus OpenAI frequency/presence penalties over the n tokens
 * of last[]. No-op for n == 0 or (repeat 1, freq 0, present 0). Otherwise sets
 * sorted = false. LM_ERR_NOMEM if scratch memory fails (array unchanged). */
lm_status lm_sample_repetition_penalties(struct lm_token_data_array *c, const int32_t *last, size_t n,
                                         float penalty_repeat, float penalty_freq, float penalty_present);

/* Classifier-free guidance on raw logits: both arrays (n_vocab floats each) are
 * log-softmaxed in place, then logits[i] = g + scale * (l - g). */
void lm_sample_apply_guidance(float *logits, float *logits_guidance, size_t n_vocab, float scale);

/* The older CFG form: c must hold the whole vocabulary unsorted (c->size == n_vocab,
 * !c->sorted, else LM_ERR_INVALID_ARG); the logits of c are replaced by the guided
 * log-probabilities. Like b1892, guidance_logits (the guidance context's logits) are
 * log-softmaxed in place. */
lm_status lm_sample_cfg(struct lm_token_data_array *c, float *guidance_logits, size_t n_vocab, float scale);

/* ---- token selection ------------------------------------------------------------- */

/* Argmax of the logits (the first one on ties). LM_ERR_INVALID_ARG if empty. */
lm_status lm_sample_greedy(const struct lm_token_data_array *c, int32_t *out_token);

/* Softmax, then one draw of std::discrete_distribution over p with rng (see
 * lm_rng_discrete). LM_ERR_INVALID_ARG if empty; LM_ERR_NOMEM on scratch failure. */
lm_status lm_sample_token(struct lm_token_data_array *c, struct lm_rng *rng, int32_t *out_token);

/* Mirostat 1.0 (tau, eta, m, n_vocab as in b1892): estimates s_hat from the top m
 * tokens, truncates to the derived k, samples, and writes the updated *mu. */
lm_status lm_sample_mirostat(struct lm_token_data_array *c, struct lm_rng *rng, float tau, float eta, int32_t m,
                             int32_t n_vocab, float *mu, int32_t *out_token);

/* Mirostat 2.0: drops tokens whose surprise -log2(p) exceeds *mu (keeping one),
 * samples, and writes the updated *mu. */
lm_status lm_sample_mirostat_v2(struct lm_token_data_array *c, struct lm_rng *rng, float tau, float eta, float *mu,
                                int32_t *out_token);

#endif
