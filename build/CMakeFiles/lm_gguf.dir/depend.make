# Empty dependencies file for lm_gguf.
# This may be replaced when dependencies are built.
