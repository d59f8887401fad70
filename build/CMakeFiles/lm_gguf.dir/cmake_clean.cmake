file(REMOVE_RECURSE
  "CMakeFiles/lm_gguf.dir/src/core/empty.c.o"
  "CMakeFiles/lm_gguf.dir/src/core/empty.c.o.d"
  "liblm_gguf.a"
  "liblm_gguf.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/lm_gguf.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
