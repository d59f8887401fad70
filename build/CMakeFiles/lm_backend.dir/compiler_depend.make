# Empty compiler generated dependencies file for lm_backend.
# This may be replaced when dependencies are built.
