#!/usr/bin/env bash
# run.sh BUILD MODEL PROMPT N - the main job behind `make run`: generate text.
# Without MODEL it uses the small real model in ../shared when it is there.
set -euo pipefail
build=$1 model=$2 prompt=$3 n=$4
if [ -z "$model" ]; then
  default="$(dirname "$0")/../../shared/models/stories260K.gguf"
  if [ -f "$default" ]; then
    model=$default
    echo "make run: no MODEL given, using $model (a 260K-parameter story model)." >&2
    echo "          Run your own with: make run MODEL=path/to/model.gguf PROMPT='...' N=128" >&2
  else
    echo "make run needs a GGUF model: make run MODEL=path/to/model.gguf [PROMPT='text'] [N=128]" >&2
    echo "(lamina runs llama-architecture GGUF files, e.g. TinyLlama or Llama 2 in F32/F16/Q4_0/Q8_0/K-quants.)" >&2
    exit 2
  fi
fi
exec "$build/tools/lamina" run -m "$model" -p "$prompt" -n "$n"
