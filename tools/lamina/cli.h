/* cli.h - the lamina command-line tool: one binary, one file per subcommand.
 * Each subcommand takes argc/argv after its name and returns the exit code
 * (0 success, 1 runtime error, 2 usage error). Errors go to stderr. */
#ifndef LM_CLI_H
#define LM_CLI_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "common/sampler.h"
#include "llama.h"

int cmd_run(int argc, char **argv);
int cmd_chat(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_inspect(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_perplexity(int argc, char **argv);
int cmd_mkmodel(int argc, char **argv);
int cmd_quantize(int argc, char **argv);
int cmd_imatrix(int argc, char **argv);
int cmd_export_lora(int argc, char **argv);
int cmd_train(int argc, char **argv);
int cmd_finetune(int argc, char **argv);

/* Argument helpers: the value of option argv[*i] (advancing *i), or NULL with
 * a message when it is missing. */
const char *cli_value(int argc, char **argv, int *i);
/* Parse an integer / float option value; false (with a message) if malformed. */
bool cli_int(const char *opt, const char *s, long long lo, long long hi, long long *out);
bool cli_float(const char *opt, const char *s, float *out);
/* A KV cache type by name (f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1); false (with a message) if unknown. */
bool cli_cache_type(const char *s, enum ggml_type *out);
/* Process escapes (\n \t \r \\ \' \" \xHH) in place. */
void cli_unescape(char *s);
/* Read a whole text file (NUL-terminated, caller frees); NULL with a message. */
char *cli_read_file(const char *path, size_t *len);

/* Device placement, llama.cpp's -ngl N, -sm none|layer|row, -mg N, -ts A,B
 * (run, chat, serve, perplexity, imatrix and bench take them). */
struct cli_placement {
    long long n_gpu_layers, main_gpu;
    enum llama_split_mode split_mode;
    float tensor_split[LLAMA_MAX_DEVICES];
};
/* 1: argv[*i] was one of the four (value taken), 0: not, -1: bad value (message written). */
int cli_placement_flag(int argc, char **argv, int *i, struct cli_placement *o);
/* Copy o into the model parameters (tensor_split NULL when all zero; o must outlive mp). */
void cli_placement_apply(const struct cli_placement *o, struct llama_model_params *mp);

/* The model and context flags of run, chat and serve. */
#define CLI_MAX_LORA 32
struct cli_lora {
    const char *path;
    float scale;
};
struct cli_model_opts {
    const char *model;
    long long n_ctx, n_batch, n_threads, n_threads_batch, seed;
    enum ggml_type type_k, type_v;
    bool no_mmap, mlock, verbose;
    struct cli_lora lora[CLI_MAX_LORA]; /* --lora / --lora-scaled, applied in this order */
    int n_lora;
    const char *lora_base;              /* --lora-base: the weights the deltas are added to, or NULL */
    struct cli_placement place;         /* -ngl, -sm, -mg, -ts */
    bool no_kv_offload;                 /* -nkvo */
};
struct cli_model_opts cli_model_defaults(void);
/* Append an adapter to o; false (with a message) when CLI_MAX_LORA are there. */
bool cli_model_add_lora(struct cli_model_opts *o, const char *path, float scale);
/* Option groups: if argv[*i] is one of the group's flags, take it (and its
 * value, advancing *i) and return 1; return 0 when it is not, -1 (with a
 * message) when its value is missing or malformed. */
int cli_model_flag(int argc, char **argv, int *i, struct cli_model_opts *o);
int cli_sampling_flag(int argc, char **argv, int *i, struct lm_sampler_params *o);
/* The groups' lines of a --help text. */
void cli_model_usage(FILE *f);
void cli_sampling_usage(FILE *f);
/* Load o->model, apply its adapters (cli_model_open) and make its context
 * (quiet log unless o->verbose); 0 on success, 1 with a message. The caller
 * frees both (llama_free, llama_free_model). */
int cli_model_load(const struct cli_model_opts *o, struct llama_model **model, struct llama_context **ctx);
/* The first half of cli_model_load: load o->model and apply o's adapters in
 * order (o->n_threads threads); 0, or 1 with a message and *model NULL. */
int cli_model_open(const struct cli_model_opts *o, struct llama_model **model);

#endif
