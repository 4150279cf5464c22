file(REMOVE_RECURSE
  "libdelayq_queue.a"
)
