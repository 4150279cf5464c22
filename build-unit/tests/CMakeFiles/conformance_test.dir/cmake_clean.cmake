file(REMOVE_RECURSE
  "../bin/conformance_test"
  "../bin/conformance_test.pdb"
  "CMakeFiles/conformance_test.dir/conformance/memory_queue_test.cc.o"
  "CMakeFiles/conformance_test.dir/conformance/memory_queue_test.cc.o.d"
  "CMakeFiles/conformance_test.dir/conformance/queue_conformance.cc.o"
  "CMakeFiles/conformance_test.dir/conformance/queue_conformance.cc.o.d"
  "conformance_test[1]_tests.cmake"
)

# Per-language clean rules from dependency scanning.
foreach(lang CXX)
  include(CMakeFiles/conformance_test.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
