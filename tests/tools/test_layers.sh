#!/usr/bin/env bash
# test_layers.sh LAMINA SHARED - the folders of src/ are the layers of
# docs/architecture.md: a file includes headers of its own folder and of the
# layers below it, never of a layer above or beside it. The table below is
# the documented picture (each layer with the layers it may use, directly or
# through another); the test fails on an include that runs up or across,
# on a src/ folder the table does not know, and on a layer the architecture
# document's table does not list. A planted upward include must be reported.
. "$(dirname "$0")/lib.sh"
ROOT=$(cd "$HERE/../.." && pwd)

declare -A below=(
  [core]=""
  [quant]="core"
  [backend]="core"
  [sched]="backend core"
  [ref]="backend quant core"
  [cpu]="backend quant core"
  [cuda]="backend quant core"
  [gguf]="core"
  [vocab]="gguf core"
  [sampling]="core"
  [model]="sched backend gguf vocab sampling quant core"
  [api]="model sched cpu ref cuda backend gguf vocab sampling quant core"
  [chat]="core"
  [common]="api model sched cpu ref cuda backend gguf vocab sampling quant core"
  [train]="api model sched cpu ref cuda backend gguf vocab sampling quant core"
  [server]="common chat api model sched cpu ref cuda backend gguf vocab sampling quant core"
)

# violations in a tree: "file: includes layer/header" lines
scan() {
  local root=$1
  for dir in "$root"/src/*/; do
    local layer
    layer=$(basename "$dir")
    if [ -z "${below[$layer]+set}" ]; then
      echo "src/$layer/: a folder that is no layer of the table"
      continue
    fi
    grep -rHoE '^#include "[a-z_]+/[^"]+"' "$dir" --include='*.c' --include='*.h' --include='*.cu' --include='*.cuh' |
      while IFS=: read -r file inc; do
        local to=${inc#\#include \"}
        to=${to%%/*}
        [ "$to" = "$layer" ] && continue
        case " ${below[$layer]} " in *" $to "*) continue ;; esac
        echo "${file#"$root"/}: includes ${inc#\#include } (layer $layer may use: ${below[$layer]:-nothing})"
      done
  done
}

out=$(scan "$ROOT")
[ -z "$out" ] && ok || bad "includes against the layers:
$out"

# every layer of the table is a row of docs/architecture.md's layer table
for layer in "${!below[@]}"; do
  grep -qE "^\| ([a-z +]* )?$layer( \+ [a-z]+)? \|" "$ROOT/docs/architecture.md" && ok ||
    bad "layer $layer is not a row of docs/architecture.md's layer table"
done

# a planted include of a higher layer is reported
mkdir -p "$tmp/t/src"
cp -r "$ROOT/src/core" "$tmp/t/src/core"
printf '#include "model/model.h"\n' >"$tmp/t/src/core/probe.c"
scan "$tmp/t" | grep -q 'core/probe.c: includes "model/model.h"' && ok || bad "a planted upward include was not reported"
finish
