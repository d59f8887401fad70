/* main.c - `lamina <command> [options]`: dispatch to the subcommands. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

struct command {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *help;
};

static const struct command commands[] = {
    {"run", cmd_run, "generate text from a prompt"},
    {"chat", cmd_chat, "chat with a model on the terminal"},
    {"serve", cmd_serve, "serve a model over HTTP (OpenAI's API and llama.cpp's routes)"},
    {"tokenize", cmd_tokenize, "print the tokens of a text"},
    {"inspect", cmd_inspect, "print a GGUF file's metadata and tensor table"},
    {"bench", cmd_bench, "measure prompt processing and generation speed"},
    {"perplexity", cmd_perplexity, "perplexity of a model on a text; KL divergence against a base model"},
    {"imatrix", cmd_imatrix, "compute an importance matrix over a text (for quantize --imatrix)"},
    {"quantize", cmd_quantize, "re-encode a GGUF model's weights (Q4_0, Q4_K_M, Q8_0, ...)"},
    {"export-lora", cmd_export_lora, "merge LoRA adapters into a model and write it as a new GGUF file"},
    {"train", cmd_train, "train a LLaMA model and its tokenizer from scratch on a text"},
    {"finetune", cmd_finetune, "train a LoRA adapter for a model on a text"},
    {"mkmodel", cmd_mkmodel, "write a model with a real model's shapes and synthetic weights"},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: lamina <command> [options]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-11s %s\n", commands[i].name, commands[i].help);
    fprintf(f, "\n`lamina <command> --help` describes a command's options.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name))
            return commands[i].fn(argc - 2, argv + 2);
    fprintf(stderr, "lamina: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    return 2;
}
