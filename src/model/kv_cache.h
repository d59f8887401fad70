/* kv_cache.h - the key/value cache of an inference context.
 *
 * `size` cells, one per cached token. Each cell records the token's position
 * and the set of sequences it belongs to (a bit mask: sequence ids
 * 0..LM_MAX_SEQ-1); a cell with pos < 0 is free. Per layer, K is a
 * [n_embd_k_gqa, size] matrix (row = cell) and V is stored transposed,
 * [size, n_embd_v_gqa] (row = one channel over all cells), so attention reads
 * both with contiguous rows. Element types from the context (F16 default).
 *
 * Invariants: used == number of cells with pos >= 0; a cell with pos >= 0 has
 * a non-empty seq mask; head is where the next slot search starts. Positions
 * lie in [0, LM_POS_MAX]; a used cell's pos - delta (the position its key was
 * rotated for) does too, so delta lies in [-LM_POS_MAX, LM_POS_MAX] and no
 * sum of positions and deltas overflows int32. A free cell has pos -1,
 * delta 0 and seq 0. lm_kv_cell_valid() checks one cell (state restore).
 */
#ifndef LM_KV_CACHE_H
#define LM_KV_CACHE_H

#include <stdbool.h>
#include <stdint.h>

#include "backend/backend.h"
#include "model/model.h"

#define LM_MAX_SEQ 64
#define LM_POS_MAX INT32_MAX /* the largest position a token or cell may have */

struct lm_kv_cell {
    int32_t pos;    /* -1: free */
    int32_t delta;  /* position shift not yet applied to K (seq_shift) */
    uint64_t seq;   /* bit s: the cell belongs to sequence s */
};

#define LM_KV_MAX_BUFS 8

struct lm_kv_cache {
    uint32_t size;
    uint32_t head;
    uint32_t used;
    bool has_shift;           /* some cell has delta != 0: K must be re-rotated */
    struct lm_kv_cell *cells;
    enum lm_type type_k, type_v;
    uint32_t n_layer;
    struct lm_tensor **k;     /* [n_layer] each [n_embd_k_gqa * size] */
    struct lm_tensor **v;     /* [n_layer] each [size * n_embd_v_gqa]: transposed (a channel's cells in a row),
                                 or rows per cell as K when type_v is a block type (lm_kv_v_rows) */
    /* one context and buffer per buffer type holding layers (the layers'
     * devices: model/placement.h) */
    struct lm_ctx *ctx[LM_KV_MAX_BUFS];
    struct lm_buffer *buf[LM_KV_MAX_BUFS];
    int n_buf;
};

/* Whether V is stored as K is, one row per cell: a block type (a batch
 * writes whole rows, so they can be blocks; a transposed V gets one element
 * per row). Else V is transposed, as b1892 stores it. */
static inline bool lm_kv_v_rows(const struct lm_kv_cache *kv) { return lm_type_blck(kv->type_v) > 1; }

/* Whether a cache of these types can serve the model: both types valid,
 * with an encoder and a decoder (lm_quant_traits), and a head of K and of V
 * (n_embd_head_k, n_embd_head_v) whole blocks of its type: Q8_0 needs head
 * sizes that are multiples of 32 (float types: any). Pure: thread-safe. */
bool lm_kv_type_ok(const struct lm_hparams *hp, enum lm_type type_k, enum lm_type type_v);

/* Allocate a cache of `size` cells for the model's layers, layer il's K and
 * V in a buffer of buft[il] (one buffer per distinct type, at most
 * LM_KV_MAX_BUFS). LM_ERR_UNSUPPORTED when !lm_kv_type_ok (checked before
 * anything is allocated). */
lm_status lm_kv_init(struct lm_kv_cache *kv, const struct lm_hparams *hp, enum lm_type type_k, enum lm_type type_v,
                     uint32_t size, const lm_buft *buft);
void lm_kv_free(struct lm_kv_cache *kv);

/* Find cells for n tokens: token i gets cell idx[i], with position pos[i]
 * and sequence mask seq[i]. The cells are the first run of n contiguous free
 * cells from head on (b1892's search), or, when the free cells are too
 * fragmented for one, the first n free cells from head on: a batch fits
 * whenever n cells are free (the graph writes K and V at the cells it is
 * given, and the mask, not the cell order, says what a token sees). head
 * moves past the last cell taken. Returns false (cache unchanged) when fewer
 * than n cells are free. */
bool lm_kv_find_slot(struct lm_kv_cache *kv, uint32_t n, const int32_t *pos, const uint64_t *seq, int32_t *idx);
/* Undo lm_kv_find_slot (a batch that failed): free the n cells of idx and
 * put head back to what it was before the search. */
void lm_kv_release(struct lm_kv_cache *kv, const int32_t *idx, uint32_t n, uint32_t head);
/* 1 + the index of the last used cell (0 when empty). */
uint32_t lm_kv_cell_max(const struct lm_kv_cache *kv);

/* Whether a cell read from outside (a saved state) keeps the invariants above. */
bool lm_kv_cell_valid(const struct lm_kv_cell *c);

void lm_kv_clear(struct lm_kv_cache *kv);
/* Positions [p0, p1) (p0 < 0: 0, p1 < 0: no upper bound); seq < 0: any sequence.
 * Each is one pass over the cells: O(size). */
void lm_kv_seq_rm(struct lm_kv_cache *kv, int32_t seq, int32_t p0, int32_t p1);
void lm_kv_seq_cp(struct lm_kv_cache *kv, int32_t src, int32_t dst, int32_t p0, int32_t p1);
void lm_kv_seq_keep(struct lm_kv_cache *kv, int32_t seq);
/* Add delta to the positions of seq's cells in [p0, p1); cells whose position
 * becomes negative are removed. Returns LM_ERR_INVALID_ARG, changing nothing,
 * when a cell's position would pass LM_POS_MAX (all or nothing); else LM_OK. */
lm_status lm_kv_seq_shift(struct lm_kv_cache *kv, int32_t seq, int32_t p0, int32_t p1, int32_t delta);
/* Divide the positions of seq's cells in [p0, p1) by d (rounding toward 0);
 * d <= 1 does nothing. */
void lm_kv_seq_div(struct lm_kv_cache *kv, int32_t seq, int32_t p0, int32_t p1, int d);
/* Tokens counted once per sequence, and used cells. */
int32_t lm_kv_token_count(const struct lm_kv_cache *kv);
/* Highest position of seq (-1 if none). */
int32_t lm_kv_seq_pos_max(const struct lm_kv_cache *kv, int32_t seq);

#endif
