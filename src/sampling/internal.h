/* internal.h - helpers shared inside src/sampling/ (not part of the module's API):
 * libstdc++-order sorts (see sort_tmpl.h) and the strided discrete draw. */
#ifndef LM_SAMPLING_INTERNAL_H
#define LM_SAMPLING_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "sampling/sampling.h"

/* A float key with its original position (typical sampling sorts positions by key). */
struct lm_sampling_sort_key {
    float key;
    uint32_t index;
};

/* std::sort(a, a + n, [](x, y) { return x.logit > y.logit; }). */
void lm_sampling_sort_logit_desc(struct lm_token_data *a, size_t n);

/* std::partial_sort(a, a + mid, a + n, same comparator). */
void lm_sampling_partial_sort_logit_desc(struct lm_token_data *a, size_t mid, size_t n);

/* std::sort of keys ascending (comparator x.key < y.key). */
void lm_sampling_sort_keys_asc(struct lm_sampling_sort_key *a, size_t n);

/* lm_rng_discrete over n floats found every stride bytes from w (e.g. the p field
 * of lm_token_data). */
lm_status lm_sampling_discrete_strided(struct lm_rng *rng, const float *w, size_t n, size_t stride,
                                       size_t *out_index);

#endif
