// all_functions.cpp - llama.h compiles as C++11 (-pedantic-errors) and every
// function of the b1892 API links from C++: the address of each of the 100
// functions (functions.inc) goes into a table, and the header is used the way
// a C++ binding of that time uses it (static_cast to the enums, an int
// assigned to rope_scaling_type, std::to_string(LLAMA_SESSION_VERSION), the
// magics printed with std::hex << std::showbase, the anonymous union of
// llama_model_kv_override). Built against liblamina.so and liblamina.a.
#include <llama.h>

#include <cstdio>
#include <cstring>
#include <new>
#include <sstream>
#include <string>
#include <type_traits>

typedef void (*any_fn)();

static const any_fn functions[] = {
#define F(name) reinterpret_cast<any_fn>(name),
#define X(name) reinterpret_cast<any_fn>(name),
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

static_assert(std::is_integral<decltype(llama_context_params::rope_scaling_type)>::value,
              "rope_scaling_type must be an integer field");
static_assert(std::is_same<decltype(llama_batch::token), llama_token *>::value, "batch.token is non-const");
static_assert(std::is_same<llama_token, int32_t>::value && std::is_same<llama_pos, int32_t>::value &&
                  std::is_same<llama_seq_id, int32_t>::value,
              "int32 typedefs");
static_assert(std::is_same<decltype(llama_get_timings(nullptr)), llama_timings>::value, "timings by value");

static void beam_cb(void *, llama_beams_state st) { (void)st.n_beams; }

static std::string hex(unsigned v)
{
    std::ostringstream os;
    os << std::hex << std::showbase << v;
    return os.str();
}

static int usage()
{
    int bad = 0;
    llama_context_params cp = llama_context_default_params();
    int scaling = 1;
    cp.rope_scaling_type = scaling;
    cp.type_k = static_cast<enum ggml_type>(1);
    llama_model_params mp = llama_model_default_params();
    mp.split_mode = static_cast<enum llama_split_mode>(2);
    llama_model_quantize_params qp = llama_model_quantize_default_params();
    qp.ftype = static_cast<enum llama_ftype>(15);
    alignas(llama_model_kv_override) unsigned char storage[sizeof(llama_model_kv_override)];
    llama_model_kv_override *kvo = new (storage) llama_model_kv_override();
    std::strcpy(kvo->key, "general.name");
    kvo->tag = LLAMA_KV_OVERRIDE_FLOAT;
    kvo->float_value = 0.25;
    bad += std::string(kvo->key) != "general.name" || kvo->float_value != 0.25;
    kvo->int_value = 3;
    bad += kvo->int_value != 3;
    kvo->bool_value = true;
    bad += !kvo->bool_value;
    const llama_grammar_element rule[] = {{LLAMA_GRETYPE_CHAR, 'x'}, {LLAMA_GRETYPE_END, 0}};
    const llama_grammar_element *rules[] = {rule};
    llama_grammar *g = llama_grammar_init(rules, 1, 0);
    bad += g == nullptr;
    llama_grammar_free(g);
    llama_beam_search_callback_fn_t cb = beam_cb;
    (void)cb;
    bad += std::to_string(LLAMA_SESSION_VERSION) != "4";
    bad += hex(LLAMA_FILE_MAGIC_GGSN) != "0x6767736e" || hex(LLAMA_FILE_MAGIC_GGLA) != "0x67676c61";
    bad += hex(LLAMA_SESSION_MAGIC) != "0x6767736e" || hex(LLAMA_DEFAULT_SEED) != "0xffffffff";
    bad += cp.rope_scaling_type != 1 || mp.split_mode != LLAMA_SPLIT_ROW || qp.ftype != LLAMA_FTYPE_MOSTLY_Q4_K_M;
    float split[LLAMA_MAX_DEVICES] = {0};
    mp.tensor_split = split;
    bad += llama_model_default_params().tensor_split != nullptr;
    bad += static_cast<int>(llama_max_devices()) < 1;
    return bad;
}

int main()
{
    size_t n = sizeof functions / sizeof functions[0], missing = 0;
    for (size_t i = 0; i < n; i++)
        if (!functions[i]) {
            std::printf("missing: %s\n", function_names[i]);
            missing++;
        }
    llama_backend_init(false);
    int bad = usage();
    const char *info = llama_print_system_info();
    bad += info == nullptr || std::strstr(info, "AVX = ") == nullptr;
    llama_backend_free();
    std::printf("C++11: %zu functions referenced (%zu missing), %d bad uses\n", n, missing, bad);
    return missing || bad ? 1 : 0;
}
