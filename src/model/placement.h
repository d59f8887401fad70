/* placement.h - which device holds and computes each part of a model.
 *
 * The one place that maps llama_model_params' n_gpu_layers / split_mode /
 * main_gpu / tensor_split onto the registered backends (backend.h registry).
 * Devices: [0] is the host (the first registered LM_DEV_HOST backend with a
 * default_buft: the CPU), then every LM_DEV_GPU backend in registry order.
 * As in llama.cpp b1892:
 *   - the input layer (token/position/type embeddings, their norm) stays on
 *     the host: it is read by row (get_rows);
 *   - the last n_gpu_layers layers go to GPUs: split_mode NONE and ROW put
 *     them all on main_gpu; LAYER spreads them in contiguous runs in
 *     proportion to tensor_split (all zero or NULL: to each GPU's free
 *     memory, the reg's memory hook; equal shares where a GPU cannot say);
 *   - ROW over two or more GPUs also cuts every matrix of an offloaded layer
 *     into row slices, one per GPU with a share of tensor_split (as LAYER),
 *     main_gpu's first: main_gpu computes the layer's other ops and joins the
 *     slices' products (lm_placement_row_slices; the model's row splits in
 *     model/row_split.h);
 *   - the output layer (final norm, LM head) goes to the last layer's GPU when
 *     n_gpu_layers > n_layer, else to the host;
 *   - a layer's KV cache lives on the layer's device when offload_kqv, else
 *     on the host.
 * A weight's buffer type is its device's choice (the reg's weight_buft hook,
 * told whether only matrix products read it), so with the CPU alone every
 * matrix the CPU can repack lands in its repacking buffer type and the rest
 * in plain host memory. The scheduler then runs each node where its weights
 * live (sched.h): the plan's layer devices are what computes each layer.
 */
#ifndef LM_PLACEMENT_H
#define LM_PLACEMENT_H

#include <stdbool.h>
#include <stdint.h>

#include "backend/backend.h"
#include "model/model.h"

enum lm_split_mode { LM_SPLIT_NONE = 0, LM_SPLIT_LAYER = 1, LM_SPLIT_ROW = 2 }; /* = llama_split_mode */

struct lm_placement_params {
    int32_t n_gpu_layers;         /* <= 0: none; > n_layer: the output layer too */
    enum lm_split_mode split_mode;
    int32_t main_gpu;             /* index among the GPUs (NONE, ROW) */
    const float *tensor_split;    /* NULL, or one proportion per GPU (LM_MAX_DEVICES - 1 read) */
    bool repack;                  /* let devices keep matmul-only weights in their own layout */
};

struct lm_placement {
    int n_dev;                                   /* >= 1; [0] is the host */
    const struct lm_backend_reg *dev[LM_MAX_DEVICES];
    uint32_t n_layer;
    uint8_t layer_dev[LM_MAX_LAYERS];            /* device of layer il: its weights and compute */
    uint8_t input_dev, output_dev;
    bool repack;
    /* split_mode ROW over several GPUs, else n_row_dev = 0: the devices
     * holding row slices in slice order (main_gpu first, then every GPU with
     * a share) and the share of rows after each (row_end[n_row_dev - 1] = 1) */
    int n_row_dev;
    uint8_t row_dev[LM_MAX_DEVICES];
    float row_end[LM_MAX_DEVICES];
};

/* Slice boundaries past main_gpu's fall on multiples of this many rows (the
 * CUDA quantized kernels' row tile; every repacking layout of the CPU). */
#define LM_ROW_SPLIT_ROWS 16

/* The plan for a model of n_layer layers over the registered backends.
 * LM_ERR_NOT_FOUND when no host backend is registered (llama_backend_init
 * registers the built-in ones); LM_ERR_INVALID_ARG for a main_gpu or
 * tensor_split that names no GPU. */
lm_status lm_placement_plan(const struct lm_placement_params *p, uint32_t n_layer, struct lm_placement *out);
/* The same over an explicit list of regs instead of the registry (tests). */
lm_status lm_placement_plan_regs(const struct lm_placement_params *p, uint32_t n_layer,
                                 const struct lm_backend_reg *const *regs, int n_regs, struct lm_placement *out);

/* The device holding weight w of model m (w's layer from its "blk.N." name;
 * the input layer's tensors; anything else belongs to the output layer). */
int lm_placement_weight_dev(const struct lm_placement *pl, const struct lm_model *m, const struct lm_tensor *w);
/* The buffer type of weight w: its device's weight_buft hook. */
lm_buft lm_placement_weight_buft(const struct lm_placement *pl, const struct lm_model *m, const struct lm_tensor *w);
/* The row slices of weight w: 0 when w is whole (no row split, not a matrix
 * of an offloaded layer); else n >= 1 slices in row order, slice s holding
 * rows [first[s], first[s + 1]) on device dev[s] (first[n] = w->ne[1]). No
 * slice is empty; every slice but main_gpu's has a multiple of
 * LM_ROW_SPLIT_ROWS rows, main_gpu's takes the remainder (a matrix of fewer
 * rows than that stays whole on main_gpu as one slice). */
int lm_placement_row_slices(const struct lm_placement *pl, const struct lm_model *m, const struct lm_tensor *w,
                            int64_t first[LM_MAX_DEVICES + 1], uint8_t dev[LM_MAX_DEVICES]);
/* The device holding layer il's KV cache. */
int lm_placement_kv_dev(const struct lm_placement *pl, uint32_t il, bool offload_kqv);

#endif
