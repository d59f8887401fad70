/* unicode.h - UTF-8 and code point classes for the tokenizers (vocab/ only).
 *
 * Decoding never fails: a byte that does not start a valid, shortest-form
 * UTF-8 sequence (or a truncated sequence, or a surrogate or a value above
 * 0x10FFFF) is taken as ONE unit of length 1 whose code point is
 * LM_UNI_INVALID (0xFFFFFFFF). That keeps every byte of the input, so
 * byte-level tokenizers stay lossless on broken text.
 *
 * Classes come from the generated tables in unicode_data.c
 * (scripts/gen_unicode.py); all functions are pure and thread-safe.
 */
#ifndef LM_VOCAB_UNICODE_H
#define LM_VOCAB_UNICODE_H

#include <stddef.h>
#include <stdint.h>

#define LM_UNI_INVALID 0xFFFFFFFFu

/* Major general categories (flag bits 0-2). */
enum {
    LM_UNI_OTHER = 0, /* C*: control, format, surrogate, private use, unassigned */
    LM_UNI_LETTER = 1,
    LM_UNI_MARK = 2,
    LM_UNI_NUMBER = 3,
    LM_UNI_PUNCT = 4,
    LM_UNI_SYMBOL = 5,
    LM_UNI_SEPARATOR = 6,
};
#define LM_UNI_CAT_MASK 7u
#define LM_UNI_WHITESPACE 8u /* the White_Space property (regex \s) */

extern const char lm_vocab_uni_version[];
extern const uint8_t lm_vocab_uni_latin1[256];
extern const uint32_t lm_vocab_uni_n_runs;
extern const uint32_t lm_vocab_uni_runs[];

/* Flags of a code point (category | LM_UNI_WHITESPACE); LM_UNI_OTHER for
 * LM_UNI_INVALID and anything above 0x10FFFF. */
unsigned lm_vocab_uni_flags(uint32_t cp);

static inline unsigned lm_vocab_uni_cat(uint32_t cp) { return lm_vocab_uni_flags(cp) & LM_UNI_CAT_MASK; }

/* Decode one unit at s[0..n) (n >= 1): returns its byte length (1..4) and
 * writes the code point (or LM_UNI_INVALID) to *cp. */
int lm_vocab_utf8_decode(const char *s, size_t n, uint32_t *cp);

/* Byte length of the unit starting at s[0..n), n >= 1 (same rule as decode). */
static inline int lm_vocab_utf8_len(const char *s, size_t n) {
    uint32_t cp;
    return lm_vocab_utf8_decode(s, n, &cp);
}

/* Encode cp (<= 0x10FFFF) into out (4 bytes of room); returns the length,
 * or 0 for an invalid code point. */
int lm_vocab_utf8_encode(uint32_t cp, char *out);

/* GPT-2's byte-level map: the code point that stands for byte b, and back
 * (-1 when cp stands for no byte). */
uint32_t lm_vocab_byte_to_cp(uint8_t b);
int lm_vocab_cp_to_byte(uint32_t cp);

#endif
