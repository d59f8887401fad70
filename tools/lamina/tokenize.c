/* tokenize.c - `lamina tokenize -m MODEL -p TEXT`: print each token's id and
 * piece. Loads the vocabulary only (any architecture). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "llama.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: lamina tokenize -m MODEL (-p TEXT | -f FILE) [options]\n\n"
               "  -m, --model FILE   GGUF file (only its vocabulary is read)\n"
               "  -p, --prompt TEXT  text to tokenize\n"
               "  -f, --file FILE    read the text from a file\n"
               "  -e, --escape       process escapes in the text\n"
               "  --no-bos           do not add the BOS token\n"
               "  --no-special       treat control-token texts as plain text\n"
               "  --ids              print only the ids, on one line\n"
               "  -h, --help         this text\n");
}

static void print_piece(const struct llama_model *model, llama_token t)
{
    struct lm_strbuf b = {0};
    if (lm_token_append(model, t, &b) != LM_OK)
        b.n = 0;
    putchar('\'');
    for (size_t i = 0; i < b.n; i++) {
        unsigned char c = (unsigned char)b.p[i];
        if (c == '\n')
            fputs("\\n", stdout);
        else if (c == '\'' || c == '\\')
            printf("\\%c", c);
        else if (c < 0x20)
            printf("\\x%02x", c);
        else
            putchar(c);
    }
    putchar('\'');
    lm_strbuf_free(&b);
}

int cmd_tokenize(int argc, char **argv)
{
    const char *model_path = NULL, *file = NULL;
    char *text = NULL;
    bool add_bos = true, special = true, ids_only = false, esc = false;
    int rc = 2;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *v;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            free(text);
            return 0;
        } else if ((!strcmp(a, "-m") || !strcmp(a, "--model")) && (v = cli_value(argc, argv, &i))) {
            model_path = v;
        } else if ((!strcmp(a, "-p") || !strcmp(a, "--prompt")) && (v = cli_value(argc, argv, &i))) {
            free(text);
            text = strdup(v);
        } else if ((!strcmp(a, "-f") || !strcmp(a, "--file")) && (v = cli_value(argc, argv, &i))) {
            file = v;
        } else if (!strcmp(a, "-e") || !strcmp(a, "--escape")) {
            esc = true;
        } else if (!strcmp(a, "--no-bos")) {
            add_bos = false;
        } else if (!strcmp(a, "--no-special")) {
            special = false;
        } else if (!strcmp(a, "--ids")) {
            ids_only = true;
        } else {
            fprintf(stderr, "error: unknown or incomplete option '%s' (see lamina tokenize --help)\n", a);
            goto out;
        }
    }
    if (file) {
        free(text);
        text = cli_read_file(file, NULL);
    }
    if (!model_path || !text) {
        fprintf(stderr, "error: lamina tokenize needs -m MODEL and -p TEXT or -f FILE\n");
        goto out;
    }
    if (esc)
        cli_unescape(text);
    rc = 1;
    llama_backend_init(false);
    struct llama_model_params mp = llama_model_default_params();
    mp.vocab_only = true;
    struct llama_model *model = llama_load_model_from_file(model_path, mp);
    if (!model) {
        fprintf(stderr, "error: cannot load %s\n", model_path);
        goto out;
    }
    int32_t len = (int32_t)strlen(text);
    int32_t n = llama_tokenize(model, text, len, NULL, 0, add_bos, special);
    int32_t cap = n < 0 ? -n : n;
    llama_token *toks = malloc(((size_t)cap + 1) * sizeof *toks);
    if (toks && (n = llama_tokenize(model, text, len, toks, cap, add_bos, special)) >= 0) {
        for (int32_t i = 0; i < n; i++) {
            if (ids_only) {
                printf(i ? " %d" : "%d", toks[i]);
            } else {
                printf("%6d -> ", toks[i]);
                print_piece(model, toks[i]);
                putchar('\n');
            }
        }
        if (ids_only)
            putchar('\n');
        rc = 0;
    }
    free(toks);
    llama_free_model(model);
out:
    free(text);
    return rc;
}
