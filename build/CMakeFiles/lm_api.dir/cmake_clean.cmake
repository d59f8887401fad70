file(REMOVE_RECURSE
  "CMakeFiles/lm_api.dir/src/core/empty.c.o"
  "CMakeFiles/lm_api.dir/src/core/empty.c.o.d"
  "liblm_api.a"
  "liblm_api.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/lm_api.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
