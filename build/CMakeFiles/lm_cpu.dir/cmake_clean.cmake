file(REMOVE_RECURSE
  "CMakeFiles/lm_cpu.dir/src/core/empty.c.o"
  "CMakeFiles/lm_cpu.dir/src/core/empty.c.o.d"
  "liblm_cpu.a"
  "liblm_cpu.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/lm_cpu.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
