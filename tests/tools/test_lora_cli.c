/* test_lora_cli.c - LoRA adapters on the command line: `lamina run --lora`,
 * `--lora-scaled`, `--lora-base` (the model option group of run, chat and
 * serve) and `lamina export-lora`.
 *
 * Adapters ('ggla' v1, as llama.cpp b1892's convert-lora-to-ggml.py writes
 * them) are written here with values from a fixed LCG, for stories260K
 * (F32) and a Q8_0 copy of it. Checked:
 *   - greedy `run --lora A` (same seed) prints what `run` on the model
 *     `export-lora --lora A` wrote prints, and differs from no adapter;
 *     `--lora-scaled A 0` prints what no adapter prints;
 *   - two adapters at once equal one after the other: `run --lora A --lora B`
 *     = run on export(A, B), and export(A, B) is byte for byte
 *     export(export(A), B);
 *   - the exported file (read with lamina's GGUF reader) has the base's
 *     key/values, tensor names, order, shapes and types; untouched tensors
 *     are byte for byte the base's; a touched F32 weight equals
 *     W + scale * alpha / r * (B x A) computed here in double (to float
 *     rounding), and a touched Q8_0 weight dequantizes to within one
 *     quantization step of dequant(W) + delta;
 *   - a quantized base (a copy of stories260K with Q8_0 weights, written
 *     here): output types are the base's, and run on the export equals
 *     `run -m Q8 --lora A`; --lora-base (the F32 original) works too;
 *   - bad adapters (missing, truncated, wrong magic, wrong shapes) and bad
 *     flags are errors (exit 1 / 2, a message, no output file), also for chat
 *     and serve; through the API, a good adapter applied after a failing one
 *     leaves exactly the weights the good one alone gives.
 * The lamina binary is LM_BINARY_DIR/tools/lamina; scratch files go to a
 * mkdtemp folder that is removed at the end. */
#include <dirent.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend/backend.h"
#include "core/fp16.h"
#include "core/tensor.h"
#include "gguf/gguf.h"
#include "llama.h"
#include "lm_test.h"
#include "quant/quant.h"

#define LAMINA LM_BINARY_DIR "/tools/lamina"
#define STORIES LM_SHARED_DIR "/models/stories260K.gguf"
#define GEN "-n 48 --temp 0 --repeat-penalty 1 -s 7 -t 2 -p 'Once upon a time'"

static char dir[256];

/* dir/name; the same name gives the same pointer, valid to the end. */
static const char *tmp(const char *name)
{
    static char buf[64][512];
    static int n;
    char want[512];
    snprintf(want, sizeof want, "%s/%s", dir, name);
    for (int i = 0; i < n; i++)
        if (!strcmp(buf[i], want))
            return buf[i];
    if (n == 64)
        abort(); /* the test uses fewer names */
    memcpy(buf[n], want, sizeof want);
    return buf[n++];
}

/* Run `lamina ARGS >dir/out 2>dir/err` (at most 2 minutes: a server that
 * should have failed to start is stopped); the exit status (-1: killed). */
static int lamina(const char *fmt, ...)
{
    char args[8192], cmd[9216];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    snprintf(cmd, sizeof cmd, "timeout 120 %s %s </dev/null >%s/out 2>%s/err", LAMINA, args, dir, dir);
    int s = system(cmd);
    return WIFEXITED(s) ? WEXITSTATUS(s) : -1;
}

/* The stdout of the last lamina() (malloc'd, NUL-terminated). */
static char *last_out(const char *which)
{
    size_t n = 0;
    char *p = lm_test_read_file(tmp(which), &n);
    char *s = malloc(n + 1);
    if (p)
        memcpy(s, p, n);
    s[p ? n : 0] = 0;
    free(p);
    return s;
}

/* Generate with `run` and return stdout (malloc'd); a failed run is a failed check. */
static char *gen(const char *model, const char *flags)
{
    int rc = lamina("run -m %s %s " GEN, model, flags);
    CHECKF(rc == 0, "run -m %s %s exited %d", model, flags, rc);
    char *s = last_out("out");
    CHECKF(strlen(s) > 20, "run -m %s %s printed '%s'", model, flags, s);
    return s;
}

static bool same_bytes(const char *a, const char *b)
{
    size_t na = 0, nb = 0;
    uint8_t *pa = lm_test_read_file(a, &na), *pb = lm_test_read_file(b, &nb);
    bool same = pa && pb && na == nb && !memcmp(pa, pb, na);
    free(pa);
    free(pb);
    return same;
}

static bool exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

/* ---- adapters ---- */

struct lpair {
    char wname[64];
    int type;            /* data type in the file: 0 F32, 1 F16 */
    int32_t r, n_in, n_out;
    float *a, *b;        /* A [n_in][r], B [n_out][r] */
};

static uint32_t lcg = 2024;
static float small_value(void)
{
    lcg = lcg * 1664525u + 1013904223u;
    return (float)((int)(lcg >> 24) - 128) / 256.0f; /* [-0.5, 0.5), exact in F16 */
}

static void make_pair(struct lpair *p, const char *wname, int type, int32_t r, int32_t n_in, int32_t n_out)
{
    snprintf(p->wname, sizeof p->wname, "%s", wname);
    p->type = type;
    p->r = r;
    p->n_in = n_in;
    p->n_out = n_out;
    p->a = malloc((size_t)r * (size_t)n_in * sizeof(float));
    p->b = malloc((size_t)r * (size_t)n_out * sizeof(float));
    for (int32_t i = 0; i < r * n_in; i++)
        p->a[i] = small_value();
    for (int32_t i = 0; i < r * n_out; i++)
        p->b[i] = small_value();
}

static void put(FILE *f, const void *p, size_t n) { CHECK(fwrite(p, 1, n, f) == n); }
static void put_i32(FILE *f, int32_t v) { put(f, &v, 4); }

static void put_tensor(FILE *f, const char *name, int type, int32_t ne0, int32_t ne1, const float *data)
{
    put_i32(f, 2);
    put_i32(f, (int32_t)strlen(name));
    put_i32(f, type);
    put_i32(f, ne0);
    put_i32(f, ne1);
    put(f, name, strlen(name));
    long pos = ftell(f);
    static const uint8_t zeros[32];
    put(f, zeros, (size_t)((32 - pos % 32) % 32));
    for (size_t i = 0; i < (size_t)ne0 * (size_t)ne1; i++) {
        if (type == 0) {
            put(f, &data[i], 4);
        } else {
            lm_fp16 h = lm_fp32_to_fp16(data[i]);
            put(f, &h, 2);
        }
    }
}

/* Write an adapter of n pairs (all of rank pairs[0].r) with this alpha. */
static void write_adapter(const char *path, int32_t alpha, const struct lpair *pairs, int n)
{
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (!f)
        return;
    put_i32(f, (int32_t)LLAMA_FILE_MAGIC_GGLA);
    put_i32(f, 1);
    put_i32(f, pairs[0].r);
    put_i32(f, alpha);
    for (int i = 0; i < n; i++) {
        char name[80];
        snprintf(name, sizeof name, "%s.loraA", pairs[i].wname);
        put_tensor(f, name, pairs[i].type, pairs[i].r, pairs[i].n_in, pairs[i].a);
        snprintf(name, sizeof name, "%s.loraB", pairs[i].wname);
        put_tensor(f, name, pairs[i].type, pairs[i].r, pairs[i].n_out, pairs[i].b);
    }
    CHECK(fclose(f) == 0);
}

/* delta[j * n_in + i] = scaling * sum_k A[i][k] B[j][k], in double. */
static double *expected_delta(const struct lpair *p, double scaling)
{
    double *d = malloc((size_t)p->n_in * (size_t)p->n_out * sizeof *d);
    for (int32_t j = 0; j < p->n_out; j++)
        for (int32_t i = 0; i < p->n_in; i++) {
            double s = 0;
            for (int32_t k = 0; k < p->r; k++)
                s += (double)p->a[(size_t)i * p->r + k] * (double)p->b[(size_t)j * p->r + k];
            d[(size_t)j * p->n_in + i] = scaling * s;
        }
    return d;
}

/* ---- reading GGUF files ---- */

/* Tensor `name` of the GGUF file at path as floats (dequantized; malloc'd),
 * with its type and element count. */
static float *gguf_floats(const char *path, const char *name, enum lm_type *type, int64_t *n)
{
    struct lm_gguf *g = NULL;
    float *out = NULL;
    if (lm_gguf_open(path, &g, NULL, 0) != LM_OK)
        return NULL;
    int64_t k = lm_gguf_find_tensor(g, name);
    FILE *f = fopen(path, "rb");
    if (k >= 0 && f) {
        const struct lm_gguf_tensor_info *ti = lm_gguf_tensor_info(g, k);
        void *raw = malloc((size_t)ti->size);
        *n = ti->ne[0] * ti->ne[1] * ti->ne[2] * ti->ne[3];
        *type = ti->type;
        out = malloc((size_t)*n * sizeof *out);
        if (fseek(f, (long)ti->offset, SEEK_SET) == 0 && fread(raw, 1, (size_t)ti->size, f) == ti->size)
            lm_quant_traits(ti->type)->to_float(raw, out, *n);
        free(raw);
    }
    if (f)
        fclose(f);
    lm_gguf_close(g);
    return out;
}

/* The shape of weight `name` of the model at path ([ne0, ne1]). */
static void gguf_shape(const char *path, const char *name, int32_t *ne0, int32_t *ne1)
{
    struct lm_gguf *g = NULL;
    *ne0 = *ne1 = 0;
    CHECK(lm_gguf_open(path, &g, NULL, 0) == LM_OK);
    int64_t k = g ? lm_gguf_find_tensor(g, name) : -1;
    CHECKF(k >= 0, "no tensor %s", name);
    if (k >= 0) {
        *ne0 = (int32_t)lm_gguf_tensor_info(g, k)->ne[0];
        *ne1 = (int32_t)lm_gguf_tensor_info(g, k)->ne[1];
    }
    lm_gguf_close(g);
}

static bool name_in(const char *name, const char *const *names, int n)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(name, names[i]))
            return true;
    return false;
}

/* out has base's key/values (same keys, order and values) and tensor table
 * (names, order, shapes, types); tensors not in `touched` have the base's
 * bytes, tensors in it differ. */
static void check_layout(const char *base, const char *out, const char *const *touched, int n_touched)
{
    struct lm_gguf *gb = NULL, *go = NULL;
    CHECK(lm_gguf_open(base, &gb, NULL, 0) == LM_OK);
    CHECKF(lm_gguf_open(out, &go, NULL, 0) == LM_OK, "cannot read %s", out);
    if (!gb || !go)
        goto out;
    CHECK(lm_gguf_n_kv(gb) == lm_gguf_n_kv(go));
    for (int64_t i = 0; i < lm_gguf_n_kv(gb) && i < lm_gguf_n_kv(go); i++) {
        char vb[256], vo[256];
        lm_gguf_value_to_string(gb, i, vb, sizeof vb);
        lm_gguf_value_to_string(go, i, vo, sizeof vo);
        CHECKF(!strcmp(lm_gguf_key(gb, i), lm_gguf_key(go, i)) && lm_gguf_kv_type(gb, i) == lm_gguf_kv_type(go, i) &&
                   !strcmp(vb, vo),
               "key %lld: %s = %s vs %s = %s", (long long)i, lm_gguf_key(gb, i), vb, lm_gguf_key(go, i), vo);
    }
    CHECK(lm_gguf_n_tensors(gb) == lm_gguf_n_tensors(go));
    size_t nb = 0, no = 0;
    uint8_t *fb = lm_test_read_file(base, &nb), *fo = lm_test_read_file(out, &no);
    int n_same = 0, n_diff = 0;
    for (int64_t i = 0; fb && fo && i < lm_gguf_n_tensors(gb) && i < lm_gguf_n_tensors(go); i++) {
        const struct lm_gguf_tensor_info *tb = lm_gguf_tensor_info(gb, i), *to = lm_gguf_tensor_info(go, i);
        bool same_info = !strcmp(tb->name, to->name) && tb->type == to->type && tb->n_dims == to->n_dims &&
                         !memcmp(tb->ne, to->ne, sizeof tb->ne) && tb->size == to->size;
        CHECKF(same_info, "tensor %lld: %s vs %s", (long long)i, tb->name, to->name);
        if (!same_info)
            continue;
        bool same = !memcmp(fb + tb->offset, fo + to->offset, (size_t)tb->size);
        bool want_same = !name_in(tb->name, touched, n_touched);
        CHECKF(same == want_same, "%s: %s", tb->name, same ? "unchanged" : "changed");
        n_same += same;
        n_diff += !same;
    }
    printf("%s: %lld key/values as the base's; %d tensors as the base's, %d merged\n", strrchr(out, '/') + 1,
           (long long)lm_gguf_n_kv(go), n_same, n_diff);
    free(fb);
    free(fo);
out:
    lm_gguf_close(gb);
    lm_gguf_close(go);
}

/* The F32 weight p->wname of out equals base's + delta (to float rounding). */
static void check_f32_merge(const char *base, const char *out, const struct lpair *p, double scaling)
{
    enum lm_type tb = LM_TYPE_COUNT, to = LM_TYPE_COUNT;
    int64_t n = 0, n2 = 0;
    float *wb = gguf_floats(base, p->wname, &tb, &n), *wo = gguf_floats(out, p->wname, &to, &n2);
    double *d = expected_delta(p, scaling);
    double worst = 0, change = 0;
    CHECK(wb && wo && n == n2 && n == (int64_t)p->n_in * p->n_out && tb == LM_TYPE_F32 && to == LM_TYPE_F32);
    for (int64_t i = 0; wb && wo && n == n2 && i < n; i++) {
        double want = (double)wb[i] + d[i];
        double e = fabs((double)wo[i] - want) / (6e-8 * (fabs((double)wb[i]) + fabs(d[i])) + 1e-30);
        worst = e > worst || e != e ? e : worst;
        change = fabs(d[i]) > change ? fabs(d[i]) : change;
    }
    CHECKF(worst <= 2.0 && change > 0.05, "%s: %g rounding units off (delta up to %g)", p->wname, worst, change);
    printf("%s (F32): W + delta to %.2f float roundings (delta up to %.3f)\n", p->wname, worst, change);
    free(wb);
    free(wo);
    free(d);
}

/* The Q8_0 weight p->wname of out is within one quantization step (its
 * block's scale) of dequant(base's) + delta (base: Q8_0 or F32). */
static void check_q8_merge(const char *base, const char *out, const struct lpair *p, double scaling)
{
    enum lm_type tb = LM_TYPE_COUNT, to = LM_TYPE_COUNT;
    int64_t n = 0, n2 = 0;
    float *wb = gguf_floats(base, p->wname, &tb, &n), *wo = gguf_floats(out, p->wname, &to, &n2);
    double *d = expected_delta(p, scaling);
    CHECK(wb && wo && n == n2 && to == LM_TYPE_Q8_0 && (tb == LM_TYPE_Q8_0 || tb == LM_TYPE_F32));
    double worst = 0;
    for (int64_t b0 = 0; wb && wo && n == n2 && b0 < n; b0 += 32) {
        double amax = 0, e = 0;
        for (int64_t i = b0; i < b0 + 32; i++) {
            double want = (double)wb[i] + d[i];
            amax = fabs(want) > amax ? fabs(want) : amax;
            e = fabs((double)wo[i] - want) > e ? fabs((double)wo[i] - want) : e;
        }
        double step = amax / 127.0;
        e = step > 0 ? e / step : e;
        worst = e > worst || e != e ? e : worst;
    }
    CHECKF(worst <= 1.0, "%s: %g quantization steps off", p->wname, worst);
    printf("%s (Q8_0): within %.3f quantization steps of dequant(W) + delta\n", p->wname, worst);
    free(wb);
    free(wo);
    free(d);
}

/* ---- the cases ---- */

static struct lpair A[3], B[2];
static const double SCALING_A = 1.0 / 4.0, SCALING_B = 1.0 / 2.0; /* alpha / r */

static void make_adapters(void)
{
    static const char *const a_names[] = {"blk.0.attn_q.weight", "blk.2.ffn_up.weight", "output.weight"};
    static const char *const b_names[] = {"blk.0.attn_q.weight", "blk.1.attn_v.weight"};
    for (int i = 0; i < 3; i++) {
        int32_t ne0, ne1;
        gguf_shape(STORIES, a_names[i], &ne0, &ne1);
        make_pair(&A[i], a_names[i], i == 1, 4, ne0, ne1);
    }
    for (int i = 0; i < 2; i++) {
        int32_t ne0, ne1;
        gguf_shape(STORIES, b_names[i], &ne0, &ne1);
        make_pair(&B[i], b_names[i], 1, 2, ne0, ne1);
    }
    write_adapter(tmp("a.ggla"), 1, A, 3);
    write_adapter(tmp("b.ggla"), 1, B, 2);
}

static void test_f32(void)
{
    const char *a = tmp("a.ggla"), *b = tmp("b.ggla");
    char *none = gen(STORIES, "");
    char flags[1024];
    snprintf(flags, sizeof flags, "--lora %s", a);
    char *with_a = gen(STORIES, flags);
    snprintf(flags, sizeof flags, "--lora-scaled %s 0", a);
    char *a0 = gen(STORIES, flags);
    snprintf(flags, sizeof flags, "--lora %s --lora %s", a, b);
    char *with_ab = gen(STORIES, flags);
    CHECKF(strcmp(none, with_a) != 0, "--lora A changes nothing: '%s'", with_a);
    CHECKF(strcmp(none, a0) == 0, "--lora-scaled A 0: '%s' vs '%s'", a0, none);
    CHECK(strcmp(with_a, with_ab) != 0);
    /* --no-mmap and one thread: the same merge */
    snprintf(flags, sizeof flags, "--lora %s --no-mmap -t 1", a);
    int rc = lamina("run -m %s %s -n 48 --temp 0 --repeat-penalty 1 -s 7 -p 'Once upon a time'", STORIES, flags);
    char *with_a1 = last_out("out");
    CHECKF(rc == 0 && !strcmp(with_a1, with_a), "--no-mmap -t 1: rc %d, '%s'", rc, with_a1);

    /* export-lora: running the export = running with --lora */
    rc = lamina("export-lora -m %s -o %s --lora %s -t 2", STORIES, tmp("ma.gguf"), a);
    CHECKF(rc == 0, "export-lora A exited %d", rc);
    char *exp_a = gen(tmp("ma.gguf"), "");
    CHECKF(!strcmp(exp_a, with_a), "export(A): '%s' vs --lora A: '%s'", exp_a, with_a);
    const char *touched_a[] = {A[0].wname, A[1].wname, A[2].wname};
    check_layout(STORIES, tmp("ma.gguf"), touched_a, 3);
    for (int i = 0; i < 3; i++)
        check_f32_merge(STORIES, tmp("ma.gguf"), &A[i], SCALING_A);

    /* two adapters at once = one after the other */
    CHECK(lamina("export-lora -m %s -o %s -l %s -l %s", STORIES, tmp("mab.gguf"), a, b) == 0);
    CHECK(lamina("export-lora -m %s -o %s --lora %s", tmp("ma.gguf"), tmp("ma_b.gguf"), b) == 0);
    CHECKF(same_bytes(tmp("mab.gguf"), tmp("ma_b.gguf")), "export(A, B) differs from export(export(A), B)");
    char *exp_ab = gen(tmp("mab.gguf"), "");
    CHECKF(!strcmp(exp_ab, with_ab), "export(A, B): '%s' vs --lora A --lora B: '%s'", exp_ab, with_ab);
    snprintf(flags, sizeof flags, "--lora %s", b);
    char *a_then_b = gen(tmp("ma.gguf"), flags);
    CHECK(!strcmp(a_then_b, with_ab));
    const char *touched_ab[] = {A[0].wname, A[1].wname, A[2].wname, B[1].wname};
    check_layout(STORIES, tmp("mab.gguf"), touched_ab, 4);
    check_f32_merge(tmp("ma.gguf"), tmp("mab.gguf"), &B[1], SCALING_B);

    /* a scale: the hand-computed merge with scale 0.5 */
    CHECK(lamina("export-lora -m %s -o %s --lora-scaled %s 0.5", STORIES, tmp("mh.gguf"), a) == 0);
    for (int i = 0; i < 3; i++)
        check_f32_merge(STORIES, tmp("mh.gguf"), &A[i], 0.5 * SCALING_A);
    snprintf(flags, sizeof flags, "--lora-scaled %s 0.5", a);
    char *half = gen(STORIES, flags), *exp_half = gen(tmp("mh.gguf"), "");
    CHECK(!strcmp(half, exp_half));
    printf("no adapter: %.60s...\n--lora A:   %.60s...\n--lora A --lora B: %.60s...\n", none, with_a, with_ab);
    free(none);
    free(with_a);
    free(with_a1);
    free(a0);
    free(with_ab);
    free(exp_a);
    free(exp_ab);
    free(a_then_b);
    free(half);
    free(exp_half);
    remove(tmp("ma_b.gguf"));
    remove(tmp("mh.gguf"));
}

/* A copy of stories260K with its 2-D weights of rows a multiple of 32
 * (all but ffn_down's and the token embeddings) in Q8_0 (`lamina quantize`
 * refuses the 172-value rows of ffn_down). */
struct q8_copy {
    struct lm_gguf *g;
    uint8_t *file;
};

static bool to_q8(const struct lm_gguf_tensor_info *ti)
{
    return ti->n_dims == 2 && ti->ne[0] % 32 == 0 && ti->type == LM_TYPE_F32 && strcmp(ti->name, "token_embd.weight");
}

static lm_status fill_q8(void *user, int64_t i, void *dst, size_t size)
{
    const struct q8_copy *c = user;
    const struct lm_gguf_tensor_info *ti = lm_gguf_tensor_info(c->g, i);
    if (!to_q8(ti))
        memcpy(dst, c->file + ti->offset, size);
    else
        lm_quant_traits(LM_TYPE_Q8_0)->from_float((const float *)(c->file + ti->offset), dst, ti->ne[0] * ti->ne[1]);
    return LM_OK;
}

static bool write_q8_copy(const char *path)
{
    struct q8_copy c = {NULL, lm_test_read_file(STORIES, NULL)};
    struct lm_gguf_writer *w = NULL;
    lm_status st = c.file && lm_gguf_open(STORIES, &c.g, NULL, 0) == LM_OK ? lm_gguf_writer_new(&w) : LM_ERR_IO;
    for (int64_t i = 0; !st && i < lm_gguf_n_kv(c.g); i++)
        st = lm_gguf_copy_kv(w, c.g, i);
    for (int64_t i = 0; !st && i < lm_gguf_n_tensors(c.g); i++) {
        const struct lm_gguf_tensor_info *ti = lm_gguf_tensor_info(c.g, i);
        st = lm_gguf_add_tensor(w, ti->name, to_q8(ti) ? LM_TYPE_Q8_0 : ti->type, ti->n_dims, ti->ne, NULL);
    }
    if (!st) {
        lm_gguf_writer_set_fill(w, fill_q8, &c);
        st = lm_gguf_write_file(w, path);
    }
    lm_gguf_writer_free(w);
    lm_gguf_close(c.g);
    free(c.file);
    return st == LM_OK;
}

/* A Q8_0 base: merged weights are re-encoded as Q8_0; --lora-base works. */
static void test_quantized(void)
{
    const char *a = tmp("a.ggla"), *q8 = tmp("q8.gguf");
    CHECK(write_q8_copy(q8));
    char flags[1024];
    snprintf(flags, sizeof flags, "--lora %s", a);
    char *none = gen(q8, ""), *with_a = gen(q8, flags);
    CHECK(strcmp(none, with_a) != 0);
    CHECK(lamina("export-lora -m %s -o %s --lora %s", q8, tmp("mq.gguf"), a) == 0);
    char *exp_a = gen(tmp("mq.gguf"), "");
    CHECKF(!strcmp(exp_a, with_a), "Q8_0 export(A): '%s' vs --lora A: '%s'", exp_a, with_a);
    const char *touched[] = {A[0].wname, A[1].wname, A[2].wname};
    check_layout(q8, tmp("mq.gguf"), touched, 3);
    enum lm_type t = LM_TYPE_COUNT;
    int64_t n = 0;
    free(gguf_floats(q8, A[0].wname, &t, &n));
    if (t == LM_TYPE_Q8_0)
        check_q8_merge(q8, tmp("mq.gguf"), &A[0], SCALING_A);
    else
        printf("note: %s of the Q8_0 copy is %s: no quantized check\n", A[0].wname, lm_type_name(t));
    /* --lora-base: the deltas go onto the F32 weights, stored as Q8_0 */
    snprintf(flags, sizeof flags, "--lora %s --lora-base %s", a, STORIES);
    char *based = gen(q8, flags);
    int rc = lamina("export-lora -m %s -o %s --lora %s --lora-base %s", q8, tmp("mqb.gguf"), a, STORIES);
    CHECK(rc == 0);
    char *exp_based = gen(tmp("mqb.gguf"), "");
    CHECK(!strcmp(based, exp_based));
    if (t == LM_TYPE_Q8_0)
        check_q8_merge(STORIES, tmp("mqb.gguf"), &A[0], SCALING_A);
    free(none);
    free(with_a);
    free(exp_a);
    free(based);
    free(exp_based);
    remove(tmp("mq.gguf"));
    remove(tmp("mqb.gguf"));
}

/* An error exit (want), with a message on stderr naming `needle` (or any
 * "error" when NULL), never a crash. */
static void expect_fail(int rc, int want, const char *needle, const char *what)
{
    char *err = last_out("err");
    CHECKF(rc == want && strstr(err, needle ? needle : "error"), "%s: exit %d, stderr '%s'", what, rc, err);
    free(err);
}

static void write_bytes(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(p, 1, n, f) == n);
    if (f)
        fclose(f);
}

static void test_bad(void)
{
    const char *a = tmp("a.ggla");
    size_t n = 0;
    uint8_t *good = lm_test_read_file(a, &n);
    CHECK(good != NULL && n > 200);
    if (!good)
        return;
    write_bytes(tmp("trunc.ggla"), good, n - 100);
    uint8_t *c = malloc(n);
    memcpy(c, good, n);
    c[0] ^= 1;
    write_bytes(tmp("magic.ggla"), c, n);
    free(c);
    /* an adapter for a wider attn_q: wrong shapes */
    struct lpair wide;
    make_pair(&wide, "blk.0.attn_q.weight", 0, 2, A[0].n_in + 1, A[0].n_out);
    write_adapter(tmp("shape.ggla"), 2, &wide, 1);
    free(wide.a);
    free(wide.b);
    const char *bad[] = {tmp("trunc.ggla"), tmp("magic.ggla"), tmp("shape.ggla"), tmp("missing.ggla")};
    for (int i = 0; i < 4; i++) {
        expect_fail(lamina("run -m %s --lora %s " GEN, STORIES, bad[i]), 1, bad[i], bad[i]);
        char *out = last_out("out");
        CHECKF(out[0] == 0, "run with a bad adapter printed '%s'", out);
        free(out);
        expect_fail(lamina("export-lora -m %s -o %s --lora %s --lora-scaled %s 2", STORIES, tmp("x.gguf"), a, bad[i]),
                    1, bad[i], bad[i]);
        CHECKF(!exists(tmp("x.gguf")), "export-lora with %s left an output file", bad[i]);
    }
    /* a good adapter, then a bad one: the command fails */
    expect_fail(lamina("run -m %s --lora %s --lora %s " GEN, STORIES, a, tmp("shape.ggla")), 1, "shape.ggla",
                "good then bad");
    /* chat and serve load through the same code */
    expect_fail(lamina("chat -m %s --lora %s -n 4", STORIES, tmp("magic.ggla")), 1, "magic.ggla", "chat");
    char *help = (lamina("serve --help"), last_out("out"));
    if (strstr(help, "--lora-scaled")) /* else built without the server */
        expect_fail(lamina("serve -m %s --port 0 --lora %s", STORIES, tmp("magic.ggla")), 1, "magic.ggla", "serve");
    free(help);
    /* flags */
    expect_fail(lamina("run -m %s --lora-scaled %s", STORIES, a), 2, "--lora-scaled", "no scale");
    expect_fail(lamina("run -m %s --lora-scaled %s abc", STORIES, a), 2, "abc", "bad scale");
    expect_fail(lamina("run -m %s --lora-scaled %s inf", STORIES, a), 2, "finite", "inf scale");
    expect_fail(lamina("run -m %s --lora", STORIES), 2, "--lora", "no file");
    char many[8192] = "";
    for (int i = 0; i < 33; i++) /* one more than the tools take */
        snprintf(many + strlen(many), sizeof many - strlen(many), " --lora %s", a);
    expect_fail(lamina("run -m %s%s", STORIES, many), 2, "at most", "33 adapters");
    expect_fail(lamina("export-lora -m %s --lora %s", STORIES, a), 2, "-o", "no -o");
    expect_fail(lamina("export-lora -m %s -o %s", STORIES, tmp("x.gguf")), 2, "--lora", "no adapter");
    expect_fail(lamina("export-lora -o %s --lora %s", tmp("x.gguf"), a), 2, "-m", "no -m");
    expect_fail(lamina("export-lora -m %s -o %s --lora %s --bogus", STORIES, tmp("x.gguf"), a), 2, "--bogus",
                "unknown flag");
    expect_fail(lamina("export-lora -m /nonexistent.gguf -o %s --lora %s", tmp("x.gguf"), a), 1, "nonexistent",
                "no base");
    expect_fail(lamina("export-lora -m %s -o /nonexistent/dir/x.gguf --lora %s", STORIES, a), 1, "cannot write",
                "unwritable");
    /* the output may not be an input */
    CHECK(lamina("export-lora -m %s -o %s --lora %s", STORIES, tmp("mc.gguf"), a) == 0);
    size_t n_before = 0;
    free(lm_test_read_file(tmp("mc.gguf"), &n_before));
    expect_fail(lamina("export-lora -m %s -o %s --lora %s", tmp("mc.gguf"), tmp("mc.gguf"), a), 2, "inputs",
                "out = base");
    CHECK(same_bytes(tmp("mc.gguf"), tmp("ma.gguf")));
    expect_fail(lamina("export-lora -m %s -o %s --lora %s", STORIES, a, a), 2, "inputs", "out = adapter");
    size_t n_after = 0;
    uint8_t *again = lm_test_read_file(a, &n_after);
    CHECK(again && n_after == n && !memcmp(again, good, n));
    free(again);
    remove(tmp("mc.gguf"));
    free(good);
    printf("bad adapters and flags: errors with a message, no output file\n");
}

/* Through the API: a failing adapter leaves the model as it was, so a good
 * one after it gives exactly the weights of the good one alone. */
static uint8_t *weights(struct llama_model *m, size_t *total)
{
    static const char *const names[] = {"blk.0.attn_q.weight", "blk.0.attn_k.weight", "blk.2.ffn_up.weight",
                                        "output.weight"};
    size_t n = 0;
    uint8_t *p = NULL;
    for (int k = 0; k < 4; k++) {
        const struct lm_tensor *t = (const struct lm_tensor *)llama_get_model_tensor(m, names[k]);
        size_t nb = lm_nbytes(t);
        p = realloc(p, n + nb);
        CHECK(lm_tensor_get(t, p + n, 0, nb) == LM_OK);
        n += nb;
    }
    *total = n;
    return p;
}

static void test_api_after_failure(void)
{
    /* a good first pair (blk.0.attn_k) and a bad second pair: all refused */
    struct lpair half[2];
    int32_t ne0, ne1;
    gguf_shape(STORIES, "blk.0.attn_k.weight", &ne0, &ne1);
    make_pair(&half[0], "blk.0.attn_k.weight", 0, 2, ne0, ne1);
    make_pair(&half[1], "blk.0.attn_q.weight", 0, 2, A[0].n_in, A[0].n_out + 3);
    write_adapter(tmp("half.ggla"), 2, half, 2);
    struct llama_model_params mp = llama_model_default_params();
    struct llama_model *m1 = llama_load_model_from_file(STORIES, mp), *m2 = llama_load_model_from_file(STORIES, mp);
    CHECK(m1 && m2);
    if (m1 && m2) {
        size_t n0 = 0, n1 = 0, n2 = 0;
        uint8_t *w0 = weights(m1, &n0);
        CHECK(llama_model_apply_lora_from_file(m1, tmp("half.ggla"), 1.0f, NULL, 2) != 0);
        CHECK(llama_model_apply_lora_from_file(m1, tmp("trunc.ggla"), 1.0f, NULL, 2) != 0);
        uint8_t *w1 = weights(m1, &n1);
        CHECK(n0 == n1 && !memcmp(w0, w1, n0));
        free(w1);
        CHECK(llama_model_apply_lora_from_file(m1, tmp("a.ggla"), 1.0f, NULL, 2) == 0);
        CHECK(llama_model_apply_lora_from_file(m2, tmp("a.ggla"), 1.0f, NULL, 2) == 0);
        w1 = weights(m1, &n1);
        uint8_t *w2 = weights(m2, &n2);
        CHECK(n1 == n2 && !memcmp(w1, w2, n1) && memcmp(w0, w1, n0));
        free(w0);
        free(w1);
        free(w2);
    }
    llama_free_model(m1);
    llama_free_model(m2);
    for (int i = 0; i < 2; i++) {
        free(half[i].a);
        free(half[i].b);
    }
}

static void quiet(enum ggml_log_level level, const char *text, void *user)
{
    (void)level;
    (void)text;
    (void)user;
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/lamina-lora-cli-XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    if (!getenv("LAMINA_TEST_VERBOSE"))
        llama_log_set(quiet, NULL);
    llama_backend_init(false);
    make_adapters();
    test_f32();
    test_quantized();
    test_bad();
    test_api_after_failure();
    for (int i = 0; i < 3; i++) {
        free(A[i].a);
        free(A[i].b);
    }
    for (int i = 0; i < 2; i++) {
        free(B[i].a);
        free(B[i].b);
    }
    llama_backend_free();
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d));)
        if (e->d_name[0] != '.')
            remove(tmp(e->d_name));
    if (d)
        closedir(d);
    rmdir(dir);
    return lm_test_summary();
}
