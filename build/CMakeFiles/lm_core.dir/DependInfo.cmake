
# Consider dependencies only in project.
set(CMAKE_DEPENDS_IN_PROJECT_ONLY OFF)

# The set of languages for which implicit dependencies are needed:
set(CMAKE_DEPENDS_LANGUAGES
  )

# The set of dependency files which are needed:
set(CMAKE_DEPENDS_DEPENDENCY_FILES
  "/work/main/src/core/empty.c" "CMakeFiles/lm_core.dir/src/core/empty.c.o" "gcc" "CMakeFiles/lm_core.dir/src/core/empty.c.o.d"
  "/work/main/src/core/log.c" "CMakeFiles/lm_core.dir/src/core/log.c.o" "gcc" "CMakeFiles/lm_core.dir/src/core/log.c.o.d"
  "/work/main/src/core/ops.c" "CMakeFiles/lm_core.dir/src/core/ops.c.o" "gcc" "CMakeFiles/lm_core.dir/src/core/ops.c.o.d"
  "/work/main/src/core/status.c" "CMakeFiles/lm_core.dir/src/core/status.c.o" "gcc" "CMakeFiles/lm_core.dir/src/core/status.c.o.d"
  "/work/main/src/core/tensor.c" "CMakeFiles/lm_core.dir/src/core/tensor.c.o" "gcc" "CMakeFiles/lm_core.dir/src/core/tensor.c.o.d"
  "/work/main/src/core/type.c" "CMakeFiles/lm_core.dir/src/core/type.c.o" "gcc" "CMakeFiles/lm_core.dir/src/core/type.c.o.d"
  )

# Targets to which this target links.
set(CMAKE_TARGET_LINKED_INFO_FILES
  )

# Fortran module output directory.
set(CMAKE_Fortran_TARGET_MODULE_DIR "")
