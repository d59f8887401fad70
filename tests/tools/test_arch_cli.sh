#!/usr/bin/env bash
# test_arch_cli.sh LAMINA SHARED - the command line on every architecture:
#  - `lamina inspect` on each fixture of shared/fixtures/arch shows its
#    architecture and the model description line;
#  - `lamina run -n 8` generates from each (greedy, twice: the same text);
#  - a model of an unknown architecture is refused with
#    "unknown model architecture 'NAME'" and a non-zero exit, no crash.
. "$(dirname "$0")/lib.sh"

n=0
for f in "$SHARED"/fixtures/arch/*.gguf; do
  name=$(basename "$f" .gguf)
  arch=$("$LAMINA" inspect "$f" 2>"$tmp/e.txt" | awk '$2 == "general.architecture" { print $NF }')
  [ -n "$arch" ] && ok || bad "$name: inspect shows no architecture: $(tail -2 "$tmp/e.txt")"
  "$LAMINA" run -m "$f" -n 8 -p "Once upon a time" --temp 0 -t 2 >"$tmp/a.txt" 2>"$tmp/e.txt"
  rc=$?
  [ $rc -eq 0 ] && ok || bad "$name ($arch): run exited $rc: $(tail -2 "$tmp/e.txt")"
  grep -q "generation: 8 tokens" "$tmp/e.txt" && ok || bad "$name: no 8 generated tokens"
  "$LAMINA" run -m "$f" -n 8 -p "Once upon a time" --temp 0 -t 1 >"$tmp/b.txt" 2>/dev/null
  cmp -s "$tmp/a.txt" "$tmp/b.txt" && ok || bad "$name: greedy text differs between runs"
  printf '%-14s %-10s ok\n' "$name" "$arch"
  n=$((n + 1))
done
[ $n -ge 21 ] && ok || bad "only $n fixtures"

# an unknown architecture: stories260K with general.architecture "llama" -> "llamx"
python_free_patch() { # in out: patch the first value after the key, byte-exact
  local off
  off=$(grep -abo "general.architecture" "$1" | head -1 | cut -d: -f1)
  cp "$1" "$2"
  printf 'x' | dd of="$2" bs=1 seek=$((off + 20 + 4 + 8 + 4)) conv=notrunc status=none
}
python_free_patch "$SHARED/models/stories260K.gguf" "$tmp/unknown.gguf"
"$LAMINA" run -m "$tmp/unknown.gguf" -n 4 >/dev/null 2>"$tmp/e.txt"
rc=$?
[ $rc -ne 0 ] && [ $rc -lt 128 ] && grep -q "unknown model architecture 'llamx'" "$tmp/e.txt" && ok ||
  bad "unknown architecture: exit $rc: $(tail -2 "$tmp/e.txt")"

finish
