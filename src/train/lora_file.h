/* lora_file.h - save the LoRA tensors of a training model as an adapter
 * file ('ggla' v1, as llama.cpp b1892 reads it; layout in model/lora.h). */
#ifndef LM_TRAIN_LORA_FILE_H
#define LM_TRAIN_LORA_FILE_H

#include "core/status.h"
#include "train/model.h"

/* Writes m's LoRA tensors (lm_train_model_add_lora) to path atomically
 * (temporary file + rename). LM_ERR_INVALID_ARG when m has none or its alpha
 * is not a whole number (the format stores an integer); LM_ERR_IO. */
lm_status lm_train_lora_write(const struct lm_train_model *m, const char *path);

#endif
