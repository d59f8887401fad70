/* util_build.c - the op test cases' graph builders: from a ut_spec (shapes,
 * types, layouts, parameters) and a seeded PRNG, make random inputs and the
 * op under test. Built once per backend with the same seed, so each backend
 * computes the same graph on the same values in its own arena. */
#include <math.h>
#include <stdio.h>

#include "util_ops.h"

static const char *const kind_names[] = {
    [UT_K_BINARY] = "binary",     [UT_K_UNARY] = "unary",           [UT_K_ROWS] = "rows",
    [UT_K_MUL_MAT] = "mul_mat",   [UT_K_MUL_MAT_ID] = "mul_mat_id", [UT_K_GET_ROWS] = "get_rows",
    [UT_K_CPY] = "cpy",           [UT_K_CONT] = "cont",             [UT_K_REPEAT] = "repeat",
    [UT_K_CONCAT] = "concat",     [UT_K_DIAG_MASK] = "diag_mask",   [UT_K_SOFT_MAX] = "soft_max",
    [UT_K_ROPE] = "rope",         [UT_K_ARGSORT] = "argsort",       [UT_K_ATTN] = "attn",
    [UT_K_TRAIN] = "train",       [UT_K_SET_ROWS] = "set_rows",
};

void ut_describe(const struct ut_spec *sp, char *buf, size_t size)
{
    snprintf(buf, size,
             "%s sub=%d %s>%s ne=[%lld,%lld,%lld,%lld] ne2=[%lld,%lld,%lld,%lld] n=[%lld,%lld,%lld,%lld] "
             "lay=%s/%s/%s f=[%g,%g,%g,%g,%g,%g]",
             kind_names[sp->kind], sp->sub, lm_type_name(sp->type), lm_type_name(sp->type2), (long long)sp->ne[0],
             (long long)sp->ne[1], (long long)sp->ne[2], (long long)sp->ne[3], (long long)sp->ne2[0],
             (long long)sp->ne2[1], (long long)sp->ne2[2], (long long)sp->ne2[3], (long long)sp->n[0],
             (long long)sp->n[1], (long long)sp->n[2], (long long)sp->n[3], ut_layout_name(sp->lay[0]),
             ut_layout_name(sp->lay[1]), ut_layout_name(sp->lay[2]), (double)sp->f[0], (double)sp->f[1],
             (double)sp->f[2], (double)sp->f[3], (double)sp->f[4], (double)sp->f[5]);
}

static struct lm_tensor *build_binary(struct lm_ctx *ctx, struct ut_rng *r, const struct ut_spec *sp)
{
    const bool div = sp->sub == LM_OP_DIV;
    struct lm_tensor *a = ut_input(ctx, r, LM_TYPE_F32, sp->ne, sp->lay[0], -1.0f, 1.0f);
    /* divisors stay away from 0 so the quotient is well conditioned */
    struct lm_tensor *b = ut_input(ctx, r, LM_TYPE_F32, sp->ne2, sp->lay[1], div ? 0.5f : -1.0f, div ? 2.0f : 1.0f);
    if (sp->n[0])
        return sp->sub == LM_OP_ADD ? lm_add_inplace(ctx, a, b) : lm_mul_inplace(ctx, a, b);
    if (sp->sub == LM_OP_ADD)
        return lm_add(ctx, a, b);
    return sp->sub == LM_OP_MUL ? lm_mul(ctx, a, b) : lm_div(ctx, a, b);
}

static struct lm_tensor *build_unary(struct lm_ctx *ctx, struct ut_rng *r, const struct ut_spec *sp)
{
    const bool root = sp->sub == LM_OP_SQRT;
    struct lm_tensor *a = ut_input(ctx, r, LM_TYPE_F32, sp->ne, sp->lay[0], root ? 0.0f : -4.0f, 4.0f);
    switch (sp->sub) {
    case LM_OP_SCALE: return lm_scale(ctx, a, sp->f[0]);
    case LM_OP_SQR: return lm_sqr(ctx, a);
    case LM_OP_SQRT: return lm_sqrt(ctx, a);
    case LM_OP_CLAMP: return lm_clamp(ctx, a, sp->f[0], sp->f[1]);
    default: return lm_unary(ctx, a, (enum lm_unary_op)(sp->sub - LM_OP_COUNT));
    }
}

static struct lm_tensor *build_rows(struct lm_ctx *ctx, struct ut_rng *r, const struct ut_spec *sp)
{
    /* NORM gets an offset so that subtracting the mean matters */
    const bool norm = sp->sub == LM_OP_NORM;
    struct lm_tensor *a = ut_input(ctx, r, LM_TYPE_F32, sp->ne, sp->lay[0], norm ? -1.0f : -2.0f, norm ? 3.0f : 2.0f);
    if (sp->sub == LM_OP_SUM_ROWS)
        return lm_sum_rows(ctx, a);
    return norm ? lm_norm(ctx, a, sp->f[0]) : lm_rms_norm(ctx, a, sp->f[0]);
}

/* An I32 tensor [n0, n1, n2] of ids uniform in [0, hi); with `bad`, about one
 * in eight is out of range (-1 or hi). Stored transposed when lay is TRANSPOSE. */
static struct lm_tensor *ids_tensor(struct lm_ctx *ctx, struct ut_rng *r, int64_t n0, int64_t n1, int64_t n2,
                                    int64_t hi, bool bad, enum ut_layout lay)
{
    struct lm_tensor *ids;
    if (lay == UT_TRANSPOSE)
        ids = lm_transpose(ctx, lm_new_tensor_3d(ctx, LM_TYPE_I32, n1, n0, n2));
    else
        ids = lm_new_tensor_3d(ctx, LM_TYPE_I32, n0, n1, n2);
    if (!ids)
        return NULL;
    for (int64_t i2 = 0; i2 < n2; i2++)
        for (int64_t i1 = 0; i1 < n1; i1++)
            for (int64_t i0 = 0; i0 < n0; i0++) {
                int64_t v = ut_rng_int(r, hi);
                if (bad && ut_rng_int(r, 8) == 0)
                    v = ut_rng_int(r, 2) ? hi : -1;
                lm_set_f32_nd(ids, i0, i1, i2, 0, (float)v);
            }
    return ids;
}

/* See UT_K_SET_ROWS. The ids are the first N of a shuffle of 0..R-1 (so
 * distinct); with n[0], about one in four is -1 or R instead. */
static struct lm_tensor *build_set_rows(struct lm_ctx *ctx, struct ut_rng *r, const struct ut_spec *sp)
{
    enum { MAX_R = 256 };
    const int64_t n = sp->ne[0], N = sp->ne[1], R = sp->ne2[0];
    const int64_t ane[4] = {n, N, 1, 1}, bne[4] = {sp->sub ? R : n, sp->sub ? n : R, 1, 1};
    if (N > R || R > MAX_R)
        return NULL;
    struct lm_tensor *a = ut_input(ctx, r, LM_TYPE_F32, ane, sp->lay[0], -1.0f, 1.0f);
    struct lm_tensor *b = ut_input(ctx, r, sp->type2, bne, sp->lay[1], -1.0f, 1.0f);
    struct lm_tensor *ids = lm_new_tensor_1d(ctx, LM_TYPE_I32, N);
    if (!a || !b || !ids)
        return NULL;
    int64_t cells[MAX_R];
    for (int64_t i = 0; i < R; i++)
        cells[i] = i;
    for (int64_t i = 0; i < N; i++) {
        const int64_t j = i + ut_rng_int(r, R - i), c = cells[j];
        cells[j] = cells[i];
        cells[i] = c;
        const int64_t v = sp->n[0] && ut_rng_int(r, 4) == 0 ? (ut_rng_int(r, 2) ? R : -1) : c;
        lm_set_f32_nd(ids, i, 0, 0, 0, (float)v);
    }
    return sp->sub ? lm_set_cols(ctx, b, a, ids) : lm_set_rows(ctx, b, a, ids);
}

static struct lm_tensor *build_mul_mat_id(struct lm_ctx *ctx, struct ut_rng *r, const struct ut_spec *sp)
{
    struct lm_tensor *as = ut_input(ctx, r, sp->type, sp->ne, sp->lay[0], -1.0f, 1.0f);
    struct lm_tensor *b = ut_input(ctx, r, LM_TYPE_F32, sp->ne2, sp->lay[1], -1.0f, 1.0f);
    struct lm_tensor *ids = ids_tensor(ctx, r, sp->n[0], sp->ne2[2], 1, sp->ne[2], sp->n[1] != 0, sp->lay[2]);
    return lm_mul_mat_id(ctx, as, b, ids);
}

static struct lm_tensor *build_get_rows(struct lm_ctx *ctx, struct ut_rng *r, const struct ut_spec *sp)
{
    struct lm_tensor *a = ut_input(ctx, r, sp->type, sp->ne, sp->lay[0], -1.0f, 1.0f);
    struct lm_tensor *ids = ids_tensor(ctx, r, sp->ne2[0], sp->ne2[1], sp->ne2[2], sp->ne[1], sp->n[0] != 0, sp->lay[2]);
    return lm_get_rows(ctx, a, ids);
}

/* A mask [n_kv, rows] for soft_max: sub 1 causal (0 / -inf), 2 ALiBi-style
 * (-|q - k| / -inf), 3 random in [-2, 0] with some -inf. Key 0 is always
 * visible, so no row is entirely -inf. */
static struct lm_tensor *mask_tensor(struct lm_ctx *ctx, struct ut_rng *r, int sub, int64_t n_kv, int64_t n_q,
                                     int64_t rows)
{
    struct lm_tensor *m = lm_new_tensor_2d(ctx, LM_TYPE_F32, n_kv, rows);
    if (!m)
        return NULL;
    const int64_t n_past = n_kv > n_q ? n_kv - n_q : 0;
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < n_kv; j++) {
            const bool visible = j <= n_past + i;
            float v;
            if (sub == 1)
                v = visible ? 0.0f : -INFINITY;
            else if (sub == 2)
                v = visible ? -(float)(n_past + i - j) : -INFINITY;
            else
                v = (j == 0 || ut_rng_int(r, 4)) ? ut_rng_float(r, -2.0f, 0.0f) : -INFINITY;
            lm_set_f32_nd(m, j, i, 0, 0, v);
        }
    return m;
}

static struct lm_tensor *build_soft_max(struct lm_ctx *ctx, struct ut_rng *r, const struct ut_spec *sp)
{
    struct lm_tensor *a = ut_input(ctx, r, LM_TYPE_F32, sp->ne, sp->lay[0], -3.0f, 3.0f);
    struct lm_tensor *mask = NULL;
    if (sp->sub) {
        mask = mask_tensor(ctx, r, sp->sub, sp->ne[0], sp->ne[1], sp->n[0]);
        if (!mask)
            return NULL;
    }
    return lm_soft_max_ext(ctx, a, mask, sp->f[0], sp->f[1]);
}

/* ROPE of a (or ROPE_BACK of a, when back) with sp's parameters and random positions. */
static struct lm_tensor *rope_of(struct lm_ctx *ctx, struct ut_rng *r, const struct ut_spec *sp, struct lm_tensor *a,
                                 bool back)
{
    struct lm_tensor *pos = lm_new_tensor_1d(ctx, LM_TYPE_I32, sp->ne[2]);
    if (!pos)
        return NULL;
    for (int64_t i = 0; i < sp->ne[2]; i++)
        lm_set_f32_nd(pos, i, 0, 0, 0, (float)ut_rng_int(r, sp->n[3]));
    const struct lm_rope_params p = {
        .n_dims = (int)sp->n[0],
        .mode = (int)sp->n[1],
        .n_ctx_orig = (int)sp->n[2],
        .freq_base = sp->f[0],
        .freq_scale = sp->f[1],
        .ext_factor = sp->f[2],
        .attn_factor = sp->f[3],
        .beta_fast = sp->f[4],
        .beta_slow = sp->f[5],
    };
    return back ? lm_rope_back(ctx, a, pos, &p) : lm_rope(ctx, a, pos, &p);
}

static struct lm_tensor *build_rope(struct lm_ctx *ctx, struct ut_rng *r, const struct ut_spec *sp)
{
    struct lm_tensor *a = ut_input(ctx, r, LM_TYPE_F32, sp->ne, sp->lay[0], -1.0f, 1.0f);
    return a ? rope_of(ctx, r, sp, a, false) : NULL;
}

/* Training ops (UT_K_TRAIN, sub = the op). */
static struct lm_tensor *build_train(struct lm_ctx *ctx, struct ut_rng *r, const struct ut_spec *sp)
{
    struct lm_tensor *a, *b;
    switch (sp->sub) {
    case LM_OP_GET_ROWS_BACK: {
        a = ut_input(ctx, r, LM_TYPE_F32, sp->ne, sp->lay[0], -1.0f, 1.0f);
        /* ids uniform in [0, R): with N > R most rows repeat */
        b = ids_tensor(ctx, r, sp->ne[1], 1, 1, sp->ne2[1], sp->n[0] != 0, UT_CONT);
        struct lm_tensor *like = lm_new_tensor_2d(ctx, sp->type, sp->ne2[0], sp->ne2[1]);
        return lm_get_rows_back(ctx, a, b, like);
    }
    case LM_OP_REPEAT_BACK:
        a = ut_input(ctx, r, LM_TYPE_F32, sp->ne, sp->lay[0], -1.0f, 1.0f);
        return lm_repeat_back(ctx, a, lm_new_tensor_4d(ctx, sp->type, sp->ne2[0], sp->ne2[1], sp->ne2[2], sp->ne2[3]));
    case LM_OP_RMS_NORM_BACK:
        a = ut_input(ctx, r, LM_TYPE_F32, sp->ne, sp->lay[0], -2.0f, 2.0f);
        b = ut_input(ctx, r, LM_TYPE_F32, sp->ne, sp->lay[1], -1.0f, 1.0f);
        return lm_rms_norm_back(ctx, a, b, sp->f[0]);
    case LM_OP_SOFT_MAX_BACK: /* y positive, as a softmax output */
        a = ut_input(ctx, r, LM_TYPE_F32, sp->ne, sp->lay[0], -1.0f, 1.0f);
        b = ut_input(ctx, r, LM_TYPE_F32, sp->ne, sp->lay[1], 0.0f, 1.0f);
        return lm_soft_max_back(ctx, a, b, sp->f[0]);
    case LM_OP_UNARY_BACK:
        a = ut_input(ctx, r, LM_TYPE_F32, sp->ne, sp->lay[0], -4.0f, 4.0f);
        b = ut_input(ctx, r, LM_TYPE_F32, sp->ne, sp->lay[1], -1.0f, 1.0f);
        return lm_unary_back(ctx, a, b, (enum lm_unary_op)sp->n[0]);
    case LM_OP_ROPE_BACK:
        a = ut_input(ctx, r, LM_TYPE_F32, sp->ne, sp->lay[0], -1.0f, 1.0f);
        return a ? rope_of(ctx, r, sp, a, true) : NULL;
    case LM_OP_CROSS_ENTROPY_LOSS:
    case LM_OP_CROSS_ENTROPY_LOSS_BACK: {
        a = ut_input(ctx, r, LM_TYPE_F32, sp->ne, sp->lay[0], -sp->f[0], sp->f[0]);
        b = sp->n[1] ? ids_tensor(ctx, r, sp->ne[1], 1, 1, 1, false, UT_CONT)
                     : ids_tensor(ctx, r, sp->ne[1], 1, 1, sp->ne[0], sp->n[0] != 0, UT_CONT);
        if (b && sp->n[1]) /* every target invalid (-1): the loss is 0 */
            for (int64_t i = 0; i < sp->ne[1]; i++)
                lm_set_f32_nd(b, i, 0, 0, 0, -1.0f);
        if (sp->sub == LM_OP_CROSS_ENTROPY_LOSS)
            return lm_cross_entropy_loss(ctx, a, b);
        struct lm_tensor *dl = lm_new_tensor_1d(ctx, LM_TYPE_F32, 1);
        if (dl)
            lm_set_f32_nd(dl, 0, 0, 0, 0, sp->f[1]);
        return lm_cross_entropy_loss_back(ctx, a, b, dl);
    }
    default: return NULL;
    }
}

static struct lm_tensor *build_argsort(struct lm_ctx *ctx, struct ut_rng *r, const struct ut_spec *sp)
{
    struct lm_tensor *a = ut_input(ctx, r, LM_TYPE_F32, sp->ne, sp->lay[0], -1.0f, 1.0f);
    if (a && sp->n[1]) { /* few distinct values: many ties, which must keep index order */
        for (int64_t i3 = 0; i3 < a->ne[3]; i3++)
            for (int64_t i2 = 0; i2 < a->ne[2]; i2++)
                for (int64_t i1 = 0; i1 < a->ne[1]; i1++)
                    for (int64_t i0 = 0; i0 < a->ne[0]; i0++)
                        lm_set_f32_nd(a, i0, i1, i2, i3, floorf(lm_get_f32_nd(a, i0, i1, i2, i3) * 3.0f));
    }
    if (sp->n[0])
        return lm_top_k(ctx, a, (int)sp->n[0]);
    return lm_argsort(ctx, a, (enum lm_sort_order)sp->sub);
}

/* An attention mask [n_kv, rows]: subs 1..3 as mask_tensor; 4: per row a
 * random window [a, b] of visible cells with about one hole in five (a row
 * keeps at least cell b); 5: as 4, and about one row in three all -inf; 6:
 * rows alternate between every cell visible and the same cells with every
 * third one hidden (the last kept): the ranges agree, the holes differ. */
static struct lm_tensor *attn_mask(struct lm_ctx *ctx, struct ut_rng *r, int sub, int64_t n_kv, int64_t n_q,
                                   int64_t rows)
{
    if (sub < 4)
        return mask_tensor(ctx, r, sub, n_kv, n_q, rows);
    struct lm_tensor *m = lm_new_tensor_2d(ctx, LM_TYPE_F32, n_kv, rows);
    if (!m)
        return NULL;
    for (int64_t i = 0; i < rows; i++) {
        const int64_t a = ut_rng_int(r, n_kv), b = a + ut_rng_int(r, n_kv - a);
        const bool hidden = sub == 5 && ut_rng_int(r, 3) == 0;
        for (int64_t j = 0; j < n_kv; j++) {
            const bool visible = sub == 6 ? i % 2 == 0 || j % 3 != 1 || j == n_kv - 1
                                          : !hidden && j >= a && j <= b && (j == b || ut_rng_int(r, 5));
            lm_set_f32_nd(m, j, i, 0, 0, visible ? ut_rng_float(r, -1.0f, 0.0f) : -INFINITY);
        }
    }
    return m;
}

/* [n0, n1, n2] of type t: plain, or (pad) a view into a larger tensor laid
 * out as the KV cache: K as rows of n0 * n2 per cell, V transposed as rows of
 * cells per channel (v_layout), with extra cells beyond n_kv. */
static struct lm_tensor *attn_kv(struct lm_ctx *ctx, struct ut_rng *r, enum lm_type t, const int64_t ne[3], bool pad,
                                 bool v_layout)
{
    if (!pad) {
        const int64_t n4[4] = {ne[0], ne[1], ne[2], 1};
        return ut_input(ctx, r, t, n4, UT_CONT, -1.0f, 1.0f);
    }
    const int64_t extra = 1 + ut_rng_int(r, 40);
    if (v_layout) { /* ne = [n_kv, d_v, n_head_kv]: cache [size, d_v * n_head_kv] */
        const int64_t big[4] = {ne[0] + extra, ne[1] * ne[2], 1, 1};
        struct lm_tensor *c = ut_input(ctx, r, t, big, UT_CONT, -1.0f, 1.0f);
        return c ? lm_view_3d(ctx, c, ne[0], ne[1], ne[2], c->nb[1], c->nb[1] * (size_t)ne[1], 0) : NULL;
    }
    /* ne = [d, n_kv, n_head_kv]: cache [d * n_head_kv, size] */
    const int64_t big[4] = {ne[0] * ne[2], ne[1] + extra, 1, 1};
    struct lm_tensor *c = ut_input(ctx, r, t, big, UT_CONT, -1.0f, 1.0f);
    return c ? lm_view_3d(ctx, c, ne[0], ne[1], ne[2], c->nb[1], lm_row_size(t, ne[0]), 0) : NULL;
}

/* x rounded to type t and back to F32 by two copies (the explicit form of
 * what MUL_MAT's activation conversion does). */
static struct lm_tensor *round_through(struct lm_ctx *ctx, struct lm_tensor *x, enum lm_type t)
{
    if (!x || t == LM_TYPE_F32)
        return x;
    struct lm_tensor *h = lm_cpy(ctx, x, lm_new_tensor_4d(ctx, t, x->ne[0], x->ne[1], x->ne[2], x->ne[3]));
    return lm_cpy(ctx, h, lm_new_tensor_4d(ctx, LM_TYPE_F32, x->ne[0], x->ne[1], x->ne[2], x->ne[3]));
}

static struct lm_tensor *build_attn(struct lm_ctx *ctx, struct ut_rng *r, const struct ut_spec *sp)
{
    struct lm_tensor *q;
    if (sp->lay[0] == UT_PERMUTE) { /* the model's Q [d, n_head, n_q] seen as [d, n_q, n_head] */
        const int64_t st[4] = {sp->ne[0], sp->ne[2], sp->ne[1], 1};
        q = lm_permute(ctx, ut_input(ctx, r, LM_TYPE_F32, st, UT_CONT, -1.0f, 1.0f), 0, 2, 1, 3);
    } else {
        q = ut_input(ctx, r, LM_TYPE_F32, sp->ne, sp->lay[0], -1.0f, 1.0f);
    }
    const int64_t n_kv = sp->ne2[0], d_v = sp->ne2[1], hkv = sp->ne2[2];
    const bool v_rows = sp->n[2] == 1;
    const int64_t kne[3] = {sp->ne[0], n_kv, hkv}, vne[3] = {n_kv, d_v, hkv}, vrne[3] = {d_v, n_kv, hkv};
    struct lm_tensor *k = attn_kv(ctx, r, sp->type, kne, sp->lay[1] == UT_PAD, false);
    struct lm_tensor *v = attn_kv(ctx, r, sp->type2, v_rows ? vrne : vne, sp->lay[1] == UT_PAD, !v_rows);
    struct lm_tensor *mask = NULL;
    if (sp->sub && !(mask = attn_mask(ctx, r, sp->sub, n_kv, sp->ne[1], sp->n[0])))
        return NULL;
    if (sp->n[1] == 0)
        return (v_rows ? lm_attn_vrows : lm_attn)(ctx, q, k, v, mask, sp->f[0], sp->f[1]);
    /* the unfused graph of model/layers.c (V rows: decoded to F32 and transposed first; p is not rounded) */
    const bool rounded = sp->n[1] == 2;
    if (v_rows && v && v->view_src) { /* a padded cache: cells' rows [d_v, hkv] are a contiguous prefix */
        struct lm_tensor *vq = lm_view_3d(ctx, v->view_src, d_v, hkv, n_kv, lm_row_size(v->type, d_v), v->nb[1],
                                          v->view_offs);
        v = lm_cont(ctx, lm_permute(ctx, lm_cpy(ctx, vq, lm_new_tensor_3d(ctx, LM_TYPE_F32, d_v, hkv, n_kv)), 1, 2, 0, 3));
    } else if (v_rows) {
        v = lm_cont(ctx, lm_transpose(ctx, lm_cpy(ctx, v, lm_new_tensor_3d(ctx, LM_TYPE_F32, d_v, n_kv, hkv))));
    }
    struct lm_tensor *kq = lm_mul_mat(ctx, k, rounded ? round_through(ctx, q, sp->type) : q);
    kq = lm_soft_max_ext(ctx, kq, mask, sp->f[0], sp->f[1]);
    struct lm_tensor *kqv = lm_mul_mat(ctx, v, rounded && !v_rows ? round_through(ctx, kq, sp->type2) : kq);
    return lm_cont(ctx, lm_permute(ctx, kqv, 0, 2, 1, 3));
}

struct lm_tensor *ut_build(struct lm_ctx *ctx, struct ut_rng *r, const struct ut_spec *sp)
{
    struct lm_tensor *a, *b;
    switch (sp->kind) {
    case UT_K_BINARY: return build_binary(ctx, r, sp);
    case UT_K_UNARY: return build_unary(ctx, r, sp);
    case UT_K_ROWS: return build_rows(ctx, r, sp);
    case UT_K_MUL_MAT:
        a = ut_input(ctx, r, sp->type, sp->ne, sp->lay[0], -1.0f, 1.0f);
        b = ut_input(ctx, r, LM_TYPE_F32, sp->ne2, sp->lay[1], -1.0f, 1.0f);
        return lm_mul_mat(ctx, a, b);
    case UT_K_MUL_MAT_ID: return build_mul_mat_id(ctx, r, sp);
    case UT_K_GET_ROWS: return build_get_rows(ctx, r, sp);
    case UT_K_CPY:
        a = ut_input(ctx, r, sp->type, sp->ne, sp->lay[0], -1.0f, 1.0f);
        b = ut_input(ctx, r, sp->type2, sp->ne2, sp->lay[1], -1.0f, 1.0f);
        return lm_cpy(ctx, a, b);
    case UT_K_SET_ROWS: return build_set_rows(ctx, r, sp);
    case UT_K_CONT:
        a = ut_input(ctx, r, sp->type, sp->ne, sp->lay[0], -1.0f, 1.0f);
        return sp->n[0] ? lm_cont_2d(ctx, a, sp->n[1], sp->n[2]) : lm_cont(ctx, a);
    case UT_K_REPEAT:
        a = ut_input(ctx, r, LM_TYPE_F32, sp->ne, sp->lay[0], -1.0f, 1.0f);
        b = lm_new_tensor_4d(ctx, LM_TYPE_F32, sp->ne2[0], sp->ne2[1], sp->ne2[2], sp->ne2[3]);
        return lm_repeat(ctx, a, b);
    case UT_K_CONCAT:
        a = ut_input(ctx, r, LM_TYPE_F32, sp->ne, sp->lay[0], -1.0f, 1.0f);
        b = ut_input(ctx, r, LM_TYPE_F32, sp->ne2, sp->lay[1], -1.0f, 1.0f);
        return lm_concat(ctx, a, b, sp->sub);
    case UT_K_DIAG_MASK:
        a = ut_input(ctx, r, LM_TYPE_F32, sp->ne, sp->lay[0], -1.0f, 1.0f);
        return lm_diag_mask_inf(ctx, a, (int)sp->n[0]);
    case UT_K_SOFT_MAX: return build_soft_max(ctx, r, sp);
    case UT_K_ROPE: return build_rope(ctx, r, sp);
    case UT_K_ARGSORT: return build_argsort(ctx, r, sp);
    case UT_K_ATTN: return build_attn(ctx, r, sp);
    case UT_K_TRAIN: return build_train(ctx, r, sp);
    }
    return NULL;
}
