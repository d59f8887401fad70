# Empty dependencies file for lm_ref.
# This may be replaced when dependencies are built.
