/* beam_api.c - llama.h: llama_beam_search, the deterministic beam search of
 * llama.cpp b1892 (llama_beam_search_data), over llama_decode.
 *
 * State: up to n_beams beams, each a token list (the tokens after the common
 * prefix already committed to the KV cache at positions < n_past), a
 * cumulative probability p (renormalised over the beams after every step) and
 * an end-of-beam flag that only the callback sets. One step:
 *   1. call back with the beams and the length of their common prefix; take
 *      back p and eob (the callback may change them);
 *   2. decode the common prefix at n_past (sequence 0) and drop it from every
 *      beam; n_past grows by its length;
 *   3. for each beam not at eob: decode its tokens at n_past (sequence 0) and
 *      propose its n_beams most likely next tokens with p * P(token); a beam at
 *      eob proposes itself unchanged;
 *   4. keep the n_beams best proposals (ties: the earlier proposal), then
 *      renormalise p.
 * The loop stops after n_predict steps, when every beam is at eob, or when
 * the most probable beam is at eob; the best beam is then reported alone with
 * last_call = true.
 *
 * Differences from b1892 (docs/api.md): before every decode the cells of
 * sequence 0 at positions >= n_past are removed, so a beam never attends to
 * another beam's tokens (b1892 left them in the cache); a beam with no tokens
 * uses the logits of the last committed position, not whatever was decoded
 * last; the search stops cleanly when a decode fails; n_beams must be in
 * [1, LM_BEAM_MAX]; at the end the cache holds positions < n_past only.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "core/log.h"
#include "core/time.h"

#define LM_BEAM_MAX 1024

struct beam {
    llama_token *tokens;
    size_t n, cap;
    float p;
    bool eob;
};

struct proposal {
    size_t parent;     /* beam index */
    llama_token token; /* -1: the parent itself (at eob) */
    float p;
    size_t order;      /* generation order, for stable ties */
};

struct search {
    struct llama_context *ctx;
    size_t n_beams;
    int32_t n_past;
    int32_t n_vocab;
    struct beam *beams, *next;
    size_t n_cur;
    struct llama_beam_view *views;
    struct proposal *props;
    size_t n_props;
    float *prefix_logits; /* logits after the last committed position */
    struct llama_token_data *top;
    bool failed;
};

static bool beam_push(struct beam *b, llama_token t)
{
    if (b->n == b->cap) {
        size_t cap = b->cap ? 2 * b->cap : 16;
        llama_token *nt = realloc(b->tokens, cap * sizeof *nt);
        if (!nt)
            return false;
        b->tokens = nt;
        b->cap = cap;
    }
    b->tokens[b->n++] = t;
    return true;
}

static bool beam_assign(struct beam *dst, const struct beam *src)
{
    dst->n = 0;
    dst->p = src->p;
    dst->eob = src->eob;
    for (size_t i = 0; i < src->n; i++)
        if (!beam_push(dst, src->tokens[i]))
            return false;
    return true;
}

/* Decode toks at s->n_past in sequence 0 after dropping stale cells. */
static bool decode_at(struct search *s, llama_token *toks, size_t n)
{
    llama_kv_cache_seq_rm(s->ctx, 0, s->n_past, -1);
    int32_t r = llama_decode(s->ctx, llama_batch_get_one(toks, (int32_t)n, s->n_past, 0));
    if (r != 0) {
        LM_LOG_ERR("llama_beam_search: decode failed (%d); stopping the search\n", r);
        s->failed = true;
    }
    return r == 0;
}

static const float *last_logits(struct llama_context *ctx)
{
    int32_t rows = ctx->c->n_logit_rows;
    return llama_get_logits_ith(ctx, rows > 0 ? rows - 1 : 0);
}

/* Propose the k best next tokens of beam bi, given its logits. */
static void propose_tokens(struct search *s, size_t bi, const float *logits)
{
    size_t k = s->n_beams < (size_t)s->n_vocab ? s->n_beams : (size_t)s->n_vocab, n = 0;
    float max_l = logits[0], sum = 0.0f;
    for (int32_t t = 1; t < s->n_vocab; t++)
        max_l = logits[t] > max_l ? logits[t] : max_l;
    for (int32_t t = 0; t < s->n_vocab; t++)
        sum += expf(logits[t] - max_l);
    float norm = 1.0f / sum;
    for (int32_t t = 0; t < s->n_vocab; t++) { /* top k by logit, sorted; ties: lower id first */
        if (n == k && !(logits[t] > s->top[k - 1].logit))
            continue;
        size_t i = n < k ? n++ : k - 1;
        while (i > 0 && logits[t] > s->top[i - 1].logit) {
            s->top[i] = s->top[i - 1];
            i--;
        }
        s->top[i] = (struct llama_token_data){.id = t, .logit = logits[t], .p = 0.0f};
    }
    for (size_t i = 0; i < n; i++) {
        float pr = norm * expf(s->top[i].logit - max_l);
        s->props[s->n_props] = (struct proposal){bi, s->top[i].id, s->beams[bi].p * pr, s->n_props};
        s->n_props++;
    }
}

static int cmp_prop(const void *a, const void *b)
{
    const struct proposal *x = a, *y = b;
    if (x->p != y->p)
        return x->p > y->p ? -1 : 1;
    return x->order < y->order ? -1 : 1;
}

/* Steps 3 and 4: proposals of every beam, the best n_beams become the beams. */
static bool advance(struct search *s)
{
    s->n_props = 0;
    for (size_t bi = 0; bi < s->n_cur && !s->failed; bi++) {
        struct beam *b = &s->beams[bi];
        if (b->eob) {
            s->props[s->n_props] = (struct proposal){bi, -1, b->p, s->n_props};
            s->n_props++;
        } else if (b->n == 0) {
            propose_tokens(s, bi, s->prefix_logits);
        } else if (decode_at(s, b->tokens, b->n)) {
            propose_tokens(s, bi, last_logits(s->ctx));
        }
    }
    if (s->failed)
        return false;
    qsort(s->props, s->n_props, sizeof *s->props, cmp_prop);
    size_t n_next = s->n_props < s->n_beams ? s->n_props : s->n_beams;
    float sum = 0.0f;
    for (size_t i = 0; i < n_next; i++) {
        const struct proposal *pr = &s->props[i];
        if (!beam_assign(&s->next[i], &s->beams[pr->parent]) || (pr->token >= 0 && !beam_push(&s->next[i], pr->token)))
            return false;
        s->next[i].p = pr->p;
        sum += pr->p;
    }
    struct beam *tmp = s->beams;
    s->beams = s->next;
    s->next = tmp;
    s->n_cur = n_next;
    if (sum > 0.0f) {
        float inv = 1.0f / sum;
        for (size_t i = 0; i < s->n_cur; i++)
            s->beams[i].p *= inv;
    }
    return true;
}

/* The most probable beam (ties: one at eob, then the first). */
static size_t top_beam(const struct search *s)
{
    size_t best = 0;
    for (size_t i = 1; i < s->n_cur; i++) {
        const struct beam *a = &s->beams[best], *b = &s->beams[i];
        if (b->p > a->p || (b->p == a->p && b->eob && !a->eob))
            best = i;
    }
    return best;
}

static struct llama_beams_state beams_state(struct search *s, bool last_call)
{
    size_t cpl = s->n_cur ? s->beams[0].n : 0;
    for (size_t i = 0; i < s->n_cur; i++) {
        const struct beam *b = &s->beams[i];
        s->views[i] = (struct llama_beam_view){b->tokens, b->n, b->p, b->eob};
        size_t j = 0;
        while (j < cpl && j < b->n && b->tokens[j] == s->beams[0].tokens[j])
            j++;
        cpl = j;
    }
    return (struct llama_beams_state){s->views, s->n_cur, cpl, last_call};
}

/* Step 1 and 2; false when the search must stop. */
static bool commit_prefix(struct search *s, llama_beam_search_callback_fn_t cb, void *data)
{
    struct llama_beams_state st = beams_state(s, false);
    cb(data, st);
    for (size_t i = 0; i < s->n_cur; i++) {
        s->beams[i].p = s->views[i].p;
        s->beams[i].eob = s->views[i].eob;
    }
    size_t cpl = st.common_prefix_length;
    if (cpl == 0)
        return true;
    if ((int64_t)s->n_past + (int64_t)cpl > LM_POS_MAX) { /* n_past must stay a position */
        LM_LOG_ERR("llama_beam_search: position %d + %zu passes %d; stopping the search\n", s->n_past, cpl,
                   LM_POS_MAX);
        return false;
    }
    if (!decode_at(s, s->beams[0].tokens, cpl))
        return false;
    memcpy(s->prefix_logits, last_logits(s->ctx), (size_t)s->n_vocab * sizeof(float));
    s->n_past += (int32_t)cpl;
    for (size_t i = 0; i < s->n_cur; i++) {
        struct beam *b = &s->beams[i];
        memmove(b->tokens, b->tokens + cpl, (b->n - cpl) * sizeof *b->tokens);
        b->n -= cpl;
    }
    return true;
}

static void search_loop(struct search *s, llama_beam_search_callback_fn_t cb, void *data, int32_t n_predict)
{
    s->beams[0] = (struct beam){.p = 1.0f};
    s->n_cur = 1;
    for (int32_t i = 0; i < n_predict; i++) {
        bool any_open = false;
        for (size_t b = 0; b < s->n_cur; b++)
            any_open |= !s->beams[b].eob;
        if (!any_open || s->beams[top_beam(s)].eob)
            break;
        if (!commit_prefix(s, cb, data) || !advance(s))
            break;
    }
    size_t best = top_beam(s);
    if (best != 0) {
        struct beam tmp = s->beams[0];
        s->beams[0] = s->beams[best];
        s->beams[best] = tmp;
    }
    s->n_cur = 1;
    cb(data, beams_state(s, true));
    llama_kv_cache_seq_rm(s->ctx, 0, s->n_past, -1);
}

/* The search described at the top of this file. Returns nothing; the caller
 * learns the tokens through callback (the views it gets are valid during the
 * call only). Uses and changes sequence 0 of ctx's KV cache; not thread-safe
 * with other users of ctx. Bad arguments are logged and nothing is called. */
void llama_beam_search(struct llama_context *ctx, llama_beam_search_callback_fn_t callback, void *callback_data,
                       size_t n_beams, int32_t n_past, int32_t n_predict)
{
    if (!ctx || !callback || n_beams == 0 || n_beams > LM_BEAM_MAX || n_past < 0 || !ctx->c->logits_ready) {
        LM_LOG_ERR("llama_beam_search: bad arguments (n_beams %zu must be in [1, %d], n_past %d >= 0, and a prompt "
                   "must have been decoded)\n", n_beams, LM_BEAM_MAX, n_past);
        return;
    }
    int64_t t0 = lm_time_us();
    struct search s = {.ctx = ctx, .n_beams = n_beams, .n_past = n_past, .n_vocab = llama_n_vocab(ctx->model)};
    size_t k = n_beams < (size_t)s.n_vocab ? n_beams : (size_t)s.n_vocab;
    s.beams = calloc(n_beams, sizeof *s.beams);
    s.next = calloc(n_beams, sizeof *s.next);
    s.views = calloc(n_beams, sizeof *s.views);
    s.props = calloc(n_beams * k, sizeof *s.props);
    s.top = calloc(k, sizeof *s.top);
    s.prefix_logits = malloc((size_t)s.n_vocab * sizeof(float));
    if (s.beams && s.next && s.views && s.props && s.top && s.prefix_logits) {
        memcpy(s.prefix_logits, last_logits(ctx), (size_t)s.n_vocab * sizeof(float));
        search_loop(&s, callback, callback_data, n_predict);
    } else {
        LM_LOG_ERR("llama_beam_search: out of memory\n");
    }
    for (size_t i = 0; i < n_beams; i++) {
        free(s.beams ? s.beams[i].tokens : NULL);
        free(s.next ? s.next[i].tokens : NULL);
    }
    free(s.beams);
    free(s.next);
    free(s.views);
    free(s.props);
    free(s.top);
    free(s.prefix_logits);
    lm_api_sample_time(ctx, t0, 1);
}
