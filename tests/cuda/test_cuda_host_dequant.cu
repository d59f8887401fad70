/* test_cuda_host_dequant.cu - the CUDA block decoders (src/cuda/dequant.cuh)
 * run on the host (no GPU needed) against quant/'s decoders.
 *
 * For every quantized weight type dq<> supports: rows quantized by lamina's
 * own encoder (lm_quantize_chunk; IQ2 with an importance matrix) at several
 * magnitudes, and blocks of random bytes whose scale fields are random finite
 * halves (subnormals included) so that every code value and bit position
 * occurs. Each block is decoded run by run (dq<T>::load, then dq_run_values) and
 * every element must have exactly the bits lm_quant_traits(T)->to_float gives
 * (GET_ROWS is held to bit-identity with the ref backend). The runs of a
 * block must cover its elements exactly once, and dq_run_dot (the matvec's
 * formulation) must agree with a double-precision dot of the reference
 * values to float rounding.
 *
 * Prints "FAIL: ..." per mismatch (the first few) and returns 0 when all pass.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/dequant.cuh"
#include "quant/quant.h"

#define ROWS 6
#define BLOCKS_PER_ROW 5
#define RANDOM_BLOCKS 400
#define MAX_BLOCK 512

static int n_fail;
static long long n_checked;

#define HOST_RNG_SEED 0x5eed0123456789abull
#include "host_rng.h"

/* A random finite half (any sign, exponent 0..30: subnormals and zero too). */
static uint16_t rng_half(void)
{
    uint16_t h;
    do
        h = (uint16_t)rng_u64();
    while (((h >> 10) & 0x1f) == 0x1f);
    return h;
}

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* Byte offsets of the fp16 scale fields of a block (-1 ends the list); Q8_K's
 * float d is handled apart. */
static const int *half_fields(enum lm_type t)
{
    static const int at0[] = {0, -1}, at02[] = {0, 2, -1}, q2k[] = {80, 82, -1}, q3k[] = {108, -1}, q6k[] = {208, -1},
                     none[] = {-1};
    switch (t) {
    case LM_TYPE_Q4_0:
    case LM_TYPE_Q5_0:
    case LM_TYPE_Q8_0:
    case LM_TYPE_IQ2_XXS:
    case LM_TYPE_IQ2_XS: return at0;
    case LM_TYPE_Q4_1:
    case LM_TYPE_Q5_1:
    case LM_TYPE_Q8_1:
    case LM_TYPE_Q4_K:
    case LM_TYPE_Q5_K: return at02;
    case LM_TYPE_Q2_K: return q2k;
    case LM_TYPE_Q3_K: return q3k;
    case LM_TYPE_Q6_K: return q6k;
    default: return none;
    }
}

/* Check every block of `nblk` blocks at data against to_float. */
template <int T> static void check_blocks(const uint8_t *data, int nblk, const char *what)
{
    using Q = dq<T>;
    const enum lm_type type = (enum lm_type)T;
    float *ref = (float *)malloc(sizeof(float) * Q::QK * nblk);
    lm_quant_traits(type)->to_float(data, ref, (int64_t)Q::QK * nblk);
    alignas(16) uint8_t blk[MAX_BLOCK];
    for (int b = 0; b < nblk; b++) {
        memcpy(blk, data + (size_t)b * Q::BYTES, Q::BYTES); /* a 16-aligned block (the contract) */
        const float *y = ref + (size_t)b * Q::QK;
        int hits[256] = {0};
        double xs[256];
        for (int i = 0; i < Q::QK; i++)
            xs[i] = rng_uniform(-1.0f, 1.0f);
        for (int j = 0; j < Q::UPB; j++)
            for (int r = 0; r < 4; r++) {
                const int base = Q::run_base(j, r);
                if (base < 0 || base + 8 > Q::QK || base % 8) {
                    if (n_fail++ < 20)
                        printf("FAIL: %s %s: run (%d, %d) starts at %d\n", lm_type_name(type), what, j, r, base);
                    continue;
                }
                typename Q::unit u;
                Q::load(blk, j, &u);
                float v[8], x[8];
                dq_run_values<T>(u, j, r, v);
                double want = 0.0, scale = 0.0;
                for (int i = 0; i < 8; i++) {
                    hits[base + i]++;
                    x[i] = (float)xs[base + i];
                    want += (double)y[base + i] * x[i];
                    scale += fabs((double)y[base + i] * x[i]);
                    n_checked++;
                    if (f32_bits(v[i]) != f32_bits(y[base + i]) && n_fail++ < 20)
                        printf("FAIL: %s %s: block %d unit %d run %d element %d: %.9g (0x%08x), to_float %.9g "
                               "(0x%08x)\n",
                               lm_type_name(type), what, b, j, r, base + i, (double)v[i], f32_bits(v[i]),
                               (double)y[base + i], f32_bits(y[base + i]));
                }
                const double got = dq_run_dot<T>(u, j, r, x);
                if (isfinite(want) && fabs(got - want) > 1e-5 * scale + 1e-30 && n_fail++ < 20)
                    printf("FAIL: %s %s: block %d unit %d run %d: dot %.9g, want %.9g\n", lm_type_name(type), what, b,
                           j, r, got, want);
            }
        for (int i = 0; i < Q::QK; i++)
            if (hits[i] != 1 && n_fail++ < 20)
                printf("FAIL: %s %s: element %d covered %d times\n", lm_type_name(type), what, i, hits[i]);
    }
    free(ref);
}

/* Rows from the type's encoder at a few magnitudes, then random-byte blocks. */
template <int T> static void check_type(void)
{
    using Q = dq<T>;
    const enum lm_type type = (enum lm_type)T;
    const int64_t n = (int64_t)Q::QK * BLOCKS_PER_ROW;
    float *src = (float *)malloc(sizeof(float) * n * ROWS), *imat = (float *)malloc(sizeof(float) * n);
    uint8_t *q = (uint8_t *)malloc((size_t)Q::BYTES * BLOCKS_PER_ROW * ROWS);
    static const float mags[] = {1.0f, 1e-3f, 30.0f, 1e-6f, 0.5f, 2.0f};
    for (int r = 0; r < ROWS; r++)
        for (int64_t i = 0; i < n; i++)
            src[r * n + i] = mags[r] * rng_uniform(-1.0f, 1.0f) + (r == 4 ? 0.25f : 0.0f);
    for (int64_t i = 0; i < n; i++)
        imat[i] = rng_uniform(0.1f, 2.0f);
    if (lm_quant_traits(type)->to_float == NULL) {
        printf("FAIL: %s: no to_float\n", lm_type_name(type));
        n_fail++;
    } else if (!lm_quantize_supported(type)) {
        printf("FAIL: %s: no encoder\n", lm_type_name(type));
        n_fail++;
    } else {
        const float *im = lm_quantize_requires_imatrix(type) ? imat : NULL;
        const size_t want = (size_t)Q::BYTES * BLOCKS_PER_ROW * ROWS;
        if (lm_quantize_chunk(type, src, q, 0, ROWS, n, im) != want) {
            printf("FAIL: %s: lm_quantize_chunk failed\n", lm_type_name(type));
            n_fail++;
        } else {
            check_blocks<T>(q, BLOCKS_PER_ROW * ROWS, "encoded");
        }
    }
    /* random bytes, finite scales */
    uint8_t *rnd = (uint8_t *)malloc((size_t)Q::BYTES * RANDOM_BLOCKS);
    for (int b = 0; b < RANDOM_BLOCKS; b++) {
        uint8_t *blk = rnd + (size_t)b * Q::BYTES;
        for (int i = 0; i < Q::BYTES; i++)
            blk[i] = (uint8_t)rng_u64();
        for (const int *f = half_fields(type); *f >= 0; f++) {
            const uint16_t h = rng_half();
            memcpy(blk + *f, &h, 2);
        }
        if (T == LM_TYPE_Q8_K) {
            const float d = rng_uniform(-1.0f, 1.0f) * ldexpf(1.0f, (int)(rng_u64() % 40) - 30);
            memcpy(blk, &d, 4);
        }
    }
    check_blocks<T>(rnd, RANDOM_BLOCKS, "random");
    free(rnd);
    free(q);
    free(imat);
    free(src);
}

int main(void)
{
#define CHECK(t)                                                                                                       \
    {                                                                                                                  \
        const int before = n_fail;                                                                                     \
        check_type<t>();                                                                                               \
        printf("%-8s %s\n", lm_type_name(t), n_fail == before ? "ok" : "FAILED");                                      \
    }
    DQ_QUANT_TYPES(CHECK)
#undef CHECK
    printf("%lld elements checked, %d failures\n", n_checked, n_fail);
    return n_fail ? 1 : 0;
}
