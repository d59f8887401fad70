/* tensor.c - arenas, tensor construction, views and element access.
 *
 * An arena is one block of memory carved front to back: each object is an
 * lm_obj header followed by its payload (a tensor struct plus, unless
 * no_alloc, its data; or a graph). Objects form a singly linked list so tensors
 * can be iterated in creation order. Nothing is freed individually.
 */
#include "core/tensor.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fp16.h"
#include "core/internal.h"

enum obj_kind { OBJ_TENSOR, OBJ_GRAPH };

struct lm_obj {
    size_t offs; /* payload offset in the arena */
    size_t size; /* payload bytes */
    struct lm_obj *next;
    enum obj_kind kind;
};

struct lm_ctx {
    uint8_t *mem;
    size_t mem_size;
    bool mem_owned;
    bool no_alloc;
    struct lm_obj *first, *last;
    size_t used;
    lm_status status;
    char error[256];
};

#define OBJ_SIZE ((sizeof(struct lm_obj) + 15) & ~(size_t)15)
#define ALIGN_UP(x, a) (((x) + (a)-1) & ~((size_t)(a)-1))

lm_status lm_ctx_new(const struct lm_ctx_params *p, struct lm_ctx **out)
{
    if (!p || !out)
        return LM_ERR_INVALID_ARG;
    struct lm_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx)
        return LM_ERR_NOMEM;
    ctx->mem_size = p->mem_size;
    ctx->no_alloc = p->no_alloc;
    if (p->mem_buffer) {
        ctx->mem = p->mem_buffer;
    } else if (p->mem_size) {
        ctx->mem = aligned_alloc(LM_MEM_ALIGN, ALIGN_UP(p->mem_size, LM_MEM_ALIGN));
        if (!ctx->mem) {
            free(ctx);
            return LM_ERR_NOMEM;
        }
        ctx->mem_owned = true;
    }
    *out = ctx;
    return LM_OK;
}

void lm_ctx_free(struct lm_ctx *ctx)
{
    if (!ctx)
        return;
    if (ctx->mem_owned)
        free(ctx->mem);
    free(ctx);
}

void lm_ctx_reset(struct lm_ctx *ctx)
{
    ctx->first = ctx->last = NULL;
    ctx->used = 0;
    ctx->status = LM_OK;
    ctx->error[0] = 0;
}

size_t lm_tensor_overhead(void)
{
    return OBJ_SIZE + ALIGN_UP(sizeof(struct lm_tensor), 16) + LM_MEM_ALIGN;
}

size_t lm_graph_overhead(size_t n)
{
    size_t hash = 2 * n + 1;
    return OBJ_SIZE + sizeof(struct lm_graph) + 2 * n * sizeof(void *) + hash * sizeof(void *) + 64;
}

lm_status lm_ctx_status(const struct lm_ctx *ctx) { return ctx->status; }
const char *lm_ctx_error(const struct lm_ctx *ctx) { return ctx->error; }
bool lm_ctx_no_alloc(const struct lm_ctx *ctx) { return ctx->no_alloc; }
size_t lm_ctx_used(const struct lm_ctx *ctx) { return ctx->used; }

/* Record the first error of the arena; later ones are dropped (they are
 * usually consequences of the first). Internal to core/. */
void lm_ctx_fail(struct lm_ctx *ctx, lm_status st, const char *fmt, ...)
{
    if (ctx->status != LM_OK)
        return;
    ctx->status = st;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ctx->error, sizeof ctx->error, fmt, ap);
    va_end(ap);
}

/* Carve `size` bytes (aligned) for a new object; NULL and error when full. */
static void *obj_new(struct lm_ctx *ctx, enum obj_kind kind, size_t size)
{
    size_t start = ALIGN_UP(ctx->used, 16);
    size_t payload = ALIGN_UP(start + OBJ_SIZE, LM_MEM_ALIGN);
    if (size > SIZE_MAX - payload - LM_MEM_ALIGN || payload + size > ctx->mem_size) {
        lm_ctx_fail(ctx, LM_ERR_FULL, "arena full: need %zu more bytes, %zu of %zu used", size, ctx->used,
                    ctx->mem_size);
        return NULL;
    }
    struct lm_obj *o = (struct lm_obj *)(ctx->mem + payload - OBJ_SIZE); /* header right before payload */
    o->offs = payload;
    o->size = size;
    o->next = NULL;
    o->kind = kind;
    if (ctx->last)
        ctx->last->next = o;
    else
        ctx->first = o;
    ctx->last = o;
    ctx->used = payload + size;
    memset(ctx->mem + payload, 0, size < sizeof(struct lm_tensor) ? size : sizeof(struct lm_tensor));
    return ctx->mem + payload;
}

/* Shared constructor: a tensor of `type` and shape ne[4] with contiguous
 * strides; data from the arena unless no_alloc or it is a view. */
struct lm_tensor *lm_tensor_make(struct lm_ctx *ctx, enum lm_type type, const int64_t ne[4], struct lm_tensor *view_src,
                                 size_t view_offs)
{
    if (ctx->status != LM_OK)
        return NULL;
    const struct lm_type_traits *tr = lm_type_traits(type);
    if (tr->blck_size == 0) {
        lm_ctx_fail(ctx, LM_ERR_UNSUPPORTED, "unsupported tensor type %d", (int)type);
        return NULL;
    }
    for (int i = 0; i < 4; i++) {
        if (ne[i] < 0 || ne[i] > ((int64_t)1 << 40)) {
            lm_ctx_fail(ctx, LM_ERR_SHAPE, "bad dimension ne[%d] = %lld", i, (long long)ne[i]);
            return NULL;
        }
    }
    if (ne[0] % tr->blck_size) {
        lm_ctx_fail(ctx, LM_ERR_SHAPE, "ne[0] = %lld is not a multiple of the %s block size %lld",
                    (long long)ne[0], tr->name, (long long)tr->blck_size);
        return NULL;
    }
    size_t nb[4];
    nb[0] = tr->type_size;
    nb[1] = tr->type_size * (size_t)(ne[0] / tr->blck_size);
    /* overflow check of the total size in 128-bit-safe steps */
    double total = (double)nb[1] * (double)ne[1] * (double)ne[2] * (double)ne[3];
    if (total > (double)((size_t)1 << 50)) {
        lm_ctx_fail(ctx, LM_ERR_NOMEM, "tensor too large (%.0f bytes)", total);
        return NULL;
    }
    nb[2] = nb[1] * (size_t)ne[1];
    nb[3] = nb[2] * (size_t)ne[2];
    size_t data_size = nb[3] * (size_t)ne[3];

    bool own_data = view_src == NULL && !ctx->no_alloc;
    size_t obj_size = ALIGN_UP(sizeof(struct lm_tensor), LM_MEM_ALIGN) + (own_data ? data_size : 0);
    struct lm_tensor *t = obj_new(ctx, OBJ_TENSOR, obj_size);
    if (!t)
        return NULL;
    memset(t, 0, sizeof *t);
    t->type = type;
    for (int i = 0; i < 4; i++) {
        t->ne[i] = ne[i];
        t->nb[i] = nb[i];
    }
    if (view_src) {
        t->view_src = view_src->view_src ? view_src->view_src : view_src;
        t->view_offs = view_offs + (view_src->view_src ? view_src->view_offs : 0);
        t->buffer = view_src->buffer;
        if (view_src->data)
            t->data = (uint8_t *)view_src->data + view_offs;
    } else if (own_data) {
        t->data = (uint8_t *)t + ALIGN_UP(sizeof(struct lm_tensor), LM_MEM_ALIGN);
    }
    return t;
}

struct lm_tensor *lm_new_tensor(struct lm_ctx *ctx, enum lm_type type, int n_dims, const int64_t *ne)
{
    if (ctx->status != LM_OK)
        return NULL;
    if (n_dims < 1 || n_dims > 4 || !ne) {
        lm_ctx_fail(ctx, LM_ERR_INVALID_ARG, "n_dims %d out of range 1..4", n_dims);
        return NULL;
    }
    int64_t full[4] = {1, 1, 1, 1};
    for (int i = 0; i < n_dims; i++)
        full[i] = ne[i];
    return lm_tensor_make(ctx, type, full, NULL, 0);
}

struct lm_tensor *lm_new_tensor_1d(struct lm_ctx *ctx, enum lm_type type, int64_t ne0)
{
    return lm_new_tensor(ctx, type, 1, (int64_t[]){ne0});
}

struct lm_tensor *lm_new_tensor_2d(struct lm_ctx *ctx, enum lm_type type, int64_t ne0, int64_t ne1)
{
    return lm_new_tensor(ctx, type, 2, (int64_t[]){ne0, ne1});
}

struct lm_tensor *lm_new_tensor_3d(struct lm_ctx *ctx, enum lm_type type, int64_t ne0, int64_t ne1, int64_t ne2)
{
    return lm_new_tensor(ctx, type, 3, (int64_t[]){ne0, ne1, ne2});
}

struct lm_tensor *lm_new_tensor_4d(struct lm_ctx *ctx, enum lm_type type, int64_t ne0, int64_t ne1, int64_t ne2,
                                   int64_t ne3)
{
    return lm_new_tensor(ctx, type, 4, (int64_t[]){ne0, ne1, ne2, ne3});
}

struct lm_tensor *lm_dup_tensor(struct lm_ctx *ctx, const struct lm_tensor *a)
{
    if (!a)
        return NULL;
    return lm_tensor_make(ctx, a->type, a->ne, NULL, 0);
}

struct lm_tensor *lm_ctx_first_tensor(const struct lm_ctx *ctx)
{
    for (struct lm_obj *o = ctx->first; o; o = o->next)
        if (o->kind == OBJ_TENSOR)
            return (struct lm_tensor *)(ctx->mem + o->offs);
    return NULL;
}

struct lm_tensor *lm_ctx_next_tensor(const struct lm_ctx *ctx, const struct lm_tensor *t)
{
    const struct lm_obj *o = (const struct lm_obj *)((const uint8_t *)t - OBJ_SIZE);
    for (o = o->next; o; o = o->next)
        if (o->kind == OBJ_TENSOR)
            return (struct lm_tensor *)(ctx->mem + o->offs);
    return NULL;
}

struct lm_tensor *lm_ctx_get_tensor(const struct lm_ctx *ctx, const char *name)
{
    for (struct lm_tensor *t = lm_ctx_first_tensor(ctx); t; t = lm_ctx_next_tensor(ctx, t))
        if (!strcmp(t->name, name))
            return t;
    return NULL;
}

void lm_set_name(struct lm_tensor *t, const char *name)
{
    if (!t)
        return;
    snprintf(t->name, sizeof t->name, "%s", name);
}

struct lm_tensor *lm_format_name(struct lm_tensor *t, const char *fmt, ...)
{
    if (!t)
        return NULL;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->name, sizeof t->name, fmt, ap);
    va_end(ap);
    return t;
}

int64_t lm_nelements(const struct lm_tensor *t) { return t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3]; }
int64_t lm_nrows(const struct lm_tensor *t) { return t->ne[1] * t->ne[2] * t->ne[3]; }

size_t lm_nbytes(const struct lm_tensor *t)
{
    if (lm_nelements(t) == 0)
        return 0;
    int64_t blck = lm_type_blck(t->type);
    size_t n;
    if (blck == 1)
        n = (size_t)(t->ne[0] - 1) * t->nb[0] + lm_type_size(t->type);
    else
        n = (size_t)(t->ne[0] / blck) * t->nb[0];
    for (int i = 1; i < 4; i++)
        n += (size_t)(t->ne[i] - 1) * t->nb[i];
    return n;
}

int lm_n_dims(const struct lm_tensor *t)
{
    for (int i = 3; i >= 1; i--)
        if (t->ne[i] > 1)
            return i + 1;
    return 1;
}

bool lm_is_contiguous_rows(const struct lm_tensor *t) { return t->nb[0] == lm_type_size(t->type); }

bool lm_is_contiguous(const struct lm_tensor *t)
{
    size_t next = lm_type_size(t->type);
    if (t->nb[0] != next)
        return false;
    next = lm_row_size(t->type, t->ne[0]);
    for (int i = 1; i < 4; i++) {
        if (t->ne[i] != 1 && t->nb[i] != next)
            return false;
        next *= (size_t)t->ne[i];
    }
    return true;
}

bool lm_same_shape(const struct lm_tensor *a, const struct lm_tensor *b)
{
    for (int i = 0; i < 4; i++)
        if (a->ne[i] != b->ne[i])
            return false;
    return true;
}

bool lm_can_repeat(const struct lm_tensor *s, const struct lm_tensor *b)
{
    for (int i = 0; i < 4; i++) {
        if (s->ne[i] == 0)
            return b->ne[i] == 0;
        if (b->ne[i] % s->ne[i])
            return false;
    }
    return true;
}

const struct lm_tensor *lm_view_root(const struct lm_tensor *t) { return t->view_src ? t->view_src : t; }

float lm_get_op_f32(const struct lm_tensor *t, int i)
{
    float f;
    memcpy(&f, &t->op_params[i], sizeof f);
    return f;
}

void lm_set_op_i32(struct lm_tensor *t, int i, int32_t v) { t->op_params[i] = v; }
void lm_set_op_f32(struct lm_tensor *t, int i, float v) { memcpy(&t->op_params[i], &v, sizeof v); }

static void *elem_ptr(const struct lm_tensor *t, int64_t i0, int64_t i1, int64_t i2, int64_t i3)
{
    return (uint8_t *)t->data + i0 * t->nb[0] + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3];
}

float lm_get_f32_nd(const struct lm_tensor *t, int64_t i0, int64_t i1, int64_t i2, int64_t i3)
{
    void *p = elem_ptr(t, i0, i1, i2, i3);
    switch (t->type) {
    case LM_TYPE_F32: return *(float *)p;
    case LM_TYPE_F16: return lm_fp16_to_fp32(*(lm_fp16 *)p);
    case LM_TYPE_BF16: return lm_bf16_to_fp32(*(lm_bf16 *)p);
    case LM_TYPE_I32: return (float)*(int32_t *)p;
    case LM_TYPE_I16: return (float)*(int16_t *)p;
    case LM_TYPE_I8: return (float)*(int8_t *)p;
    default: return NAN;
    }
}

void lm_set_f32_nd(struct lm_tensor *t, int64_t i0, int64_t i1, int64_t i2, int64_t i3, float v)
{
    void *p = elem_ptr(t, i0, i1, i2, i3);
    switch (t->type) {
    case LM_TYPE_F32: *(float *)p = v; break;
    case LM_TYPE_F16: *(lm_fp16 *)p = lm_fp32_to_fp16(v); break;
    case LM_TYPE_BF16: *(lm_bf16 *)p = lm_fp32_to_bf16(v); break;
    case LM_TYPE_I32: *(int32_t *)p = (int32_t)v; break;
    case LM_TYPE_I16: *(int16_t *)p = (int16_t)v; break;
    case LM_TYPE_I8: *(int8_t *)p = (int8_t)v; break;
    default: break;
    }
}

int32_t lm_get_i32_1d(const struct lm_tensor *t, int64_t i) { return *(int32_t *)elem_ptr(t, i, 0, 0, 0); }

/* ---- graphs ---- */

struct lm_graph *lm_graph_new(struct lm_ctx *ctx, int size)
{
    if (ctx->status != LM_OK)
        return NULL;
    if (size <= 0) {
        lm_ctx_fail(ctx, LM_ERR_INVALID_ARG, "graph size %d", size);
        return NULL;
    }
    size_t hash = 2 * (size_t)size + 1;
    size_t bytes = sizeof(struct lm_graph) + 2 * (size_t)size * sizeof(void *) + hash * sizeof(void *);
    uint8_t *p = obj_new(ctx, OBJ_GRAPH, bytes);
    if (!p)
        return NULL;
    /* nodes and leafs are written before they are read (n_nodes, n_leafs);
     * only the visited set must start empty */
    struct lm_graph *g = (struct lm_graph *)p;
    memset(g, 0, sizeof *g);
    g->size = size;
    g->nodes = (struct lm_tensor **)(p + sizeof *g);
    g->leafs = g->nodes + size;
    g->hash_size = hash;
    g->hash = (const struct lm_tensor **)(g->leafs + size);
    memset(g->hash, 0, hash * sizeof *g->hash);
    return g;
}

static size_t hash_slot(const struct lm_graph *g, const struct lm_tensor *t)
{
    size_t h = ((uintptr_t)t >> 4) % g->hash_size;
    while (g->hash[h] && g->hash[h] != t)
        h = h + 1 == g->hash_size ? 0 : h + 1;
    return h;
}

bool lm_graph_contains(const struct lm_graph *g, const struct lm_tensor *t)
{
    return g->hash[hash_slot(g, t)] == t;
}

/* Remove t from the visited set. Earlier removals leave holes in probe
 * chains, so the search passes empty slots; false if t is not there. */
static bool unhash(struct lm_graph *g, const struct lm_tensor *t)
{
    size_t h = ((uintptr_t)t >> 4) % g->hash_size;
    for (size_t k = 0; k < g->hash_size; k++) {
        if (g->hash[h] == t) {
            g->hash[h] = NULL;
            return true;
        }
        h = h + 1 == g->hash_size ? 0 : h + 1;
    }
    return false;
}

/* When the visited set holds exactly the nodes and leafs (every graph made
 * only by lm_graph_expand), their slots are cleared one by one: a decode
 * graph of ~1,000 tensors in a set of 16k slots. Otherwise (a failed
 * expand; nodes added by hand) the whole set. */
void lm_graph_clear(struct lm_graph *g)
{
    bool done = g->n_hashed == 0;
    if (!done && g->n_hashed == (size_t)g->n_nodes + (size_t)g->n_leafs) {
        done = true;
        for (int i = 0; i < g->n_nodes + g->n_leafs && done; i++)
            done = unhash(g, i < g->n_nodes ? g->nodes[i] : g->leafs[i - g->n_nodes]);
    }
    if (!done)
        memset(g->hash, 0, g->hash_size * sizeof *g->hash);
    g->n_nodes = g->n_leafs = 0;
    g->n_hashed = 0;
}

/* Iterative DFS (explicit stack) so deep graphs cannot overflow the C stack. */
lm_status lm_graph_expand(struct lm_graph *g, struct lm_tensor *root)
{
    if (!g || !root)
        return LM_ERR_INVALID_ARG;
    struct frame {
        struct lm_tensor *t;
        int next_src;
    };
    size_t cap = 64, top = 0;
    struct frame *stack = malloc(cap * sizeof *stack);
    if (!stack)
        return LM_ERR_NOMEM;
    lm_status st = LM_OK;
    size_t h = hash_slot(g, root);
    if (g->hash[h] == root)
        goto out;
    g->hash[h] = root;
    g->n_hashed++;
    stack[top++] = (struct frame){root, 0};
    while (top) {
        struct frame *f = &stack[top - 1];
        struct lm_tensor *t = f->t;
        /* sources first (view_src too: its memory must be live) */
        struct lm_tensor *next = NULL;
        while (f->next_src <= LM_MAX_SRC && !next) {
            int i = f->next_src++;
            struct lm_tensor *s = i < LM_MAX_SRC ? t->src[i] : t->view_src;
            if (!s)
                continue;
            size_t hs = hash_slot(g, s);
            if (g->hash[hs] == s)
                continue;
            g->hash[hs] = s;
            g->n_hashed++;
            next = s;
        }
        if (next) {
            if (top == cap) {
                struct frame *ns = realloc(stack, 2 * cap * sizeof *stack);
                if (!ns) {
                    st = LM_ERR_NOMEM;
                    goto out;
                }
                stack = ns;
                cap *= 2;
            }
            stack[top++] = (struct frame){next, 0};
            continue;
        }
        top--;
        if (t->op == LM_OP_NONE) {
            if (g->n_leafs >= g->size) {
                st = LM_ERR_FULL;
                goto out;
            }
            g->leafs[g->n_leafs++] = t;
        } else {
            if (g->n_nodes >= g->size) {
                st = LM_ERR_FULL;
                goto out;
            }
            g->nodes[g->n_nodes++] = t;
        }
    }
out:
    free(stack);
    return st;
}
