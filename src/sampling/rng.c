/* rng.c - std::mt19937 and libstdc++'s discrete_distribution draw, in C.
 *
 * The context RNG of llama.cpp b1892 is a std::mt19937; llama_sample_token draws with
 * std::discrete_distribution<int> over the candidates' p. To sample the same tokens
 * from the same seed we keep libstdc++'s state layout (624 words plus an index that
 * is 624 right after seeding, so the first draw regenerates the block), its
 * generate_canonical<double, 53> (two 32-bit outputs per double), its cumulative
 * table and its lower_bound. The state text is that of libstdc++'s operator<<, which
 * b1892 stores in state files, so states move between lamina and llama.cpp.
 */
#include "sampling/sampling.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sampling/internal.h"

#define MT_M 397
#define MT_MATRIX_A 0x9908b0dfu
#define MT_UPPER 0x80000000u
#define MT_LOWER 0x7fffffffu

void lm_rng_seed(struct lm_rng *rng, uint32_t seed)
{
    rng->x[0] = seed;
    for (uint32_t i = 1; i < LM_RNG_N; i++)
        rng->x[i] = 1812433253u * (rng->x[i - 1] ^ (rng->x[i - 1] >> 30)) + i;
    rng->p = LM_RNG_N;
}

uint32_t lm_rng_resolve_seed(uint32_t seed)
{
    return seed == LM_RNG_DEFAULT_SEED ? (uint32_t)time(NULL) : seed;
}

static uint32_t twist(uint32_t hi, uint32_t lo, uint32_t far)
{
    uint32_t y = (hi & MT_UPPER) | (lo & MT_LOWER);
    return far ^ (y >> 1) ^ ((y & 1u) ? MT_MATRIX_A : 0u);
}

/* regenerate all 624 words at once, as libstdc++'s _M_gen_rand does */
static void regenerate(struct lm_rng *rng)
{
    uint32_t *x = rng->x;
    size_t k = 0;
    for (; k < LM_RNG_N - MT_M; k++)
        x[k] = twist(x[k], x[k + 1], x[k + MT_M]);
    for (; k < LM_RNG_N - 1; k++)
        x[k] = twist(x[k], x[k + 1], x[k + MT_M - LM_RNG_N]);
    x[LM_RNG_N - 1] = twist(x[LM_RNG_N - 1], x[0], x[MT_M - 1]);
    rng->p = 0;
}

uint32_t lm_rng_next(struct lm_rng *rng)
{
    if (rng->p >= LM_RNG_N)
        regenerate(rng);
    uint32_t z = rng->x[rng->p++];
    z ^= z >> 11;
    z ^= (z << 7) & 0x9d2c5680u;
    z ^= (z << 15) & 0xefc60000u;
    z ^= z >> 18;
    return z;
}

double lm_rng_canonical(struct lm_rng *rng)
{
    /* libstdc++: sum += double(u_k) * r^k for k = 0, 1 with r = 2^32, then sum / r^2.
     * The first product is exact; the addition rounds to nearest as in C++. */
    double sum = (double)lm_rng_next(rng);
    sum += (double)lm_rng_next(rng) * 4294967296.0;
    double ret = sum / 18446744073709551616.0;
    if (ret >= 1.0)
        ret = nextafter(1.0, 0.0);
    return ret;
}

lm_status lm_sampling_discrete_strided(struct lm_rng *rng, const float *w, size_t n, size_t stride,
                                       size_t *out_index)
{
    if (n < 2) {
        *out_index = 0;
        return LM_OK;
    }
    double *cp = malloc(n * sizeof *cp);
    if (!cp)
        return LM_ERR_NOMEM;
    const char *base = (const char *)w;
#define W(i) ((double)*(const float *)(base + (i)*stride))
    double sum = 0.0;
    for (size_t i = 0; i < n; i++)
        sum += W(i);
    double acc = 0.0;
    for (size_t i = 0; i < n; i++) {
        acc += W(i) / sum;
        cp[i] = acc;
    }
#undef W
    cp[n - 1] = 1.0;

    const double u = lm_rng_canonical(rng);
    /* std::lower_bound: first position whose value is not less than u */
    size_t first = 0, count = n;
    while (count > 0) {
        size_t half = count / 2;
        if (cp[first + half] < u) {
            first += half + 1;
            count -= half + 1;
        } else {
            count = half;
        }
    }
    free(cp);
    /* u < 1 == cp[n-1], so first < n; the clamp only documents that */
    *out_index = first < n ? first : n - 1;
    return LM_OK;
}

lm_status lm_rng_discrete(struct lm_rng *rng, const float *w, size_t n, size_t *out_index)
{
    if (!rng || (!w && n) || !out_index)
        return LM_ERR_INVALID_ARG;
    return lm_sampling_discrete_strided(rng, w, n, sizeof *w, out_index);
}

size_t lm_rng_state_write(const struct lm_rng *rng, char *buf, size_t cap)
{
    char tmp[16];
    size_t len = 0;
    for (size_t i = 0; i <= LM_RNG_N; i++) {
        int k = i < LM_RNG_N ? snprintf(tmp, sizeof tmp, "%u ", (unsigned)rng->x[i])
                             : snprintf(tmp, sizeof tmp, "%u", (unsigned)rng->p);
        for (int j = 0; j < k; j++, len++)
            if (len < cap)
                buf[len] = tmp[j];
    }
    if (cap > 0)
        buf[len < cap ? len : cap - 1] = '\0';
    return len;
}

static bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

/* one decimal number after optional whitespace, like `istream >> unsigned long` for
 * well-formed input; false on no digits or a value above max */
static bool read_number(const char *s, size_t len, size_t *pos, uint64_t max, uint32_t *out)
{
    size_t i = *pos;
    while (i < len && is_space(s[i]))
        i++;
    if (i < len && s[i] == '+')
        i++;
    if (i >= len || s[i] < '0' || s[i] > '9')
        return false;
    uint64_t v = 0;
    for (; i < len && s[i] >= '0' && s[i] <= '9'; i++) {
        v = v * 10 + (uint64_t)(s[i] - '0');
        if (v > max)
            return false;
    }
    *pos = i;
    *out = (uint32_t)v;
    return true;
}

lm_status lm_rng_state_read(struct lm_rng *rng, const char *text, size_t len)
{
    if (!rng || (!text && len))
        return LM_ERR_INVALID_ARG;
    struct lm_rng tmp;
    size_t pos = 0;
    for (size_t i = 0; i < LM_RNG_N; i++)
        if (!read_number(text, len, &pos, 0xffffffffu, &tmp.x[i]))
            return LM_ERR_CORRUPT;
    if (!read_number(text, len, &pos, LM_RNG_N, &tmp.p))
        return LM_ERR_CORRUPT;
    *rng = tmp;
    return LM_OK;
}
