/* util_cpu.c - see util_cpu.h. */
#include "util_cpu.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lm_test.h"
#include "quant/quant.h"

void uc_seed(struct uc_rng *r, uint64_t seed) { r->s = seed ? seed : 0x9E3779B97F4A7C15ull; }

uint64_t uc_u64(struct uc_rng *r)
{
    r->s ^= r->s >> 12;
    r->s ^= r->s << 25;
    r->s ^= r->s >> 27;
    return r->s * 0x2545F4914F6CDD1Dull;
}

float uc_float(struct uc_rng *r, float lo, float hi)
{
    return lo + (hi - lo) * (float)((double)(uc_u64(r) >> 40) / (double)(1ull << 24));
}

/* The allocation's start is stored in the 8 bytes just before the returned
 * pointer (always inside the allocation: the pointer is >= 64 bytes past it),
 * so any misalign works, including ones of 64 bytes or more. */
void *uc_alloc(size_t bytes, size_t misalign)
{
    char *base = malloc(bytes + 192 + misalign);
    if (!base)
        return NULL;
    uintptr_t p = ((uintptr_t)base + sizeof(void *) + 63) / 64 * 64 + 64;
    char *ret = (char *)p + misalign;
    memcpy(ret - sizeof(void *), &base, sizeof base);
    return ret;
}

void uc_free(void *ret)
{
    if (!ret)
        return;
    char *base;
    memcpy(&base, (char *)ret - sizeof(void *), sizeof base);
    free(base);
}

void *uc_fixture(const char *rel, size_t *size)
{
    char path[512];
    snprintf(path, sizeof path, "fixtures/%s", rel);
    void *data = lm_test_read_file(lm_test_shared(path), size);
    if (!data)
        fprintf(stderr, "missing fixture %s\n", path);
    return data;
}

struct lm_ctx *uc_ctx(size_t bytes)
{
    struct lm_ctx_params cp = {bytes, NULL, false};
    struct lm_ctx *ctx = NULL;
    return lm_ctx_new(&cp, &ctx) == LM_OK ? ctx : NULL;
}

lm_status uc_compute(lm_backend_t be, struct lm_ctx *ctx, struct lm_tensor *t)
{
    struct lm_graph *g = lm_graph_new(ctx, 256);
    if (!g)
        return LM_ERR_NOMEM;
    lm_status st = lm_graph_expand(g, t);
    return st ? st : lm_backend_graph_compute(be, g);
}

void uc_fill(struct lm_tensor *t, struct uc_rng *r, float lo, float hi)
{
    for (int64_t i3 = 0; i3 < t->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < t->ne[2]; i2++)
            for (int64_t i1 = 0; i1 < t->ne[1]; i1++)
                for (int64_t i0 = 0; i0 < t->ne[0]; i0++)
                    lm_set_f32_nd(t, i0, i1, i2, i3, uc_float(r, lo, hi));
}

void uc_decode(enum lm_type t, const void *x, float *y, int64_t n)
{
    if (t == LM_TYPE_F32)
        memcpy(y, x, (size_t)n * sizeof(float));
    else
        lm_quant_traits(t)->to_float(x, y, n);
}

double uc_dot_scale(const float *x, const float *y, int64_t n, int64_t blk)
{
    double s = 0.0;
    for (int64_t b = 0; b < n; b += blk) {
        double mx = 0.0;
        for (int64_t i = b; i < b + blk && i < n; i++)
            mx = fabs(x[i]) > mx ? fabs(x[i]) : mx;
        for (int64_t i = b; i < b + blk && i < n; i++)
            s += (fabs(x[i]) + mx) * fabs(y[i]);
    }
    return s;
}
