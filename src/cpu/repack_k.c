/* repack_k.c - the K-quant layouts q2_Kx8 .. q6_Kx8 (cpu/repack.h): plain
 * rows to 8-row groups and back.
 *
 * All are bijections on the bytes of 8 plain super-blocks (same size, every
 * bit kept), so unpacking gives back the original bytes whatever they are
 * (including scale bits no quantizer would write).
 */
#include <string.h>

#include "cpu/repack.h"
#include "quant/blocks.h"

#define R LM_REPACK_ROWS

/* ---- q4_Kx8 ---- */

/* The 8 scales and 8 mins (6 bits each) of a Q4_K block, and back. */
static void k4_unpack_scales(const uint8_t q[12], uint8_t sc[8], uint8_t m[8])
{
    for (int j = 0; j < 8; j++)
        lm_quant_scale_min_k4(j, q, &sc[j], &m[j]);
}

static void k4_pack_scales(const uint8_t sc[8], const uint8_t m[8], uint8_t q[12])
{
    for (int j = 0; j < 4; j++) {
        q[j] = (uint8_t)((sc[j] & 63) | (sc[j + 4] >> 4) << 6);
        q[j + 4] = (uint8_t)((m[j] & 63) | (m[j + 4] >> 4) << 6);
        q[j + 8] = (uint8_t)((sc[j + 4] & 15) | (m[j + 4] & 15) << 4);
    }
}

/* Index of (row r, sub-block j) in the scale tables: 16 (j/2) + 2 r + j%2. */
static int k4_idx(int r, int j) { return 16 * (j / 2) + 2 * r + j % 2; }

/* Row r's 12-byte packed scales into the sc[64] / mn[32] tables (mn zeroed
 * by the caller before the first row), and back. */
static void k4_put_scales(const uint8_t q[12], int r, uint8_t *sc, uint8_t *mn)
{
    uint8_t s[8], m[8];
    k4_unpack_scales(q, s, m);
    for (int j = 0; j < 8; j++) {
        const int i = k4_idx(r, j);
        sc[i] = (uint8_t)(s[j] | (m[j] >> 4) << 6);
        mn[i & 31] |= (uint8_t)((m[j] & 15) << (i >= 32 ? 4 : 0));
    }
}

static void k4_get_scales(const uint8_t *sc, const uint8_t *mn, int r, uint8_t q[12])
{
    uint8_t s[8], m[8];
    for (int j = 0; j < 8; j++) {
        const int i = k4_idx(r, j);
        s[j] = sc[i] & 63;
        m[j] = (uint8_t)(((mn[i & 31] >> (i >= 32 ? 4 : 0)) & 15) | (sc[i] >> 6) << 4);
    }
    k4_pack_scales(s, m, q);
}

static void pack_q4_K_group(const struct lm_block_q4_K *x, int64_t stride, struct lm_block_q4_Kx8 *y)
{
    memset(y->mn, 0, sizeof y->mn);
    for (int r = 0; r < R; r++) {
        const struct lm_block_q4_K *b = x + r * stride;
        y->d[r] = b->d;
        y->dmin[r] = b->dmin;
        k4_put_scales(b->scales, r, y->sc, y->mn);
        for (int c = 0; c < 32; c++)
            memcpy(&y->qs[32 * c + 4 * r], &b->qs[4 * c], 4);
    }
}

static void unpack_q4_K_group(const struct lm_block_q4_Kx8 *x, struct lm_block_q4_K *y, int64_t stride)
{
    for (int r = 0; r < R; r++) {
        struct lm_block_q4_K *b = y + r * stride;
        b->d = x->d[r];
        b->dmin = x->dmin[r];
        k4_get_scales(x->sc, x->mn, r, b->scales);
        for (int c = 0; c < 32; c++)
            memcpy(&b->qs[4 * c], &x->qs[32 * c + 4 * r], 4);
    }
}

/* ---- q5_Kx8: the q4_Kx8 tables plus qh interleaved like qs ---- */

static void pack_q5_K_group(const struct lm_block_q5_K *x, int64_t stride, struct lm_block_q5_Kx8 *y)
{
    memset(y->mn, 0, sizeof y->mn);
    for (int r = 0; r < R; r++) {
        const struct lm_block_q5_K *b = x + r * stride;
        y->d[r] = b->d;
        y->dmin[r] = b->dmin;
        k4_put_scales(b->scales, r, y->sc, y->mn);
        for (int c = 0; c < 32; c++)
            memcpy(&y->qs[32 * c + 4 * r], &b->qs[4 * c], 4);
        for (int c = 0; c < 8; c++)
            memcpy(&y->qh[32 * c + 4 * r], &b->qh[4 * c], 4);
    }
}

static void unpack_q5_K_group(const struct lm_block_q5_Kx8 *x, struct lm_block_q5_K *y, int64_t stride)
{
    for (int r = 0; r < R; r++) {
        struct lm_block_q5_K *b = y + r * stride;
        b->d = x->d[r];
        b->dmin = x->dmin[r];
        k4_get_scales(x->sc, x->mn, r, b->scales);
        for (int c = 0; c < 32; c++)
            memcpy(&b->qs[4 * c], &x->qs[32 * c + 4 * r], 4);
        for (int c = 0; c < 8; c++)
            memcpy(&b->qh[4 * c], &x->qh[32 * c + 4 * r], 4);
    }
}

/* ---- q6_Kx8 ----
 * Code register t (0..63) of a group = elements 4t..4t+3 of each row
 * (sub-block t/4). Plain Q6_K element e = 128h + 32s + l has its low 4 bits
 * in ql[64h + 32(s&1) + l] (nibble s>>1) and its high 2 bits in
 * qh[32h + l] (bits 2s). Rows go through 256 unsigned codes (one byte each). */

static void q6_codes(const struct lm_block_q6_K *b, uint8_t code[LM_QK_K])
{
    for (int h = 0; h < 2; h++)
        for (int s = 0; s < 4; s++)
            for (int l = 0; l < 32; l++)
                code[128 * h + 32 * s + l] = (uint8_t)(((b->ql[64 * h + 32 * (s & 1) + l] >> (4 * (s >> 1))) & 15) |
                                                       ((b->qh[32 * h + l] >> (2 * s)) & 3) << 4);
}

static void q6_from_codes(const uint8_t code[LM_QK_K], struct lm_block_q6_K *b)
{
    for (int h = 0; h < 2; h++) {
        for (int l = 0; l < 32; l++) {
            const uint8_t *c = code + 128 * h + l;
            b->ql[64 * h + l] = (uint8_t)((c[0] & 15) | (c[64] & 15) << 4);
            b->ql[64 * h + 32 + l] = (uint8_t)((c[32] & 15) | (c[96] & 15) << 4);
            b->qh[32 * h + l] = (uint8_t)((c[0] >> 4) | (c[32] >> 4) << 2 | (c[64] >> 4) << 4 | (c[96] >> 4) << 6);
        }
    }
}

static void pack_q6_K_group(const struct lm_block_q6_K *x, int64_t stride, struct lm_block_q6_Kx8 *y)
{
    for (int r = 0; r < R; r++) {
        const struct lm_block_q6_K *b = x + r * stride;
        uint8_t code[LM_QK_K];
        y->d[r] = b->d;
        for (int j = 0; j < 16; j++)
            y->scales[16 * (j / 2) + 2 * r + j % 2] = b->scales[j];
        q6_codes(b, code);
        for (int j = 0; j < 16; j++) {
            const uint8_t *c = code + 16 * j; /* register 4j + u: c[4u + i] */
            for (int i = 0; i < 4; i++) {
                y->sub[j].ql[4 * r + i] = (uint8_t)((c[i] & 15) | (c[4 + i] & 15) << 4);
                y->sub[j].ql[32 + 4 * r + i] = (uint8_t)((c[8 + i] & 15) | (c[12 + i] & 15) << 4);
                y->sub[j].qh[4 * r + i] =
                    (uint8_t)((c[i] >> 4) | (c[4 + i] >> 4) << 2 | (c[8 + i] >> 4) << 4 | (c[12 + i] >> 4) << 6);
            }
        }
    }
}

static void unpack_q6_K_group(const struct lm_block_q6_Kx8 *x, struct lm_block_q6_K *y, int64_t stride)
{
    for (int r = 0; r < R; r++) {
        struct lm_block_q6_K *b = y + r * stride;
        uint8_t code[LM_QK_K];
        b->d = x->d[r];
        for (int j = 0; j < 16; j++)
            b->scales[j] = x->scales[16 * (j / 2) + 2 * r + j % 2];
        for (int j = 0; j < 16; j++) {
            uint8_t *c = code + 16 * j;
            for (int i = 0; i < 4; i++) {
                const uint8_t l0 = x->sub[j].ql[4 * r + i], l1 = x->sub[j].ql[32 + 4 * r + i];
                const uint8_t h = x->sub[j].qh[4 * r + i];
                c[i] = (uint8_t)((l0 & 15) | (h & 3) << 4);
                c[4 + i] = (uint8_t)((l0 >> 4) | ((h >> 2) & 3) << 4);
                c[8 + i] = (uint8_t)((l1 & 15) | ((h >> 4) & 3) << 4);
                c[12 + i] = (uint8_t)((l1 >> 4) | ((h >> 6) & 3) << 4);
            }
        }
        q6_from_codes(code, b);
    }
}

/* ---- q2_Kx8 and q3_Kx8: 2-bit codes (and Q3_K's high bits) ----
 * Plain: element 128g + 32s + l is bits 2s..2s+1 of qs[32g + l]; Q3_K's high
 * bit of element 32b + l is bit b of hmask[l]. Grouped: code register t
 * (elements 4t..4t+3, sub-block j = t/4, u = t%4) is bits 2u..2u+1 of
 * qs[32j + 4r + i]; Q3_K's high bit is bit t%8 of hm[32(t/8) + 4r + i]. */

static void low2_codes(const uint8_t *qs, uint8_t code[LM_QK_K])
{
    for (int e = 0; e < LM_QK_K; e++)
        code[e] = (uint8_t)((qs[32 * (e / 128) + e % 32] >> (2 * (e % 128 / 32))) & 3);
}

static void low2_from_codes(const uint8_t code[LM_QK_K], uint8_t *qs)
{
    memset(qs, 0, LM_QK_K / 4);
    for (int e = 0; e < LM_QK_K; e++)
        qs[32 * (e / 128) + e % 32] |= (uint8_t)((code[e] & 3) << (2 * (e % 128 / 32)));
}

static void low2_put(const uint8_t code[LM_QK_K], int r, uint8_t *qs)
{
    for (int j = 0; j < 16; j++)
        for (int i = 0; i < 4; i++) {
            const uint8_t *c = code + 16 * j + i;
            qs[32 * j + 4 * r + i] = (uint8_t)((c[0] & 3) | (c[4] & 3) << 2 | (c[8] & 3) << 4 | (c[12] & 3) << 6);
        }
}

static void low2_get(const uint8_t *qs, int r, uint8_t code[LM_QK_K])
{
    for (int j = 0; j < 16; j++)
        for (int u = 0; u < 4; u++)
            for (int i = 0; i < 4; i++)
                code[16 * j + 4 * u + i] = (uint8_t)((qs[32 * j + 4 * r + i] >> (2 * u)) & 3);
}

static void pack_q2_K_group(const struct lm_block_q2_K *x, int64_t stride, struct lm_block_q2_Kx8 *y)
{
    for (int r = 0; r < R; r++) {
        const struct lm_block_q2_K *b = x + r * stride;
        uint8_t code[LM_QK_K];
        y->d[r] = b->d;
        y->dmin[r] = b->dmin;
        for (int j = 0; j < 16; j++)
            y->scales[16 * (j / 2) + 2 * r + j % 2] = b->scales[j];
        low2_codes(b->qs, code);
        low2_put(code, r, y->qs);
    }
}

static void unpack_q2_K_group(const struct lm_block_q2_Kx8 *x, struct lm_block_q2_K *y, int64_t stride)
{
    for (int r = 0; r < R; r++) {
        struct lm_block_q2_K *b = y + r * stride;
        uint8_t code[LM_QK_K];
        b->d = x->d[r];
        b->dmin = x->dmin[r];
        for (int j = 0; j < 16; j++)
            b->scales[j] = x->scales[16 * (j / 2) + 2 * r + j % 2];
        low2_get(x->qs, r, code);
        low2_from_codes(code, b->qs);
    }
}

/* Q3_K's 16 stored 6-bit scales (value + 32) from its 12 bytes, and back. */
static void q3_scales_get(const uint8_t q[12], uint8_t v[16])
{
    for (int j = 0; j < 16; j++) {
        const int lo = j < 8 ? (q[j] & 15) : (q[j - 8] >> 4);
        v[j] = (uint8_t)(lo | ((q[8 + j % 4] >> (2 * (j / 4))) & 3) << 4);
    }
}

static void q3_scales_put(const uint8_t v[16], uint8_t q[12])
{
    for (int j = 0; j < 8; j++)
        q[j] = (uint8_t)((v[j] & 15) | (v[j + 8] & 15) << 4);
    for (int k = 0; k < 4; k++)
        q[8 + k] = (uint8_t)((v[k] >> 4) | (v[k + 4] >> 4) << 2 | (v[k + 8] >> 4) << 4 | (v[k + 12] >> 4) << 6);
}

static void pack_q3_K_group(const struct lm_block_q3_K *x, int64_t stride, struct lm_block_q3_Kx8 *y)
{
    memset(y->s4, 0, sizeof y->s4);
    memset(y->s2, 0, sizeof y->s2);
    memset(y->hm, 0, sizeof y->hm);
    for (int r = 0; r < R; r++) {
        const struct lm_block_q3_K *b = x + r * stride;
        uint8_t code[LM_QK_K], v[16];
        y->d[r] = b->d;
        q3_scales_get(b->scales, v);
        for (int j = 0; j < 16; j++) {
            const int i = 16 * (j / 2) + 2 * r + j % 2;
            y->s4[i % 64] |= (uint8_t)((v[j] & 15) << (4 * (i / 64)));
            y->s2[i % 32] |= (uint8_t)((v[j] >> 4) << (2 * (i / 32)));
        }
        low2_codes(b->qs, code);
        low2_put(code, r, y->qs);
        for (int e = 0; e < LM_QK_K; e++) {
            const int t = e / 4;
            y->hm[32 * (t / 8) + 4 * r + e % 4] |= (uint8_t)(((b->hmask[e % 32] >> (e / 32)) & 1) << (t % 8));
        }
    }
}

static void unpack_q3_K_group(const struct lm_block_q3_Kx8 *x, struct lm_block_q3_K *y, int64_t stride)
{
    for (int r = 0; r < R; r++) {
        struct lm_block_q3_K *b = y + r * stride;
        uint8_t code[LM_QK_K], v[16];
        b->d = x->d[r];
        for (int j = 0; j < 16; j++) {
            const int i = 16 * (j / 2) + 2 * r + j % 2;
            v[j] = (uint8_t)(((x->s4[i % 64] >> (4 * (i / 64))) & 15) | ((x->s2[i % 32] >> (2 * (i / 32))) & 3) << 4);
        }
        q3_scales_put(v, b->scales);
        low2_get(x->qs, r, code);
        low2_from_codes(code, b->qs);
        memset(b->hmask, 0, sizeof b->hmask);
        for (int e = 0; e < LM_QK_K; e++) {
            const int t = e / 4;
            b->hmask[e % 32] |= (uint8_t)(((x->hm[32 * (t / 8) + 4 * r + e % 4] >> (t % 8)) & 1) << (e / 32));
        }
    }
}

/* The row loops of each layout: group g of 8 rows, super-block b. Contract:
 * cpu/repack.h (lm_repack_fn; thread-safe, no allocation). */
#define GROUP_LOOPS(T, PLAIN, PACKED)                                                                             \
    void lm_pack_##T##x8(const void *src, void *dst, int64_t n_rows, int64_t k)                                  \
    {                                                                                                             \
        const int64_t nb = k / LM_QK_K;                                                                           \
        for (int64_t g = 0; g < n_rows / R; g++)                                                                  \
            for (int64_t b = 0; b < nb; b++)                                                                      \
                pack_##T##_group((const struct PLAIN *)src + g * R * nb + b, nb, (struct PACKED *)dst + g * nb + b); \
    }                                                                                                             \
    void lm_unpack_##T##x8(const void *src, void *dst, int64_t n_rows, int64_t k)                                \
    {                                                                                                             \
        const int64_t nb = k / LM_QK_K;                                                                           \
        for (int64_t g = 0; g < n_rows / R; g++)                                                                  \
            for (int64_t b = 0; b < nb; b++)                                                                      \
                unpack_##T##_group((const struct PACKED *)src + g * nb + b,                                       \
                                   (struct PLAIN *)dst + g * R * nb + b, nb);                                     \
    }

GROUP_LOOPS(q2_K, lm_block_q2_K, lm_block_q2_Kx8)
GROUP_LOOPS(q3_K, lm_block_q3_K, lm_block_q3_Kx8)
GROUP_LOOPS(q4_K, lm_block_q4_K, lm_block_q4_Kx8)
GROUP_LOOPS(q5_K, lm_block_q5_K, lm_block_q5_Kx8)
GROUP_LOOPS(q6_K, lm_block_q6_K, lm_block_q6_Kx8)
