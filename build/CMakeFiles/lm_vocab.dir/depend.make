# Empty dependencies file for lm_vocab.
# This may be replaced when dependencies are built.
