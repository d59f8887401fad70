/* pretok.c - BPE pre-tokenizers: split text into words before merging.
 *
 * A pre-tokenizer is a list of regexes applied one after another, as
 * llama.cpp's unicode_regex_split does: each regex splits every current
 * piece into its matches and the unmatched gaps between them (both kept),
 * and a match never looks outside its piece. The patterns are those of the
 * models' Hugging Face tokenizer.json files as llama.cpp transcribed them
 * (src/llama-vocab.cpp); the table below maps tokenizer.ggml.pre names to
 * them. Facts, not code, were taken from there.
 *
 * Cost: each regex tries a match at each code point of a piece; the
 * patterns' repeats are single classes, so a try is linear in the length of
 * what it scans (runs of whitespace are the worst case).
 */
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "vocab/unicode.h"
#include "vocab/vocab_internal.h"

/* GPT-2's pattern (Hugging Face ByteLevel pre-tokenizer). */
#define RX_GPT2 "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"

/* The cl100k-style pattern (Llama 3, DBRX), with the case-insensitive
 * contractions spelled out as llama.cpp does. */
#define RX_CL100K                                                                                                      \
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}"              \
    "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"

/* CJK ideographs, U+0800..U+4E00 and Hangul, as deepseek's patterns write them. */
#define RX_DEEPSEEK_CJK "[\\x{4E00}-\\x{9FA5}\\x{800}-\\x{4E00}\\x{AC00}-\\x{D7FF}]+"

/* deepseek-llm's cased-letter class (Lu, Ll, Lt of an older Unicode). */
#define RX_DEEPSEEK_LLM_LETTERS                                                                                        \
    "\\s?[A-Za-z\\x{B5}\\x{C0}-\\x{D6}\\x{D8}-\\x{F6}\\x{F8}-\\x{1BA}\\x{1BC}-\\x{1BF}\\x{1C4}-\\x{293}"               \
    "\\x{295}-\\x{2AF}\\x{370}-\\x{373}\\x{376}\\x{377}\\x{37B}-\\x{37D}\\x{37F}\\x{386}\\x{388}-\\x{38A}\\x{38C}"     \
    "\\x{38E}-\\x{3A1}\\x{3A3}-\\x{3F5}\\x{3F7}-\\x{481}\\x{48A}-\\x{52F}\\x{531}-\\x{556}\\x{10A0}-\\x{10C5}"         \
    "\\x{13A0}-\\x{13F5}\\x{13F8}-\\x{13FD}\\x{1C90}-\\x{1CBA}\\x{1CBD}-\\x{1CBF}\\x{1D00}-\\x{1D2B}"                  \
    "\\x{1D6B}-\\x{1D77}\\x{1D79}-\\x{1D9A}\\x{1E00}-\\x{1F15}\\x{1F18}-\\x{1F1D}\\x{1F20}-\\x{1F45}"                  \
    "\\x{1F48}-\\x{1F4D}\\x{1F50}-\\x{1F57}\\x{1F59}\\x{1F5B}\\x{1F5D}\\x{1F5F}-\\x{1F7D}\\x{1F80}-\\x{1FB4}"          \
    "\\x{1FB6}-\\x{1FBC}\\x{1FBE}\\x{1FC2}-\\x{1FC4}\\x{1FC6}-\\x{1FCC}\\x{1FD0}-\\x{1FD3}\\x{1FD6}-\\x{1FDB}"         \
    "\\x{1FE0}-\\x{1FEC}\\x{1FF2}-\\x{1FF4}\\x{1FF6}-\\x{1FFC}\\x{2102}\\x{2107}\\x{210A}-\\x{2113}\\x{2115}"          \
    "\\x{2119}-\\x{211D}\\x{2124}\\x{2126}\\x{2128}\\x{212A}-\\x{212D}\\x{212F}-\\x{2134}\\x{2139}"                    \
    "\\x{213C}-\\x{213F}\\x{2145}-\\x{2149}\\x{214E}\\x{2183}\\x{2184}\\x{2C00}-\\x{2C7B}\\x{2C7E}-\\x{2CE4}"          \
    "\\x{2CEB}-\\x{2CEE}\\x{2CF2}\\x{2CF3}\\x{A640}-\\x{A66D}\\x{A680}-\\x{A69B}\\x{A722}-\\x{A76F}"                   \
    "\\x{A771}-\\x{A787}\\x{A78B}-\\x{A78E}\\x{AB70}-\\x{ABBF}\\x{FB00}-\\x{FB06}\\x{FB13}-\\x{FB17}"                  \
    "\\x{FF21}-\\x{FF3A}\\x{FF41}-\\x{FF5A}\\x{10400}-\\x{1044F}\\x{104B0}-\\x{104D3}\\x{104D8}-\\x{104FB}"            \
    "\\x{10C80}-\\x{10CB2}\\x{10CC0}-\\x{10CF2}\\x{118A0}-\\x{118DF}\\x{1E900}-\\x{1E943}]+"

struct pretok {
    const char *names[4]; /* tokenizer.ggml.pre values; names[0] is reported */
    const char *rx[LM_VOCAB_MAX_PRE_REGEX];
};

static const struct pretok pretoks[] = {
    {{"default", "gpt-2", "mpt", "olmo"}, {RX_GPT2}},
    {{"starcoder", "refact"}, {"\\p{N}", RX_GPT2}},
    {{"falcon"}, {"[\\p{P}\\$\\+<=>\\^~\\|`]+", RX_GPT2, "[0-9][0-9][0-9]"}},
    {{"deepseek-coder"}, {"[\\r\\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", RX_DEEPSEEK_CJK, "\\p{N}"}},
    {{"deepseek-llm"},
     {"[\\r\\n]", RX_DEEPSEEK_LLM_LETTERS,
      "\\s?[!-/:-~\\x{FF01}-\\x{FF0F}\\x{FF1A}-\\x{FF5E}\\x{2018}-\\x{201F}"
      "\\x{3000}-\\x{3002}]+",
      "\\s+$", RX_DEEPSEEK_CJK, "\\p{N}+"}},
    {{"dbrx", "llama-bpe", "smaug-bpe"}, {RX_CL100K}},
};

static const struct pretok *find_pretok(const char *name)
{
    for (size_t i = 0; i < sizeof(pretoks) / sizeof(pretoks[0]); i++) {
        for (int j = 0; j < 4 && pretoks[i].names[j]; j++) {
            if (strcmp(pretoks[i].names[j], name) == 0) {
                return &pretoks[i];
            }
        }
    }
    return NULL;
}

lm_status lm_vocab_pretok_init(struct lm_vocab *v, const char *name, char *err, size_t err_size)
{
    const struct pretok *pt = find_pretok(name ? name : "default");
    if (!pt) {
        LM_LOG_WRN("vocab: unknown pre-tokenizer '%.64s', using the GPT-2 pattern\n", name);
        pt = &pretoks[0];
    }
    v->pre = pt->names[0];
    for (int i = 0; i < LM_VOCAB_MAX_PRE_REGEX && pt->rx[i]; i++) {
        lm_status st = lm_vocab_regex_compile(pt->rx[i], &v->pre_rx[i], err, err_size);
        if (st) {
            return st; /* the caller frees what was compiled */
        }
        v->n_pre_rx = i + 1;
    }
    return LM_OK;
}

/* Split pieces (start, end) of cps by one regex into out: the matches and
 * the gaps between them. A match sees only its piece. */
static void split_pieces(const struct lm_vocab_regex *rx, const uint32_t *cps, const struct ivec *in, struct ivec *out)
{
    for (size_t k = 0; k + 1 < in->n; k += 2) {
        size_t a = (size_t)in->data[k], b = (size_t)in->data[k + 1];
        size_t gap = 0, start;
        int64_t e;
        while ((e = lm_vocab_regex_find(rx, cps + a, b - a, gap, &start)) >= 0) {
            if (start > gap) {
                lm_vocab_ivec_push(out, (int32_t)(a + gap));
                lm_vocab_ivec_push(out, (int32_t)(a + start));
            }
            lm_vocab_ivec_push(out, (int32_t)(a + start));
            lm_vocab_ivec_push(out, (int32_t)(a + (size_t)e));
            gap = (size_t)e;
        }
        if (a + gap < b) {
            lm_vocab_ivec_push(out, (int32_t)(a + gap));
            lm_vocab_ivec_push(out, (int32_t)b);
        }
    }
}

void lm_vocab_pretok_split(const struct lm_vocab *v, const char *text, size_t len, struct ivec *out)
{
    /* code points and the byte offset of each (offs[n] = len) */
    uint32_t *cps = malloc((len + 1) * sizeof(*cps));
    int32_t *offs = malloc((len + 1) * sizeof(*offs));
    struct ivec a = {0}, b = {0};
    if (!cps || !offs) {
        out->oom = true;
        goto out_free;
    }
    size_t n = 0;
    for (size_t i = 0; i < len; n++) {
        offs[n] = (int32_t)i;
        i += (size_t)lm_vocab_utf8_decode(text + i, len - i, &cps[n]);
    }
    offs[n] = (int32_t)len;
    lm_vocab_ivec_push(&a, 0);
    lm_vocab_ivec_push(&a, (int32_t)n);
    for (int r = 0; r < v->n_pre_rx; r++) {
        b.n = 0;
        split_pieces(v->pre_rx[r], cps, &a, &b);
        struct ivec t = a;
        a = b;
        b = t;
    }
    if (a.oom || b.oom) {
        out->oom = true;
        goto out_free;
    }
    for (size_t k = 0; k + 1 < a.n; k += 2) {
        lm_vocab_ivec_push(out, offs[a.data[k]]);
        lm_vocab_ivec_push(out, offs[a.data[k + 1]]);
    }

out_free:
    free(a.data);
    free(b.data);
    free(cps);
    free(offs);
}
