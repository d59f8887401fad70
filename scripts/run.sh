#!/usr/bin/env bash
# run.sh BUILD MODEL PROMPT N - the main job behind `make run`: generate text.
# Without MODEL it uses models/default.gguf, the model lamina trained itself.
set -euo pipefail
build=$1 model=$2 prompt=$3 n=$4
if [ -z "$model" ]; then
  model="$(dirname "$0")/../models/default.gguf"
  echo "make run: no MODEL given, using $model (a 2.6M-parameter story model lamina trained itself;" >&2
  echo "          README, \"The default model\"). Run your own with: make run MODEL=path/to/model.gguf PROMPT='...' N=128" >&2
fi
if [ ! -f "$model" ]; then
  echo "make run: no model file $model" >&2
  echo "make run needs a GGUF model: make run MODEL=path/to/model.gguf [PROMPT='text'] [N=128]" >&2
  exit 2
fi
exec "$build/tools/lamina" run -m "$model" -p "$prompt" -n "$n"
