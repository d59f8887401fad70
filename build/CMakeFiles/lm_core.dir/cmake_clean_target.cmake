file(REMOVE_RECURSE
  "liblm_core.a"
)
