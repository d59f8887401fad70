file(REMOVE_RECURSE
  "liblm_quant.a"
)
