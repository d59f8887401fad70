# Empty dependencies file for lm_quant.
# This may be replaced when dependencies are built.
