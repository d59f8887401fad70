/* install_prog.c - a client of an installed lamina, built by test_install.sh
 * with `cc install_prog.c $(pkg-config --cflags --libs lamina)`: loads the
 * model given as argv[1], checks the tokenizer, then greedily generates N
 * tokens from BOS and prints their ids on one line. Only llama.h is used. */
#include <stdio.h>
#include <stdlib.h>

#include <llama.h>

static int argmax(const float *v, int n)
{
    int best = 0;
    for (int i = 1; i < n; i++)
        if (v[i] > v[best])
            best = i;
    return best;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: install_prog MODEL N\n");
        return 2;
    }
    int n_gen = atoi(argv[2]), rc = 1;
    llama_backend_init(false);
    struct llama_model_params mp = llama_model_default_params();
    struct llama_model *model = llama_load_model_from_file(argv[1], mp);
    struct llama_context *ctx = NULL;
    if (!model)
        goto out;
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 128;
    cp.n_threads = cp.n_threads_batch = 1;
    if (!(ctx = llama_new_context_with_model(model, cp)))
        goto out;
    llama_token toks[16];
    int n = llama_tokenize(model, "Once upon a time", 16, toks, 16, true, false);
    if (n != 5 || toks[0] != llama_token_bos(model)) {
        fprintf(stderr, "tokenize gave %d tokens\n", n);
        goto out;
    }
    llama_token t = llama_token_bos(model);
    for (int i = 0; i < n_gen; i++) {
        if (llama_decode(ctx, llama_batch_get_one(&t, 1, i, 0)))
            goto out;
        t = argmax(llama_get_logits(ctx), llama_n_vocab(model));
        printf(i ? " %d" : "%d", t);
    }
    printf("\n");
    rc = 0;
out:
    llama_free(ctx);
    llama_free_model(model);
    llama_backend_free();
    return rc;
}
