
# Consider dependencies only in project.
set(CMAKE_DEPENDS_IN_PROJECT_ONLY OFF)

# The set of languages for which implicit dependencies are needed:
set(CMAKE_DEPENDS_LANGUAGES
  )

# The set of dependency files which are needed:
set(CMAKE_DEPENDS_DEPENDENCY_FILES
  "/work/main/tests/conformance/memory_queue_test.cc" "tests/CMakeFiles/conformance_test.dir/conformance/memory_queue_test.cc.o" "gcc" "tests/CMakeFiles/conformance_test.dir/conformance/memory_queue_test.cc.o.d"
  "/work/main/tests/conformance/queue_conformance.cc" "tests/CMakeFiles/conformance_test.dir/conformance/queue_conformance.cc.o" "gcc" "tests/CMakeFiles/conformance_test.dir/conformance/queue_conformance.cc.o.d"
  )

# Targets to which this target links.
set(CMAKE_TARGET_LINKED_INFO_FILES
  "/work/main/build-model/src/queue/CMakeFiles/delayq_queue.dir/DependInfo.cmake"
  "/work/main/build-model/src/engine/CMakeFiles/delayq_engine.dir/DependInfo.cmake"
  "/work/main/build-model/src/common/CMakeFiles/delayq_common.dir/DependInfo.cmake"
  )

# Fortran module output directory.
set(CMAKE_Fortran_TARGET_MODULE_DIR "")
