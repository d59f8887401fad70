/* quant.c - the conversion traits table, lm_quantize_chunk and
 * lm_validate_row_data.
 *
 * The table is indexed by lm_type with designated initializers; a type without
 * a row (integer types, unknown ids) gets the row of NULLs. IQ2_XXS / IQ2_XS
 * encode only through lm_quantize_chunk with an importance matrix. Everything here is stateless and thread-safe.
 */
#include <math.h>

#include "core/log.h"
#include "quant/internal.h"
#include "quant/quant.h"

/* A row of the table: the public traits plus the imatrix row encoder (NULL
 * where the type ignores an imatrix). */
struct quant_row {
    struct lm_quant_traits pub;
    lm_quant_imat_fn imat;
};

#define ROW(to, from, im) {{(to), (from), false}, (im)}

/* Unsized, so that the count check below fails when enum lm_type grows
 * without its row; the integer types (I8, I16, I32) have none (NULLs). */
static const struct quant_row rows[] = {
    [LM_TYPE_F32] = ROW(lm_quant_f32_to_float, lm_quant_f32_from_float, NULL),
    [LM_TYPE_F16] = ROW(lm_quant_f16_to_float, lm_quant_f16_from_float, NULL),
    [LM_TYPE_BF16] = ROW(lm_quant_bf16_to_float, lm_quant_bf16_from_float, NULL),
    [LM_TYPE_Q4_0] = ROW(lm_quant_q4_0_to_float, lm_quant_q4_0_from_float, lm_quant_q4_0_imat),
    [LM_TYPE_Q4_1] = ROW(lm_quant_q4_1_to_float, lm_quant_q4_1_from_float, lm_quant_q4_1_imat),
    [LM_TYPE_Q5_0] = ROW(lm_quant_q5_0_to_float, lm_quant_q5_0_from_float, lm_quant_q5_0_imat),
    [LM_TYPE_Q5_1] = ROW(lm_quant_q5_1_to_float, lm_quant_q5_1_from_float, lm_quant_q5_1_imat),
    [LM_TYPE_Q8_0] = ROW(lm_quant_q8_0_to_float, lm_quant_q8_0_from_float, NULL),
    [LM_TYPE_Q8_1] = ROW(lm_quant_q8_1_to_float, lm_quant_q8_1_from_float, NULL),
    [LM_TYPE_Q2_K] = ROW(lm_quant_q2_K_to_float, lm_quant_q2_K_from_float, lm_quant_q2_K_imat),
    [LM_TYPE_Q3_K] = ROW(lm_quant_q3_K_to_float, lm_quant_q3_K_from_float, lm_quant_q3_K_imat),
    [LM_TYPE_Q4_K] = ROW(lm_quant_q4_K_to_float, lm_quant_q4_K_from_float, lm_quant_q4_K_imat),
    [LM_TYPE_Q5_K] = ROW(lm_quant_q5_K_to_float, lm_quant_q5_K_from_float, lm_quant_q5_K_imat),
    [LM_TYPE_Q6_K] = ROW(lm_quant_q6_K_to_float, lm_quant_q6_K_from_float, lm_quant_q6_K_imat),
    [LM_TYPE_Q8_K] = ROW(lm_quant_q8_K_to_float, lm_quant_q8_K_from_float, NULL),
    /* IQ2_XXS / IQ2_XS: no encoder without an importance matrix (as in the seed) */
    [LM_TYPE_IQ2_XXS] = {{lm_quant_iq2_xxs_to_float, NULL, true}, lm_quant_iq2_xxs_imat},
    [LM_TYPE_IQ2_XS] = {{lm_quant_iq2_xs_to_float, NULL, true}, lm_quant_iq2_xs_imat},
};
_Static_assert(sizeof rows / sizeof rows[0] == LM_TYPE_COUNT, "every enum lm_type needs its row in quant.c's rows[]");

static const struct quant_row none = {{NULL, NULL, false}, NULL};

static const struct quant_row *row_of(enum lm_type t)
{
    if ((unsigned)t >= LM_TYPE_COUNT)
        return &none;
    return &rows[t];
}

/* See quant.h: the public part of a row; never NULL; thread-safe. */
const struct lm_quant_traits *lm_quant_traits(enum lm_type t) { return &row_of(t)->pub; }

/* See quant.h; thread-safe. */
bool lm_quantize_requires_imatrix(enum lm_type t) { return row_of(t)->pub.needs_imatrix; }

/* See quant.h; thread-safe. */
bool lm_quantize_supported(enum lm_type t)
{
    const struct quant_row *r = row_of(t);
    return r->pub.from_float || (r->pub.needs_imatrix && r->imat);
}

/* See quant.h: bytes written or 0 on a bad argument; writes only dst rows
 * [start_row, start_row + nrows); thread-safe for disjoint row ranges. */
size_t lm_quantize_chunk(enum lm_type type, const float *src, void *dst, int64_t start_row, int64_t nrows,
                         int64_t n_per_row, const float *imatrix)
{
    const struct quant_row *r = row_of(type);
    const int64_t blck = lm_type_blck(type);
    if ((!r->pub.from_float && !r->imat) || blck <= 0 || !src || !dst || start_row < 0 || nrows < 0 ||
        n_per_row <= 0 || n_per_row % blck != 0)
        return 0;
    if (r->pub.needs_imatrix && !imatrix)
        return 0;
    if ((type == LM_TYPE_IQ2_XXS || type == LM_TYPE_IQ2_XS) && !lm_quant_iq2_ready(type == LM_TYPE_IQ2_XS))
        return 0; /* out of memory for the lattice tables */
    const size_t row_size = lm_row_size(type, n_per_row);
    const float *x = src + start_row * n_per_row;
    char *y = (char *)dst + (size_t)start_row * row_size;
    if (imatrix && r->imat) {
        for (int64_t i = 0; i < nrows; i++)
            r->imat(x + i * n_per_row, y + (size_t)i * row_size, n_per_row, imatrix);
    } else {
        /* blocks never straddle rows, so the rows can be encoded as one run */
        r->pub.from_float(x, y, nrows * n_per_row);
    }
    return (size_t)nrows * row_size;
}

/* ---- validation ---- */

static bool fp16_finite(lm_fp16 h) { return (h & 0x7c00) != 0x7c00; }

static bool report(enum lm_type t, size_t i, const char *what)
{
    LM_LOG_WRN("validate_row_data: %s: %s at block %zu\n", lm_type_name(t), what, i);
    return false;
}

/* Offsets of the fp16 scale fields in a block, for the types that have them. */
struct scale_fields {
    int n;
    size_t off[2];
};

static struct scale_fields scale_fields_of(enum lm_type t)
{
    switch (t) {
    case LM_TYPE_Q4_0:
    case LM_TYPE_Q5_0:
    case LM_TYPE_Q8_0:
    case LM_TYPE_IQ2_XXS:
    case LM_TYPE_IQ2_XS:
        return (struct scale_fields){1, {0, 0}};
    case LM_TYPE_Q4_1:
    case LM_TYPE_Q5_1:
    case LM_TYPE_Q8_1:
    case LM_TYPE_Q4_K:
    case LM_TYPE_Q5_K:
        return (struct scale_fields){2, {0, 2}};
    case LM_TYPE_Q2_K:
        return (struct scale_fields){2, {offsetof(struct lm_block_q2_K, d), offsetof(struct lm_block_q2_K, dmin)}};
    case LM_TYPE_Q3_K:
        return (struct scale_fields){1, {offsetof(struct lm_block_q3_K, d), 0}};
    case LM_TYPE_Q6_K:
        return (struct scale_fields){1, {offsetof(struct lm_block_q6_K, d), 0}};
    default:
        return (struct scale_fields){0, {0, 0}};
    }
}

static bool validate_plain(enum lm_type t, const uint8_t *p, size_t nb)
{
    for (size_t i = 0; i < nb; i++) {
        bool ok;
        if (t == LM_TYPE_F32) {
            uint32_t u;
            memcpy(&u, p + 4 * i, 4);
            ok = (u & 0x7f800000u) != 0x7f800000u;
        } else {
            uint16_t h;
            memcpy(&h, p + 2 * i, 2);
            ok = t == LM_TYPE_F16 ? fp16_finite(h) : (h & 0x7f80u) != 0x7f80u;
        }
        if (!ok)
            return report(t, i, "inf or nan value");
    }
    return true;
}

/* See quant.h: true when every scale (and every F32/F16/BF16 value) is finite. */
bool lm_validate_row_data(enum lm_type t, const void *data, size_t nbytes)
{
    const size_t ts = lm_type_size(t);
    if (ts == 0 || nbytes % ts != 0 || (nbytes && !data)) {
        LM_LOG_WRN("validate_row_data: bad type %d or size %zu\n", (int)t, nbytes);
        return false;
    }
    const uint8_t *p = data;
    const size_t nb = nbytes / ts;
    switch (t) {
    case LM_TYPE_F32:
    case LM_TYPE_F16:
    case LM_TYPE_BF16:
        return validate_plain(t, p, nb);
    case LM_TYPE_Q8_K:
        for (size_t i = 0; i < nb; i++) {
            float d;
            memcpy(&d, p + i * ts, 4);
            if (!isfinite(d))
                return report(t, i, "inf or nan scale");
        }
        return true;
    default:
        break;
    }
    const struct scale_fields f = scale_fields_of(t);
    for (size_t i = 0; i < nb; i++) {
        for (int k = 0; k < f.n; k++) {
            lm_fp16 h;
            memcpy(&h, p + i * ts + f.off[k], 2);
            if (!fp16_finite(h))
                return report(t, i, "inf or nan scale");
        }
    }
    return true; /* integer types: nothing to check */
}
