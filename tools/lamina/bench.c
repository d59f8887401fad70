/* bench.c - `lamina bench`: llama-bench's job and columns. For every model,
 * thread count and test it reports tokens per second (mean ± standard
 * deviation over -r repetitions, after one warm-up run):
 *   ppN: prompt processing, N tokens decoded in batches of up to n_batch;
 *   tgN: text generation, N tokens decoded one at a time.
 * A client of llama.h only. Output: markdown (default), csv or json.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "llama.h"

#define MAX_LIST 16

struct bench_opts {
    const char *models[MAX_LIST];
    int n_models;
    long long pp[MAX_LIST], tg[MAX_LIST], threads[MAX_LIST];
    int n_pp, n_tg, n_threads;
    long long reps, n_batch, mmap;
    const char *output;
};

struct result {
    const char *model;
    char desc[128];
    uint64_t size, params;
    long long threads, n;
    bool is_pp;
    double mean, sd;
};

static void bench_usage(FILE *f)
{
    fprintf(f, "usage: lamina bench -m MODEL [-m MODEL ...] [options]\n\n"
               "  -m, --model FILE       model to test (repeatable)\n"
               "  -p, --n-prompt N[,N]   prompt processing tests of N tokens (default 512; 0: none)\n"
               "  -n, --n-gen N[,N]      generation tests of N tokens (default 128; 0: none)\n"
               "  -t, --threads N[,N]    thread counts (default: all cores)\n"
               "  -b, --batch-size N     tokens per decode call in prompt tests (default 512)\n"
               "  -r, --repetitions N    timed runs per test (default 5)\n"
               "  -mmp, --mmap 0|1       map the weights (1, default) or read them into memory (0)\n"
               "  -o, --output FMT       md (default), csv or json\n"
               "  -h, --help             this text\n");
}

/* Parse "a,b,c" into list (appending). */
static bool parse_list(const char *opt, const char *s, long long lo, long long *list, int *n)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", s);
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        if (*n == MAX_LIST || !cli_int(opt, tok, lo, 1 << 20, &list[*n]))
            return false;
        (*n)++;
    }
    return true;
}

static int parse_bench(int argc, char **argv, struct bench_opts *o)
{
    memset(o, 0, sizeof *o);
    o->reps = 5;
    o->n_batch = 512;
    o->mmap = 1;
    o->output = "md";
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            bench_usage(stdout);
            return 1;
        }
        if (!(v = cli_value(argc, argv, &i)))
            return 2;
        bool ok = true;
        if (!strcmp(a, "-m") || !strcmp(a, "--model"))
            ok = o->n_models < MAX_LIST && (o->models[o->n_models++] = v);
        else if (!strcmp(a, "-p") || !strcmp(a, "--n-prompt"))
            ok = parse_list(a, v, 0, o->pp, &o->n_pp);
        else if (!strcmp(a, "-n") || !strcmp(a, "--n-gen"))
            ok = parse_list(a, v, 0, o->tg, &o->n_tg);
        else if (!strcmp(a, "-t") || !strcmp(a, "--threads"))
            ok = parse_list(a, v, 1, o->threads, &o->n_threads);
        else if (!strcmp(a, "-b") || !strcmp(a, "--batch-size"))
            ok = cli_int(a, v, 1, 1 << 20, &o->n_batch);
        else if (!strcmp(a, "-r") || !strcmp(a, "--repetitions"))
            ok = cli_int(a, v, 1, 1000, &o->reps);
        else if (!strcmp(a, "-mmp") || !strcmp(a, "--mmap"))
            ok = cli_int(a, v, 0, 1, &o->mmap);
        else if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
            o->output = v;
            ok = !strcmp(v, "md") || !strcmp(v, "csv") || !strcmp(v, "json");
            if (!ok)
                fprintf(stderr, "error: -o takes md, csv or json\n");
        } else {
            fprintf(stderr, "error: unknown option '%s' (see lamina bench --help)\n", a);
            return 2;
        }
        if (!ok)
            return 2;
    }
    if (!o->n_models) {
        fprintf(stderr, "error: lamina bench needs a model: -m FILE\n");
        return 2;
    }
    if (!o->n_pp)
        o->pp[o->n_pp++] = 512;
    if (!o->n_tg)
        o->tg[o->n_tg++] = 128;
    if (!o->n_threads) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        o->threads[o->n_threads++] = n > 0 ? n : 1;
    }
    return 0;
}

/* One timed test: returns tokens per second, or a negative value on failure. */
static double run_test(struct llama_context *ctx, int n_vocab, bool is_pp, long long n, long long n_batch)
{
    llama_token *toks = malloc((size_t)(n > 0 ? n : 1) * sizeof *toks);
    if (!toks)
        return -1;
    uint32_t r = 12345;
    for (long long i = 0; i < n; i++) { /* random tokens, as llama-bench uses */
        r = r * 1664525u + 1013904223u;
        toks[i] = (llama_token)(r % (uint32_t)n_vocab);
    }
    llama_kv_cache_clear(ctx);
    int64_t t0 = llama_time_us();
    bool ok = true;
    if (is_pp) {
        for (long long done = 0; done < n && ok; done += n_batch) {
            int32_t k = (int32_t)(n - done < n_batch ? n - done : n_batch);
            ok = llama_decode(ctx, llama_batch_get_one(toks + done, k, (llama_pos)done, 0)) == 0;
        }
    } else {
        for (long long i = 0; i < n && ok; i++)
            ok = llama_decode(ctx, llama_batch_get_one(toks + i, 1, (llama_pos)i, 0)) == 0;
    }
    int64_t dt = llama_time_us() - t0;
    free(toks);
    return ok && dt > 0 ? (double)n * 1e6 / (double)dt : -1;
}

static bool bench_model(const struct bench_opts *o, const char *path, struct result *res, int *n_res)
{
    struct llama_model_params mp = llama_model_default_params();
    mp.use_mmap = o->mmap != 0;
    struct llama_model *model = llama_load_model_from_file(path, mp);
    if (!model) {
        fprintf(stderr, "error: cannot load %s\n", path);
        return false;
    }
    bool ok = true;
    for (int ti = 0; ti < o->n_threads && ok; ti++) {
        for (int k = 0; k < o->n_pp + o->n_tg && ok; k++) {
            bool is_pp = k < o->n_pp;
            long long n = is_pp ? o->pp[k] : o->tg[k - o->n_pp];
            if (n <= 0)
                continue;
            struct llama_context_params cp = llama_context_default_params();
            cp.n_ctx = (uint32_t)(n + 16 < 512 ? 512 : n + 16);
            cp.n_batch = (uint32_t)(o->n_batch < (long long)cp.n_ctx ? o->n_batch : cp.n_ctx);
            cp.n_threads = cp.n_threads_batch = (uint32_t)o->threads[ti];
            cp.seed = 1;
            struct llama_context *ctx = llama_new_context_with_model(model, cp);
            if (!ctx) {
                ok = false;
                break;
            }
            int n_vocab = llama_n_vocab(model);
            run_test(ctx, n_vocab, is_pp, is_pp ? n : (n < 16 ? n : 16), cp.n_batch); /* warm-up */
            double sum = 0, sum2 = 0;
            for (long long r = 0; r < o->reps && ok; r++) {
                double ts = run_test(ctx, n_vocab, is_pp, n, cp.n_batch);
                ok = ts > 0;
                sum += ts;
                sum2 += ts * ts;
            }
            llama_free(ctx);
            struct result *re = &res[(*n_res)++];
            re->model = path;
            llama_model_desc(model, re->desc, sizeof re->desc);
            re->size = llama_model_size(model);
            re->params = llama_model_n_params(model);
            re->threads = o->threads[ti];
            re->n = n;
            re->is_pp = is_pp;
            re->mean = sum / (double)o->reps;
            double var = sum2 / (double)o->reps - re->mean * re->mean;
            re->sd = o->reps > 1 && var > 0 ? sqrt(var * (double)o->reps / (double)(o->reps - 1)) : 0.0;
            if (!ok)
                fprintf(stderr, "error: decoding failed in %s %s%lld\n", path, is_pp ? "pp" : "tg", n);
        }
    }
    llama_free_model(model);
    return ok;
}

static void print_results(const struct bench_opts *o, const struct result *res, int n)
{
    bool md = !strcmp(o->output, "md"), csv = !strcmp(o->output, "csv");
    if (md) {
        printf("| %-30s | %10s | %10s | %-7s | %7s | %8s | %20s |\n", "model", "size", "params", "backend", "threads",
               "test", "t/s");
        printf("| %.30s | %.10s | %.10s | %.7s | %.7s | %.8s | %.20s |\n", "------------------------------",
               "---------:", "---------:", "-------", "------:", "-------:", "-------------------:");
    } else if (csv) {
        printf("model_filename,model_type,model_size,model_n_params,backend,n_threads,n_prompt,n_gen,avg_ts,stddev_ts\n");
    } else {
        printf("[\n");
    }
    for (int i = 0; i < n; i++) {
        const struct result *r = &res[i];
        char test[32];
        snprintf(test, sizeof test, "%s%lld", r->is_pp ? "pp" : "tg", r->n);
        if (md) {
            char size[32], params[32];
            snprintf(size, sizeof size, "%.2f MiB", (double)r->size / (1024.0 * 1024.0));
            if (r->params >= 1000000000ull)
                snprintf(params, sizeof params, "%.2f B", (double)r->params / 1e9);
            else
                snprintf(params, sizeof params, "%.2f M", (double)r->params / 1e6);
            if (r->size >= 1024ull * 1024 * 1024)
                snprintf(size, sizeof size, "%.2f GiB", (double)r->size / (1024.0 * 1024 * 1024));
            printf("| %-30s | %10s | %10s | %-7s | %7lld | %8s | %11.2f ± %6.2f |\n", r->desc, size, params, "CPU",
                   r->threads, test, r->mean, r->sd);
        } else if (csv) {
            printf("\"%s\",\"%s\",%llu,%llu,CPU,%lld,%lld,%lld,%.6f,%.6f\n", r->model, r->desc,
                   (unsigned long long)r->size, (unsigned long long)r->params, r->threads, r->is_pp ? r->n : 0,
                   r->is_pp ? 0 : r->n, r->mean, r->sd);
        } else {
            printf("  {\"model_filename\": \"%s\", \"model_type\": \"%s\", \"model_size\": %llu, \"model_n_params\": %llu, "
                   "\"backend\": \"CPU\", \"n_threads\": %lld, \"n_prompt\": %lld, \"n_gen\": %lld, \"avg_ts\": %.6f, "
                   "\"stddev_ts\": %.6f}%s\n",
                   r->model, r->desc, (unsigned long long)r->size, (unsigned long long)r->params, r->threads,
                   r->is_pp ? r->n : 0, r->is_pp ? 0 : r->n, r->mean, r->sd, i + 1 < n ? "," : "");
        }
    }
    if (!md && !csv)
        printf("]\n");
}

static void bench_log(enum ggml_log_level level, const char *text, void *user)
{
    (void)user;
    if (level == GGML_LOG_LEVEL_ERROR)
        fputs(text, stderr);
}

int cmd_bench(int argc, char **argv)
{
    struct bench_opts o;
    int r = parse_bench(argc, argv, &o);
    if (r)
        return r == 1 ? 0 : r;
    llama_backend_init(false);
    llama_log_set(bench_log, NULL);
    int cap = o.n_models * o.n_threads * (o.n_pp + o.n_tg), n = 0;
    struct result *res = calloc((size_t)cap, sizeof *res);
    bool ok = res != NULL;
    for (int m = 0; m < o.n_models && ok; m++)
        ok = bench_model(&o, o.models[m], res, &n);
    if (res)
        print_results(&o, res, n);
    free(res);
    llama_backend_free();
    return ok ? 0 : 1;
}
