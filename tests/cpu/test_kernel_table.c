/* test_kernel_table.c - how an ISA level's const override table is applied
 * (lm_cpu_kernels_apply, kernels.h) to the table of the level below: a NULL
 * slot keeps the lower level's kernel; a vec_dot drops the lower level's
 * rows/cols/tile/kt kernels and records the level; a gemm_x8 brings its
 * whole entry (activation type, encoder, sums flag, gemv_x8, a NULL gemv_x8
 * clearing the lower one); a gemm_panel brings its panel fields. Then the
 * real tables of this build and CPU: what each level's table may hold.
 * Dummy kernels stand in for real ones (never called). */
#include <stdio.h>
#include <string.h>

#include "cpu/kernels/kernels.h"
#include "lm_test.h"

static void dot_a(int64_t n, float *s, const void *x, const void *y) { (void)n, (void)s, (void)x, (void)y; }
static void dot_b(int64_t n, float *s, const void *x, const void *y) { (void)n, (void)s, (void)x, (void)y; }
static void rows_a(int64_t n, int64_t nr, float *s, const void *x, size_t bx, const void *y)
{
    (void)n, (void)nr, (void)s, (void)x, (void)bx, (void)y;
}
static void cols_a(int64_t n, int nc, float *const *s, const void *x, const void *const *y)
{
    (void)n, (void)nc, (void)s, (void)x, (void)y;
}
static void from_a(const float *x, void *y, int64_t n) { (void)x, (void)y, (void)n; }
static void to_a(const void *x, float *y, int64_t n) { (void)x, (void)y, (void)n; }
static void gemm_a(int64_t k, float *s, size_t ldc, const void *x, const void *y, size_t by, const int16_t *ysum,
                   int nc)
{
    (void)k, (void)s, (void)ldc, (void)x, (void)y, (void)by, (void)ysum, (void)nc;
}
static void gemm_b(int64_t k, float *s, size_t ldc, const void *x, const void *y, size_t by, const int16_t *ysum,
                   int nc)
{
    (void)k, (void)s, (void)ldc, (void)x, (void)y, (void)by, (void)ysum, (void)nc;
}
static void gemv_a(int64_t k, int64_t n_groups, size_t group_bytes, float *s, const void *x, const void *y,
                   const int16_t *ysum)
{
    (void)k, (void)n_groups, (void)group_bytes, (void)s, (void)x, (void)y, (void)ysum;
}
static void panel_a(int64_t k, int64_t n_groups, size_t group_bytes, float *s, size_t ldc, const void *x, const void *y,
                    size_t by, int64_t n, void *scratch)
{
    (void)k, (void)n_groups, (void)group_bytes, (void)s, (void)ldc, (void)x, (void)y, (void)by, (void)n, (void)scratch;
}
static size_t size_a(int64_t k) { return (size_t)k; }
static double exp_a(int64_t n, float *y, const float *x, float max) { return (void)n, (void)y, (void)x, max; }
static void gelu_a(int64_t n, float *y, const float *x) { (void)n, (void)y, (void)x; }

/* A lower level's table with every slot of one type filled. */
static void lower_table(struct lm_cpu_kernels *k)
{
    memset(k, 0, sizeof *k);
    k->isa = LM_ISA_AVX2;
    k->exp_sum = exp_a;
    k->gelu = gelu_a;
    struct lm_cpu_type_kernels *t = &k->type[LM_TYPE_Q8_0];
    *t = (struct lm_cpu_type_kernels){.vec_dot_type = LM_TYPE_Q8_0,
                                      .vec_dot = dot_a,
                                      .vec_dot_rows = rows_a,
                                      .vec_dot_cols = cols_a,
                                      .from_float = from_a,
                                      .to_float = to_a,
                                      .gemm_x8 = gemm_a,
                                      .gemm_vt = LM_TYPE_Q8_0,
                                      .gemm_from_float = from_a,
                                      .gemm_sums = true,
                                      .gemv_x8 = gemv_a};
    k->type[LM_TYPE_Q4_0] = *t;
    k->vec_dot_isa[LM_TYPE_Q8_0] = k->vec_dot_isa[LM_TYPE_Q4_0] = LM_ISA_AVX2;
}

static void test_apply(void)
{
    struct lm_cpu_kernels k, before;
    lower_table(&k);
    before = k;
    k.isa = LM_ISA_AVX512;
    static const struct lm_cpu_kernels none = {0};
    lm_cpu_kernels_apply(&k, &none); /* an empty table changes nothing */
    before.isa = LM_ISA_AVX512;
    CHECK(memcmp(&k, &before, sizeof k) == 0);

    /* Q8_0: a new vec_dot (its rows/cols go), a gemm_x8 without gemv_x8 and
     * with other activation rows, a panel; Q4_0: only its to_float. */
    static const struct lm_cpu_kernels over = {
        .gelu = gelu_a,
        .type = {[LM_TYPE_Q8_0] = {.vec_dot = dot_b,
                                   .gemm_x8 = gemm_b,
                                   .gemm_vt = LM_TYPE_Q8_K,
                                   .gemm_panel = panel_a,
                                   .panel_row_size = size_a,
                                   .panel_exact = true,
                                   .panel_from_float = from_a,
                                   .panel_scratch = size_a,
                                   .panel_min_n = 7},
                 [LM_TYPE_Q4_0] = {.to_float = to_a, .vec_dot_type = LM_TYPE_F16, .gemm_vt = LM_TYPE_F16}}};
    lm_cpu_kernels_apply(&k, &over);
    const struct lm_cpu_type_kernels *q8 = &k.type[LM_TYPE_Q8_0], *q4 = &k.type[LM_TYPE_Q4_0];
    CHECK(q8->vec_dot == dot_b && q8->vec_dot_rows == NULL && q8->vec_dot_cols == NULL);
    CHECK(q8->vec_dot_type == LM_TYPE_Q8_0); /* never changed by a level */
    CHECK(k.vec_dot_isa[LM_TYPE_Q8_0] == LM_ISA_AVX512);
    CHECK(q8->from_float == from_a && q8->to_float == to_a && k.from_float_isa[LM_TYPE_Q8_0] == 0);
    CHECK(q8->gemm_x8 == gemm_b && q8->gemm_vt == LM_TYPE_Q8_K && q8->gemm_from_float == NULL && !q8->gemm_sums);
    CHECK(q8->gemv_x8 == NULL); /* the lower level's one-column kernel is not gemm_b's */
    CHECK(q8->gemm_panel == panel_a && q8->panel_row_size == size_a && q8->panel_exact &&
          q8->panel_from_float == from_a && q8->panel_scratch == size_a && q8->panel_min_n == 7);
    /* Q4_0 keeps everything but to_float, whose filler is recorded; the
     * vec_dot_type and gemm_vt of an entry without vec_dot / gemm_x8 are ignored */
    CHECK(q4->vec_dot == dot_a && q4->vec_dot_rows == rows_a && q4->vec_dot_cols == cols_a);
    CHECK(q4->vec_dot_type == LM_TYPE_Q8_0 && q4->gemm_vt == LM_TYPE_Q8_0);
    CHECK(q4->gemm_x8 == gemm_a && q4->gemv_x8 == gemv_a && q4->gemm_sums && q4->gemm_from_float == from_a);
    CHECK(k.to_float_isa[LM_TYPE_Q4_0] == LM_ISA_AVX512 && k.vec_dot_isa[LM_TYPE_Q4_0] == LM_ISA_AVX2);
    CHECK(k.exp_sum == exp_a && k.exp_sum_isa == 0 && k.gelu == gelu_a && k.gelu_isa == LM_ISA_AVX512);
}

/* Each available level: the generic table's dot types (no level changes
 * them), slots filled by no higher level than itself, and every gemv_x8
 * beside a gemm_x8 (a level that replaces gemm_x8 replaces or clears it). */
static void test_real_tables(void)
{
    const struct lm_cpu_kernels *g = lm_cpu_kernels_for(LM_ISA_GENERIC);
    CHECK(g != NULL);
    for (int lvl = 0; g && lvl < LM_ISA_COUNT; lvl++) {
        const struct lm_cpu_kernels *k = lm_cpu_kernels_for((enum lm_cpu_isa)lvl);
        if (!k)
            continue;
        CHECK(k->isa == (enum lm_cpu_isa)lvl);
        for (int t = 0; t < LM_TYPE_COUNT; t++) {
            const struct lm_cpu_type_kernels *y = &k->type[t];
            CHECKF(y->vec_dot_type == g->type[t].vec_dot_type, "level %d type %d", lvl, t);
            CHECKF((int)k->vec_dot_isa[t] <= lvl && (int)k->from_float_isa[t] <= lvl && (int)k->to_float_isa[t] <= lvl,
                   "level %d type %d", lvl, t);
            CHECKF(!y->gemv_x8 || y->gemm_x8, "level %d type %d: gemv_x8 without gemm_x8", lvl, t);
            CHECKF(!y->gemm_panel || (y->panel_row_size && y->panel_from_float && y->panel_scratch),
                   "level %d type %d: incomplete panel entry", lvl, t);
        }
        printf("level %s: checked\n", lm_cpu_isa_name((enum lm_cpu_isa)lvl));
    }
}

int main(void)
{
    test_apply();
    test_real_tables();
    return lm_test_summary();
}
