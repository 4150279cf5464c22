# CMake generated Testfile for 
# Source directory: /work/main/tests
# Build directory: /work/main/build-model/tests
# 
# This file includes the relevant testing commands required for 
# testing this directory and lists subdirectories to be tested as well.
include("/work/main/build-model/tests/common_test[1]_include.cmake")
include("/work/main/build-model/tests/engine_test[1]_include.cmake")
include("/work/main/build-model/tests/model_test[1]_include.cmake")
include("/work/main/build-model/tests/conformance_test[1]_include.cmake")
