/* bench.c - `lamina bench`: llama-bench's job and columns. For every model,
 * thread count, depth and test it reports tokens per second (mean ± standard
 * deviation over -r repetitions, after one warm-up run):
 *   ppN: prompt processing, N tokens decoded in batches of up to n_batch;
 *   tgN: text generation, N tokens decoded one at a time;
 *   tgN xP: aggregate generation of P sequences at once: N steps of one
 *     llama_decode with one token of each sequence, P * N tokens / time
 *     (llama-batched-bench's S_TG);
 *   "@ dD": the test runs after D tokens of prompt (per sequence) already in
 *     the KV cache; they are decoded once per context, untimed, and every
 *     repetition removes only the test's tokens (llama_kv_cache_seq_rm), so
 *     each starts from the same cache.
 * A client of llama.h only, but for --profile, which reads the executor's
 * per-op counters (core/profile.h; lamina links the library statically) and
 * adds, per test, where its timed runs spent their time: per op, nodes, ms
 * and share, and the time outside the graph executor.
 * Output: markdown (default), csv or json.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/backend.h"
#include "cli.h"
#include "core/profile.h"
#include "llama.h"

#define MAX_LIST 16
#define MAX_PARALLEL 64        /* the KV cache's sequence ids (kv_cache.h LM_MAX_SEQ) */
#define MAX_CELLS (1ll << 24)  /* the largest context lamina makes */

struct bench_opts {
    const char *models[MAX_LIST];
    int n_models;
    long long pp[MAX_LIST], tg[MAX_LIST], threads[MAX_LIST], depth[MAX_LIST], np[MAX_LIST];
    int n_pp, n_tg, n_threads, n_depth, n_np;
    long long reps, n_batch, mmap;
    const char *output;
    struct cli_placement place; /* -ngl/-sm/-mg/-ts as lamina run's (one value each) */
    long long no_kvo;           /* -nkvo 0|1 (llama-bench's form) */
    enum ggml_type type_k, type_v; /* -ctk, -ctv (one value each) */
    bool profile;               /* --profile: per-op timing of every test */
};

struct result {
    const char *model;
    char desc[128];
    uint64_t size, params;
    long long threads, n, depth, np;
    bool is_pp;
    double mean, sd;
    struct lm_profile_row *prof; /* --profile: the timed runs' counters (n_prof rows), or NULL */
    int n_prof;
    long long reps;
    int64_t test_us; /* the timed runs' time, summed */
};

static void bench_usage(FILE *f)
{
    fprintf(f, "usage: lamina bench -m MODEL [-m MODEL ...] [options]\n\n"
               "  -m, --model FILE       model to test (repeatable)\n"
               "  -p, --n-prompt N[,N]   prompt processing tests of N tokens (default 512; 0: none)\n"
               "  -n, --n-gen N[,N]      generation tests of N tokens (default 128; 0: none)\n"
               "  -d, --n-depth N[,N]    run each test after N tokens of prompt already in the KV cache\n"
               "                         (untimed; test name \"pp512 @ d4096\"; default 0)\n"
               "  -np, --parallel N[,N]  generation tests with N sequences decoding at once (1 to %d;\n"
               "                         default 1): each sequence has its own prompt of -d tokens, each\n"
               "                         step decodes one token of every sequence in one batch; t/s is\n"
               "                         N * tokens / time, the aggregate (llama-batched-bench's S_TG);\n"
               "                         test name \"tg128 x8\". Prompt tests run with one sequence\n"
               "  -t, --threads N[,N]    thread counts (default: all cores)\n"
               "  -b, --batch-size N     tokens per decode call in prompt tests (default 512)\n"
               "  -r, --repetitions N    timed runs per test (default 5)\n"
               "  -mmp, --mmap 0|1       map the weights (1, default) or read them into memory (0)\n"
               "  -ctk, -ctv T           KV cache types of K and V, as for lamina run (one value each;\n"
               "                         default f16)\n"
               "  -o, --output FMT       md (default), csv or json\n"
               "  --profile              after the results, a table per test of where its timed runs\n"
               "                         spent their time: per op, nodes and ms per run, share of the\n"
               "                         test's time, threads busy %%; and the time outside the graph\n"
               "                         executor (to stdout for md, to stderr for csv and json)\n"
               "  -ngl, -sm, -mg, -ts, -nkvo  device placement, as for lamina run (one value each;\n"
               "                         without a GPU every layer stays on the CPU)\n"
               "  -h, --help             this text\n",
            MAX_PARALLEL);
}

/* Parse "a,b,c" into list (appending). */
static bool parse_list(const char *opt, const char *s, long long lo, long long hi, long long *list, int *n)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", s);
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        if (*n == MAX_LIST) {
            fprintf(stderr, "error: %s takes at most %d values\n", opt, MAX_LIST);
            return false;
        }
        if (!cli_int(opt, tok, lo, hi, &list[*n]))
            return false;
        (*n)++;
    }
    return true;
}

/* KV cells a test needs: depth + test tokens for each of its sequences. */
static long long cells_needed(bool is_pp, long long n, long long depth, long long np)
{
    return (is_pp ? 1 : np) * (depth + n);
}

static int parse_bench(int argc, char **argv, struct bench_opts *o)
{
    memset(o, 0, sizeof *o);
    o->reps = 5;
    o->n_batch = 512;
    o->mmap = 1;
    o->output = "md";
    o->place.split_mode = LLAMA_SPLIT_LAYER;
    o->type_k = o->type_v = GGML_TYPE_F16;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            bench_usage(stdout);
            return 1;
        }
        if (!strcmp(a, "--profile")) {
            o->profile = true;
            continue;
        }
        int pr = cli_placement_flag(argc, argv, &i, &o->place);
        if (pr < 0)
            return 2;
        if (pr > 0)
            continue;
        if (!(v = cli_value(argc, argv, &i)))
            return 2;
        bool ok = true;
        if (!strcmp(a, "-m") || !strcmp(a, "--model"))
            ok = o->n_models < MAX_LIST && (o->models[o->n_models++] = v);
        else if (!strcmp(a, "-p") || !strcmp(a, "--n-prompt"))
            ok = parse_list(a, v, 0, 1 << 20, o->pp, &o->n_pp);
        else if (!strcmp(a, "-n") || !strcmp(a, "--n-gen"))
            ok = parse_list(a, v, 0, 1 << 20, o->tg, &o->n_tg);
        else if (!strcmp(a, "-d") || !strcmp(a, "--n-depth"))
            ok = parse_list(a, v, 0, 1 << 20, o->depth, &o->n_depth);
        else if (!strcmp(a, "-np") || !strcmp(a, "--parallel"))
            ok = parse_list(a, v, 1, MAX_PARALLEL, o->np, &o->n_np);
        else if (!strcmp(a, "-t") || !strcmp(a, "--threads"))
            ok = parse_list(a, v, 1, 1 << 20, o->threads, &o->n_threads);
        else if (!strcmp(a, "-b") || !strcmp(a, "--batch-size"))
            ok = cli_int(a, v, 1, 1 << 20, &o->n_batch);
        else if (!strcmp(a, "-r") || !strcmp(a, "--repetitions"))
            ok = cli_int(a, v, 1, 1000, &o->reps);
        else if (!strcmp(a, "-mmp") || !strcmp(a, "--mmap"))
            ok = cli_int(a, v, 0, 1, &o->mmap);
        else if (!strcmp(a, "-nkvo") || !strcmp(a, "--no-kv-offload"))
            ok = cli_int(a, v, 0, 1, &o->no_kvo);
        else if (!strcmp(a, "-ctk") || !strcmp(a, "--cache-type-k"))
            ok = cli_cache_type(v, &o->type_k);
        else if (!strcmp(a, "-ctv") || !strcmp(a, "--cache-type-v"))
            ok = cli_cache_type(v, &o->type_v);
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
    if (!o->n_depth)
        o->depth[o->n_depth++] = 0;
    if (!o->n_np)
        o->np[o->n_np++] = 1;
    if (!o->n_threads) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        o->threads[o->n_threads++] = n > 0 ? n : 1;
    }
    for (int di = 0; di < o->n_depth; di++) {
        for (int k = 0; k < o->n_pp + o->n_tg * o->n_np; k++) {
            bool is_pp = k < o->n_pp;
            long long n = is_pp ? o->pp[k] : o->tg[(k - o->n_pp) / o->n_np];
            long long np = is_pp ? 1 : o->np[(k - o->n_pp) % o->n_np];
            long long need = cells_needed(is_pp, n, o->depth[di], np);
            if (n > 0 && need > MAX_CELLS) {
                fprintf(stderr, "error: %s%lld x%lld @ d%lld needs a context of %lld tokens (at most %lld)\n",
                        is_pp ? "pp" : "tg", n, np, o->depth[di], need, MAX_CELLS);
                return 2;
            }
        }
    }
    return 0;
}

static void random_tokens(llama_token *toks, long long n, int n_vocab, uint32_t seed)
{
    uint32_t r = 12345u + seed * 7919u;
    for (long long i = 0; i < n; i++) { /* random tokens, as llama-bench uses */
        r = r * 1664525u + 1013904223u;
        toks[i] = (llama_token)(r % (uint32_t)n_vocab);
    }
}

/* Decode toks[0..n) into sequence seq at positions pos0.. in calls of up to n_batch. */
static bool decode_seq(struct llama_context *ctx, llama_token *toks, long long n, long long pos0, int seq,
                       long long n_batch)
{
    for (long long done = 0; done < n; done += n_batch) {
        int32_t k = (int32_t)(n - done < n_batch ? n - done : n_batch);
        if (llama_decode(ctx, llama_batch_get_one(toks + done, k, (llama_pos)(pos0 + done), seq)) != 0)
            return false;
    }
    return true;
}

/* The depth prefix: sequence seq's depth tokens at positions 0..depth-1 (untimed). */
static bool fill_depth(struct llama_context *ctx, int n_vocab, long long depth, int seq, long long n_batch)
{
    if (depth <= 0)
        return true;
    llama_token *toks = malloc((size_t)depth * sizeof *toks);
    if (!toks)
        return false;
    random_tokens(toks, depth, n_vocab, 1000u + (uint32_t)seq);
    bool ok = decode_seq(ctx, toks, depth, 0, seq, n_batch);
    free(toks);
    return ok;
}

/* One timed test after the depth prefix (sequences 0..np-1 filled): returns
 * tokens per second (all sequences together), or a negative value on
 * failure, and adds the microseconds it took to *us. Afterwards the test's
 * tokens are removed from the cache again. */
static double run_test(struct llama_context *ctx, int n_vocab, bool is_pp, long long n, long long depth,
                       long long np, long long n_batch, struct llama_batch *gb, int64_t *us)
{
    long long total = is_pp ? n : n * np;
    llama_token *toks = malloc((size_t)(total > 0 ? total : 1) * sizeof *toks);
    if (!toks)
        return -1;
    random_tokens(toks, total, n_vocab, 0);
    int64_t t0 = llama_time_us();
    bool ok = true;
    if (is_pp) {
        ok = decode_seq(ctx, toks, n, depth, 0, n_batch);
    } else {
        for (long long i = 0; i < n && ok; i++) {
            gb->n_tokens = (int32_t)np;
            for (long long j = 0; j < np; j++) {
                gb->token[j] = toks[i * np + j];
                gb->pos[j] = (llama_pos)(depth + i);
                gb->n_seq_id[j] = 1;
                gb->seq_id[j][0] = (llama_seq_id)j;
                gb->logits[j] = 1;
            }
            ok = llama_decode(ctx, *gb) == 0;
        }
    }
    int64_t dt = llama_time_us() - t0;
    *us += dt;
    free(toks);
    llama_kv_cache_seq_rm(ctx, -1, (llama_pos)depth, -1);
    return ok && dt > 0 ? (double)total * 1e6 / (double)dt : -1;
}

/* All tests at one thread count and depth, in one context sized for the
 * largest; the depth prefix of sequence s is decoded once, when the first
 * test with more than s sequences comes (a test with fewer sequences than are
 * filled clears the cache first, so the attention sees only its own). */
static bool bench_depth(const struct bench_opts *o, const char *path, struct llama_model *model, long long threads,
                        long long depth, struct result *res, int *n_res)
{
    long long n_ctx = 0, max_pos = 0;
    int n_tests = o->n_pp + o->n_tg * o->n_np;
    for (int k = 0; k < n_tests; k++) {
        bool is_pp = k < o->n_pp;
        long long n = is_pp ? o->pp[k] : o->tg[(k - o->n_pp) / o->n_np];
        long long np = is_pp ? 1 : o->np[(k - o->n_pp) % o->n_np];
        long long need = cells_needed(is_pp, n, depth, np);
        if (n > 0 && need > n_ctx)
            n_ctx = need;
        if (n > 0 && depth + n > max_pos)
            max_pos = depth + n;
    }
    if (n_ctx == 0)
        return true;
    if (max_pos > llama_n_ctx_train(model))
        fprintf(stderr, "note: depth %lld + test tokens go past the model's %d trained positions "
                        "(timing only; the outputs are meaningless there)\n", depth, llama_n_ctx_train(model));
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = (uint32_t)(n_ctx < 512 ? 512 : n_ctx);
    cp.n_batch = (uint32_t)(o->n_batch < (long long)cp.n_ctx ? o->n_batch : cp.n_ctx);
    cp.n_threads = cp.n_threads_batch = (uint32_t)threads;
    cp.seed = 1;
    cp.offload_kqv = o->no_kvo == 0;
    cp.type_k = o->type_k;
    cp.type_v = o->type_v;
    struct llama_context *ctx = llama_new_context_with_model(model, cp);
    if (!ctx) {
        fprintf(stderr, "error: cannot make a context of %u tokens for %s\n", cp.n_ctx, path);
        return false;
    }
    struct llama_batch gb = llama_batch_init(MAX_PARALLEL, 0, 1);
    int n_vocab = llama_n_vocab(model);
    long long filled = 0; /* sequences 0..filled-1 hold the depth prefix */
    llama_kv_cache_clear(ctx);
    bool ok = gb.token != NULL;
    for (int k = 0; k < n_tests && ok; k++) {
        bool is_pp = k < o->n_pp;
        long long n = is_pp ? o->pp[k] : o->tg[(k - o->n_pp) / o->n_np];
        long long np = is_pp ? 1 : o->np[(k - o->n_pp) % o->n_np];
        if (n <= 0)
            continue;
        if (filled > np) {
            llama_kv_cache_clear(ctx);
            filled = 0;
        }
        for (; filled < np && ok; filled++)
            ok = fill_depth(ctx, n_vocab, depth, (int)filled, cp.n_batch);
        if (!ok) {
            fprintf(stderr, "error: decoding the depth prefix failed in %s (depth %lld)\n", path, depth);
            break;
        }
        int64_t us = 0;
        long long n_warm = is_pp ? n : (n < 16 ? n : 16);
        ok = run_test(ctx, n_vocab, is_pp, n_warm, depth, np, cp.n_batch, &gb, &us) > 0; /* warm-up */
        double sum = 0, sum2 = 0;
        us = 0;
        if (o->profile)
            lm_profile_reset();
        for (long long r = 0; r < o->reps && ok; r++) {
            double ts = run_test(ctx, n_vocab, is_pp, n, depth, np, cp.n_batch, &gb, &us);
            ok = ts > 0;
            sum += ts;
            sum2 += ts * ts;
        }
        struct result *re = &res[(*n_res)++];
        re->reps = o->reps;
        re->test_us = us;
        if (o->profile && (re->prof = malloc(LM_PROFILE_MAX_ROWS * sizeof *re->prof)))
            re->n_prof = lm_profile_snapshot(re->prof);
        re->model = path;
        llama_model_desc(model, re->desc, sizeof re->desc);
        re->size = llama_model_size(model);
        re->params = llama_model_n_params(model);
        re->threads = threads;
        re->n = n;
        re->depth = depth;
        re->np = np;
        re->is_pp = is_pp;
        re->mean = sum / (double)o->reps;
        double var = sum2 / (double)o->reps - re->mean * re->mean;
        re->sd = o->reps > 1 && var > 0 ? sqrt(var * (double)o->reps / (double)(o->reps - 1)) : 0.0;
        if (!ok)
            fprintf(stderr, "error: decoding failed in %s %s%lld x%lld @ d%lld\n", path, is_pp ? "pp" : "tg", n, np,
                    depth);
    }
    llama_batch_free(gb);
    llama_free(ctx);
    return ok;
}

static bool bench_model(const struct bench_opts *o, const char *path, struct result *res, int *n_res)
{
    struct llama_model_params mp = llama_model_default_params();
    mp.use_mmap = o->mmap != 0;
    cli_placement_apply(&o->place, &mp);
    struct llama_model *model = llama_load_model_from_file(path, mp);
    if (!model) {
        fprintf(stderr, "error: cannot load %s\n", path);
        return false;
    }
    bool ok = true;
    for (int ti = 0; ti < o->n_threads && ok; ti++)
        for (int di = 0; di < o->n_depth && ok; di++)
            ok = bench_depth(o, path, model, o->threads[ti], o->depth[di], res, n_res);
    llama_free_model(model);
    return ok;
}

/* The test's name: "pp512", "tg128 x8", "pp512 @ d4096". */
static void test_name(const struct result *r, char *test, size_t size)
{
    int len = snprintf(test, size, "%s%lld", r->is_pp ? "pp" : "tg", r->n);
    if (r->np > 1)
        len += snprintf(test + len, size - (size_t)len, " x%lld", r->np);
    if (r->depth > 0)
        snprintf(test + len, size - (size_t)len, " @ d%lld", r->depth);
}

/* "CUDA" when -ngl puts layers on a registered GPU backend, else "CPU"
 * (llama-bench's backend column). */
static const char *backend_label(const struct bench_opts *o)
{
    int n_gpu = 0;
    for (int i = 0; i < lm_backend_reg_count(); i++)
        n_gpu += lm_backend_reg_get(i)->kind == LM_DEV_GPU;
    return n_gpu > 0 && o->place.n_gpu_layers > 0 ? "CUDA" : "CPU";
}

static void print_results(const struct bench_opts *o, const struct result *res, int n)
{
    bool md = !strcmp(o->output, "md"), csv = !strcmp(o->output, "csv");
    const char *backend = backend_label(o);
    if (md) {
        printf("| %-30s | %10s | %10s | %-7s | %7s | %18s | %20s |\n", "model", "size", "params", "backend", "threads",
               "test", "t/s");
        printf("| %.30s | %.10s | %.10s | %.7s | %.7s | %.18s | %.20s |\n", "------------------------------",
               "---------:", "---------:", "-------", "------:", "-----------------:", "-------------------:");
    } else if (csv) {
        printf("model_filename,model_type,model_size,model_n_params,backend,n_threads,n_prompt,n_gen,n_depth,"
               "n_parallel,avg_ts,stddev_ts\n");
    } else {
        printf("[\n");
    }
    for (int i = 0; i < n; i++) {
        const struct result *r = &res[i];
        char test[64];
        test_name(r, test, sizeof test);
        if (md) {
            char size[32], params[32];
            snprintf(size, sizeof size, "%.2f MiB", (double)r->size / (1024.0 * 1024.0));
            if (r->params >= 1000000000ull)
                snprintf(params, sizeof params, "%.2f B", (double)r->params / 1e9);
            else
                snprintf(params, sizeof params, "%.2f M", (double)r->params / 1e6);
            if (r->size >= 1024ull * 1024 * 1024)
                snprintf(size, sizeof size, "%.2f GiB", (double)r->size / (1024.0 * 1024 * 1024));
            printf("| %-30s | %10s | %10s | %-7s | %7lld | %18s | %11.2f ± %6.2f |\n", r->desc, size, params, backend,
                   r->threads, test, r->mean, r->sd);
        } else if (csv) {
            printf("\"%s\",\"%s\",%llu,%llu,%s,%lld,%lld,%lld,%lld,%lld,%.6f,%.6f\n", r->model, r->desc,
                   (unsigned long long)r->size, (unsigned long long)r->params, backend, r->threads, r->is_pp ? r->n : 0,
                   r->is_pp ? 0 : r->n, r->depth, r->np, r->mean, r->sd);
        } else {
            printf("  {\"model_filename\": \"%s\", \"model_type\": \"%s\", \"model_size\": %llu, \"model_n_params\": %llu, "
                   "\"backend\": \"%s\", \"n_threads\": %lld, \"n_prompt\": %lld, \"n_gen\": %lld, \"n_depth\": %lld, "
                   "\"n_parallel\": %lld, \"avg_ts\": %.6f, \"stddev_ts\": %.6f}%s\n",
                   r->model, r->desc, (unsigned long long)r->size, (unsigned long long)r->params, backend, r->threads,
                   r->is_pp ? r->n : 0, r->is_pp ? 0 : r->n, r->depth, r->np, r->mean, r->sd, i + 1 < n ? "," : "");
        }
    }
    if (!md && !csv)
        printf("]\n");
}

static int by_wall_desc(const void *a, const void *b)
{
    int64_t x = ((const struct lm_profile_row *)a)->wall_ns, y = ((const struct lm_profile_row *)b)->wall_ns;
    return (x < y) - (x > y);
}

/* --profile: per test, its ops by time (per timed run), then the time outside
 * the graph executor (graph building, llama_decode's own work); the
 * time % column sums to 100. md: to stdout, csv and json: to stderr. */
static void print_profiles(const struct bench_opts *o, struct result *res, int n)
{
    FILE *f = !strcmp(o->output, "md") ? stdout : stderr;
    for (int i = 0; i < n; i++) {
        struct result *r = &res[i];
        if (!r->prof || r->reps < 1)
            continue;
        char test[64];
        test_name(r, test, sizeof test);
        qsort(r->prof, (size_t)r->n_prof, sizeof *r->prof, by_wall_desc);
        double reps = (double)r->reps, test_ns = (double)r->test_us * 1e3;
        double pct = test_ns > 0 ? 100.0 / test_ns : 0.0;
        int64_t wall = 0, busy = 0, thread_ns = 0;
        fprintf(f, "\nprofile: %s, %lld threads, %s: %.3f ms per run (%lld timed runs)\n", r->desc, r->threads, test,
                test_ns / 1e6 / reps, r->reps);
        fprintf(f, "| %-26s | %9s | %10s | %6s | %6s |\n", "op", "nodes/run", "ms/run", "time %", "busy %");
        fprintf(f, "| %.26s | %.9s | %.10s | %.6s | %.6s |\n", "--------------------------", "--------:",
                "---------:", "-----:", "-----:");
        for (int k = 0; k < r->n_prof; k++) {
            const struct lm_profile_row *p = &r->prof[k];
            char calls[32];
            if (p->calls % r->reps == 0)
                snprintf(calls, sizeof calls, "%lld", (long long)(p->calls / r->reps));
            else
                snprintf(calls, sizeof calls, "%.1f", (double)p->calls / reps);
            double busy_pct = p->thread_ns > 0 ? 100.0 * (double)p->busy_ns / (double)p->thread_ns : 0.0;
            fprintf(f, "| %-26s | %9s | %10.3f | %6.1f | %6.1f |\n", p->name, calls, (double)p->wall_ns / 1e6 / reps,
                    (double)p->wall_ns * pct, busy_pct);
            wall += p->wall_ns;
            busy += p->busy_ns;
            thread_ns += p->thread_ns;
        }
        double outside = test_ns > (double)wall ? test_ns - (double)wall : 0.0;
        fprintf(f, "| %-26s | %9s | %10.3f | %6.1f | %6s |\n", "outside the graph executor", "", outside / 1e6 / reps,
                outside * pct, "");
        double busy_pct = thread_ns > 0 ? 100.0 * (double)busy / (double)thread_ns : 0.0;
        fprintf(f, "graph executor: %.1f %% of the time; its threads %.1f %% busy, %.1f %% at barriers or idle\n",
                (double)wall * pct, busy_pct, 100.0 - busy_pct);
    }
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
    lm_profile_enable(o.profile);
    int cap = o.n_models * o.n_threads * o.n_depth * (o.n_pp + o.n_tg * o.n_np), n = 0;
    struct result *res = calloc((size_t)cap, sizeof *res);
    bool ok = res != NULL;
    for (int m = 0; m < o.n_models && ok; m++)
        ok = bench_model(&o, o.models[m], res, &n);
    if (res) {
        print_results(&o, res, n);
        print_profiles(&o, res, n);
        for (int i = 0; i < n; i++)
            free(res[i].prof);
    }
    free(res);
    lm_profile_enable(false);
    llama_backend_free();
    return ok ? 0 : 1;
}
