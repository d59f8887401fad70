/* iq2_quant.c - the IQ2_XXS / IQ2_XS quantizers (importance weights required),
 * the algorithm of the seed (llama.cpp b1892, quantize_row_iq2_{xxs,xs}_impl):
 *
 *   per 256-element super-block, sigma2 = mean of x^2; per group (32 elements
 *   for IQ2_XXS, 16 for IQ2_XS) weights w = imatrix * sqrt(sigma2 + x^2);
 *   each octet takes |x| and its sign pattern, with the least important sign
 *   flipped when the count of minus signs is odd (the format stores 7 signs);
 *   19 trial scales (5 + 0.1 s) / max, s = -9..9: round every |x| to a digit
 *   0..2 (values 1, 3, 5), and an octet that is not a lattice point takes the
 *   best (w-weighted) of its precomputed neighbours; keep the trial with the
 *   best weighted least-squares fit, re-project the off-lattice octets at the
 *   fitted scale and refit. The group scales become 4-bit steps of
 *   max_scale / 31. IQ2_XXS then re-picks every octet's grid point (all 256)
 *   at its stored scale and refits the super-block's d.
 *
 * Every float expression is evaluated in the seed's order without FMA
 * (internal.h), so the bytes match b1892's. Where the seed reads state left
 * over from the previous group (a group whose trials never fit, e.g. all
 * weights zero) the same state is carried here per row, starting from zeros.
 *
 * The lattice tables (digit map, neighbour lists) are built once per type on
 * first use (pthread_once; a few ms), then read-only: thread-safe.
 * The neighbours of a non-lattice point p (digits 0..2; digit 3 never occurs)
 * are the lattice points at the two smallest squared distances from p, in
 * order of (distance, index) - the seed's list.
 */
#include <float.h>
#include <pthread.h>
#include <stdlib.h>

#include "quant/internal.h"
#include "quant/iq2.h"
#include "quant/iq2_codes.h"

#define KMAP_SIZE 43692 /* one past the largest code (0xaaaa), as the seed's map */

#define IQ2_CODE(c) (c),
static const uint16_t codes_xxs[256] = {LM_IQ2XXS_CODES(IQ2_CODE)};
static const uint16_t codes_xs[512] = {LM_IQ2XS_CODES(IQ2_CODE)};

struct lattice {
    int size;                /* 256 or 512 */
    const uint16_t *codes;
    int8_t q[512][8];        /* quantizer values 1, 3, 5 per coordinate */
    int32_t map[KMAP_SIZE];  /* code -> grid index, or -(offset + 1) into nb; INT32_MIN: not built */
    uint16_t *nb;            /* at offset: count, then that many grid indices */
    bool ok;
};

static struct lattice lat_xxs = {.size = 256, .codes = codes_xxs};
static struct lattice lat_xs = {.size = 512, .codes = codes_xs};
static pthread_once_t once_xxs = PTHREAD_ONCE_INIT;
static pthread_once_t once_xs = PTHREAD_ONCE_INIT;

static int dist2(const int8_t *a, const int8_t *b)
{
    int d = 0;
    for (int i = 0; i < 8; i++)
        d += (a[i] - b[i]) * (a[i] - b[i]);
    return d;
}

/* The two smallest distinct squared distances from p to the lattice. */
static void two_nearest(const struct lattice *lt, const int8_t *p, int *d1, int *d2)
{
    int a = INT32_MAX, b = INT32_MAX;
    for (int j = 0; j < lt->size; j++) {
        const int d = dist2(lt->q[j], p);
        if (d < a) {
            b = a;
            a = d;
        } else if (d > a && d < b) {
            b = d;
        }
    }
    *d1 = a;
    *d2 = b;
}

static void code_point(int code, int8_t *p)
{
    for (int i = 0; i < 8; i++)
        p[i] = (int8_t)(2 * ((code >> (2 * i)) & 3) + 1);
}

static bool code_valid(int code)
{
    for (int i = 0; i < 8; i++)
        if (((code >> (2 * i)) & 3) == 3)
            return false;
    return true;
}

/* Two passes over the non-lattice codes: count the list sizes, then fill. */
static void build(struct lattice *lt)
{
    for (int j = 0; j < lt->size; j++)
        code_point(lt->codes[j], lt->q[j]);
    for (int i = 0; i < KMAP_SIZE; i++)
        lt->map[i] = INT32_MIN;
    for (int j = 0; j < lt->size; j++)
        lt->map[lt->codes[j]] = j;
    size_t total = 0;
    for (int pass = 0; pass < 2; pass++) {
        size_t off = 0;
        for (int c = 0; c < KMAP_SIZE; c++) {
            if (!code_valid(c) || (lt->map[c] >= 0))
                continue;
            int8_t p[8];
            int d1, d2;
            code_point(c, p);
            two_nearest(lt, p, &d1, &d2);
            size_t n = 0;
            for (int want = 0; want < 2; want++) {
                const int dw = want ? d2 : d1;
                for (int j = 0; j < lt->size; j++) {
                    if (dist2(lt->q[j], p) != dw)
                        continue;
                    n++;
                    if (pass)
                        lt->nb[off + n] = (uint16_t)j;
                }
            }
            if (pass) {
                lt->nb[off] = (uint16_t)n;
                lt->map[c] = -(int32_t)off - 1;
            }
            off += n + 1;
        }
        if (!pass) {
            total = off;
            lt->nb = malloc(total * sizeof *lt->nb);
            if (!lt->nb)
                return;
        }
    }
    lt->ok = true;
}

static void build_xxs(void) { build(&lat_xxs); }
static void build_xs(void) { build(&lat_xs); }

static const struct lattice *lattice_for(bool xs)
{
    pthread_once(xs ? &once_xs : &once_xxs, xs ? build_xs : build_xxs);
    const struct lattice *lt = xs ? &lat_xs : &lat_xxs;
    return lt->ok ? lt : NULL;
}

/* True when the lattice tables of IQ2_XXS (xs false) or IQ2_XS could be built
 * (false only when out of memory). Thread-safe. */
bool lm_quant_iq2_ready(bool xs) { return lattice_for(xs) != NULL; }

/* Digits of octet L[0..8) as a map code. */
static int octet_code(const int8_t *L)
{
    int u = 0;
    for (int i = 0; i < 8; i++)
        u |= L[i] << (2 * i);
    return u;
}

/* The neighbour of the non-lattice code u nearest (weights w) to x at scale;
 * writes its digits to L and returns its grid index. With NaN distances no
 * neighbour wins: the first one is taken (the seed asserts there). */
static int best_neighbour(const struct lattice *lt, int u, const float *x, const float *w, float scale, int8_t *L)
{
    const uint16_t *nb = lt->nb + (-lt->map[u] - 1);
    int best = nb[1];
    float best_d2 = FLT_MAX;
    for (int j = 1; j <= nb[0]; j++) {
        const int8_t *pg = lt->q[nb[j]];
        float d2 = 0;
        for (int i = 0; i < 8; i++) {
            const float q = pg[i];
            const float diff = scale * q - x[i];
            d2 += w[i] * diff * diff;
        }
        if (d2 < best_d2) {
            best_d2 = d2;
            best = nb[j];
        }
    }
    for (int i = 0; i < 8; i++)
        L[i] = (int8_t)((lt->q[best][i] - 1) / 2);
    return best;
}

/* Round n8 octets of x at inverse scale id to digits in L, moving each
 * non-lattice octet to its best neighbour at scale (w: neighbour weights);
 * on_grid[k] (if not NULL) says which octets were already lattice points.
 * only_off: touch only the octets with !on_grid[k]. */
static void round_octets(const struct lattice *lt, int n8, const float *x, const float *w, float id, float scale,
                         int8_t *L, bool *on_grid, bool only_off)
{
    for (int k = 0; k < n8; k++) {
        if (only_off && on_grid[k])
            continue;
        for (int i = 0; i < 8; i++) {
            const int l = lm_quant_nearest_int(0.5f * (id * x[8 * k + i] - 1));
            L[8 * k + i] = (int8_t)(l < 0 ? 0 : l > 2 ? 2 : l);
        }
        const int u = octet_code(L + 8 * k);
        const bool on = lt->map[u] >= 0;
        if (!only_off)
            on_grid[k] = on;
        if (!on)
            best_neighbour(lt, u, x + 8 * k, w + 8 * k, scale, L + 8 * k);
    }
}

/* Weighted fit of x by the values 2L+1: *sqx = sum w x q, *sq2 = sum w q^2. */
static void fit(int n, const float *x, const float *w, const int8_t *L, float *sqx, float *sq2)
{
    float sumqx = 0, sumq2 = 0;
    for (int i = 0; i < n; i++) {
        const float q = (float)(2 * L[i] + 1);
        sumqx += w[i] * x[i] * q;
        sumq2 += w[i] * q * q;
    }
    *sqx = sumqx;
    *sq2 = sumq2;
}

/* State the seed keeps across the groups of one row. */
struct row_state {
    int8_t L[32];
    bool on_grid[4];
};

/* One group of n8 octets: signs (7 bits per octet) into signs[], digits into
 * st->L, returns the group scale (the seed's search; see the file comment).
 * *zero: the group's largest |x| was 0 (nothing stored for it). */
static float search_group(const struct lattice *lt, int n8, const float *xb, const float *weight,
                          struct row_state *st, bool reset_on_grid, uint8_t *signs, bool *zero)
{
    const int n = 8 * n8;
    float xval[32], waux[32];
    int8_t Laux[32];
    bool on_aux[4];
    for (int i = 0; i < n; i++)
        waux[i] = sqrtf(weight[i]);
    for (int k = 0; k < n8; k++) {
        int nflip = 0;
        unsigned s = 0;
        for (int i = 0; i < 8; i++) {
            const float v = xb[8 * k + i];
            if (v >= 0) {
                xval[8 * k + i] = v;
            } else {
                xval[8 * k + i] = -v;
                nflip++;
                s |= 1u << i;
            }
        }
        if (nflip % 2) {
            int imin = 0;
            float min = weight[8 * k] * xb[8 * k] * xb[8 * k];
            for (int i = 1; i < 8; i++) {
                const float ax = weight[8 * k + i] * xb[8 * k + i] * xb[8 * k + i];
                if (ax < min) {
                    min = ax;
                    imin = i;
                }
            }
            xval[8 * k + imin] = -xval[8 * k + imin];
            s ^= 1u << imin;
        }
        signs[k] = (uint8_t)(s & 127);
    }
    float max = xval[0];
    for (int i = 1; i < n; i++)
        max = max > xval[i] ? max : xval[i];
    *zero = max == 0;
    if (*zero) {
        memset(st->L, 0, (size_t)n);
        return 0;
    }
    float best = 0, scale = max / 5;
    if (reset_on_grid)
        for (int k = 0; k < n8; k++)
            st->on_grid[k] = true;
    for (int is = -9; is <= 9; is++) {
        const float id = (5 + is * 0.1f) / max;
        round_octets(lt, n8, xval, waux, id, 1 / id, Laux, on_aux, false);
        float sumqx, sumq2;
        fit(n, xval, weight, Laux, &sumqx, &sumq2);
        if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
            scale = sumqx / sumq2;
            best = scale * sumqx;
            memcpy(st->L, Laux, (size_t)n);
            memcpy(st->on_grid, on_aux, (size_t)n8 * sizeof *on_aux);
        }
    }
    int n_off = 0;
    for (int k = 0; k < n8; k++)
        n_off += !st->on_grid[k];
    if (n_off > 0 && scale > 0) {
        round_octets(lt, n8, xval, waux, 1 / scale, scale, st->L, st->on_grid, true);
        float sumqx, sumq2;
        fit(n, xval, weight, st->L, &sumqx, &sumq2);
        if (sumq2 > 0)
            scale = sumqx / sumq2;
    }
    if (scale < 0) { /* the seed's guard: a positive scale with every sign flipped */
        scale = -scale;
        for (int k = 0; k < n8; k++)
            signs[k] = (uint8_t)(~signs[k] & 127);
    }
    return scale;
}

/* The grid index of octet k of st->L (a lattice point by construction). */
static int octet_index(const struct lattice *lt, const int8_t *L)
{
    const int32_t g = lt->map[octet_code(L)];
    return g >= 0 ? g : 0;
}

static float sigma2_of(const float *x)
{
    float sumx2 = 0;
    for (int i = 0; i < LM_QK_K; i++)
        sumx2 += x[i] * x[i];
    return sumx2 / LM_QK_K;
}

static void group_weights(int n, const float *xb, const float *qw, float sigma2, float *w)
{
    for (int i = 0; i < n; i++)
        w[i] = qw[i] * sqrtf(sigma2 + xb[i] * xb[i]);
}

static int scale_step(float id, float scale)
{
    const int l = lm_quant_nearest_int(0.5f * (id * scale - 1));
    return l < 0 ? 0 : l > 15 ? 15 : l;
}

/* IQ2_XXS's last pass over one group: at the stored scale db, re-pick each
 * octet's grid point among all 256 (keeping its signs), accumulate the fit. */
static uint32_t refine_xxs(const struct lattice *lt, const float *xb, const float *w, uint32_t grids, uint32_t aux,
                           float db, float *sumqx, float *sumq2)
{
    uint32_t u = 0;
    for (int k = 0; k < 4; k++) {
        const unsigned sb = lm_iq2_sign_bits((aux >> (7 * k)) & 127);
        const float *xk = xb + 8 * k, *wk = w + 8 * k;
        int best_index = (int)((grids >> (8 * k)) & 0xff);
        float best_mse = 0;
        for (int idx = -1; idx < 256; idx++) { /* -1: the current point */
            const int8_t *g = lt->q[idx < 0 ? best_index : idx];
            float mse = 0;
            for (int j = 0; j < 8; j++) {
                float q = db * (float)g[j];
                q = (sb >> j) & 1 ? -q : q;
                const float diff = q - xk[j];
                mse += wk[j] * diff * diff;
            }
            if (idx < 0) {
                best_mse = mse;
            } else if (mse < best_mse) {
                best_mse = mse;
                best_index = idx;
            }
        }
        u |= (uint32_t)best_index << (8 * k);
        const int8_t *g = lt->q[best_index];
        for (int j = 0; j < 8; j++) {
            float q = db * (float)g[j];
            q = (sb >> j) & 1 ? -q : q;
            *sumqx += wk[j] * q * xk[j];
            *sumq2 += wk[j] * q * q;
        }
    }
    return u;
}

static void put_u32(uint16_t *q, uint32_t v)
{
    q[0] = (uint16_t)(v & 0xffff);
    q[1] = (uint16_t)(v >> 16);
}

/* One row of n_per_row floats with importance weights qw[n_per_row]. Needs
 * the IQ2_XXS lattice (lm_quant_iq2_ready(false)). */
void lm_quant_iq2_xxs_imat(const float *x, void *vy, int64_t n_per_row, const float *qw)
{
    const struct lattice *lt = lattice_for(false);
    struct lm_block_iq2_xxs *y = vy;
    if (!lt)
        return; /* out of memory: callers check lm_quant_iq2_ready first */
    struct row_state st = {{0}, {true, true, true, true}};
    for (int64_t ibl = 0; ibl < n_per_row / LM_QK_K; ibl++) {
        const float *xbl = x + LM_QK_K * ibl;
        const float *qbl = qw + LM_QK_K * ibl;
        uint32_t q2[2 * (LM_QK_K / 32)] = {0};
        float scales[LM_QK_K / 32], weight[32];
        float max_scale = 0;
        y[ibl].d = lm_fp32_to_fp16(0.f);
        const float sigma2 = sigma2_of(xbl);
        for (int ib = 0; ib < LM_QK_K / 32; ib++) {
            uint8_t signs[4];
            bool zero;
            group_weights(32, xbl + 32 * ib, qbl + 32 * ib, sigma2, weight);
            const float scale = search_group(lt, 4, xbl + 32 * ib, weight, &st, false, signs, &zero);
            if (zero) {
                scales[ib] = 0;
                continue;
            }
            for (int k = 0; k < 4; k++) {
                q2[2 * ib] |= (uint32_t)octet_index(lt, st.L + 8 * k) << (8 * k);
                q2[2 * ib + 1] |= (uint32_t)signs[k] << (7 * k);
            }
            scales[ib] = scale;
            max_scale = max_scale > scale ? max_scale : scale;
        }
        if (!max_scale) {
            memset(y[ibl].qs, 0, sizeof y[ibl].qs);
            continue;
        }
        const float d = max_scale / 31;
        y[ibl].d = lm_fp32_to_fp16(d);
        const float id = 1 / d;
        float sumqx = 0, sumq2 = 0;
        for (int ib = 0; ib < LM_QK_K / 32; ib++) {
            const int l = scale_step(id, scales[ib]);
            q2[2 * ib + 1] |= (uint32_t)l << 28;
            group_weights(32, xbl + 32 * ib, qbl + 32 * ib, sigma2, weight);
            const float db = d * (float)(1 + 2 * l);
            q2[2 * ib] = refine_xxs(lt, xbl + 32 * ib, weight, q2[2 * ib], q2[2 * ib + 1], db, &sumqx, &sumq2);
            if (sumq2 > 0)
                y[ibl].d = lm_fp32_to_fp16(d * sumqx / sumq2);
        }
        for (int w = 0; w < 2 * (LM_QK_K / 32); w++)
            put_u32(y[ibl].qs + 2 * w, q2[w]);
    }
}

/* As lm_quant_iq2_xxs_imat for IQ2_XS (needs lm_quant_iq2_ready(true)). */
void lm_quant_iq2_xs_imat(const float *x, void *vy, int64_t n_per_row, const float *qw)
{
    const struct lattice *lt = lattice_for(true);
    struct lm_block_iq2_xs *y = vy;
    if (!lt)
        return; /* out of memory: callers check lm_quant_iq2_ready first */
    struct row_state st = {{0}, {true, true, true, true}};
    for (int64_t ibl = 0; ibl < n_per_row / LM_QK_K; ibl++) {
        const float *xbl = x + LM_QK_K * ibl;
        const float *qbl = qw + LM_QK_K * ibl;
        uint16_t q2[2 * (LM_QK_K / 16)] = {0};
        float scales[LM_QK_K / 16], weight[16];
        float max_scale = 0;
        y[ibl].d = lm_fp32_to_fp16(0.f);
        memset(y[ibl].scales, 0, sizeof y[ibl].scales);
        const float sigma2 = sigma2_of(xbl);
        for (int ib = 0; ib < LM_QK_K / 16; ib++) {
            uint8_t signs[2];
            bool zero;
            group_weights(16, xbl + 16 * ib, qbl + 16 * ib, sigma2, weight);
            const float scale = search_group(lt, 2, xbl + 16 * ib, weight, &st, true, signs, &zero);
            if (zero) {
                scales[ib] = 0;
                continue;
            }
            for (int k = 0; k < 2; k++)
                q2[2 * ib + k] = (uint16_t)(octet_index(lt, st.L + 8 * k) | signs[k] << 9);
            scales[ib] = scale;
            max_scale = max_scale > scale ? max_scale : scale;
        }
        if (!max_scale) {
            memset(y[ibl].qs, 0, sizeof y[ibl].qs);
            continue;
        }
        const float d = max_scale / 31;
        y[ibl].d = lm_fp32_to_fp16(d);
        const float id = 1 / d;
        for (int ib = 0; ib < LM_QK_K / 16; ib++) {
            const int l = scale_step(id, scales[ib]);
            y[ibl].scales[ib / 2] |= (uint8_t)(ib % 2 ? l << 4 : l);
        }
        memcpy(y[ibl].qs, q2, sizeof q2);
    }
}
