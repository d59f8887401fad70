/* dequant.cuh - block decoders of every quantized weight type for the CUDA
 * matmul and gather kernels (ops_matmul.cu), callable on the host and the
 * device.
 *
 * Every quantized type splits a block into units of 32 elements (dq<T>::UPB
 * units per block: 1 for the 32-element types, 8 for the 256-element K-quant
 * and IQ2 types) and a unit into 4 runs of 8 consecutive elements that share
 * one scale. A unit is what one thread decodes; the threads of a warp or block
 * take different units of a row. Decoding is split in two:
 *   dq<T>::load(blk, j, &u)   reads the bytes unit j needs (its codes, and
 *                             its scales already converted to float) once;
 *   dq<T>::run(u, j, r, q, &d, &m)   pure arithmetic: run r's 8 codes q[0..8)
 *                             as exact small integers in float (the type's
 *                             offset subtracted), its scale d and offset m.
 * Run r of unit j starts at element dq<T>::run_base(j, r) of the block, and
 * element i of it is d * q[i] + m (HAS_M types: Q4_1, Q5_1, Q2_K, Q4_K, Q5_K)
 * or d * q[i]. dq_val computes that as quant/'s decoders do (the product
 * rounded, then the sum: never fused), so dq_run_values gives exactly the
 * floats of lm_quant_traits(T)->to_float; a dot product may instead use
 * d * sum(q * x) + m * sum(x) (dq_run_dot). Every type's layout lives here
 * once, shared by the matvec, the F16 dequantizer and GET_ROWS.
 *
 * Alignment contract: `blk` points at a block whose address is a multiple of
 * dq<T>::ALIGN = gcd(block bytes, 16), as in an array of blocks that starts
 * 16-byte aligned (device tensors, and shared-memory tiles that preserve the
 * address modulo 16). load then uses the widest loads that alignment allows
 * (16 bytes for Q4_K / Q5_K, 8 or 4 for Q5_1 / Q4_1 / Q2_K / Q8_1 / Q8_K, 2
 * for the rest).
 *
 * No int -> float conversion instruction (a quarter-rate one on the GPU): a
 * byte v becomes the float with bits 0x4B000000 | v (2^23 + v) minus
 * (2^23 + offset), a small int v the float 1.5 * 2^23 + v minus 1.5 * 2^23;
 * both exact. The host computes the same values with plain conversions.
 * Nothing here allocates or has state; all helpers are static (no symbols of
 * liblamina). Built without -ftz / fast math (fp16 subnormal scales must
 * survive).
 */
#ifndef LM_CUDA_DEQUANT_CUH
#define LM_CUDA_DEQUANT_CUH

#include <cuda_fp16.h>
#include <stdint.h>
#include <string.h>

#include "core/fp16.h"
#include "core/type.h"
#include "quant/blocks.h"
#include "quant/iq2_codes.h"

#define DQ_FN static __host__ __device__ __forceinline__

/* ---- loads (p aligned to A bytes, A a power of two <= 16) ---- */

DQ_FN uint16_t dq_ld16(const uint8_t *p)
{
#ifdef __CUDA_ARCH__
    return *(const uint16_t *)p;
#else
    uint16_t v;
    memcpy(&v, p, 2);
    return v;
#endif
}

template <int A> DQ_FN uint32_t dq_ld32(const uint8_t *p)
{
#ifdef __CUDA_ARCH__
    if constexpr (A >= 4)
        return *(const uint32_t *)p;
    else
        return (uint32_t)dq_ld16(p) | (uint32_t)dq_ld16(p + 2) << 16;
#else
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
#endif
}

/* 8 bytes as two little-endian words w[0], w[1]. */
template <int A> DQ_FN void dq_ld64(const uint8_t *p, uint32_t w[2])
{
#ifdef __CUDA_ARCH__
    if constexpr (A >= 8) {
        const uint2 v = *(const uint2 *)p;
        w[0] = v.x;
        w[1] = v.y;
        return;
    }
#endif
    w[0] = dq_ld32<A>(p);
    w[1] = dq_ld32<A>(p + 4);
}

/* 16 bytes as four words. */
template <int A> DQ_FN void dq_ld128(const uint8_t *p, uint32_t w[4])
{
#ifdef __CUDA_ARCH__
    if constexpr (A >= 16) {
        const uint4 v = *(const uint4 *)p;
        w[0] = v.x, w[1] = v.y, w[2] = v.z, w[3] = v.w;
        return;
    }
#endif
    dq_ld64<A>(p, w);
    dq_ld64<A>(p + 8, w + 2);
}

DQ_FN float dq_f16(const uint8_t *p)
{
#ifdef __CUDA_ARCH__
    return __half2float(__ushort_as_half(dq_ld16(p)));
#else
    return lm_fp16_to_fp32(dq_ld16(p));
#endif
}

/* ---- code -> float ---- */

/* q[i] = byte i of w minus `off` (an integer 0..128), exactly. */
DQ_FN void dq_bytes(uint32_t w, float off, float *q)
{
#ifdef __CUDA_ARCH__
    const float base = 8388608.0f + off;
    q[0] = __uint_as_float(__byte_perm(w, 0x4B000000u, 0x7440)) - base;
    q[1] = __uint_as_float(__byte_perm(w, 0x4B000000u, 0x7441)) - base;
    q[2] = __uint_as_float(__byte_perm(w, 0x4B000000u, 0x7442)) - base;
    q[3] = __uint_as_float(__byte_perm(w, 0x4B000000u, 0x7443)) - base;
#else
    for (int i = 0; i < 4; i++)
        q[i] = (float)((w >> (8 * i)) & 0xFFu) - off;
#endif
}

/* (float)v for |v| < 2^22, exactly: 1.5 * 2^23 + v has v in its low bits. */
DQ_FN float dq_i2f(int v)
{
#ifdef __CUDA_ARCH__
    return __int_as_float(0x4B400000 + v) - 12582912.0f;
#else
    return (float)v;
#endif
}

/* 8 codes from two words of bytes. */
DQ_FN void dq_bytes8(const uint32_t w[2], float off, float *q)
{
    dq_bytes(w[0], off, q);
    dq_bytes(w[1], off, q + 4);
}

/* Low (hi == 0) or high nibbles of two words, one byte each. */
DQ_FN void dq_nibbles(const uint32_t w[2], int hi, uint32_t out[2])
{
    out[0] = (w[0] >> (4 * hi)) & 0x0F0F0F0Fu;
    out[1] = (w[1] >> (4 * hi)) & 0x0F0F0F0Fu;
}

/* Bits 0..3 of b to bit 0 of bytes 0..3. */
DQ_FN uint32_t dq_spread4(uint32_t b) { return ((b & 0xFu) * 0x00204081u) & 0x01010101u; }

/* a * b and a + b, each rounded once (never fused into an FMA). */
DQ_FN float dq_mul(float a, float b)
{
#ifdef __CUDA_ARCH__
    return __fmul_rn(a, b);
#else
    return a * b;
#endif
}

DQ_FN float dq_add(float a, float b)
{
#ifdef __CUDA_ARCH__
    return __fadd_rn(a, b);
#else
    return a + b;
#endif
}

/* An element's value from its run's d, m and code q, as quant/ computes it. */
template <bool HAS_M> DQ_FN float dq_val(float d, float q, float m)
{
    if constexpr (HAS_M)
        return dq_add(dq_mul(d, q), m);
    else
        return dq_mul(d, q);
}

/* ---- per-type decoders ---- */

template <int T> struct dq; /* specialised for each quantized type below */

/* Members every specialisation has. */
#define DQ_TRAITS(qk, bytes, align, has_m)                                                                             \
    static constexpr int QK = (qk);       /* elements per block */                                                     \
    static constexpr int BYTES = (bytes); /* bytes per block */                                                        \
    static constexpr int ALIGN = (align); /* guaranteed alignment of a block: gcd(BYTES, 16) */                        \
    static constexpr int UPB = (qk) / 32; /* units of 32 elements per block */                                         \
    static constexpr bool HAS_M = (has_m)

/* Q4_0: x = d * (nibble - 8); unit = block; run r = elements 8r..8r+7: low
 * nibbles of qs[0..8) / qs[8..16) (r = 0, 1), high nibbles (r = 2, 3). */
template <> struct dq<LM_TYPE_Q4_0> {
    DQ_TRAITS(32, 18, 2, false);
    struct unit {
        uint32_t w[4]; /* qs */
        float d;
    };
    DQ_FN void load(const uint8_t *b, int, unit *u)
    {
        dq_ld64<2>(b + 2, u->w);
        dq_ld64<2>(b + 10, u->w + 2);
        u->d = dq_f16(b);
    }
    DQ_FN int run_base(int, int r) { return 8 * r; }
    DQ_FN void run(const unit &u, int, int r, float *q, float *d, float *m)
    {
        uint32_t n[2];
        dq_nibbles(u.w + 2 * (r & 1), r >> 1, n);
        dq_bytes8(n, 8.0f, q);
        *d = u.d;
        *m = 0.0f;
    }
};

/* Q4_1: x = d * nibble + m; runs as Q4_0. */
template <> struct dq<LM_TYPE_Q4_1> {
    DQ_TRAITS(32, 20, 4, true);
    struct unit {
        uint32_t w[4];
        float d, m;
    };
    DQ_FN void load(const uint8_t *b, int, unit *u)
    {
        dq_ld64<4>(b + 4, u->w);
        dq_ld64<4>(b + 12, u->w + 2);
        u->d = dq_f16(b);
        u->m = dq_f16(b + 2);
    }
    DQ_FN int run_base(int, int r) { return 8 * r; }
    DQ_FN void run(const unit &u, int, int r, float *q, float *d, float *m)
    {
        uint32_t n[2];
        dq_nibbles(u.w + 2 * (r & 1), r >> 1, n);
        dq_bytes8(n, 0.0f, q);
        *d = u.d;
        *m = u.m;
    }
};

/* The 5-bit codes of run r of a Q5_0 / Q5_1 block: nibbles as Q4_0, the
 * fifth bit of element i is bit i of qh (so run r's bits are qh byte r). */
DQ_FN void dq_q5_codes(const uint32_t *w, uint32_t qh, int r, uint32_t c[2])
{
    dq_nibbles(w + 2 * (r & 1), r >> 1, c);
    const uint32_t h = qh >> (8 * r);
    c[0] |= dq_spread4(h) << 4;
    c[1] |= dq_spread4(h >> 4) << 4;
}

/* Q5_0: x = d * (code - 16). */
template <> struct dq<LM_TYPE_Q5_0> {
    DQ_TRAITS(32, 22, 2, false);
    struct unit {
        uint32_t w[4], qh;
        float d;
    };
    DQ_FN void load(const uint8_t *b, int, unit *u)
    {
        u->qh = dq_ld32<2>(b + 2);
        dq_ld64<2>(b + 6, u->w);
        dq_ld64<2>(b + 14, u->w + 2);
        u->d = dq_f16(b);
    }
    DQ_FN int run_base(int, int r) { return 8 * r; }
    DQ_FN void run(const unit &u, int, int r, float *q, float *d, float *m)
    {
        uint32_t c[2];
        dq_q5_codes(u.w, u.qh, r, c);
        dq_bytes8(c, 16.0f, q);
        *d = u.d;
        *m = 0.0f;
    }
};

/* Q5_1: x = d * code + m. */
template <> struct dq<LM_TYPE_Q5_1> {
    DQ_TRAITS(32, 24, 8, true);
    struct unit {
        uint32_t w[4], qh;
        float d, m;
    };
    DQ_FN void load(const uint8_t *b, int, unit *u)
    {
        u->qh = dq_ld32<4>(b + 4);
        dq_ld64<8>(b + 8, u->w);
        dq_ld64<8>(b + 16, u->w + 2);
        u->d = dq_f16(b);
        u->m = dq_f16(b + 2);
    }
    DQ_FN int run_base(int, int r) { return 8 * r; }
    DQ_FN void run(const unit &u, int, int r, float *q, float *d, float *m)
    {
        uint32_t c[2];
        dq_q5_codes(u.w, u.qh, r, c);
        dq_bytes8(c, 0.0f, q);
        *d = u.d;
        *m = u.m;
    }
};

/* Q8_0 / Q8_1 / Q8_K: x = d * qs[i] (int8); run r = the unit's bytes 8r..8r+8
 * (the sign bit flipped, a byte is code + 128). A = the alignment of qs. */
template <int A> struct dq_q8_unit {
    uint32_t w[8];
    float d;
    DQ_FN void load_qs(const uint8_t *qs, dq_q8_unit *u)
    {
        for (int i = 0; i < 4; i++)
            dq_ld64<A>(qs + 8 * i, u->w + 2 * i);
    }
    DQ_FN void run(const dq_q8_unit &u, int r, float *q, float *d, float *m)
    {
        const uint32_t w[2] = {u.w[2 * r] ^ 0x80808080u, u.w[2 * r + 1] ^ 0x80808080u};
        dq_bytes8(w, 128.0f, q);
        *d = u.d;
        *m = 0.0f;
    }
};

template <> struct dq<LM_TYPE_Q8_0> {
    DQ_TRAITS(32, 34, 2, false);
    using unit = dq_q8_unit<2>;
    DQ_FN void load(const uint8_t *b, int, unit *u)
    {
        unit::load_qs(b + 2, u);
        u->d = dq_f16(b);
    }
    DQ_FN int run_base(int, int r) { return 8 * r; }
    DQ_FN void run(const unit &u, int, int r, float *q, float *d, float *m) { unit::run(u, r, q, d, m); }
};

template <> struct dq<LM_TYPE_Q8_1> {
    DQ_TRAITS(32, 36, 4, false);
    using unit = dq_q8_unit<4>;
    DQ_FN void load(const uint8_t *b, int, unit *u)
    {
        unit::load_qs(b + 4, u);
        u->d = dq_f16(b);
    }
    DQ_FN int run_base(int, int r) { return 8 * r; }
    DQ_FN void run(const unit &u, int, int r, float *q, float *d, float *m) { unit::run(u, r, q, d, m); }
};

/* Q8_K: a float d; unit j = qs[32j .. 32j + 32). */
template <> struct dq<LM_TYPE_Q8_K> {
    DQ_TRAITS(256, 292, 4, false);
    using unit = dq_q8_unit<4>;
    DQ_FN void load(const uint8_t *b, int j, unit *u)
    {
        unit::load_qs(b + 4 + 32 * j, u);
        u->d = lm_bits_f32(dq_ld32<4>(b));
    }
    DQ_FN int run_base(int j, int r) { return 32 * j + 8 * r; }
    DQ_FN void run(const unit &u, int, int r, float *q, float *d, float *m) { unit::run(u, r, q, d, m); }
};

/* Q2_K / Q3_K unit geometry: unit j reads the 8 code bytes 32g + l0 .. +8 of
 * qs (g = j / 4, l0 = 8 (j % 4)); run s (bit pair s of each byte) holds
 * elements 128g + 32s + l0 .. +8, in sub-block 8g + 2s + l0 / 16. */
DQ_FN int dq_k2_base(int j, int s) { return 128 * (j >> 2) + 32 * s + 8 * (j & 3); }
DQ_FN int dq_k2_sub(int j, int s) { return 8 * (j >> 2) + 2 * s + ((j & 3) >> 1); }

/* Q2_K: x = d * (sc & 15) * q - dmin * (sc >> 4), sc = scales[sub]. */
template <> struct dq<LM_TYPE_Q2_K> {
    DQ_TRAITS(256, 84, 4, true);
    struct unit {
        uint32_t w[2];
        float d[4], m[4]; /* per run */
    };
    DQ_FN void load(const uint8_t *b, int j, unit *u)
    {
        dq_ld64<4>(b + 16 + 32 * (j >> 2) + 8 * (j & 3), u->w);
        const float d = dq_f16(b + 80), dmin = dq_f16(b + 82);
        for (int s = 0; s < 4; s++) {
            const uint32_t sc = b[dq_k2_sub(j, s)];
            u->d[s] = d * dq_i2f((int)(sc & 0xFu));
            u->m[s] = -(dmin * dq_i2f((int)(sc >> 4)));
        }
    }
    DQ_FN int run_base(int j, int s) { return dq_k2_base(j, s); }
    DQ_FN void run(const unit &u, int, int s, float *q, float *d, float *m)
    {
        const uint32_t w[2] = {(u.w[0] >> (2 * s)) & 0x03030303u, (u.w[1] >> (2 * s)) & 0x03030303u};
        dq_bytes8(w, 0.0f, q);
        *d = u.d[s];
        *m = u.m[s];
    }
};

/* Q3_K: x = d * (scale - 32) * (q2 + 4 * hbit - 4); the high bit of element
 * 32b + l is bit b of hmask[l], so run s of unit j reads hmask[l0 .. l0+8)
 * at bit 4g + s; the 6-bit scale of a sub-block as quant/q2k_q3k.c packs it. */
template <> struct dq<LM_TYPE_Q3_K> {
    DQ_TRAITS(256, 110, 2, false);
    struct unit {
        uint32_t w[2], h[2];
        float d[4];
    };
    DQ_FN int scale(const uint8_t *sc, int k)
    {
        const int lo = (sc[k & 7] >> (4 * (k >> 3))) & 0xF; /* k < 8: low nibble of byte k, else high of k - 8 */
        const int hi = (sc[8 + (k & 3)] >> (2 * (k >> 2))) & 3;
        return (lo | hi << 4) - 32;
    }
    DQ_FN void load(const uint8_t *b, int j, unit *u)
    {
        const int l0 = 8 * (j & 3);
        dq_ld64<2>(b + 32 + 32 * (j >> 2) + l0, u->w);
        dq_ld64<2>(b + l0, u->h);
        const float d = dq_f16(b + 108);
        for (int s = 0; s < 4; s++)
            u->d[s] = d * dq_i2f(scale(b + 96, dq_k2_sub(j, s)));
    }
    DQ_FN int run_base(int j, int s) { return dq_k2_base(j, s); }
    DQ_FN void run(const unit &u, int j, int s, float *q, float *d, float *m)
    {
        const int hb = 4 * (j >> 2) + s;
        const uint32_t w[2] = {((u.w[0] >> (2 * s)) & 0x03030303u) | ((u.h[0] >> hb) & 0x01010101u) << 2,
                               ((u.w[1] >> (2 * s)) & 0x03030303u) | ((u.h[1] >> hb) & 0x01010101u) << 2};
        dq_bytes8(w, 4.0f, q);
        *d = u.d[s];
        *m = 0.0f;
    }
};

/* Q4_K / Q5_K unit geometry: unit j = half (j & 1) of 64-element group
 * g = j / 2, i.e. bytes 16 (j & 1) .. +16 of the group's 32 code bytes; runs
 * 0, 1: low nibbles (elements 64g + 16 (j & 1) + 8r, sub-block 2g), runs 2, 3:
 * high nibbles (32 elements further, sub-block 2g + 1). */
DQ_FN int dq_k4_base(int j, int r) { return 64 * (j >> 1) + 16 * (j & 1) + 32 * (r >> 1) + 8 * (r & 1); }

/* d[h] = d * sc, m[h] = -(dmin * min) of sub-block 2g + h (h = 0, 1): the
 * 6-bit pairs of lm_quant_scale_min_k4, read from the 12 scale bytes as three
 * words and selected without branches (the same for every run of a unit). */
DQ_FN void dq_k4_scales(const uint8_t *b, int j, float *d, float *m)
{
    const uint32_t s0 = dq_ld32<4>(b + 4), s1 = dq_ld32<4>(b + 8), s2 = dq_ld32<4>(b + 12);
    const float dall = dq_f16(b), dmin = dq_f16(b + 2);
    for (int h = 0; h < 2; h++) {
        const int is = 2 * (j >> 1) + h, sh = 8 * (is & 3);
        const uint32_t x = (s0 >> sh) & 0xFFu, y = (s1 >> sh) & 0xFFu, z = (s2 >> sh) & 0xFFu;
        const uint32_t sc = is < 4 ? x & 63u : (z & 0xFu) | (x >> 6) << 4;
        const uint32_t mn = is < 4 ? y & 63u : (z >> 4) | (y >> 6) << 4;
        d[h] = dall * dq_i2f((int)sc);
        m[h] = -(dmin * dq_i2f((int)mn));
    }
}

/* Q4_K: x = d * sc * nibble - dmin * min. */
template <> struct dq<LM_TYPE_Q4_K> {
    DQ_TRAITS(256, 144, 16, true);
    struct unit {
        uint32_t w[4];
        float d[2], m[2]; /* low / high nibbles */
    };
    DQ_FN void load(const uint8_t *b, int j, unit *u)
    {
        dq_ld128<16>(b + 16 + 16 * j, u->w);
        dq_k4_scales(b, j, u->d, u->m);
    }
    DQ_FN int run_base(int j, int r) { return dq_k4_base(j, r); }
    DQ_FN void run(const unit &u, int, int r, float *q, float *d, float *m)
    {
        uint32_t n[2];
        dq_nibbles(u.w + 2 * (r & 1), r >> 1, n);
        dq_bytes8(n, 0.0f, q);
        *d = u.d[r >> 1];
        *m = u.m[r >> 1];
    }
};

/* Q5_K: as Q4_K plus a fifth bit: qh[l] bit 2g (low nibble) or 2g + 1 (high)
 * for code byte l of group g. */
template <> struct dq<LM_TYPE_Q5_K> {
    DQ_TRAITS(256, 176, 16, true);
    struct unit {
        uint32_t w[4], h[4];
        float d[2], m[2];
    };
    DQ_FN void load(const uint8_t *b, int j, unit *u)
    {
        dq_ld128<16>(b + 48 + 16 * j, u->w);
        dq_ld128<16>(b + 16 + 16 * (j & 1), u->h);
        dq_k4_scales(b, j, u->d, u->m);
    }
    DQ_FN int run_base(int j, int r) { return dq_k4_base(j, r); }
    DQ_FN void run(const unit &u, int j, int r, float *q, float *d, float *m)
    {
        const int bit = 2 * (j >> 1) + (r >> 1);
        const uint32_t *h = u.h + 2 * (r & 1);
        uint32_t n[2];
        dq_nibbles(u.w + 2 * (r & 1), r >> 1, n);
        n[0] |= ((h[0] >> bit) & 0x01010101u) << 4;
        n[1] |= ((h[1] >> bit) & 0x01010101u) << 4;
        dq_bytes8(n, 0.0f, q);
        *d = u.d[r >> 1];
        *m = u.m[r >> 1];
    }
};

/* Q6_K: x = d * sc * (code - 32). Half h = j / 4 of the block, l0 = 8 (j % 4):
 * run s holds elements 128h + 32s + l0 .. +8, low (s < 2) or high nibbles of
 * ql[64h + 32 (s & 1) + l0 ..], bits 2s, 2s + 1 of qh[32h + l0 ..], scale
 * scales[8h + 2s + l0 / 16]. */
template <> struct dq<LM_TYPE_Q6_K> {
    DQ_TRAITS(256, 210, 2, false);
    struct unit {
        uint32_t w[4], u[2]; /* ql at 64h + l0, 64h + 32 + l0; qh */
        float d[4];
    };
    DQ_FN void load(const uint8_t *b, int j, unit *u)
    {
        const int h = j >> 2, l0 = 8 * (j & 3);
        dq_ld64<2>(b + 64 * h + l0, u->w);
        dq_ld64<2>(b + 64 * h + 32 + l0, u->w + 2);
        dq_ld64<2>(b + 128 + 32 * h + l0, u->u);
        const float d = dq_f16(b + 208);
        for (int s = 0; s < 4; s++)
            u->d[s] = d * dq_i2f((int8_t)b[192 + 8 * h + 2 * s + (l0 >> 4)]);
    }
    DQ_FN int run_base(int j, int s) { return 128 * (j >> 2) + 32 * s + 8 * (j & 3); }
    DQ_FN void run(const unit &u, int, int s, float *q, float *d, float *m)
    {
        uint32_t n[2];
        dq_nibbles(u.w + 2 * (s & 1), s >> 1, n);
        n[0] |= ((u.u[0] >> (2 * s)) & 0x03030303u) << 4;
        n[1] |= ((u.u[1] >> (2 * s)) & 0x03030303u) << 4;
        dq_bytes8(n, 32.0f, q);
        *d = u.d[s];
        *m = 0.0f;
    }
};

/* ---- IQ2 ---- */

/* The lattice codebooks as quant/iq2_codes.h lists them: per grid point, 8
 * two-bit digits selecting a magnitude 8, 25 or 43. A copy in device memory
 * and one on the host, used by the same decoder. */
#define DQ_IQ2_CODE(c) (uint16_t)(c),
[[maybe_unused]] static __device__ const uint16_t dq_iq2xxs_dev[256] = {LM_IQ2XXS_CODES(DQ_IQ2_CODE)};
[[maybe_unused]] static __device__ const uint16_t dq_iq2xs_dev[512] = {LM_IQ2XS_CODES(DQ_IQ2_CODE)};
[[maybe_unused]] static const uint16_t dq_iq2xxs_host[256] = {LM_IQ2XXS_CODES(DQ_IQ2_CODE)};
[[maybe_unused]] static const uint16_t dq_iq2xs_host[512] = {LM_IQ2XS_CODES(DQ_IQ2_CODE)};
#undef DQ_IQ2_CODE

/* q[0..8) = the signed magnitudes of grid point `code` (2-bit digits) under
 * sign index k (7 bits; the eighth sign keeps the count of minus signs even). */
DQ_FN void dq_iq2_octet(uint32_t code, uint32_t k, float *q)
{
    uint32_t p = k ^ (k >> 4);
    p ^= p >> 2;
    p ^= p >> 1;
    const uint32_t signs = (k & 127u) | (p & 1u) << 7;
    for (int i = 0; i < 8; i++) {
        const uint32_t digit = (code >> (2 * i)) & 3u;
        const float mag = digit == 0 ? 8.0f : digit == 1 ? 25.0f : 43.0f;
        q[i] = (signs >> i) & 1u ? -mag : mag;
    }
}

/* IQ2_XXS: unit j = group of 32, two words at qs[4j]: grid indices (byte r of
 * the first word for run r), sign indices (bits 7r..7r+6 of the second) and
 * the scale s (its top 4 bits); x = (d * (0.5 + s) * 0.25) * q. */
template <> struct dq<LM_TYPE_IQ2_XXS> {
    DQ_TRAITS(256, 66, 2, false);
    struct unit {
        uint32_t grids, aux;
        float d;
    };
    DQ_FN void load(const uint8_t *b, int j, unit *u)
    {
        u->grids = dq_ld32<2>(b + 2 + 8 * j);
        u->aux = dq_ld32<2>(b + 6 + 8 * j);
        u->d = dq_f16(b) * (0.5f + dq_i2f((int)(u->aux >> 28))) * 0.25f;
    }
    DQ_FN int run_base(int j, int r) { return 32 * j + 8 * r; }
    DQ_FN void run(const unit &u, int, int r, float *q, float *d, float *m)
    {
        const uint32_t idx = (u.grids >> (8 * r)) & 0xFFu;
#ifdef __CUDA_ARCH__
        const uint32_t code = dq_iq2xxs_dev[idx];
#else
        const uint32_t code = dq_iq2xxs_host[idx];
#endif
        dq_iq2_octet(code, (u.aux >> (7 * r)) & 127u, q);
        *d = u.d;
        *m = 0.0f;
    }
};

/* IQ2_XS: run r of unit j is qs[4j + r] (9-bit grid index, 7-bit sign index);
 * scales[j] low nibble scales runs 0, 1, high nibble runs 2, 3. */
template <> struct dq<LM_TYPE_IQ2_XS> {
    DQ_TRAITS(256, 74, 2, false);
    struct unit {
        uint32_t v[2]; /* qs[4j .. 4j + 4) */
        float d[2];
    };
    DQ_FN void load(const uint8_t *b, int j, unit *u)
    {
        u->v[0] = dq_ld32<2>(b + 2 + 8 * j);
        u->v[1] = dq_ld32<2>(b + 6 + 8 * j);
        const float d = dq_f16(b);
        for (int h = 0; h < 2; h++)
            u->d[h] = d * (0.5f + dq_i2f((int)((b[66 + j] >> (4 * h)) & 0xFu))) * 0.25f;
    }
    DQ_FN int run_base(int j, int r) { return 32 * j + 8 * r; }
    DQ_FN void run(const unit &u, int, int r, float *q, float *d, float *m)
    {
        const uint32_t v = (u.v[r >> 1] >> (16 * (r & 1))) & 0xFFFFu;
#ifdef __CUDA_ARCH__
        const uint32_t code = dq_iq2xs_dev[v & 511u];
#else
        const uint32_t code = dq_iq2xs_host[v & 511u];
#endif
        dq_iq2_octet(code, v >> 9, q);
        *d = u.d[r >> 1];
        *m = 0.0f;
    }
};

#undef DQ_TRAITS

/* ---- whole runs as floats ---- */

/* y[0..8) = the values of run r of a loaded unit j, bit-identical to quant/'s
 * to_float (y[i] is element run_base(j, r) + i of the block). */
template <int T> DQ_FN void dq_run_values(const typename dq<T>::unit &u, int j, int r, float *y)
{
    float q[8], d, m;
    dq<T>::run(u, j, r, q, &d, &m);
    for (int i = 0; i < 8; i++)
        y[i] = dq_val<dq<T>::HAS_M>(d, q[i], m);
}

/* The dot product of run r of a loaded unit j with x[0..8) (the activations
 * of the run's elements) in float: d * sum(q * x) + m * sum(x), as the matvec
 * computes it. */
template <int T> DQ_FN float dq_run_dot(const typename dq<T>::unit &u, int j, int r, const float *x)
{
    float q[8], d, m;
    dq<T>::run(u, j, r, q, &d, &m);
    float s = 0.0f, sx = 0.0f;
    for (int i = 0; i < 8; i++) {
        s += q[i] * x[i];
        sx += x[i];
    }
    return dq<T>::HAS_M ? d * s + m * sx : d * s;
}

/* Every quantized type dq<> decodes, as an X-macro list: X(type) per type,
 * for switches that turn a run-time type into a template argument. */
#define DQ_QUANT_TYPES(X)                                                                                              \
    X(LM_TYPE_Q4_0)                                                                                                    \
    X(LM_TYPE_Q4_1)                                                                                                    \
    X(LM_TYPE_Q5_0)                                                                                                    \
    X(LM_TYPE_Q5_1)                                                                                                    \
    X(LM_TYPE_Q8_0)                                                                                                    \
    X(LM_TYPE_Q8_1)                                                                                                    \
    X(LM_TYPE_Q2_K)                                                                                                    \
    X(LM_TYPE_Q3_K)                                                                                                    \
    X(LM_TYPE_Q4_K)                                                                                                    \
    X(LM_TYPE_Q5_K)                                                                                                    \
    X(LM_TYPE_Q6_K)                                                                                                    \
    X(LM_TYPE_Q8_K)                                                                                                    \
    X(LM_TYPE_IQ2_XXS)                                                                                                 \
    X(LM_TYPE_IQ2_XS)

#endif
