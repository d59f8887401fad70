/* samplers.c - the candidate-array transforms of llama.h b1892 (llama_sample_*).
 *
 * Each function mirrors b1892's arithmetic step for step: float accumulators summed in
 * array order, expf/logf/powf from libm, and the libstdc++ sort order (sort.h), so the
 * arrays come out bit-identical. Functions work in place on the caller's array and
 * never reallocate it; the few that need scratch memory return LM_ERR_NOMEM and leave
 * the array unchanged when it cannot be had. Workload: once per generated token over
 * up to the whole vocabulary (tens of thousands of candidates).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sampling/sampling.h"
#include "sampling/internal.h"

void lm_sample_softmax(struct lm_token_data_array *c)
{
    if (c->size == 0)
        return;
    if (!c->sorted) {
        lm_sampling_sort_logit_desc(c->data, c->size);
        c->sorted = true;
    }
    const float max_l = c->data[0].logit;
    float cum_sum = 0.0f;
    for (size_t i = 0; i < c->size; i++) {
        float p = expf(c->data[i].logit - max_l);
        c->data[i].p = p;
        cum_sum += p;
    }
    for (size_t i = 0; i < c->size; i++)
        c->data[i].p /= cum_sum;
}

/* llama_sample_top_k of b1892 as called internally (k is not special-cased at <= 0) */
static void top_k_b1892(struct lm_token_data_array *c, int32_t k, size_t min_keep)
{
    const int32_t keep = (int32_t)(uint32_t)min_keep; /* C++'s (int) min_keep */
    const int32_t size = (int32_t)(uint32_t)c->size;
    if (k < keep)
        k = keep;
    if (k > size)
        k = size;
    if (k < 0) /* only for absurd min_keep/size; b1892 would corrupt size here */
        k = 0;
    if (!c->sorted) {
        if (k == size)
            lm_sampling_sort_logit_desc(c->data, c->size);
        else
            lm_sampling_partial_sort_logit_desc(c->data, (size_t)k, c->size);
        c->sorted = true;
    }
    c->size = (size_t)k;
}

void lm_sample_top_k(struct lm_token_data_array *c, int32_t k, size_t min_keep)
{
    if (k <= 0)
        k = (int32_t)(uint32_t)c->size;
    top_k_b1892(c, k, min_keep);
}

void lm_sample_top_p(struct lm_token_data_array *c, float p, size_t min_keep)
{
    if (p >= 1.0f)
        return;
    lm_sample_softmax(c);
    float cum_sum = 0.0f;
    size_t last_idx = c->size;
    for (size_t i = 0; i < c->size; i++) {
        cum_sum += c->data[i].p;
        if (cum_sum >= p && i + 1 >= min_keep) {
            last_idx = i + 1;
            break;
        }
    }
    c->size = last_idx;
}

void lm_sample_min_p(struct lm_token_data_array *c, float p, size_t min_keep)
{
    if (p <= 0.0f || c->size == 0)
        return;
    lm_sample_softmax(c);
    const float scale = c->data[0].p;
    size_t i = 1; /* the first token always stays */
    for (; i < c->size; i++)
        if (c->data[i].p < p * scale && i >= min_keep)
            break;
    c->size = i;
}

/* |second derivative| of the sorted p curve at i (b1892's second_derivatives[i]) */
static float abs_second_derivative(const struct lm_token_data *d, size_t i)
{
    const float d1a = d[i].p - d[i + 1].p;
    const float d1b = d[i + 1].p - d[i + 2].p;
    return fabsf(d1a - d1b);
}

void lm_sample_tail_free(struct lm_token_data_array *c, float z, size_t min_keep)
{
    if (z >= 1.0f || c->size <= 2)
        return;
    lm_sample_softmax(c);
    const size_t n2 = c->size - 2; /* number of second derivatives */
    float sum = 0.0f;
    for (size_t i = 0; i < n2; i++)
        sum += abs_second_derivative(c->data, i);
    const bool normalise = sum > 1e-6f;
    const float uniform = 1.0f / (float)n2;

    float cum_sum = 0.0f;
    size_t last_idx = c->size;
    for (size_t i = 0; i < n2; i++) {
        cum_sum += normalise ? abs_second_derivative(c->data, i) / sum : uniform;
        if (cum_sum > z && i >= min_keep) {
            last_idx = i;
            break;
        }
    }
    c->size = last_idx;
}

lm_status lm_sample_typical(struct lm_token_data_array *c, float p, size_t min_keep)
{
    if (p >= 1.0f || c->size == 0)
        return LM_OK;
    const size_t n = c->size;
    struct lm_sampling_sort_key *keys = malloc(n * sizeof *keys);
    struct lm_token_data *kept = malloc(n * sizeof *kept);
    if (!keys || !kept) {
        free(keys);
        free(kept);
        return LM_ERR_NOMEM;
    }
    lm_sample_softmax(c);
    float entropy = 0.0f;
    for (size_t i = 0; i < n; i++)
        entropy += -c->data[i].p * logf(c->data[i].p);
    for (size_t i = 0; i < n; i++) {
        keys[i].key = fabsf(-logf(c->data[i].p) - entropy);
        keys[i].index = (uint32_t)i;
    }
    lm_sampling_sort_keys_asc(keys, n);

    float cum_sum = 0.0f;
    size_t last_idx = n;
    for (size_t i = 0; i < n; i++) {
        cum_sum += c->data[keys[i].index].p;
        if (cum_sum > p && i >= min_keep - 1) { /* size_t wrap at min_keep 0, as b1892 */
            last_idx = i + 1;
            break;
        }
    }
    for (size_t i = 0; i < last_idx; i++)
        kept[i] = c->data[keys[i].index];
    memcpy(c->data, kept, last_idx * sizeof *kept);
    c->size = last_idx;
    c->sorted = false;
    free(keys);
    free(kept);
    return LM_OK;
}

void lm_sample_temp(struct lm_token_data_array *c, float t)
{
    for (size_t i = 0; i < c->size; i++)
        c->data[i].logit /= t;
}

void lm_sample_entropy(struct lm_token_data_array *c, float min_temp, float max_temp, float exponent)
{
    if (c->size <= 1)
        return;
    const float max_entropy = -logf(1.0f / (float)c->size);
    lm_sample_softmax(c);
    float entropy = 0.0f;
    for (size_t i = 0; i < c->size; i++) {
        const float prob = c->data[i].p;
        if (prob > 0.0f)
            entropy -= prob * logf(prob);
    }
    const float normalized = entropy / max_entropy;
    const float dyn_temp = min_temp + (max_temp - min_temp) * powf(normalized, exponent);
    for (size_t i = 0; i < c->size; i++)
        c->data[i].logit /= dyn_temp;

    /* b1971 recomputes p in double precision */
    const double max_l = c->data[0].logit;
    double cum_sum = 0.0;
    for (size_t i = 0; i < c->size; i++) {
        const double p = exp((double)c->data[i].logit - max_l);
        c->data[i].p = (float)p;
        cum_sum += p;
    }
    for (size_t i = 0; i < c->size; i++)
        c->data[i].p = (float)((double)c->data[i].p / cum_sum);
}

static int cmp_token(const void *a, const void *b)
{
    const int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* occurrences of id in the ascending array s[0..n) */
static size_t count_sorted(const int32_t *s, size_t n, int32_t id)
{
    size_t lo = 0, hi = n;
    while (lo < hi) { /* first index with s[i] >= id */
        size_t mid = lo + (hi - lo) / 2;
        if (s[mid] < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    size_t end = lo;
    while (end < n && s[end] == id)
        end++;
    return end - lo;
}

lm_status lm_sample_repetition_penalties(struct lm_token_data_array *c, const int32_t *last, size_t n,
                                         float penalty_repeat, float penalty_freq, float penalty_present)
{
    if (n == 0 || (penalty_repeat == 1.0f && penalty_freq == 0.0f && penalty_present == 0.0f))
        return LM_OK;
    if (!last)
        return LM_ERR_INVALID_ARG;
    int32_t *sorted = malloc(n * sizeof *sorted);
    if (!sorted)
        return LM_ERR_NOMEM;
    memcpy(sorted, last, n * sizeof *sorted);
    qsort(sorted, n, sizeof *sorted, cmp_token);

    for (size_t i = 0; i < c->size; i++) {
        const size_t count = count_sorted(sorted, n, c->data[i].id);
        if (count == 0)
            continue;
        /* CTRL divides; multiplying negative logits keeps the penalty a penalty */
        if (c->data[i].logit <= 0)
            c->data[i].logit *= penalty_repeat;
        else
            c->data[i].logit /= penalty_repeat;
        c->data[i].logit -= (float)count * penalty_freq + (float)(count > 0) * penalty_present;
    }
    c->sorted = false;
    free(sorted);
    return LM_OK;
}

/* x = log(softmax(x)), computed as b1892's llama_log_softmax */
static void log_softmax(float *x, size_t n)
{
    size_t imax = 0;
    for (size_t i = 1; i < n; i++)
        if (x[imax] < x[i])
            imax = i;
    const float max_l = x[imax];
    float sum = 0.0f;
    for (size_t i = 0; i < n; i++) {
        const float p = expf(x[i] - max_l);
        sum += p;
        x[i] = p;
    }
    for (size_t i = 0; i < n; i++)
        x[i] = logf(x[i] / sum);
}

void lm_sample_apply_guidance(float *logits, float *logits_guidance, size_t n_vocab, float scale)
{
    if (n_vocab == 0)
        return;
    log_softmax(logits, n_vocab);
    log_softmax(logits_guidance, n_vocab);
    for (size_t i = 0; i < n_vocab; i++) {
        const float g = logits_guidance[i];
        logits[i] = scale * (logits[i] - g) + g;
    }
}

lm_status lm_sample_cfg(struct lm_token_data_array *c, float *guidance_logits, size_t n_vocab, float scale)
{
    if (!guidance_logits || c->size != n_vocab || c->sorted)
        return LM_ERR_INVALID_ARG;
    if (n_vocab == 0)
        return LM_OK;
    float *base = malloc(n_vocab * sizeof *base);
    if (!base)
        return LM_ERR_NOMEM;
    for (size_t i = 0; i < n_vocab; i++)
        base[i] = c->data[i].logit;
    lm_sample_apply_guidance(base, guidance_logits, n_vocab, scale);
    for (size_t i = 0; i < n_vocab; i++)
        c->data[i].logit = base[i];
    free(base);
    return LM_OK;
}
