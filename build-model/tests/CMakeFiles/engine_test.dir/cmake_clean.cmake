file(REMOVE_RECURSE
  "../bin/engine_test"
  "../bin/engine_test.pdb"
  "CMakeFiles/engine_test.dir/engine/engine_test.cc.o"
  "CMakeFiles/engine_test.dir/engine/engine_test.cc.o.d"
  "CMakeFiles/engine_test.dir/engine/heap_test.cc.o"
  "CMakeFiles/engine_test.dir/engine/heap_test.cc.o.d"
  "CMakeFiles/engine_test.dir/engine/job_arena_test.cc.o"
  "CMakeFiles/engine_test.dir/engine/job_arena_test.cc.o.d"
  "engine_test[1]_tests.cmake"
)

# Per-language clean rules from dependency scanning.
foreach(lang CXX)
  include(CMakeFiles/engine_test.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
