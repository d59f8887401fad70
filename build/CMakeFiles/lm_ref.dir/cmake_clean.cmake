file(REMOVE_RECURSE
  "CMakeFiles/lm_ref.dir/src/core/empty.c.o"
  "CMakeFiles/lm_ref.dir/src/core/empty.c.o.d"
  "liblm_ref.a"
  "liblm_ref.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/lm_ref.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
