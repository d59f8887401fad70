file(REMOVE_RECURSE
  "liblm_vocab.a"
)
