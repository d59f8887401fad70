/* test_cuda_host_copy.cu - the CUDA copy kernels' per-block math, run on the
 * host (no GPU needed): src/cuda/quantize.cuh's block encoders against
 * quant/'s reference encoders (lm_quant_traits(t)->from_float), and its
 * F16/BF16 element conversions against quant/'s from_float / to_float.
 *
 * CPY into a quantized type is held to bit-identity with the ref backend
 * (tests/ops/test_ops.c), so every byte must match: random rows of several
 * magnitudes, and adversarial blocks (zeros, one nonzero, constants, +/-amax
 * ties in both orders, exact half-way codes, subnormals, values near FLT_MAX
 * whose range overflows, Inf and NaN). The device runs the same functions
 * with __fmul_rn / __fadd_rn / __fdiv_rn in place of the host's operators.
 *
 * Then the addressing of ops_copy.cu's kernels, emulated on the host with the
 * same helpers (elem.cuh's flat offsets, lm_cu_gather32) against the ref
 * backend's CPY: F32 into each quant type, float types into each other, and
 * same-type block copies, over contiguous, transposed, permuted and padded
 * sources and destinations of equal or merged shapes.
 *
 * Prints "FAIL: ..." per mismatch (the first few) and returns 0 when all pass.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/quantize.cuh"
#include "backend/backend.h"
#include "quant/quant.h"
#include "ref/ref.h"

static int n_fail, n_pass;

static void fail(const char *fmt, const char *a, long long b)
{
    if (n_fail++ < 20) {
        fputs("FAIL: ", stdout);
        printf(fmt, a, b);
        fputc('\n', stdout);
    }
}

#define HOST_RNG_SEED 0x1234abcd5678ef01ull
#include "host_rng.h"

/* A random float of any magnitude: sign, exponent 2^-149 .. 2^127. */
static float rng_wide(void)
{
    const float m = rng_uniform(1.0f, 2.0f);
    const float v = ldexpf(m, rng_int(277) - 150);
    return rng_int(2) ? -v : v;
}

#define N_KINDS 18

/* Fill one 32-element block with pattern `kind`. */
static void fill_block(float *x, int kind)
{
    const float s = ldexpf(1.0f, rng_int(40) - 20);
    switch (kind) {
    case 0: /* plain */
        for (int j = 0; j < LM_QK; j++)
            x[j] = rng_uniform(-1.0f, 1.0f);
        break;
    case 1: /* scaled */
        for (int j = 0; j < LM_QK; j++)
            x[j] = rng_uniform(-1.0f, 1.0f) * s;
        break;
    case 2: /* zeros, signed */
        for (int j = 0; j < LM_QK; j++)
            x[j] = rng_int(2) ? 0.0f : -0.0f;
        break;
    case 3: /* one nonzero */
        memset(x, 0, LM_QK * sizeof *x);
        x[rng_int(LM_QK)] = rng_uniform(-2.0f, 2.0f);
        break;
    case 4: { /* a constant (max == min) */
        const float v = rng_uniform(-3.0f, 3.0f);
        for (int j = 0; j < LM_QK; j++)
            x[j] = v;
        break;
    }
    case 5: { /* +amax and -amax both present, random order */
        const float a = rng_uniform(0.1f, 4.0f);
        for (int j = 0; j < LM_QK; j++)
            x[j] = rng_uniform(-a, a);
        const int p = rng_int(LM_QK), q = (p + 1 + rng_int(LM_QK - 1)) % LM_QK;
        x[p] = a;
        x[q] = -a;
        break;
    }
    case 6: /* half-way codes for Q8 (amax 127: d = 1) */
        for (int j = 0; j < LM_QK; j++)
            x[j] = (float)(rng_int(509) - 254) * 0.5f;
        x[rng_int(LM_QK)] = rng_int(2) ? 127.0f : -127.0f;
        break;
    case 7: /* half-way codes for Q4_0 / Q5_0 (amax 8 / 16: |d| = 1), and Q4_1 / Q5_1 steps */
        for (int j = 0; j < LM_QK; j++)
            x[j] = (float)(rng_int(33) - 16) * 0.5f;
        x[rng_int(LM_QK)] = rng_int(2) ? 16.0f : -16.0f;
        break;
    case 8: /* any magnitude */
        for (int j = 0; j < LM_QK; j++)
            x[j] = rng_wide();
        break;
    case 9: /* subnormals */
        for (int j = 0; j < LM_QK; j++)
            x[j] = rng_uniform(-1.0f, 1.0f) * 1e-39f;
        break;
    case 10: /* tiny normals: d below fp16's range */
        for (int j = 0; j < LM_QK; j++)
            x[j] = rng_uniform(-1.0f, 1.0f) * 1e-9f;
        break;
    case 11: /* huge: max - min overflows to inf */
        for (int j = 0; j < LM_QK; j++)
            x[j] = rng_uniform(-1.0f, 1.0f) * 3.4e38f;
        x[0] = 3.4e38f;
        x[1] = -3.4e38f;
        break;
    case 12: /* beyond fp16: d overflows the fp16 scale */
        for (int j = 0; j < LM_QK; j++)
            x[j] = rng_uniform(-1.0f, 1.0f) * 1e7f;
        break;
    case 13: /* an infinity */
        for (int j = 0; j < LM_QK; j++)
            x[j] = rng_uniform(-1.0f, 1.0f);
        x[rng_int(LM_QK)] = rng_int(2) ? INFINITY : -INFINITY;
        break;
    case 14: /* a NaN (first, middle or last: ggml's MAX keeps only a last one) */
        for (int j = 0; j < LM_QK; j++)
            x[j] = rng_uniform(-1.0f, 1.0f);
        x[rng_int(3) == 0 ? 0 : rng_int(2) ? LM_QK - 1 : rng_int(LM_QK)] = NAN;
        break;
    case 15: { /* within a few ulps of a code boundary of one type: amax A, grid step g (Q4_0 A/8, Q5_0 A/16,
                  Q8 A/127, Q4_1 2A/15, Q5_1 2A/31), values on or half-way between grid points, nudged */
        static const float div[] = {8.0f, 16.0f, 127.0f, 7.5f, 15.5f};
        const float a = rng_uniform(0.5f, 4.0f), g = a / div[rng_int(5)];
        for (int j = 0; j < LM_QK; j++) {
            const int lim = (int)(a / g);
            float v = ((float)(rng_int(2 * lim + 1) - lim) + (rng_int(2) ? 0.5f : 0.0f)) * g;
            for (int u = rng_int(7) - 3; u != 0; u += u > 0 ? -1 : 1)
                v = nextafterf(v, u > 0 ? INFINITY : -INFINITY);
            x[j] = v;
        }
        const int p = rng_int(LM_QK), q = (p + 1 + rng_int(LM_QK - 1)) % LM_QK;
        x[p] = rng_int(2) ? a : -a; /* both ends: max - min = 2a, as the grid assumes */
        x[q] = -x[p];
        break;
    }
    case 16: { /* the rounded product x * id (Q4_1, Q5_1: (x - min) * id) of one type lands exactly on a code
                  boundary while the exact product does not: any fused or reordered arithmetic shows */
        static const float div[] = {-8.0f, -16.0f, 15.0f, 31.0f, 127.0f};
        const int t = rng_int(5);
        const bool asym = t == 2 || t == 3;
        const float a = rng_uniform(0.5f, 4.0f), min = asym ? -a : 0.0f;
        const float d = asym ? (a - min) / div[t] : a / div[t], id = 1.0f / d;
        x[0] = a; /* the first absmax (Q4_0, Q5_0), the max; x[1] the min */
        x[1] = -a;
        for (int j = 2; j < LM_QK; j++) {
            float p; /* the boundary: code input k + 0.5 (the add of 8.5 / 16.5 / 0.5 keeps it a boundary) */
            if (asym)
                p = (float)(rng_int((int)div[t])) + 0.5f;
            else if (t == 4)
                p = (float)(rng_int(253) - 126) + 0.5f;
            else
                p = (float)(rng_int(2 * (int)-div[t] - 1) + 1) + div[t] - 0.5f;
            float v = p * d + min;
            for (int u = 0; u < 200; u++) {
                float c = v;
                for (int k = 0; k < u / 2; k++)
                    c = nextafterf(c, u % 2 ? INFINITY : -INFINITY);
                const float base = asym ? c - min : c;
                if (c < -a || c > a || base * id != p || (double)base * (double)id == (double)p)
                    continue;
                v = c;
                break;
            }
            x[j] = v < -a ? -a : v > a ? a : v;
        }
        break;
    }
    default: /* few distinct values: ties everywhere */
        for (int j = 0; j < LM_QK; j++)
            x[j] = (float)(rng_int(5) - 2) * s;
        break;
    }
}

#define BLOCKS_PER_ROW 8
#define N_ROWS 4000

/* Encode N_ROWS rows of BLOCKS_PER_ROW blocks both ways and compare bytes. */
template <class B> static void check_encoder(enum lm_type type, const char *name)
{
    static float row[BLOCKS_PER_ROW * LM_QK];
    static B want[BLOCKS_PER_ROW], got[BLOCKS_PER_ROW];
    const lm_from_float_fn ref = lm_quant_traits(type)->from_float;
    if (!ref) {
        fail("%s: quant/ has no from_float (%lld)", name, 0);
        return;
    }
    for (int r = 0; r < N_ROWS; r++) {
        for (int b = 0; b < BLOCKS_PER_ROW; b++)
            fill_block(row + b * LM_QK, (r * BLOCKS_PER_ROW + b) % N_KINDS);
        memset(want, 0xa5, sizeof want);
        memset(got, 0x5a, sizeof got);
        ref(row, want, BLOCKS_PER_ROW * LM_QK);
        for (int b = 0; b < BLOCKS_PER_ROW; b++)
            quantize_block(row + b * LM_QK, &got[b]);
        for (int b = 0; b < BLOCKS_PER_ROW; b++) {
            if (memcmp(&want[b], &got[b], sizeof(B)) != 0)
                fail("%s: block differs from quant/'s (pattern %lld)", name, (r * BLOCKS_PER_ROW + b) % N_KINDS);
            else
                n_pass++;
        }
    }
}

/* Every fp16 / bf16 bit pattern decodes as quant/'s to_float does, and
 * random plus special floats encode as its from_float does. */
static void check_conversions(void)
{
    const lm_to_float_fn f16_to = lm_quant_traits(LM_TYPE_F16)->to_float;
    const lm_to_float_fn bf16_to = lm_quant_traits(LM_TYPE_BF16)->to_float;
    const lm_from_float_fn f16_from = lm_quant_traits(LM_TYPE_F16)->from_float;
    const lm_from_float_fn bf16_from = lm_quant_traits(LM_TYPE_BF16)->from_float;
    for (uint32_t h = 0; h < 65536; h++) {
        const uint16_t v = (uint16_t)h;
        float want;
        f16_to(&v, &want, 1);
        const float got = lm_cu_f16::to_f(v);
        if (memcmp(&want, &got, sizeof want) != 0)
            fail("%s: f16 decode of 0x%llx differs", "conv", (long long)h);
        bf16_to(&v, &want, 1);
        const float got_b = lm_cu_bf16::to_f(v);
        if (memcmp(&want, &got_b, sizeof want) != 0)
            fail("%s: bf16 decode of 0x%llx differs", "conv", (long long)h);
        n_pass += 2;
    }
    static const float special[] = {0.0f,           -0.0f,          INFINITY,       -INFINITY,      NAN,
                                    -NAN,           65504.0f,       65519.99f,      65520.0f,       -65520.0f,
                                    6.1035156e-05f, 5.9604645e-08f, 2.9802322e-08f, 2.9802326e-08f, 1e-45f,
                                    3.4028235e38f,  1.0009765625f,  1.00048828125f, 1.00146484375f};
    const int n_special = (int)(sizeof special / sizeof special[0]);
    for (int i = 0; i < 2000000; i++) {
        float x;
        if (i < n_special) {
            x = special[i];
        } else if (i % 2) {
            x = rng_wide();
        } else { /* any bit pattern, NaNs with payloads included */
            const uint32_t u = (uint32_t)rng_u64();
            memcpy(&x, &u, sizeof x);
        }
        uint16_t want, got;
        f16_from(&x, &want, 1);
        got = lm_cu_f16::from_f(x);
        if (want != got)
            fail("%s: f16 encode of bits 0x%llx differs", "conv", (long long)lm_f32_bits(x));
        bf16_from(&x, &want, 1);
        got = lm_cu_bf16::from_f(x);
        if (want != got)
            fail("%s: bf16 encode of bits 0x%llx differs", "conv", (long long)lm_f32_bits(x));
        n_pass += 2;
    }
}

/* ---- the copy kernels' addressing against ref's CPY ---- */

enum { LAY_CONT, LAY_TRANSPOSE, LAY_PAD, LAY_PERMUTE, LAY_COUNT };

/* A [ne0..ne3] tensor of type t laid out as lay (TRANSPOSE: non-block types
 * only), its whole root filled with values in [-1, 1] (encoded for quant types). */
static struct lm_tensor *make_tensor(struct lm_ctx *ctx, enum lm_type t, const int64_t ne[4], int lay)
{
    const int64_t blck = lm_type_blck(t);
    int64_t rn[4] = {ne[0], ne[1], ne[2], ne[3]};
    if (lay == LAY_TRANSPOSE) {
        rn[0] = ne[1];
        rn[1] = ne[0];
    } else if (lay == LAY_PAD) {
        rn[0] += blck * (1 + rng_int(2));
        rn[1] += 1;
    } else if (lay == LAY_PERMUTE) {
        rn[1] = ne[2];
        rn[2] = ne[1];
    }
    struct lm_tensor *root = lm_new_tensor_4d(ctx, t, rn[0], rn[1], rn[2], rn[3]);
    if (!root)
        return NULL;
    const int64_t n = lm_nelements(root);
    float *v = (float *)malloc((size_t)n * sizeof *v);
    for (int64_t k = 0; k < n; k++)
        v[k] = rng_uniform(-1.0f, 1.0f);
    if (blck == 1 && t != LM_TYPE_F32)
        lm_quant_traits(t)->from_float(v, root->data, n);
    else if (blck == 1)
        memcpy(root->data, v, (size_t)n * sizeof *v);
    else
        lm_quantize_chunk(t, v, root->data, 0, lm_nrows(root), rn[0], NULL);
    free(v);
    switch (lay) {
    case LAY_TRANSPOSE: return lm_transpose(ctx, root);
    case LAY_PAD:
        return lm_view_4d(ctx, root, ne[0], ne[1], ne[2], ne[3], root->nb[1], root->nb[2], root->nb[3], root->nb[1]);
    case LAY_PERMUTE: return lm_permute(ctx, root, 0, 2, 1, 3);
    default: return root;
    }
}

/* A destination shape with ne's element count: the same, dims 0 and 1
 * merged, or (non-block types) dims 0 and 1 swapped. */
static void dst_shape(const int64_t ne[4], int64_t out[4], bool block)
{
    memcpy(out, ne, 4 * sizeof ne[0]);
    const int k = rng_int(3);
    if (k == 1) {
        out[0] = ne[0] * ne[1];
        out[1] = ne[2];
        out[2] = ne[3];
        out[3] = 1;
    } else if (k == 2 && !block) {
        out[0] = ne[1];
        out[1] = ne[0];
    }
}

static float load_float(enum lm_type t, const char *p)
{
    switch (t) {
    case LM_TYPE_F32: return lm_cu_f32::to_f(*(const float *)p);
    case LM_TYPE_F16: return lm_cu_f16::to_f(*(const lm_fp16 *)p);
    default: return lm_cu_bf16::to_f(*(const lm_bf16 *)p);
    }
}

/* The bytes k_convert would store for value f into type t. */
static uint32_t stored_bits(enum lm_type t, float f)
{
    switch (t) {
    case LM_TYPE_F32: return lm_f32_bits(lm_cu_f32::from_f(f));
    case LM_TYPE_F16: return lm_cu_f16::from_f(f);
    default: return lm_cu_bf16::from_f(f);
    }
}

static uint32_t load_bits(enum lm_type t, const char *p)
{
    return t == LM_TYPE_F32 ? *(const uint32_t *)p : *(const uint16_t *)p;
}

/* One CPY of src (type ts) into dst (type td) on ref, and the CUDA path's
 * emulation reading ref's result where the kernel would have written. */
template <class B> static bool emulate_quantize(const struct lm_tensor *src, const struct lm_tensor *out)
{
    const int64_t n_blocks = lm_nelements(out) / LM_QK;
    struct lm_cu_shape ds = lm_cu_shape_of(out);
    ds.ne[0] /= LM_QK;
    const struct lm_cu_shape ss = lm_cu_shape_of(src);
    const bool narrow = lm_cu_narrow(lm_nelements(src));
    for (int64_t kb = 0; kb < n_blocks; kb++) {
        float x[LM_QK];
        lm_cu_gather32((const char *)src->data, ss, lm_cu_is_flat(src), kb * LM_QK, narrow, x);
        B blk;
        quantize_block(x, &blk);
        if (memcmp(&blk, (const char *)out->data + lm_cu_flat_offset(ds, kb, narrow), sizeof blk) != 0)
            return false;
    }
    return true;
}

static bool emulate(const struct lm_tensor *src, const struct lm_tensor *out)
{
    const bool narrow = lm_cu_narrow(lm_nelements(src));
    const struct lm_cu_shape ss = lm_cu_shape_of(src), ds = lm_cu_shape_of(out);
    if (src->type == out->type) { /* k_copy_units over elements (blocks), 2-byte units */
        struct lm_cu_shape sb = ss, db = ds;
        sb.ne[0] /= lm_type_blck(src->type);
        db.ne[0] /= lm_type_blck(out->type);
        const int64_t n = lm_nelements(src) / lm_type_blck(src->type);
        for (int64_t e = 0; e < n; e++)
            if (memcmp((const char *)src->data + lm_cu_flat_offset(sb, e, narrow),
                       (const char *)out->data + lm_cu_flat_offset(db, e, narrow), lm_type_size(src->type)) != 0)
                return false;
        return true;
    }
    switch (out->type) {
    case LM_TYPE_Q4_0: return emulate_quantize<struct lm_block_q4_0>(src, out);
    case LM_TYPE_Q4_1: return emulate_quantize<struct lm_block_q4_1>(src, out);
    case LM_TYPE_Q5_0: return emulate_quantize<struct lm_block_q5_0>(src, out);
    case LM_TYPE_Q5_1: return emulate_quantize<struct lm_block_q5_1>(src, out);
    case LM_TYPE_Q8_0: return emulate_quantize<struct lm_block_q8_0>(src, out);
    case LM_TYPE_Q8_1: return emulate_quantize<struct lm_block_q8_1>(src, out);
    default: break;
    }
    const bool s_flat = lm_cu_is_flat(src), d_flat = lm_cu_is_flat(out); /* k_convert */
    const int64_t es = (int64_t)lm_type_size(src->type), ed = (int64_t)lm_type_size(out->type);
    for (int64_t k = 0; k < lm_nelements(src); k++) {
        const int64_t so = s_flat ? k * es : lm_cu_flat_offset(ss, k, narrow);
        const int64_t dof = d_flat ? k * ed : lm_cu_flat_offset(ds, k, narrow);
        const float f = load_float(src->type, (const char *)src->data + so);
        if (stored_bits(out->type, f) != load_bits(out->type, (const char *)out->data + dof))
            return false;
    }
    return true;
}

static void check_cpy_case(lm_backend_t ref, struct lm_ctx *ctx, enum lm_type ts, enum lm_type td, int c)
{
    lm_ctx_reset(ctx);
    const int64_t blck = lm_type_blck(ts) > lm_type_blck(td) ? lm_type_blck(ts) : lm_type_blck(td);
    const bool block = blck != 1;
    int64_t ne[4] = {block ? blck * (1 + rng_int(3)) : 1 + rng_int(40), 1 + rng_int(5), 1 + rng_int(3), 1 + rng_int(2)};
    int64_t nd[4];
    dst_shape(ne, nd, block);
    if (ts == LM_TYPE_F32 && lm_type_blck(td) != 1 && rng_int(2)) {
        /* the source as [r0, r1, N / (r0 r1 r3), r3] with r0 r1 < 32: blocks straddle its rows and planes */
        static const int64_t a[] = {1, 2, 4, 8, 16};
        const int64_t n = ne[0] * ne[1] * ne[2] * ne[3], r0 = a[rng_int(5)], r1 = r0 < 16 ? 1 + rng_int(2) : 1;
        const int64_t r3 = n / (r0 * r1) % 2 == 0 && rng_int(2) ? 2 : 1;
        ne[0] = r0;
        ne[1] = r1;
        ne[2] = n / (r0 * r1 * r3);
        ne[3] = r3;
    }
    /* a quantized source must be contiguous; a quantized destination needs packed rows */
    const int ls = lm_type_blck(ts) != 1 ? LAY_CONT : rng_int(LAY_COUNT);
    const int ld = lm_type_blck(td) != 1 ? (rng_int(2) ? LAY_PAD : LAY_CONT) : rng_int(LAY_COUNT);
    struct lm_tensor *src = make_tensor(ctx, ts, ne, ls), *dst = make_tensor(ctx, td, nd, ld);
    struct lm_tensor *r = src && dst ? lm_cpy(ctx, src, dst) : NULL;
    struct lm_graph *g = r ? lm_graph_new(ctx, 16) : NULL;
    if (!g || lm_graph_expand(g, r) != LM_OK || lm_backend_graph_compute(ref, g) != LM_OK) {
        fail("cpy %s: cannot build or compute on ref (case %lld)", lm_type_name(td), c);
        return;
    }
    if (!emulate(src, r))
        fail("cpy into %s: the kernels' addressing differs from ref (case %lld)", lm_type_name(td), c);
    else
        n_pass++;
}

static void check_cpy(void)
{
    lm_backend_t ref = NULL;
    struct lm_ctx *ctx = NULL;
    const struct lm_ctx_params cp = {(size_t)16 << 20, NULL, false};
    if (lm_ref_backend_new(&ref) != LM_OK || lm_ctx_new(&cp, &ctx) != LM_OK) {
        fail("%s: cannot make the ref backend or an arena (%lld)", "cpy", 0);
        return;
    }
    static const enum lm_type fl[] = {LM_TYPE_F32, LM_TYPE_F16, LM_TYPE_BF16};
    static const enum lm_type q[] = {LM_TYPE_Q4_0, LM_TYPE_Q4_1, LM_TYPE_Q5_0, LM_TYPE_Q5_1,
                                     LM_TYPE_Q8_0, LM_TYPE_Q8_1, LM_TYPE_Q4_K, LM_TYPE_Q6_K};
    int c = 0;
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++)
            for (int k = 0; k < 40; k++)
                check_cpy_case(ref, ctx, fl[i], fl[j], c++);
    for (int t = 0; t < 8; t++)
        for (int k = 0; k < 40; k++) /* into the type from F32 (legacy types), and the type into itself */
            check_cpy_case(ref, ctx, t < 6 && k % 2 ? LM_TYPE_F32 : q[t], q[t], c++);
    lm_ctx_free(ctx);
    lm_backend_free(ref);
}

int main(void)
{
    check_encoder<struct lm_block_q4_0>(LM_TYPE_Q4_0, "q4_0");
    check_encoder<struct lm_block_q4_1>(LM_TYPE_Q4_1, "q4_1");
    check_encoder<struct lm_block_q5_0>(LM_TYPE_Q5_0, "q5_0");
    check_encoder<struct lm_block_q5_1>(LM_TYPE_Q5_1, "q5_1");
    check_encoder<struct lm_block_q8_0>(LM_TYPE_Q8_0, "q8_0");
    check_encoder<struct lm_block_q8_1>(LM_TYPE_Q8_1, "q8_1");
    check_conversions();
    check_cpy();
    printf("test_cuda_host_copy: %d passed, %d failed\n", n_pass, n_fail);
    return n_fail ? 1 : 0;
}
