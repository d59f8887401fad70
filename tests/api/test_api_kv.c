/* test_api_kv.c - the KV cache functions of llama.h on stories260K.
 *
 *  (a) seq_cp / seq_rm / seq_keep / seq_shift / clear leave exactly the
 *      expected cells: every cell's position and sequence set is checked with
 *      llama_kv_cache_view_update, plus token_count and used_cells (and the
 *      view's own counters and longest free run);
 *  (b) seq_shift: a prefix decoded in sequence 1 and the rest (m tokens) in
 *      sequence 0 at positions k..k+m-1 (so the rest never attends to the
 *      prefix); the prefix is removed with seq_rm, sequence 0 shifted down by
 *      -k, and the next token decoded at position m. The logits must equal
 *      those of a fresh context that decoded the m tokens at 0..m-1 and the
 *      next token at m, up to the rounding of re-rotating cached keys:
 *      bound 1e-4 with an F32 cache (measured ~1e-5), 5e-2 with the default
 *      F16 cache (the rotated keys are rounded to F16 a second time; measured
 *      ~2e-2, logits up to ~15 in size; b1892 rotates its F16 cache the same
 *      way). A shift by the
 *      wrong amount must miss by far more (the check is sensitive). With the
 *      prefix in the same sequence the results differ legitimately (the kept
 *      tokens' hidden states saw the prefix), so that is not compared.
 *  (c) seq_div (self-extend): n tokens each decoded alone in its own sequence
 *      (so a cell's K and V depend only on its token and position), copied into
 *      sequence 0, positions divided by 2 with seq_div, then a token decoded
 *      at n/2 in sequence 0. Compared with a fresh context that placed the
 *      same tokens directly at positions i/2 the same way; same bounds as (b).
 *      Without the seq_div the result misses by far more.
 *  (d) a fragmented cache: 64 cells filled by two interleaved sequences,
 *      one of them removed, so 32 cells are free and no two adjacent. A
 *      batch of 8 tokens must still decode (b1892 returned 1 here: no run of
 *      8 free cells) into the first 8 free cells, with the same logits bit
 *      for bit as a fresh context that decoded it alone (the attention works
 *      over a query's visible cells in cell order, whatever lies between);
 *      a batch larger than the free cells must return 1 and change nothing. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util_api.h"

static struct llama_model *M;
static int NV;

static const llama_token T[16] = {1, 403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 346, 306, 414, 263, 304};

static struct llama_context *make_ctx(enum ggml_type kv_type)
{
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 64;
    cp.n_batch = 64;
    cp.n_threads = cp.n_threads_batch = 2;
    cp.seed = 1;
    cp.type_k = cp.type_v = kv_type;
    return llama_new_context_with_model(M, cp);
}

/* Decode tokens t[0..n) at positions pos[i] in sequences seq[i] (one each). */
static int decode_at(struct llama_context *ctx, const llama_token *t, const llama_pos *pos, const llama_seq_id *seq,
                     int n)
{
    struct llama_batch b = llama_batch_init(n, 0, 1);
    for (int i = 0; i < n; i++) {
        b.token[i] = t[i];
        b.pos[i] = pos[i];
        b.n_seq_id[i] = 1;
        b.seq_id[i][0] = seq[i];
        b.logits[i] = i == n - 1;
    }
    b.n_tokens = n;
    int r = llama_decode(ctx, b);
    llama_batch_free(b);
    return r;
}

/* Cells 0..n-1 must hold pos[i] and exactly the sequences whose bits are in
 * seqs[i]; all other cells empty; token_count and used_cells must agree. */
static void expect_cells(struct llama_context *ctx, const char *what, const int *pos, const unsigned *seqs, int n)
{
    struct llama_kv_cache_view v = llama_kv_cache_view_init(ctx, 4);
    llama_kv_cache_view_update(ctx, &v);
    int bad = 0, tokens = 0, used = 0;
    for (int i = 0; i < v.n_cells; i++) {
        int want_pos = i < n ? pos[i] : -1;
        unsigned want = i < n ? seqs[i] : 0, got = 0;
        for (int j = 0; j < v.n_max_seq; j++) {
            llama_seq_id s = v.cells_sequences[i * v.n_max_seq + j];
            if (s >= 0)
                got |= 1u << s;
        }
        if (v.cells[i].pos != want_pos || got != want) {
            if (bad++ < 3)
                fprintf(stderr, "%s: cell %d: pos %d seqs %#x, want pos %d seqs %#x\n", what, i, v.cells[i].pos, got,
                        want_pos, want);
        }
        tokens += __builtin_popcount(want);
        used += want_pos >= 0;
    }
    CHECKF(bad == 0, "%s: %d cells differ", what, bad);
    CHECKF(llama_get_kv_cache_token_count(ctx) == tokens && v.token_count == tokens, "%s: token count %d / %d, want %d",
           what, llama_get_kv_cache_token_count(ctx), v.token_count, tokens);
    CHECKF(llama_get_kv_cache_used_cells(ctx) == used && v.used_cells == used, "%s: used %d / %d, want %d", what,
           llama_get_kv_cache_used_cells(ctx), v.used_cells, used);
    /* the longest free run */
    int best = 0, run = 0, best_idx = -1;
    for (int i = 0; i < v.n_cells; i++) {
        int p = i < n ? pos[i] : -1;
        run = p < 0 ? run + 1 : 0;
        if (run > best) {
            best = run;
            best_idx = i - run + 1;
        }
    }
    CHECK(v.max_contiguous == best && v.max_contiguous_idx == best_idx);
    llama_kv_cache_view_free(&v);
}

static void test_cells(void)
{
    struct llama_context *ctx = make_ctx(GGML_TYPE_F16);
    CHECK(llama_decode(ctx, llama_batch_get_one((llama_token *)T, 8, 0, 0)) == 0);
    int pos[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    unsigned s[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    expect_cells(ctx, "decode", pos, s, 8);
    llama_kv_cache_seq_cp(ctx, 0, 1, 2, 5); /* positions 2..4 join sequence 1 */
    for (int i = 2; i < 5; i++)
        s[i] |= 2;
    expect_cells(ctx, "seq_cp 0->1 [2,5)", pos, s, 8);
    llama_kv_cache_seq_cp(ctx, 0, 2, -1, -1); /* everything joins sequence 2 */
    for (int i = 0; i < 8; i++)
        s[i] |= 4;
    expect_cells(ctx, "seq_cp 0->2 all", pos, s, 8);
    llama_kv_cache_seq_rm(ctx, 1, 3, 4); /* position 3 leaves sequence 1 */
    s[3] &= ~2u;
    expect_cells(ctx, "seq_rm 1 [3,4)", pos, s, 8);
    llama_kv_cache_seq_rm(ctx, 0, 6, -1);
    s[6] &= ~1u;
    s[7] &= ~1u;
    expect_cells(ctx, "seq_rm 0 [6,inf)", pos, s, 8);
    llama_kv_cache_seq_rm(ctx, 2, 7, -1); /* cell 7 is now in no sequence: freed */
    pos[7] = -1;
    s[7] = 0;
    expect_cells(ctx, "seq_rm 2 [7,inf)", pos, s, 8);
    llama_kv_cache_seq_rm(ctx, -1, 0, 1); /* any sequence */
    pos[0] = -1;
    s[0] = 0;
    expect_cells(ctx, "seq_rm any [0,1)", pos, s, 8);
    llama_kv_cache_seq_keep(ctx, 1); /* only the cells of sequence 1 stay, in sequence 1 only */
    for (int i = 0; i < 8; i++) {
        bool keep = s[i] & 2;
        s[i] = keep ? 2 : 0;
        pos[i] = keep ? pos[i] : -1;
    }
    expect_cells(ctx, "seq_keep 1", pos, s, 8);
    /* a new decode fills the first free cells */
    CHECK(llama_decode(ctx, llama_batch_get_one((llama_token *)T, 2, 0, 3)) == 0);
    pos[0] = 0, s[0] = 8, pos[1] = 1, s[1] = 8;
    expect_cells(ctx, "decode into seq 3", pos, s, 8);
    /* shift: positions below 0 are removed */
    llama_kv_cache_seq_shift(ctx, 1, 0, -1, -3); /* seq 1 holds positions 2 and 4 */
    pos[2] = -1, s[2] = 0, pos[4] = 1;
    expect_cells(ctx, "seq_shift 1 by -3", pos, s, 8);
    llama_kv_cache_seq_div(ctx, 3, 0, -1, 2);
    pos[1] = 0;
    expect_cells(ctx, "seq_div 3 by 2", pos, s, 8);
    llama_kv_cache_clear(ctx);
    expect_cells(ctx, "clear", pos, s, 0);
    llama_free(ctx);
}

static void copy_logits(struct llama_context *ctx, float *out)
{
    memcpy(out, llama_get_logits(ctx), (size_t)NV * sizeof(float));
}

/* (b): prefix k tokens in seq 1, m tokens in seq 0 at k.., shift, next token. */
static double shift_case(enum ggml_type kv, int k, int m, int wrong)
{
    llama_pos pos[16];
    llama_seq_id seq[16];
    for (int i = 0; i < k + m; i++) {
        pos[i] = i;
        seq[i] = i < k ? 1 : 0;
    }
    float *a = malloc((size_t)NV * 4), *b = malloc((size_t)NV * 4);
    struct llama_context *ca = make_ctx(kv), *cb = make_ctx(kv);
    CHECK(decode_at(ca, T, pos, seq, k + m) == 0);
    llama_kv_cache_seq_rm(ca, 1, -1, -1);
    llama_kv_cache_seq_shift(ca, 0, k, -1, -k + wrong);
    llama_token next = T[k + m];
    CHECK(llama_decode(ca, llama_batch_get_one(&next, 1, m, 0)) == 0);
    copy_logits(ca, a);
    CHECK(llama_decode(cb, llama_batch_get_one((llama_token *)T + k, m, 0, 0)) == 0);
    CHECK(llama_decode(cb, llama_batch_get_one(&next, 1, m, 0)) == 0);
    copy_logits(cb, b);
    double d = api_max_diff(a, b, (size_t)NV);
    llama_free(ca);
    llama_free(cb);
    free(a);
    free(b);
    return d;
}

/* (c): n tokens alone in sequences 1..n at positions i (A) or i/2 (B), merged
 * into sequence 0; A divides by 2; then the next token at n/2. */
static double div_case(enum ggml_type kv, int n, bool do_div)
{
    float *a = malloc((size_t)NV * 4), *b = malloc((size_t)NV * 4);
    for (int side = 0; side < 2; side++) {
        struct llama_context *ctx = make_ctx(kv);
        llama_pos pos[16];
        llama_seq_id seq[16];
        for (int i = 0; i < n; i++) {
            pos[i] = side == 0 ? i : i / 2;
            seq[i] = 1 + i;
        }
        CHECK(decode_at(ctx, T, pos, seq, n) == 0);
        for (int i = 0; i < n; i++)
            llama_kv_cache_seq_cp(ctx, 1 + i, 0, -1, -1);
        if (side == 0 && do_div)
            llama_kv_cache_seq_div(ctx, 0, -1, -1, 2);
        llama_token next = T[n];
        CHECK(llama_decode(ctx, llama_batch_get_one(&next, 1, n / 2, 0)) == 0);
        copy_logits(ctx, side == 0 ? a : b);
        llama_free(ctx);
    }
    double d = api_max_diff(a, b, (size_t)NV);
    free(a);
    free(b);
    return d;
}

static void test_shift_div(void)
{
    const struct {
        enum ggml_type t;
        const char *name;
        double bound;
    } kv[2] = {{GGML_TYPE_F32, "F32", 1e-4}, {GGML_TYPE_F16, "F16", 5e-2}};
    for (int i = 0; i < 2; i++) {
        double s1 = shift_case(kv[i].t, 4, 8, 0), s2 = shift_case(kv[i].t, 7, 5, 0);
        double sw = shift_case(kv[i].t, 4, 8, 1);
        CHECKF(s1 < kv[i].bound && s2 < kv[i].bound, "seq_shift (%s cache): %g, %g", kv[i].name, s1, s2);
        CHECKF(sw > 20 * kv[i].bound, "seq_shift by the wrong amount (%s) only off by %g", kv[i].name, sw);
        double d1 = div_case(kv[i].t, 12, true), d0 = div_case(kv[i].t, 12, false);
        CHECKF(d1 < kv[i].bound, "seq_div (%s cache): %g", kv[i].name, d1);
        CHECKF(d0 > 20 * kv[i].bound, "without seq_div (%s) only off by %g", kv[i].name, d0);
        printf("%s KV cache: seq_shift vs fresh decode max |diff| %.3g, %.3g (wrong shift %.3g); "
               "seq_div %.3g (without it %.3g); bound %g\n",
               kv[i].name, s1, s2, sw, d1, d0, kv[i].bound);
    }
}

static void test_fragmented(void)
{
    enum { N = 8 };
    float *want = malloc((size_t)NV * sizeof *want), *got = malloc((size_t)NV * sizeof *got);
    llama_pos p8[N];
    llama_seq_id s8[N];
    for (int i = 0; i < N; i++)
        p8[i] = i, s8[i] = 0;
    struct llama_context *ref = make_ctx(GGML_TYPE_F16);
    CHECK(decode_at(ref, T, p8, s8, N) == 0);
    copy_logits(ref, want);
    llama_free(ref);

    struct llama_context *ctx = make_ctx(GGML_TYPE_F16);
    llama_token t64[64];
    llama_pos p64[64];
    llama_seq_id s64[64];
    for (int i = 0; i < 64; i++)
        t64[i] = T[i % 16], p64[i] = i / 2, s64[i] = 1 + i % 2; /* cell i: sequence 1 (even) or 2 (odd) */
    CHECK(decode_at(ctx, t64, p64, s64, 64) == 0);
    llama_kv_cache_seq_rm(ctx, 1, -1, -1); /* the even cells are free */
    int pos[64];
    unsigned seqs[64];
    for (int i = 0; i < 64; i++) {
        pos[i] = i % 2 ? i / 2 : -1;
        seqs[i] = i % 2 ? 4u : 0u;
    }
    expect_cells(ctx, "fragmented", pos, seqs, 64);
    CHECK(decode_at(ctx, T, p8, s8, N) == 0);
    for (int i = 0; i < N; i++)
        pos[2 * i] = i, seqs[2 * i] = 1u;
    expect_cells(ctx, "batch into scattered cells", pos, seqs, 64);
    copy_logits(ctx, got);
    CHECKF(memcmp(want, got, (size_t)NV * sizeof *got) == 0, "scattered cells' logits differ from a fresh context's");
    /* 24 cells free: a batch of 25 has no room, and nothing changes */
    llama_token t25[25];
    llama_pos p25[25];
    llama_seq_id s25[25];
    for (int i = 0; i < 25; i++)
        t25[i] = T[i % 16], p25[i] = N + i, s25[i] = 0;
    CHECK(decode_at(ctx, t25, p25, s25, 25) == 1);
    expect_cells(ctx, "no room", pos, seqs, 64);
    /* 24 fit: every cell is used afterwards */
    CHECK(decode_at(ctx, t25, p25, s25, 24) == 0);
    CHECK(llama_get_kv_cache_used_cells(ctx) == 64);
    llama_free(ctx);
    free(want);
    free(got);
}

int main(void)
{
    M = api_start("models/stories260K.gguf");
    if (!M)
        return lm_test_summary();
    NV = llama_n_vocab(M);
    test_cells();
    test_shift_div();
    test_fragmented();
    llama_free_model(M);
    return lm_test_summary();
}
