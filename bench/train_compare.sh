#!/bin/bash
# train_compare.sh - training speed of `lamina train` against the same model
# and batch in PyTorch (bench/train_torch.py), alternating the two engines
# over several rounds and comparing best against best (docs/training.md).
#
#   bench/train_compare.sh LAMINA TEXT [rounds] [-- shape options]
#
# The shape options are lamina train's (--vocab --dim --layers --heads
# --kv-heads --ff --ctx --batch -t); the defaults below are the default
# model's shape. PyTorch is Debian's python3-torch, run by /usr/bin/python3.
set -eu
LAMINA=$1
TEXT=$2
ROUNDS=${3:-3}
shift $(( $# >= 3 ? 3 : 2 ))
[ "${1:-}" = "--" ] && shift
SHAPE=(--vocab 1024 --dim 128 --layers 4 --heads 4 --ctx 128 --batch 16 -t 2)
[ $# -gt 0 ] && SHAPE=("$@")
STEPS=30
PY=${PYTHON:-/usr/bin/python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# lamina's option names are the script's, but for -t
torch_args=()
for ((i = 0; i < ${#SHAPE[@]}; i += 2)); do
  k=${SHAPE[i]}; v=${SHAPE[i+1]}
  [ "$k" = "-t" ] && k=--threads
  torch_args+=("$k" "$v")
done

best_l=0; best_t=0
for r in $(seq "$ROUNDS"); do
  "$LAMINA" train --train "$TEXT" "${SHAPE[@]}" --steps $STEPS --warmup 3 --log-every $STEPS \
    --save-every 0 -o "$tmp/m.gguf" 2> "$tmp/l.err" || { cat "$tmp/l.err" >&2; exit 1; }
  l=$(grep -o '[0-9]* tok/s' "$tmp/l.err" | tail -1 | cut -d' ' -f1)
  t=$("$PY" "$(dirname "$0")/train_torch.py" "${torch_args[@]}" --steps $STEPS | grep -o '[0-9]* tokens/s' | cut -d' ' -f1)
  echo "round $r: lamina $l tok/s, torch $t tok/s"
  [ "$l" -gt "$best_l" ] && best_l=$l
  [ "$t" -gt "$best_t" ] && best_t=$t
done
grep -m1 "^model:" "$tmp/l.err"
echo "best: lamina $best_l tok/s, torch $best_t tok/s, ratio $(awk -v a="$best_l" -v b="$best_t" 'BEGIN { printf "%.2f", a / b }')x"
