file(REMOVE_RECURSE
  "CMakeFiles/delayq_queue.dir/local_queue.cc.o"
  "CMakeFiles/delayq_queue.dir/local_queue.cc.o.d"
  "CMakeFiles/delayq_queue.dir/queue.cc.o"
  "CMakeFiles/delayq_queue.dir/queue.cc.o.d"
  "libdelayq_queue.a"
  "libdelayq_queue.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang CXX)
  include(CMakeFiles/delayq_queue.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
