/* lora.c - merge a LoRA adapter file into a model's weights (see lora.h for
 * the file format).
 *
 * Two passes: (1) read and check the whole tensor table (every count, size
 * and offset is untrusted: a tensor's data must lie inside the file), pair
 * each "<w>.loraA" with its "<w>.loraB", find weight <w> in the model (and in
 * the base file), and check shapes and types; (2) only then, pair by pair,
 * read A and B as floats and update each weight row j in place:
 *     W[j][i] = encode(decode(src[j])[i] + (float)(scaling * sum_k A[i][k] B[j][k]))
 * with src the weight itself or the base file's tensor, the dot product in
 * double, and scaling = scale * alpha / r in float as llama.cpp b1892 computes
 * it. Rows are split over n_threads threads. A weight is read and written
 * whole through its buffers (lm_weight_get/lm_weight_set), so any buffer
 * layout works: host memory, the model's copy-on-write file mapping (writing
 * copies the touched pages; the file is not changed), or a backend's own
 * layout (the CPU's repacked GEMM rows), or row slices on several devices.
 */
#include "model/lora.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "core/fp16.h"
#include "core/log.h"
#include "core/time.h"
#include "model/row_split.h"
#include "quant/quant.h"

#define LORA_MAGIC 0x67676c61u /* 'ggla' */
#define LORA_VERSION 1
#define LORA_MAX_NAME 64       /* b1892's GGML_MAX_NAME: names are shorter */
#define LORA_SUFFIX_LEN 6      /* ".loraA" / ".loraB" */
#define LORA_MAX_THREADS 64

struct lora_tensor {
    char name[LORA_MAX_NAME];
    enum lm_type type; /* F32 or F16 */
    int64_t ne[2];
    uint64_t offset;   /* absolute file offset of the data */
    uint64_t size;     /* bytes */
    bool paired;
};

struct lora_pair {
    const struct lora_tensor *a, *b;
    struct lm_tensor *w;  /* the model's weight */
    int64_t base;         /* tensor index in the base file, or -1 */
};

struct lora_file {
    FILE *f;
    uint64_t size;
    int32_t r, alpha;
    struct lora_tensor *t;
    size_t n, cap;
    uint32_t *index;      /* open addressing by name: 1 + tensor number, 0 empty */
    size_t index_mask;    /* index size - 1; the size is a power of two >= 2 * cap */
    struct lora_pair *pairs;
    size_t n_pairs;
};

static lm_status fail(char *err, size_t err_size, lm_status st, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

static lm_status fail(char *err, size_t err_size, lm_status st, const char *fmt, ...)
{
    if (err && err_size) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, err_size, fmt, ap);
        va_end(ap);
    }
    return st;
}

static bool rd(FILE *f, void *dst, size_t n) { return fread(dst, 1, n, f) == n; }

static bool read_at(FILE *f, uint64_t offset, void *dst, size_t n)
{
    return fseeko(f, (off_t)offset, SEEK_SET) == 0 && rd(f, dst, n);
}

/* ---- the name index: every lookup is O(1) expected, so a table of n
 * tensors is read and paired in O(n) (a linear scan made it O(n^2)) ---- */

static size_t name_hash(const char *s)
{
    uint64_t h = 0xcbf29ce484222325u; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3u;
    return (size_t)(h ^ (h >> 29));
}

/* The slot holding name, or the empty slot where it would go. */
static uint32_t *index_slot(const struct lora_file *lf, const char *name)
{
    size_t i = name_hash(name) & lf->index_mask;
    while (lf->index[i] && strcmp(lf->t[lf->index[i] - 1].name, name))
        i = (i + 1) & lf->index_mask;
    return &lf->index[i];
}

static struct lora_tensor *find_tensor(const struct lora_file *lf, const char *name)
{
    if (!lf->index)
        return NULL;
    uint32_t k = *index_slot(lf, name);
    return k ? &lf->t[k - 1] : NULL;
}

/* Room for one more tensor: the array doubles, and the index is rebuilt at
 * twice the array's capacity (amortised O(1) per tensor). */
static bool grow_table(struct lora_file *lf)
{
    if (lf->n < lf->cap)
        return true;
    size_t cap = lf->cap ? 2 * lf->cap : 16;
    if (cap > UINT32_MAX / 2)
        return false;
    struct lora_tensor *nt = realloc(lf->t, cap * sizeof *nt);
    if (!nt)
        return false;
    lf->t = nt;
    uint32_t *ni = calloc(2 * cap, sizeof *ni);
    if (!ni)
        return false;
    free(lf->index);
    lf->index = ni;
    lf->index_mask = 2 * cap - 1;
    lf->cap = cap;
    for (size_t i = 0; i < lf->n; i++)
        *index_slot(lf, lf->t[i].name) = (uint32_t)i + 1;
    return true;
}

/* One tensor header at file offset pos; appends it to lf->t and moves the
 * file position past its data. */
static lm_status read_tensor(struct lora_file *lf, uint64_t pos, char *err, size_t es)
{
    int32_t h[3], ne[2] = {1, 1};
    if (!rd(lf->f, h, sizeof h))
        return fail(err, es, LM_ERR_CORRUPT, "truncated tensor header at offset %llu", (unsigned long long)pos);
    if (h[0] != 1 && h[0] != 2)
        return fail(err, es, LM_ERR_CORRUPT, "tensor at offset %llu has %d dimensions (1 or 2 expected)",
                    (unsigned long long)pos, h[0]);
    if (h[1] <= LORA_SUFFIX_LEN || h[1] >= LORA_MAX_NAME)
        return fail(err, es, LM_ERR_CORRUPT, "tensor at offset %llu has a name of %d bytes", (unsigned long long)pos,
                    h[1]);
    if (h[2] != 0 && h[2] != 1)
        return fail(err, es, LM_ERR_CORRUPT, "tensor at offset %llu has type %d (0 F32 or 1 F16 expected)",
                    (unsigned long long)pos, h[2]);
    struct lora_tensor t = {.type = h[2] == 0 ? LM_TYPE_F32 : LM_TYPE_F16};
    if (!rd(lf->f, ne, (size_t)h[0] * sizeof(int32_t)) || !rd(lf->f, t.name, (size_t)h[1]))
        return fail(err, es, LM_ERR_CORRUPT, "truncated tensor header at offset %llu", (unsigned long long)pos);
    t.name[h[1]] = 0;
    if (strlen(t.name) != (size_t)h[1])
        return fail(err, es, LM_ERR_CORRUPT, "tensor name at offset %llu holds a NUL byte", (unsigned long long)pos);
    const char *suffix = t.name + h[1] - LORA_SUFFIX_LEN;
    if (strcmp(suffix, ".loraA") && strcmp(suffix, ".loraB"))
        return fail(err, es, LM_ERR_CORRUPT, "'%s' is not a lora tensor (.loraA / .loraB)", t.name);
    if (ne[0] <= 0 || ne[1] <= 0)
        return fail(err, es, LM_ERR_CORRUPT, "tensor '%s' has dimensions %d x %d", t.name, ne[0], ne[1]);
    t.ne[0] = ne[0];
    t.ne[1] = ne[1];
    uint64_t end = pos + 12 + 4 * (uint64_t)h[0] + (uint64_t)h[1];
    uint64_t n_elem = (uint64_t)ne[0] * (uint64_t)ne[1]; /* < 2^62 */
    t.offset = (end + 31) & ~(uint64_t)31;
    if (n_elem > lf->size || t.offset > lf->size || (t.size = n_elem * lm_type_size(t.type)) > lf->size - t.offset)
        return fail(err, es, LM_ERR_CORRUPT, "data of tensor '%s' (%d x %d) runs past the end of the file", t.name,
                    ne[0], ne[1]);
    if (!grow_table(lf))
        return fail(err, es, LM_ERR_NOMEM, "out of memory");
    uint32_t *slot = index_slot(lf, t.name);
    if (*slot)
        return fail(err, es, LM_ERR_CORRUPT, "tensor '%s' appears twice", t.name);
    lf->t[lf->n++] = t;
    *slot = (uint32_t)lf->n;
    if (fseeko(lf->f, (off_t)(t.offset + t.size), SEEK_SET) != 0)
        return fail(err, es, LM_ERR_IO, "cannot seek in the adapter file");
    return LM_OK;
}

static lm_status read_header(struct lora_file *lf, const char *path, char *err, size_t es)
{
    lf->f = fopen(path, "rb");
    if (!lf->f)
        return fail(err, es, LM_ERR_IO, "cannot open %s", path);
    off_t size = -1;
    if (fseeko(lf->f, 0, SEEK_END) == 0)
        size = ftello(lf->f);
    if (size < 0 || fseeko(lf->f, 0, SEEK_SET) != 0)
        return fail(err, es, LM_ERR_IO, "cannot read %s", path);
    lf->size = (uint64_t)size;
    uint32_t h[4];
    if (!rd(lf->f, h, sizeof h))
        return fail(err, es, LM_ERR_CORRUPT, "%s is too short for a LoRA header", path);
    if (h[0] != LORA_MAGIC)
        return fail(err, es, LM_ERR_CORRUPT, "bad file magic 0x%08x (not a 'ggla' LoRA adapter)", h[0]);
    if (h[1] != LORA_VERSION)
        return fail(err, es, LM_ERR_CORRUPT, "unsupported LoRA file version %u", h[1]);
    lf->r = (int32_t)h[2];
    lf->alpha = (int32_t)h[3];
    if (lf->r <= 0)
        return fail(err, es, LM_ERR_CORRUPT, "LoRA rank r = %d", lf->r);
    lm_status st = LM_OK;
    for (uint64_t pos = sizeof h; !st && pos < lf->size;) {
        st = read_tensor(lf, pos, err, es);
        if (!st)
            pos = lf->t[lf->n - 1].offset + lf->t[lf->n - 1].size;
    }
    return st;
}

/* Check that weight w (or the base file's tensor) can take the pair. */
static lm_status check_pair(const struct lm_model *m, struct lora_pair *p, const struct lm_gguf *base,
                            const char *wname, char *err, size_t es)
{
    const struct lm_tensor *w = p->w;
    if (p->a->ne[0] != p->b->ne[0] || w->ne[2] != 1 || w->ne[3] != 1 || w->ne[0] != p->a->ne[1] ||
        w->ne[1] != p->b->ne[1])
        return fail(err, es, LM_ERR_SHAPE,
                    "'%s' [%lld, %lld] does not fit A [%lld, %lld] and B [%lld, %lld]; is the adapter for this model?",
                    wname, (long long)w->ne[0], (long long)w->ne[1], (long long)p->a->ne[0], (long long)p->a->ne[1],
                    (long long)p->b->ne[0], (long long)p->b->ne[1]);
    const struct lm_quant_traits *qt = lm_quant_traits(w->type);
    const bool readable = w->data || lm_row_split_of(m, w); /* whole, or in row slices */
    if (!readable || !lm_is_contiguous(w) || !qt->to_float || !qt->from_float || qt->needs_imatrix)
        return fail(err, es, LM_ERR_UNSUPPORTED, "weight '%s' of type %s cannot be updated", wname,
                    lm_type_name(w->type));
    if (!base)
        return LM_OK;
    p->base = lm_gguf_find_tensor(base, wname);
    if (p->base < 0)
        return fail(err, es, LM_ERR_NOT_FOUND, "tensor '%s' not found in the base model", wname);
    const struct lm_gguf_tensor_info *ti = lm_gguf_tensor_info(base, p->base);
    if (ti->ne[0] != w->ne[0] || ti->ne[1] != w->ne[1] || ti->ne[2] != 1 || ti->ne[3] != 1)
        return fail(err, es, LM_ERR_SHAPE, "tensor '%s' of the base model has another shape", wname);
    if (!lm_quant_traits(ti->type)->to_float)
        return fail(err, es, LM_ERR_UNSUPPORTED, "tensor '%s' of the base model has type %s", wname,
                    lm_type_name(ti->type));
    return LM_OK;
}

/* Pair the tensors and match each pair with a weight. */
static lm_status match_pairs(struct lora_file *lf, struct lm_model *m, const struct lm_gguf *base, char *err,
                             size_t es)
{
    lf->pairs = calloc(lf->n ? lf->n : 1, sizeof *lf->pairs);
    if (!lf->pairs)
        return fail(err, es, LM_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < lf->n; i++) {
        struct lora_tensor *a = &lf->t[i];
        size_t len = strlen(a->name) - LORA_SUFFIX_LEN;
        if (strcmp(a->name + len, ".loraA"))
            continue;
        char wname[LORA_MAX_NAME], bname[LORA_MAX_NAME];
        memcpy(wname, a->name, len);
        wname[len] = 0;
        memcpy(bname, a->name, len);
        memcpy(bname + len, ".loraB", LORA_SUFFIX_LEN + 1);
        struct lora_tensor *b = find_tensor(lf, bname);
        if (!b)
            return fail(err, es, LM_ERR_CORRUPT, "'%s' has no matching '%s'", a->name, bname);
        a->paired = true;
        b->paired = true;
        struct lora_pair *p = &lf->pairs[lf->n_pairs++];
        *p = (struct lora_pair){.a = a, .b = b, .base = -1};
        p->w = m->ctx ? lm_ctx_get_tensor(m->ctx, wname) : NULL;
        if (!p->w)
            return fail(err, es, LM_ERR_NOT_FOUND, "the model has no tensor '%s'", wname);
        lm_status st = check_pair(m, p, base, wname, err, es);
        if (st)
            return st;
    }
    for (size_t i = 0; i < lf->n; i++)
        if (!lf->t[i].paired)
            return fail(err, es, LM_ERR_CORRUPT, "'%s' has no matching .loraA", lf->t[i].name);
    return LM_OK;
}

/* ---- applying ---- */

struct apply_job {
    const float *a, *b;   /* A [n_in][r], B [n_out][r] */
    int64_t r, n_in;
    float scaling;
    const uint8_t *src;   /* rows to add the delta to */
    enum lm_type src_type;
    uint8_t *dst;         /* the weight's rows */
    enum lm_type dst_type;
    int64_t row0, row1;
    bool ok;
};

static void *apply_rows(void *arg)
{
    struct apply_job *j = arg;
    float *row = malloc((size_t)j->n_in * sizeof *row);
    j->ok = row != NULL;
    size_t src_row = lm_row_size(j->src_type, j->n_in), dst_row = lm_row_size(j->dst_type, j->n_in);
    lm_to_float_fn to_float = lm_quant_traits(j->src_type)->to_float;
    lm_from_float_fn from_float = lm_quant_traits(j->dst_type)->from_float;
    for (int64_t r = j->row0; j->ok && r < j->row1; r++) {
        to_float(j->src + (size_t)r * src_row, row, j->n_in);
        const float *br = j->b + (size_t)r * (size_t)j->r;
        for (int64_t i = 0; i < j->n_in; i++) {
            const float *ai = j->a + (size_t)i * (size_t)j->r;
            double s = 0.0;
            for (int64_t k = 0; k < j->r; k++)
                s += (double)ai[k] * (double)br[k];
            row[i] += (float)(s * (double)j->scaling);
        }
        from_float(row, j->dst + (size_t)r * dst_row, j->n_in);
    }
    free(row);
    return NULL;
}

/* Run the job's rows [0, n_out) on up to n_threads threads. */
static bool run_job(const struct apply_job *proto, int64_t n_out, int n_threads)
{
    struct apply_job jobs[LORA_MAX_THREADS];
    pthread_t tid[LORA_MAX_THREADS];
    bool started[LORA_MAX_THREADS] = {false};
    int nt = n_threads < 1 ? 1 : n_threads > LORA_MAX_THREADS ? LORA_MAX_THREADS : n_threads;
    if (nt > n_out)
        nt = (int)n_out;
    for (int t = 0; t < nt; t++) {
        jobs[t] = *proto;
        jobs[t].row0 = n_out * t / nt;
        jobs[t].row1 = n_out * (t + 1) / nt;
        if (t > 0)
            started[t] = pthread_create(&tid[t], NULL, apply_rows, &jobs[t]) == 0;
    }
    apply_rows(&jobs[0]);
    bool ok = jobs[0].ok;
    for (int t = 1; t < nt; t++) {
        if (started[t])
            pthread_join(tid[t], NULL);
        else
            apply_rows(&jobs[t]); /* no thread: do its rows here */
        ok = ok && jobs[t].ok;
    }
    return ok;
}

/* Read a lora tensor as floats (malloc'd). */
static float *load_floats(FILE *f, const struct lora_tensor *t)
{
    size_t n = (size_t)(t->ne[0] * t->ne[1]);
    float *out = malloc(n * sizeof *out);
    void *raw = t->type == LM_TYPE_F32 ? (void *)out : malloc(n * sizeof(lm_fp16));
    bool ok = out && raw && read_at(f, t->offset, raw, (size_t)t->size);
    if (ok && t->type == LM_TYPE_F16) {
        const lm_fp16 *h = raw;
        for (size_t i = 0; i < n; i++)
            out[i] = lm_fp16_to_fp32(h[i]);
    }
    if (raw != out)
        free(raw);
    if (!ok) {
        free(out);
        out = NULL;
    }
    return out;
}

/* Read-modify-write of one weight through its buffers (lm_weight_get/set),
 * so weights kept in a backend layout (the CPU's repacked GEMM layout) or
 * cut into row slices are seen and written as plain rows. */
static lm_status apply_pair(const struct lm_model *m, const struct lora_file *lf, const struct lora_pair *p,
                            const struct lm_gguf *base, FILE *fbase, float scaling, int n_threads, char *err,
                            size_t es)
{
    float *a = load_floats(lf->f, p->a), *b = load_floats(lf->f, p->b);
    size_t nbytes = lm_nbytes(p->w);
    uint8_t *src = NULL, *plain = malloc(nbytes);
    lm_status st = (a && b && plain) ? LM_OK : fail(err, es, LM_ERR_IO, "cannot read '%s' / '%s'", p->a->name,
                                                    p->b->name);
    if (!st && lm_weight_get(m, p->w, plain))
        st = fail(err, es, LM_ERR_IO, "cannot read weight '%s'", p->w->name);
    struct apply_job job = {
        .a = a, .b = b, .r = p->a->ne[0], .n_in = p->w->ne[0], .scaling = scaling,
        .src = plain, .src_type = p->w->type, .dst = plain, .dst_type = p->w->type,
    };
    if (!st && p->base >= 0) {
        const struct lm_gguf_tensor_info *ti = lm_gguf_tensor_info(base, p->base);
        src = malloc((size_t)ti->size);
        if (!src || !read_at(fbase, ti->offset, src, (size_t)ti->size))
            st = fail(err, es, LM_ERR_IO, "cannot read '%s' from the base model", ti->name);
        job.src = src;
        job.src_type = ti->type;
    }
    if (!st && !run_job(&job, p->w->ne[1], n_threads))
        st = fail(err, es, LM_ERR_NOMEM, "out of memory applying '%s'", p->a->name);
    if (!st && lm_weight_set(m, p->w, plain))
        st = fail(err, es, LM_ERR_IO, "cannot write weight '%s'", p->w->name);
    free(a);
    free(b);
    free(src);
    free(plain);
    return st;
}

lm_status lm_lora_apply(struct lm_model *m, const char *path_lora, float scale, const char *path_base, int n_threads,
                        char *err, size_t err_size)
{
    if (!m || !path_lora)
        return fail(err, err_size, LM_ERR_INVALID_ARG, "no model or no adapter path");
    int64_t t0 = lm_time_us();
    struct lora_file lf = {0};
    struct lm_gguf *base = NULL;
    FILE *fbase = NULL;
    lm_status st = read_header(&lf, path_lora, err, err_size);
    if (!st && path_base) {
        char gerr[200] = "";
        st = lm_gguf_open(path_base, &base, gerr, sizeof gerr);
        fbase = st ? NULL : fopen(path_base, "rb");
        if (st || !fbase)
            st = fail(err, err_size, st ? st : LM_ERR_IO, "cannot read the base model %s: %s", path_base, gerr);
    }
    if (!st)
        st = match_pairs(&lf, m, base, err, err_size);
    float scaling = scale * (float)lf.alpha / (float)lf.r; /* as b1892 */
    if (!st) {
        LM_LOG_INF("lora: r = %d, alpha = %d, scaling = %.2f, %zu weights\n", lf.r, lf.alpha, (double)scaling,
                   lf.n_pairs);
        for (size_t i = 0; i < lf.n_pairs; i++)
            if (lm_type_traits(lf.pairs[i].w->type)->is_quantized && !base) {
                LM_LOG_WRN("lora: applying an adapter to quantized weights loses quality; a F16/F32 base model "
                           "(path_base_model) is better\n");
                break;
            }
    }
    for (size_t i = 0; !st && i < lf.n_pairs; i++)
        st = apply_pair(m, &lf, &lf.pairs[i], base, fbase, scaling, n_threads, err, err_size);
    if (!st)
        LM_LOG_INF("lora: done (%.2f ms)\n", (double)(lm_time_us() - t0) / 1000.0);
    if (fbase)
        fclose(fbase);
    lm_gguf_close(base);
    if (lf.f)
        fclose(lf.f);
    free(lf.t);
    free(lf.index);
    free(lf.pairs);
    return st;
}
