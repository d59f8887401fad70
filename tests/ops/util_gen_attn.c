/* util_gen_attn.c - test_ops.c's attention cases: DIAG_MASK_INF and
 * SOFT_MAX (mask, scale, ALiBi) over random shapes, and the fused ATTN over
 * F16/F32/BF16/Q8_0 caches of random and model-sized shapes (depth 4096
 * too), each also against the unfused graph it replaces (ops_run_pair).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu.h"
#include "lm_test.h"
#include "ops_bounds.h"
#include "ops_runner.h"

/* ---- attention pieces ---- */

void gen_attention(struct runner *R)
{
    for (int c = 0; c < 20; c++) {
        struct ut_spec s = ops_spec(UT_K_DIAG_MASK, 0);
        ops_random_shape(R, s.ne);
        s.n[0] = ops_rint(R, 4) == 0 ? s.ne[0] : ops_rint(R, 4);
        s.lay[0] = ut_rng_layout(&R->master);
        ops_run_case(R, &s, B_EXACT);
    }
    static const int64_t kv[] = {1, 2, 7, 16, 31, 32, 33, 100, 256};
    static const int64_t heads[] = {1, 2, 4, 5, 8};
    static const float scales[] = {1.0f, 0.125f, 0.3f};
    static const float biases[] = {8.0f, 2.5f};
    for (int c = 0; c < 96; c++) {
        struct ut_spec s = ops_spec(UT_K_SOFT_MAX, c % 4);
        s.ne[0] = PICK(kv);
        s.ne[1] = PICK(ops_dim_list);
        s.ne[2] = c % 8 >= 6 ? 5 : PICK(heads); /* 5 heads: the ALiBi m1 branch */
        s.ne[3] = ops_rint(R, 2) + 1;
        s.n[0] = s.ne[1] + ops_rint(R, 3); /* mask rows >= n_q (padded, as llama.cpp pads them) */
        s.f[0] = scales[ops_rint(R, 3)];
        s.f[1] = (s.sub && c % 8 >= 4) ? biases[ops_rint(R, 2)] : 0.0f;
        s.lay[0] = ut_rng_layout(&R->master);
        ops_run_case(R, &s, B_REDUCE);
    }
}

/* ---- fused attention ---- */

/* One ATTN case against ref, then (rows never all hidden) fused vs unfused
 * on ref and on every CPU configuration. */
static void attn_case(struct runner *R, struct ut_spec *s)
{
    ops_run_case(R, s, bound_attn(s->type, s->type2));
    if (s->sub == 5)
        return; /* an all -inf row: the unfused softmax gives NaN, ATTN zeros */
    ops_run_pair(R, s, 2, R->ref, 0, B_ATTN_REF);
#if defined(LM_OPS_CUDA)
    ops_run_pair(R, s, 1, R->other[0], R->isa[0], B_ATTN_CUDA);
#elif !defined(LM_OPS_REF_ONLY)
    for (int k = 0; k < R->n_other; k++)
        ops_run_pair(R, s, 1, R->other[k], R->isa[k], s->n[2] ? B_ATTN_CPU_VROWS : B_ATTN_CPU);
#endif
}

/* ATTN cases' query counts, cell counts and ALiBi max_bias values */
static const int64_t attn_qs[] = {1, 7, 64, 1, 3};
static const int64_t attn_kvs[] = {32, 64, 256, 33, 1, 100};
static const float attn_biases[] = {8.0f, 2.5f};

/* An ATTN case over caches of blocks (spec s with its types and layout
 * flag set): d and d_v, 1-2 kv heads with GQA 1 or 4, random cell counts,
 * query counts kept small, padded caches half the time. */
static void attn_block_case(struct runner *R, struct ut_spec *s, int64_t d, int64_t d_v)
{
    const int64_t hkv = ops_rint(R, 2) + 1, nh = hkv * (ops_rint(R, 2) ? 4 : 1), n_kv = PICK(attn_kvs);
    const int64_t nq = (d + d_v) * nh * n_kv > 400000 ? 1 : PICK(attn_qs);
    const int64_t q[4] = {d, nq, nh, 1}, kv[4] = {n_kv, d_v, hkv, 1};
    memcpy(s->ne, q, sizeof q);
    memcpy(s->ne2, kv, sizeof kv);
    s->n[0] = nq + ops_rint(R, 3);
    s->f[0] = 1.0f / sqrtf((float)d);
    s->f[1] = s->sub == 2 ? attn_biases[ops_rint(R, 2)] : 0.0f;
    s->lay[0] = ops_rint(R, 2) ? UT_PERMUTE : ut_rng_layout(&R->master);
    s->lay[1] = ops_rint(R, 2) ? UT_PAD : UT_CONT;
    attn_case(R, s);
}

void gen_attn(struct runner *R)
{
    static const int64_t ds[] = {8, 64, 128, 7, 64};
    static const enum lm_type types[] = {LM_TYPE_F16, LM_TYPE_F32, LM_TYPE_BF16};
    for (int c = 0; c < 72; c++) {
        struct ut_spec s = ops_spec(UT_K_ATTN, c % 6);
        s.type = s.type2 = types[c / 6 % 3];
        if (c % 12 == 11)
            s.type2 = types[(c / 6 + 1) % 3]; /* k and v of different types */
        const int64_t d = PICK(ds), ratio = ops_rint(R, 2) ? 4 : 1;
        int64_t hkv = ops_rint(R, 2) + 1, nq = PICK(attn_qs);
        const int64_t n_kv = PICK(attn_kvs);
        const bool alibi = s.sub == 2 || (s.sub && c % 8 == 7);
        int64_t nh = ratio * hkv;
        if (alibi) { /* 5 heads: the m1 branch of the slopes */
            hkv = ops_rint(R, 2) ? 5 : 1;
            nh = 5;
        }
        const int64_t d_v = ops_rint(R, 4) ? d : PICK(ds);
        /* keep the ref's double loops (and ASan runs) short */
        if (nq * nh * n_kv * (d + d_v) > 1500000)
            nq = 7;
        if (nq * nh * n_kv * (d + d_v) > 1500000)
            nq = 1;
        const int64_t q[4] = {d, nq, nh, 1}, kv[4] = {n_kv, d_v, hkv, 1};
        memcpy(s.ne, q, sizeof q);
        memcpy(s.ne2, kv, sizeof kv);
        s.n[0] = nq + ops_rint(R, 3); /* padded mask rows */
        s.f[0] = ops_rint(R, 3) ? 1.0f / sqrtf((float)d) : (ops_rint(R, 2) ? 1.0f : 0.3f);
        s.f[1] = alibi ? attn_biases[ops_rint(R, 2)] : 0.0f;
        s.lay[0] = ops_rint(R, 2) ? UT_PERMUTE : ut_rng_layout(&R->master);
        s.lay[1] = ops_rint(R, 2) ? UT_PAD : UT_CONT;
        attn_case(R, &s);
    }
    /* a Q8_0 K cache (rows of whole blocks) with each float V type */
    static const int64_t qds[] = {32, 64, 128};
    for (int c = 0; c < 12; c++) {
        struct ut_spec s = ops_spec(UT_K_ATTN, c % 4);
        s.type = LM_TYPE_Q8_0;
        s.type2 = types[c % 3];
        const int64_t d = PICK(qds);
        attn_block_case(R, &s, d, d);
    }
    /* a Q8_0 V cache of rows per cell (lm_attn_vrows) under F16 and Q8_0 K,
     * every mask kind (4 and 5: holes, the gathered tiles), padded caches */
    for (int c = 0; c < 18; c++) {
        struct ut_spec s = ops_spec(UT_K_ATTN, c % 6);
        s.type = c % 3 == 2 ? LM_TYPE_Q8_0 : LM_TYPE_F16;
        s.type2 = LM_TYPE_Q8_0;
        s.n[2] = 1;
        const int64_t d = PICK(qds), d_v = ops_rint(R, 3) ? d : PICK(qds);
        attn_block_case(R, &s, d, d_v);
    }
    /* model-sized (d, n_q, n_head, n_kv, n_head_kv): a prompt over a padded
     * cache with GQA 4, a short batch with d 128, a decode step with GQA 8;
     * then prompts over a Q8_0 K (the transposed-K scores: d 64 and 128);
     * then (8..11) at depth 4096 (issue 20's depth: a decode step with
     * GQA 8 and a 16-token batch, causal and with the holes of interleaved
     * sequences, F16 and Q8_0 caches) */
    static const int64_t big[][5] = {{64, 64, 4, 256, 1}, {128, 7, 4, 256, 1}, {64, 1, 32, 256, 4},
                                     {64, 40, 4, 200, 1}, {128, 9, 8, 100, 2}, {64, 1, 32, 256, 4},
                                     {64, 40, 4, 200, 1}, {128, 1, 8, 300, 2}, {64, 1, 32, 4096, 4},
                                     {64, 16, 8, 4096, 2}, {64, 1, 32, 4096, 4}, {64, 16, 8, 4096, 2}};
    for (int c = 0; c < 12; c++) {
        struct ut_spec s = ops_spec(UT_K_ATTN, c >= 8 && c % 2 ? 4 : 1);
        s.type = c < 3 || c == 5 || c == 8 || c == 9 ? LM_TYPE_F16 : LM_TYPE_Q8_0;
        s.type2 = c < 5 || c == 8 || c == 9 ? LM_TYPE_F16 : LM_TYPE_Q8_0; /* 5..7, 10, 11: a Q8_0 V of rows per cell */
        s.n[2] = s.type2 == LM_TYPE_Q8_0;
        const int64_t q[4] = {big[c][0], big[c][1], big[c][2], 1}, kv[4] = {big[c][3], big[c][0], big[c][4], 1};
        memcpy(s.ne, q, sizeof q);
        memcpy(s.ne2, kv, sizeof kv);
        s.n[0] = big[c][1];
        s.f[0] = 1.0f / sqrtf((float)big[c][0]);
        s.lay[0] = UT_PERMUTE;
        s.lay[1] = UT_PAD;
        attn_case(R, &s);
    }
    /* the K rows a thread copies out of a cache of several kv heads for the
     * tiles of a range, then the gathered tiles of a query with holes in the
     * same range, then a query without (mask 6: each thread's scratch must
     * not be taken for the first query's rows); fewer than KT_MIN_ITEMS
     * (attention.c) items per kv head, so no transposed K */
    for (int c = 0; c < 4; c++) {
        struct ut_spec s = ops_spec(UT_K_ATTN, 6);
        s.type = c % 2 ? LM_TYPE_Q8_0 : LM_TYPE_F16;
        s.type2 = LM_TYPE_F16;
        const int64_t q[4] = {64, 3, c < 2 ? 8 : 4, 1}, kv[4] = {100 + c, 64, 2, 1};
        memcpy(s.ne, q, sizeof q);
        memcpy(s.ne2, kv, sizeof kv);
        s.n[0] = s.ne[1];
        s.f[0] = 0.125f;
        s.lay[0] = UT_PERMUTE;
        s.lay[1] = UT_PAD;
        attn_case(R, &s);
    }
}
