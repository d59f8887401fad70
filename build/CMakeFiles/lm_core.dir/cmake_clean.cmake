file(REMOVE_RECURSE
  "CMakeFiles/lm_core.dir/src/core/empty.c.o"
  "CMakeFiles/lm_core.dir/src/core/empty.c.o.d"
  "CMakeFiles/lm_core.dir/src/core/log.c.o"
  "CMakeFiles/lm_core.dir/src/core/log.c.o.d"
  "CMakeFiles/lm_core.dir/src/core/ops.c.o"
  "CMakeFiles/lm_core.dir/src/core/ops.c.o.d"
  "CMakeFiles/lm_core.dir/src/core/status.c.o"
  "CMakeFiles/lm_core.dir/src/core/status.c.o.d"
  "CMakeFiles/lm_core.dir/src/core/tensor.c.o"
  "CMakeFiles/lm_core.dir/src/core/tensor.c.o.d"
  "CMakeFiles/lm_core.dir/src/core/type.c.o"
  "CMakeFiles/lm_core.dir/src/core/type.c.o.d"
  "liblm_core.a"
  "liblm_core.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/lm_core.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
