/* unicode.c - UTF-8 decoding/encoding, code point classes and GPT-2's
 * byte-to-unicode map. See unicode.h for the invariants. */
#include "vocab/unicode.h"

unsigned lm_vocab_uni_flags(uint32_t cp) {
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

int lm_vocab_utf8_decode(const char *s, size_t n, uint32_t *cp) {
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

int lm_vocab_utf8_encode(uint32_t cp, char *out) {
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
static int byte_is_printable(unsigned b) {
    return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
}

uint32_t lm_vocab_byte_to_cp(uint8_t b) {
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

int lm_vocab_cp_to_byte(uint32_t cp) {
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
