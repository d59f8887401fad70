/* matmul.c - MUL_MAT and MUL_MAT_ID.
 *
 * Numerics follow ggml: the activations b (F32) are converted ONCE per matmul
 * into the weight type's vec_dot_type (kernels.h) in the shared work buffer
 * (phase 1, rows split over threads), then after a barrier every thread
 * computes dot products of weight rows with converted activation rows over
 * its share of the output (phase 2). F32 weights with unit-stride b rows skip
 * phase 1 and read b in place; b with any other strides (a transposed or
 * permuted view) is gathered row by row first.
 *
 * Phase 2 work is a list of tiles of MB weight rows x NB activation rows,
 * ordered activation-block fastest, then weight-block, then batch (dims 2, 3).
 * For one token (GEMV) each thread owns an equal contiguous range and streams
 * it (others take chunks from its back once done with theirs: mm_gemm_one); for
 * batches after phase 1's barrier the threads take tiles in turn from a
 * shared counter (mm_next_chunk), and a weight tile stays in cache while the
 * activations (shared, in L2/L3) stream.
 * Repacked weights take the GEMM path (mm_gemm: gemm_x8 per group and block
 * of columns) or, for many activation rows when the table has one, the panel
 * path (mm_panel: one panel GEMM call per chunk of groups and batch; AMX,
 * and the AVX-512 VNNI panel of Q4_0/Q8_0/Q4_K); both hand the groups out
 * in chunks from a shared counter (mm_next_chunk) rather than in equal
 * shares.
 *
 * Types without a direct vec_dot (Q8_1/Q8_K as weights) take the
 * dequantizing path: each weight row is decoded to F32 (per-thread scratch)
 * and dotted with F32 activation rows that were rounded through the
 * vec_dot_type, which keeps ggml's activation quantization error.
 *
 * MUL_MAT_ID groups (slot, token) pairs by expert (thread 0, during phase 1)
 * and runs the same tiles per expert; ids outside [0, n_expert) give zero rows.
 */
#include <stdatomic.h>
#include <string.h>

#include "cpu/cpu_internal.h"
#include "cpu/ops/ops.h"
#include "cpu/repack.h"
#include "quant/blocks.h"

#define MM_MB 16 /* weight rows per tile (may shrink so every thread gets work) */
#define MM_NB 16 /* activation rows per tile */

/* What one matmul needs, derived from its operands and the kernel table. */
struct mm_ctx {
    const struct lm_tensor *b;
    int64_t K;
    enum lm_type vt;           /* type of the converted b rows */
    lm_vec_dot_fn dot;         /* weight row (or its F32 decode) . b row */
    lm_vec_dot_cols_fn dot_cols; /* the same for several b rows at once (bit-identical), or NULL */
    lm_to_float_fn a_decode;   /* dequantizing path: weight row decoder; else NULL */
    lm_from_float_fn enc;      /* phase 1 encoder (into vt, or into the rounding type) */
    lm_to_float_fn round_back; /* dequantizing path with a quantized dot type: back to F32 */
    bool convert;              /* phase 1 runs */
    size_t b_row;              /* bytes per converted b row */
    size_t extra_off;          /* op-specific region (MUL_MAT_ID's expert map) */
    size_t scratch_off;        /* per-thread scratch slices start here */
    size_t scratch_size;       /* bytes per thread: [gather][round][decode] */
    size_t round_off, decode_off;
    size_t one_off;            /* GEMM path, one activation row: the thread's own converted row and sums */
};

static void mm_init(struct mm_ctx *c, const struct lm_tensor *a, const struct lm_tensor *b,
                    const struct lm_cpu_kernels *kern, size_t extra_bytes)
{
    memset(c, 0, sizeof *c);
    c->b = b;
    c->K = a->ne[0];
    const struct lm_cpu_type_kernels *tk = &kern->type[a->type];
    const enum lm_type vt = tk->vec_dot_type;
    const bool b_unit = b->nb[0] == sizeof(float);
    const size_t row_f32 = (size_t)c->K * sizeof(float);
    size_t round = 0, decode = 0;
    if (tk->vec_dot) {
        c->vt = vt;
        c->dot = tk->vec_dot;
        c->dot_cols = tk->vec_dot_cols;
        c->enc = kern->type[vt].from_float;
        c->convert = vt != LM_TYPE_F32 || !b_unit;
    } else {
        c->vt = LM_TYPE_F32;
        c->dot = kern->type[LM_TYPE_F32].vec_dot;
        c->a_decode = tk->to_float;
        c->enc = kern->type[vt].from_float;
        c->convert = true;
        decode = row_f32;
        if (vt != LM_TYPE_F32) {
            c->round_back = kern->type[vt].to_float;
            round = lm_row_size(vt, c->K);
        }
    }
    c->b_row = lm_row_size(c->vt, c->K);
    size_t conv = c->convert ? lm_cpu_pad(c->b_row * (size_t)lm_nrows(b)) : 0;
    c->extra_off = conv;
    c->scratch_off = conv + lm_cpu_pad(extra_bytes);
    c->round_off = lm_cpu_pad(b_unit ? 0 : row_f32);
    c->decode_off = c->round_off + lm_cpu_pad(round);
    c->scratch_size = c->decode_off + lm_cpu_pad(decode);
}

static size_t mm_total(const struct mm_ctx *c, int nth)
{
    return c->scratch_off + (size_t)nth * lm_cpu_pad(c->scratch_size);
}

static char *mm_scratch(const struct mm_ctx *c, const struct lm_cpu_params *p)
{
    return lm_cpu_wslice(p, c->scratch_off, c->scratch_size);
}

/* Phase 1: convert b's rows (flat index r = (i3*ne2 + i2)*ne1 + i1) into wdata. */
/* Row r of b converted into out (scratch: this thread's gather/round rows). */
static void convert_row(const struct mm_ctx *c, char *scratch, int64_t r, char *out)
{
    const struct lm_tensor *b = c->b;
    const int64_t K = c->K, s0 = (int64_t)b->nb[0];
    float *gather = (float *)scratch;
    void *round = scratch + c->round_off;
    int64_t i1, i2, i3;
    lm_cpu_row_index(b, r, &i1, &i2, &i3);
    const char *src = lm_cpu_elem(b, 0, i1, i2, i3);
    const float *f = (const float *)src;
    if (s0 != (int64_t)sizeof(float)) {
        for (int64_t i = 0; i < K; i++)
            gather[i] = *(const float *)(src + i * s0);
        f = gather;
    }
    if (c->round_back) {
        c->enc(f, round, K);
        c->round_back(round, (float *)out, K);
    } else {
        c->enc(f, out, K);
    }
}

static void mm_convert(const struct mm_ctx *c, const struct lm_cpu_params *p)
{
    char *scratch = mm_scratch(c, p);
    int64_t r0, r1;
    lm_cpu_split(lm_nrows(c->b), p->ith, p->nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++)
        convert_row(c, scratch, r, (char *)p->wdata + (size_t)r * c->b_row);
}

/* Activation row (i1, i2, i3) of b as the dot kernel reads it. */
static const void *mm_brow(const struct mm_ctx *c, const struct lm_cpu_params *p, int64_t i1, int64_t i2, int64_t i3)
{
    const struct lm_tensor *b = c->b;
    if (!c->convert)
        return lm_cpu_elem(b, 0, i1, i2, i3);
    return (const char *)p->wdata + (size_t)((i3 * b->ne[2] + i2) * b->ne[1] + i1) * c->b_row;
}

/* One weight row against n activation rows: outs[j] = arow . brows[j]. */
static void mm_row(const struct mm_ctx *c, const struct lm_cpu_params *p, const void *arow,
                   const void *const *brows, float *const *outs, int n)
{
    if (c->a_decode) {
        float *decode = (float *)(mm_scratch(c, p) + c->decode_off);
        c->a_decode(arow, decode, c->K);
        arow = decode;
    }
    if (c->dot_cols && n > 1) {
        for (int j = 0; j < n; j += LM_VEC_DOT_COLS_MAX)
            c->dot_cols(c->K, n - j < LM_VEC_DOT_COLS_MAX ? n - j : LM_VEC_DOT_COLS_MAX, outs + j, arow, brows + j);
        return;
    }
    for (int j = 0; j < n; j++)
        c->dot(c->K, outs[j], arow, brows[j]);
}

/* Tile height so that there are at least 4 tiles per thread when possible. */
static int64_t mm_block_m(int64_t M, int64_t other_tiles, int nth)
{
    int64_t mb = MM_MB;
    while (mb > 1 && ((M + mb - 1) / mb) * other_tiles < 4 * (int64_t)nth)
        mb /= 2;
    return mb;
}

/* ---- MUL_MAT over repacked weights (GEMM tiles) ---- */

#define GEMM_COL_BLOCK 64 /* activation rows kept hot while a thread sweeps its weight groups */

static bool use_gemm(const struct lm_tensor *a, const struct lm_cpu_kernels *kern)
{
    return lm_tensor_is_repacked(a) && kern->type[a->type].gemm_x8 != NULL;
}

/* Scratch of the GEMM path: converted activation rows, then their block sums. */
static size_t gemm_work(const struct mm_ctx *c, const struct lm_tensor *b)
{
    return lm_cpu_pad(c->b_row * (size_t)lm_nrows(b)) +
           lm_cpu_pad((size_t)lm_nrows(b) * (size_t)(c->K / LM_QK) * sizeof(int16_t)) + 64;
}

/* The GEMM path's activation rows: the kernel's own type and encoder. */
static void gemm_init(struct mm_ctx *c, const struct lm_tensor *a, const struct lm_tensor *b,
                      const struct lm_cpu_kernels *kern)
{
    const struct lm_cpu_type_kernels *tk = &kern->type[a->type];
    mm_init(c, a, b, kern, 0);
    c->vt = tk->gemm_vt;
    c->enc = tk->gemm_from_float ? tk->gemm_from_float : kern->type[tk->gemm_vt].from_float;
    c->dot = NULL;
    c->dot_cols = NULL;
    c->a_decode = NULL;
    c->round_back = NULL;
    c->convert = true;
    c->b_row = lm_row_size(c->vt, c->K);
    c->scratch_off = gemm_work(c, b);
    if (lm_nrows(b) == 1) { /* token generation: mm_gemm_one */
        c->one_off = c->scratch_size;
        c->scratch_size = c->one_off + lm_cpu_pad(c->b_row) + lm_cpu_pad((size_t)(c->K / LM_QK) * sizeof(int16_t));
    }
}

static int16_t *gemm_sums(const struct mm_ctx *c, const struct lm_cpu_params *p, const struct lm_tensor *b)
{
    return (int16_t *)((char *)p->wdata + lm_cpu_pad(c->b_row * (size_t)lm_nrows(b)));
}

/* ---- the dynamic split of the 8-row groups (GEMM and panel paths) ----
 *
 * Phase 2 hands out the weight groups in chunks, an even number of groups
 * each (the panel kernels' 16-row tiles), about MM_CHUNKS_PER_THREAD per
 * thread, from the thread pool's first claim counter (lm_tp_claims: zero
 * when the phase starts, no reset of our own): a thread slowed by another
 * process or a slower core takes fewer chunks instead of holding the others
 * at the node's barrier (a static split of equal shares waits for the
 * slowest). A chunk's weights also stay in L2 while every activation column
 * passes over them. Every output is the same kernel's, whatever chunk and
 * thread it falls to (the kernels' bits do not depend on the row range:
 * tests/cpu/test_gemm.c), so the split changes no result. */
#define MM_CHUNKS_PER_THREAD 8

/* Phase 2's chunk counter: the pool's first claim counter (zero when a
 * phase starts: threadpool.h), or, for one thread, the caller's count. */
struct mm_chunks {
    _Atomic uint64_t *shared; /* NULL: one thread */
    int64_t next;
};

static struct mm_chunks mm_chunks(const struct lm_cpu_params *p)
{
    struct mm_chunks k = {p->nth > 1 ? &lm_tp_claims(p->tp)[0].v : NULL, 0};
    return k;
}

static int64_t mm_chunk_groups(int64_t n_groups, int nth)
{
    int64_t g = (n_groups + (int64_t)nth * MM_CHUNKS_PER_THREAD - 1) / ((int64_t)nth * MM_CHUNKS_PER_THREAD);
    return g < 2 ? 2 : (g + 1) / 2 * 2;
}

/* The next chunk [*g0, *g1) of n_groups groups (or tiles), chunk each; false when none is left. */
static bool mm_next_chunk(struct mm_chunks *k, int64_t n_groups, int64_t chunk, int64_t *g0, int64_t *g1)
{
    const int64_t i = k->shared ? (int64_t)atomic_fetch_add_explicit(k->shared, 1, memory_order_relaxed) : k->next++;
    *g0 = i * chunk;
    if (*g0 >= n_groups)
        return false;
    *g1 = *g0 + chunk < n_groups ? *g0 + chunk : n_groups;
    return true;
}

/* Phase 2 of the GEMM path: chunks of the 8-row groups, for every batch and
 * every column. */
static void mm_gemm(const struct mm_ctx *c, const struct lm_cpu_params *p, struct lm_tensor *dst)
{
    const struct lm_tensor *a = dst->src[0], *b = dst->src[1];
    const struct lm_cpu_type_kernels *tk = &p->kern->type[a->type];
    const int64_t K = c->K, nb = K / LM_QK, N = b->ne[1], n_groups = a->ne[1] / LM_REPACK_ROWS;
    const size_t group_bytes = lm_row_size(a->type, K) * LM_REPACK_ROWS;
    const int16_t *sums = gemm_sums(c, p, b);
    const int64_t chunk = mm_chunk_groups(n_groups, p->nth);
    struct mm_chunks k = mm_chunks(p);
    int64_t g0, g1;
    while (mm_next_chunk(&k, n_groups, chunk, &g0, &g1)) {
        for (int64_t i3 = 0; i3 < b->ne[3]; i3++) {
            for (int64_t i2 = 0; i2 < b->ne[2]; i2++) {
                const int64_t row0 = (i3 * b->ne[2] + i2) * N;
                for (int64_t n0 = 0; n0 < N; n0 += GEMM_COL_BLOCK) {
                    const int64_t n1 = n0 + GEMM_COL_BLOCK < N ? n0 + GEMM_COL_BLOCK : N;
                    for (int64_t g = g0; g < g1; g++) {
                        const char *wx = (const char *)a->data + (size_t)g * group_bytes;
                        for (int64_t j = n0; j < n1; j += LM_GEMM_MAX_NC) {
                            const int nc = (int)(n1 - j < LM_GEMM_MAX_NC ? n1 - j : LM_GEMM_MAX_NC);
                            float *out = lm_cpu_elem(dst, g * LM_REPACK_ROWS, j, i2, i3);
                            const char *y = (const char *)p->wdata + (size_t)(row0 + j) * c->b_row;
                            tk->gemm_x8(K, out, dst->nb[1] / sizeof(float), wx, y, c->b_row,
                                        sums + (size_t)(row0 + j) * (size_t)nb, nc);
                        }
                    }
                }
            }
        }
    }
}

/* The int16 sum of each 32-element Q8_0 block of an activation row. */
static void block_sums(const char *row, int64_t nb, int16_t *sums)
{
    const struct lm_block_q8_0 *q = (const struct lm_block_q8_0 *)row;
    for (int64_t i = 0; i < nb; i++) {
        int sum = 0;
        for (int t = 0; t < LM_QK; t++)
            sum += q[i].qs[t];
        sums[i] = (int16_t)sum;
    }
}

/* Phase 1 of the GEMM path: convert b's rows, and sum each block's quants. */
static void mm_gemm_convert(const struct mm_ctx *c, const struct lm_cpu_params *p, const struct lm_tensor *a)
{
    mm_convert(c, p);
    if (!p->kern->type[a->type].gemm_sums)
        return;
    const struct lm_tensor *b = c->b;
    const int64_t nb = c->K / LM_QK;
    int16_t *sums = gemm_sums(c, p, b);
    int64_t r0, r1;
    lm_cpu_split(lm_nrows(b), p->ith, p->nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++)
        block_sums((const char *)p->wdata + (size_t)r * c->b_row, nb, sums + r * nb);
}

/* ---- one activation row (token generation) ----
 *
 * Every thread converts the row into its own scratch and runs groups with no
 * barrier before them (thread 1 used to wait at the phase barrier while
 * thread 0 quantized the row: with the barrier itself 2-3 % of llama-7b tg,
 * perf). Each thread owns an equal contiguous share of the groups and takes
 * it from the front in halving pieces (one gemv_x8 call each, so its weights
 * stay one stream); a thread done with its own share takes chunks of about
 * MM_STEAL_BYTES from the back of the others' shares (claim counters of the
 * thread pool, one per share: front count in the low 32 bits, back count in
 * the high 32), so a core slowed by another process or by its share of the
 * memory bandwidth does not hold the others at the node's barrier. Every
 * group's result is the same kernel's, whoever runs it. */
#define MM_STEAL_BYTES 32768

static atomic_long mm_steals; /* cpu_internal.h */

long lm_cpu_mm_steals(void) { return atomic_load_explicit(&mm_steals, memory_order_relaxed); }

struct mm_one {
    const struct lm_cpu_type_kernels *tk;
    const struct lm_tensor *a;
    struct lm_tensor *dst;
    int64_t K;
    size_t group_bytes;
    const char *y;
    const int16_t *sums;
};

/* Groups [g0, g0 + n). */
static void mm_one_groups(const struct mm_one *o, int64_t g0, int64_t n)
{
    const char *w = (const char *)o->a->data + (size_t)g0 * o->group_bytes;
    if (o->tk->gemv_x8 && o->dst->nb[0] == sizeof(float)) { /* several groups streamed at once */
        o->tk->gemv_x8(o->K, n, o->group_bytes, lm_cpu_elem(o->dst, g0 * LM_REPACK_ROWS, 0, 0, 0), w, o->y, o->sums);
        return;
    }
    for (int64_t g = 0; g < n; g++)
        o->tk->gemm_x8(o->K, lm_cpu_elem(o->dst, (g0 + g) * LM_REPACK_ROWS, 0, 0, 0), o->dst->nb[1] / sizeof(float),
                       w + (size_t)g * o->group_bytes, o->y, 0, o->sums, 1);
}

/* Claims groups of a share of n: from the front (the owner) half of what is
 * left but at least `chunk`, from the back (the others) `chunk`; returns how
 * many (0: none left), the first one's offset in the share in *off. */
static int64_t mm_claim(struct lm_tp_claim *c, int64_t n, int64_t chunk, bool back, int64_t *off)
{
    uint64_t w = atomic_load_explicit(&c->v, memory_order_relaxed);
    for (;;) {
        const int64_t f = (int64_t)(w & 0xFFFFFFFFu), b = (int64_t)(w >> 32), left = n - f - b;
        if (left <= 0)
            return 0;
        const int64_t want = back || (left + 1) / 2 < chunk ? chunk : (left + 1) / 2;
        const int64_t take = want < left ? want : left;
        const uint64_t next = w + (back ? (uint64_t)take << 32 : (uint64_t)take);
        if (atomic_compare_exchange_weak_explicit(&c->v, &w, next, memory_order_relaxed, memory_order_relaxed)) {
            *off = back ? n - b - take : f;
            return take;
        }
    }
}

static void mm_gemm_one(const struct mm_ctx *c, const struct lm_cpu_params *p, struct lm_tensor *dst)
{
    const struct lm_tensor *a = dst->src[0];
    const struct lm_cpu_type_kernels *tk = &p->kern->type[a->type];
    const int64_t K = c->K, n_groups = a->ne[1] / LM_REPACK_ROWS;
    const size_t group_bytes = lm_row_size(a->type, K) * LM_REPACK_ROWS;
    char *scratch = mm_scratch(c, p), *y = scratch + c->one_off;
    int16_t *sums = (int16_t *)(y + lm_cpu_pad(c->b_row));
    int64_t g0, g1;
    lm_cpu_split(n_groups, p->ith, p->nth, &g0, &g1);
    if (g0 == g1)
        return;
    convert_row(c, scratch, 0, y);
    if (tk->gemm_sums)
        block_sums(y, K / LM_QK, sums);
    const struct mm_one o = {tk, a, dst, K, group_bytes, y, sums};
    if (p->nth == 1) {
        mm_one_groups(&o, 0, n_groups);
        return;
    }
    struct lm_tp_claim *claims = lm_tp_claims(p->tp);
    const int64_t chunk = group_bytes >= MM_STEAL_BYTES ? 1 : MM_STEAL_BYTES / (int64_t)group_bytes;
    int64_t off, n;
    while ((n = mm_claim(&claims[p->ith], g1 - g0, chunk, false, &off)) > 0)
        mm_one_groups(&o, g0 + off, n);
    for (int d = 1; d < p->nth; d++) {
        const int v = (p->ith + d) % p->nth;
        int64_t v0, v1;
        lm_cpu_split(n_groups, v, p->nth, &v0, &v1);
        while ((n = mm_claim(&claims[v], v1 - v0, chunk, true, &off)) > 0) {
            mm_one_groups(&o, v0 + off, n);
            atomic_fetch_add_explicit(&mm_steals, 1, memory_order_relaxed);
        }
    }
}

/* ---- MUL_MAT over repacked weights, panel GEMM (many activation rows) ----
 *
 * When the kernel table has a panel GEMM for the weight type (AMX; Q4_0/Q8_0/Q4_K at AVX-512)
 * and there are at least panel_min_n activation rows, phase 1 encodes b with
 * panel_from_float and phase 2 hands out chunks of 8-row groups (as mm_gemm)
 * and calls the panel kernel once per chunk and batch over all activation
 * rows, with its per-thread scratch after the gather row. */

static bool use_panel(const struct lm_tensor *a, const struct lm_tensor *b, const struct lm_cpu_kernels *kern)
{
    const struct lm_cpu_type_kernels *tk = &kern->type[a->type];
    return use_gemm(a, kern) && tk->gemm_panel != NULL && b->ne[1] >= tk->panel_min_n &&
           a->ne[0] % LM_GEMM_PANEL_K == 0;
}

static void panel_init(struct mm_ctx *c, const struct lm_tensor *a, const struct lm_tensor *b,
                       const struct lm_cpu_kernels *kern)
{
    const struct lm_cpu_type_kernels *tk = &kern->type[a->type];
    mm_init(c, a, b, kern, 0);
    c->enc = tk->panel_from_float;
    c->dot = NULL;
    c->dot_cols = NULL;
    c->a_decode = NULL;
    c->round_back = NULL;
    c->convert = true;
    /* one cache line more than the row: the kernel loads 16 rows at a time
     * (AMX tiles), and rows 4 KiB apart would all fall into one L1 set
     * (bench_gemm K=2048, N=512: BF16 331 -> 466, F16 127 -> 178 GMAC/s) */
    c->b_row = tk->panel_row_size(c->K) + LM_CPU_CACHE_LINE; /* c->vt unused: the kernel's own layout */
    c->scratch_off = lm_cpu_pad(c->b_row * (size_t)lm_nrows(b));
    c->decode_off = c->round_off; /* the panel scratch follows the gather row */
    c->scratch_size = c->decode_off + lm_cpu_pad(tk->panel_scratch(c->K));
}

/* Phase 2 of the panel path: chunks of groups, every batch, all columns. */
static void mm_panel(const struct mm_ctx *c, const struct lm_cpu_params *p, struct lm_tensor *dst)
{
    const struct lm_tensor *a = dst->src[0], *b = dst->src[1];
    const struct lm_cpu_type_kernels *tk = &p->kern->type[a->type];
    const int64_t N = b->ne[1], n_groups = a->ne[1] / LM_REPACK_ROWS;
    const size_t group_bytes = lm_row_size(a->type, c->K) * LM_REPACK_ROWS;
    void *scratch = mm_scratch(c, p) + c->decode_off;
    const int64_t chunk = mm_chunk_groups(n_groups, p->nth);
    struct mm_chunks k = mm_chunks(p);
    int64_t g0, g1;
    while (mm_next_chunk(&k, n_groups, chunk, &g0, &g1)) {
        for (int64_t i3 = 0; i3 < b->ne[3]; i3++) {
            for (int64_t i2 = 0; i2 < b->ne[2]; i2++) {
                const int64_t row0 = (i3 * b->ne[2] + i2) * N;
                const char *y = (const char *)p->wdata + (size_t)row0 * c->b_row;
                tk->gemm_panel(c->K, g1 - g0, group_bytes, lm_cpu_elem(dst, g0 * LM_REPACK_ROWS, 0, i2, i3),
                               dst->nb[1] / sizeof(float), (const char *)a->data + (size_t)g0 * group_bytes, y,
                               c->b_row, N, scratch);
            }
        }
    }
}

/* ---- MUL_MAT ---- */

/* Scratch: converted activations plus per-thread gather/decode rows. */
size_t lm_cpu_work_mul_mat(const struct lm_tensor *dst, int nth, const struct lm_cpu_kernels *kern)
{
    struct mm_ctx c;
    mm_init(&c, dst->src[0], dst->src[1], kern, 0);
    size_t total = mm_total(&c, nth);
    if (use_gemm(dst->src[0], kern)) {
        gemm_init(&c, dst->src[0], dst->src[1], kern);
        size_t g = mm_total(&c, nth);
        total = g > total ? g : total;
    }
    if (use_panel(dst->src[0], dst->src[1], kern)) {
        panel_init(&c, dst->src[0], dst->src[1], kern);
        size_t g = mm_total(&c, nth);
        total = g > total ? g : total;
    }
    return total;
}

/* Tile (weight rows [m0, m1), activation rows [n0, n1)) of batch (i2, i3). */
static void mm_tile(const struct mm_ctx *c, const struct lm_cpu_params *p, struct lm_tensor *dst, int64_t m0,
                    int64_t m1, int64_t n0, int64_t n1, int64_t i2, int64_t i3)
{
    const struct lm_tensor *a = dst->src[0], *b = dst->src[1];
    const int64_t a2 = i2 / (b->ne[2] / a->ne[2]), a3 = i3 / (b->ne[3] / a->ne[3]);
    const void *brows[MM_NB];
    float *outs[MM_NB];
    for (int64_t m = m0; m < m1; m++) {
        int n = 0;
        for (int64_t j = n0; j < n1; j++, n++) {
            brows[n] = mm_brow(c, p, j, i2, i3);
            outs[n] = lm_cpu_elem(dst, m, j, i2, i3);
        }
        mm_row(c, p, lm_cpu_elem(a, 0, m, a2, a3), brows, outs, n);
    }
}

/* The tile grid of the path over weights that are not repacked: nmb blocks
 * of mb weight rows x nnb blocks of MM_NB activation rows, per batch. */
struct mm_tiling {
    int64_t mb, nmb, nnb, n_tiles;
};

static struct mm_tiling mm_tiling(const struct lm_tensor *a, const struct lm_tensor *b, int nth)
{
    struct mm_tiling tl;
    const int64_t M = a->ne[1], batches = b->ne[2] * b->ne[3];
    tl.nnb = (b->ne[1] + MM_NB - 1) / MM_NB;
    tl.mb = mm_block_m(M, tl.nnb * batches, nth);
    tl.nmb = (M + tl.mb - 1) / tl.mb;
    tl.n_tiles = tl.nnb * tl.nmb * batches;
    return tl;
}

/* Tiles [t0, t1) of the grid (activation blocks fastest, then weight blocks, then batches). */
static void mm_tiles(const struct mm_ctx *c, const struct lm_cpu_params *p, struct lm_tensor *dst,
                     const struct mm_tiling *tl, int64_t t0, int64_t t1)
{
    const int64_t M = dst->src[0]->ne[1], N = dst->src[1]->ne[1], B2 = dst->src[1]->ne[2];
    for (int64_t t = t0; t < t1; t++) {
        const int64_t jb = t % tl->nnb, ib = t / tl->nnb % tl->nmb, batch = t / (tl->nnb * tl->nmb);
        const int64_t m0 = ib * tl->mb, m1 = m0 + tl->mb < M ? m0 + tl->mb : M;
        const int64_t n0 = jb * MM_NB, n1 = n0 + MM_NB < N ? n0 + MM_NB : N;
        mm_tile(c, p, dst, m0, m1, n0, n1, batch % B2, batch / B2);
    }
}

/* MUL_MAT: phase 1 (convert b), barrier, phase 2 (this thread's tiles). */
void lm_cpu_op_mul_mat(const struct lm_cpu_params *p, struct lm_tensor *dst)
{
    const struct lm_tensor *a = dst->src[0], *b = dst->src[1];
    struct mm_ctx c;
    if (use_panel(a, b, p->kern)) {
        panel_init(&c, a, b, p->kern);
        mm_convert(&c, p);
        lm_cpu_sync(p);
        mm_panel(&c, p, dst);
        return;
    }
    if (use_gemm(a, p->kern)) {
        gemm_init(&c, a, b, p->kern);
        if (lm_nrows(b) == 1) {
            mm_gemm_one(&c, p, dst);
            return;
        }
        mm_gemm_convert(&c, p, a);
        lm_cpu_sync(p);
        mm_gemm(&c, p, dst);
        return;
    }
    mm_init(&c, a, b, p->kern, 0);
    if (c.convert) {
        mm_convert(&c, p);
        lm_cpu_sync(p);
    }
    const int64_t N = b->ne[1];
    const struct mm_tiling tl = mm_tiling(a, b, p->nth);
    /* batches after a phase barrier: tiles in turn from the counter (as the
     * GEMM path's groups); one token keeps its static shares (each thread
     * streams one contiguous slice of the weights) */
    int64_t t0, t1;
    if (c.convert && N > 1) {
        struct mm_chunks k = mm_chunks(p);
        while (mm_next_chunk(&k, tl.n_tiles, 1, &t0, &t1))
            mm_tiles(&c, p, dst, &tl, t0, t1);
    } else {
        lm_cpu_split(tl.n_tiles, p->ith, p->nth, &t0, &t1);
        mm_tiles(&c, p, dst, &tl, t0, t1);
    }
}

/* ---- MUL_MAT_ID ---- */

/* The expert map in wdata: count[E] and start[E+1] (int64), then the
 * (slot, token) pairs of every expert, grouped by expert (int32 pairs). */
struct mm_map {
    int64_t *count, *start;
    int32_t *pairs;
};

static size_t map_bytes(int64_t E, int64_t S, int64_t T)
{
    return (size_t)(2 * E + 1) * sizeof(int64_t) + (size_t)(2 * S * T) * sizeof(int32_t);
}

static struct mm_map map_at(const struct mm_ctx *c, const struct lm_cpu_params *p, int64_t E)
{
    struct mm_map m;
    m.count = (int64_t *)((char *)p->wdata + c->extra_off);
    m.start = m.count + E;
    m.pairs = (int32_t *)(m.start + E + 1);
    return m;
}

/* Scratch: as MUL_MAT plus the expert map. */
size_t lm_cpu_work_mul_mat_id(const struct lm_tensor *dst, int nth, const struct lm_cpu_kernels *kern)
{
    const struct lm_tensor *as = dst->src[0], *ids = dst->src[2];
    struct mm_ctx c;
    mm_init(&c, as, dst->src[1], kern, map_bytes(as->ne[2], ids->ne[0], ids->ne[1]));
    return mm_total(&c, nth);
}

static int32_t read_id(const struct lm_tensor *ids, int64_t s, int64_t t)
{
    return *(const int32_t *)lm_cpu_elem(ids, s, t, 0, 0);
}

/* Thread 0: group (slot, token) pairs by expert (counting sort, stable) and
 * zero the output rows of invalid ids. */
static void build_map(const struct mm_map *m, struct lm_tensor *dst, int64_t E)
{
    const struct lm_tensor *ids = dst->src[2];
    const int64_t S = ids->ne[0], T = ids->ne[1];
    memset(m->count, 0, (size_t)E * sizeof(int64_t));
    for (int64_t t = 0; t < T; t++) {
        for (int64_t s = 0; s < S; s++) {
            int32_t e = read_id(ids, s, t);
            if (e >= 0 && e < E) {
                m->count[e]++;
            } else {
                for (int64_t i = 0; i < dst->ne[0]; i++)
                    *(float *)lm_cpu_elem(dst, i, s, t, 0) = 0.0f;
            }
        }
    }
    m->start[0] = 0;
    for (int64_t e = 0; e < E; e++)
        m->start[e + 1] = m->start[e] + m->count[e];
    memset(m->count, 0, (size_t)E * sizeof(int64_t)); /* reused as fill cursors */
    for (int64_t t = 0; t < T; t++) {
        for (int64_t s = 0; s < S; s++) {
            int32_t e = read_id(ids, s, t);
            if (e >= 0 && e < E) {
                int64_t k = m->start[e] + m->count[e]++;
                m->pairs[2 * k] = (int32_t)s;
                m->pairs[2 * k + 1] = (int32_t)t;
            }
        }
    }
}

/* Expert e's tile (weight rows [m0, m1), its pairs [k0, k1)). */
static void mm_id_tile(const struct mm_ctx *c, const struct lm_cpu_params *p, struct lm_tensor *dst,
                       const struct mm_map *m, int64_t e, int64_t m0, int64_t m1, int64_t k0, int64_t k1)
{
    const struct lm_tensor *as = dst->src[0], *b = dst->src[1];
    const void *brows[MM_NB];
    float *outs[MM_NB];
    for (int64_t row = m0; row < m1; row++) {
        int n = 0;
        for (int64_t k = k0; k < k1; k++, n++) {
            const int64_t s = m->pairs[2 * k], t = m->pairs[2 * k + 1];
            brows[n] = mm_brow(c, p, s % b->ne[1], t, 0);
            outs[n] = lm_cpu_elem(dst, row, s, t, 0);
        }
        mm_row(c, p, lm_cpu_elem(as, 0, row, e, 0), brows, outs, n);
    }
}

/* MUL_MAT_ID: convert b and group pairs by expert, barrier, this thread's tiles. */
void lm_cpu_op_mul_mat_id(const struct lm_cpu_params *p, struct lm_tensor *dst)
{
    const struct lm_tensor *as = dst->src[0], *b = dst->src[1], *ids = dst->src[2];
    const int64_t E = as->ne[2], M = as->ne[1];
    struct mm_ctx c;
    mm_init(&c, as, b, p->kern, map_bytes(E, ids->ne[0], ids->ne[1]));
    const struct mm_map m = map_at(&c, p, E);
    if (c.convert)
        mm_convert(&c, p);
    if (p->ith == 0)
        build_map(&m, dst, E);
    lm_cpu_sync(p);

    const int64_t mb = mm_block_m(M, (ids->ne[0] * ids->ne[1] + MM_NB - 1) / MM_NB, p->nth);
    const int64_t nmb = (M + mb - 1) / mb;
    int64_t total = 0;
    for (int64_t e = 0; e < E; e++)
        total += nmb * ((m.start[e + 1] - m.start[e] + MM_NB - 1) / MM_NB);
    int64_t t0, t1;
    lm_cpu_split(total, p->ith, p->nth, &t0, &t1);
    /* walk the experts to the first tile of this thread, then tile by tile */
    int64_t e = 0, base = 0;
    for (int64_t t = t0; t < t1; t++) {
        int64_t nkb;
        while (t >= base + nmb * (nkb = (m.start[e + 1] - m.start[e] + MM_NB - 1) / MM_NB)) {
            base += nmb * nkb;
            e++;
        }
        const int64_t local = t - base, kb = local % nkb, ib = local / nkb;
        const int64_t m0 = ib * mb, m1 = m0 + mb < M ? m0 + mb : M;
        const int64_t k0 = m.start[e] + kb * MM_NB;
        const int64_t k1 = k0 + MM_NB < m.start[e + 1] ? k0 + MM_NB : m.start[e + 1];
        mm_id_tile(&c, p, dst, &m, e, m0, m1, k0, k1);
    }
}
