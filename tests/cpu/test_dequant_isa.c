/* test_dequant_isa.c - every SIMD row decoder (to_float) of a block type, on
 * every ISA level this build and CPU have, against the generic decoder
 * (quant/'s reference): the output must be the same bits, for every input.
 *
 * Inputs: random bytes as blocks (every code, sub-block scale and min value)
 * with their fp16 scale fields set to
 *   - random finite values (all exponents, subnormals and +-0 included),
 *   - special values mixed with finite ones: +-inf, quiet and signalling NaNs
 *     with payloads and both signs, subnormals, +-0, +-65504;
 * and all-0x00 / all-0xFF code bytes. n = 1..9 and 33 blocks; input pointers
 * at the block's natural alignment (2 bytes, also 16-byte aligned), the
 * input ending exactly at the end of its heap block (a sanitizer build
 * catches any over-read); outputs at 4-byte-aligned odd offsets with guard
 * bytes on both sides (no write outside the n floats).
 *
 * NaN outputs only need to be NaN (see same_bits).
 * Every level's table is tested whole (slots inherited from a lower level
 * too). F16 / BF16 decoders are covered by test_kernels_isa.c (F16C quiets
 * signalling NaNs there, a documented difference). A block type without a
 * known scale layout here fails the test, so a new decoder cannot go untested.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fp16.h"
#include "cpu/kernels/kernels.h"
#include "lm_test.h"
#include "quant/blocks.h"
#include "util_cpu.h"

enum { MAXB = 33, GUARD = 64 };

/* Byte offsets of the fp16 scale fields of a block of t (at most 2); returns
 * their count, 0 when this test does not know the layout. */
static int scale_fields(enum lm_type t, size_t off[2])
{
    switch (t) {
    case LM_TYPE_Q4_0:
    case LM_TYPE_Q5_0:
    case LM_TYPE_Q8_0:
        off[0] = 0;
        return 1;
    case LM_TYPE_Q4_1:
    case LM_TYPE_Q5_1:
    case LM_TYPE_Q8_1:
    case LM_TYPE_Q4_K:
    case LM_TYPE_Q5_K:
        off[0] = 0;
        off[1] = 2;
        return 2;
    case LM_TYPE_Q2_K:
        off[0] = offsetof(struct lm_block_q2_K, d);
        off[1] = offsetof(struct lm_block_q2_K, dmin);
        return 2;
    case LM_TYPE_Q3_K:
        off[0] = offsetof(struct lm_block_q3_K, d);
        return 1;
    case LM_TYPE_Q6_K:
        off[0] = offsetof(struct lm_block_q6_K, d);
        return 1;
    default:
        return 0;
    }
}

/* A random finite fp16 (every exponent but 31). */
static uint16_t finite_half(struct uc_rng *r)
{
    uint16_t h = (uint16_t)uc_u64(r);
    return ((h >> 10) & 0x1f) == 0x1f ? (uint16_t)(h & ~0x4000u) : h;
}

static const uint16_t special[] = {
    0x7C00, 0xFC00,                         /* +-inf */
    0x7E00, 0xFE00, 0x7E2A, 0xFF81,         /* quiet NaNs, payloads, both signs */
    0x7C01, 0x7D55, 0xFC3F, 0xFD00,         /* signalling NaNs */
    0x0001, 0x03FF, 0x8001, 0x83FF, 0x0200, /* subnormals */
    0x0000, 0x8000,                         /* +-0 */
    0x7BFF, 0xFBFF, 0x0400, 0x3C00,         /* +-max, min normal, 1 */
};

/* Fill nb blocks of t at x: mode 0 random bytes + finite scales; 1 random
 * bytes + special scales; 2 bytes 0xFF + finite; 3 bytes 0x00 + special. */
static void fill_blocks(enum lm_type t, uint8_t *x, int nb, int mode, struct uc_rng *r)
{
    const size_t bs = lm_type_size(t);
    size_t off[2];
    const int nf = scale_fields(t, off);
    for (int b = 0; b < nb; b++) {
        uint8_t *blk = x + (size_t)b * bs;
        for (size_t i = 0; i < bs; i++)
            blk[i] = mode == 2 ? 0xFF : mode == 3 ? 0x00 : (uint8_t)uc_u64(r);
        for (int f = 0; f < nf; f++) {
            const bool sp = (mode & 1) && uc_u64(r) % 4 != 0;
            const uint16_t h = sp ? special[uc_u64(r) % (sizeof special / sizeof special[0])] : finite_half(r);
            memcpy(blk + off[f], &h, 2);
        }
    }
}

/* The same bits, or both NaN: when a scale and a min are both NaN, which one's
 * payload and sign d * q + m keeps depends on the operand order the compiler
 * picks for the generic C code (gcc and clang differ); C does not specify it. */
static bool same_bits(float a, float b) { return !memcmp(&a, &b, sizeof a) || (a != a && b != b); }

/* One case: nb blocks at input offset xo (bytes past a malloc'd address, the
 * input ending at the heap block's end) and output misalignment yo. */
static int decode_case(const struct lm_cpu_kernels *k, const struct lm_cpu_kernels *g, enum lm_type t, int nb,
                       int mode, size_t xo, size_t yo, struct uc_rng *r)
{
    const int64_t n = nb * lm_type_blck(t);
    const size_t bytes = (size_t)nb * lm_type_size(t), fb = (size_t)n * sizeof(float);
    uint8_t *raw = malloc(xo + bytes), *x = raw + xo;
    float *want = malloc(fb);
    uint8_t *buf = uc_alloc(fb + 2 * GUARD, yo);
    float *got = (float *)(buf + GUARD);
    fill_blocks(t, x, nb, mode, r);
    memset(buf, 0x77, fb + 2 * GUARD);
    g->type[t].to_float(x, want, n);
    k->type[t].to_float(x, got, n);
    int bad = 0;
    for (int i = 0; i < GUARD; i++)
        bad += buf[i] != 0x77 || buf[GUARD + fb + i] != 0x77;
    for (int64_t i = 0; i < n; i++) {
        if (!same_bits(want[i], got[i])) {
            uint32_t a, b;
            memcpy(&a, &want[i], 4);
            memcpy(&b, &got[i], 4);
            fprintf(stderr, "%s %s nb %d mode %d: element %lld: generic %g (%08x), got %g (%08x)\n",
                    lm_cpu_isa_name(k->isa), lm_type_name(t), nb, mode, (long long)i, (double)want[i], a,
                    (double)got[i], b);
            bad++;
            break;
        }
    }
    free(raw);
    free(want);
    uc_free(buf);
    return bad;
}

static void test_type(const struct lm_cpu_kernels *k, const struct lm_cpu_kernels *g, enum lm_type t,
                      struct uc_rng *r)
{
    static const int nbs[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, MAXB};
    static const size_t offs[][2] = {{2, 4}, {0, 0}, {10, 60}}; /* input bytes past 16-aligned, output past 64 */
    size_t off[2];
    CHECKF(scale_fields(t, off) > 0, "%s overrides to_float of %s: no scale layout in this test",
           lm_cpu_isa_name(k->isa), lm_type_name(t));
    int bad = 0, cases = 0;
    for (size_t i = 0; i < sizeof nbs / sizeof nbs[0]; i++)
        for (int mode = 0; mode < 4; mode++)
            for (int o = 0; o < 3; o++, cases++)
                bad += decode_case(k, g, t, nbs[i], mode, offs[o][0], offs[o][1], r);
    /* more random blocks (finite and special scales) through the longest case */
    for (int rep = 0; rep < 40; rep++, cases++)
        bad += decode_case(k, g, t, MAXB, rep % 2, 2, 4 * (size_t)(rep % 16), r);
    CHECKF(bad == 0, "%s %s to_float differs from generic or writes outside y (%d of %d cases)",
           lm_cpu_isa_name(k->isa), lm_type_name(t), bad, cases);
}

int main(void)
{
    const struct lm_cpu_kernels *g = lm_cpu_kernels_for(LM_ISA_GENERIC);
    struct uc_rng r;
    uc_seed(&r, 77);
    int tested = 0, own[LM_ISA_COUNT] = {0};
    for (int i = 1; i < LM_ISA_COUNT; i++) {
        const struct lm_cpu_kernels *k = lm_cpu_kernels_for((enum lm_cpu_isa)i);
        if (!k)
            continue;
        for (int t = 0; t < LM_TYPE_COUNT; t++) {
            if (k->to_float_isa[t] == LM_ISA_GENERIC || lm_type_blck((enum lm_type)t) <= 1)
                continue;
            test_type(k, g, (enum lm_type)t, &r);
            tested++;
            own[i] += k->to_float_isa[t] == (enum lm_cpu_isa)i;
        }
    }
    /* each level present fills its own decoders: AVX2 Q4_0 and Q8_0, AVX-512 all 10 weight types */
    if (lm_cpu_kernels_for(LM_ISA_AVX2))
        CHECKF(own[LM_ISA_AVX2] >= 2, "avx2: %d decoders", own[LM_ISA_AVX2]);
    if (lm_cpu_kernels_for(LM_ISA_AVX512))
        CHECKF(own[LM_ISA_AVX512] >= 10, "avx512: %d decoders", own[LM_ISA_AVX512]);
    printf("dequant_isa: %d to_float slots tested (own decoders: avx2 %d, avx512 %d)\n", tested, own[LM_ISA_AVX2],
           own[LM_ISA_AVX512]);
    return lm_test_summary();
}
