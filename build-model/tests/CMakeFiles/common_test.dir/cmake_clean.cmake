file(REMOVE_RECURSE
  "../bin/common_test"
  "../bin/common_test.pdb"
  "CMakeFiles/common_test.dir/common/clock_test.cc.o"
  "CMakeFiles/common_test.dir/common/clock_test.cc.o.d"
  "CMakeFiles/common_test.dir/common/job_test.cc.o"
  "CMakeFiles/common_test.dir/common/job_test.cc.o.d"
  "CMakeFiles/common_test.dir/common/status_test.cc.o"
  "CMakeFiles/common_test.dir/common/status_test.cc.o.d"
  "common_test[1]_tests.cmake"
)

# Per-language clean rules from dependency scanning.
foreach(lang CXX)
  include(CMakeFiles/common_test.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
