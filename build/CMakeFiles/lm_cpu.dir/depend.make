# Empty dependencies file for lm_cpu.
# This may be replaced when dependencies are built.
