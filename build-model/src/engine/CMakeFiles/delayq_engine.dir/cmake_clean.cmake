file(REMOVE_RECURSE
  "CMakeFiles/delayq_engine.dir/engine.cc.o"
  "CMakeFiles/delayq_engine.dir/engine.cc.o.d"
  "CMakeFiles/delayq_engine.dir/job_arena.cc.o"
  "CMakeFiles/delayq_engine.dir/job_arena.cc.o.d"
  "libdelayq_engine.a"
  "libdelayq_engine.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang CXX)
  include(CMakeFiles/delayq_engine.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
