file(REMOVE_RECURSE
  "liblm_model.a"
)
