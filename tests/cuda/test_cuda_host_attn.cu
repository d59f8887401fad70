/* test_cuda_host_attn.cu - the math of the CUDA ATTN kernels
 * (src/cuda/ops_attn.cu) run on the host, no GPU needed.
 *
 * The file includes ops_attn.cu and calls the same __host__ __device__
 * functions its kernels call (attn_stats_merge, attn_score, attn_prob,
 * attn_round, attn_slope) plus its host planning (attn_plan_of,
 * lm_cu_supports_attn). It checks:
 *   - attn_slope against ref's formula (ref/ops_attention.c alibi_slope,
 *     transcribed: bit-equal) and the CPU's float one (lm_cpu_alibi_slope
 *     of cpu/ops/ops.h, called; its powf of a rounded m0 errs by up to
 *     ~(h + 1) 2^-24, so to 1e-5);
 *   - attn_round against core/fp16.h's conversions;
 *   - attn_stats_merge: random score sets cut into random pieces (empty and
 *     all-hidden ones included), merged left to right and as a tree, against
 *     the max and sum of e^(s - max) (to 1e-13: the statistics are doubles);
 *   - whole ATTN nodes (random q, k, v, masks of every kind the ops test
 *     draws, ALiBi on 5 heads, GQA, F32/F16/BF16 k and v, odd d and d_v)
 *     computed as the prefill kernel computes them (32-cell tiles, pass 1
 *     merging per-tile statistics, pass 2 the rounded normalised p) and as
 *     the split-K decode kernels do (chunks, per-chunk statistics merged in
 *     chunk order, partial rows summed), against ref's attention in double
 *     (attn_row transcribed): nmse <= 1e-11 (the ops test allows 1e-9), and
 *     exact zeros for rows whose mask is all -inf;
 *   - attn_plan_of's chunking, the kernels' shared memory sizes (and the
 *     most each prefill instance is allowed) and what lm_cu_supports_attn
 *     refuses on devices with more and less shared memory per block.
 * It also prints, for the record, how far two designs the kernels do not use
 * would be from ref: a one-pass online softmax that rounds unnormalised
 * probabilities (why two passes) and float scores (why doubles). Prints
 * "FAIL: ..." per failure; exits 1 if any. About 7 s (-O2).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/ops_attn.cu"
#include "cpu/ops/ops.h" /* lm_cpu_alibi_slope */
#include "quant/quant.h"

#define B_ATTN 1e-9 /* tests/ops/test_ops.c */
/* What double scores give: p is ref's to ~1e-15, so an F16/BF16 rounding of
 * p practically never differs from ref's, and only the float P.V sums remain
 * (seen 2.7e-13 with 700-cell float sums). Float scores would flip roundings
 * now and then (see the record printed by test_nodes). */
#define B_TIGHT 1e-11
#define N_CASES 600

#include "host_check.h"

/* ---- random numbers (xorshift64*, fixed seed) ---- */

static uint64_t rng = 0x2545f4914f6cdd1dull;

static uint32_t rnd(void)
{
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return (uint32_t)((rng * 0x2545f4914f6cdd1dull) >> 32);
}

static int rint_(int n) { return (int)(rnd() % (uint32_t)n); }
static float frand(float lo, float hi) { return lo + (hi - lo) * (float)(rnd() >> 8) * (1.0f / 16777216.0f); }

static const char *tname(enum lm_type t) { return t == LM_TYPE_F16 ? "f16" : t == LM_TYPE_BF16 ? "bf16" : "f32"; }

/* ---- ref's formulas, transcribed (ref/ops_attention.c) ---- */

static double ref_slope(double max_bias, int64_t n_head, int64_t h)
{
    if (max_bias <= 0.0)
        return 1.0;
    int64_t n = 1;
    while (n * 2 <= n_head)
        n *= 2;
    const double m0 = pow(2.0, -max_bias / (double)n);
    const double m1 = pow(2.0, -max_bias / 2.0 / (double)n);
    return h < n ? pow(m0, (double)(h + 1)) : pow(m1, (double)(2 * (h - n) + 1));
}

static double ref_round(enum lm_type t, double x)
{
    const float f = (float)x;
    switch (t) {
    case LM_TYPE_F16: return lm_fp16_to_fp32(lm_fp32_to_fp16(f));
    case LM_TYPE_BF16: return lm_bf16_to_fp32(lm_fp32_to_bf16(f));
    default: return f;
    }
}

/* ---- slopes, rounding, statistics ---- */

static void test_slope(void)
{
    static const float biases[] = {0.0f, 0.5f, 1.0f, 2.5f, 8.0f, 16.0f};
    int n = 0;
    for (int b = 0; b < (int)(sizeof biases / sizeof biases[0]); b++)
        for (int64_t nh = 1; nh <= 64; nh++)
            for (int64_t h = 0; h < nh; h++) {
                const double s = attn_slope(biases[b], nh, h), r = ref_slope(biases[b], nh, h);
                const float c = lm_cpu_alibi_slope(biases[b], nh, h);
                CHECK(s == r, "slope(%g, %lld, %lld) = %.17g, ref %.17g", biases[b], (long long)nh, (long long)h, s, r);
                CHECK(fabs((float)s - c) <= 1e-5 * fabs(c), "slope(%g, %lld, %lld) = %.9g, cpu %.9g", biases[b],
                      (long long)nh, (long long)h, (float)s, c);
                n++;
            }
    printf("slopes: %d checked against ref (bit-equal) and the cpu (1e-5)\n", n);
}

static void test_round(void)
{
    for (int it = 0; it < 100000; it++) {
        const float x = ldexpf(frand(-1.0f, 1.0f), rint_(60) - 40);
        CHECK(attn_round(LM_TYPE_F32, x) == x, "round f32 %g", x);
        CHECK(attn_round(LM_TYPE_F16, x) == lm_fp16_to_fp32(lm_fp32_to_fp16(x)), "round f16 %g", x);
        CHECK(attn_round(LM_TYPE_BF16, x) == lm_bf16_to_fp32(lm_fp32_to_bf16(x)), "round bf16 %g", x);
        if (n_fail)
            return;
    }
    CHECK(attn_score(NAN, 1.0f, 1.0, -INFINITY) == -INFINITY, "a hidden cell's score must be -inf whatever K holds");
    CHECK(attn_prob(-INFINITY, attn_stats{-INFINITY, 0.0}, LM_TYPE_F16) == 0.0f, "p of a hidden cell must be 0");
}

/* The statistics of s[0..n) in one go (what a tile or chunk computes). */
static struct attn_stats stats_of(const double *s, int n)
{
    struct attn_stats t = {-INFINITY, 0.0};
    for (int j = 0; j < n; j++)
        t.m = fmax(t.m, s[j]);
    for (int j = 0; j < n; j++)
        t.l += s[j] == -INFINITY ? 0.0 : exp(s[j] - t.m);
    return t;
}

/* Merge pieces [lo, hi) as a balanced tree. */
static struct attn_stats merge_tree(const struct attn_stats *p, int lo, int hi)
{
    if (hi - lo == 1)
        return p[lo];
    const int mid = (lo + hi) / 2;
    return attn_stats_merge(merge_tree(p, lo, mid), merge_tree(p, mid, hi));
}

static void test_merge(void)
{
    enum { N = 3000 };
    static double s[N];
    static struct attn_stats piece[N + 1];
    double worst = 0.0;
    for (int it = 0; it < 400; it++) {
        const int n = 1 + rint_(N);
        const float spread = it % 4 == 0 ? 100.0f : it % 4 == 1 ? 1.0f : 20.0f;
        const int hidden = rint_(4); /* 0: none, 1: some, 2: many, 3: all */
        for (int j = 0; j < n; j++) {
            const bool hide = hidden == 3 || (hidden == 1 && rint_(10) == 0) || (hidden == 2 && rint_(10) != 0);
            s[j] = hide ? -INFINITY : (double)frand(-spread, spread) * (1.0 + 1e-9 * frand(-1.0f, 1.0f));
        }
        double m = -INFINITY, l = 0.0;
        for (int j = 0; j < n; j++)
            m = s[j] > m ? s[j] : m;
        for (int j = 0; j < n; j++)
            l += s[j] == -INFINITY ? 0.0 : exp((double)s[j] - m);
        /* random pieces, some empty */
        int n_piece = 0;
        for (int j0 = 0; j0 < n;) {
            const int len = rint_(5) == 0 ? 0 : 1 + rint_(300);
            const int j1 = j0 + len < n ? j0 + len : n;
            piece[n_piece++] = stats_of(s + j0, j1 - j0);
            j0 = j1;
        }
        struct attn_stats seq = {-INFINITY, 0.0};
        for (int p = 0; p < n_piece; p++)
            seq = attn_stats_merge(seq, piece[p]);
        const struct attn_stats tree = merge_tree(piece, 0, n_piece);
        const struct attn_stats res[2] = {seq, tree};
        for (int r = 0; r < 2; r++) {
            if (m == -INFINITY) {
                CHECK(res[r].m == -INFINITY && res[r].l == 0.0, "merge of all-hidden scores: (%g, %g)", res[r].m,
                      res[r].l);
                continue;
            }
            const double e = fabs(res[r].l - l) / l;
            worst = e > worst ? e : worst;
            CHECK(res[r].m == m && e <= 1e-13, "merge (%s, n %d): (%.17g, %.17g), want (%.17g, %.17g)",
                  r ? "tree" : "in order", n, res[r].m, res[r].l, m, l);
        }
    }
    printf("stats merge: 400 score sets, worst relative error of the sum %.3g\n", worst);
}

/* ---- whole nodes ---- */

/* One ATTN node on the host: q [n_head][n_q][d] (the values as F32), k
 * [n_head_kv][n_kv][d] and v [n_head_kv][d_v][n_kv] (values representable in
 * kt / vt), mask [n_q][n_kv] or NULL. Outputs [n_q][n_head][d_v]. */
struct node {
    int d, d_v, n_q, n_head, n_head_kv, n_kv, mask_kind;
    enum lm_type kt, vt;
    float scale, max_bias;
    float *q, *k, *v, *mask;
};

static float qv(const struct node *t, int h, int i, int c) { return t->q[((size_t)h * t->n_q + i) * t->d + c]; }
static float kv(const struct node *t, int g, int j, int c) { return t->k[((size_t)g * t->n_kv + j) * t->d + c]; }
static float vv(const struct node *t, int g, int c, int j) { return t->v[((size_t)g * t->d_v + c) * t->n_kv + j]; }
static float mv(const struct node *t, int i, int j) { return t->mask ? t->mask[(size_t)i * t->n_kv + j] : 0.0f; }
static size_t out_at(const struct node *t, int i, int h, int c) { return ((size_t)i * t->n_head + h) * t->d_v + c; }

/* ref/ops_attention.c's attn_row in double. */
static void ref_node(const struct node *t, double *out)
{
    double *qr = (double *)malloc(sizeof(double) * t->d), *s = (double *)malloc(sizeof(double) * t->n_kv);
    const int ratio = t->n_head / t->n_head_kv;
    for (int i = 0; i < t->n_q; i++)
        for (int h = 0; h < t->n_head; h++) {
            const int g = h / ratio;
            const double slope = ref_slope(t->max_bias, t->n_head, h);
            for (int c = 0; c < t->d; c++)
                qr[c] = ref_round(t->kt, qv(t, h, i, c));
            double max = -INFINITY, sum = 0.0;
            int visible = 0;
            for (int j = 0; j < t->n_kv; j++) {
                const double m = mv(t, i, j);
                s[j] = -INFINITY;
                if (m == -INFINITY)
                    continue;
                double dot = 0.0;
                for (int c = 0; c < t->d; c++)
                    dot += kv(t, g, j, c) * qr[c];
                s[j] = dot * t->scale + slope * m;
                max = s[j] > max ? s[j] : max;
                visible++;
            }
            for (int j = 0; j < t->n_kv; j++) {
                s[j] = s[j] == -INFINITY ? 0.0 : exp(s[j] - max);
                sum += s[j];
            }
            for (int j = 0; j < t->n_kv; j++)
                s[j] = ref_round(t->vt, s[j] / sum);
            for (int c = 0; c < t->d_v; c++) {
                double acc = 0.0;
                for (int j = 0; visible > 0 && j < t->n_kv; j++)
                    acc += vv(t, g, c, j) * s[j];
                out[out_at(t, i, h, c)] = acc;
            }
        }
    free(qr);
    free(s);
}

/* The score of cell j for (i, h) as the kernels compute it (the dot of the
 * rounded q row qr with k in double), or (in_float) as a float kernel would:
 * dot, scale and mask term in float. */
static double score(const struct node *t, const float *qr, int g, int i, int j, double slope, bool in_float)
{
    const float m = mv(t, i, j);
    if (m == -INFINITY)
        return -INFINITY;
    if (in_float) {
        float dot = 0.0f;
        for (int c = 0; c < t->d; c++)
            dot = fmaf(kv(t, g, j, c), qr[c], dot);
        return fmaf((float)slope, m, dot * t->scale);
    }
    double dot = 0.0;
    for (int c = 0; c < t->d; c++)
        dot = fma((double)kv(t, g, j, c), (double)qr[c], dot);
    return attn_score(dot, t->scale, slope, m);
}

enum emu_mode {
    EMU_PREFILL, /* the prefill kernel: PF_BK-cell tiles, one accumulator */
    EMU_DECODE,  /* the split-K kernels: chunks, partial rows summed in order */
    EMU_ONLINE,  /* for the record: one pass, p rounded before the final max and sum */
    EMU_FLOAT,   /* for the record: as EMU_PREFILL with float scores */
};

/* One node as the kernels compute it (mode), chunk cells per decode block. */
static void emu_node(const struct node *t, enum emu_mode mode, int chunk, float *out)
{
    const int ratio = t->n_head / t->n_head_kv, n_kv = t->n_kv, step = mode == EMU_DECODE ? chunk : PF_BK;
    const int n_steps = (n_kv + step - 1) / step;
    float *qr = (float *)malloc(sizeof(float) * t->d), *acc = (float *)malloc(sizeof(float) * t->d_v);
    float *part = (float *)malloc(sizeof(float) * (size_t)t->d_v * n_steps);
    double *s = (double *)malloc(sizeof(double) * n_kv);
    for (int i = 0; i < t->n_q; i++)
        for (int h = 0; h < t->n_head; h++) {
            const int g = h / ratio;
            const double slope = attn_slope(t->max_bias, t->n_head, h);
            for (int c = 0; c < t->d; c++)
                qr[c] = attn_round(t->kt, qv(t, h, i, c));
            for (int j = 0; j < n_kv; j++)
                s[j] = score(t, qr, g, i, j, slope, mode == EMU_FLOAT);
            for (int c = 0; c < t->d_v; c++)
                acc[c] = 0.0f;
            /* pass 1 / kernel 1: per tile or chunk statistics, merged in order
             * (online: the accumulator rescaled at each step instead) */
            struct attn_stats st = {-INFINITY, 0.0};
            for (int b = 0; b < n_steps; b++) {
                const int j0 = b * step, n = n_kv - j0 < step ? n_kv - j0 : step;
                const struct attn_stats next = attn_stats_merge(st, stats_of(s + j0, n));
                if (mode == EMU_ONLINE && next.m != -INFINITY) {
                    const float alpha = st.m == -INFINITY ? 0.0f : (float)exp(st.m - next.m);
                    for (int c = 0; c < t->d_v; c++) {
                        acc[c] *= alpha;
                        for (int j = j0; j < j0 + n; j++)
                            if (s[j] != -INFINITY)
                                acc[c] = fmaf(attn_round(t->vt, (float)exp(s[j] - next.m)), vv(t, g, c, j), acc[c]);
                    }
                }
                st = next;
            }
            if (mode == EMU_ONLINE) {
                for (int c = 0; c < t->d_v; c++)
                    out[out_at(t, i, h, c)] = st.m == -INFINITY ? 0.0f : (float)(acc[c] / st.l);
                continue;
            }
            /* pass 2 / kernel 2: rounded normalised p times v, per tile or chunk */
            for (int b = 0; b < n_steps; b++) {
                const int j0 = b * step, n = n_kv - j0 < step ? n_kv - j0 : step;
                for (int c = 0; c < t->d_v; c++) {
                    float a = mode == EMU_DECODE ? 0.0f : acc[c];
                    for (int j = j0; j < j0 + n; j++) {
                        const float p = attn_prob(s[j], st, t->vt);
                        if (p != 0.0f)
                            a = fmaf(p, vv(t, g, c, j), a);
                    }
                    if (mode == EMU_DECODE)
                        part[(size_t)b * t->d_v + c] = a;
                    else
                        acc[c] = a;
                }
            }
            /* kernel 3: partial rows summed in chunk order */
            for (int c = 0; c < t->d_v; c++) {
                if (mode == EMU_DECODE) {
                    acc[c] = 0.0f;
                    for (int b = 0; b < n_steps; b++)
                        acc[c] += part[(size_t)b * t->d_v + c];
                }
                out[out_at(t, i, h, c)] = acc[c];
            }
        }
    free(qr);
    free(acc);
    free(part);
    free(s);
}

/* Masks as the ops test draws them (kind: 0 none, 1 causal, 2 alibi-style
 * distances, 3 random, 4 windows with holes, 5 as 4 with rows all hidden). */
static void fill_mask(struct node *t)
{
    if (t->mask_kind == 0) {
        t->mask = NULL;
        return;
    }
    t->mask = (float *)malloc(sizeof(float) * (size_t)t->n_q * t->n_kv);
    for (int i = 0; i < t->n_q; i++) {
        const int pos = t->n_kv - t->n_q + i; /* the query's cell: the prompt at the end of the cache */
        const int lo = rint_(t->n_kv), hi = lo + 1 + rint_(t->n_kv - lo);
        const bool all_hidden = t->mask_kind == 5 && rint_(3) == 0;
        for (int j = 0; j < t->n_kv; j++) {
            float m = 0.0f;
            switch (t->mask_kind) {
            case 1: m = j <= pos ? 0.0f : -INFINITY; break;
            case 2: m = j <= pos ? -fabsf((float)(pos - j)) : -INFINITY; break;
            case 3: m = rint_(4) == 0 ? -INFINITY : frand(-2.0f, 0.0f); break;
            default: m = j >= lo && j < hi && rint_(5) != 0 ? 0.0f : -INFINITY; break;
            }
            t->mask[(size_t)i * t->n_kv + j] = all_hidden ? -INFINITY : m;
        }
    }
}

static double nmse(const float *x, const double *ref, size_t n)
{
    double num = 0.0, den = 0.0;
    for (size_t e = 0; e < n; e++) {
        num += (x[e] - ref[e]) * (x[e] - ref[e]);
        den += ref[e] * ref[e];
    }
    return den > 0.0 ? num / den : num;
}

static void test_nodes(void)
{
    static const int ds[] = {1, 7, 8, 33, 64, 80, 96, 128, 256};
    static const int nqs[] = {1, 1, 3, 4, 7, 33};
    static const int kvs[] = {1, 32, 33, 100, 256, 700};
    static const enum lm_type types[] = {LM_TYPE_F32, LM_TYPE_F16, LM_TYPE_BF16};
    double worst[2] = {0.0, 0.0}, worst_online[3] = {0.0, 0.0, 0.0}, worst_float = 0.0;
    int n_cases = 0, n_float_over = 0;
    for (int it = 0; it < N_CASES; it++) {
        struct node t;
        memset(&t, 0, sizeof t);
        t.kt = types[it % 3];
        t.vt = it % 12 == 11 ? types[rint_(3)] : types[it / 3 % 3];
        t.d = ds[rint_(9)];
        t.d_v = rint_(3) ? t.d : ds[rint_(9)];
        t.n_q = nqs[rint_(6)];
        t.n_kv = kvs[rint_(6)];
        t.mask_kind = it % 6;
        t.n_head_kv = 1 + rint_(2);
        t.n_head = t.n_head_kv * (rint_(2) ? 4 : 1);
        t.max_bias = 0.0f;
        if (t.mask_kind == 2 || (t.mask_kind && it % 8 == 7)) { /* ALiBi on 5 heads: the m1 branch */
            t.n_head = 5;
            t.n_head_kv = rint_(2) ? 5 : 1;
            t.max_bias = rint_(2) ? 8.0f : 2.5f;
        }
        t.scale = rint_(3) ? 1.0f / sqrtf((float)t.d) : rint_(2) ? 1.0f : 0.3f;
        while ((double)t.n_q * t.n_head * t.n_kv * (t.d + t.d_v) > 3e6 && t.n_q > 1)
            t.n_q = t.n_q > 4 ? 4 : 1;
        const size_t nq = (size_t)t.n_head * t.n_q * t.d, nk = (size_t)t.n_head_kv * t.n_kv * t.d;
        const size_t nv = (size_t)t.n_head_kv * t.d_v * t.n_kv, no = (size_t)t.n_q * t.n_head * t.d_v;
        t.q = (float *)malloc(sizeof(float) * nq);
        t.k = (float *)malloc(sizeof(float) * nk);
        t.v = (float *)malloc(sizeof(float) * nv);
        for (size_t e = 0; e < nq; e++)
            t.q[e] = frand(-1.0f, 1.0f);
        for (size_t e = 0; e < nk; e++)
            t.k[e] = attn_round(t.kt, frand(-1.0f, 1.0f));
        for (size_t e = 0; e < nv; e++)
            t.v[e] = attn_round(t.vt, frand(-1.0f, 1.0f));
        fill_mask(&t);

        double *ref = (double *)malloc(sizeof(double) * no);
        float *out = (float *)malloc(sizeof(float) * no);
        ref_node(&t, ref);
        const struct attn_plan plan = attn_plan_of(t.n_q, t.n_head, t.n_kv, 1 + rint_(132));
        const int chunks[2] = {DC_MIN_CHUNK, plan.decode ? (int)plan.chunk : DC_MAX_CHUNK};
        static const enum emu_mode ways[5] = {EMU_PREFILL, EMU_DECODE, EMU_DECODE, EMU_ONLINE, EMU_FLOAT};
        for (int way = 0; way < 5; way++) {
            const enum emu_mode mode = ways[way];
            const int chunk = mode == EMU_DECODE ? chunks[way == 2] : PF_BK;
            emu_node(&t, mode, chunk, out);
            const double e = nmse(out, ref, no);
            const int vi = t.vt == LM_TYPE_F32 ? 0 : t.vt == LM_TYPE_F16 ? 1 : 2;
            if (mode == EMU_ONLINE) {
                worst_online[vi] = fmax(worst_online[vi], e);
                continue;
            }
            if (mode == EMU_FLOAT) {
                worst_float = fmax(worst_float, e);
                n_float_over += e > B_ATTN;
                continue;
            }
            worst[mode] = fmax(worst[mode], e);
            CHECK(e <= B_TIGHT,
                  "%s (chunk %d) d %d d_v %d n_q %d heads %d/%d n_kv %d k %s v %s mask %d bias %g: nmse %.3g",
                  mode == EMU_DECODE ? "decode" : "prefill", chunk, t.d, t.d_v, t.n_q, t.n_head, t.n_head_kv, t.n_kv,
                  tname(t.kt), tname(t.vt), t.mask_kind, t.max_bias, e);
            for (int i = 0; i < t.n_q; i++) { /* rows with every cell hidden: exact zeros */
                bool hidden = t.mask != NULL;
                for (int j = 0; hidden && j < t.n_kv; j++)
                    hidden = t.mask[(size_t)i * t.n_kv + j] == -INFINITY;
                for (int h = 0; hidden && h < t.n_head; h++)
                    for (int c = 0; c < t.d_v; c++)
                        CHECK(out[out_at(&t, i, h, c)] == 0.0f, "all-hidden row %d head %d: %g", i, h,
                              out[out_at(&t, i, h, c)]);
            }
        }
        n_cases++;
        free(ref);
        free(out);
        free(t.q);
        free(t.k);
        free(t.v);
        free(t.mask);
        if (n_fail > 20)
            break;
    }
    printf("nodes: %d cases, worst nmse against ref: prefill %.3g, decode %.3g (checked <= %g; ops test bound %g)\n",
           n_cases, worst[0], worst[1], B_TIGHT, B_ATTN);
    printf("  for the record, not used: one pass rounding unnormalised p: worst nmse (v f32 / f16 / bf16) "
           "%.3g / %.3g / %.3g;\n  float scores: worst nmse %.3g, %d of %d cases over %g\n",
           worst_online[0], worst_online[1], worst_online[2], worst_float, n_float_over, n_cases, B_ATTN);
}

/* ---- planning, shared memory, supports ---- */

static void test_plan(void)
{
    static const int64_t nqs[] = {1, 2, 4, 5, 64}, heads[] = {1, 5, 32, 128}, kvs[] = {1, 100, 4096, 32768, 1 << 20};
    static const int sms[] = {1, 108, 132};
    for (int a = 0; a < 5; a++)
        for (int b = 0; b < 4; b++)
            for (int c = 0; c < 5; c++)
                for (int s = 0; s < 3; s++) {
                    const struct attn_plan p = attn_plan_of(nqs[a], heads[b], kvs[c], sms[s]);
                    if (nqs[a] > DC_MAX_Q) {
                        CHECK(!p.decode, "plan: %lld queries must take the prefill kernel", (long long)nqs[a]);
                        continue;
                    }
                    if (!p.decode) {
                        CHECK(nqs[a] * heads[b] * kvs[c] * 8 > DC_MAX_SCORE_BYTES ||
                                  (kvs[c] + DC_MAX_CHUNK - 1) / DC_MAX_CHUNK > DC_MAX_CHUNKS,
                              "plan: %lld x %lld x %lld should decode", (long long)nqs[a], (long long)heads[b],
                              (long long)kvs[c]);
                        continue;
                    }
                    CHECK(p.chunk >= DC_MIN_CHUNK && p.chunk <= DC_MAX_CHUNK && (p.chunk & (p.chunk - 1)) == 0 &&
                              p.n_chunks == (kvs[c] + p.chunk - 1) / p.chunk && p.n_chunks <= DC_MAX_CHUNKS,
                          "plan: chunk %lld x %lld for %lld cells", (long long)p.chunk, (long long)p.n_chunks,
                          (long long)kvs[c]);
                    CHECK(p.chunk == DC_MIN_CHUNK ||
                              nqs[a] * heads[b] * ((kvs[c] + p.chunk / 2 - 1) / (p.chunk / 2)) >
                                  (int64_t)DC_BLOCKS_PER_SM * sms[s] ||
                              (kvs[c] + p.chunk / 2 - 1) / (p.chunk / 2) > DC_MAX_CHUNKS,
                          "plan: chunk %lld larger than needed", (long long)p.chunk);
                }
    /* an empty cache: no chunks to launch (a grid of 0 blocks is an error) */
    CHECK(!attn_plan_of(1, 32, 0, 132).decode, "plan: %s", "0 cells must take the prefill kernel");
    const struct attn_plan p = attn_plan_of(1, 32, 4096, 132); /* a decode step: 32 heads, 4096 cells, H100 */
    CHECK(p.decode && p.chunk == 128 && p.n_chunks == 32, "plan: decode 32 heads x 4096 cells: chunk %lld",
          (long long)p.chunk);
    printf("plan: 1 x 32 heads x 4096 cells on 132 SMs -> %lld chunks of %lld cells\n", (long long)p.n_chunks,
           (long long)p.chunk);
}

static void test_smem(void)
{
    size_t most = 0;
    for (int d = 1; d <= ATTN_MAX_D; d++) {
        struct attn_args a;
        memset(&a, 0, sizeof a);
        a.d = a.d_v = d;
        a.d2 = (d + 1) / 2 * 2;
        a.ks = pf_k_stride(a.d2);
        CHECK((a.ks / 2) % 2 == 1 && a.ks >= a.d2, "K tile stride %d for d %d", a.ks, d);
        const int nt = (d + 31) / 32, nt_used = nt <= 4 ? nt : nt <= 6 ? 6 : 8;
        CHECK(pf_nt(d) == nt_used, "prefill instance for d_v %d: NT %d, want %d", d, pf_nt(d), nt_used);
        const size_t s = pf_smem(a, nt_used);
        most = s > most ? s : most;
        /* lm_cu_attn_init lets each instance use pf_smem_max: every d with that instance's d_v must fit */
        for (int dq = 1; dq <= ATTN_MAX_D; dq += 17) {
            const struct attn_args b = pf_dims(dq, d);
            CHECK(pf_smem(b, nt_used) <= pf_smem_max(nt_used), "prefill d %d, d_v %d: %zu bytes over NT %d's %zu", dq,
                  d, pf_smem(b, nt_used), nt_used, pf_smem_max(nt_used));
        }
        /* decode: q and a chunk of scores in doubles */
        CHECK((size_t)(d + DC_MAX_CHUNK) * sizeof(double) <= 48 * 1024, "decode shared memory for d %d", d);
    }
    CHECK(most <= 163 * 1024, "prefill shared memory %zu bytes: over sm_80's 163 KB per block", most);
    CHECK(most == pf_smem_max(8), "pf_smem_max(8) %zu, the largest %zu", pf_smem_max(8), most);
    printf("shared memory: prefill at most %zu bytes (d = d_v = 256)\n", most);
}

static void test_supports(void)
{
    /* H100 (sm_90: 227 KB per block); an sm_86 GPU opts into 99 KB only */
    const struct lm_cu_limits h100 = {132, 227 * 1024}, sm86 = {84, 99 * 1024};
    static struct lm_tensor q, k, v, t;
    q.type = LM_TYPE_F32;
    k.type = LM_TYPE_F16;
    v.type = LM_TYPE_BF16;
    t.op = LM_OP_ATTN;
    t.src[0] = &q;
    t.src[1] = &k;
    t.src[2] = &v;
    const int64_t qn[4] = {128, 7, 32, 1}, kn[4] = {128, 4096, 8, 1}, vn[4] = {4096, 128, 8, 1};
    memcpy(q.ne, qn, sizeof qn);
    memcpy(k.ne, kn, sizeof kn);
    memcpy(v.ne, vn, sizeof vn);
    CHECK(lm_cu_supports_attn(&h100, &t), "supports: d 128");
    CHECK(lm_cu_supports_attn(&sm86, &t), "supports: d 128 (65 KB of prefill shared memory) on sm_86");
    q.ne[0] = k.ne[0] = 256;
    v.ne[1] = 256;
    CHECK(lm_cu_supports_attn(&h100, &t), "supports: d 256");
    /* 7 queries take the prefill kernel: 128.5 KB does not fit 99 KB; one query takes the decode kernels */
    CHECK(!lm_cu_supports_attn(&sm86, &t), "supports: d 256 prefill on sm_86 must be refused");
    q.ne[1] = 1;
    CHECK(lm_cu_supports_attn(&sm86, &t), "supports: d 256 decode on sm_86");
    /* ... unless its scores would not fit the decode scratch */
    k.ne[1] = v.ne[0] = (DC_MAX_SCORE_BYTES / 8) / 32 + 1;
    CHECK(!attn_plan_of(1, 32, k.ne[1], sm86.n_sm).decode && !lm_cu_supports_attn(&sm86, &t),
          "supports: d 256 with a cache too long to decode on sm_86 must be refused");
    CHECK(lm_cu_supports_attn(&h100, &t), "supports: d 256 with a long cache on H100");
    k.ne[1] = v.ne[0] = 4096;
    q.ne[1] = 7;
    q.ne[0] = k.ne[0] = 128; /* d_v 256, d 128: 65 KB */
    CHECK(lm_cu_supports_attn(&sm86, &t), "supports: d 128, d_v 256 prefill on sm_86");
    q.ne[0] = k.ne[0] = 256; /* d_v 64, d 256: the q rows and K tile alone take 128.5 KB */
    v.ne[1] = 64;
    CHECK(!lm_cu_supports_attn(&sm86, &t), "supports: d 256, d_v 64 prefill on sm_86 must be refused");
    q.ne[0] = k.ne[0] = 257;
    CHECK(!lm_cu_supports_attn(&h100, &t), "supports: d 257 must be refused");
    q.ne[0] = k.ne[0] = 64;
    v.ne[1] = 320;
    CHECK(!lm_cu_supports_attn(&h100, &t), "supports: d_v 320 must be refused");
    v.ne[1] = 64;
    k.type = LM_TYPE_Q8_0;
    CHECK(lm_cu_supports_attn(&h100, &t), "supports: a Q8_0 k (d 64)");
    q.ne[0] = k.ne[0] = 48;
    CHECK(!lm_cu_supports_attn(&h100, &t), "supports: a Q8_0 k with d 48 (not whole blocks) must be refused");
    q.ne[0] = k.ne[0] = 64;
    k.type = LM_TYPE_Q4_0;
    CHECK(!lm_cu_supports_attn(&h100, &t), "supports: a Q4_0 k must be refused");
    k.type = LM_TYPE_Q8_0;
    v.type = LM_TYPE_Q8_0;
    CHECK(!lm_cu_supports_attn(&h100, &t), "supports: a Q8_0 v in the transposed layout must be refused");
    /* V rows per cell (lm_attn_vrows): v [d_v, n_kv, n_head_kv] */
    lm_set_op_i32(&t, 2, 1);
    v.ne[0] = 64, v.ne[1] = 4096;
    CHECK(lm_cu_supports_attn(&h100, &t), "supports: Q8_0 V rows (d_v 64)");
    v.ne[0] = 320;
    CHECK(!lm_cu_supports_attn(&h100, &t), "supports: V rows with d_v 320 must be refused");
    v.ne[0] = 64;
    v.type = LM_TYPE_Q4_0;
    CHECK(!lm_cu_supports_attn(&h100, &t), "supports: Q4_0 V rows must be refused");
    v.type = LM_TYPE_F16;
    CHECK(lm_cu_supports_attn(&h100, &t), "supports: F16 V rows");
    lm_set_op_i32(&t, 2, 0);
}

/* The Q8_0 pieces against quant/: attn_q8_round gives ref's round_q (the
 * encoder's blocks decoded) bit for bit, attn_row_elem<Q8_0> the decoder's
 * floats, over random blocks at several magnitudes and blocks with zeros,
 * ties and subnormal scales. */
static void test_q8(void)
{
    static const float mags[] = {1.0f, 1e-3f, 300.0f, 1e-7f, 0.0f, 2.5f};
    for (int c = 0; c < 600; c++) {
        float x[LM_QK], want[LM_QK];
        const float mag = mags[c % 6];
        for (int j = 0; j < LM_QK; j++)
            x[j] = c % 7 == 3 && j % 3 == 0 ? 0.5f * mag : mag * frand(-1.0f, 1.0f);
        struct lm_block_q8_0 b;
        lm_quant_traits(LM_TYPE_Q8_0)->from_float(x, &b, LM_QK);
        lm_quant_traits(LM_TYPE_Q8_0)->to_float(&b, want, LM_QK);
        double got[LM_QK];
        attn_q8_round(x, got);
        int bad = 0;
        for (int j = 0; j < LM_QK; j++) {
            bad += got[j] != (double)want[j];
            bad += attn_row_elem<LM_TYPE_Q8_0>((const char *)&b, j) != want[j];
        }
        CHECK(bad == 0, "q8: block %d (magnitude %g): %d values differ from quant/'s", c, mag, bad);
    }
}

int main(void)
{
    test_slope();
    test_round();
    test_q8();
    test_merge();
    test_plan();
    test_smem();
    test_supports();
    test_nodes();
    if (n_fail) {
        printf("test_cuda_host_attn: %d failures\n", n_fail);
        return 1;
    }
    printf("test_cuda_host_attn: ok\n");
    return 0;
}
