/* tensor_names.h - the one table of GGUF tensor names.
 *
 * Every weight a GGUF model file may hold has a kind here. The loader's
 * lm_ld_weight / lm_ld_bias (loader.h) take a kind and a layer, the quantize
 * rules (quantize.c) recognise tensors by the same table, and `lamina mkmodel`
 * writes the names an architecture declares through it, so a name is spelled
 * once. Names follow llama.cpp's GGUF convention: global tensors are "<base>.weight"
 * / "<base>.bias", per-layer ones "blk.<il>.<base>.weight".
 */
#ifndef LM_TENSOR_NAMES_H
#define LM_TENSOR_NAMES_H

#include <stdbool.h>
#include <stddef.h>

enum lm_tn {
    /* global */
    LM_TN_TOKEN_EMBD,      /* token_embd: [n_embd, n_vocab] */
    LM_TN_TOKEN_EMBD_NORM, /* token_embd_norm: [n_embd] (bloom) */
    LM_TN_TOKEN_TYPES,     /* token_types: [n_embd, n_token_types] (bert) */
    LM_TN_POS_EMBD,        /* position_embd: [n_embd, n_ctx_train] (gpt2, starcoder, bert) */
    LM_TN_OUTPUT_NORM,     /* output_norm: [n_embd] */
    LM_TN_OUTPUT,          /* output: [n_embd, n_vocab] */
    /* per layer */
    LM_TN_ATTN_NORM,       /* attn_norm: [n_embd] */
    LM_TN_ATTN_NORM_2,     /* attn_norm_2: [n_embd] (falcon-40B) */
    LM_TN_ATTN_QKV,        /* attn_qkv: [n_embd, n_embd_q + 2 n_embd_kv] */
    LM_TN_ATTN_Q,          /* attn_q: [n_embd, n_embd_q] */
    LM_TN_ATTN_K,          /* attn_k: [n_embd, n_embd_k_gqa] */
    LM_TN_ATTN_V,          /* attn_v: [n_embd, n_embd_v_gqa] */
    LM_TN_ATTN_OUT,        /* attn_output: [n_embd_q, n_embd] */
    LM_TN_ATTN_Q_NORM,     /* attn_q_norm: [head] (persimmon) */
    LM_TN_ATTN_K_NORM,     /* attn_k_norm: [head] */
    LM_TN_ATTN_OUT_NORM,   /* attn_output_norm: [n_embd] (bert, after attention) */
    LM_TN_FFN_NORM,        /* ffn_norm: [n_embd] */
    LM_TN_FFN_GATE,        /* ffn_gate: [n_embd, n_ff] */
    LM_TN_FFN_UP,          /* ffn_up: [n_embd, n_ff] (phi3: [n_embd, 2 n_ff], gate and up fused) */
    LM_TN_FFN_DOWN,        /* ffn_down: [n_ff, n_embd] */
    LM_TN_FFN_OUT_NORM,    /* layer_output_norm: [n_embd] (bert, after the FFN) */
    LM_TN_FFN_GATE_INP,    /* ffn_gate_inp: [n_embd, n_expert] router */
    LM_TN_FFN_GATE_EXP,    /* ffn_gate.<x> / ffn_gate_exps (experts) */
    LM_TN_FFN_UP_EXP,      /* ffn_up.<x> / ffn_up_exps */
    LM_TN_FFN_DOWN_EXP,    /* ffn_down.<x> / ffn_down_exps */
    LM_TN_COUNT
};

/* The base name of a kind: "token_embd", "attn_q", ... (without "blk.N."). */
const char *lm_tn_base(enum lm_tn tn);
/* True for the kinds that live in every layer ("blk.N." prefix). */
bool lm_tn_per_layer(enum lm_tn tn);
/* The full name "<base>.<suffix>" or "blk.<il>.<base>.<suffix>" into buf
 * (suffix "weight" or "bias"). Returns buf. */
char *lm_tn_format(char *buf, size_t size, enum lm_tn tn, int il, const char *suffix);
/* The kind of a full tensor name with the given suffix ("weight"), whatever the
 * layer; split experts ("blk.N.ffn_down.3.weight") count as their _EXP kind.
 * LM_TN_COUNT when the name is not one of the table's. */
enum lm_tn lm_tn_parse(const char *name, const char *suffix, int *il);

#endif
