/* type.c - the one type-traits table. Block sizes and byte counts are the GGUF
 * facts of spec/quant-formats.md; quant/blocks.h asserts the struct sizes. */
#include "core/type.h"

#include <strings.h>

/* The type descriptor every other type table hangs off (quant/quant.c's
 * conversions, the CPU kernel table, repacking, quantize's ftype rules,
 * CUDA's per-type switches): an id is a type exactly when it has a row here.
 * Unsized, so that the count check below fails when enum lm_type grows
 * without its row (quant.c checks its table the same way). */
static const struct lm_type_traits traits[] = {
    [LM_TYPE_F32] = {"f32", 1, 4, false},
    [LM_TYPE_F16] = {"f16", 1, 2, false},
    [LM_TYPE_Q4_0] = {"q4_0", LM_QK, 2 + LM_QK / 2, true},
    [LM_TYPE_Q4_1] = {"q4_1", LM_QK, 4 + LM_QK / 2, true},
    [LM_TYPE_Q5_0] = {"q5_0", LM_QK, 2 + 4 + LM_QK / 2, true},
    [LM_TYPE_Q5_1] = {"q5_1", LM_QK, 4 + 4 + LM_QK / 2, true},
    [LM_TYPE_Q8_0] = {"q8_0", LM_QK, 2 + LM_QK, true},
    [LM_TYPE_Q8_1] = {"q8_1", LM_QK, 4 + LM_QK, true},
    [LM_TYPE_Q2_K] = {"q2_K", LM_QK_K, LM_QK_K / 16 + LM_QK_K / 4 + 4, true},
    [LM_TYPE_Q3_K] = {"q3_K", LM_QK_K, LM_QK_K / 8 + LM_QK_K / 4 + 12 + 2, true},
    [LM_TYPE_Q4_K] = {"q4_K", LM_QK_K, 4 + 12 + LM_QK_K / 2, true},
    [LM_TYPE_Q5_K] = {"q5_K", LM_QK_K, 4 + 12 + LM_QK_K / 8 + LM_QK_K / 2, true},
    [LM_TYPE_Q6_K] = {"q6_K", LM_QK_K, LM_QK_K / 2 + LM_QK_K / 4 + LM_QK_K / 16 + 2, true},
    [LM_TYPE_Q8_K] = {"q8_K", LM_QK_K, 4 + LM_QK_K + LM_QK_K / 16 * 2, true},
    [LM_TYPE_IQ2_XXS] = {"iq2_xxs", LM_QK_K, 2 + LM_QK_K / 8 * 2, true},
    [LM_TYPE_IQ2_XS] = {"iq2_xs", LM_QK_K, 2 + LM_QK_K / 8 * 2 + LM_QK_K / 32, true},
    [LM_TYPE_I8] = {"i8", 1, 1, false},
    [LM_TYPE_I16] = {"i16", 1, 2, false},
    [LM_TYPE_I32] = {"i32", 1, 4, false},
    [LM_TYPE_BF16] = {"bf16", 1, 2, false},
};
_Static_assert(sizeof traits / sizeof traits[0] == LM_TYPE_COUNT, "every enum lm_type needs its row in traits[]");

static const struct lm_type_traits unknown = {"unknown", 0, 0, false};

const struct lm_type_traits *lm_type_traits(enum lm_type t)
{
    if ((unsigned)t >= LM_TYPE_COUNT || traits[t].blck_size == 0)
        return &unknown;
    return &traits[t];
}

bool lm_type_valid(int64_t t)
{
    return t >= 0 && t < LM_TYPE_COUNT && traits[t].blck_size > 0;
}

const char *lm_type_name(enum lm_type t) { return lm_type_traits(t)->name; }
int64_t lm_type_blck(enum lm_type t) { return lm_type_traits(t)->blck_size; }
size_t lm_type_size(enum lm_type t) { return lm_type_traits(t)->type_size; }

size_t lm_row_size(enum lm_type t, int64_t n)
{
    const struct lm_type_traits *tr = lm_type_traits(t);
    if (tr->blck_size == 0)
        return 0;
    return (size_t)(n / tr->blck_size) * tr->type_size;
}

bool lm_type_from_name(const char *name, enum lm_type *out)
{
    for (int t = 0; t < LM_TYPE_COUNT; t++) {
        if (traits[t].blck_size && !strcasecmp(traits[t].name, name)) {
            *out = (enum lm_type)t;
            return true;
        }
    }
    return false;
}
