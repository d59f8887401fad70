/* fuzz_train.c - fuzz target for the files training reads: a model to
 * finetune (`lamina finetune -m`) and a checkpoint to resume
 * (`lamina train --resume`): lm_gguf_open_memory, lm_train_model_read,
 * lm_vocab_load and lm_trainer_read_state.
 *
 * An input is a whole GGUF file. Promises checked (abort() when broken): a
 * refused model gets an error status, no model and a message; an accepted
 * one has hyperparameters that pass lm_train_hparams_check, no more weights
 * than the file holds elements (plus a tied output), and a trainer (batch 1,
 * 2 tokens) can be made for it and read the file's optimizer state, which it
 * accepts or refuses with a message. lm_fuzz_expect (replay): seeds named
 * "ok-*" must be accepted as checkpoints, "bad-*" refused as models.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "gguf/gguf.h"
#include "train/trainer.h"
#include "vocab/vocab.h"

#define REQUIRE(c)                                                                                                \
    do {                                                                                                          \
        if (!(c)) {                                                                                               \
            fprintf(stderr, "fuzz_train: %s:%d: broken promise: %s\n", __FILE__, __LINE__, #c);                    \
            abort();                                                                                              \
        }                                                                                                         \
    } while (0)

static bool last_ok;

static void quiet(enum lm_log_level level, const char *text, void *user)
{
    (void)level;
    (void)text;
    (void)user;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    lm_log_set(quiet, NULL);
    last_ok = false;
    struct lm_gguf *g = NULL;
    char err[256] = "";
    if (lm_gguf_open_memory(data, size, &g, err, sizeof err) != LM_OK)
        return 0;
    struct lm_train_model *m = NULL;
    lm_status st = lm_train_model_read(g, &m, err, sizeof err);
    if (st) {
        REQUIRE(m == NULL && err[0]);
        lm_gguf_close(g);
        return 0;
    }
    REQUIRE(m && lm_train_hparams_check(&m->hp, NULL, 0) == LM_OK);
    double elems = 0;
    for (int64_t i = 0; i < lm_gguf_n_tensors(g); i++) {
        const struct lm_gguf_tensor_info *ti = lm_gguf_tensor_info(g, i);
        elems += (double)ti->ne[0] * (double)ti->ne[1] * (double)ti->ne[2] * (double)ti->ne[3];
    }
    REQUIRE((double)m->n_elements <= elems + (double)m->hp.n_embd * m->hp.n_vocab);
    struct lm_vocab *v = NULL;
    if (lm_vocab_load(g, &v, err, sizeof err) == LM_OK)
        lm_vocab_free(v);
    struct lm_trainer_params p = lm_trainer_default_params();
    p.batch = 1;
    p.ctx = 2;
    struct lm_trainer *tr = NULL;
    if (lm_trainer_new(m, &p, &tr, err, sizeof err) == LM_OK) {
        err[0] = 0;
        st = lm_trainer_read_state(tr, g, err, sizeof err);
        REQUIRE(st == LM_OK || err[0]);
        last_ok = st == LM_OK;
        lm_trainer_free(tr);
    }
    lm_train_model_free(m);
    lm_gguf_close(g);
    return 0;
}

/* replay_main.c: seeds named ok-* must be accepted checkpoints, bad-* refused. */
bool lm_fuzz_expect(const char *base, const uint8_t *data, size_t size)
{
    (void)data, (void)size;
    if (!strncmp(base, "ok-", 3))
        return last_ok;
    if (!strncmp(base, "bad-", 4))
        return !last_ok;
    return true;
}
