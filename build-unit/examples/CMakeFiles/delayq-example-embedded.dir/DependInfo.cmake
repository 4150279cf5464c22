
# Consider dependencies only in project.
set(CMAKE_DEPENDS_IN_PROJECT_ONLY OFF)

# The set of languages for which implicit dependencies are needed:
set(CMAKE_DEPENDS_LANGUAGES
  )

# The set of dependency files which are needed:
set(CMAKE_DEPENDS_DEPENDENCY_FILES
  "/work/main/examples/embedded.cc" "examples/CMakeFiles/delayq-example-embedded.dir/embedded.cc.o" "gcc" "examples/CMakeFiles/delayq-example-embedded.dir/embedded.cc.o.d"
  )

# Targets to which this target links.
set(CMAKE_TARGET_LINKED_INFO_FILES
  "/work/main/build-unit/src/queue/CMakeFiles/delayq_queue.dir/DependInfo.cmake"
  "/work/main/build-unit/src/engine/CMakeFiles/delayq_engine.dir/DependInfo.cmake"
  "/work/main/build-unit/src/common/CMakeFiles/delayq_common.dir/DependInfo.cmake"
  )

# Fortran module output directory.
set(CMAKE_Fortran_TARGET_MODULE_DIR "")
