/* repack.c - the repacking buffer type and the row-interleaved layouts
 * (layouts: repack.h). Writing a whole tensor into a buffer of this type
 * repacks it; reading unpacks, so every other user (the scheduler copying to
 * another backend, LoRA read-modify-write, state dumps) sees plain rows. */
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/memory.h"
#include "cpu/cpu.h"
#include "cpu/repack.h"

static const struct lm_repack_desc descs[] = {
    {LM_TYPE_Q4_0, LM_QK, lm_pack_q4_0x8, lm_unpack_q4_0x8},
    {LM_TYPE_Q8_0, LM_QK, lm_pack_q8_0x8, lm_unpack_q8_0x8},
    {LM_TYPE_F16, LM_REPACK_FK, lm_pack_f16x8, lm_unpack_f16x8},
    {LM_TYPE_BF16, LM_REPACK_BFK, lm_pack_bf16x8, lm_unpack_bf16x8},
    {LM_TYPE_F32, LM_REPACK_FK, lm_pack_f32x8, lm_unpack_f32x8},
    {LM_TYPE_Q2_K, LM_QK_K, lm_pack_q2_Kx8, lm_unpack_q2_Kx8},
    {LM_TYPE_Q3_K, LM_QK_K, lm_pack_q3_Kx8, lm_unpack_q3_Kx8},
    {LM_TYPE_Q4_K, LM_QK_K, lm_pack_q4_Kx8, lm_unpack_q4_Kx8},
    {LM_TYPE_Q5_K, LM_QK_K, lm_pack_q5_Kx8, lm_unpack_q5_Kx8},
    {LM_TYPE_Q6_K, LM_QK_K, lm_pack_q6_Kx8, lm_unpack_q6_Kx8},
};

const struct lm_repack_desc *lm_repack_desc(enum lm_type type)
{
    for (size_t i = 0; i < sizeof descs / sizeof descs[0]; i++)
        if (descs[i].type == type)
            return &descs[i];
    return NULL;
}

bool lm_cpu_can_repack(const struct lm_tensor *t)
{
    const struct lm_repack_desc *d = lm_repack_desc(t->type);
    return d && t->ne[0] % d->k_multiple == 0 && t->ne[1] % LM_REPACK_ROWS == 0 && t->ne[2] == 1 && t->ne[3] == 1 &&
           t->ne[1] > 0 && lm_is_contiguous(t);
}

void lm_repack_rows(enum lm_type type, const void *src, void *dst, int64_t n_rows, int64_t k)
{
    lm_repack_desc(type)->pack(src, dst, n_rows, k);
}

void lm_unpack_rows(enum lm_type type, const void *src, void *dst, int64_t n_rows, int64_t k)
{
    lm_repack_desc(type)->unpack(src, dst, n_rows, k);
}

/* ---- the buffer type ---- */

static void rp_free(struct lm_buffer *buf) { free(buf->context); }
static void *rp_base(struct lm_buffer *buf) { return buf->context; }

static bool whole(const struct lm_tensor *t, size_t offset, size_t size)
{
    return lm_cpu_can_repack(t) && offset == 0 && size == lm_nbytes(t);
}

static void rp_set(struct lm_buffer *buf, struct lm_tensor *t, const void *data, size_t offset, size_t size)
{
    if (whole(t, offset, size)) {
        lm_repack_rows(t->type, data, t->data, t->ne[1], t->ne[0]);
        return;
    }
    /* partial writes would need a read-modify-write of whole groups */
    LM_LOG_ERR("repack buffer: partial write of '%s' (%zu bytes at %zu) not supported\n", t->name, size, offset);
}

static void rp_get(struct lm_buffer *buf, const struct lm_tensor *t, void *data, size_t offset, size_t size)
{
    if (!lm_cpu_can_repack(t)) {
        memcpy(data, (const char *)t->data + offset, size);
        return;
    }
    if (offset == 0 && size == lm_nbytes(t)) {
        lm_unpack_rows(t->type, t->data, data, t->ne[1], t->ne[0]);
        return;
    }
    char *tmp = malloc(lm_nbytes(t));
    if (!tmp) {
        LM_LOG_ERR("repack buffer: out of memory reading '%s'\n", t->name);
        return;
    }
    lm_unpack_rows(t->type, t->data, tmp, t->ne[1], t->ne[0]);
    memcpy(data, tmp + offset, size);
    free(tmp);
}

static void rp_clear(struct lm_buffer *buf, uint8_t value) { memset(buf->context, value, buf->size); }

static const struct lm_buffer_i rp_buffer_i = {
    .free_buffer = rp_free,
    .get_base = rp_base,
    .set_tensor = rp_set,
    .get_tensor = rp_get,
    .clear = rp_clear,
};

static const char *rp_name(lm_buft buft) { return "cpu_repack"; }
static size_t rp_alignment(lm_buft buft) { return 64; }
static bool rp_is_host(lm_buft buft) { return false; } /* data is not in the plain layout */

static lm_status rp_alloc(lm_buft buft, size_t size, struct lm_buffer **out)
{
    size_t rounded = (size + 63) & ~(size_t)63;
    void *mem = rounded ? lm_alloc_large(rounded, 64) : NULL;
    if (rounded && !mem)
        return LM_ERR_NOMEM;
    struct lm_buffer *b = lm_buffer_init(buft, rp_buffer_i, mem, size);
    if (!b) {
        free(mem);
        return LM_ERR_NOMEM;
    }
    *out = b;
    return LM_OK;
}

static struct lm_buffer_type rp_buft = {
    .iface = {
        .get_name = rp_name,
        .alloc_buffer = rp_alloc,
        .get_alignment = rp_alignment,
        .is_host = rp_is_host,
    },
};

lm_buft lm_cpu_repack_buft(void) { return &rp_buft; }

bool lm_tensor_is_repacked(const struct lm_tensor *t)
{
    return t->buffer && t->buffer->buft == &rp_buft && lm_cpu_can_repack(t);
}
