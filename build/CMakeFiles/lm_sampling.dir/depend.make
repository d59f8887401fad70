# Empty dependencies file for lm_sampling.
# This may be replaced when dependencies are built.
