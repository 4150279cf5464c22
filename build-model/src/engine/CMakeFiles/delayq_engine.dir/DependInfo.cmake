
# Consider dependencies only in project.
set(CMAKE_DEPENDS_IN_PROJECT_ONLY OFF)

# The set of languages for which implicit dependencies are needed:
set(CMAKE_DEPENDS_LANGUAGES
  )

# The set of dependency files which are needed:
set(CMAKE_DEPENDS_DEPENDENCY_FILES
  "/work/main/src/engine/engine.cc" "src/engine/CMakeFiles/delayq_engine.dir/engine.cc.o" "gcc" "src/engine/CMakeFiles/delayq_engine.dir/engine.cc.o.d"
  "/work/main/src/engine/job_arena.cc" "src/engine/CMakeFiles/delayq_engine.dir/job_arena.cc.o" "gcc" "src/engine/CMakeFiles/delayq_engine.dir/job_arena.cc.o.d"
  )

# Targets to which this target links.
set(CMAKE_TARGET_LINKED_INFO_FILES
  "/work/main/build-model/src/common/CMakeFiles/delayq_common.dir/DependInfo.cmake"
  )

# Fortran module output directory.
set(CMAKE_Fortran_TARGET_MODULE_DIR "")
