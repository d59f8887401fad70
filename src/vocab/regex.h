/* regex.h - a small Unicode-aware regex engine for pre-tokenizer patterns
 * (vocab/ only).
 *
 * It runs on arrays of code points (see unicode.h; LM_UNI_INVALID stands for
 * a byte that is not valid UTF-8 and belongs to no class but negated ones).
 * Supported syntax, which covers the split patterns of the BPE models we know:
 *   literals (UTF-8), escapes \r \n \t \f \v \0 \xHH \x{H..} and \<punct>;
 *   \s \S (White_Space), \p{X} \P{X} with X one of L M N P S Z C;
 *   classes [...] / [^...] with ranges and the escapes above;
 *   groups (?:...), alternation |, anchors ^ $ (start/end of the piece);
 *   lookahead (?=...) and (?!...);
 *   greedy quantifiers ? * + {m} {m,} {m,n} on a single literal or class.
 * Anything else (captures, lazy quantifiers, quantified groups, backrefs,
 * '.') is refused at compile time with a message.
 *
 * Matching is backtracking with leftmost-first alternation (as PCRE and
 * Oniguruma do). Its recursion depth is bounded by the size of the pattern,
 * not by the text, because repeats of a single class iterate.
 *
 * Thread-safety: a compiled regex is immutable; matching is reentrant.
 */
#ifndef LM_VOCAB_REGEX_H
#define LM_VOCAB_REGEX_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

struct lm_vocab_regex;

/* Compile a NUL-terminated UTF-8 pattern. On failure *out is untouched and a
 * message goes to err. The caller frees with lm_vocab_regex_free(). */
lm_status lm_vocab_regex_compile(const char *pattern, struct lm_vocab_regex **out, char *err, size_t err_size);
void lm_vocab_regex_free(struct lm_vocab_regex *re); /* NULL: nothing */

/* Try to match at position pos of cps[0..n) (anchors and lookaheads see only
 * cps[0..n)). Returns the end position of the match (>= pos), or -1. */
int64_t lm_vocab_regex_match_at(const struct lm_vocab_regex *re, const uint32_t *cps, size_t n, size_t pos);

/* The first non-empty match that starts at or after from: returns its end
 * and writes its start, or returns -1. Same semantics as trying
 * lm_vocab_regex_match_at at from, from+1, ... but linear on the runs where
 * a pattern that starts with an unbounded repeat keeps failing. */
int64_t lm_vocab_regex_find(const struct lm_vocab_regex *re, const uint32_t *cps, size_t n, size_t from, size_t *start);

#endif
