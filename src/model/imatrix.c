/* imatrix.c - the importance-matrix set and its file (llama.cpp's
 * imatrix.dat of the b1892 era): parse with every field checked, write,
 * check against a model file, filter, and the per-tensor weights quantize
 * uses. The collector is in imatrix_collect.c.
 *
 * File layout (little-endian, no padding):
 *     int32 n_entries (>= 1)
 *     n_entries times: int32 len, len bytes name, int32 ncall, int32 nval,
 *                      nval float32 values
 *     optional (later llama.cpp): int32 n_chunks, int32 len, len bytes dataset
 * Invariants of a set: names unique, 1..LM_MAX_NAME-1 bytes without NUL;
 * ncall >= 0; n_values >= 1; every value finite and >= 0.
 * Workload: a few hundred entries (tens of thousands for large MoE models) of
 * up to ~10^5 values; names are found through a hash index (open addressing,
 * rebuilt when it grows or entries are dropped), so reading a hostile file of
 * many entries stays linear.
 */
#include "model/imatrix.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct entry {
    char name[LM_MAX_NAME];
    int32_t ncall;
    int32_t n_values;
    float *values;
    float *weights; /* values / ncall, made on first lm_imatrix_weights */
};

struct lm_imatrix {
    struct entry *e;
    int64_t n, cap;
    int64_t *index;   /* [index_cap] entry number + 1, 0 = empty slot */
    size_t index_cap; /* a power of two >= 2 * n, or 0 */
    bool has_trailer;
    int32_t n_chunks;
    char *dataset;
    size_t dataset_len;
};

static void fail(char *err, size_t err_size, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

static void fail(char *err, size_t err_size, const char *fmt, ...)
{
    if (!err || !err_size)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, err_size, fmt, ap);
    va_end(ap);
}

/* ---- the set ---- */

/* See imatrix.h. */
struct lm_imatrix *lm_imatrix_new(void) { return calloc(1, sizeof(struct lm_imatrix)); }

/* See imatrix.h. */
void lm_imatrix_free(struct lm_imatrix *im)
{
    if (!im)
        return;
    for (int64_t i = 0; i < im->n; i++) {
        free(im->e[i].values);
        free(im->e[i].weights);
    }
    free(im->e);
    free(im->index);
    free(im->dataset);
    free(im);
}

static size_t name_hash(const char *s)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return (size_t)h;
}

/* The slot of name: where it is, or the empty slot where it would go. */
static size_t slot_of(const struct lm_imatrix *im, const char *name)
{
    size_t mask = im->index_cap - 1, h = name_hash(name) & mask;
    while (im->index[h] && strcmp(im->e[im->index[h] - 1].name, name))
        h = (h + 1) & mask;
    return h;
}

/* Rebuild the index for at least min_n entries. */
static lm_status reindex(struct lm_imatrix *im, int64_t min_n)
{
    size_t cap = 64;
    while (cap < 2 * (size_t)min_n)
        cap *= 2;
    int64_t *idx = calloc(cap, sizeof *idx);
    if (!idx)
        return LM_ERR_NOMEM;
    free(im->index);
    im->index = idx;
    im->index_cap = cap;
    for (int64_t i = 0; i < im->n; i++)
        im->index[slot_of(im, im->e[i].name)] = i + 1;
    return LM_OK;
}

static bool name_ok(const char *name, size_t len)
{
    return len >= 1 && len < LM_MAX_NAME && memchr(name, 0, len) == NULL;
}

static bool value_ok(float v) { return isfinite(v) && v >= 0.0f; }

/* See imatrix.h. */
int64_t lm_imatrix_find(const struct lm_imatrix *im, const char *name)
{
    if (!im || !name || !im->index_cap)
        return -1;
    return im->index[slot_of(im, name)] - 1;
}

/* See imatrix.h. */
lm_status lm_imatrix_add(struct lm_imatrix *im, const char *name, int32_t ncall, const float *values,
                         int32_t n_values)
{
    if (!im || !name || !name_ok(name, strlen(name)) || ncall < 0 || n_values < 1 || !values ||
        lm_imatrix_find(im, name) >= 0)
        return LM_ERR_INVALID_ARG;
    for (int32_t j = 0; j < n_values; j++)
        if (!value_ok(values[j]))
            return LM_ERR_INVALID_ARG;
    if (2 * (size_t)(im->n + 1) > im->index_cap && reindex(im, 2 * (im->n + 1)))
        return LM_ERR_NOMEM;
    if (im->n == im->cap) {
        int64_t nc = im->cap ? 2 * im->cap : 64;
        struct entry *ne = realloc(im->e, (size_t)nc * sizeof *ne);
        if (!ne)
            return LM_ERR_NOMEM;
        im->e = ne;
        im->cap = nc;
    }
    struct entry *e = &im->e[im->n];
    memset(e, 0, sizeof *e);
    e->values = malloc((size_t)n_values * sizeof(float));
    if (!e->values)
        return LM_ERR_NOMEM;
    memcpy(e->values, values, (size_t)n_values * sizeof(float));
    snprintf(e->name, sizeof e->name, "%s", name);
    e->ncall = ncall;
    e->n_values = n_values;
    im->index[slot_of(im, e->name)] = ++im->n;
    return LM_OK;
}

/* See imatrix.h. */
int64_t lm_imatrix_n_entries(const struct lm_imatrix *im) { return im ? im->n : 0; }

/* See imatrix.h. */
bool lm_imatrix_entry(const struct lm_imatrix *im, int64_t i, struct lm_imatrix_entry *out)
{
    if (!im || i < 0 || i >= im->n || !out)
        return false;
    const struct entry *e = &im->e[i];
    *out = (struct lm_imatrix_entry){e->name, e->ncall, e->n_values, e->values};
    return true;
}

/* See imatrix.h. */
bool lm_imatrix_trailer(const struct lm_imatrix *im, int32_t *n_chunks, const char **dataset, size_t *dataset_len)
{
    if (!im || !im->has_trailer)
        return false;
    if (n_chunks)
        *n_chunks = im->n_chunks;
    if (dataset)
        *dataset = im->dataset ? im->dataset : "";
    if (dataset_len)
        *dataset_len = im->dataset_len;
    return true;
}

/* ---- parsing ---- */

struct rd {
    const uint8_t *p;
    size_t size, pos;
};

static bool rd_i32(struct rd *r, int32_t *v)
{
    if (r->size - r->pos < 4)
        return false;
    const uint8_t *b = r->p + r->pos;
    *v = (int32_t)((uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24);
    r->pos += 4;
    return true;
}

/* The optional trailer after the last entry: exactly int32 n_chunks, int32
 * len, len bytes, then the end of the file. */
static lm_status parse_trailer(struct rd *r, struct lm_imatrix *im, char *err, size_t err_size)
{
    size_t at = r->pos;
    int32_t n_chunks, len;
    if (!rd_i32(r, &n_chunks) || !rd_i32(r, &len) || n_chunks < 0 || len < 0 ||
        (size_t)len != r->size - r->pos) {
        fail(err, err_size, "%zu unexpected bytes after the last entry (at byte %zu)", r->size - at, at);
        return LM_ERR_CORRUPT;
    }
    im->dataset = malloc((size_t)len + 1);
    if (!im->dataset)
        return LM_ERR_NOMEM;
    memcpy(im->dataset, r->p + r->pos, (size_t)len);
    im->dataset[len] = 0;
    im->dataset_len = (size_t)len;
    im->n_chunks = n_chunks;
    im->has_trailer = true;
    r->pos = r->size;
    return LM_OK;
}

/* Entry i at r->pos into im. */
static lm_status parse_entry(struct rd *r, struct lm_imatrix *im, int32_t i, char *err, size_t err_size)
{
    size_t at = r->pos;
    int32_t len, ncall, nval;
    char name[LM_MAX_NAME];
    if (!rd_i32(r, &len)) {
        fail(err, err_size, "truncated: entry %d's name length is missing (at byte %zu)", i, at);
        return LM_ERR_CORRUPT;
    }
    if (len < 1 || len >= LM_MAX_NAME) {
        fail(err, err_size, "entry %d: name length %d (a tensor name has 1 to %d bytes; at byte %zu)", i, len,
             LM_MAX_NAME - 1, at);
        return LM_ERR_CORRUPT;
    }
    if (r->size - r->pos < (size_t)len) {
        fail(err, err_size, "truncated: entry %d's name needs %d bytes, %zu left", i, len, r->size - r->pos);
        return LM_ERR_CORRUPT;
    }
    memcpy(name, r->p + r->pos, (size_t)len);
    name[len] = 0;
    r->pos += (size_t)len;
    if (!name_ok(name, (size_t)len)) {
        fail(err, err_size, "entry %d: the name contains a NUL byte (at byte %zu)", i, at + 4);
        return LM_ERR_CORRUPT;
    }
    if (lm_imatrix_find(im, name) >= 0) {
        fail(err, err_size, "entry %d: '%s' appears twice", i, name);
        return LM_ERR_CORRUPT;
    }
    if (!rd_i32(r, &ncall) || !rd_i32(r, &nval)) {
        fail(err, err_size, "truncated: entry %d ('%s') ends before its counts", i, name);
        return LM_ERR_CORRUPT;
    }
    if (ncall < 0 || nval < 1) {
        fail(err, err_size, "entry %d ('%s'): ncall %d, nval %d (need ncall >= 0, nval >= 1)", i, name, ncall, nval);
        return LM_ERR_CORRUPT;
    }
    if ((r->size - r->pos) / 4 < (size_t)nval) {
        fail(err, err_size, "truncated: entry %d ('%s') has %d values, the file holds only %zu more bytes", i, name,
             nval, r->size - r->pos);
        return LM_ERR_CORRUPT;
    }
    const uint8_t *v = r->p + r->pos;
    for (int32_t j = 0; j < nval; j++) {
        float x;
        memcpy(&x, v + 4 * (size_t)j, 4);
        if (!value_ok(x)) {
            fail(err, err_size, "entry %d ('%s'): value %d is %g (sums of squares are finite and >= 0)", i, name, j,
                 (double)x);
            return LM_ERR_CORRUPT;
        }
    }
    float *vals = malloc((size_t)nval * sizeof(float));
    if (!vals)
        return LM_ERR_NOMEM;
    memcpy(vals, v, (size_t)nval * sizeof(float));
    r->pos += 4 * (size_t)nval;
    lm_status st = lm_imatrix_add(im, name, ncall, vals, nval);
    free(vals);
    return st;
}

/* See imatrix.h. */
lm_status lm_imatrix_parse(const void *data, size_t size, struct lm_imatrix **out, char *err, size_t err_size)
{
    if (!out || (!data && size))
        return LM_ERR_INVALID_ARG;
    struct rd r = {data, size, 0};
    int32_t n;
    if (!rd_i32(&r, &n)) {
        fail(err, err_size, "truncated: %zu bytes, not even the entry count", size);
        return LM_ERR_CORRUPT;
    }
    /* the smallest entry is 17 bytes: a 1-byte name and one value */
    if (n < 1 || (size_t)n > (size - 4) / 17) {
        fail(err, err_size, "%d entries cannot be in a file of %zu bytes", n, size);
        return LM_ERR_CORRUPT;
    }
    if (n > LM_IMATRIX_MAX_ENTRIES) {
        fail(err, err_size, "%d entries: more than any model has (at most %d)", n, LM_IMATRIX_MAX_ENTRIES);
        return LM_ERR_CORRUPT;
    }
    struct lm_imatrix *im = lm_imatrix_new();
    if (!im)
        return LM_ERR_NOMEM;
    lm_status st = LM_OK;
    for (int32_t i = 0; i < n && !st; i++)
        st = parse_entry(&r, im, i, err, err_size);
    if (!st && r.pos < r.size)
        st = parse_trailer(&r, im, err, err_size);
    if (st == LM_ERR_NOMEM)
        fail(err, err_size, "out of memory");
    if (st) {
        lm_imatrix_free(im);
        return st;
    }
    *out = im;
    return LM_OK;
}

/* See imatrix.h. */
lm_status lm_imatrix_read(const char *path, struct lm_imatrix **out, char *err, size_t err_size)
{
    if (!path || !out)
        return LM_ERR_INVALID_ARG;
    FILE *f = fopen(path, "rb");
    if (!f) {
        fail(err, err_size, "cannot open %s: %s", path, strerror(errno));
        return LM_ERR_IO;
    }
    lm_status st = LM_OK;
    uint8_t *buf = NULL;
    long size = -1;
    if (fseek(f, 0, SEEK_END) == 0)
        size = ftell(f);
    if (size < 0 || fseek(f, 0, SEEK_SET) != 0) {
        fail(err, err_size, "cannot read %s: not a regular file", path);
        st = LM_ERR_IO;
    } else if ((unsigned long long)size > LM_IMATRIX_MAX_FILE) {
        fail(err, err_size, "%s: %ld bytes is too large for an importance matrix (at most %llu)", path, size,
             (unsigned long long)LM_IMATRIX_MAX_FILE);
        st = LM_ERR_UNSUPPORTED;
    } else if (!(buf = malloc(size ? (size_t)size : 1))) {
        fail(err, err_size, "out of memory");
        st = LM_ERR_NOMEM;
    } else if (fread(buf, 1, (size_t)size, f) != (size_t)size) {
        fail(err, err_size, "cannot read %s", path);
        st = LM_ERR_IO;
    }
    fclose(f);
    if (!st) {
        char msg[256] = "";
        st = lm_imatrix_parse(buf, (size_t)size, out, msg, sizeof msg);
        if (st)
            fail(err, err_size, "%s: %s", path, msg);
    }
    free(buf);
    return st;
}

/* ---- writing ---- */

static bool put_i32(FILE *f, int32_t v)
{
    uint32_t u = (uint32_t)v;
    const uint8_t b[4] = {(uint8_t)u, (uint8_t)(u >> 8), (uint8_t)(u >> 16), (uint8_t)(u >> 24)};
    return fwrite(b, 1, 4, f) == 4;
}

static bool put_all(FILE *f, const struct lm_imatrix *im)
{
    bool ok = put_i32(f, (int32_t)im->n);
    for (int64_t i = 0; i < im->n && ok; i++) {
        const struct entry *e = &im->e[i];
        int32_t len = (int32_t)strlen(e->name);
        ok = put_i32(f, len) && fwrite(e->name, 1, (size_t)len, f) == (size_t)len && put_i32(f, e->ncall) &&
             put_i32(f, e->n_values) &&
             fwrite(e->values, sizeof(float), (size_t)e->n_values, f) == (size_t)e->n_values;
    }
    if (ok && im->has_trailer)
        ok = put_i32(f, im->n_chunks) && put_i32(f, (int32_t)im->dataset_len) &&
             fwrite(im->dataset, 1, im->dataset_len, f) == im->dataset_len;
    return ok;
}

/* See imatrix.h. */
lm_status lm_imatrix_write(const struct lm_imatrix *im, const char *path, char *err, size_t err_size)
{
    if (!im || !path || im->n < 1 || im->n > INT32_MAX || im->dataset_len > INT32_MAX) {
        fail(err, err_size, "nothing to write");
        return LM_ERR_INVALID_ARG;
    }
    size_t n = strlen(path) + 5;
    char *tmp = malloc(n);
    if (!tmp) {
        fail(err, err_size, "out of memory");
        return LM_ERR_NOMEM;
    }
    snprintf(tmp, n, "%s.tmp", path);
    lm_status st = LM_OK;
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        fail(err, err_size, "cannot create %s (for %s): %s", tmp, path, strerror(errno));
        st = LM_ERR_IO;
    } else {
        bool ok = put_all(f, im);
        ok = fclose(f) == 0 && ok;
        if (!ok || rename(tmp, path) != 0) {
            fail(err, err_size, "cannot write %s: %s", ok ? path : tmp, strerror(errno));
            unlink(tmp);
            st = LM_ERR_IO;
        }
    }
    free(tmp);
    return st;
}

/* ---- use ---- */

/* See imatrix.h. */
lm_status lm_imatrix_check(const struct lm_imatrix *im, const struct lm_gguf *g, char *err, size_t err_size)
{
    if (!im || !g)
        return LM_ERR_INVALID_ARG;
    for (int64_t i = 0; i < im->n; i++) {
        const struct entry *e = &im->e[i];
        int64_t k = lm_gguf_find_tensor(g, e->name);
        if (k < 0) {
            fail(err, err_size, "entry '%s' names no tensor of the model (an importance matrix of another model?)",
                 e->name);
            return LM_ERR_NOT_FOUND;
        }
        const struct lm_gguf_tensor_info *ti = lm_gguf_tensor_info(g, k);
        int64_t n_mat = ti->ne[2] * ti->ne[3];
        if (e->n_values != ti->ne[0] && !(n_mat > 1 && e->n_values == ti->ne[0] * n_mat)) {
            fail(err, err_size,
                 "entry '%s' has %d values but the tensor's rows have %lld (an importance matrix of another model?)",
                 e->name, e->n_values, (long long)ti->ne[0]);
            return LM_ERR_SHAPE;
        }
    }
    return LM_OK;
}

static bool contains_any(const char *name, const char *const *list)
{
    for (; *list; list++)
        if (strstr(name, *list))
            return true;
    return false;
}

/* See imatrix.h. */
void lm_imatrix_filter(struct lm_imatrix *im, const char *const *include, const char *const *exclude)
{
    if (!im)
        return;
    int64_t k = 0;
    for (int64_t i = 0; i < im->n; i++) {
        struct entry *e = &im->e[i];
        bool keep = (!include || contains_any(e->name, include)) && !(exclude && contains_any(e->name, exclude));
        if (keep) {
            im->e[k++] = *e;
        } else {
            free(e->values);
            free(e->weights);
        }
    }
    im->n = k;
    if (im->index_cap) { /* the index has room for the larger n: rebuild in place */
        memset(im->index, 0, im->index_cap * sizeof *im->index);
        for (int64_t i = 0; i < im->n; i++)
            im->index[slot_of(im, im->e[i].name)] = i + 1;
    }
}

/* See imatrix.h. */
const float *lm_imatrix_weights(struct lm_imatrix *im, const char *name, int64_t n_per_row)
{
    int64_t i = lm_imatrix_find(im, name);
    if (i < 0 || im->e[i].n_values != n_per_row)
        return NULL;
    struct entry *e = &im->e[i];
    if (e->ncall <= 0)
        return e->values;
    if (!e->weights) {
        e->weights = malloc((size_t)e->n_values * sizeof(float));
        if (!e->weights)
            return NULL;
        for (int32_t j = 0; j < e->n_values; j++)
            e->weights[j] = e->values[j] / (float)e->ncall;
    }
    return e->weights;
}

/* See imatrix.h. */
const float *lm_imatrix_lookup(void *user, const char *tensor_name, int64_t n_per_row)
{
    return lm_imatrix_weights(user, tensor_name, n_per_row);
}
