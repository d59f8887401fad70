file(REMOVE_RECURSE
  "CMakeFiles/lm_sampling.dir/src/core/empty.c.o"
  "CMakeFiles/lm_sampling.dir/src/core/empty.c.o.d"
  "liblm_sampling.a"
  "liblm_sampling.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/lm_sampling.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
