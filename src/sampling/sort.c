/* sort.c - the two instantiations of the libstdc++-order sort the samplers need. */
#include "sampling/internal.h"

#define SORT_T struct lm_token_data
#define SORT_LESS(a, b) ((a)->logit > (b)->logit)
#define SORT_FN(name) logit_desc_##name
#include "sampling/sort_tmpl.h"

#define SORT_T struct lm_sampling_sort_key
#define SORT_LESS(a, b) ((a)->key < (b)->key)
#define SORT_FN(name) key_asc_##name
#include "sampling/sort_tmpl.h"

void lm_sampling_sort_logit_desc(struct lm_token_data *a, size_t n)
{
    logit_desc_sort(a, n);
}

void lm_sampling_partial_sort_logit_desc(struct lm_token_data *a, size_t mid, size_t n)
{
    logit_desc_partial_sort(a, mid, n);
}

void lm_sampling_sort_keys_asc(struct lm_sampling_sort_key *a, size_t n)
{
    key_asc_sort(a, n);
}
