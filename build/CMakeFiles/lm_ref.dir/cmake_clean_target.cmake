file(REMOVE_RECURSE
  "liblm_ref.a"
)
