/* test_vocab_roundtrip.c - the shared vocabs that have no test vectors of
 * their own: gpt-neox (GPT-2 byte-level BPE) and baichuan (SPM).
 *
 * - Both load, with the special ids their files set.
 * - gpt-neox holds the same tokens, types and merges as mpt (MPT-7B uses the
 *   GPT-NeoX-20B tokenizer), which is why test_vocab_vectors checks it with
 *   MPT's vectors.
 * - Every input text of every other vocab's .inp file survives
 *   tokenize -> detokenize byte for byte (SPM: after the prefix space).
 * - A few ids worked out from the files' contents: words that are one token
 *   (looked up by text in the vocab), and short SPM/BPE merge sequences
 *   replayed by hand from the scores and merge ranks (noted at each case).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lm_test.h"
#include "util_vocab.h"
#include "vocab/vocab_internal.h"

static const char *const with_vectors[] = {"llama-spm", "phi-3",          "gpt-2",        "falcon", "starcoder", "mpt",
                                           "refact",    "deepseek-coder", "deepseek-llm", "dbrx",   "bert-bge"};
#define N_WITH_VECTORS (sizeof(with_vectors) / sizeof(with_vectors[0]))

static bool tokenizes_to(const struct lm_vocab *v, const char *text, bool add_bos, bool special, const int32_t *want,
                         int n_want)
{
    int n;
    int32_t *got = tv_tokenize(v, text, strlen(text), add_bos, special, &n);
    bool ok = n == n_want && (n == 0 || memcmp(got, want, (size_t)n * sizeof(*got)) == 0);
    if (!ok) {
        fprintf(stderr, "  \"%s\" gave %d ids:", text, n);
        for (int i = 0; i < n && i < 16; i++) {
            fprintf(stderr, " %d", (int)got[i]);
        }
        fprintf(stderr, "\n");
    }
    free(got);
    return ok;
}

#define IDS(...) (const int32_t[]){__VA_ARGS__}, (int)(sizeof((const int32_t[]){__VA_ARGS__}) / sizeof(int32_t))

/* Every .inp text of the other vocabs: tokenize -> detokenize == text. */
static void test_round_trip(const char *name)
{
    struct lm_vocab *v = tv_load(name);
    CHECKF(v != NULL, "%s: load", name);
    if (!v) {
        return;
    }
    bool spm = lm_vocab_type(v) == LM_VOCAB_SPM;
    int n_ok = 0, n_all = 0;
    for (size_t m = 0; m < N_WITH_VECTORS; m++) {
        struct tv_case *cases = NULL;
        int nc = tv_read_cases(with_vectors[m], &cases);
        CHECKF(nc > 0, "the cases of %s", with_vectors[m]);
        for (int i = 0; i < nc; i++) {
            const struct tv_case *c = &cases[i];
            if (spm && strstr(c->text, "\xe2\x96\x81")) {
                continue; /* U+2581 decodes as ' ' */
            }
            int n;
            size_t dl;
            int32_t *ids = tv_tokenize(v, c->text, c->len, false, false, &n);
            char *d = tv_detokenize(v, ids, n, &dl);
            const char *ds = d;
            if (spm && dl > 0 && d[0] == ' ') {
                ds++, dl--;
            }
            bool ok = dl == c->len && memcmp(ds, c->text, dl) == 0;
            CHECKF(ok, "%s: %s case %d \"%.40s\" comes back as \"%.40s\"", name, with_vectors[m], i, c->text, ds);
            n_ok += ok;
            n_all++;
            free(ids);
            free(d);
        }
        tv_free_cases(cases, nc);
    }
    printf("%s: round trip %d/%d (the inputs of the other vocabs' vectors)\n", name, n_ok, n_all);
    lm_vocab_free(v);
}

/* gpt-neox and mpt: the same tokens, types and merges (merges compared
 * through the vocab's internals: the pool holds them in rank order). */
static void test_neox_is_mpt(void)
{
    struct lm_vocab *a = tv_load("gpt-neox"), *b = tv_load("mpt");
    CHECK(a && b);
    if (!a || !b) {
        lm_vocab_free(a);
        lm_vocab_free(b);
        return;
    }
    bool same = lm_vocab_n_tokens(a) == lm_vocab_n_tokens(b) && a->n_merges == b->n_merges;
    for (int32_t i = 0; same && i < lm_vocab_n_tokens(a); i++) {
        same = lm_vocab_token_len(a, i) == lm_vocab_token_len(b, i) &&
               memcmp(lm_vocab_token_text(a, i), lm_vocab_token_text(b, i), lm_vocab_token_len(a, i)) == 0 &&
               lm_vocab_token_type(a, i) == lm_vocab_token_type(b, i);
    }
    const char *pa = a->merge_pool, *pb = b->merge_pool;
    for (int32_t i = 0; same && i < a->n_merges; i++) {
        same = strcmp(pa, pb) == 0;
        pa += strlen(pa) + 1;
        pb += strlen(pb) + 1;
    }
    CHECKF(same, "gpt-neox and mpt differ");
    /* the one difference: mpt names its pre-tokenizer, "mpt", which is GPT-2's, the default */
    CHECK(strcmp(lm_vocab_pre(a), lm_vocab_pre(b)) == 0);
    lm_vocab_free(a);
    lm_vocab_free(b);
}

static void test_neox_ids(void)
{
    struct lm_vocab *v = tv_load("gpt-neox");
    CHECK(v != NULL);
    if (!v) {
        return;
    }
    CHECK(lm_vocab_type(v) == LM_VOCAB_BPE && lm_vocab_n_tokens(v) == 50432);
    CHECK(lm_vocab_bos(v) == 0 && lm_vocab_eos(v) == 0 && lm_vocab_unk(v) == 0);
    /* single tokens by text: "Hello" 12092, "Ġworld" 1533, "ĠHello" 24387 */
    CHECK(lm_vocab_find(v, "Hello", 5) == 12092 && lm_vocab_find(v, "\xc4\xa0world", 7) == 1533);
    CHECK(tokenizes_to(v, "Hello world", false, false, IDS(12092, 1533)));
    CHECK(tokenizes_to(v, " Hello", false, false, IDS(24387)));
    /* "ĊĊ" 535 is one token (merge "Ċ Ċ"); lm_vocab_nl is "Ċ" 187 */
    CHECK(tokenizes_to(v, "\n\n", false, false, IDS(535)));
    CHECK(lm_vocab_nl(v) == 187);
    /* "  " is user-defined token 50276 (NeoX's runs of spaces), always split out: a 66, b 67 */
    CHECK(tokenizes_to(v, "a  b", false, false, IDS(66, 50276, 67)));
    /* " llama": merges give "Ġll" 26198 + "ama" 2902 ("Ġllama" is no token) */
    CHECK(lm_vocab_find(v, "\xc4\xa0llama", 7) == -1);
    CHECK(tokenizes_to(v, " llama", false, false, IDS(26198, 2902)));
    /* <|endoftext|> (0, CONTROL) only with special; add_bos puts it first */
    CHECK(tokenizes_to(v, "<|endoftext|>", false, true, IDS(0)));
    CHECK(tokenizes_to(v, "Hello", true, false, IDS(0, 12092)));
    int n;
    int32_t *ids = tv_tokenize(v, "<|endoftext|>", 13, false, false, &n);
    CHECK(n > 1 && ids[0] != 0);
    free(ids);
    lm_vocab_free(v);
}

static void test_baichuan_ids(void)
{
    struct lm_vocab *v = tv_load("baichuan");
    CHECK(v != NULL);
    if (!v) {
        return;
    }
    CHECK(lm_vocab_type(v) == LM_VOCAB_SPM && lm_vocab_n_tokens(v) == 64000);
    CHECK(lm_vocab_bos(v) == 1 && lm_vocab_eos(v) == 2 && lm_vocab_unk(v) == 0 && lm_vocab_pad(v) == 0);
    CHECK(lm_vocab_nl(v) == 403); /* "<0x0A>" */
    /* b1892 puts a space in front: "▁Hello" 24568 and "▁world" 1275 are tokens */
    CHECK(lm_vocab_find(v, "\xe2\x96\x81Hello", 8) == 24568 && lm_vocab_find(v, "\xe2\x96\x81world", 8) == 1275);
    CHECK(tokenizes_to(v, "Hello world", false, false, IDS(24568, 1275)));
    CHECK(tokenizes_to(v, "Hello world", true, false, IDS(1, 24568, 1275)));
    /* "▁你好": of the pairs "▁你" (9875, score -9226) and "你好" (25211,
     * -24562) the first merges; "▁你好" is no token, so "好" 31213 stays */
    CHECK(tokenizes_to(v, "你好", false, false, IDS(9875, 31213)));
    /* "▁中国" 12741 is reached by either merge order */
    CHECK(tokenizes_to(v, "中国", false, false, IDS(12741)));
    /* "\n" is the NORMAL token 5 and "▁\n" no token: "▁" 31106 then 5 */
    CHECK(tokenizes_to(v, "\n", false, false, IDS(31106, 5)));
    /* "🦙" is one token, 56940 */
    CHECK(tokenizes_to(v, "\xf0\x9f\xa6\x99", false, false, IDS(31106, 56940)));
    CHECK(tokenizes_to(v, "<s></s>", false, true, IDS(1, 2)));
    lm_vocab_free(v);
}

int main(void)
{
    test_neox_is_mpt();
    test_neox_ids();
    test_baichuan_ids();
    test_round_trip("gpt-neox");
    test_round_trip("baichuan");
    return lm_test_summary();
}
