/* wpm.c - WordPiece, the BERT tokenizer (tokenizer.ggml.model = "bert").
 *
 * b1892 had no WordPiece. We follow Hugging Face's BertTokenizerFast
 * (BertNormalizer, BertPreTokenizer, WordPiece), which made the test vectors.
 * For each raw fragment:
 *   1. Clean: drop NUL, U+FFFD, bytes that are not UTF-8 and every C* code
 *      point except \t \n \r; those three and White_Space end a word.
 *   2. Fold each code point (lm_vocab_uni_bert_fold): NFD, drop Mn,
 *      lowercase. "Äpfel" becomes "apfel", a Hangul syllable its jamo.
 *   3. Pre-tokenize: each punctuation character (ASCII punctuation or P*) and
 *      each CJK ideograph is a word of its own; the rest runs up to the next
 *      break.
 *   4. Each word of at most WPM_MAX_CHARS characters is cut greedily from
 *      the left, longest piece first. The first piece is looked up as
 *      U+2581 + text and later ones as plain text: the GGUF converter wrote
 *      word starts with a U+2581 in front and HF's "##x" pieces as "x". If
 *      some position has no piece, or the word is longer, the whole word
 *      becomes one unk (nothing when the vocab has no unk).
 * Cost: linear in the input. A word is kept in a fixed buffer (at most
 * WPM_MAX_CHARS characters; the rest of a longer word is only counted), and
 * each position tries only the ends that fit in the longest token's bytes.
 * Thread-safe: the state is on the stack.
 */
#include <string.h>

#include "vocab/unicode.h"
#include "vocab/vocab_internal.h"

#define WPM_MAX_CHARS 100       /* HF's max_input_chars_per_word */
#define WPM_MARK "\xe2\x96\x81" /* U+2581, in front of word-start pieces */

struct word {
    int n;                           /* characters kept */
    bool too_long;                   /* more than WPM_MAX_CHARS */
    uint16_t end[WPM_MAX_CHARS + 1]; /* end[i]: byte offset in buf after i characters; end[0] = 3 */
    char buf[3 + 4 * WPM_MAX_CHARS]; /* WPM_MARK, then the word in UTF-8 */
};

static void word_add(struct word *w, uint32_t cp)
{
    if (w->n == WPM_MAX_CHARS) {
        w->too_long = true;
        return;
    }
    int l = lm_vocab_utf8_encode(cp, w->buf + w->end[w->n]);
    w->end[w->n + 1] = (uint16_t)(w->end[w->n] + l);
    w->n++;
}

/* The pieces of the word (or unk), appended to out; the word is emptied. */
static void word_flush(const struct lm_vocab *v, struct word *w, struct ivec *out)
{
    if (w->n == 0 && !w->too_long) {
        return;
    }
    size_t mark = out->n;
    bool ok = !w->too_long;
    int hi = 0; /* the last end whose piece fits in max_token_len bytes */
    for (int s = 0; ok && s < w->n;) {
        uint32_t from = s == 0 ? 0 : w->end[s]; /* the first piece takes the mark */
        if (hi < s) {
            hi = s;
        }
        while (hi < w->n && w->end[hi + 1] - from <= v->max_token_len) {
            hi++;
        }
        int32_t id = -1;
        int e = hi;
        while (e > s && (id = lm_vocab_strmap_get(&v->tok_map, w->buf + from, w->end[e] - from)) < 0) {
            e--;
        }
        if (e == s) {
            ok = false;
        } else {
            lm_vocab_ivec_push(out, id);
            s = e;
        }
    }
    if (!ok) {
        out->n = mark; /* drop the pieces of a word that did not work out */
        if (v->unk >= 0) {
            lm_vocab_ivec_push(out, v->unk);
        }
    }
    w->n = 0;
    w->too_long = false;
}

static bool is_punct(uint32_t cp)
{
    if (cp < 0x80) {
        return (cp >= 33 && cp <= 47) || (cp >= 58 && cp <= 64) || (cp >= 91 && cp <= 96) || (cp >= 123 && cp <= 126);
    }
    return lm_vocab_uni_cat(cp) == LM_UNI_PUNCT;
}

/* The "Chinese characters" of BERT: the CJK ideograph blocks. */
static bool is_cjk(uint32_t cp)
{
    return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) || (cp >= 0x20000 && cp <= 0x2A6DF) ||
           (cp >= 0x2A700 && cp <= 0x2B73F) || (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B920 && cp <= 0x2CEAF) ||
           (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

/* What the cleaner does with a code point (step 1). */
enum clean { KEEP, DROP, BREAK };

static enum clean clean(uint32_t cp)
{
    if (cp == '\t' || cp == '\n' || cp == '\r') {
        return BREAK;
    }
    if (cp == LM_UNI_INVALID || cp == 0 || cp == 0xFFFD) {
        return DROP;
    }
    unsigned f = lm_vocab_uni_flags(cp);
    if ((f & LM_UNI_CAT_MASK) == LM_UNI_OTHER) {
        return DROP; /* \v, \f and U+0085 too: C* goes before White_Space */
    }
    return f & LM_UNI_WHITESPACE ? BREAK : KEEP;
}

void lm_vocab_wpm_tokenize(const struct lm_vocab *v, const char *text, size_t len, struct ivec *out)
{
    struct word w;
    w.n = 0;
    w.too_long = false;
    w.end[0] = 3;
    memcpy(w.buf, WPM_MARK, 3);
    for (size_t i = 0; i < len;) {
        uint32_t cp, f[3];
        i += (size_t)lm_vocab_utf8_decode(text + i, len - i, &cp);
        enum clean c = clean(cp);
        if (c == BREAK) {
            word_flush(v, &w, out);
        }
        if (c != KEEP) {
            continue;
        }
        int nf = lm_vocab_uni_bert_fold(cp, f);
        for (int k = 0; k < nf; k++) {
            if (is_punct(f[k]) || is_cjk(f[k])) {
                word_flush(v, &w, out);
                word_add(&w, f[k]);
                word_flush(v, &w, out);
            } else {
                word_add(&w, f[k]);
            }
        }
    }
    word_flush(v, &w, out);
}
