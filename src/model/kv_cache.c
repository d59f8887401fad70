/* kv_cache.c - cells, slot search and sequence operations of the KV cache.
 * Semantics follow llama.cpp b1892 (llama_kv_cache_*), with sequence sets as
 * 64-bit masks. */
#include "model/kv_cache.h"

#include <stdlib.h>
#include <string.h>

#include "alloc/alloc.h"

lm_status lm_kv_init(struct lm_kv_cache *kv, const struct lm_hparams *hp, enum lm_type type_k, enum lm_type type_v,
                     uint32_t size, lm_buft buft)
{
    memset(kv, 0, sizeof *kv);
    if (size == 0 || !lm_type_valid(type_k) || !lm_type_valid(type_v))
        return LM_ERR_INVALID_ARG;
    uint32_t nk = lm_hp_n_embd_k_gqa(hp), nv = lm_hp_n_embd_v_gqa(hp);
    if (nk % lm_type_blck(type_k) || ((uint64_t)nv * size) % (uint64_t)lm_type_blck(type_v) ||
        size % lm_type_blck(type_v))
        return LM_ERR_UNSUPPORTED;
    kv->size = size;
    kv->type_k = type_k;
    kv->type_v = type_v;
    kv->n_layer = hp->n_layer;
    kv->cells = malloc(size * sizeof *kv->cells);
    kv->k = calloc(hp->n_layer, sizeof *kv->k);
    kv->v = calloc(hp->n_layer, sizeof *kv->v);
    struct lm_ctx_params p = {.mem_size = (2 * (size_t)hp->n_layer + 2) * lm_tensor_overhead(), .no_alloc = true};
    lm_status st = (!kv->cells || !kv->k || !kv->v) ? LM_ERR_NOMEM : lm_ctx_new(&p, &kv->ctx);
    for (uint32_t il = 0; il < hp->n_layer && !st; il++) {
        kv->k[il] = lm_format_name(lm_new_tensor_1d(kv->ctx, type_k, (int64_t)nk * size), "cache_k_l%u", il);
        kv->v[il] = lm_format_name(lm_new_tensor_1d(kv->ctx, type_v, (int64_t)nv * size), "cache_v_l%u", il);
        st = lm_ctx_status(kv->ctx);
    }
    if (!st)
        st = lm_alloc_ctx_tensors(kv->ctx, buft, &kv->buf);
    if (st) {
        lm_kv_free(kv);
        return st;
    }
    lm_buffer_clear(kv->buf, 0);
    lm_kv_clear(kv);
    return LM_OK;
}

void lm_kv_free(struct lm_kv_cache *kv)
{
    lm_buffer_free(kv->buf);
    lm_ctx_free(kv->ctx);
    free(kv->cells);
    free(kv->k);
    free(kv->v);
    memset(kv, 0, sizeof *kv);
}

static void free_cell(struct lm_kv_cache *kv, uint32_t i)
{
    if (kv->cells[i].pos >= 0)
        kv->used--;
    kv->cells[i].pos = -1;
    kv->cells[i].seq = 0;
    kv->cells[i].delta = 0;
}

void lm_kv_clear(struct lm_kv_cache *kv)
{
    for (uint32_t i = 0; i < kv->size; i++)
        kv->cells[i] = (struct lm_kv_cell){.pos = -1, .delta = 0, .seq = 0};
    kv->head = 0;
    kv->used = 0;
    kv->has_shift = false;
}

bool lm_kv_find_slot(struct lm_kv_cache *kv, uint32_t n, const int32_t *pos, const uint64_t *seq)
{
    if (n == 0 || n > kv->size)
        return false;
    uint32_t tested = 0;
    for (;;) {
        if (kv->head + n > kv->size) {
            tested += kv->size - kv->head;
            kv->head = 0;
            if (tested >= kv->size)
                return false;
            continue;
        }
        uint32_t i = 0;
        while (i < n && kv->cells[kv->head + i].pos < 0)
            i++;
        if (i == n)
            break;
        kv->head += i + 1;
        tested += i + 1;
        if (tested >= kv->size)
            return false;
    }
    for (uint32_t i = 0; i < n; i++) {
        struct lm_kv_cell *c = &kv->cells[kv->head + i];
        c->pos = pos[i];
        c->seq = seq[i];
        c->delta = 0;
    }
    kv->used += n;
    return true;
}

uint32_t lm_kv_cell_max(const struct lm_kv_cache *kv)
{
    for (uint32_t i = kv->size; i > 0; i--)
        if (kv->cells[i - 1].pos >= 0)
            return i;
    return 0;
}

static uint64_t seq_bit(int32_t seq) { return seq >= 0 && seq < LM_MAX_SEQ ? (uint64_t)1 << seq : 0; }

static void fix_range(int32_t *p0, int32_t *p1)
{
    if (*p0 < 0)
        *p0 = 0;
    if (*p1 < 0)
        *p1 = INT32_MAX;
}

void lm_kv_seq_rm(struct lm_kv_cache *kv, int32_t seq, int32_t p0, int32_t p1)
{
    fix_range(&p0, &p1);
    uint32_t new_head = kv->size;
    for (uint32_t i = 0; i < kv->size; i++) {
        struct lm_kv_cell *c = &kv->cells[i];
        if (c->pos < p0 || c->pos >= p1)
            continue;
        if (seq < 0)
            c->seq = 0;
        else
            c->seq &= ~seq_bit(seq);
        if (c->seq == 0) {
            free_cell(kv, i);
            if (new_head == kv->size)
                new_head = i;
        }
    }
    if (new_head != kv->size)
        kv->head = new_head;
}

void lm_kv_seq_cp(struct lm_kv_cache *kv, int32_t src, int32_t dst, int32_t p0, int32_t p1)
{
    fix_range(&p0, &p1);
    uint64_t sb = seq_bit(src), db = seq_bit(dst);
    if (!sb || !db)
        return;
    kv->head = 0;
    for (uint32_t i = 0; i < kv->size; i++) {
        struct lm_kv_cell *c = &kv->cells[i];
        if ((c->seq & sb) && c->pos >= p0 && c->pos < p1)
            c->seq |= db;
    }
}

void lm_kv_seq_keep(struct lm_kv_cache *kv, int32_t seq)
{
    uint64_t b = seq_bit(seq);
    uint32_t new_head = kv->size;
    for (uint32_t i = 0; i < kv->size; i++) {
        struct lm_kv_cell *c = &kv->cells[i];
        if (!(c->seq & b)) { /* empty cells count too: head goes to the first cell not kept (b1892) */
            free_cell(kv, i);
            if (new_head == kv->size)
                new_head = i;
        } else {
            c->seq = b;
        }
    }
    if (new_head != kv->size)
        kv->head = new_head;
}

/* Whether cell c belongs to sequence bit b and its position is in [p0, p1). */
static bool cell_in(const struct lm_kv_cell *c, uint64_t b, int32_t p0, int32_t p1)
{
    return (c->seq & b) && c->pos >= p0 && c->pos < p1;
}

void lm_kv_seq_shift(struct lm_kv_cache *kv, int32_t seq, int32_t p0, int32_t p1, int32_t delta)
{
    fix_range(&p0, &p1);
    uint64_t b = seq_bit(seq);
    uint32_t new_head = kv->size;
    if (!b || delta == 0)
        return;
    for (uint32_t i = 0; i < kv->size; i++) {
        struct lm_kv_cell *c = &kv->cells[i];
        if (!cell_in(c, b, p0, p1))
            continue;
        kv->has_shift = true;
        c->pos += delta;
        c->delta += delta;
        if (c->pos < 0) {
            c->pos = 0; /* still a used cell: free_cell counts it out of `used` */
            free_cell(kv, i);
            if (new_head == kv->size)
                new_head = i;
        }
    }
    /* if no cell was freed, start the next search at 0 */
    kv->head = new_head != kv->size ? new_head : 0;
}

void lm_kv_seq_div(struct lm_kv_cache *kv, int32_t seq, int32_t p0, int32_t p1, int d)
{
    fix_range(&p0, &p1);
    uint64_t b = seq_bit(seq);
    if (!b || d == 1 || d == 0)
        return;
    for (uint32_t i = 0; i < kv->size; i++) {
        struct lm_kv_cell *c = &kv->cells[i];
        if (!cell_in(c, b, p0, p1))
            continue;
        kv->has_shift = true;
        int32_t p_old = c->pos;
        c->pos /= d;
        c->delta += c->pos - p_old;
    }
}

int32_t lm_kv_token_count(const struct lm_kv_cache *kv)
{
    int32_t n = 0;
    for (uint32_t i = 0; i < kv->size; i++)
        n += __builtin_popcountll(kv->cells[i].seq);
    return n;
}

int32_t lm_kv_seq_pos_max(const struct lm_kv_cache *kv, int32_t seq)
{
    int32_t m = -1;
    uint64_t b = seq_bit(seq);
    for (uint32_t i = 0; i < kv->size; i++)
        if ((kv->cells[i].seq & b) && kv->cells[i].pos > m)
            m = kv->cells[i].pos;
    return m;
}
