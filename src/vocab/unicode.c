/* unicode.c - UTF-8 decoding/encoding, code point classes and GPT-2's
 * byte-to-unicode map. See unicode.h for the invariants. */
#include "vocab/unicode.h"

unsigned lm_vocab_uni_flags(uint32_t cp)
{
    if (cp < 256) {
        return lm_vocab_uni_latin1[cp];
    }
    if (cp > 0x10FFFF) {
        return LM_UNI_OTHER;
    }
    /* the last run whose first code point is <= cp */
    uint32_t lo = 0, hi = lm_vocab_uni_n_runs;
    while (hi - lo > 1) {
        uint32_t mid = lo + (hi - lo) / 2;
        if ((lm_vocab_uni_runs[mid] >> 8) <= cp) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    return lm_vocab_uni_runs[lo] & 0xFFu;
}

int lm_vocab_utf8_decode(const char *s, size_t n, uint32_t *cp)
{
    const unsigned char *u = (const unsigned char *)s;
    unsigned c = u[0];
    int len;
    uint32_t v, min;
    if (c < 0x80) {
        *cp = c;
        return 1;
    } else if ((c & 0xE0) == 0xC0) {
        len = 2, v = c & 0x1F, min = 0x80;
    } else if ((c & 0xF0) == 0xE0) {
        len = 3, v = c & 0x0F, min = 0x800;
    } else if ((c & 0xF8) == 0xF0) {
        len = 4, v = c & 0x07, min = 0x10000;
    } else {
        *cp = LM_UNI_INVALID;
        return 1;
    }
    if ((size_t)len > n) {
        *cp = LM_UNI_INVALID;
        return 1;
    }
    for (int i = 1; i < len; i++) {
        if ((u[i] & 0xC0) != 0x80) {
            *cp = LM_UNI_INVALID;
            return 1;
        }
        v = (v << 6) | (u[i] & 0x3F);
    }
    if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) {
        *cp = LM_UNI_INVALID;
        return 1;
    }
    *cp = v;
    return len;
}

int lm_vocab_utf8_encode(uint32_t cp, char *out)
{
    unsigned char *o = (unsigned char *)out;
    if (cp < 0x80) {
        o[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (unsigned char)(0xC0 | (cp >> 6));
        o[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        if (cp >= 0xD800 && cp <= 0xDFFF) {
            return 0;
        }
        o[0] = (unsigned char)(0xE0 | (cp >> 12));
        o[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    if (cp <= 0x10FFFF) {
        o[0] = (unsigned char)(0xF0 | (cp >> 18));
        o[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
        o[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        o[3] = (unsigned char)(0x80 | (cp & 0x3F));
        return 4;
    }
    return 0;
}

/* GPT-2 keeps the printable Latin-1 bytes ('!'..'~', 0xA1..0xAC, 0xAE..0xFF)
 * as their own code points and numbers the other 68 bytes, in byte order,
 * from U+0100 on. */
static int byte_is_printable(unsigned b) { return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE); }

uint32_t lm_vocab_byte_to_cp(uint8_t b)
{
    if (byte_is_printable(b)) {
        return b;
    }
    /* rank of b among the non-printable bytes */
    unsigned rank;
    if (b <= 0x20) {
        rank = b;
    } else if (b <= 0xA0) {
        rank = 33 + (b - 0x7F);
    } else { /* 0xAD */
        rank = 67;
    }
    return 256 + rank;
}

int lm_vocab_cp_to_byte(uint32_t cp)
{
    if (cp < 256) {
        return byte_is_printable(cp) ? (int)cp : -1;
    }
    if (cp >= 256 + 68) {
        return -1;
    }
    unsigned rank = cp - 256;
    if (rank <= 32) {
        return (int)rank;
    }
    if (rank <= 66) {
        return (int)(0x7F + rank - 33);
    }
    return 0xAD;
}

/* Index of the last row of a sorted table (rows of `stride` uint32, the key
 * first) whose key is <= cp, or -1. */
static int64_t last_at_or_below(const uint32_t *rows, uint32_t n, unsigned stride, uint32_t cp)
{
    int64_t lo = -1, hi = n; /* rows[lo] <= cp < rows[hi] */
    while (hi - lo > 1) {
        int64_t mid = lo + (hi - lo) / 2;
        if (rows[(size_t)mid * stride] <= cp) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    return lo;
}

int lm_vocab_uni_bert_fold(uint32_t cp, uint32_t out[3])
{
    enum { S_BASE = 0xAC00, L_BASE = 0x1100, V_BASE = 0x1161, T_BASE = 0x11A7, T_COUNT = 28, N_COUNT = 588 };
    if (cp < 0x80) { /* ASCII: only A-Z change */
        out[0] = cp >= 'A' && cp <= 'Z' ? cp + 32 : cp;
        return 1;
    }
    if (cp >= S_BASE && cp < S_BASE + 11172) { /* Hangul syllable: the algorithmic NFD */
        uint32_t s = cp - S_BASE;
        out[0] = L_BASE + s / N_COUNT;
        out[1] = V_BASE + s % N_COUNT / T_COUNT;
        out[2] = T_BASE + s % T_COUNT;
        return s % T_COUNT ? 3 : 2;
    }
    int64_t i = last_at_or_below(&lm_vocab_wpm_mn[0][0], lm_vocab_wpm_n_mn, 2, cp);
    if (i >= 0 && cp <= lm_vocab_wpm_mn[i][1]) {
        return 0;
    }
    i = last_at_or_below(&lm_vocab_wpm_fold1[0][0], lm_vocab_wpm_n_fold1, 2, cp);
    if (i >= 0 && lm_vocab_wpm_fold1[i][0] == cp) {
        out[0] = lm_vocab_wpm_fold1[i][1];
        return 1;
    }
    i = last_at_or_below(&lm_vocab_wpm_foldn[0][0], lm_vocab_wpm_n_foldn, 4, cp);
    if (i >= 0 && lm_vocab_wpm_foldn[i][0] == cp) {
        const uint32_t *f = lm_vocab_wpm_foldn[i];
        out[0] = f[1];
        out[1] = f[2];
        out[2] = f[3];
        return f[3] ? 3 : 2;
    }
    out[0] = cp;
    return 1;
}
