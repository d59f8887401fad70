/* fuzz_imatrix.c - fuzz target for importance-matrix files (lm_imatrix_parse,
 * what `lamina quantize --imatrix` and llama_model_quantize read).
 *
 * An input is a whole imatrix.dat file. Promises checked (abort() when
 * broken): a refused file gets LM_ERR_CORRUPT, no set and a message; an
 * accepted one has entries within the documented invariants (names 1..63
 * bytes, ncall >= 0, values finite and >= 0), writes back to exactly the input
 * bytes (the file round-trips), and can be checked against stories260K
 * without crashing. lm_fuzz_expect (replay): seeds named "ok-*" must be
 * accepted, "bad-*" refused.
 */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "model/imatrix.h"

#define REQUIRE(c)                                                                                                \
    do {                                                                                                          \
        if (!(c)) {                                                                                               \
            fprintf(stderr, "fuzz_imatrix: %s:%d: broken promise: %s\n", __FILE__, __LINE__, #c);                  \
            abort();                                                                                              \
        }                                                                                                         \
    } while (0)

static struct lm_gguf *model;
static char out_path[256];
static bool last_ok;

static void once(void)
{
    char err[256];
    if (out_path[0])
        return;
    snprintf(out_path, sizeof out_path, "/tmp/lm_fuzz_imatrix_%d.dat", (int)getpid());
    if (lm_gguf_open(LM_SHARED_DIR "/models/stories260K.gguf", &model, err, sizeof err) != LM_OK)
        model = NULL; /* the check is skipped without the model */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    once();
    struct lm_imatrix *im = NULL;
    char err[256] = "";
    lm_status st = lm_imatrix_parse(data, size, &im, err, sizeof err);
    last_ok = st == LM_OK;
    if (st) {
        REQUIRE(st == LM_ERR_CORRUPT && im == NULL && err[0]);
        return 0;
    }
    REQUIRE(im && lm_imatrix_n_entries(im) >= 1);
    for (int64_t i = 0; i < lm_imatrix_n_entries(im); i++) {
        struct lm_imatrix_entry e;
        REQUIRE(lm_imatrix_entry(im, i, &e));
        size_t len = strlen(e.name);
        REQUIRE(len >= 1 && len < 64 && e.ncall >= 0 && e.n_values >= 1);
        for (int32_t j = 0; j < e.n_values; j++)
            REQUIRE(isfinite(e.values[j]) && e.values[j] >= 0.0f);
        REQUIRE(lm_imatrix_find(im, e.name) == i);
    }
    REQUIRE(lm_imatrix_write(im, out_path, err, sizeof err) == LM_OK);
    FILE *f = fopen(out_path, "rb");
    REQUIRE(f);
    uint8_t *back = malloc(size + 1);
    size_t n = fread(back, 1, size + 1, f);
    fclose(f);
    unlink(out_path);
    REQUIRE(n == size && !memcmp(back, data, size));
    free(back);
    if (model)
        (void)lm_imatrix_check(im, model, err, sizeof err);
    lm_imatrix_free(im);
    return 0;
}

bool lm_fuzz_expect(const char *base, const uint8_t *data, size_t size)
{
    (void)data, (void)size;
    if (!strncmp(base, "ok-", 3))
        return last_ok;
    if (!strncmp(base, "bad-", 4))
        return !last_ok;
    return true;
}
