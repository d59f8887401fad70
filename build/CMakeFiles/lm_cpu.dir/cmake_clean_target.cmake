file(REMOVE_RECURSE
  "liblm_cpu.a"
)
