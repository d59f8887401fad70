/* train.c - `lamina train`: train a LLaMA model from scratch on text, with
 * its own tokenizer, and write it as an ordinary GGUF file that `lamina run`
 * and llama.cpp load (docs/training.md).
 *
 *   1. read the training text (a file, or every regular file of a folder in
 *      name order; each file is one document, tokenized whole the way
 *      `lamina perplexity` tokenizes a text);
 *   2. learn a vocabulary of --vocab tokens from it (train/vocab_train.h), or
 *      take the checkpoint's with --resume;
 *   3. AdamW steps over random windows of --ctx tokens, --batch windows per
 *      micro-batch (train/trainer.h), held-out loss every --eval-every steps,
 *      a checkpoint every --save-every steps (written atomically);
 *   4. the final model to --out (F32 or F16 matrices).
 *
 * Progress: a redrawn status line on a terminal, a plain log line every
 * --log-every steps otherwise.
 */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "cli.h"
#include "gguf/gguf.h"
#include "progress.h"
#include "train/lora_file.h"
#include "train/trainer.h"
#include "train/vocab_train.h"
#include "vocab/vocab.h"

struct train_opts {
    const char *train, *valid, *out, *resume, *ckpt;
    long long vocab, dim, layers, heads, kv_heads, ff, ctx, batch, accum, steps, warmup, seed, threads;
    long long eval_every, eval_windows, save_every, log_every;
    float lr, lr_min, wd, clip, beta1, beta2, norm_eps, rope_base;
    bool grad_ckpt;
    const char *out_type;
    /* finetune */
    const char *model, *targets;
    long long rank, alpha;
};

static void usage(FILE *f)
{
    fprintf(f,
            "usage: lamina train --train FILE|DIR --out MODEL.gguf [options]\n\n"
            "Trains a LLaMA model from scratch on a text: learns a SentencePiece-style BPE\n"
            "vocabulary from it, then runs AdamW over random windows of the text. The result\n"
            "is a llama GGUF that lamina and llama.cpp load.\n\n"
            "data\n"
            "  --train FILE|DIR     training text (a folder: its regular files, in name order)\n"
            "  --valid FILE         held-out text: its loss is printed every --eval-every steps\n"
            "  --vocab N            vocabulary size to learn (default 1024; 260 .. 32000)\n"
            "model\n"
            "  --dim N              embedding size (default 128)\n"
            "  --layers N           layers (default 4)\n"
            "  --heads N            attention heads (default 4)\n"
            "  --kv-heads N         key/value heads (default = heads)\n"
            "  --ff N               feed-forward size (default 4 dim * 2/3, rounded up to 32)\n"
            "  --ctx N              context length (default 128)\n"
            "  --norm-eps X         RMSNorm epsilon (default 1e-5)\n"
            "  --rope-base X        RoPE frequency base (default 10000)\n"
            "optimisation\n"
            "  --batch N            sequences per micro-batch (default 16)\n"
            "  --accum N            micro-batches per step (default 1)\n"
            "  --steps N            optimizer steps (default 1000)\n"
            "  --lr X               peak learning rate (default 1e-3)\n"
            "  --lr-min X           final learning rate of the cosine schedule (default lr/10)\n"
            "  --warmup N           linear warmup steps (default steps/20)\n"
            "  --wd X               weight decay on matrices (default 0.1)\n"
            "  --clip X             gradient norm clip, 0 = off (default 1)\n"
            "  --beta1 X --beta2 X  Adam moments (default 0.9, 0.95)\n"
            "  --grad-checkpoint    recompute activations in the backward pass (less memory)\n"
            "  --seed N             initialisation and batch seed (default 1)\n"
            "  -t, --threads N      threads (default 2)\n"
            "output\n"
            "  -o, --out FILE       the trained model (required)\n"
            "  --out-type f32|f16   type of the weight matrices (default f32)\n"
            "  --checkpoint FILE    checkpoint file (default OUT.ckpt)\n"
            "  --save-every N       write the checkpoint every N steps (default 100; 0 = never)\n"
            "  --resume FILE        continue from a checkpoint (same options as the run that wrote it)\n"
            "  --eval-every N       held-out loss every N steps (default 100)\n"
            "  --eval-windows N     at most N windows of the held-out text per evaluation (default 64)\n"
            "  --log-every N        a log line every N steps when not on a terminal (default 10)\n");
}

static void finetune_usage(FILE *f);

enum kind { K_INT, K_FLOAT, K_STR, K_FLAG };
enum { T = 1, F = 2, TF = 3 }; /* the commands an option belongs to: train, finetune */
struct opt {
    const char *name, *alias;
    int cmds;
    enum kind kind;
    void *p;
    long long lo, hi;
};

/* The options of lamina train (finetune = false) or lamina finetune.
 * 0 parsed, 1 help printed, 2 usage error (message written). */
static int parse(int argc, char **argv, struct train_opts *o, bool finetune)
{
    const struct opt table[] = {
        {"--train", NULL, TF, K_STR, &o->train, 0, 0},
        {"--valid", NULL, TF, K_STR, &o->valid, 0, 0},
        {"--out", "-o", T, K_STR, &o->out, 0, 0},
        {"--lora-out", "-o", F, K_STR, &o->out, 0, 0},
        {"--model", "-m", F, K_STR, &o->model, 0, 0},
        {"--lora-targets", NULL, F, K_STR, &o->targets, 0, 0},
        {"--rank", NULL, F, K_INT, &o->rank, 1, 4096},
        {"--alpha", NULL, F, K_INT, &o->alpha, 1, 1 << 30},
        {"--resume", NULL, T, K_STR, &o->resume, 0, 0},
        {"--checkpoint", NULL, T, K_STR, &o->ckpt, 0, 0},
        {"--out-type", NULL, T, K_STR, &o->out_type, 0, 0},
        {"--vocab", NULL, T, K_INT, &o->vocab, LM_VOCAB_TRAIN_MIN_VOCAB, LM_VOCAB_TRAIN_MAX_VOCAB},
        {"--dim", NULL, T, K_INT, &o->dim, 2, 16384},
        {"--layers", NULL, T, K_INT, &o->layers, 1, 256},
        {"--heads", NULL, T, K_INT, &o->heads, 1, 1024},
        {"--kv-heads", NULL, T, K_INT, &o->kv_heads, 1, 1024},
        {"--ff", NULL, T, K_INT, &o->ff, 1, 65536},
        {"--ctx", NULL, TF, K_INT, &o->ctx, 2, 65536},
        {"--batch", NULL, TF, K_INT, &o->batch, 1, 65536},
        {"--accum", NULL, TF, K_INT, &o->accum, 1, 65536},
        {"--steps", NULL, TF, K_INT, &o->steps, 1, 1LL << 30},
        {"--warmup", NULL, TF, K_INT, &o->warmup, 0, 1LL << 30},
        {"--seed", NULL, TF, K_INT, &o->seed, 0, 1LL << 62},
        {"--threads", "-t", TF, K_INT, &o->threads, 1, 512},
        {"--eval-every", NULL, TF, K_INT, &o->eval_every, 0, 1LL << 30},
        {"--eval-windows", NULL, TF, K_INT, &o->eval_windows, 0, 1LL << 30},
        {"--save-every", NULL, T, K_INT, &o->save_every, 0, 1LL << 30},
        {"--log-every", NULL, TF, K_INT, &o->log_every, 1, 1LL << 30},
        {"--lr", NULL, TF, K_FLOAT, &o->lr, 0, 0},
        {"--lr-min", NULL, TF, K_FLOAT, &o->lr_min, 0, 0},
        {"--wd", NULL, TF, K_FLOAT, &o->wd, 0, 0},
        {"--clip", NULL, TF, K_FLOAT, &o->clip, 0, 0},
        {"--beta1", NULL, TF, K_FLOAT, &o->beta1, 0, 0},
        {"--beta2", NULL, TF, K_FLOAT, &o->beta2, 0, 0},
        {"--norm-eps", NULL, T, K_FLOAT, &o->norm_eps, 0, 0},
        {"--rope-base", NULL, T, K_FLOAT, &o->rope_base, 0, 0},
        {"--grad-checkpoint", NULL, TF, K_FLAG, &o->grad_ckpt, 0, 0},
    };
    const char *cmd = finetune ? "finetune" : "train";
    const int mine = finetune ? F : T;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            if (finetune)
                finetune_usage(stdout);
            else
                usage(stdout);
            return 1;
        }
        const struct opt *op = NULL, *other = NULL;
        for (size_t k = 0; k < sizeof table / sizeof table[0] && !op; k++)
            if (!strcmp(a, table[k].name) || (table[k].alias && !strcmp(a, table[k].alias))) {
                if (table[k].cmds & mine)
                    op = &table[k];
                else
                    other = &table[k];
            }
        if (!op) {
            if (other)
                fprintf(stderr, "error: '%s' is an option of lamina %s, not %s\n", a, finetune ? "train" : "finetune",
                        cmd);
            else
                fprintf(stderr, "error: unknown option '%s' (see lamina %s --help)\n", a, cmd);
            return 2;
        }
        if (op->kind == K_FLAG) {
            *(bool *)op->p = true;
            continue;
        }
        const char *v = cli_value(argc, argv, &i);
        if (!v)
            return 2;
        if (op->kind == K_STR)
            *(const char **)op->p = v;
        else if (op->kind == K_INT && !cli_int(a, v, op->lo, op->hi, (long long *)op->p))
            return 2;
        else if (op->kind == K_FLOAT && !cli_float(a, v, (float *)op->p))
            return 2;
    }
    if (!o->train || !o->out || (finetune && !o->model)) {
        fprintf(stderr, "error: lamina %s needs %s\n", cmd,
                finetune ? "-m BASE, --train FILE|DIR and -o ADAPTER" : "--train FILE|DIR and --out FILE");
        return 2;
    }
    if (strcmp(o->out_type, "f32") && strcmp(o->out_type, "f16")) {
        fprintf(stderr, "error: --out-type must be f32 or f16\n");
        return 2;
    }
    return 0;
}

/* ---- text ---- */

struct docs {
    char **text;
    size_t *len;
    size_t n;
    size_t bytes;
};

static void docs_free(struct docs *d)
{
    for (size_t i = 0; i < d->n; i++)
        free(d->text[i]);
    free(d->text);
    free(d->len);
}

static bool docs_add(struct docs *d, const char *path)
{
    size_t len = 0;
    char *t = cli_read_file(path, &len);
    if (!t)
        return false;
    char **nt = realloc(d->text, (d->n + 1) * sizeof(*nt));
    size_t *nl = realloc(d->len, (d->n + 1) * sizeof(*nl));
    if (nt)
        d->text = nt;
    if (nl)
        d->len = nl;
    if (!nt || !nl) {
        free(t);
        fprintf(stderr, "error: out of memory\n");
        return false;
    }
    d->text[d->n] = t;
    d->len[d->n++] = len;
    d->bytes += len;
    return true;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* A file, or the regular files of a folder in name order. */
static bool docs_read(struct docs *d, const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        fprintf(stderr, "error: cannot read %s\n", path);
        return false;
    }
    if (!S_ISDIR(st.st_mode))
        return docs_add(d, path);
    DIR *dir = opendir(path);
    if (!dir) {
        fprintf(stderr, "error: cannot open folder %s\n", path);
        return false;
    }
    char **names = NULL;
    size_t n = 0;
    bool ok = true;
    for (struct dirent *e; (e = readdir(dir)) && ok;) {
        if (e->d_name[0] == '.')
            continue;
        size_t len = strlen(path) + strlen(e->d_name) + 2;
        char *full = malloc(len), **nn = realloc(names, (n + 1) * sizeof(*nn));
        if (nn)
            names = nn;
        if (!full || !nn) {
            free(full);
            ok = false;
            break;
        }
        snprintf(full, len, "%s/%s", path, e->d_name);
        struct stat fs;
        if (stat(full, &fs) == 0 && S_ISREG(fs.st_mode))
            names[n++] = full;
        else
            free(full);
    }
    closedir(dir);
    if (ok)
        qsort(names, n, sizeof(*names), cmp_str);
    for (size_t i = 0; i < n; i++) {
        if (ok)
            ok = docs_add(d, names[i]);
        free(names[i]);
    }
    free(names);
    if (ok && d->n == 0) {
        fprintf(stderr, "error: no files in %s\n", path);
        ok = false;
    }
    return ok;
}

/* Every document tokenized whole with BOS first, concatenated. */
static int32_t *tokenize_docs(const struct lm_vocab *v, const struct docs *d, int64_t *n_out)
{
    int64_t cap = 0, n = 0;
    for (size_t i = 0; i < d->n; i++)
        cap += (int64_t)d->len[i] + 2;
    int32_t *all = malloc((size_t)cap * sizeof(int32_t));
    if (!all)
        return NULL;
    for (size_t i = 0; i < d->n; i++) {
        if (d->len[i] > INT32_MAX / 2) {
            fprintf(stderr, "error: a training file is over 1 GiB\n");
            free(all);
            return NULL;
        }
        int32_t k = lm_vocab_tokenize(v, d->text[i], (int32_t)d->len[i], all + n, (int32_t)(cap - n), true, false);
        if (k < 0) {
            free(all);
            return NULL;
        }
        n += k;
    }
    *n_out = n;
    return all;
}

/* ---- files ---- */

/* Model (+ tokenizer keys from tv or from the checkpoint g) (+ trainer state). */
static lm_status save(const char *path, const struct lm_train_model *m, enum lm_type type,
                      const struct lm_trained_vocab *tv, const struct lm_gguf *g, const struct lm_trainer *tr)
{
    struct lm_gguf_writer *w = NULL;
    void *hold = NULL;
    lm_status st = lm_gguf_writer_new(&w);
    if (!st)
        st = lm_gguf_set_str(w, "general.name", "lamina-trained");
    if (!st)
        st = lm_train_model_write(m, type, w, &hold);
    if (!st && tv)
        st = lm_trained_vocab_write_kv(tv, w);
    for (int64_t i = 0; !st && !tv && g && i < lm_gguf_n_kv(g); i++)
        if (!strncmp(lm_gguf_key(g, i), "tokenizer.", 10))
            st = lm_gguf_copy_kv(w, g, i);
    if (!st && tr)
        st = lm_trainer_write_state(tr, w);
    if (!st)
        st = lm_train_write_atomic(w, path);
    free(hold);
    lm_gguf_writer_free(w);
    return st;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void fmt_time(char *buf, size_t n, double s)
{
    long t = (long)(s + 0.5);
    if (t >= 3600)
        snprintf(buf, n, "%ldh%02ldm", t / 3600, t / 60 % 60);
    else
        snprintf(buf, n, "%ldm%02lds", t / 60, t % 60);
}

/* The token streams of the training (and held-out) text and a trainer for m
 * with o's settings: 0, or 1 with a message. */
struct run_data {
    int32_t *tokens, *vtokens;
    int64_t n_tok, n_vtok;
    struct lm_trainer_params tp;
    struct lm_trainer *tr;
};

static void run_data_free(struct run_data *r)
{
    lm_trainer_free(r->tr);
    free(r->tokens);
    free(r->vtokens);
}

static int start_trainer(const struct train_opts *o, const struct lm_vocab *voc, const struct docs *train,
                         const struct docs *valid, struct lm_train_model *m, struct run_data *r)
{
    char err[512] = "";
    r->tokens = tokenize_docs(voc, train, &r->n_tok);
    if (r->tokens && o->valid)
        r->vtokens = tokenize_docs(voc, valid, &r->n_vtok);
    if (!r->tokens || (o->valid && !r->vtokens)) {
        fprintf(stderr, "error: cannot tokenize the text\n");
        return 1;
    }
    if (r->n_tok <= o->ctx + 1 || (o->valid && r->n_vtok < 2)) {
        fprintf(stderr, "error: the text has %lld tokens: too few for --ctx %lld\n", (long long)r->n_tok, o->ctx);
        return 1;
    }
    struct lm_trainer_params *tp = &r->tp;
    *tp = lm_trainer_default_params();
    tp->n_threads = (int)o->threads;
    tp->batch = (int)o->batch;
    tp->ctx = (int)o->ctx;
    tp->accum = (int)o->accum;
    tp->steps = (int)o->steps;
    tp->warmup = (int)o->warmup;
    tp->lr = o->lr;
    tp->lr_min = o->lr_min;
    tp->beta1 = o->beta1;
    tp->beta2 = o->beta2;
    tp->weight_decay = o->wd;
    tp->clip = o->clip;
    tp->seed = (uint64_t)o->seed;
    tp->bos = lm_vocab_bos(voc);
    tp->checkpoint = o->grad_ckpt;
    if (lm_trainer_new(m, tp, &r->tr, err, sizeof err)) {
        fprintf(stderr, "error: %s\n", err);
        return 1;
    }
    return 0;
}

/* ---- the step loop (train and finetune) ---- */

struct loop_io {
    const struct train_opts *o;
    const struct run_data *run;
    lm_status (*save)(const struct loop_io *io); /* the periodic checkpoint, or NULL */
    const struct lm_train_model *m;
    const struct lm_trained_vocab *tv;
    const struct lm_gguf *ck;
};

/* Steps from the trainer's count to o->steps: progress, held-out loss,
 * checkpoints. 0 or 1 (message written). */
static int train_loop(const struct loop_io *io)
{
    const struct train_opts *o = io->o;
    lm_status st;
    const bool tty = cli_progress_enabled();
    const double tokens_per_step = (double)o->batch * (double)o->ctx * (double)o->accum;
    double t_start = now_s(), ema = 0;
    int64_t s0 = lm_trainer_step_count(io->run->tr);
    for (int64_t s = s0; s < o->steps; s++) {
        float loss = 0, gnorm = 0;
        st = lm_trainer_step(io->run->tr, io->run->tokens, io->run->n_tok, &loss, &gnorm);
        if (st == LM_ERR_CORRUPT) {
            fprintf(stderr, "\nerror: the gradient is not finite at step %lld: lower --lr\n", (long long)s + 1);
            return 1;
        } else if (st) {
            fprintf(stderr, "\nerror: training step failed (%d)\n", (int)st);
            return 1;
        }
        ema = s == s0 ? loss : 0.9 * ema + 0.1 * loss;
        double el = now_s() - t_start, tps = (double)(s + 1 - s0) * tokens_per_step / el;
        double eta = el / (double)(s + 1 - s0) * (double)(o->steps - s - 1);
        char eta_s[32];
        fmt_time(eta_s, sizeof eta_s, eta);
        char line[160];
        snprintf(line, sizeof line, "step %lld/%lld  loss %.4f  lr %.2e  |g| %.3f  %.0f tok/s  ETA %s",
                 (long long)s + 1, o->steps, ema, (double)lm_trainer_lr(&io->run->tp, s), (double)gnorm, tps, eta_s);
        if (tty)
            cli_progress_text(line);
        else if ((s + 1) % o->log_every == 0 || s + 1 == o->steps)
            fprintf(stderr, "%s\n", line);
        bool last = s + 1 == o->steps;
        if (o->valid && o->eval_every && ((s + 1) % o->eval_every == 0 || last)) {
            double vl = 0;
            if (lm_trainer_eval(io->run->tr, io->run->vtokens, io->run->n_vtok, o->eval_windows, &vl)) {
                fprintf(stderr, "\nerror: evaluation failed\n");
                return 1;
            }
            if (tty)
                cli_progress_clear();
            fprintf(stdout, "step %lld: train loss %.4f, held-out loss %.4f\n", (long long)s + 1, ema, vl);
            fflush(stdout);
        }
        if (io->save && o->save_every && ((s + 1) % o->save_every == 0) && !last) {
            if (io->save(io)) {
                fprintf(stderr, "\nerror: cannot write %s\n", o->ckpt);
                return 1;
            }
        }
    }
    if (cli_progress_enabled())
        cli_progress_clear();
    return 0;
}

static lm_status save_ckpt(const struct loop_io *io)
{
    return save(io->o->ckpt, io->m, LM_TYPE_F32, io->tv, io->ck, io->run->tr);
}

int cmd_train(int argc, char **argv)
{
    struct train_opts o = {
        .vocab = 1024, .dim = 128, .layers = 4, .heads = 4, .ctx = 128, .batch = 16, .accum = 1, .steps = 1000,
        .warmup = -1, .seed = 1, .threads = 2, .eval_every = 100, .eval_windows = 64, .save_every = 100,
        .log_every = 10, .lr = 1e-3f, .lr_min = -1.0f, .wd = 0.1f, .clip = 1.0f, .beta1 = 0.9f, .beta2 = 0.95f,
        .norm_eps = 1e-5f, .rope_base = 10000.0f, .out_type = "f32",
    };
    int r = parse(argc, argv, &o, false);
    llama_backend_init(false); /* the process-wide LAMINA_* switches (kernel level, huge pages, log level) */
    if (r)
        return r == 1 ? 0 : 2;
    if (!o.kv_heads)
        o.kv_heads = o.heads;
    if (!o.ff)
        o.ff = ((o.dim * 8 / 3) + 31) / 32 * 32;
    if (o.warmup < 0)
        o.warmup = o.steps / 20;
    if (o.lr_min < 0)
        o.lr_min = o.lr / 10;
    char ckpt_default[4096];
    if (!o.ckpt) {
        snprintf(ckpt_default, sizeof ckpt_default, "%s.ckpt", o.out);
        o.ckpt = ckpt_default;
    }

    int rc = 1;
    char err[512] = "";
    struct docs train = {0}, valid = {0};
    struct lm_trained_vocab *tv = NULL;
    struct lm_vocab *voc = NULL;
    struct lm_train_model *m = NULL;
    struct run_data run = {0};
    struct lm_gguf *ck = NULL;
    void *ck_img = NULL;

    if (!docs_read(&train, o.train) || (o.valid && !docs_read(&valid, o.valid)))
        goto done;
    double t0 = now_s();
    if (o.resume) {
        size_t size = 0;
        ck_img = cli_read_file(o.resume, &size);
        if (!ck_img)
            goto done;
        if (lm_gguf_open_memory(ck_img, size, &ck, err, sizeof err) || lm_train_model_read(ck, &m, err, sizeof err) ||
            lm_vocab_load(ck, &voc, err, sizeof err)) {
            fprintf(stderr, "error: %s: %s\n", o.resume, err);
            goto done;
        }
        const struct lm_train_hparams *h = &m->hp;
        if (h->n_vocab != o.vocab || h->n_embd != o.dim || h->n_layer != o.layers || h->n_head != o.heads ||
            h->n_head_kv != o.kv_heads || h->n_ff != o.ff || h->n_ctx != o.ctx) {
            fprintf(stderr,
                    "error: %s holds a model of vocab %d, dim %d, layers %d, heads %d/%d, ff %d, ctx %d: "
                    "resume with the options of the run that wrote it\n",
                    o.resume, h->n_vocab, h->n_embd, h->n_layer, h->n_head, h->n_head_kv, h->n_ff, h->n_ctx);
            goto done;
        }
        fprintf(stderr, "resuming from %s\n", o.resume);
    } else {
        struct lm_vocab_train_params vp = lm_vocab_train_default_params();
        vp.n_vocab = (int32_t)o.vocab;
        if (lm_vocab_train((const char *const *)train.text, train.len, train.n, &vp, &tv, err, sizeof err) ||
            lm_trained_vocab_to_vocab(tv, &voc, err, sizeof err)) {
            fprintf(stderr, "error: vocabulary: %s\n", err);
            goto done;
        }
        fprintf(stderr, "vocabulary: %d tokens learned from %zu bytes in %.1f s\n", (int)o.vocab, train.bytes,
                now_s() - t0);
        struct lm_train_hparams hp = {
            .n_vocab = (int32_t)o.vocab, .n_embd = (int32_t)o.dim, .n_layer = (int32_t)o.layers,
            .n_head = (int32_t)o.heads, .n_head_kv = (int32_t)o.kv_heads, .n_ff = (int32_t)o.ff,
            .n_ctx = (int32_t)o.ctx, .norm_eps = o.norm_eps, .rope_base = o.rope_base,
        };
        if (lm_train_model_new(&hp, (uint64_t)o.seed, &m, err, sizeof err)) {
            fprintf(stderr, "error: model: %s\n", err);
            goto done;
        }
    }
    if (start_trainer(&o, voc, &train, &valid, m, &run))
        goto done;
    if (ck && lm_trainer_read_state(run.tr, ck, err, sizeof err)) {
        fprintf(stderr, "error: %s: %s\n", o.resume, err);
        goto done;
    }
    const struct lm_train_hparams *hp = &m->hp;
    fprintf(stderr,
            "model: vocab %d, dim %d, layers %d, heads %d/%d, ff %d, ctx %d: %.2f M parameters\n"
            "data: %lld training tokens (%.2f bytes/token)%s; batch %lld x %lld x %lld tokens, %lld steps\n",
            hp->n_vocab, hp->n_embd, hp->n_layer, hp->n_head, hp->n_head_kv, hp->n_ff, hp->n_ctx,
            (double)m->n_elements / 1e6, (long long)run.n_tok, (double)train.bytes / (double)run.n_tok,
            o.valid ? ", held-out text given" : "", o.accum, o.batch, o.ctx, o.steps);

    struct loop_io io = {.o = &o, .run = &run, .save = save_ckpt, .m = m, .tv = tv, .ck = ck};
    double t_start = now_s();
    if (train_loop(&io))
        goto done;
    if (save(o.out, m, !strcmp(o.out_type, "f16") ? LM_TYPE_F16 : LM_TYPE_F32, tv, ck, NULL)) {
        fprintf(stderr, "error: cannot write %s\n", o.out);
        goto done;
    }
    fprintf(stderr, "wrote %s after %lld steps (%.1f s of training)\n", o.out, o.steps, now_s() - t_start);
    rc = 0;
done:
    run_data_free(&run);
    lm_train_model_free(m);
    lm_vocab_free(voc);
    lm_trained_vocab_free(tv);
    lm_gguf_close(ck);
    free(ck_img);
    docs_free(&train);
    docs_free(&valid);
    return rc;
}

/* ---- lamina finetune ---- */

static void finetune_usage(FILE *f)
{
    fprintf(f,
            "usage: lamina finetune -m BASE.gguf --train FILE|DIR -o ADAPTER.bin [options]\n\n"
            "Trains a LoRA adapter for a llama model (F32, F16 or quantized: the base is decoded to\n"
            "F32 in memory and stays frozen) on a text, and saves it in llama.cpp's adapter format\n"
            "('ggla'), which `lamina run --lora` and llama_model_apply_lora_from_file load.\n\n"
            "  -m, --model FILE     the base model (required)\n"
            "  --train FILE|DIR     training text (required)\n"
            "  --valid FILE         held-out text: its loss is printed every --eval-every steps\n"
            "  -o, --lora-out FILE  the adapter (required)\n"
            "  --rank N             LoRA rank (default 8)\n"
            "  --alpha N            LoRA alpha, a whole number (default 16; the scale is alpha / rank)\n"
            "  --lora-targets LIST  matrices to adapt: q,k,v,o,gate,down,up (default q,k,v,o)\n"
            "  --ctx N              tokens per sequence (default 128, at most the model's context)\n"
            "  --batch N --accum N --steps N --lr X --lr-min X --warmup N --wd X --clip X\n"
            "  --beta1 X --beta2 X --seed N -t N --grad-checkpoint --eval-every N --eval-windows N\n"
            "  --log-every N        as for lamina train (defaults: batch 8, steps 100, lr 1e-3, wd 0)\n");
}

static bool parse_targets(const char *s, unsigned *out)
{
    static const char *const names[LM_LORA_COUNT] = {"q", "k", "v", "o", "gate", "down", "up"};
    unsigned m = 0;
    while (*s) {
        size_t n = strcspn(s, ",");
        int k = -1;
        for (int t = 0; t < LM_LORA_COUNT; t++)
            if (strlen(names[t]) == n && !strncmp(s, names[t], n))
                k = t;
        if (k < 0) {
            fprintf(stderr, "error: --lora-targets: unknown matrix '%.*s' (q, k, v, o, gate, down, up)\n", (int)n, s);
            return false;
        }
        m |= 1u << k;
        s += n + (s[n] == ',');
    }
    *out = m;
    return m != 0;
}

int cmd_finetune(int argc, char **argv)
{
    struct train_opts o = {
        .ctx = 128, .batch = 8, .accum = 1, .steps = 100, .warmup = -1, .seed = 1, .threads = 2, .eval_every = 50,
        .eval_windows = 64, .log_every = 10, .lr = 1e-3f, .lr_min = -1.0f, .wd = 0.0f, .clip = 1.0f, .beta1 = 0.9f,
        .beta2 = 0.999f, .rank = 8, .alpha = 16, .targets = "q,k,v,o", .out_type = "f32",
    };
    int r = parse(argc, argv, &o, true);
    llama_backend_init(false); /* the process-wide LAMINA_* switches (kernel level, huge pages, log level) */
    if (r)
        return r == 1 ? 0 : 2;
    unsigned targets = 0;
    if (!parse_targets(o.targets, &targets))
        return 2;
    if (o.warmup < 0)
        o.warmup = o.steps / 10;
    if (o.lr_min < 0)
        o.lr_min = o.lr / 10;

    int rc = 1;
    char err[512] = "";
    struct docs train = {0}, valid = {0};
    struct lm_vocab *voc = NULL;
    struct lm_train_model *m = NULL;
    struct run_data run = {0};
    struct lm_gguf *g = NULL;
    void *img = NULL;
    size_t size = 0;
    if (!docs_read(&train, o.train) || (o.valid && !docs_read(&valid, o.valid)))
        goto done;
    if (!(img = cli_read_file(o.model, &size)))
        goto done;
    if (lm_gguf_open_memory(img, size, &g, err, sizeof err) || lm_train_model_read(g, &m, err, sizeof err) ||
        lm_vocab_load(g, &voc, err, sizeof err)) {
        fprintf(stderr, "error: %s: %s\n", o.model, err);
        goto done;
    }
    if (o.ctx > m->hp.n_ctx)
        o.ctx = m->hp.n_ctx;
    if (lm_train_model_add_lora(m, (int)o.rank, (float)o.alpha, targets, (uint64_t)o.seed, err, sizeof err)) {
        fprintf(stderr, "error: %s\n", err);
        goto done;
    }
    if (start_trainer(&o, voc, &train, &valid, m, &run))
        goto done;
    fprintf(stderr, "base: %s, %.2f M weights (frozen); LoRA rank %lld, alpha %g on %s: %.3f M trainable\n"
                    "data: %lld tokens; batch %lld x %lld x %lld tokens, %lld steps\n",
            o.model, (double)m->n_elements / 1e6, o.rank, (double)o.alpha, o.targets,
            (double)m->n_train_elements / 1e6, (long long)run.n_tok, o.accum, o.batch, o.ctx, o.steps);
    struct loop_io io = {.o = &o, .run = &run, .m = m};
    double t_start = now_s();
    if (train_loop(&io))
        goto done;
    if (lm_train_lora_write(m, o.out)) {
        fprintf(stderr, "error: cannot write %s\n", o.out);
        goto done;
    }
    fprintf(stderr, "wrote %s after %lld steps (%.1f s of training)\n", o.out, o.steps, now_s() - t_start);
    rc = 0;
done:
    run_data_free(&run);
    lm_train_model_free(m);
    lm_vocab_free(voc);
    lm_gguf_close(g);
    free(img);
    docs_free(&train);
    docs_free(&valid);
    return rc;
}
