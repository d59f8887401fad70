file(REMOVE_RECURSE
  "liblm_backend.a"
)
