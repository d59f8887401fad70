/* test_ftype.c - the table of file types (src/model/quantize.c) against
 * llama.h and llama.cpp b1892, written out here independently:
 *  - every LLAMA_FTYPE_* value is a row with the same number, llama.h's name
 *    and b1892's llama_model_ftype_name, and the table has no other rows
 *    (BF16 32, lamina's extension, aside);
 *  - every other number is unknown: no row, "unknown, may not work",
 *    refused by lm_ftype_parse and lm_qrecipe_init;
 *  - the names and aliases lm_ftype_parse takes, the --help order, which file
 *    types quantize can write and which need an importance matrix;
 *  - the guess for each weight type (b1892's llama_model_loader), the plain
 *    rows' round trip, and end to end: a file without general.file_type loads
 *    as "<...> F16 (guessed)" / "all F32 (guessed)", and only_copy writes the
 *    guess or-ed with LLAMA_FTYPE_GUESSED.
 */
#include <ctype.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "core/log.h"
#include "cpu/cpu.h"
#include "gguf/gguf.h"
#include "llama.h"
#include "lm_test.h"
#include "model/model.h"
#include "model/quantize.h"

#define UNKNOWN "unknown, may not work"

/* llama.h's values; name = the LLAMA_FTYPE_MOSTLY_ suffix; display = b1892's
 * llama_model_ftype_name. */
static const struct {
    uint32_t llama, lm;
    const char *name, *display;
    bool writable, needs_imatrix;
} KNOWN[] = {
    {LLAMA_FTYPE_ALL_F32, LM_FTYPE_ALL_F32, "F32", "all F32", true, false},
    {LLAMA_FTYPE_MOSTLY_F16, LM_FTYPE_F16, "F16", "F16", true, false},
    {LLAMA_FTYPE_MOSTLY_Q4_0, LM_FTYPE_Q4_0, "Q4_0", "Q4_0", true, false},
    {LLAMA_FTYPE_MOSTLY_Q4_1, LM_FTYPE_Q4_1, "Q4_1", "Q4_1", true, false},
    {LLAMA_FTYPE_MOSTLY_Q4_1_SOME_F16, LM_FTYPE_Q4_1_SOME_F16, "Q4_1_SOME_F16", "Q4_1, some F16", false, false},
    {LLAMA_FTYPE_MOSTLY_Q8_0, LM_FTYPE_Q8_0, "Q8_0", "Q8_0", true, false},
    {LLAMA_FTYPE_MOSTLY_Q5_0, LM_FTYPE_Q5_0, "Q5_0", "Q5_0", true, false},
    {LLAMA_FTYPE_MOSTLY_Q5_1, LM_FTYPE_Q5_1, "Q5_1", "Q5_1", true, false},
    {LLAMA_FTYPE_MOSTLY_Q2_K, LM_FTYPE_Q2_K, "Q2_K", "Q2_K", true, false},
    {LLAMA_FTYPE_MOSTLY_Q3_K_S, LM_FTYPE_Q3_K_S, "Q3_K_S", "Q3_K - Small", true, false},
    {LLAMA_FTYPE_MOSTLY_Q3_K_M, LM_FTYPE_Q3_K_M, "Q3_K_M", "Q3_K - Medium", true, false},
    {LLAMA_FTYPE_MOSTLY_Q3_K_L, LM_FTYPE_Q3_K_L, "Q3_K_L", "Q3_K - Large", true, false},
    {LLAMA_FTYPE_MOSTLY_Q4_K_S, LM_FTYPE_Q4_K_S, "Q4_K_S", "Q4_K - Small", true, false},
    {LLAMA_FTYPE_MOSTLY_Q4_K_M, LM_FTYPE_Q4_K_M, "Q4_K_M", "Q4_K - Medium", true, false},
    {LLAMA_FTYPE_MOSTLY_Q5_K_S, LM_FTYPE_Q5_K_S, "Q5_K_S", "Q5_K - Small", true, false},
    {LLAMA_FTYPE_MOSTLY_Q5_K_M, LM_FTYPE_Q5_K_M, "Q5_K_M", "Q5_K - Medium", true, false},
    {LLAMA_FTYPE_MOSTLY_Q6_K, LM_FTYPE_Q6_K, "Q6_K", "Q6_K", true, false},
    {LLAMA_FTYPE_MOSTLY_IQ2_XXS, LM_FTYPE_IQ2_XXS, "IQ2_XXS", "IQ2_XXS - 2.0625 bpw", true, true},
    {LLAMA_FTYPE_MOSTLY_IQ2_XS, LM_FTYPE_IQ2_XS, "IQ2_XS", "IQ2_XS - 2.3125 bpw", true, true},
    {LLAMA_FTYPE_MOSTLY_Q2_K_S, LM_FTYPE_Q2_K_S, "Q2_K_S", "Q2_K - Small", true, true},
    {LLAMA_FTYPE_MOSTLY_Q3_K_XS, LM_FTYPE_Q3_K_XS, "Q3_K_XS", "Q3_K - Extra small", false, false},
    {32, LM_FTYPE_BF16, "BF16", "BF16", true, false}, /* not in llama.h */
};
#define N_KNOWN ((int)(sizeof KNOWN / sizeof KNOWN[0]))

_Static_assert((int)LM_FTYPE_GUESSED == (int)LLAMA_FTYPE_GUESSED, "LM_FTYPE_GUESSED");

static int known_index(uint32_t v)
{
    for (int k = 0; k < N_KNOWN; k++)
        if (KNOWN[k].lm == v)
            return k;
    return -1;
}

static void test_rows(void)
{
    int n_rows = 0;
    while (lm_ftype_info_at(n_rows))
        n_rows++;
    CHECKF(n_rows == N_KNOWN, "%d rows, %d known file types", n_rows, N_KNOWN);
    for (int k = 0; k < N_KNOWN; k++) {
        const struct lm_ftype_info *fi = lm_ftype_info(KNOWN[k].lm);
        CHECKF(KNOWN[k].llama == KNOWN[k].lm, "%s: llama.h %u, lamina %u", KNOWN[k].name, KNOWN[k].llama, KNOWN[k].lm);
        CHECKF(fi && fi->ftype == KNOWN[k].lm && !strcmp(fi->name, KNOWN[k].name) &&
                   !strcmp(fi->display, KNOWN[k].display) && !strcmp(lm_ftype_name(KNOWN[k].lm), KNOWN[k].display),
               "%u: row %s / %s", KNOWN[k].lm, fi ? fi->name : "-", fi ? fi->display : "-");
        CHECKF(fi && (fi->note != NULL) == KNOWN[k].writable && fi->needs_imatrix == KNOWN[k].needs_imatrix,
               "%s: writable / needs_imatrix", KNOWN[k].name);
    }
    for (int i = 0; i < n_rows; i++) /* one row per number, one number per name */
        for (int j = 0; j < i; j++)
            CHECK(lm_ftype_info_at(i)->ftype != lm_ftype_info_at(j)->ftype &&
                  strcasecmp(lm_ftype_info_at(i)->name, lm_ftype_info_at(j)->name) != 0);
}

/* Numbers lamina does not know, and those quantize cannot write. */
static void test_unknown(void)
{
    struct lm_qmodel m = {.arch = "llama"};
    struct lm_qrecipe r;
    uint32_t f = 12345;
    char s[32];
    int bad = 0;
    for (uint32_t v = 0; v < 1100; v++) {
        int k = known_index(v);
        snprintf(s, sizeof s, "%u", v);
        bool writable = k >= 0 && KNOWN[k].writable;
        bool ok = lm_ftype_parse(s, &f);
        bad += ok != writable || (ok && f != v);
        bad += (lm_qrecipe_init(&r, v, &m) == LM_OK) != writable;
        if (k < 0)
            bad += lm_ftype_info(v) != NULL || strcmp(lm_ftype_name(v), UNKNOWN) != 0;
    }
    CHECKF(bad == 0, "%d wrong answers for the numbers 0..1099", bad);
    CHECK(!strcmp(lm_ftype_name(LM_FTYPE_Q4_0 | LM_FTYPE_GUESSED), UNKNOWN) && !strcmp(lm_ftype_name(~0u), UNKNOWN));
    CHECK(lm_qrecipe_init(&r, ~0u, &m) == LM_ERR_UNSUPPORTED && lm_ftype_info(~0u) == NULL);
    /* a number past 32 bits is not its low bits */
    CHECK(!lm_ftype_parse("4294967298", &f) && !lm_ftype_parse("-2", &f) && !lm_ftype_parse("0x2", &f));
}

static void test_names(void)
{
    uint32_t f = 12345;
    char lower[32];
    for (int k = 0; k < N_KNOWN; k++) {
        size_t n = strlen(KNOWN[k].name);
        for (size_t i = 0; i <= n; i++)
            lower[i] = (char)tolower((unsigned char)KNOWN[k].name[i]);
        bool a = lm_ftype_parse(KNOWN[k].name, &f) && f == KNOWN[k].lm;
        bool b = lm_ftype_parse(lower, &f) && f == KNOWN[k].lm;
        CHECKF(a == KNOWN[k].writable && b == KNOWN[k].writable, "parse %s / %s", KNOWN[k].name, lower);
    }
    /* aliases: the K types' names mean their _M variants (the guess) */
    CHECK(lm_ftype_parse("Q3_K", &f) && f == LM_FTYPE_Q3_K_M);
    CHECK(lm_ftype_parse("q4_k", &f) && f == LM_FTYPE_Q4_K_M);
    CHECK(lm_ftype_parse("Q5_K", &f) && f == LM_FTYPE_Q5_K_M);
    CHECK(!lm_ftype_parse("Q8_K", &f) && !lm_ftype_parse("q8_1", &f) && !lm_ftype_parse("i8", &f) &&
          !lm_ftype_parse("COPY", &f) && !lm_ftype_parse("all F32", &f) && !lm_ftype_parse("Q4_2", &f));
    CHECK(!lm_ftype_parse("", &f) && !lm_ftype_parse("15x", &f) && !lm_ftype_parse(NULL, &f) &&
          !lm_ftype_parse("Q4_0", NULL));
    /* `lamina quantize --help` lists the writable rows in table order */
    static const char *const help[] = {"Q4_0",   "Q4_1",   "Q5_0",   "Q5_1",   "IQ2_XXS", "IQ2_XS", "Q2_K",
                                       "Q2_K_S", "Q3_K_S", "Q3_K_M", "Q3_K_L", "Q4_K_S",  "Q4_K_M", "Q5_K_S",
                                       "Q5_K_M", "Q6_K",   "Q8_0",   "F16",    "BF16",    "F32"};
    int n = 0, bad = 0;
    for (int i = 0; lm_ftype_info_at(i); i++)
        if (lm_ftype_info_at(i)->note)
            bad += n >= (int)(sizeof help / sizeof help[0]) || strcmp(lm_ftype_info_at(i)->name, help[n++]) != 0;
    CHECKF(bad == 0 && n == (int)(sizeof help / sizeof help[0]), "--help order (%d rows, %d wrong)", n, bad);
}

/* b1892's guess: the most common weight type's file type, ALL_F32 for any
 * type it does not name. */
static void test_guess(void)
{
    static const struct {
        enum lm_type type;
        uint32_t ftype;
    } guess[] = {
        {LM_TYPE_F32, LLAMA_FTYPE_ALL_F32},
        {LM_TYPE_F16, LLAMA_FTYPE_MOSTLY_F16},
        {LM_TYPE_Q4_0, LLAMA_FTYPE_MOSTLY_Q4_0},
        {LM_TYPE_Q4_1, LLAMA_FTYPE_MOSTLY_Q4_1},
        {LM_TYPE_Q5_0, LLAMA_FTYPE_MOSTLY_Q5_0},
        {LM_TYPE_Q5_1, LLAMA_FTYPE_MOSTLY_Q5_1},
        {LM_TYPE_Q8_0, LLAMA_FTYPE_MOSTLY_Q8_0},
        {LM_TYPE_Q2_K, LLAMA_FTYPE_MOSTLY_Q2_K},
        {LM_TYPE_Q3_K, LLAMA_FTYPE_MOSTLY_Q3_K_M},
        {LM_TYPE_Q4_K, LLAMA_FTYPE_MOSTLY_Q4_K_M},
        {LM_TYPE_Q5_K, LLAMA_FTYPE_MOSTLY_Q5_K_M},
        {LM_TYPE_Q6_K, LLAMA_FTYPE_MOSTLY_Q6_K},
        {LM_TYPE_IQ2_XXS, LLAMA_FTYPE_MOSTLY_IQ2_XXS},
        {LM_TYPE_IQ2_XS, LLAMA_FTYPE_MOSTLY_IQ2_XS},
        {LM_TYPE_BF16, 32}, /* lamina's extension */
    };
    for (int t = 0; t < LM_TYPE_COUNT; t++) {
        uint32_t want = LLAMA_FTYPE_ALL_F32;
        for (size_t i = 0; i < sizeof guess / sizeof guess[0]; i++)
            if (guess[i].type == (enum lm_type)t)
                want = guess[i].ftype;
        CHECKF(lm_ftype_guess((enum lm_type)t) == want, "guess for %s: %u, want %u", lm_type_name((enum lm_type)t),
               lm_ftype_guess((enum lm_type)t), want);
    }
    /* round trip: a plain row is the guess for its base type */
    for (int i = 0; lm_ftype_info_at(i); i++) {
        const struct lm_ftype_info *fi = lm_ftype_info_at(i);
        if (fi->plain)
            CHECKF(lm_ftype_guess(fi->base) == fi->ftype, "%s is plain but %s guesses %u", fi->name,
                   lm_type_name(fi->base), lm_ftype_guess(fi->base));
    }
}

/* ---- end to end: files without general.file_type ---- */

static char tmpdir[256];

/* A copy of `in` at tmpdir/<name>.gguf without general.file_type. */
static bool strip_file_type(const char *in, const char *name, char *out, size_t out_size)
{
    size_t n = 0;
    uint8_t *bytes = lm_test_read_file(in, &n);
    struct lm_gguf *g = NULL;
    struct lm_gguf_writer *w = NULL;
    char err[256];
    snprintf(out, out_size, "%s/%s.gguf", tmpdir, name);
    bool ok = bytes && lm_gguf_open(in, &g, err, sizeof err) == LM_OK && lm_gguf_writer_new(&w) == LM_OK;
    for (int64_t i = 0; ok && i < lm_gguf_n_kv(g); i++)
        ok = lm_gguf_copy_kv(w, g, i) == LM_OK;
    ok = ok && lm_gguf_remove_key(w, "general.file_type") == LM_OK;
    for (int64_t i = 0; ok && i < lm_gguf_n_tensors(g); i++) {
        const struct lm_gguf_tensor_info *ti = lm_gguf_tensor_info(g, i);
        ok = lm_gguf_add_tensor(w, ti->name, ti->type, ti->n_dims, ti->ne, bytes + ti->offset) == LM_OK;
    }
    ok = ok && lm_gguf_write_file(w, out) == LM_OK;
    lm_gguf_writer_free(w);
    lm_gguf_close(g);
    free(bytes);
    CHECKF(ok, "writing %s", out);
    return ok;
}

/* The loader's guess and desc, and only_copy's general.file_type. */
static void check_guessed(const char *path, uint32_t ftype, const char *desc_suffix)
{
    struct lm_model_params mp = {.use_mmap = true};
    struct lm_model *m = NULL;
    char err[256], desc[128] = "", out[512];
    lm_backend_register(lm_cpu_backend_reg());
    CHECKF(lm_model_load(path, &mp, &m, err, sizeof err) == LM_OK, "%s: %s", path, err);
    if (m)
        lm_model_desc(m, desc, sizeof desc);
    size_t n = strlen(desc), ns = strlen(desc_suffix);
    CHECKF(m && m->hp.ftype == ftype && m->hp.ftype_guessed && n > ns && !strcmp(desc + n - ns, desc_suffix),
           "%s: ftype %u, desc '%s'", path, m ? m->hp.ftype : 0, desc);
    lm_model_free(m);

    struct lm_quantize_params p = lm_quantize_default_params();
    p.only_copy = true;
    snprintf(out, sizeof out, "%s/copy.gguf", tmpdir);
    struct lm_gguf *g = NULL;
    uint32_t ft = 0;
    CHECKF(lm_quantize_model(path, out, &p, err, sizeof err) == LM_OK, "only_copy %s: %s", path, err);
    CHECK(lm_gguf_open(out, &g, err, sizeof err) == LM_OK &&
          lm_gguf_get_u32(g, lm_gguf_find_key(g, "general.file_type"), &ft) == LM_OK &&
          ft == (ftype | LLAMA_FTYPE_GUESSED));
    lm_gguf_close(g);
}

static void test_guessed_files(void)
{
    char input[4096], f32[512], path[512];
    snprintf(input, sizeof input, "%s/fixtures/quantize/synth-llama-f16.gguf", LM_SHARED_DIR);
    if (strip_file_type(input, "f16-unsaid", path, sizeof path))
        check_guessed(path, LM_FTYPE_F16, " F16 (guessed)");
    /* all F32 (pure keeps output.weight F32 too): b1892 also says "(guessed)" */
    struct lm_quantize_params p = lm_quantize_default_params();
    char err[256];
    p.ftype = LM_FTYPE_ALL_F32;
    p.pure = true;
    snprintf(f32, sizeof f32, "%s/f32.gguf", tmpdir);
    CHECKF(lm_quantize_model(input, f32, &p, err, sizeof err) == LM_OK, "F32: %s", err);
    if (strip_file_type(f32, "f32-unsaid", path, sizeof path))
        check_guessed(path, LM_FTYPE_ALL_F32, " all F32 (guessed)");
}

int main(void)
{
    lm_log_set_level(LM_LOG_ERROR);
    snprintf(tmpdir, sizeof tmpdir, "/tmp/lm_test_ftype_XXXXXX");
    if (!mkdtemp(tmpdir)) {
        fprintf(stderr, "cannot create a temporary folder\n");
        return 1;
    }
    test_rows();
    test_unknown();
    test_names();
    test_guess();
    test_guessed_files();

    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0)
        fprintf(stderr, "note: could not remove %s\n", tmpdir);
    return lm_test_summary();
}
