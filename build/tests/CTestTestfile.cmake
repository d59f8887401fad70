# CMake generated Testfile for 
# Source directory: /work/main/tests
# Build directory: /work/main/build/tests
# 
# This file includes the relevant testing commands required for 
# testing this directory and lists subdirectories to be tested as well.
add_test(core/test_core "/work/main/build/tests/test_core")
set_tests_properties(core/test_core PROPERTIES  LABELS "core" TIMEOUT "600" WORKING_DIRECTORY "/work/main/build" _BACKTRACE_TRIPLES "/work/main/tests/CMakeLists.txt;35;add_test;/work/main/tests/CMakeLists.txt;0;")
