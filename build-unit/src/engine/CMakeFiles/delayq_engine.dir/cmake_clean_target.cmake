file(REMOVE_RECURSE
  "libdelayq_engine.a"
)
