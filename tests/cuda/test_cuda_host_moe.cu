/* test_cuda_host_moe.cu - the grouped MUL_MAT_ID path of the CUDA backend
 * (src/cuda/ops_moe.cu: batches of more than 8 tokens) run on the host,
 * no GPU needed.
 *
 * The file includes ops_moe.cu (its functions become this program's own;
 * ops_matmul.cu's, lm_cu_matmul_capturable and lm_cu_f16_chunk among them,
 * come from lm_cuda, whose ops_moe.cu object is then never linked in) and
 * emulates its kernels with the same __host__ __device__ index helpers they
 * call (moe_bucket, moe_warp_range, moe_warp_starts, moe_offsets,
 * moe_lane_pos, moe_b_off, moe_d_off) on the moe_map the host code builds
 * from the node (moe_map_of):
 *   - k_moe_group, warp by warp with the lanes of a warp in lockstep
 *     (__match_any_sync as the mask of lanes with the same bucket), with the
 *     warp count the kernel gets and with 1 and a random count: the offsets
 *     must be the per-expert counts summed, the list every pair exactly once,
 *     by expert and, within an expert, in pair order (ids out of range last);
 *   - k_moe_gather, one GEMM per expert over its columns (in double, as ref
 *     sums), k_moe_scatter: the result must equal the ref backend's
 *     MUL_MAT_ID bit for bit (F32 weights), zero rows for ids out of range
 *     included, and every output written.
 * The MMQ path (quantized weights, 9 to 64 tokens): k_moe_group as above,
 * k_moe_mmq_pack's values, every block of k_moe_mmq run phase by phase with
 * mmq.cuh's functions (mmq_block's loop, then moe_mmq_store) and
 * k_moe_zero_bad, against ref's MUL_MAT_ID: normalised MSE within 1e-3
 * (F16 weights and activations; test_ops' bound), every output written
 * once (a NaN canary), zeros for ids out of range; Q4_0, Q8_0, Q4_K and Q6_K
 * weights, 1 to 64 experts, 1 to 4 slots, K up to 1024, M up to 40.
 * Cases: 1 to 1000 experts (some never picked), 1 to 6 slots (an expert may
 * repeat within a token), 1 to 300 tokens, b shared by the slots or one per
 * slot, b and ids contiguous or transposed, about one id in eight out of
 * range (-1, n_expert, far off) in a third of the cases. Also the host
 * choices: lm_cu_moe_grouped and lm_cu_matmul_capturable by token count, the
 * grouping kernel's warps within 48 KB of shared memory, lm_cu_f16_chunk's
 * pieces.
 * Prints "FAIL: ..." per failure (the first few); exits 1 if any.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/ops_moe.cu"
#include "backend/backend.h"
#include "quant/quant.h"
#include "ref/ref.h"

#include "host_mmq.h"

static int n_fail, n_pass;

#define CHECK(cond, ...)                                                                                               \
    do {                                                                                                               \
        if (!(cond)) {                                                                                                 \
            if (n_fail++ < 20) {                                                                                       \
                printf("FAIL: ");                                                                                      \
                printf(__VA_ARGS__);                                                                                   \
                printf("\n");                                                                                          \
            }                                                                                                          \
        } else {                                                                                                       \
            n_pass++;                                                                                                  \
        }                                                                                                              \
    } while (0)

#define HOST_RNG_SEED 0x6d6f65b0a7c3e219ull
#include "host_rng.h"

/* ---- the kernels, emulated ---- */

/* k_moe_group with nw warps: the same phases, each run to the end (the
 * kernel's __syncthreads) before the next. */
static void emulate_group(const moe_map &m, int nw, int *off, int *list)
{
    const int nb = m.n_expert + 1;
    int *sh = (int *)calloc(moe_group_smem(nw, nb) / sizeof(int), sizeof(int));
    int *cnt = sh, *tot = sh + nw * nb, *soff = tot + nb;
    for (int w = 0; w < nw; w++) {
        int r0, r1;
        moe_warp_range(m.n_pairs, w, nw, &r0, &r1);
        for (int i = r0; i < r1; i++)
            cnt[w * nb + moe_bucket(m, i)]++;
    }
    for (int b = 0; b < nb; b++)
        tot[b] = moe_warp_starts(cnt + b, nb, nw);
    moe_offsets(tot, nb, soff);
    for (int i = 0; i <= nb; i++)
        off[i] = soff[i];
    for (int i = 0; i < nw * nb; i++)
        cnt[i] += soff[i % nb];
    for (int w = nw - 1; w >= 0; w--) { /* warps in any order: each owns its starts */
        int r0, r1, *start = cnt + w * nb;
        moe_warp_range(m.n_pairs, w, nw, &r0, &r1);
        for (int i0 = r0; i0 < r1; i0 += 32) {
            int b[32];
            unsigned peers[32] = {};
            for (int lane = 0; lane < 32; lane++)
                b[lane] = i0 + lane < r1 ? moe_bucket(m, i0 + lane) : -1;
            for (int lane = 0; lane < 32; lane++)
                for (int l2 = 0; l2 < 32; l2++)
                    peers[lane] |= (unsigned)(b[l2] == b[lane]) << l2;
            for (int lane = 0; lane < 32; lane++)
                if (b[lane] >= 0)
                    list[moe_lane_pos(start[b[lane]], peers[lane], lane)] = i0 + lane;
            for (int lane = 0; lane < 32; lane++)
                if (b[lane] >= 0 && lane == __builtin_ctz(peers[lane]))
                    start[b[lane]] += __builtin_popcount(peers[lane]);
        }
    }
    free(sh);
}

/* k_moe_gather (as floats), the per-expert GEMMs (weights as [K, M, E] F32,
 * contiguous) and k_moe_scatter into out (dst's layout). */
static void emulate_products(const moe_map &m, const float *b, const float *as, const int *off, const int *list,
                             float *out)
{
    const int n = off[m.n_expert];
    float *x = (float *)malloc((size_t)(n * m.K + 1) * sizeof(float));
    float *y = (float *)malloc((size_t)(n * m.M + 1) * sizeof(float));
    for (int j = 0; j < n; j++) {
        const float *src = b + moe_b_off(m, list[j]);
        for (int64_t k = 0; k < m.K; k++)
            x[j * m.K + k] = src[k * m.b_s0];
    }
    for (int e = 0; e < m.n_expert; e++)
        for (int j = off[e]; j < off[e + 1]; j++)
            for (int64_t r = 0; r < m.M; r++) {
                double sum = 0.0;
                for (int64_t k = 0; k < m.K; k++)
                    sum += (double)as[(e * m.M + r) * m.K + k] * x[j * m.K + k];
                y[j * m.M + r] = (float)sum;
            }
    for (int j = 0; j < m.n_pairs; j++) {
        float *o = out + moe_d_off(m, list[j]);
        for (int64_t r = 0; r < m.M; r++)
            o[r] = j < n ? y[j * m.M + r] : 0.0f;
    }
    free(x);
    free(y);
}

/* ---- cases ---- */

/* The expected grouping by a plain loop: counts per bucket summed, then the
 * pairs of each bucket in order. */
static void plain_group(const moe_map &m, int *off, int *list)
{
    const int nb = m.n_expert + 1;
    int pos = 0;
    for (int bk = 0; bk < nb; bk++) {
        off[bk] = pos;
        for (int t = 0; t < m.n_pairs / m.n_used; t++)
            for (int s = 0; s < m.n_used; s++) {
                const int64_t e = m.ids[s * m.id_s0 + t * m.id_s1];
                if ((e >= 0 && e < m.n_expert ? e : m.n_expert) == bk)
                    list[pos++] = s + m.n_used * t;
            }
    }
    off[nb] = pos;
}

static struct lm_tensor *new_input(struct lm_ctx *ctx, int64_t ne0, int64_t ne1, int64_t ne2, bool transposed)
{
    struct lm_tensor *t = transposed ? lm_new_tensor_3d(ctx, LM_TYPE_F32, ne1, ne0, ne2)
                                     : lm_new_tensor_3d(ctx, LM_TYPE_F32, ne0, ne1, ne2);
    if (t)
        for (int64_t i = 0; i < lm_nelements(t); i++)
            ((float *)t->data)[i] = rng_uniform(-1.0f, 1.0f);
    return t && transposed ? lm_transpose(ctx, t) : t;
}

static void check_case(lm_backend_t ref, struct lm_ctx *ctx, int c)
{
    static const int es[] = {1, 2, 3, 5, 8, 16, 64, 300, 1000};
    static const int ts[] = {1, 8, 9, 10, 13, 16, 33, 64, 100, 300};
    lm_ctx_reset(ctx);
    const int E = es[rng_int(c % 10 == 9 ? 9 : 8)], n_used = 1 + rng_int(6), T = ts[rng_int(10)];
    const int64_t K = 1 + rng_int(40), M = 1 + rng_int(20), B1 = rng_int(2) ? n_used : 1;
    const bool bad = c % 3 == 0;
    const int n_pick = rng_int(2) ? E : 1 + rng_int(E); /* ids from the first n_pick experts */
    struct lm_tensor *as = new_input(ctx, K, M, E, false);
    struct lm_tensor *b = new_input(ctx, K, B1, T, rng_int(2));
    const bool ids_t = rng_int(2);
    struct lm_tensor *ids =
        ids_t ? lm_new_tensor_2d(ctx, LM_TYPE_I32, T, n_used) : lm_new_tensor_2d(ctx, LM_TYPE_I32, n_used, T);
    if (!as || !b || !ids) {
        CHECK(false, "case %d: arena", c);
        return;
    }
    for (int64_t i = 0; i < lm_nelements(ids); i++) {
        int32_t v = rng_int(n_pick);
        if (bad && rng_int(8) == 0)
            v = rng_int(3) == 0 ? -1 : rng_int(2) ? E : E + 1000;
        ((int32_t *)ids->data)[i] = v;
    }
    if (ids_t)
        ids = lm_transpose(ctx, ids);
    struct lm_tensor *dst = lm_mul_mat_id(ctx, as, b, ids);
    struct lm_graph *g = dst ? lm_graph_new(ctx, 16) : NULL;
    if (!g || lm_graph_expand(g, dst) != LM_OK || lm_backend_graph_compute(ref, g) != LM_OK) {
        CHECK(false, "case %d: ref compute", c);
        return;
    }
    CHECK(lm_cu_moe_grouped(dst) == (T > MV_MAX_N) && lm_cu_matmul_capturable(dst, true) == (T <= MV_MAX_N),
          "case %d: %d tokens: grouped %d, decode %d", c, T, (int)lm_cu_moe_grouped(dst),
          (int)lm_cu_matmul_capturable(dst, true));
    const moe_map m = moe_map_of(dst);
    const int nb = E + 1, P = n_used * T, nw = moe_group_warps(nb);
    int *off = (int *)malloc((size_t)(nb + 1) * sizeof(int)), *want_off = (int *)malloc((size_t)(nb + 1) * sizeof(int));
    int *list = (int *)malloc((size_t)P * sizeof(int)), *want_list = (int *)malloc((size_t)P * sizeof(int));
    float *out = (float *)malloc((size_t)lm_nelements(dst) * sizeof(float));
    plain_group(m, want_off, want_list);
    const int nws[3] = {nw, 1, 1 + rng_int(16)};
    for (int k = 0; k < 3; k++) {
        for (int i = 0; i < P; i++)
            list[i] = -1;
        emulate_group(m, nws[k], off, list);
        CHECK(!memcmp(off, want_off, (size_t)(nb + 1) * sizeof(int)) &&
                  !memcmp(list, want_list, (size_t)P * sizeof(int)),
              "case %d: %d experts, %d x %d pairs, %d warps: grouping differs from the plain loop", c, E, n_used, T,
              nws[k]);
    }
    for (int64_t i = 0; i < lm_nelements(dst); i++)
        out[i] = NAN;
    emulate_products(m, (const float *)b->data, (const float *)as->data, off, list, out);
    CHECK(!memcmp(out, dst->data, (size_t)lm_nelements(dst) * sizeof(float)),
          "case %d: %d experts, K %lld, M %lld, %d x %d pairs, b1 %lld: products differ from ref", c, E, (long long)K,
          (long long)M, n_used, T, (long long)B1);
    free(off);
    free(want_off);
    free(list);
    free(want_list);
    free(out);
}

/* k_moe_mmq<T, BN>, every block, phase by phase; then k_moe_zero_bad. */
template <int T, int BN>
static void emulate_moe_mmq(const moe_map &m, const uint8_t *a, int64_t a_nb1, int64_t a_nb2, const __half *x,
                            int64_t Kp, const int *off, const int *list, float *dst)
{
    static mmq_smem sm;
    for (int e = 0; e < m.n_expert; e++)
        for (int by = 0; by < (m.n_pairs + BN - 1) / BN; by++) {
            const int c0 = off[e] + by * BN, c1 = off[e + 1];
            if (c0 >= c1)
                continue;
            for (int64_t m0 = 0; m0 < m.M; m0 += MMQ_BM) {
                emulate_mmq_block<T, BN>(a + e * a_nb2, a_nb1, m.K, m.M, m0, x + (int64_t)c0 * Kp, Kp, &sm);
                for (int tid = 0; tid < MMQ_THREADS; tid++)
                    moe_mmq_store<BN>(m, list, dst, sm.c, m0, c0, c1, tid);
            }
        }
    for (int j = off[m.n_expert]; j < m.n_pairs; j++)
        for (int64_t k = 0; k < m.M; k++)
            dst[moe_d_off(m, list[j]) + k] = 0.0f;
}

template <int T> static void check_mmq_case(lm_backend_t ref, struct lm_ctx *ctx, int c)
{
    using Q = dq<T>;
    const enum lm_type type = (enum lm_type)T;
    static const int es[] = {1, 2, 3, 8, 16, 64};
    lm_ctx_reset(ctx);
    const int E = es[rng_int(6)], n_used = 1 + rng_int(4), T_ = 9 + rng_int(56);
    const int64_t K = Q::QK * (1 + rng_int(Q::QK == 32 ? 32 : 4)), M = 1 + rng_int(40);
    const int64_t B1 = rng_int(2) ? n_used : 1;
    const bool bad = c % 3 == 0;
    struct lm_tensor *as = lm_new_tensor_3d(ctx, type, K, M, E);
    struct lm_tensor *b = new_input(ctx, K, B1, T_, rng_int(2));
    struct lm_tensor *ids = lm_new_tensor_2d(ctx, LM_TYPE_I32, n_used, T_);
    if (!as || !b || !ids) {
        CHECK(false, "mmq case %d: arena", c);
        return;
    }
    float *src = (float *)malloc(sizeof(float) * K * M * E);
    for (int64_t i = 0; i < K * M * E; i++)
        src[i] = rng_uniform(-1.0f, 1.0f);
    lm_quantize_chunk(type, src, as->data, 0, M * E, K, NULL);
    free(src);
    for (int64_t i = 0; i < lm_nelements(ids); i++) {
        int32_t v = rng_int(E);
        if (bad && rng_int(8) == 0)
            v = rng_int(2) ? -1 : E;
        ((int32_t *)ids->data)[i] = v;
    }
    struct lm_tensor *dst = lm_mul_mat_id(ctx, as, b, ids);
    struct lm_graph *g = dst ? lm_graph_new(ctx, 16) : NULL;
    if (!g || lm_graph_expand(g, dst) != LM_OK || lm_backend_graph_compute(ref, g) != LM_OK) {
        CHECK(false, "mmq case %d: ref compute", c);
        return;
    }
    CHECK(lm_cu_moe_mmq_ok(dst), "mmq case %d: %s, %d tokens: lm_cu_moe_mmq_ok refuses", c, lm_type_name(type), T_);
    const moe_map m = moe_map_of(dst);
    const int nb = E + 1, P = m.n_pairs, bn = moe_mmq_bn(m);
    int *off = (int *)malloc((size_t)(nb + 1) * sizeof(int)), *list = (int *)malloc((size_t)P * sizeof(int));
    emulate_group(m, moe_group_warps(nb), off, list);
    const int64_t Kp = mmq_round_up(K, MMQ_BK), total = Kp * (P + bn), n_out = lm_nelements(dst);
    __half *x = (__half *)malloc(sizeof(__half) * total);
    for (int64_t i = 0; i < total; i++)
        x[i] = moe_mmq_packed_value(m, (const float *)b->data, off, list, Kp, i);
    float *out = (float *)malloc(sizeof(float) * n_out);
    for (int64_t i = 0; i < n_out; i++)
        out[i] = NAN;
    const uint8_t *wd = (const uint8_t *)as->data;
    const int64_t nb1 = (int64_t)as->nb[1], nb2 = (int64_t)as->nb[2];
    switch (bn) {
    case 16: emulate_moe_mmq<T, 16>(m, wd, nb1, nb2, x, Kp, off, list, out); break;
    case 32: emulate_moe_mmq<T, 32>(m, wd, nb1, nb2, x, Kp, off, list, out); break;
    default: emulate_moe_mmq<T, 64>(m, wd, nb1, nb2, x, Kp, off, list, out); break;
    }
    double err = 0.0, energy = 0.0;
    int64_t unwritten = 0;
    for (int64_t i = 0; i < n_out; i++) {
        const double want = ((const float *)dst->data)[i];
        unwritten += isnan(out[i]);
        err += (out[i] - want) * (out[i] - want);
        energy += want * want;
    }
    const double nmse = energy > 0 ? err / energy : err;
    CHECK(unwritten == 0 && nmse <= 1e-3, "mmq case %d: %s, %d experts, K %lld, M %lld, %d x %d pairs, bn %d: %lld "
          "unwritten, nmse vs ref %.3g (bound 1e-3)", c, lm_type_name(type), E, (long long)K, (long long)M, n_used,
          T_, bn, (long long)unwritten, nmse);
    free(off);
    free(list);
    free(x);
    free(out);
}

/* moe_group_warps: 16 warps where they fit, else the most that do, none
 * where one does not; lm_cu_moe_grouped refuses the latter. lm_cu_f16_chunk:
 * pieces of at most GEMM_CHUNK bytes (or one row) covering the weights. */
static void check_sizes(void)
{
    for (int64_t nb = 2; nb < 6000; nb += 1 + nb / 8) {
        const int nw = moe_group_warps(nb);
        const bool fits = nw > 0 && moe_group_smem(nw, nb) <= MOE_SMEM_MAX;
        const bool most = nw == 16 || moe_group_smem(2 * nw, nb) > MOE_SMEM_MAX;
        CHECK(nw == 0 ? moe_group_smem(1, nb) > MOE_SMEM_MAX : fits && most, "group warps for %lld buckets: %d",
              (long long)nb, nw);
    }
    static const int64_t ks[] = {0, 1, 32, 4096, 14336, 1 << 26}, ms[] = {1, 7, 768, 14336};
    for (int i = 0; i < 6; i++)
        for (int j = 0; j < 4; j++)
            for (int64_t a2 = 1; a2 <= 256; a2 *= 4) {
                int64_t mt, na;
                lm_cu_f16_chunk(ks[i], ms[j], a2, &mt, &na);
                const bool ok = mt >= 1 && mt <= ms[j] && na >= 1 && na <= a2 && (na == 1 || mt == ms[j]) &&
                                ((size_t)(ks[i] * mt * na * 2) <= GEMM_CHUNK || (mt == 1 && na == 1));
                CHECK(ok, "lm_cu_f16_chunk(%lld, %lld, %lld) = %lld rows, %lld slices", (long long)ks[i],
                      (long long)ms[j], (long long)a2, (long long)mt, (long long)na);
            }
}

int main(void)
{
    lm_backend_t ref = NULL;
    struct lm_ctx *ctx = NULL;
    const struct lm_ctx_params cp = {(size_t)32 << 20, NULL, false};
    if (lm_ref_backend_new(&ref) != LM_OK || lm_ctx_new(&cp, &ctx) != LM_OK) {
        printf("FAIL: cannot make the ref backend or an arena\n");
        return 1;
    }
    check_sizes();
    for (int c = 0; c < 400; c++)
        check_case(ref, ctx, c);
    for (int c = 0; c < 40; c++) {
        switch (c % 4) {
        case 0: check_mmq_case<LM_TYPE_Q4_0>(ref, ctx, c); break;
        case 1: check_mmq_case<LM_TYPE_Q8_0>(ref, ctx, c); break;
        case 2: check_mmq_case<LM_TYPE_Q4_K>(ref, ctx, c); break;
        default: check_mmq_case<LM_TYPE_Q6_K>(ref, ctx, c); break;
        }
    }
    lm_ctx_free(ctx);
    lm_backend_free(ref);
    printf("test_cuda_host_moe: %d passed, %d failed\n", n_pass, n_fail);
    return n_fail ? 1 : 0;
}
