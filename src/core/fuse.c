/* fuse.c - which adjacent node pairs fuse (fuse.h). */
#include "core/fuse.h"

static bool f32_rows(const struct lm_tensor *t) { return t->type == LM_TYPE_F32 && t->nb[0] == sizeof(float); }

static bool is_row_vector(const struct lm_tensor *w, int64_t n)
{
    return f32_rows(w) && w->ne[0] == n && w->ne[1] == 1 && w->ne[2] == 1 && w->ne[3] == 1;
}

const struct lm_tensor *lm_fuse_other(const struct lm_tensor *a, const struct lm_tensor *b)
{
    if (b->op == LM_OP_MUL_MAT) /* a pair of products: b's weight */
        return b->src[0];
    return b->src[0] == a ? b->src[1] : b->src[0];
}

enum lm_fuse lm_fuse_match(const struct lm_tensor *a, const struct lm_tensor *b)
{
    if (!a || !b || b->view_src || !f32_rows(a) || !f32_rows(b))
        return LM_FUSE_NONE;
    if (b->op == LM_OP_MUL && b->src[0] == a) {
        if (a->op == LM_OP_RMS_NORM && f32_rows(a->src[0]) && is_row_vector(b->src[1], a->ne[0]))
            return LM_FUSE_RMS_NORM_MUL;
        if (a->op == LM_OP_UNARY && lm_get_op_i32(a, 0) == LM_UNARY_SILU && f32_rows(a->src[0]) &&
            lm_same_shape(b->src[1], a) && f32_rows(b->src[1]))
            return LM_FUSE_SILU_MUL;
        return LM_FUSE_NONE;
    }
    if (a->op == LM_OP_MUL_MAT && b->op == LM_OP_ADD && (b->src[0] == a || b->src[1] == a) && b->src[0] != b->src[1]) {
        const struct lm_tensor *r = lm_fuse_other(a, b);
        if (lm_is_contiguous(a) && lm_is_contiguous(b) && lm_same_shape(a, b) && f32_rows(r) &&
            ((lm_same_shape(r, a) && lm_is_contiguous(r)) || is_row_vector(r, a->ne[0])))
            return LM_FUSE_MUL_MAT_ADD;
    }
    if (a->op == LM_OP_MUL_MAT && b->op == LM_OP_MUL_MAT && b->src[1] == a->src[1] && b->src[0] != a) {
        const struct lm_tensor *wa = a->src[0], *wb = b->src[0];
        bool same = wa->type == wb->type && lm_same_shape(wa, wb);
        for (int d = 0; d < 4 && same; d++)
            same = wa->nb[d] == wb->nb[d];
        if (same && lm_is_contiguous(a) && lm_is_contiguous(b))
            return LM_FUSE_MUL_MAT_PAIR;
    }
    return LM_FUSE_NONE;
}
