file(REMOVE_RECURSE
  "CMakeFiles/lm_quant.dir/src/core/empty.c.o"
  "CMakeFiles/lm_quant.dir/src/core/empty.c.o.d"
  "liblm_quant.a"
  "liblm_quant.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/lm_quant.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
