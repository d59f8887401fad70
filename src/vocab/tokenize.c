/* tokenize.c - lm_vocab_tokenize (special-token partitioning, then SPM, BPE
 * or WPM per raw fragment) and lm_vocab_token_to_piece, with b1892's
 * contracts.
 *
 * Partitioning: the text becomes a list of fragments, each raw text or one
 * special token. For each special token, longest text first, every raw
 * fragment is split at each leftmost non-overlapping occurrence. b1892 walked
 * its special-token cache in hash order; longest-first makes the result
 * deterministic when one special text contains another.
 * Which tokens: USER_DEFINED ones always (as Hugging Face and later
 * llama.cpp do: MPT's runs-of-spaces tokens need it); CONTROL and UNKNOWN
 * ones only with special=true. b1892 matched none with special=false.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memmem */
#endif
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "vocab/unicode.h"
#include "vocab/vocab_internal.h"

struct frag {
    int32_t id;       /* -1: raw text */
    int32_t off, len; /* raw text: bytes of the input */
};

struct frags {
    struct frag *a;
    size_t n, cap;
    bool oom;
};

static void frag_push(struct frags *f, struct frag x)
{
    if (f->n == f->cap) {
        size_t nc = f->cap ? f->cap * 2 : 16;
        struct frag *na = realloc(f->a, nc * sizeof(*na));
        if (!na) {
            f->oom = true;
            return;
        }
        f->a = na;
        f->cap = nc;
    }
    f->a[f->n++] = x;
}

/* Split the raw fragments of *f at every occurrence of special token id. */
static void split_on(const char *text, const struct vocab_token *tok, int32_t id, struct frags *f)
{
    struct frags g = {0};
    for (size_t i = 0; i < f->n; i++) {
        struct frag x = f->a[i];
        if (x.id >= 0) {
            frag_push(&g, x);
            continue;
        }
        const char *p = text + x.off, *end = text + x.off + x.len;
        while (p < end) {
            const char *hit = memmem(p, (size_t)(end - p), tok->text, tok->len);
            if (!hit) {
                break;
            }
            if (hit > p) {
                frag_push(&g, (struct frag){-1, (int32_t)(p - text), (int32_t)(hit - p)});
            }
            frag_push(&g, (struct frag){id, 0, 0});
            p = hit + tok->len;
        }
        if (p < end) {
            frag_push(&g, (struct frag){-1, (int32_t)(p - text), (int32_t)(end - p)});
        }
    }
    free(f->a);
    g.oom |= f->oom;
    *f = g;
}

static void partition(const struct lm_vocab *v, const char *text, int32_t len, bool special, struct frags *f)
{
    for (int32_t s = 0; s < v->n_specials && !f->oom; s++) {
        const struct vocab_token *tok = &v->tokens[v->specials[s]];
        if (!special && tok->type != LM_TOKEN_USER_DEFINED) {
            continue;
        }
        if (memmem(text, (size_t)len, tok->text, tok->len)) {
            split_on(text, tok, v->specials[s], f);
        }
    }
}

int32_t lm_vocab_tokenize(const struct lm_vocab *v, const char *text, int32_t text_len, int32_t *tokens, int32_t n_max,
                          bool add_bos, bool special)
{
    if (!v || text_len < 0 || n_max < 0 || (!text && text_len > 0) || (!tokens && n_max > 0)) {
        return 0;
    }
    struct ivec out = {0};
    struct frags f = {0};
    if (add_bos && v->bos >= 0) {
        lm_vocab_ivec_push(&out, v->bos);
    }
    if (text_len > 0) {
        frag_push(&f, (struct frag){-1, 0, text_len});
        partition(v, text, text_len, special, &f);
    }
    for (size_t i = 0; i < f.n; i++) {
        const struct frag *x = &f.a[i];
        if (x->id >= 0) {
            lm_vocab_ivec_push(&out, x->id);
        } else if (v->type == LM_VOCAB_SPM) {
            lm_vocab_spm_tokenize(v, text + x->off, (size_t)x->len, i == 0, &out);
        } else if (v->type == LM_VOCAB_BPE) {
            lm_vocab_bpe_tokenize(v, text + x->off, (size_t)x->len, &out);
        } else {
            lm_vocab_wpm_tokenize(v, text + x->off, (size_t)x->len, &out);
        }
    }
    /* BERT input is [CLS] text [SEP] (HF's add_special_tokens, later
     * llama.cpp's add_special) */
    int32_t sep = v->sep >= 0 ? v->sep : v->eos;
    if (add_bos && v->type == LM_VOCAB_WPM && sep >= 0) {
        lm_vocab_ivec_push(&out, sep);
    }
    int32_t ret;
    if (out.oom || f.oom) {
        LM_LOG_ERR("vocab: out of memory (or a word too large) tokenizing %d bytes\n", (int)text_len);
        ret = 0;
    } else if (out.n > (size_t)INT32_MAX) {
        ret = -INT32_MAX;
    } else if (out.n > (size_t)n_max) {
        ret = -(int32_t)out.n;
    } else {
        if (out.n) {
            memcpy(tokens, out.data, out.n * sizeof(*tokens));
        }
        ret = (int32_t)out.n;
    }
    free(out.data);
    free(f.a);
    return ret;
}

/* Copy n bytes if they fit: returns n, or -n when len is too small. */
static int32_t put_piece(const char *s, size_t n, char *buf, int32_t len)
{
    if (n > (size_t)INT32_MAX) {
        return 0;
    }
    if (len < (int32_t)n) {
        return -(int32_t)n;
    }
    if (n) {
        memcpy(buf, s, n);
    }
    return (int32_t)n;
}

/* SPM and WPM normal token: the text with U+2581 as ' '. */
static int32_t spm_normal_piece(const struct vocab_token *t, char *buf, int32_t len)
{
    size_t n = 0;
    for (size_t i = 0; i < t->len; n++) {
        i += (i + 3 <= t->len && memcmp(t->text + i, "\xe2\x96\x81", 3) == 0) ? 3 : 1;
    }
    if (n > (size_t)INT32_MAX) {
        return 0;
    }
    if (len < (int32_t)n) {
        return -(int32_t)n;
    }
    size_t o = 0;
    for (size_t i = 0; i < t->len;) {
        if (i + 3 <= t->len && memcmp(t->text + i, "\xe2\x96\x81", 3) == 0) {
            buf[o++] = ' ';
            i += 3;
        } else {
            buf[o++] = t->text[i++];
        }
    }
    return (int32_t)n;
}

/* Decode a BPE token text into buf (NULL: only count): each code point of
 * GPT-2's byte alphabet back to its byte; other code points (b1892 would
 * throw) and invalid bytes are kept as they are. Returns the byte count. */
static size_t bpe_decode(const struct vocab_token *t, char *buf)
{
    size_t o = 0;
    for (size_t i = 0; i < t->len;) {
        uint32_t cp;
        int l = lm_vocab_utf8_decode(t->text + i, t->len - i, &cp);
        int b = cp == LM_UNI_INVALID ? -1 : lm_vocab_cp_to_byte(cp);
        if (b >= 0) {
            if (buf) {
                buf[o] = (char)b;
            }
            o++;
        } else {
            if (buf) {
                memcpy(buf + o, t->text + i, (size_t)l);
            }
            o += (size_t)l;
        }
        i += (size_t)l;
    }
    return o;
}

static int32_t bpe_normal_piece(const struct vocab_token *t, char *buf, int32_t len)
{
    size_t n = bpe_decode(t, NULL);
    if (n > (size_t)INT32_MAX) {
        return 0;
    }
    if (len < (int32_t)n) {
        return -(int32_t)n;
    }
    bpe_decode(t, buf);
    return (int32_t)n;
}

int32_t lm_vocab_token_to_piece(const struct lm_vocab *v, int32_t token, char *buf, int32_t len)
{
    if (!v || token < 0 || token >= v->n_tokens || len < 0 || (!buf && len > 0)) {
        return 0;
    }
    const struct vocab_token *t = &v->tokens[token];
    if (v->type == LM_VOCAB_SPM) {
        switch (t->type) {
        case LM_TOKEN_NORMAL: return spm_normal_piece(t, buf, len);
        case LM_TOKEN_UNKNOWN: return put_piece("\xe2\x96\x85", 3, buf, len); /* U+2585 */
        case LM_TOKEN_BYTE: {
            int b = lm_vocab_parse_byte_token(t->text, t->len);
            char c = (char)b;
            return b < 0 ? 0 : put_piece(&c, 1, buf, len);
        }
        case LM_TOKEN_USER_DEFINED: return put_piece(t->text, t->len, buf, len);
        default: return 0; /* control, unused, undefined: "" as in b1892 */
        }
    }
    if (v->type == LM_VOCAB_WPM) {
        /* unk stands for a whole word: a word start like the U+2581 pieces.
         * BERT files give [UNK] the type CONTROL, so go by the id. */
        if (token == v->unk || t->type == LM_TOKEN_UNKNOWN) {
            return put_piece(" \xe2\x96\x85", 4, buf, len); /* " " U+2585 */
        }
        switch (t->type) {
        case LM_TOKEN_NORMAL: return spm_normal_piece(t, buf, len);
        case LM_TOKEN_USER_DEFINED: return put_piece(t->text, t->len, buf, len);
        default: return 0;
        }
    }
    switch (t->type) {
    case LM_TOKEN_NORMAL: return bpe_normal_piece(t, buf, len);
    case LM_TOKEN_USER_DEFINED: return put_piece(t->text, t->len, buf, len);
    default: return 0;
    }
}
