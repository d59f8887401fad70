/* gguf_write.c - the GGUF writer: collect key/values and tensors, write once.
 *
 * Key/values keep insertion order; each value is held already serialized in
 * its version-3 on-disk form (without the type tag), so writing is a copy.
 * The file is version 3: header, key/values, tensor infos, zero padding to
 * the alignment (general.alignment when set, else 32; none when there are no
 * tensors), then each tensor's bytes at the next aligned offset, each followed
 * by zero padding. A reader's
 * file written back with all its key/values and tensors in order comes out
 * byte for byte the same when the input was laid out that way.
 * Thread-safety: a writer is used by one thread at a time.
 */
#include "gguf/gguf_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct wkv {
    char *key;
    enum lm_gguf_type type;
    uint8_t *val; /* serialized value */
    size_t val_size;
};

struct wtensor {
    char *name;
    enum lm_type type;
    int n_dims;
    int64_t ne[4];
    const void *data; /* NULL: ask the fill callback */
    uint64_t size;
};

struct lm_gguf_writer {
    struct wkv *kv;
    int64_t n_kv, kv_cap;
    struct wtensor *t;
    int64_t n_t, t_cap;
    lm_gguf_fill_fn fill;
    void *fill_user;
};

/* ---- a growing byte buffer for serialized values ---- */

struct bytes {
    uint8_t *p;
    size_t n, cap;
    bool oom;
};

static void put(struct bytes *b, const void *src, size_t n)
{
    if (b->oom || n == 0)
        return;
    if (n > SIZE_MAX - b->n) {
        b->oom = true;
        return;
    }
    if (b->n + n > b->cap) {
        size_t nc = b->cap ? b->cap : 64;
        while (nc < b->n + n)
            nc = nc > SIZE_MAX / 2 ? b->n + n : nc * 2;
        uint8_t *q = realloc(b->p, nc);
        if (!q) {
            b->oom = true;
            return;
        }
        b->p = q;
        b->cap = nc;
    }
    memcpy(b->p + b->n, src, n);
    b->n += n;
}

/* The low n bytes of v, little-endian, into t[n] (n <= 8). */
static void le_store(uint8_t *t, uint64_t v, size_t n)
{
    for (size_t k = 0; k < n; k++)
        t[k] = (uint8_t)(v >> (8 * k));
}

static void put_le(struct bytes *b, uint64_t v, size_t n)
{
    uint8_t t[8];
    le_store(t, v, n);
    put(b, t, n);
}

static void put_str(struct bytes *b, const char *s, size_t len)
{
    put_le(b, len, 8);
    put(b, s, len);
}

/* ---- writer objects ---- */

lm_status lm_gguf_writer_new(struct lm_gguf_writer **out)
{
    if (!out)
        return LM_ERR_INVALID_ARG;
    struct lm_gguf_writer *w = calloc(1, sizeof *w);
    if (!w)
        return LM_ERR_NOMEM;
    *out = w;
    return LM_OK;
}

void lm_gguf_writer_free(struct lm_gguf_writer *w)
{
    if (!w)
        return;
    for (int64_t i = 0; i < w->n_kv; i++) {
        free(w->kv[i].key);
        free(w->kv[i].val);
    }
    for (int64_t i = 0; i < w->n_t; i++)
        free(w->t[i].name);
    free(w->kv);
    free(w->t);
    free(w);
}

static int64_t find_wkv(const struct lm_gguf_writer *w, const char *key)
{
    for (int64_t i = 0; i < w->n_kv; i++)
        if (!strcmp(w->kv[i].key, key))
            return i;
    return -1;
}

/* Take ownership of the serialized value in b (freed on failure). */
static lm_status set_value(struct lm_gguf_writer *w, const char *key, enum lm_gguf_type type, struct bytes *b)
{
    lm_status st = LM_OK;
    if (b->oom) {
        st = LM_ERR_NOMEM;
        goto out_free;
    }
    int64_t i = find_wkv(w, key);
    if (i >= 0) {
        free(w->kv[i].val);
    } else {
        if (w->n_kv == w->kv_cap) {
            int64_t nc = w->kv_cap ? w->kv_cap * 2 : 16;
            struct wkv *q = realloc(w->kv, (size_t)nc * sizeof *q);
            if (!q) {
                st = LM_ERR_NOMEM;
                goto out_free;
            }
            w->kv = q;
            w->kv_cap = nc;
        }
        char *k = strdup(key);
        if (!k) {
            st = LM_ERR_NOMEM;
            goto out_free;
        }
        i = w->n_kv++;
        w->kv[i].key = k;
    }
    w->kv[i].type = type;
    w->kv[i].val = b->p;
    w->kv[i].val_size = b->n;
    return LM_OK;
out_free:
    free(b->p);
    return st;
}

static bool key_ok(const struct lm_gguf_writer *w, const char *key)
{
    return w && key && key[0] && strlen(key) <= GGUF_MAX_NAME;
}

static lm_status set_scalar(struct lm_gguf_writer *w, const char *key, enum lm_gguf_type t, uint64_t bits)
{
    struct bytes b = {0};
    if (!key_ok(w, key))
        return LM_ERR_INVALID_ARG;
    put_le(&b, bits, lm_gguf_type_size(t));
    return set_value(w, key, t, &b);
}

lm_status lm_gguf_set_u32(struct lm_gguf_writer *w, const char *key, uint32_t v)
{
    return set_scalar(w, key, LM_GGUF_UINT32, v);
}

lm_status lm_gguf_set_i32(struct lm_gguf_writer *w, const char *key, int32_t v)
{
    return set_scalar(w, key, LM_GGUF_INT32, (uint32_t)v);
}

lm_status lm_gguf_set_u64(struct lm_gguf_writer *w, const char *key, uint64_t v)
{
    return set_scalar(w, key, LM_GGUF_UINT64, v);
}

lm_status lm_gguf_set_f32(struct lm_gguf_writer *w, const char *key, float v)
{
    uint32_t bits;
    memcpy(&bits, &v, 4);
    return set_scalar(w, key, LM_GGUF_FLOAT32, bits);
}

lm_status lm_gguf_set_bool(struct lm_gguf_writer *w, const char *key, bool v)
{
    return set_scalar(w, key, LM_GGUF_BOOL, v ? 1 : 0);
}

lm_status lm_gguf_set_str(struct lm_gguf_writer *w, const char *key, const char *v)
{
    struct bytes b = {0};
    if (!key_ok(w, key) || !v)
        return LM_ERR_INVALID_ARG;
    put_str(&b, v, strlen(v));
    return set_value(w, key, LM_GGUF_STRING, &b);
}

lm_status lm_gguf_set_arr_data(struct lm_gguf_writer *w, const char *key, enum lm_gguf_type type, const void *data,
                               uint64_t n)
{
    size_t es = lm_gguf_type_size(type);
    struct bytes b = {0};
    if (!key_ok(w, key) || es == 0 || (!data && n) || n > SIZE_MAX / es)
        return LM_ERR_INVALID_ARG;
    if (type == LM_GGUF_BOOL)
        for (uint64_t j = 0; j < n; j++)
            if (((const uint8_t *)data)[j] > 1)
                return LM_ERR_INVALID_ARG;
    put_le(&b, (uint64_t)type, 4);
    put_le(&b, n, 8);
    put(&b, data, (size_t)(n * es));
    return set_value(w, key, LM_GGUF_ARRAY, &b);
}

lm_status lm_gguf_set_arr_str(struct lm_gguf_writer *w, const char *key, const char *const *strs, uint64_t n)
{
    struct bytes b = {0};
    if (!key_ok(w, key) || (!strs && n))
        return LM_ERR_INVALID_ARG;
    for (uint64_t j = 0; j < n; j++)
        if (!strs[j])
            return LM_ERR_INVALID_ARG;
    put_le(&b, LM_GGUF_STRING, 4);
    put_le(&b, n, 8);
    for (uint64_t j = 0; j < n; j++)
        put_str(&b, strs[j], strlen(strs[j]));
    return set_value(w, key, LM_GGUF_ARRAY, &b);
}

lm_status lm_gguf_copy_kv(struct lm_gguf_writer *w, const struct lm_gguf *g, int64_t i)
{
    if (!w || !g || i < 0 || i >= g->n_kv)
        return LM_ERR_INVALID_ARG;
    const struct gguf_kv *kv = &g->kv[i];
    struct bytes b = {0};
    if (kv->type == LM_GGUF_STRING) {
        put_str(&b, kv->str, kv->str_len);
    } else if (kv->type == LM_GGUF_ARRAY) {
        put_le(&b, (uint64_t)kv->arr_type, 4);
        put_le(&b, kv->arr_n, 8);
        if (kv->arr_type == LM_GGUF_STRING) {
            for (uint64_t j = 0; j < kv->arr_n; j++)
                put_str(&b, kv->arr_blob + kv->arr_offs[j], (size_t)(kv->arr_offs[j + 1] - kv->arr_offs[j] - 1));
        } else {
            put(&b, kv->arr_data, (size_t)(kv->arr_n * lm_gguf_type_size(kv->arr_type)));
        }
    } else {
        put(&b, kv->sc, lm_gguf_type_size(kv->type));
    }
    return set_value(w, kv->key, kv->type, &b);
}

lm_status lm_gguf_remove_key(struct lm_gguf_writer *w, const char *key)
{
    if (!w || !key)
        return LM_ERR_INVALID_ARG;
    int64_t i = find_wkv(w, key);
    if (i < 0)
        return LM_ERR_NOT_FOUND;
    free(w->kv[i].key);
    free(w->kv[i].val);
    memmove(&w->kv[i], &w->kv[i + 1], (size_t)(w->n_kv - i - 1) * sizeof *w->kv);
    w->n_kv--;
    return LM_OK;
}

/* ---- tensors ---- */

/* Bytes of a shape, or false when the shape is not valid for the type. */
static bool tensor_bytes(enum lm_type type, int n_dims, const int64_t *ne, uint64_t *out)
{
    if (!lm_type_valid(type) || n_dims < 1 || n_dims > 4 || !ne)
        return false;
    int64_t blck = lm_type_blck(type);
    uint64_t bytes, elems = 1;
    for (int d = 0; d < n_dims; d++) {
        uint64_t e1 = ne[d] > 0 ? (uint64_t)ne[d] : 1;
        if (ne[d] < 0 || elems > (uint64_t)INT64_MAX / e1)
            return false;
        elems *= e1;
    }
    if (ne[0] % blck || (uint64_t)(ne[0] / blck) > (uint64_t)INT64_MAX / lm_type_size(type))
        return false;
    bytes = (uint64_t)(ne[0] / blck) * lm_type_size(type);
    for (int d = 1; d < n_dims; d++) {
        if (ne[d] && bytes > (uint64_t)INT64_MAX / (uint64_t)ne[d])
            return false;
        bytes *= (uint64_t)ne[d];
    }
    *out = bytes;
    return true;
}

lm_status lm_gguf_add_tensor(struct lm_gguf_writer *w, const char *name, enum lm_type type, int n_dims,
                             const int64_t *ne, const void *data)
{
    uint64_t size;
    /* Names are limited to 63 bytes: llama.cpp (GGML_MAX_NAME) refuses longer ones. */
    if (!w || !name || !name[0] || strlen(name) > 63 || !tensor_bytes(type, n_dims, ne, &size))
        return LM_ERR_INVALID_ARG;
    for (int64_t i = 0; i < w->n_t; i++)
        if (!strcmp(w->t[i].name, name))
            return LM_ERR_INVALID_ARG;
    if (w->n_t == w->t_cap) {
        int64_t nc = w->t_cap ? w->t_cap * 2 : 16;
        struct wtensor *q = realloc(w->t, (size_t)nc * sizeof *q);
        if (!q)
            return LM_ERR_NOMEM;
        w->t = q;
        w->t_cap = nc;
    }
    struct wtensor *t = &w->t[w->n_t];
    t->name = strdup(name);
    if (!t->name)
        return LM_ERR_NOMEM;
    t->type = type;
    t->n_dims = n_dims;
    for (int d = 0; d < 4; d++)
        t->ne[d] = d < n_dims ? ne[d] : 1;
    t->data = data;
    t->size = size;
    w->n_t++;
    return LM_OK;
}

void lm_gguf_writer_set_fill(struct lm_gguf_writer *w, lm_gguf_fill_fn fill, void *user)
{
    if (!w)
        return;
    w->fill = fill;
    w->fill_user = user;
}

/* ---- writing ---- */

struct out {
    FILE *f;
    uint64_t pos;
    bool err;
};

static void emit(struct out *o, const void *p, size_t n)
{
    if (o->err || n == 0)
        return;
    if (fwrite(p, 1, n, o->f) != n)
        o->err = true;
    o->pos += n;
}

static void emit_le(struct out *o, uint64_t v, size_t n)
{
    uint8_t t[8];
    le_store(t, v, n);
    emit(o, t, n);
}

static void emit_pad(struct out *o, size_t align)
{
    static const uint8_t zeros[256];
    uint64_t pad = (align - o->pos % align) % align;
    while (pad > 0) {
        size_t k = pad < sizeof zeros ? (size_t)pad : sizeof zeros;
        emit(o, zeros, k);
        pad -= k;
    }
}

/* The alignment to write with: general.alignment (a u32 power of two) or 32. */
static lm_status writer_alignment(const struct lm_gguf_writer *w, size_t *out)
{
    int64_t i = find_wkv(w, "general.alignment");
    *out = LM_GGUF_DEFAULT_ALIGNMENT;
    if (i < 0)
        return LM_OK;
    const struct wkv *kv = &w->kv[i];
    if (kv->type != LM_GGUF_UINT32 || kv->val_size != 4)
        return LM_ERR_INVALID_ARG;
    uint32_t a = (uint32_t)kv->val[0] | (uint32_t)kv->val[1] << 8 | (uint32_t)kv->val[2] << 16 |
                 (uint32_t)kv->val[3] << 24;
    if (a == 0 || (a & (a - 1)))
        return LM_ERR_INVALID_ARG;
    *out = a;
    return LM_OK;
}

static void emit_meta(struct out *o, const struct lm_gguf_writer *w, size_t align)
{
    emit(o, "GGUF", 4);
    emit_le(o, 3, 4);
    emit_le(o, (uint64_t)w->n_t, 8);
    emit_le(o, (uint64_t)w->n_kv, 8);
    for (int64_t i = 0; i < w->n_kv; i++) {
        size_t len = strlen(w->kv[i].key);
        emit_le(o, len, 8);
        emit(o, w->kv[i].key, len);
        emit_le(o, (uint64_t)w->kv[i].type, 4);
        emit(o, w->kv[i].val, w->kv[i].val_size);
    }
    uint64_t off = 0;
    for (int64_t i = 0; i < w->n_t; i++) {
        const struct wtensor *t = &w->t[i];
        size_t len = strlen(t->name);
        emit_le(o, len, 8);
        emit(o, t->name, len);
        emit_le(o, (uint64_t)t->n_dims, 4);
        for (int d = 0; d < t->n_dims; d++)
            emit_le(o, (uint64_t)t->ne[d], 8);
        emit_le(o, (uint64_t)t->type, 4);
        emit_le(o, off, 8);
        off += t->size + (align - t->size % align) % align;
    }
    if (w->n_t > 0) /* gguf-py writes vocab-only files unpadded; so do we */
        emit_pad(o, align);
}

static lm_status emit_data(struct out *o, const struct lm_gguf_writer *w, size_t align)
{
    lm_status st = LM_OK;
    void *scratch = NULL;
    uint64_t scratch_size = 0;
    for (int64_t i = 0; i < w->n_t && !o->err; i++) {
        const struct wtensor *t = &w->t[i];
        const void *src = t->data;
        if (!src && t->size) {
            if (t->size > scratch_size) {
                void *q = t->size <= SIZE_MAX ? realloc(scratch, (size_t)t->size) : NULL;
                if (!q) {
                    st = LM_ERR_NOMEM;
                    break;
                }
                scratch = q;
                scratch_size = t->size;
            }
            if ((st = w->fill(w->fill_user, i, scratch, (size_t)t->size)))
                break;
            src = scratch;
        }
        emit(o, src, (size_t)t->size);
        emit_pad(o, align);
    }
    free(scratch);
    return st;
}

lm_status lm_gguf_write_file(const struct lm_gguf_writer *w, const char *path)
{
    size_t align;
    if (!w || !path)
        return LM_ERR_INVALID_ARG;
    lm_status st = writer_alignment(w, &align);
    if (st)
        return st;
    for (int64_t i = 0; i < w->n_t; i++)
        if (!w->t[i].data && w->t[i].size && !w->fill)
            return LM_ERR_INVALID_ARG;
    struct out o = {fopen(path, "wb"), 0, false};
    if (!o.f)
        return LM_ERR_IO;
    setvbuf(o.f, NULL, _IOFBF, 1 << 16);
    emit_meta(&o, w, align);
    st = emit_data(&o, w, align);
    if (fclose(o.f) != 0)
        o.err = true;
    if (st == LM_OK && o.err)
        st = LM_ERR_IO;
    if (st)
        remove(path);
    return st;
}
