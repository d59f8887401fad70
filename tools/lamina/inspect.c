/* inspect.c - `lamina inspect MODEL`: a GGUF file's header, metadata and
 * tensor table. Reads the file with lamina's bounds-checked GGUF reader, so a
 * damaged file gets a clear message. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "gguf/gguf.h"

static const char *type_name(enum lm_gguf_type t)
{
    static const char *const names[LM_GGUF_TYPE_COUNT] = {
        "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "str", "arr", "u64", "i64", "f64",
    };
    return (unsigned)t < LM_GGUF_TYPE_COUNT ? names[t] : "?";
}

int cmd_inspect(int argc, char **argv)
{
    const char *path = NULL;
    bool no_tensors = false;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            printf("usage: lamina inspect [--no-tensors] MODEL.gguf\n\n"
                   "Prints the GGUF version, every metadata key with its type and value\n"
                   "(long arrays abbreviated) and the tensor table (name, type, shape, offset, bytes).\n");
            return 0;
        } else if (!strcmp(argv[i], "--no-tensors")) {
            no_tensors = true;
        } else if (argv[i][0] == '-' || path) {
            fprintf(stderr, "error: unexpected argument '%s' (see lamina inspect --help)\n", argv[i]);
            return 2;
        } else {
            path = argv[i];
        }
    }
    if (!path) {
        fprintf(stderr, "error: lamina inspect needs a GGUF file\n");
        return 2;
    }
    struct lm_gguf *g = NULL;
    char err[256];
    lm_status st = lm_gguf_open(path, &g, err, sizeof err);
    if (st) {
        fprintf(stderr, "error: %s: %s (%s)\n", path, err, lm_status_str(st));
        return 1;
    }
    printf("file: %s\nGGUF version %u, %" PRId64 " metadata keys, %" PRId64 " tensors, alignment %zu, data at %" PRIu64
           "\n\n",
           path, lm_gguf_version(g), lm_gguf_n_kv(g), lm_gguf_n_tensors(g), lm_gguf_alignment(g),
           lm_gguf_data_offset(g));
    char val[512];
    for (int64_t i = 0; i < lm_gguf_n_kv(g); i++) {
        lm_gguf_value_to_string(g, i, val, sizeof val);
        printf("%4" PRId64 ": %-44s %-4s = %s\n", i, lm_gguf_key(g, i), type_name(lm_gguf_kv_type(g, i)), val);
    }
    if (!no_tensors && lm_gguf_n_tensors(g) > 0) {
        printf("\n%5s  %-40s %-8s %-26s %12s %12s\n", "#", "tensor", "type", "shape", "offset", "bytes");
        for (int64_t i = 0; i < lm_gguf_n_tensors(g); i++) {
            const struct lm_gguf_tensor_info *t = lm_gguf_tensor_info(g, i);
            char shape[64];
            int n = snprintf(shape, sizeof shape, "[%" PRId64, t->ne[0]);
            for (int d = 1; d < t->n_dims && n < (int)sizeof shape; d++)
                n += snprintf(shape + n, sizeof shape - (size_t)n, ", %" PRId64, t->ne[d]);
            snprintf(shape + n, sizeof shape - (size_t)n, "]");
            printf("%5" PRId64 "  %-40s %-8s %-26s %12" PRIu64 " %12" PRIu64 "\n", i, t->name, lm_type_name(t->type),
                   shape, t->offset, t->size);
        }
    }
    lm_gguf_close(g);
    return 0;
}
