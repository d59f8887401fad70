/* gguf_get.c - read-only queries on a parsed GGUF file, and values as text.
 *
 * Every getter checks its index and the value's type and writes its output
 * only on success; nothing here allocates or changes the reader, so all of it
 * is safe to call from several threads at once on one reader.
 */
#include "gguf/gguf_internal.h"

#include <float.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const size_t type_sizes[LM_GGUF_TYPE_COUNT] = {
    [LM_GGUF_UINT8] = 1,  [LM_GGUF_INT8] = 1,   [LM_GGUF_UINT16] = 2, [LM_GGUF_INT16] = 2,
    [LM_GGUF_UINT32] = 4, [LM_GGUF_INT32] = 4,  [LM_GGUF_FLOAT32] = 4, [LM_GGUF_BOOL] = 1,
    [LM_GGUF_UINT64] = 8, [LM_GGUF_INT64] = 8,  [LM_GGUF_FLOAT64] = 8,
};

static const char *const type_names[LM_GGUF_TYPE_COUNT] = {
    [LM_GGUF_UINT8] = "u8",   [LM_GGUF_INT8] = "i8",      [LM_GGUF_UINT16] = "u16",  [LM_GGUF_INT16] = "i16",
    [LM_GGUF_UINT32] = "u32", [LM_GGUF_INT32] = "i32",    [LM_GGUF_FLOAT32] = "f32", [LM_GGUF_BOOL] = "bool",
    [LM_GGUF_STRING] = "string", [LM_GGUF_ARRAY] = "array", [LM_GGUF_UINT64] = "u64", [LM_GGUF_INT64] = "i64",
    [LM_GGUF_FLOAT64] = "f64",
};

size_t lm_gguf_type_size(enum lm_gguf_type t) { return (unsigned)t < LM_GGUF_TYPE_COUNT ? type_sizes[t] : 0; }

const char *lm_gguf_type_name(enum lm_gguf_type t)
{
    return (unsigned)t < LM_GGUF_TYPE_COUNT ? type_names[t] : "?";
}

int lm_gguf_name_cmp(const char *a, size_t alen, const char *b, size_t blen)
{
    int c = memcmp(a, b, alen < blen ? alen : blen);
    if (c)
        return c;
    return alen < blen ? -1 : alen > blen;
}

int64_t lm_gguf_index_find(const struct gguf_name_ref *idx, int64_t n, const char *name, size_t len)
{
    int64_t lo = 0, hi = n;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        int c = lm_gguf_name_cmp(idx[mid].name, idx[mid].len, name, len);
        if (c == 0)
            return idx[mid].idx;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -1;
}

/* ---- file-level ---- */

uint32_t lm_gguf_version(const struct lm_gguf *g) { return g ? g->version : 0; }
size_t lm_gguf_alignment(const struct lm_gguf *g) { return g ? g->alignment : 0; }
uint64_t lm_gguf_file_size(const struct lm_gguf *g) { return g ? g->file_size : 0; }
uint64_t lm_gguf_data_offset(const struct lm_gguf *g) { return g ? g->data_offset : 0; }
const void *lm_gguf_data(const struct lm_gguf *g) { return g ? g->mem : NULL; }

/* ---- key/values ---- */

int64_t lm_gguf_n_kv(const struct lm_gguf *g) { return g ? g->n_kv : 0; }

int64_t lm_gguf_find_key(const struct lm_gguf *g, const char *key)
{
    if (!g || !key || !g->kv_index)
        return -1;
    return lm_gguf_index_find(g->kv_index, g->n_kv_index, key, strlen(key));
}

static const struct gguf_kv *kv_at(const struct lm_gguf *g, int64_t i)
{
    return g && i >= 0 && i < g->n_kv ? &g->kv[i] : NULL;
}

const char *lm_gguf_key(const struct lm_gguf *g, int64_t i)
{
    const struct gguf_kv *kv = kv_at(g, i);
    return kv ? kv->key : NULL;
}

enum lm_gguf_type lm_gguf_kv_type(const struct lm_gguf *g, int64_t i)
{
    const struct gguf_kv *kv = kv_at(g, i);
    return kv ? kv->type : LM_GGUF_TYPE_COUNT;
}

static uint64_t le_bytes(const uint8_t *b, size_t n)
{
    uint64_t x = 0;
    for (size_t k = n; k-- > 0;)
        x = x << 8 | b[k];
    return x;
}

/* An integer value as (negative?, magnitude-carrying) signed/unsigned pair. */
static bool int_value(const struct gguf_kv *kv, bool *neg, int64_t *s, uint64_t *u)
{
    size_t n = lm_gguf_type_size(kv->type);
    uint64_t raw = le_bytes(kv->sc, n);
    switch (kv->type) {
    case LM_GGUF_UINT8:
    case LM_GGUF_UINT16:
    case LM_GGUF_UINT32:
    case LM_GGUF_UINT64:
        *neg = false;
        *u = raw;
        return true;
    case LM_GGUF_INT8:
    case LM_GGUF_INT16:
    case LM_GGUF_INT32:
    case LM_GGUF_INT64: {
        int sh = (int)(64 - 8 * n);
        int64_t v = (int64_t)(raw << sh) >> sh; /* sign-extend */
        *neg = v < 0;
        *s = v;
        *u = (uint64_t)v;
        return true;
    }
    default:
        return false;
    }
}

/* The kv at i when out is non-NULL and the value has type `type`; else NULL
 * with *st = LM_ERR_INVALID_ARG (bad index or out) or LM_ERR_CORRUPT (type). */
static const struct gguf_kv *kv_typed(const struct lm_gguf *g, int64_t i, const void *out, enum lm_gguf_type type,
                                      lm_status *st)
{
    const struct gguf_kv *kv = kv_at(g, i);
    *st = !kv || !out ? LM_ERR_INVALID_ARG : kv->type != type ? LM_ERR_CORRUPT : LM_OK;
    return *st == LM_OK ? kv : NULL;
}

/* The integer value at i (any integer type) if it lies in [min, max]; else
 * LM_ERR_INVALID_ARG (bad index or out) or LM_ERR_CORRUPT (type or range). */
static lm_status kv_int_in(const struct lm_gguf *g, int64_t i, const void *out, int64_t min, uint64_t max, int64_t *v)
{
    const struct gguf_kv *kv = kv_at(g, i);
    bool neg;
    int64_t s = 0;
    uint64_t u = 0;
    if (!kv || !out)
        return LM_ERR_INVALID_ARG;
    if (!int_value(kv, &neg, &s, &u))
        return LM_ERR_CORRUPT;
    if (neg ? s < min : u > max)
        return LM_ERR_CORRUPT;
    *v = neg ? s : (int64_t)u;
    return LM_OK;
}

lm_status lm_gguf_get_u8(const struct lm_gguf *g, int64_t i, uint8_t *out)
{
    lm_status st;
    const struct gguf_kv *kv = kv_typed(g, i, out, LM_GGUF_UINT8, &st);
    if (kv)
        *out = kv->sc[0];
    return st;
}

lm_status lm_gguf_get_i32(const struct lm_gguf *g, int64_t i, int32_t *out)
{
    int64_t v = 0;
    lm_status st = kv_int_in(g, i, out, INT32_MIN, INT32_MAX, &v);
    if (st == LM_OK)
        *out = (int32_t)v;
    return st;
}

lm_status lm_gguf_get_u32(const struct lm_gguf *g, int64_t i, uint32_t *out)
{
    int64_t v = 0;
    lm_status st = kv_int_in(g, i, out, 0, UINT32_MAX, &v);
    if (st == LM_OK)
        *out = (uint32_t)v;
    return st;
}

lm_status lm_gguf_get_u64(const struct lm_gguf *g, int64_t i, uint64_t *out)
{
    lm_status st;
    const struct gguf_kv *kv = kv_typed(g, i, out, LM_GGUF_UINT64, &st);
    if (kv)
        *out = le_bytes(kv->sc, 8);
    return st;
}

static float f32_of(const uint8_t *b)
{
    uint32_t x = (uint32_t)le_bytes(b, 4);
    float f;
    memcpy(&f, &x, 4);
    return f;
}

static double f64_of(const uint8_t *b)
{
    uint64_t x = le_bytes(b, 8);
    double d;
    memcpy(&d, &x, 8);
    return d;
}

lm_status lm_gguf_get_f32(const struct lm_gguf *g, int64_t i, float *out)
{
    const struct gguf_kv *kv = kv_at(g, i);
    if (!kv || !out)
        return LM_ERR_INVALID_ARG;
    if (kv->type == LM_GGUF_FLOAT32)
        *out = f32_of(kv->sc);
    else if (kv->type == LM_GGUF_FLOAT64 && !(fabs(f64_of(kv->sc)) > FLT_MAX && isfinite(f64_of(kv->sc))))
        *out = (float)f64_of(kv->sc); /* NaN and infinities convert; finite values out of range do not */
    else
        return LM_ERR_CORRUPT;
    return LM_OK;
}

lm_status lm_gguf_get_bool(const struct lm_gguf *g, int64_t i, bool *out)
{
    lm_status st;
    const struct gguf_kv *kv = kv_typed(g, i, out, LM_GGUF_BOOL, &st);
    if (kv)
        *out = kv->sc[0] != 0;
    return st;
}

lm_status lm_gguf_get_str(const struct lm_gguf *g, int64_t i, const char **out, size_t *len)
{
    lm_status st;
    const struct gguf_kv *kv = kv_typed(g, i, out, LM_GGUF_STRING, &st);
    if (kv) {
        *out = kv->str;
        if (len)
            *len = kv->str_len;
    }
    return st;
}

lm_status lm_gguf_get_arr_type(const struct lm_gguf *g, int64_t i, enum lm_gguf_type *out)
{
    lm_status st;
    const struct gguf_kv *kv = kv_typed(g, i, out, LM_GGUF_ARRAY, &st);
    if (kv)
        *out = kv->arr_type;
    return st;
}

lm_status lm_gguf_get_arr_n(const struct lm_gguf *g, int64_t i, uint64_t *out)
{
    lm_status st;
    const struct gguf_kv *kv = kv_typed(g, i, out, LM_GGUF_ARRAY, &st);
    if (kv)
        *out = kv->arr_n;
    return st;
}

lm_status lm_gguf_get_arr_data(const struct lm_gguf *g, int64_t i, const void **out)
{
    lm_status st;
    const struct gguf_kv *kv = kv_typed(g, i, out, LM_GGUF_ARRAY, &st);
    if (!kv)
        return st;
    if (kv->arr_type == LM_GGUF_STRING)
        return LM_ERR_CORRUPT;
    *out = kv->arr_data;
    return LM_OK;
}

lm_status lm_gguf_get_arr_str(const struct lm_gguf *g, int64_t i, uint64_t j, const char **out, size_t *len)
{
    lm_status st;
    const struct gguf_kv *kv = kv_typed(g, i, out, LM_GGUF_ARRAY, &st);
    if (!kv)
        return st;
    if (kv->arr_type != LM_GGUF_STRING)
        return LM_ERR_CORRUPT;
    if (j >= kv->arr_n)
        return LM_ERR_INVALID_ARG;
    *out = kv->arr_blob + kv->arr_offs[j];
    if (len)
        *len = (size_t)(kv->arr_offs[j + 1] - kv->arr_offs[j] - 1);
    return LM_OK;
}

/* ---- values as text ---- */

struct sbuf {
    char *buf;
    size_t cap;
    size_t len; /* full length, may exceed cap */
};

static void sb_putc(struct sbuf *b, char c)
{
    if (b->len + 1 < b->cap)
        b->buf[b->len] = c;
    b->len++;
}

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static void
sb_printf(struct sbuf *b, const char *fmt, ...)
{
    char tmp[64];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    for (int k = 0; k < n && k < (int)sizeof tmp - 1; k++)
        sb_putc(b, tmp[k]);
}

/* Bytes with control characters escaped; quoted strings also escape '"'
 * and '\\'. Bytes >= 0x80 pass through (UTF-8 shows as text). */
static void sb_text(struct sbuf *b, const char *s, size_t n, bool quoted)
{
    if (quoted)
        sb_putc(b, '"');
    for (size_t k = 0; k < n; k++) {
        unsigned char c = (unsigned char)s[k];
        if (c == '\n')
            sb_printf(b, "\\n");
        else if (c == '\t')
            sb_printf(b, "\\t");
        else if (c == '\r')
            sb_printf(b, "\\r");
        else if (c < 0x20 || c == 0x7f)
            sb_printf(b, "\\x%02x", c);
        else if (quoted && (c == '"' || c == '\\'))
            sb_printf(b, "\\%c", c);
        else
            sb_putc(b, (char)c);
    }
    if (quoted)
        sb_putc(b, '"');
}

static void sb_scalar(struct sbuf *b, enum lm_gguf_type t, const uint8_t *v)
{
    size_t n = lm_gguf_type_size(t);
    uint64_t raw = le_bytes(v, n);
    int sh = (int)(64 - 8 * n);
    switch (t) {
    case LM_GGUF_UINT8:
    case LM_GGUF_UINT16:
    case LM_GGUF_UINT32:
    case LM_GGUF_UINT64:
        sb_printf(b, "%" PRIu64, raw);
        break;
    case LM_GGUF_INT8:
    case LM_GGUF_INT16:
    case LM_GGUF_INT32:
    case LM_GGUF_INT64:
        sb_printf(b, "%" PRId64, (int64_t)(raw << sh) >> sh);
        break;
    case LM_GGUF_FLOAT32:
        sb_printf(b, "%g", (double)f32_of(v));
        break;
    case LM_GGUF_FLOAT64:
        sb_printf(b, "%g", f64_of(v));
        break;
    case LM_GGUF_BOOL:
        sb_printf(b, "%s", raw ? "true" : "false");
        break;
    default:
        sb_printf(b, "?");
        break;
    }
}

#define SHOW_ELEMS 8

static void sb_array(struct sbuf *b, const struct gguf_kv *kv)
{
    uint64_t shown = kv->arr_n < SHOW_ELEMS ? kv->arr_n : SHOW_ELEMS;
    size_t es = lm_gguf_type_size(kv->arr_type);
    sb_putc(b, '[');
    for (uint64_t j = 0; j < shown; j++) {
        if (j)
            sb_printf(b, ", ");
        if (kv->arr_type == LM_GGUF_STRING)
            sb_text(b, kv->arr_blob + kv->arr_offs[j], (size_t)(kv->arr_offs[j + 1] - kv->arr_offs[j] - 1), true);
        else
            sb_scalar(b, kv->arr_type, (const uint8_t *)kv->arr_data + j * es);
    }
    if (shown < kv->arr_n)
        sb_printf(b, ", ... %" PRIu64 " more", kv->arr_n - shown);
    sb_putc(b, ']');
}

int lm_gguf_value_to_string(const struct lm_gguf *g, int64_t i, char *buf, size_t buf_size)
{
    const struct gguf_kv *kv = kv_at(g, i);
    struct sbuf b = {buf_size ? buf : NULL, buf ? buf_size : 0, 0};
    if (!kv) {
        if (b.cap)
            b.buf[0] = '\0';
        return -1;
    }
    if (kv->type == LM_GGUF_STRING)
        sb_text(&b, kv->str, kv->str_len, false);
    else if (kv->type == LM_GGUF_ARRAY)
        sb_array(&b, kv);
    else
        sb_scalar(&b, kv->type, kv->sc);
    if (b.cap)
        b.buf[b.len < b.cap ? b.len : b.cap - 1] = '\0';
    return b.len > INT_MAX ? INT_MAX : (int)b.len;
}

/* ---- tensors ---- */

int64_t lm_gguf_n_tensors(const struct lm_gguf *g) { return g ? g->n_tensors : 0; }

int64_t lm_gguf_find_tensor(const struct lm_gguf *g, const char *name)
{
    if (!g || !name || !g->tensor_index)
        return -1;
    return lm_gguf_index_find(g->tensor_index, g->n_tensors, name, strlen(name));
}

const struct lm_gguf_tensor_info *lm_gguf_tensor_info(const struct lm_gguf *g, int64_t i)
{
    return g && i >= 0 && i < g->n_tensors ? &g->ti[i] : NULL;
}
