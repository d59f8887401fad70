file(REMOVE_RECURSE
  "liblm_gguf.a"
)
