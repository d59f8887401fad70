file(REMOVE_RECURSE
  "CMakeFiles/lm_backend.dir/src/backend/backend.c.o"
  "CMakeFiles/lm_backend.dir/src/backend/backend.c.o.d"
  "CMakeFiles/lm_backend.dir/src/backend/buffer.c.o"
  "CMakeFiles/lm_backend.dir/src/backend/buffer.c.o.d"
  "liblm_backend.a"
  "liblm_backend.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/lm_backend.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
