/* perplexity.c - `lamina perplexity -m MODEL -f TEXT`: llama.cpp's perplexity
 * tool over llama.h (docs/quality.md describes it, its output and its file).
 *
 * The text is tokenized once (with BOS when the model adds one) and cut into
 * chunks of n_ctx tokens. Each chunk is decoded from an empty KV cache, its
 * first token replaced by BOS, and only its second half is scored: positions
 * first = n_ctx/2 .. n_ctx-2 each predict the next token, whose negative
 * log-likelihood comes from a log-softmax in double. Several chunks share a
 * decode call when n_batch allows (n_seq = n_batch / n_ctx, one sequence id
 * each); the sums are taken in chunk order, so the result does not depend on
 * the batching.
 *
 * --kl-divergence-base FILE saves each scored position's log-probabilities
 * (and the tokens) to FILE; --kl-divergence reads FILE back and compares this
 * model with the one that wrote it (KL divergence, top-1 agreement, PPL
 * ratio), as llama.cpp's perplexity --kl-divergence reports them.
 *
 * Results go to stdout; progress (a bar on a terminal, a few plain lines
 * otherwise) and errors to stderr. One thread scores (the log-softmax is a
 * small cost next to the decode).
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "llama.h"
#include "progress.h"

/* ---- the KL-divergence base file (docs/quality.md, "The base file") ----
 * little-endian: header, int32 tokens[n_chunk * n_ctx], then for each scored
 * position of each chunk in order a record of float64 nll (the base model's
 * negative log-likelihood of the next token) and float32 log_probs[n_vocab]. */
#define KLD_MAGIC "LMKLBASE"
#define KLD_VERSION 1u

struct kld_header {
    char magic[8];
    uint32_t version, n_vocab, n_ctx, n_chunk, first, add_bos;
};
_Static_assert(sizeof(struct kld_header) == 32, "kld_header has no padding");

struct ppl_opts {
    struct cli_model_opts m;
    const char *text_file, *kld_file;
    long long n_chunks; /* -1: all */
    bool kld;           /* compare against kld_file (else: write it, when given) */
};

/* How the tokens are cut into chunks and the chunks into decode calls. */
struct ppl_plan {
    llama_token *tokens; /* [n_chunk * n_ctx] at least */
    int n_ctx, first, n_chunk, n_seq, n_batch;
    bool add_bos;
    llama_token bos;
};

/* Running sums of llama.cpp's KL statistics (kld_values, p_diff_values: one per scored position). */
struct kld_sums {
    double nll, nll2, nll_base, nll_base2, nll_nll_base, kld, kld2, p_diff, p_diff2, p_diff4;
    int64_t same_top, count;
    float *kld_values, *p_diff_values;
};

/* What scoring keeps between positions and chunks. */
struct scorer {
    int n_vocab;
    int32_t *piece_len; /* [n_vocab] bytes of each token's text */
    float *logp;        /* [n_vocab] this position's log-probabilities */
    float *logp_base;   /* [n_vocab] the base file's (KL mode) */
    FILE *save, *base;  /* the base file being written / read, or NULL */
    const char *base_path;
    double nll, nll2; /* sums over scored positions */
    int64_t count, bytes;
    double *chunk_ppl; /* [n_chunk] running PPL after each chunk */
    struct kld_sums kl;
    bool kld, bar; /* KL mode; a progress bar is drawn on stderr */
    bool defer;    /* print the chunk list at the end (the bar shares stdout's terminal) */
};

static void ppl_usage(FILE *f)
{
    fputs("usage: lamina perplexity -m MODEL -f TEXT [options]\n"
          "       lamina perplexity -m MODEL --kl-divergence --kl-divergence-base FILE [options]\n\n"
          "Perplexity of MODEL on TEXT, llama.cpp's way: chunks of -c tokens, each from an empty\n"
          "cache with BOS first, the second half of each chunk scored (see docs/quality.md).\n"
          "-c (default 512) is the chunk size; n_batch / n_ctx chunks share a decode call.\n\n"
          "  -f, --file FILE           the text (needs at least 2 * n_ctx tokens)\n"
          "  --chunks N                score at most N chunks (default: all)\n"
          "  --kl-divergence-base FILE without --kl-divergence: also save the log-probabilities of\n"
          "                            every scored position and the tokens to FILE; with it: the\n"
          "                            saved file to compare against\n"
          "  --kl-divergence           compare MODEL against --kl-divergence-base FILE (KL divergence,\n"
          "                            same top token, PPL ratio); the tokens and -c come from FILE\n"
          "                            (-f is optional and then must give the same tokens)\n",
          f);
    cli_model_usage(f);
    fputs("  -h, --help                this text\n", f);
}

/* Returns 0 ok, 1 help shown, 2 usage error. */
static int parse_ppl(int argc, char **argv, struct ppl_opts *o)
{
    *o = (struct ppl_opts){.m = cli_model_defaults(), .n_chunks = -1};
    o->m.n_ctx = -1; /* -1: not given (512, or the base file's in KL mode) */
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        int r = cli_model_flag(argc, argv, &i, &o->m);
        if (r < 0)
            return 2;
        if (r > 0)
            continue;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            ppl_usage(stdout);
            return 1;
        } else if (!strcmp(a, "-f") || !strcmp(a, "--file")) {
            if (!(v = cli_value(argc, argv, &i)))
                return 2;
            o->text_file = v;
        } else if (!strcmp(a, "--chunks")) {
            if (!(v = cli_value(argc, argv, &i)) || !cli_int(a, v, 1, INT32_MAX, &o->n_chunks))
                return 2;
        } else if (!strcmp(a, "--kl-divergence-base")) {
            if (!(v = cli_value(argc, argv, &i)))
                return 2;
            o->kld_file = v;
        } else if (!strcmp(a, "--kl-divergence")) {
            o->kld = true;
        } else {
            fprintf(stderr, "error: unknown option '%s' (see lamina perplexity --help)\n", a);
            return 2;
        }
    }
    if (!o->m.model) {
        fprintf(stderr, "error: lamina perplexity needs a model: -m FILE (see lamina perplexity --help)\n");
        return 2;
    }
    if (o->kld && !o->kld_file) {
        fprintf(stderr, "error: --kl-divergence needs --kl-divergence-base FILE (the saved base log-probs)\n");
        return 2;
    }
    if (!o->kld && !o->text_file) {
        fprintf(stderr, "error: lamina perplexity needs a text: -f FILE (see lamina perplexity --help)\n");
        return 2;
    }
    if (o->m.n_ctx == 0) {
        fprintf(stderr, "error: perplexity needs an explicit context size: -c N (even, >= 4)\n");
        return 2;
    }
    if (o->m.n_ctx > 0 && (o->m.n_ctx < 4 || o->m.n_ctx % 2)) {
        fprintf(stderr, "error: -c %lld: the context size must be even and at least 4 (half of it is scored)\n",
                o->m.n_ctx);
        return 2;
    }
    return 0;
}

/* ---- numbers ---- */

/* llama.cpp's mean of per-position values and its standard error (0 for fewer than 11 values). */
static void mean_unc(double sum, double sum2, int64_t count, double *mean, double *unc)
{
    *mean = *unc = 0.0;
    if (count < 1)
        return;
    *mean = sum / (double)count;
    double var = sum2 / (double)count - *mean * *mean;
    *unc = var > 0 && count > 10 ? sqrt(var / (double)(count - 1)) : 0.0;
}

/* The covariance of two per-position means (0 for fewer than 10 values). */
static double covariance(double suma, double sumb, double sumab, int64_t count)
{
    if (count < 10)
        return 0.0;
    double n = (double)count;
    return (sumab / n - (suma / n) * (sumb / n)) / (n - 1);
}

/* log(sum(exp(logits))) in double, and the log-probabilities as floats into
 * logp (may be NULL). */
static double log_softmax(const float *logits, int n, float *logp)
{
    float mx = logits[0];
    for (int i = 1; i < n; i++)
        mx = logits[i] > mx ? logits[i] : mx;
    double sum = 0.0;
    for (int i = 0; i < n; i++)
        sum += exp((double)logits[i] - mx);
    double lse = mx + log(sum);
    if (logp)
        for (int i = 0; i < n; i++)
            logp[i] = (float)((double)logits[i] - lse);
    return lse;
}

static int argmax(const float *x, int n)
{
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best])
            best = i;
    return best;
}

/* ---- scoring one position, and the lines per chunk ---- */

static bool read_exact(FILE *f, void *buf, size_t n) { return fread(buf, 1, n, f) == n; }
static bool write_exact(FILE *f, const void *buf, size_t n) { return fwrite(buf, 1, n, f) == n; }

/* Adds one position to the KL sums: logits and s->logp are this model's, nll
 * its NLL of the next token; the base's record is read from s->base. */
static int score_kld(struct scorer *s, const float *logits, double nll)
{
    double nll_base;
    if (!read_exact(s->base, &nll_base, sizeof nll_base) ||
        !read_exact(s->base, s->logp_base, (size_t)s->n_vocab * sizeof(float))) {
        fprintf(stderr, "error: %s: read error\n", s->base_path);
        return 1;
    }
    struct kld_sums *k = &s->kl;
    double kl = 0.0;
    for (int i = 0; i < s->n_vocab; i++) /* KL(base || this) = sum p_base (log p_base - log p) */
        kl += exp((double)s->logp_base[i]) * ((double)s->logp_base[i] - (double)s->logp[i]);
    double p_diff = exp(-nll) - exp(-nll_base);
    k->nll += nll;
    k->nll2 += nll * nll;
    k->nll_base += nll_base;
    k->nll_base2 += nll_base * nll_base;
    k->nll_nll_base += nll * nll_base;
    k->kld += kl;
    k->kld2 += kl * kl;
    k->p_diff += p_diff;
    k->p_diff2 += p_diff * p_diff;
    k->p_diff4 += p_diff * p_diff * p_diff * p_diff;
    k->same_top += argmax(logits, s->n_vocab) == argmax(s->logp_base, s->n_vocab);
    k->kld_values[k->count] = (float)kl;
    k->p_diff_values[k->count] = (float)p_diff;
    k->count++;
    return 0;
}

/* Scores one position: logits predict next. 0, or 1 with a message (file I/O). */
static int score(struct scorer *s, const float *logits, llama_token next)
{
    bool want_logp = s->save || s->kld;
    double nll = log_softmax(logits, s->n_vocab, want_logp ? s->logp : NULL) - (double)logits[next];
    s->nll += nll;
    s->nll2 += nll * nll;
    s->count++;
    s->bytes += s->piece_len[next];
    if (s->save && (!write_exact(s->save, &nll, sizeof nll) ||
                    !write_exact(s->save, s->logp, (size_t)s->n_vocab * sizeof(float)))) {
        fprintf(stderr, "error: writing %s: %s\n", s->base_path, strerror(errno));
        return 1;
    }
    return s->kld ? score_kld(s, logits, nll) : 0;
}

/* The table line of a chunk in KL mode (llama.cpp's columns). */
static void print_kld_line(const struct kld_sums *k, int chunk)
{
    double lp, lp_unc, lb, lb_unc, kl, kl_unc, mse, mse_unc;
    mean_unc(k->nll, k->nll2, k->count, &lp, &lp_unc);
    mean_unc(k->nll_base, k->nll_base2, k->count, &lb, &lb_unc);
    double cov = covariance(k->nll, k->nll_base, k->nll_nll_base, k->count);
    double ratio_unc2 = lp_unc * lp_unc + lb_unc * lb_unc - 2.0 * cov;
    mean_unc(k->kld, k->kld2, k->count, &kl, &kl_unc);
    mean_unc(k->p_diff2, k->p_diff4, k->count, &mse, &mse_unc);
    double rms = sqrt(mse), rms_unc = rms > 0 ? 0.5 / rms * mse_unc : 0.0;
    double top = (double)k->same_top / (double)k->count;
    double top_unc = k->count > 1 ? sqrt(top * (1 - top) / (double)(k->count - 1)) : 0.0;
    printf("%4d    %9.4f ± %9.4f    %10.5f ± %10.5f    %10.5f ± %10.5f    %6.3f ± %6.3f %%    %6.3f ± %6.3f %%\n",
           chunk + 1, exp(lp), exp(lp) * lp_unc, lp - lb, sqrt(ratio_unc2 > 0 ? ratio_unc2 : 0.0), kl, kl_unc,
           100.0 * rms, 100.0 * rms_unc, 100.0 * top, 100.0 * top_unc);
    fflush(stdout);
}

/* A chunk is done: print its running value. */
static void chunk_done(struct scorer *s, int chunk)
{
    double ppl = exp(s->nll / (double)s->count);
    s->chunk_ppl[chunk] = ppl;
    if (s->kld) {
        if (s->bar) /* a whole line: clear the bar, which is redrawn below it */
            cli_progress_clear();
        if (chunk == 0)
            printf("chunk             PPL               ln(PPL(Q)/PPL(base))          KL Divergence"
                   "              Δp RMS            Same top p\n");
        print_kld_line(&s->kl, chunk);
    } else if (!s->defer) {
        printf("[%d]%.4f,", chunk + 1, ppl);
        fflush(stdout);
    }
}

/* ---- progress ---- */

struct ppl_progress {
    bool bar;
    double t0, t_last; /* seconds: start, last plain line */
    int n_chunk;
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* After `done` of n_chunk chunks (0: before the first): redraw the bar
 * (terminal) or, after the first decode and then at most every 10 s, write a
 * plain line (elsewhere). */
static void progress_step(struct ppl_progress *p, int done, double ppl)
{
    double t = now_s(), el = t - p->t0, eta = done ? el / done * (p->n_chunk - done) : 0.0;
    if (p->bar && done == 0) {
        char line[96];
        snprintf(line, sizeof line, "perplexity [%.30s] 0/%d chunks", "..............................", p->n_chunk);
        cli_progress_text(line);
    } else if (p->bar) {
        char bar[31], line[128];
        int fill = (int)(30.0 * done / p->n_chunk);
        for (int i = 0; i < 30; i++)
            bar[i] = i < fill ? '#' : '.';
        bar[30] = 0;
        snprintf(line, sizeof line, "perplexity [%s] %d/%d chunks  PPL %.4f  ETA %.0f s", bar, done, p->n_chunk, ppl,
                 eta);
        cli_progress_text(line);
    } else if (done == p->n_chunk) {
        return;
    } else if (p->t_last == 0.0 || t - p->t_last >= 10.0) {
        fprintf(stderr, "perplexity: %d/%d chunks, %.2f s, ETA %.2f minutes\n", done, p->n_chunk, el, eta / 60.0);
        p->t_last = t;
    }
}

/* ---- evaluation ---- */

/* Decodes every chunk of the plan and scores its second half. 0, or 1 with a message. */
static int evaluate(struct llama_context *ctx, const struct ppl_plan *p, struct scorer *s, struct ppl_progress *prog)
{
    const int step = p->n_batch < p->n_ctx ? p->n_batch : p->n_ctx; /* tokens of one chunk per decode */
    const int n_calls = (p->n_ctx + step - 1) / step;
    struct llama_batch batch = llama_batch_init(step * p->n_seq, 0, 1);
    int rc = 0;
    if (prog->bar)
        progress_step(prog, 0, 0.0);
    for (int c0 = 0; c0 < p->n_chunk && !rc; c0 += p->n_seq) {
        const int n_seq = p->n_chunk - c0 < p->n_seq ? p->n_chunk - c0 : p->n_seq;
        llama_kv_cache_clear(ctx);
        for (int j = 0; j < n_calls && !rc; j++) {
            const int pos0 = j * step, len = p->n_ctx - pos0 < step ? p->n_ctx - pos0 : step;
            batch.n_tokens = 0;
            for (int sq = 0; sq < n_seq; sq++) {
                const llama_token *t = p->tokens + (size_t)(c0 + sq) * (size_t)p->n_ctx;
                for (int k = 0; k < len; k++) {
                    int pos = pos0 + k, b = batch.n_tokens++;
                    batch.token[b] = pos == 0 && p->add_bos ? p->bos : t[pos];
                    batch.pos[b] = pos;
                    batch.n_seq_id[b] = 1;
                    batch.seq_id[b][0] = sq;
                    batch.logits[b] = pos >= p->first && pos < p->n_ctx - 1;
                }
            }
            if (llama_decode(ctx, batch) != 0) {
                if (prog->bar)
                    cli_progress_clear();
                fprintf(stderr, "error: decoding chunk %d failed\n", c0 + 1);
                rc = 1;
                break;
            }
            for (int sq = 0; sq < n_seq && !rc; sq++) {
                const llama_token *t = p->tokens + (size_t)(c0 + sq) * (size_t)p->n_ctx;
                for (int k = 0; k < len && !rc; k++) {
                    int pos = pos0 + k;
                    if (pos < p->first || pos >= p->n_ctx - 1)
                        continue;
                    const float *logits = llama_get_logits_ith(ctx, sq * len + k);
                    if (!logits)
                        fprintf(stderr, "\nerror: no logits for chunk %d position %d\n", c0 + sq + 1, pos);
                    rc = logits ? score(s, logits, t[pos + 1]) : 1;
                }
                if (!rc && j == n_calls - 1)
                    chunk_done(s, c0 + sq);
            }
        }
        if (!rc)
            progress_step(prog, c0 + n_seq, exp(s->nll / (double)s->count));
    }
    if (prog->bar)
        cli_progress_clear();
    llama_batch_free(batch);
    return rc;
}

/* ---- results ---- */

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* llama.cpp's percentile: linear between the sorted values around fraction * (n - 1). */
static double percentile(const float *v, int64_t n, double fraction)
{
    if (fraction <= 0)
        return v[0];
    if (fraction >= 1)
        return v[n - 1];
    double x = fraction * (double)(n - 1);
    int64_t i = (int64_t)x;
    double f = x - (double)i;
    return (1 - f) * v[i] + f * v[i + 1 < n ? i + 1 : n - 1];
}

static void print_ppl_result(const struct scorer *s, int n_chunk)
{
    if (s->defer) {
        for (int c = 0; c < n_chunk; c++)
            printf("[%d]%.4f,", c + 1, s->chunk_ppl[c]);
    }
    printf("\n");
    double mean, unc;
    mean_unc(s->nll, s->nll2, s->count, &mean, &unc);
    /* llama.cpp's estimate: unc is the standard error of the mean NLL, times d(exp)/dx */
    double var = s->nll2 / (double)s->count - mean * mean;
    unc = var > 0 && s->count > 1 ? sqrt(var / (double)(s->count - 1)) : 0.0;
    printf("Final estimate: PPL = %.4f +/- %.5f\n", exp(mean), unc * exp(mean));
    printf("bits per byte: %.6f (%lld tokens scored, %lld bytes)\n",
           s->bytes ? s->nll / log(2.0) / (double)s->bytes : 0.0, (long long)s->count, (long long)s->bytes);
}

/* A line of the percentile lists: its label and fraction. */
struct pct {
    const char *name;
    double f;
};

/* A KLD value as llama.cpp prints it (%10.6f), except that a value too small
 * for that shows in %10.3e: "0.000000" then means exactly zero. */
static const char *kld_str(char buf[32], double v)
{
    snprintf(buf, 32, v != 0 && fabs(v) < 5e-7 ? "%10.3e" : "%10.6f", v);
    return buf;
}

static void print_kld_stats(const struct kld_sums *k)
{
    char b1[32], b2[32];
    double lp, lp_unc, lb, lb_unc, m, u;
    mean_unc(k->nll, k->nll2, k->count, &lp, &lp_unc);
    mean_unc(k->nll_base, k->nll_base2, k->count, &lb, &lb_unc);
    double ppl = exp(lp), ppl_unc = ppl * lp_unc, base = exp(lb), base_unc = base * lb_unc;
    double cov = covariance(k->nll, k->nll_base, k->nll_nll_base, k->count);
    double r_unc2 = lp_unc * lp_unc + lb_unc * lb_unc - 2.0 * cov, r_unc = sqrt(r_unc2 > 0 ? r_unc2 : 0.0);
    double d_unc2 = ppl_unc * ppl_unc + base_unc * base_unc - 2.0 * ppl * base * cov;
    printf("\n====== Perplexity statistics ======\n");
    printf("Mean PPL(Q)                   : %10.6f ± %10.6f\n", ppl, ppl_unc);
    printf("Mean PPL(base)                : %10.6f ± %10.6f\n", base, base_unc);
    if (lp_unc > 0 && lb_unc > 0)
        printf("Cor(ln(PPL(Q)), ln(PPL(base))): %6.2f%%\n", 100.0 * cov / (lp_unc * lb_unc));
    printf("Mean ln(PPL(Q)/PPL(base))     : %10.6f ± %10.6f\n", lp - lb, r_unc);
    printf("Mean PPL(Q)/PPL(base)         : %10.6f ± %10.6f\n", exp(lp - lb), exp(lp - lb) * r_unc);
    printf("Mean PPL(Q)-PPL(base)         : %10.6f ± %10.6f\n", ppl - base, sqrt(d_unc2 > 0 ? d_unc2 : 0.0));

    static const struct pct pk[] = {
        {"99.9%   KLD", 0.999}, {"99.0%   KLD", 0.99}, {"95.0%   KLD", 0.95},
        {"90.0%   KLD", 0.9},   {"Median  KLD", 0.5},  {"10.0%   KLD", 0.1},
        {" 5.0%   KLD", 0.05},  {" 1.0%   KLD", 0.01}, {" 0.1%   KLD", 0.001},
    };
    printf("\n====== KL divergence statistics ======\n");
    mean_unc(k->kld, k->kld2, k->count, &m, &u);
    printf("Mean    KLD: %s ± %s\n", kld_str(b1, m), kld_str(b2, u));
    printf("Maximum KLD: %s\n", kld_str(b1, k->kld_values[k->count - 1]));
    for (size_t i = 0; i < sizeof pk / sizeof pk[0]; i++)
        printf("%s: %s\n", pk[i].name, kld_str(b1, percentile(k->kld_values, k->count, pk[i].f)));
    printf("Minimum KLD: %s\n", kld_str(b1, k->kld_values[0]));

    static const struct pct pp[] = {
        {"99.9%   Δp", 0.999}, {"99.0%   Δp", 0.99}, {"95.0%   Δp", 0.95},  {"90.0%   Δp", 0.9},
        {"75.0%   Δp", 0.75},  {"Median  Δp", 0.5},  {"25.0%   Δp", 0.25},  {"10.0%   Δp", 0.1},
        {" 5.0%   Δp", 0.05},  {" 1.0%   Δp", 0.01}, {" 0.1%   Δp", 0.001},
    };
    printf("\n====== Token probability statistics ======\n");
    mean_unc(k->p_diff, k->p_diff2, k->count, &m, &u);
    printf("Mean    Δp: %6.3f ± %5.3f %%\n", 100.0 * m, 100.0 * u);
    printf("Maximum Δp: %6.3f%%\n", 100.0 * k->p_diff_values[k->count - 1]);
    for (size_t i = 0; i < sizeof pp / sizeof pp[0]; i++)
        printf("%s: %6.3f%%\n", pp[i].name, 100.0 * percentile(k->p_diff_values, k->count, pp[i].f));
    printf("Minimum Δp: %6.3f%%\n", 100.0 * k->p_diff_values[0]);
    mean_unc(k->p_diff2, k->p_diff4, k->count, &m, &u);
    double rms = sqrt(m);
    printf("RMS Δp    : %6.3f ± %5.3f %%\n", 100.0 * rms, rms > 0 ? 100.0 * 0.5 / rms * u : 0.0);
    double top = (double)k->same_top / (double)k->count;
    printf("Same top p: %6.3f ± %5.3f %%\n", 100.0 * top,
           k->count > 1 ? 100.0 * sqrt(top * (1.0 - top) / (double)(k->count - 1)) : 0.0);
}

static void print_kld_result(struct scorer *s)
{
    struct kld_sums *k = &s->kl;
    qsort(k->kld_values, (size_t)k->count, sizeof(float), cmp_float);
    qsort(k->p_diff_values, (size_t)k->count, sizeof(float), cmp_float);
    print_kld_stats(k);
}

/* ---- tokens and the base file ---- */

/* The tokens of text (with BOS first when add_bos); NULL with a message. */
static llama_token *tokenize_text(const struct llama_model *model, const char *text, size_t len, bool add_bos,
                                  int64_t *n_out)
{
    if (len > INT32_MAX - 16) {
        fprintf(stderr, "error: the text is too long (%zu bytes; at most 2 GiB)\n", len);
        return NULL;
    }
    int32_t cap = (int32_t)len + 16; /* a token per byte at most, plus BOS and a dummy prefix */
    llama_token *toks = malloc((size_t)cap * sizeof *toks);
    int32_t n = toks ? llama_tokenize(model, text, (int32_t)len, toks, cap, add_bos, false) : 0;
    if (toks && n < 0) {
        cap = -n;
        llama_token *t2 = realloc(toks, (size_t)cap * sizeof *toks);
        if (!t2) {
            free(toks);
            toks = NULL;
        } else {
            toks = t2;
            n = llama_tokenize(model, text, (int32_t)len, toks, cap, add_bos, false);
        }
    }
    if (!toks || n < 0) {
        fprintf(stderr, "error: cannot tokenize the text%s\n", toks ? "" : " (out of memory)");
        free(toks);
        return NULL;
    }
    *n_out = n;
    return toks;
}

/* Bytes of each token's text (llama_token_to_piece); NULL when out of memory. */
static int32_t *piece_lengths(const struct llama_model *model, int n_vocab)
{
    int32_t *len = malloc((size_t)n_vocab * sizeof *len);
    char buf[256];
    for (int t = 0; len && t < n_vocab; t++) {
        int32_t n = llama_token_to_piece(model, t, buf, (int32_t)sizeof buf);
        len[t] = n < 0 ? -n : n; /* negative: the length that did not fit */
    }
    return len;
}

/* Bytes of the records (nll + log-probs) of one chunk. */
static uint64_t chunk_record_bytes(uint32_t n_ctx, uint32_t n_vocab)
{
    return (uint64_t)(n_ctx - 1 - n_ctx / 2) * (sizeof(double) + (uint64_t)n_vocab * sizeof(float));
}

/* Opens a base file and checks its header and size; NULL with a message. */
static FILE *open_base(const char *path, struct kld_header *h)
{
    FILE *f = fopen(path, "rb");
    struct stat st;
    if (!f || fstat(fileno(f), &st) != 0) {
        fprintf(stderr, "error: cannot open %s: %s\n", path, strerror(errno));
        goto out_close;
    }
    if (!read_exact(f, h, sizeof *h) || memcmp(h->magic, KLD_MAGIC, 8) != 0) {
        fprintf(stderr, "error: %s is not a lamina perplexity base file (no %s magic)\n", path, KLD_MAGIC);
        goto out_close;
    }
    if (h->version != KLD_VERSION) {
        fprintf(stderr, "error: %s: base file version %u, this lamina reads version %u\n", path, h->version,
                KLD_VERSION);
        goto out_close;
    }
    if (h->n_vocab < 1 || h->n_vocab > (1u << 24) || h->n_ctx < 4 || h->n_ctx % 2 || h->n_ctx > (1u << 24) ||
        h->first != h->n_ctx / 2 || h->n_chunk < 1 || h->add_bos > 1) {
        fprintf(stderr, "error: %s: corrupt header (n_vocab %u, n_ctx %u, first %u, n_chunk %u)\n", path, h->n_vocab,
                h->n_ctx, h->first, h->n_chunk);
        goto out_close;
    }
    uint64_t per_chunk = (uint64_t)h->n_ctx * sizeof(int32_t) + chunk_record_bytes(h->n_ctx, h->n_vocab);
    uint64_t size = (uint64_t)st.st_size - sizeof *h;
    if ((uint64_t)st.st_size < sizeof *h || size / per_chunk != h->n_chunk || size % per_chunk) {
        fprintf(stderr, "error: %s: %lld bytes, but its header (%u chunks of %u tokens, vocab %u) needs %llu\n", path,
                (long long)st.st_size, h->n_chunk, h->n_ctx, h->n_vocab,
                (unsigned long long)(sizeof *h + (uint64_t)h->n_chunk * per_chunk));
        goto out_close;
    }
    return f;
out_close:
    if (f)
        fclose(f);
    return NULL;
}

/* Reads the base file's tokens (after the header) and checks them against
 * the model (and the text's tokens, when given). 0, or 1 with a message. */
static int read_base_tokens(FILE *f, const char *path, const struct kld_header *h, int n_vocab, bool add_bos,
                            const llama_token *text, int64_t n_text, llama_token *out)
{
    size_t n = (size_t)h->n_chunk * h->n_ctx;
    if ((int)h->n_vocab != n_vocab) {
        fprintf(stderr, "error: %s was written for a vocabulary of %u tokens; this model has %d\n", path, h->n_vocab,
                n_vocab);
        return 1;
    }
    if ((bool)h->add_bos != add_bos) {
        fprintf(stderr, "error: %s was written for a model that %s BOS; this one %s\n", path,
                h->add_bos ? "adds" : "does not add", add_bos ? "does" : "does not");
        return 1;
    }
    if (!read_exact(f, out, n * sizeof *out)) {
        fprintf(stderr, "error: %s: read error\n", path);
        return 1;
    }
    for (size_t i = 0; i < n; i++)
        if (out[i] < 0 || out[i] >= n_vocab) {
            fprintf(stderr, "error: %s: token %zu is %d, outside this model's vocabulary\n", path, i, out[i]);
            return 1;
        }
    if (text && n_text < (int64_t)n) {
        fprintf(stderr, "error: the text has %lld tokens, %s holds %zu: not the same text\n", (long long)n_text, path,
                n);
        return 1;
    }
    for (size_t i = 0; text && i < n; i++)
        if (text[i] != out[i]) {
            fprintf(stderr, "error: the text's token %zu is %d, %s has %d: not the same text or tokenizer\n", i,
                    text[i], path, out[i]);
            return 1;
        }
    return 0;
}

/* Creates the base file and writes its header and tokens; NULL with a message. */
static FILE *create_base(const char *path, const struct kld_header *h, const llama_token *tokens)
{
    FILE *f = fopen(path, "wb");
    if (!f || !write_exact(f, h, sizeof *h) ||
        !write_exact(f, tokens, (size_t)h->n_chunk * h->n_ctx * sizeof *tokens)) {
        fprintf(stderr, "error: cannot write %s: %s\n", path, strerror(errno));
        if (f)
            fclose(f);
        return NULL;
    }
    return f;
}

/* ---- the command ---- */

/* The tokens to score: the text's, or the base file's in KL mode (checked
 * against the model and the text). Fills p->tokens and p->n_chunk, and opens
 * s->base / s->save. 0, or 1 with a message. */
static int prepare(const struct ppl_opts *o, const struct llama_model *model, struct ppl_plan *p, struct scorer *s)
{
    int64_t n_text = 0;
    llama_token *text = NULL;
    if (o->text_file) {
        size_t len;
        char *buf = cli_read_file(o->text_file, &len);
        if (!buf)
            return 1;
        text = tokenize_text(model, buf, len, p->add_bos, &n_text);
        free(buf);
        if (!text)
            return 1;
    }
    if (o->kld) {
        struct kld_header h;
        if (!(s->base = open_base(o->kld_file, &h)))
            goto out_fail;
        if (!(p->tokens = malloc((size_t)h.n_chunk * h.n_ctx * sizeof *p->tokens)) ||
            read_base_tokens(s->base, o->kld_file, &h, s->n_vocab, p->add_bos, text, n_text, p->tokens))
            goto out_fail;
        free(text);
        p->n_chunk = (int)h.n_chunk;
    } else {
        if (n_text < 2 * (int64_t)p->n_ctx) {
            fprintf(stderr, "error: %s has %lld tokens; perplexity with -c %d needs at least %d (2 * n_ctx)\n",
                    o->text_file, (long long)n_text, p->n_ctx, 2 * p->n_ctx);
            goto out_fail;
        }
        p->tokens = text;
        p->n_chunk = n_text / p->n_ctx > INT32_MAX ? INT32_MAX : (int)(n_text / p->n_ctx);
    }
    if (o->n_chunks > 0 && o->n_chunks < p->n_chunk)
        p->n_chunk = (int)o->n_chunks;
    if (o->kld_file && !o->kld) {
        struct kld_header h = {.version = KLD_VERSION,
                               .n_vocab = (uint32_t)s->n_vocab,
                               .n_ctx = (uint32_t)p->n_ctx,
                               .n_chunk = (uint32_t)p->n_chunk,
                               .first = (uint32_t)p->first,
                               .add_bos = p->add_bos};
        memcpy(h.magic, KLD_MAGIC, 8);
        if (!(s->save = create_base(o->kld_file, &h, p->tokens)))
            return 1;
    }
    return 0;
out_fail:
    if (text != p->tokens)
        free(text);
    return 1;
}

/* Allocates the scorer's arrays for n_chunk chunks; false when out of memory. */
static bool scorer_alloc(struct scorer *s, const struct llama_model *model, const struct ppl_plan *p)
{
    int64_t n_pos = (int64_t)p->n_chunk * (p->n_ctx - 1 - p->first);
    s->piece_len = piece_lengths(model, s->n_vocab);
    s->logp = malloc((size_t)s->n_vocab * sizeof(float));
    s->chunk_ppl = malloc((size_t)p->n_chunk * sizeof(double));
    if (s->kld) {
        s->logp_base = malloc((size_t)s->n_vocab * sizeof(float));
        s->kl.kld_values = malloc((size_t)n_pos * sizeof(float));
        s->kl.p_diff_values = malloc((size_t)n_pos * sizeof(float));
    }
    return s->piece_len && s->logp && s->chunk_ppl &&
           (!s->kld || (s->logp_base && s->kl.kld_values && s->kl.p_diff_values));
}

static void scorer_free(struct scorer *s)
{
    free(s->piece_len);
    free(s->logp);
    free(s->logp_base);
    free(s->chunk_ppl);
    free(s->kl.kld_values);
    free(s->kl.p_diff_values);
    if (s->base)
        fclose(s->base);
}

/* Tokens, scoring, printing: 0, or 1 with a message. */
static int run_ppl(const struct ppl_opts *o, struct llama_context *ctx, struct ppl_plan *p)
{
    const struct llama_model *model = llama_get_model(ctx);
    struct scorer s = {.n_vocab = llama_n_vocab(model), .base_path = o->kld_file, .kld = o->kld};
    struct ppl_progress prog = {.bar = cli_progress_enabled(), .t0 = now_s()};
    int rc = prepare(o, model, p, &s);
    if (rc)
        goto out;
    if (!scorer_alloc(&s, model, p)) {
        fprintf(stderr, "error: out of memory\n");
        rc = 1;
        goto out;
    }
    s.bar = prog.bar;
    s.defer = prog.bar && isatty(STDOUT_FILENO);
    prog.n_chunk = p->n_chunk;
    fprintf(stderr, "perplexity: %d chunks of %d tokens (positions %d..%d scored), n_batch %d, %d chunk%s per decode\n",
            p->n_chunk, p->n_ctx, p->first, p->n_ctx - 2, p->n_batch, p->n_seq, p->n_seq > 1 ? "s" : "");
    rc = evaluate(ctx, p, &s, &prog);
    if (!rc && s.save && fclose(s.save) != 0) {
        fprintf(stderr, "error: writing %s: %s\n", o->kld_file, strerror(errno));
        rc = 1;
    }
    s.save = NULL;
    if (!rc && o->kld)
        print_kld_result(&s);
    else if (!rc)
        print_ppl_result(&s, p->n_chunk);
    if (!rc && o->kld_file && !o->kld)
        fprintf(stderr, "perplexity: saved the log-probs of %lld positions to %s\n", (long long)s.count, o->kld_file);
    fprintf(stderr, "perplexity: %.2f s\n", now_s() - prog.t0);
out:
    if (s.save)
        fclose(s.save);
    scorer_free(&s);
    return rc;
}

/* See cli.h: 0 success, 1 runtime error, 2 usage error. */
int cmd_perplexity(int argc, char **argv)
{
    struct ppl_opts o;
    int rc = parse_ppl(argc, argv, &o);
    if (rc)
        return rc == 1 ? 0 : 2;
    struct ppl_plan p = {.n_ctx = o.m.n_ctx > 0 ? (int)o.m.n_ctx : 512};
    if (o.kld) { /* the context size comes from the base file */
        struct kld_header h;
        FILE *f = open_base(o.kld_file, &h);
        if (!f)
            return 1;
        fclose(f);
        if (o.m.n_ctx > 0 && o.m.n_ctx != (long long)h.n_ctx) {
            fprintf(stderr, "error: %s was made with -c %u, not %lld\n", o.kld_file, h.n_ctx, o.m.n_ctx);
            return 2;
        }
        p.n_ctx = (int)h.n_ctx;
    }
    p.first = p.n_ctx / 2;
    p.n_batch = (int)o.m.n_batch;
    p.n_seq = p.n_batch / p.n_ctx > 1 ? p.n_batch / p.n_ctx : 1;
    struct cli_model_opts mo = o.m;
    mo.n_ctx = (long long)p.n_ctx * p.n_seq; /* one sequence of n_ctx cells per chunk in a decode */
    struct llama_model *model = NULL;
    struct llama_context *ctx = NULL;
    llama_backend_init(false);
    if (cli_model_load(&mo, &model, &ctx)) {
        rc = 1;
        goto out;
    }
    if ((long long)llama_n_ctx(ctx) < mo.n_ctx) {
        fprintf(stderr, "error: the context holds %u tokens, %lld needed\n", llama_n_ctx(ctx), mo.n_ctx);
        rc = 1;
        goto out;
    }
    if (p.n_ctx > llama_n_ctx_train(model))
        fprintf(stderr, "warning: -c %d is more than the model was trained on (%d)\n", p.n_ctx,
                llama_n_ctx_train(model));
    int32_t ab = llama_add_bos_token(model);
    p.add_bos = ab >= 0 ? ab != 0 : llama_vocab_type(model) == LLAMA_VOCAB_TYPE_SPM;
    p.bos = llama_token_bos(model);
    rc = run_ppl(&o, ctx, &p);
out:
    free(p.tokens);
    if (ctx)
        llama_free(ctx);
    if (model)
        llama_free_model(model);
    llama_backend_free();
    return rc;
}
