/* state_api.c - llama.h: context state (RNG, logits, embedding, KV cache) as
 * bytes, and session files (magic GGSN, version 4: the prompt tokens followed
 * by the state).
 *
 * State layout (little-endian), version 1:
 *   u32 magic 'LMST', u32 version
 *   u64 rng_len, rng_len bytes (mt19937 state as text, <= LLAMA_MAX_RNG_STATE)
 *   u64 n_logit_rows, u64 n_vocab, rows * n_vocab f32
 *   u64 n_embd, n_embd f32 (0 when no embedding was computed)
 *   u32 kv_size, head, used, n_layer, type_k, type_v, n_embd_k_gqa, n_embd_v_gqa, n_cells
 *   n_cells x {i32 pos, i32 delta, u64 seq mask}
 *   per layer: K rows of cells [0, n_cells); V channels, each cells [0, n_cells)
 *     (a V of a block type, stored in rows per cell: its rows of those cells)
 * Restoring checks every field against the context (a state only fits a
 * context of the same model, cache types and size, with n_batch at least its
 * logit rows), every cell against the cache invariants (kv_cache.h: pos and
 * pos - delta in [0, LM_POS_MAX], free cells all clear), and never reads past
 * the bytes it was given. The size bound (llama_get_state_size) depends only
 * on the context's parameters, so it is the same for the context's lifetime.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "core/log.h"

#define STATE_MAGIC 0x54534d4cu /* "LMST" */
#define STATE_VERSION 1u

struct wbuf {
    uint8_t *p; /* NULL: only count */
    size_t n;
};

static void put(struct wbuf *w, const void *src, size_t len)
{
    if (w->p && len)
        memcpy(w->p + w->n, src, len);
    w->n += len;
}

/* len bytes of t's data from byte off, through its buffer (the KV cache may
 * live in GPU memory). */
static void put_tensor(struct wbuf *w, const struct lm_tensor *t, size_t off, size_t len)
{
    if (w->p && len && lm_tensor_get(t, w->p + w->n, off, len) != LM_OK)
        memset(w->p + w->n, 0, len);
    w->n += len;
}

static void put_u32(struct wbuf *w, uint32_t v) { put(w, &v, 4); }
static void put_u64(struct wbuf *w, uint64_t v) { put(w, &v, 8); }

struct rbuf {
    const uint8_t *p;
    size_t n, off;
    bool bad;
};

static bool get(struct rbuf *r, void *dst, size_t len)
{
    if (r->bad || len > r->n - r->off) {
        r->bad = true;
        return false;
    }
    if (dst && len)
        memcpy(dst, r->p + r->off, len);
    r->off += len;
    return true;
}

/* The next len bytes into t's data from byte off, through its buffer. */
static bool get_tensor(struct rbuf *r, struct lm_tensor *t, size_t off, size_t len)
{
    if (r->bad || len > r->n - r->off || (len && lm_tensor_set(t, r->p + r->off, off, len) != LM_OK)) {
        r->bad = true;
        return false;
    }
    r->off += len;
    return true;
}

static uint32_t get_u32(struct rbuf *r)
{
    uint32_t v = 0;
    get(r, &v, 4);
    return v;
}

static uint64_t get_u64(struct rbuf *r)
{
    uint64_t v = 0;
    get(r, &v, 8);
    return v;
}

/* Cells to save: up to the last used one. */
static uint32_t kv_cells(const struct lm_kv_cache *kv) { return lm_kv_cell_max(kv); }

/* One layer's V of the first n cells: a V of rows per cell (lm_kv_v_rows)
 * as K is saved, n rows; a transposed V as b1892 saves it, each channel's
 * first n cells. */
struct v_layout {
    uint32_t n_runs;   /* runs of bytes */
    size_t run, step;  /* bytes per run, bytes from one run's start to the next */
};

static struct v_layout v_layout(const struct lm_kv_cache *kv, uint32_t nv, uint32_t n)
{
    if (lm_kv_v_rows(kv))
        return (struct v_layout){1, lm_row_size(kv->type_v, nv) * n, 0};
    return (struct v_layout){nv, lm_row_size(kv->type_v, n), lm_row_size(kv->type_v, kv->size)};
}

static void write_kv(struct wbuf *w, const struct lm_context *c, bool upper_bound)
{
    const struct lm_kv_cache *kv = &c->kv;
    const struct lm_hparams *hp = &c->model->hp;
    uint32_t nk = lm_hp_n_embd_k_gqa(hp), nv = lm_hp_n_embd_v_gqa(hp);
    uint32_t n = upper_bound ? kv->size : kv_cells(kv);
    uint32_t hdr[9] = {kv->size, kv->head, kv->used, kv->n_layer, (uint32_t)kv->type_k, (uint32_t)kv->type_v, nk, nv, n};
    put(w, hdr, sizeof hdr);
    for (uint32_t i = 0; i < n; i++) {
        int32_t pd[2] = {kv->cells[i].pos, kv->cells[i].delta};
        put(w, pd, sizeof pd);
        put_u64(w, kv->cells[i].seq);
    }
    const size_t krow = lm_row_size(kv->type_k, nk);
    const struct v_layout vl = v_layout(kv, nv, n);
    for (uint32_t il = 0; il < kv->n_layer; il++) {
        put_tensor(w, kv->k[il], 0, krow * n);
        for (uint32_t j = 0; j < vl.n_runs; j++)
            put_tensor(w, kv->v[il], (size_t)j * vl.step, vl.run);
    }
}

static size_t write_state(struct llama_context *ctx, uint8_t *dst, bool upper_bound)
{
    struct wbuf w = {dst, 0};
    const struct lm_context *c = ctx->c;
    put_u32(&w, STATE_MAGIC);
    put_u32(&w, STATE_VERSION);
    char *rng = upper_bound ? NULL : malloc(LM_RNG_STATE_MAX);
    size_t rlen = upper_bound ? LM_RNG_STATE_MAX : (rng ? lm_rng_state_write(&ctx->rng, rng, LM_RNG_STATE_MAX) : 0);
    put_u64(&w, rlen);
    put(&w, rng, upper_bound ? 0 : rlen);
    if (upper_bound)
        w.n += rlen;
    free(rng);
    uint64_t n_vocab = (uint64_t)c->model->hp.n_vocab;
    /* a decode keeps at most n_batch rows and a restore takes no more, so the
     * bound, and with it the state size, never changes for a context */
    uint64_t rows = upper_bound ? c->cp.n_batch : (c->logits_ready ? (uint64_t)c->n_logit_rows : 0);
    put_u64(&w, rows);
    put_u64(&w, n_vocab);
    put(&w, c->logits, upper_bound ? 0 : rows * n_vocab * sizeof(float));
    if (upper_bound)
        w.n += rows * n_vocab * sizeof(float);
    uint64_t ne = (upper_bound || c->embd_ready) ? c->model->hp.n_embd : 0;
    put_u64(&w, ne);
    put(&w, c->embd, upper_bound ? 0 : ne * sizeof(float));
    if (upper_bound)
        w.n += ne * sizeof(float);
    if (upper_bound) {
        struct wbuf kvw = {NULL, 0};
        write_kv(&kvw, c, true);
        w.n += kvw.n;
    } else {
        write_kv(&w, c, false);
    }
    return w.n;
}

size_t llama_get_state_size(const struct llama_context *ctx)
{
    return write_state((struct llama_context *)ctx, NULL, true);
}

size_t llama_copy_state_data(struct llama_context *ctx, uint8_t *dst)
{
    if (!ctx || !dst)
        return 0;
    return write_state(ctx, dst, false);
}

/* The KV part, the state's last; with exact, its end must be the end of r. */
static bool read_kv(struct rbuf *r, struct lm_context *c, bool exact)
{
    struct lm_kv_cache *kv = &c->kv;
    const struct lm_hparams *hp = &c->model->hp;
    uint32_t h[9];
    if (!get(r, h, sizeof h))
        return false;
    uint32_t nk = lm_hp_n_embd_k_gqa(hp), nv = lm_hp_n_embd_v_gqa(hp), n = h[8];
    if (h[0] != kv->size || h[3] != kv->n_layer || h[4] != (uint32_t)kv->type_k || h[5] != (uint32_t)kv->type_v ||
        h[6] != nk || h[7] != nv || n > kv->size || h[1] >= kv->size || h[2] > n) {
        LM_LOG_ERR("state: KV cache shape or types do not match this context\n");
        return false;
    }
    struct lm_kv_cell *cells = calloc(kv->size, sizeof *cells);
    if (!cells)
        return false;
    uint32_t used = 0;
    for (uint32_t i = 0; i < kv->size; i++)
        cells[i].pos = -1;
    for (uint32_t i = 0; i < n && !r->bad; i++) {
        int32_t pd[2] = {0, 0};
        get(r, pd, sizeof pd);
        cells[i] = (struct lm_kv_cell){.pos = pd[0], .delta = pd[1], .seq = get_u64(r)};
        if (!lm_kv_cell_valid(&cells[i])) { /* a later shift or decode must not overflow */
            LM_LOG_ERR("state: KV cell %u (pos %d, delta %d, seq %#llx) is inconsistent\n", i, cells[i].pos,
                       cells[i].delta, (unsigned long long)cells[i].seq);
            r->bad = true;
        }
        used += cells[i].pos >= 0;
    }
    const size_t krow = lm_row_size(kv->type_k, nk);
    const struct v_layout vl = v_layout(kv, nv, n);
    size_t need = (size_t)kv->n_layer * (krow * n + vl.run * vl.n_runs);
    if (r->bad || used != h[2] || need > r->n - r->off || (exact && need != r->n - r->off)) {
        free(cells);
        r->bad = true;
        return false;
    }
    for (uint32_t il = 0; il < kv->n_layer; il++) {
        get_tensor(r, kv->k[il], 0, krow * n);
        for (uint32_t j = 0; j < vl.n_runs; j++)
            get_tensor(r, kv->v[il], (size_t)j * vl.step, vl.run);
    }
    memcpy(kv->cells, cells, kv->size * sizeof *cells);
    free(cells);
    kv->head = h[1];
    kv->used = used;
    kv->has_shift = false;
    for (uint32_t i = 0; i < kv->size; i++)
        kv->has_shift |= kv->cells[i].delta != 0;
    return true;
}

/* Parse a state of at most len bytes (with exact: of len bytes, as in a
 * session file); returns the bytes used, or 0 with nothing changed. */
static size_t read_state(struct llama_context *ctx, const uint8_t *src, size_t len, bool exact)
{
    struct rbuf r = {src, len, 0, false};
    struct lm_context *c = ctx->c;
    if (get_u32(&r) != STATE_MAGIC || get_u32(&r) != STATE_VERSION) {
        LM_LOG_ERR("state: not a lamina state (bad magic or version)\n");
        return 0;
    }
    uint64_t rlen = get_u64(&r);
    if (r.bad || rlen > LM_RNG_STATE_MAX || rlen > r.n - r.off)
        return 0;
    struct lm_rng rng = ctx->rng;
    if (lm_rng_state_read(&rng, (const char *)src + r.off, (size_t)rlen))
        return 0;
    r.off += rlen;
    uint64_t rows = get_u64(&r), n_vocab = get_u64(&r);
    if (r.bad || n_vocab != c->model->hp.n_vocab || rows > c->cp.n_batch || rows * n_vocab * 4 > r.n - r.off) {
        LM_LOG_ERR("state: %llu logit rows of %llu (this context keeps at most %u rows of %u)\n",
                   (unsigned long long)rows, (unsigned long long)n_vocab, c->cp.n_batch, c->model->hp.n_vocab);
        return 0;
    }
    size_t need = (size_t)(rows * n_vocab);
    if (need > c->logits_cap) {
        float *nl = realloc(c->logits, need * sizeof(float));
        if (!nl)
            return 0;
        c->logits = nl;
        c->logits_cap = need;
    }
    const size_t logits_off = r.off;
    r.off += need * sizeof(float);
    uint64_t ne = get_u64(&r);
    if (r.bad || (ne && ne != c->model->hp.n_embd) || ne * 4 > r.n - r.off)
        return 0;
    const size_t embd_off = r.off;
    r.off += ne * sizeof(float);
    if (!read_kv(&r, c, exact))
        return 0;
    /* everything checked: commit the rest */
    memcpy(c->logits, src + logits_off, need * sizeof(float));
    c->n_logit_rows = (int32_t)rows;
    c->logits_ready = rows > 0;
    if (ne)
        memcpy(c->embd, src + embd_off, ne * sizeof(float));
    c->embd_ready = ne > 0;
    ctx->rng = rng;
    return r.off;
}

size_t llama_set_state_data(struct llama_context *ctx, uint8_t *src)
{
    if (!ctx || !src)
        return 0;
    return read_state(ctx, src, llama_get_state_size(ctx), false);
}

/* ---- session files ---- */

bool llama_save_session_file(struct llama_context *ctx, const char *path_session, const llama_token *tokens,
                             size_t n_token_count)
{
    if (!ctx || !path_session || (n_token_count && !tokens) || n_token_count > UINT32_MAX)
        return false;
    size_t cap = llama_get_state_size(ctx);
    uint8_t *buf = malloc(cap);
    FILE *f = buf ? fopen(path_session, "wb") : NULL;
    bool ok = f != NULL;
    if (ok) {
        uint32_t hdr[3] = {LLAMA_SESSION_MAGIC, LLAMA_SESSION_VERSION, (uint32_t)n_token_count};
        size_t n = llama_copy_state_data(ctx, buf);
        ok = fwrite(hdr, sizeof hdr, 1, f) == 1 &&
             fwrite(tokens, sizeof *tokens, n_token_count, f) == n_token_count && fwrite(buf, 1, n, f) == n;
        ok = fclose(f) == 0 && ok;
    }
    free(buf);
    if (!ok)
        LM_LOG_ERR("llama_save_session_file: cannot write %s\n", path_session);
    return ok;
}

bool llama_load_session_file(struct llama_context *ctx, const char *path_session, llama_token *tokens_out,
                             size_t n_token_capacity, size_t *n_token_count_out)
{
    if (!ctx || !path_session || !n_token_count_out)
        return false;
    FILE *f = fopen(path_session, "rb");
    if (!f) {
        LM_LOG_ERR("llama_load_session_file: cannot open %s\n", path_session);
        return false;
    }
    bool ok = false;
    uint8_t *buf = NULL;
    uint32_t hdr[3];
    if (fread(hdr, sizeof hdr, 1, f) != 1 || hdr[0] != LLAMA_SESSION_MAGIC || hdr[1] != LLAMA_SESSION_VERSION) {
        LM_LOG_ERR("llama_load_session_file: %s is not a session file of version %d\n", path_session,
                   LLAMA_SESSION_VERSION);
        goto out;
    }
    if (hdr[2] > n_token_capacity || (hdr[2] && !tokens_out)) {
        LM_LOG_ERR("llama_load_session_file: %u tokens do not fit the capacity %zu\n", hdr[2], n_token_capacity);
        goto out;
    }
    if (fread(tokens_out, sizeof *tokens_out, hdr[2], f) != hdr[2])
        goto out;
    size_t cap = llama_get_state_size(ctx), n = 0;
    buf = malloc(cap + 1);
    if (!buf)
        goto out;
    n = fread(buf, 1, cap + 1, f);
    if (n == 0 || n > cap || read_state(ctx, buf, n, true) != n) { /* trailing bytes: refused, unchanged */
        LM_LOG_ERR("llama_load_session_file: %s holds a state that does not fit this context\n", path_session);
        goto out;
    }
    *n_token_count_out = hdr[2];
    ok = true;
out:
    free(buf);
    fclose(f);
    return ok;
}
