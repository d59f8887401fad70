/* gguf_read.c - the GGUF parser: header, key/values and tensor infos.
 *
 * Every number taken from the file is checked before it is used: counts are
 * bounded by the bytes left in the file, lengths by the bytes left and by the
 * limits of gguf_internal.h, and tables grow as entries are actually read, so
 * memory stays proportional to the bytes parsed, never to a claimed count.
 * Files are read with buffered stdio, never mapped; tensor data is not read.
 * Errors carry a message naming the field and its file offset; the first
 * error wins. Workload: one pass over a few KiB to a few MiB of metadata.
 */
#include "gguf/gguf_internal.h"

#include "core/log.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

struct parser {
    const uint8_t *mem; /* memory image, or NULL when reading f */
    FILE *f;
    uint64_t size;
    uint64_t pos;
    uint32_t version;
    struct lm_gguf *g;
    char *err;
    size_t err_size;
};

#if defined(__GNUC__)
__attribute__((format(printf, 4, 5)))
#endif
static lm_status
fail(struct parser *p, lm_status st, uint64_t off, const char *fmt, ...)
{
    if (p->err && p->err_size) {
        va_list ap;
        va_start(ap, fmt);
        int n = snprintf(p->err, p->err_size, "gguf: ");
        if (n >= 0 && (size_t)n < p->err_size)
            n += vsnprintf(p->err + n, p->err_size - (size_t)n, fmt, ap);
        if (n >= 0 && (size_t)n < p->err_size)
            snprintf(p->err + n, p->err_size - (size_t)n, " (at offset %" PRIu64 ")", off);
        va_end(ap);
    }
    return st;
}

/* ---- primitive reads ---- */

static lm_status rd(struct parser *p, void *dst, uint64_t n, const char *what)
{
    if (n > p->size - p->pos)
        return fail(p, LM_ERR_CORRUPT, p->pos, "%s: %" PRIu64 " bytes needed, file ends at %" PRIu64, what, n,
                    p->size);
    if (n == 0)
        return LM_OK;
    if (p->mem) {
        memcpy(dst, p->mem + p->pos, (size_t)n);
    } else if (fread(dst, 1, (size_t)n, p->f) != (size_t)n) {
        return fail(p, ferror(p->f) ? LM_ERR_IO : LM_ERR_CORRUPT, p->pos, "%s: read failed", what);
    }
    p->pos += n;
    return LM_OK;
}

static lm_status rd_u32(struct parser *p, uint32_t *v, const char *what)
{
    uint8_t b[4];
    lm_status st = rd(p, b, 4, what);
    if (st == LM_OK)
        *v = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
    return st;
}

static lm_status rd_u64(struct parser *p, uint64_t *v, const char *what)
{
    uint8_t b[8];
    lm_status st = rd(p, b, 8, what);
    if (st == LM_OK) {
        uint64_t x = 0;
        for (int i = 7; i >= 0; i--)
            x = x << 8 | b[i];
        *v = x;
    }
    return st;
}

/* A count or a length: uint32 in version 1, uint64 later. */
static lm_status rd_count(struct parser *p, uint64_t *v, const char *what)
{
    if (p->version == 1) {
        uint32_t x;
        lm_status st = rd_u32(p, &x, what);
        if (st == LM_OK)
            *v = x;
        return st;
    }
    return rd_u64(p, v, what);
}

static uint64_t count_size(const struct parser *p) { return p->version == 1 ? 4 : 8; }

static uint64_t left(const struct parser *p) { return p->size - p->pos; }

/* Grow *buf (of *cap elements of elem bytes) to hold at least need. */
static bool grow(void **buf, uint64_t *cap, uint64_t need, size_t elem)
{
    if (need <= *cap)
        return true;
    uint64_t nc = *cap ? *cap : 16;
    while (nc < need)
        nc *= 2;
    if (nc > SIZE_MAX / elem)
        return false;
    void *q = realloc(*buf, (size_t)(nc * elem));
    if (!q)
        return false;
    memset((char *)q + *cap * elem, 0, (size_t)((nc - *cap) * elem));
    *buf = q;
    *cap = nc;
    return true;
}

/* A length-prefixed string, copied and NUL-terminated. */
static lm_status rd_str(struct parser *p, uint64_t max, char **out, size_t *len, const char *what)
{
    uint64_t off = p->pos, n;
    lm_status st = rd_count(p, &n, what);
    if (st)
        return st;
    if (n > max)
        return fail(p, LM_ERR_CORRUPT, off, "%s: length %" PRIu64 " exceeds the limit %" PRIu64, what, n, max);
    if (n > left(p))
        return fail(p, LM_ERR_CORRUPT, off, "%s: length %" PRIu64 " runs past the end of the file", what, n);
    char *s = malloc((size_t)n + 1);
    if (!s)
        return fail(p, LM_ERR_NOMEM, off, "%s: out of memory", what);
    st = rd(p, s, n, what);
    if (st) {
        free(s);
        return st;
    }
    s[n] = '\0';
    *out = s;
    *len = (size_t)n;
    return LM_OK;
}

/* A name (key or tensor name): non-empty, no NUL byte inside. */
static lm_status rd_name(struct parser *p, char **out, size_t *len, const char *what)
{
    uint64_t off = p->pos;
    lm_status st = rd_str(p, GGUF_MAX_NAME, out, len, what);
    if (st)
        return st;
    if (*len == 0 || memchr(*out, '\0', *len)) {
        st = fail(p, LM_ERR_CORRUPT, off, "%s: %s", what, *len ? "contains a NUL byte" : "empty");
        free(*out);
        *out = NULL;
    }
    return st;
}

/* A printable, shortened copy of a name for messages. */
static const char *shown(const char *s, char *buf, size_t n)
{
    size_t i = 0;
    for (; s[i] && i + 1 < n; i++)
        buf[i] = (unsigned char)s[i] < 0x20 || s[i] == 0x7f ? '?' : s[i];
    buf[i] = '\0';
    return buf;
}

/* ---- key/values ---- */

static lm_status check_bools(struct parser *p, uint64_t off, const uint8_t *b, uint64_t n, const char *what)
{
    for (uint64_t j = 0; j < n; j++)
        if (b[j] > 1)
            return fail(p, LM_ERR_CORRUPT, off + j, "%s: bool byte %u is not 0 or 1", what, b[j]);
    return LM_OK;
}

static lm_status rd_str_array(struct parser *p, struct gguf_kv *kv, uint64_t n, uint64_t off, const char *what)
{
    if (n > GGUF_MAX_ARR_N || n > left(p) / count_size(p))
        return fail(p, LM_ERR_CORRUPT, off, "%s: %" PRIu64 " strings cannot fit in the rest of the file", what, n);
    uint64_t ocap = 0, bcap = 0, used = 0;
    if (!grow((void **)&kv->arr_offs, &ocap, n < 1024 ? n + 1 : 1024, sizeof(uint64_t)))
        return fail(p, LM_ERR_NOMEM, off, "%s: out of memory", what);
    for (uint64_t j = 0; j < n; j++) {
        uint64_t soff = p->pos, len;
        lm_status st = rd_count(p, &len, what);
        if (st)
            return st;
        if (len > GGUF_MAX_STR || len > left(p))
            return fail(p, LM_ERR_CORRUPT, soff, "%s: element %" PRIu64 " length %" PRIu64 " runs past the end of the file",
                        what, j, len);
        if (!grow((void **)&kv->arr_offs, &ocap, j + 2, sizeof(uint64_t)) ||
            !grow((void **)&kv->arr_blob, &bcap, used + len + 1, 1))
            return fail(p, LM_ERR_NOMEM, soff, "%s: out of memory", what);
        kv->arr_offs[j] = used;
        if ((st = rd(p, kv->arr_blob + used, len, what)))
            return st;
        kv->arr_blob[used + len] = '\0';
        used += len + 1;
    }
    kv->arr_offs[n] = used;
    if (!kv->arr_blob && !grow((void **)&kv->arr_blob, &bcap, 1, 1))
        return fail(p, LM_ERR_NOMEM, off, "%s: out of memory", what);
    return LM_OK;
}

static lm_status rd_array(struct parser *p, struct gguf_kv *kv, const char *what)
{
    uint64_t off = p->pos, n;
    uint32_t et;
    lm_status st = rd_u32(p, &et, what);
    if (st)
        return st;
    if (et >= LM_GGUF_TYPE_COUNT)
        return fail(p, LM_ERR_CORRUPT, off, "%s: array element type %u out of range", what, et);
    if (et == LM_GGUF_ARRAY)
        return fail(p, LM_ERR_UNSUPPORTED, off, "%s: nested arrays are not supported", what);
    kv->arr_type = (enum lm_gguf_type)et;
    off = p->pos;
    if ((st = rd_count(p, &n, what)))
        return st;
    if (et == LM_GGUF_STRING) {
        st = rd_str_array(p, kv, n, off, what);
        if (st == LM_OK)
            kv->arr_n = n;
        return st;
    }
    uint64_t es = lm_gguf_type_size(kv->arr_type);
    if (n > GGUF_MAX_ARR_BYTES / es || n * es > left(p))
        return fail(p, LM_ERR_CORRUPT, off, "%s: %" PRIu64 " elements of %s cannot fit in the rest of the file", what,
                    n, lm_gguf_type_name(kv->arr_type));
    kv->arr_data = malloc(n ? (size_t)(n * es) : 1);
    if (!kv->arr_data)
        return fail(p, LM_ERR_NOMEM, off, "%s: out of memory", what);
    uint64_t doff = p->pos;
    if ((st = rd(p, kv->arr_data, n * es, what)))
        return st;
    if (et == LM_GGUF_BOOL && (st = check_bools(p, doff, kv->arr_data, n, what)))
        return st;
    kv->arr_n = n;
    return LM_OK;
}

static lm_status rd_kv(struct parser *p, int64_t i, struct gguf_kv *kv)
{
    char what[160], nb[64];
    kv->key_off = p->pos;
    snprintf(what, sizeof what, "kv %" PRId64 " key", i);
    lm_status st = rd_name(p, &kv->key, &kv->key_len, what);
    if (st)
        return st;
    snprintf(what, sizeof what, "kv %" PRId64 " '%s'", i, shown(kv->key, nb, sizeof nb));
    uint64_t off = p->pos;
    uint32_t t;
    if ((st = rd_u32(p, &t, what)))
        return st;
    if (t >= LM_GGUF_TYPE_COUNT)
        return fail(p, LM_ERR_CORRUPT, off, "%s: value type %u out of range", what, t);
    kv->type = (enum lm_gguf_type)t;
    if (t == LM_GGUF_STRING)
        return rd_str(p, GGUF_MAX_STR, &kv->str, &kv->str_len, what);
    if (t == LM_GGUF_ARRAY)
        return rd_array(p, kv, what);
    off = p->pos;
    if ((st = rd(p, kv->sc, lm_gguf_type_size(kv->type), what)))
        return st;
    if (t == LM_GGUF_BOOL)
        st = check_bools(p, off, kv->sc, 1, what);
    return st;
}

/* ---- name indexes ---- */

static int ref_cmp(const void *a, const void *b)
{
    const struct gguf_name_ref *x = a, *y = b;
    int c = lm_gguf_name_cmp(x->name, x->len, y->name, y->len);
    if (c)
        return c;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* Sort n refs (ties in file order); on a duplicate name return the index
 * of its second use, or -1. */
static int64_t sort_refs(struct gguf_name_ref *r, int64_t n)
{
    if (n > 1)
        qsort(r, (size_t)n, sizeof *r, ref_cmp);
    for (int64_t i = 1; i < n; i++)
        if (!lm_gguf_name_cmp(r[i - 1].name, r[i - 1].len, r[i].name, r[i].len))
            return r[i].idx;
    return -1;
}

static bool same_value(const struct gguf_kv *a, const struct gguf_kv *b)
{
    if (a->type != b->type)
        return false;
    if (a->type == LM_GGUF_STRING)
        return a->str_len == b->str_len && !memcmp(a->str, b->str, a->str_len);
    if (a->type != LM_GGUF_ARRAY)
        return !memcmp(a->sc, b->sc, lm_gguf_type_size(a->type));
    if (a->arr_type != b->arr_type || a->arr_n != b->arr_n)
        return false;
    if (a->arr_type != LM_GGUF_STRING)
        return !memcmp(a->arr_data, b->arr_data, (size_t)(a->arr_n * lm_gguf_type_size(a->arr_type)));
    return !memcmp(a->arr_offs, b->arr_offs, (size_t)(a->arr_n + 1) * sizeof(uint64_t)) &&
           !memcmp(a->arr_blob, b->arr_blob, (size_t)a->arr_offs[a->arr_n]);
}

/* Sorted key index. A key repeated with the very same type and value (seen
 * in a real llama.cpp vocab file) is tolerated: both stay in the table and
 * the index keeps the first. A key repeated with another value is refused. */
static lm_status index_kvs(struct parser *p)
{
    struct lm_gguf *g = p->g;
    int64_t n = g->n_kv, m = 0;
    g->kv_index = malloc((size_t)(n ? n : 1) * sizeof *g->kv_index);
    if (!g->kv_index)
        return fail(p, LM_ERR_NOMEM, p->pos, "key index: out of memory");
    for (int64_t i = 0; i < n; i++)
        g->kv_index[i] = (struct gguf_name_ref){g->kv[i].key, g->kv[i].key_len, i};
    if (sort_refs(g->kv_index, n) < 0) {
        g->n_kv_index = n;
        return LM_OK;
    }
    for (int64_t i = 0; i < n; i++) {
        struct gguf_name_ref *prev = m ? &g->kv_index[m - 1] : NULL, *cur = &g->kv_index[i];
        if (prev && !lm_gguf_name_cmp(prev->name, prev->len, cur->name, cur->len)) {
            const struct gguf_kv *kv = &g->kv[cur->idx];
            char nb[64];
            if (!same_value(&g->kv[prev->idx], kv))
                return fail(p, LM_ERR_CORRUPT, kv->key_off, "kv %" PRId64 ": duplicate key '%s' with another value",
                            cur->idx, shown(kv->key, nb, sizeof nb));
            lm_log(LM_LOG_WARN, "gguf: kv %" PRId64 ": key '%s' repeated with the same value (ignored)\n", cur->idx,
                   shown(kv->key, nb, sizeof nb));
            continue;
        }
        g->kv_index[m++] = *cur;
    }
    g->n_kv_index = m;
    return LM_OK;
}

static lm_status rd_kvs(struct parser *p, uint64_t n_kv)
{
    struct lm_gguf *g = p->g;
    uint64_t cap = 0;
    for (uint64_t i = 0; i < n_kv; i++) {
        if (!grow((void **)&g->kv, &cap, i + 1, sizeof *g->kv))
            return fail(p, LM_ERR_NOMEM, p->pos, "kv %" PRIu64 ": out of memory", i);
        g->n_kv = (int64_t)i + 1; /* so that close() frees a half-read entry */
        lm_status st = rd_kv(p, (int64_t)i, &g->kv[i]);
        if (st)
            return st;
    }
    return index_kvs(p);
}

/* general.alignment: a UINT32, nonzero power of two; default 32. */
static lm_status find_alignment(struct parser *p)
{
    struct lm_gguf *g = p->g;
    g->alignment = LM_GGUF_DEFAULT_ALIGNMENT;
    int64_t i = lm_gguf_find_key(g, "general.alignment");
    if (i < 0)
        return LM_OK;
    const struct gguf_kv *kv = &g->kv[i];
    if (kv->type != LM_GGUF_UINT32)
        return fail(p, LM_ERR_CORRUPT, kv->key_off, "general.alignment: type %s, expected u32",
                    lm_gguf_type_name(kv->type));
    uint32_t a = (uint32_t)kv->sc[0] | (uint32_t)kv->sc[1] << 8 | (uint32_t)kv->sc[2] << 16 |
                 (uint32_t)kv->sc[3] << 24;
    if (a == 0 || (a & (a - 1)))
        return fail(p, LM_ERR_CORRUPT, kv->key_off, "general.alignment: %u is not a nonzero power of two", a);
    g->alignment = a;
    return LM_OK;
}

/* ---- tensor infos ---- */

static lm_status check_type(struct parser *p, uint64_t off, uint32_t t, const char *what)
{
    if (lm_type_valid(t))
        return LM_OK;
    if (t == 4 || t == 5)
        return fail(p, LM_ERR_CORRUPT, off, "%s: tensor type %u is retired (Q4_2/Q4_3)", what, t);
    return fail(p, LM_ERR_UNSUPPORTED, off, "%s: tensor type %u is not supported", what, t);
}

/* Byte size of a shape, refusing any overflow. Strides of every dimension
 * must fit too, so zero dims count as 1 in the overflow checks. */
static lm_status shape_size(struct parser *p, uint64_t off, struct lm_gguf_tensor_info *t, const char *what)
{
    int64_t blck = lm_type_blck(t->type);
    if (t->ne[0] % blck)
        return fail(p, LM_ERR_CORRUPT, off, "%s: ne[0] = %" PRId64 " is not a multiple of the block size %" PRId64,
                    what, t->ne[0], blck);
    uint64_t ts = lm_type_size(t->type), nb = (uint64_t)(t->ne[0] / blck);
    uint64_t elems = 1, bytes_chk, bytes;
    if (nb > (uint64_t)INT64_MAX / ts)
        return fail(p, LM_ERR_CORRUPT, off, "%s: row size overflows", what);
    bytes = bytes_chk = nb * ts;
    for (int d = 0; d < 4; d++) {
        uint64_t e = (uint64_t)t->ne[d], e1 = e ? e : 1;
        if (elems > (uint64_t)INT64_MAX / e1 || (d > 0 && bytes_chk > (uint64_t)INT64_MAX / e1))
            return fail(p, LM_ERR_CORRUPT, off, "%s: shape [%" PRId64 ", %" PRId64 ", %" PRId64 ", %" PRId64 "] overflows",
                        what, t->ne[0], t->ne[1], t->ne[2], t->ne[3]);
        elems *= e1;
        if (d > 0) {
            bytes_chk *= e1;
            bytes *= e;
        }
    }
    t->size = bytes;
    return LM_OK;
}

static lm_status rd_tensor_info(struct parser *p, int64_t i, struct lm_gguf_tensor_info *t)
{
    char what[160], nb[64], *name = NULL;
    size_t len;
    snprintf(what, sizeof what, "tensor %" PRId64 " name", i);
    lm_status st = rd_name(p, &name, &len, what);
    if (st)
        return st;
    t->name = name;
    snprintf(what, sizeof what, "tensor %" PRId64 " '%s'", i, shown(t->name, nb, sizeof nb));
    uint64_t off = p->pos, v;
    uint32_t nd, ty;
    if ((st = rd_u32(p, &nd, what)))
        return st;
    if (nd < 1 || nd > 4)
        return fail(p, LM_ERR_CORRUPT, off, "%s: n_dims %u is not in 1..4", what, nd);
    t->n_dims = (int)nd;
    for (int d = 0; d < 4; d++)
        t->ne[d] = 1;
    for (uint32_t d = 0; d < nd; d++) {
        off = p->pos;
        if ((st = rd_count(p, &v, what)))
            return st;
        if (v > (uint64_t)INT64_MAX)
            return fail(p, LM_ERR_CORRUPT, off, "%s: ne[%u] = %" PRIu64 " is too large", what, d, v);
        t->ne[d] = (int64_t)v;
    }
    off = p->pos;
    if ((st = rd_u32(p, &ty, what)) || (st = check_type(p, off, ty, what)))
        return st;
    t->type = (enum lm_type)ty;
    if ((st = shape_size(p, off, t, what)))
        return st;
    off = p->pos;
    if ((st = rd_u64(p, &t->offset, what))) /* relative until check_ranges() */
        return st;
    if (t->offset % p->g->alignment)
        return fail(p, LM_ERR_CORRUPT, off, "%s: data offset %" PRIu64 " is not a multiple of the alignment %zu", what,
                    t->offset, p->g->alignment);
    return LM_OK;
}

/* Turn relative offsets into absolute ones, each range inside the file. */
static lm_status check_ranges(struct parser *p)
{
    struct lm_gguf *g = p->g;
    for (int64_t i = 0; i < g->n_tensors; i++) {
        struct lm_gguf_tensor_info *t = &g->ti[i];
        uint64_t avail = g->data_offset <= g->file_size ? g->file_size - g->data_offset : 0;
        if (g->data_offset > g->file_size || t->offset > avail || t->size > avail - t->offset) {
            char nb[64];
            return fail(p, LM_ERR_CORRUPT, g->data_offset + t->offset,
                        "tensor %" PRId64 " '%s': data [%" PRIu64 ", +%" PRIu64 ") lies outside the file of %" PRIu64
                        " bytes",
                        i, shown(t->name, nb, sizeof nb), g->data_offset + t->offset, t->size, g->file_size);
        }
        t->offset += g->data_offset;
    }
    return LM_OK;
}

static lm_status rd_tensors(struct parser *p, uint64_t n_t)
{
    struct lm_gguf *g = p->g;
    uint64_t cap = 0;
    for (uint64_t i = 0; i < n_t; i++) {
        if (!grow((void **)&g->ti, &cap, i + 1, sizeof *g->ti))
            return fail(p, LM_ERR_NOMEM, p->pos, "tensor %" PRIu64 ": out of memory", i);
        g->n_tensors = (int64_t)i + 1;
        lm_status st = rd_tensor_info(p, (int64_t)i, &g->ti[i]);
        if (st)
            return st;
    }
    g->tensor_index = malloc((size_t)(n_t ? n_t : 1) * sizeof *g->tensor_index);
    if (!g->tensor_index)
        return fail(p, LM_ERR_NOMEM, p->pos, "tensor index: out of memory");
    for (uint64_t i = 0; i < n_t; i++)
        g->tensor_index[i] = (struct gguf_name_ref){g->ti[i].name, strlen(g->ti[i].name), (int64_t)i};
    int64_t dup = sort_refs(g->tensor_index, (int64_t)n_t);
    if (dup >= 0) {
        char nb[64];
        return fail(p, LM_ERR_CORRUPT, p->pos, "tensor %" PRId64 ": duplicate name '%s'", dup,
                    shown(g->ti[dup].name, nb, sizeof nb));
    }
    uint64_t a = g->alignment;
    g->data_offset = p->pos + (a - p->pos % a) % a;
    return check_ranges(p);
}

/* ---- header and driver ---- */

static lm_status rd_header(struct parser *p, uint64_t *n_t, uint64_t *n_kv)
{
    uint8_t magic[4];
    uint32_t ver;
    lm_status st = rd(p, magic, 4, "magic");
    if (st)
        return st;
    if (memcmp(magic, "GGUF", 4))
        return fail(p, LM_ERR_CORRUPT, 0, "magic: not a GGUF file (bytes %02x %02x %02x %02x)", magic[0], magic[1],
                    magic[2], magic[3]);
    if ((st = rd_u32(p, &ver, "version")))
        return st;
    if (ver == 0)
        return fail(p, LM_ERR_CORRUPT, 4, "version: 0 is not a GGUF version");
    if (ver > 3 && (ver & 0xffff) == 0)
        return fail(p, LM_ERR_UNSUPPORTED, 4, "version: %u looks byte-swapped; big-endian files are not supported",
                    ver);
    if (ver > 3)
        return fail(p, LM_ERR_UNSUPPORTED, 4, "version: %u is not supported (1..3 are)", ver);
    p->version = p->g->version = ver;
    if ((st = rd_count(p, n_t, "n_tensors")) || (st = rd_count(p, n_kv, "n_kv")))
        return st;
    /* The smallest kv: key length, 1 key byte, type, 1 value byte. The
     * smallest tensor info: name length, 1 name byte, n_dims, 1 dim, type, offset. */
    uint64_t cs = count_size(p), min_kv = cs + 1 + 4 + 1, min_ti = cs + 1 + 4 + cs + 4 + 8, rem = left(p);
    if (*n_kv > rem / min_kv)
        return fail(p, LM_ERR_CORRUPT, 8 + cs, "n_kv: %" PRIu64 " key/values cannot fit in %" PRIu64 " bytes", *n_kv,
                    rem);
    if (*n_t > (rem - *n_kv * min_kv) / min_ti)
        return fail(p, LM_ERR_CORRUPT, 8, "n_tensors: %" PRIu64 " tensors cannot fit in %" PRIu64 " bytes", *n_t,
                    rem);
    return LM_OK;
}

static lm_status parse(struct parser *p, struct lm_gguf **out)
{
    uint64_t n_t, n_kv;
    struct lm_gguf *g = calloc(1, sizeof *g);
    if (!g)
        return fail(p, LM_ERR_NOMEM, 0, "out of memory");
    p->g = g;
    g->file_size = p->size;
    lm_status st = rd_header(p, &n_t, &n_kv);
    if (!st)
        st = rd_kvs(p, n_kv);
    if (!st)
        st = find_alignment(p);
    if (!st)
        st = rd_tensors(p, n_t);
    if (st) {
        lm_gguf_close(g);
        return st;
    }
    *out = g;
    return LM_OK;
}

lm_status lm_gguf_open(const char *path, struct lm_gguf **out, char *err, size_t err_size)
{
    struct parser p = {.err = err, .err_size = err_size};
    if (err && err_size)
        err[0] = '\0';
    if (!path || !out)
        return fail(&p, LM_ERR_INVALID_ARG, 0, "lm_gguf_open: NULL argument");
    p.f = fopen(path, "rb");
    if (!p.f)
        return fail(&p, LM_ERR_IO, 0, "cannot open '%s': %s", path, strerror(errno));
    struct stat sb;
    lm_status st;
    if (fstat(fileno(p.f), &sb) != 0) {
        st = fail(&p, LM_ERR_IO, 0, "cannot stat '%s': %s", path, strerror(errno));
    } else if (!S_ISREG(sb.st_mode)) {
        st = fail(&p, LM_ERR_IO, 0, "'%s' is not a regular file", path);
    } else {
        p.size = (uint64_t)sb.st_size;
        setvbuf(p.f, NULL, _IOFBF, 1 << 16);
        st = parse(&p, out);
    }
    fclose(p.f);
    return st;
}

lm_status lm_gguf_open_memory(const void *data, size_t size, struct lm_gguf **out, char *err, size_t err_size)
{
    struct parser p = {.mem = data, .size = size, .err = err, .err_size = err_size};
    if (err && err_size)
        err[0] = '\0';
    if (!out || (!data && size))
        return fail(&p, LM_ERR_INVALID_ARG, 0, "lm_gguf_open_memory: NULL argument");
    if (!data)
        return fail(&p, LM_ERR_CORRUPT, 0, "magic: empty image");
    lm_status st = parse(&p, out);
    if (st == LM_OK)
        (*out)->mem = data;
    return st;
}

void lm_gguf_close(struct lm_gguf *g)
{
    if (!g)
        return;
    for (int64_t i = 0; i < g->n_kv; i++) {
        struct gguf_kv *kv = &g->kv[i];
        free(kv->key);
        free(kv->str);
        free(kv->arr_data);
        free(kv->arr_blob);
        free(kv->arr_offs);
    }
    for (int64_t i = 0; i < g->n_tensors; i++)
        free((char *)g->ti[i].name);
    free(g->kv);
    free(g->ti);
    free(g->kv_index);
    free(g->tensor_index);
    free(g);
}
