file(REMOVE_RECURSE
  "CMakeFiles/delayq_common.dir/clock.cc.o"
  "CMakeFiles/delayq_common.dir/clock.cc.o.d"
  "CMakeFiles/delayq_common.dir/job.cc.o"
  "CMakeFiles/delayq_common.dir/job.cc.o.d"
  "CMakeFiles/delayq_common.dir/status.cc.o"
  "CMakeFiles/delayq_common.dir/status.cc.o.d"
  "libdelayq_common.a"
  "libdelayq_common.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang CXX)
  include(CMakeFiles/delayq_common.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
