/* opts.c - the option groups `lamina run`, `chat` and `serve` share: the
 * model and context flags, and the sampling flags (llama.cpp's names), with
 * one help text each and one place that loads a model (applying its LoRA
 * adapters) and its context. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "progress.h"

static long long n_cores(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? n : 1;
}

struct cli_model_opts cli_model_defaults(void)
{
    return (struct cli_model_opts){.n_ctx = 512, .n_batch = 512, .n_threads = n_cores(), .n_threads_batch = -1,
                                   .seed = -1, .type_k = GGML_TYPE_F16, .type_v = GGML_TYPE_F16,
                                   .place.split_mode = LLAMA_SPLIT_LAYER};
}

bool cli_model_add_lora(struct cli_model_opts *o, const char *path, float scale)
{
    if (o->n_lora >= CLI_MAX_LORA) {
        fprintf(stderr, "error: at most %d LoRA adapters\n", CLI_MAX_LORA);
        return false;
    }
    if (!isfinite(scale)) {
        fprintf(stderr, "error: the scale of LoRA adapter %s is not finite\n", path);
        return false;
    }
    o->lora[o->n_lora++] = (struct cli_lora){.path = path, .scale = scale};
    return true;
}

#define IS(name) (!strcmp(a, name))
#define VAL() do { if (!(v = cli_value(argc, argv, i))) return -1; } while (0)
#define INT(field, lo, hi) do { VAL(); if (!cli_int(a, v, lo, hi, &ll)) return -1; o->field = ll; } while (0)
#define FLT(field) do { VAL(); if (!cli_float(a, v, &o->field)) return -1; } while (0)

int cli_model_flag(int argc, char **argv, int *i, struct cli_model_opts *o)
{
    const char *a = argv[*i], *v = NULL;
    long long ll;
    int r;
    if (IS("-m") || IS("--model")) { VAL(); o->model = v; }
    else if (IS("-t") || IS("--threads")) INT(n_threads, 1, 1024);
    else if (IS("-tb") || IS("--threads-batch")) INT(n_threads_batch, 1, 1024);
    else if (IS("-c") || IS("--ctx-size")) INT(n_ctx, 0, 1 << 24);
    else if (IS("-b") || IS("--batch-size")) INT(n_batch, 1, 1 << 24);
    else if (IS("-s") || IS("--seed")) INT(seed, -1, 0xFFFFFFFFLL);
    else if (IS("-ctk") || IS("--cache-type-k")) { VAL(); if (!cli_cache_type(v, &o->type_k)) return -1; }
    else if (IS("-ctv") || IS("--cache-type-v")) { VAL(); if (!cli_cache_type(v, &o->type_v)) return -1; }
    else if (IS("--no-mmap")) o->no_mmap = true;
    else if (IS("--mlock")) o->mlock = true;
    else if (IS("--verbose")) o->verbose = true;
    else if (IS("--lora")) { VAL(); if (!cli_model_add_lora(o, v, 1.0f)) return -1; }
    else if (IS("--lora-scaled")) {
        float scale;
        if (*i + 2 >= argc) {
            fprintf(stderr, "error: option %s needs a file and a scale\n", a);
            return -1;
        }
        *i += 2;
        if (!cli_float(a, argv[*i], &scale) || !cli_model_add_lora(o, argv[*i - 1], scale))
            return -1;
    }
    else if (IS("--lora-base")) { VAL(); o->lora_base = v; }
    else if (IS("-nkvo") || IS("--no-kv-offload")) o->no_kv_offload = true;
    else if ((r = cli_placement_flag(argc, argv, i, &o->place)) != 0) return r;
    else return 0;
    return 1;
}

static bool tensor_split(const char *opt, const char *s, float *out)
{
    float ts[LLAMA_MAX_DEVICES] = {0};
    int n = 0;
    for (const char *p = s;; n++) {
        char buf[64];
        size_t len = strcspn(p, ",/");
        if (n >= LLAMA_MAX_DEVICES || len == 0 || len >= sizeof buf) {
            fprintf(stderr, "error: %s takes one proportion per device, separated by ',' or '/' (this build: %d %s)\n",
                    opt, LLAMA_MAX_DEVICES, LLAMA_MAX_DEVICES == 1 ? "device" : "devices");
            return false;
        }
        memcpy(buf, p, len);
        buf[len] = 0;
        if (!cli_float(opt, buf, &ts[n]))
            return false;
        if (!(ts[n] >= 0.0f && ts[n] < 1e30f)) {
            fprintf(stderr, "error: %s: proportions must be >= 0\n", opt);
            return false;
        }
        p += len;
        if (!*p)
            break;
        p++;
    }
    memcpy(out, ts, sizeof ts);
    return true;
}

int cli_placement_flag(int argc, char **argv, int *i, struct cli_placement *o)
{
    const char *a = argv[*i], *v = NULL;
    long long ll;
    if (IS("-ngl") || IS("--n-gpu-layers") || IS("--gpu-layers")) INT(n_gpu_layers, 0, 1 << 20);
    else if (IS("-mg") || IS("--main-gpu")) INT(main_gpu, 0, LLAMA_MAX_DEVICES - 1);
    else if (IS("-sm") || IS("--split-mode")) {
        VAL();
        if (!strcmp(v, "none")) o->split_mode = LLAMA_SPLIT_NONE;
        else if (!strcmp(v, "layer")) o->split_mode = LLAMA_SPLIT_LAYER;
        else if (!strcmp(v, "row")) o->split_mode = LLAMA_SPLIT_ROW;
        else {
            fprintf(stderr, "error: %s must be none, layer or row\n", a);
            return -1;
        }
    }
    else if (IS("-ts") || IS("--tensor-split")) {
        VAL();
        if (!tensor_split(a, v, o->tensor_split))
            return -1;
    }
    else return 0;
    return 1;
}

void cli_placement_apply(const struct cli_placement *o, struct llama_model_params *mp)
{
    mp->n_gpu_layers = (int32_t)o->n_gpu_layers;
    mp->split_mode = o->split_mode;
    mp->main_gpu = (int32_t)o->main_gpu;
    bool any = false;
    for (int k = 0; k < LLAMA_MAX_DEVICES; k++)
        any |= o->tensor_split[k] > 0.0f;
    mp->tensor_split = any ? o->tensor_split : NULL;
}

int cli_sampling_flag(int argc, char **argv, int *i, struct lm_sampler_params *o)
{
    const char *a = argv[*i], *v = NULL;
    long long ll;
    if (IS("--temp")) FLT(temp);
    else if (IS("--top-k")) INT(top_k, 0, 1 << 30);
    else if (IS("--top-p")) FLT(top_p);
    else if (IS("--min-p")) FLT(min_p);
    else if (IS("--tfs")) FLT(tfs_z);
    else if (IS("--typical")) FLT(typical_p);
    else if (IS("--repeat-penalty")) FLT(penalty_repeat);
    else if (IS("--repeat-last-n")) INT(penalty_last_n, -1, 1 << 24);
    else if (IS("--frequency-penalty")) FLT(penalty_freq);
    else if (IS("--presence-penalty")) FLT(penalty_present);
    else if (IS("--mirostat")) INT(mirostat, 0, 2);
    else if (IS("--mirostat-lr")) FLT(mirostat_eta);
    else if (IS("--mirostat-ent")) FLT(mirostat_tau);
    else return 0;
    return 1;
}

#undef IS
#undef VAL
#undef INT
#undef FLT

void cli_model_usage(FILE *f)
{
    fputs("  -m, --model FILE          GGUF model (required)\n"
          "  -t, --threads N           threads for generation (default: all cores)\n"
          "  -tb, --threads-batch N    threads for prompt processing (default: = -t)\n"
          "  -c, --ctx-size N          context size (default 512, 0: the model's)\n"
          "  -b, --batch-size N        prompt tokens per decode call (default 512)\n"
          "  -s, --seed N              RNG seed (default -1: random)\n"
          "  -ctk, --cache-type-k T    KV cache type for K (f16, f32, bf16, q8_0, q4_0, q4_1, q5_0, q5_1;\n"
          "                            default f16)\n"
          "  -ctv, --cache-type-v T    KV cache type for V (the same; a block type needs heads of whole\n"
          "                            blocks; q8_0 is the fast one)\n"
          "  --no-mmap                 read the weights into memory instead of mapping the file\n"
          "  --mlock                   keep the weights locked in RAM\n"
          "  --lora FILE               merge a LoRA adapter ('ggla' file) into the weights; repeatable,\n"
          "                            applied in order\n"
          "  --lora-scaled FILE S      the same with the adapter's delta scaled by S\n"
          "  --lora-base FILE          add the adapters' deltas to this model's weights (e.g. the F16\n"
          "                            original of a quantized -m); the result keeps -m's types\n"
          "  -ngl, --n-gpu-layers N    layers to offload to GPUs (default 0; with no GPU (or a build\n"
          "                            without CUDA) every layer stays on the CPU)\n"
          "  -sm, --split-mode M       none, layer (default) or row (each matrix cut by rows): how layers\n"
          "                            spread over GPUs\n"
          "  -mg, --main-gpu N         the GPU for -sm none and row (default 0)\n"
          "  -ts, --tensor-split A,B   proportions per GPU of the layers (-sm layer) or rows (-sm row);\n"
          "                            default: each GPU's free memory\n"
          "  -nkvo, --no-kv-offload    keep the KV cache on the CPU\n"
          "  --verbose                 print the library's log\n",
          f);
}

void cli_sampling_usage(FILE *f)
{
    fputs("  --temp T                  temperature (default 0.8; <= 0: greedy)\n"
          "  --top-k N                 top-k sampling (default 40, 0: off)\n"
          "  --top-p P                 top-p sampling (default 0.95, 1.0: off)\n"
          "  --min-p P                 min-p sampling (default 0.05, 0.0: off)\n"
          "  --tfs Z                   tail-free sampling (default 1.0: off)\n"
          "  --typical P               locally typical sampling (default 1.0: off)\n"
          "  --repeat-penalty X        penalty for repeated tokens (default 1.1, 1.0: off)\n"
          "  --repeat-last-n N         tokens considered for penalties (default 64, -1: ctx size)\n"
          "  --frequency-penalty X     (default 0.0: off)\n"
          "  --presence-penalty X      (default 0.0: off)\n"
          "  --mirostat N              Mirostat sampling 1 or 2 (default 0: off)\n"
          "  --mirostat-lr ETA         Mirostat learning rate (default 0.1)\n"
          "  --mirostat-ent TAU        Mirostat target entropy (default 5.0)\n",
          f);
}

static void quiet_log(enum ggml_log_level level, const char *text, void *user)
{
    (void)user;
    if (level <= GGML_LOG_LEVEL_WARN)
        fputs(text, stderr);
}

int cli_model_open(const struct cli_model_opts *o, struct llama_model **model)
{
    if (!o->verbose)
        llama_log_set(quiet_log, NULL);
    struct llama_model_params mp = llama_model_default_params();
    mp.use_mmap = !o->no_mmap;
    mp.use_mlock = o->mlock;
    cli_placement_apply(&o->place, &mp);
    struct cli_progress progress = {.what = "loading model", .last_pct = -1};
    if (!o->verbose && cli_progress_enabled()) { /* on a terminal only: quiet in pipes and logs */
        mp.progress_callback = cli_progress_load;
        mp.progress_callback_user_data = &progress;
    }
    *model = llama_load_model_from_file(o->model, mp);
    if (progress.last_pct >= 0 && progress.last_pct < 100)
        cli_progress_clear(); /* the load failed part-way */
    if (!*model) {
        fprintf(stderr, "error: cannot load model %s\n", o->model);
        return 1;
    }
    if (o->lora_base && !o->n_lora)
        fprintf(stderr, "warning: --lora-base without --lora does nothing\n");
    for (int k = 0; k < o->n_lora; k++) /* the library logs why at error level */
        if (llama_model_apply_lora_from_file(*model, o->lora[k].path, o->lora[k].scale, o->lora_base,
                                             (int32_t)o->n_threads)) {
            fprintf(stderr, "error: cannot apply LoRA adapter %s\n", o->lora[k].path);
            llama_free_model(*model);
            *model = NULL;
            return 1;
        }
    return 0;
}

int cli_model_load(const struct cli_model_opts *o, struct llama_model **model, struct llama_context **ctx)
{
    if (cli_model_open(o, model))
        return 1;
    struct llama_context_params cp = llama_context_default_params();
    cp.seed = (uint32_t)o->seed;
    cp.n_ctx = (uint32_t)o->n_ctx;
    cp.n_batch = (uint32_t)o->n_batch;
    cp.n_threads = (uint32_t)o->n_threads;
    cp.n_threads_batch = (uint32_t)(o->n_threads_batch < 0 ? o->n_threads : o->n_threads_batch);
    cp.type_k = o->type_k;
    cp.type_v = o->type_v;
    cp.offload_kqv = !o->no_kv_offload;
    *ctx = llama_new_context_with_model(*model, cp);
    if (!*ctx) {
        fprintf(stderr, "error: cannot create a context\n");
        llama_free_model(*model);
        *model = NULL;
        return 1;
    }
    return 0;
}
