/* arch.c - the architecture registry: names and definitions. Each
 * architecture's tensors and graph live in model/arch/<name>.c. */
#include <string.h>

#include "model/model.h"

extern const struct lm_arch_def lm_arch_llama;
extern const struct lm_arch_def lm_arch_gpt2;
extern const struct lm_arch_def lm_arch_stablelm;
extern const struct lm_arch_def lm_arch_qwen;
extern const struct lm_arch_def lm_arch_phi2;
extern const struct lm_arch_def lm_arch_persimmon;
extern const struct lm_arch_def lm_arch_plamo;
extern const struct lm_arch_def lm_arch_qwen2;
extern const struct lm_arch_def lm_arch_gemma;
extern const struct lm_arch_def lm_arch_phi3;
extern const struct lm_arch_def lm_arch_falcon;
extern const struct lm_arch_def lm_arch_starcoder;
extern const struct lm_arch_def lm_arch_mpt;
extern const struct lm_arch_def lm_arch_bloom;
extern const struct lm_arch_def lm_arch_refact;
extern const struct lm_arch_def lm_arch_baichuan;
extern const struct lm_arch_def lm_arch_bert;

static const char *const names[LM_ARCH_COUNT] = {
    [LM_ARCH_LLAMA] = "llama",       [LM_ARCH_FALCON] = "falcon",     [LM_ARCH_BAICHUAN] = "baichuan",
    [LM_ARCH_GPT2] = "gpt2",         [LM_ARCH_STARCODER] = "starcoder", [LM_ARCH_MPT] = "mpt",
    [LM_ARCH_BLOOM] = "bloom",       [LM_ARCH_STABLELM] = "stablelm", [LM_ARCH_QWEN] = "qwen",
    [LM_ARCH_QWEN2] = "qwen2",       [LM_ARCH_PHI2] = "phi2",         [LM_ARCH_PHI3] = "phi3",
    [LM_ARCH_PERSIMMON] = "persimmon", [LM_ARCH_REFACT] = "refact",   [LM_ARCH_PLAMO] = "plamo",
    [LM_ARCH_GEMMA] = "gemma",       [LM_ARCH_GPTNEOX] = "gptneox",   [LM_ARCH_BERT] = "bert",
    [LM_ARCH_UNKNOWN] = "unknown",
};

static const struct lm_arch_def *const defs[LM_ARCH_COUNT] = {
    [LM_ARCH_LLAMA] = &lm_arch_llama,
    [LM_ARCH_GPT2] = &lm_arch_gpt2,
    [LM_ARCH_STABLELM] = &lm_arch_stablelm,
    [LM_ARCH_QWEN] = &lm_arch_qwen,
    [LM_ARCH_PHI2] = &lm_arch_phi2,
    [LM_ARCH_PERSIMMON] = &lm_arch_persimmon,
    [LM_ARCH_PLAMO] = &lm_arch_plamo,
    [LM_ARCH_QWEN2] = &lm_arch_qwen2,
    [LM_ARCH_GEMMA] = &lm_arch_gemma,
    [LM_ARCH_PHI3] = &lm_arch_phi3,
    [LM_ARCH_FALCON] = &lm_arch_falcon,
    [LM_ARCH_STARCODER] = &lm_arch_starcoder,
    [LM_ARCH_MPT] = &lm_arch_mpt,
    [LM_ARCH_BLOOM] = &lm_arch_bloom,
    [LM_ARCH_REFACT] = &lm_arch_refact,
    [LM_ARCH_BAICHUAN] = &lm_arch_baichuan,
    [LM_ARCH_BERT] = &lm_arch_bert,
};

const struct lm_arch_def *lm_arch_get(enum lm_arch arch)
{
    return (unsigned)arch < LM_ARCH_COUNT ? defs[arch] : NULL;
}

enum lm_arch lm_arch_from_name(const char *name)
{
    for (int a = 0; a < LM_ARCH_UNKNOWN; a++)
        if (!strcmp(names[a], name))
            return (enum lm_arch)a;
    return LM_ARCH_UNKNOWN;
}

const char *lm_arch_name(enum lm_arch arch)
{
    return (unsigned)arch < LM_ARCH_COUNT ? names[arch] : "unknown";
}
