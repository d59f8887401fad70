file(REMOVE_RECURSE
  "CMakeFiles/lm_vocab.dir/src/core/empty.c.o"
  "CMakeFiles/lm_vocab.dir/src/core/empty.c.o.d"
  "liblm_vocab.a"
  "liblm_vocab.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/lm_vocab.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
