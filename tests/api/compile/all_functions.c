/* all_functions.c - llama.h compiles as C11 (with -pedantic-errors) and every
 * function of the b1892 API links: the address of each of the 100 functions
 * (functions.inc) goes into a table, the types, enums and macros a client
 * uses are referenced, and a few calls run. Built twice, against liblamina.so
 * and liblamina.a (tests/CMakeLists.txt). Exit status 0 when all is well. */
#include <llama.h>

#include <stdio.h>
#include <string.h>

typedef void (*any_fn)(void);

static const any_fn functions[] = {
#define F(name) (any_fn)name,
#define X(name) (any_fn)name,
#include "functions.inc"
#undef F
#undef X
};

static const char *const function_names[] = {
#define F(name) #name,
#define X(name) #name,
#include "functions.inc"
#undef F
#undef X
};

/* Each type and callback typedef, used the way a client uses it. */
static void beam_cb(void *data, struct llama_beams_state st)
{
    (void)data;
    (void)st.beam_views[0].tokens;
    (void)st.common_prefix_length;
}

static bool progress(float p, void *user)
{
    (void)p;
    (void)user;
    return true;
}

static int types(void)
{
    int bad = 0;
    llama_pos pos = 1;
    llama_token tok = 2;
    llama_seq_id seq = 3;
    llama_seq_id *seqs[1] = {&seq};
    int32_t n_seq = 1;
    int8_t want = 1;
    llama_batch batch = {1, &tok, NULL, &pos, &n_seq, seqs, &want, 0, 1, 0};
    llama_token_data td = {tok, 1.0f, 0.5f};
    llama_token_data_array tda = {&td, 1, false};
    struct llama_model_kv_override kvo;
    memset(&kvo, 0, sizeof kvo);
    strcpy(kvo.key, "llama.context_length");
    kvo.tag = LLAMA_KV_OVERRIDE_INT;
    kvo.int_value = 7;
    kvo.float_value = 1.5;
    kvo.bool_value = true;
    struct llama_model_params mp = llama_model_default_params();
    mp.split_mode = (enum llama_split_mode)1;
    mp.progress_callback = progress;
    mp.kv_overrides = NULL;
    struct llama_context_params cp = llama_context_default_params();
    cp.rope_scaling_type = 2; /* an integer field */
    cp.type_k = (enum ggml_type)1;
    cp.type_v = GGML_TYPE_F16;
    llama_model_quantize_params qp = llama_model_quantize_default_params();
    qp.ftype = (enum llama_ftype)7;
    llama_grammar_element ge = {LLAMA_GRETYPE_CHAR, 'a'};
    struct llama_timings tm = {0, 0, 0, 0, 0, 0, 0, 0, 0};
    struct llama_kv_cache_view_cell cell = {-1};
    struct llama_kv_cache_view view = {0, 0, 0, 0, 0, 0, &cell, &seq};
    struct llama_beam_view bv = {&tok, 1, 1.0f, false};
    struct llama_beams_state bs = {&bv, 1, 0, false};
    llama_beam_search_callback_fn_t cb = beam_cb;
    llama_progress_callback pcb = progress;
    ggml_log_callback lcb = NULL;
    enum llama_vocab_type vt = LLAMA_VOCAB_TYPE_BPE;
    enum llama_token_type tt = LLAMA_TOKEN_TYPE_BYTE;
    enum llama_rope_scaling_type rs = LLAMA_ROPE_SCALING_MAX_VALUE;
    enum llama_model_kv_override_type ot = LLAMA_KV_OVERRIDE_BOOL;
    enum llama_gretype gt = LLAMA_GRETYPE_CHAR_ALT;
    cb(NULL, bs);
    bad += !pcb(0.5f, NULL) || lcb != NULL;
    bad += batch.n_tokens != 1 || tda.size != 1 || kvo.bool_value != true || ge.value != 'a' || tm.n_eval != 0;
    bad += view.cells[0].pos != -1 || mp.split_mode != LLAMA_SPLIT_LAYER || cp.rope_scaling_type != 2;
    bad += qp.ftype != LLAMA_FTYPE_MOSTLY_Q8_0 || vt != 1 || tt != 6 || rs != 2 || ot != 2 || gt != 6;
    return bad;
}

static int constants(void)
{
    int bad = 0;
    bad += LLAMA_MAX_DEVICES < 1;
    bad += LLAMA_DEFAULT_SEED != 0xFFFFFFFF;
    bad += LLAMA_MAX_RNG_STATE != 64 * 1024;
    bad += LLAMA_FILE_MAGIC_GGLA != 0x67676c61u || LLAMA_FILE_MAGIC_GGSN != 0x6767736eu;
    bad += LLAMA_SESSION_MAGIC != LLAMA_FILE_MAGIC_GGSN || LLAMA_SESSION_VERSION != 4;
    bad += LLAMA_VOCAB_TYPE_SPM != 0 || LLAMA_VOCAB_TYPE_BPE != 1;
    bad += LLAMA_TOKEN_TYPE_UNDEFINED != 0 || LLAMA_TOKEN_TYPE_NORMAL != 1 || LLAMA_TOKEN_TYPE_UNKNOWN != 2 ||
           LLAMA_TOKEN_TYPE_CONTROL != 3 || LLAMA_TOKEN_TYPE_USER_DEFINED != 4 || LLAMA_TOKEN_TYPE_UNUSED != 5 ||
           LLAMA_TOKEN_TYPE_BYTE != 6;
    bad += LLAMA_FTYPE_ALL_F32 != 0 || LLAMA_FTYPE_MOSTLY_F16 != 1 || LLAMA_FTYPE_MOSTLY_Q4_0 != 2 ||
           LLAMA_FTYPE_MOSTLY_Q4_1 != 3 || LLAMA_FTYPE_MOSTLY_Q4_1_SOME_F16 != 4 || LLAMA_FTYPE_MOSTLY_Q8_0 != 7 ||
           LLAMA_FTYPE_MOSTLY_Q5_0 != 8 || LLAMA_FTYPE_MOSTLY_Q5_1 != 9 || LLAMA_FTYPE_MOSTLY_Q2_K != 10 ||
           LLAMA_FTYPE_MOSTLY_Q3_K_S != 11 || LLAMA_FTYPE_MOSTLY_Q3_K_M != 12 || LLAMA_FTYPE_MOSTLY_Q3_K_L != 13 ||
           LLAMA_FTYPE_MOSTLY_Q4_K_S != 14 || LLAMA_FTYPE_MOSTLY_Q4_K_M != 15 || LLAMA_FTYPE_MOSTLY_Q5_K_S != 16 ||
           LLAMA_FTYPE_MOSTLY_Q5_K_M != 17 || LLAMA_FTYPE_MOSTLY_Q6_K != 18 || LLAMA_FTYPE_MOSTLY_IQ2_XXS != 19 ||
           LLAMA_FTYPE_MOSTLY_IQ2_XS != 20 || LLAMA_FTYPE_MOSTLY_Q2_K_S != 21 || LLAMA_FTYPE_GUESSED != 1024;
    bad += LLAMA_ROPE_SCALING_UNSPECIFIED != -1 || LLAMA_ROPE_SCALING_NONE != 0 || LLAMA_ROPE_SCALING_LINEAR != 1 ||
           LLAMA_ROPE_SCALING_YARN != 2 || LLAMA_ROPE_SCALING_MAX_VALUE != 2;
    bad += LLAMA_SPLIT_NONE != 0 || LLAMA_SPLIT_LAYER != 1 || LLAMA_SPLIT_ROW != 2;
    bad += LLAMA_KV_OVERRIDE_INT != 0 || LLAMA_KV_OVERRIDE_FLOAT != 1 || LLAMA_KV_OVERRIDE_BOOL != 2;
    bad += LLAMA_GRETYPE_END != 0 || LLAMA_GRETYPE_ALT != 1 || LLAMA_GRETYPE_RULE_REF != 2 || LLAMA_GRETYPE_CHAR != 3 ||
           LLAMA_GRETYPE_CHAR_NOT != 4 || LLAMA_GRETYPE_CHAR_RNG_UPPER != 5 || LLAMA_GRETYPE_CHAR_ALT != 6;
    bad += GGML_TYPE_F32 != 0 || GGML_TYPE_F16 != 1;
    return bad;
}

int main(void)
{
    size_t n = sizeof functions / sizeof functions[0], missing = 0;
    for (size_t i = 0; i < n; i++)
        if (!functions[i]) {
            printf("missing: %s\n", function_names[i]);
            missing++;
        }
    int bad = types() + constants();
    /* a few calls, including teardown order: backend_free first is allowed */
    llama_backend_init(false);
    const char *info = llama_print_system_info();
    bad += info == NULL || strstr(info, "AVX = ") == NULL;
    bad += llama_max_devices() < 1 || !llama_mmap_supported();
    bad += llama_context_default_params().n_ctx != 512;
    llama_backend_free();
    printf("C11: %zu functions referenced (%zu missing), %d bad constants/types\n", n, missing, bad);
    return missing || bad ? 1 : 0;
}
