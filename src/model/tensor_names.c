/* tensor_names.c - the tensor-name table (see tensor_names.h). */
#include "model/tensor_names.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const base[LM_TN_COUNT] = {
    [LM_TN_TOKEN_EMBD] = "token_embd",
    [LM_TN_TOKEN_EMBD_NORM] = "token_embd_norm",
    [LM_TN_TOKEN_TYPES] = "token_types",
    [LM_TN_POS_EMBD] = "position_embd",
    [LM_TN_OUTPUT_NORM] = "output_norm",
    [LM_TN_OUTPUT] = "output",
    [LM_TN_ATTN_NORM] = "attn_norm",
    [LM_TN_ATTN_NORM_2] = "attn_norm_2",
    [LM_TN_ATTN_QKV] = "attn_qkv",
    [LM_TN_ATTN_Q] = "attn_q",
    [LM_TN_ATTN_K] = "attn_k",
    [LM_TN_ATTN_V] = "attn_v",
    [LM_TN_ATTN_OUT] = "attn_output",
    [LM_TN_ATTN_Q_NORM] = "attn_q_norm",
    [LM_TN_ATTN_K_NORM] = "attn_k_norm",
    [LM_TN_ATTN_OUT_NORM] = "attn_output_norm",
    [LM_TN_FFN_NORM] = "ffn_norm",
    [LM_TN_FFN_GATE] = "ffn_gate",
    [LM_TN_FFN_UP] = "ffn_up",
    [LM_TN_FFN_DOWN] = "ffn_down",
    [LM_TN_FFN_OUT_NORM] = "layer_output_norm",
    [LM_TN_FFN_GATE_INP] = "ffn_gate_inp",
    [LM_TN_FFN_GATE_EXP] = "ffn_gate",
    [LM_TN_FFN_UP_EXP] = "ffn_up",
    [LM_TN_FFN_DOWN_EXP] = "ffn_down",
};

const char *lm_tn_base(enum lm_tn tn) { return (unsigned)tn < LM_TN_COUNT ? base[tn] : "?"; }

bool lm_tn_per_layer(enum lm_tn tn) { return tn >= LM_TN_ATTN_NORM && tn < LM_TN_COUNT; }

char *lm_tn_format(char *buf, size_t size, enum lm_tn tn, int il, const char *suffix)
{
    if (lm_tn_per_layer(tn))
        snprintf(buf, size, "blk.%d.%s.%s", il, lm_tn_base(tn), suffix);
    else
        snprintf(buf, size, "%s.%s", lm_tn_base(tn), suffix);
    return buf;
}

/* "<base>.<suffix>" exactly, or for experts "<base>.<digits>.<suffix>" or
 * "<base>_exps.<suffix>". */
static bool matches(const char *s, const char *b, const char *suffix, bool expert)
{
    size_t n = strlen(b);
    if (strncmp(s, b, n))
        return false;
    s += n;
    if (expert) {
        if (!strncmp(s, "_exps", 5))
            s += 5;
        else if (*s == '.' && s[1] >= '0' && s[1] <= '9') {
            s++;
            while (*s >= '0' && *s <= '9')
                s++;
        } else
            return false;
    }
    return *s == '.' && !strcmp(s + 1, suffix);
}

enum lm_tn lm_tn_parse(const char *name, const char *suffix, int *il)
{
    int layer = -1;
    const char *rest = name;
    if (!strncmp(name, "blk.", 4)) {
        char *end;
        long v = strtol(name + 4, &end, 10);
        if (end == name + 4 || *end != '.' || v < 0 || v > 1000000)
            return LM_TN_COUNT;
        layer = (int)v;
        rest = end + 1;
    }
    for (int tn = 0; tn < LM_TN_COUNT; tn++) {
        bool expert = tn >= LM_TN_FFN_GATE_EXP;
        if (lm_tn_per_layer((enum lm_tn)tn) != (layer >= 0))
            continue;
        if (matches(rest, base[tn], suffix, expert)) {
            if (il)
                *il = layer;
            return (enum lm_tn)tn;
        }
    }
    return LM_TN_COUNT;
}
