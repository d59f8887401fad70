/* args.c - small helpers shared by the subcommands' option parsers. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

const char *cli_value(int argc, char **argv, int *i)
{
    if (*i + 1 >= argc) {
        fprintf(stderr, "error: option %s needs a value\n", argv[*i]);
        return NULL;
    }
    return argv[++*i];
}

bool cli_int(const char *opt, const char *s, long long lo, long long hi, long long *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) {
        fprintf(stderr, "error: %s expects an integer in [%lld, %lld], got '%s'\n", opt, lo, hi, s);
        return false;
    }
    *out = v;
    return true;
}

bool cli_float(const char *opt, const char *s, float *out)
{
    char *end;
    errno = 0;
    float v = strtof(s, &end);
    if (errno || end == s || *end || v != v) {
        fprintf(stderr, "error: %s expects a number, got '%s'\n", opt, s);
        return false;
    }
    *out = v;
    return true;
}

bool cli_cache_type(const char *s, enum ggml_type *out)
{
    static const struct {
        const char *name;
        enum ggml_type t;
    } types[] = {
        {"f32", GGML_TYPE_F32},   {"f16", GGML_TYPE_F16},   {"bf16", GGML_TYPE_BF16}, {"q8_0", GGML_TYPE_Q8_0},
        {"q4_0", GGML_TYPE_Q4_0}, {"q4_1", GGML_TYPE_Q4_1}, {"q5_0", GGML_TYPE_Q5_0}, {"q5_1", GGML_TYPE_Q5_1},
    };
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        if (!strcmp(s, types[i].name)) {
            *out = types[i].t;
            return true;
        }
    fprintf(stderr, "error: unknown cache type '%s'\n", s);
    return false;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

void cli_unescape(char *s)
{
    char *o = s;
    for (const char *p = s; *p; p++) {
        if (*p != '\\' || !p[1]) {
            *o++ = *p;
            continue;
        }
        p++;
        switch (*p) {
        case 'n': *o++ = '\n'; break;
        case 't': *o++ = '\t'; break;
        case 'r': *o++ = '\r'; break;
        case '\\': *o++ = '\\'; break;
        case '\'': *o++ = '\''; break;
        case '"': *o++ = '"'; break;
        case 'x':
            if (hexval(p[1]) >= 0 && hexval(p[2]) >= 0) {
                *o++ = (char)(hexval(p[1]) * 16 + hexval(p[2]));
                p += 2;
            } else { /* not an escape: keep it */
                *o++ = '\\';
                *o++ = 'x';
            }
            break;
        default:
            *o++ = '\\';
            *o++ = *p;
        }
    }
    *o = 0;
}

char *cli_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "error: cannot open %s: %s\n", path, strerror(errno));
        return NULL;
    }
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    size_t r;
    while (buf && (r = fread(buf + n, 1, cap - n - 1, f)) > 0) {
        n += r;
        if (n + 1 == cap) {
            char *nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
    }
    fclose(f);
    if (!buf) {
        fprintf(stderr, "error: out of memory reading %s\n", path);
        return NULL;
    }
    buf[n] = 0;
    if (len)
        *len = n;
    return buf;
}
