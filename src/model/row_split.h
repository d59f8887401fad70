/* row_split.h - weights cut into row slices over several devices.
 *
 * With split_mode ROW over several GPUs the device plan slices every matrix
 * of an offloaded layer by rows (lm_placement_row_slices). The loader keeps
 * the model's tensor of such a weight (name, type, shape; it counts in the
 * model's size) without data and makes one tensor per slice, named as the
 * weight, holding rows [first[s], first[s + 1]) in its device's buffer type
 * (the device's weight_buft hook: the CPU would repack a slice as it repacks
 * a whole matrix). A GGUF matrix's rows are contiguous, so each slice is
 * one byte range of the file.
 *
 * Readers: a graph reads such a weight only through lm_b_lin (one MUL_MAT
 * per slice, each where its slice lives, then CONCAT along the rows on the
 * first slice's device, main_gpu); its bytes are read and written whole
 * with lm_weight_get / lm_weight_set (LoRA); the imatrix collector counts
 * the products of the first slice only (every slice sees the same
 * activations).
 */
#ifndef LM_ROW_SPLIT_H
#define LM_ROW_SPLIT_H

#include "model/model.h"
#include "model/placement.h"

struct lm_row_split {
    const struct lm_tensor *w; /* the model's tensor (no data) */
    int n;                     /* slices, >= 1 */
    struct lm_tensor *part[LM_MAX_DEVICES];
    uint8_t dev[LM_MAX_DEVICES];           /* the plan's device of each slice */
    int64_t first[LM_MAX_DEVICES + 1];     /* first row of each slice; first[n] = w->ne[1] */
};

/* Cut every weight of m the plan slices: m->splits (sorted by weight) and
 * the slices' tensors in m->split_ctx, without data yet. */
lm_status lm_row_split_make(struct lm_model *m);
/* The split of weight w, or NULL when w is whole. */
const struct lm_row_split *lm_row_split_of(const struct lm_model *m, const struct lm_tensor *w);
/* Slice index of t when t is a slice of a split weight, else -1. */
int lm_row_split_part(const struct lm_model *m, const struct lm_tensor *t);
/* Buffer type of slice s: its device's choice for a matrix only products read. */
lm_buft lm_row_split_buft(const struct lm_model *m, const struct lm_row_split *rs, int s);

/* All bytes of weight w (plain rows, whole or split) to / from data, as
 * lm_tensor_get / lm_tensor_set of the whole tensor. */
lm_status lm_weight_get(const struct lm_model *m, const struct lm_tensor *w, void *data);
lm_status lm_weight_set(const struct lm_model *m, struct lm_tensor *w, const void *data);

#endif
