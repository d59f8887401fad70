file(REMOVE_RECURSE
  "liblm_api.a"
)
