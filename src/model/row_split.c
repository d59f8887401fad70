/* row_split.c - weights cut into row slices (row_split.h). */
#include "model/row_split.h"

#include <stdlib.h>
#include <string.h>

static int by_weight(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t)((const struct lm_row_split *)a)->w, y = (uintptr_t)((const struct lm_row_split *)b)->w;
    return (x > y) - (x < y);
}

lm_status lm_row_split_make(struct lm_model *m)
{
    if (!m->place || !m->place->n_row_dev)
        return LM_OK;
    int64_t first[LM_MAX_DEVICES + 1];
    uint8_t dev[LM_MAX_DEVICES];
    int n = 0;
    for (struct lm_tensor *t = lm_ctx_first_tensor(m->ctx); t; t = lm_ctx_next_tensor(m->ctx, t))
        n += lm_placement_row_slices(m->place, m, t, first, dev) > 0;
    if (n == 0)
        return LM_OK;
    struct lm_ctx_params cp = {.mem_size = (size_t)n * LM_MAX_DEVICES * lm_tensor_overhead(), .no_alloc = true};
    m->splits = calloc((size_t)n, sizeof *m->splits);
    if (!m->splits || lm_ctx_new(&cp, &m->split_ctx))
        return LM_ERR_NOMEM;
    for (struct lm_tensor *t = lm_ctx_first_tensor(m->ctx); t && m->n_splits < n; t = lm_ctx_next_tensor(m->ctx, t)) {
        struct lm_row_split *rs = &m->splits[m->n_splits];
        rs->n = lm_placement_row_slices(m->place, m, t, rs->first, rs->dev);
        if (rs->n == 0)
            continue;
        rs->w = t;
        for (int s = 0; s < rs->n; s++) {
            rs->part[s] = lm_new_tensor_2d(m->split_ctx, t->type, t->ne[0], rs->first[s + 1] - rs->first[s]);
            if (!rs->part[s])
                return lm_ctx_status(m->split_ctx);
            lm_set_name(rs->part[s], t->name);
        }
        m->n_splits++;
    }
    qsort(m->splits, (size_t)m->n_splits, sizeof *m->splits, by_weight);
    return LM_OK;
}

const struct lm_row_split *lm_row_split_of(const struct lm_model *m, const struct lm_tensor *w)
{
    if (!m || !m->n_splits || !w)
        return NULL;
    struct lm_row_split key = {.w = w};
    return bsearch(&key, m->splits, (size_t)m->n_splits, sizeof key, by_weight);
}

int lm_row_split_part(const struct lm_model *m, const struct lm_tensor *t)
{
    for (int i = 0; m && t && i < m->n_splits; i++)
        for (int s = 0; s < m->splits[i].n; s++)
            if (m->splits[i].part[s] == t)
                return s;
    return -1;
}

lm_buft lm_row_split_buft(const struct lm_model *m, const struct lm_row_split *rs, int s)
{
    return lm_backend_reg_weight_buft(m->place->dev[rs->dev[s]], rs->part[s],
                                      m->place->repack ? LM_WEIGHT_MATMUL_ONLY : 0);
}

/* Each slice's bytes at its rows' offset of the whole weight. */
static lm_status rows_io(const struct lm_row_split *rs, uint8_t *data, bool set)
{
    const size_t row = lm_row_size(rs->w->type, rs->w->ne[0]);
    lm_status st = LM_OK;
    for (int s = 0; s < rs->n && !st; s++) {
        uint8_t *p = data + (size_t)rs->first[s] * row;
        size_t size = (size_t)(rs->first[s + 1] - rs->first[s]) * row;
        st = set ? lm_tensor_set(rs->part[s], p, 0, size) : lm_tensor_get(rs->part[s], p, 0, size);
    }
    return st;
}

lm_status lm_weight_get(const struct lm_model *m, const struct lm_tensor *w, void *data)
{
    const struct lm_row_split *rs = lm_row_split_of(m, w);
    return rs ? rows_io(rs, data, false) : lm_tensor_get(w, data, 0, lm_nbytes(w));
}

lm_status lm_weight_set(const struct lm_model *m, struct lm_tensor *w, const void *data)
{
    const struct lm_row_split *rs = lm_row_split_of(m, w);
    return rs ? rows_io(rs, (uint8_t *)data, true) : lm_tensor_set(w, data, 0, lm_nbytes(w));
}
