/* lora_file.c - write a trained LoRA adapter in llama.cpp b1892's 'ggla'
 * format (version 1), the format llama_model_apply_lora_from_file and
 * `lamina run --lora` read (model/lora.h has the layout).
 *
 * The training model holds A as [n_in, r] (rows of n_in: what MUL_MAT needs
 * to compute A x) and B as [r, n_out]. The file wants "<w>.loraA" with
 * ne [r, n_in] and "<w>.loraB" with ne [r, n_out] such that
 * delta W[j][i] = sum_k A[i][k] B[j][k]: A is written transposed, B as is.
 * alpha is stored as an integer, as the format has it, so the trainer's alpha
 * must be a whole number (lamina finetune checks it).
 */
#include "train/lora_file.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/trainer.h"

static bool put_i32(FILE *f, int32_t v)
{
    return fwrite(&v, sizeof v, 1, f) == 1;
}

static bool put_tensor(FILE *f, const char *name, int64_t ne0, int64_t ne1, const float *data)
{
    int32_t nlen = (int32_t)strlen(name);
    bool ok = put_i32(f, 2) && put_i32(f, nlen) && put_i32(f, 0) && put_i32(f, (int32_t)ne0) &&
              put_i32(f, (int32_t)ne1) && fwrite(name, 1, (size_t)nlen, f) == (size_t)nlen;
    long pos = ok ? ftell(f) : -1;
    if (pos < 0)
        return false;
    static const char zeros[32];
    size_t pad = (size_t)((32 - pos % 32) % 32);
    return fwrite(zeros, 1, pad, f) == pad && fwrite(data, sizeof(float), (size_t)(ne0 * ne1), f) == (size_t)(ne0 * ne1);
}

lm_status lm_train_lora_write(const struct lm_train_model *m, const char *path)
{
    if (!m->lora_ctx || m->lora_alpha != floorf(m->lora_alpha) || m->lora_alpha > 1e9f)
        return LM_ERR_INVALID_ARG;
    char *tmp = lm_train_tmp_path(path);
    if (!tmp)
        return LM_ERR_NOMEM;
    FILE *f = fopen(tmp, "wb");
    lm_status st = f ? LM_OK : LM_ERR_IO;
    if (!st && !(put_i32(f, 0x67676c61) && put_i32(f, 1) && put_i32(f, m->lora_rank) &&
                 put_i32(f, (int32_t)m->lora_alpha)))
        st = LM_ERR_IO;
    float *at = NULL;
    for (int il = 0; il < m->hp.n_layer && !st; il++) {
        const struct lm_train_layer *l = &m->layers[il];
        for (int t = 0; t < LM_LORA_COUNT && !st; t++) {
            const struct lm_tensor *a = l->lora_a[t], *b = l->lora_b[t];
            if (!a)
                continue;
            const int64_t n_in = a->ne[0], r = a->ne[1];
            float *na = realloc(at, (size_t)(n_in * r) * sizeof(float));
            if (!na) {
                st = LM_ERR_NOMEM;
                break;
            }
            at = na;
            const float *ad = a->data;
            for (int64_t i = 0; i < n_in; i++) /* file A[i][k] = model A[k][i] */
                for (int64_t k = 0; k < r; k++)
                    at[i * r + k] = ad[k * n_in + i];
            if (!put_tensor(f, a->name, r, n_in, at) || !put_tensor(f, b->name, r, b->ne[1], b->data))
                st = LM_ERR_IO;
        }
    }
    free(at);
    if (f && fclose(f) != 0 && !st)
        st = LM_ERR_IO;
    if (!st && rename(tmp, path) != 0)
        st = LM_ERR_IO;
    if (st)
        remove(tmp);
    free(tmp);
    return st;
}
