file(REMOVE_RECURSE
  "../bin/model_test"
  "../bin/model_test.pdb"
  "CMakeFiles/model_test.dir/model/model_test.cc.o"
  "CMakeFiles/model_test.dir/model/model_test.cc.o.d"
  "model_test[1]_tests.cmake"
)

# Per-language clean rules from dependency scanning.
foreach(lang CXX)
  include(CMakeFiles/model_test.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
