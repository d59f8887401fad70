/* model.c - the LLaMA training model: parameters, initialisation and the
 * training graph (see model.h).
 *
 *   x = tok_embd[tokens]                                   [E, N]   N = B T
 *   for each layer:
 *       h = rms(x) * attn_norm
 *       q = rope(Wq h), k = rope(Wk h), v = Wv h            per sequence, causal
 *       x = x + Wo softmax(k^T q / sqrt(d) + mask) v
 *       f = rms(x) * ffn_norm
 *       x = x + Wdown (silu(Wgate f) * Wup f)
 *   logits = output (rms(x) * output_norm)                 [V, N]
 *   loss = cross_entropy(logits, targets)
 */
#include "train/model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/tensor_names.h"
#include "train/grad.h"

lm_status lm_train_hparams_check(const struct lm_train_hparams *hp, char *err, size_t err_size)
{
    const char *why = NULL;
    if (hp->n_vocab < 4 || hp->n_vocab > 1 << 20)
        why = "vocabulary size must be 4 .. 2^20";
    else if (hp->n_embd < 2 || hp->n_embd > 1 << 14 || hp->n_layer < 1 || hp->n_layer > 256)
        why = "embedding size must be 2 .. 16384 and layers 1 .. 256";
    else if (hp->n_head < 1 || hp->n_head_kv < 1 || hp->n_embd % hp->n_head || hp->n_head % hp->n_head_kv)
        why = "heads must divide the embedding size, and kv heads the heads";
    else if ((hp->n_embd / hp->n_head) % 2)
        why = "the head size (embedding / heads) must be even for RoPE";
    else if (hp->n_ff < 1 || hp->n_ff > 1 << 16)
        why = "feed-forward size must be 1 .. 65536";
    else if (hp->n_ctx < 2 || hp->n_ctx > 1 << 16)
        why = "context must be 2 .. 65536";
    else if (!(hp->norm_eps > 0.0f && hp->norm_eps < 1.0f) || !(hp->rope_base > 1.0f && isfinite(hp->rope_base)))
        why = "norm epsilon must be in (0, 1) and rope base > 1";
    if (why && err && err_size)
        snprintf(err, err_size, "%s", why);
    return why ? LM_ERR_INVALID_ARG : LM_OK;
}

double lm_train_hparams_n_weights(const struct lm_train_hparams *hp)
{
    const double E = hp->n_embd, V = hp->n_vocab, F = hp->n_ff, L = hp->n_layer;
    const double Ekv = (double)(hp->n_embd / hp->n_head * hp->n_head_kv);
    return 2 * E * V + E + L * (2 * E + 2 * E * E + 2 * E * Ekv + 3 * E * F);
}

/* ---- deterministic initialisation ---- */

static uint64_t splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* N(0, 1) by Irwin-Hall (sum of 12 uniforms - 6): only exact double
 * arithmetic, so the bits do not depend on the libm. */
static double normal01(uint64_t *s)
{
    double sum = 0.0;
    for (int i = 0; i < 12; i++)
        sum += (double)(splitmix64(s) >> 11) * (1.0 / 9007199254740992.0);
    return sum - 6.0;
}

static void init_normal(struct lm_tensor *t, uint64_t seed, double sd)
{
    uint64_t s = seed;
    float *d = t->data;
    for (int64_t i = 0, n = lm_nelements(t); i < n; i++)
        d[i] = (float)(normal01(&s) * sd);
}

static void init_ones(struct lm_tensor *t)
{
    float *d = t->data;
    for (int64_t i = 0, n = lm_nelements(t); i < n; i++)
        d[i] = 1.0f;
}

/* ---- parameters ---- */

static struct lm_tensor *param(struct lm_train_model *m, enum lm_tn tn, int il, int64_t ne0, int64_t ne1)
{
    struct lm_tensor *t = ne1 ? lm_new_tensor_2d(m->ctx, LM_TYPE_F32, ne0, ne1) : lm_new_tensor_1d(m->ctx, LM_TYPE_F32, ne0);
    if (!t)
        return NULL;
    char name[LM_MAX_NAME];
    lm_set_name(t, lm_tn_format(name, sizeof name, tn, il, "weight"));
    t->flags |= LM_FLAG_PARAM;
    m->params[m->n_params++] = t;
    m->n_elements += lm_nelements(t);
    return t;
}

lm_status lm_train_model_new(const struct lm_train_hparams *hp, uint64_t seed, struct lm_train_model **out,
                             char *err, size_t err_size)
{
    *out = NULL;
    lm_status st = lm_train_hparams_check(hp, err, err_size);
    if (st)
        return st;
    const int64_t E = hp->n_embd, V = hp->n_vocab, F = hp->n_ff, L = hp->n_layer;
    const int64_t Ekv = E / hp->n_head * hp->n_head_kv;
    const int64_t n_tensors = 3 + 9 * L;
    const double n_floats = lm_train_hparams_n_weights(hp);
    if (n_floats * 4 > (double)((size_t)1 << 40)) {
        if (err && err_size)
            snprintf(err, err_size, "model too large (%.0f parameters)", n_floats);
        return LM_ERR_INVALID_ARG;
    }
    struct lm_train_model *m = calloc(1, sizeof(*m));
    if (!m)
        return LM_ERR_NOMEM;
    m->hp = *hp;
    m->layers = calloc((size_t)L, sizeof(*m->layers));
    m->params = calloc((size_t)n_tensors, sizeof(*m->params));
    size_t mem = (size_t)n_tensors * (lm_tensor_overhead() + 64) + (size_t)(n_floats * 4);
    struct lm_ctx_params cp = {.mem_size = mem, .mem_buffer = NULL, .no_alloc = false};
    st = m->layers && m->params ? lm_ctx_new(&cp, &m->ctx) : LM_ERR_NOMEM;
    if (st) {
        lm_train_model_free(m);
        return st;
    }
    m->tok_embd = param(m, LM_TN_TOKEN_EMBD, 0, E, V);
    for (int il = 0; il < (int)L; il++) {
        struct lm_train_layer *l = &m->layers[il];
        l->attn_norm = param(m, LM_TN_ATTN_NORM, il, E, 0);
        l->wq = param(m, LM_TN_ATTN_Q, il, E, E);
        l->wk = param(m, LM_TN_ATTN_K, il, E, Ekv);
        l->wv = param(m, LM_TN_ATTN_V, il, E, Ekv);
        l->wo = param(m, LM_TN_ATTN_OUT, il, E, E);
        l->ffn_norm = param(m, LM_TN_FFN_NORM, il, E, 0);
        l->ffn_gate = param(m, LM_TN_FFN_GATE, il, E, F);
        l->ffn_down = param(m, LM_TN_FFN_DOWN, il, F, E);
        l->ffn_up = param(m, LM_TN_FFN_UP, il, E, F);
    }
    m->output_norm = param(m, LM_TN_OUTPUT_NORM, 0, E, 0);
    m->output = param(m, LM_TN_OUTPUT, 0, E, V);
    m->train = malloc((size_t)n_tensors * sizeof(*m->train));
    if (!m->train || (st = lm_ctx_status(m->ctx))) {
        lm_train_model_free(m);
        return st ? st : LM_ERR_NOMEM;
    }
    memcpy(m->train, m->params, (size_t)m->n_params * sizeof(*m->train));
    m->n_train = m->n_params;
    m->n_train_elements = m->n_elements;
    const double sd = 0.02, sd_res = 0.02 / sqrt(2.0 * (double)L);
    for (int i = 0; i < m->n_params; i++) {
        struct lm_tensor *t = m->params[i];
        uint64_t s = seed * 0x100000001b3ULL + (uint64_t)i * 0x9e3779b97f4a7c15ULL;
        bool residual = strstr(t->name, "attn_output") || strstr(t->name, "ffn_down");
        if (lm_n_dims(t) == 1 && t->ne[1] == 1 && strstr(t->name, "norm"))
            init_ones(t);
        else
            init_normal(t, s, residual ? sd_res : sd);
    }
    *out = m;
    return LM_OK;
}

void lm_train_model_free(struct lm_train_model *m)
{
    if (!m)
        return;
    lm_ctx_free(m->ctx);
    lm_ctx_free(m->lora_ctx);
    free(m->layers);
    free(m->params);
    free(m->train);
    free(m);
}

struct lm_tensor *lm_train_model_param(const struct lm_train_model *m, const char *name)
{
    for (int i = 0; i < m->n_params; i++)
        if (strcmp(m->params[i]->name, name) == 0)
            return m->params[i];
    return NULL;
}

/* The weight a LoRA target adapts in layer l. */
static struct lm_tensor *lora_weight(const struct lm_train_layer *l, int target)
{
    struct lm_tensor *const w[LM_LORA_COUNT] = {l->wq, l->wk, l->wv, l->wo, l->ffn_gate, l->ffn_down, l->ffn_up};
    return w[target];
}

lm_status lm_train_model_add_lora(struct lm_train_model *m, int rank, float alpha, unsigned targets, uint64_t seed,
                                  char *err, size_t err_size)
{
    const int L = m->hp.n_layer;
    const char *why = NULL;
    if (m->lora_ctx)
        why = "the model already has LoRA tensors";
    else if (rank < 1 || rank > 4096 || rank > m->hp.n_embd)
        why = "LoRA rank must be 1 .. min(4096, n_embd)";
    else if (!(alpha > 0.0f && isfinite(alpha)))
        why = "LoRA alpha must be > 0";
    else if (!targets || targets >= 1u << LM_LORA_COUNT)
        why = "no LoRA target";
    if (why) {
        if (err && err_size)
            snprintf(err, err_size, "%s", why);
        return LM_ERR_INVALID_ARG;
    }
    int n_t = 0;
    size_t bytes = 0;
    for (int il = 0; il < L; il++)
        for (int t = 0; t < LM_LORA_COUNT; t++)
            if (targets >> t & 1) {
                const struct lm_tensor *w = lora_weight(&m->layers[il], t);
                bytes += (size_t)rank * (size_t)(w->ne[0] + w->ne[1]) * sizeof(float);
                n_t += 2;
            }
    struct lm_ctx_params cp = {.mem_size = bytes + (size_t)n_t * (lm_tensor_overhead() + 64), .no_alloc = false};
    lm_status st = lm_ctx_new(&cp, &m->lora_ctx);
    struct lm_tensor **train = st ? NULL : malloc((size_t)n_t * sizeof(*train));
    if (!train) {
        lm_ctx_free(m->lora_ctx);
        m->lora_ctx = NULL;
        return st ? st : LM_ERR_NOMEM;
    }
    int k = 0;
    int64_t n_el = 0;
    for (int il = 0; il < L; il++) {
        struct lm_train_layer *l = &m->layers[il];
        for (int t = 0; t < LM_LORA_COUNT; t++) {
            if (!(targets >> t & 1))
                continue;
            const struct lm_tensor *w = lora_weight(l, t);
            struct lm_tensor *a = lm_new_tensor_2d(m->lora_ctx, LM_TYPE_F32, w->ne[0], rank);
            struct lm_tensor *b = lm_new_tensor_2d(m->lora_ctx, LM_TYPE_F32, rank, w->ne[1]);
            if (!a || !b)
                break;
            lm_format_name(a, "%s.loraA", w->name);
            lm_format_name(b, "%s.loraB", w->name);
            a->flags |= LM_FLAG_PARAM;
            b->flags |= LM_FLAG_PARAM;
            init_normal(a, seed * 0x100000001b3ULL + (uint64_t)k * 0x9e3779b97f4a7c15ULL, 1.0 / sqrt((double)w->ne[0]));
            memset(b->data, 0, lm_nbytes(b));
            l->lora_a[t] = a;
            l->lora_b[t] = b;
            train[k++] = a;
            train[k++] = b;
            n_el += lm_nelements(a) + lm_nelements(b);
        }
    }
    if ((st = lm_ctx_status(m->lora_ctx)) || k != n_t) {
        free(train);
        return st ? st : LM_ERR_NOMEM;
    }
    for (int i = 0; i < m->n_params; i++)
        m->params[i]->flags &= ~LM_FLAG_PARAM; /* the base is frozen */
    free(m->train);
    m->train = train;
    m->n_train = n_t;
    m->n_train_elements = n_el;
    m->lora_rank = rank;
    m->lora_alpha = alpha;
    return LM_OK;
}

/* ---- the graph ---- */

int lm_train_graph_size(const struct lm_train_hparams *hp)
{
    return 512 + 400 * hp->n_layer;
}

size_t lm_train_graph_ctx_size(const struct lm_train_hparams *hp)
{
    int n = lm_train_graph_size(hp);
    /* tensors, the main graph and one piece graph per layer */
    return (size_t)n * 2 * lm_tensor_overhead() + (size_t)(hp->n_layer + 2) * lm_graph_overhead((size_t)n) +
           ((size_t)1 << 20);
}

void lm_train_fill_pos(int32_t *pos, int B, int T)
{
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            pos[b * T + t] = t;
}

void lm_train_fill_mask(float *mask, int T)
{
    for (int i = 0; i < T; i++)
        for (int j = 0; j < T; j++)
            mask[i * T + j] = j <= i ? 0.0f : -INFINITY;
}

struct builder {
    const struct lm_train_model *m;
    struct lm_ctx *ctx;
    int B, T;
    struct lm_tensor *pos, *mask;
};

static struct lm_tensor *rms_mul(struct builder *b, struct lm_tensor *x, struct lm_tensor *w)
{
    return lm_mul(b->ctx, lm_rms_norm(b->ctx, x, b->m->hp.norm_eps), w);
}

static struct lm_tensor *rope(struct builder *b, struct lm_tensor *x)
{
    const struct lm_train_hparams *hp = &b->m->hp;
    struct lm_rope_params rp = {
        .n_dims = hp->n_embd / hp->n_head,
        .mode = 0, /* LLaMA: adjacent pairs */
        .n_ctx_orig = hp->n_ctx,
        .freq_base = hp->rope_base,
        .freq_scale = 1.0f,
        .ext_factor = 0.0f,
        .attn_factor = 1.0f,
        .beta_fast = 32.0f,
        .beta_slow = 1.0f,
    };
    return lm_rope(b->ctx, x, b->pos, &rp);
}

/* W x, plus (alpha / r) B (A x) when target t of layer l has LoRA tensors. */
static struct lm_tensor *lin(struct builder *b, const struct lm_train_layer *l, int t, struct lm_tensor *x)
{
    struct lm_tensor *y = lm_mul_mat(b->ctx, lora_weight(l, t), x);
    if (l->lora_a[t]) {
        struct lm_tensor *d = lm_mul_mat(b->ctx, l->lora_b[t], lm_mul_mat(b->ctx, l->lora_a[t], x));
        y = lm_add(b->ctx, y, lm_scale(b->ctx, d, b->m->lora_alpha / (float)b->m->lora_rank));
    }
    return y;
}

/* One layer: x [E, N] -> x [E, N]. */
static struct lm_tensor *layer(struct builder *b, const struct lm_train_layer *l, struct lm_tensor *x)
{
    struct lm_ctx *ctx = b->ctx;
    const struct lm_train_hparams *hp = &b->m->hp;
    const int64_t d = hp->n_embd / hp->n_head, H = hp->n_head, Hkv = hp->n_head_kv, T = b->T, B = b->B;
    const int64_t N = T * B;
    struct lm_tensor *h = rms_mul(b, x, l->attn_norm);
    struct lm_tensor *q = rope(b, lm_reshape_3d(ctx, lin(b, l, LM_LORA_Q, h), d, H, N));
    struct lm_tensor *k = rope(b, lm_reshape_3d(ctx, lin(b, l, LM_LORA_K, h), d, Hkv, N));
    struct lm_tensor *v = lin(b, l, LM_LORA_V, h);
    /* per sequence: [d, T, heads, B] */
    struct lm_tensor *q4 = lm_permute(ctx, lm_reshape_4d(ctx, q, d, H, T, B), 0, 2, 1, 3);
    struct lm_tensor *k4 = lm_permute(ctx, lm_reshape_4d(ctx, k, d, Hkv, T, B), 0, 2, 1, 3);
    struct lm_tensor *vt = lm_cont(ctx, lm_permute(ctx, lm_reshape_4d(ctx, v, d, Hkv, T, B), 1, 2, 0, 3)); /* [T, d, Hkv, B] */
    struct lm_tensor *kq = lm_mul_mat(ctx, k4, q4);                                   /* [T, T, H, B] */
    kq = lm_soft_max_ext(ctx, kq, b->mask, 1.0f / sqrtf((float)d), 0.0f);
    struct lm_tensor *kqv = lm_mul_mat(ctx, vt, kq);                                  /* [d, T, H, B] */
    struct lm_tensor *o = lm_cont_2d(ctx, lm_permute(ctx, kqv, 0, 2, 1, 3), d * H, N); /* [E, N] */
    x = lm_add(ctx, lin(b, l, LM_LORA_O, o), x);
    struct lm_tensor *f = rms_mul(b, x, l->ffn_norm);
    struct lm_tensor *g = lm_silu(ctx, lin(b, l, LM_LORA_GATE, f));
    struct lm_tensor *u = lin(b, l, LM_LORA_UP, f);
    return lm_add(ctx, lin(b, l, LM_LORA_DOWN, lm_mul(ctx, g, u)), x);
}

static struct lm_tensor *input(struct lm_tensor *t, const char *name)
{
    if (t) {
        t->flags |= LM_FLAG_INPUT;
        lm_set_name(t, name);
    }
    return t;
}

/* The index of t in m->train, or -1. */
static int train_index(const struct lm_train_model *m, const struct lm_tensor *t)
{
    for (int i = 0; i < m->n_train; i++)
        if (m->train[i] == t)
            return i;
    return -1;
}

/* Expand the gradients of list[0..n) (trainable tensors) into g, marked as
 * outputs, at their m->train index of grads. */
static lm_status expand_grads(const struct lm_train_model *m, struct lm_graph *g, struct lm_grad *gr,
                              struct lm_tensor *const *list, int n, struct lm_tensor **grads)
{
    for (int i = 0; i < n; i++) {
        struct lm_tensor *gp = lm_grad_get(gr, list[i]);
        int k = train_index(m, list[i]);
        if (!gp || k < 0)
            return LM_ERR_SHAPE;
        if (!lm_is_contiguous(gp) || gp->op == LM_OP_NONE || lm_is_view_op(gp->op) || (gp->flags & LM_FLAG_PARAM))
            return LM_ERR_SHAPE;
        gp->flags |= LM_FLAG_OUTPUT;
        lm_format_name(gp, "grad.%s", list[i]->name);
        grads[k] = gp;
        lm_status st = lm_graph_expand(g, gp);
        if (st)
            return st;
    }
    return LM_OK;
}

/* The trainable tensors of layer il (<= 14), the input x of the piece appended. */
static int layer_wrt(const struct lm_train_model *m, int il, struct lm_tensor **wrt)
{
    const struct lm_train_layer *l = &m->layers[il];
    int n = 0;
    if (m->lora_ctx) {
        for (int t = 0; t < LM_LORA_COUNT; t++)
            if (l->lora_a[t]) {
                wrt[n++] = l->lora_a[t];
                wrt[n++] = l->lora_b[t];
            }
    } else {
        struct lm_tensor *const w[9] = {l->attn_norm, l->wq, l->wk, l->wv, l->wo,
                                        l->ffn_norm, l->ffn_gate, l->ffn_down, l->ffn_up};
        memcpy(wrt, w, sizeof w);
        n = 9;
    }
    return n;
}

static lm_status build_backward(struct builder *b, struct lm_graph *g, struct lm_tensor **xs, struct lm_tensor *x0,
                                struct lm_tensor *loss, struct lm_tensor *dloss, bool checkpoint,
                                struct lm_tensor **grads)
{
    const struct lm_train_model *m = b->m;
    const int L = m->hp.n_layer;
    const bool full = m->lora_ctx == NULL; /* the head and the embedding train too */
    struct lm_grad *gr = NULL;
    lm_status st = lm_grad_new(b->ctx, &gr);
    if (st)
        return st;
    if (!checkpoint) {
        st = lm_grad_backward(gr, g, loss, dloss, m->train, m->n_train);
        if (!st)
            st = expand_grads(m, g, gr, m->train, m->n_train, grads);
        lm_grad_free(gr);
        return st;
    }
    /* the head: loss -> x_L (and output_norm, output) */
    struct lm_tensor *head[3] = {xs[L - 1], m->output_norm, m->output};
    st = lm_grad_backward(gr, g, loss, dloss, head, full ? 3 : 1);
    if (!st && full)
        st = expand_grads(m, g, gr, head + 1, 2, grads);
    /* each layer from its input, last to first: recompute, then differentiate */
    for (int il = L - 1; il >= 0 && !st; il--) {
        struct lm_tensor *in = il ? xs[il - 1] : x0;
        struct lm_tensor *y = layer(b, &m->layers[il], in);
        struct lm_graph *piece = lm_graph_new(b->ctx, lm_train_graph_size(&m->hp));
        if (!y || !piece) {
            st = lm_ctx_status(b->ctx) ? lm_ctx_status(b->ctx) : LM_ERR_NOMEM;
            break;
        }
        st = lm_graph_expand(piece, y);
        struct lm_tensor *wrt[2 * LM_LORA_COUNT + 1];
        int n = layer_wrt(m, il, wrt);
        wrt[n] = in;
        if (!st)
            st = lm_grad_backward(gr, piece, y, lm_grad_get(gr, xs[il]), wrt, n + (il > 0 || full));
        if (!st)
            st = expand_grads(m, g, gr, wrt, n, grads);
    }
    /* the embedding */
    if (!st && full) {
        struct lm_graph *piece = lm_graph_new(b->ctx, 16);
        st = piece ? lm_graph_expand(piece, x0) : LM_ERR_NOMEM;
        if (!st)
            st = lm_grad_backward(gr, piece, x0, NULL, &m->tok_embd, 1);
        if (!st)
            st = expand_grads(m, g, gr, &m->tok_embd, 1, grads);
    }
    lm_grad_free(gr);
    return st;
}

lm_status lm_train_build(const struct lm_train_model *m, struct lm_ctx *gctx, int B, int T, unsigned flags,
                         struct lm_train_graph *out)
{
    memset(out, 0, sizeof(*out));
    if (!m || !gctx || B < 1 || T < 1 || T > m->hp.n_ctx || (int64_t)B * T > (1 << 24))
        return LM_ERR_INVALID_ARG;
    struct builder b = {.m = m, .ctx = gctx, .B = B, .T = T};
    const int N = B * T, L = m->hp.n_layer;
    struct lm_ctx *ctx = gctx;
    out->graph = lm_graph_new(ctx, lm_train_graph_size(&m->hp));
    out->tokens = input(lm_new_tensor_1d(ctx, LM_TYPE_I32, N), "inp_tokens");
    out->targets = input(lm_new_tensor_1d(ctx, LM_TYPE_I32, N), "inp_targets");
    out->pos = b.pos = input(lm_new_tensor_1d(ctx, LM_TYPE_I32, N), "inp_pos");
    out->mask = b.mask = input(lm_new_tensor_2d(ctx, LM_TYPE_F32, T, T), "inp_mask");
    struct lm_tensor **xs = calloc((size_t)L, sizeof(*xs));
    if (!xs)
        return LM_ERR_NOMEM;
    struct lm_tensor *x0 = lm_get_rows(ctx, m->tok_embd, out->tokens), *x = x0;
    for (int il = 0; il < L; il++)
        x = xs[il] = layer(&b, &m->layers[il], x);
    struct lm_tensor *logits = lm_mul_mat(ctx, m->output, rms_mul(&b, x, m->output_norm));
    out->loss = lm_cross_entropy_loss(ctx, logits, out->targets);
    lm_status st = lm_ctx_status(ctx);
    if (!st && !out->graph)
        st = LM_ERR_NOMEM;
    if (!st) {
        lm_set_name(out->loss, "loss");
        out->loss->flags |= LM_FLAG_OUTPUT;
        if (flags & LM_TRAIN_LOGITS) {
            out->logits = logits;
            logits->flags |= LM_FLAG_OUTPUT;
            lm_set_name(logits, "logits");
            st = lm_graph_expand(out->graph, logits);
        }
        if (!st)
            st = lm_graph_expand(out->graph, out->loss);
    }
    if (!st && (flags & LM_TRAIN_BACKWARD)) {
        out->dloss = input(lm_new_tensor_1d(ctx, LM_TYPE_F32, 1), "inp_dloss");
        out->grads = calloc((size_t)m->n_train, sizeof(*out->grads));
        st = out->dloss && out->grads ? build_backward(&b, out->graph, xs, x0, out->loss, out->dloss,
                                                       flags & LM_TRAIN_CHECKPOINT, out->grads)
                                      : LM_ERR_NOMEM;
    }
    free(xs);
    if (!st)
        st = lm_ctx_status(ctx);
    if (st)
        lm_train_graph_release(out);
    return st;
}

void lm_train_graph_release(struct lm_train_graph *g)
{
    free(g->grads);
    g->grads = NULL;
}
