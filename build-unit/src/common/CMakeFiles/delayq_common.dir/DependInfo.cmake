
# Consider dependencies only in project.
set(CMAKE_DEPENDS_IN_PROJECT_ONLY OFF)

# The set of languages for which implicit dependencies are needed:
set(CMAKE_DEPENDS_LANGUAGES
  )

# The set of dependency files which are needed:
set(CMAKE_DEPENDS_DEPENDENCY_FILES
  "/work/main/src/common/clock.cc" "src/common/CMakeFiles/delayq_common.dir/clock.cc.o" "gcc" "src/common/CMakeFiles/delayq_common.dir/clock.cc.o.d"
  "/work/main/src/common/job.cc" "src/common/CMakeFiles/delayq_common.dir/job.cc.o" "gcc" "src/common/CMakeFiles/delayq_common.dir/job.cc.o.d"
  "/work/main/src/common/status.cc" "src/common/CMakeFiles/delayq_common.dir/status.cc.o" "gcc" "src/common/CMakeFiles/delayq_common.dir/status.cc.o.d"
  )

# Targets to which this target links.
set(CMAKE_TARGET_LINKED_INFO_FILES
  )

# Fortran module output directory.
set(CMAKE_Fortran_TARGET_MODULE_DIR "")
