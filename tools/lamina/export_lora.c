/* export_lora.c - `lamina export-lora -m BASE -o OUT.gguf --lora FILE
 * [--lora-scaled FILE S ...]`: merge LoRA adapters into a model and write the
 * result as a new GGUF file, as llama.cpp b1892's export-lora does.
 *
 * The merge is the one `lamina run --lora` does (cli_model_open: the model is
 * loaded and each adapter applied in order by llama_model_apply_lora_from_file,
 * model/lora.c), so a model written here computes exactly what the base with
 * the same flags computes. OUT gets BASE's key/values and tensor table in
 * BASE's order, every tensor in its own type; a tensor's bytes come from the
 * loaded model (plain rows, whatever layout the CPU keeps them in) or, for
 * the few tensors the model does not hold under their file name (split
 * experts), from BASE. Quantized weights are decoded, added to and re-encoded
 * in their own type, as b1892's ggml_add did; types that need an importance
 * matrix to encode are refused (the library says which tensor).
 * Memory: the model as `lamina run` holds it, plus one tensor's bytes.
 */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "backend/backend.h"
#include "cli.h"
#include "core/tensor.h"
#include "gguf/gguf.h"
#include "llama.h"
#include "progress.h"

struct export_src {
    struct llama_model *model;
    const struct lm_gguf *g; /* BASE's tensor table: writer tensor i is reader tensor i */
    FILE *f;                 /* BASE */
    bool progress;
};

static void export_usage(FILE *f)
{
    fputs("usage: lamina export-lora -m BASE.gguf -o OUT.gguf --lora FILE [options]\n\n"
          "Writes OUT.gguf: BASE with the LoRA adapters merged into its weights (the same metadata,\n"
          "tensors and types; quantized weights are re-encoded in their own type). Running OUT gives\n"
          "what `lamina run -m BASE --lora ...` gives.\n\n"
          "  -m, --model-base FILE     the base model (also --model)\n"
          "  -o, --model-out FILE      the merged model to write (also --output)\n"
          "  -l, --lora FILE           a LoRA adapter ('ggla' file); repeatable, applied in order\n"
          "  -s, --lora-scaled FILE S  the same with the adapter's delta scaled by S\n"
          "  --lora-base FILE          add the deltas to this model's weights (e.g. the F16 original\n"
          "                            of a quantized BASE); OUT keeps BASE's types\n"
          "  -t, --threads N           threads for the merge (default: all cores)\n"
          "  --verbose                 print the library's log\n"
          "  -h, --help                this text\n",
          f);
}

/* Returns 0 ok, 1 help shown, 2 usage error. */
static int parse_export(int argc, char **argv, struct cli_model_opts *o, const char **out)
{
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *v;
        long long ll;
        float scale;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            export_usage(stdout);
            return 1;
        } else if (!strcmp(a, "-m") || !strcmp(a, "--model") || !strcmp(a, "--model-base")) {
            if (!(o->model = cli_value(argc, argv, &i)))
                return 2;
        } else if (!strcmp(a, "-o") || !strcmp(a, "--output") || !strcmp(a, "--model-out")) {
            if (!(*out = cli_value(argc, argv, &i)))
                return 2;
        } else if (!strcmp(a, "-l") || !strcmp(a, "--lora")) {
            if (!(v = cli_value(argc, argv, &i)) || !cli_model_add_lora(o, v, 1.0f))
                return 2;
        } else if (!strcmp(a, "-s") || !strcmp(a, "--lora-scaled")) {
            if (i + 2 >= argc) {
                fprintf(stderr, "error: option %s needs a file and a scale\n", a);
                return 2;
            }
            i += 2;
            if (!cli_float(a, argv[i], &scale) || !cli_model_add_lora(o, argv[i - 1], scale))
                return 2;
        } else if (!strcmp(a, "--lora-base")) {
            if (!(o->lora_base = cli_value(argc, argv, &i)))
                return 2;
        } else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
            if (!(v = cli_value(argc, argv, &i)) || !cli_int(a, v, 1, 1024, &ll))
                return 2;
            o->n_threads = ll;
        } else if (!strcmp(a, "--verbose")) {
            o->verbose = true;
        } else {
            fprintf(stderr, "error: unknown option '%s' (see lamina export-lora --help)\n", a);
            return 2;
        }
    }
    if (!o->model || !*out || !o->n_lora) {
        fprintf(stderr, "error: lamina export-lora needs -m BASE, -o OUT and at least one --lora "
                        "(see lamina export-lora --help)\n");
        return 2;
    }
    return 0;
}

/* True when path names the same file as `other` (both exist). */
static bool same_file(const char *path, const char *other)
{
    struct stat a, b;
    return other && stat(path, &a) == 0 && stat(other, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

/* An lm_gguf_fill_fn: tensor i's bytes, from the model when it holds the
 * tensor under that name with the file's type and size, else from BASE. */
static lm_status fill_tensor(void *user, int64_t i, void *dst, size_t size)
{
    struct export_src *s = user;
    const struct lm_gguf_tensor_info *ti = lm_gguf_tensor_info(s->g, i);
    const struct lm_tensor *t = (const struct lm_tensor *)llama_get_model_tensor(s->model, ti->name);
    if (s->progress) {
        char line[96];
        snprintf(line, sizeof line, "writing [%lld/%lld] %s", (long long)i + 1, (long long)lm_gguf_n_tensors(s->g),
                 ti->name);
        cli_progress_text(line);
    }
    if (t && t->type == ti->type && lm_nbytes(t) == size)
        return lm_tensor_get(t, dst, 0, size);
    if (fseeko(s->f, (off_t)ti->offset, SEEK_SET) != 0 || fread(dst, 1, size, s->f) != size)
        return LM_ERR_IO;
    return LM_OK;
}

/* Write OUT: BASE's key/values and tensor table, the data from the model. */
static int write_merged(struct llama_model *model, const char *base, const char *out)
{
    char err[256] = "";
    struct lm_gguf *g = NULL;
    struct lm_gguf_writer *w = NULL;
    struct export_src src = {.model = model, .progress = cli_progress_enabled()};
    lm_status st = lm_gguf_open(base, &g, err, sizeof err);
    if (st) {
        fprintf(stderr, "error: cannot read %s: %s\n", base, err);
        return 1;
    }
    src.g = g;
    src.f = fopen(base, "rb");
    st = src.f ? lm_gguf_writer_new(&w) : LM_ERR_IO;
    for (int64_t i = 0; !st && i < lm_gguf_n_kv(g); i++)
        st = lm_gguf_copy_kv(w, g, i);
    for (int64_t i = 0; !st && i < lm_gguf_n_tensors(g); i++) {
        const struct lm_gguf_tensor_info *ti = lm_gguf_tensor_info(g, i);
        st = lm_gguf_add_tensor(w, ti->name, ti->type, ti->n_dims, ti->ne, NULL);
    }
    if (!st) {
        lm_gguf_writer_set_fill(w, fill_tensor, &src);
        st = lm_gguf_write_file(w, out); /* removes out when it fails */
    }
    if (src.progress)
        cli_progress_clear();
    if (st)
        fprintf(stderr, "error: cannot write %s (%s)\n", out, lm_status_str(st));
    else
        fprintf(stderr, "export-lora: wrote %s (%lld tensors)\n", out, (long long)lm_gguf_n_tensors(g));
    lm_gguf_writer_free(w);
    if (src.f)
        fclose(src.f);
    lm_gguf_close(g);
    return st ? 1 : 0;
}

/* See cli.h: 0 success, 1 runtime error (nothing written), 2 usage error. */
int cmd_export_lora(int argc, char **argv)
{
    struct cli_model_opts o = cli_model_defaults();
    const char *out = NULL;
    int r = parse_export(argc, argv, &o, &out);
    if (r)
        return r == 1 ? 0 : 2;
    /* OUT must not be an input: BASE is mapped while OUT is written */
    bool clash = same_file(out, o.model) || same_file(out, o.lora_base);
    for (int k = 0; k < o.n_lora; k++)
        clash = clash || same_file(out, o.lora[k].path);
    if (clash) {
        fprintf(stderr, "error: the output %s is one of the inputs\n", out);
        return 2;
    }
    struct llama_model *model = NULL;
    llama_backend_init(false);
    r = cli_model_open(&o, &model);
    if (!r) {
        fprintf(stderr, "export-lora: merged %d adapter%s into %s\n", o.n_lora, o.n_lora == 1 ? "" : "s", o.model);
        r = write_merged(model, o.model, out);
        llama_free_model(model);
    }
    llama_backend_free();
    return r;
}
