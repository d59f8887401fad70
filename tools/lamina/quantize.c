/* quantize.c - `lamina quantize IN.gguf OUT.gguf TYPE`: llama.cpp's quantize
 * tool over llama.h's llama_model_quantize (b1892's recipes; see
 * docs/formats.md, "Quantizing a model"). TYPE is a name (Q4_K_M, Q8_0, F16,
 * COPY, ...) or the ftype number. On a terminal a progress line (the tensor
 * being quantized) is redrawn on stderr; in pipes and logs only the summary,
 * warnings and errors are written.
 *
 * --imatrix FILE (an imatrix.dat of `lamina imatrix` or llama.cpp's imatrix
 * tool) is passed as llama_model_quantize_params.imatrix, a struct
 * lamina_imatrix_params (include/lamina_imatrix.h); the library reads and
 * checks it against the model.
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "cli.h"
#include "lamina_imatrix.h"
#include "llama.h"
#include "model/quantize.h"
#include "progress.h"

/* The library's log while quantizing: the per-tensor lines ("[  12/ 201]
 * name - ...") become the progress line on a terminal and are dropped
 * elsewhere; other info lines, warnings and errors are written as they are.
 * user: a bool, true while a progress line is drawn. */
static void quantize_log(enum ggml_log_level level, const char *text, void *user)
{
    bool *drawn = user;
    if (level > GGML_LOG_LEVEL_INFO)
        return;
    if (level == GGML_LOG_LEVEL_INFO && text[0] == '[') {
        if (cli_progress_enabled()) {
            char line[96];
            size_t n = strcspn(text, "-\n");
            snprintf(line, sizeof line, "quantizing %.*s", (int)(n < 80 ? n : 80), text);
            cli_progress_text(line);
            *drawn = true;
        }
        return;
    }
    if (*drawn)
        cli_progress_clear();
    *drawn = false;
    fputs(text, stderr);
}

static void quantize_usage(FILE *f)
{
    fprintf(f, "usage: lamina quantize IN.gguf OUT.gguf TYPE [options]\n\n"
               "Writes OUT.gguf with the weights of IN.gguf re-encoded as TYPE, choosing each tensor's\n"
               "type as llama.cpp b1892 does (k-quant mixtures such as Q4_K_M keep some tensors in more bits).\n\n"
               "  --nthread N             threads (default: one per core; the output does not depend on it)\n"
               "  --allow-requantize      allow re-encoding tensors that are already quantized\n"
               "  --leave-output-tensor   keep output.weight as it is\n"
               "  --pure                  no mixture: every quantized tensor gets TYPE's base type\n"
               "  --imatrix FILE          importance matrix (imatrix.dat of `lamina imatrix` or llama.cpp)\n"
               "  --include-weights NAME  use the importance matrix only for tensors whose names contain\n"
               "                          NAME (repeatable)\n"
               "  --exclude-weights NAME  do not use it for tensors whose names contain NAME (repeatable;\n"
               "                          not together with --include-weights)\n"
               "  -h, --help              this text\n\n"
               "TYPE (name or number):\n");
    for (int i = 0; lm_ftype_info_at(i); i++) {
        const struct lm_ftype_info *fi = lm_ftype_info_at(i);
        if (fi->note) /* the others cannot be written */
            fprintf(f, "  %2u  or  %-8s:%s%s\n", fi->ftype, fi->name, fi->note,
                    fi->needs_imatrix ? " (needs an importance matrix)" : "");
    }
    fprintf(f, "          %-8s: aliases of Q3_K_M, Q4_K_M, Q5_K_M\n", "Q3_K/Q4_K/Q5_K");
    fprintf(f, "          %-8s: only copy the tensors, no quantizing\n", "COPY");
}

/* The importance-matrix flags (b1892's): the file and the name lists. */
#define MAX_NAMES 64
struct qimatrix {
    struct lamina_imatrix_params im;
    const char *include[MAX_NAMES + 1], *exclude[MAX_NAMES + 1]; /* NULL-terminated */
    int n_include, n_exclude;
};

/* 1: argv[*i] was one of the flags (taken, with its value), 0: it is not,
 * -1: an error (message written). */
static int imatrix_flag(int argc, char **argv, int *i, struct qimatrix *q)
{
    const char *a = argv[*i], *val;
    bool inc = !strcmp(a, "--include-weights");
    if (strcmp(a, "--imatrix") && !inc && strcmp(a, "--exclude-weights"))
        return 0;
    if (!(val = cli_value(argc, argv, i)))
        return -1;
    if (!strcmp(a, "--imatrix")) {
        q->im.path = val;
        return 1;
    }
    if ((inc ? q->n_include : q->n_exclude) == MAX_NAMES) {
        fprintf(stderr, "error: at most %d %s options\n", MAX_NAMES, a);
        return -1;
    }
    if (inc)
        q->include[q->n_include++] = val;
    else
        q->exclude[q->n_exclude++] = val;
    return 1;
}

/* Point p->imatrix at q->im when a file was given; false (with a message)
 * for flags that do not go together. */
static bool imatrix_params(struct qimatrix *q, llama_model_quantize_params *p)
{
    if (q->n_include && q->n_exclude) {
        fprintf(stderr, "error: --include-weights and --exclude-weights cannot be used together\n");
        return false;
    }
    if ((q->n_include || q->n_exclude) && !q->im.path) {
        fprintf(stderr, "error: --include-weights and --exclude-weights need --imatrix FILE\n");
        return false;
    }
    if (q->im.path) {
        q->im.include_weights = q->n_include ? q->include : NULL;
        q->im.exclude_weights = q->n_exclude ? q->exclude : NULL;
        p->imatrix = &q->im;
    }
    return true;
}

/* See cli.h: 0 success, 1 quantization failed, 2 usage error. */
int cmd_quantize(int argc, char **argv)
{
    llama_model_quantize_params p = llama_model_quantize_default_params();
    struct qimatrix q = {.im = LAMINA_IMATRIX_PARAMS_INIT};
    const char *pos[4] = {NULL};
    int n_pos = 0, r;
    long long v;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *val;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            quantize_usage(stdout);
            return 0;
        } else if (!strcmp(a, "--nthread") || !strcmp(a, "-t") || !strcmp(a, "--threads")) {
            if (!(val = cli_value(argc, argv, &i)) || !cli_int(a, val, 1, 1024, &v))
                return 2;
            p.nthread = (int32_t)v;
        } else if (!strcmp(a, "--allow-requantize")) {
            p.allow_requantize = true;
        } else if (!strcmp(a, "--leave-output-tensor")) {
            p.quantize_output_tensor = false;
        } else if (!strcmp(a, "--pure")) {
            p.pure = true;
        } else if ((r = imatrix_flag(argc, argv, &i, &q)) != 0) {
            if (r < 0)
                return 2;
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "error: unknown option '%s' (see lamina quantize --help)\n", a);
            return 2;
        } else if (n_pos < 4) {
            pos[n_pos++] = a;
        } else {
            fprintf(stderr, "error: unexpected argument '%s'\n", a);
            return 2;
        }
    }
    if (n_pos < 3) {
        fprintf(stderr, "error: lamina quantize needs IN.gguf OUT.gguf TYPE (see lamina quantize --help)\n");
        return 2;
    }
    if (n_pos == 4) { /* llama.cpp's trailing thread count */
        if (!cli_int("nthreads", pos[3], 1, 1024, &v))
            return 2;
        p.nthread = (int32_t)v;
    }
    uint32_t ftype = 0;
    if (!strcasecmp(pos[2], "COPY")) {
        p.only_copy = true;
    } else if (!lm_ftype_parse(pos[2], &ftype)) {
        fprintf(stderr, "error: unknown quantization type '%s' (see lamina quantize --help)\n", pos[2]);
        return 2;
    }
    p.ftype = (enum llama_ftype)ftype;
    if (!imatrix_params(&q, &p))
        return 2;
    bool drawn = false;
    llama_log_set(quantize_log, &drawn);
    llama_backend_init(false);
    uint32_t rc = llama_model_quantize(pos[0], pos[1], &p);
    llama_backend_free();
    llama_log_set(NULL, NULL);
    if (drawn)
        cli_progress_clear();
    if (rc != 0) {
        fprintf(stderr, "error: quantizing %s failed\n", pos[0]);
        return 1;
    }
    return 0;
}
