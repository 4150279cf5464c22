file(REMOVE_RECURSE
  "../bin/delayq-example-embedded"
  "../bin/delayq-example-embedded.pdb"
  "CMakeFiles/delayq-example-embedded.dir/embedded.cc.o"
  "CMakeFiles/delayq-example-embedded.dir/embedded.cc.o.d"
)

# Per-language clean rules from dependency scanning.
foreach(lang CXX)
  include(CMakeFiles/delayq-example-embedded.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
