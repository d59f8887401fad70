/* backend.c - backend vtable wrappers and the registry of backend factories. */
#include <string.h>

#include "backend/backend.h"

const char *lm_backend_name(lm_backend_t be) { return be->iface.get_name(be); }

void lm_backend_free(lm_backend_t be)
{
    if (be)
        be->iface.free(be);
}

lm_buft lm_backend_default_buft(lm_backend_t be) { return be->iface.get_default_buffer_type(be); }

lm_status lm_backend_alloc_buffer(lm_backend_t be, size_t size, struct lm_buffer **out)
{
    return lm_buft_alloc_buffer(lm_backend_default_buft(be), size, out);
}

lm_status lm_backend_graph_compute(lm_backend_t be, struct lm_graph *g) { return be->iface.graph_compute(be, g); }

bool lm_backend_supports_op(lm_backend_t be, const struct lm_tensor *op) { return be->iface.supports_op(be, op); }

bool lm_backend_supports_buft(lm_backend_t be, lm_buft buft)
{
    if (be->iface.supports_buft)
        return be->iface.supports_buft(be, buft);
    return buft == lm_backend_default_buft(be);
}

void lm_backend_synchronize(lm_backend_t be)
{
    if (be->iface.synchronize)
        be->iface.synchronize(be);
}

void lm_backend_set_n_threads(lm_backend_t be, int n_threads)
{
    if (be->iface.set_n_threads)
        be->iface.set_n_threads(be, n_threads);
}

/* ---- registry ---- */

#define MAX_REGS 16
static const struct lm_backend_reg *regs[MAX_REGS];
static int n_regs;

lm_status lm_backend_register(const struct lm_backend_reg *reg)
{
    if (!reg || !reg->name || !reg->init)
        return LM_ERR_INVALID_ARG;
    for (int i = 0; i < n_regs; i++)
        if (!strcmp(regs[i]->name, reg->name))
            return LM_OK;
    if (n_regs == MAX_REGS)
        return LM_ERR_FULL;
    regs[n_regs++] = reg;
    return LM_OK;
}

int lm_backend_reg_count(void) { return n_regs; }

const struct lm_backend_reg *lm_backend_reg_get(int i) { return i >= 0 && i < n_regs ? regs[i] : NULL; }

lm_status lm_backend_init_by_name(const char *name, lm_backend_t *out)
{
    for (int i = 0; i < n_regs; i++)
        if (!strcmp(regs[i]->name, name))
            return regs[i]->init(out);
    return LM_ERR_NOT_FOUND;
}

lm_status lm_backend_reg_init_threads(const struct lm_backend_reg *reg, int n_threads,
                                      const struct lm_backend_opts *opts, lm_backend_t *out)
{
    if (!reg || !out)
        return LM_ERR_INVALID_ARG;
    if (reg->init_threads)
        return reg->init_threads(n_threads, opts, out);
    lm_status st = reg->init(out);
    if (!st)
        lm_backend_set_n_threads(*out, n_threads);
    return st;
}

lm_buft lm_backend_reg_default_buft(const struct lm_backend_reg *reg)
{
    return reg && reg->default_buft ? reg->default_buft() : NULL;
}

lm_buft lm_backend_reg_weight_buft(const struct lm_backend_reg *reg, const struct lm_tensor *w, unsigned flags)
{
    if (reg && reg->weight_buft)
        return reg->weight_buft(w, flags);
    return lm_backend_reg_default_buft(reg);
}
