file(REMOVE_RECURSE
  "../bin/delayq-bench"
  "../bin/delayq-bench.pdb"
  "CMakeFiles/delayq-bench.dir/delayq_bench.cc.o"
  "CMakeFiles/delayq-bench.dir/delayq_bench.cc.o.d"
  "CMakeFiles/delayq-bench.dir/engine_bench.cc.o"
  "CMakeFiles/delayq-bench.dir/engine_bench.cc.o.d"
)

# Per-language clean rules from dependency scanning.
foreach(lang CXX)
  include(CMakeFiles/delayq-bench.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
