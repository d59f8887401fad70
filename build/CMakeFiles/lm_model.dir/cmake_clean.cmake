file(REMOVE_RECURSE
  "CMakeFiles/lm_model.dir/src/core/empty.c.o"
  "CMakeFiles/lm_model.dir/src/core/empty.c.o.d"
  "liblm_model.a"
  "liblm_model.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/lm_model.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
