/* layers.c - the shared pieces of the forward graphs (see build.h).
 *
 * Attention follows llama.cpp b1892's layout: K cached as [n_embd_k_gqa] rows
 * per cell, V cached transposed, Q·K on the cached types (F16 by default,
 * which rounds Q to F16 in the dot product exactly as the reference does),
 * softmax with scale, mask and optional ALiBi, then V·P. With F32/F16/BF16
 * caches this is one ATTN node (core/tensor.h's lm_attn: the same numbers
 * without the [n_kv, n_tokens] matrix); a context made with attn_unfused
 * (LAMINA_ATTN=unfused in the environment then) and quantized caches use the
 * unfused MUL_MAT, SOFT_MAX, MUL_MAT graph.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "core/op_rules.h"
#include "model/build.h"
#include "model/row_split.h"

static struct lm_tensor *input(struct lm_build *b, struct lm_tensor *t, const char *name)
{
    if (t) {
        t->flags |= LM_FLAG_INPUT;
        lm_set_name(t, name);
    }
    return t;
}

struct lm_tensor *lm_b_inp_embd(struct lm_build *b)
{
    const struct lm_hparams *hp = b->hp;
    if (b->inp_embd) /* the context asked for an embeddings input */
        return b->inp_embd;
    b->inp_tokens = input(b, lm_new_tensor_1d(b->ctx, LM_TYPE_I32, b->n_tokens), "inp_tokens");
    struct lm_tensor *x = lm_get_rows(b->ctx, b->m->tok_embd, b->inp_tokens);
    (void)hp;
    return x;
}

/* The mask alone: attention creates no inp_pos, since in a graph where no op
 * reads positions (ALiBi archs: mpt, bloom, ...) it would get no memory. */
static void inputs_mask(struct lm_build *b)
{
    if (!b->inp_mask)
        b->inp_mask = input(b, lm_new_tensor_2d(b->ctx, LM_TYPE_F32, b->n_kv, b->n_tokens), "inp_mask");
}

void lm_b_inputs_attn(struct lm_build *b)
{
    if (!b->inp_pos)
        b->inp_pos = input(b, lm_new_tensor_1d(b->ctx, LM_TYPE_I32, b->n_tokens), "inp_pos");
    inputs_mask(b);
}

struct lm_tensor *lm_b_norm(struct lm_build *b, struct lm_tensor *x, struct lm_tensor *w, struct lm_tensor *bias,
                            enum lm_norm_kind kind)
{
    x = kind == LM_NORM_RMS ? lm_rms_norm(b->ctx, x, b->hp->f_norm_rms_eps) : lm_norm(b->ctx, x, b->hp->f_norm_eps);
    if (w)
        x = lm_mul(b->ctx, x, w);
    if (bias)
        x = lm_add(b->ctx, x, bias);
    return x;
}

struct lm_tensor *lm_b_lin(struct lm_build *b, struct lm_tensor *w, struct lm_tensor *x, struct lm_tensor *bias)
{
    const struct lm_row_split *rs = lm_row_split_of(b->m, w);
    if (rs) { /* one product per slice, joined in row order on the first slice's device */
        struct lm_tensor *y = lm_mul_mat(b->ctx, rs->part[0], x);
        for (int s = 1; s < rs->n; s++)
            y = lm_concat(b->ctx, y, lm_mul_mat(b->ctx, rs->part[s], x), 0);
        x = y;
    } else {
        x = lm_mul_mat(b->ctx, w, x);
    }
    if (bias)
        x = lm_add(b->ctx, x, bias);
    return x;
}

void lm_b_adjacent(struct lm_build *b, struct lm_tensor *k, struct lm_tensor *v)
{
    lm_graph_expand(b->graph, k);
    lm_graph_expand(b->graph, v);
}

struct lm_tensor *lm_b_pos_embd(struct lm_build *b, struct lm_tensor *x)
{
    lm_b_inputs_attn(b);
    return lm_add(b->ctx, x, lm_get_rows(b->ctx, b->m->pos_embd, b->inp_pos));
}

void lm_b_qkv(struct lm_build *b, const struct lm_layer *l, struct lm_tensor *x, float clamp, struct lm_tensor **q,
              struct lm_tensor **k, struct lm_tensor **v)
{
    struct lm_ctx *ctx = b->ctx;
    const struct lm_hparams *hp = b->hp;
    const int64_t hk = hp->n_embd_head_k, T = b->n_tokens;
    const int64_t Eq = hk * hp->n_head, Ek = lm_hp_n_embd_k_gqa(hp), Ev = lm_hp_n_embd_v_gqa(hp);
    if (!l->wqkv) {
        struct lm_tensor *pk = lm_b_lin(b, l->wk, x, l->bk), *pv = lm_b_lin(b, l->wv, x, l->bv);
        lm_b_adjacent(b, pk, pv);
        struct lm_tensor *pq = lm_b_lin(b, l->wq, x, l->bq);
        if (clamp > 0.0f) {
            pq = lm_clamp(ctx, pq, -clamp, clamp);
            pk = lm_clamp(ctx, pk, -clamp, clamp);
            pv = lm_clamp(ctx, pv, -clamp, clamp);
        }
        *q = lm_reshape_3d(ctx, pq, hk, hp->n_head, T);
        *k = lm_reshape_3d(ctx, pk, hk, hp->n_head_kv, T);
        *v = pv;
        return;
    }
    struct lm_tensor *qkv = lm_b_lin(b, l->wqkv, x, l->bqkv); /* [Eq + Ek + Ev, T] */
    if (clamp > 0.0f)
        qkv = lm_clamp(ctx, qkv, -clamp, clamp);
    const size_t es = sizeof(float), row = qkv ? qkv->nb[1] : 0;
    *q = lm_view_3d(ctx, qkv, hk, hp->n_head, T, hk * es, row, 0);
    *k = lm_view_3d(ctx, qkv, hk, hp->n_head_kv, T, hk * es, row, (size_t)Eq * es);
    *v = lm_cont(ctx, lm_view_2d(ctx, qkv, Ev, T, row, (size_t)(Eq + Ek) * es));
}

struct lm_tensor *lm_b_rope(struct lm_build *b, struct lm_tensor *x, int n_rot, int mode)
{
    lm_b_inputs_attn(b);
    const struct lm_cparams *cp = b->cp;
    struct lm_rope_params rp = {
        .n_dims = n_rot,
        .mode = mode,
        .n_ctx_orig = (int)cp->n_yarn_orig_ctx,
        .freq_base = cp->rope_freq_base,
        .freq_scale = cp->rope_freq_scale,
        .ext_factor = cp->yarn_ext_factor,
        .attn_factor = cp->yarn_attn_factor,
        .beta_fast = cp->yarn_beta_fast,
        .beta_slow = cp->yarn_beta_slow,
    };
    return lm_rope(b->ctx, x, b->inp_pos, &rp);
}

/* x [n0, n1, T] (n0 * n1 = n) as rows [n, T]: a view when dims 0 and 1 are
 * packed together (K as a view of a fused QKV product), else a copy. */
static struct lm_tensor *token_rows(struct lm_ctx *ctx, struct lm_tensor *x, int64_t n, int32_t T)
{
    if (!x)
        return NULL;
    if (lm_is_contiguous(x))
        return lm_reshape_2d(ctx, x, n, T);
    if (x->ne[0] * x->ne[1] == n && x->ne[2] == T && x->ne[3] == 1 && x->nb[0] == lm_type_size(x->type) &&
        x->nb[1] == x->nb[0] * (size_t)x->ne[0])
        return lm_view_2d(ctx, x, n, T, x->nb[2], 0);
    return lm_reshape_2d(ctx, lm_cont(ctx, x), n, T);
}

/* Write k and v of this batch into the cache cells inp_kv_idx names: K rows
 * (one a cell), V columns (a float V is stored transposed, [cells, n_embd_v])
 * or V rows (a block-type V, lm_kv_v_rows). */
static void store_kv(struct lm_build *b, int il, struct lm_tensor *k, struct lm_tensor *v)
{
    struct lm_ctx *ctx = b->ctx;
    const struct lm_kv_cache *kv = b->kv;
    int64_t nk = lm_hp_n_embd_k_gqa(b->hp), nv = lm_hp_n_embd_v_gqa(b->hp);
    struct lm_tensor *kl = kv->k[il], *vl = kv->v[il];
    if (!b->inp_kv_idx)
        b->inp_kv_idx = input(b, lm_new_tensor_1d(ctx, LM_TYPE_I32, b->n_tokens), "inp_kv_idx");
    struct lm_tensor *kdst = lm_view_2d(ctx, kl, nk, kv->size, lm_row_size(kl->type, nk), 0);
    struct lm_tensor *kset = lm_set_rows(ctx, kdst, token_rows(ctx, k, nk, b->n_tokens), b->inp_kv_idx);
    struct lm_tensor *vset;
    if (lm_kv_v_rows(kv)) {
        struct lm_tensor *vdst = lm_view_2d(ctx, vl, nv, kv->size, lm_row_size(vl->type, nv), 0);
        vset = lm_set_rows(ctx, vdst, token_rows(ctx, v, nv, b->n_tokens), b->inp_kv_idx);
    } else {
        struct lm_tensor *vdst = lm_view_2d(ctx, vl, kv->size, nv, lm_row_size(vl->type, kv->size), 0);
        vset = lm_set_cols(ctx, vdst, lm_reshape_2d(ctx, v, nv, b->n_tokens), b->inp_kv_idx);
    }
    /* the writes must run before attention reads the cache: put them in the
     * graph now (attention reads the cache through other views) */
    lm_graph_expand(b->graph, kset);
    lm_graph_expand(b->graph, vset);
}

/* The fused ATTN op serves these caches unless the context asks for the
 * unfused graph (lm_cparams.attn_unfused: LAMINA_ATTN=unfused when it was
 * created): float K and V, a Q8_0 K, a Q8_0 V (rows per cell), in host or
 * GPU memory (the CPU's and the CUDA backend's attention read them all). */
static bool fused_cache_ok(const struct lm_tensor *t)
{
    return lm_op_float_type(t->type) || t->type == LM_TYPE_Q8_0;
}

static bool attn_fused(const struct lm_build *b, const struct lm_tensor *kl, const struct lm_tensor *vl)
{
    return !b->cp->attn_unfused && fused_cache_ok(kl) && fused_cache_ok(vl);
}

struct lm_tensor *lm_b_attn(struct lm_build *b, int il, struct lm_tensor *q, struct lm_tensor *k, struct lm_tensor *v,
                            struct lm_tensor *wo, struct lm_tensor *bo, float kq_scale)
{
    struct lm_ctx *ctx = b->ctx;
    const struct lm_hparams *hp = b->hp;
    const struct lm_kv_cache *kv = b->kv;
    int64_t hk = hp->n_embd_head_k, hv = hp->n_embd_head_v;
    inputs_mask(b);
    store_kv(b, il, k, v);

    struct lm_tensor *kl = kv->k[il], *vl = kv->v[il];
    struct lm_tensor *kc = lm_view_3d(ctx, kl, hk, b->n_kv, hp->n_head_kv, lm_row_size(kl->type, lm_hp_n_embd_k_gqa(hp)),
                                      lm_row_size(kl->type, hk), 0); /* [hk, n_kv, n_head_kv] */
    struct lm_tensor *qp = lm_permute(ctx, q, 0, 2, 1, 3);           /* [hk, T, n_head] */
    const bool v_rows = lm_kv_v_rows(kv);
    struct lm_tensor *vc;
    if (v_rows) /* [hv, n_kv, n_head_kv], rows per cell as K */
        vc = lm_view_3d(ctx, vl, hv, b->n_kv, hp->n_head_kv, lm_row_size(vl->type, lm_hp_n_embd_v_gqa(hp)),
                        lm_row_size(vl->type, hv), 0);
    else /* [n_kv, hv, n_head_kv] */
        vc = lm_view_3d(ctx, vl, b->n_kv, hv, hp->n_head_kv, lm_row_size(vl->type, kv->size),
                        lm_row_size(vl->type, kv->size) * (size_t)hv, 0);
    struct lm_tensor *cur;
    if (attn_fused(b, kl, vl)) {
        /* [hv, n_head, T]: what cont(permute(kqv)) below gives */
        struct lm_tensor *o =
            (v_rows ? lm_attn_vrows : lm_attn)(ctx, qp, kc, vc, b->inp_mask, kq_scale, hp->f_max_alibi_bias);
        cur = lm_reshape_2d(ctx, o, hv * hp->n_head, b->n_tokens);
    } else {
        if (v_rows) { /* the first n_kv cells' rows [hv, n_head_kv] (a contiguous prefix) decoded, then transposed */
            struct lm_tensor *vq = lm_view_3d(ctx, vl, hv, hp->n_head_kv, b->n_kv, lm_row_size(vl->type, hv),
                                              lm_row_size(vl->type, lm_hp_n_embd_v_gqa(hp)), 0);
            struct lm_tensor *vf = lm_cpy(ctx, vq, lm_new_tensor_3d(ctx, LM_TYPE_F32, hv, hp->n_head_kv, b->n_kv));
            vc = lm_cont(ctx, lm_permute(ctx, vf, 1, 2, 0, 3)); /* [n_kv, hv, n_head_kv] F32 */
        }
        struct lm_tensor *kq = lm_mul_mat(ctx, kc, qp);              /* [n_kv, T, n_head] */
        kq = lm_soft_max_ext(ctx, kq, b->inp_mask, kq_scale, hp->f_max_alibi_bias);
        struct lm_tensor *kqv = lm_mul_mat(ctx, vc, kq);             /* [hv, T, n_head] */
        struct lm_tensor *merged = lm_permute(ctx, kqv, 0, 2, 1, 3); /* [hv, n_head, T] */
        cur = lm_cont_2d(ctx, merged, hv * hp->n_head, b->n_tokens);
    }
    if (wo)
        cur = lm_b_lin(b, wo, cur, bo);
    return cur;
}

static struct lm_tensor *activate(struct lm_build *b, struct lm_tensor *x, enum lm_ffn_act act)
{
    switch (act) {
    case LM_ACT_SILU: return lm_silu(b->ctx, x);
    case LM_ACT_GELU: return lm_gelu(b->ctx, x);
    case LM_ACT_RELU_SQR: return lm_sqr(b->ctx, lm_relu(b->ctx, x));
    }
    return NULL;
}

struct lm_tensor *lm_b_ffn(struct lm_build *b, struct lm_tensor *x, const struct lm_layer *l, enum lm_ffn_act act)
{
    struct lm_tensor *up = lm_b_lin(b, l->ffn_up, x, l->ffn_up_b);
    struct lm_tensor *cur;
    /* up first in the node order, so that act(gate) and its product with up
     * are adjacent nodes (the CPU fuses them) */
    lm_graph_expand(b->graph, up);
    if (l->ffn_gate)
        cur = lm_mul(b->ctx, activate(b, lm_b_lin(b, l->ffn_gate, x, l->ffn_gate_b), act), up);
    else
        cur = activate(b, up, act);
    return lm_b_lin(b, l->ffn_down, cur, l->ffn_down_b);
}

struct lm_tensor *lm_b_ffn_fused(struct lm_build *b, struct lm_tensor *x, const struct lm_layer *l,
                                 enum lm_ffn_act act)
{
    struct lm_ctx *ctx = b->ctx;
    struct lm_tensor *gu = lm_b_lin(b, l->ffn_up, x, l->ffn_up_b); /* [2 n_ff, T] */
    const int64_t F = gu ? gu->ne[0] / 2 : 0;
    struct lm_tensor *gate = lm_view_2d(ctx, gu, F, b->n_tokens, gu ? gu->nb[1] : 0, 0);
    struct lm_tensor *up = lm_view_2d(ctx, gu, F, b->n_tokens, gu ? gu->nb[1] : 0, (size_t)F * sizeof(float));
    struct lm_tensor *cur = lm_mul(ctx, activate(b, lm_cont(ctx, gate), act), up);
    return lm_b_lin(b, l->ffn_down, cur, l->ffn_down_b);
}

struct lm_tensor *lm_b_moe(struct lm_build *b, struct lm_tensor *x, const struct lm_layer *l)
{
    struct lm_ctx *ctx = b->ctx;
    int64_t n_expert = b->hp->n_expert, n_used = b->hp->n_expert_used, T = b->n_tokens;
    int64_t n_embd = b->hp->n_embd;
    struct lm_tensor *logits = lm_b_lin(b, l->ffn_gate_inp, x, NULL);        /* [n_expert, T] */
    struct lm_tensor *probs = lm_soft_max(ctx, logits);
    struct lm_tensor *sel = lm_top_k(ctx, probs, (int)n_used);              /* [n_used, T] */
    struct lm_tensor *w = lm_get_rows(ctx, lm_reshape_3d(ctx, probs, 1, n_expert, T), sel); /* [1, n_used, T] */
    w = lm_reshape_2d(ctx, w, n_used, T);
    w = lm_div(ctx, w, lm_sum_rows(ctx, w));                                 /* renormalise */
    struct lm_tensor *x3 = lm_reshape_3d(ctx, x, n_embd, 1, T);
    struct lm_tensor *up = lm_mul_mat_id(ctx, l->ffn_up_exps, x3, sel);      /* [n_ff, n_used, T] */
    struct lm_tensor *gate = lm_mul_mat_id(ctx, l->ffn_gate_exps, x3, sel);
    struct lm_tensor *par = lm_mul(ctx, lm_silu(ctx, gate), up);
    struct lm_tensor *ex = lm_mul_mat_id(ctx, l->ffn_down_exps, par, sel);  /* [n_embd, n_used, T] */
    ex = lm_mul(ctx, ex, lm_reshape_3d(ctx, w, 1, n_used, T));
    struct lm_tensor *out = NULL;
    for (int64_t s = 0; s < n_used; s++) {
        struct lm_tensor *slot = ex ? lm_view_2d(ctx, ex, n_embd, T, ex->nb[2], (size_t)s * ex->nb[1]) : NULL;
        out = out ? lm_add(ctx, out, slot) : slot;
    }
    return n_used == 1 ? lm_cont(ctx, out) : out;
}

struct lm_tensor *lm_b_output(struct lm_build *b, struct lm_tensor *x, enum lm_norm_kind kind)
{
    const struct lm_model *m = b->m;
    if (b->n_outputs < b->n_tokens) {
        b->inp_out_ids = input(b, lm_new_tensor_1d(b->ctx, LM_TYPE_I32, b->n_outputs), "inp_out_ids");
        x = lm_get_rows(b->ctx, x, b->inp_out_ids);
    }
    x = lm_b_norm(b, x, m->output_norm, m->output_norm_b, kind);
    b->out_embd = x;
    b->out_logits = lm_b_lin(b, m->output, x, m->output_b);
    return b->out_logits;
}

lm_status lm_build_graph(struct lm_build *b)
{
    const struct lm_arch_def *def = lm_arch_get(b->hp->arch);
    if (!def)
        return LM_ERR_UNSUPPORTED;
    b->graph = lm_graph_new(b->ctx, LM_GRAPH_MAX_NODES);
    if (!b->graph)
        return lm_ctx_status(b->ctx);
    struct lm_tensor *res = def->build(b);
    if (!res || !b->out_embd || lm_ctx_status(b->ctx))
        return lm_ctx_status(b->ctx) ? lm_ctx_status(b->ctx) : LM_ERR_SHAPE;
    struct lm_tensor *logits = def->encoder ? NULL : res; /* an encoder has no LM head */
    b->out_embd->flags |= LM_FLAG_OUTPUT;
    if (logits) {
        logits->flags |= LM_FLAG_OUTPUT;
        lm_set_name(logits, "result_output");
    }
    lm_set_name(b->out_embd, logits ? "result_norm" : "result_embd");
    lm_status st = lm_graph_expand(b->graph, b->out_embd);
    if (!st && logits)
        st = lm_graph_expand(b->graph, logits);
    return st;
}

bool lm_build_keys_rotated(const struct lm_hparams *hp)
{
    const struct lm_arch_def *def = lm_arch_get(hp->arch);
    return def && def->rope_mode != LM_ROPE_NONE && !(hp->f_max_alibi_bias > 0.0f);
}

lm_status lm_build_k_shift(struct lm_build *b)
{
    struct lm_ctx *ctx = b->ctx;
    const struct lm_hparams *hp = b->hp;
    const struct lm_kv_cache *kv = b->kv;
    b->graph = lm_graph_new(ctx, LM_GRAPH_MAX_NODES);
    b->inp_pos = input(b, lm_new_tensor_1d(ctx, LM_TYPE_I32, kv->size), "inp_k_shift");
    const struct lm_arch_def *def = lm_arch_get(hp->arch);
    if (!def || def->rope_mode == LM_ROPE_NONE)
        return LM_ERR_UNSUPPORTED;
    int mode = def->rope_mode;
    int64_t hk = hp->n_embd_head_k;
    lm_status st = lm_ctx_status(ctx);
    for (uint32_t il = 0; il < hp->n_layer && !st; il++) {
        struct lm_tensor *kl = kv->k[il];
        struct lm_tensor *kview = lm_view_3d(ctx, kl, hk, hp->n_head_kv, kv->size, lm_row_size(kl->type, hk),
                                             lm_row_size(kl->type, lm_hp_n_embd_k_gqa(hp)), 0);
        struct lm_tensor *kf = kview;
        if (kl->type != LM_TYPE_F32)
            kf = lm_cpy(ctx, kview, lm_new_tensor_3d(ctx, LM_TYPE_F32, hk, hp->n_head_kv, kv->size));
        struct lm_tensor *r = lm_b_rope(b, kf, (int)hp->n_rot, mode);
        st = lm_graph_expand(b->graph, lm_cpy(ctx, r, kview));
        if (!st)
            st = lm_ctx_status(ctx);
    }
    return st ? st : lm_ctx_status(ctx);
}
