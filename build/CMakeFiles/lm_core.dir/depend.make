# Empty dependencies file for lm_core.
# This may be replaced when dependencies are built.
