/* test_cuda_host_elementwise.cu - the per-element math of CUDA's ROPE and
 * ARGSORT kernels (src/cuda/rowmath.cuh), run on the host (no GPU needed)
 * against the ref backend's ROPE and ARGSORT on the same tensors.
 *
 * ROPE: the kernel's pair mapping, YaRN setup and double-precision angles,
 * applied on the host in the kernel's order, must give ref's bits exactly
 * (both modes, partial n_dims, linear scaling and YaRN, positions to 4096).
 * ARGSORT: keys from lm_cu_sort_key sorted by the kernel's bitonic network
 * (lm_cu_bitonic_exchange, run step by step) must give ref's indices exactly,
 * ascending and descending, on rows with many ties, NaN, +-0, infinities and
 * subnormals, padded and unpadded lengths.
 *
 * Prints "FAIL: ..." per mismatch (the first few) and returns 0 when all pass.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "cuda/rowmath.cuh"
#include "backend/backend.h"
#include "ref/ref.h"

static int n_fail, n_pass;

static void fail(const char *what, long long a, long long b)
{
    if (n_fail++ < 20)
        printf("FAIL: %s (%lld, %lld)\n", what, a, b);
}

#define HOST_RNG_SEED 0x5eed5eed12345678ull
#include "host_rng.h"

/* Compute node t (and what it depends on) on the ref backend. */
static bool ref_compute(lm_backend_t ref, struct lm_ctx *ctx, struct lm_tensor *t)
{
    struct lm_graph *g = lm_graph_new(ctx, 16);
    if (!g || lm_graph_expand(g, t) != LM_OK || lm_backend_graph_compute(ref, g) != LM_OK) {
        fail("ref compute", 0, 0);
        return false;
    }
    return true;
}

/* ---- ROPE ---- */

static void check_rope(lm_backend_t ref, struct lm_ctx *ctx)
{
    static const int dims[] = {2, 4, 8, 32, 64, 96, 128};
    static const float bases[] = {10000.0f, 500000.0f, 1e6f};
    static const float fscales[] = {1.0f, 0.5f, 0.25f, 0.125f};
    for (int c = 0; c < 300; c++) {
        lm_ctx_reset(ctx);
        const int d = dims[rng_int(7)], nh = 1 + rng_int(5), nt = 1 + rng_int(7);
        struct lm_tensor *a = lm_new_tensor_3d(ctx, LM_TYPE_F32, d, nh, nt);
        struct lm_tensor *pos = lm_new_tensor_1d(ctx, LM_TYPE_I32, nt);
        if (!a || !pos) {
            fail("rope: arena", c, 0);
            return;
        }
        float *x = (float *)a->data;
        for (int64_t k = 0; k < lm_nelements(a); k++)
            x[k] = rng_uniform(-1.0f, 1.0f);
        int32_t *pp = (int32_t *)pos->data;
        const int max_pos = c % 3 == 0 ? 16 : c % 3 == 1 ? 1024 : 4096;
        for (int k = 0; k < nt; k++)
            pp[k] = rng_int(max_pos);
        struct lm_rope_params p;
        memset(&p, 0, sizeof p);
        p.n_dims = rng_int(3) == 0 ? d : rng_int(2) ? (d >= 4 ? d / 2 / 2 * 2 : d) : 2 * (1 + rng_int(d / 2));
        p.mode = c % 2 ? LM_ROPE_NEOX : LM_ROPE_NORMAL;
        p.n_ctx_orig = rng_int(2) ? 512 : 4096;
        p.freq_base = bases[rng_int(3)];
        p.freq_scale = c % 3 == 0 ? 1.0f : fscales[rng_int(4)];
        p.ext_factor = c % 3 == 2 ? (rng_int(2) ? 1.0f : 0.5f) : 0.0f;
        p.attn_factor = rng_int(2) ? 1.0f : 0.8f;
        p.beta_fast = 32.0f;
        p.beta_slow = 1.0f;
        struct lm_tensor *r = lm_rope(ctx, a, pos, &p);
        if (!r || !ref_compute(ref, ctx, r))
            return;
        /* the kernel's computation, on the host */
        const struct lm_cu_rope_args ra = lm_cu_rope_setup(r);
        const float *want = (const float *)r->data;
        int bad = 0;
        for (int t = 0; t < nt; t++) {
            for (int h = 0; h < nh; h++) {
                const float *row = x + ((int64_t)t * nh + h) * d;
                float out[128];
                memcpy(out, row, (size_t)d * sizeof *out);
                for (int i = 0; i < ra.n_dims / 2; i++) {
                    int j0, j1;
                    double cs, sn;
                    lm_cu_rope_pair(ra, i, &j0, &j1);
                    lm_cu_rope_cos_sin(ra, pp[t], i, &cs, &sn);
                    const double x0 = row[j0], x1 = row[j1];
                    out[j0] = (float)(x0 * cs - x1 * sn);
                    out[j1] = (float)(x0 * sn + x1 * cs);
                }
                bad += memcmp(out, want + ((int64_t)t * nh + h) * d, (size_t)d * sizeof *out) != 0;
            }
        }
        if (bad)
            fail("rope: rows differ from ref (case, rows)", c, bad);
        else
            n_pass++;
    }
}

/* ---- ARGSORT ---- */

/* A value of pattern kind: plain, heavy ties, or specials. */
static float sort_value(int kind)
{
    static const float special[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, -NAN, 1e-45f, -1e-45f, 1e-40f, 1.0f, -1.0f};
    switch (kind) {
    case 0: return rng_uniform(-1.0f, 1.0f);
    case 1: return floorf(rng_uniform(-1.0f, 1.0f) * 3.0f);
    default: return rng_int(3) ? special[rng_int(11)] : rng_uniform(-1.0f, 1.0f);
    }
}

static void check_argsort(lm_backend_t ref, struct lm_ctx *ctx)
{
    static const int lens[] = {1, 2, 3, 7, 31, 32, 33, 100, 1000, 4096, 5000};
    static uint64_t keys[8192];
    for (int c = 0; c < 132; c++) {
        lm_ctx_reset(ctx);
        const int n = lens[c % 11], rows = 1 + rng_int(3), kind = c / 11 % 3;
        const bool desc = c / 33 % 2;
        struct lm_tensor *a = lm_new_tensor_2d(ctx, LM_TYPE_F32, n, rows);
        if (!a) {
            fail("argsort: arena", c, 0);
            return;
        }
        float *x = (float *)a->data;
        for (int64_t k = 0; k < lm_nelements(a); k++)
            x[k] = sort_value(kind);
        struct lm_tensor *r = lm_argsort(ctx, a, desc ? LM_SORT_DESC : LM_SORT_ASC);
        if (!r || !ref_compute(ref, ctx, r))
            return;
        int npad = 1;
        while (npad < n)
            npad *= 2;
        for (int row = 0; row < rows; row++) {
            for (int k = 0; k < npad; k++)
                keys[k] = k < n ? lm_cu_sort_key(x[(int64_t)row * n + k], (uint32_t)k, desc) : UINT64_MAX;
            for (int size = 2; size <= npad; size <<= 1)
                for (int stride = size >> 1; stride > 0; stride >>= 1)
                    for (int q = 0; q < npad / 2; q++)
                        lm_cu_bitonic_exchange(keys, size, stride, q);
            const int32_t *want = (const int32_t *)r->data + (int64_t)row * n;
            int bad = 0;
            for (int k = 0; k < n; k++)
                bad += (int32_t)(uint32_t)keys[k] != want[k];
            if (bad)
                fail("argsort: indices differ from ref (case, count)", c, bad);
            else
                n_pass++;
        }
    }
}

int main(void)
{
    lm_backend_t ref = NULL;
    struct lm_ctx *ctx = NULL;
    const struct lm_ctx_params cp = {(size_t)16 << 20, NULL, false};
    if (lm_ref_backend_new(&ref) != LM_OK || lm_ctx_new(&cp, &ctx) != LM_OK) {
        printf("FAIL: cannot make the ref backend or an arena\n");
        return 1;
    }
    check_rope(ref, ctx);
    check_argsort(ref, ctx);
    lm_ctx_free(ctx);
    lm_backend_free(ref);
    printf("test_cuda_host_elementwise: %d passed, %d failed\n", n_pass, n_fail);
    return n_fail ? 1 : 0;
}
