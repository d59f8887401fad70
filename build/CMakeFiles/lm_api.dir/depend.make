# Empty dependencies file for lm_api.
# This may be replaced when dependencies are built.
