/* buffer.c - buffer types, buffers, the host buffer type, tensor data access.
 *
 * The host buffer type allocates aligned memory; a buffer over caller memory
 * (mmapped weights) uses the same vtable minus freeing. Tensor set/get check
 * the byte range against the tensor before calling into the buffer.
 */
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "core/log.h"
#include "core/memory.h"

#define HOST_ALIGN 64

/* ---- buffer type wrappers ---- */

const char *lm_buft_name(lm_buft buft) { return buft->iface.get_name(buft); }

lm_status lm_buft_alloc_buffer(lm_buft buft, size_t size, struct lm_buffer **out)
{
    return buft->iface.alloc_buffer(buft, size, out);
}

size_t lm_buft_alignment(lm_buft buft) { return buft->iface.get_alignment(buft); }

size_t lm_buft_max_size(lm_buft buft) { return buft->iface.get_max_size ? buft->iface.get_max_size(buft) : SIZE_MAX; }

size_t lm_buft_alloc_size(lm_buft buft, const struct lm_tensor *t)
{
    return buft->iface.get_alloc_size ? buft->iface.get_alloc_size(buft, t) : lm_nbytes(t);
}

bool lm_buft_is_host(lm_buft buft) { return buft->iface.is_host && buft->iface.is_host(buft); }

/* ---- buffers ---- */

struct lm_buffer *lm_buffer_init(lm_buft buft, struct lm_buffer_i iface, void *context, size_t size)
{
    struct lm_buffer *b = calloc(1, sizeof *b);
    if (!b)
        return NULL;
    b->iface = iface;
    b->buft = buft;
    b->context = context;
    b->size = size;
    return b;
}

void lm_buffer_free(struct lm_buffer *buf)
{
    if (!buf)
        return;
    if (buf->iface.free_buffer)
        buf->iface.free_buffer(buf);
    free(buf);
}

void *lm_buffer_base(struct lm_buffer *buf) { return buf->size ? buf->iface.get_base(buf) : (void *)(uintptr_t)HOST_ALIGN; }
size_t lm_buffer_size(const struct lm_buffer *buf) { return buf->size; }
void lm_buffer_clear(struct lm_buffer *buf, uint8_t value)
{
    if (buf->size)
        buf->iface.clear(buf, value);
}
bool lm_buffer_is_host(const struct lm_buffer *buf) { return lm_buft_is_host(buf->buft); }
void lm_buffer_set_usage(struct lm_buffer *buf, enum lm_buffer_usage usage) { buf->usage = usage; }

lm_status lm_buffer_place_tensor(struct lm_buffer *buf, struct lm_tensor *t, size_t offset)
{
    if (!buf || !t || t->view_src || t->data)
        return LM_ERR_INVALID_ARG;
    size_t need = lm_buft_alloc_size(buf->buft, t);
    if (offset > buf->size || need > buf->size - offset)
        return LM_ERR_INVALID_ARG;
    t->buffer = buf;
    t->data = (uint8_t *)lm_buffer_base(buf) + offset;
    if (buf->iface.init_tensor)
        return buf->iface.init_tensor(buf, t);
    return LM_OK;
}

lm_status lm_view_init(struct lm_tensor *view)
{
    struct lm_tensor *src = view->view_src;
    if (!src || !src->data)
        return LM_ERR_INVALID_ARG;
    view->buffer = src->buffer;
    view->data = (uint8_t *)src->data + view->view_offs;
    if (view->buffer && view->buffer->iface.init_tensor)
        return view->buffer->iface.init_tensor(view->buffer, view);
    return LM_OK;
}

static bool range_ok(const struct lm_tensor *t, size_t offset, size_t size)
{
    size_t n = lm_nbytes(t);
    return t->data && offset <= n && size <= n - offset;
}

lm_status lm_tensor_set(struct lm_tensor *t, const void *data, size_t offset, size_t size)
{
    if (!range_ok(t, offset, size))
        return LM_ERR_INVALID_ARG;
    if (size == 0)
        return LM_OK;
    if (t->buffer)
        t->buffer->iface.set_tensor(t->buffer, t, data, offset, size);
    else
        memcpy((uint8_t *)t->data + offset, data, size);
    return LM_OK;
}

lm_status lm_tensor_get(const struct lm_tensor *t, void *data, size_t offset, size_t size)
{
    if (!range_ok(t, offset, size))
        return LM_ERR_INVALID_ARG;
    if (size == 0)
        return LM_OK;
    if (t->buffer)
        t->buffer->iface.get_tensor(t->buffer, t, data, offset, size);
    else
        memcpy(data, (const uint8_t *)t->data + offset, size);
    return LM_OK;
}

lm_status lm_tensor_copy(const struct lm_tensor *src, struct lm_tensor *dst)
{
    size_t n = lm_nbytes(src);
    if (src->type != dst->type || n != lm_nbytes(dst))
        return LM_ERR_INVALID_ARG;
    if (src == dst || n == 0)
        return LM_OK;
    if (dst->buffer && dst->buffer->iface.cpy_tensor && dst->buffer->iface.cpy_tensor(dst->buffer, src, dst))
        return LM_OK;
    if (src->buffer && lm_buffer_is_host(src->buffer))
        return lm_tensor_set(dst, src->data, 0, n);
    if (dst->buffer && lm_buffer_is_host(dst->buffer))
        return lm_tensor_get(src, dst->data, 0, n);
    void *tmp = malloc(n);
    if (!tmp)
        return LM_ERR_NOMEM;
    lm_status st = lm_tensor_get(src, tmp, 0, n);
    if (!st)
        st = lm_tensor_set(dst, tmp, 0, n);
    free(tmp);
    return st;
}

/* ---- the host buffer type ---- */

static void host_free(struct lm_buffer *buf) { free(buf->context); }
static void *host_base(struct lm_buffer *buf) { return buf->context; }

static void host_set(struct lm_buffer *buf, struct lm_tensor *t, const void *data, size_t offset, size_t size)
{
    memcpy((uint8_t *)t->data + offset, data, size);
}

static void host_get(struct lm_buffer *buf, const struct lm_tensor *t, void *data, size_t offset, size_t size)
{
    memcpy(data, (const uint8_t *)t->data + offset, size);
}

static bool host_cpy(struct lm_buffer *buf, const struct lm_tensor *src, struct lm_tensor *dst)
{
    if (src->buffer && !lm_buffer_is_host(src->buffer))
        return false;
    memcpy(dst->data, src->data, lm_nbytes(src));
    return true;
}

static void host_clear(struct lm_buffer *buf, uint8_t value) { memset(buf->context, value, buf->size); }

static const struct lm_buffer_i host_buffer_i = {
    .free_buffer = host_free,
    .get_base = host_base,
    .set_tensor = host_set,
    .get_tensor = host_get,
    .cpy_tensor = host_cpy,
    .clear = host_clear,
};

static const struct lm_buffer_i host_ptr_buffer_i = {
    .free_buffer = NULL,
    .get_base = host_base,
    .set_tensor = host_set,
    .get_tensor = host_get,
    .cpy_tensor = host_cpy,
    .clear = host_clear,
};

static const char *host_name(lm_buft buft) { return "host"; }
static size_t host_alignment(lm_buft buft) { return HOST_ALIGN; }
static bool host_is_host(lm_buft buft) { return true; }

static lm_status host_alloc(lm_buft buft, size_t size, struct lm_buffer **out)
{
    size_t rounded = (size + HOST_ALIGN - 1) & ~(size_t)(HOST_ALIGN - 1);
    if (rounded < size)
        return LM_ERR_NOMEM;
    void *mem = NULL;
    if (rounded) {
        mem = lm_alloc_large(rounded, HOST_ALIGN);
        if (!mem) {
            LM_LOG_ERR("host buffer: cannot allocate %zu bytes\n", size);
            return LM_ERR_NOMEM;
        }
    }
    struct lm_buffer *b = lm_buffer_init(buft, host_buffer_i, mem, size);
    if (!b) {
        free(mem);
        return LM_ERR_NOMEM;
    }
    *out = b;
    return LM_OK;
}

static struct lm_buffer_type host_buft = {
    .iface = {
        .get_name = host_name,
        .alloc_buffer = host_alloc,
        .get_alignment = host_alignment,
        .is_host = host_is_host,
    },
};

lm_buft lm_host_buft(void) { return &host_buft; }

lm_status lm_buffer_from_host_ptr(lm_buft buft, void *ptr, size_t size, struct lm_buffer **out)
{
    if (!buft || !lm_buft_is_host(buft) || (!ptr && size))
        return LM_ERR_INVALID_ARG;
    struct lm_buffer *b = lm_buffer_init(buft, host_ptr_buffer_i, ptr, size);
    if (!b)
        return LM_ERR_NOMEM;
    *out = b;
    return LM_OK;
}

bool lm_sources_have_data(const struct lm_tensor *t)
{
    for (int i = 0; i < LM_MAX_SRC; i++)
        if (t->src[i] && lm_nelements(t->src[i]) > 0 && !t->src[i]->data)
            return false;
    return true;
}
