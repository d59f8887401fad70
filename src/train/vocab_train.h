/* vocab_train.h - learn a SentencePiece-style BPE vocabulary with byte
 * fallback from training text, and store it as llama.cpp stores an SPM
 * ("llama") vocabulary, so that src/vocab/spm.c and llama.cpp load it and
 * tokenize with it.
 *
 * The text is seen as the SPM tokenizer sees it: every document gets a
 * leading U+2581 ("▁", add_space_prefix) and every ' ' becomes U+2581. It is
 * cut into words: a word is a ▁ and the characters up to the next ▁ or
 * newline; a run of '\n' is a word of its own, and the text after it starts
 * a word without ▁. Pieces never cross a word boundary, so the tokenizer,
 * which merges by piece score over the whole text, tokenizes word by word
 * too. Then standard BPE over the distinct words: count the adjacent symbol
 * pairs, merge the most frequent pair (ties: the pair whose left, then right
 * piece text is smaller, byte-wise), update the counts of the words that
 * held it, repeat. Deterministic: the result depends on the text only.
 *
 * Layout of the vocab (that of llama2's tokenizer.model, see
 * docs/training.md): 0 <unk> (UNKNOWN), 1 <s>, 2 </s> (CONTROL),
 * 3..258 <0x00>..<0xFF> (BYTE), all with score 0; then the pieces, NORMAL:
 * first the learned merges in the order they were learned, then the single
 * characters seen at least min_char_count times, most frequent first. Piece
 * k (k = 0, 1, ...) has score -k, so spm.c's "merge the pair whose piece has
 * the highest score" replays the merges in their learned order. Characters
 * not in the vocab are encoded as their bytes (<0xNN>).
 *
 * Workload: a few MB of text, a vocab of a few thousand; one core, well
 * under a second (3.5 MB, n_vocab 4096: 0.15 s). Training keeps no global
 * state (calls in different threads are fine); a trained vocab is immutable
 * and its getters are thread-safe.
 */
#ifndef LM_TRAIN_VOCAB_TRAIN_H
#define LM_TRAIN_VOCAB_TRAIN_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

struct lm_gguf_writer;
struct lm_vocab;
struct lm_trained_vocab;

/* The smallest and largest n_vocab: the 3 specials, the 256 bytes and at
 * least one piece; llama2's size. */
#define LM_VOCAB_TRAIN_MIN_VOCAB 260
#define LM_VOCAB_TRAIN_MAX_VOCAB 32000

/* Ids of the fixed tokens. */
#define LM_VOCAB_TRAIN_UNK 0
#define LM_VOCAB_TRAIN_BOS 1
#define LM_VOCAB_TRAIN_EOS 2
#define LM_VOCAB_TRAIN_BYTE0 3 /* <0x00>; <0xNN> is BYTE0 + NN */
#define LM_VOCAB_TRAIN_FIRST_PIECE 259

struct lm_vocab_train_params {
    int32_t n_vocab;         /* tokens in all, LM_VOCAB_TRAIN_MIN_VOCAB..LM_VOCAB_TRAIN_MAX_VOCAB */
    int32_t min_char_count;  /* a character becomes a piece when seen this often (>= 1) */
    int32_t max_piece_chars; /* longest piece in characters (>= 2; SentencePiece's default is 16) */
};

/* n_vocab 4096, min_char_count 2, max_piece_chars 16. */
struct lm_vocab_train_params lm_vocab_train_default_params(void);

/* Train on n_docs documents docs[i][0..lens[i]) (any bytes; a byte that is not
 * part of valid UTF-8 is never a piece and is always byte-encoded). Returns
 * LM_ERR_INVALID_ARG with a message in err for bad params, no text, or text
 * too small to fill n_vocab (fewer distinct characters and pairs than needed;
 * the message says how many tokens it could make); LM_ERR_NOMEM. When there
 * are more characters than room, the most frequent ones are kept and no merge
 * is learned. On success *out is a new vocab of exactly p->n_vocab tokens; the
 * caller frees it with lm_trained_vocab_free(). */
lm_status lm_vocab_train(const char *const *docs, const size_t *lens, size_t n_docs,
                         const struct lm_vocab_train_params *p, struct lm_trained_vocab **out, char *err,
                         size_t err_size);

void lm_trained_vocab_free(struct lm_trained_vocab *v); /* NULL: nothing */

/* ---- getters (safe for any id; thread-safe) ---- */
int32_t lm_trained_vocab_n_vocab(const struct lm_trained_vocab *v);
/* Token text (NUL-terminated) and its byte length; "" for a bad id. */
const char *lm_trained_vocab_text(const struct lm_trained_vocab *v, int32_t id, size_t *len);
float lm_trained_vocab_score(const struct lm_trained_vocab *v, int32_t id);  /* 0 for a bad id */
int32_t lm_trained_vocab_type(const struct lm_trained_vocab *v, int32_t id); /* enum lm_token_type; 0 bad id */
/* The learned merges, in order: merge r joins the pieces left and right into
 * result (token ids). result repeats an earlier merge's result when two
 * splits of one text were learned (then no new token was made), so
 * n_merges >= the number of merge pieces. Returns -1 when r is out of range. */
int32_t lm_trained_vocab_n_merges(const struct lm_trained_vocab *v);
int lm_trained_vocab_merge(const struct lm_trained_vocab *v, int32_t r, int32_t *left, int32_t *right, int32_t *result);

/* Add the tokenizer keys to a GGUF writer, as llama.cpp's converter writes a
 * llama2 (SentencePiece) vocab: tokenizer.ggml.model "llama", .pre "default",
 * .tokens, .scores, .token_type, .bos_token_id 1, .eos_token_id 2,
 * .unknown_token_id 0, .add_bos_token true, .add_eos_token false. The
 * model's own keys (general.architecture, llama.vocab_size, ...) are the
 * caller's. */
lm_status lm_trained_vocab_write_kv(const struct lm_trained_vocab *v, struct lm_gguf_writer *w);

/* Write a vocab-only GGUF file (general.architecture "llama", general.name
 * `name` or "lamina-vocab" when NULL, and the keys above) that
 * llama_load_model_from_file loads with vocab_only = true. */
lm_status lm_trained_vocab_write_file(const struct lm_trained_vocab *v, const char *name, const char *path);

/* A lamina tokenizer (src/vocab) with this vocab, freed with lm_vocab_free(). */
lm_status lm_trained_vocab_to_vocab(const struct lm_trained_vocab *v, struct lm_vocab **out, char *err,
                                    size_t err_size);

#endif
