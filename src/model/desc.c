/* desc.c - human-readable model descriptions ("llama 7B Q4_0"). */
#include <stdbool.h>
#include <stdio.h>

#include "model/model.h"
#include "model/quantize.h"

/* The display names are a column of quantize.c's table of file types. */
const char *lm_ftype_name(uint32_t ftype)
{
    const struct lm_ftype_info *fi = lm_ftype_info(ftype);
    return fi ? fi->display : "unknown, may not work";
}

static const char *size_name(enum lm_model_size s)
{
    switch (s) {
    case LM_SIZE_0_1B: return "0.1B";
    case LM_SIZE_0_4B: return "0.4B";
    case LM_SIZE_0_5B: return "0.5B";
    case LM_SIZE_0_8B: return "0.8B";
    case LM_SIZE_1B: return "1B";
    case LM_SIZE_1_5B: return "1.5B";
    case LM_SIZE_2B: return "2B";
    case LM_SIZE_3B: return "3B";
    case LM_SIZE_4B: return "4B";
    case LM_SIZE_7B: return "7B";
    case LM_SIZE_8B: return "8B";
    case LM_SIZE_8x7B: return "8x7B";
    case LM_SIZE_13B: return "13B";
    case LM_SIZE_14B: return "14B";
    case LM_SIZE_15B: return "15B";
    case LM_SIZE_30B: return "30B";
    case LM_SIZE_34B: return "34B";
    case LM_SIZE_40B: return "40B";
    case LM_SIZE_65B: return "65B";
    case LM_SIZE_70B: return "70B";
    case LM_SIZE_180B: return "180B";
    default: return NULL;
    }
}

int lm_model_desc(const struct lm_model *m, char *buf, size_t size)
{
    const char *sz = size_name(m->hp.size);
    char count[32];
    if (!sz) { /* print the parameter count: 260K, 1.1B, ... */
        double n = (double)m->n_elements;
        if (n >= 1e9)
            snprintf(count, sizeof count, "%.1fB", n / 1e9);
        else if (n >= 1e6)
            snprintf(count, sizeof count, "%.0fM", n / 1e6);
        else
            snprintf(count, sizeof count, "%.0fK", n / 1e3);
        sz = count;
    }
    return snprintf(buf, size, "%s %s %s%s", m->arch_name, sz, lm_ftype_name(m->hp.ftype),
                    m->hp.ftype_guessed ? " (guessed)" : "");
}
