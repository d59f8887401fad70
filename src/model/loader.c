/* loader.c - load a GGUF model: hyperparameters, vocabulary, weights.
 *
 * Order: open (gguf reader checks the container) -> architecture and common
 * hyperparameters (checked for sanity: they size every buffer later) ->
 * vocabulary -> the architecture declares its weights (lm_ld_tensor checks
 * names and shapes against the file) -> every file tensor must have been used
 * -> data placed by the device plan (placement.h), one pass per buffer type:
 * with mmap, tensors of the plain host type point into the mapped file; every
 * other tensor is allocated in a buffer of its type and written (read into
 * host memory directly, else through lm_tensor_set, which repacks or
 * uploads). Split MoE experts are gathered into 3-D tensors in an owned
 * buffer either way; the row slices of a weight the plan cuts over several
 * devices (model/row_split.h) are filled from their byte ranges of the file.
 */
#include "model/loader.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sched/alloc.h"
#include "core/log.h"
#include "core/time.h"
#include "model/mapping.h"
#include "model/placement.h"
#include "model/quantize.h"
#include "model/row_split.h"
#include "vocab/vocab.h"

#define MAX_GATHER 64

struct gather { /* a 3-D expert tensor built from split tensors */
    struct lm_tensor *t;
    int64_t src[MAX_GATHER]; /* file tensor indices, one per expert */
    int n;
};

struct lm_loader {
    const char *path;
    struct lm_gguf *g;
    const struct lm_model_params *params;
    struct lm_model *m;
    char arch[32];
    struct lm_tensor **file_tensor; /* per file tensor: the model tensor using it, or NULL */
    struct gather *gathers;
    int n_gathers, cap_gathers;
    /* declare mode (lm_model_declare): metadata only; tensors are listed here */
    bool declaring;
    bool (*want)(const char *name, void *user);
    void *want_user;
    struct lm_decl_tensor *decl;
    int n_decl, cap_decl;
    lm_status status;
    char err[256];
    /* load progress: bytes of file tensors placed so far, of all of them */
    uint64_t bytes_done, bytes_total;
};

lm_status lm_ld_fail(struct lm_loader *ld, lm_status st, const char *fmt, ...)
{
    if (ld->status == LM_OK) {
        ld->status = st;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(ld->err, sizeof ld->err, fmt, ap);
        va_end(ap);
    }
    return st;
}

lm_status lm_ld_status(const struct lm_loader *ld) { return ld->status; }

/* ---- keys ---- */

static const struct lm_kv_override *find_override(struct lm_loader *ld, const char *key)
{
    const struct lm_kv_override *o = ld->params->kv_overrides;
    for (; o && o->key[0]; o++)
        if (!strcmp(o->key, key))
            return o;
    return NULL;
}

/* Expand the "%s" arch prefix of a key and find it. */
static int64_t find_key(struct lm_loader *ld, const char *fmt, char *key, size_t key_size)
{
    snprintf(key, key_size, fmt, ld->arch);
    return lm_gguf_find_key(ld->g, key);
}

static lm_status missing_or_ok(struct lm_loader *ld, const char *key, bool required)
{
    if (required)
        return lm_ld_fail(ld, LM_ERR_CORRUPT, "required key %s is missing", key);
    return LM_OK;
}

/* An override's value into out (a uint32_t, float or bool, by tag); false
 * when the override has another tag or does not fit. */
static bool override_value(const struct lm_kv_override *o, enum lm_kv_override_type tag, void *out)
{
    if (o->tag != tag)
        return false;
    switch (tag) {
    case LM_KV_OVERRIDE_INT:
        if (o->int_value < 0 || o->int_value > UINT32_MAX)
            return false;
        *(uint32_t *)out = (uint32_t)o->int_value;
        return true;
    case LM_KV_OVERRIDE_FLOAT:
        *(float *)out = (float)o->float_value;
        return true;
    default:
        *(bool *)out = o->bool_value;
        return true;
    }
}

/* The typed key getters: the override of the key if there is one, else the
 * file's value, as a uint32_t (tag INT), float (FLOAT) or bool (BOOL). */
static lm_status typed_key(struct lm_loader *ld, const char *fmt, enum lm_kv_override_type tag, void *out,
                           bool required)
{
    static const char *const what[] = {
        [LM_KV_OVERRIDE_INT] = "an unsigned 32-bit integer",
        [LM_KV_OVERRIDE_FLOAT] = "a float",
        [LM_KV_OVERRIDE_BOOL] = "a bool",
    };
    char key[160];
    int64_t i = find_key(ld, fmt, key, sizeof key);
    const struct lm_kv_override *o = find_override(ld, key);
    if (o) {
        if (!override_value(o, tag, out))
            return lm_ld_fail(ld, LM_ERR_INVALID_ARG, "override %s: expected %s", key, what[tag]);
        return LM_OK;
    }
    if (i < 0)
        return missing_or_ok(ld, key, required);
    lm_status st = tag == LM_KV_OVERRIDE_INT     ? lm_gguf_get_u32(ld->g, i, out)
                   : tag == LM_KV_OVERRIDE_FLOAT ? lm_gguf_get_f32(ld->g, i, out)
                                                 : lm_gguf_get_bool(ld->g, i, out);
    if (st)
        return lm_ld_fail(ld, LM_ERR_CORRUPT, "key %s: expected %s", key, what[tag]);
    return LM_OK;
}

lm_status lm_ld_u32(struct lm_loader *ld, const char *fmt, uint32_t *out, bool required)
{
    return typed_key(ld, fmt, LM_KV_OVERRIDE_INT, out, required);
}

lm_status lm_ld_f32(struct lm_loader *ld, const char *fmt, float *out, bool required)
{
    return typed_key(ld, fmt, LM_KV_OVERRIDE_FLOAT, out, required);
}

lm_status lm_ld_bool(struct lm_loader *ld, const char *fmt, bool *out, bool required)
{
    return typed_key(ld, fmt, LM_KV_OVERRIDE_BOOL, out, required);
}

lm_status lm_ld_str(struct lm_loader *ld, const char *fmt, char *buf, size_t size, bool required)
{
    char key[160];
    int64_t i = find_key(ld, fmt, key, sizeof key);
    if (i < 0)
        return missing_or_ok(ld, key, required);
    const char *s;
    size_t len;
    if (lm_gguf_get_str(ld->g, i, &s, &len))
        return lm_ld_fail(ld, LM_ERR_CORRUPT, "key %s: expected a string", key);
    snprintf(buf, size, "%s", s);
    return LM_OK;
}

/* ---- tensors ---- */

static struct lm_tensor *make_tensor(struct lm_loader *ld, enum lm_type type, int n_dims, const int64_t *ne,
                                     const char *name)
{
    struct lm_tensor *t = lm_new_tensor(ld->m->ctx, type, n_dims, ne);
    if (!t) {
        lm_ld_fail(ld, LM_ERR_NOMEM, "tensor %s: %s", name, lm_ctx_error(ld->m->ctx));
        return NULL;
    }
    lm_set_name(t, name);
    return t;
}

static bool dims_match(const struct lm_gguf_tensor_info *ti, int n_dims, const int64_t *ne)
{
    for (int d = 0; d < 4; d++) {
        int64_t want = d < n_dims ? ne[d] : 1;
        if (ti->ne[d] != want)
            return false;
    }
    return true;
}

/* Declare mode: list the tensor (when required or wanted) and give the
 * architecture a tensor to hold. */
static struct lm_tensor *declare(struct lm_loader *ld, int flags, int n_dims, const int64_t *ne, const char *name)
{
    struct lm_tensor *t = lm_ctx_get_tensor(ld->m->ctx, name);
    if (t) {
        if (flags & LM_LD_DUPLICATE)
            return t;
        lm_ld_fail(ld, LM_ERR_INVALID_ARG, "tensor '%s' is declared twice", name);
        return NULL;
    }
    if ((flags & LM_LD_OPTIONAL) && !(ld->want && ld->want(name, ld->want_user)))
        return NULL;
    if (ld->n_decl == ld->cap_decl) {
        int nc = ld->cap_decl ? 2 * ld->cap_decl : 64;
        struct lm_decl_tensor *nd = realloc(ld->decl, (size_t)nc * sizeof *nd);
        if (!nd) {
            lm_ld_fail(ld, LM_ERR_NOMEM, "out of memory");
            return NULL;
        }
        ld->decl = nd;
        ld->cap_decl = nc;
    }
    struct lm_decl_tensor *d = &ld->decl[ld->n_decl++];
    snprintf(d->name, sizeof d->name, "%s", name);
    d->n_dims = n_dims;
    for (int i = 0; i < 4; i++)
        d->ne[i] = i < n_dims ? ne[i] : 1;
    return make_tensor(ld, LM_TYPE_F32, n_dims, ne, name);
}

struct lm_tensor *lm_ld_tensor(struct lm_loader *ld, int flags, int n_dims, const int64_t *ne, const char *fmt, ...)
{
    if (ld->status)
        return NULL;
    char name[LM_MAX_NAME];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    if (ld->declaring)
        return declare(ld, flags, n_dims, ne, name);
    int64_t i = lm_gguf_find_tensor(ld->g, name);
    if (i < 0) {
        if (!(flags & LM_LD_OPTIONAL))
            lm_ld_fail(ld, LM_ERR_CORRUPT, "tensor '%s' not found", name);
        return NULL;
    }
    const struct lm_gguf_tensor_info *ti = lm_gguf_tensor_info(ld->g, i);
    if (!dims_match(ti, n_dims, ne)) {
        lm_ld_fail(ld, LM_ERR_CORRUPT,
                   "tensor '%s' has shape [%lld, %lld, %lld, %lld], expected [%lld, %lld, %lld]", name,
                   (long long)ti->ne[0], (long long)ti->ne[1], (long long)ti->ne[2], (long long)ti->ne[3],
                   (long long)ne[0], (long long)(n_dims > 1 ? ne[1] : 1), (long long)(n_dims > 2 ? ne[2] : 1));
        return NULL;
    }
    if (n_dims == 1 && ti->type != LM_TYPE_F32) { /* norms and biases: every op applying them takes F32 */
        lm_ld_fail(ld, LM_ERR_UNSUPPORTED, "tensor '%s' is %s: norms and biases must be F32", name,
                   lm_type_name(ti->type));
        return NULL;
    }
    if (ld->file_tensor[i]) {
        if (flags & LM_LD_DUPLICATE)
            return ld->file_tensor[i];
        lm_ld_fail(ld, LM_ERR_CORRUPT, "tensor '%s' is used twice", name);
        return NULL;
    }
    struct lm_tensor *t = make_tensor(ld, ti->type, n_dims, ne, name);
    ld->file_tensor[i] = t;
    return t;
}

struct lm_tensor *lm_ld_weight(struct lm_loader *ld, int flags, enum lm_tn tn, int il, int n_dims, const int64_t *ne)
{
    char name[LM_MAX_NAME];
    return lm_ld_tensor(ld, flags, n_dims, ne, "%s", lm_tn_format(name, sizeof name, tn, il, "weight"));
}

struct lm_tensor *lm_ld_bias(struct lm_loader *ld, int flags, enum lm_tn tn, int il, int n_dims, const int64_t *ne)
{
    char name[LM_MAX_NAME];
    return lm_ld_tensor(ld, flags, n_dims, ne, "%s", lm_tn_format(name, sizeof name, tn, il, "bias"));
}

struct lm_tensor *lm_ld_output(struct lm_loader *ld, const struct lm_hparams *hp)
{
    struct lm_tensor *t = lm_ld_weight(ld, LM_LD_OPTIONAL, LM_TN_OUTPUT, 0, LM_NE2(hp->n_embd, hp->n_vocab));
    if (!t) /* tied embeddings */
        t = lm_ld_weight(ld, LM_LD_DUPLICATE, LM_TN_TOKEN_EMBD, 0, LM_NE2(hp->n_embd, hp->n_vocab));
    return t;
}

struct lm_tensor *lm_ld_experts(struct lm_loader *ld, int64_t ne0, int64_t ne1, int64_t n_expert, enum lm_tn tn,
                                int il)
{
    if (ld->status)
        return NULL;
    char base[LM_MAX_NAME], name[LM_MAX_NAME + 32];
    snprintf(base, sizeof base, "blk.%d.%s", il, lm_tn_base(tn));
    snprintf(name, sizeof name, "%s_exps.weight", base);
    if (ld->declaring || lm_gguf_find_tensor(ld->g, name) >= 0)
        return lm_ld_tensor(ld, LM_LD_REQUIRED, LM_NE3(ne0, ne1, n_expert), "%s", name);
    if (n_expert > MAX_GATHER) {
        lm_ld_fail(ld, LM_ERR_UNSUPPORTED, "%lld split experts (max %d)", (long long)n_expert, MAX_GATHER);
        return NULL;
    }
    struct gather gt = {.n = (int)n_expert};
    enum lm_type type = LM_TYPE_COUNT;
    for (int x = 0; x < n_expert; x++) {
        snprintf(name, sizeof name, "%s.%d.weight", base, x);
        int64_t i = lm_gguf_find_tensor(ld->g, name);
        if (i < 0) {
            lm_ld_fail(ld, LM_ERR_CORRUPT, "expert tensor '%s' not found", name);
            return NULL;
        }
        const struct lm_gguf_tensor_info *ti = lm_gguf_tensor_info(ld->g, i);
        if (!dims_match(ti, 2, (const int64_t[]){ne0, ne1}) || (type != LM_TYPE_COUNT && ti->type != type) ||
            ld->file_tensor[i]) {
            lm_ld_fail(ld, LM_ERR_CORRUPT, "expert tensor '%s' has the wrong shape or type, or is reused", name);
            return NULL;
        }
        type = ti->type;
        gt.src[x] = i;
    }
    snprintf(name, sizeof name, "%s_exps.weight", base);
    gt.t = make_tensor(ld, type, 3, (const int64_t[]){ne0, ne1, n_expert}, name);
    if (!gt.t)
        return NULL;
    for (int x = 0; x < n_expert; x++)
        ld->file_tensor[gt.src[x]] = gt.t;
    if (ld->n_gathers == ld->cap_gathers) {
        int nc = ld->cap_gathers ? 2 * ld->cap_gathers : 16;
        struct gather *ng = realloc(ld->gathers, (size_t)nc * sizeof *ng);
        if (!ng) {
            lm_ld_fail(ld, LM_ERR_NOMEM, "out of memory");
            return NULL;
        }
        ld->gathers = ng;
        ld->cap_gathers = nc;
    }
    ld->gathers[ld->n_gathers++] = gt;
    return gt.t;
}

/* ---- hyperparameters ---- */

/* Read the keys every architecture shares and check them for sanity. */
static lm_status read_hparams(struct lm_loader *ld, struct lm_hparams *hp)
{
    memset(hp, 0, sizeof *hp);
    hp->ftype_guessed = true;
    hp->rope_freq_base_train = 10000.0f;
    hp->rope_freq_scale_train = 1.0f;
    hp->f_norm_eps = 1e-5f;
    hp->f_norm_rms_eps = 1e-5f;
    lm_ld_u32(ld, "general.file_type", &hp->ftype, false);
    hp->ftype_guessed = lm_gguf_find_key(ld->g, "general.file_type") < 0 && !find_override(ld, "general.file_type");
    lm_ld_u32(ld, "%s.context_length", &hp->n_ctx_train, true);
    lm_ld_u32(ld, "%s.embedding_length", &hp->n_embd, true);
    lm_ld_u32(ld, "%s.feed_forward_length", &hp->n_ff, true);
    lm_ld_u32(ld, "%s.block_count", &hp->n_layer, true);
    lm_ld_u32(ld, "%s.attention.head_count", &hp->n_head, true);
    if (ld->status)
        return ld->status;
    hp->n_head_kv = hp->n_head;
    lm_ld_u32(ld, "%s.attention.head_count_kv", &hp->n_head_kv, false);
    lm_ld_u32(ld, "%s.expert_count", &hp->n_expert, false);
    lm_ld_u32(ld, "%s.expert_used_count", &hp->n_expert_used, false);
    lm_ld_f32(ld, "%s.attention.layer_norm_epsilon", &hp->f_norm_eps, false);
    lm_ld_f32(ld, "%s.attention.layer_norm_rms_epsilon", &hp->f_norm_rms_eps, false);
    lm_ld_f32(ld, "%s.attention.clamp_kqv", &hp->f_clamp_kqv, false);
    lm_ld_f32(ld, "%s.attention.max_alibi_bias", &hp->f_max_alibi_bias, false);
    lm_ld_f32(ld, "%s.rope.freq_base", &hp->rope_freq_base_train, false);
    float scale = 0.0f;
    lm_ld_f32(ld, "%s.rope.scale_linear", &scale, false);
    lm_ld_f32(ld, "%s.rope.scaling.factor", &scale, false);
    hp->rope_freq_scale_train = scale == 0.0f ? 1.0f : 1.0f / scale;
    char stype[32] = "";
    lm_ld_str(ld, "%s.rope.scaling.type", stype, sizeof stype, false);
    hp->rope_scaling_type_train = !strcmp(stype, "yarn")     ? LM_ROPE_SCALING_YARN
                                  : !strcmp(stype, "linear") ? LM_ROPE_SCALING_LINEAR
                                  : !strcmp(stype, "none")   ? LM_ROPE_SCALING_NONE
                                  : scale != 0.0f            ? LM_ROPE_SCALING_LINEAR
                                                             : LM_ROPE_SCALING_NONE;
    hp->n_yarn_orig_ctx = hp->n_ctx_train;
    lm_ld_u32(ld, "%s.rope.scaling.original_context_length", &hp->n_yarn_orig_ctx, false);
    lm_ld_bool(ld, "%s.rope.scaling.finetuned", &hp->rope_finetuned, false);
    if (ld->status)
        return ld->status;

    if (hp->n_embd == 0 || hp->n_embd > (1u << 20) || hp->n_layer == 0 || hp->n_layer > LM_MAX_LAYERS ||
        hp->n_head == 0 || hp->n_head > 4096 || hp->n_head_kv == 0 || hp->n_head % hp->n_head_kv ||
        hp->n_ff > (1u << 24) || hp->n_ctx_train == 0 || hp->n_expert > LM_MAX_EXPERTS ||
        hp->n_expert_used > hp->n_expert || (hp->n_expert && !hp->n_expert_used))
        return lm_ld_fail(ld, LM_ERR_CORRUPT,
                          "implausible hyperparameters: n_embd %u n_layer %u n_head %u n_head_kv %u n_ff %u "
                          "n_ctx_train %u n_expert %u/%u",
                          hp->n_embd, hp->n_layer, hp->n_head, hp->n_head_kv, hp->n_ff, hp->n_ctx_train,
                          hp->n_expert_used, hp->n_expert);
    if (!(hp->rope_freq_base_train > 0.0f) || !(hp->rope_freq_scale_train > 0.0f) || !(hp->f_norm_eps >= 0.0f) ||
        !(hp->f_norm_rms_eps >= 0.0f) || !(hp->f_max_alibi_bias >= 0.0f))
        return lm_ld_fail(ld, LM_ERR_CORRUPT, "implausible rope/norm parameters");
    hp->n_embd_head_k = hp->n_embd / hp->n_head;
    hp->n_embd_head_v = hp->n_embd / hp->n_head;
    lm_ld_u32(ld, "%s.attention.key_length", &hp->n_embd_head_k, false);
    lm_ld_u32(ld, "%s.attention.value_length", &hp->n_embd_head_v, false);
    hp->n_rot = hp->n_embd_head_k;
    lm_ld_u32(ld, "%s.rope.dimension_count", &hp->n_rot, false);
    if (hp->n_embd_head_k == 0 || hp->n_embd_head_k > 4096 || hp->n_embd_head_v == 0 || hp->n_embd_head_v > 4096 ||
        hp->n_rot > hp->n_embd_head_k || hp->n_rot % 2)
        return lm_ld_fail(ld, LM_ERR_CORRUPT, "implausible head sizes: k %u v %u rot %u", hp->n_embd_head_k,
                          hp->n_embd_head_v, hp->n_rot);
    return ld->status;
}

/* ---- data placement ---- */

static lm_status read_range(FILE *f, uint64_t offset, void *dst, size_t size)
{
    if (fseeko(f, (off_t)offset, SEEK_SET) != 0 || fread(dst, 1, size, f) != size)
        return LM_ERR_IO;
    return LM_OK;
}

static bool report(struct lm_loader *ld, float p)
{
    return !ld->params->progress || ld->params->progress(p, ld->params->progress_user);
}

/* Count `bytes` of tensor data as placed and report the fraction done (below
 * 1: load_weights reports 1.0 once, at the very end). False: abort. */
static bool advance(struct lm_loader *ld, uint64_t bytes)
{
    ld->bytes_done += bytes;
    if (ld->bytes_total == 0 || ld->bytes_done >= ld->bytes_total)
        return true;
    return report(ld, (float)((double)ld->bytes_done / (double)ld->bytes_total));
}

static lm_status open_mapping(struct lm_loader *ld)
{
    struct lm_model *m = ld->m;
    lm_status st = lm_mapping_open(ld->path, &m->mapping);
    if (st)
        return lm_ld_fail(ld, st, "cannot map %s", ld->path);
    if (m->mapping->size < lm_gguf_file_size(ld->g))
        return lm_ld_fail(ld, LM_ERR_IO, "file changed while loading");
    return LM_OK;
}

/* A weight's buffer type: the plan's choice (placement.h); NULL for a
 * weight cut into row slices (each slice has its own). */
static lm_buft weight_buft(const struct lm_loader *ld, const struct lm_tensor *t)
{
    return lm_row_split_of(ld->m, t) ? NULL : lm_placement_weight_buft(ld->m->place, ld->m, t);
}

/* True for file tensor i when it is a model tensor of its own (not a slice
 * of a gathered expert tensor) placed in buft. */
static bool file_tensor_in(const struct lm_loader *ld, int64_t i, lm_buft buft)
{
    const struct lm_tensor *t = ld->file_tensor[i];
    return t && !t->data && !strcmp(t->name, lm_gguf_tensor_info(ld->g, i)->name) && weight_buft(ld, t) == buft;
}

static lm_status add_buffer(struct lm_loader *ld, struct lm_buffer *buf)
{
    struct lm_model *m = ld->m;
    if (m->n_bufs == (int)(sizeof m->bufs / sizeof m->bufs[0])) {
        lm_buffer_free(buf);
        return lm_ld_fail(ld, LM_ERR_FULL, "too many weight buffers");
    }
    lm_buffer_set_usage(buf, LM_BUFFER_USAGE_WEIGHTS);
    m->bufs[m->n_bufs++] = buf;
    return LM_OK;
}

/* Point the file tensors of the plain host buffer type into the mapping. */
static lm_status place_mapped(struct lm_loader *ld)
{
    struct lm_model *m = ld->m;
    int64_t n = lm_gguf_n_tensors(ld->g), n_map = 0;
    for (int64_t i = 0; i < n; i++)
        n_map += file_tensor_in(ld, i, lm_host_buft());
    if (n_map == 0)
        return LM_OK;
    struct lm_buffer *buf = NULL;
    lm_status st = lm_buffer_from_host_ptr(lm_host_buft(), m->mapping->addr, m->mapping->size, &buf);
    if (st)
        return lm_ld_fail(ld, st, "cannot wrap the mapping");
    if ((st = add_buffer(ld, buf)))
        return st;
    uint64_t mapped = 0;
    for (int64_t i = 0; i < n && !st; i++) {
        const struct lm_gguf_tensor_info *ti = lm_gguf_tensor_info(ld->g, i);
        if (file_tensor_in(ld, i, lm_host_buft())) {
            st = lm_buffer_place_tensor(buf, ld->file_tensor[i], ti->offset);
            mapped += ti->size;
        }
    }
    if (st)
        return lm_ld_fail(ld, st, "cannot place tensors in the mapping");
    if (!advance(ld, mapped))
        return lm_ld_fail(ld, LM_ERR_ABORTED, "loading aborted by the progress callback");
    if (ld->params->use_mlock && lm_mapping_lock(m->mapping) == LM_OK)
        m->mlocked = true;
    return LM_OK;
}

/* size bytes at offset src of the file into [off, off + size) of t: straight
 * into host memory, else through lm_tensor_set (which repacks or uploads)
 * from the mapping or a read into *tmp. */
static lm_status fill(struct lm_loader *ld, FILE *f, uint64_t src, size_t size, struct lm_tensor *t, size_t off,
                      void **tmp)
{
    const struct lm_mapping *map = ld->m->mapping;
    lm_status st = LM_OK;
    if (lm_buffer_is_host(t->buffer)) {
        if (map)
            memcpy((uint8_t *)t->data + off, map->addr + src, size);
        else
            st = read_range(f, src, (uint8_t *)t->data + off, size);
    } else {
        const void *from = map ? (const void *)(map->addr + src) : NULL;
        if (!from) {
            void *nt = realloc(*tmp, size);
            st = nt ? read_range(f, src, nt, size) : LM_ERR_NOMEM;
            *tmp = nt ? nt : *tmp;
            from = *tmp;
        }
        if (!st)
            st = lm_tensor_set(t, from, off, size);
    }
    if (!st && !advance(ld, size))
        st = LM_ERR_ABORTED;
    return st;
}

/* File tensor i into t at off. */
static lm_status fill_tensor(struct lm_loader *ld, FILE *f, int64_t i, struct lm_tensor *t, size_t off, void **tmp)
{
    const struct lm_gguf_tensor_info *ti = lm_gguf_tensor_info(ld->g, i);
    return fill(ld, f, ti->offset, ti->size, t, off, tmp);
}

/* The slices of split weight rs (model/row_split.h) that sit in buf, each
 * from its rows' byte range of the weight's file tensor. */
static lm_status fill_slices(struct lm_loader *ld, FILE *f, const struct lm_row_split *rs, struct lm_buffer *buf,
                             void **tmp)
{
    int64_t i = lm_gguf_find_tensor(ld->g, rs->w->name);
    if (i < 0)
        return LM_ERR_NOT_FOUND;
    const uint64_t base = lm_gguf_tensor_info(ld->g, i)->offset;
    const size_t row = lm_row_size(rs->w->type, rs->w->ne[0]);
    lm_status st = LM_OK;
    for (int s = 0; s < rs->n && !st; s++)
        if (rs->part[s]->buffer == buf)
            st = fill(ld, f, base + (uint64_t)rs->first[s] * row, lm_nbytes(rs->part[s]), rs->part[s], 0, tmp);
    return st;
}

/* One tensor of device t_dev at *off of buf (NULL: only counted). */
static lm_status lay_one(lm_buft buft, struct lm_buffer *buf, struct lm_tensor *t, int t_dev, size_t *off, int *dev)
{
    lm_status st = buf ? lm_buffer_place_tensor(buf, t, *off) : LM_OK;
    const size_t align = lm_buft_alignment(buft);
    *off += (lm_buft_alloc_size(buft, t) + align - 1) / align * align;
    *dev = t_dev;
    return st;
}

/* buft's tensors still without data (the model's weights, then the row
 * slices) one after another: placed in buf, or with buf NULL only counted;
 * *size their total, *dev the device of the last (-1: none). */
static lm_status lay_out(struct lm_loader *ld, lm_buft buft, struct lm_buffer *buf, size_t *size, int *dev)
{
    struct lm_model *m = ld->m;
    lm_status st = LM_OK;
    *size = 0;
    *dev = -1;
    for (struct lm_tensor *t = lm_ctx_first_tensor(m->ctx); t && !st; t = lm_ctx_next_tensor(m->ctx, t))
        if (!t->data && weight_buft(ld, t) == buft)
            st = lay_one(buft, buf, t, lm_placement_weight_dev(m->place, m, t), size, dev);
    for (int k = 0; k < m->n_splits && !st; k++)
        for (int s = 0; s < m->splits[k].n && !st; s++)
            if (!m->splits[k].part[s]->data && lm_row_split_buft(m, &m->splits[k], s) == buft)
                st = lay_one(buft, buf, m->splits[k].part[s], m->splits[k].dev[s], size, dev);
    return st;
}

/* Allocate one buffer of buft for its weights still without data (file
 * tensors not mapped, gathered experts, row slices) and fill them. */
static lm_status place_owned(struct lm_loader *ld, lm_buft buft, FILE *f)
{
    struct lm_model *m = ld->m;
    int64_t n = lm_gguf_n_tensors(ld->g);
    size_t total = 0;
    int dev = -1;
    lay_out(ld, buft, NULL, &total, &dev);
    if (dev < 0)
        return LM_OK;
    struct lm_buffer *buf = NULL;
    lm_status st = lm_buft_alloc_buffer(buft, total, &buf);
    if (st)
        return lm_ld_fail(ld, st, "cannot allocate %zu bytes of %s for the weights", total, lm_buft_name(buft));
    if ((st = add_buffer(ld, buf)))
        return st;
    st = lay_out(ld, buft, buf, &total, &dev);
    if (st)
        return lm_ld_fail(ld, st, "cannot place the weights in %s", lm_buft_name(buft));
    void *tmp = NULL;
    for (int64_t i = 0; i < n && !st; i++) {
        struct lm_tensor *t = ld->file_tensor[i];
        if (t->buffer == buf && !strcmp(t->name, lm_gguf_tensor_info(ld->g, i)->name))
            st = fill_tensor(ld, f, i, t, 0, &tmp);
    }
    for (int k = 0; k < ld->n_gathers && !st; k++) {
        const struct gather *gt = &ld->gathers[k];
        size_t slice = lm_nbytes(gt->t) / (size_t)gt->n;
        for (int x = 0; x < gt->n && !st && gt->t->buffer == buf; x++)
            st = fill_tensor(ld, f, gt->src[x], gt->t, (size_t)x * slice, &tmp);
    }
    for (int k = 0; k < m->n_splits && !st; k++)
        st = fill_slices(ld, f, &m->splits[k], buf, &tmp);
    free(tmp);
    if (st)
        return lm_ld_fail(ld, st, st == LM_ERR_ABORTED ? "loading aborted by the progress callback"
                                                       : "cannot load the weights into %s", lm_buft_name(buft));
    /* host memory (plain or repacked) can be locked; a device's cannot */
    if (ld->params->use_mlock && dev == 0 && lm_mem_lock(lm_buffer_base(buf), lm_buffer_size(buf)) == LM_OK) {
        m->mlocked = true;
        m->bufs_locked |= 1u << (m->n_bufs - 1);
    }
    return LM_OK;
}

struct passes { /* the buffer types placed so far */
    lm_buft done[32];
    int n;
};

/* The pass of buffer type b for tensor t (no data yet) unless b had one. */
static lm_status pass_for(struct lm_loader *ld, struct passes *ps, lm_buft b, const struct lm_tensor *t, FILE *f)
{
    for (int k = 0; k < ps->n; k++)
        if (ps->done[k] == b)
            return LM_OK;
    if (!b || ps->n == (int)(sizeof ps->done / sizeof ps->done[0]))
        return lm_ld_fail(ld, LM_ERR_UNSUPPORTED, "no buffer type for tensor '%s'", t->name);
    ps->done[ps->n++] = b;
    return place_owned(ld, b, f);
}

/* The placement passes: the plan (and the row slices it asks for), then one
 * pass per buffer type (the plain host type first maps what it can), in
 * order of first use. */
static lm_status place_weights(struct lm_loader *ld)
{
    struct lm_model *m = ld->m;
    const struct lm_model_params *p = ld->params;
    struct lm_placement_params pp = {
        .n_gpu_layers = p->n_gpu_layers,
        .split_mode = (enum lm_split_mode)p->split_mode,
        .main_gpu = p->main_gpu,
        .tensor_split = p->tensor_split,
        .repack = p->repack,
    };
    m->place = calloc(1, sizeof *m->place);
    if (!m->place)
        return lm_ld_fail(ld, LM_ERR_NOMEM, "out of memory");
    lm_status st = lm_placement_plan(&pp, m->hp.n_layer, m->place);
    if (st == LM_ERR_NOT_FOUND)
        return lm_ld_fail(ld, st, "no CPU backend registered (call llama_backend_init first)");
    if (st)
        return lm_ld_fail(ld, st, "bad device placement (n_gpu_layers %d, split_mode %d, main_gpu %d)",
                          (int)p->n_gpu_layers, p->split_mode, (int)p->main_gpu);
    if ((st = lm_row_split_make(m)))
        return lm_ld_fail(ld, st, "cannot split the weights by rows");
    if (m->mapping && (st = place_mapped(ld)))
        return st;
    FILE *f = m->mapping ? NULL : fopen(ld->path, "rb");
    if (!m->mapping && !f)
        return lm_ld_fail(ld, LM_ERR_IO, "cannot open %s", ld->path);
    struct passes ps = {.n = 0};
    for (struct lm_tensor *t = lm_ctx_first_tensor(m->ctx); t && !st; t = lm_ctx_next_tensor(m->ctx, t))
        if (!t->data && !lm_row_split_of(m, t))
            st = pass_for(ld, &ps, weight_buft(ld, t), t, f);
    for (int k = 0; k < m->n_splits && !st; k++)
        for (int s = 0; s < m->splits[k].n && !st; s++)
            st = pass_for(ld, &ps, lm_row_split_buft(m, &m->splits[k], s), m->splits[k].part[s], f);
    if (f)
        fclose(f);
    return st;
}

/* The file type of a file that does not say: from the most common weight
 * type, as llama.cpp guesses it (hparams.ftype_guessed stays set; the type to
 * file type rule is lm_ftype_guess's). */
static uint32_t guess_ftype(const int *type_count)
{
    int best = LM_TYPE_F32;
    for (int t = 0; t < LM_TYPE_COUNT; t++)
        if (type_count[t] > type_count[best] || (type_count[t] == type_count[best] && t != LM_TYPE_F32 && t > best))
            best = t;
    return lm_ftype_guess((enum lm_type)best);
}

static lm_status load_weights(struct lm_loader *ld, const struct lm_arch_def *def)
{
    struct lm_model *m = ld->m;
    int64_t n = lm_gguf_n_tensors(ld->g);
    struct lm_ctx_params cp = {.mem_size = (size_t)(n + 8) * lm_tensor_overhead(), .no_alloc = true};
    if (lm_ctx_new(&cp, &m->ctx))
        return lm_ld_fail(ld, LM_ERR_NOMEM, "out of memory");
    ld->file_tensor = calloc((size_t)n + 1, sizeof *ld->file_tensor);
    m->layers = calloc(m->hp.n_layer, sizeof *m->layers);
    if (!ld->file_tensor || !m->layers)
        return lm_ld_fail(ld, LM_ERR_NOMEM, "out of memory");
    lm_status st = def->tensors(ld, m);
    if (st || ld->status)
        return ld->status ? ld->status : lm_ld_fail(ld, st, "cannot create the tensors");
    for (int64_t i = 0; i < n; i++)
        if (!ld->file_tensor[i])
            return lm_ld_fail(ld, LM_ERR_CORRUPT, "tensor '%s' is not used by the %s architecture",
                              lm_gguf_tensor_info(ld->g, i)->name, ld->arch);
    int type_count[LM_TYPE_COUNT] = {0};
    for (struct lm_tensor *t = lm_ctx_first_tensor(m->ctx); t; t = lm_ctx_next_tensor(m->ctx, t)) {
        m->n_elements += (uint64_t)lm_nelements(t);
        m->n_bytes += lm_nbytes(t);
        type_count[t->type]++;
    }
    if (m->hp.ftype_guessed)
        m->hp.ftype = guess_ftype(type_count);
    for (int64_t i = 0; i < n; i++)
        ld->bytes_total += lm_gguf_tensor_info(ld->g, i)->size;
    if (ld->params->use_mmap && (st = open_mapping(ld)))
        return st;
    if ((st = place_weights(ld)))
        return st;
    if (!report(ld, 1.0f))
        return lm_ld_fail(ld, LM_ERR_ABORTED, "loading aborted by the progress callback");
    return LM_OK;
}

static void loader_release(struct lm_loader *ld)
{
    free(ld->file_tensor);
    free(ld->gathers);
    free(ld->decl);
}

lm_status lm_model_declare(struct lm_gguf *g, bool (*want)(const char *name, void *user), void *user,
                           struct lm_hparams *hp, struct lm_decl_tensor **out, int *n_out, char *err,
                           size_t err_size)
{
    struct lm_model_params params = {0};
    struct lm_model m = {0};
    struct lm_loader ld = {.g = g, .params = &params, .m = &m, .declaring = true, .want = want, .want_user = user};
    const struct lm_arch_def *def = NULL;
    uint64_t n_vocab = 0;
    int64_t k = lm_gguf_find_key(g, "tokenizer.ggml.tokens");
    if (k < 0 || lm_gguf_get_arr_n(g, k, &n_vocab) || n_vocab == 0 || n_vocab > UINT32_MAX)
        lm_ld_fail(&ld, LM_ERR_CORRUPT, "no tokenizer.ggml.tokens");
    lm_ld_str(&ld, "general.architecture", ld.arch, sizeof ld.arch, true);
    m.hp.arch = lm_arch_from_name(ld.arch);
    if (!ld.status && !(def = lm_arch_get(m.hp.arch)))
        lm_ld_fail(&ld, LM_ERR_UNSUPPORTED, "unknown model architecture '%s'", ld.arch);
    if (!ld.status && !read_hparams(&ld, &m.hp) && def->hparams)
        def->hparams(&ld, &m.hp);
    if (!ld.status) {
        m.hp.arch = def ? lm_arch_from_name(ld.arch) : m.hp.arch;
        m.hp.n_vocab = (uint32_t)n_vocab;
        struct lm_ctx_params cp = {.mem_size = (64 + 64 * (size_t)m.hp.n_layer) * lm_tensor_overhead(),
                                   .no_alloc = true};
        m.layers = calloc(m.hp.n_layer, sizeof *m.layers);
        if (!m.layers || lm_ctx_new(&cp, &m.ctx))
            lm_ld_fail(&ld, LM_ERR_NOMEM, "out of memory");
        else
            def->tensors(&ld, &m);
    }
    if (ld.status) {
        snprintf(err, err_size, "%s", ld.err);
        free(ld.decl);
    } else {
        *hp = m.hp;
        *out = ld.decl;
        *n_out = ld.n_decl;
    }
    free(m.layers);
    lm_ctx_free(m.ctx);
    return ld.status;
}

lm_status lm_model_load(const char *path, const struct lm_model_params *params, struct lm_model **out, char *err,
                        size_t err_size)
{
    struct lm_model *m = calloc(1, sizeof *m);
    struct lm_loader ld = {.path = path, .params = params, .m = m};
    lm_status st;
    if (!m)
        return LM_ERR_NOMEM;
    m->t_start_us = lm_time_us();
    st = lm_gguf_open(path, &ld.g, ld.err, sizeof ld.err);
    if (st) {
        ld.status = st;
        goto out;
    }
    m->gguf = ld.g;
    lm_ld_str(&ld, "general.architecture", ld.arch, sizeof ld.arch, true);
    lm_ld_str(&ld, "general.name", m->name, sizeof m->name, false);
    snprintf(m->arch_name, sizeof m->arch_name, "%s", ld.arch);
    m->hp.arch = lm_arch_from_name(ld.arch);
    const struct lm_arch_def *def = lm_arch_get(m->hp.arch);
    if (ld.status)
        goto out;
    if (!params->vocab_only) {
        if (!def) {
            lm_ld_fail(&ld, LM_ERR_UNSUPPORTED, "unknown model architecture '%s'", ld.arch);
            goto out;
        }
        if (read_hparams(&ld, &m->hp) || (def->hparams && def->hparams(&ld, &m->hp)))
            goto out;
        m->hp.arch = lm_arch_from_name(ld.arch);
        m->hp.size = def->size ? def->size(&m->hp) : LM_SIZE_UNKNOWN;
    }
    char verr[256] = "";
    st = lm_vocab_load(ld.g, &m->vocab, verr, sizeof verr);
    if (st) {
        lm_ld_fail(&ld, st, "vocabulary: %s", verr);
        goto out;
    }
    m->hp.n_vocab = (uint32_t)lm_vocab_n_tokens(m->vocab);
    if (!params->vocab_only && load_weights(&ld, def))
        goto out;
    m->t_load_us = lm_time_us() - m->t_start_us;
out:
    loader_release(&ld);
    if (ld.status) {
        snprintf(err, err_size, "%s", ld.err);
        lm_model_free(m);
        return ld.status;
    }
    *out = m;
    return LM_OK;
}

void lm_model_free(struct lm_model *m)
{
    if (!m)
        return;
    /* heap buffers that were mlock'ed must be unlocked before free() hands
     * their pages back (the mapping unlocks itself) */
    for (int i = 0; i < m->n_bufs; i++)
        if (m->bufs_locked & (1u << i))
            lm_mem_unlock(lm_buffer_base(m->bufs[i]), lm_buffer_size(m->bufs[i]));
    for (int i = 0; i < m->n_bufs; i++)
        lm_buffer_free(m->bufs[i]);
    lm_mapping_free(m->mapping);
    lm_ctx_free(m->ctx);
    lm_ctx_free(m->split_ctx);
    free(m->splits);
    lm_vocab_free(m->vocab);
    lm_gguf_close(m->gguf);
    free(m->layers);
    free(m->place);
    free(m);
}
