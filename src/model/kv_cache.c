/* kv_cache.c - cells, slot search and sequence operations of the KV cache.
 * Semantics follow llama.cpp b1892 (llama_kv_cache_*), with sequence sets as
 * 64-bit masks. */
#include "model/kv_cache.h"

#include <stdlib.h>
#include <string.h>

#include "sched/alloc.h"
#include "quant/quant.h"

/* K rows are cells, a block-type V's too (a float V is stored transposed: a
 * channel's cells in a row). Attention and the K shift read one head of a
 * row (a view of n_embd_head elements at a head's offset), so a block type
 * needs heads of whole blocks; and SET_ROWS encodes, the shift and the
 * unfused attention decode, so the type needs both conversions. */
bool lm_kv_type_ok(const struct lm_hparams *hp, enum lm_type type_k, enum lm_type type_v)
{
    if (!lm_type_valid(type_k) || !lm_type_valid(type_v))
        return false;
    const struct lm_quant_traits *qk = lm_quant_traits(type_k), *qv = lm_quant_traits(type_v);
    return qk->to_float && qk->from_float && qv->to_float && qv->from_float &&
           hp->n_embd_head_k % lm_type_blck(type_k) == 0 && hp->n_embd_head_v % lm_type_blck(type_v) == 0;
}

lm_status lm_kv_init(struct lm_kv_cache *kv, const struct lm_hparams *hp, enum lm_type type_k, enum lm_type type_v,
                     uint32_t size, const lm_buft *buft)
{
    memset(kv, 0, sizeof *kv);
    if (size == 0 || !lm_type_valid(type_k) || !lm_type_valid(type_v) || !buft)
        return LM_ERR_INVALID_ARG;
    uint32_t nk = lm_hp_n_embd_k_gqa(hp), nv = lm_hp_n_embd_v_gqa(hp);
    if (!lm_kv_type_ok(hp, type_k, type_v))
        return LM_ERR_UNSUPPORTED;
    kv->size = size;
    kv->type_k = type_k;
    kv->type_v = type_v;
    kv->n_layer = hp->n_layer;
    kv->cells = malloc(size * sizeof *kv->cells);
    kv->k = calloc(hp->n_layer, sizeof *kv->k);
    kv->v = calloc(hp->n_layer, sizeof *kv->v);
    lm_status st = (!kv->cells || !kv->k || !kv->v) ? LM_ERR_NOMEM : LM_OK;
    /* one context per buffer type, in the order of the layers */
    lm_buft types[LM_KV_MAX_BUFS];
    for (uint32_t il = 0; il < hp->n_layer && !st; il++) {
        int b = 0;
        while (b < kv->n_buf && types[b] != buft[il])
            b++;
        if (b == kv->n_buf) {
            struct lm_ctx_params p = {.mem_size = (2 * (size_t)hp->n_layer + 2) * lm_tensor_overhead(),
                                      .no_alloc = true};
            if (b == LM_KV_MAX_BUFS || !buft[il]) {
                st = LM_ERR_INVALID_ARG;
                break;
            }
            types[b] = buft[il];
            if ((st = lm_ctx_new(&p, &kv->ctx[b])))
                break;
            kv->n_buf++;
        }
        kv->k[il] = lm_format_name(lm_new_tensor_1d(kv->ctx[b], type_k, (int64_t)nk * size), "cache_k_l%u", il);
        kv->v[il] = lm_format_name(lm_new_tensor_1d(kv->ctx[b], type_v, (int64_t)nv * size), "cache_v_l%u", il);
        st = lm_ctx_status(kv->ctx[b]);
    }
    for (int b = 0; b < kv->n_buf && !st; b++)
        if (!(st = lm_alloc_ctx_tensors(kv->ctx[b], types[b], &kv->buf[b])))
            lm_buffer_clear(kv->buf[b], 0);
    if (st) {
        lm_kv_free(kv);
        return st;
    }
    lm_kv_clear(kv);
    return LM_OK;
}

void lm_kv_free(struct lm_kv_cache *kv)
{
    for (int b = 0; b < kv->n_buf; b++) {
        lm_buffer_free(kv->buf[b]);
        lm_ctx_free(kv->ctx[b]);
    }
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

/* The first run of n free cells from head on (wrapping to 0 once), or UINT32_MAX. */
static uint32_t find_run(const struct lm_kv_cache *kv, uint32_t n)
{
    uint32_t head = kv->head, tested = 0;
    for (;;) {
        if (head + n > kv->size) {
            tested += kv->size - head;
            head = 0;
            if (tested >= kv->size)
                return UINT32_MAX;
            continue;
        }
        uint32_t i = 0;
        while (i < n && kv->cells[head + i].pos < 0)
            i++;
        if (i == n)
            return head;
        head += i + 1;
        tested += i + 1;
        if (tested >= kv->size)
            return UINT32_MAX;
    }
}

bool lm_kv_find_slot(struct lm_kv_cache *kv, uint32_t n, const int32_t *pos, const uint64_t *seq, int32_t *idx)
{
    if (n == 0 || n > kv->size - kv->used)
        return false;
    uint32_t run = find_run(kv, n);
    if (run != UINT32_MAX) {
        for (uint32_t i = 0; i < n; i++)
            idx[i] = (int32_t)(run + i);
    } else { /* fragmented: the first n free cells from head on */
        uint32_t found = 0;
        for (uint32_t i = 0; i < kv->size && found < n; i++) {
            uint32_t cell = (kv->head + i) % kv->size;
            if (kv->cells[cell].pos < 0)
                idx[found++] = (int32_t)cell;
        }
        if (found < n) /* used miscounted: cannot happen while the invariants hold */
            return false;
    }
    for (uint32_t i = 0; i < n; i++) {
        struct lm_kv_cell *c = &kv->cells[idx[i]];
        c->pos = pos[i];
        c->seq = seq[i];
        c->delta = 0;
    }
    kv->used += n;
    kv->head = (uint32_t)idx[n - 1] + 1 < kv->size ? (uint32_t)idx[n - 1] + 1 : 0;
    return true;
}

void lm_kv_release(struct lm_kv_cache *kv, const int32_t *idx, uint32_t n, uint32_t head)
{
    for (uint32_t i = 0; i < n; i++)
        free_cell(kv, (uint32_t)idx[i]);
    kv->head = head;
}

uint32_t lm_kv_cell_max(const struct lm_kv_cache *kv)
{
    for (uint32_t i = kv->size; i > 0; i--)
        if (kv->cells[i - 1].pos >= 0)
            return i;
    return 0;
}

static uint64_t seq_bit(int32_t seq) { return seq >= 0 && seq < LM_MAX_SEQ ? (uint64_t)1 << seq : 0; }

bool lm_kv_cell_valid(const struct lm_kv_cell *c)
{
    if (c->pos < 0)
        return c->pos == -1 && c->delta == 0 && c->seq == 0;
    int64_t rotated = (int64_t)c->pos - c->delta; /* the position the key was rotated for */
    return c->seq != 0 && rotated >= 0 && rotated <= LM_POS_MAX;
}

/* A position range [p0, p1) in 64 bits: p0 < 0 means 0 and p1 < 0 no upper
 * bound, so that a cell at LM_POS_MAX is inside an open-ended range. */
struct pos_range {
    int64_t p0, p1;
};

static struct pos_range make_range(int32_t p0, int32_t p1)
{
    return (struct pos_range){p0 < 0 ? 0 : p0, p1 < 0 ? INT64_MAX : p1};
}

/* Whether cell c belongs to a sequence of mask b and its position is in r. */
static bool cell_in(const struct lm_kv_cell *c, uint64_t b, struct pos_range r)
{
    return (c->seq & b) && c->pos >= r.p0 && c->pos < r.p1;
}

void lm_kv_seq_rm(struct lm_kv_cache *kv, int32_t seq, int32_t p0, int32_t p1)
{
    struct pos_range r = make_range(p0, p1);
    uint64_t b = seq < 0 ? ~(uint64_t)0 : seq_bit(seq);
    uint32_t new_head = kv->size;
    for (uint32_t i = 0; i < kv->size; i++) {
        struct lm_kv_cell *c = &kv->cells[i];
        if (!cell_in(c, b, r))
            continue;
        c->seq &= ~b;
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
    struct pos_range r = make_range(p0, p1);
    uint64_t sb = seq_bit(src), db = seq_bit(dst);
    if (!sb || !db)
        return;
    kv->head = 0;
    for (uint32_t i = 0; i < kv->size; i++) {
        struct lm_kv_cell *c = &kv->cells[i];
        if (cell_in(c, sb, r))
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

/* Positions and deltas are summed in 64 bits. A kept cell's new position is
 * in [0, LM_POS_MAX] (checked first) and its rotated position pos - delta does
 * not change, so by the invariant the new delta fits int32 too. */
lm_status lm_kv_seq_shift(struct lm_kv_cache *kv, int32_t seq, int32_t p0, int32_t p1, int32_t delta)
{
    struct pos_range r = make_range(p0, p1);
    uint64_t b = seq_bit(seq);
    if (!b || delta == 0)
        return LM_OK;
    for (uint32_t i = 0; delta > 0 && i < kv->size; i++)
        if (cell_in(&kv->cells[i], b, r) && (int64_t)kv->cells[i].pos + delta > LM_POS_MAX)
            return LM_ERR_INVALID_ARG;
    uint32_t new_head = kv->size;
    for (uint32_t i = 0; i < kv->size; i++) {
        struct lm_kv_cell *c = &kv->cells[i];
        if (!cell_in(c, b, r))
            continue;
        kv->has_shift = true;
        int64_t pos = (int64_t)c->pos + delta;
        if (pos < 0) {
            free_cell(kv, i);
            if (new_head == kv->size)
                new_head = i;
            continue;
        }
        c->pos = (int32_t)pos;
        c->delta = (int32_t)((int64_t)c->delta + delta);
    }
    /* if no cell was freed, start the next search at 0 */
    kv->head = new_head != kv->size ? new_head : 0;
    return LM_OK;
}

void lm_kv_seq_div(struct lm_kv_cache *kv, int32_t seq, int32_t p0, int32_t p1, int d)
{
    struct pos_range r = make_range(p0, p1);
    uint64_t b = seq_bit(seq);
    if (!b || d <= 1)
        return;
    for (uint32_t i = 0; i < kv->size; i++) {
        struct lm_kv_cell *c = &kv->cells[i];
        if (!cell_in(c, b, r))
            continue;
        kv->has_shift = true;
        int32_t p_new = c->pos / d; /* in [0, pos]: the rotated position stays in range */
        c->delta = (int32_t)((int64_t)c->delta + p_new - c->pos);
        c->pos = p_new;
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
