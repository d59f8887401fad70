/* context_api.c - llama.h: contexts, batches, decoding, logits, the KV cache
 * functions, threads, timings, system info and logging. */
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "backend/backend.h"
#include "core/env.h"
#include "core/log.h"
#include "core/time.h"
#include "cpu/cpu.h"
#include "vocab/vocab.h"

static enum lm_type kv_type(enum ggml_type t) { return lm_type_valid(t) ? (enum lm_type)t : LM_TYPE_COUNT; }

struct llama_context *llama_new_context_with_model(struct llama_model *model, struct llama_context_params params)
{
    if (!model || !model->m->ctx) {
        LM_LOG_ERR("llama_new_context_with_model: the model has no weights (vocab_only?)\n");
        return NULL;
    }
    struct lm_context_params p = {
        .n_ctx = params.n_ctx,
        .n_batch = params.n_batch,
        .n_threads = params.n_threads,
        .n_threads_batch = params.n_threads_batch,
        .rope_scaling_type = params.rope_scaling_type,
        .rope_freq_base = params.rope_freq_base,
        .rope_freq_scale = params.rope_freq_scale,
        .yarn_ext_factor = params.yarn_ext_factor,
        .yarn_attn_factor = params.yarn_attn_factor,
        .yarn_beta_fast = params.yarn_beta_fast,
        .yarn_beta_slow = params.yarn_beta_slow,
        .yarn_orig_ctx = params.yarn_orig_ctx,
        .type_k = kv_type(params.type_k),
        .type_v = kv_type(params.type_v),
        .logits_all = params.logits_all,
        .embedding = params.embedding,
        .offload_kqv = params.offload_kqv,
        /* the per-context switches, read here and only here (core/env.c) */
        .attn_unfused = strcmp(lm_env_word_name(LM_ENV_ATTN), "unfused") == 0, /* "fused" by default */
        .no_graph_reuse = !lm_env_flag(LM_ENV_GRAPH_REUSE),
        .backend =
            {
                .no_fuse = lm_env_flag(LM_ENV_NO_FUSE) == 1,
                .no_cuda_graphs = !lm_env_flag(LM_ENV_CUDA_GRAPHS),
                .no_cuda_mmq = !lm_env_flag(LM_ENV_CUDA_MMQ),
            },
    };
    struct llama_context *ctx = calloc(1, sizeof *ctx);
    if (!ctx)
        return NULL;
    lm_status st = lm_context_new(model->m, &p, &ctx->c);
    if (st) {
        LM_LOG_ERR("llama_new_context_with_model: %s\n", lm_status_str(st));
        free(ctx);
        return NULL;
    }
    ctx->model = model;
    lm_rng_seed(&ctx->rng, lm_rng_resolve_seed(params.seed));
    ctx->t_start_us = lm_time_us();
    return ctx;
}

void llama_free(struct llama_context *ctx)
{
    if (!ctx)
        return;
    lm_context_free(ctx->c);
    free(ctx);
}

int64_t llama_time_us(void) { return lm_time_us(); }

const struct llama_model *llama_get_model(const struct llama_context *ctx) { return ctx->model; }
uint32_t llama_n_ctx(const struct llama_context *ctx) { return ctx->c->cp.n_ctx; }
uint32_t llama_n_batch(const struct llama_context *ctx) { return ctx->c->cp.n_batch; }

void llama_set_n_threads(struct llama_context *ctx, uint32_t n_threads, uint32_t n_threads_batch)
{
    lm_context_set_threads(ctx->c, n_threads, n_threads_batch);
}

/* ---- batches and decoding ---- */

struct llama_batch llama_batch_get_one(llama_token *tokens, int32_t n_tokens, llama_pos pos_0, llama_seq_id seq_id)
{
    struct llama_batch b;
    memset(&b, 0, sizeof b);
    b.n_tokens = n_tokens;
    b.token = tokens;
    b.all_pos_0 = pos_0;
    b.all_pos_1 = 1;
    b.all_seq_id = seq_id;
    return b;
}

struct llama_batch llama_batch_init(int32_t n_tokens, int32_t embd, int32_t n_seq_max)
{
    struct llama_batch b;
    memset(&b, 0, sizeof b);
    if (n_tokens <= 0 || n_seq_max <= 0 || embd < 0)
        return b;
    size_t n = (size_t)n_tokens;
    if (embd)
        b.embd = malloc(n * (size_t)embd * sizeof(float));
    else
        b.token = malloc(n * sizeof(llama_token));
    b.pos = malloc(n * sizeof(llama_pos));
    b.n_seq_id = malloc(n * sizeof(int32_t));
    b.seq_id = calloc(n + 1, sizeof(llama_seq_id *)); /* NULL-terminated */
    b.logits = calloc(n, sizeof(int8_t));
    bool ok = (embd ? b.embd != NULL : b.token != NULL) && b.pos && b.n_seq_id && b.seq_id && b.logits;
    for (size_t i = 0; ok && i < n; i++) {
        b.seq_id[i] = malloc((size_t)n_seq_max * sizeof(llama_seq_id));
        ok = b.seq_id[i] != NULL;
    }
    if (!ok) {
        llama_batch_free(b);
        memset(&b, 0, sizeof b);
    }
    return b;
}

void llama_batch_free(struct llama_batch batch)
{
    free(batch.token);
    free(batch.embd);
    free(batch.pos);
    free(batch.n_seq_id);
    if (batch.seq_id) {
        for (size_t i = 0; batch.seq_id[i]; i++)
            free(batch.seq_id[i]);
        free(batch.seq_id);
    }
    free(batch.logits);
}

int32_t llama_decode(struct llama_context *ctx, struct llama_batch batch)
{
    if (!ctx)
        return -1;
    struct lm_batch b;
    memcpy(&b, &batch, sizeof b);
    int r = lm_context_decode(ctx->c, &b);
    if (r == 0)
        ctx->has_evaluated = true;
    return r;
}

/* Whether llama_eval(_embd) may touch the cache: positions n_past .. n_past +
 * n_tokens - 1 must be valid, else -1 before anything changes. */
static bool eval_args_ok(const struct llama_context *ctx, const char *fn, int32_t n_tokens, int32_t n_past)
{
    if (ctx && n_past >= 0 && n_tokens > 0 && (int64_t)n_past + n_tokens - 1 <= LM_POS_MAX)
        return true;
    LM_LOG_ERR("%s: bad arguments (n_tokens %d, n_past %d: positions must lie in [0, %d])\n", fn, n_tokens, n_past,
               LM_POS_MAX);
    return false;
}

int llama_eval(struct llama_context *ctx, llama_token *tokens, int32_t n_tokens, int32_t n_past)
{
    if (!eval_args_ok(ctx, "llama_eval", n_tokens, n_past))
        return -1;
    llama_kv_cache_seq_rm(ctx, -1, n_past, -1);
    int32_t r = llama_decode(ctx, llama_batch_get_one(tokens, n_tokens, n_past, 0));
    if (r)
        LM_LOG_ERR("llama_eval: failed to decode (%d)\n", r);
    return r;
}

int llama_eval_embd(struct llama_context *ctx, float *embd, int32_t n_tokens, int32_t n_past)
{
    if (!eval_args_ok(ctx, "llama_eval_embd", n_tokens, n_past))
        return -1;
    llama_kv_cache_seq_rm(ctx, -1, n_past, -1);
    struct llama_batch b = llama_batch_get_one(NULL, n_tokens, n_past, 0);
    b.embd = embd;
    int32_t r = llama_decode(ctx, b);
    if (r)
        LM_LOG_ERR("llama_eval_embd: failed to decode (%d)\n", r);
    return r;
}

float *llama_get_logits(struct llama_context *ctx)
{
    if (!ctx->c->logits) { /* before the first decode: a zero row */
        ctx->c->logits = calloc((size_t)llama_n_vocab(ctx->model), sizeof(float));
        ctx->c->logits_cap = (size_t)llama_n_vocab(ctx->model);
    }
    return ctx->c->logits;
}

float *llama_get_logits_ith(struct llama_context *ctx, int32_t i)
{
    if (i < 0 || i >= ctx->c->n_logit_rows) {
        LM_LOG_ERR("llama_get_logits_ith: row %d out of range [0, %d)\n", i, ctx->c->n_logit_rows);
        return NULL;
    }
    return ctx->c->logits + (size_t)i * (size_t)llama_n_vocab(ctx->model);
}

float *llama_get_embeddings(struct llama_context *ctx) { return ctx->c->embd; }

/* ---- KV cache ---- */

int32_t llama_get_kv_cache_token_count(const struct llama_context *ctx) { return lm_kv_token_count(&ctx->c->kv); }
int32_t llama_get_kv_cache_used_cells(const struct llama_context *ctx) { return (int32_t)ctx->c->kv.used; }
void llama_kv_cache_clear(struct llama_context *ctx) { lm_kv_clear(&ctx->c->kv); }

void llama_kv_cache_seq_rm(struct llama_context *ctx, llama_seq_id seq_id, llama_pos p0, llama_pos p1)
{
    lm_kv_seq_rm(&ctx->c->kv, seq_id, p0, p1);
}

void llama_kv_cache_seq_cp(struct llama_context *ctx, llama_seq_id seq_id_src, llama_seq_id seq_id_dst, llama_pos p0,
                           llama_pos p1)
{
    if (seq_id_src == seq_id_dst)
        return;
    lm_kv_seq_cp(&ctx->c->kv, seq_id_src, seq_id_dst, p0, p1);
}

void llama_kv_cache_seq_keep(struct llama_context *ctx, llama_seq_id seq_id) { lm_kv_seq_keep(&ctx->c->kv, seq_id); }

void llama_kv_cache_seq_shift(struct llama_context *ctx, llama_seq_id seq_id, llama_pos p0, llama_pos p1,
                              llama_pos delta)
{
    if (lm_kv_seq_shift(&ctx->c->kv, seq_id, p0, p1, delta))
        LM_LOG_ERR("llama_kv_cache_seq_shift: a position of sequence %d in [%d, %d) + %d would pass %d; nothing "
                   "shifted\n", seq_id, p0, p1, delta, LM_POS_MAX);
}

void llama_kv_cache_seq_div(struct llama_context *ctx, llama_seq_id seq_id, llama_pos p0, llama_pos p1, int d)
{
    if (d <= 0)
        return;
    lm_kv_seq_div(&ctx->c->kv, seq_id, p0, p1, d);
}

struct llama_kv_cache_view llama_kv_cache_view_init(const struct llama_context *ctx, int32_t n_max_seq)
{
    struct llama_kv_cache_view v;
    memset(&v, 0, sizeof v);
    v.n_cells = 0;
    v.n_max_seq = n_max_seq > 0 ? n_max_seq : 1;
    v.max_contiguous_idx = -1;
    (void)ctx;
    return v;
}

void llama_kv_cache_view_free(struct llama_kv_cache_view *view)
{
    free(view->cells);
    free(view->cells_sequences);
    view->cells = NULL;
    view->cells_sequences = NULL;
    view->n_cells = 0;
}

void llama_kv_cache_view_update(const struct llama_context *ctx, struct llama_kv_cache_view *view)
{
    const struct lm_kv_cache *kv = &ctx->c->kv;
    if (view->n_cells < (int32_t)kv->size || !view->cells) {
        void *c = realloc(view->cells, kv->size * sizeof *view->cells);
        void *s = realloc(view->cells_sequences, (size_t)kv->size * (size_t)view->n_max_seq * sizeof(llama_seq_id));
        if (c)
            view->cells = c;
        if (s)
            view->cells_sequences = s;
        if (!c || !s)
            return;
        view->n_cells = (int32_t)kv->size;
    }
    int32_t run = 0, best = 0, best_idx = -1, token_count = 0, used = 0;
    for (uint32_t i = 0; i < kv->size; i++) {
        const struct lm_kv_cell *cell = &kv->cells[i];
        view->cells[i].pos = cell->pos;
        int32_t k = 0;
        for (int s = 0; s < LM_MAX_SEQ && k < view->n_max_seq; s++)
            if (cell->seq & ((uint64_t)1 << s))
                view->cells_sequences[(size_t)i * (size_t)view->n_max_seq + (size_t)k++] = s;
        token_count += __builtin_popcountll(cell->seq);
        for (; k < view->n_max_seq; k++)
            view->cells_sequences[(size_t)i * (size_t)view->n_max_seq + (size_t)k] = -1;
        if (cell->pos >= 0) {
            used++;
            run = 0;
        } else if (++run > best) {
            best = run;
            best_idx = (int32_t)i - run + 1;
        }
    }
    view->token_count = token_count;
    view->used_cells = used;
    view->max_contiguous = best;
    view->max_contiguous_idx = best_idx;
}

/* ---- timings ---- */

void lm_api_sample_time(struct llama_context *ctx, int64_t t0_us, int32_t n)
{
    if (!ctx)
        return;
    ctx->t_sample_us += lm_time_us() - t0_us;
    ctx->n_sample += n;
}

struct llama_timings llama_get_timings(struct llama_context *ctx)
{
    struct llama_timings t;
    memset(&t, 0, sizeof t);
    t.t_start_ms = 1e-3 * (double)ctx->t_start_us;
    t.t_end_ms = 1e-3 * (double)lm_time_us();
    t.t_load_ms = 1e-3 * (double)ctx->model->m->t_load_us;
    t.t_sample_ms = 1e-3 * (double)ctx->t_sample_us;
    t.t_p_eval_ms = 1e-3 * (double)ctx->c->t_p_eval_us;
    t.t_eval_ms = 1e-3 * (double)ctx->c->t_eval_us;
    t.n_sample = ctx->n_sample > 1 ? ctx->n_sample : 1;
    t.n_p_eval = ctx->c->n_p_eval > 1 ? ctx->c->n_p_eval : 1;
    t.n_eval = ctx->c->n_eval > 1 ? ctx->c->n_eval : 1;
    return t;
}

static void print_rate(const char *what, double ms, int32_t n, const char *unit)
{
    lm_log(LM_LOG_INFO, "llama_print_timings: %16s = %10.2f ms / %5d %-6s (%8.2f ms per token, %8.2f tokens per second)\n",
           what, ms, n, unit, ms / n, 1e3 / ms * n);
}

void llama_print_timings(struct llama_context *ctx)
{
    struct llama_timings t = llama_get_timings(ctx);
    lm_log(LM_LOG_INFO, "\n");
    lm_log(LM_LOG_INFO, "llama_print_timings: %16s = %10.2f ms\n", "load time", t.t_load_ms);
    print_rate("sample time", t.t_sample_ms, t.n_sample, "runs");
    print_rate("prompt eval time", t.t_p_eval_ms, t.n_p_eval, "tokens");
    print_rate("eval time", t.t_eval_ms, t.n_eval, "runs");
    lm_log(LM_LOG_INFO, "llama_print_timings: %16s = %10.2f ms\n", "total time", t.t_end_ms - t.t_start_ms);
}

void llama_reset_timings(struct llama_context *ctx)
{
    ctx->t_start_us = lm_time_us();
    ctx->t_sample_us = 0;
    ctx->n_sample = 0;
    ctx->c->t_p_eval_us = ctx->c->t_eval_us = 0;
    ctx->c->n_p_eval = ctx->c->n_eval = 0;
}

void llama_dump_timing_info_yaml(FILE *stream, const struct llama_context *ctx)
{
    struct llama_timings t = llama_get_timings((struct llama_context *)ctx);
    fprintf(stream, "\n");
    fprintf(stream, "###########\n");
    fprintf(stream, "# Timings #\n");
    fprintf(stream, "###########\n");
    fprintf(stream, "\n");
    fprintf(stream, "mst_eval: %.2f  # ms / token during generation\n", t.t_eval_ms / t.n_eval);
    fprintf(stream, "mst_p_eval: %.2f  # ms / token during prompt processing\n", t.t_p_eval_ms / t.n_p_eval);
    fprintf(stream, "mst_sample: %.2f  # ms / token during sampling\n", t.t_sample_ms / t.n_sample);
    fprintf(stream, "n_eval: %d  # number of tokens generated (excluding the first one)\n", t.n_eval);
    fprintf(stream, "n_p_eval: %d  # number of tokens processed in batches at the beginning\n", t.n_p_eval);
    fprintf(stream, "n_sample: %d  # number of sampled tokens\n", t.n_sample);
    fprintf(stream, "t_eval_us: %lld  # total microseconds spent generating tokens\n",
            (long long)ctx->c->t_eval_us);
    fprintf(stream, "t_load_us: %lld  # total microseconds spent loading the model\n",
            (long long)ctx->model->m->t_load_us);
    fprintf(stream, "t_p_eval_us: %lld  # total microseconds spent prompt processing\n",
            (long long)ctx->c->t_p_eval_us);
    fprintf(stream, "t_sample_us: %lld  # total microseconds spent sampling\n", (long long)ctx->t_sample_us);
    fprintf(stream, "ts_eval: %.2f  # tokens / second during generation\n", 1e3 / t.t_eval_ms * t.n_eval);
    fprintf(stream, "ts_p_eval: %.2f  # tokens / second during prompt processing\n", 1e3 / t.t_p_eval_ms * t.n_p_eval);
    fprintf(stream, "ts_sample: %.2f  # tokens / second during sampling\n", 1e3 / t.t_sample_ms * t.n_sample);
}

/* ---- system ---- */

const char *llama_print_system_info(void)
{
    static char buf[512];
    const struct lm_cpu_features *f = lm_cpu_features();
    int n_gpu = 0; /* GPU backends registered (llama_backend_init) */
    for (int i = 0; i < lm_backend_reg_count(); i++)
        n_gpu += lm_backend_reg_get(i)->kind == LM_DEV_GPU;
    snprintf(buf, sizeof buf,
             "AVX = %d | AVX_VNNI = %d | AVX2 = %d | AVX512 = %d | AVX512_VBMI = %d | AVX512_VNNI = %d | "
             "AVX512_BF16 = %d | FMA = %d | NEON = 0 | ARM_FMA = 0 | F16C = %d | FP16_VA = 0 | WASM_SIMD = 0 | "
             "BLAS = 0 | SSE3 = %d | SSSE3 = %d | VSX = 0 | KERNELS = %s | GPU = %d | ",
             f->avx, f->avx_vnni, f->avx2, f->avx512f, f->avx512vbmi, f->avx512vnni, f->avx512bf16, f->fma, f->f16c,
             f->sse3, f->ssse3, lm_cpu_isa_name(lm_cpu_isa_best()), n_gpu);
    return buf;
}

static ggml_log_callback user_log;
static void *user_log_data;

static void log_trampoline(enum lm_log_level level, const char *text, void *user)
{
    (void)user;
    user_log((enum ggml_log_level)level, text, user_log_data);
}

void llama_log_set(ggml_log_callback log_callback, void *user_data)
{
    user_log = log_callback;
    user_log_data = user_data;
    lm_log_set(log_callback ? log_trampoline : NULL, NULL);
}
