/* placement.c - the device plan of a model (placement.h). */
#include "model/placement.h"

#include <stdlib.h>
#include <string.h>

/* GPU g's free memory in GiB (device g + 1 of the plan), or 0 if unknown. */
static float free_gib(const struct lm_placement *pl, int g)
{
    size_t free_b = 0, total_b = 0;
    const struct lm_backend_reg *r = pl->dev[1 + g];
    return r->memory && r->memory(&free_b, &total_b) ? (float)((double)free_b / (1u << 30)) : 0.0f;
}

/* Each GPU's cumulative share of tensor_split, normalised to end at 1; all
 * zero or NULL: shares by free memory where every GPU reports it (as
 * llama.cpp), else equal shares. False for a negative or huge share. */
static bool shares(const struct lm_placement_params *p, const struct lm_placement *pl, int n_gpu, float *cum)
{
    float total = 0.0f;
    for (int g = 0; g < n_gpu; g++) {
        float s = p->tensor_split ? p->tensor_split[g] : 0.0f;
        if (!(s >= 0.0f) || s > 1e30f)
            return false;
        total += s;
        cum[g] = total;
    }
    if (total == 0.0f) { /* by free memory */
        for (int g = 0; g < n_gpu; g++) {
            float s = free_gib(pl, g);
            if (!(s > 0.0f)) {
                total = 0.0f;
                break;
            }
            total += s;
            cum[g] = total;
        }
    }
    if (total == 0.0f) { /* equal shares */
        for (int g = 0; g < n_gpu; g++)
            cum[g] = (float)(g + 1);
        total = (float)n_gpu;
    }
    for (int g = 0; g < n_gpu; g++)
        cum[g] /= total;
    return true;
}

/* ROW over several GPUs: main_gpu's slice first, then each GPU with a share. */
static bool plan_rows(const struct lm_placement_params *p, int n_gpu, struct lm_placement *out)
{
    float cum[LM_MAX_DEVICES];
    if (!shares(p, out, n_gpu, cum))
        return false;
    const int mg = p->main_gpu;
    float acc = cum[mg] - (mg ? cum[mg - 1] : 0.0f);
    out->row_dev[0] = (uint8_t)(1 + mg);
    out->row_end[0] = acc;
    int n = 1;
    for (int g = 0; g < n_gpu; g++) {
        float share = cum[g] - (g ? cum[g - 1] : 0.0f);
        if (g == mg || share <= 0.0f)
            continue;
        acc += share;
        out->row_dev[n] = (uint8_t)(1 + g);
        out->row_end[n++] = acc;
    }
    out->row_end[n - 1] = 1.0f;
    out->n_row_dev = n > 1 ? n : 0;
    return true;
}

/* The first GPU whose cumulative share passes frac (upper bound). */
static int gpu_of_fraction(const float *cum, int n_gpu, float frac)
{
    for (int g = 0; g < n_gpu; g++)
        if (cum[g] > frac)
            return g;
    return n_gpu - 1;
}

lm_status lm_placement_plan_regs(const struct lm_placement_params *p, uint32_t n_layer,
                                 const struct lm_backend_reg *const *regs, int n_regs, struct lm_placement *out)
{
    if (!p || !out || n_layer > LM_MAX_LAYERS || (n_regs > 0 && !regs))
        return LM_ERR_INVALID_ARG;
    memset(out, 0, sizeof *out);
    out->n_layer = n_layer;
    out->repack = p->repack;
    for (int i = 0; i < n_regs && !out->n_dev; i++)
        if (regs[i] && regs[i]->kind == LM_DEV_HOST && regs[i]->default_buft)
            out->dev[out->n_dev++] = regs[i];
    if (!out->n_dev)
        return LM_ERR_NOT_FOUND;
    for (int i = 0; i < n_regs && out->n_dev < LM_MAX_DEVICES; i++)
        if (regs[i] && regs[i]->kind == LM_DEV_GPU && regs[i]->default_buft)
            out->dev[out->n_dev++] = regs[i];
    const int n_gpu = out->n_dev - 1;
    if (n_gpu == 0 || p->n_gpu_layers <= 0)
        return LM_OK; /* everything on the host */

    const uint32_t n_off = (uint32_t)p->n_gpu_layers < n_layer ? (uint32_t)p->n_gpu_layers : n_layer;
    const uint32_t start = n_layer - n_off;
    if (p->split_mode == LM_SPLIT_NONE || p->split_mode == LM_SPLIT_ROW) {
        if (p->main_gpu < 0 || p->main_gpu >= n_gpu)
            return LM_ERR_INVALID_ARG;
        for (uint32_t il = start; il < n_layer; il++)
            out->layer_dev[il] = (uint8_t)(1 + p->main_gpu);
        if (p->split_mode == LM_SPLIT_ROW && n_gpu > 1 && !plan_rows(p, n_gpu, out))
            return LM_ERR_INVALID_ARG;
    } else if (p->split_mode == LM_SPLIT_LAYER) {
        float cum[LM_MAX_DEVICES];
        if (!shares(p, out, n_gpu, cum))
            return LM_ERR_INVALID_ARG;
        for (uint32_t il = start; il < n_layer; il++)
            out->layer_dev[il] = (uint8_t)(1 + gpu_of_fraction(cum, n_gpu, (float)(il - start) / (float)n_off));
    } else {
        return LM_ERR_INVALID_ARG;
    }
    if ((uint32_t)p->n_gpu_layers > n_layer && n_layer > 0)
        out->output_dev = out->layer_dev[n_layer - 1];
    return LM_OK;
}

lm_status lm_placement_plan(const struct lm_placement_params *p, uint32_t n_layer, struct lm_placement *out)
{
    const struct lm_backend_reg *regs[16];
    int n = 0;
    for (int i = 0; i < lm_backend_reg_count() && n < 16; i++)
        regs[n++] = lm_backend_reg_get(i);
    return lm_placement_plan_regs(p, n_layer, regs, n, out);
}

static bool is_input(const struct lm_model *m, const struct lm_tensor *w)
{
    return w == m->tok_embd || w == m->pos_embd || w == m->type_embd || w == m->tok_norm || w == m->tok_norm_b;
}

/* The layer of a "blk.N." weight, or -1. */
static long layer_of(const char *name)
{
    if (strncmp(name, "blk.", 4))
        return -1;
    char *end;
    long il = strtol(name + 4, &end, 10);
    return end != name + 4 && *end == '.' && il >= 0 ? il : -1;
}

int lm_placement_weight_dev(const struct lm_placement *pl, const struct lm_model *m, const struct lm_tensor *w)
{
    if (is_input(m, w))
        return pl->input_dev;
    long il = layer_of(w->name);
    if (il >= 0 && (uint32_t)il < pl->n_layer)
        return pl->layer_dev[il];
    return pl->output_dev;
}

lm_buft lm_placement_weight_buft(const struct lm_placement *pl, const struct lm_model *m, const struct lm_tensor *w)
{
    /* the input layer is read by row (a tied embedding by row and as the
     * output matrix); everything else only by matrix products (2-D) or
     * elementwise ops (1-D: no device repacks those) */
    unsigned flags = 0;
    if (pl->repack)
        flags = !is_input(m, w) ? LM_WEIGHT_MATMUL_ONLY : w == m->output ? LM_WEIGHT_MATMUL_ROWS : 0;
    return lm_backend_reg_weight_buft(pl->dev[lm_placement_weight_dev(pl, m, w)], w, flags);
}

int lm_placement_row_slices(const struct lm_placement *pl, const struct lm_model *m, const struct lm_tensor *w,
                            int64_t first[LM_MAX_DEVICES + 1], uint8_t dev[LM_MAX_DEVICES])
{
    if (!pl->n_row_dev || is_input(m, w) || w->ne[1] < 2 || w->ne[2] != 1 || w->ne[3] != 1)
        return 0;
    long il = layer_of(w->name);
    if (il < 0 || (uint32_t)il >= pl->n_layer || pl->layer_dev[il] == 0)
        return 0;
    /* slice s ends where the rows left after it, rounded down to whole
     * granules, begin: main_gpu's (the first) takes every remainder */
    const int64_t rows = w->ne[1], g = LM_ROW_SPLIT_ROWS;
    int n = 0;
    first[0] = 0;
    for (int s = 0; s < pl->n_row_dev; s++) {
        int64_t after = (int64_t)((double)rows * (1.0 - (double)pl->row_end[s]) / (double)g) * g;
        int64_t end = s == pl->n_row_dev - 1 ? rows : rows - (after > 0 ? after : 0);
        if (end <= first[n])
            continue;
        dev[n] = pl->row_dev[s];
        first[++n] = end;
    }
    return n;
}

int lm_placement_kv_dev(const struct lm_placement *pl, uint32_t il, bool offload_kqv)
{
    return offload_kqv && il < pl->n_layer ? pl->layer_dev[il] : 0;
}
