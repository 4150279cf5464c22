file(REMOVE_RECURSE
  "libdelayq_common.a"
)
