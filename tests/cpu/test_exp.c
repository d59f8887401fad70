/* test_exp.c - the exp_sum slot (kernels.h) of every kernel level: each
 * exponential within 2 ulp of libm's expf over every float t = x - max in
 * [-104, 0] (step 2^-10 near 0, coarser below) and near the subnormal edge,
 * exp(-inf) = 0, NaN stays NaN, the double sum equals the sum of the written
 * values to 1e-12 relative, tails of every length 0..40 written exactly
 * there (guard values around the output stay untouched), and y == x works.
 * And the gelu slot: against GELU in double, the SIMD levels within 4 + 3|a|
 * ulp, a = 2u the argument of exp (whose float rounding exp magnifies by |a|;
 * 1e-37 absolute where the value underflows), the generic (tanhf) one the
 * same where 1 + tanh does not cancel (x > -1) and 1e-6 absolute below;
 * specials, tails and in place as for exp. And the silu slot (check_silu).
 * And the scale_max slot (check_scale_max): every level writes the generic
 * level's bits for every s[j] (lengths 0..200 and 4099, with and without a
 * mask holding -inf, NaN, zeros of both signs and an ALiBi slope) and
 * returns the same maximum (NaN ignored; a zero's sign may differ). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "cpu/cpu.h"
#include "cpu/kernels/kernels.h"
#include "lm_test.h"

/* Distance in ulps between two non-negative floats (as ordered integers). */
static int64_t ulps(float a, float b)
{
    int32_t ia, ib;
    memcpy(&ia, &a, 4);
    memcpy(&ib, &b, 4);
    return ia > ib ? (int64_t)ia - ib : (int64_t)ib - ia;
}

#define N 4096

static void check_level(const struct lm_cpu_kernels *k)
{
    static float x[N], y[N + 2];
    const char *name = lm_cpu_isa_name(k->isa);
    int64_t worst = 0, bad = 0;
    /* t from 0 down to -104: dense near 0, then geometric */
    int count = 0;
    for (float t = 0.0f; t > -104.0f && count < 1000000;) {
        int m = 0;
        for (; m < N && t > -104.0f; m++) {
            x[m] = t + 3.5f;
            t -= t > -8.0f ? 0.0009765625f : 0.0131f;
        }
        k->exp_sum(m, y, x, 3.5f);
        for (int i = 0; i < m; i++) {
            const float want = expf(x[i] - 3.5f);
            const int64_t u = ulps(y[i], want);
            worst = u > worst ? u : worst;
            bad += u > 2;
        }
        count += m;
    }
    CHECKF(bad == 0, "%s exp: %lld of %d values beyond 2 ulp (worst %lld)", name, (long long)bad, count, (long long)worst);
    /* the subnormal edge and the specials */
    const float sp[] = {-87.0f, -87.5f, -88.7f, -95.0f, -100.0f, -103.0f, -103.9f, -104.0f, -104.5f, -200.0f,
                        -INFINITY, NAN, 0.0f, -0.0f, -1e-30f, -5e-8f};
    const int ns = (int)(sizeof sp / sizeof sp[0]);
    memcpy(x, sp, sizeof sp);
    k->exp_sum(ns, y, x, 0.0f);
    for (int i = 0; i < ns; i++) {
        const float want = expf(sp[i]);
        if (isnan(want))
            CHECKF(isnan(y[i]), "%s exp(NaN) = %g", name, (double)y[i]);
        else if (want < 1.2e-38f)
            CHECKF(fabsf(y[i] - want) <= 2.9e-45f, "%s exp(%g) = %g, expf %g", name, (double)sp[i], (double)y[i],
                   (double)want);
        else
            CHECKF(ulps(y[i], want) <= 2, "%s exp(%g) = %.9g, expf %.9g", name, (double)sp[i], (double)y[i],
                   (double)want);
    }
    /* tails: lengths 0..40, guards untouched, sum of what was written, in place */
    for (int n = 0; n <= 40; n++) {
        for (int i = 0; i < n; i++)
            x[i] = (float)((i * 37) % 23) * -0.37f;
        y[0] = 1234.0f;
        y[n + 1] = 4321.0f;
        const double s = k->exp_sum(n, y + 1, x, 0.25f);
        double want = 0.0;
        int off = 0;
        for (int i = 0; i < n; i++) {
            want += (double)y[1 + i];
            off += ulps(y[1 + i], expf(x[i] - 0.25f)) > 2;
        }
        CHECKF(off == 0 && y[0] == 1234.0f && y[n + 1] == 4321.0f, "%s exp tail n=%d", name, n);
        CHECKF(fabs(s - want) <= 1e-12 * (want > 1 ? want : 1), "%s exp sum n=%d: %.17g vs %.17g", name, n, s, want);
        memcpy(y, x, sizeof(float) * (size_t)n);
        const double s2 = k->exp_sum(n, y, y, 0.25f);
        CHECKF(s2 == s, "%s exp in place n=%d", name, n);
    }
    printf("exp: %s: %d values, worst %lld ulp vs expf\n", name, count, (long long)worst);
}

/* The formula in double, written x / (1 + exp(-2u)): 1 + tanh(u) would
 * cancel to 0 in double too for x < -6. */
static double gelu_ref(double x)
{
    return x / (1.0 + exp(-2.0 * 0.79788456080286535588 * x * (1.0 + 0.044715 * x * x)));
}

/* Ulps between two floats of any sign (0 and -0 are 0 apart). */
static int64_t ulps_signed(float a, float b)
{
    if (a == b)
        return 0;
    if ((a < 0) != (b < 0))
        return ulps(fabsf(a), 0.0f) + ulps(fabsf(b), 0.0f);
    return ulps(fabsf(a), fabsf(b));
}

static void check_gelu(const struct lm_cpu_kernels *k)
{
    static float x[N], y[N + 2];
    const char *name = lm_cpu_isa_name(k->isa);
    const bool simd = k->gelu_isa != LM_ISA_GENERIC;
    int64_t worst = 0, bad = 0, count = 0;
    for (float t = -30.0f; t < 30.0f;) {
        int m = 0;
        for (; m < N && t < 30.0f; m++, t += 0.000977f)
            x[m] = t;
        k->gelu(m, y, x);
        for (int i = 0; i < m; i++) {
            const double r = gelu_ref((double)x[i]);
            const int64_t u = ulps_signed(y[i], (float)r);
            /* the argument of exp carries ~1.5 ulp of its own size |a| */
            const double a = 1.5957691216057307 * fabs((double)x[i]) * (1.0 + 0.044715 * (double)x[i] * x[i]);
            const bool strict = simd ? fabs(r) >= 1e-36 : x[i] > -1.0f;
            const bool ok = strict ? u <= 4 + (int64_t)(3.0 * a) : fabs((double)y[i] - r) <= (simd ? 1e-37 : 1e-6);
            if (strict)
                worst = u > worst ? u : worst;
            bad += !ok;
        }
        count += m;
    }
    CHECKF(bad == 0, "%s gelu: %lld of %lld values out of bounds (worst %lld ulp)", name, (long long)bad,
           (long long)count, (long long)worst);
    const float sp[] = {0.0f, -0.0f, 1e-30f, -1e-30f, 1e30f, -1e30f, 100.0f, -100.0f, INFINITY, -INFINITY, NAN};
    const int ns = (int)(sizeof sp / sizeof sp[0]);
    k->gelu(ns, y, sp);
    for (int i = 0; i < ns; i++) {
        if (isnan(sp[i]))
            CHECKF(isnan(y[i]), "%s gelu(NaN) = %g", name, (double)y[i]);
        else if (sp[i] >= 100.0f)
            CHECKF(y[i] == sp[i], "%s gelu(%g) = %g", name, (double)sp[i], (double)y[i]);
        else if (sp[i] <= -100.0f)
            CHECKF(y[i] == 0.0f, "%s gelu(%g) = %g", name, (double)sp[i], (double)y[i]);
        else
            CHECKF(fabsf(y[i] - 0.5f * sp[i]) <= 1e-37f, "%s gelu(%g) = %g", name, (double)sp[i], (double)y[i]);
    }
    for (int n = 0; n <= 40; n++) {
        for (int i = 0; i < n; i++)
            x[i] = (float)((i * 37) % 23) * 0.37f - 4.0f;
        y[0] = 1234.0f;
        y[n + 1] = 4321.0f;
        k->gelu(n, y + 1, x);
        int off = 0;
        for (int i = 0; i < n; i++)
            off += fabs((double)y[1 + i] - gelu_ref((double)x[i])) > 1e-6;
        CHECKF(off == 0 && y[0] == 1234.0f && y[n + 1] == 4321.0f, "%s gelu tail n=%d", name, n);
        float z[41];
        memcpy(z, x, sizeof(float) * (size_t)n);
        k->gelu(n, z, z);
        CHECKF(!memcmp(z, y + 1, sizeof(float) * (size_t)n), "%s gelu in place n=%d", name, n);
    }
    printf("gelu: %s: %lld values, worst %lld ulp vs the formula in double\n", name, (long long)count,
           (long long)worst);
}

static double silu_ref(double x) { return x / (1.0 + exp(-x)); }

/* The silu slot: within 4 ulp of silu in double where the value is above
 * 1e-30 in size (x > -75), 1e-30 absolute below (past x < -88.7 exp(-x)
 * overflows a float and the value is -0, as with libm); every element the
 * same bits alone (n = 1) as in a row; specials, tails with guards, in place. */
static void check_silu(const struct lm_cpu_kernels *k)
{
    static float x[N], y[N + 2];
    const char *name = lm_cpu_isa_name(k->isa);
    int64_t worst = 0, bad = 0, alone = 0, count = 0;
    for (float t = -100.0f; t < 40.0f;) {
        int m = 0;
        for (; m < N && t < 40.0f; m++, t += 0.00391f)
            x[m] = t;
        k->silu(m, y, x);
        for (int i = 0; i < m; i++) {
            const double r = silu_ref((double)x[i]);
            const bool strict = fabs(r) >= 1e-30;
            const int64_t u = ulps_signed(y[i], (float)r);
            bad += strict ? u > 4 : fabs((double)y[i] - r) > 1e-30;
            if (strict)
                worst = u > worst ? u : worst;
            float one;
            k->silu(1, &one, &x[i]);
            alone += memcmp(&one, &y[i], sizeof one) != 0;
        }
        count += m;
    }
    CHECKF(bad == 0, "%s silu: %lld of %lld values out of bounds (worst %lld ulp)", name, (long long)bad,
           (long long)count, (long long)worst);
    CHECKF(alone == 0, "%s silu: %lld values differ computed alone", name, (long long)alone);
    const float sp[] = {0.0f, -0.0f, 1e-30f, -1e-30f, 1e30f, -1e30f, 100.0f, -100.0f, INFINITY, -INFINITY, NAN};
    const int ns = (int)(sizeof sp / sizeof sp[0]);
    k->silu(ns, y, sp);
    for (int i = 0; i < ns; i++) {
        if (isnan(sp[i]))
            CHECKF(isnan(y[i]), "%s silu(NaN) = %g", name, (double)y[i]);
        else if (sp[i] >= 100.0f)
            CHECKF(y[i] == sp[i], "%s silu(%g) = %g", name, (double)sp[i], (double)y[i]);
        else if (sp[i] <= -100.0f)
            CHECKF(y[i] == 0.0f && signbit(y[i]), "%s silu(%g) = %g", name, (double)sp[i], (double)y[i]);
        else
            CHECKF(y[i] == 0.5f * sp[i], "%s silu(%g) = %g", name, (double)sp[i], (double)y[i]);
    }
    for (int n = 0; n <= 40; n++) {
        for (int i = 0; i < n; i++)
            x[i] = (float)((i * 37) % 23) * 0.37f - 4.0f;
        y[0] = 1234.0f;
        y[n + 1] = 4321.0f;
        k->silu(n, y + 1, x);
        int off = 0;
        for (int i = 0; i < n; i++)
            off += fabs((double)y[1 + i] - silu_ref((double)x[i])) > 1e-6;
        CHECKF(off == 0 && y[0] == 1234.0f && y[n + 1] == 4321.0f, "%s silu tail n=%d", name, n);
        float z[41];
        memcpy(z, x, sizeof(float) * (size_t)n);
        k->silu(n, z, z);
        CHECKF(!memcmp(z, y + 1, sizeof(float) * (size_t)n), "%s silu in place n=%d", name, n);
    }
    printf("silu: %s: %lld values, worst %lld ulp vs the formula in double\n", name, (long long)count,
           (long long)worst);
}

/* A value in [-8, 8) from a counter-based hash (no libc rand: the same on every platform). */
static float hval(uint32_t i)
{
    i = (i ^ 61u) ^ (i >> 16);
    i *= 9u;
    i ^= i >> 4;
    i *= 0x27d4eb2du;
    i ^= i >> 15;
    return (float)(i & 0xFFFF) / 4096.0f - 8.0f;
}

static void check_scale_max(const struct lm_cpu_kernels *k)
{
    enum { M = 4099 };
    static float x[M], mk[M], want[M], got[M];
    const char *name = lm_cpu_isa_name(k->isa);
    const struct lm_cpu_kernels *g = lm_cpu_kernels_for(LM_ISA_GENERIC);
    int bad = 0, cases = 0;
    for (int n = 0; n <= 201; n++) {
        const int len = n == 201 ? M : n;
        for (int variant = 0; variant < 4; variant++) {
            for (int j = 0; j < len; j++) {
                const uint32_t h = (uint32_t)(j * 7919 + n * 104729 + variant * 1299709);
                x[j] = hval(h);
                mk[j] = hval(h + 1u) > 6.0f ? -INFINITY : hval(h + 2u) / 4.0f;
                if (variant == 2 && j % 7 == 3)
                    x[j] = j % 2 ? NAN : (j % 3 ? 0.0f : -0.0f);
                if (variant == 3)
                    x[j] = -INFINITY; /* nothing to find: -inf */
            }
            const float *m = variant & 1 ? mk : NULL;
            const float scale = 0.125f, slope = variant == 1 ? 0.70710677f : 1.0f;
            memcpy(want, x, sizeof(float) * (size_t)len);
            memcpy(got, x, sizeof(float) * (size_t)len);
            const float wmax = g->scale_max(len, want, m, scale, slope);
            const float gmax = k->scale_max(len, got, m, scale, slope);
            const bool same_max = wmax == gmax || (isnan(wmax) && isnan(gmax));
            bad += memcmp(want, got, sizeof(float) * (size_t)len) != 0 || !same_max || isnan(gmax);
            cases++;
        }
    }
    CHECKF(bad == 0, "%s scale_max: %d of %d cases differ from the generic level", name, bad, cases);
    /* the generic level itself against the scalar formula */
    for (int j = 0; j < 37; j++)
        x[j] = hval((uint32_t)j);
    memcpy(got, x, sizeof(float) * 37);
    const float gmax = g->scale_max(37, got, mk, 0.5f, 2.0f);
    float max = -INFINITY;
    int wrong = 0;
    for (int j = 0; j < 37; j++) {
        float w = x[j] * 0.5f;
        w += 2.0f * mk[j];
        wrong += memcmp(&w, &got[j], sizeof w) != 0;
        max = w > max ? w : max;
    }
    CHECKF(wrong == 0 && gmax == max, "generic scale_max against the scalar formula: %d wrong, max %g vs %g", wrong,
           (double)gmax, (double)max);
}

int main(void)
{
    for (int isa = 0; isa <= (int)lm_cpu_isa_best(); isa++) {
        const struct lm_cpu_kernels *k = lm_cpu_kernels_for((enum lm_cpu_isa)isa);
        if (k) {
            check_level(k);
            check_gelu(k);
            check_silu(k);
            check_scale_max(k);
        }
    }
    return lm_test_summary();
}
