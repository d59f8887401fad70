# Empty dependencies file for lm_model.
# This may be replaced when dependencies are built.
