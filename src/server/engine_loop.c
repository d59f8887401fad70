/* engine_loop.c - the engine thread's loop: take queued requests into slots,
 * build one batch per step (the next token of every generating slot, then
 * prompt chunks up to n_batch), decode, sample each slot's row, publish text.
 *
 * Invariants (see engine_int.h): only this thread touches the contexts, the
 * slots' caches and text buffers, and the samplers of running requests;
 * results, the queue and slot owners change under e->mu. slot->sent is the
 * length of the text published to its choice; text held back (a possible
 * start of a stop string, an incomplete UTF-8 sequence) is published later
 * or cut. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "server/engine_int.h"

static bool grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return true;
    size_t c = *cap ? *cap : 64;
    while (c < need)
        c *= 2;
    void *q = realloc(*p, c * elem);
    if (!q)
        return false;
    *p = q;
    *cap = c;
    return true;
}

/* Publish text[sent..upto) and the logprob records before upto to the
 * slot's choice (e->mu held). */
static void publish(struct srv_slot *s, size_t upto)
{
    struct lm_srv_choice *ch = &s->req->ch[s->choice];
    if (upto > s->sent) {
        if (grow((void **)&ch->text, &ch->cap_text, upto + 1, 1)) {
            memcpy(ch->text + ch->n_text, s->gen.p + s->sent, upto - s->sent);
            ch->n_text = upto;
            ch->text[upto] = '\0';
        }
        s->sent = ch->n_text;
    }
    size_t k = 0;
    while (k < s->n_lps && s->lps[k].off < s->sent)
        k++;
    if (k && grow((void **)&ch->lps, &ch->cap_lps, ch->n_lps + k, sizeof *ch->lps)) {
        memcpy(ch->lps + ch->n_lps, s->lps, k * sizeof *s->lps);
        ch->n_lps += k;
    }
    if (k) {
        memmove(s->lps, s->lps + k, (s->n_lps - k) * sizeof *s->lps);
        s->n_lps -= k;
    }
}

/* End the slot's choice with reason (e->mu held): publish up to upto, wake
 * the waiter, drop the engine's reference when the request is all done. */
static void finish_slot(struct lm_engine *e, struct srv_slot *s, const char *reason, size_t upto)
{
    struct lm_srv_req *r = s->req;
    publish(s, upto);
    struct lm_srv_choice *ch = &r->ch[s->choice];
    int64_t now = llama_time_us();
    ch->finish = reason;
    ch->done = true;
    ch->n_gen = s->n_gen;
    ch->n_prompt = r->n_prompt;
    ch->t_prompt_us = (s->t_first_us ? s->t_first_us : now) - s->t_start_us;
    ch->t_gen_us = s->t_first_us ? now - s->t_first_us : 0;
    if (++r->n_done >= r->n_choices)
        srv_req_unref(r);
    pthread_cond_broadcast(&r->cond);
    s->req = NULL;
    s->state = SLOT_IDLE;
    s->n_lps = 0;
    s->last_used = ++e->clock;
}

static int32_t common_prefix(const llama_token *a, int32_t na, const llama_token *b, int32_t nb)
{
    int32_t i = 0;
    while (i < na && i < nb && a[i] == b[i])
        i++;
    return i;
}

/* The idle slot sharing the longest prefix with r's prompt (ties: least
 * recently used); NULL when none is idle. */
static struct srv_slot *pick_slot(struct lm_engine *e, const struct lm_srv_req *r, int32_t *n_common)
{
    struct srv_slot *best = NULL;
    int32_t best_n = -1;
    for (int32_t i = 0; i < e->n_slots; i++) {
        struct srv_slot *s = &e->slots[i];
        if (s->req)
            continue;
        int32_t n = common_prefix(s->cache, s->n_cache, r->prompt, r->n_prompt);
        if (n > best_n || (n == best_n && s->last_used < best->last_used)) {
            best = s;
            best_n = n;
        }
    }
    *n_common = best_n;
    return best;
}

/* Start choice `choice` of r on slot s, reusing n_common cached tokens (e->mu
 * held; the work is small: a cache edit and the sampler's history). */
static void slot_begin(struct lm_engine *e, struct srv_slot *s, struct lm_srv_req *r, int32_t choice, int32_t n_common)
{
    if (n_common >= r->n_prompt)
        n_common = r->n_prompt - 1; /* evaluate the last prompt token again, for its logits */
    llama_kv_cache_seq_rm(e->ctx, s->id, n_common, -1);
    s->n_cache = n_common;
    s->req = r;
    s->choice = choice;
    s->state = SLOT_PROMPT;
    s->n_gen = 0;
    s->gen.n = s->sent = 0;
    s->n_lps = 0;
    s->t_start_us = llama_time_us();
    s->t_first_us = 0;
    struct lm_sampler *smp = r->smp[choice];
    for (int32_t i = 0; i < r->n_prompt; i++)
        lm_sampler_accept(smp, e->ctx, r->prompt[i], false);
}

/* Drop queued items of cancelled, failed or expired requests and start
 * queued generations on idle slots, in FIFO order (e->mu held). Returns an
 * embedding request taken from the queue, or NULL. */
static struct lm_srv_req *take_queued(struct lm_engine *e, int64_t now)
{
    struct lm_srv_req *emb = NULL;
    int32_t w = 0;
    bool full = false;
    for (int32_t i = 0; i < e->n_queue; i++) {
        struct srv_item it = e->queue[i];
        struct lm_srv_req *r = it.req;
        int32_t n_items = r->kind == LM_SRV_EMBED ? 1 : r->n_choices;
        if (!r->cancelled && !r->err_status && now > r->deadline_us)
            srv_req_fail(r, 503, "timed out waiting for a free slot");
        if (r->cancelled || r->err_status) {
            if (++r->n_done >= n_items)
                srv_req_unref(r);
            pthread_cond_broadcast(&r->cond);
            continue;
        }
        if (r->kind == LM_SRV_EMBED && !emb) {
            emb = r;
            continue;
        }
        int32_t n_common;
        struct srv_slot *s = full || r->kind != LM_SRV_GENERATE ? NULL : pick_slot(e, r, &n_common);
        if (s) {
            slot_begin(e, s, r, it.choice, n_common);
            continue;
        }
        full = true;
        e->queue[w++] = it;
    }
    e->n_queue = w;
    return emb;
}

/* Stop slots whose request was cancelled, failed or passed its deadline (e->mu held). */
static void reap(struct lm_engine *e, int64_t now)
{
    for (int32_t i = 0; i < e->n_slots; i++) {
        struct srv_slot *s = &e->slots[i];
        if (!s->req)
            continue;
        if (s->req->cancelled || s->req->err_status) {
            e->stats.n_cancelled += s->req->cancelled;
            finish_slot(e, s, "stop", s->sent);
        } else if (now > s->req->deadline_us || e->stopping) {
            finish_slot(e, s, "length", s->gen.n);
        }
    }
}

static bool any_busy(const struct lm_engine *e)
{
    for (int32_t i = 0; i < e->n_slots; i++)
        if (e->slots[i].req)
            return true;
    return false;
}

/* The end of the text that may be published: before a possible start of a
 * stop string at the end, and before an incomplete UTF-8 sequence. */
static size_t safe_end(const struct srv_slot *s)
{
    const struct lm_srv_req *r = s->req;
    size_t end = s->gen.n;
    for (int32_t i = 0; i < r->n_stop; i++) {
        size_t ls = strlen(r->stop[i]);
        for (size_t k = ls ? ls - 1 : 0; k > 0; k--) {
            if (k <= s->gen.n - s->sent && !memcmp(s->gen.p + s->gen.n - k, r->stop[i], k)) {
                if (s->gen.n - k < end)
                    end = s->gen.n - k;
                break;
            }
        }
    }
    for (size_t back = 1; back <= 4 && back <= end - s->sent; back++) {
        unsigned char c = (unsigned char)s->gen.p[end - back];
        if ((c & 0xC0) == 0x80)
            continue;
        size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
        if (need > back)
            end -= back;
        break;
    }
    return end;
}

/* The first stop string in the unpublished text: its offset, or SIZE_MAX. */
static size_t find_stop(const struct srv_slot *s)
{
    size_t best = SIZE_MAX;
    for (int32_t i = 0; i < s->req->n_stop; i++) {
        const char *st = s->req->stop[i];
        const char *p = memmem(s->gen.p + s->sent, s->gen.n - s->sent, st, strlen(st));
        if (p && (size_t)(p - s->gen.p) < best)
            best = (size_t)(p - s->gen.p);
    }
    return best;
}

/* Log-probabilities from a logits row: the sampled token's and the top n. */
static void logprobs(const struct lm_engine *e, const float *row, llama_token t, int32_t n_top, struct lm_srv_lp *out)
{
    float mx = -INFINITY;
    for (int32_t i = 0; i < e->n_vocab; i++)
        mx = row[i] > mx ? row[i] : mx;
    double sum = 0;
    for (int32_t i = 0; i < e->n_vocab; i++)
        sum += exp((double)(row[i] - mx));
    float lse = mx + (float)log(sum);
    out->id = t;
    out->lp = row[t] - lse;
    out->n_top = 0;
    for (int32_t i = 0; i < e->n_vocab && n_top > 0; i++) { /* logprobs without top_logprobs: n_top 0 */
        int32_t k = out->n_top;
        if (k == n_top && row[i] <= row[out->top_id[k - 1]])
            continue;
        if (k < n_top)
            out->n_top++;
        else
            k--;
        while (k > 0 && row[out->top_id[k - 1]] < row[i]) {
            out->top_id[k] = out->top_id[k - 1];
            k--;
        }
        out->top_id[k] = i;
    }
    for (int32_t k = 0; k < out->n_top; k++)
        out->top_lp[k] = row[out->top_id[k]] - lse;
}

/* Append token t's text and logprob record to the slot. */
static void add_text(struct lm_engine *e, struct srv_slot *s, llama_token t, const float *row)
{
    struct lm_srv_req *r = s->req;
    if (r->want_lp && row && grow((void **)&s->lps, &s->cap_lps, s->n_lps + 1, sizeof *s->lps)) {
        logprobs(e, row, t, r->n_probs, &s->lps[s->n_lps]);
        s->lps[s->n_lps++].off = s->gen.n;
    }
    lm_token_append(e->model, t, &s->gen); /* out of memory: the text is short, the request still ends */
}

/* Take the token sampled for slot s (engine thread), publish and maybe finish. */
static void on_token(struct lm_engine *e, struct srv_slot *s, llama_token t, const float *row)
{
    struct lm_srv_req *r = s->req;
    const char *reason = NULL;
    size_t upto;
    bool eos = t == llama_token_eos(e->model) && !r->ignore_eos;
    if (t < 0 || eos) {
        reason = "stop";
        upto = s->gen.n;
    } else {
        lm_sampler_accept(r->smp[s->choice], e->ctx, t, true);
        s->n_gen++;
        s->next = t;
        add_text(e, s, t, row);
        size_t at = find_stop(s);
        if (at != SIZE_MAX) {
            reason = "stop";
            upto = at;
            while (s->n_lps && s->lps[s->n_lps - 1].off >= at)
                s->n_lps--;
        } else if (s->n_gen >= r->n_predict || s->n_cache + 1 >= e->n_ctx_slot) {
            reason = "length";
            upto = s->gen.n;
        } else {
            upto = safe_end(s);
        }
    }
    pthread_mutex_lock(&e->mu);
    e->stats.n_gen_tokens += t >= 0 && !eos;
    if (t < 0 || eos)
        r->ch[s->choice].stopped_eos = 1;
    if (reason)
        finish_slot(e, s, reason, upto);
    else {
        publish(s, upto);
        pthread_cond_broadcast(&r->cond);
    }
    pthread_mutex_unlock(&e->mu);
}

/* Sample every row of batch rows [i0, i0+k) that has logits. */
static void sample_rows(struct lm_engine *e, int32_t i0, int32_t k)
{
    for (int32_t i = i0; i < i0 + k; i++) {
        if (!e->batch.logits[i])
            continue;
        struct srv_slot *s = &e->slots[e->rows[i]];
        if (s->state == SLOT_PROMPT) {
            s->state = SLOT_GEN;
            s->t_first_us = llama_time_us();
        }
        struct lm_srv_req *r = s->req;
        llama_token t = lm_sampler_sample(r->smp[s->choice], e->ctx, i - i0);
        on_token(e, s, t, r->want_lp ? llama_get_logits_ith(e->ctx, i - i0) : NULL);
    }
}

/* A failed decode of rows [i0, i0+k): their slots forget their caches and
 * their requests fail. */
static void fail_rows(struct lm_engine *e, int32_t i0, int32_t k, int32_t code)
{
    pthread_mutex_lock(&e->mu);
    for (int32_t i = i0; i < i0 + k; i++) {
        struct srv_slot *s = &e->slots[e->rows[i]];
        llama_kv_cache_seq_rm(e->ctx, s->id, -1, -1);
        s->n_cache = 0;
        if (!s->req)
            continue;
        char msg[64];
        snprintf(msg, sizeof msg, "decode failed (%d)", code);
        srv_req_fail(s->req, 500, msg);
        finish_slot(e, s, "stop", s->sent);
    }
    pthread_mutex_unlock(&e->mu);
}

/* Decode the batch's n rows in views of <= n_batch rows; a view that finds
 * too few free cells in the KV cache is retried in halves. */
static void decode_views(struct lm_engine *e, int32_t n, int32_t n_prompt_rows)
{
    int32_t view = e->n_batch;
    struct llama_batch *b = &e->batch;
    int64_t t0 = llama_time_us();
    for (int32_t i0 = 0; i0 < n;) {
        int32_t k = n - i0 < view ? n - i0 : view;
        struct llama_batch v = {.n_tokens = k, .token = b->token + i0, .pos = b->pos + i0,
                                .n_seq_id = b->n_seq_id + i0, .seq_id = b->seq_id + i0, .logits = b->logits + i0};
        int32_t rc = llama_decode(e->ctx, v);
        if (rc == 1 && k > 1) {
            view = k / 2;
            continue;
        }
        if (rc != 0)
            fail_rows(e, i0, k, rc);
        else
            sample_rows(e, i0, k);
        i0 += k;
    }
    double dt = (double)(llama_time_us() - t0) * 1e-6;
    pthread_mutex_lock(&e->mu);
    e->stats.n_decode++;
    e->stats.n_prompt_tokens += (uint64_t)n_prompt_rows;
    e->stats.t_prompt_s += dt * n_prompt_rows / n;
    e->stats.t_gen_s += dt * (n - n_prompt_rows) / n;
    pthread_mutex_unlock(&e->mu);
}

static void batch_add(struct lm_engine *e, int32_t *n, struct srv_slot *s, llama_token t, bool logits)
{
    struct llama_batch *b = &e->batch;
    b->token[*n] = t;
    b->pos[*n] = s->n_cache;
    b->n_seq_id[*n] = 1;
    b->seq_id[*n][0] = s->id;
    b->logits[*n] = logits;
    e->rows[*n] = s->id;
    s->cache[s->n_cache++] = t;
    (*n)++;
}

/* One step: every generating slot's next token, then prompt chunks. */
static void step(struct lm_engine *e)
{
    int32_t n = 0;
    for (int32_t i = 0; i < e->n_slots; i++)
        if (e->slots[i].req && e->slots[i].state == SLOT_GEN)
            batch_add(e, &n, &e->slots[i], e->slots[i].next, true);
    int32_t n_gen = n, budget = e->n_batch - n;
    for (int32_t i = 0; i < e->n_slots && budget > 0; i++) {
        struct srv_slot *s = &e->slots[i];
        if (!s->req || s->state != SLOT_PROMPT)
            continue;
        const struct lm_srv_req *r = s->req;
        int32_t k = r->n_prompt - s->n_cache < budget ? r->n_prompt - s->n_cache : budget;
        for (int32_t j = 0; j < k; j++)
            batch_add(e, &n, s, r->prompt[s->n_cache], s->n_cache + 1 == r->n_prompt);
        budget -= k;
    }
    if (n > 0)
        decode_views(e, n, n - n_gen);
}

void srv_engine_loop(struct lm_engine *e)
{
    for (;;) {
        pthread_mutex_lock(&e->mu);
        while (!e->stopping && e->n_queue == 0 && !any_busy(e))
            pthread_cond_wait(&e->work, &e->mu);
        int64_t now = llama_time_us();
        if (e->stopping)
            for (int32_t i = 0; i < e->n_queue; i++)
                srv_req_fail(e->queue[i].req, 503, "the server is shutting down");
        reap(e, now);
        struct lm_srv_req *emb = take_queued(e, now);
        bool quit = e->stopping && e->n_queue == 0 && !any_busy(e) && !emb;
        pthread_mutex_unlock(&e->mu);
        if (quit)
            return;
        if (emb) {
            srv_embed(e, emb);
            pthread_mutex_lock(&e->mu);
            emb->n_done = 1;
            pthread_cond_broadcast(&emb->cond);
            srv_req_unref(emb);
            pthread_mutex_unlock(&e->mu);
        }
        step(e);
    }
}
