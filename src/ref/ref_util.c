/* ref_util.c - element access and row conversion for the ref backend.
 *
 * Everything goes through the tensor's strides; nothing assumes contiguity
 * except that a quantized row's blocks are packed (the op constructors
 * guarantee it for every quantized operand).
 */
#include <math.h>

#include "core/fp16.h"
#include "quant/quant.h"
#include "ref/ref_internal.h"

/* See ref_internal.h for the contracts of the functions below. */

double lm_ref_get(const struct lm_tensor *t, int64_t i0, int64_t i1, int64_t i2, int64_t i3)
{
    const void *p = ref_ptr(t, i0, i1, i2, i3);
    switch (t->type) {
    case LM_TYPE_F32: return *(const float *)p;
    case LM_TYPE_F16: return lm_fp16_to_fp32(*(const lm_fp16 *)p);
    case LM_TYPE_BF16: return lm_bf16_to_fp32(*(const lm_bf16 *)p);
    case LM_TYPE_I32: return *(const int32_t *)p;
    case LM_TYPE_I16: return *(const int16_t *)p;
    case LM_TYPE_I8: return *(const int8_t *)p;
    default: return NAN; /* quantized: callers use lm_ref_get_row */
    }
}

void lm_ref_set(struct lm_tensor *t, int64_t i0, int64_t i1, int64_t i2, int64_t i3, double v)
{
    void *p = ref_ptr(t, i0, i1, i2, i3);
    switch (t->type) {
    case LM_TYPE_F32: *(float *)p = (float)v; break;
    case LM_TYPE_F16: *(lm_fp16 *)p = lm_fp32_to_fp16((float)v); break;
    case LM_TYPE_BF16: *(lm_bf16 *)p = lm_fp32_to_bf16((float)v); break;
    case LM_TYPE_I32: *(int32_t *)p = (int32_t)v; break;
    default: break; /* not produced by any op */
    }
}

static bool is_float_type(enum lm_type type)
{
    return type == LM_TYPE_F32 || type == LM_TYPE_F16 || type == LM_TYPE_BF16;
}

bool lm_ref_type_readable(enum lm_type type)
{
    if (is_float_type(type))
        return true;
    return lm_type_valid(type) && lm_type_traits(type)->is_quantized && lm_quant_traits(type)->to_float != NULL;
}

bool lm_ref_type_writable(enum lm_type type)
{
    if (is_float_type(type))
        return true;
    return lm_type_valid(type) && lm_type_traits(type)->is_quantized && lm_quant_traits(type)->from_float != NULL;
}

lm_status lm_ref_get_row(const struct lm_tensor *t, int64_t i1, int64_t i2, int64_t i3, float *out)
{
    if (is_float_type(t->type)) {
        for (int64_t i0 = 0; i0 < t->ne[0]; i0++)
            out[i0] = (float)lm_ref_get(t, i0, i1, i2, i3);
        return LM_OK;
    }
    if (!lm_ref_type_readable(t->type))
        return LM_ERR_UNSUPPORTED;
    lm_quant_traits(t->type)->to_float(ref_ptr(t, 0, i1, i2, i3), out, t->ne[0]);
    return LM_OK;
}

void lm_ref_unflatten(const int64_t ne[4], int64_t flat, int64_t idx[4])
{
    for (int d = 0; d < 4; d++) {
        idx[d] = ne[d] > 0 ? flat % ne[d] : 0;
        flat = ne[d] > 0 ? flat / ne[d] : 0;
    }
}
