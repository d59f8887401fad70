/* repack_float.c - the f16x8, bf16x8 and f32x8 layouts (cpu/repack.h):
 * plain rows to 8-row groups of chunks and back.
 *
 * Within a group, chunk j of rows 0..7 is stored together, row after row
 * (f16x8, f32x8: 8 elements per row and chunk, in order; bf16x8: 16, paired
 * as element t with element 8 + t in one 32-bit word). The same bytes as the
 * plain rows, only moved; k (the row length) is a multiple of the chunk. */
#include <string.h>

#include "cpu/repack.h"

/* Chunk of ce elements of es bytes: plain order -> stored order (paired
 * halves when pair is set) or back. */
static void move_chunk(const char *src, char *dst, int ce, size_t es, bool pair, bool to_packed)
{
    if (!pair) {
        memcpy(dst, src, (size_t)ce * es);
        return;
    }
    const uint16_t *s = (const uint16_t *)src;
    uint16_t *d = (uint16_t *)dst;
    for (int t = 0; t < ce / 2; t++) {
        if (to_packed) {
            d[2 * t] = s[t];
            d[2 * t + 1] = s[ce / 2 + t];
        } else {
            d[t] = s[2 * t];
            d[ce / 2 + t] = s[2 * t + 1];
        }
    }
}

/* Move the chunks of every group (ce elements of es bytes per row and chunk). */
static void move_chunks(const void *vsrc, void *vdst, int64_t n_rows, int64_t k, int ce, size_t es, bool pair,
                        bool to_packed)
{
    const char *src = vsrc;
    char *dst = vdst;
    const int64_t nchunk = k / ce;
    const size_t chunk = (size_t)ce * es, row = (size_t)k * es;
    for (int64_t g = 0; g < n_rows / LM_REPACK_ROWS; g++) {
        const size_t base = (size_t)g * LM_REPACK_ROWS * row;
        for (int r = 0; r < LM_REPACK_ROWS; r++) {
            for (int64_t j = 0; j < nchunk; j++) {
                const size_t plain = base + (size_t)r * row + (size_t)j * chunk;
                const size_t packed = base + ((size_t)j * LM_REPACK_ROWS + (size_t)r) * chunk;
                if (to_packed)
                    move_chunk(src + plain, dst + packed, ce, es, pair, true);
                else
                    move_chunk(src + packed, dst + plain, ce, es, pair, false);
            }
        }
    }
}

/* Contract: repack.h (lm_repack_fn); thread-safe, src and dst must not overlap. */
void lm_pack_f16x8(const void *src, void *dst, int64_t n_rows, int64_t k)
{
    move_chunks(src, dst, n_rows, k, LM_REPACK_FK, sizeof(lm_fp16), false, true);
}

/* Contract: repack.h (lm_repack_fn). */
void lm_unpack_f16x8(const void *src, void *dst, int64_t n_rows, int64_t k)
{
    move_chunks(src, dst, n_rows, k, LM_REPACK_FK, sizeof(lm_fp16), false, false);
}

/* Contract: repack.h (lm_repack_fn); thread-safe, src and dst must not overlap. */
void lm_pack_bf16x8(const void *src, void *dst, int64_t n_rows, int64_t k)
{
    move_chunks(src, dst, n_rows, k, LM_REPACK_BFK, sizeof(lm_bf16), true, true);
}

/* Contract: repack.h (lm_repack_fn). */
void lm_unpack_bf16x8(const void *src, void *dst, int64_t n_rows, int64_t k)
{
    move_chunks(src, dst, n_rows, k, LM_REPACK_BFK, sizeof(lm_bf16), true, false);
}

/* Contract: repack.h (lm_repack_fn); thread-safe, src and dst must not overlap. */
void lm_pack_f32x8(const void *src, void *dst, int64_t n_rows, int64_t k)
{
    move_chunks(src, dst, n_rows, k, LM_REPACK_FK, sizeof(float), false, true);
}

/* Contract: repack.h (lm_repack_fn). */
void lm_unpack_f32x8(const void *src, void *dst, int64_t n_rows, int64_t k)
{
    move_chunks(src, dst, n_rows, k, LM_REPACK_FK, sizeof(float), false, false);
}
