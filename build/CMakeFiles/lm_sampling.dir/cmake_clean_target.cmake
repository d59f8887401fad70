file(REMOVE_RECURSE
  "liblm_sampling.a"
)
